"""Attention masks in PyTorch (paper §3.2.3), beside their NumPy versions in :mod:`tmlib.ref.masks`.

Boolean, ``True`` = *may attend*, as :func:`torch.nn.functional.scaled_dot_product_attention`. A key mask is
``real_keys``: ``True`` where the key is a real token, ``False`` where it is padding (the opposite of PyTorch's
``key_padding_mask``: convert with ``~``).
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["causal_mask", "with_causal_mask", "merge_masks", "real_tokens"]


def causal_mask(n_q: int, n_k: int | None = None, device=None) -> Tensor:
    """Bool ``(n_q, n_k)``: the last ``n_q`` of ``n_k`` positions see no later one (§3.2.3): query i may attend to
    key j when ``j <= i + n_k - n_q`` (the lower triangle when ``n_k == n_q``; shifted after a KV cache).

    Raises:
        ValueError: not ``1 <= n_q <= n_k``.
    """
    n_k = n_q if n_k is None else n_k
    if n_q < 1 or n_k < n_q:
        raise ValueError(f"need 1 <= n_q <= n_k, got n_q={n_q}, n_k={n_k}")
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=n_k - n_q)


def with_causal_mask(mask: Tensor | None, n_q: int, n_k: int, device=None) -> Tensor | None:
    """``mask`` and :func:`causal_mask` ``(n_q, n_k)`` by "and" (``mask=None``: the causal mask alone). A single
    query, the newest position, may see every key: ``mask`` is returned as it is."""
    if n_q == 1:
        return mask
    causal = causal_mask(n_q, n_k, device=device)  # (n_q, n_k)
    return causal if mask is None else mask & causal


def merge_masks(attn_mask: Tensor | None, real_keys: Tensor | None) -> Tensor | None:
    """One mask for every head from an ``attn_mask`` ``(n_q, n_k)``, ``(batch, n_q, n_k)`` or
    ``(batch, n_heads, n_q, n_k)`` and a key mask ``real_keys`` ``(batch, n_k)``, by "and"; ``None`` if both are.

    Returns:
        bool, broadcastable to ``(batch, n_heads, n_q, n_k)``, or ``None``.
    """
    if attn_mask is not None and attn_mask.dim() == 2:
        attn_mask = attn_mask[None, None]  # (1, 1, n_q, n_k): the same for every sentence and head
    elif attn_mask is not None and attn_mask.dim() == 3:
        attn_mask = attn_mask[:, None]  # (batch, 1, n_q, n_k): the same for every head
    if real_keys is None:
        return attn_mask
    keys = real_keys[:, None, None, :]  # (batch, 1, 1, n_k): no query sees a padding key
    return keys if attn_mask is None else attn_mask & keys


def real_tokens(ids: Tensor, pad_id: int | None) -> Tensor | None:
    """Bool ``(batch, n)``, True = real token (``ids != pad_id``); ``None`` when nothing needs masking: no ``pad_id``,
    or, on the CPU where reading values is free, no padding (no mask is then built or applied; on a GPU nothing is
    read back, so the host never waits for the device)."""
    if pad_id is None:
        return None
    real = ids != pad_id  # (batch, n)
    if ids.device.type == "cpu" and not torch.compiler.is_compiling() and bool(real.all()):
        return None
    return real
