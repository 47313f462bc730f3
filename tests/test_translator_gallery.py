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
