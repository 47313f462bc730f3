"""Attention in NumPy (paper §3.2): the softmax, scaled dot-product attention, multi-head attention head by head
and as one reshape, and attention computed block by block with an online softmax (chapter 11).

Each public function checks its arguments first, then computes, so that the lines after the checks are the
equation.
"""
from __future__ import annotations

import numpy as np

from tmlib.validation import check_float_array, check_int

__all__ = ["softmax", "scaled_dot_product_attention", "self_attention", "split_heads", "merge_heads",
           "multi_head_attention", "online_softmax_attention"]


def softmax(x, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``.

    softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x).  Subtracting the maximum
    changes nothing mathematically but keeps ``exp`` from overflowing, so inputs such as
    ``[1000, 1001]`` work.  Entries equal to ``-inf`` (masked scores) get probability 0;
    a row that is entirely ``-inf`` raises, because it has no defined distribution.

    Args:
        x: array of any shape, any real dtype (computed in float64).
        axis: the axis that sums to 1.

    Returns:
        float64 array of the same shape as ``x``; non-negative, sums to 1 along ``axis``.

    Raises:
        TypeError: ``x`` is not numeric.
        ValueError: ``x`` contains NaN, or a slice along ``axis`` is entirely ``-inf``.
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
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V  (paper §3.2.1, equation 1).

    Args:
        q: queries, shape ``(..., n_q, d_k)``.
        k: keys, shape ``(..., n_k, d_k)``.
        v: values, shape ``(..., n_k, d_v)``.
        mask: optional boolean array broadcastable to ``(..., n_q, n_k)``; ``True`` means
            the query may attend to that key.  Blocked scores are set to ``-inf`` before the
            softmax, so their weights are exactly 0.

    Returns:
        ``(output, weights)``: output of shape ``(..., n_q, d_v)`` and attention weights
        of shape ``(..., n_q, n_k)`` whose rows sum to 1.  float64.

    Raises:
        ValueError: the last dimensions of ``q`` and ``k`` differ, ``k`` and ``v`` have a
            different number of positions, leading (batch) dimensions differ, the mask does
            not broadcast, or a query row is fully masked.
        TypeError: a non-numeric input or a non-boolean mask.
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
    """Self-attention of one sequence: queries, keys and values are projections of the same input ``x``.

    Paper §3.2.2 (one head) and §3.2.3: "in a self-attention layer all of the keys, values and queries come from
    the same place".  With ``Q = x W^Q``, ``K = x W^K`` and ``V = x W^V`` the result is
    ``Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V`` (equation 1).

    Args:
        x: the input sequence, shape ``(..., n, d_model)``, one row per token.
        w_q, w_k: projections ``(d_model, d_k)``.
        w_v: projection ``(d_model, d_v)``.
        mask: optional boolean array broadcastable to ``(..., n, n)``; ``True`` = may attend.

    Returns:
        ``(output, weights)``: float64 arrays ``(..., n, d_v)`` and ``(..., n, n)``.

    Raises:
        TypeError: a non-numeric input or a non-boolean mask.
        ValueError: ``x`` has fewer than 2 dimensions, a projection is not 2-D or does not have ``d_model`` rows,
            ``w_q`` and ``w_k`` give different ``d_k``, or the mask is invalid (see
            :func:`scaled_dot_product_attention`).
    """
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
    """Split the last axis of ``x`` into ``n_heads`` heads: ``(..., seq_len, d_model)`` ->
    ``(..., n_heads, seq_len, d_k)``.

    This is the "one big projection, then reshape" form of multi-head attention (paper
    §3.2.2 with d_k = d_model / h): head i owns columns ``i*d_k:(i+1)*d_k`` of the projected
    matrix.  The inverse is :func:`merge_heads`.

    Args:
        x: array ``(..., seq_len, d_model)``, any real dtype (returned as float64).
        n_heads: number of heads h, a positive integer dividing ``d_model``.

    Returns:
        float64 array ``(..., n_heads, seq_len, d_model // n_heads)``.

    Raises:
        TypeError: ``n_heads`` is not an integer, or ``x`` is not numeric.
        ValueError: ``x`` has fewer than 2 dimensions, ``n_heads`` < 1, or ``d_model`` is
            not divisible by ``n_heads`` (e.g. d_model 4 with 3 heads).
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
    """Concatenate heads: ``(..., n_heads, seq_len, d_k)`` -> ``(..., seq_len, n_heads * d_k)``.

    The inverse of :func:`split_heads`; it is the Concat(head_1, ..., head_h) of paper §3.2.2.

    Args:
        x: array ``(..., n_heads, seq_len, d_k)``.

    Returns:
        float64 array ``(..., seq_len, n_heads * d_k)``.

    Raises:
        TypeError: ``x`` is not numeric.  ValueError: ``x`` has fewer than 3 dimensions.
    """
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
    """MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O, head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i).

    Paper §3.2.2.  Written head by head, the way the lecture computes it.

    Args:
        q: queries, shape ``(n_q, d_model)``.
        k: keys, shape ``(n_k, d_model)``.
        v: values, shape ``(n_k, d_model)``.
        w_q, w_k: per-head projections, a sequence of h arrays ``(d_model, d_k)`` or one
            array ``(h, d_model, d_k)``.
        w_v: per-head value projections, ``(h, d_model, d_v)`` or a sequence of h arrays.
        w_o: output projection, shape ``(h * d_v, d_out)`` (``d_out`` is d_model in the paper).
        mask: optional boolean array broadcastable to ``(n_q, n_k)`` (shared by all heads)
            or ``(h, n_q, n_k)``; ``True`` = may attend.

    Returns:
        ``(output, weights)``: output ``(n_q, d_out)`` and per-head weights ``(h, n_q, n_k)``.

    Raises:
        ValueError: inconsistent head counts or widths, or shapes that do not chain.
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
    """Scaled dot-product attention computed block by block with an *online softmax*, never holding all scores.

    The idea behind FlashAttention (Dao et al. 2022, "FlashAttention: fast and memory-efficient exact
    attention with IO-awareness", Algorithm 1; the online softmax of Milakov & Gimelshein 2018): visit the
    keys in blocks of ``block_size``; for every query keep three running quantities,

    * ``m``: the largest score seen so far,
    * ``l``: the sum of ``exp(score - m)`` over the keys seen so far,
    * ``acc``: the sum of ``exp(score - m) · v`` over the keys seen so far.

    When a new block raises the maximum from ``m`` to ``m_new``, the old sums are rescaled by
    ``exp(m - m_new)``, which makes them as if they had been computed with ``m_new`` from the start.
    After the last block, ``acc / l`` is exactly softmax(QKᵀ/√d_k)·V.  Only an ``(n_q, block_size)`` tile
    of scores exists at any time: memory O(n_q · (block_size + d_v)) instead of O(n_q · n_k).  (The
    GPU kernel also tiles the queries, so that a tile of Q, K and V fits in on-chip memory; the queries
    are independent, so that changes nothing in the arithmetic shown here.)

    Args:
        q: ``(..., n_q, d_k)``.
        k: ``(..., n_k, d_k)``.
        v: ``(..., n_k, d_v)``.
        block_size: keys per block (int ≥ 1); any value gives the same result up to rounding.

    Returns:
        float64 array ``(..., n_q, d_v)``, equal to ``scaled_dot_product_attention(q, k, v)[0]`` up to
        floating-point rounding (no mask is supported).

    Raises:
        TypeError: non-numeric inputs or a non-integer ``block_size``.
        ValueError: the shapes disagree as in :func:`scaled_dot_product_attention`, or ``block_size`` < 1.
    """
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
