"""NumPy reference implementations of the Transformer's building blocks.

This module is the ground truth of Part I: every function is written with plain
NumPy, in float64, so that each step can be printed and checked by hand against the
lecture's worked examples.  It deliberately does **not** import torch; the PyTorch
modules of Part II are tested against these functions.

Conventions
-----------
* Shapes are given with names: ``(n_q, d_k)`` is "number of queries by key width".
* Masks follow :func:`torch.nn.functional.scaled_dot_product_attention`: a boolean
  array where ``True`` means *may attend* and ``False`` means *blocked*.
* Every shape mismatch raises :class:`ValueError` naming the shapes involved.

Sources: Vaswani et al. (2017), "Attention Is All You Need", §3.2-3.5 and §5.3.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "multi_head_attention",
    "feed_forward",
    "layer_norm",
    "positional_encoding",
    "causal_mask",
    "padding_mask",
    "noam_lr",
    "split_heads",
    "merge_heads",
    "sublayer",
    "relative_position_matrix",
    "label_smoothing_targets",
    "cross_entropy",
    "dropout",
    "shift_right",
    "online_softmax_attention",
]


def _as_float_array(x, name: str, ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Convert ``x`` to a float64 array, checking its number of dimensions."""
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}")
    arr = np.asarray(x)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.number)):
        raise TypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if arr.ndim not in allowed:
            raise ValueError(
                f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {arr.shape}"
            )
    return arr


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
    x = _as_float_array(x, "x")
    if x.ndim == 0:
        raise ValueError("softmax needs at least one dimension, got a scalar")
    if np.isnan(x).any():
        raise ValueError("softmax input contains NaN")
    x_max = np.max(x, axis=axis, keepdims=True)
    if np.isneginf(x_max).any():
        raise ValueError(
            "a softmax row is entirely -inf (every position masked): it has no distribution"
        )
    e = np.exp(x - x_max)
    return e / np.sum(e, axis=axis, keepdims=True)


def _check_mask(mask, shape: tuple[int, ...]) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(
            f"mask must be boolean (True = may attend, as in F.scaled_dot_product_attention), "
            f"got dtype {mask.dtype}"
        )
    try:
        np.broadcast_to(mask, shape)
    except ValueError:
        raise ValueError(
            f"mask of shape {mask.shape} does not broadcast to the scores' shape {shape}"
        ) from None
    if mask.ndim > len(shape):
        raise ValueError(f"mask of shape {mask.shape} has more dimensions than the scores {shape}")
    return mask


def _check_qkv(q, k, v) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``q``, ``k``, ``v`` as float64 arrays, checked as attention inputs (see :func:`scaled_dot_product_attention`
    for the errors)."""
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    v = _as_float_array(v, "v")
    for name, arr in (("q", q), ("k", k), ("v", v)):
        if arr.ndim < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (seq_len, dim), got shape {arr.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_k: q has shape {q.shape}, k has shape {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions: k has shape {k.shape}, v has shape {v.shape}"
        )
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k and v must share leading (batch) dimensions: got {q.shape}, {k.shape}, {v.shape}"
        )
    return q, k, v


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
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)  # (..., n_q, n_k)
    if mask is not None:
        mask = _check_mask(mask, scores.shape)
        scores = np.where(mask, scores, -np.inf)
        if (~np.broadcast_to(mask, scores.shape)).all(axis=-1).any():
            raise ValueError("a query row is fully masked: it may attend to no key")
    weights = softmax(scores, axis=-1)  # (..., n_q, n_k)
    return weights @ v, weights


def _stack_heads(w, name: str) -> np.ndarray:
    """Turn a sequence of h matrices (d_model, d) or one (h, d_model, d) array into (h, d_model, d)."""
    if isinstance(w, np.ndarray):
        arr = _as_float_array(w, name)
    else:
        mats = [_as_float_array(m, f"{name}[{i}]", ndim=2) for i, m in enumerate(w)]
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
    q = _as_float_array(q, "q", ndim=2)
    k = _as_float_array(k, "k", ndim=2)
    v = _as_float_array(v, "v", ndim=2)
    w_q, w_k, w_v = (_stack_heads(w, n) for w, n in ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v")))
    w_o = _as_float_array(w_o, "w_o", ndim=2)
    h = w_q.shape[0]
    if not (w_k.shape[0] == w_v.shape[0] == h):
        raise ValueError(
            f"w_q, w_k and w_v must have the same number of heads: got {w_q.shape}, {w_k.shape}, {w_v.shape}"
        )
    for name, x, w in (("q", q, w_q), ("k", k, w_k), ("v", v, w_v)):
        if x.shape[-1] != w.shape[1]:
            raise ValueError(
                f"{name} of shape {x.shape} cannot be projected by w_{name} of shape {w.shape}: "
                f"d_model {x.shape[-1]} != {w.shape[1]}"
            )
    if w_q.shape[2] != w_k.shape[2]:
        raise ValueError(f"w_q and w_k must give the same d_k: got {w_q.shape} and {w_k.shape}")
    if w_o.shape[0] != h * w_v.shape[2]:
        raise ValueError(
            f"w_o of shape {w_o.shape} must have h * d_v = {h} * {w_v.shape[2]} = {h * w_v.shape[2]} rows"
        )
    heads, weights = [], []
    for i in range(h):
        head, w = scaled_dot_product_attention(
            q @ w_q[i], k @ w_k[i], v @ w_v[i],
            mask=None if mask is None else (np.asarray(mask)[i] if np.ndim(mask) == 3 else mask),
        )
        heads.append(head)  # (n_q, d_v)
        weights.append(w)  # (n_q, n_k)
    concat = np.concatenate(heads, axis=-1)  # (n_q, h * d_v)
    return concat @ w_o, np.stack(weights)


def feed_forward(x, w1, b1, w2, b2) -> np.ndarray:
    """FFN(x) = max(0, x W₁ + b₁) W₂ + b₂  (paper §3.3, equation 2), applied to each position.

    Args:
        x: ``(..., d_model)``.
        w1: ``(d_model, d_ff)``;  b1: ``(d_ff,)``.
        w2: ``(d_ff, d_out)``;   b2: ``(d_out,)``.

    Returns:
        float64 array ``(..., d_out)``.

    Raises:
        ValueError: the shapes do not chain (named in the message).
    """
    x = _as_float_array(x, "x")
    w1 = _as_float_array(w1, "w1", ndim=2)
    b1 = _as_float_array(b1, "b1", ndim=1)
    w2 = _as_float_array(w2, "w2", ndim=2)
    b2 = _as_float_array(b2, "b2", ndim=1)
    if x.ndim < 1 or x.shape[-1] != w1.shape[0]:
        raise ValueError(f"x of shape {x.shape} does not match w1 of shape {w1.shape}")
    if b1.shape[0] != w1.shape[1]:
        raise ValueError(f"b1 of shape {b1.shape} does not match w1 of shape {w1.shape}")
    if w2.shape[0] != w1.shape[1]:
        raise ValueError(f"w2 of shape {w2.shape} does not follow w1 of shape {w1.shape}")
    if b2.shape[0] != w2.shape[1]:
        raise ValueError(f"b2 of shape {b2.shape} does not match w2 of shape {w2.shape}")
    hidden = np.maximum(0.0, x @ w1 + b1)  # (..., d_ff)
    return hidden @ w2 + b2


def layer_norm(x, gamma=None, beta=None, eps: float = 1e-5) -> np.ndarray:
    """Layer normalization over the last axis (Ba et al., 2016), as ``torch.nn.LayerNorm``.

    y = γ · (x − μ) / √(σ² + ε) + β, with μ and the *biased* variance σ² taken over the
    last axis and ε inside the square root.

    Args:
        x: ``(..., d_model)``.
        gamma: scale ``(d_model,)``, default ones.
        beta: shift ``(d_model,)``, default zeros.
        eps: added to the variance, default 1e-5 (PyTorch's default).

    Returns:
        float64 array shaped like ``x``.

    Raises:
        ValueError: ``gamma``/``beta`` do not have shape ``(d_model,)``, or ``eps`` < 0.
    """
    x = _as_float_array(x, "x")
    if x.ndim < 1:
        raise ValueError("layer_norm needs at least one dimension, got a scalar")
    d = x.shape[-1]
    if eps < 0:
        raise ValueError(f"eps must be non-negative, got {eps}")
    gamma = np.ones(d) if gamma is None else _as_float_array(gamma, "gamma", ndim=1)
    beta = np.zeros(d) if beta is None else _as_float_array(beta, "beta", ndim=1)
    if gamma.shape != (d,) or beta.shape != (d,):
        raise ValueError(
            f"gamma {gamma.shape} and beta {beta.shape} must both have shape ({d},) to match x {x.shape}"
        )
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # biased, as PyTorch
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def positional_encoding(seq_len: int, d_model: int) -> np.ndarray:
    """Sinusoidal positional encoding (paper §3.5).

    PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)).

    Args:
        seq_len: number of positions (≥ 1).
        d_model: model width, a positive even integer.

    Returns:
        float64 array ``(seq_len, d_model)``, values in [-1, 1].

    Raises:
        TypeError: arguments are not integers.
        ValueError: ``seq_len`` < 1, or ``d_model`` not a positive even number.
    """
    for name, val in (("seq_len", seq_len), ("d_model", d_model)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {val!r}")
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even number, got {d_model}")
    pos = np.arange(seq_len)[:, None]  # (seq_len, 1)
    two_i = np.arange(0, d_model, 2)[None, :]  # (1, d_model/2)
    angle = pos / np.power(10000.0, two_i / d_model)  # (seq_len, d_model/2)
    pe = np.empty((seq_len, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


def causal_mask(n: int) -> np.ndarray:
    """Lower-triangular boolean mask ``(n, n)``: position i may attend to j ≤ i (paper §3.2.3).

    Raises:
        TypeError/ValueError: ``n`` is not a positive integer.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an integer, got {n!r}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return np.tril(np.ones((n, n), dtype=bool))


def padding_mask(lengths: Sequence[int], max_len: int | None = None) -> np.ndarray:
    """Key-padding mask ``(batch, 1, max_len)``: True where the key is a real token.

    The middle axis of size 1 broadcasts over the queries, so the result can be passed
    directly as ``mask`` to :func:`scaled_dot_product_attention` for a batch.

    Args:
        lengths: real length of each sequence, each in 1..max_len.
        max_len: padded length; default ``max(lengths)``.

    Raises:
        ValueError: a length is < 1 or > ``max_len``.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be a 1-D sequence of integers, got {lengths!r}")
    max_len = int(lengths.max()) if max_len is None else max_len
    if (lengths < 1).any() or (lengths > max_len).any():
        raise ValueError(f"every length must be in 1..{max_len}, got {lengths.tolist()}")
    return (np.arange(max_len)[None, :] < lengths[:, None])[:, None, :]


def noam_lr(step, d_model: int, warmup_steps: int, factor: float = 1.0):
    """Learning rate of the paper's schedule (§5.3, equation 3).

    lr = factor · d_model^−0.5 · min(step^−0.5, step · warmup_steps^−1.5)

    It rises linearly for ``warmup_steps`` steps, peaks at step = warmup_steps, then decays
    as the inverse square root of the step.  Steps count from 1.

    Args:
        step: training step (int ≥ 1) or an array of them.
        d_model: model width (> 0).
        warmup_steps: warm-up length (> 0).
        factor: overall multiplier (the Annotated Transformer's "factor"), default 1.

    Returns:
        float (or float64 array like ``step``), the learning rate.

    Raises:
        ValueError: a step < 1, or a non-positive d_model / warmup_steps.
    """
    if d_model <= 0 or warmup_steps <= 0:
        raise ValueError(f"d_model and warmup_steps must be positive, got {d_model} and {warmup_steps}")
    s = np.asarray(step, dtype=np.float64)
    if (s < 1).any():
        raise ValueError(f"steps count from 1, got {step!r}")
    lr = factor * d_model**-0.5 * np.minimum(s**-0.5, s * warmup_steps**-1.5)
    return float(lr) if lr.ndim == 0 else lr


def split_heads(x, n_heads: int) -> np.ndarray:
    """Split the last axis of ``x`` into ``n_heads`` heads: ``(..., seq_len, d_model)`` -> ``(..., n_heads, seq_len, d_k)``.

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
    if isinstance(n_heads, bool) or not isinstance(n_heads, (int, np.integer)):
        raise TypeError(f"n_heads must be an integer, got {n_heads!r}")
    x = _as_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., seq_len, d_model), got shape {x.shape}")
    if n_heads < 1:
        raise ValueError(f"n_heads must be at least 1, got {n_heads}")
    d_model = x.shape[-1]
    if d_model % n_heads:
        raise ValueError(
            f"d_model {d_model} is not divisible by n_heads {n_heads} "
            f"(x has shape {x.shape}): each head would get {d_model}/{n_heads} columns"
        )
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
    x = _as_float_array(x, "x")
    if x.ndim < 3:
        raise ValueError(f"x must have shape (..., n_heads, seq_len, d_k), got shape {x.shape}")
    x = np.swapaxes(x, -2, -3)  # (..., seq_len, n_heads, d_k)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])


def sublayer(x, fn, norm_first: bool = False, gamma=None, beta=None, eps: float = 1e-5) -> np.ndarray:
    """One residual sub-layer, in the paper's post-LN or the modern pre-LN arrangement.

    * post-LN (``norm_first=False``, paper §3.1): ``LayerNorm(x + fn(x))``.
    * pre-LN (``norm_first=True``, Xiong et al. 2020): ``x + fn(LayerNorm(x))``.

    ``fn`` stands for the sub-layer itself (self-attention or the feed-forward network);
    the LayerNorm is :func:`layer_norm` with parameters ``gamma``, ``beta`` and ``eps``.

    Args:
        x: the residual stream, ``(..., d_model)``.
        fn: a callable mapping an array ``(..., d_model)`` to one of the same shape.
        norm_first: ``False`` for post-LN (the paper), ``True`` for pre-LN.
        gamma, beta: LayerNorm scale and shift ``(d_model,)``; default ones and zeros.
        eps: added to the variance inside the square root (PyTorch's default 1e-5).

    Returns:
        float64 array shaped like ``x``.

    Raises:
        TypeError: ``fn`` is not callable, or ``x`` is not numeric.
        ValueError: ``fn`` returns an array whose shape differs from ``x``'s (both named).
    """
    x = _as_float_array(x, "x")
    if not callable(fn):
        raise TypeError(f"fn must be a callable sub-layer, got {type(fn).__name__}")
    inner = layer_norm(x, gamma, beta, eps) if norm_first else x  # (..., d_model)
    out = _as_float_array(fn(inner), "fn(x)")
    if out.shape != x.shape:
        raise ValueError(
            f"the sub-layer must keep the shape of the residual stream: x has shape {x.shape}, "
            f"fn returned shape {out.shape}"
        )
    if norm_first:
        return x + out
    return layer_norm(x + out, gamma, beta, eps)


def relative_position_matrix(offset, d_model: int) -> np.ndarray:
    """The linear map that shifts a sinusoidal positional encoding by ``offset`` positions.

    Paper §3.5: "for any fixed offset k, PE_{pos+k} can be represented as a linear function
    of PE_{pos}".  With ω_i = 10000^(-2i/d_model), the pair (PE[pos, 2i], PE[pos, 2i+1]) =
    (sin ω_i·pos, cos ω_i·pos) is turned into the pair at pos + k by the 2×2 rotation
    ``[[cos ω_i k, sin ω_i k], [-sin ω_i k, cos ω_i k]]`` (angle-addition formulas).  Stacking
    the d_model/2 blocks on the diagonal gives M_k, which does not depend on pos:

        PE[pos + k] = M_k @ PE[pos]   (column vectors),  i.e.  PE[k:] = PE[:-k] @ M_k.T.

    M_k is orthogonal, M_0 = I, M_a @ M_b = M_{a+b}, and M_{-k} = M_k.T.

    Args:
        offset: the shift k, a real number (integers in practice; negative shifts back).
        d_model: model width, a positive even integer.

    Returns:
        float64 array ``(d_model, d_model)``, block diagonal with 2×2 rotation blocks.

    Raises:
        TypeError: ``offset`` is not a real number or ``d_model`` is not an integer.
        ValueError: ``d_model`` is not a positive even number, or ``offset`` is not finite.
    """
    if isinstance(d_model, bool) or not isinstance(d_model, (int, np.integer)):
        raise TypeError(f"d_model must be an integer, got {d_model!r}")
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even number, got {d_model}")
    if isinstance(offset, bool) or not isinstance(offset, (int, float, np.integer, np.floating)):
        raise TypeError(f"offset must be a real number, got {offset!r}")
    if not np.isfinite(offset):
        raise ValueError(f"offset must be finite, got {offset}")
    omega = np.power(10000.0, -np.arange(0, d_model, 2) / d_model)  # (d_model/2,)
    c, s = np.cos(omega * offset), np.sin(omega * offset)  # (d_model/2,)
    m = np.zeros((d_model, d_model))
    idx = np.arange(0, d_model, 2)
    m[idx, idx] = c
    m[idx, idx + 1] = s
    m[idx + 1, idx] = -s
    m[idx + 1, idx + 1] = c
    return m


def label_smoothing_targets(targets, vocab_size: int, label_smoothing: float = 0.1,
                            convention: str = "uniform") -> np.ndarray:
    """Smoothed target distributions for classification over ``vocab_size`` classes (paper §5.4).

    Two conventions are in use, and they differ only in where the smoothing mass ε goes:

    * ``"uniform"``: ε is spread over *all* V classes, the true one included:
      t = (1 − ε)·onehot + ε/V, so the true class gets 1 − ε + ε/V.  This is the equation of
      Szegedy et al. (2016, §7, with u(k) = 1/K) and what
      ``torch.nn.functional.cross_entropy(..., label_smoothing=ε)`` uses.
    * ``"exclusive"``: the true class gets exactly 1 − ε and the other V − 1 classes share ε:
      ε/(V − 1) each.  This is what the paper's own code (tensor2tensor's
      ``smoothing_cross_entropy``) does.

    Args:
        targets: integer class indices, any shape ``(...)``, each in ``0..vocab_size-1``.
        vocab_size: number of classes V (int ≥ 2).
        label_smoothing: ε in [0, 1).
        convention: ``"uniform"`` or ``"exclusive"``.

    Returns:
        float64 array ``(..., vocab_size)``; each row is a distribution (sums to 1).

    Raises:
        TypeError: ``targets`` are not integers or ``vocab_size`` is not an integer.
        ValueError: ``vocab_size`` < 2, ε outside [0, 1), a target out of range, or an
            unknown convention.
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
        raise TypeError(f"vocab_size must be an integer, got {vocab_size!r}")
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2, got {vocab_size}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    if convention not in ("uniform", "exclusive"):
        raise ValueError(f"convention must be 'uniform' or 'exclusive', got {convention!r}")
    t = np.asarray(targets)
    if t.dtype == bool or not np.issubdtype(t.dtype, np.integer):
        raise TypeError(f"targets must be integer class indices, got dtype {t.dtype}")
    if t.size and (t.min() < 0 or t.max() >= vocab_size):
        raise ValueError(f"targets must lie in 0..{vocab_size - 1}, got values {np.unique(t).tolist()}")
    onehot = (t[..., None] == np.arange(vocab_size)).astype(np.float64)  # (..., V)
    eps = float(label_smoothing)
    if convention == "uniform":
        return (1.0 - eps) * onehot + eps / vocab_size
    return (1.0 - eps) * onehot + eps / (vocab_size - 1) * (1.0 - onehot)


def cross_entropy(logits, target_dist) -> np.ndarray:
    """Cross-entropy H(t, softmax(z)) = −Σ_k t_k log softmax(z)_k, per row.

    Computed with a stable log-softmax (log-sum-exp with the maximum subtracted).

    Args:
        logits: ``(..., V)`` real scores z.
        target_dist: ``(..., V)`` target distributions t (e.g. from
            :func:`label_smoothing_targets`), same shape as ``logits``.

    Returns:
        float64 array ``(...)``: one loss per row (average it yourself for a batch mean).

    Raises:
        TypeError: non-numeric input.
        ValueError: the shapes differ, or ``target_dist`` has negative entries or rows that do
            not sum to 1 (to 1e-9).
    """
    z = _as_float_array(logits, "logits")
    t = _as_float_array(target_dist, "target_dist")
    if z.shape != t.shape or z.ndim < 1:
        raise ValueError(f"logits {z.shape} and target_dist {t.shape} must have the same shape (..., V)")
    if (t < 0).any() or not np.allclose(t.sum(axis=-1), 1.0, atol=1e-9):
        raise ValueError("target_dist rows must be non-negative and sum to 1")
    z_max = z.max(axis=-1, keepdims=True)
    log_probs = z - z_max - np.log(np.exp(z - z_max).sum(axis=-1, keepdims=True))  # (..., V)
    return -(t * log_probs).sum(axis=-1)


def dropout(x, p: float, rng: np.random.Generator, training: bool = True) -> np.ndarray:
    """Inverted dropout (Srivastava et al., 2014), as the paper applies it with P_drop (§5.4).

    In training each entry is zeroed with probability ``p`` and the survivors are scaled by
    1/(1 − p), so the expected value of every entry is unchanged and nothing needs rescaling
    at test time.  With ``training=False`` the input is returned unchanged.

    Args:
        x: array of any shape.
        p: drop probability in [0, 1).
        rng: a ``numpy.random.Generator`` (pass a seeded one for reproducible masks).
        training: apply dropout (True) or return ``x`` (False).

    Returns:
        float64 array shaped like ``x``.

    Raises:
        TypeError: ``rng`` is not a ``numpy.random.Generator``.
        ValueError: ``p`` outside [0, 1).
    """
    x = _as_float_array(x, "x")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability p must be in [0, 1), got {p}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if not training or p == 0.0:
        return x.copy()
    keep = rng.random(x.shape) >= p  # (...), True with probability 1 - p
    return np.where(keep, x / (1.0 - p), 0.0)


def shift_right(tokens, bos_id: int) -> np.ndarray:
    """Decoder input for teacher forcing: prepend ``bos_id`` and drop the last token.

    With targets y_1..y_m the decoder reads [BOS, y_1, …, y_{m−1}] and is trained to predict
    y_1..y_m, one position each; this offset together with the causal mask makes the
    prediction for position i depend only on outputs before i (paper §3.1).

    Args:
        tokens: integer array ``(..., seq_len)``, seq_len ≥ 1.
        bos_id: the begin-of-sequence token id (int).

    Returns:
        integer array ``(..., seq_len)``.

    Raises:
        TypeError: ``tokens`` are not integers or ``bos_id`` is not an integer.
        ValueError: ``tokens`` has no sequence axis or length 0.
    """
    t = np.asarray(tokens)
    if t.dtype == bool or not np.issubdtype(t.dtype, np.integer):
        raise TypeError(f"tokens must be integer ids, got dtype {t.dtype}")
    if isinstance(bos_id, bool) or not isinstance(bos_id, (int, np.integer)):
        raise TypeError(f"bos_id must be an integer, got {bos_id!r}")
    if t.ndim < 1 or t.shape[-1] < 1:
        raise ValueError(f"tokens must have shape (..., seq_len) with seq_len >= 1, got {t.shape}")
    bos = np.full(t.shape[:-1] + (1,), bos_id, dtype=t.dtype)
    return np.concatenate([bos, t[..., :-1]], axis=-1)


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
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)):
        raise TypeError(f"block_size must be an integer, got {block_size!r}")
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
