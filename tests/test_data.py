"""Tests of tmlib.data: Multi30k loading and its failure modes, the BPE tokenizer, token batches."""
import functools
import gzip
import http.server
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from tmlib import data as D  # noqa: E402

SHARED = Path(os.environ.get("TMLIB_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
needs_data = pytest.mark.skipif(not (SHARED / "multi30k" / "train.de.gz").is_file(),
                                reason="Multi30k not available locally (set TMLIB_DATA_DIR)")


@pytest.fixture(scope="module")
def train_pairs():
    if not (SHARED / "multi30k" / "train.de.gz").is_file():
        pytest.skip("Multi30k not available locally (set TMLIB_DATA_DIR)")
    return D.load_multi30k("train", SHARED)


@pytest.fixture(scope="module")
def tokenizer(train_pairs):
    return D.train_tokenizer(train_pairs, vocab_size=8000)


# ------------------------------------------------------------------ loading


@needs_data
@pytest.mark.parametrize("split,n", [("train", 29000), ("val", 1014), ("test", 1000), ("test_2016_flickr", 1000)])
def test_load_counts(split, n):
    pairs = D.load_multi30k(split, SHARED)
    assert len(pairs) == n
    de, en = pairs[0]
    assert isinstance(de, str) and isinstance(en, str) and not de.endswith("\n")


@needs_data
def test_load_first_pair_and_env_var(monkeypatch):
    monkeypatch.setenv("TMLIB_DATA_DIR", str(SHARED))
    de, en = D.load_multi30k("train")[0]
    assert de == "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche."
    assert en == "Two young, White males are outside near many bushes."
    # the multi30k folder itself is accepted too
    assert D.load_multi30k("val", SHARED / "multi30k")[-1] == D.load_multi30k("val")[-1]


def test_unknown_split():
    with pytest.raises(ValueError, match="unknown split"):
        D.load_multi30k("dev", "/nonexistent")


def test_missing_data_message(tmp_path, monkeypatch):
    monkeypatch.delenv("TMLIB_DATA_DIR", raising=False)
    with pytest.raises(D.DataError) as err:
        D.load_multi30k("val", tmp_path)
    msg = str(err.value)
    assert "val.de.gz" in msg and "TMLIB_DATA_DIR" in msg and "raw.githubusercontent.com/multi30k" in msg
    assert str(tmp_path) in msg


def _copy_split(tmp_path, stem="val"):
    dst = tmp_path / "multi30k"
    dst.mkdir(exist_ok=True)
    for lang in ("de", "en"):
        shutil.copy(SHARED / "multi30k" / f"{stem}.{lang}.gz", dst / f"{stem}.{lang}.gz")
    return dst


@needs_data
def test_truncated_file_detected(tmp_path):
    dst = _copy_split(tmp_path)
    f = dst / "val.en.gz"
    f.write_bytes(f.read_bytes()[:5000])
    with pytest.raises(D.DataError, match=r"val\.en\.gz is corrupt or truncated.*Delete it"):
        D.load_multi30k("val", tmp_path)


@needs_data
def test_wrong_line_count_detected(tmp_path, monkeypatch):
    # a well-formed gzip with one line missing: the hash check catches it first; with the hash
    # patched to match, the line count catches it.
    dst = _copy_split(tmp_path)
    f = dst / "val.de.gz"
    lines = gzip.decompress(f.read_bytes()).split(b"\n")
    f.write_bytes(gzip.compress(b"\n".join(lines[1:])))
    with pytest.raises(D.DataError, match="corrupt or truncated"):
        D.load_multi30k("val", tmp_path)
    monkeypatch.setitem(D.MULTI30K_SHA256, "val.de.gz", D._sha256(f))
    with pytest.raises(D.DataError, match=r"val\.de\.gz has 1013 lines, expected 1014"):
        D.load_multi30k("val", tmp_path)


@needs_data
def test_download_from_local_server(tmp_path, monkeypatch):
    """The download path, end to end, against an HTTP server on 127.0.0.1 serving the files."""
    served = tmp_path / "served"
    served.mkdir()
    for name in ("val.de.gz", "val.en.gz"):
        shutil.copy(SHARED / "multi30k" / name, served / name)
    (served / "test_2016_flickr.de.gz").write_bytes(b"not the right file")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{{name}}"
        cache = tmp_path / "cache" / "multi30k"
        monkeypatch.delenv("TMLIB_DATA_DIR", raising=False)
        monkeypatch.setattr(D, "MULTI30K_URL", url)
        monkeypatch.setattr(D, "_cache_dir", lambda: cache)
        pairs = D.load_multi30k("val")
        assert len(pairs) == 1014 and sorted(p.name for p in cache.iterdir()) == ["val.de.gz", "val.en.gz"]
        # a bad download is refused and leaves nothing behind (no partial file, no target file)
        with pytest.raises(D.DataError, match="sha256"):
            D.load_multi30k("test")
        # a missing file on the server (HTTP 404) is a clear error too
        (served / "test_2016_flickr.de.gz").unlink()
        with pytest.raises(D.DataError, match="could not download"):
            D.load_multi30k("test")
        assert sorted(p.name for p in cache.iterdir()) == ["val.de.gz", "val.en.gz"]
        # with download disabled, the message says how to get the data
        with pytest.raises(D.DataError, match="TMLIB_DATA_DIR"):
            D.load_multi30k("test", download=False)
    finally:
        server.shutdown()


def test_no_network_message(tmp_path, monkeypatch):
    monkeypatch.delenv("TMLIB_DATA_DIR", raising=False)
    monkeypatch.setattr(D, "_cache_dir", lambda: tmp_path / "multi30k")

    def offline(*args, **kwargs):
        raise D.urllib.error.URLError("no network")

    monkeypatch.setattr(D.urllib.request, "urlopen", offline)
    with pytest.raises(D.DataError) as err:
        D.load_multi30k("train")
    msg = str(err.value)
    assert "could not download" in msg and "TMLIB_DATA_DIR" in msg and "multi30k/" in msg
    assert not any((tmp_path / "multi30k").iterdir())


# ------------------------------------------------------------------ tokenizer


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


def test_tokenizer_deterministic_and_serializable(tokenizer, train_pairs, tmp_path):
    again = D.train_tokenizer(train_pairs, vocab_size=8000)
    assert again.to_json() == tokenizer.to_json()
    path = tmp_path / "tok.json"
    tokenizer.save(path)
    loaded = D.BPETokenizer.load(path)
    s = "Ein Mann mit einem orangefarbenen Hut starrt auf etwas."
    assert loaded.encode(s) == tokenizer.encode(s)
    assert D.BPETokenizer.from_json(tokenizer.to_json()).tokens(s) == tokenizer.tokens(s)


def test_tokenizer_too_small_vocab():
    with pytest.raises(ValueError, match="vocab_size"):
        D.train_tokenizer([("a", "b")], vocab_size=4)


# ------------------------------------------------------------------ batches


def test_collate_shapes_padding_and_shift():
    ex = [([5, 6, 7], [10, 11]), ([8], [12, 13, 14, 15])]
    b = D.collate(ex, pad_id=0, bos_id=1, eos_id=2)
    assert b.src.shape == (2, 3) and b.tgt_in.shape == (2, 5) and b.tgt_out.shape == (2, 5)
    assert b.src.dtype == b.tgt_in.dtype == b.tgt_out.dtype == torch.int64
    assert b.src.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert b.tgt_in.tolist() == [[1, 10, 11, 0, 0], [1, 12, 13, 14, 15]]
    assert b.tgt_out.tolist() == [[10, 11, 2, 0, 0], [12, 13, 14, 15, 2]]
    assert b.n_tokens == 3 + 5 == int((b.tgt_out != 0).sum())
    # the shift: labels are the decoder inputs moved one place left
    for i in range(2):
        n = int((b.tgt_out[i] != 0).sum())
        assert b.tgt_in[i, 1:n].tolist() == b.tgt_out[i, : n - 1].tolist()
    with pytest.raises(ValueError):
        D.collate([])


def _random_lengths(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    return [(int(a), int(b)) for a, b in zip(rng.integers(1, 40, n), rng.integers(1, 40, n))]


def test_token_batches_cover_each_example_once_and_respect_budget():
    lengths = _random_lengths()
    lengths.append((500, 3))  # longer than the budget: a batch of its own
    batches = D.token_batches(lengths, max_tokens=600, seed=1, epoch=0)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    for b in batches:
        longest = max(max(lengths[i][0], lengths[i][1] + 1) for i in b)
        assert len(b) * longest <= 600 or len(b) == 1
    assert [3000] in batches


def test_token_batches_deterministic_and_bucketed():
    lengths = _random_lengths()
    a = D.token_batches(lengths, 800, seed=3, epoch=2)
    assert a == D.token_batches(lengths, 800, seed=3, epoch=2)
    assert a != D.token_batches(lengths, 800, seed=3, epoch=3)
    assert a != D.token_batches(lengths, 800, seed=4, epoch=2)
    size = np.array([max(s, t + 1) for s, t in lengths])

    def pad_fraction(bs):
        return 1 - sum(size[b].sum() for b in bs) / sum(len(b) * size[b].max() for b in bs)

    random_batches = [list(range(i, i + 40)) for i in range(0, len(lengths), 40)]
    assert pad_fraction(a) < 0.1 < pad_fraction(random_batches)
    ordered = D.token_batches(lengths, 800, shuffle=False)
    assert [size[b].max() for b in ordered] == sorted(size[b].max() for b in ordered)


def test_batch_iterator_epoch_and_resume(tokenizer):
    pairs = [("Ein Hund läuft.", "A dog runs."), ("Zwei Männer.", "Two men."), ("Eine Frau singt laut.",
             "A woman sings loudly.")] * 20
    ex = D.encode_pairs(pairs, tokenizer)
    it = D.BatchIterator(ex, max_tokens=64, seed=0)
    full = list(it.epoch(1))
    tail = list(it.epoch(1, start=2))
    assert len(full) == len(it.batches(1)) and len(tail) == len(full) - 2
    for x, y in zip(full[2:], tail):
        assert torch.equal(x.src, y.src) and torch.equal(x.tgt_out, y.tgt_out)
    assert sum(b.n_tokens for b in full) == it.n_target_tokens()
    assert all(b.src.shape[0] * max(b.src.shape[1], b.tgt_in.shape[1]) <= 64 for b in full)
    assert D.filter_by_length([([1] * 5, [1] * 4), ([1] * 6, [1])], 5) == [([1] * 5, [1] * 4)]
