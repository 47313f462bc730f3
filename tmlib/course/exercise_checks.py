"""Checks for the exercises on attention and the layers that compare with the right answer without showing it, and name the symptom.

A check cell that computes the expected value in plain sight (``R.feed_forward(x, w1, b1_new, ...)``) hands the
student the answer; these functions compute it inside, compare with :func:`tmlib.course.checks.check_close`, and on
a failure add what the answer matches instead (the scores not scaled, the ReLU missing, one factor of a product
left out). The build-it checks (:func:`check_multi_head_attention`, :func:`check_feed_forward`) call the student's
function on seeded random inputs that the student did not choose, and say which head or which step differs.
None prints an expected value. Counts are checked by :mod:`tmlib.course.count_checks`, the training exercises by
:mod:`tmlib.course.training_checks`.
"""
from __future__ import annotations

import numpy as np

from tmlib import ref
from tmlib.course.checks import (as_float_array, call_on_batch, check_close, check_shape, require_answered,
                                 rounding_atol)

__all__ = ["check_attention_result", "check_merged_alignment", "check_feed_forward_result", "check_layer_norm_result",
           "check_multi_head_result", "check_multi_head_attention", "check_feed_forward", "check_encoder_layer",
           "check_score_spread", "check_encoding_row", "check_positional_encoding", "check_decoder_layer",
           "check_rope_scores", "check_wavelength_pair", "check_key_shifts", "check_one_head", "check_relu_bias",
           "check_ln_of_affine", "check_masked_attention", "check_split_merge", "check_temperature",
           "check_swapped_heads"]


def _atol_of(tolerance: dict) -> float:
    """The absolute tolerance that :func:`check_close` applies for these ``atol``/``decimals`` arguments."""
    decimals = tolerance.get("decimals")
    return rounding_atol(decimals) if decimals is not None else tolerance.get("atol") or 0.0


def _compare(answer, expected, what: str, variants=(), *, otherwise=None, **tolerance) -> str:
    """``check_close(answer, expected)``; on a failure, add the hint of the first variant ``(hint, value)`` that the
    answer matches (a typical mistake recomputed here, never printed), or else ``otherwise(answer)`` (a rule the
    answer breaks, as a line of text, or None)."""
    try:
        return check_close(answer, expected, what, **tolerance)
    except AssertionError as err:
        a = as_float_array(answer, "answer", what)
        # a variant is recognised to the check's own tolerance: a hand computation rounded as asked is named too
        atol = max(1e-9, _atol_of(tolerance))
        rtol = tolerance.get("rtol") or 0.0
        for hint, value in variants:
            v = np.asarray(value, dtype=float)
            if v.shape == a.shape and np.all(np.isfinite(v)) and np.allclose(a, v, rtol=rtol, atol=atol):
                raise AssertionError(f"{err}\n  Your answer is what {hint}.") from None
        rule = otherwise(a) if otherwise is not None else None
        if rule:
            raise AssertionError(f"{err}\n  {rule}") from None
        raise


def _attention(q, k, v, scale: bool = True, axis: int = -1):
    q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / (np.sqrt(q.shape[-1]) if scale else 1.0)
    weights = ref.softmax(scores, axis=axis)
    return weights @ v, weights


def check_attention_result(answer, q, k, v, what: str = "your answer", *, part: str = "output", **tolerance) -> str:
    """Compare ``answer`` with the ``part`` (``"output"`` or ``"weights"``) of scaled dot-product attention of
    ``q``, ``k``, ``v``, naming a missing scale or a softmax over the queries. ``tolerance``: ``atol`` or
    ``decimals`` of :func:`check_close` (default ``atol=1e-9``)."""
    pick = 0 if part == "output" else 1
    if part not in ("output", "weights"):
        raise ValueError(f"part must be 'output' or 'weights', got {part!r}")
    variants = [("attention gives without dividing the scores by √d_k", _attention(q, k, v, scale=False)[pick]),
                ("attention gives with the softmax taken over the queries (each column summing to 1)",
                 _attention(q, k, v, axis=-2)[pick])]
    return _compare(answer, _attention(q, k, v)[pick], what, variants, **(tolerance or {"atol": 1e-9}))


def check_merged_alignment(answer, weights, query_pieces, key_pieces, what: str = "merged alignment") -> str:
    """Check a word-by-word attention matrix merged from BPE pieces (sum over a word's key pieces, mean over its
    query pieces; :func:`tmlib.analysis.alignment.merge_attention`) to 4 decimals, naming the sum and the mean
    exchanged, a word's pieces left unmerged or rows that no longer add up to 1; never the matrix."""
    from tmlib.analysis.alignment import word_spans

    w = np.asarray(weights, dtype=float)
    qs, ks = word_spans(list(query_pieces)), word_spans(list(key_pieces))
    check_shape(answer, (len(qs), len(ks)), what)

    def merge(rows, cols):
        by_key = np.stack([cols(w[:, a:b], axis=1) for a, b in ks], axis=1)
        return np.stack([rows(by_key[a:b], axis=0) for a, b in qs], axis=0)

    variants = [("summing over the query pieces gives: the rule averages over a query word's pieces and sums "
                 "over a key word's pieces", merge(np.sum, np.sum)),
                ("averaging over the key pieces gives (a row then no longer adds up to 1)", merge(np.mean, np.mean)),
                ("the mean and the sum exchanged give", merge(np.sum, np.mean))]
    def rows_off(a):  # the rule a hand slip most often breaks
        off = [f"row {i} adds up to {s:.4g}" for i, s in enumerate(a.sum(axis=1)) if not abs(s - 1.0) <= 1e-4]
        return (", ".join(off) + ": a merged row must still be a distribution over the key words (adding up to "
                "1).") if off else None

    return _compare(answer, merge(np.mean, np.sum), what, variants, otherwise=rows_off, decimals=4)


def _ffn(x, w1, b1, w2, b2, relu: bool = True):
    x, w1, b1, w2, b2 = (np.asarray(a, dtype=float) for a in (x, w1, b1, w2, b2))
    hidden = x @ w1 + b1
    return (np.maximum(0.0, hidden) if relu else hidden) @ w2 + b2


def check_feed_forward_result(answer, x, w1, b1, w2, b2, what: str = "your answer", **tolerance) -> str:
    """Compare ``answer`` with FFN(x) = max(0, x W1 + b1) W2 + b2, naming a missing ReLU or a ReLU at the end."""
    variants = [("the network gives without the ReLU", _ffn(x, w1, b1, w2, b2, relu=False)),
                ("the network gives with the ReLU after the second layer instead of between the two",
                 np.maximum(0.0, _ffn(x, w1, b1, w2, b2, relu=False)))]
    return _compare(answer, _ffn(x, w1, b1, w2, b2), what, variants, **(tolerance or {"atol": 1e-9}))


def _layer_norm_eps(answer, x, gamma, beta, eps: float, atol: float) -> float | None:
    """The other epsilon that ``answer`` is the layer normalisation of ``x`` with, or None. Each row's scale
    1/√(σ² + ε') is read off the answer and gives an ε'; their median must lie in [0, 0.01] and reproduce the
    answer within ``atol`` (at least 1e-6), while the asked-for ``eps`` does not."""
    a = np.asarray(answer, dtype=float)
    if a.shape != x.shape or not np.all(np.isfinite(a)):
        return None
    d = x.shape[-1]
    g = np.ones(d) if gamma is None else np.asarray(gamma, dtype=float)
    b = np.zeros(d) if beta is None else np.asarray(beta, dtype=float)
    used = g != 0
    rows_x = x.reshape(-1, d)
    var = rows_x.var(axis=-1)  # biased, per row
    centred = (rows_x - rows_x.mean(axis=-1, keepdims=True))[:, used]  # x - mu
    normed = ((a - b).reshape(-1, d) / np.where(used, g, 1.0))[:, used]  # (x - mu) / sqrt(var + eps') by row
    norms = (centred ** 2).sum(axis=-1)
    rows = norms > 1e-12 * max(1.0, float(norms.max(initial=0.0)))  # a constant row says nothing about eps
    if not rows.any():
        return None
    scale = (normed[rows] * centred[rows]).sum(axis=-1) / norms[rows]  # 1 / sqrt(var + eps') per row
    if np.any(scale <= 0):
        return None
    other = float(np.median(1.0 / scale ** 2 - var[rows]))
    if not -1e-6 * float(var[rows].max()) <= other <= 1e-2:  # below 0 only by rounding (a float32 answer)
        return None
    tol = max(atol, 1e-6)

    def fits(e):
        return np.allclose(a, ref.layer_norm(x, gamma, beta, eps=e), rtol=0, atol=tol)

    if fits(eps):
        return None  # the asked-for eps fits as well: the difference lies elsewhere
    other = max(other, 0.0)
    for e in (0.0, float(f"{other:.1g}"), other):  # the roundest value that reproduces the answer
        if fits(e):
            return e
    return None


def check_layer_norm_result(answer, x, what: str = "your answer", *, gamma=None, beta=None, eps: float = 1e-5,
                            **tolerance) -> str:
    """Compare ``answer`` with the layer normalisation of ``x`` over its last axis (biased variance, ``eps`` inside
    the square root). An answer that is the layer normalisation with another epsilon (the default 1e-5 kept where
    the exercise asks for none, say) is named as such; an answer of the opposite sign is not (the sign of
    LN(ax + b) for a < 0 is what exercise 3.5 asks), nor given any hint; the expected value is never printed."""
    x = np.asarray(x, dtype=float)
    tolerance = tolerance or {"atol": 1e-9}
    expected = ref.layer_norm(x, gamma, beta, eps=eps)
    try:
        return _compare(answer, expected, what, name_sign=False, **tolerance)
    except AssertionError as err:
        atol = _atol_of(tolerance)
        if np.allclose(-as_float_array(answer, "answer", what), expected, rtol=0, atol=atol):
            raise  # the opposite sign is not named: the sign of LN(ax + b) for a < 0 is what exercise 3.5 asks
        other = _layer_norm_eps(answer, x, gamma, beta, eps, atol)
        if other is None:
            raise
        first = str(err).splitlines()[0]
        raise AssertionError(f"{first}\n  Computed with a different epsilon? Your answer is the layer normalisation "
                             f"with eps = {other:.2g},\n  and this one asks for eps = {eps:g}.") from None


def check_multi_head_result(answer, x_q, x_k, x_v, w_q, w_k, w_v, w_o, what: str = "your answer", *,
                            n_heads: int | None = None, **tolerance) -> str:
    """Compare ``answer`` with the output of multi-head attention: per-head matrices ``(h, d_model, d_k)``, or, with
    ``n_heads``, one big matrix each ``(d_model, n_heads * d_k)`` whose column blocks are the heads. A failure
    does not say whether the answer is what another number of heads gives: that is the question the exercise asks
    in words."""
    def heads_of(w, h):
        w = np.asarray(w, dtype=float)
        return np.stack(np.split(w, h, axis=-1))  # (h, d_model, d_k): column block i is head i

    def output(h):
        ws = [heads_of(w, h) for w in (w_q, w_k, w_v)] if h else [w_q, w_k, w_v]
        return ref.multi_head_attention(x_q, x_k, x_v, *ws, w_o)[0]

    return _compare(answer, output(n_heads), what, (), **(tolerance or {"atol": 1e-9}))


def _random_mha(rng, n_q: int, n_k: int, d_model: int, n_heads: int, d_k: int, d_v: int):
    """Random inputs of a cross-attention (queries and keys of different lengths): x_q, x_k, x_v, w_q, w_k, w_v,
    w_o (per-head matrices of shapes (n_heads, d_model, d_k) for w_q, w_k and (n_heads, d_model, d_v) for w_v;
    w_o of shape (n_heads * d_v, d_model))."""
    x_q, x_k, x_v = rng.normal(size=(n_q, d_model)), rng.normal(size=(n_k, d_model)), rng.normal(size=(n_k, d_model))
    w_q, w_k = (rng.normal(size=(n_heads, d_model, d_k)) for _ in range(2))
    w_v = rng.normal(size=(n_heads, d_model, d_v))
    return x_q, x_k, x_v, w_q, w_k, w_v, rng.normal(size=(n_heads * d_v, d_model))


def check_multi_head_attention(fn, what: str = "your multi-head attention", *, seed: int = 0) -> str:
    """Call ``fn(x_q, x_k, x_v, w_q, w_k, w_v, w_o) -> (output, weights)`` on seeded random inputs (three heads,
    queries and keys of different lengths, d_k = 2 and d_v = 3 so that a scale by √d_v shows) and say what differs:
    the shapes, a row of weights that does not sum to 1, the first head whose weights differ (and whether its
    scores lack the √d_k or are divided by √d_model or √d_v), or the output after correct weights (the
    concatenation's order, W^O)."""
    n_q, n_k, d_model, n_heads, d_k, d_v = 4, 5, 6, 3, 2, 3
    inputs = _random_mha(np.random.default_rng(seed), n_q, n_k, d_model, n_heads, d_k, d_v)
    x_q, x_k, x_v, w_q, w_k, w_v, w_o = inputs
    result = fn(*inputs)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"{what} must return the pair (output, weights), got {type(result).__name__}")
    output, weights = (as_float_array(r, "answer", what) for r in result)
    check_shape(weights, (n_heads, n_q, n_k), f"{what}: the weights (n_heads, n_q, n_k) of 3 heads, 4 queries, 5 keys")
    heads = []
    for i in range(n_heads):
        q, k, v = x_q @ w_q[i], x_k @ w_k[i], x_v @ w_v[i]
        out_i, w_i = _attention(q, k, v)
        if not np.allclose(weights[i], w_i, rtol=0, atol=1e-9):
            if np.allclose(weights[i], _attention(q, k, v, scale=False)[1], rtol=0, atol=1e-9):
                cause = "its scores are not divided by √d_k; the scale is √d_k of a head, not √d_model"
            elif np.allclose(weights[i], _attention(q * np.sqrt(d_k / d_model), k, v)[1], rtol=0, atol=1e-9):
                cause = "its scores are divided by √d_model; the scale is √d_k of a head, not √d_model"
            elif np.allclose(weights[i], _attention(q * np.sqrt(d_k / d_v), k, v)[1], rtol=0, atol=1e-9):
                cause = "its scores are divided by √d_v, the width of the values; the scale is √d_k, the width " \
                        "of the queries and keys"
            elif np.allclose(weights[i], _attention(q, k, v, axis=-2)[1], rtol=0, atol=1e-9):
                cause = "its softmax runs over the queries (each column sums to 1, not each row)"
            elif any(np.allclose(weights[i], _attention(x_q @ w_q[j], x_k @ w_k[j], x_v)[1], rtol=0, atol=1e-9)
                     for j in range(n_heads) if j != i):
                cause = "they are the weights of another head"
            else:
                cause = "is each head projected with its own W^Q_i and W^K_i, and the softmax taken over the keys?"
            raise AssertionError(f"{what}: the weights of head {i + 1} differ from the right ones ({cause}); "
                                 f"{'heads ' + ', '.join(str(j + 1) for j in range(i)) + ' match' if i else 'it is the first head'}")
        heads.append(out_i)
    concat = np.concatenate(heads, axis=-1)  # (n_q, n_heads * d_v)
    if output.shape == concat.shape and np.allclose(output, concat, rtol=0, atol=1e-9):
        raise AssertionError(f"{what}: the weights of every head are right but the output differs: the concatenated "
                             "heads are returned without the product with W^O")
    check_shape(output, (n_q, d_model), f"{what}: the output (n_q, d_model) of 4 queries with d_model = 6")
    if np.allclose(output, concat @ w_o, rtol=0, atol=1e-9):
        return f"correct: {what} gives the right weights in all {n_heads} heads and the right output (tolerance 1e-09)"
    if np.allclose(output, np.concatenate(heads[::-1], axis=-1) @ w_o, rtol=0, atol=1e-9):
        cause = "the heads are concatenated in the reverse order, so each meets the wrong rows of W^O"
    else:
        cause = "look at the head outputs (weights times V W^V_i), their concatenation and W^O"
    raise AssertionError(f"{what}: the weights of every head are right but the output differs: {cause}")


def check_feed_forward(fn, what: str = "your feed-forward network", *, seed: int = 0) -> str:
    """Call ``fn(x, w1, b1, w2, b2)`` on seeded random inputs (a batch of sequences, d_ff ≠ d_model, then
    d_ff = d_model) and say what differs: the shape, a missing ReLU, a ReLU in the wrong place, the biases
    exchanged, a network that works on one sequence but not on a batch."""
    rng = np.random.default_rng(seed)
    for d_model, d_ff in ((4, 12), (5, 5)):
        x = rng.normal(size=(2, 3, d_model))  # (batch, n, d_model)
        w1, b1 = rng.normal(size=(d_model, d_ff)), rng.normal(size=d_ff)
        w2, b2 = rng.normal(size=(d_ff, d_model)), rng.normal(size=d_model)
        shape_ = f"(d_model = {d_model}, d_ff = {d_ff})"
        out = call_on_batch(lambda x_: fn(x_, w1, b1, w2, b2), x, what,
                            "write each product so that it acts on the last axis (x @ w1 does; in np.einsum, "
                            "'...i,ij->...j')")
        out = as_float_array(out, "answer", what)
        check_shape(out, (2, 3, d_model), f"{what} on a batch of 2 sequences of 3 positions {shape_}")
        expected = _ffn(x, w1, b1, w2, b2)
        if np.allclose(out, expected, rtol=0, atol=1e-9):
            continue
        if np.allclose(out, _ffn(x, w1, b1, w2, b2, relu=False), rtol=0, atol=1e-9):
            cause = "the ReLU between the two linear maps is missing"
        elif np.allclose(out, np.maximum(0.0, _ffn(x, w1, b1, w2, b2, relu=False)), rtol=0, atol=1e-9):
            cause = "the ReLU is applied after the second linear map instead of between the two"
        elif d_ff == d_model and np.allclose(out, _ffn(x, w1, b2, w2, b1), rtol=0, atol=1e-9):
            cause = "b1 and b2 are exchanged"
        else:
            cause = "follow one position (one row of x) through the two linear maps and the ReLU, step by step"
        raise AssertionError(f"{what} {shape_} differs from the right output: {cause}")
    return f"correct: {what} gives the right output for d_ff ≠ d_model and d_ff = d_model (tolerance 1e-09)"


def check_encoder_layer(fn, what: str = "your encoder layer", *, seed: int = 0) -> str:
    """Call ``fn(x, self_attn, ffn) -> (z, out)`` (the first sub-layer's output and the layer's) on seeded random
    inputs and name the first sub-layer that differs, with the cause where it is a typical one (the pair returned
    in the wrong order, the residual missing, the normalisation before the sub-layer instead of after the
    addition, the FFN fed the layer's input, the pair of ``R.multi_head_attention`` added to ``x``)."""
    rng = np.random.default_rng(seed)
    n, d_model, n_heads, d_ff = 5, 8, 2, 16
    x = rng.normal(size=(n, d_model))
    self_attn = tuple(rng.normal(size=(n_heads, d_model, d_model // n_heads)) for _ in range(3)) + (
        rng.normal(size=(d_model, d_model)) / np.sqrt(d_model),)
    ffn = (rng.normal(size=(d_model, d_ff)), rng.normal(size=d_ff), rng.normal(size=(d_ff, d_model)),
           rng.normal(size=d_model))
    try:
        result = fn(x, self_attn, ffn)
    except ValueError as err:  # x + (output, weights): NumPy cannot add the pair to an array
        if "inhomogeneous" not in str(err) and "sequence" not in str(err):
            raise
        raise AssertionError(f"{what} fails with ValueError: {err}\n  R.multi_head_attention returns the pair "
                             "(output, weights): add its output, R.multi_head_attention(...)[0], to x") from None
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"{what} must return the pair (z, out), got {type(result).__name__}")
    z_ans, out_ans = (as_float_array(r, "answer", what) for r in result)
    attn = lambda s: ref.multi_head_attention(s, s, s, *self_attn)[0]  # noqa: E731
    ff = lambda s: _ffn(s, *ffn)  # noqa: E731
    z = ref.layer_norm(x + attn(x))
    out = ref.layer_norm(z + ff(z))
    if (z_ans.shape == out_ans.shape == z.shape and np.allclose(z_ans, out, rtol=0, atol=1e-9)
            and np.allclose(out_ans, z, rtol=0, atol=1e-9)):
        raise AssertionError(f"{what} returns its two outputs in the wrong order: the pair must be (z, out), the "
                             "self-attention sub-layer's output first and the layer's second")
    for name, ans, exp, variants in [
            ("self-attention", z_ans, z, [("the residual connection is missing (LN(MultiHead(x)))", ref.layer_norm(attn(x))),
                                          ("your layer normalises the sub-layer's input, x + Sublayer(LN(x)): that is "
                                           "pre-LN. The paper's layer is post-LN, LN(x + Sublayer(x)): it normalises "
                                           "after the residual addition.", x + attn(ref.layer_norm(x)))]),
            ("feed-forward", out_ans, out,
             [("the residual connection is missing (LN(FFN(z)))", ref.layer_norm(ff(z))),
              ("the feed-forward network gets the layer's input x instead of z", ref.layer_norm(z + ff(x))),
              ("your layer normalises the sub-layer's input, z + FFN(LN(z)): that is pre-LN. The paper's layer "
               "is post-LN, LN(z + FFN(z)): it normalises after the residual addition.",
               z_ans + ff(ref.layer_norm(z_ans)))])]:
        check_shape(ans, (n, d_model), f"{what}: the output of its {name} sub-layer")
        if np.allclose(ans, exp, rtol=0, atol=1e-9):
            continue
        cause = next((hint for hint, v in variants if np.allclose(ans, v, rtol=0, atol=1e-9)), None)
        before = "" if name == "self-attention" else " (the self-attention sub-layer before it matches)"
        raise AssertionError(f"{what} differs from the right output in its {name} sub-layer{before}: "
                             + ((cause if cause.endswith(".") else f"{cause}?") if cause
                                else "follow x + Sublayer(x), then the layer normalisation"))
    return f"correct: both sub-layers of {what} give the right outputs (tolerance 1e-09)"


def _near(answer, value, decimals: int) -> bool:
    """Whether ``answer`` is ``value`` given to ``decimals`` decimals (a typical mistake, recognised at the
    precision the exercise asks for)."""
    a, v = np.asarray(answer, dtype=float), np.asarray(value, dtype=float)
    return a.shape == v.shape and bool(np.all(np.abs(a - v) <= rounding_atol(decimals)))


def _compare_rounded(answer, expected, what: str, variants, decimals: int) -> str:
    """``check_close(..., decimals=decimals)``; on a failure, the hint of the first variant ``(hint, value)`` that
    the answer is, to the same decimals (never printed)."""
    require_answered(answer, what)
    try:
        return check_close(answer, expected, what, decimals=decimals)
    except AssertionError as err:
        hint = next((h for h, v in variants if _near(answer, v, decimals)), None)
        if hint is None:
            raise
        raise AssertionError(f"{str(err).splitlines()[0]}\n  Your answer is what {hint}.") from None


def check_score_spread(answer, d_k: int, what: str = "your answer", *, decimals: int = 3) -> str:
    """Check the standard deviation of the scores q·k / d_k (unit-variance entries of q and k, width ``d_k``) to
    ``decimals`` decimals, naming the spread without scaling, with the paper's √d_k, and a variance given instead."""
    variants = [("the unscaled scores q·k have", np.sqrt(d_k)), ("the paper's q·k/√d_k has", 1.0),
                ("the variance of q·k/d_k is, not its standard deviation", 1.0 / d_k)]
    return _compare_rounded(answer, 1.0 / np.sqrt(d_k), what, variants, decimals)


def _sinusoid_variants(pos: np.ndarray, d: int):
    """The sinusoidal encoding of the paper (§3.5) of the positions ``pos`` (an ``(n, 1)`` column) at width ``d``,
    ``(n, d)``, and the typical slips as ``(hint, value)`` pairs for :func:`_compare`: sin and cos in two halves or
    swapped, positions one off, degrees for radians (either way), the exponent doubled, halved or positive, another
    base, a frequency per dimension."""
    j = np.arange(0, d, 2)  # (d/2,): the even dimensions 2i

    def interleave(even, odd):  # (n, d/2) each -> (n, d)
        out = np.empty((len(pos), d))
        out[:, 0::2], out[:, 1::2] = even, odd
        return out

    omega = 10000.0 ** (-j / d)  # (d/2,): pair i's frequency, 10000^(-2i/d_model)
    angle = pos * omega  # (n, d/2)
    sin_cos = lambda a: interleave(np.sin(a), np.cos(a))  # noqa: E731
    return sin_cos(angle), [
        ("sin and cos in two halves give: they interleave, sin in the even dimensions 2i and cos in the odd 2i + 1",
         np.concatenate([np.sin(angle), np.cos(angle)], axis=1)),
        ("sin and cos swapped give: sin goes in the even dimensions 2i", interleave(np.cos(angle), np.sin(angle))),
        ("positions counted from 1 give: the first row is pos = 0", sin_cos((pos + 1) * omega)),
        ("the positions one lower give: positions count from 0, and row pos has the angles pos·ω_i",
         sin_cos((pos - 1) * omega)),
        ("the formula gives in degrees (sin and cos take radians)", sin_cos(np.radians(angle))),
        ("the formula gives with the angles converted to degrees (sin and cos take radians)",
         sin_cos(np.degrees(angle))),
        ("the exponent doubled gives: with j = 2i the frequency is 10000^(-j/d_model), not 10000^(-2j/d_model)",
         sin_cos(pos * 10000.0 ** (-2 * j / d))),
        ("the exponent halved gives: pair i (dimensions 2i and 2i + 1) has the frequency 10000^(-2i/d_model)",
         sin_cos(pos * 10000.0 ** (-j / (2 * d)))),
        ("a positive exponent gives: the frequencies fall from 1 as 10000^(-2i/d_model)",
         sin_cos(pos * 10000.0 ** (j / d))),
        ("another base than 10000 gives", sin_cos(pos * 1000.0 ** (-j / d))),
        ("a frequency per dimension gives: the two dimensions of a pair share its frequency",
         interleave(np.sin(angle), np.cos(pos * 10000.0 ** (-(j + 1) / d))))]


def check_encoding_row(answer, pos: int, d_model: int, what: str = "your answer", *, decimals: int = 4) -> str:
    """Check row ``pos`` of the sinusoidal positional encoding of width ``d_model`` (positions from 0), given to
    ``decimals`` decimals (half a unit of the last decimal), naming the slips of :func:`_sinusoid_variants`
    (degrees for radians, positions one off, sin and cos swapped, the exponent's slips, ...); never the row."""
    require_answered(answer, what)
    check_shape(as_float_array(answer, "answer", what), (d_model,), what)
    right, variants = _sinusoid_variants(np.array([[float(pos)]]), d_model)
    return _compare_rounded(answer, right[0], what, [(hint, v[0]) for hint, v in variants], decimals)


def check_positional_encoding(fn, what: str = "my_positional_encoding", *, seed: int = 404) -> str:
    """Exercise 4.1: call ``fn(n, d_model)`` on the chapter's size (3, 4) and on a size drawn from ``seed``, and
    compare with the sinusoidal encoding of the paper (§3.5), ``(n, d_model)``, to 1e-9. A failure names the slips
    of :func:`_sinusoid_variants` (sin and cos in two halves or swapped, positions counted from 1, the exponent
    doubled, halved or positive, another base than 10,000, a frequency per dimension, ...); never an entry."""
    rng = np.random.default_rng(seed)
    lines = []
    for n, d in ((3, 4), (int(rng.integers(20, 60)), 2 * int(rng.integers(4, 16)))):
        name = f"{what}({n}, {d})"
        got = fn(n, d)
        if got is None:
            raise AssertionError(f"{what} returned None: end it with `return ...`")
        dtype = getattr(got, "dtype", None)
        low_precision = dtype is not None and np.issubdtype(dtype, np.floating) and np.dtype(dtype).itemsize < 8
        got = as_float_array(got, "answer", name)
        check_shape(got, (n, d), name)
        _, variants = _sinusoid_variants(np.arange(n, dtype=float)[:, None], d)
        right = ref.positional_encoding(n, d)
        if low_precision and not np.allclose(got, right, rtol=0, atol=1e-9) and np.allclose(got, right, atol=1e-5):
            raise AssertionError(f"{name} has dtype {dtype}: its entries are right to its own precision, "
                                 f"but this check compares to 1e-9; build the array in float64 (NumPy's default)")
        lines.append(_compare(got, right, name, variants, atol=1e-9))
    return "\n".join(lines)


def check_wavelength_pair(i_best, d_model: int = 64, target: float = 100.0, what: str = "i_best") -> str:
    """Exercise 4.3: ``i_best``, the pair index i (dimensions 2i and 2i + 1) of the sinusoidal encoding of width
    ``d_model`` whose wavelength 2π·10000^(2i/d_model) is closest to ``target`` positions, recomputed here. A
    dimension index (2i or 2i + 1) given for the pair's is named; a pair whose neighbour is closer is named with its
    own wavelength; the right pair is never printed.

    Raises:
        TypeError: still ``...`` or None, or not an integer.
        AssertionError: out of range, a dimension index, or another pair.
    """
    require_answered(i_best, what)
    if isinstance(i_best, bool) or not isinstance(i_best, (int, np.integer)):
        raise TypeError(f"{what} must be an integer (a pair index i), got {type(i_best).__name__} {i_best!r}")
    n_pairs = d_model // 2
    if not 0 <= i_best < n_pairs:
        raise AssertionError(f"{what} = {i_best}: a pair index i runs from 0 to {n_pairs - 1} for d_model = {d_model} "
                             f"(pair i holds dimensions 2i and 2i + 1)")
    wavelength = 2 * np.pi * 10000.0 ** (2 * np.arange(n_pairs) / d_model)
    best = int(np.argmin(np.abs(wavelength - target)))
    if i_best == best:
        return f"correct: pair {best}, wavelength {wavelength[best]:.1f} positions"
    if i_best // 2 == best:
        raise AssertionError(f"{what} = {i_best} is a dimension's index (2i or 2i + 1), not the pair's: store the i "
                             f"of the pair (dimensions 2i and 2i + 1)")
    raise AssertionError(f"{what}: pair {i_best} has wavelength {wavelength[i_best]:.1f} positions; another pair's "
                         f"is closer to {target:g}")


def check_rope_scores(scores, what: str = "scores", *, seed: int = 3,
                      pairs=((0, 3), (10, 13), (50, 53)), d: int = 8) -> str:
    """Exercise 4.4: ``scores[j]`` is (q M_m)·(k M_n) for the j-th pair (m, n) of ``pairs``, with M_m the shift
    matrix ``ref.relative_position_matrix(m, d)`` (row vectors: PE[pos] @ M_m = PE[pos + m]) and q and k the first two
    draws ``rng.normal(size=d)`` of ``np.random.default_rng(seed)``, recomputed here and never printed. A wrong score
    names q·k (no rotation, or both rotated by M_m), the key rotated by M_n^T, m and n swapped (which both rotations
    transposed, ``q @ M.T``, also give), or only one of the two vectors rotated."""
    require_answered(scores, what)
    got = as_float_array(scores, "scores", what)
    check_shape(got, (len(pairs),), what)
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=d), rng.normal(size=d)
    rot = lambda pos: ref.relative_position_matrix(pos, d)  # noqa: E731
    variants = [("q·k gives, with no rotation or both rotated by the same M_m: rotate k by its own M_n",
                 lambda m, n: q @ k),
                ("the key rotated by the transpose M_n^T gives", lambda m, n: (q @ rot(m)) @ (k @ rot(n).T)),
                ("the two positions swapped give, (q M_n)·(κ M_m), and so do both rotations transposed "
                 "(`q_vec @ M.T` is q M^T): rotate the query as q M_m (`q_vec @ R.relative_position_matrix(m, 8)`) "
                 "and the key as κ M_n", lambda m, n: (q @ rot(n)) @ (k @ rot(m))),
                ("only the key rotated gives, q·(κ M_n): your score depends on n alone (at m = 0 that is right, "
                 "since M_0 = I); rotate the query by its own M_m too", lambda m, n: q @ (k @ rot(n))),
                ("only the query rotated gives, (q M_m)·κ: your score depends on m alone; rotate the key by its own "
                 "M_n too", lambda m, n: (q @ rot(m)) @ k)]
    # a hint only for a mistake that every score shows (at m = 0 a swap and a transposed key agree)
    variants = [(hint, [f(m, n) for m, n in pairs]) for hint, f in variants]
    variants = [(hint, v) for hint, v in variants if np.allclose(got, v, rtol=0, atol=1e-9)]
    lines = [_compare(got[j], (q @ rot(m)) @ (k @ rot(n)), f"the score for (m, n) = ({m}, {n})",
                      [(hint, v[j]) for hint, v in variants], atol=1e-9) for j, (m, n) in enumerate(pairs)]
    return "\n".join(lines)


def check_decoder_layer(fn, y, memory, self_attn, cross_attn, ffn, what: str = "your decoder layer") -> str:
    """Call ``fn(y, memory, self_attn, cross_attn, ffn)`` (a post-LN decoder layer) and name the sub-layer that is
    off: first a typical mistake of one sub-layer recognised from the output (a residual missing or taken from the
    wrong input, the cross-attention's queries from y, the FFN fed a), else the first sub-layer whose output is
    wrong, found by switching the later ones off (their output matrices W^O, or W2 and b2, set to zero)."""
    y, memory = np.asarray(y, dtype=float), np.asarray(memory, dtype=float)
    n = y.shape[0]
    mha, ln, ff = ref.multi_head_attention, ref.layer_norm, ref.feed_forward

    def layer(sa, ca, fw, mistake=None):
        s_out = mha(y, y, y, *sa, mask=ref.causal_mask(n))[0]
        a = ln(s_out) if mistake == "sa-residual" else ln(y + s_out)
        c_in = y if mistake == "ca-queries" else a
        c_out = mha(c_in, memory, memory, *ca)[0]
        c = {"ca-residual": ln(c_out), "ca-residual-y": ln(y + c_out)}.get(mistake, ln(a + c_out))
        f_out = ff(a if mistake == "ffn-input" else c, *fw)
        return {"ffn-residual": ln(f_out), "ffn-residual-a": ln(a + f_out)}.get(mistake, ln(c + f_out))

    def run(sa, ca, fw):
        out = fn(y, memory, sa, ca, fw)
        require_answered(out, f"{what}'s output")
        out = as_float_array(out, "answer", what)
        check_shape(out, (n, y.shape[-1]), f"{what}: its output (n_tgt, d_model)")
        return out

    def same(a, b):
        return bool(np.all(np.isfinite(a))) and np.allclose(a, b, rtol=0, atol=1e-9)

    zero_ca = tuple(cross_attn[:3]) + (np.zeros_like(np.asarray(cross_attn[3], float)),)
    zero_ff = (ffn[0], ffn[1], np.zeros_like(np.asarray(ffn[2], float)), np.zeros_like(np.asarray(ffn[3], float)))
    # every call up front, in the same order (a grader records the calls on the course's solution)
    out, out_sa = run(self_attn, cross_attn, ffn), run(self_attn, zero_ca, zero_ff)
    out_ca = run(self_attn, cross_attn, zero_ff)
    if same(out, layer(self_attn, cross_attn, ffn)):
        return f"correct: all three sub-layers of {what} give the right output (tolerance 1e-09)"
    causes = [("sa-residual", "masked self-attention", "the residual connection is missing: LN(SelfAttn(y))"),
              ("ca-queries", "cross-attention", "its queries come from y instead of a, the self-attention "
                                                "sub-layer's output"),
              ("ca-residual", "cross-attention", "the residual connection is missing: LN(CrossAttn(a, M))"),
              ("ca-residual-y", "cross-attention", "the residual adds y instead of a"),
              ("ffn-input", "feed-forward", "the network is fed a instead of c, the cross-attention sub-layer's output"),
              ("ffn-residual", "feed-forward", "the residual connection is missing: LN(FFN(c))"),
              ("ffn-residual-a", "feed-forward", "the residual adds a instead of c")]
    for mistake, name, cause in causes:
        if same(out, layer(self_attn, cross_attn, ffn, mistake)):
            raise AssertionError(f"{what} is off in its {name} sub-layer: {cause}")
    if not same(out_sa, layer(self_attn, zero_ca, zero_ff)):
        name, hint = "masked self-attention", "a = LayerNorm(y + SelfAttn(y)), causal mask, the weights self_attn"
    elif not same(out_ca, layer(self_attn, cross_attn, zero_ff)):
        name, hint = "cross-attention", "c = LayerNorm(a + CrossAttn(a, M)): queries from a, keys and values M"
    else:
        name, hint = "feed-forward", "out = LayerNorm(c + FFN(c))"
    before = "" if name == "masked self-attention" else "; the sub-layers before it match"
    raise AssertionError(f"{what} is off in its {name} sub-layer (found with the later sub-layers switched off: "
                         f"their W^O, or W2 and b2, set to zero){before}. Follow {hint}")


# ------------------------------------------------------------------------------------------------------------------
# Checks that take only the student's answer: the inputs of the worked example, and whatever recipe the exercise
# asks the student to find, stay inside the check (a visible call with them would spell out the computation).

def check_key_shifts(w_shifted, w_other, *, names: tuple[str, str] = ("w_shifted", "w_other")) -> str:
    """Exercise 1.5 on example 1 (:data:`tmlib.course.examples.ATTENTION_EXAMPLE_1`): ``w_shifted``, the attention
    weights with u = [3, -1] added to every key, and ``w_other``, with u added to the first key only. Both are
    compared with weights computed here; a failure names what is wrong in the answer (its shape, a row that does
    not sum to 1, scores left undivided by √d_k, the keys 2 and 3 that no longer keep their ratio, a shift that
    reached every key or the wrong one), never the weights due nor by how much a score moves."""
    from tmlib.course.diagnostics import check_rows_sum_to_one
    from tmlib.course.examples import ATTENTION_EXAMPLE_1 as ex

    name_s, name_o = names
    require_answered(w_shifted, name_s)  # the comparisons below are named as on book/instructors.md
    require_answered(w_other, name_o)
    u = np.array([3.0, -1.0])
    q, k, v = (np.asarray(a, dtype=float) for a in (ex.q, ex.k, ex.v))
    weights = _attention(q, k, v)[1]
    shift = np.zeros_like(k)
    shift[0] = u
    unscaled = "the scores without the division by √d_k give"
    lines = [_compare(w_shifted, weights, "weights after shifting all keys",
                      [(unscaled, _attention(q, k, v, scale=False)[1])], atol=1e-9)]
    w = as_float_array(w_other, "answer", name_o)
    check_shape(w, (3, 3), name_o)
    check_rows_sum_to_one(w, name_o)
    if not (w > 0).all():
        raise AssertionError(f"{name_o} has a weight of 0: the softmax of finite scores gives every key a positive "
                             "weight")
    if any(np.allclose(w, _attention(q, k + s, v, scale=False)[1], rtol=0, atol=1e-9) for s in (shift, 0 * shift)):
        raise AssertionError(f"{name_o} is what {unscaled}: divide the scores by √d_k, as in example 1")
    moved = np.log(w) - np.log(weights)  # (3, 3): how far each weight moved, on the log scale
    if not np.allclose(moved[:, 2], moved[:, 1], rtol=0, atol=1e-9):
        raise AssertionError(f"in {name_o} the weights of keys 2 and 3 should keep their ratio in every row, since "
                             "neither key moved: did you shift a key other than key 1?")
    if np.allclose(w, weights, rtol=0, atol=1e-9):
        raise AssertionError(f"{name_o} is what a shift shared by all keys gives (the weights of example 1 "
                             "unchanged): add u to the first key only")
    lines.append(check_close(w, _attention(q, k + shift, v)[1], "weights after shifting key 1 only", atol=1e-9))
    return "\n".join(lines)


def check_temperature(answer, what: str = "w_q3") -> str:
    """Exercise 1.6 on example 1 (:data:`tmlib.course.examples.ATTENTION_EXAMPLE_1`): ``answer``, of shape (60, 3),
    holds in row t the weights of query 3 when √d_k is replaced by the temperature τ = ``np.geomspace(0.05, 20,
    60)[t]``. Checks that each row is a distribution with positive weights, that keys 2 and 3 (equal scores) get
    equal weights, and that log(weight of key 1 / weight of key 2) · τ is the same score gap at every τ. A failure
    names three slips (another query's weights, the already-scaled scores divided by τ, the scores multiplied by
    τ) and never the weights due nor the expression that gives them. Raises AssertionError on a wrong answer."""
    from tmlib.course.diagnostics import check_rows_sum_to_one
    from tmlib.course.examples import ATTENTION_EXAMPLE_1 as ex

    require_answered(answer, what)
    w = as_float_array(answer, "answer", what)
    check_shape(w, (60, 3), what)
    q, k = np.asarray(ex.q, dtype=float), np.asarray(ex.k, dtype=float)
    taus = np.geomspace(0.05, 20, 60)
    for row in (0, 1):  # the right recipe on another query's scores
        if np.allclose(w, ref.softmax((q @ k.T)[row][None, :] / taus[:, None]), rtol=1e-5, atol=1e-8):
            raise AssertionError(f"{what} holds the weights of query {row + 1}: the exercise asks for query 3, "
                                 "row 3 of the scores (index 2)")
    lines = [check_rows_sum_to_one(w, what),
             check_close(w[:, 2], w[:, 1], "each weight of key 3 (whose score equals key 2's)", atol=1e-9)]
    if not (w > 0).all():
        raise AssertionError(f"{what} has a weight of 0: at these temperatures every weight of a softmax is positive")
    s = (q @ k.T)[2]  # (3,): query 3's unscaled scores
    slips = [(s[None, :] / np.sqrt(q.shape[-1]) / taus[:, None],
              "divides the scores by both √d_k and τ, but τ replaces √d_k, it does not come on top of it: did "
              "you divide the already-scaled scores?"),
             (s[None, :] * taus[:, None], "is what the scores multiplied by τ give: τ takes the place of √d_k in "
              "softmax(scores / √d_k), it does not multiply the scores")]
    for z, hint in slips:
        if np.allclose(w, ref.softmax(z), rtol=1e-5, atol=1e-8):
            raise AssertionError(f"{what} {hint}")
    lines.append(check_close(np.log(w[:, 0] / w[:, 1]) * taus, np.full(60, s[0] - s[1]),
                             "log(weight of key 1 / weight of key 2) · τ, at each temperature", atol=1e-6))
    return "\n".join(lines)


def check_swapped_heads(w_o_swapped, what: str = "w_o_swapped", *, seed: int = 7) -> str:
    """Exercise 2.3 on chapter 2's two-head example (:data:`tmlib.course.examples.MHA_EXAMPLE_2`): ``w_o_swapped``
    of shape (4, 4) is the W^O that keeps the output unchanged when heads 1 and 2 exchange their W^Q, W^K, W^V.
    The output with the heads swapped is compared with the example's output, on its three tokens and on 6 other
    tokens drawn with ``seed`` (a W^O fitted to three tokens fails there). W^O with its column blocks exchanged
    (the same matrix as W^O with its rows 1 and 2 exchanged, for this example) is named as W^O blocks in the wrong
    order, never as a column swap, and never with which part of W^O to swap. Raises AssertionError on a wrong
    answer."""
    from tmlib.course.examples import MHA_EXAMPLE_2 as m

    require_answered(w_o_swapped, what)
    w = as_float_array(w_o_swapped, "answer", what)
    check_shape(w, (4, 4), what)
    w_o = np.asarray(m.w_o, dtype=float)
    if np.allclose(w, w_o[:, [2, 3, 0, 1]]):
        raise AssertionError(f"{what} is not right yet: this W^O gives the output of the heads' W^O blocks in "
                             "the wrong order, so each head still meets the block meant for the other head. "
                             "Which part of W^O does each head's block of Concat(head_1, head_2) multiply?")
    swap = [1, 0]
    lines = []
    x = np.random.default_rng(seed).normal(size=(6, 4))  # (6, d_model): other tokens
    for (x_q, x_k, x_v), name in [((m.q, m.k, m.v), "output with swapped heads and your w_o_swapped"),
                                  ((x, x, x), "output on 6 other tokens with your w_o_swapped")]:
        same = ref.multi_head_attention(x_q, x_k, x_v, m.w_q, m.w_k, m.w_v, w_o)[0]
        swapped = ref.multi_head_attention(x_q, x_k, x_v, m.w_q[swap], m.w_k[swap], m.w_v[swap], w)[0]
        lines.append(check_close(swapped, same, name.replace("your w_o_swapped", f"your {what}"), atol=1e-9))
    return "\n".join(lines)


def check_one_head(answer, what: str = "out_one") -> str:
    """Exercise 2.5: the output of multi-head attention on chapter 2's two-head example
    (:data:`tmlib.course.examples.MHA_EXAMPLE_2`) with its two heads' matrices used side by side as one head of
    width 4 and the same W^O, computed here. A failure names the shape, how far the answer is off, and three slips:
    the two-head output stored instead (named, without the reason they differ, which the exercise asks for in
    words), the scale √2 of one of the two heads, and W^O left out; never the output due."""
    from tmlib.course.examples import MHA_EXAMPLE_2 as m

    require_answered(answer, what)
    big = [np.concatenate(list(np.asarray(w, dtype=float)), axis=1)[None] for w in (m.w_q, m.w_k, m.w_v)]
    expected = ref.multi_head_attention(m.q, m.k, m.v, *big, m.w_o)[0]
    w_o = np.asarray(m.w_o, dtype=float)
    variants = [("the two heads give (`output`): run the single head of width 4, whose three projections are the "
                 "matrices `big`", ref.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, w_o)[0]),
                ("the head gives with its scores divided by √2, the width of one of the two small heads: a single "
                 "head of width 4 divides by √4", ref.multi_head_attention(m.q, m.k, m.v, big[0] * np.sqrt(2.0),
                                                                        big[1], big[2], w_o)[0]),
                ("the head gives without the product with W^O: keep the same W^O as the two heads",
                 ref.multi_head_attention(m.q, m.k, m.v, *big, np.eye(w_o.shape[0], w_o.shape[1]))[0])]
    return _compare(answer, expected, what, variants, atol=1e-9)


def check_relu_bias(answer, what: str = "out_new") -> str:
    """Exercise 3.4: the feed-forward network of chapter 3's example (:data:`tmlib.course.examples.FFN_EXAMPLE`)
    with b1 = (-2, 0) instead of (0, 1), computed here; a failure names a missing ReLU, a ReLU after the second
    layer or the old bias kept, never the output due."""
    from tmlib.course.examples import FFN_EXAMPLE as ex

    require_answered(answer, what)
    b1 = np.array([-2.0, 0.0])
    no_relu = _ffn(ex.x, ex.w1, b1, ex.w2, ex.b2, relu=False)
    relu_last = np.maximum(0.0, no_relu)
    variants = [("the network gives without the ReLU", no_relu),
                ("the network gives with the ReLU after the second layer instead of between the two", relu_last),
                ("the network gives with the chapter's old bias b1 = (0, 1)", _ffn(ex.x, ex.w1, ex.b1, ex.w2, ex.b2))]
    if np.allclose(no_relu, relu_last, rtol=0.0, atol=1e-9):  # no output below 0 here: one message for both slips
        variants[:2] = [("the network gives with no ReLU between the two linear maps (no ReLU at all, or one after "
                         "the second layer: here both give the same)", no_relu)]
    return _compare(answer, _ffn(ex.x, ex.w1, b1, ex.w2, ex.b2), what, variants, atol=1e-9)


def check_ln_of_affine(fn, what: str = "ln_of_affine", *, seed: int = 0) -> str:
    """Exercise 3.5: call ``fn(ln_x, a, b)``, which must return LN(a x + b) (γ = 1, β = 0, no ε) from ``ln_x`` =
    LN(x) alone, on the rows of a seeded random ``x`` the student did not choose, for a > 0 and a < 0 and several
    b; compare with the layer normalisation of a x + b computed here. A failure names the (a, b) where the answer
    differs, and where the student's rows are not normalised, their own means and variances; a function that
    normalises again (which the exercise rules out, and which the calls above cannot see) is named from its output
    on rows of variance 4; never the rule."""
    rng = np.random.default_rng(seed)
    x = rng.normal(loc=2.0, scale=3.0, size=(4, 6))
    ln_x = ref.layer_norm(x, eps=0.0)
    for a, b in [(3.0, -7.0), (0.25, 2.0), (-2.0, 1.0), (-0.5, -3.0)]:
        call = f"{what}(ln_x, {a:g}, {b:g})"
        ans = as_float_array(fn(ln_x.copy(), a, b), "answer", call)
        if ans.shape != x.shape:
            raise AssertionError(f"{call} has shape {ans.shape}, but ln_x has shape {x.shape}: compute from the "
                                 "argument ln_x, not from a variable of the notebook")
        expected = ref.layer_norm(a * x + b, eps=0.0)
        if np.allclose(ans, expected, rtol=0, atol=1e-9):
            continue
        means, variances = np.abs(ans.mean(axis=-1)).max(), ans.var(axis=-1)
        if means > 1e-6 or not np.allclose(variances, 1.0, rtol=0, atol=1e-6):
            spread = (f"variance {variances.min():.4g}" if f"{variances.min():.4g}" == f"{variances.max():.4g}"
                      else f"variances from {variances.min():.4g} to {variances.max():.4g}")
            raise AssertionError(
                f"{call} is wrong: its rows have means up to {means:.4g} in size and {spread}, but a layer "
                "normalisation with γ = 1, β = 0 and no ε gives every row mean 0 and variance 1")
        case = "a > 0" if a > 0 else "a < 0"
        raise AssertionError(f"{call} is wrong ({case}): its rows are normalised, but they are not LN(a x + b) "
                             "of the x whose normalisation ln_x is")
    # Normalising a normalised row changes nothing, so a function that normalises a ln_x + b again passes the
    # calls above; rows of variance 4, which it would bring back to variance 1, tell it apart.
    wide = 2.0 * ln_x
    call = f"{what}(2 * ln_x, -2, 1)"
    ans = as_float_array(fn(wide.copy(), -2.0, 1.0), "answer", call)
    if ans.shape == wide.shape and np.allclose(ans.var(axis=-1), 1.0, rtol=0, atol=1e-6):
        raise AssertionError(f"{call}: given rows of variance 4, your function returns rows of variance 1: it "
                             "normalises again. The exercise asks for LN(a x + b) from ln_x alone, without "
                             "normalising again: what do a and b do to a row that is already normalised?")
    return (f"correct: {what} gives LN(a x + b) from LN(x) for a > 0 and a < 0 and several b, on a random x "
            "(tolerance 1e-09)")


# ------------------------------------------------------------------------------------------------------------------
# Build-it checks of chapters 1 and 2 that name the mistake each exercise is about.

_INVERTED_MASK = ("the mask is True where the query may attend (and False where it is blocked): did you invert it? "
                  "np.where(mask, scores, -np.inf) keeps the scores where the mask is True")


def check_masked_attention(fn, what: str = "masked_attention") -> str:
    """Exercise 1.2: call ``fn(q, k, v, mask) -> (output, weights)`` on example 1
    (:data:`tmlib.course.examples.ATTENTION_EXAMPLE_1`) with the causal mask and values 3 wide, as a batch of two
    sequences (the example and its queries reversed), compare with weights and outputs computed here, then
    compare the first sequence alone, without a batch axis, with its result inside the batch
    (:func:`tmlib.analysis.bugcheck.check_without_batch`). A failure names the slip: ``k.T`` on a batch, an
    inverted mask (a row whose every key is blocked), the pair returned as (weights, output), blocked weights set
    to 0 after the softmax, a transpose that assumes exactly one batch axis; never the weights due.

    Raises:
        AssertionError: a wrong result, with its likely cause.
    """
    from tmlib.analysis.bugcheck import check_without_batch  # Exercise 10.8's check of the same slip
    from tmlib.course.diagnostics import check_rows_sum_to_one
    from tmlib.course.examples import ATTENTION_EXAMPLE_1 as ex

    q, k = (np.asarray(a, dtype=float) for a in (ex.q, ex.k))
    v = np.asarray(ex.v, dtype=float) @ np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])  # (3, 3): d_v = 3
    mask = np.tril(np.ones((3, 3), dtype=bool))  # (3, 3): True = may attend

    def run(qs, ks, vs):
        try:
            result = fn(qs, ks, vs, mask)
        except ValueError as err:
            if "entirely -inf" in str(err):
                raise AssertionError(f"{what} blocks every key of a row of the causal mask ({err}): "
                                     f"{_INVERTED_MASK}") from None
            if "mismatch" in str(err):
                raise AssertionError(f"{what} fails on a batch of two sequences: k.T reverses every axis, the "
                                     "batch axis too; transpose only the last two") from None
            raise
        if not isinstance(result, tuple) or len(result) != 2:
            raise AssertionError(f"{what} must return the pair (output, weights), got {type(result).__name__}")
        out, w = (as_float_array(r, "answer", what) for r in result)
        if np.isnan(w).all(axis=-1).any():
            raise AssertionError(f"{what} gives a row of weights that is all NaN, a row whose every key is "
                                 f"blocked: {_INVERTED_MASK}")
        check_shape(w, (2, 3, 3), f"weights of {what} on a batch of two")
        return out, w

    qb, kb, vb = np.stack([q, q[::-1]]), np.stack([k, k]), np.stack([v, v])
    out, w = run(qb, kb, vb)
    out_ref, w_ref = _attention_masked(qb, kb, vb, mask)
    if np.allclose(out, w_ref, rtol=0, atol=1e-9) and np.allclose(w, out_ref, rtol=0, atol=1e-9):
        raise AssertionError(f"{what} returns (weights, output): return the pair in the order (output, weights)")
    late = ref.softmax(qb @ np.swapaxes(kb, -1, -2) / np.sqrt(2)) * mask
    if np.allclose(w, late, rtol=0, atol=1e-9):
        raise AssertionError("the rows do not sum to 1: did you set blocked weights to 0 after the softmax? Set "
                             "blocked scores to -inf before it")
    lines = [check_rows_sum_to_one(w, "weights of a batch of two with the causal mask")]
    lines.append(check_close(w, w_ref, "weights of a batch of two with the causal mask", atol=1e-12))
    lines.append(check_close(out, out_ref, "output of a batch of two with the causal mask", atol=1e-12))
    lines.append(check_without_batch(lambda *qkv: fn(*qkv, mask), (qb, kb, vb), what, 1e-12, unit="sequence",
                                     hint="the leading batch dimensions may be none, so swap only the last two "
                                          "axes, counted from the end"))
    return "\n".join(lines)


def _attention_masked(q, k, v, mask):
    scores = np.where(mask, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)
    weights = ref.softmax(scores)
    return weights @ v, weights


_MOVE_HEADS = ("cut the last axis into (h, d_k), then move the head axis in front of the positions with swapaxes "
               "(or transpose) of those two axes; a reshape alone deals the entries out in the wrong order")


def check_split_merge(split, merge, what: tuple[str, str] = ("my_split_heads", "my_merge_heads")) -> str:
    """Exercise 2.2: ``split(x, n_heads)`` of shape ``(..., n, h d_k) -> (..., h, n, d_k)`` and ``merge``, its
    inverse, on the projected queries of chapter 2's two-head example
    (:data:`tmlib.course.examples.MHA_EXAMPLE_2`), then on a seeded random batch ``(2, 5, 6)`` split into 3 heads.
    A failure names a wrong axis order, the plain reshape (right shape, wrong content) in either direction, and a
    batch axis that is not passed through; never the heads due.

    Raises:
        AssertionError: a wrong shape or content, with its likely cause.
    """
    from tmlib.course.examples import MHA_EXAMPLE_2 as m

    name_s, name_m = what
    x = np.asarray(m.q, dtype=float) @ np.concatenate(list(np.asarray(m.w_q, dtype=float)), axis=1)  # (3, 4)
    heads = ref.split_heads(x, 2)  # (2, 3, 2)
    s = as_float_array(split(x.copy(), 2), "answer", f"{name_s}(q_big, 2)")
    if s.shape != heads.shape:
        raise AssertionError(f"{name_s}(q_big, 2) has shape {s.shape}, expected (h, n, d_k) = {heads.shape}: "
                             f"{_MOVE_HEADS}")
    if np.array_equal(s, x.reshape(heads.shape)):
        raise AssertionError(f"{name_s}(q_big, 2) is the plain reshape x.reshape(h, n, d_k): the right shape, but "
                             "it reads the entries row after row, so head 1 gets token 1's columns of both heads. "
                             f"To give head i its own columns of every token: {_MOVE_HEADS}")
    lines = [_compare(s, heads, f"{name_s}(q_big, 2)", atol=1e-12,
                      otherwise=lambda a: f"Head i must hold columns of head i of every token: {_MOVE_HEADS}.")]
    back = as_float_array(merge(heads.copy()), "answer", f"{name_m}(heads)")
    if back.shape != x.shape:
        raise AssertionError(f"{name_m}(heads) of heads (h, n, d_k) = {heads.shape} has shape {back.shape}, "
                             f"expected (n, h d_k) = {x.shape}: move the head axis back behind the positions with "
                             "swapaxes, then join the last two axes with a reshape")
    if np.array_equal(back, heads.reshape(x.shape)):
        raise AssertionError(f"{name_m}(heads) is the plain reshape heads.reshape(n, h d_k): the right shape, but "
                             "it puts head 1's rows first instead of the heads side by side. Move the head axis back "
                             "behind the positions with swapaxes first, then reshape")
    lines.append(check_close(back, x, f"{name_m}({name_s}(q_big, 2))", atol=1e-12))
    xb = np.random.default_rng(5).normal(size=(2, 5, 6))  # (batch, n, d_model)
    hint = "keep the leading axes as they are (`*lead, n, d_model = x.shape`) and act on the last ones"
    sb = as_float_array(call_on_batch(lambda a: split(a, 3), xb, name_s, hint), "answer", name_s)
    check_shape(sb, (2, 3, 5, 2), f"{name_s} of a (2, 5, 6) batch into 3 heads")
    lines.append(check_close(sb, ref.split_heads(xb, 3), f"{name_s} of a (2, 5, 6) batch into 3 heads", atol=0))
    hb = ref.split_heads(xb, 3)
    mb = as_float_array(call_on_batch(merge, hb, name_m, hint), "answer", name_m)
    lines.append(check_close(mb, xb, f"{name_m} of a (2, 3, 5, 2) batch", atol=0))
    return "\n".join(lines)
