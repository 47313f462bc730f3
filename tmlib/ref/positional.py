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
    """Sinusoidal positional encoding (paper §3.5).

    PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)).

    Args:
        seq_len: number of positions (≥ 1).
        d_model: model width, a positive even integer.

    Returns:
        float64 array ``(seq_len, d_model)``, values in [-1, 1].

    Raises:
        TypeError: arguments are not integers.
        ValueError: ``seq_len`` < 1, or ``d_model`` not a positive even number.
    """
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
    """The linear map that shifts a sinusoidal positional encoding by ``offset`` positions.

    Paper §3.5: "for any fixed offset k, PE_{pos+k} can be represented as a linear function
    of PE_{pos}".  With ω_i = 10000^(-2i/d_model), the pair (PE[pos, 2i], PE[pos, 2i+1]) =
    (sin ω_i·pos, cos ω_i·pos) is turned into the pair at pos + k by the 2×2 rotation
    ``[[cos ω_i k, sin ω_i k], [-sin ω_i k, cos ω_i k]]`` (angle-addition formulas).  Stacking
    the d_model/2 blocks on the diagonal gives M_k, which does not depend on pos:

        PE[pos + k] = M_k @ PE[pos]   (column vectors),  i.e.  PE[k:] = PE[:-k] @ M_k.T.

    M_k is orthogonal, M_0 = I, M_a @ M_b = M_{a+b}, and M_{-k} = M_k.T.

    Args:
        offset: the shift k, a real number (integers in practice; negative shifts back).
        d_model: model width, a positive even integer.

    Returns:
        float64 array ``(d_model, d_model)``, block diagonal with 2×2 rotation blocks.

    Raises:
        TypeError: ``offset`` is not a real number or ``d_model`` is not an integer.
        ValueError: ``d_model`` is not a positive even number, or ``offset`` is not finite.
    """
    d_model = _check_width(d_model)
    offset = check_float(offset, "offset")
    omega = np.power(10000.0, -np.arange(0, d_model, 2) / d_model)  # (d_model/2,)
    c, s = np.cos(omega * offset), np.sin(omega * offset)  # (d_model/2,)
    m = np.zeros((d_model, d_model))
    idx = np.arange(0, d_model, 2)
    m[idx, idx] = c
    m[idx, idx + 1] = s
    m[idx + 1, idx] = -s
    m[idx + 1, idx + 1] = c
    return m
