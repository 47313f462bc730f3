"""The NumPy references of Part I (no torch import): every building block of the paper written with NumPy
arrays, on the lecture's small examples.
"""

from tmlib.ref.numpy_ref import (
    causal_mask, cross_entropy, dropout, feed_forward, label_smoothing_targets, layer_norm, merge_heads,
    multi_head_attention, noam_lr, online_softmax_attention, padding_mask, positional_encoding,
    relative_position_matrix, scaled_dot_product_attention, shift_right, softmax, split_heads, sublayer
)

__all__ = [
    "causal_mask", "cross_entropy", "dropout", "feed_forward", "label_smoothing_targets", "layer_norm",
    "merge_heads", "multi_head_attention", "noam_lr", "online_softmax_attention", "padding_mask",
    "positional_encoding", "relative_position_matrix", "scaled_dot_product_attention", "shift_right", "softmax",
    "split_heads", "sublayer"
]
