"""Checks for Part I's exercises that compare with the right answer without showing it, and name the symptom.

A check cell that computes the expected value in plain sight (``R.feed_forward(x, w1, b1_new, ...)``) hands the
student the answer; these functions compute it inside, compare with :func:`tmlib.course.checks.check_close`, and on
a failure add what the answer matches instead (the scores not scaled, the ReLU missing, one factor of a product
left out). The build-it checks (:func:`check_multi_head_attention`, :func:`check_feed_forward`) call the student's
function on seeded random inputs that the student did not choose, and say which head or which step differs.
None prints an expected value.
"""
from __future__ import annotations

import numpy as np

from tmlib import ref
from tmlib.course.checks import as_float_array, check_close, check_shape

__all__ = ["check_attention_result", "check_attention_bytes", "check_learning_rate", "check_kv_cache_bytes", "check_merged_alignment", "check_padding_fractions", "check_peak_learning_rate", "check_smoothing_floor", "check_feed_forward_result", "check_layer_norm_result",
           "check_multi_head_result", "check_multi_head_attention", "check_feed_forward", "check_encoder_layer"]


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


def _whole_bytes(answer, what: str) -> int:
    """``answer`` as an int; AssertionError unless it is a positive whole number (an int or an integral float)."""
    if isinstance(answer, bool) or not isinstance(answer, (int, float, np.integer, np.floating)) \
            or not float(answer).is_integer() or answer <= 0:
        raise AssertionError(f"{what} should be a positive whole number of bytes, got {answer!r}")
    return int(answer)


def _check_byte_product(answer: int, expected: int, factors: dict, what: str, otherwise: str) -> str:
    """Compare a byte count with ``expected`` (a product of the named ``factors``) exactly; on a failure, name the
    one factor that is missing or counted twice (or bits counted for bytes), else say ``otherwise``. Never the
    value."""
    if answer == expected:
        return f"correct: {what} is right (exact)"
    hints = [f"{name} is missing" for name, f in factors.items() if f > 1 and answer * f == expected]
    hints += [f"{name} is counted twice" for name, f in factors.items() if f > 1 and answer == expected * f]
    if answer == expected * 8:
        hints.append("bits are counted instead of bytes")
    elif answer * 8 == expected:
        hints.append("bytes are divided by 8 once too often (bits and bytes mixed up)")
    size = "too small" if answer < expected else "too large"
    raise AssertionError(f"{what} is not right yet ({size}): " + (f"{' or '.join(hints)}?" if hints else otherwise))


def check_attention_bytes(answer, *, batch: int, n_heads: int, seq_len: int, bytes_per_element: int,
                          n_layers: int, what: str = "the memory of the attention matrices") -> str:
    """Compare an integer count of bytes with the memory of the stored attention matrices, batch · heads · n² ·
    bytes · layers, naming the factor that is missing or counted twice, or the bytes of another number format
    (4 for float32, 8 for float64) used instead of ``bytes_per_element``; never the value."""
    answer = _whole_bytes(answer, what)
    expected = batch * n_heads * seq_len * seq_len * bytes_per_element * n_layers
    formats = {1: "8-bit", 2: "bfloat16", 4: "float32", 8: "float64"}
    for other in (4, 8):
        if other != bytes_per_element and answer * int(bytes_per_element) == expected * other:
            mine = f"{bytes_per_element} ({formats.get(bytes_per_element, 'bytes')})"
            raise AssertionError(f"{what} is not right yet ({'too small' if answer < expected else 'too large'}): "
                                 f"{other} bytes ({formats[other]}) per element instead of {mine}?")
    factors = {"the batch": batch, "the number of heads": n_heads, "the sequence length (the matrices are n × n)":
               seq_len, "the bytes per element": bytes_per_element, "the number of layers": n_layers}
    return _check_byte_product(answer, expected, factors, what, "it is not off by one of the factors alone")


def _lrate(step, d_model, warmup_steps, factor=1.0):
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def check_learning_rate(answer, step: int, *, d_model: int, warmup_steps: int, factor: float = 1.0,
                        what: str = "learning rate") -> str:
    """Check a rate of the warm-up schedule lrate = factor · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)
    (paper eq. 3) at ``step`` to 4 significant digits, naming the factor or d_model^-0.5 left out, the base
    model's width, or the term of the other phase; never the value."""
    other = (step ** -0.5 if step * warmup_steps ** -1.5 < step ** -0.5 else step * warmup_steps ** -1.5)
    variants = [("the schedule gives without the factor", _lrate(step, d_model, warmup_steps)),
                ("the schedule gives without d_model^-0.5", factor * min(step ** -0.5, step * warmup_steps ** -1.5)),
                ("the schedule gives for the base model (d_model = 512)", _lrate(step, 512, warmup_steps, factor)),
                ("the other phase's term gives (the min takes the smaller of the two)",
                 factor * d_model ** -0.5 * other)]
    variants = [(h, v) for h, v in variants if not np.isclose(v, _lrate(step, d_model, warmup_steps, factor),
                                                              rtol=5e-4, atol=0)]
    return _compare(answer, _lrate(step, d_model, warmup_steps, factor), what, variants, rtol=5e-4, atol=0)


def check_peak_learning_rate(my_peak, peak_step, *, d_model: int, warmup_steps: int, factor: float = 1.0,
                             what: str = "peak learning rate") -> str:
    """Check the step where the warm-up schedule (paper eq. 3, see :func:`check_learning_rate`) peaks, and the
    rate there (4 significant digits), naming a schedule still rising or already falling at ``peak_step``, the
    base model's width or a missing factor; never the value."""
    if isinstance(peak_step, bool) or not isinstance(peak_step, (int, np.integer)) or peak_step < 2:
        raise AssertionError(f"peak_step must be a whole step number of at least 2, got {peak_step!r}")
    before, at, after = (_lrate(int(s), d_model, warmup_steps) for s in (peak_step - 1, peak_step, peak_step + 1))
    if at < max(before, after):
        raise AssertionError(f"step {peak_step} is not the peak: the rate is "
                             f"{'still rising' if after > at else 'already falling'} there")
    return check_learning_rate(my_peak, warmup_steps, d_model=d_model, warmup_steps=warmup_steps, factor=factor,
                               what=what)


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


def check_kv_cache_bytes(answer, *, n_layers: int, n_kv_heads: int, d_head: int, bytes_per_number: int,
                         what: str = "KV cache bytes per token") -> str:
    """Check the bytes a decoder-only model's KV cache holds per token of one sequence, 2 · layers · KV heads ·
    head size · bytes (a key and a value per layer and KV head), exactly, naming the factor that is missing or
    counted twice (or 16 bits counted instead of 2 bytes); never the value."""
    factors = {"the factor 2 for a key and a value": 2, "the number of layers": n_layers,
               "the number of key/value heads": n_kv_heads, "the head size": d_head,
               "the bytes per number": bytes_per_number}
    expected = 2 * n_layers * n_kv_heads * d_head * bytes_per_number
    return _check_byte_product(_whole_bytes(answer, what), expected, factors, what, "check each factor: 2 (a key and a "
                               "value), layers, key/value heads, head size, bytes per number")


def check_smoothing_floor(answer, vocab_size: int, label_smoothing: float, what: str = "loss floor") -> str:
    """Check the smallest label-smoothed cross-entropy (paper §5.4), the entropy H(q) of PyTorch's uniform target
    q = (1 - ε) one-hot + ε/V, in nats, to 3 decimals; names the correct token's term alone, the other tokens' terms
    alone, and log base 2. Never the value."""
    v, eps = int(vocab_size), float(label_smoothing)
    if v < 2 or not 0 < eps < 1:
        raise ValueError(f"need vocab_size >= 2 and 0 < label_smoothing < 1, got {vocab_size}, {label_smoothing}")

    def entropy_terms(p_true, p_other):
        return -p_true * np.log(p_true), -(v - 1) * p_other * np.log(p_other)

    own, others = entropy_terms(1 - eps + eps / v, eps / v)
    variants = [("the correct token's term alone gives (the V - 1 other tokens carry probability too)", own),
                ("the other tokens' terms alone give (the correct token's term is missing)", others),
                ("the entropy in bits gives (the losses are in nats: natural logarithms)", (own + others) / np.log(2))]
    return _compare(answer, own + others, what, variants, decimals=3)


def check_padding_fractions(answer: dict, lengths, max_tokens: int, chunk_sizes=(1, 10, 100, 10_000), *,
                            seed: int = 0, what: str = "padding") -> str:
    """Check a dict chunk_size -> padding fraction of ``tmlib.data.token_batches(lengths, max_tokens, seed, epoch=0,
    chunk_size)`` (padded positions of the longer side over all positions, batches summed) to 3 decimals, naming
    the chunk sizes that differ and a fraction given in percent; never the values."""
    from tmlib.data import padding_fraction, token_batches

    if not isinstance(answer, dict) or sorted(answer) != sorted(chunk_sizes):
        keys = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
        raise AssertionError(f"{what} must be a dict with the keys {', '.join(map(str, chunk_sizes))}; got {keys}")
    wrong = []
    for chunk in chunk_sizes:
        expected = padding_fraction(token_batches(lengths, max_tokens, seed=seed, epoch=0, chunk_size=chunk), lengths)
        got = float(answer[chunk])
        if not np.isclose(got, expected, rtol=0, atol=5e-4):
            wrong.append(f"chunk_size {chunk}" + (" (a percentage? give a fraction between 0 and 1)"
                                                  if np.isclose(got, 100 * expected, rtol=0, atol=5e-2) else ""))
    if wrong:
        raise AssertionError(f"{what} is not right yet at {', '.join(wrong)}: count the padded positions of the "
                             "longer side (source, or target + 1) over all positions, summed over the batches")
    return f"correct: {what} at chunk sizes {', '.join(map(str, chunk_sizes))} (3 decimals)"


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


def check_layer_norm_result(answer, x, what: str = "your answer", *, gamma=None, beta=None, eps: float = 1e-5,
                            **tolerance) -> str:
    """Compare ``answer`` with the layer normalisation of ``x`` over its last axis (biased variance, ``eps`` inside
    the square root)."""
    x = np.asarray(x, dtype=float)
    return _compare(answer, ref.layer_norm(x, gamma, beta, eps=eps), what, **(tolerance or {"atol": 1e-9}))


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
