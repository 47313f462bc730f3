"""The position-wise feed-forward network (paper §3.3) and its gated modern form, SwiGLU.

"In addition to attention sub-layers, each of the layers in our encoder and decoder contains a fully connected
feed-forward network, which is applied to each position separately and identically": FFN(x) = max(0, x W₁ + b₁) W₂ +
b₂, inner width d_ff. SwiGLU (Shazeer 2020, eq. 6; PaLM, Llama): (Swish(x W₁) ⊙ x W₃) W₂, three matrices.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tmlib.model.config import FEED_FORWARDS
from tmlib.validation import check_float, check_int

__all__ = ["PositionwiseFeedForward", "SwiGLUFeedForward", "make_feed_forward", "swiglu_hidden_size"]


def _check_sizes(d_model: int, d_ff: int, dropout: float) -> None:
    check_int(d_model, "d_model", minimum=1)
    check_int(d_ff, "d_ff", minimum=1)
    check_float(dropout, "dropout", minimum=0.0, maximum=1.0, max_inclusive=False)


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W₁ + b₁) W₂ + b₂ at every position (§3.3): ``(..., d_model)`` → ``(..., d_model)``.

    Dropout on the ReLU activations, as the Annotated Transformer and ``nn.TransformerEncoderLayer`` (the paper only
    says "residual dropout"). ``bias``: b₁, b₂ (in the paper's formula).

    Raises:
        TypeError, ValueError: sizes that are not positive integers, ``dropout`` outside [0, 1).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1, bias: bool = True, device=None, dtype=None):
        super().__init__()
        _check_sizes(d_model, d_ff, dropout)  # [not in the paper] argument checks
        self.d_model, self.d_ff = d_model, d_ff
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias, device=device, dtype=dtype)  # W₁, b₁
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias, device=device, dtype=dtype)  # W₂, b₂
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.linear1(x))  # (..., d_ff)
        hidden = self.dropout(hidden)  # (..., d_ff)
        return self.linear2(hidden)  # (..., d_model)


def swiglu_hidden_size(d_ff: int, multiple_of: int = 1) -> int:
    """The SwiGLU inner width with the weights of a ReLU FFN of width ``d_ff``: ⌊2·d_ff/3⌋ (3·d·d_ff' = 2·d·d_ff),
    rounded up to a multiple of ``multiple_of`` (Shazeer 2020 §2; Llama rounds to 256).

    Raises:
        TypeError, ValueError: ``d_ff`` or ``multiple_of`` not a positive integer.
    """
    check_int(d_ff, "d_ff", minimum=1)
    check_int(multiple_of, "multiple_of", minimum=1)
    hidden = max(1, 2 * d_ff // 3)
    return multiple_of * -(-hidden // multiple_of)


class SwiGLUFeedForward(nn.Module):
    """FFN_SwiGLU(x) = (Swish(x W₁) ⊙ x W₃) W₂ (Shazeer 2020, eq. 6; Swish = SiLU): ``(..., d_model)`` → same.

    The arguments of :class:`PositionwiseFeedForward`, in its order; no biases by default (Shazeer, Llama). With the
    same d_ff it has 3/2 the weights (:func:`swiglu_hidden_size`). Names as Meta's Llama: ``w1`` (gate), ``w3`` (up),
    ``w2`` (down); Hugging Face's ``gate_proj``, ``up_proj``, ``down_proj``. Raises as :class:`PositionwiseFeedForward`.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1, bias: bool = False, device=None, dtype=None):
        super().__init__()
        _check_sizes(d_model, d_ff, dropout)
        self.d_model, self.d_ff = d_model, d_ff
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.w1 = nn.Linear(d_model, d_ff, **kw)  # gate
        self.w2 = nn.Linear(d_ff, d_model, **kw)  # down
        self.w3 = nn.Linear(d_model, d_ff, **kw)  # up
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.silu(self.w1(x)) * self.w3(x)  # (..., d_ff): Swish(x W₁) ⊙ x W₃
        return self.w2(self.dropout(hidden))  # (..., d_model)


def make_feed_forward(kind: str, d_model: int, d_ff: int, dropout: float = 0.1, bias: bool = True) -> nn.Module:
    """:class:`PositionwiseFeedForward` for ``"relu"`` (the paper), :class:`SwiGLUFeedForward` for ``"swiglu"``.

    Raises:
        ValueError: an unknown ``kind``, or bad sizes.
    """
    if kind == "relu":
        return PositionwiseFeedForward(d_model, d_ff, dropout, bias=bias)
    if kind == "swiglu":
        return SwiGLUFeedForward(d_model, d_ff, dropout, bias=bias)
    raise ValueError(f"unknown feed-forward {kind!r}; choose one of {list(FEED_FORWARDS)}")
