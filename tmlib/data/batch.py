"""A padded batch of sentence pairs, built on the host with NumPy, ready for a GPU (teacher forcing, paper §3).

:func:`collate` pads a list of tokenized ``(source, target)`` pairs into a :class:`Batch`: the source, the decoder
input ``<bos> y_1 … y_m`` and the labels ``y_1 … y_m <eos>``, each padded to the longest sentence. The examples are
first *packed*: all ids one after the other in one flat array and the length of each sequence, so that padding a
batch is a few vectorised NumPy operations and one ``torch.from_numpy`` per tensor, with no loop over sentences.
:class:`tmlib.data.batching.BatchIterator` keeps a whole corpus packed this way and builds each batch from it.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tmlib.validation import check_token_id

__all__ = ["Batch", "collate", "pad_ids"]


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

    def to(self, device, non_blocking: bool = True) -> "Batch":
        """The batch on ``device``.

        Args:
            device: a ``torch.device`` or its name.
            non_blocking: asynchronous host-to-GPU copies; they overlap with computation when the tensors
                are pinned (:meth:`pin_memory`, or ``BatchIterator.loader(..., pin_memory=True)``).
        """
        return Batch(self.src.to(device, non_blocking=non_blocking),
                     self.tgt_in.to(device, non_blocking=non_blocking),
                     self.tgt_out.to(device, non_blocking=non_blocking), self.n_tokens)

    def pin_memory(self) -> "Batch":
        """The batch in page-locked (pinned) host memory; ``DataLoader(pin_memory=True)`` calls this.

        Raises:
            RuntimeError: (torch) no accelerator is available to pin memory for.
        """
        return Batch(self.src.pin_memory(), self.tgt_in.pin_memory(), self.tgt_out.pin_memory(), self.n_tokens)

    def __len__(self) -> int:
        return int(self.src.shape[0])


# ----------------------------------------------------------------------------------------- packing
def flatten_ids(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(flat, lengths)``: all ids one after the other (int64) and the length of each sequence (int64)."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum()))
    return flat, lengths


def gather_rows(flat: np.ndarray, offsets: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ids of sequences ``idx`` of a packed array, one after the other, and their lengths."""
    starts, lengths = offsets[idx], offsets[idx + 1] - offsets[idx]
    before = np.cumsum(lengths) - lengths  # where each sequence starts in the output
    positions = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - before, lengths)
    return flat[positions], lengths


def _pad(flat: np.ndarray, lengths: np.ndarray, width: int, pad_id: int) -> np.ndarray:
    """Rows ``(len(lengths), width)`` int64: row i holds its ``lengths[i]`` ids, then ``pad_id``."""
    out = np.full((len(lengths), width), pad_id, dtype=np.int64)
    out[np.arange(width) < lengths[:, None]] = flat  # the mask's row-major order is the order of the ids
    return out


def check_ids(src_flat, src_len, tgt_flat, vocab_size: int | None, where: str = "") -> None:
    """Host-side checks: no empty source, ids non-negative and (with ``vocab_size``) below it."""
    if src_len.size and src_len.min() == 0:
        empty = np.flatnonzero(src_len == 0)
        shown = ", ".join(map(str, empty[:5].tolist())) + (", ..." if len(empty) > 5 else "")
        raise ValueError(f"{len(empty)} example(s) have an empty source{where} (indices {shown}): a source of "
                         f"only padding cannot be encoded (its attention has no key to attend to); drop them, "
                         f"e.g. with filter_by_length")
    for name, flat in (("source", src_flat), ("target", tgt_flat)):
        if not flat.size:
            continue
        lo, hi = int(flat.min()), int(flat.max())
        if lo < 0:
            raise ValueError(f"{name} ids{where} contain {lo}: token ids must be non-negative")
        if vocab_size is not None and hi >= vocab_size:
            raise ValueError(f"{name} ids{where} contain {hi}, outside the vocabulary [0, {vocab_size})")


def collate_flat(src_flat, src_len, tgt_flat, tgt_len, pad_id: int, bos_id: int, eos_id: int) -> Batch:
    """The :class:`Batch` of packed examples (see :func:`collate`)."""
    import torch

    b, t_max = len(src_len), int(tgt_len.max())
    src = _pad(src_flat, src_len, int(src_len.max()), pad_id)  # (batch, src_len)
    words = np.arange(t_max) < tgt_len[:, None]  # (batch, tgt_len - 1): where y_1 … y_m go
    tgt_out = np.full((b, t_max + 1), pad_id, dtype=np.int64)  # (batch, tgt_len): y_1 … y_m <eos>
    tgt_out[:, :t_max][words] = tgt_flat
    tgt_out[np.arange(b), tgt_len] = eos_id
    tgt_in = np.full((b, t_max + 1), pad_id, dtype=np.int64)  # (batch, tgt_len): <bos> y_1 … y_m
    tgt_in[:, 0] = bos_id
    tgt_in[:, 1:][words] = tgt_flat
    n_tokens = int(tgt_len.sum()) + b
    return Batch(torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out), n_tokens)


def collate(examples: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int = 0, bos_id: int = 1,
            eos_id: int = 2, *, vocab_size: int | None = None) -> Batch:
    """Pad a list of ``(src_ids, tgt_ids)`` into a :class:`Batch` (vectorised NumPy, then ``torch.from_numpy``).

    Args:
        examples: token-id lists without special tokens; at least one; every source non-empty (a target may
            be empty: its labels are just ``<eos>``).
        pad_id, bos_id, eos_id: special ids (0, 1, 2 with :class:`tmlib.data.tokenizer.BPETokenizer`).
        vocab_size: if given, every id must be below it.

    Returns:
        :class:`Batch` whose ``src`` is ``(batch, max src len)`` and ``tgt_in``/``tgt_out`` are
        ``(batch, max tgt len + 1)``, all int64 on the CPU.

    Raises:
        ValueError: no examples, an empty source, a negative id, an id ``>= vocab_size``, or a special id that
            is not a valid token id.
    """
    if not examples:
        raise ValueError("collate needs at least one example")
    pad_id, bos_id, eos_id = (check_token_id(v, n, vocab_size) for v, n in
                              ((pad_id, "pad_id"), (bos_id, "bos_id"), (eos_id, "eos_id")))
    src_flat, src_len = flatten_ids([s for s, _ in examples])
    tgt_flat, tgt_len = flatten_ids([t for _, t in examples])
    check_ids(src_flat, src_len, tgt_flat, vocab_size)
    return collate_flat(src_flat, src_len, tgt_flat, tgt_len, pad_id, bos_id, eos_id)


def pad_ids(seqs: Sequence[Sequence[int]], pad_id: int = 0):
    """Right-pad id lists into one ``(batch, max len)`` int64 tensor (vectorised; e.g. source sentences).

    Raises:
        ValueError: no sequences, or ``pad_id`` is not a token id.
    """
    import torch

    if not len(seqs):
        raise ValueError("pad_ids needs at least one sequence")
    pad_id = check_token_id(pad_id, "pad_id")
    flat, lengths = flatten_ids(seqs)
    return torch.from_numpy(_pad(flat, lengths, max(int(lengths.max()), 1), pad_id))
