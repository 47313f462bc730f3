"""Tests of tmlib.metrics: sacreBLEU scores against hand computations, and corpus translation.

BLEU by hand: BLEU = BP · exp(¼ Σ log p_n), BP = exp(1 − r/c) when the hypothesis length c is
shorter than the reference length r, else 1 (Papineni et al. 2002).
"""
import math

import pytest
import torch
from torch import nn

from tmlib.metrics import _length_batches, bleu_scores, translate_corpus


def test_identical_corpus_scores_100():
    refs = ["A man is riding a bike.", "Two dogs play in the snow."]
    s = bleu_scores(refs, refs)
    assert s["bleu"] == pytest.approx(100.0)
    assert s["bleu_lowercase"] == pytest.approx(100.0)
    assert s["chrf"] == pytest.approx(100.0)


def test_brevity_penalty_by_hand():
    # every n-gram of the 6-token hypothesis is in the 7-token reference: all precisions 1, BP = exp(1 - 7/6)
    s = bleu_scores(["the cat sat on the mat"], ["the cat sat on the mat today"])
    assert s["bleu_precisions"] == pytest.approx([100.0] * 4)
    assert s["brevity_penalty"] == pytest.approx(math.exp(1 - 7 / 6))
    assert s["bleu"] == pytest.approx(100 * math.exp(1 - 7 / 6))  # 84.648...
    assert (s["hyp_len"], s["ref_len"]) == (6, 7)


def test_case_only_difference_by_hand():
    # 7 tokens; "The" != "the" removes 1 of 7 unigrams, 1 of 6 bigrams, 1 of 5 trigrams, 1 of 4 4-grams
    hyp, ref = ["The cat sat on the mat ."], ["the cat sat on the mat ."]
    s = bleu_scores(hyp, ref)
    assert s["bleu_precisions"] == pytest.approx([100 * 6 / 7, 100 * 5 / 6, 100 * 4 / 5, 100 * 3 / 4])
    assert s["bleu"] == pytest.approx(100 * (6 / 7 * 5 / 6 * 4 / 5 * 3 / 4) ** 0.25)  # (3/7)^(1/4) = 80.91...
    assert s["bleu_lowercase"] == pytest.approx(100.0)
    assert s["bleu_lowercase"] >= s["bleu"]
    assert s["chrf"] < 100.0


def test_detokenized_input_13a_splits_punctuation():
    # sacreBLEU tokenizes with 13a itself: "mat." and "mat ." are the same tokens
    s = bleu_scores(["the cat sat on the mat."], ["the cat sat on the mat ."])
    assert s["bleu"] == pytest.approx(100.0)


def test_signatures_name_the_settings():
    sig = bleu_scores(["a b c d"], ["a b c d"])["signatures"]
    assert "case:mixed" in sig["bleu"] and "tok:13a" in sig["bleu"] and "nrefs:1" in sig["bleu"]
    assert "case:lc" in sig["bleu_lowercase"]
    assert "nc:6" in sig["chrf"]


def test_bad_inputs():
    with pytest.raises(ValueError, match="same length, got 2 and 1"):
        bleu_scores(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="empty"):
        bleu_scores([], [])
    with pytest.raises(TypeError, match="hypotheses must be a list"):
        bleu_scores("a b", ["a b"])
    with pytest.raises(TypeError, match=r"references\[1\] is int"):
        bleu_scores(["a", "b"], ["a", 3])


def test_length_batches_cover_everything_within_budget():
    lengths = [5, 1, 9, 3, 3, 7, 2, 8]
    batches = _length_batches(lengths, batch_tokens=12)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert max(lengths[i] for i in b) * len(b) <= 12 or len(b) == 1


# ----------------------------------------------------------------------------- translate_corpus with a copy "model"
class CopyCache:
    def __init__(self):
        self.n = 0

    def __len__(self):
        return self.n

    def reorder(self, index):
        pass  # the copy model's output does not depend on the past, only on the position


class CopyModel(nn.Module):
    """Predicts the source token at each position, then <eos>: its "translation" is the source itself."""

    def __init__(self, vocab_size, pad_id=0, eos_id=2, max_len=64):
        super().__init__()
        self.vocab, self.pad_id, self.eos_id, self.max_len = vocab_size, pad_id, eos_id, max_len
        self.dummy = nn.Parameter(torch.zeros(1))

    def new_cache(self):
        return CopyCache()

    def encode(self, src):
        return src[:, :, None].float()  # (batch, src_len, 1)

    def decode(self, tgt, memory, src, cache=None):
        start = cache.n if cache is not None else 0
        if cache is not None:
            cache.n += tgt.shape[1]
        positions = torch.arange(start, start + tgt.shape[1])  # positions of the inputs
        padded = torch.cat([src, torch.full((src.shape[0], positions.max() + 1), self.pad_id)], dim=1)
        nxt = padded[:, positions]  # (batch, t_in): the source token at that position
        nxt = nxt.masked_fill(nxt == self.pad_id, self.eos_id)
        return torch.nn.functional.one_hot(nxt, self.vocab).float() * 10.0  # (batch, t_in, vocab)


@pytest.fixture(scope="module")
def tokenizer():
    data = pytest.importorskip("tmlib.data", reason="tmlib.data (the tokenizer) is not available")
    pairs = [("ein mann fährt fahrrad .", "a man rides a bike ."), ("zwei hunde spielen im schnee .",
             "two dogs play in the snow ."), ("eine frau liest ein buch .", "a woman reads a book .")] * 3
    return data.train_tokenizer(pairs, vocab_size=120, min_frequency=1)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_translate_corpus_restores_order_and_detokenizes(tokenizer, beam_size):
    model = CopyModel(tokenizer.vocab_size, tokenizer.pad_id, tokenizer.eos_id)
    sentences = ["a man rides a bike .", "two dogs play in the snow .", "", "a book .", "a woman reads a book ."]
    out = translate_corpus(model, tokenizer, sentences, beam_size=beam_size, batch_tokens=12, progress=False)
    assert out == sentences  # many small length-sorted batches, back in the original order


def test_translate_corpus_bad_inputs(tokenizer):
    model = CopyModel(tokenizer.vocab_size)
    with pytest.raises(ValueError, match="beam_size.*0"):
        translate_corpus(model, tokenizer, ["a"], beam_size=0)
    with pytest.raises(ValueError, match="batch_tokens.*0"):
        translate_corpus(model, tokenizer, ["a"], batch_tokens=0)
    with pytest.raises(TypeError, match="sentences"):
        translate_corpus(model, tokenizer, "a man")
    model.pad_id = 5
    with pytest.raises(ValueError, match="pad id 0 differs from model.pad_id 5"):
        translate_corpus(model, tokenizer, ["a"])
