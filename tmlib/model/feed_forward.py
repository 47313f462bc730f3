"""Position-wise feed-forward network (paper §3.3) and its gated modern form, SwiGLU.

"In addition to attention sub-layers, each of the layers in our encoder and decoder contains a fully
connected feed-forward network, which is applied to each position separately and identically":
FFN(x) = max(0, x W₁ + b₁) W₂ + b₂, with inner width d_ff (2048 in the base model).

:class:`SwiGLUFeedForward` is the gated variant of Shazeer (2020, "GLU Variants Improve Transformer",
eq. 6), used by PaLM and Llama: FFN_SwiGLU(x) = (Swish(x W₁) ⊗ x W₃) W₂, three matrices instead of two.
:func:`make_feed_forward` builds either from the name used by :class:`tmlib.model.config.ModelConfig`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tmlib.model.config import FEED_FORWARDS
from tmlib.validation import check_float, check_int

__all__ = ["PositionwiseFeedForward", "SwiGLUFeedForward", "make_feed_forward", "swiglu_hidden_size"]

class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W₁ + b₁) W₂ + b₂, applied at every position (paper §3.3).

    Args:
        d_model: input and output width.
        d_ff: inner width (the paper: 2048 for d_model 512, 4096 for 1024).
        dropout: dropout probability on the ReLU activations (as the Annotated Transformer and
            ``nn.TransformerEncoderLayer``; the paper does not say where, only "residual dropout").
        device, dtype: passed to the two ``nn.Linear`` layers.
        bias: whether they have biases b₁, b₂ (the paper's formula has them).

    Shapes:
        forward ``x``: floating tensor ``(..., d_model)`` (usually ``(batch, seq_len, d_model)``)
        → ``(..., d_model)``, same dtype.

    Raises:
        ValueError: ``d_model`` or ``d_ff`` is not a positive integer, ``dropout`` is outside [0, 1),
            or the last dimension of ``x`` is not ``d_model``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1, device=None, dtype=None, bias: bool = True):
        super().__init__()
        check_int(d_model, "d_model", minimum=1)
        check_int(d_ff, "d_ff", minimum=1)
        check_float(dropout, "dropout", minimum=0.0, maximum=1.0, max_inclusive=False)
        self.d_model, self.d_ff = d_model, d_ff
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias, device=device, dtype=dtype)  # W₁, b₁
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias, device=device, dtype=dtype)  # W₂, b₂
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has shape {tuple(x.shape)}: last dimension must be d_model={self.d_model}")
        hidden = torch.relu(self.linear1(x))  # (..., d_ff)
        hidden = self.dropout(hidden)  # (..., d_ff)
        return self.linear2(hidden)  # (..., d_model)


def swiglu_hidden_size(d_ff: int, multiple_of: int = 1) -> int:
    """The SwiGLU inner width with the parameters of a ReLU FFN of inner width ``d_ff``: ⌊2·d_ff/3⌋,
    rounded up to a multiple of ``multiple_of`` (Shazeer 2020 §2 shrinks d_ff by 2/3 "to keep the number of
    parameters and the amount of computation constant"; Llama rounds up to a multiple of 256).

    Without biases a ReLU FFN has 2·d_model·d_ff weights and SwiGLU 3·d_model·d_ff', so d_ff' = 2·d_ff/3.

    Raises:
        ValueError: ``d_ff`` or ``multiple_of`` not a positive integer.
    """
    check_int(d_ff, "d_ff", minimum=1)
    check_int(multiple_of, "multiple_of", minimum=1)
    hidden = max(1, 2 * d_ff // 3)
    return multiple_of * -(-hidden // multiple_of)


class SwiGLUFeedForward(nn.Module):
    """FFN_SwiGLU(x) = (Swish₁(x W₁) ⊗ x W₃) W₂ (Shazeer 2020, eq. 6; Swish₁ = SiLU, x·sigmoid(x)).

    The "gate" x W₁ passes through SiLU and multiplies, feature by feature, the "up" projection x W₃; W₂
    projects back to d_model. With the same d_ff it has 3/2 the parameters of the ReLU FFN; use
    :func:`swiglu_hidden_size` for an equal count. Names follow Meta's Llama code (``w1``, ``w2``, ``w3``);
    Hugging Face calls them ``gate_proj``, ``down_proj``, ``up_proj``.

    Args:
        d_model: input and output width.
        d_ff: inner width (Llama 7B: 11008 for d_model 4096, about 2/3 of 4·d_model).
        dropout: dropout probability on the gated hidden activations (as :class:`PositionwiseFeedForward`).
        bias: biases on the three linear layers (Shazeer's formula and Llama have none: default False).
        device, dtype: passed to the linear layers.

    Attributes:
        w1 (gate), w3 (up): ``nn.Linear(d_model, d_ff)``; w2 (down): ``nn.Linear(d_ff, d_model)``.

    Shapes:
        forward ``x``: ``(..., d_model)`` → ``(..., d_model)``, same dtype.

    Raises:
        ValueError: sizes not positive integers, ``dropout`` outside [0, 1), or a last size of ``x`` other
            than ``d_model``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = False, device=None, dtype=None):
        super().__init__()
        check_int(d_model, "d_model", minimum=1)
        check_int(d_ff, "d_ff", minimum=1)
        check_float(dropout, "dropout", minimum=0.0, maximum=1.0, max_inclusive=False)
        self.d_model, self.d_ff = d_model, d_ff
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.w1 = nn.Linear(d_model, d_ff, **kw)  # gate
        self.w2 = nn.Linear(d_ff, d_model, **kw)  # down
        self.w3 = nn.Linear(d_model, d_ff, **kw)  # up
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has shape {tuple(x.shape)}: last dimension must be d_model={self.d_model}")
        hidden = F.silu(self.w1(x)) * self.w3(x)  # (..., d_ff): Swish(x W₁) ⊗ x W₃
        return self.w2(self.dropout(hidden))  # (..., d_model)


def make_feed_forward(kind: str, d_model: int, d_ff: int, dropout: float = 0.1, bias: bool = True) -> nn.Module:
    """The feed-forward sub-layer called ``kind``: ``"relu"`` → :class:`PositionwiseFeedForward` (the paper),
    ``"swiglu"`` → :class:`SwiGLUFeedForward` (inner width ``d_ff`` as given).

    Raises:
        ValueError: an unknown ``kind`` (the message lists :data:`tmlib.model.config.FEED_FORWARDS`), or bad sizes.
    """
    if kind == "relu":
        return PositionwiseFeedForward(d_model, d_ff, dropout, bias=bias)
    if kind == "swiglu":
        return SwiGLUFeedForward(d_model, d_ff, dropout, bias=bias)
    raise ValueError(f"unknown feed-forward {kind!r}; choose one of {list(FEED_FORWARDS)}")
