"""Write the translator page's gallery: chapter 9's trained model on the page's example sentences.

    python tools/translator_gallery.py            # the chapter 9 run (runs/multi30k or $TMLIB_RUN_DIR)

The translator page runs in a browser; a reader offline, in the PDF edition, or on a build that ships the smoke
model cannot run it. This writes what the trained model is and does with the page's examples: the block between the
``model`` markers of ``book/translator.md`` (the run's training time, size and BLEU), the block between its
``gallery`` markers (a table of the greedy translations, a comment naming the run's steps and kept step, and the
figure) and ``book/figures/translator_cross_attention.png`` (Figure T.1: the cross-attention of the first and the
last decoder layer, every head, for the first example, in the widget's colours: dark = high, a dot on each row's
largest weight; labels as the tokenizer writes them, with ``▁``; layers and heads counted from 0, as in the widget
and the rest of the course). The paragraph under the figure says which heads' dots only move forward through the
source (:func:`backward_steps`) and counts, per head, the rows whose dot lies on the German word that
:data:`ALIGNMENTS` gives the English word. Greedy decoding, as in the browser (source length + 50 tokens at most); the example whose translation
repeats a word is also decoded by beam search of width 4, for the paragraph under the table (:func:`loop_note`). The
block between the ``predict`` markers is a dropdown with what the model writes for the page's "Predict, then try"
prompts and where the dots of its last decoder layer lie (:func:`predict_answers`).

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

#: The first example's expected greedy translation, word by word, with the German word each English word translates
#: (``None``: no German counterpart; German says "spielt Gitarre", without an article), one list per wording the
#: model has written. Figure T.1's paragraph counts, per head, the rows whose darkest cell is that German word; it
#: leaves the counts out when the model writes another sentence.
ALIGNMENTS = [
    [("A", "Ein"), ("man", "Mann"), ("in", "mit"), ("a", "einem"), ("red", "roten"), ("hat", "Hut"),
     ("plays", "spielt"), ("a", None), ("guitar", "Gitarre"), ("on", "auf"), ("the", "der"), ("street", "Straße"),
     (".", ".")],
    [("A", "Ein"), ("man", "Mann"), ("in", "mit"), ("a", "einem"), ("red", "roten"), ("hat", "Hut"),
     ("is", "spielt"), ("playing", "spielt"), ("a", None), ("guitar", "Gitarre"), ("on", "auf"), ("the", "der"),
     ("street", "Straße"), (".", ".")],
]
ALIGNMENT = ALIGNMENTS[0]

#: The "Predict, then try" prompts of the page: the first example with another colour, a clause with its verb at the
#: end, and a sentence with a word the captions do not have (the sentence, the word).
PROMPT_COLOUR = EXAMPLES[0][0].replace("roten", "blauen")
PROMPT_VERB_LAST = "Ein Mann lacht, weil er auf der Straße Gitarre spielt."
PROMPT_UNKNOWN = ("Die Zentralbank hat gestern die Zinsen erhöht.", "Zentralbank")
PREDICT_START, PREDICT_END = "<!-- predict: start -->", "<!-- predict: end -->"


def aligned_counts(weights, src_words, out_words, alignment=ALIGNMENT):
    """Per head of ``weights`` ``(n_heads, n_out, n_src)`` (rows: ``out_words``, then possibly ``<eos>``; columns:
    ``src_words``), how many of the rows with a German counterpart in ``alignment`` (a list of
    ``(English word, German word or None)``) put their largest weight on that German word, and how many of the
    others put it on the source word right before or after it. Returns ``(hits, neighbours, n_aligned)``
    (two lists with one entry per head, and an int), or ``None`` when ``out_words`` is not the alignment's English
    or a German word of it is not one of ``src_words`` exactly once."""
    import numpy as np

    w = np.asarray(weights)
    if list(out_words[:len(alignment)]) != [e for e, _ in alignment] or len(out_words) > len(alignment) + 1:
        return None
    targets = [(r, g) for r, (_, g) in enumerate(alignment) if g is not None]
    if any(list(src_words).count(g) != 1 for _, g in targets):
        return None
    place = {g: list(src_words).index(g) for _, g in targets}
    hits, near = [], []
    for h in range(w.shape[0]):
        best = w[h].argmax(-1)
        hits.append(sum(int(best[r] == place[g]) for r, g in targets))
        near.append(sum(int(abs(int(best[r]) - place[g]) == 1) for r, g in targets))
    return hits, near, len(targets)


def neighbour_miss(weights, src_words, alignment=ALIGNMENT) -> tuple[int, int] | None:
    """The first row (over heads, then rows) of ``weights`` ``(n_heads, n_out, n_src)`` whose largest weight lies on
    the source word right before or after the German word that ``alignment`` gives it: ``(row, source subword)``,
    or ``None``. Call it only where :func:`aligned_counts` returned counts."""
    import numpy as np

    w = np.asarray(weights)
    for h in range(w.shape[0]):
        for r, (_, g) in enumerate(alignment):
            if g is not None and abs(int(w[h, r].argmax()) - list(src_words).index(g)) == 1:
                return r, int(w[h, r].argmax())
    return None


def longest_run(weights) -> tuple[int, int, int, int]:
    """The longest stretch of consecutive rows of one head that put their largest weight on the same source
    subword, in ``weights`` ``(n_heads, n_out, n_src)`` (the last row, ``<eos>``, left out): ``(head, first row,
    number of rows, source subword)``; the first such stretch on a tie."""
    import numpy as np

    w = np.asarray(weights)
    found = (0, 0, 0, 0)
    for h in range(w.shape[0]):
        best = w[h, :-1].argmax(-1).tolist()
        r = 0
        while r < len(best):
            n = 1
            while r + n < len(best) and best[r + n] == best[r]:
                n += 1
            if n > found[2]:
                found = (h, r, n, best[r])
            r += n
    return found


def repeated_word(text: str) -> str | None:
    """The first word of ``text`` written three or more times in a row (``"a a a"``), or ``None``."""
    words = text.split()
    for i in range(len(words) - 2):
        if words[i] == words[i + 1] == words[i + 2]:
            n = 3
            while i + n < len(words) and words[i + n] == words[i]:
                n += 1
            return " ".join(words[i:i + n])
    return None


def loop_note(kind: str, again: str, beam_out: str) -> str:
    """The paragraph under the gallery's table for the example whose greedy translation repeats a word: ``kind`` is
    the example's "what it is", ``again`` the repeat (:func:`repeated_word`, ``"a a a"``), ``beam_out`` the same
    model's beam-4 translation of that sentence. Neither decoder forbids repeats; the paragraph says so, and whether
    beam search repeats on this sentence too.

    Raises:
        ValueError: ``again`` is not one word written at least three times.
    """
    words = again.split()
    if len(words) < 3 or len(set(words)) != 1:
        raise ValueError(f"not one word written three or more times: {again!r}")
    beam_again = repeated_word(beam_out)
    on_beam = (f"with a repeat of its own (*{beam_again}*)" if beam_again else
               "with no repeat this time, because another sequence scored higher, not because a rule stopped it")
    return (f"On the {kind} example, a source unlike any it was trained on, the model writes *{words[0]}* "
            f"{len(words)} times in a row (*{again}*). Greedy decoding has no rule against repeats, and neither has "
            f"chapter 9's beam search: with width 4 the model writes *{beam_out}*, {on_beam}. A decoder that forbids "
            "writing the same pair of words twice (the `no_repeat_ngram_size` option of Hugging Face's `generate`) "
            "would stop it.")


def word(piece: str) -> str:
    """A subword without the tokenizer's word-start mark (``▁Mann`` -> ``Mann``; ``▁`` alone stays ``▁``)."""
    return piece[1:] if piece.startswith("▁") and len(piece) > 1 else piece


def words_of(pieces) -> list[tuple[str, list[int]]]:
    """The words of a list of subwords, each ``(word, indices of its pieces)``: a word starts at a piece with ``▁``,
    at ``<eos>`` or another special token, and at a piece that is not a letter or digit (``.``, ``,``); other pieces
    continue the word before (``▁p``, ``it``, ``ze`` -> ``("pitze", [0, 1, 2])``)."""
    out: list[tuple[str, list[int]]] = []
    for i, p in enumerate(pieces):
        starts = p.startswith("▁") or p.startswith("<") or not p[:1].isalnum() or not out
        if not starts and out[-1][0][:1].isalnum():
            out[-1] = (out[-1][0] + p, out[-1][1] + [i])
        else:
            out.append((word(p), [i]))
    return out


def backward_steps(weights, n_rows: int | None = None) -> list[list[int]]:
    """Per head of ``weights`` ``(n_heads, n_out, n_src)``, the rows (of the first ``n_rows``, all by default) whose
    largest weight lies on an earlier source subword than the row before's: ``[]`` for a head whose dots only move
    forward through the source (the diagonal of two sentences in the same word order)."""
    import numpy as np

    w = np.asarray(weights)[:, :n_rows]
    best = w.argmax(-1)
    return [[r for r in range(1, best.shape[1]) if best[h, r] < best[h, r - 1]] for h in range(w.shape[0])]


def piece_span(pieces, text: str) -> list[int]:
    """The indices of the subwords of ``pieces`` that spell the word ``text`` (its first piece carries ``▁``).

    Raises:
        ValueError: no word of ``pieces`` is ``text``.
    """
    for w, rows in words_of(pieces):
        if w == text:
            return rows
    raise ValueError(f"{text!r} is not one of the words {[w for w, _ in words_of(pieces)]}")


def _ordinal(n: int) -> str:
    """``1`` -> ``"1st"``, ``2`` -> ``"2nd"``, ``6`` -> ``"6th"``, ``11`` -> ``"11th"``."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _wrap(text: str) -> str:
    # a {ref} role and a **bold** span stay on one line
    text = re.sub(r"\{ref\}`[^`]*`|\*\*[^*]+\*\*", lambda m: m.group(0).replace(" ", "\x00"), text)
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


def _listed(values) -> str:
    values = [str(v) for v in values]
    return f"{', '.join(values[:-1])} and {values[-1]}" if len(values) > 1 else values[0]


def _heads(heads, n_heads: int) -> str:
    """``[0, 1, 2, 3]`` of 4 -> ``"all four heads"``, ``[1, 3]`` -> ``"heads 1 and 3"``, ``[2]`` -> ``"head 2"``."""
    names = {2: "both", 3: "all three", 4: "all four"}
    if len(heads) == n_heads and n_heads in names:
        return f"{names[n_heads]} heads"
    return f"head {heads[0]}" if len(heads) == 1 else f"heads {_listed(heads)}"


def draw(layers, src_pieces, out_pieces, path: Path) -> tuple[str, str]:
    """Draw the first and last layer's heads (``layers``: a list of ``(n_heads, n_out, n_src)`` arrays, one per
    decoder layer) as a grid in the widget's colours, labelled with the subwords as the tokenizer writes them
    (``▁Mann``); return the figure's caption and a paragraph of what it shows."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    shown = [(0, layers[0]), (len(layers) - 1, layers[-1])]  # counted from 0, as in the widget and chapter 11
    n_heads = layers[0].shape[0]
    fig, axes = plt.subplots(len(shown), n_heads, figsize=(4.2 * n_heads + 1.2, 5.6 * len(shown)), squeeze=False)
    for r, (number, w) in enumerate(shown):
        for h in range(n_heads):
            ax = axes[r][h]
            sns.heatmap(w[h], ax=ax, cmap="Blues", vmin=0.0, vmax=1.0, cbar=False, linewidths=0.3,
                        linecolor="#eeeeee", xticklabels=src_pieces, yticklabels=out_pieces if h == 0 else False)
            best = w[h].argmax(-1)  # the darkest cell of each row, marked with a dot
            ax.scatter(best + 0.5, [k + 0.5 for k in range(len(best))], s=14, color="#e6550d", zorder=3)
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

    # The caption says what the figure shows; the paragraph what the dots show, counted from the weights drawn.
    last_number = len(layers) - 1
    caption = (f"The cross-attention of decoder layer 0 (top) and layer {last_number} (bottom), every head, for the "
               "first example: one row per output subword, one column per source subword, labelled as the "
               "tokenizer writes them (`▁` starts a word), darker for a larger weight; a dot marks the darkest cell "
               "of each row.")

    src_words, out_words = [word(p) for p in src_pieces], [word(p) for p in out_pieces]
    n_rows = len(out_pieces) - (out_pieces[-1] == "<eos>")  # the <eos> row is left out of the order
    text = ""
    back_last, back_first = backward_steps(layers[-1], n_rows), backward_steps(layers[0], n_rows)
    forward = [h for h in range(n_heads) if not back_last[h]]
    if forward:
        text += (f"In layer {last_number}, the dots of {_heads(forward, n_heads)} move forward through the German "
                 "row by row, never back: a diagonal, because the English keeps the German word order here.")
        jumping = [h for h in range(n_heads) if back_first[h]]
        if jumping:  # how often each head's dot steps back to an earlier German subword
            times = lambda k: "once" if k == 1 else "twice" if k == 2 else f"{k} times"
            text += (" In layer 0 the dots step back in the German: "
                     + ", ".join(f"head {h} {times(len(back_first[h]))}" for h in jumping) + ".")
    found = None
    for alignment in ALIGNMENTS:
        first = aligned_counts(layers[0], src_words, out_words, alignment)
        last = aligned_counts(layers[-1], src_words, out_words, alignment)
        if first is not None and last is not None:
            found = alignment
            break
    if found is None:
        print("the model's translation of the first example is not one that ALIGNMENTS lists: the paragraph under "
              "Figure T.1 leaves out the counts of aligned rows", file=sys.stderr)
    else:
        hits, near, n = last
        skipped = [r for r, (e, g) in enumerate(found) if g is None]
        text += (f" Of the {n} rows whose word has a German counterpart"
                 + (" (the *a* of *a guitar* has none: German says *spielt Gitarre*)"
                    if [found[r][0] for r in skipped] == ["a"] else "")
                 + f", heads 0 to {n_heads - 1} of layer {last_number} put the dot on it in {_listed(hits)} rows")
        misses = n * n_heads - sum(hits)
        if misses:
            if misses == 1:
                text += "; the other dot " + ("sits" if sum(near) else "does not sit")
            elif sum(near) == misses:
                text += f"; {'both' if misses == 2 else f'all {misses}'} other dots sit"
            else:
                text += f"; {sum(near)} of the {misses} other dots sit"
            text += " on the German word just before or after it"
            example = neighbour_miss(layers[-1], src_words, found)
            if example is not None:
                row, got = example
                pair = sorted([src_words.index(found[row][1]), got])
                text += (f", such as `{src_pieces[got]}` for *{out_words[row]}* "
                         f"(of *{src_words[pair[0]]} {src_words[pair[1]]}*)")
        text += f". In layer 0 the same counts are {_listed(first[0])}."
        if [found[r][0] for r in skipped] == ["a"] and skipped[0] + 1 < len(found):
            r = skipped[0]
            best = [int(layers[-1][h, r].argmax()) for h in range(n_heads)]
            ahead = src_words.index(found[r + 1][1]) if found[r + 1][1] in src_words else None
            reads = [h for h in range(n_heads) if best[h] == ahead]
            if reads:
                text += (f" The row of that *a* reads ahead: in layer {last_number}, {_heads(reads, n_heads)} "
                         f"put{'s' if len(reads) == 1 else ''} its dot on `{src_pieces[ahead]}`, the German of the "
                         f"*{found[r + 1][0]}* it introduces.")
    h, r, n_rows, j = longest_run(layers[0])
    if n_rows >= 3:
        words = [f"*{out_words[k]}*" for k in range(r, r + n_rows)]
        text += (f" In layer 0, head {h} keeps looking at one word: its rows for {_listed(words)} all put their "
                 f"largest weight on `{src_pieces[j]}`.")
    text += (" {ref}`Chapter 11 <nb11-stats>` measures, over many sentences, how much of each head's weight lies "
             "near the diagonal.")
    return caption, text.strip()


def predict_answers(colour, verb_last, unknown, first_out_pieces, word_unknown: str, layer: int) -> str:
    """The dropdown under the page's "Predict, then try" prompts: what the model writes for each prompt and where
    the dots of its last decoder layer lie. ``colour``, ``verb_last`` and ``unknown`` are
    ``(translation, src_pieces, out_pieces, weights)`` of the three prompts (``weights``: the last layer's cross-
    attention ``(n_heads, n_out, n_src)``); ``first_out_pieces`` the output subwords of the first example;
    ``word_unknown`` the word of the third prompt that the captions do not have; ``layer`` the number of the last
    decoder layer, counted from 0.

    Raises:
        ValueError: ``word_unknown`` is not a word of the third prompt's source.
    """
    import difflib

    lines = ["```{admonition} What chapter 9's model does with these prompts", ":class: dropdown"]

    # 1. another colour: which words change, and where the new word's row looks
    text, src, out, w = colour
    n_heads = w.shape[0]
    old_words, new_words = [x for x, _ in words_of(first_out_pieces)], [x for x, _ in words_of(out)]
    changes = [(old_words[i1:i2], new_words[j1:j2]) for op, i1, i2, j1, j2 in
               difflib.SequenceMatcher(a=old_words, b=new_words).get_opcodes() if op != "equal"]
    said = f"**Blue instead of red.** *{text}*"
    if len(changes) == 1 and changes[0][0] and changes[0][1]:
        said += (f" Only *{' '.join(changes[0][0])}* changes, to *{' '.join(changes[0][1])}*.")
    elif changes:
        said += " The words that change: " + ", ".join(
            f"*{' '.join(o) or '(nothing)'}* to *{' '.join(n) or '(nothing)'}*" for o, n in changes) + "."
    else:
        said += " No word changes."
    if "▁blauen" in src and changes:
        col = src.index("▁blauen")
        rows = [i for x, rs in words_of(out) for i in rs if x in changes[0][1]][:1]
        if rows:
            on = [h for h in range(n_heads) if int(w[h, rows[0]].argmax()) == col]
            said += (f" In layer {layer}, the row of `{out[rows[0]]}` puts its largest weight on `▁blauen` in "
                     + (_heads(on, n_heads) if on else "none of the heads") + ".")
    lines += ["", _wrap(said)]

    # 2. the verb at the end: the dot of every row, per head
    text, src, out, w = verb_last
    lines += ["", _wrap(f"**The verb at the end.** *{text}* The darkest cell of each row in layer {layer}:"), "",
              "| output subword | " + " | ".join(f"head {h}" for h in range(n_heads)) + " |",
              "|---|" + "---|" * n_heads]
    for r, piece in enumerate(out):
        lines.append(f"| `{piece}` | " + " | ".join(f"`{src[int(w[h, r].argmax())]}`" for h in range(n_heads)) + " |")
    n_rows = len(out) - (out[-1] == "<eos>")
    back = backward_steps(w, n_rows)
    jumping = [h for h in range(n_heads) if back[h]]
    if jumping:
        h = jumping[0]
        best = w[h].argmax(-1)
        r = max(back[h], key=lambda k: int(best[k - 1]) - int(best[k]))
        said = (f"In {_heads(jumping, n_heads)} the dots go back in the German at least once (in head {h}, the row of "
                f"`{out[r]}` goes back from `{src[int(best[r - 1])]}` to `{src[int(best[r])]}`): they follow the "
                "English order, not the German one.")
    else:
        said = "In every head the dots only move forward through the German: they follow the German order."
    lines += ["", _wrap(said)]

    # 3. an unknown word: how many pieces, and which output words look at them
    text, src, out, w = unknown
    span = piece_span(src, word_unknown)
    pieces = ", ".join(f"`{src[i]}`" for i in span)
    said = (f"**{word_unknown}.** In *{PROMPT_UNKNOWN[0]}* the tokenizer cuts *{word_unknown}* into {len(span)} "
            f"subwords ({pieces}), and the model writes *{text}* In layer {layer}, over its {n_heads} heads, ")
    looking = []
    for x, rows in words_of(out):
        hit = sorted({int(w[h, r].argmax()) for h in range(n_heads) for r in rows} & set(span))
        if hit:
            looking.append((x, hit))
    if looking:
        said += "the dots of " + ", those of ".join(
            f"*{x}*" + (" lie" if k == 0 else "") + f" on {_listed(f'`{src[i]}`' for i in hit)}"
            for k, (x, hit) in enumerate(looking)) + ". "
        full = [x for x, hit in looking if len(hit) == len(span)]
        said += (f"*{full[0]}* looks at all {len(span)} pieces." if full else
                 f"No output word has a dot on all {len(span)} pieces.")
    else:
        said += f"no row puts its dot on one of the {len(span)} pieces."
    lines += ["", _wrap(said), "```"]
    return "\n".join(lines)


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

    loops = []  # greedy decoding's repetition failure, where an example shows it
    for (source, kind), out in zip(EXAMPLES, outputs):
        again = repeated_word(out)
        if again and not loops:
            beam_out = translate_corpus(model, tok, [source], beam_size=4, progress=False, warn=False)[0]
            loops = [_wrap(loop_note(kind, again, beam_out)), ""]
    pair = translate_and_capture(model, tok, sources[0])
    layers = [w[0].numpy() for w in pair["capture"].weights["cross"]]  # each (n_heads, tgt_len, src_len)
    caption, reading = draw(layers, pair["src_pieces"], pair["produced_pieces"], FIGURE)

    def last_layer(sentence):
        got = translate_and_capture(model, tok, sentence)
        return (got["translation"], got["src_pieces"], got["produced_pieces"],
                got["capture"].weights["cross"][-1][0].numpy())

    predict = "\n".join([PREDICT_START, predict_answers(
        last_layer(PROMPT_COLOUR), last_layer(PROMPT_VERB_LAST), last_layer(PROMPT_UNKNOWN[0]),
        pair["produced_pieces"], PROMPT_UNKNOWN[1], len(layers) - 1), PREDICT_END])

    minutes = f"{trained.elapsed_s / 60:.0f} minutes" if trained.elapsed_s else "chapter 9's time budget"
    machine = trained.machine or {}
    where = (f" on a computer with {machine['cpu_count']} CPUs ({machine['cpu_model']}) and no GPU"
             if machine.get("cpu_count") and machine.get("cpu_model") and not machine.get("gpu") else "")
    kept = ""
    if trained.best_step is not None:
        kept = (" and keeps the weights it had at its lowest validation cross-entropy: those of step "
                f"{trained.best_step:,}")
        passes, nll = trained.history.get("val_step") or [], trained.history.get("val_nll") or []
        if trained.best_step in passes and len(nll) == len(passes):
            k = passes.index(trained.best_step)
            later = nll[k + 1:]
            kept += f", the {_ordinal(k + 1)} of the {len(passes)} times it measured it during training"
            if later and all(v > nll[k] for v in later):
                which = "has no dropout" if not model.config.dropout else f"has dropout {model.config.dropout:g}"
                kept += (f". The validation cross-entropy rose in all {len(later)} later measurements: the model, which "
                         f"{which}, had begun to memorise the training captions "
                         "({ref}`chapter 9 <nb09-training>`)")
            elif not later:  # still falling at the end: the kept weights are the last
                kept = (f". Its validation cross-entropy was still falling when the {minutes} ran out ({nll[k]:.3f} "
                        f"nats per token at the last of its {len(passes)} measurements), so the weights it keeps are "
                        f"the last ones, those of step {trained.best_step:,}")
    intro = f"Chapter 9's model trains for {minutes}. This one made {trained.step:,} steps{where}{kept}."
    choice = getattr(trained, "dropout_choice", None)
    if choice:  # what auto_dropout chose from the budget
        intro += (f" It trained with dropout {choice['p']:g}: the trainer chose it because a step timed before training "
                  f"put its budget at about {choice['passes']:.0f} epochs (passes over the training data; "
                  "{ref}`chapter 9 <nb09-dropout>`)")
        if trained.epoch < choice["passes"] - 1:  # the estimate leaves out dropout, validation and later load
            intro += (f"; it completed {trained.epoch}, since the estimate leaves out dropout's slower steps, the "
                      "validation passes and any later load on the machine")
        intro += "."
    scores = chapter_9_scores(trained.step, trained.best_step)
    if scores is None:
        print(f"{CHAPTER_9.relative_to(ROOT)} shows no scores of this run: the gallery leaves them out "
              "(re-execute chapter 9, then run this again)", file=sys.stderr)
        score = ""
    else:
        score = (f" With greedy decoding, as in the box, it scores **{scores['greedy']:.1f} BLEU** on the 1,000 "
                 f"sentences of the test 2016 split ({scores['beam 4']:.1f} with beam search of width 4; see "
                 "{ref}`nb09-scores` in chapter 9). These are cased BLEU scores of German-to-English translations of "
                 "short, simple captions: they cannot be compared with the paper's scores on WMT news text.")
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
        _wrap(f"{intro} {size}{score}"),
        MODEL_END,
    ])
    block = "\n".join([
        START,
        f"<!-- written by tools/translator_gallery.py from chapter 9's run {run} -->",
        "For a reader who cannot run the box, chapter 9's model translates the examples above like this:",
        "",
        *rows,
        "",
        *loops,
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
    for start, end in ((START, END), (MODEL_START, MODEL_END), (PREDICT_START, PREDICT_END)):
        if start not in page or end not in page:
            print(f"{PAGE} has no {start} ... {end} block", file=sys.stderr)
            return 2
    page = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, page, flags=re.S)
    page = re.sub(re.escape(MODEL_START) + ".*?" + re.escape(MODEL_END), lambda _: facts, page, flags=re.S)
    page = re.sub(re.escape(PREDICT_START) + ".*?" + re.escape(PREDICT_END), lambda _: predict, page, flags=re.S)
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(EXAMPLES)} examples) and {FIGURE.relative_to(ROOT)}")
    print(facts)
    print(block)
    print(predict)
    return 0


if __name__ == "__main__":
    sys.exit(main())
