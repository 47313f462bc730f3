"""The other sub-layers of a Transformer layer in NumPy: the position-wise feed-forward network (§3.3), layer
normalization and the residual sub-layer around it (§3.1, §5.4), dropout (§5.4), and one encoder layer and one
decoder layer assembled from these pieces and the attention of :mod:`tmlib.ref.attention` (§3.1).
"""
from __future__ import annotations

import numpy as np

from tmlib.ref.attention import multi_head_attention
from tmlib.ref.masks import causal_mask
from tmlib.validation import check_float, check_float_array

__all__ = ["feed_forward", "layer_norm", "sublayer", "dropout"]


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
    x = check_float_array(x, "x")
    w1, w2 = check_float_array(w1, "w1", ndim=2), check_float_array(w2, "w2", ndim=2)
    b1, b2 = check_float_array(b1, "b1", ndim=1), check_float_array(b2, "b2", ndim=1)
    if x.ndim < 1 or x.shape[-1] != w1.shape[0]:
        raise ValueError(f"x of shape {x.shape} does not match w1 of shape {w1.shape}")
    if b1.shape[0] != w1.shape[1]:
        raise ValueError(f"b1 of shape {b1.shape} does not match w1 of shape {w1.shape}")
    if w2.shape[0] != w1.shape[1]:
        raise ValueError(f"w2 of shape {w2.shape} does not follow w1 of shape {w1.shape}")
    if b2.shape[0] != w2.shape[1]:
        raise ValueError(f"b2 of shape {b2.shape} does not match w2 of shape {w2.shape}")
    hidden = np.maximum(0.0, x @ w1 + b1)  # (..., d_ff)
    return hidden @ w2 + b2  # (..., d_out)


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
        TypeError: ``eps`` is not a number.
        ValueError: ``gamma``/``beta`` do not have shape ``(d_model,)``, or ``eps`` < 0.
    """
    x = check_float_array(x, "x")
    if x.ndim < 1:
        raise ValueError("layer_norm needs at least one dimension, got a scalar")
    d = x.shape[-1]
    eps = check_float(eps, "eps", minimum=0.0)
    gamma = np.ones(d) if gamma is None else check_float_array(gamma, "gamma", ndim=1)
    beta = np.zeros(d) if beta is None else check_float_array(beta, "beta", ndim=1)
    if gamma.shape != (d,) or beta.shape != (d,):
        raise ValueError(
            f"gamma {gamma.shape} and beta {beta.shape} must both have shape ({d},) to match x {x.shape}")
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # (..., 1): biased, as PyTorch
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


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
    x = check_float_array(x, "x")
    if not callable(fn):
        raise TypeError(f"fn must be a callable sub-layer, got {type(fn).__name__}")
    inner = layer_norm(x, gamma, beta, eps) if norm_first else x  # (..., d_model)
    out = check_float_array(fn(inner), "fn(x)")
    if out.shape != x.shape:
        raise ValueError(f"the sub-layer must keep the shape of the residual stream: x has shape {x.shape}, "
                         f"fn returned shape {out.shape}")
    if norm_first:
        return x + out
    return layer_norm(x + out, gamma, beta, eps)


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
        TypeError: ``p`` is not a number, or ``rng`` is not a ``numpy.random.Generator``.
        ValueError: ``p`` outside [0, 1).
    """
    x = check_float_array(x, "x")
    p = check_float(p, "p")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability p must be in [0, 1), got {p}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if not training or p == 0.0:
        return x.copy()
    keep = rng.random(x.shape) >= p  # (...), True with probability 1 - p
    return np.where(keep, x / (1.0 - p), 0.0)


# ------------------------------------------------------------------------------ one encoder and one decoder layer
__all__ += ["encoder_layer", "decoder_layer"]

def _unpack(params, names: tuple[str, ...], what: str) -> tuple:
    """``params`` as a tuple of len(names) entries; a TypeError names the expected order."""
    if not isinstance(params, (tuple, list)) or len(params) != len(names):
        raise TypeError(f"{what} must be a tuple ({', '.join(names)}), got {type(params).__name__}"
                        + (f" of length {len(params)}" if isinstance(params, (tuple, list)) else ""))
    return tuple(params)


def _norms(norms, count: int) -> list:
    """``count`` LayerNorm parameter pairs ``(gamma, beta)``; ``None`` gives ``(None, None)`` (ones and zeros)."""
    if norms is None:
        return [(None, None)] * count
    if not isinstance(norms, (tuple, list)) or len(norms) != count:
        raise TypeError(f"norms must be a sequence of {count} (gamma, beta) pairs, one per sub-layer, or None")
    return [_unpack(pair, ("gamma", "beta"), f"norms[{i}]") for i, pair in enumerate(norms)]


def encoder_layer(x, self_attn, ffn, norms=None, mask=None, eps: float = 1e-5) -> np.ndarray:
    """One encoder layer, post-LN (paper §3.1): self-attention, then the feed-forward network.

    "Each layer has two sub-layers. The first is a multi-head self-attention mechanism, and the second is a
    simple, position-wise fully connected feed-forward network. We employ a residual connection around each
    of the two sub-layers, followed by layer normalization" (§3.1):

        z = LayerNorm(x + MultiHead(x, x, x)),   out = LayerNorm(z + FFN(z)).

    Args:
        x: the source sequence ``(n_src, d_model)``.
        self_attn: ``(w_q, w_k, w_v, w_o)`` as for :func:`tmlib.ref.attention.multi_head_attention`:
            ``(h, d_model, d_k)`` each for the first three, ``(h * d_v, d_model)`` for ``w_o``.
        ffn: ``(w1, b1, w2, b2)`` as for :func:`feed_forward`, with ``d_out = d_model``.
        norms: two ``(gamma, beta)`` pairs ``(d_model,)`` for the two LayerNorms; ``None``: ones and zeros.
        mask: optional boolean source padding mask broadcastable to ``(n_src, n_src)``, True = may attend.
        eps: LayerNorm's ε (PyTorch's default 1e-5).

    Returns:
        float64 array ``(n_src, d_model)``.

    Raises:
        TypeError: ``self_attn``, ``ffn`` or ``norms`` are not tuples of the stated length.
        ValueError: shapes that do not chain (from the sub-layers, naming the shapes).
    """
    w_q, w_k, w_v, w_o = _unpack(self_attn, ("w_q", "w_k", "w_v", "w_o"), "self_attn")
    w1, b1, w2, b2 = _unpack(ffn, ("w1", "b1", "w2", "b2"), "ffn")
    (g1, be1), (g2, be2) = _norms(norms, 2)
    z = sublayer(x, lambda s: multi_head_attention(s, s, s, w_q, w_k, w_v, w_o, mask=mask)[0],
                 gamma=g1, beta=be1, eps=eps)  # (n_src, d_model)
    return sublayer(z, lambda s: feed_forward(s, w1, b1, w2, b2), gamma=g2, beta=be2, eps=eps)


def decoder_layer(y, memory, self_attn, cross_attn, ffn, norms=None, self_mask=None, memory_mask=None,
                  eps: float = 1e-5) -> np.ndarray:
    """One decoder layer, post-LN (paper §3.1): masked self-attention, cross-attention, feed-forward network.

    "In addition to the two sub-layers in each encoder layer, the decoder inserts a third sub-layer, which
    performs multi-head attention over the output of the encoder stack" (§3.1); the queries of that
    sub-layer come from the decoder, the keys and values from the encoder's output, the *memory* (§3.2.3):

        a = LayerNorm(y + MultiHead(y, y, y; causal mask)),
        c = LayerNorm(a + MultiHead(a, memory, memory)),   out = LayerNorm(c + FFN(c)).

    Args:
        y: the decoder's input ``(n_tgt, d_model)`` (the target shifted right, embedded).
        memory: the encoder's output ``(n_src, d_model)``.
        self_attn, cross_attn: ``(w_q, w_k, w_v, w_o)`` each, as in :func:`encoder_layer`.
        ffn: ``(w1, b1, w2, b2)`` as for :func:`feed_forward`.
        norms: three ``(gamma, beta)`` pairs ``(d_model,)``; ``None``: ones and zeros.
        self_mask: boolean ``(n_tgt, n_tgt)``, True = may attend; default the causal mask.
        memory_mask: optional boolean source padding mask broadcastable to ``(n_tgt, n_src)``.
        eps: LayerNorm's ε.

    Returns:
        float64 array ``(n_tgt, d_model)``.

    Raises:
        TypeError: ``self_attn``, ``cross_attn``, ``ffn`` or ``norms`` are not tuples of the stated length.
        ValueError: shapes that do not chain (from the sub-layers, naming the shapes).
    """
    sa = _unpack(self_attn, ("w_q", "w_k", "w_v", "w_o"), "self_attn")
    ca = _unpack(cross_attn, ("w_q", "w_k", "w_v", "w_o"), "cross_attn")
    w1, b1, w2, b2 = _unpack(ffn, ("w1", "b1", "w2", "b2"), "ffn")
    (g1, be1), (g2, be2), (g3, be3) = _norms(norms, 3)
    y = check_float_array(y, "y", ndim=2)  # (n_tgt, d_model)
    memory = check_float_array(memory, "memory", ndim=2)  # (n_src, d_model)
    if self_mask is None:
        self_mask = causal_mask(y.shape[0])  # (n_tgt, n_tgt)
    a = sublayer(y, lambda s: multi_head_attention(s, s, s, *sa, mask=self_mask)[0],
                 gamma=g1, beta=be1, eps=eps)  # (n_tgt, d_model)
    c = sublayer(a, lambda s: multi_head_attention(s, memory, memory, *ca, mask=memory_mask)[0],
                 gamma=g2, beta=be2, eps=eps)  # (n_tgt, d_model): queries from the decoder, keys/values from memory
    return sublayer(c, lambda s: feed_forward(s, w1, b1, w2, b2), gamma=g3, beta=be3, eps=eps)
