"""Masks and the decoder's input in NumPy (paper §3.1, §3.2.3): the causal mask, the key-padding mask, and the
target shifted right for teacher forcing.

A mask follows :func:`torch.nn.functional.scaled_dot_product_attention`: a boolean array where ``True`` means
*may attend* and ``False`` means *blocked*.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from tmlib.validation import check_int, check_int_array

__all__ = ["causal_mask", "padding_mask", "shift_right"]


def causal_mask(n: int) -> np.ndarray:
    """Lower-triangular boolean mask ``(n, n)``: position i may attend to j ≤ i (paper §3.2.3).

    Raises:
        TypeError: ``n`` is not an integer.
        ValueError: ``n`` < 1.
    """
    n = check_int(n, "n")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return np.tril(np.ones((n, n), dtype=bool))  # (n, n)


def padding_mask(lengths: Sequence[int], max_len: int | None = None) -> np.ndarray:
    """Key-padding mask ``(batch, 1, max_len)``, True at real tokens (the middle axis broadcasts over the queries);
    ``max_len`` default ``max(lengths)``. Raises TypeError (not integers) or ValueError (not 1-D, a length outside
    1..max_len)."""
    lengths = check_int_array(lengths, "lengths")
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be a 1-D sequence of integers, got {lengths!r}")
    max_len = int(lengths.max()) if max_len is None else check_int(max_len, "max_len")
    if (lengths < 1).any() or (lengths > max_len).any():
        raise ValueError(f"every length must be in 1..{max_len}, got {lengths.tolist()}")
    real = np.arange(max_len)[None, :] < lengths[:, None]  # (batch, max_len)
    return real[:, None, :]  # (batch, 1, max_len)


def shift_right(tokens, bos_id: int) -> np.ndarray:
    """The decoder's input for teacher forcing: [BOS, y_1, …, y_{m−1}] for targets y_1..y_m (§3.1), integer
    ``(..., seq_len)``; with the causal mask, position i's prediction sees only the outputs before it.

    Raises:
        TypeError: ``tokens`` or ``bos_id`` not integers. ValueError: no sequence axis, or length 0.
    """
    t = check_int_array(tokens, "tokens", "integer ids")
    bos_id = check_int(bos_id, "bos_id")
    if t.ndim < 1 or t.shape[-1] < 1:
        raise ValueError(f"tokens must have shape (..., seq_len) with seq_len >= 1, got {t.shape}")
    bos = np.full(t.shape[:-1] + (1,), bos_id, dtype=t.dtype)  # (..., 1)
    return np.concatenate([bos, t[..., :-1]], axis=-1)  # (..., seq_len)
