"""Sinusoidal positional encoding (paper §3.5).

"Since our model contains no recurrence and no convolution, in order for the model to make use of the order
of the sequence, we must inject some information about the relative or absolute position of the tokens":
PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)),
added to the (scaled) embeddings, followed by dropout (§5.4).

Modern models put positions inside attention instead (:mod:`tmlib.model.rotary`: RoPE rotates queries and keys;
:mod:`tmlib.model.alibi`: ALiBi biases the scores), or nowhere at all (a causal decoder can infer positions from
the mask). Their embeddings then get only the dropout and the length check, :class:`NoPositionalEncoding`;
:func:`make_positional` picks one from the name used by :class:`tmlib.model.config.ModelConfig`.
"""
from __future__ import annotations

import torch
from torch import nn

from tmlib.model.checks import check_positions
from tmlib.model.config import POSITIONS
from tmlib.validation import check_float, check_int

__all__ = ["PositionalEncoding", "NoPositionalEncoding", "sinusoid_table", "make_positional"]


def sinusoid_table(max_len: int, d_model: int) -> torch.Tensor:
    """The table PE of paper §3.5 as a float64 tensor ``(max_len, d_model)``.

    Raises:
        ValueError: ``max_len`` < 1, or ``d_model`` is not a positive even integer.
    """
    check_int(max_len, "max_len", minimum=1)
    if check_int(d_model, "d_model", minimum=2) % 2:
        raise ValueError(f"d_model must be a positive even integer, got {d_model!r}")
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)[None, :]  # (1, d_model/2)
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (max_len, d_model/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe  # (max_len, d_model)


class PositionalEncoding(nn.Module):
    """x + PE, then dropout (§3.5, §5.4): ``x`` ``(batch, seq_len, d_model)``, ``offset`` the position of ``x[:, 0]``
    (incremental decoding) → same shape and dtype. The table is a float64 buffer, not learned and not in the
    state dict (``persistent=False``).

    Raises:
        ValueError: ``x`` not 3-D, a negative ``offset``, or ``offset + seq_len > max_len``.
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1):
        super().__init__()
        # [not in the paper] argument checks
        check_float(dropout, "dropout", minimum=0.0, maximum=1.0, max_inclusive=False)
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("pe", sinusoid_table(max_len, d_model), persistent=False)  # (max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        check_positions(x, offset, self.max_len)  # [not in the paper] argument checks
        pe = self.pe[offset:offset + x.shape[1]].to(dtype=x.dtype, device=x.device)  # (seq_len, d_model)
        return self.dropout(x + pe)  # (batch, seq_len, d_model)


class NoPositionalEncoding(nn.Module):
    """The input stage when positions live inside attention (RoPE, ALiBi) or nowhere: dropout only, with the
    checks of :class:`PositionalEncoding`."""

    def __init__(self, max_len: int = 5000, dropout: float = 0.1):
        super().__init__()
        check_float(dropout, "dropout", minimum=0.0, maximum=1.0, max_inclusive=False)
        self.max_len = check_int(max_len, "max_len", minimum=1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        check_positions(x, offset, self.max_len)
        return self.dropout(x)  # (batch, seq_len, d_model)


def make_positional(positions: str, d_model: int, max_len: int, dropout: float) -> nn.Module:
    """The input stage for a position scheme: :class:`PositionalEncoding` for ``"sinusoidal"`` (the paper),
    :class:`NoPositionalEncoding` for ``"rope"``, ``"alibi"`` and ``"none"`` (their positions, if any, are
    applied by :class:`tmlib.model.attention.MultiHeadAttention`).

    Raises:
        ValueError: an unknown scheme (the message lists :data:`tmlib.model.config.POSITIONS`).
    """
    if positions == "sinusoidal":
        return PositionalEncoding(d_model, max_len, dropout)
    if positions in ("rope", "alibi", "none"):
        return NoPositionalEncoding(max_len, dropout)
    raise ValueError(f"unknown positions {positions!r}; choose one of {list(POSITIONS)}")
