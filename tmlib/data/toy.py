"""Toy tasks: synthetic batches that a tiny model learns in seconds (chapter 8).

The *copy task* is the classic first test of a sequence-to-sequence model (the Annotated Transformer's too): the
target is the source, so the decoder succeeds only if attention over the source works.
"""
from __future__ import annotations

import torch

from tmlib.validation import check_int

__all__ = ["copy_task_batch", "reverse_pairs"]


def copy_task_batch(batch_size: int, seq_len: int, n_symbols: int, generator: torch.Generator | None = None,
                    pad_id: int = 0, bos_id: int = 1, eos_id: int = 2) -> tuple[torch.Tensor, ...]:
    """A batch of the copy task for the ``"tiny"`` preset: the target is the source.

    Symbols are the ids ``3 … n_symbols + 2`` (0, 1, 2 are pad, BOS, EOS), so the vocabulary has
    ``n_symbols + 3`` tokens.  Teacher forcing: the decoder reads ``[BOS] + src`` and must predict ``src + [EOS]``.

    Args:
        batch_size, seq_len, n_symbols: positive integers.
        generator: a seeded ``torch.Generator`` for reproducible batches.

    Returns:
        ``(src, tgt_in, tgt_out)``, long tensors ``(batch, seq_len)``, ``(batch, seq_len + 1)`` and
        ``(batch, seq_len + 1)``.

    Raises:
        TypeError: a size is not an integer; ValueError: a size is not positive (as
            :func:`tmlib.validation.check_int`).
    """
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len), ("n_symbols", n_symbols)):
        check_int(value, name, minimum=1)
    src = torch.randint(3, n_symbols + 3, (batch_size, seq_len), generator=generator)  # (batch, seq_len)
    bos = torch.full((batch_size, 1), bos_id, dtype=torch.long)  # (batch, 1)
    eos = torch.full((batch_size, 1), eos_id, dtype=torch.long)  # (batch, 1)
    return src, torch.cat([bos, src], dim=1), torch.cat([src, eos], dim=1)


def reverse_pairs(n: int = 120, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """The reversing task as token-id pairs for :class:`~tmlib.data.BatchIterator`: ids 4..19, lengths 2..8
    (so that batches differ in size), the target the source reversed.

    Args:
        n: number of pairs (positive); seed: the seed of ``numpy.random.default_rng``.

    Returns:
        ``n`` pairs ``(src_ids, tgt_ids)`` with ``tgt_ids == src_ids[::-1]``.
    """
    import numpy as np

    check_int(n, "n", minimum=1)
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        s = rng.integers(4, 20, rng.integers(2, 9)).tolist()
        pairs.append((s, s[::-1]))
    return pairs
