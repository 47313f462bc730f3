"""Rotary position embeddings, RoPE (Su et al. 2021, "RoFormer", §3.2-3.4).

Instead of *adding* a position vector to the embeddings (the paper's §3.5), RoPE *rotates* the query and
the key of every head by an angle proportional to their position, just before the scores are computed.
The d_head features are taken as d_head/2 pairs ``(x_{2i}, x_{2i+1})``; pair i at position m is turned by
the angle ``m·θ_i`` with ``θ_i = base^(−2i/d_head)`` (RoFormer eq. 15, base 10000 as the sinusoids of §3.5):

    (x_{2i}, x_{2i+1}) ↦ (x_{2i} cos mθ_i − x_{2i+1} sin mθ_i,  x_{2i} sin mθ_i + x_{2i+1} cos mθ_i)

(RoFormer eq. 34). In complex numbers, with ``z_i = x_{2i} + i·x_{2i+1}``, this is ``z_i · e^{i m θ_i}``
(eq. 12-13). Because a rotation by mθ followed by the transpose of one by nθ is a rotation by (n−m)θ,
``rope(q, m) · rope(k, n)`` depends on the positions only through ``m − n`` (eq. 16): attention sees
*relative* positions, with no learned parameter.

Layouts: this module rotates *interleaved* pairs (features 2i and 2i+1), as RoFormer and Meta's Llama code.
Hugging Face's Llama rotates the two *halves* instead (features i and i + d_head/2, ``rotate_half``); the two
are the same map up to a fixed permutation of the features of each head, which HF's conversion script applies
to the rows of W^Q and W^K (:func:`interleaved_to_halves` gives that permutation; chapter 13 and the tests
use it to load our weights into ``transformers.LlamaDecoderLayer``).
"""
from __future__ import annotations

import torch
from torch import nn

from tmlib.validation import check_float, check_int

__all__ = ["rope_frequencies", "RotaryEmbedding", "apply_rotary", "interleaved_to_halves"]


def rope_frequencies(d_head: int, base: float = 10000.0) -> torch.Tensor:
    """θ_i = base^(−2i/d_head) for i = 0 … d_head/2 − 1 (RoFormer eq. 15), float64 ``(d_head / 2,)``.

    Raises:
        ValueError: ``d_head`` is not a positive even integer, or ``base`` is not > 1.
    """
    if check_int(d_head, "d_head", minimum=2) % 2:
        raise ValueError(f"rotary embeddings rotate pairs of features: d_head must be even, got {d_head}")
    check_float(base, "base", minimum=1.0, min_inclusive=False)
    two_i = torch.arange(0, d_head, 2, dtype=torch.float64)  # (d_head/2,)
    return base ** (-two_i / d_head)  # (d_head/2,)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the interleaved feature pairs of ``x`` by the angles whose cosines and sines are given.

    Args:
        x: ``(..., seq_len, d_head)``.
        cos, sin: ``(seq_len, d_head / 2)``: cos and sin of ``m·θ_i`` for each position m of ``x``.

    Returns:
        ``(..., seq_len, d_head)``, same dtype: pairs ``(x_{2i}, x_{2i+1})`` turned by ``m·θ_i`` (eq. 34).
    """
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., seq_len, d_head/2) each
    rotated = torch.stack([x_even * cos - x_odd * sin, x_even * sin + x_odd * cos], dim=-1)  # (..., d_head/2, 2)
    return rotated.flatten(-2)  # (..., seq_len, d_head): pairs back in place


class RotaryEmbedding(nn.Module):
    """RoPE for one attention module (RoFormer §3.4): ``x`` ``(batch, n_heads, seq_len, d_head)`` with its first row
    at position ``offset`` (the cache's length) → the same, pairs turned. The cos/sin table, float64 for ``max_len``
    positions, is a buffer, not learned and not in the state dict.

    Raises:
        ValueError: ``d_head`` odd; a negative ``offset`` or ``offset + seq_len > max_len``.
    """

    def __init__(self, d_head: int, max_len: int = 512, base: float = 10000.0):
        super().__init__()
        self.d_head, self.max_len, self.base = d_head, check_int(max_len, "max_len", minimum=1), float(base)
        theta = rope_frequencies(d_head, base)  # (d_head/2,)
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * theta[None, :]  # (max_len, d_head/2): m·θ_i
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def extra_repr(self) -> str:
        return f"d_head={self.d_head}, max_len={self.max_len}, base={self.base:g}"

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        if offset < 0:
            raise ValueError(f"offset must be non-negative, got {offset}")
        n = x.shape[-2]
        if offset + n > self.max_len:
            raise ValueError(f"{n} positions at offset {offset} need {offset + n} rotary positions, more than "
                             f"max_len={self.max_len}")
        cos = self.cos[offset:offset + n].to(device=x.device, dtype=x.dtype)  # (seq_len, d_head/2)
        sin = self.sin[offset:offset + n].to(device=x.device, dtype=x.dtype)
        return apply_rotary(x, cos, sin)  # (batch, n_heads, seq_len, d_head)


def interleaved_to_halves(d_head: int) -> torch.Tensor:
    """The permutation of one head's features that turns the interleaved layout into the halves layout.

    ``perm = [0, 2, 4, …, d_head − 2, 1, 3, …, d_head − 1]``: feature ``perm[j]`` of the interleaved layout
    becomes feature j of the halves layout (pair i = features (2i, 2i+1) → features (i, i + d_head/2)). To load
    a tmlib attention module into Hugging Face's Llama, permute the rows of each head of W^Q and W^K with it.

    Returns:
        long tensor ``(d_head,)``.

    Raises:
        ValueError: ``d_head`` odd or not positive.
    """
    if check_int(d_head, "d_head", minimum=2) % 2:
        raise ValueError(f"d_head must be even, got {d_head}")
    return torch.cat([torch.arange(0, d_head, 2), torch.arange(1, d_head, 2)])
