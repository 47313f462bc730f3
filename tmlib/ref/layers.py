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
    """FFN(x) = max(0, x W₁ + b₁) W₂ + b₂ (§3.3, equation 2) at each position: x ``(..., d_model)``, w1 ``(d_model,
    d_ff)``, b1 ``(d_ff,)``, w2 ``(d_ff, d_out)``, b2 ``(d_out,)`` → ``(..., d_out)``. ValueError: shapes that do not
    chain."""
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
    """y = γ · (x − μ) / √(σ² + ε) + β over the last axis (Ba et al. 2016), biased variance, as ``torch.nn.LayerNorm``:
    x ``(..., d_model)``, gamma/beta ``(d_model,)`` (default ones/zeros) → shaped like ``x``.

    Raises:
        TypeError: ``eps`` not a number. ValueError: gamma/beta not ``(d_model,)``, or ``eps`` < 0.
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
    """A residual sub-layer: ``LayerNorm(x + fn(x))`` (post-LN, §3.1) or with ``norm_first`` ``x + fn(LayerNorm(x))``
    (pre-LN, Xiong et al. 2020); ``fn`` maps ``(..., d_model)`` to the same shape (attention, feed-forward).

    Raises:
        TypeError: ``fn`` not callable, ``x`` not numeric. ValueError: ``fn`` changes the shape.
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
    """Inverted dropout (Srivastava et al. 2014; P_drop, §5.4): in training each entry is zeroed with probability ``p``
    and the rest scaled by 1/(1 − p), so the expectation is unchanged; ``training=False`` returns ``x``. ``rng``: a
    seeded ``numpy.random.Generator`` for reproducible masks.

    Raises:
        TypeError: ``p`` not a number, ``rng`` not a Generator. ValueError: ``p`` outside [0, 1).
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
    """One post-LN encoder layer (§3.1): z = LayerNorm(x + MultiHead(x, x, x)), out = LayerNorm(z + FFN(z)).

    x ``(n_src, d_model)``; self_attn ``(w_q, w_k, w_v, w_o)`` as :func:`tmlib.ref.attention.multi_head_attention`;
    ffn ``(w1, b1, w2, b2)``; norms two ``(gamma, beta)`` pairs (None: ones, zeros); mask bool, True = may attend →
    ``(n_src, d_model)``. Raises TypeError (tuples of the wrong length) or ValueError (shapes, named)."""
    w_q, w_k, w_v, w_o = _unpack(self_attn, ("w_q", "w_k", "w_v", "w_o"), "self_attn")
    w1, b1, w2, b2 = _unpack(ffn, ("w1", "b1", "w2", "b2"), "ffn")
    (g1, be1), (g2, be2) = _norms(norms, 2)
    z = sublayer(x, lambda s: multi_head_attention(s, s, s, w_q, w_k, w_v, w_o, mask=mask)[0],
                 gamma=g1, beta=be1, eps=eps)  # (n_src, d_model)
    return sublayer(z, lambda s: feed_forward(s, w1, b1, w2, b2), gamma=g2, beta=be2, eps=eps)


def decoder_layer(y, memory, self_attn, cross_attn, ffn, norms=None, self_mask=None, memory_mask=None,
                  eps: float = 1e-5) -> np.ndarray:
    """One post-LN decoder layer (§3.1): a = LayerNorm(y + MultiHead(y, y, y; causal)), c = LayerNorm(a +
    MultiHead(a, memory, memory)), out = LayerNorm(c + FFN(c)); queries from the decoder, keys and values from the
    memory.

    y ``(n_tgt, d_model)``, memory ``(n_src, d_model)``; self_attn, cross_attn, ffn as :func:`encoder_layer`; norms
    three pairs; self_mask (default causal) and memory_mask bool → ``(n_tgt, d_model)``. Raises TypeError or ValueError
    as :func:`encoder_layer`."""
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
