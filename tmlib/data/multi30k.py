"""The Multi30k task-1 files: where they are, downloading them (``pooch``), and reading them safely.

The course trains on Multi30k task 1 (Elliott et al. 2016; Flickr30k image descriptions with German
translations): 29,000 training pairs, 1,014 validation pairs and the 1,000 pairs of "test 2016 flickr".

Where the files are read from, in this order:

1. the ``data_dir`` argument (a folder holding ``multi30k/<split>.<lang>.gz``, or the ``multi30k``
   folder itself);
2. the environment variable ``TMLIB_DATA_DIR`` (same layout; the course's CI points it at
   ``../shared/data``).

   These two are *offline copies*: nothing is ever downloaded into them, and a bad file there is
   reported with the advice to replace it;
3. otherwise a per-user cache, ``pooch.os_cache("tmlib")/multi30k`` (the same folder as
   ``platformdirs.user_cache_dir("tmlib")/multi30k``), managed by `pooch <https://www.fatiando.org/pooch>`_:
   a missing file is downloaded from :data:`MULTI30K_URL`, and a file whose sha256 is wrong (a truncated
   or corrupted download) is downloaded again, with a warning. pooch writes each download to a temporary
   file in the same folder, checks its sha256 against :data:`MULTI30K_SHA256`, and only then renames it
   into place; a failed download leaves nothing behind.

Every file is checked against its sha256 (:func:`check_multi30k` does only that, without reading the
text); :func:`load_multi30k` also checks that the file decompresses and has the expected number of lines.
Every problem raises :class:`DataError`, whose message names the file and says how to fix it.
"""
from __future__ import annotations

import gzip
import os
import warnings
import zlib
from pathlib import Path
from typing import Iterable

__all__ = [
    "MULTI30K_URL",
    "MULTI30K_FILES",
    "MULTI30K_SHA256",
    "MULTI30K_SIZES",
    "SPLITS",
    "DataError",
    "load_multi30k",
    "check_multi30k",
    "multi30k_dir",
    "download_multi30k",
]

#: Upstream location of the raw task-1 files (github.com/multi30k/dataset, data/task1/raw/); ``{name}`` is
#: the file name. Read at call time, so a test may point it at a local server.
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{name}"

#: split -> file stem: ``<stem>.de.gz`` and ``<stem>.en.gz``.
SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr", "test_2016_flickr": "test_2016_flickr"}

#: Number of sentence pairs of each split.
MULTI30K_SIZES = {"train": 29000, "val": 1014, "test_2016_flickr": 1000}

#: sha256 of the six upstream ``.gz`` files (computed from the files served at MULTI30K_URL): pooch's registry.
MULTI30K_SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
}

MULTI30K_FILES = tuple(MULTI30K_SHA256)

_ENV = "TMLIB_DATA_DIR"


class DataError(RuntimeError):
    """The Multi30k data is missing, corrupt or truncated; the message says how to fix it."""


# ------------------------------------------------------------------------------------------- folders
def _cache_dir() -> Path:
    """The per-user download cache, ``pooch.os_cache("tmlib")/multi30k``."""
    import pooch

    return Path(pooch.os_cache("tmlib")) / "multi30k"


def _resolve(folder: str | os.PathLike) -> Path:
    """Accept both ``<DIR>`` (holding ``multi30k/``) and ``<DIR>/multi30k``."""
    p = Path(folder).expanduser()
    return p / "multi30k" if (p / "multi30k").is_dir() or p.name != "multi30k" else p


def _locate(data_dir) -> tuple[Path, str]:
    """``(folder, source)``; ``source`` is ``"data_dir"``, ``"TMLIB_DATA_DIR"`` (offline copies) or ``"cache"``."""
    if data_dir is not None:
        return _resolve(data_dir), "data_dir"
    env = os.environ.get(_ENV)
    if env:
        return _resolve(env), _ENV
    return _cache_dir(), "cache"


def multi30k_dir(data_dir: str | os.PathLike | None = None) -> tuple[Path, bool]:
    """The folder the files are read from, and whether missing files may be downloaded into it.

    Args:
        data_dir: explicit folder (``<DIR>`` or ``<DIR>/multi30k``), or ``None``.

    Returns:
        ``(folder, may_download)``: ``data_dir`` or ``$TMLIB_DATA_DIR`` (an offline copy, never downloaded
        into: ``False``), else the user cache folder (``True``).
    """
    folder, source = _locate(data_dir)
    return folder, source == "cache"


# ------------------------------------------------------------------------------------------- messages
def _how_to_get(folder: Path | None = None) -> str:
    where = f"\n  (looked in: {folder})" if folder is not None else ""
    env = os.environ.get(_ENV)
    unset = f" and unset TMLIB_DATA_DIR (now {env!r})" if env else ""
    return (
        "How to get the data:\n"
        f"  * download the six files {', '.join(MULTI30K_FILES)}\n"
        f"    from {MULTI30K_URL.format(name='<name>')}\n"
        "    into a folder <DIR>/multi30k/ and set the environment variable TMLIB_DATA_DIR=<DIR>\n"
        "    (or pass data_dir=<DIR> to load_multi30k); or\n"
        f"  * with internet access, let tmlib download them to the user cache ({_cache_dir()}):\n"
        f"    leave data_dir unset{unset}.{where}"
    )


def _remedy(path: Path, source: str, download: bool) -> str:
    """How to replace a bad file, which depends on whether tmlib may download into its folder."""
    if source == "cache":
        if download:
            return "Delete it and load again to re-download it."
        return "Load again with download=True to download it again (the bad file is replaced), or delete it."
    named_by = "the environment variable TMLIB_DATA_DIR" if source == _ENV else "the data_dir argument"
    how = "unset TMLIB_DATA_DIR" if source == _ENV else "leave data_dir unset (and TMLIB_DATA_DIR unset)"
    return (f"{path.parent} is an offline copy (named by {named_by}) into which nothing is downloaded: "
            f"replace {path.name} with a good copy (from {MULTI30K_URL.format(name=path.name)}), "
            f"or {how} to download the data to the user cache ({_cache_dir()}).")


# ------------------------------------------------------------------------------------------- pooch
def _sha256(path: Path) -> str:
    import pooch

    return pooch.file_hash(str(path), alg="sha256")


def download_multi30k(folder: str | os.PathLike, names: Iterable[str] = MULTI30K_FILES,
                      url: str | None = None, timeout: float = 30.0) -> list[Path]:
    """Make sure the files ``names`` are in ``folder`` with the right sha256, downloading with pooch (missing, or
    corrupt: again, with a UserWarning). pooch checks each download before renaming it into place: a failed one leaves
    nothing behind. Returns the verified paths.

    Raises:
        ValueError: a name not in :data:`MULTI30K_FILES`.
        DataError: no network, an HTTP error, a wrong sha256, a folder that cannot be written.
    """
    import pooch
    import requests

    url = url or MULTI30K_URL
    names = list(names)
    unknown = [n for n in names if n not in MULTI30K_SHA256]
    if unknown:
        raise ValueError(f"unknown Multi30k file(s) {unknown}: use names among {list(MULTI30K_FILES)}")
    folder = Path(folder)
    urls = {n: url.format(name=n) for n in names}
    pup = pooch.create(path=folder, base_url="", registry={n: f"sha256:{MULTI30K_SHA256[n]}" for n in names},
                       urls=urls, retry_if_failed=0, allow_updates=True)
    written = []
    for name in names:
        target, src = folder / name, urls[name]
        if target.is_file():
            digest = _sha256(target)
            if digest == MULTI30K_SHA256[name]:
                written.append(target)
                continue
            warnings.warn(f"{target} is corrupt or truncated (sha256 {digest[:12]}…, expected "
                          f"{MULTI30K_SHA256[name][:12]}…): downloading it again from {src}", stacklevel=2)
        downloader = pooch.HTTPDownloader(timeout=timeout) if src.startswith(("http://", "https://")) else None
        try:
            written.append(Path(pup.fetch(name, downloader=downloader)))
        except requests.exceptions.RequestException as err:
            raise DataError(f"could not download {src}: {err}\nCheck the internet connection (or proxy), or get "
                            f"the files by hand.\n{_how_to_get(folder)}") from err
        except ValueError as err:  # pooch: the downloaded file's hash does not match the registry
            raise DataError(f"downloaded {src} but its sha256 is wrong ({err}): the upstream file changed or the "
                            f"download was corrupted; nothing was kept. Try again, or get the files by hand.\n"
                            f"{_how_to_get(folder)}") from err
        except OSError as err:
            raise DataError(f"could not write {target}: {err}\n{_how_to_get(folder)}") from err
    return written


# ------------------------------------------------------------------------------------------- checks
def _names(splits) -> list[str]:
    if isinstance(splits, str):
        splits = (splits,)
    names = []
    for split in splits:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}: use one of {sorted(SPLITS)}")
        for lang in ("de", "en"):
            name = f"{SPLITS[split]}.{lang}.gz"
            if name not in names:
                names.append(name)
    return names


def _verified_files(names: list[str], data_dir, download: bool) -> tuple[list[Path], str]:
    """The paths of ``names``, present with the right sha256 (downloaded first where allowed)."""
    folder, source = _locate(data_dir)
    if source == "cache" and download:
        return download_multi30k(folder, names), source
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        offline = "" if source == "cache" else " (an offline copy: nothing is downloaded into it)"
        raise DataError(f"Multi30k file(s) {', '.join(missing)} not found in {folder}{offline}.\n"
                        f"{_how_to_get(folder)}")
    paths = [folder / n for n in names]
    for path in paths:
        expected, digest = MULTI30K_SHA256[path.name], _sha256(path)
        if digest != expected:
            raise DataError(f"{path} is corrupt or truncated (sha256 {digest[:12]}…, expected {expected[:12]}…). "
                            f"{_remedy(path, source, download)}\n{_how_to_get(folder)}")
    return paths, source


def check_multi30k(data_dir: str | os.PathLike | None = None, splits: Iterable[str] | str = ("train", "val"), *,
                   download: bool = True) -> list[Path]:
    """The verified paths of ``splits``' files (sha256, without reading the text: a command line stops at once on bad
    data); in the user cache, missing or corrupt files are first downloaded (``download``).

    Raises:
        ValueError: an unknown split. DataError: a file missing or corrupt (the message says how to fix it).
    """
    return _verified_files(_names(splits), data_dir, download)[0]


def _read_lines(path: Path, source: str, download: bool) -> list[str]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read().split("\n")[:-1]  # every line ends with "\n"
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise DataError(f"{path} cannot be decompressed ({err}). {_remedy(path, source, download)}\n"
                        f"{_how_to_get(path.parent)}") from err


def load_multi30k(split: str, data_dir: str | os.PathLike | None = None, *,
                  download: bool = True) -> list[tuple[str, str]]:
    """One split of Multi30k task 1 as ``(de, en)`` pairs: ``"train"`` (29,000), ``"val"`` (1,014), ``"test"`` /
    ``"test_2016_flickr"`` (1,000), from ``data_dir`` (its ``multi30k/*.gz``), ``$TMLIB_DATA_DIR`` or the user cache.

    Raises:
        ValueError: an unknown split.
        DataError: files missing, corrupt, truncated or of the wrong length (the message says how to fix it).
    """
    if not isinstance(split, str) or split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use one of {sorted(SPLITS)}")
    names = _names(split)
    (de_path, en_path), source = _verified_files(names, data_dir, download)
    n = MULTI30K_SIZES[SPLITS[split]]
    sides = []
    for path in (de_path, en_path):
        lines = _read_lines(path, source, download)
        if len(lines) != n:
            raise DataError(f"{path} has {len(lines)} lines, expected {n}. {_remedy(path, source, download)}\n"
                            f"{_how_to_get(path.parent)}")
        sides.append(lines)
    return list(zip(*sides))
