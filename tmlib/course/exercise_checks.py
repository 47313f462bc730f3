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
from tmlib.course.checks import as_float_array, check_close, check_shape

__all__ = ["check_attention_result", "check_merged_alignment", "check_feed_forward_result", "check_layer_norm_result", "check_multi_head_result", "check_multi_head_attention", "check_feed_forward", "check_encoder_layer", "check_view_shortcut"]


def _compare(answer, expected, what: str, variants=(), **tolerance) -> str:
    """``check_close(answer, expected)``; on a failure, add the hint of the first variant ``(hint, value)`` that the
    answer matches (a typical mistake recomputed here, never printed)."""
    try:
        return check_close(answer, expected, what, **tolerance)
    except AssertionError as err:
        a = as_float_array(answer, "answer", what)
        for hint, value in variants:
            v = np.asarray(value, dtype=float)
            if v.shape == a.shape and np.all(np.isfinite(v)) and np.allclose(a, v, rtol=0, atol=1e-9):
                raise AssertionError(f"{err}\n  Your answer is what {hint}.") from None
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
    exchanged or a word's pieces left unmerged; never the matrix."""
    from tmlib.analysis.alignment import word_spans

    w = np.asarray(weights, dtype=float)
    qs, ks = word_spans(list(query_pieces)), word_spans(list(key_pieces))
    check_shape(answer, (len(qs), len(ks)), what)

    def merge(rows, cols):
        by_key = np.stack([cols(w[:, a:b], axis=1) for a, b in ks], axis=1)
        return np.stack([rows(by_key[a:b], axis=0) for a, b in qs], axis=0)

    variants = [("summing over the query pieces gives (a row then adds up to its number of pieces)",
                 merge(np.sum, np.sum)),
                ("averaging over the key pieces gives (a row then no longer adds up to 1)", merge(np.mean, np.mean)),
                ("the mean and the sum exchanged give", merge(np.sum, np.mean))]
    return _compare(answer, merge(np.mean, np.sum), what, variants, decimals=4)


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
    the exercise asks for none, say) is named as such; the expected value is never printed."""
    x = np.asarray(x, dtype=float)
    tolerance = tolerance or {"atol": 1e-9}
    try:
        return _compare(answer, ref.layer_norm(x, gamma, beta, eps=eps), what, **tolerance)
    except AssertionError as err:
        atol = tolerance.get("atol") or 0.0
        if tolerance.get("decimals") is not None:
            atol = 0.5 * 10.0 ** -tolerance["decimals"]
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


def _random_mha(rng, n_q: int, n_k: int, d_model: int, n_heads: int, d_k: int):
    """Random inputs of a cross-attention (queries and keys of different lengths): x_q, x_k, x_v, w_q, w_k, w_v,
    w_o (per-head matrices of shape (n_heads, d_model, d_k))."""
    x_q, x_k, x_v = rng.normal(size=(n_q, d_model)), rng.normal(size=(n_k, d_model)), rng.normal(size=(n_k, d_model))
    w_q, w_k, w_v = (rng.normal(size=(n_heads, d_model, d_k)) for _ in range(3))
    return x_q, x_k, x_v, w_q, w_k, w_v, rng.normal(size=(n_heads * d_k, d_model))


def check_multi_head_attention(fn, what: str = "your multi-head attention", *, seed: int = 0) -> str:
    """Call ``fn(x_q, x_k, x_v, w_q, w_k, w_v, w_o) -> (output, weights)`` on seeded random inputs (three heads,
    queries and keys of different lengths) and say what differs: the shapes, a row of weights that does not sum
    to 1, the first head whose weights differ (and whether its scores lack the √d_k), or the output after
    correct weights (the concatenation's order, W^O)."""
    n_q, n_k, d_model, n_heads, d_k = 4, 5, 6, 3, 2
    inputs = _random_mha(np.random.default_rng(seed), n_q, n_k, d_model, n_heads, d_k)
    x_q, x_k, x_v, w_q, w_k, w_v, w_o = inputs
    result = fn(*inputs)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"{what} must return the pair (output, weights), got {type(result).__name__}")
    output, weights = (as_float_array(r, "answer", what) for r in result)
    check_shape(weights, (n_heads, n_q, n_k), f"{what}: the weights (n_heads, n_q, n_k) of 3 heads, 4 queries, 5 keys")
    check_shape(output, (n_q, d_model), f"{what}: the output (n_q, d_model) of 4 queries with d_model = 6")
    heads = []
    for i in range(n_heads):
        q, k, v = x_q @ w_q[i], x_k @ w_k[i], x_v @ w_v[i]
        out_i, w_i = _attention(q, k, v)
        if not np.allclose(weights[i], w_i, rtol=0, atol=1e-9):
            if np.allclose(weights[i], _attention(q, k, v, scale=False)[1], rtol=0, atol=1e-9):
                cause = "its scores are not divided by √d_k; the scale is √d_k of a head, not √d_model"
            elif np.allclose(weights[i], _attention(q * np.sqrt(d_k / d_model), k, v)[1], rtol=0, atol=1e-9):
                cause = "its scores are divided by √d_model; the scale is √d_k of a head, not √d_model"
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
    concat = np.concatenate(heads, axis=-1)  # (n_q, n_heads * d_k)
    if np.allclose(output, concat @ w_o, rtol=0, atol=1e-9):
        return f"correct: {what} gives the right weights in all {n_heads} heads and the right output (tolerance 1e-09)"
    if np.allclose(output, np.concatenate(heads[::-1], axis=-1) @ w_o, rtol=0, atol=1e-9):
        cause = "the heads are concatenated in the reverse order, so each meets the wrong rows of W^O"
    elif output.shape == concat.shape and np.allclose(output, concat, rtol=0, atol=1e-9):
        cause = "the concatenated heads are returned without the product with W^O"
    else:
        cause = "the weights are right: look at the head outputs (weights times V W^V_i), their concatenation and W^O"
    raise AssertionError(f"{what}: the weights of every head are right but the output differs: {cause}")


def check_feed_forward(fn, what: str = "your feed-forward network", *, seed: int = 0) -> str:
    """Call ``fn(x, w1, b1, w2, b2)`` on seeded random inputs (a batch of sequences, d_ff ≠ d_model, then
    d_ff = d_model) and say what differs: the shape, a missing ReLU, a ReLU in the wrong place, the biases
    exchanged."""
    rng = np.random.default_rng(seed)
    for d_model, d_ff in ((4, 12), (5, 5)):
        x = rng.normal(size=(2, 3, d_model))  # (batch, n, d_model)
        w1, b1 = rng.normal(size=(d_model, d_ff)), rng.normal(size=d_ff)
        w2, b2 = rng.normal(size=(d_ff, d_model)), rng.normal(size=d_model)
        shape_ = f"(d_model = {d_model}, d_ff = {d_ff})"
        out = as_float_array(fn(x, w1, b1, w2, b2), "answer", what)
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
    inputs and name the first sub-layer that differs, with the cause where it is a typical one (the residual
    missing, the normalisation before the sub-layer instead of after the addition, the FFN fed the layer's input)."""
    rng = np.random.default_rng(seed)
    n, d_model, n_heads, d_ff = 5, 8, 2, 16
    x = rng.normal(size=(n, d_model))
    self_attn = tuple(rng.normal(size=(n_heads, d_model, d_model // n_heads)) for _ in range(3)) + (
        rng.normal(size=(d_model, d_model)) / np.sqrt(d_model),)
    ffn = (rng.normal(size=(d_model, d_ff)), rng.normal(size=d_ff), rng.normal(size=(d_ff, d_model)),
           rng.normal(size=d_model))
    result = fn(x, self_attn, ffn)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"{what} must return the pair (z, out), got {type(result).__name__}")
    z_ans, out_ans = (as_float_array(r, "answer", what) for r in result)
    attn = lambda s: ref.multi_head_attention(s, s, s, *self_attn)[0]  # noqa: E731
    ff = lambda s: _ffn(s, *ffn)  # noqa: E731
    z = ref.layer_norm(x + attn(x))
    for name, ans, exp, variants in [
            ("self-attention", z_ans, z, [("the residual connection is missing (LN(MultiHead(x)))", ref.layer_norm(attn(x))),
                                          ("the normalisation comes before the sub-layer (pre-LN), not after the "
                                           "residual addition", x + attn(ref.layer_norm(x)))]),
            ("feed-forward", out_ans, ref.layer_norm(z + ff(z)),
             [("the residual connection is missing (LN(FFN(z)))", ref.layer_norm(ff(z))),
              ("the feed-forward network gets the layer's input x instead of z", ref.layer_norm(z + ff(x))),
              ("the normalisation comes before the sub-layer (pre-LN)", z_ans + ff(ref.layer_norm(z_ans)))])]:
        check_shape(ans, (n, d_model), f"{what}: the output of its {name} sub-layer")
        if np.allclose(ans, exp, rtol=0, atol=1e-9):
            continue
        cause = next((hint for hint, v in variants if np.allclose(ans, v, rtol=0, atol=1e-9)), None)
        before = "" if name == "self-attention" else " (the self-attention sub-layer before it matches)"
        raise AssertionError(f"{what} differs from the right output in its {name} sub-layer{before}: "
                             + (f"{cause}?" if cause else "follow x + Sublayer(x), then the layer normalisation"))
    return f"correct: both sub-layers of {what} give the right outputs (tolerance 1e-09)"


def check_view_shortcut(answer, q, n_heads: int, what: str = "the shortcut's view") -> str:
    """Check the head split without a transpose, ``q.view(batch, n_heads, seq_len, d_k)``, of projected queries
    ``q`` of shape ``(batch, seq_len, d_model)``, exactly, naming the true split (view, then transpose); never the
    tensor."""
    x = as_float_array(q, "queries", what)
    batch, seq_len, d_model = x.shape
    d_k = d_model // n_heads
    expected = x.reshape(batch, n_heads, seq_len, d_k)  # the same memory re-read in row-major order
    check_shape(answer, expected.shape, what)
    split = x.reshape(batch, seq_len, n_heads, d_k).transpose(0, 2, 1, 3)
    variants = [("the true split gives (view, then transpose); the shortcut leaves the transpose out", split)]
    return _compare(answer, expected, what, variants, atol=0)


_MHA_LAYERS = ("w_q", "w_k", "w_v", "w_o")


def _mha_state_error(err: Exception, module: str) -> Exception | None:
    """What a failed ``load_state_dict`` of the four layers ``w_q``, ``w_k``, ``w_v``, ``w_o`` says about the
    student's module (None: another error)."""
    import re

    text = str(err)
    if "state_dict" not in text:
        return None
    section = lambda name: re.findall(r'"([^"]+)"', text.split(f"{name} key(s) in state_dict:")[1].split("\n")[0]
                                      ) if f"{name} key(s) in state_dict:" in text else []  # noqa: E731
    missing, unexpected = section("Missing"), section("Unexpected")
    ours = {f"{n}.{k}" for n in _MHA_LAYERS for k in ("weight", "bias")}
    if set(unexpected) == ours and not missing:
        return TypeError(f"{module} is not written yet: its `__init__` holds none of {', '.join(_MHA_LAYERS)}.\n"
                         "  Add the four nn.Linear(d_model, d_model), write `forward`, and run that cell again")
    if unexpected:  # weights the module has no parameter for
        biases = all(u.endswith(".bias") for u in unexpected) and not missing
        rule = "with biases (bias=True, the default)" if biases else "named w_q, w_k, w_v and w_o"
        extra = f" (it has {', '.join(missing)} instead)" if missing else ""
        return AssertionError(f"{module} has no {', '.join(unexpected)}{extra}:\n  its layers must be four "
                              f"nn.Linear(d_model, d_model) {rule},\n  since load_state_dict copies weights by name")
    if missing:  # parameters that the four layers do not have
        return AssertionError(f"{module} has parameters besides the four layers w_q, w_k, w_v and w_o "
                              f"({', '.join(missing)}):\n  multi-head attention needs only these four nn.Linear")
    sizes = re.findall(r"size mismatch for ([\w.]+)", text)
    if sizes:
        return AssertionError(f"{module}: {', '.join(sizes)} has the wrong shape;\n  each layer is "
                              "nn.Linear(d_model, d_model)")
    return None


def _mha_torch(state, n_heads: int, query, key, value, mask=None, *, scale: bool = True, softmax_dim: int = -1,
               transpose: bool = True, project: bool = True):
    """Multi-head attention with the weights ``state`` of four nn.Linear layers, and typical mistakes: no √d_k,
    the softmax over the queries, the heads split without the transpose, no W^O."""
    import torch

    def linear(name, x):
        return x @ state[f"{name}.weight"].T + state[f"{name}.bias"]

    batch, n_q, d_model = query.shape
    d_k = d_model // n_heads

    def split(x):
        n = x.shape[1]
        if transpose:
            return x.reshape(batch, n, n_heads, d_k).transpose(1, 2)
        return x.reshape(batch, n_heads, n, d_k)

    q, k, v = split(linear("w_q", query)), split(linear("w_k", key)), split(linear("w_v", value))
    scores = q @ k.transpose(-2, -1) / (d_k ** 0.5 if scale else 1.0)  # (batch, h, n_q, n_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    heads = torch.softmax(scores, dim=softmax_dim) @ v  # (batch, h, n_q, d_k)
    concat = heads.transpose(1, 2).reshape(batch, n_q, d_model)
    return linear("w_o", concat) if project else concat


def check_my_mha(run, what: str = "your module", *, module: str = "MyMultiHeadAttention", seed: int = 7) -> str:
    """Check a multi-head attention module written in PyTorch through ``run(n_heads, state, query, key, value,
    attn_mask=None)``, which builds the module, loads the state dict ``state`` (four ``nn.Linear(d_model,
    d_model)`` with biases, ``w_q``, ``w_k``, ``w_v``, ``w_o``) and runs it without gradients.

    In float64, on seeded random weights and a batch of 2 sequences of 5 tokens (4 heads, d_model = 16), the outputs
    must equal those of ``torch.nn.MultiheadAttention`` holding the same weights to 1e-10, without a mask and with
    the causal mask (True = may attend); on chapter 2's two-head example with zero biases they must equal
    multi-head attention as Part I computes it, to 1e-12. A failure names the first case that differs and, where
    the output is that of a typical mistake, the mistake (the scale, the softmax's axis, the split without a
    transpose, the mask read the wrong way round); an unwritten module is reported as not written yet. Never prints
    an expected value.
    """
    import torch
    from torch import nn

    from tmlib.course.examples import MHA_EXAMPLE_2
    from tmlib.model import causal_mask

    def call(n_heads, state, query, key, value, **mask):
        try:
            out = run(n_heads, state, query, key, value, **mask)
        except RuntimeError as err:
            better = _mha_state_error(err, module)
            if better is None:
                raise
            raise better from None
        if out is None:
            raise TypeError(f"{module}.forward is not written yet: it returned None.\n  Is its body still `...`, "
                            "or is a `return` missing? Finish it and run that cell again")
        return out

    g = torch.Generator().manual_seed(seed)
    d_model, n_heads, n = 16, 4, 5
    state = {f"{name}.{kind}": 0.3 * torch.randn(*((d_model, d_model) if kind == "weight" else (d_model,)),
                                                 generator=g, dtype=torch.float64)
             for name in _MHA_LAYERS for kind in ("weight", "bias")}
    reference = nn.MultiheadAttention(d_model, n_heads, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([state[f"{c}.weight"] for c in _MHA_LAYERS[:3]]))
        reference.in_proj_bias.copy_(torch.cat([state[f"{c}.bias"] for c in _MHA_LAYERS[:3]]))
        reference.out_proj.weight.copy_(state["w_o.weight"])
        reference.out_proj.bias.copy_(state["w_o.bias"])
    x = torch.randn(2, n, d_model, generator=g, dtype=torch.float64)  # (batch, seq_len, d_model)
    causal = causal_mask(n)
    for mask, case in ((None, "self-attention without a mask"),
                       (causal, "self-attention with the causal mask (True = may attend)")):
        got = as_float_array(call(n_heads, state, x, x, x, attn_mask=mask), "answer", f"{what}: {case}")
        check_shape(got, (2, n, d_model), f"{what}: the output (batch, n_q, d_model) of {case}")
        with torch.no_grad():
            want = reference(x, x, x, attn_mask=None if mask is None else ~mask, need_weights=False)[0]
            mistakes = [("a module gives without dividing the scores by √d_k", dict(scale=False)),
                        ("a module gives with the softmax over the queries (dim=-2) instead of the keys",
                         dict(softmax_dim=-2)),
                        ("a module gives that splits the heads with view alone, without the transpose",
                         dict(transpose=False)),
                        ("a module gives that returns the concatenated heads without applying w_o",
                         dict(project=False))]
            variants = [(hint, _mha_torch(state, n_heads, x, x, x, mask, **kw).numpy()) for hint, kw in mistakes]
            if mask is not None:
                flipped = _mha_torch(state, n_heads, x, x, x, ~mask).numpy()
                if np.allclose(got, flipped, rtol=0, atol=1e-10, equal_nan=True):
                    raise AssertionError(f"{what}: {case}\n  reads the mask the wrong way round: True means "
                                         "may attend,\n  so the scores to set to -inf are those where the mask "
                                         "is False")
        _compare(got, want.numpy(), f"{what}: {case}", variants, atol=1e-10)
    m = MHA_EXAMPLE_2
    d, h = np.asarray(m.q).shape[-1], np.asarray(m.w_q).shape[0]
    zero = torch.zeros(d, dtype=torch.float64)
    weights = {"w_q": m.w_q, "w_k": m.w_k, "w_v": m.w_v}
    example = {f"{name}.weight": torch.tensor(np.concatenate(list(np.asarray(w, dtype=float)), axis=1).T)
               for name, w in weights.items()}  # nn.Linear stores (W^Q_1 | ... | W^Q_h) transposed
    example["w_o.weight"] = torch.tensor(np.asarray(m.w_o, dtype=float).T)
    example.update({f"{name}.bias": zero for name in _MHA_LAYERS})
    x_q, x_k, x_v = (torch.tensor(np.asarray(a, dtype=float))[None] for a in (m.q, m.k, m.v))
    got = call(h, example, x_q, x_k, x_v)
    want = ref.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o)[0][None]  # (1, n, d_model)
    _compare(got, want, f"{what}: chapter 2's two-head example with zero biases", atol=1e-12)
    return (f"correct: {what} gives nn.MultiheadAttention's outputs with the same weights, without a mask\n"
            "  and with the causal mask (tolerance 1e-10), and chapter 2's two-head example (tolerance 1e-12)")
