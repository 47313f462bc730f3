"""Tests of tmlib.decoding.metrics: sacreBLEU scores against hand computations, and corpus translation
(tmlib.decoding.corpus.translate_corpus, exported once, by tmlib.decoding).

BLEU by hand: BLEU = BP · exp(¼ Σ log p_n), BP = exp(1 − r/c) when the hypothesis length c is
shorter than the reference length r, else 1 (Papineni et al. 2002).
"""
import math
import warnings

import pytest
import torch
from torch import nn

import tmlib.decoding.corpus
import tmlib.decoding.metrics
from tmlib.data import length_batches
from tmlib.decoding import bleu_scores, translate_corpus


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


def test_translate_corpus_is_the_decoding_function():
    assert translate_corpus is tmlib.decoding.corpus.translate_corpus
    assert not hasattr(tmlib.decoding.metrics, "translate_corpus")  # no re-export: one name, one place


def test_translation_batches_cover_everything_within_budget():
    """translate_corpus batches sentences with the shared helper: sorted by source length, within budget."""
    lengths = [5, 1, 9, 3, 3, 7, 2, 8]
    batches = length_batches(lengths, 12)
    assert batches == [[1, 6, 3, 4], [0], [5], [7], [2]]
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


class RecordingCopyModel(CopyModel):
    """CopyModel that records every source batch it is asked to encode."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []

    def encode(self, src):
        self.seen.append(src.tolist())
        return super().encode(src)


def test_translate_corpus_blank_sentences_give_empty_lines(tokenizer):
    model = RecordingCopyModel(tokenizer.vocab_size, tokenizer.pad_id, tokenizer.eos_id)
    sentences = ["a book .", "   ", "\t", "", "\ufeffa book .", "\u3000"]
    out = translate_corpus(model, tokenizer, sentences, batch_tokens=100, progress=False)
    assert out == ["a book .", "", "", "", "a book .", ""]  # nothing invented for blank lines; the BOM is dropped
    rows = [row for batch in model.seen for row in batch]
    assert rows == [tokenizer.encode("a book .")] * 2  # only the two real sentences reached the model


def test_translate_corpus_warns_about_unknown_script(tokenizer):
    model = RecordingCopyModel(tokenizer.vocab_size, tokenizer.pad_id, tokenizer.eos_id)
    sentences = ["a book .", "Привет мир", "a dog .", "日本語"]
    assert tokenizer.is_all_unknown("Привет мир") and tokenizer.is_all_unknown("日本語")
    with pytest.warns(UserWarning, match=r"2 source sentence\(s\) consist only of unknown tokens.*sentences 1, 3"):
        out = translate_corpus(model, tokenizer, sentences, progress=False)
    assert out[1] == out[3] == "" and out[0] == "a book ."
    assert all(tokenizer.unk_id not in row for batch in model.seen for row in batch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a sentence with some known pieces is translated, without a warning
        assert translate_corpus(model, tokenizer, ["a 日本 book ."], progress=False)[0] != ""


def test_translate_corpus_truncates_long_sources_with_a_warning(tokenizer):
    model = CopyModel(tokenizer.vocab_size, tokenizer.pad_id, tokenizer.eos_id, max_len=4)
    long = "two dogs play in the snow ."
    with pytest.warns(UserWarning, match=r"1 source sentence\(s\) longer than model.max_len=4 tokens were truncated"):
        out = translate_corpus(model, tokenizer, [long, "a book"], device="cpu", progress=False)
    assert out == [tokenizer.decode(tokenizer.encode(long)[:4]), "a book"]


def test_translate_corpus_device_handling(tokenizer, monkeypatch):
    model = CopyModel(tokenizer.vocab_size, tokenizer.pad_id, tokenizer.eos_id)
    monkeypatch.setenv("TMLIB_DEVICE", "cpu")  # "auto" = tmlib.utils.get_device(), which this variable overrides
    for device in (None, "cpu", torch.device("cpu"), "auto"):
        assert translate_corpus(model, tokenizer, ["a dog ."], device=device, progress=False) == ["a dog ."]
        assert model.dummy.device.type == "cpu"
    assert translate_corpus(model, tokenizer, [], progress=False) == []


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
