"""Write the translator page's gallery: chapter 9's trained model on the page's example sentences.

    python tools/translator_gallery.py            # the chapter 9 run (runs/multi30k or $TMLIB_RUN_DIR)

The translator page runs in a browser; a reader offline, in the PDF edition, or on a build that ships the smoke
model cannot run it. This writes what the trained model is and does with the page's examples: the block between the
``model`` markers of ``book/translator.md`` (the run's training time, size and BLEU), the block between its
``gallery`` markers (a table of the greedy translations, a comment naming the run's steps and kept step, and the
figure) and ``book/figures/translator_cross_attention.png`` (Figure T.1: the cross-attention of the first and the
last decoder layer, every head, for the first example, in the widget's colours: dark = high; layers and heads
counted from 0, as in the widget and in chapter 11). Greedy decoding, as in the browser (source length + 50 tokens
at most).

The BLEU scores are not recomputed (a beam search over test 2016 takes minutes): they are read from the table that
``notebooks/09_training_translator.ipynb`` prints, and only when that notebook shows the same run (same steps and
kept step); otherwise the block leaves them out and this says so. Run it again after chapter 9's run or notebook
changes; ``tests/test_pages.py`` checks that the block names the run and the scores that chapter 9 shows.

Exit status: 0 written, 2 no trained run.
"""
from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "book" / "translator.md"
FIGURE = ROOT / "book" / "figures" / "translator_cross_attention.png"
CHAPTER_9 = ROOT / "notebooks" / "09_training_translator.ipynb"
START, END = "<!-- gallery: start -->", "<!-- gallery: end -->"
MODEL_START, MODEL_END = "<!-- model: start -->", "<!-- model: end -->"

#: (German, what it shows). The first is drawn in the figure.
EXAMPLES = [
    ("Ein Mann mit einem roten Hut spielt Gitarre auf der Straße.", "a caption"),
    ("Zwei Kinder spielen im Schnee mit einem braunen Hund.", "a caption"),
    ("Die Zentralbank hat gestern die Zinsen erhöht.", "not a caption"),
    ("A man is riding a bicycle.", "English"),
    ("Привет мир", "another script"),
    ("日本語", "another script"),
    ("Ein Hund mit einem 日本 Ball.", "German with unknown characters"),
]

#: An output subword "follows the word order" when the source subword it weights most lies within this many
#: subwords of the diagonal, as chapter 11 defines it (tmlib.analysis.heads): row r of n_out sits at source place
#: (r + 1/2) n_src / n_out - 1/2.
NEAR = 1.0


def _diagonal(n_out: int, n_src: int):
    """Chapter 11's proportional diagonal: the source place of each of ``n_out`` rows, ``(n_out,)``."""
    import numpy as np

    from tmlib.analysis import diagonal_centre

    return diagonal_centre(np.arange(n_out, dtype=np.float64), max(1, n_out), n_src)


def label(piece: str) -> str:
    """A subword as the figure prints it: a word's first piece without the tokenizer's ``▁``, a piece that
    continues a word after ``##`` (``▁Stra``, ``ße`` -> ``Stra``, ``##ße``)."""
    if piece.startswith("▁"):
        return piece[1:] or "▁"
    return piece if piece.startswith("<") or not piece[:1].isalnum() else "##" + piece


def _wrap(text: str) -> str:
    # a {ref} role stays on one line
    text = re.sub(r"\{ref\}`[^`]*`", lambda m: m.group(0).replace(" ", "\x00"), text)
    return textwrap.fill(text, width=115, break_long_words=False, break_on_hyphens=False).replace("\x00", " ")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def chapter_9_scores(step: int, best_step: int | None) -> dict[str, float] | None:
    """Cased BLEU of greedy decoding and beam 4 as chapter 9's stored outputs print them, or ``None`` when the
    notebook shows another run (other steps or kept step) or prints no score table."""
    if not CHAPTER_9.exists():
        return None
    texts = []
    for cell in json.loads(CHAPTER_9.read_text(encoding="utf-8"))["cells"]:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain") or ""
            texts.append(text if isinstance(text, str) else "".join(text))
    shown = "\n".join(texts)
    loaded = re.search(r"loaded from \S+: ([\d,]+) steps", shown)
    kept = re.search(r"the model holds the weights of step (\d[\d,]*\d)", shown)
    if not loaded or not kept or (loaded.group(1), kept.group(1)) != (f"{step:,}", f"{best_step:,}"):
        return None
    table = re.search(r"greedy\s+beam 4\s*\n\s*BLEU \(cased\)\s+([\d.]+)\s+([\d.]+)", shown)
    if not table:
        return None
    return {"greedy": float(table.group(1)), "beam 4": float(table.group(2))}


def near_diagonal(weights) -> list[int]:
    """For each head of ``weights`` ``(n_heads, n_q, n_src)`` (every row, the ``<eos>`` row last): how many of the
    word rows (all but the last) weight most a source subword within ``NEAR`` of chapter 11's diagonal, which places
    the rows among all ``n_q``."""
    import numpy as np

    w = np.asarray(weights)
    _, n_q, n_src = w.shape
    diagonal = _diagonal(n_q, n_src)[:-1]
    return [int((np.abs(w[h, :-1].argmax(-1) - diagonal) <= NEAR).sum()) for h in range(w.shape[0])]


def off_diagonal(weights) -> list[tuple[int, int, int]]:
    """The word rows of ``weights`` ``(n_heads, n_q, n_src)`` (the ``<eos>`` row last, not counted) whose largest
    weight lies more than ``NEAR`` from chapter 11's diagonal, as ``(head, output row, source subword)``."""
    import numpy as np

    w = np.asarray(weights)
    _, n_q, n_src = w.shape
    diagonal = _diagonal(n_q, n_src)[:-1]
    return [(h, r, int(j)) for h in range(w.shape[0]) for r, j in enumerate(w[h, :-1].argmax(-1))
            if abs(j - diagonal[r]) > NEAR]


def draw(layers, src_pieces, out_pieces, path: Path) -> tuple[str, str]:
    """Draw the first and last layer's heads (``layers``: a list of ``(n_heads, n_out, n_src)`` arrays, one per
    decoder layer) as a grid in the widget's colours; return the figure's caption and a paragraph of what it shows."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    src_pieces, out_pieces = [label(p) for p in src_pieces], [label(p) for p in out_pieces]

    shown = [(0, layers[0]), (len(layers) - 1, layers[-1])]  # counted from 0, as in the widget and chapter 11
    n_heads = layers[0].shape[0]
    fig, axes = plt.subplots(len(shown), n_heads, figsize=(4.2 * n_heads + 1.2, 5.6 * len(shown)), squeeze=False)
    for r, (number, w) in enumerate(shown):
        for h in range(n_heads):
            ax = axes[r][h]
            sns.heatmap(w[h], ax=ax, cmap="Blues", vmin=0.0, vmax=1.0, cbar=False, linewidths=0.3,
                        linecolor="#eeeeee", xticklabels=src_pieces, yticklabels=out_pieces if h == 0 else False)
            ax.set_title(f"decoder layer {number}, head {h}")
            ax.tick_params(axis="x", rotation=90)
            ax.tick_params(axis="y", rotation=0)
            ax.set_xlabel("source subword" if r == len(shown) - 1 else "")
            ax.set_ylabel("output subword" if h == 0 else "")
    fig.tight_layout(rect=(0, 0, 0.94, 1))
    bar = fig.add_axes((0.95, 0.25, 0.012, 0.5))
    fig.colorbar(axes[0][0].collections[0], cax=bar, label="weight")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)

    # The caption says what the figure shows, computed from the weights drawn (without the <eos> row).
    n_out = layers[0].shape[1] - 1
    first, last = near_diagonal(layers[0]), near_diagonal(layers[-1])
    last_number = len(layers) - 1
    caption = (f"The cross-attention of decoder layer 0 (top) and layer {last_number} (bottom), every head, for the "
               "first example: one row per output subword, one column per source subword, darker for a larger "
               "weight.")
    if any(p.startswith("##") for p in src_pieces + out_pieces):
        caption += " `##` marks a subword that continues the word before it."
    counts = f"{', '.join(map(str, last[:-1]))} and {last[-1]}" if n_heads > 1 else str(last[0])
    text = (f"In Figure T.1's layer {last_number}, the largest weight of a word row lies within one subword of "
            "{ref}`chapter 11's diagonal <nb11-stats>` (row $i$ of the "
            f"{n_out + 1} rows, `<eos>` included, is centred on source subword $(i + \\tfrac{{1}}{{2}}) \\cdot "
            f"{layers[0].shape[2]}/{n_out + 1} - \\tfrac{{1}}{{2}}$, counting from 0) in "
            f"{counts} of the {n_out} word rows of heads 0 to {n_heads - 1}")
    off = off_diagonal(layers[-1])  # (head, output row, source subword) of the other rows
    if not off:
        text += ": every head of the layer follows the word order."
    elif min(last) >= 0.75 * n_out and len(off) <= 3:
        text += (". These heads follow the word order, with " + ("one exception" if len(off) == 1 else
                                                                f"{len(off)} exceptions") + ": "
                 + "; ".join(f"head {h} reads `{src_pieces[j]}` while writing `{out_pieces[r]}`"
                             for h, r, j in off) + ".")
    else:
        text += "."
    worst = min(range(n_heads), key=lambda h: first[h])
    if first[worst] <= 0.5 * n_out:
        most = layers[0][worst, :-1].argmax(-1).tolist()
        top = max(set(most), key=most.count)
        text += (f" Head {worst} of layer 0 looks elsewhere: {most.count(top)} of its {n_out} word rows put their "
                 f"largest weight on `{src_pieces[top]}`.")
    text += " Chapter 11 measures how closely each head follows the word order over many sentences."
    return caption, text


def main() -> int:
    import matplotlib
    matplotlib.use("Agg")
    import torch

    from tmlib.analysis.capture import translate_and_capture
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
        shown = f"*{_cell(out)}*" if out else "(not translated: every piece but the word-start marks `▁` is `<unk>`)"
        rows.append(f"| {_cell(source)} | {kind} | {shown} |")

    pair = translate_and_capture(model, tok, sources[0])
    layers = [w[0].numpy() for w in pair["capture"].weights["cross"]]  # each (n_heads, tgt_len, src_len)
    caption, reading = draw(layers, pair["src_pieces"], pair["produced_pieces"], FIGURE)

    minutes = f"{trained.elapsed_s / 60:.0f} minutes" if trained.elapsed_s else "chapter 9's time budget"
    minutes += f" ({trained.step:,} steps on the computer that trained this one)"
    last = " (its last)" if trained.best_step == trained.step else ""
    kept = (", and keeps the weights of its validation pass with the lowest cross-entropy: those of step "
            f"{trained.best_step:,}{last}" if trained.best_step is not None else "")
    scores = chapter_9_scores(trained.step, trained.best_step)
    if scores is None:
        print(f"{CHAPTER_9.relative_to(ROOT)} shows no scores of this run: the gallery leaves them out "
              "(re-execute chapter 9, then run this again)", file=sys.stderr)
        score = ""
    else:
        score = (f" With greedy decoding, as in the box, it scores **{scores['greedy']:.1f} BLEU** on the 1,000 "
                 f"sentences of the test 2016 split ({scores['beam 4']:.1f} with beam search of width 4; see "
                 "{ref}`nb09-scores` in chapter 9).")
    run = f"({trained.step:,} steps" + (f", the weights of step {trained.best_step:,})" if trained.best_step
                                         is not None else ")")
    from tmlib.model import count_parameters
    c = model.config
    size = (f"It has {c.n_encoder_layers} encoder and {c.n_decoder_layers} decoder layers of width "
            f"$d_{{\\text{{model}}}}$ = {c.d_model}, {c.n_heads} heads and $d_{{\\text{{ff}}}}$ = {c.d_ff}: "
            f"{count_parameters(model):,} parameters, "
            f"with a vocabulary of {c.vocab_size:,} subwords shared by German and English.")
    facts = "\n".join([
        MODEL_START,
        _wrap(f"Chapter 9's model trains for {minutes}{kept}. {size}{score}"),
        MODEL_END,
    ])
    block = "\n".join([
        START,
        f"<!-- written by tools/translator_gallery.py from chapter 9's run {run} -->",
        "For a reader who cannot run the box, chapter 9's model translates the examples above like this:",
        "",
        *rows,
        "",
        "```{figure} figures/translator_cross_attention.png",
        ":name: translator-gallery-figure",
        ":width: 100%",
        "",
        _wrap("Figure T.1: " + caption),
        "```",
        "",
        _wrap(reading),
        END,
    ])
    page = PAGE.read_text(encoding="utf-8")
    for start, end in ((START, END), (MODEL_START, MODEL_END)):
        if start not in page or end not in page:
            print(f"{PAGE} has no {start} ... {end} block", file=sys.stderr)
            return 2
    page = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, page, flags=re.S)
    page = re.sub(re.escape(MODEL_START) + ".*?" + re.escape(MODEL_END), lambda _: facts, page, flags=re.S)
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(EXAMPLES)} examples) and {FIGURE.relative_to(ROOT)}")
    print(facts)
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
