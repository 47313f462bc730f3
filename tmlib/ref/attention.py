"""Attention in NumPy (paper §3.2): the softmax, scaled dot-product attention, multi-head attention head by head
and as one reshape, and attention computed block by block with an online softmax (chapter 12).

Each public function checks its arguments first, then computes, so that the lines after the checks are the
equation.
"""
from __future__ import annotations

import numpy as np

from tmlib.validation import check_float_array, check_int

__all__ = ["softmax", "scaled_dot_product_attention", "self_attention", "split_heads", "merge_heads",
           "multi_head_attention", "online_softmax_attention"]


def softmax(x, axis: int = -1) -> np.ndarray:
    """softmax(x)_i = exp(x_i − max x) / Σ_j exp(x_j − max x) along ``axis``, float64 (the maximum subtracted so that
    ``exp`` does not overflow). ``-inf`` entries (masked scores) get 0.

    Raises:
        TypeError: ``x`` is not numeric. ValueError: NaN, or a slice along ``axis`` entirely ``-inf`` (no distribution).
    """
    x = check_float_array(x, "x")
    if x.ndim == 0:
        raise ValueError("softmax needs at least one dimension, got a scalar")
    if np.isnan(x).any():
        raise ValueError("softmax input contains NaN")
    x_max = np.max(x, axis=axis, keepdims=True)
    if np.isneginf(x_max).any():
        raise ValueError("a softmax row is entirely -inf (every position masked): it has no distribution")
    e = np.exp(x - x_max)
    return e / np.sum(e, axis=axis, keepdims=True)


def _check_qkv(q, k, v) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``q``, ``k``, ``v`` as float64 arrays that attention can combine (the errors of
    :func:`scaled_dot_product_attention`)."""
    q, k, v = check_float_array(q, "q"), check_float_array(k, "k"), check_float_array(v, "v")
    for name, arr in (("q", q), ("k", k), ("v", v)):
        if arr.ndim < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (seq_len, dim), got shape {arr.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_k: q has shape {q.shape}, k has shape {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions: k has shape {k.shape}, v has shape {v.shape}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(f"q, k and v must share leading (batch) dimensions: got {q.shape}, {k.shape}, {v.shape}")
    return q, k, v


def _check_mask(mask, shape: tuple[int, ...]) -> np.ndarray:
    """``mask`` as a boolean array that broadcasts to the scores' ``shape`` and leaves every query a key."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(f"mask must be boolean (True = may attend, as in F.scaled_dot_product_attention), "
                        f"got dtype {mask.dtype}")
    try:
        full = np.broadcast_to(mask, shape)
    except ValueError:
        raise ValueError(f"mask of shape {mask.shape} does not broadcast to the scores' shape {shape}") from None
    if mask.ndim > len(shape):
        raise ValueError(f"mask of shape {mask.shape} has more dimensions than the scores {shape}")
    if (~full).all(axis=-1).any():
        raise ValueError("a query row is fully masked: it may attend to no key")
    return mask


def scaled_dot_product_attention(q, k, v, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V (§3.2.1, equation 1) → ``(output, weights)``, float64.

    q ``(..., n_q, d_k)``, k ``(..., n_k, d_k)``, v ``(..., n_k, d_v)``; mask: bool, broadcastable to ``(..., n_q,
    n_k)``, True = may attend (blocked scores become −∞: weight exactly 0) → ``(..., n_q, d_v)``, ``(..., n_q, n_k)``.

    Raises:
        TypeError: non-numeric input, a mask that is not boolean.
        ValueError: shapes that disagree (named), a mask that does not broadcast, a query row fully masked.
    """
    q, k, v = _check_qkv(q, k, v)
    if mask is not None:
        mask = _check_mask(mask, q.shape[:-1] + k.shape[-2:-1])
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)  # (..., n_q, n_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)  # a blocked key gets weight exp(-inf) = 0
    weights = softmax(scores, axis=-1)  # (..., n_q, n_k)
    return weights @ v, weights  # (..., n_q, d_v), (..., n_q, n_k)


def self_attention(x, w_q, w_k, w_v, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """Self-attention: "all of the keys, values and queries come from the same place" (§3.2.3): attention of
    ``x W^Q``, ``x W^K``, ``x W^V`` (one head) → ``(output, weights)``.

    x ``(..., n, d_model)``; w_q, w_k ``(d_model, d_k)``; w_v ``(d_model, d_v)``; mask broadcastable to ``(..., n, n)``
    → ``(..., n, d_v)``, ``(..., n, n)``. Raises TypeError, ValueError as :func:`scaled_dot_product_attention`, and
    for projections that are not 2-D with ``d_model`` rows or give different ``d_k``."""
    x = check_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., n, d_model), got shape {x.shape}")
    ws = {}
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        ws[name] = check_float_array(w, name, ndim=2)
        if ws[name].shape[0] != x.shape[-1]:
            raise ValueError(f"{name} of shape {ws[name].shape} cannot project x of shape {x.shape}: "
                             f"it needs d_model = {x.shape[-1]} rows")
    if ws["w_q"].shape[1] != ws["w_k"].shape[1]:
        raise ValueError(f"w_q and w_k must give the same d_k: got {ws['w_q'].shape} and {ws['w_k'].shape}")
    q = x @ ws["w_q"]  # (..., n, d_k)
    k = x @ ws["w_k"]  # (..., n, d_k)
    v = x @ ws["w_v"]  # (..., n, d_v)
    return scaled_dot_product_attention(q, k, v, mask=mask)  # (..., n, d_v), (..., n, n)


def split_heads(x, n_heads: int) -> np.ndarray:
    """``(..., seq_len, d_model)`` → ``(..., n_heads, seq_len, d_model / n_heads)``: head i owns columns ``i·d_k …
    (i+1)·d_k − 1`` of one big projection (§3.2.2). Inverse: :func:`merge_heads`.

    Raises:
        TypeError: ``n_heads`` not an integer, ``x`` not numeric.
        ValueError: ``x`` has fewer than 2 dimensions, ``n_heads`` < 1, or ``n_heads`` does not divide ``d_model``.
    """
    n_heads = check_int(n_heads, "n_heads")
    x = check_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., seq_len, d_model), got shape {x.shape}")
    if n_heads < 1:
        raise ValueError(f"n_heads must be at least 1, got {n_heads}")
    d_model = x.shape[-1]
    if d_model % n_heads:
        raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads} "
                         f"(x has shape {x.shape}): each head would get {d_model}/{n_heads} columns")
    d_k = d_model // n_heads
    x = x.reshape(*x.shape[:-1], n_heads, d_k)  # (..., seq_len, n_heads, d_k)
    return np.swapaxes(x, -2, -3)  # (..., n_heads, seq_len, d_k)


def merge_heads(x) -> np.ndarray:
    """Concat(head_1, …, head_h) (§3.2.2): ``(..., n_heads, seq_len, d_k)`` → ``(..., seq_len, n_heads · d_k)``.
    Raises TypeError (not numeric) or ValueError (fewer than 3 dimensions)."""
    x = check_float_array(x, "x")
    if x.ndim < 3:
        raise ValueError(f"x must have shape (..., n_heads, seq_len, d_k), got shape {x.shape}")
    x = np.swapaxes(x, -2, -3)  # (..., seq_len, n_heads, d_k)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])  # (..., seq_len, n_heads * d_k)


def _stack_heads(w, name: str) -> np.ndarray:
    """Turn a sequence of h matrices (d_model, d) or one (h, d_model, d) array into (h, d_model, d)."""
    if isinstance(w, np.ndarray):
        arr = check_float_array(w, name)
    else:
        mats = [check_float_array(m, f"{name}[{i}]", ndim=2) for i, m in enumerate(w)]
        if not mats:
            raise ValueError(f"{name} must hold at least one head")
        shapes = {m.shape for m in mats}
        if len(shapes) != 1:
            raise ValueError(f"all heads of {name} must have the same shape, got {sorted(shapes)}")
        arr = np.stack(mats)
    if arr.ndim != 3:
        raise ValueError(f"{name} must have shape (h, d_model, d_head), got shape {arr.shape}")
    return arr


def multi_head_attention(q, k, v, w_q, w_k, w_v, w_o, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O, head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i)
    (§3.2.2), head by head as the lecture computes it → ``(output (n_q, d_out), weights (h, n_q, n_k))``.

    q ``(n_q, d_model)``, k and v ``(n_k, d_model)``; w_q, w_k ``(h, d_model, d_k)`` (or h arrays), w_v ``(h, d_model,
    d_v)``, w_o ``(h · d_v, d_out)``; mask bool ``(n_q, n_k)`` for all heads or ``(h, n_q, n_k)``, True = may attend.

    Raises:
        ValueError: head counts or widths that disagree, shapes that do not chain.
    """
    q, k, v = (check_float_array(x, name, ndim=2) for x, name in ((q, "q"), (k, "k"), (v, "v")))
    w_q, w_k, w_v = (_stack_heads(w, name) for w, name in ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v")))
    w_o = check_float_array(w_o, "w_o", ndim=2)
    h = w_q.shape[0]
    if not (w_k.shape[0] == w_v.shape[0] == h):
        raise ValueError(
            f"w_q, w_k and w_v must have the same number of heads: got {w_q.shape}, {w_k.shape}, {w_v.shape}")
    for name, x, w in (("q", q, w_q), ("k", k, w_k), ("v", v, w_v)):
        if x.shape[-1] != w.shape[1]:
            raise ValueError(f"{name} of shape {x.shape} cannot be projected by w_{name} of shape {w.shape}: "
                             f"d_model {x.shape[-1]} != {w.shape[1]}")
    if w_q.shape[2] != w_k.shape[2]:
        raise ValueError(f"w_q and w_k must give the same d_k: got {w_q.shape} and {w_k.shape}")
    if w_o.shape[0] != h * w_v.shape[2]:
        raise ValueError(
            f"w_o of shape {w_o.shape} must have h * d_v = {h} * {w_v.shape[2]} = {h * w_v.shape[2]} rows")
    head_masks = [None if mask is None else np.asarray(mask)[i] if np.ndim(mask) == 3 else mask for i in range(h)]

    heads, weights = [], []
    for i in range(h):
        head, w = scaled_dot_product_attention(q @ w_q[i], k @ w_k[i], v @ w_v[i], mask=head_masks[i])
        heads.append(head)  # (n_q, d_v)
        weights.append(w)  # (n_q, n_k)
    concat = np.concatenate(heads, axis=-1)  # (n_q, h * d_v)
    return concat @ w_o, np.stack(weights)  # (n_q, d_out), (h, n_q, n_k)


def online_softmax_attention(q, k, v, block_size: int) -> np.ndarray:
    """Scaled dot-product attention key block by key block with an online softmax, never holding all the scores
    (FlashAttention, Dao et al. 2022, Algorithm 1; Milakov & Gimelshein 2018).

    Per query, running ``m`` (the largest score so far), ``l`` (Σ exp(score − m)) and ``acc`` (Σ exp(score − m)·v);
    when a block raises ``m`` to ``m_new`` the sums are rescaled by ``exp(m − m_new)``; at the end ``acc / l`` is
    softmax(QKᵀ/√d_k)V. Memory O(n_q · (block_size + d_v)) instead of O(n_q · n_k).

    q ``(..., n_q, d_k)``, k ``(..., n_k, d_k)``, v ``(..., n_k, d_v)`` → ``(..., n_q, d_v)``, equal to
    :func:`scaled_dot_product_attention` up to rounding (no mask). Raises TypeError, ValueError for shapes as that
    function, and for a ``block_size`` that is not an integer >= 1."""
    q, k, v = _check_qkv(q, k, v)
    block_size = check_int(block_size, "block_size")
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    scale = 1.0 / np.sqrt(q.shape[-1])
    m = np.full(q.shape[:-1] + (1,), -np.inf)  # (..., n_q, 1): running maximum of the scores
    l = np.zeros(q.shape[:-1] + (1,))  # (..., n_q, 1): running sum of exp(score - m)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],))  # (..., n_q, d_v): running sum of exp(score - m) * v
    for start in range(0, k.shape[-2], block_size):
        k_blk = k[..., start:start + block_size, :]  # (..., b, d_k)
        v_blk = v[..., start:start + block_size, :]  # (..., b, d_v)
        s = q @ np.swapaxes(k_blk, -1, -2) * scale  # (..., n_q, b): the only scores held at any time
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # (..., n_q, 1)
        rescale = np.exp(m - m_new)  # (..., n_q, 1): old sums as if computed with m_new (exp(-inf) = 0)
        p = np.exp(s - m_new)  # (..., n_q, b)
        l = l * rescale + p.sum(axis=-1, keepdims=True)
        acc = acc * rescale + p @ v_blk  # (..., n_q, d_v)
        m = m_new
    return acc / l  # (..., n_q, d_v)
