"""The argument checks of :mod:`tmlib.model.attention`, done once at its public boundary.

:func:`~tmlib.model.attention.scaled_dot_product_attention` and :class:`~tmlib.model.attention.MultiHeadAttention`
call these first, so that the functions implementing the paper's equations contain only the equations. Each
check raises :class:`TypeError` for an argument of the wrong kind (not a tensor, a float mask) and
:class:`ValueError` for a wrong shape or value, with a message naming the shapes.
"""
from __future__ import annotations

import torch
from torch import Tensor

from tmlib.validation import check_int

__all__ = ["check_attention_args", "check_multi_head_args", "check_multi_head_config"]


def check_multi_head_config(d_model: int, n_heads: int, n_kv_heads: int, dropout: float, positions) -> None:
    """The settings of :class:`~tmlib.model.attention.MultiHeadAttention`.

    Raises:
        TypeError: a size is not an integer (:func:`tmlib.validation.check_int`).
        ValueError: a size is not positive, ``n_heads`` does not divide ``d_model`` or ``n_kv_heads`` does not
            divide ``n_heads``, ``dropout`` is outside [0, 1), or ``positions`` is not None, "rope" or "alibi".
    """
    check_int(d_model, "d_model", minimum=1)
    check_int(n_heads, "n_heads", minimum=1)
    check_int(n_kv_heads, "n_kv_heads")
    if d_model % n_heads != 0:
        raise ValueError(
            f"d_model={d_model} is not divisible by n_heads={n_heads}: each head needs d_model / n_heads columns"
        )
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must be a positive divisor of n_heads={n_heads} "
                         f"(each key/value head serves n_heads / n_kv_heads query heads)")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    if positions not in (None, "rope", "alibi"):
        raise ValueError(f"positions must be None, 'rope' or 'alibi' inside attention, got {positions!r}")


def check_attention_args(query, key, value, attn_mask, attn_bias, dropout_p, is_causal: bool,
                         enable_gqa: bool) -> tuple[Tensor | None, Tensor | None]:
    """The arguments of :func:`~tmlib.model.attention.scaled_dot_product_attention` (see its Raises).

    Returns:
        ``(attn_mask, attn_bias)`` on the device of ``query`` (the bias also in its dtype), or ``None``.
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        _check_tensor(x, name)
        if x.dim() < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (..., seq_len, dim), got shape {tuple(x.shape)}")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"query, key and value must share a dtype, got {query.dtype}, {key.dtype}, {value.dtype}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must share d_k: query has shape {tuple(query.shape)}, key has shape {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value must have the same number of positions n_k: "
                         f"key has shape {tuple(key.shape)}, value has shape {tuple(value.shape)}")
    if key.shape[:-2] != value.shape[:-2]:
        raise ValueError(
            f"key and value must share their leading dimensions: got {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if enable_gqa and (query.dim() < 3 or key.dim() != query.dim() or query.shape[:-3] != key.shape[:-3]
                       or query.shape[-3] % key.shape[-3]):
        raise ValueError(
            f"with enable_gqa, query (..., n_heads, n_q, d_k) and key/value (..., n_kv_heads, n_k, d) must share "
            f"their batch dimensions and n_kv_heads must divide n_heads: got {tuple(query.shape)}, {tuple(key.shape)}"
        )
    if not enable_gqa and query.shape[:-2] != key.shape[:-2]:
        raise ValueError(f"query, key and value must share their leading (batch) dimensions exactly: got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    n_q, n_k = query.shape[-2], key.shape[-2]
    _check_causal(is_causal, n_q, n_k)
    scores_shape = (*query.shape[:-2], n_q, n_k)
    if attn_bias is not None:
        _check_tensor(attn_bias, "attn_bias")
        if not attn_bias.is_floating_point():
            raise TypeError(f"attn_bias must be a floating-point tensor (added to the scores), got {attn_bias.dtype}")
        _check_broadcasts(attn_bias, "attn_bias", scores_shape)
        attn_bias = attn_bias.to(device=query.device, dtype=query.dtype)
    if attn_mask is not None:
        _check_bool_mask(attn_mask, "attn_mask")
        _check_broadcasts(attn_mask, "attn_mask", scores_shape)
        attn_mask = attn_mask.to(query.device)
    return attn_mask, attn_bias


def check_multi_head_args(mha, query, key, value, attn_mask, key_padding_mask, cache, static_kv: bool,
                          is_causal: bool) -> tuple[Tensor | None, Tensor | None]:
    """The arguments of :meth:`MultiHeadAttention.forward <tmlib.model.attention.MultiHeadAttention.forward>`
    (see its Raises).

    Returns:
        ``(attn_mask, key_padding_mask)`` on the device of ``query``, or ``None``.
    """
    _check_input(mha, query, "query", None)
    batch, n_q, _ = query.shape
    if static_kv and mha.positions is not None:
        raise ValueError(f"positions={mha.positions!r} apply to self-attention; cross-attention (static_kv) "
                         "relates two sequences and takes no positions")
    cached = 0 if cache is None else len(cache)
    if cached and cache.k.shape[0] != batch:
        raise ValueError(f"cache holds batch {cache.k.shape[0]} (cached keys {tuple(cache.k.shape)}), "
                         f"query has batch {batch}")
    if static_kv and cached:  # cross-attention after the first step: the memory's keys are in the cache
        n_k = cached
    else:
        if key is None or value is None:
            raise ValueError("key and value are required unless static_kv=True and the cache is filled")
        _check_input(mha, key, "key", batch)
        _check_input(mha, value, "value", batch)
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                f"key {tuple(key.shape)} and value {tuple(value.shape)} must have the same number of positions"
            )
        n_k = cached + key.shape[1]  # the keys attended over: cached, then new
    _check_causal(is_causal, n_q, n_k)
    if attn_mask is not None:
        _check_bool_mask(attn_mask, "attn_mask")
        shapes = {2: (n_q, n_k), 3: (batch, n_q, n_k), 4: (batch, mha.n_heads, n_q, n_k)}
        if shapes.get(attn_mask.dim()) != tuple(attn_mask.shape):
            raise ValueError(
                f"attn_mask has shape {tuple(attn_mask.shape)}; expected (n_q, n_k) = {(n_q, n_k)}, "
                f"(batch, n_q, n_k) = {(batch, n_q, n_k)} or (batch, n_heads, n_q, n_k) = "
                f"{(batch, mha.n_heads, n_q, n_k)}"
            )
        attn_mask = attn_mask.to(query.device)
    if key_padding_mask is not None:
        _check_bool_mask(key_padding_mask, "key_padding_mask")
        if tuple(key_padding_mask.shape) != (batch, n_k):
            raise ValueError(f"key_padding_mask has shape {tuple(key_padding_mask.shape)}, expected (batch, n_k) = "
                             f"{(batch, n_k)}")
        key_padding_mask = key_padding_mask.to(query.device)
    return attn_mask, key_padding_mask


def _check_tensor(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _check_bool_mask(mask, name: str) -> None:
    _check_tensor(mask, name)
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must be a boolean tensor (True = may attend), got dtype {mask.dtype}; "
                        f"float (additive) masks are not accepted")


def _check_broadcasts(x: Tensor, name: str, scores_shape: tuple) -> None:
    try:
        ok = x.dim() <= len(scores_shape) and torch.broadcast_shapes(x.shape, scores_shape) == scores_shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} of shape {tuple(x.shape)} does not broadcast to the scores' shape "
                         f"(..., n_q, n_k) = {scores_shape}")


def _check_causal(is_causal: bool, n_q: int, n_k: int) -> None:
    if is_causal and n_q > n_k:
        raise ValueError(f"is_causal needs at least as many keys as queries (queries are the last positions), "
                         f"got n_q={n_q}, n_k={n_k}")


def _check_input(mha, x, name: str, batch: int | None) -> None:
    _check_tensor(x, name)
    if x.dim() != 3:
        raise ValueError(f"{name} must be (batch, seq_len, d_model), got shape {tuple(x.shape)}")
    if x.shape[-1] != mha.d_model:
        raise ValueError(f"{name} has shape {tuple(x.shape)}: its last size must be d_model={mha.d_model}")
    if batch is not None and x.shape[0] != batch:
        raise ValueError(f"{name} has batch size {x.shape[0]} (shape {tuple(x.shape)}) but query has batch {batch}")
