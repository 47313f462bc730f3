"""Tests of tmlib.data.multi30k: loading Multi30k, its checks, and every failure mode with its message.

Most tests use small fake files (the right number of lines, their sha256 patched into the registry), so
they run without the data and without internet; downloads go to an HTTP server on 127.0.0.1.
"""
import functools
import gzip
import hashlib
import http.server
import os
import socket
import threading
import warnings
from pathlib import Path

import pytest

pytest.importorskip("pooch")

from tmlib.data import multi30k as M  # noqa: E402

SHARED = Path(os.environ.get("TMLIB_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
needs_data = pytest.mark.skipif(not (SHARED / "multi30k" / "train.de.gz").is_file(),
                                reason="Multi30k not available locally (set TMLIB_DATA_DIR)")


# ------------------------------------------------------------------ fakes: files, registry, server
@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Fake val and test files in tmp_path/served, registered with their own sha256; no env variable."""
    served = tmp_path / "served"
    served.mkdir()
    for stem in ("val", "test_2016_flickr"):
        for lang in ("de", "en"):
            name = f"{stem}.{lang}.gz"
            text = "".join(f"{lang} sentence {i} of {stem}\n" for i in range(M.MULTI30K_SIZES[stem]))
            data = gzip.compress(text.encode(), mtime=0)
            (served / name).write_bytes(data)
            monkeypatch.setitem(M.MULTI30K_SHA256, name, hashlib.sha256(data).hexdigest())
    monkeypatch.delenv("TMLIB_DATA_DIR", raising=False)
    return served


def _offline_copy(tmp_path, served, names=("val.de.gz", "val.en.gz")):
    folder = tmp_path / "copy" / "multi30k"
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_bytes((served / name).read_bytes())
    return folder


@pytest.fixture
def server(fake, tmp_path, monkeypatch):
    """An HTTP server on 127.0.0.1 serving the fake files; MULTI30K_URL and the cache point at it."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(fake))
    handler.log_message = lambda *a, **k: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    cache = tmp_path / "cache" / "multi30k"
    monkeypatch.setattr(M, "MULTI30K_URL", f"http://127.0.0.1:{srv.server_address[1]}/{{name}}")
    monkeypatch.setattr(M, "_cache_dir", lambda: cache)
    yield cache
    srv.shutdown()
    srv.server_close()


def _listing(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# ------------------------------------------------------------------ the real data
@needs_data
@pytest.mark.parametrize("split,n", [("train", 29000), ("val", 1014), ("test", 1000), ("test_2016_flickr", 1000)])
def test_load_counts(split, n):
    pairs = M.load_multi30k(split, SHARED)
    assert len(pairs) == n
    de, en = pairs[0]
    assert isinstance(de, str) and isinstance(en, str) and not de.endswith("\n")


@needs_data
def test_load_first_pair_and_env_var(monkeypatch):
    monkeypatch.setenv("TMLIB_DATA_DIR", str(SHARED))
    de, en = M.load_multi30k("train")[0]
    assert de == "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche."
    assert en == "Two young, White males are outside near many bushes."
    # the multi30k folder itself is accepted too
    assert M.load_multi30k("val", SHARED / "multi30k")[-1] == M.load_multi30k("val")[-1]
    assert M.multi30k_dir() == (SHARED / "multi30k", False)


@needs_data
def test_check_multi30k_real_files(monkeypatch):
    monkeypatch.setenv("TMLIB_DATA_DIR", str(SHARED))
    paths = M.check_multi30k()
    assert [p.name for p in paths] == ["train.de.gz", "train.en.gz", "val.de.gz", "val.en.gz"]


def test_cache_folder_is_the_platformdirs_user_cache(monkeypatch):
    platformdirs = pytest.importorskip("platformdirs")
    monkeypatch.delenv("TMLIB_DATA_DIR", raising=False)
    assert M.multi30k_dir() == (Path(platformdirs.user_cache_dir("tmlib")) / "multi30k", True)


def test_unknown_split():
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        M.load_multi30k("dev", "/nonexistent")
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        M.check_multi30k("/nonexistent", splits=("train", "dev"))
    with pytest.raises(ValueError, match="unknown Multi30k file"):
        M.download_multi30k("/nonexistent", ["dev.de.gz"])


# ------------------------------------------------------------------ offline copies: checked, never downloaded into
def test_offline_copy_loads_and_checks(fake, tmp_path, monkeypatch):
    folder = _offline_copy(tmp_path, fake)
    pairs = M.load_multi30k("val", folder.parent)
    assert len(pairs) == 1014 and pairs[3] == ("de sentence 3 of val", "en sentence 3 of val")
    monkeypatch.setenv("TMLIB_DATA_DIR", str(folder))  # the multi30k folder itself
    assert M.check_multi30k(splits="val") == [folder / "val.de.gz", folder / "val.en.gz"]


def test_missing_data_message(tmp_path, monkeypatch):
    monkeypatch.delenv("TMLIB_DATA_DIR", raising=False)
    with pytest.raises(M.DataError) as err:
        M.load_multi30k("val", tmp_path)
    msg = str(err.value)
    assert "val.de.gz" in msg and "TMLIB_DATA_DIR" in msg and "raw.githubusercontent.com/multi30k" in msg
    assert str(tmp_path) in msg and "nothing is downloaded into it" in msg
    assert "re-download" not in msg


def test_check_multi30k_reads_no_text(fake, tmp_path, monkeypatch):
    """check_multi30k verifies presence and sha256 only: it never decompresses a file."""
    folder = _offline_copy(tmp_path, fake)

    def no_reading(*args, **kwargs):
        raise AssertionError("check_multi30k must not read the text")

    monkeypatch.setattr(M.gzip, "open", no_reading)
    assert len(M.check_multi30k(folder, splits=["val"])) == 2
    with pytest.raises(M.DataError, match=r"test_2016_flickr\.de\.gz, test_2016_flickr\.en\.gz not found"):
        M.check_multi30k(folder, splits=("val", "test"))


@pytest.mark.parametrize("via", ["data_dir", "TMLIB_DATA_DIR"])
def test_truncated_file_in_offline_copy(fake, tmp_path, monkeypatch, via):
    folder = _offline_copy(tmp_path, fake)
    f = folder / "val.en.gz"
    f.write_bytes(f.read_bytes()[:500])
    if via == "TMLIB_DATA_DIR":
        monkeypatch.setenv("TMLIB_DATA_DIR", str(folder.parent))
    data_dir = folder.parent if via == "data_dir" else None
    for call in (lambda: M.load_multi30k("val", data_dir), lambda: M.check_multi30k(data_dir, splits="val")):
        with pytest.raises(M.DataError, match=r"val\.en\.gz is corrupt or truncated") as err:
            call()
        msg = str(err.value)
        assert "replace val.en.gz with a good copy" in msg and "offline copy" in msg
        assert ("unset TMLIB_DATA_DIR" if via == "TMLIB_DATA_DIR" else "leave data_dir unset") in msg
        assert "re-download" not in msg and "Delete it" not in msg  # nothing is ever downloaded there
    assert f.stat().st_size == 500  # and the file was left alone


def test_wrong_line_count_detected(fake, tmp_path, monkeypatch):
    # a well-formed gzip with one line missing: the hash check catches it first; with the hash
    # patched to match, the line count catches it.
    folder = _offline_copy(tmp_path, fake)
    f = folder / "val.de.gz"
    lines = gzip.decompress(f.read_bytes()).split(b"\n")
    f.write_bytes(gzip.compress(b"\n".join(lines[1:])))
    with pytest.raises(M.DataError, match="corrupt or truncated"):
        M.load_multi30k("val", folder)
    monkeypatch.setitem(M.MULTI30K_SHA256, "val.de.gz", hashlib.sha256(f.read_bytes()).hexdigest())
    with pytest.raises(M.DataError, match=r"val\.de\.gz has 1013 lines, expected 1014") as err:
        M.load_multi30k("val", folder)
    assert "replace val.de.gz with a good copy" in str(err.value) and "re-download" not in str(err.value)


def test_undecompressable_file_detected(fake, tmp_path, monkeypatch):
    folder = _offline_copy(tmp_path, fake)
    f = folder / "val.en.gz"
    f.write_bytes(b"not gzip at all")
    monkeypatch.setitem(M.MULTI30K_SHA256, "val.en.gz", hashlib.sha256(f.read_bytes()).hexdigest())
    with pytest.raises(M.DataError, match=r"val\.en\.gz cannot be decompressed.*replace val\.en\.gz"):
        M.load_multi30k("val", folder)


# ------------------------------------------------------------------ the cache: downloads with pooch
def test_download_from_local_server(server, fake):
    """Download, verification, re-download of a corrupt file, and bad downloads, end to end (pooch)."""
    cache = server
    pairs = M.load_multi30k("val")
    assert len(pairs) == 1014 and pairs[0] == ("de sentence 0 of val", "en sentence 0 of val")
    assert _listing(cache) == ["val.de.gz", "val.en.gz"]  # no temporary file left

    # a corrupt (truncated) file in the cache is downloaded again, with a warning
    (cache / "val.en.gz").write_bytes((fake / "val.en.gz").read_bytes()[:300])
    with pytest.warns(UserWarning, match=r"val\.en\.gz is corrupt or truncated.*downloading it again"):
        assert M.load_multi30k("val") == pairs
    assert (cache / "val.en.gz").read_bytes() == (fake / "val.en.gz").read_bytes()
    assert _listing(cache) == ["val.de.gz", "val.en.gz"]

    # with downloads off, a corrupt cache file is reported, with the advice to let it be downloaded again
    (cache / "val.en.gz").write_bytes(b"junk")
    with pytest.raises(M.DataError, match=r"corrupt or truncated.*download=True"):
        M.load_multi30k("val", download=False)
    with pytest.warns(UserWarning, match="downloading it again"):
        assert len(M.check_multi30k(splits="val")) == 2  # check_multi30k repairs the cache too

    # a download whose sha256 is wrong is refused and leaves nothing behind (no temporary file, no target)
    (fake / "test_2016_flickr.de.gz").write_bytes(b"not the right file")
    with pytest.raises(M.DataError, match=r"downloaded .*test_2016_flickr\.de\.gz but its sha256 is wrong"):
        M.load_multi30k("test")
    assert _listing(cache) == ["val.de.gz", "val.en.gz"]
    # a file missing on the server (HTTP 404) is a clear error too
    (fake / "test_2016_flickr.de.gz").unlink()
    with pytest.raises(M.DataError, match=r"could not download .*test_2016_flickr\.de\.gz.*404"):
        M.load_multi30k("test")
    assert _listing(cache) == ["val.de.gz", "val.en.gz"]
    # with download disabled, the message says how to get the data
    with pytest.raises(M.DataError, match="TMLIB_DATA_DIR") as err:
        M.load_multi30k("test", download=False)
    assert "not found in" in str(err.value) and "offline copy" not in str(err.value)


def test_download_multi30k_with_url_argument(fake, tmp_path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(fake))
    handler.log_message = lambda *a, **k: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/{{name}}"
        out = M.download_multi30k(tmp_path / "dl", ["val.de.gz"], url=url, timeout=10)
        assert out == [tmp_path / "dl" / "val.de.gz"] and _listing(tmp_path / "dl") == ["val.de.gz"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an intact file is kept as it is: no warning, no download
            assert M.download_multi30k(tmp_path / "dl", ["val.de.gz"], url="http://127.0.0.1:1/{name}") == out
    finally:
        srv.shutdown()
        srv.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_network_message(fake, tmp_path, monkeypatch):
    cache = tmp_path / "cache" / "multi30k"
    monkeypatch.setattr(M, "_cache_dir", lambda: cache)
    monkeypatch.setattr(M, "MULTI30K_URL", f"http://127.0.0.1:{_closed_port()}/{{name}}")  # connection refused
    with pytest.raises(M.DataError) as err:
        M.load_multi30k("val")
    msg = str(err.value)
    assert "could not download" in msg and "TMLIB_DATA_DIR" in msg and "multi30k/" in msg
    assert _listing(cache) == []
