"""Tests of tmlib.data.tokenizer: the shared BPE tokenizer on Multi30k, and its handling of awkward input."""
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from tmlib.data import tokenizer as T  # noqa: E402
from tmlib.data import load_multi30k  # noqa: E402

SHARED = Path(os.environ.get("TMLIB_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.fixture(scope="module")
def train_pairs():
    if not (SHARED / "multi30k" / "train.de.gz").is_file():
        pytest.skip("Multi30k not available locally (set TMLIB_DATA_DIR)")
    return load_multi30k("train", SHARED)


@pytest.fixture(scope="module")
def tokenizer(train_pairs):
    return T.train_tokenizer(train_pairs, vocab_size=8000)


@pytest.fixture(scope="module")
def small():
    """A tiny tokenizer (no data needed): German and English words, Latin letters only."""
    pairs = [("Ein Hund läuft schnell.", "A dog runs fast."), ("Zwei Männer spielen Fußball.", "Two men play soccer."),
             ("Eine Frau liest ein Buch.", "A woman reads a book.")] * 3
    return T.train_tokenizer(pairs, vocab_size=150, min_frequency=1)


# ------------------------------------------------------------------ on Multi30k
def test_tokenizer_specials_and_roundtrip(tokenizer, train_pairs):
    assert tokenizer.vocab_size == 8000
    assert [tokenizer.tokenizer.id_to_token(i) for i in range(4)] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2, 3)
    en = "Two young, White males are outside near many bushes."
    assert tokenizer.tokens(en) == ["▁Two", "▁young", ",", "▁White", "▁males", "▁are", "▁outside", "▁near",
                                    "▁many", "▁bushes", "."]
    for de, en in train_pairs[:500]:
        assert tokenizer.decode(tokenizer.encode(de)) == de
        assert tokenizer.decode(tokenizer.encode(en)) == en
    # decode stops at <eos> and drops <bos>/<pad>
    ids = tokenizer.encode("A dog runs.")
    assert tokenizer.decode([1] + ids + [2] + tokenizer.encode("junk") + [0, 0]) == "A dog runs."
    assert tokenizer.decode(torch.tensor([1] + ids + [2, 0])) == "A dog runs."


def test_encode_batch_equals_encode(tokenizer, train_pairs):
    texts = [de for de, _ in train_pairs[:200]] + ["", "  ", "\ufeffEin Hund."]
    assert tokenizer.encode_batch(texts) == [tokenizer.encode(t) for t in texts]


def test_tokenizer_deterministic_and_serializable(tokenizer, train_pairs, tmp_path):
    again = T.train_tokenizer(train_pairs, vocab_size=8000)
    assert again.to_json() == tokenizer.to_json()
    path = tmp_path / "tok.json"
    tokenizer.save(path)
    loaded = T.BPETokenizer.load(path)
    s = "Ein Mann mit einem orangefarbenen Hut starrt auf etwas."
    assert loaded.encode(s) == tokenizer.encode(s)
    assert T.BPETokenizer.from_json(tokenizer.to_json()).tokens(s) == tokenizer.tokens(s)
    assert [p.name for p in tmp_path.iterdir()] == ["tok.json"]  # atomic write: no temporary file left


def test_tokenizer_bad_arguments():
    with pytest.raises(ValueError, match="vocab_size"):
        T.train_tokenizer([("a", "b")], vocab_size=4)
    with pytest.raises(ValueError, match="min_frequency"):
        T.train_tokenizer([("a", "b")], vocab_size=10, min_frequency=0)


# ------------------------------------------------------------------ awkward input
def test_leading_byte_order_mark_is_dropped(small):
    s = "Ein Hund läuft."
    # without the fix the BOM became "▁ <unk>" and split the first word
    raw = small.tokenizer.encode("\ufeff" + s).ids
    assert small.unk_id in raw and raw != small.encode(s)
    assert small.encode("\ufeff" + s) == small.encode(s)
    assert small.tokens("\ufeff" + s) == small.tokens(s)
    assert small.encode_batch(["\ufeff" + s, s]) == [small.encode(s)] * 2
    assert small.decode(small.encode("\ufeff" + s)) == s


@pytest.mark.parametrize("text", ["", " ", "   ", "\t", "\n", "\r\n", " \u3000\u00a0 ", "\ufeff", "\ufeff  "])
def test_blank_text_encodes_to_no_ids(small, text):
    assert small.encode(text) == [] and small.tokens(text) == []
    assert small.encode_batch([text, "Ein Hund."]) == [[], small.encode("Ein Hund.")]
    assert small.decode(small.encode(text)) == ""
    assert small.unknown_fraction(small.encode(text)) == 0.0 and not small.is_all_unknown(text)


def test_whitespace_used_to_encode_to_pieces(small):
    # what encode fixes: the raw tokenizer turns blank text into word-start pieces and <unk>
    assert small.tokenizer.encode(" ").ids != [] and small.unk_id in small.tokenizer.encode("\t").ids


def test_unknown_fraction_and_all_unknown(small):
    assert small.unknown_fraction(small.encode("Ein Hund läuft.")) == 0.0
    ids = small.encode("日本語")
    assert small.tokenizer.id_to_token(ids[0]) == "▁" and ids[1:] == [small.unk_id] * 3  # ▁ <unk> <unk> <unk>
    assert small.unknown_fraction(ids) == 1.0  # the bare word-start marker ▁ carries no content
    assert small.unknown_fraction(torch.tensor(ids)) == 1.0
    assert small.is_all_unknown("日本語") and small.is_all_unknown("Привет мир")
    mixed = small.encode("Ein 日本")  # ▁Ein ▁ <unk> <unk>: one known piece, two unknown
    assert small.unknown_fraction(mixed) == pytest.approx(2 / 3)
    assert not small.is_all_unknown("Ein 日本") and not small.is_all_unknown("Ein Hund.")
    assert small.unknown_fraction([]) == 0.0


def test_encode_refuses_non_text(small):
    with pytest.raises(TypeError, match="text must be a str, got int"):
        small.encode(3)
    with pytest.raises(TypeError, match="got bytes"):
        small.encode_batch(["ok", b"bytes"])
    with pytest.raises(TypeError, match="single str"):
        small.encode_batch("Ein Hund.")
