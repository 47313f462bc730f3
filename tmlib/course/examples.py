"""The lecture's worked examples, as data, defined once.

Every notebook and test imports these arrays instead of retyping them.  Each example is
a small frozen dataclass of read-only float64 arrays, so an accidental in-place edit in
a notebook raises instead of silently changing later results.

Source: the lecture "Transformer Architecture" (course seed 001), sections on scaled
dot-product attention (examples 1-3), multi-head attention (example 2), the
position-wise feed-forward network, and the learning-rate schedule.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "AttentionExample",
    "MultiHeadExample",
    "FeedForwardExample",
    "ATTENTION_EXAMPLE_1",
    "ATTENTION_EXAMPLE_2",
    "ATTENTION_EXAMPLE_3",
    "ATTENTION_EXAMPLES",
    "MHA_EXAMPLE_2",
    "MHA_EXAMPLE_3",
    "FFN_EXAMPLE",
    "LR_EXAMPLE",
    "LECTURE_PRINTED",
    "CROSS_ATTENTION_EXAMPLE",
]


def _frozen(x) -> np.ndarray:
    arr = np.array(x, dtype=np.float64)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True)
class AttentionExample:
    """Inputs of a scaled dot-product attention example: Q (n_q, d_k), K (n_k, d_k), V (n_k, d_v)."""

    name: str
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray


@dataclass(frozen=True)
class MultiHeadExample:
    """Inputs of a multi-head attention example.

    q, k, v: (n, d_model); w_q, w_k, w_v: (h, d_model, d_head); w_o: (h * d_head, d_model).
    """

    name: str
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray


@dataclass(frozen=True)
class FeedForwardExample:
    """Inputs of the feed-forward example: x (n, d_model), w1 (d_model, d_ff), b1 (d_ff,), w2 (d_ff, d_model), b2."""

    x: np.ndarray
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray


ATTENTION_EXAMPLE_1 = AttentionExample(
    name="Example 1: three queries, two-dimensional keys",
    q=_frozen([[1, 0], [0, 1], [1, 1]]),
    k=_frozen([[1, 1], [0, 1], [1, 0]]),
    v=_frozen([[0, 2], [1, 1], [2, 0]]),
)

ATTENTION_EXAMPLE_2 = AttentionExample(
    name="Example 2: one query, identity keys",
    q=_frozen([[1, 1]]),
    k=_frozen(np.eye(2)),
    v=_frozen([[2, 3], [4, 1]]),
)

ATTENTION_EXAMPLE_3 = AttentionExample(
    name="Example 3 (in-course question): d_k = 4, a one-column V",
    q=_frozen([[1, 1, 1, 1]]),
    k=_frozen(np.eye(4)),
    v=_frozen([[2], [4], [6], [8]]),
)

ATTENTION_EXAMPLES = (ATTENTION_EXAMPLE_1, ATTENTION_EXAMPLE_2, ATTENTION_EXAMPLE_3)

MHA_EXAMPLE_2 = MultiHeadExample(
    name="Multi-head example 2: 3 tokens, d_model 4, 2 heads of size 2",
    q=_frozen([[1, 2, 1, 0], [0, 1, 1, 1], [1, 0, 2, 1]]),
    k=_frozen([[1, 1, 0, 2], [2, 1, 1, 0], [0, 1, 1, 1]]),
    v=_frozen([[1, 1, 0, 0], [0, 2, 1, 1], [1, 1, 2, 2]]),
    w_q=_frozen([
        [[1, 0], [0, 1], [1, 0], [0, 1]],
        [[0, 1], [1, 0], [1, 1], [0, 0]],
    ]),
    w_k=_frozen([
        [[1, 0], [0, 1], [0, 1], [1, 0]],
        [[0, 1], [1, 0], [1, 0], [1, 1]],
    ]),
    w_v=_frozen([
        [[1, 0], [0, 1], [1, 0], [0, 1]],
        [[0, 1], [1, 1], [0, 1], [1, 0]],
    ]),
    w_o=_frozen([[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 0], [0, 1, 0, 1]]),
)

#: Three heads on d_model 4 (the lecture's example 3 gives no numbers; these are the course's).
#: 4 is not divisible by 3, so each head gets an explicit width d_k = d_v = 2 and W^O maps
#: 3 * 2 = 6 columns back to 4.  Heads 1 and 2 are those of MHA_EXAMPLE_2.
MHA_EXAMPLE_3 = MultiHeadExample(
    name="Multi-head example 3: 3 tokens, d_model 4, 3 heads of size 2 (h * d_k = 6)",
    q=MHA_EXAMPLE_2.q,
    k=MHA_EXAMPLE_2.k,
    v=MHA_EXAMPLE_2.v,
    w_q=_frozen(np.concatenate([MHA_EXAMPLE_2.w_q, [[[1, 1], [0, 0], [0, 1], [1, 0]]]])),
    w_k=_frozen(np.concatenate([MHA_EXAMPLE_2.w_k, [[[0, 0], [1, 1], [1, 0], [0, 1]]]])),
    w_v=_frozen(np.concatenate([MHA_EXAMPLE_2.w_v, [[[1, 0], [0, 0], [0, 1], [1, 1]]]])),
    w_o=_frozen(np.concatenate([MHA_EXAMPLE_2.w_o, [[1, 1, 0, 0], [0, 0, 1, 1]]])),
)

FFN_EXAMPLE = FeedForwardExample(
    x=_frozen([[1, 0], [0, 1], [1, 1]]),
    w1=_frozen([[1, 1], [0, 1]]),
    b1=_frozen([0, 1]),
    w2=_frozen([[1, 0], [2, 1]]),
    b2=_frozen([1, -1]),
)

#: The learning-rate example: d_model 512, warm-up 4000 steps, at the steps the course works.
LR_EXAMPLE = {"d_model": 512, "warmup_steps": 4000, "steps": (1, 1000, 4000, 10000, 100000)}

#: The numbers the lecture (seed 001) *prints* for its attention examples, rounded as printed,
#: so that notebooks and tests can set them beside the exact values.  Keys: ``"attention_1"``,
#: ``"attention_2"``, ``"attention_3"`` (scaled dot-product examples 1-3; example 3's answer is
#: in a hidden, commented-out block of the lecture) and ``"mha_2"`` (two-head example 2; ``_1``/``_2``
#: suffixes name the head).  The lecture omits the final output of ``"mha_2"`` (after W^O).
LECTURE_PRINTED = {
    "attention_1": {
        "scores": _frozen([[1, 0, 1], [1, 1, 0], [2, 1, 1]]),
        "sqrt_d_k": 1.41,
        "scaled_scores": _frozen([[0.71, 0, 0.71], [0.71, 0.71, 0], [1.41, 0.71, 0.71]]),
        "exp_0.71": 2.034,
        "exp_1.41": 4.096,
        "row_sums": _frozen([5.068, 5.068, 8.164]),
        "weights_3dp": _frozen([[0.401, 0.197, 0.401], [0.401, 0.401, 0.197], [0.501, 0.249, 0.249]]),
        "weights": _frozen([[0.40, 0.20, 0.40], [0.40, 0.40, 0.20], [0.50, 0.25, 0.25]]),
        "output": _frozen([[1.00, 1.00], [0.80, 1.20], [0.75, 1.25]]),
    },
    "attention_2": {
        "scores": _frozen([[1, 1]]),
        "scaled_scores": _frozen([[0.71, 0.71]]),
        "weights": _frozen([[0.5, 0.5]]),
        "output": _frozen([[3, 2]]),
    },
    "attention_3": {
        "scores": _frozen([[1, 1, 1, 1]]),
        "scaled_scores": _frozen([[0.5, 0.5, 0.5, 0.5]]),
        "weights": _frozen([[0.25, 0.25, 0.25, 0.25]]),
        "output": _frozen([[5]]),
    },
    "mha_2": {
        "q_1": _frozen([[2, 2], [1, 2], [3, 1]]),
        "k_1": _frozen([[3, 1], [2, 2], [1, 2]]),
        "v_1": _frozen([[1, 1], [1, 3], [3, 3]]),
        "q_2": _frozen([[3, 2], [2, 1], [2, 3]]),
        "k_2": _frozen([[3, 3], [2, 2], [3, 1]]),
        "v_2": _frozen([[1, 2], [3, 3], [3, 4]]),
        "scores_1": _frozen([[8, 8, 6], [5, 6, 5], [10, 8, 5]]),
        "scaled_scores_1": _frozen([[5.66, 5.66, 4.24], [3.54, 4.24, 3.54], [7.07, 5.66, 3.54]]),
        "weights_1": _frozen([[0.45, 0.45, 0.11], [0.25, 0.50, 0.25], [0.79, 0.19, 0.02]]),
        "head_1": _frozen([[1.23, 2.13], [1.50, 2.50], [1.04, 1.42]]),
        "scores_2": _frozen([[15, 10, 11], [9, 6, 7], [15, 10, 9]]),
        "scaled_scores_2": _frozen([[10.61, 7.07, 7.78], [6.36, 4.24, 4.95], [10.61, 7.07, 6.36]]),
        "weights_2": _frozen([[0.92, 0.03, 0.05], [0.73, 0.09, 0.18], [0.96, 0.03, 0.01]]),
        "head_2": _frozen([[1.16, 2.13], [1.53, 2.45], [1.09, 2.06]]),
    },
    # Feed-forward example (seed 001, "Numerical Computation of the Feed-Forward Network"):
    # X_1 = x W1 + b1 (= ReLU(X_1)), X_2 = X_1 W2, and the final output X_2 + b2.
    "ffn": {
        "x_w1_plus_b1": _frozen([[1, 2], [0, 2], [1, 3]]),
        "relu": _frozen([[1, 2], [0, 2], [1, 3]]),
        "x_w2": _frozen([[5, 2], [4, 2], [7, 3]]),
        "output": _frozen([[6, 1], [5, 1], [8, 2]]),
    },
}

#: Cross-attention example of notebook 5 (the course's own numbers; the lecture has none):
#: two decoder positions query three encoder states.  q (n_tgt=2, d_k=2) comes from the decoder,
#: k (n_src=3, d_k=2) and v (n_src=3, d_v=2) from the encoder output ("memory"), already
#: projected.  Token labels: source "ich bin hier", decoder input "<bos> I".
CROSS_ATTENTION_EXAMPLE = AttentionExample(
    name="Cross-attention: 2 decoder queries, 3 encoder keys/values",
    q=_frozen([[2, 0], [1, 1]]),
    k=_frozen([[1, 0], [0, 1], [1, 1]]),
    v=_frozen([[1, 2], [3, 0], [0, 1]]),
)
