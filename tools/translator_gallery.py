"""Write the translator page's gallery: chapter 9's trained model on the page's example sentences.

    python tools/translator_gallery.py            # the chapter 9 run (runs/multi30k or $TMLIB_RUN_DIR)

The translator page runs in a browser; a reader offline, in the PDF edition, or on a build that ships the smoke
model cannot run it. This writes what the trained model does with the page's examples: the block between the
``gallery`` markers of ``book/translator.md`` (a table of the greedy translations, the run's steps and kept step)
and ``book/figures/translator_cross_attention.png`` (the cross-attention of the last decoder layer for the first
example). Greedy decoding, as in the browser (source length + 50 tokens at most). Run it again after chapter 9's
run changes; ``tests/test_pages.py`` checks that the block names the run chapter 9 shows.

Exit status: 0 written, 2 no trained run.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "book" / "translator.md"
FIGURE = ROOT / "book" / "figures" / "translator_cross_attention.png"
START, END = "<!-- gallery: start -->", "<!-- gallery: end -->"

#: (German, what it shows). The first is drawn in the figure.
EXAMPLES = [
    ("Ein Mann mit einem roten Hut spielt Gitarre auf der Straße.", "a caption"),
    ("Zwei Kinder spielen im Schnee mit einem braunen Hund.", "a caption"),
    ("Die Zentralbank hat gestern die Zinsen erhöht.", "not a caption"),
    ("A man is riding a bicycle.", "English"),
    ("Привет мир", "another script"),
]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def main() -> int:
    import matplotlib
    matplotlib.use("Agg")
    import torch

    from tmlib.analysis.capture import translate_and_capture
    from tmlib.course.plotting import attention_heads
    from tmlib.decoding import translate_corpus
    from tmlib.training import default_run, load_trained

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    run_dir = Path(default_run()[0])
    try:
        trained = load_trained(run_dir, device="cpu")
    except FileNotFoundError:
        print(f"no trained run in {run_dir}: train it with `make book` (or python -m tmlib.train)", file=sys.stderr)
        return 2
    model, tok = trained.model, trained.tokenizer
    sources = [s for s, _ in EXAMPLES]
    outputs = translate_corpus(model, tok, sources, beam_size=1, progress=False, warn=False)
    rows = ["| German | what it is | the model's greedy translation |", "|---|---|---|"]
    for (source, kind), out in zip(EXAMPLES, outputs):
        shown = f"*{_cell(out)}*" if out else "(not translated: every subword is `<unk>`)"
        rows.append(f"| {_cell(source)} | {kind} | {shown} |")
    kept = f", the weights of step {trained.best_step:,}" if trained.best_step is not None else ""
    block = "\n".join([
        START,
        f"Chapter 9's model ({trained.step:,} steps{kept}) translates the examples above like this, greedily, as "
        "the box does:",
        "",
        *rows,
        "",
        "```{figure} figures/translator_cross_attention.png",
        ":name: translator-gallery-figure",
        ":width: 100%",
        "",
        "The cross-attention of the last decoder layer, its four heads, for the first example: one row per "
        "output subword, one column per source subword.",
        "```",
        END,
    ])
    page = PAGE.read_text(encoding="utf-8")
    if START not in page or END not in page:
        print(f"{PAGE} has no {START} ... {END} block", file=sys.stderr)
        return 2
    page = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, page, flags=re.S)
    PAGE.write_text(page, encoding="utf-8")

    pair = translate_and_capture(model, tok, sources[0])
    last = pair["capture"].weights["cross"][-1][0]  # (n_heads, tgt_len, src_len)
    fig = attention_heads(last.numpy(), x_labels=pair["src_pieces"], y_labels=pair["produced_pieces"],
                          title="Cross-attention, last decoder layer: rows = output subwords, columns = source "
                                "subwords", annot=False, xlabel="source subword", ylabel="output subword")
    fig.set_size_inches(18, 6.5)
    for ax in fig.axes:
        ax.tick_params(axis="x", rotation=90)
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(EXAMPLES)} examples) and {FIGURE.relative_to(ROOT)}")
    for line in rows[2:]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
