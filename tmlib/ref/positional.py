"""The sinusoidal positional encoding in NumPy (paper §3.5), and the linear map that shifts it by a fixed offset.
"""
from __future__ import annotations

import numpy as np

from tmlib.validation import check_float, check_int

__all__ = ["positional_encoding", "relative_position_matrix"]


def _check_width(d_model) -> int:
    """``d_model`` as an int: the sinusoids come in (sin, cos) pairs, so it must be positive and even."""
    d_model = check_int(d_model, "d_model")
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even number, got {d_model}")
    return d_model


def positional_encoding(seq_len: int, d_model: int) -> np.ndarray:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(…) (§3.5): float64 ``(seq_len, d_model)``.
    Raises TypeError (not integers) or ValueError (``seq_len`` < 1, ``d_model`` not positive and even)."""
    seq_len = check_int(seq_len, "seq_len")
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    d_model = _check_width(d_model)
    pos = np.arange(seq_len)[:, None]  # (seq_len, 1)
    two_i = np.arange(0, d_model, 2)[None, :]  # (1, d_model/2)
    angle = pos / np.power(10000.0, two_i / d_model)  # (seq_len, d_model/2)
    pe = np.empty((seq_len, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


def relative_position_matrix(offset, d_model: int) -> np.ndarray:
    """M_k with PE[pos + k] = PE[pos] @ M_k for every pos, in the course's row-vector convention (§3.5: "PE_{pos+k}
    can be represented as a linear function of PE_{pos}"); for the whole table, ``PE[:-k] @ M_k == PE[k:]``.
    Block diagonal: each 2×2 block [[cos ω_i·k, −sin ω_i·k], [sin ω_i·k, cos ω_i·k]] turns the row pair
    (sin ω_i·pos, cos ω_i·pos) into (sin ω_i·(pos+k), cos ω_i·(pos+k)), with ω_i = 10000^(−2i/d_model).
    Orthogonal; M_0 = I, M_a M_b = M_{a+b}, M_{−k} = M_kᵀ. ``offset`` may be any finite real number.

    Args:
        offset: the shift k (int or float).
        d_model: the width of the encoding, positive and even.

    Returns:
        Float64 ``(d_model, d_model)``.

    Raises:
        TypeError: ``offset`` not a real number, ``d_model`` not an integer.
        ValueError: ``d_model`` not positive and even, ``offset`` not finite.
    """
    d_model = _check_width(d_model)
    offset = check_float(offset, "offset")
    omega = np.power(10000.0, -np.arange(0, d_model, 2) / d_model)  # (d_model/2,)
    c, s = np.cos(omega * offset), np.sin(omega * offset)  # (d_model/2,)
    m = np.zeros((d_model, d_model))
    idx = np.arange(0, d_model, 2)
    m[idx, idx] = c  # new sin = sin·c + cos·s: column idx gets c from row idx, s from row idx+1
    m[idx + 1, idx] = s
    m[idx, idx + 1] = -s  # new cos = cos·c − sin·s
    m[idx + 1, idx + 1] = c
    return m
