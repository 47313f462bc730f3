"""Data for the translation experiment: Multi30k German→English, a shared BPE tokenizer and
token-count batches with length bucketing.

The course trains on Multi30k task 1 (Elliott et al. 2016; Flickr30k image descriptions with German
translations): 29,000 training pairs, 1,014 validation pairs and the 1,000 pairs of "test 2016 flickr".
The paper (§5.1) trains on WMT 2014 with "sentence pairs batched together by approximate sequence
length", each batch holding about 25,000 source and 25,000 target tokens; we keep the idea (token-count
batches, length bucketing) at a size that fits a CPU.

Where the data comes from, in this order:

1. the ``data_dir`` argument of :func:`load_multi30k` (a folder holding ``multi30k/<split>.<lang>.gz``,
   or the ``multi30k`` folder itself);
2. the environment variable ``TMLIB_DATA_DIR`` (same layout; the course's CI points it at
   ``../shared/data``);
3. a per-user cache, ``platformdirs.user_cache_dir("tmlib")/multi30k``, where missing files are
   downloaded from :data:`MULTI30K_URL` (written to a temporary file, then renamed: atomic).

Every load checks each file's sha256 against :data:`MULTI30K_SHA256` (the upstream files), that it
decompresses, and that the German and English sides have the expected number of lines.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .utils import atomic_write

__all__ = [
    "MULTI30K_URL",
    "MULTI30K_FILES",
    "MULTI30K_SHA256",
    "MULTI30K_SIZES",
    "SPLITS",
    "DataError",
    "load_multi30k",
    "multi30k_dir",
    "download_multi30k",
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "SPECIAL_TOKENS",
    "BPETokenizer",
    "train_tokenizer",
    "Batch",
    "collate",
    "encode_pairs",
    "filter_by_length",
    "token_batches",
    "BatchIterator",
]

# --------------------------------------------------------------------------------------------------
# Multi30k files
# --------------------------------------------------------------------------------------------------

#: Upstream location of the raw task-1 files (github.com/multi30k/dataset, data/task1/raw/).
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{name}"

#: split -> file stem: ``<stem>.de.gz`` and ``<stem>.en.gz``.
SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr", "test_2016_flickr": "test_2016_flickr"}

#: Number of sentence pairs of each split.
MULTI30K_SIZES = {"train": 29000, "val": 1014, "test_2016_flickr": 1000}

#: sha256 of the six upstream ``.gz`` files (computed from the files served at MULTI30K_URL).
MULTI30K_SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
}

MULTI30K_FILES = tuple(MULTI30K_SHA256)


class DataError(RuntimeError):
    """The Multi30k data is missing, corrupt or truncated; the message says how to fix it."""


def _how_to_get(folder: Path | None = None) -> str:
    where = f"\n  (looked in: {folder})" if folder is not None else ""
    return (
        "How to get the data:\n"
        f"  * download the six files {', '.join(MULTI30K_FILES)}\n"
        f"    from {MULTI30K_URL.format(name='<name>')}\n"
        "    into a folder <DIR>/multi30k/ and set the environment variable TMLIB_DATA_DIR=<DIR>\n"
        "    (or pass data_dir=<DIR> to load_multi30k); or\n"
        "  * run once with internet access: the files are downloaded to the user cache\n"
        f"    ({_cache_dir()}).{where}"
    )


def _cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("tmlib")) / "multi30k"


def _resolve(folder: str | os.PathLike) -> Path:
    """Accept both ``<DIR>`` (holding ``multi30k/``) and ``<DIR>/multi30k``."""
    p = Path(folder).expanduser()
    return p / "multi30k" if (p / "multi30k").is_dir() or p.name != "multi30k" else p


def multi30k_dir(data_dir: str | os.PathLike | None = None) -> tuple[Path, bool]:
    """The folder the files are read from, and whether missing files may be downloaded into it.

    Args:
        data_dir: explicit folder (``<DIR>`` or ``<DIR>/multi30k``), or ``None``.

    Returns:
        ``(folder, may_download)``: ``data_dir`` or ``$TMLIB_DATA_DIR`` (never downloaded into: a
        user-managed copy), else the user cache folder (downloads allowed).
    """
    if data_dir is not None:
        return _resolve(data_dir), False
    env = os.environ.get("TMLIB_DATA_DIR")
    if env:
        return _resolve(env), False
    return _cache_dir(), True


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download_multi30k(folder: str | os.PathLike, names: Iterable[str] = MULTI30K_FILES,
                      url: str | None = None, timeout: float = 30.0) -> list[Path]:
    """Download Multi30k files into ``folder`` (atomic: temporary file in the same folder, then rename).

    Args:
        folder: destination folder (created if needed).
        names: file names among :data:`MULTI30K_FILES`.
        url: URL template with a ``{name}`` field; default :data:`MULTI30K_URL`.
        timeout: seconds per request.

    Returns:
        The paths written.

    Raises:
        DataError: no network, an HTTP error, or a downloaded file whose sha256 is wrong (nothing is
            left behind in that case).
    """
    url = url or MULTI30K_URL
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        target = folder / name
        src = url.format(name=name)
        try:
            with atomic_write(target, suffix=".part") as tmp:
                with open(tmp, "wb") as out, urllib.request.urlopen(src, timeout=timeout) as resp:
                    while block := resp.read(1 << 20):
                        out.write(block)
                digest = _sha256(tmp)
                if digest != MULTI30K_SHA256[name]:
                    raise DataError(f"downloaded {src} but its sha256 is {digest}, expected "
                                    f"{MULTI30K_SHA256[name]}: the upstream file changed or the download was "
                                    f"corrupted. Try again, or get the files by hand.\n{_how_to_get(folder)}")
            written.append(target)
        except (urllib.error.URLError, OSError) as err:
            raise DataError(f"could not download {src}: {err}\n{_how_to_get(folder)}") from err
    return written


def _read_lines(path: Path) -> list[str]:
    expected = MULTI30K_SHA256[path.name]
    digest = _sha256(path)
    if digest != expected:
        raise DataError(f"{path} is corrupt or truncated (sha256 {digest[:12]}…, expected {expected[:12]}…). "
                        f"Delete it and load again to re-download it, or set TMLIB_DATA_DIR to a folder "
                        f"holding a good copy.\n{_how_to_get(path.parent)}")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read().split("\n")[:-1]  # every line ends with "\n"
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise DataError(f"{path} cannot be decompressed ({err}). Delete it and load again to re-download "
                        f"it.\n{_how_to_get(path.parent)}") from err


def load_multi30k(split: str, data_dir: str | os.PathLike | None = None, *,
                  download: bool = True) -> list[tuple[str, str]]:
    """Load one split of Multi30k task 1 as (German, English) sentence pairs.

    Args:
        split: ``"train"`` (29,000 pairs), ``"val"`` (1,014) or ``"test"`` / ``"test_2016_flickr"`` (1,000).
        data_dir: folder holding ``multi30k/*.gz`` (or the ``multi30k`` folder itself); default:
            ``$TMLIB_DATA_DIR``, else the user cache (see the module docstring).
        download: allow downloading missing files into the user cache.

    Returns:
        ``list[tuple[str, str]]``: ``(de, en)`` pairs, raw text without the trailing newline.

    Raises:
        ValueError: unknown split.
        DataError: files missing (and not downloadable), corrupt, truncated, or the two sides
            disagree in length; the message names the file and says how to fix it.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use one of {sorted(SPLITS)}")
    stem = SPLITS[split]
    folder, may_download = multi30k_dir(data_dir)
    names = [f"{stem}.de.gz", f"{stem}.en.gz"]
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        if not (may_download and download):
            raise DataError(f"Multi30k file(s) {', '.join(missing)} not found in {folder}.\n"
                            f"{_how_to_get(folder)}")
        download_multi30k(folder, missing)
    de, en = (_read_lines(folder / n) for n in names)
    n = MULTI30K_SIZES[stem]
    for name, lines in zip(names, (de, en)):
        if len(lines) != n:
            raise DataError(f"{folder / name} has {len(lines)} lines, expected {n}. Delete it and load again "
                            f"to re-download it.\n{_how_to_get(folder)}")
    return list(zip(de, en))


# --------------------------------------------------------------------------------------------------
# Tokenizer: one shared BPE vocabulary for German and English
# --------------------------------------------------------------------------------------------------

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
#: The special tokens, with ids 0, 1, 2, 3 in this order (``pad_id`` = 0).
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)


class BPETokenizer:
    """A shared German–English BPE tokenizer (HF ``tokenizers``) with the course's special tokens.

    Pre-tokenization: Unicode NFKC, then ``Metaspace`` (each space becomes ``▁`` glued to the next
    word) and punctuation split off; the ``Metaspace`` decoder turns ``▁`` back into spaces, so
    ``decode(encode(s)) == s`` for any text of single-spaced words whose characters were seen in
    training. BLEU is therefore computed on real, detokenized text.

    Attributes:
        tokenizer: the underlying ``tokenizers.Tokenizer``.
        pad_id, bos_id, eos_id, unk_id: 0, 1, 2, 3.
        vocab_size: number of ids (including the four special tokens).
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        ids = [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS]
        if ids != [0, 1, 2, 3]:
            raise ValueError(f"special tokens {SPECIAL_TOKENS} must have ids 0..3, got {ids}")
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = ids

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no ``<bos>``/``<eos>``: :func:`collate` adds them)."""
        return self.tokenizer.encode(text).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` for many texts (parallel in Rust)."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def tokens(self, text: str) -> list[str]:
        """The subword strings of ``text`` (``▁`` marks the start of a word)."""
        return self.tokenizer.encode(text).tokens

    def decode(self, ids: Iterable[int]) -> str:
        """Plain text from ids: stops at the first ``<eos>``, drops ``<pad>``/``<bos>``, detokenizes.

        Args:
            ids: a sequence of ints or a 1-D integer tensor/array.
        """
        out = []
        for i in (int(i) for i in ids):
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                out.append(i)
        return self.tokenizer.decode(out, skip_special_tokens=False)

    def decode_batch(self, rows) -> list[str]:
        """:meth:`decode` for each row of a 2-D array/tensor or a list of id lists."""
        return [self.decode(r) for r in rows]

    def to_json(self) -> str:
        """The whole tokenizer as a JSON string (stored in checkpoints)."""
        return self.tokenizer.to_str()

    @classmethod
    def from_json(cls, text: str) -> "BPETokenizer":
        """Inverse of :meth:`to_json`."""
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(text))

    def save(self, path: str | os.PathLike) -> None:
        """Write the JSON to ``path`` atomically."""
        _atomic_write_text(Path(path), self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "BPETokenizer":
        """Read a tokenizer written by :meth:`save`."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size})"


def _atomic_write_text(path: Path, text: str) -> None:
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def train_tokenizer(pairs: Sequence[tuple[str, str]], vocab_size: int = 8000, min_frequency: int = 2
                    ) -> BPETokenizer:
    """Learn a shared BPE vocabulary on both sides of the training pairs.

    One vocabulary serves German and English (as in the paper, §5.1, whose EN-DE model uses a shared
    source-target vocabulary of about 37,000 tokens), which lets the model tie its embeddings. For
    Multi30k (29,000 short sentences, ~10,000 distinct German and ~6,000 English words) 8,000 merges
    keep almost every frequent word whole, split rare words and compounds into a few pieces, and keep
    the output softmax small enough for a CPU.

    Deterministic: the same pairs and arguments give the same vocabulary.

    Args:
        pairs: ``(de, en)`` sentence pairs; use the training split only.
        vocab_size: total number of ids including the 4 special tokens.
        min_frequency: merges must occur at least this often.

    Returns:
        :class:`BPETokenizer` with ``<pad>``=0, ``<bos>``=1, ``<eos>``=2, ``<unk>``=3.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed {len(SPECIAL_TOKENS)}, got {vocab_size}")
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        pre_tokenizers.Punctuation(behavior="isolated"),
    ])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(SPECIAL_TOKENS), show_progress=False)

    def texts():
        for de, en in pairs:
            yield de
            yield en

    tok.train_from_iterator(texts(), trainer=trainer, length=2 * len(pairs))
    return BPETokenizer(tok)


# --------------------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------------------

@dataclass
class Batch:
    """One padded batch of sentence pairs (teacher forcing).

    Attributes:
        src: ``(batch, src_len)`` int64, source ids padded with ``pad_id`` (no ``<bos>``/``<eos>``).
        tgt_in: ``(batch, tgt_len)`` int64, decoder input ``<bos> y_1 … y_m`` then padding.
        tgt_out: ``(batch, tgt_len)`` int64, labels ``y_1 … y_m <eos>`` then padding: ``tgt_in``
            shifted left by one (paper §3: "the output embeddings are offset by one position").
        n_tokens: number of non-pad labels in ``tgt_out`` (the loss is averaged over them).
    """

    src: "object"
    tgt_in: "object"
    tgt_out: "object"
    n_tokens: int

    def to(self, device) -> "Batch":
        """The batch on ``device`` (non-blocking copies)."""
        return Batch(self.src.to(device, non_blocking=True), self.tgt_in.to(device, non_blocking=True),
                     self.tgt_out.to(device, non_blocking=True), self.n_tokens)

    def __len__(self) -> int:
        return int(self.src.shape[0])


def collate(examples: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int = 0, bos_id: int = 1,
            eos_id: int = 2) -> Batch:
    """Pad a list of ``(src_ids, tgt_ids)`` into a :class:`Batch`.

    Args:
        examples: token-id lists without special tokens; at least one.
        pad_id, bos_id, eos_id: special ids (0, 1, 2 with :class:`BPETokenizer`).

    Returns:
        :class:`Batch` whose ``src`` is ``(B, max src len)`` and ``tgt_in``/``tgt_out`` are
        ``(B, max tgt len + 1)``, all int64.
    """
    import torch

    if not examples:
        raise ValueError("collate needs at least one example")
    b = len(examples)
    s_len = max(len(s) for s, _ in examples)
    t_len = max(len(t) for _, t in examples) + 1
    src = torch.full((b, max(s_len, 1)), pad_id, dtype=torch.int64)
    tgt_in = torch.full((b, t_len), pad_id, dtype=torch.int64)
    tgt_out = torch.full((b, t_len), pad_id, dtype=torch.int64)
    n_tokens = 0
    for i, (s, t) in enumerate(examples):
        src[i, : len(s)] = torch.as_tensor(s, dtype=torch.int64)
        tgt_in[i, 0] = bos_id
        tgt_in[i, 1 : len(t) + 1] = torch.as_tensor(t, dtype=torch.int64)
        tgt_out[i, : len(t)] = torch.as_tensor(t, dtype=torch.int64)
        tgt_out[i, len(t)] = eos_id
        n_tokens += len(t) + 1
    return Batch(src, tgt_in, tgt_out, n_tokens)


def encode_pairs(pairs: Sequence[tuple[str, str]], tokenizer: BPETokenizer) -> list[tuple[list[int], list[int]]]:
    """Tokenize ``(de, en)`` pairs into ``(src_ids, tgt_ids)`` (German source, English target)."""
    src = tokenizer.encode_batch([de for de, _ in pairs])
    tgt = tokenizer.encode_batch([en for _, en in pairs])
    return list(zip(src, tgt))


def filter_by_length(examples, max_len: int):
    """Keep the examples whose source and target (+1 for the special token) fit in ``max_len`` tokens."""
    return [(s, t) for s, t in examples if len(s) <= max_len and len(t) + 1 <= max_len]


def token_batches(lengths: Sequence[tuple[int, int]], max_tokens: int, *, shuffle: bool = True, seed: int = 0,
                  epoch: int = 0, chunk_size: int = 100) -> list[list[int]]:
    """Group example indices into batches of about ``max_tokens`` padded tokens, bucketed by length.

    The recipe (fairseq/tensor2tensor style): shuffle the examples, cut them into chunks of
    ``chunk_size × (typical batch size)`` examples, sort each chunk by length so that a batch holds
    sentences of similar length (little padding), fill batches greedily while
    ``len(batch) × max(src_len, tgt_len + 1) ≤ max_tokens``, then shuffle the order of the batches.
    Randomness comes only from ``numpy.random.default_rng([seed, epoch])``: the same seed and epoch give
    the same batches (needed for exact resume), another epoch gives another order.

    Args:
        lengths: ``(src_len, tgt_len)`` of each example (tokens, without special tokens).
        max_tokens: budget of padded tokens per batch (on the longer side); an example longer than
            the budget gets a batch of its own.
        shuffle: ``False`` gives a fixed order sorted by length (validation).
        seed, epoch: seed the shuffling.
        chunk_size: sorting happens within chunks of ``chunk_size`` batches' worth of examples
            (large: little padding; the randomness across chunks keeps the batches varied).

    Returns:
        ``list[list[int]]``: every index exactly once.
    """
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    n = len(lengths)
    size = np.array([max(s, t + 1) for s, t in lengths], dtype=np.int64).reshape(n)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(n) if shuffle else np.arange(n)
    if shuffle:
        per_batch = max(1, int(max_tokens // max(1.0, float(size.mean()) if n else 1.0)))
        chunk = per_batch * chunk_size
        pieces = [order[i : i + chunk] for i in range(0, n, chunk)]
        order = np.concatenate([p[np.argsort(size[p], kind="stable")] for p in pieces]) if pieces else order
    else:
        order = order[np.argsort(size[order], kind="stable")]
    batches, cur, cur_max = [], [], 0
    for i in order.tolist():
        m = max(cur_max, int(size[i]))
        if cur and (len(cur) + 1) * m > max_tokens:
            batches.append(cur)
            cur, m = [], int(size[i])
        cur.append(i)
        cur_max = m
    if cur:
        batches.append(cur)
    if shuffle:
        perm = rng.permutation(len(batches))
        batches = [batches[j] for j in perm]
    return batches


class BatchIterator:
    """Epochs of padded :class:`Batch` es over tokenized examples (deterministic given seed and epoch).

    Args:
        examples: ``(src_ids, tgt_ids)`` lists (from :func:`encode_pairs`).
        max_tokens: padded-token budget per batch (see :func:`token_batches`).
        shuffle: bucketed random order (training) or sorted fixed order (evaluation).
        seed: base seed; epoch ``e`` uses ``default_rng([seed, e])``.
        pad_id, bos_id, eos_id: special ids.

    Use ``len(it.batches(epoch))`` for the number of batches and ``it.epoch(e, start=k)`` to iterate
    epoch ``e`` from its ``k``-th batch on (resume).
    """

    def __init__(self, examples, max_tokens: int = 4096, *, shuffle: bool = True, seed: int = 0,
                 pad_id: int = 0, bos_id: int = 1, eos_id: int = 2, chunk_size: int = 100):
        if not examples:
            raise ValueError("BatchIterator needs at least one example")
        self.examples = list(examples)
        self.max_tokens, self.shuffle, self.seed, self.chunk_size = max_tokens, shuffle, seed, chunk_size
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self._lengths = [(len(s), len(t)) for s, t in self.examples]
        self._cache: tuple[int, list[list[int]]] | None = None

    def batches(self, epoch: int = 0) -> list[list[int]]:
        """Index lists of epoch ``epoch``."""
        if self._cache is None or self._cache[0] != epoch:
            self._cache = (epoch, token_batches(self._lengths, self.max_tokens, shuffle=self.shuffle,
                                                seed=self.seed, epoch=epoch, chunk_size=self.chunk_size))
        return self._cache[1]

    def __len__(self) -> int:
        return len(self.batches(0))

    def collate_indices(self, idx: Sequence[int]) -> Batch:
        """The padded :class:`Batch` of the examples ``idx``."""
        return collate([self.examples[i] for i in idx], self.pad_id, self.bos_id, self.eos_id)

    def epoch(self, epoch: int = 0, start: int = 0):
        """Yield the padded batches of ``epoch`` from batch index ``start`` on."""
        for idx in self.batches(epoch)[start:]:
            yield self.collate_indices(idx)

    def __iter__(self):
        return self.epoch(0)

    def n_target_tokens(self) -> int:
        """Labels per epoch (target tokens + one ``<eos>`` per sentence)."""
        return sum(t + 1 for _, t in self._lengths)
