"""The counts that tools/translator_gallery.py writes under Figure T.1 of the translator page."""
import importlib.util
from pathlib import Path

import numpy as np

_SPEC = importlib.util.spec_from_file_location(
    "translator_gallery", Path(__file__).resolve().parent.parent / "tools" / "translator_gallery.py")
tg = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tg)

SRC = ["Ein", "Mann", "spielt", "."]
OUT = ["A", "man", "is", "playing", "."]
ALIGN = [("A", "Ein"), ("man", "Mann"), ("is", "spielt"), ("playing", "spielt"), (".", None)]


def _one_hot(rows, n_src=4):
    w = np.full((len(rows), n_src), 0.01)
    w[np.arange(len(rows)), rows] = 1.0
    return w


def test_aligned_counts_counts_hits_and_neighbours_per_head():
    # head 0: every aligned row on its word; head 1: "A" one word off (Mann), "is" two words off (Ein)
    weights = np.stack([_one_hot([0, 1, 2, 2, 3, 3]), _one_hot([1, 1, 0, 2, 0, 0])])
    assert tg.aligned_counts(weights, SRC, OUT + ["<eos>"], ALIGN) == ([4, 2], [0, 1], 4)
    assert tg.neighbour_miss(weights, SRC, ALIGN) == (0, 1)


def test_aligned_counts_refuses_another_translation_or_an_ambiguous_source():
    weights = np.stack([_one_hot([0, 1, 2, 2, 3, 3])])
    assert tg.aligned_counts(weights, SRC, ["A", "man", "plays", "playing", ".", "<eos>"], ALIGN) is None
    assert tg.aligned_counts(weights, ["Ein", "Mann", "spielt", "spielt"], OUT + ["<eos>"], ALIGN) is None


def test_longest_run_finds_a_head_that_keeps_one_word_and_ignores_eos():
    weights = np.stack([_one_hot([0, 1, 2, 3, 3, 3]), _one_hot([2, 2, 2, 0, 1, 1])])
    assert tg.longest_run(weights) == (1, 0, 3, 2)  # head 0's run of 3 ends in the <eos> row, which is left out


def test_repeated_word_needs_three_in_a_row():
    assert tg.repeated_word("A man is wearing a a a tail.") == "a a a"
    assert tg.repeated_word("a a b a a") is None


def test_loop_note_says_both_decoders_allow_repeats_and_what_beam_search_wrote():
    note = tg.loop_note("English", "a a a", "A man is riding a bike.")
    assert "*a* 3 times in a row" in note and "neither has" in note and "*A man is riding a bike.*" in note
    assert "no repeat this time" in note
    note = tg.loop_note("English", "a a a a", "A man a a a bike.")
    assert "4 times" in note and "a repeat of its own (*a a a*)" in note


def test_loop_note_refuses_something_that_is_not_a_repeat():
    import pytest
    for bad in ("a a", "a b a", ""):
        with pytest.raises(ValueError):
            tg.loop_note("English", bad, "x")


def test_ordinal():
    assert [tg._ordinal(n) for n in (1, 2, 3, 4, 6, 11, 12, 13, 21, 22)] == [
        "1st", "2nd", "3rd", "4th", "6th", "11th", "12th", "13th", "21st", "22nd"]


def test_words_of_joins_the_pieces_of_a_word_and_word_strips_the_mark():
    assert tg.word("▁Mann") == "Mann" and tg.word("▁") == "▁" and tg.word("ße") == "ße"
    pieces = ["▁The", "▁p", "it", "ze", "▁bench", ".", "<eos>"]
    assert tg.words_of(pieces) == [("The", [0]), ("pitze", [1, 2, 3]), ("bench", [4]), (".", [5]),
                                   ("<eos>", [6])]
    assert tg.piece_span(["▁Die", "▁Z", "ent", "bank", "▁hat"], "Zentbank") == [1, 2, 3]


def test_piece_span_refuses_a_word_the_sentence_does_not_have():
    import pytest

    with pytest.raises(ValueError, match="not one of the words"):
        tg.piece_span(["▁Die", "▁Z", "ent"], "Zinsen")


def test_backward_steps_finds_the_rows_whose_dot_goes_back():
    weights = np.stack([_one_hot([0, 1, 1, 3, 3]), _one_hot([0, 2, 1, 3, 0])])
    assert tg.backward_steps(weights) == [[], [2, 4]]
    assert tg.backward_steps(weights, n_rows=4) == [[], [2]]  # the last row (<eos>) left out


def test_predict_answers_says_what_changes_and_where_the_dots_go():
    colour = ("A blue hat.", ["▁Ein", "▁blauen", "▁Hut", "."], ["▁A", "▁blue", "▁hat", ".", "<eos>"],
              np.stack([_one_hot([0, 1, 2, 3, 3]), _one_hot([0, 2, 2, 3, 3])]))
    verb = ("He plays guitar.", ["▁Er", "▁Gitarre", "▁spielt", "."], ["▁He", "▁plays", "▁guitar", ".", "<eos>"],
            np.stack([_one_hot([0, 2, 1, 3, 3]), _one_hot([0, 1, 2, 3, 3])]))
    unknown = ("The pitze.", ["▁Die", "▁Z", "ent", "."], ["▁The", "▁p", "itze", ".", "<eos>"],
               np.stack([_one_hot([0, 1, 2, 3, 3]), _one_hot([0, 2, 2, 3, 3])]))
    text = tg.predict_answers(colour, verb, unknown, ["▁A", "▁red", "▁hat", ".", "<eos>"], "Zent", 1)
    assert text.startswith("```{admonition}") and text.endswith("```")
    text = " ".join(text.split())  # the paragraphs are wrapped
    assert "Only *red* changes, to *blue*" in text and "on `▁blauen` in head 0." in text
    assert "In head 0 the dots go back in the German" in text and "from `▁spielt` to `▁Gitarre`" in text
    assert "into 2 subwords (`▁Z`, `ent`)" in text and "*pitze* looks at all 2 pieces" in text
    import pytest

    with pytest.raises(ValueError):
        tg.predict_answers(colour, verb, unknown, ["▁A", "▁red", "▁hat", ".", "<eos>"], "Bank", 1)
