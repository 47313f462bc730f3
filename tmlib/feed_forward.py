"""Position-wise feed-forward network (paper §3.3).

"In addition to attention sub-layers, each of the layers in our encoder and decoder contains a fully
connected feed-forward network, which is applied to each position separately and identically":
FFN(x) = max(0, x W₁ + b₁) W₂ + b₂, with inner width d_ff (2048 in the base model).
"""
from __future__ import annotations

import torch
from torch import nn

from .validation import check_float, check_int

__all__ = ["PositionwiseFeedForward"]


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W₁ + b₁) W₂ + b₂, applied at every position (paper §3.3).

    Args:
        d_model: input and output width.
        d_ff: inner width (the paper: 2048 for d_model 512, 4096 for 1024).
        dropout: dropout probability on the ReLU activations (as the Annotated Transformer and
            ``nn.TransformerEncoderLayer``; the paper does not say where, only "residual dropout").
        device, dtype: passed to the two ``nn.Linear`` layers.

    Shapes:
        forward ``x``: floating tensor ``(..., d_model)`` (usually ``(batch, seq_len, d_model)``)
        → ``(..., d_model)``, same dtype.

    Raises:
        ValueError: ``d_model`` or ``d_ff`` is not a positive integer, ``dropout`` is outside [0, 1),
            or the last dimension of ``x`` is not ``d_model``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1, device=None, dtype=None):
        super().__init__()
        check_int(d_model, "d_model", minimum=1)
        check_int(d_ff, "d_ff", minimum=1)
        check_float(dropout, "dropout", minimum=0.0, maximum=1.0, max_inclusive=False)
        self.d_model, self.d_ff = d_model, d_ff
        self.linear1 = nn.Linear(d_model, d_ff, device=device, dtype=dtype)  # W₁, b₁
        self.linear2 = nn.Linear(d_ff, d_model, device=device, dtype=dtype)  # W₂, b₂
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has shape {tuple(x.shape)}: last dimension must be d_model={self.d_model}")
        hidden = torch.relu(self.linear1(x))  # (..., d_ff)
        hidden = self.dropout(hidden)  # (..., d_ff)
        return self.linear2(hidden)  # (..., d_model)
