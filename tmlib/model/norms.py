"""Normalization layers: the paper's LayerNorm and the RMSNorm of modern models.

* LayerNorm (Ba et al. 2016; the paper's §3.1 "LayerNorm(x + Sublayer(x))"): subtract the mean of the
  d_model features, divide by their standard deviation, then scale by γ and shift by β. PyTorch's
  ``nn.LayerNorm`` is used as is (chapter 3 writes it by hand and checks it).
* RMSNorm (Zhang & Sennrich 2019, eq. 4): drop the mean subtraction and the shift, divide by the root mean
  square only, ``ā_i = a_i / RMS(a) · g_i`` with ``RMS(a) = sqrt(mean_i a_i² + ε)``. The authors report the
  same quality for less computation; Llama, Mistral and most recent models use it (usually pre-norm).

:func:`make_norm` builds either from the name used by :class:`tmlib.model.config.ModelConfig` (``norm="layer"``
or ``"rms"``).
"""
from __future__ import annotations

import torch
from torch import nn

from tmlib.model.config import NORMS
from tmlib.validation import check_float, check_int

__all__ = ["RMSNorm", "make_norm"]

class RMSNorm(nn.Module):
    """RMSNorm(x) = x / sqrt(mean(x²) + eps) · weight over the last axis (Zhang & Sennrich 2019, eq. 4): no mean
    subtracted, no bias; ``(..., d_model)`` → same. Half-precision inputs are normalized in float32, as Llama does.
    ``weight`` (the gain, ones at first) has ``nn.LayerNorm``'s and ``torch.nn.RMSNorm``'s name.

    Raises:
        TypeError, ValueError: ``d_model`` not a positive integer, ``eps`` not positive.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.d_model = check_int(d_model, "d_model", minimum=1)
        self.eps = check_float(eps, "eps", minimum=0.0, min_inclusive=False)
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        if dtype in (torch.float16, torch.bfloat16):
            x = x.float()  # the mean of squares in float32
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return (x / rms).to(dtype) * self.weight.to(dtype)  # (..., d_model)


def make_norm(kind: str, d_model: int, eps: float = 1e-5) -> nn.Module:
    """The normalization layer called ``kind``: ``"layer"`` → ``nn.LayerNorm(d_model, eps)`` (the paper),
    ``"rms"`` → :class:`RMSNorm` (Zhang & Sennrich 2019).

    Raises:
        ValueError: an unknown ``kind`` (the message lists :data:`tmlib.model.config.NORMS`).
    """
    if kind == "layer":
        return nn.LayerNorm(d_model, eps=eps)
    if kind == "rms":
        return RMSNorm(d_model, eps=eps)
    raise ValueError(f"unknown norm {kind!r}; choose one of {list(NORMS)}")
