"""The NumPy references of Part I (no torch import): every building block of the paper written with NumPy
arrays, in float64, so that each step can be printed and checked by hand against the lecture's worked examples.
The PyTorch modules of Part II are tested against them.

* :mod:`tmlib.ref.attention` — softmax, scaled dot-product and multi-head attention (§3.2), the online softmax;
* :mod:`tmlib.ref.layers` — the feed-forward network (§3.3), layer normalization, the residual sub-layer, dropout,
  one encoder layer and one decoder layer (§3.1);
* :mod:`tmlib.ref.positional` — the sinusoidal positional encoding (§3.5);
* :mod:`tmlib.ref.masks` — causal and padding masks, the decoder input shifted right (§3.1, §3.2.3);
* :mod:`tmlib.ref.training` — the learning-rate schedule, label smoothing, cross-entropy (§5.3-5.4).

Conventions: shapes are given with names (``(n_q, d_k)`` is "number of queries by key width"); a mask is a
boolean array where ``True`` means *may attend*; a shape mismatch raises :class:`ValueError` naming the shapes,
an argument of the wrong kind :class:`TypeError` (the contract of :mod:`tmlib.validation`).

Sources: Vaswani et al. (2017), "Attention Is All You Need", §3.2-3.5 and §5.3-5.4.
"""

from tmlib.ref.attention import (merge_heads, multi_head_attention, online_softmax_attention,
                                 scaled_dot_product_attention, self_attention, softmax, split_heads)
from tmlib.ref.layers import decoder_layer, dropout, encoder_layer, feed_forward, layer_norm, sublayer
from tmlib.ref.masks import causal_mask, padding_mask, shift_right
from tmlib.ref.positional import positional_encoding, relative_position_matrix
from tmlib.ref.training import cross_entropy, label_smoothing_targets, noam_lr

__all__ = [
    "softmax", "scaled_dot_product_attention", "self_attention", "split_heads", "merge_heads", "multi_head_attention",
    "online_softmax_attention",
    "feed_forward", "layer_norm", "sublayer", "dropout", "encoder_layer", "decoder_layer",
    "causal_mask", "padding_mask", "shift_right",
    "positional_encoding", "relative_position_matrix",
    "noam_lr", "label_smoothing_targets", "cross_entropy",
]
