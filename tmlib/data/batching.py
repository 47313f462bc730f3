"""Token-count batches with length bucketing, and the iterator that trains on them.

The paper (§5.1): "Sentence pairs were batched together by approximate sequence length. Each training
batch contained a set of sentence pairs containing approximately 25000 source tokens and 25000 target
tokens." :func:`token_batches` groups example indices that way (fairseq/tensor2tensor style bucketing);
:func:`length_batches` is its deterministic, sorted form (evaluation, :func:`tmlib.decoding.corpus.translate_corpus`).

:class:`BatchIterator` stores the tokenized examples packed (all ids of all sources one after the other, and
where each example starts; see :mod:`tmlib.data.batch`), so that a padded :class:`~tmlib.data.batch.Batch` is a
few vectorised NumPy operations and one ``torch.from_numpy`` per tensor. The ids are checked once, on the host,
when the iterator is built (no empty source, ids in ``[0, vocab_size)``), so the model need not read them back
from a GPU. :meth:`BatchIterator.loader` runs the same batches through a ``torch.utils.data.DataLoader``: worker
processes build the batches while the model trains, and ``pin_memory=True`` puts them in page-locked memory so
that ``batch.to(device, non_blocking=True)`` overlaps the copy with computation.

Every order is deterministic: epoch ``e`` of a :class:`BatchIterator` with seed ``s`` always has the same
batches in the same order (``numpy.random.default_rng([s, e])``), which exact resume relies on.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence as SequenceABC
from typing import Sequence

import numpy as np

from tmlib.data.batch import Batch, check_ids, collate_flat, flatten_ids, gather_rows
from tmlib.validation import check_indices, check_int, check_int_array, check_token_id

__all__ = ["encode_pairs", "filter_by_length", "padding_fraction", "token_batches", "length_batches", "TokenBudgetBatches",
           "BatchIterator"]


# ----------------------------------------------------------------------------------------- examples
def encode_pairs(pairs: Sequence[tuple[str, str]], tokenizer) -> list[tuple[list[int], list[int]]]:
    """Tokenize ``(de, en)`` pairs into ``(src_ids, tgt_ids)`` (German source, English target).

    Args:
        pairs: sentence pairs (e.g. from :func:`tmlib.data.multi30k.load_multi30k`).
        tokenizer: a :class:`tmlib.data.tokenizer.BPETokenizer` (``encode_batch``).
    """
    src = tokenizer.encode_batch([de for de, _ in pairs])
    tgt = tokenizer.encode_batch([en for _, en in pairs])
    return list(zip(src, tgt))


def filter_by_length(examples, max_len: int):
    """Keep the examples whose source has 1 to ``max_len`` tokens and whose target, plus its ``<bos>``/
    ``<eos>``, fits in ``max_len`` (``len(tgt) + 1 <= max_len``). An empty source cannot be encoded.

    Raises:
        ValueError: ``max_len`` is not a positive integer.
    """
    max_len = check_int(max_len, "max_len", minimum=1)
    return [(s, t) for s, t in examples if 1 <= len(s) <= max_len and len(t) + 1 <= max_len]


# ----------------------------------------------------------------------------------------- batching
def _pack_greedy(order: np.ndarray, size: np.ndarray, max_tokens: int) -> list[list[int]]:
    """Cut ``order`` into consecutive batches with ``len(batch) × max(size) <= max_tokens`` (greedy)."""
    batches, cur, cur_max = [], [], 0
    sizes = size[order].tolist()
    for i, s in zip(order.tolist(), sizes):
        m = max(cur_max, s)
        if cur and (len(cur) + 1) * m > max_tokens:
            batches.append(cur)
            cur, m = [], s
        cur.append(i)
        cur_max = m
    if cur:
        batches.append(cur)
    return batches


def _sizes(lengths) -> np.ndarray:
    """The size of each example in :func:`token_batches`: ``max(src_len, tgt_len + 1)``."""
    if not np.size(lengths):
        return np.zeros(0, dtype=np.int64)
    arr = check_int_array(lengths, "lengths").astype(np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"lengths must be (src_len, tgt_len) pairs, shape (n, 2), got shape {arr.shape}")
    return np.maximum(arr[:, 0], arr[:, 1] + 1)


def length_batches(sizes: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices sorted by size (ties: by index), cut greedily into batches of at most ``max_tokens`` padded tokens
    (``k × largest size``; an example over the budget alone): deterministic, for evaluation and translation.

    Raises:
        TypeError: ``max_tokens`` or a size not an integer. ValueError: ``max_tokens`` < 1, ``sizes`` not 1-D.
    """
    max_tokens = check_int(max_tokens, "max_tokens", minimum=1)
    size = check_int_array(sizes, "sizes").astype(np.int64) if np.size(sizes) else np.zeros(0, dtype=np.int64)
    if size.ndim != 1:
        raise ValueError(f"sizes must be 1-D (one size per example), got shape {size.shape}")
    return _pack_greedy(np.argsort(size, kind="stable"), size, max_tokens)


def padding_fraction(batches: Sequence[Sequence[int]], lengths: Sequence[tuple[int, int]]) -> float:
    """Share of padding among all the positions the model reads: the ``src`` and ``tgt_in`` tensors of every
    batch (:func:`tmlib.data.batch.collate`), summed over ``batches`` (lists of example indices into ``lengths``,
    ``(src_len, tgt_len)`` pairs). A batch's ``src`` is ``(batch, longest source)``, its ``tgt_in`` ``(batch,
    longest target + 1)`` (``<bos>`` first); each example fills ``src_len`` and ``tgt_len + 1`` of them.

    Raises:
        ValueError: ``lengths`` not ``(n, 2)`` pairs, or no batches.
    """
    arr = np.asarray(lengths, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"lengths must be (src_len, tgt_len) pairs, shape (n, 2), got shape {arr.shape}")
    src, tgt_in = arr[:, 0], arr[:, 1] + 1  # the positions of each example in src and in tgt_in
    batches = [np.asarray(b, dtype=np.int64) for b in batches if len(b)]
    if not batches:
        raise ValueError("padding_fraction needs at least one non-empty batch")
    real = sum(int(src[b].sum() + tgt_in[b].sum()) for b in batches)
    total = sum(len(b) * int(src[b].max() + tgt_in[b].max()) for b in batches)
    return float(1 - real / total)


def token_batches(lengths: Sequence[tuple[int, int]], max_tokens: int, *, shuffle: bool = True, seed: int = 0,
                  epoch: int = 0, chunk_size: int = 100) -> list[list[int]]:
    """Example indices in batches of about ``max_tokens`` padded tokens, bucketed by length (fairseq, tensor2tensor):
    shuffle, cut into chunks of ``chunk_size`` batches' worth, sort each chunk by length, fill greedily while
    ``len(batch) × max(src_len, tgt_len + 1) ≤ max_tokens``, shuffle the batches; all randomness from
    ``default_rng([seed, epoch])`` (exact resume). ``shuffle=False``: :func:`length_batches`. ``lengths``: ``(src_len,
    tgt_len)`` pairs or an ``(n, 2)`` array.

    Raises:
        TypeError: a setting or length not an integer.
        ValueError: ``max_tokens``/``chunk_size`` < 1, ``seed``/``epoch`` negative, ``lengths`` not pairs.
    """
    max_tokens = check_int(max_tokens, "max_tokens", minimum=1)
    chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    seed, epoch = check_int(seed, "seed", minimum=0), check_int(epoch, "epoch", minimum=0)
    size = _sizes(lengths)
    n = len(size)
    if not shuffle:
        return length_batches(size, max_tokens)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(n)
    per_batch = max(1, int(max_tokens // max(1.0, float(size.mean()) if n else 1.0)))
    chunk = per_batch * chunk_size
    pieces = [order[i : i + chunk] for i in range(0, n, chunk)]
    order = np.concatenate([p[np.argsort(size[p], kind="stable")] for p in pieces]) if pieces else order
    batches = _pack_greedy(order, size, max_tokens)
    perm = rng.permutation(len(batches))
    return [batches[j] for j in perm]


class TokenBudgetBatches:
    """Epochs of padded batches of about ``max_tokens`` tokens, planned by :func:`token_batches`: the settings (checked
    once), the plan of epoch e (``batches(e)``, deterministic per seed and epoch) and its batches, here (:meth:`epoch`)
    or through a ``DataLoader`` (:meth:`loader`). A subclass gives the sizes (:meth:`size_pairs`) and the padding
    (:meth:`collate_indices`).

    Raises:
        TypeError: a setting not an integer. ValueError: a setting out of range, a special id outside the vocabulary.
    """

    def __init__(self, max_tokens: int, *, shuffle: bool, seed: int, pad_id: int, bos_id: int, eos_id: int,
                 chunk_size: int = 100, vocab_size: int | None = None):
        self.max_tokens = check_int(max_tokens, "max_tokens", minimum=1)
        self.chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
        self.seed = check_int(seed, "seed", minimum=0)
        self.shuffle = bool(shuffle)
        self.vocab_size = check_int(vocab_size, "vocab_size", minimum=1, allow_none=True)
        self.pad_id, self.bos_id, self.eos_id = (check_token_id(v, n, self.vocab_size) for v, n in
                                                 ((pad_id, "pad_id"), (bos_id, "bos_id"), (eos_id, "eos_id")))
        self._cache: tuple[int, list[list[int]]] | None = None

    @classmethod
    def _non_empty(cls, items, what: str) -> Sequence:
        """``items`` as a sequence (an iterator is read into a list); refused, naming the class, when empty."""
        if not isinstance(items, SequenceABC):
            items = list(items)
        if not items:
            raise ValueError(f"{cls.__name__} needs at least one {what}")
        return items

    def size_pairs(self) -> np.ndarray:
        """``(n, 2)`` int64: the two lengths :func:`token_batches` sizes each example by."""
        raise NotImplementedError

    def collate_indices(self, idx: Sequence[int]) -> Batch:
        """The padded :class:`~tmlib.data.batch.Batch` of the examples ``idx``."""
        raise NotImplementedError

    def batches(self, epoch: int = 0) -> list[list[int]]:
        """Index lists of epoch ``epoch`` (the last epoch asked for is cached)."""
        if self._cache is None or self._cache[0] != epoch:
            self._cache = (epoch, token_batches(self.size_pairs(), self.max_tokens, shuffle=self.shuffle,
                                                seed=self.seed, epoch=epoch, chunk_size=self.chunk_size))
        return self._cache[1]

    def __len__(self) -> int:
        return len(self.batches(0))

    def _remaining(self, epoch: int, start: int) -> list[list[int]]:
        epoch = check_int(epoch, "epoch", minimum=0)
        start = check_int(start, "start", minimum=0)
        batches = self.batches(epoch)
        if start > len(batches):
            raise ValueError(f"start={start} is past the end of epoch {epoch}, which has {len(batches)} batches")
        return batches[start:]

    def epoch(self, epoch: int = 0, start: int = 0):
        """Yield the padded batches of ``epoch`` from batch index ``start`` on (in this process).

        Raises:
            TypeError: ``epoch``/``start`` not integers.
            ValueError: ``epoch``/``start`` negative, or ``start`` > the number of batches.
        """
        for idx in self._remaining(epoch, start):
            yield self.collate_indices(idx)

    def __iter__(self):
        return self.epoch(0)

    def loader(self, epoch: int = 0, start: int = 0, *, index_lists: list[list[int]] | None = None,
               num_workers: int = 0, pin_memory: bool = False, prefetch_factor: int | None = None):
        """The batches of :meth:`epoch` (or of ``index_lists``), in that order, through a ``DataLoader`` whose
        workers only collate (``batch_size=None``: no re-batching, no sampling). It has its own random generator:
        iterating it leaves torch's global one (dropout) untouched.

        Args:
            epoch, start: as in :meth:`epoch`; index_lists: the batches to collate instead.
            num_workers: worker processes building batches ahead (0: in this process).
            pin_memory: batches in pinned memory, for ``batch.to("cuda", non_blocking=True)`` (with a GPU).
            prefetch_factor: batches each worker builds ahead (needs ``num_workers`` >= 1; torch's default 2).

        Raises:
            TypeError: an argument that is not an integer.
            ValueError: bad ``epoch``/``start``/``num_workers``/``prefetch_factor``.
        """
        import torch
        from torch.utils.data import DataLoader

        num_workers = check_int(num_workers, "num_workers", minimum=0)
        prefetch_factor = check_int(prefetch_factor, "prefetch_factor", minimum=1, allow_none=True)
        if prefetch_factor is not None and num_workers == 0:
            raise ValueError(f"prefetch_factor={prefetch_factor} needs num_workers >= 1 (got 0)")
        dataset = _EpochBatches(self, self._remaining(epoch, start) if index_lists is None else index_lists)
        return DataLoader(dataset, batch_size=None, shuffle=False, num_workers=num_workers,
                          pin_memory=bool(pin_memory), prefetch_factor=prefetch_factor,
                          generator=torch.Generator().manual_seed(0))


class _EpochBatches:
    """Map-style dataset for ``DataLoader(batch_size=None)``: item ``k`` is the ``k``-th padded batch."""

    def __init__(self, source: TokenBudgetBatches, batches: list[list[int]]):
        self.source, self.batches = source, batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, k: int) -> Batch:
        return self.source.collate_indices(self.batches[k])


class BatchIterator(TokenBudgetBatches):
    """Epochs of padded :class:`~tmlib.data.batch.Batch` es of ``(src_ids, tgt_ids)`` pairs, deterministic per seed
    and epoch. The ids are stored packed (flat int32 arrays and int64 offsets), so a batch is a vectorised gather and
    pad (:meth:`collate_indices`); they are checked once, here. ``it.epoch(e, start=k)`` resumes an epoch.

    Raises:
        TypeError: a setting not an integer.
        ValueError: no examples, an empty source, an id negative or ``>= vocab_size``, bad settings.
    """

    def __init__(self, examples, max_tokens: int = 4096, *, shuffle: bool = True, seed: int = 0,
                 pad_id: int = 0, bos_id: int = 1, eos_id: int = 2, chunk_size: int = 100,
                 vocab_size: int | None = None):
        examples = self._non_empty(examples, "example")
        super().__init__(max_tokens, shuffle=shuffle, seed=seed, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id,
                         chunk_size=chunk_size, vocab_size=vocab_size)
        src_flat, src_len = flatten_ids([s for s, _ in examples])
        tgt_flat, tgt_len = flatten_ids([t for _, t in examples])
        check_ids(src_flat, src_len, tgt_flat, self.vocab_size, where=" in BatchIterator's examples")
        dtype = np.int32 if max(src_flat.max(initial=0), tgt_flat.max(initial=0)) < 2**31 else np.int64
        self.src_flat, self.tgt_flat = src_flat.astype(dtype), tgt_flat.astype(dtype)
        self.src_offsets = np.concatenate([[0], np.cumsum(src_len)]).astype(np.int64)
        self.tgt_offsets = np.concatenate([[0], np.cumsum(tgt_len)]).astype(np.int64)

    @property
    def num_examples(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """``(num_examples, 2)`` int64: ``(src_len, tgt_len)`` of each example."""
        return np.stack([np.diff(self.src_offsets), np.diff(self.tgt_offsets)], axis=1)

    def size_pairs(self) -> np.ndarray:
        return self.lengths

    @property
    def examples(self) -> list[tuple[list[int], list[int]]]:
        """The examples as ``(src_ids, tgt_ids)`` lists (rebuilt from the packed arrays: for inspection)."""
        return [(self.src_flat[self.src_offsets[i]:self.src_offsets[i + 1]].tolist(),
                 self.tgt_flat[self.tgt_offsets[i]:self.tgt_offsets[i + 1]].tolist())
                for i in range(self.num_examples)]

    def collate_indices(self, idx: Sequence[int]) -> Batch:
        """The padded :class:`~tmlib.data.batch.Batch` of the examples ``idx`` (vectorised gather and pad, no
        per-example loop).

        Raises:
            TypeError: the indices are not integers.
            ValueError: ``idx`` is empty, or an index is out of range.
        """
        idx = check_indices(idx, self.num_examples, "collate_indices", "example")
        src_flat, src_len = gather_rows(self.src_flat, self.src_offsets, idx)
        tgt_flat, tgt_len = gather_rows(self.tgt_flat, self.tgt_offsets, idx)
        return collate_flat(src_flat, src_len, tgt_flat, tgt_len, self.pad_id, self.bos_id, self.eos_id)

    def n_tokens_of(self, idx: Sequence[int]) -> int:
        """The labels of the batch of examples ``idx``, i.e. ``collate_indices(idx).n_tokens`` (target tokens
        plus one ``<eos>`` per sentence), without building the batch.

        Data-parallel training uses it to know the tokens of a whole optimizer step, whose batches are spread
        over the processes, from the batch plan alone (every process knows it), without communicating.

        Raises:
            TypeError: the indices are not integers.
            ValueError: ``idx`` is empty, or an index is out of range.
        """
        idx = check_indices(idx, self.num_examples, "n_tokens_of", "example")
        return int((self.tgt_offsets[idx + 1] - self.tgt_offsets[idx]).sum()) + int(idx.size)

    def fingerprint(self) -> str:
        """A SHA-256 (hex) of everything that decides the batches: the examples' ids and the settings
        (``max_tokens``, ``shuffle``, ``seed``, ``chunk_size``, special ids). Two iterators with the same
        fingerprint produce the same batches in every epoch; data-parallel processes compare it."""
        h = hashlib.sha256(repr((self.max_tokens, self.shuffle, self.seed, self.chunk_size, self.pad_id,
                                 self.bos_id, self.eos_id)).encode())
        for arr in (self.src_flat, self.src_offsets, self.tgt_flat, self.tgt_offsets):
            h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        return h.hexdigest()

    def n_target_tokens(self) -> int:
        """Labels per epoch (target tokens + one ``<eos>`` per sentence)."""
        return int(self.tgt_offsets[-1]) + self.num_examples
