"""Finding the silent bugs of a Transformer (the chapter "Finding the bugs that break Transformers").

The tests a Transformer must pass, as functions. Checks return a line that starts with ``"correct:"`` or raise
``AssertionError`` naming the symptom, never an expected value (as :mod:`tmlib.course.diagnostics`, whose
:func:`~tmlib.course.diagnostics.check_causal`, :func:`~tmlib.course.diagnostics.check_padding_invariance` and
:func:`~tmlib.course.diagnostics.check_rows_sum_to_one` complete them); measurements return numbers for plots.

* :func:`attention_with_bug`: scaled dot-product attention with one planted bug, to see what each bug looks like;
* :func:`dependency_matrix`: which input positions each output position depends on (causality at a glance);
* :func:`check_no_leak`: the decoder's input must not show the token it is asked to predict;
* :func:`score_spread`, :func:`check_score_scale`: the spread of the attention scores must not grow with d_k;
* :func:`token_scale`, :func:`check_token_signal`: the token embeddings must weigh about as much as the positional
  encodings, neither less than 1.2 times nor more than twice as much; :func:`token_factor`,
  :func:`check_embedding_factor`: and be multiplied by √d_model exactly, the positional encodings not (§3.4);
* :func:`check_queries_independent`: each query's softmax is its own (not taken across the queries);
* :func:`check_independent`: each position (or each head) computed from its own inputs only;
* :func:`check_without_batch`: one sentence without its batch axis gives the output it gets inside a batch;
* :func:`call_with_mask`: calls an attention with a mask, naming what a float mask must hold;
* :func:`check_loss_ignores_padding`: a loss over real tokens that more padding does not change;
* :func:`check_finite`, :func:`check_confident_loss`: log 0 in a loss; a label-smoothed loss of a confident model;
* :func:`check_eps_inside_root`: a layer normalisation with eps outside the square root, or without it;
* :func:`check_repeatable`: dropout left on at evaluation;
* :func:`check_first_loss`: a fresh model's loss is about log |V|, not far below;
* :func:`overfit_batch`: the loss curve of one batch learnt by heart.

Perturbations and random inputs are seeded, so a check calls the function under test on the same inputs every time.
"""
from __future__ import annotations

import math

import numpy as np

from tmlib.course.checks import as_float_array

__all__ = ["BUGS", "attention_with_bug", "dependency_matrix", "check_no_leak", "score_spread", "check_score_scale",
           "token_scale", "check_token_signal", "token_factor", "check_embedding_factor", "check_confident_loss",
           "check_without_batch", "call_with_mask", "check_queries_independent", "check_independent",
           "check_loss_ignores_padding", "check_finite", "check_eps_inside_root", "check_repeatable", "check_first_loss",
           "overfit_batch"]

#: The bugs :func:`attention_with_bug` can plant (``None``: the paper's attention).
BUGS = ("mask flipped", "mask one key late", "mask polarity inverted", "softmax over the queries",
        "no 1/sqrt(d_k)", "mask after the softmax")


def attention_with_bug(q, k, v, mask=None, bug: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(QKᵀ/√d_k)V with one planted bug (NumPy, float64): q ``(..., n_q, d_k)``, k ``(..., n_k, d_k)``,
    v ``(..., n_k, d_v)``, mask bool ``(..., n_q, n_k)`` (True = may attend) → ``(output (..., n_q, d_v), weights
    (..., n_q, n_k))``.

    Bugs (:data:`BUGS`): ``"mask flipped"`` (transposed: a causal mask flipped; a padding mask on the queries),
    ``"mask one key late"`` (each query also sees the key after its last allowed one: a causal mask off by one),
    ``"mask polarity inverted"`` (PyTorch's True = blocked read as the course's True = may attend),
    ``"softmax over the queries"``, ``"no 1/sqrt(d_k)"``, ``"mask after the softmax"`` (weights zeroed, rows
    no longer summing to 1). A row with nothing left to attend to comes out NaN, as in PyTorch.

    Raises:
        ValueError: an unknown bug, or a mask that is not square for ``"mask flipped"``.
    """
    if bug is not None and bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / (1.0 if bug == "no 1/sqrt(d_k)" else math.sqrt(d_k))  # (..., n_q, n_k)
    allowed = None
    if mask is not None:
        allowed = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape).copy()
        if bug == "mask flipped":
            if allowed.shape[-1] != allowed.shape[-2]:
                raise ValueError(f"'mask flipped' needs a square mask, got {allowed.shape}")
            allowed = np.swapaxes(allowed, -1, -2)
        elif bug == "mask one key late":
            allowed[..., 1:] |= allowed[..., :-1].copy()
        elif bug == "mask polarity inverted":
            allowed = ~allowed
        if bug != "mask after the softmax":
            scores = np.where(allowed, scores, -np.inf)
    axis = -2 if bug == "softmax over the queries" else -1
    with np.errstate(invalid="ignore"):
        top = np.max(scores, axis=axis, keepdims=True)
        e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
        weights = e / e.sum(axis=axis, keepdims=True)  # (..., n_q, n_k)
    if bug == "mask after the softmax" and allowed is not None:
        weights = np.where(allowed, weights, 0.0)
    return weights @ v, weights


def _numpy_like(x, like):
    """``x`` (an array) as a tensor of ``like``'s dtype and device when ``like`` is a tensor, else as is."""
    if hasattr(like, "detach"):
        import torch
        return torch.as_tensor(x, dtype=like.dtype, device=like.device)
    return x


def dependency_matrix(fn, x, *, axis: int = -2, seed: int = 0) -> np.ndarray:
    """How far each output position moves when one input position changes: ``D[i, j]`` is the largest change of
    the output at position i when the input at position j gets seeded noise (``x`` array or tensor whose ``axis``
    is time; ``fn(x)`` keeps that time axis; a NaN output counts as unchanged). A causal function gives a
    lower-triangular ``D`` ``(n_out, n_in)``."""
    base = as_float_array(fn(x), "answer", "fn(x)")
    xs = np.asarray(as_float_array(x, "input", "x"))
    n_in, out_axis = xs.shape[axis], axis % base.ndim
    noise = np.random.default_rng(seed).normal(size=xs.shape) * 3.0 + 1.0
    d = np.zeros((base.shape[axis], n_in))
    for j in range(n_in):
        pick = [slice(None)] * xs.ndim
        pick[axis] = j
        moved = xs.copy()
        moved[tuple(pick)] += noise[tuple(pick)]
        diff = np.nan_to_num(np.abs(as_float_array(fn(_numpy_like(moved, x)), "answer", "fn(x)") - base), nan=0.0)
        d[:, j] = np.moveaxis(diff, out_axis, 0).reshape(diff.shape[out_axis], -1).max(axis=1)
    return d


def check_no_leak(fn, tgt, what: str = "your teacher forcing", **kwargs) -> str:
    """Assert that ``fn(tgt, **kwargs) -> (tgt_in, tgt_out)`` (integer ``(batch, m)`` each, for targets ``tgt``
    ``(batch, m)``) does not show the decoder the token it must predict, and does show it the tokens before: when
    target token j changes, the decoder input may change only after position j, must change at position j + 1
    (teacher forcing feeds each step the target tokens before it), and what position j must predict changes
    (positions and tokens counted from 0, as the arrays' indices and the course's other checks count them).

    Raises:
        AssertionError: a shape that is not the target's, a decoder input that shows token j at a position ≤ j
            ("the decoder can read the answer"), one that hides token j from position j + 1, or a position whose
            prediction target ignores its token.
    """
    tgt = np.asarray(tgt)
    tgt_in, tgt_out = (np.asarray(a) for a in fn(tgt, **kwargs))
    if tgt_in.shape != tgt.shape or tgt_out.shape != tgt.shape:
        raise AssertionError(f"{what}: the decoder input {tgt_in.shape} and the tokens to predict {tgt_out.shape} "
                             f"should both have the target's shape {tgt.shape}")
    for j in range(tgt.shape[-1]):
        changed = tgt.copy()
        changed[..., j] += 1  # another token at position j
        new_in, new_out = (np.asarray(a) for a in fn(changed, **kwargs))
        seen = np.argwhere((new_in != tgt_in).any(axis=tuple(range(new_in.ndim - 1))))[:, 0]
        if len(seen) and seen.min() <= j:
            raise AssertionError(f"{what}: position {int(seen.min())} of the decoder input changes when target "
                                 f"token {j} changes: the decoder can read the answer it must predict (a leak)")
        if j + 1 < tgt.shape[-1] and j + 1 not in seen:
            raise AssertionError(f"{what}: position {j + 1} of the decoder input does not change when target token "
                                 f"{j} changes: with teacher forcing, each position reads the target tokens before "
                                 "it")
        if (new_out[..., j] == tgt_out[..., j]).all():
            raise AssertionError(f"{what}: what position {j} must predict does not change when target token {j} "
                                 "changes")
    return f"correct: {what} never shows the decoder the token it must predict, and shows it the tokens before"


def score_spread(weights_fn, d_k: int, n_q: int = 64, n_k: int = 128, seed: int = 0, tensor: bool = False) -> float:
    """The spread (mean over queries of the standard deviation over keys) of log ``weights_fn(q, k)`` for queries
    ``(n_q, d_k)`` and keys ``(n_k, d_k)`` with independent unit-variance entries: the spread of the scores that
    went into the softmax, about 1 for QKᵀ/√d_k whatever d_k. ``tensor``: pass float64 torch tensors."""
    rng = np.random.default_rng(seed + d_k)
    q, k = rng.normal(size=(n_q, d_k)), rng.normal(size=(n_k, d_k))
    if tensor:
        import torch
        q, k = torch.from_numpy(q), torch.from_numpy(k)
    w = as_float_array(weights_fn(q, k), "answer", "the weights")
    if w.shape != (n_q, n_k):
        raise AssertionError(f"the attention weights have shape {w.shape} for {n_q} queries and {n_k} keys, "
                             f"expected ({n_q}, {n_k})")
    return float(np.log(np.maximum(w, 1e-300)).std(axis=-1).mean())


def check_score_scale(weights_fn, widths=(16, 256), what: str = "your attention", band=(0.8, 1.25),
                      tensor: bool = False) -> str:
    """Assert that the scores' spread (:func:`score_spread`) stays within ``band`` at every key width in
    ``widths``: too large and the softmax saturates (its gradient vanishes), too small and attention is uniform.

    Raises:
        AssertionError: the spreads measured, and which way they are off (never the scale itself).
    """
    spreads = {d: score_spread(weights_fn, d, tensor=tensor) for d in widths}
    shown = ", ".join(f"{s:.2f} at d_k = {d}" for d, s in spreads.items())
    if any(not band[0] <= s <= band[1] for s in spreads.values()):
        trend = "grows with d_k" if spreads[widths[-1]] > 1.5 * spreads[widths[0]] else \
            "shrinks with d_k" if spreads[widths[-1]] < spreads[widths[0]] / 1.5 else "is off at every d_k"
        raise AssertionError(f"{what}: for unit-variance queries and keys the spread of the scores {trend} ({shown}); "
                             f"it should stay between {band[0]} and {band[1]} whatever d_k: look at how the scores "
                             "are scaled")
    return f"correct: {what} keeps the scores' spread near 1 at every d_k ({shown})"


def _embeddings_of_two_sentences(embed_fn, d_model, vocab_size, n, seed):
    """A seeded table ``(vocab_size, d_model)`` with entries of standard deviation 1/√d_model, two sentences ``a``
    and ``b`` of ``n`` ids that differ at every position, and ``embed_fn``'s output for each, ``(n, d_model)``."""
    rng = np.random.default_rng(seed + d_model)
    table = rng.normal(size=(vocab_size, d_model)) / math.sqrt(d_model)
    a = rng.integers(0, vocab_size, n)
    b = (a + rng.integers(1, vocab_size, n)) % vocab_size  # another token at every position
    ea, eb = (as_float_array(embed_fn(ids, table), "answer", "the embeddings") for ids in (a, b))
    if ea.shape != (n, d_model):
        raise AssertionError(f"the embeddings have shape {ea.shape} for {n} tokens, expected ({n}, {d_model})")
    return table, a, b, ea, eb


def token_scale(embed_fn, d_model: int, vocab_size: int = 100, n: int = 40, seed: int = 0) -> float:
    """How far ``embed_fn(ids, table)`` moves per entry when every token changes: the root mean square of the change,
    divided by √2, for a table ``(vocab_size, d_model)`` with entries of standard deviation 1/√d_model. Two
    independent draws of an entry differ by √2 times its spread, so the division gives the spread of one entry:
    about 1 for embeddings scaled by √d_model, whatever d_model (a positional encoding's entries have a root mean
    square of 1/√2 ≈ 0.71)."""
    _, _, _, ea, eb = _embeddings_of_two_sentences(embed_fn, d_model, vocab_size, n, seed)
    return float(np.sqrt(((ea - eb) ** 2).mean() / 2))


def check_token_signal(embed_fn, widths=(16, 256), what: str = "your embedding", band=(0.85, 1.42)) -> str:
    """Assert that the tokens move ``embed_fn``'s output by about as much per entry as the positional encodings do
    (:func:`token_scale` within ``band`` at every d_model in ``widths``; correctly scaled embeddings give about 1,
    the positional encodings' entries 1/√2 ≈ 0.71): below, the words weigh less than 1.2 times their positions (the
    lower edge 0.85 stays clear of 0.71, which a factor of √(d_model/2) gives); above, more than twice as much.

    Raises:
        AssertionError: the scales measured, every d_model at which they are out of balance, and the worst.
    """
    scales = {d: token_scale(embed_fn, d) for d in widths}
    shown = ", ".join(f"{s:.2f} at d_model = {d}" for d, s in scales.items())

    def where(failing, worst):  # "at d_model = 256", or every failing width and the worst of them
        if len(failing) == 1:
            return f"at d_model = {failing[0]}"
        named = "every d_model checked" if len(failing) == len(scales) else \
            "d_model = " + ", ".join(map(str, failing[:-1])) + f" and {failing[-1]}"
        return f"at {named}, worst at d_model = {worst}"

    low = [d for d, s in scales.items() if s < band[0]]
    high = [d for d, s in scales.items() if s > band[1]]
    problems = []
    if low:
        problems.append(f"the words weigh less than {band[0] * math.sqrt(2):.1f} times their positions "
                        f"{where(low, min(low, key=scales.get))}")
    if high:
        problems.append(f"the words weigh more than twice their positions {where(high, max(high, key=scales.get))}")
    if problems:
        raise AssertionError(f"{what}: changing the tokens moves the output by {shown} per entry (the root mean "
                             "square of the change divided by √2), while the positional encodings' entries are about "
                             f"0.71: {'; '.join(problems)}")
    return f"correct: {what} keeps both the tokens and their positions readable ({shown} per entry)"


def token_factor(embed_fn, d_model: int, vocab_size: int = 100, n: int = 40, seed: int = 0) -> float:
    """The factor by which ``embed_fn(ids, table)`` multiplies the table's rows, measured: the root mean square of
    the output's change when every token changes, over that of the table rows' change (the positions cancel).
    Exactly the factor for an embedding linear in the table (√d_model for §3.4's), whatever the table."""
    table, a, b, ea, eb = _embeddings_of_two_sentences(embed_fn, d_model, vocab_size, n, seed)
    return float(np.sqrt(((ea - eb) ** 2).mean() / ((table[a] - table[b]) ** 2).mean()))


def check_embedding_factor(embed_fn, widths=(16, 256), what: str = "your embedding", rtol: float = 1e-5) -> str:
    """Assert that ``embed_fn(ids, table)`` multiplies the table's rows by √d_model (§3.4: "In the embedding layers,
    we multiply those weights by √d_model"), measured by :func:`token_factor` at every d_model in ``widths``, to a
    relative ``rtol`` (a float32 embedding rounds to about 1e-7); and that it adds the positional encodings
    unscaled: with an all-zero table the output must be §3.5's encoding itself (§3.4 scales only the embeddings).

    Raises:
        AssertionError: the factors measured, and the widths at which they are not §3.4's (never the factor due);
            or the widths at which the positions' part is not the positional encoding (scaled too, or another).
    """
    factors = {d: token_factor(embed_fn, d) for d in widths}
    shown = ", ".join(f"{f:.4g} at d_model = {d}" for d, f in factors.items())
    wrong = [d for d, f in factors.items() if not math.isclose(f, math.sqrt(d), rel_tol=rtol)]
    if wrong:
        raise AssertionError(f"{what}: the token embeddings come out multiplied by {shown}: not the factor of §3.4 "
                             f"at d_model = {', '.join(map(str, wrong))}")
    _positions_unscaled(embed_fn, widths, what, rtol)
    return f"correct: {what} multiplies the token embeddings by §3.4's factor at every d_model checked ({shown})"


def _positions_unscaled(embed_fn, widths, what, rtol, n: int = 40, vocab_size: int = 100):
    """Raise if ``embed_fn(ids, zeros)`` is not ``positional_encoding(n, d_model)`` at some d_model in ``widths``,
    naming a multiple of the encoding as "scaled too" (never the encoding's values)."""
    from tmlib.ref.positional import positional_encoding
    scaled, other = [], []
    for d in widths:
        pe = positional_encoding(n, d)
        got = as_float_array(embed_fn(np.arange(n) % vocab_size, np.zeros((vocab_size, d))), "answer",
                             "the embeddings")
        if got.shape == pe.shape and np.allclose(got, pe, rtol=rtol, atol=rtol):
            continue
        c = float((got * pe).sum() / (pe * pe).sum()) if got.shape == pe.shape else 0.0
        (scaled if got.shape == pe.shape and np.allclose(got, c * pe, rtol=rtol, atol=rtol) else other).append(d)
    if scaled:
        raise AssertionError(f"{what}: the positional encodings come out multiplied as well, at d_model = "
                             f"{', '.join(map(str, scaled))} (with an all-zero table the output should be the "
                             "positional encoding itself): §3.4 multiplies only the token embeddings")
    if other:
        raise AssertionError(f"{what}: with an all-zero table the output is not §3.5's positional encoding at "
                             f"d_model = {', '.join(map(str, other))}: what is added to the scaled embeddings?")


def check_confident_loss(loss_fn, vocab_size: int = 7, label_smoothing: float = 0.1,
                         what: str = "your loss") -> str:
    """Assert that a label-smoothed ``loss_fn(logits (n, V), targets (n,), label_smoothing)`` stays finite for a
    confident, correct model (logits c at the target, 0 elsewhere, c = 1000 and 2000) and grows in proportion to c:
    label smoothing charges ε/|V| times the logit gap for every token the model rules out.

    Raises:
        AssertionError: an infinite or NaN loss, a loss that ignores the ruled-out tokens, or one that stops growing.
    """
    targets = np.arange(4) % vocab_size
    losses = []
    for c in (1000.0, 2000.0):
        logits = np.zeros((4, vocab_size))
        logits[np.arange(4), targets] = c
        value = as_float_array(loss_fn(logits, targets, label_smoothing), "answer", what)
        check_finite(value, f"{what} of a confident model")
        losses.append(float(value))
    if losses[0] < 1.0:
        raise AssertionError(f"{what}: a confident, correct model costs only {losses[0]:.3g} nats with label smoothing "
                             f"{label_smoothing}: the tokens it rules out should cost something")
    if not 1.9 < losses[1] / losses[0] < 2.1:
        raise AssertionError(f"{what}: doubling the model's confidence changes the loss from {losses[0]:.4g} to "
                             f"{losses[1]:.4g}: with label smoothing it should double (each ruled-out token costs "
                             "ε/|V| times its logit gap)")
    return f"correct: {what} stays finite and grows with the model's confidence"


def check_without_batch(fn, x, what: str = "your function", atol: float = 1e-9, *, unit: str = "sentence",
                        hint: str = "is an axis counted from the front?") -> str:
    """Assert that ``fn`` gives one sentence ``x[0]`` ``(n, d)``, without the batch axis, the same output as it gives
    that sentence inside the batch ``x`` ``(batch, n, d)``: ``fn(x[0]) == fn(x)[0]``, as a layer that counts its
    axes from the end does (``axis=-1`` is the features whatever leads). ``x`` may be a tuple of such arrays,
    passed as ``fn(*x)`` (queries, keys, values), and ``fn`` may return a tuple of arrays (output, weights), each
    compared; ``unit`` names what one row of the batch is, ``hint`` ends a failure's message.

    Raises:
        ValueError: an array of ``x`` that is not 3-D.
        AssertionError: an error on the 2-D input (an axis counted from the front?), or another output.
    """
    xs = x if isinstance(x, tuple) else (x,)
    shapes = [np.asarray(as_float_array(a, "input", "x")).shape for a in xs]
    if any(len(s) != 3 for s in shapes):
        raise ValueError(f"x should have shape (batch, n, d), got {', '.join(map(str, shapes))}")
    batched = [part[0] for part in _parts(fn(*xs), what)]
    try:
        alone = _parts(fn(*(a[0] for a in xs)), what)
    except (IndexError, ValueError) as err:  # NumPy's AxisError is both
        raise AssertionError(f"{what} fails on one {unit} of shape {shapes[0][1:]}, without a batch axis ({err}): "
                             f"{hint}") from err
    if len(alone) != len(batched) or any(a.shape != b.shape or not np.allclose(a, b, atol=atol, rtol=0)
                                         for a, b in zip(alone, batched)):
        raise AssertionError(f"{what} gives one {unit} of shape {shapes[0][1:]}, without a batch axis, another "
                             f"output than inside a batch: {hint}")
    return f"correct: {what} gives a {unit} the same output with or without a batch axis"


def _parts(result, what: str) -> list[np.ndarray]:
    """The arrays of ``result``: one array, or each array of a tuple (output, weights)."""
    return [as_float_array(r, "answer", what) for r in (result if isinstance(result, tuple) else (result,))]


def call_with_mask(fn, x, mask, what: str = "your attention"):
    """``fn(x, mask)``, with PyTorch's error about a mask's dtype turned into what it means: a float ``attn_mask`` is
    *added* to the scores, so it must hold 0 (may attend) and -inf (blocked), in the scores' dtype.

    Raises:
        AssertionError: ``fn`` raised a ``RuntimeError`` that names a dtype (other errors pass through).
    """
    try:
        return fn(x, mask)
    except RuntimeError as err:
        if "dtype" not in str(err):
            raise
        raise AssertionError(f"{what}: PyTorch refuses the mask ({str(err).splitlines()[0]}). A float attn_mask is "
                             "added to the scores, so it must hold 0 where a query may attend and -inf where it may "
                             "not, in the scores' dtype") from err


def check_queries_independent(weights_fn, q, k, what: str = "your attention") -> str:
    """Assert that each query's row of ``weights_fn(q, k)`` is the same when that query is computed alone
    (``q`` ``(n_q, d_k)``, ``k`` ``(n_k, d_k)``): a softmax must normalise each query's scores on their own.

    Raises:
        AssertionError: the first query whose weights change with the other queries.
    """
    together = as_float_array(weights_fn(q, k), "answer", what)
    for i in range(len(q)):
        alone = as_float_array(weights_fn(q[i:i + 1], k), "answer", what)
        if alone.shape != together[i:i + 1].shape or not np.allclose(alone, together[i:i + 1], atol=1e-9):
            raise AssertionError(f"{what}: the weights of query {i + 1} change when the other queries are computed "
                                 "with it: each query's weights must depend on its own scores only")
    return f"correct: {what} normalises each query on its own"


def check_independent(fn, x, size: int = 1, what: str = "your function", *, unit: str = "position",
                      axis: int = -2, hint: str = "", atol: float = 1e-9, seed: int = 0) -> str:
    """Assert that ``fn(x)`` (same shape as ``x``, an array or tensor) computes each group of ``size`` consecutive
    entries along ``axis`` from the same group of its input only: a position-wise layer (``size=1`` along the
    positions), or heads that each read their own ``size = d_k`` features. Groups are counted from 0.

    Raises:
        AssertionError: the first group whose output changes when only another group's input changes (and ``hint``).
    """
    xs = np.asarray(as_float_array(x, "input", "x"))
    base = as_float_array(fn(x), "answer", what)
    n = xs.shape[axis] // size
    noise = np.random.default_rng(seed).normal(size=xs.shape) * 3.0 + 1.0
    for j in range(n):
        pick = [slice(None)] * xs.ndim
        pick[axis] = slice(j * size, (j + 1) * size)
        moved = xs.copy()
        moved[tuple(pick)] += noise[tuple(pick)]
        diff = np.nan_to_num(np.abs(as_float_array(fn(_numpy_like(moved, x)), "answer", what) - base), nan=0.0)
        per_group = np.moveaxis(diff, axis % diff.ndim, 0)[: n * size].reshape(n, -1).max(axis=1)
        others = [i for i in range(n) if i != j and per_group[i] > atol]
        if others:
            raise AssertionError(f"{what}: the output of {unit} {others[0]} changes when only the input of {unit} "
                                 f"{j} changes" + (f": {hint}" if hint else ""))
    return f"correct: {what} computes each {unit} from its own input only (tolerance {atol:g})"


def check_loss_ignores_padding(loss_fn, pad_id: int = 0, vocab_size: int = 7, what: str = "your loss",
                               seed: int = 0) -> str:
    """Assert that ``loss_fn(logits (batch, n, V), targets (batch, n), pad_id)`` (NumPy) is a mean over the real
    target tokens: log |V| when all logits are equal, the same when the sentences are padded to a longer batch
    with any logits at the padding (padding invariance, for a loss), and the mean of the sentences' own losses
    weighted by their real tokens (not a mean over sentences).

    Raises:
        AssertionError: a loss that is not finite, not log |V| for equal logits, moved by the padding, or one that
            weighs sentences instead of tokens.
    """
    rng = np.random.default_rng(seed)
    targets = (pad_id + rng.integers(1, vocab_size, size=(3, 5))) % vocab_size  # (3, 5): never pad_id
    targets[1, 3:], targets[2, 1:] = pad_id, pad_id  # sentences of 5, 3 and 1 tokens
    logits = rng.normal(size=(3, 5, vocab_size))
    longer = (np.concatenate([logits, 5 * rng.normal(size=(3, 4, vocab_size))], axis=1),
              np.concatenate([targets, np.full((3, 4), pad_id)], axis=1))
    uniform, before, after = (float(as_float_array(loss_fn(z, t, pad_id), "answer", what)) for z, t in
                              ((np.zeros_like(logits), targets), (logits, targets), longer))
    check_finite(np.array([uniform, before, after]), what)
    if abs(after - before) > 1e-9 * max(1.0, abs(before)):
        raise AssertionError(f"{what}: the same sentences padded with 4 more positions each give the loss "
                             f"{after:.4f} instead of {before:.4f}: the padded positions still count")
    if abs(uniform - math.log(vocab_size)) > 1e-9:
        raise AssertionError(f"{what}: with every logit equal each real token costs log |V| = {math.log(vocab_size):.4f}"
                             f", but the loss is {uniform:.4f}: not a mean over the real tokens")
    lengths = (targets != pad_id).sum(axis=1)  # (3,): 5, 3 and 1 real tokens
    alone = [float(as_float_array(loss_fn(logits[b:b + 1], targets[b:b + 1], pad_id), "answer", what))
             for b in range(len(targets))]  # each sentence's loss on its own
    if abs(before - float(np.dot(lengths, alone) / lengths.sum())) > 1e-9 * max(1.0, abs(before)):
        raise AssertionError(f"{what}: the loss of a batch of sentences of {', '.join(map(str, lengths))} real tokens "
                             "is not the mean over all its real tokens: each token should weigh the same, so a sentence "
                             "of 5 tokens weighs five times one of 1")
    return f"correct: {what} is a mean over the real tokens, whatever the padding"


def check_finite(x, what: str = "the loss") -> str:
    """Assert that ``x`` (number, array or tensor) holds no NaN or infinity.

    Raises:
        AssertionError: how many entries are infinite or NaN (a log of 0, 0·∞, a softmax over a row whose every
            entry is masked, an overflow?).
    """
    a = as_float_array(x, "answer", what)
    if not np.isfinite(a).all():
        raise AssertionError(f"{what} is not finite ({int(np.isinf(a).sum())} infinite, {int(np.isnan(a).sum())} "
                             "NaN entries): a log of 0, 0 times infinity, a softmax over a row whose every score is masked "
                             "(-inf), or an overflow?")
    return f"correct: {what} is finite"


def check_eps_inside_root(norm_fn, d_model: int = 8, eps: float = 1e-5, scale: float = 1e-3,
                          what: str = "your layer normalisation", seed: int = 0) -> str:
    """Assert that ``norm_fn(x)`` (gain 1, bias 0) is the layer normalisation (x - mean) / sqrt(var + eps) of
    features of order ``scale`` (1e-3: a variance near 1e-6, below ``eps``), ``x`` of shape ``(2, 3, d_model)``.
    At that size eps's place decides the output: eps outside the root, (x - mean) / (sqrt(var) + eps), or eps left
    out, gives about three times the right output. The expected values are never printed.

    Raises:
        ValueError: ``eps`` or ``scale`` not positive.
        AssertionError: another output (eps outside the square root or left out is named).
    """
    if eps <= 0 or scale <= 0:
        raise ValueError(f"eps and scale should be positive, got eps={eps}, scale={scale}")
    from tmlib import ref

    x = np.random.default_rng(seed).normal(size=(2, 3, d_model)) * scale          # (2, 3, d_model)
    got = as_float_array(norm_fn(x), "answer", what)
    label = f"{what} of features of order {scale:g} (variance below eps = {eps:g})"
    centred, var = x - x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    close = lambda ref_value: got.shape == x.shape and np.allclose(got, ref_value, rtol=1e-6, atol=0.0)
    if close(ref.layer_norm(x, eps=eps)):
        return f"correct: {label} is (x - mean) / sqrt(var + eps)"
    if close(centred / (np.sqrt(var) + eps)):
        raise AssertionError(f"{label}: your output is (x - mean) / (sqrt(var) + eps), eps outside the square root; "
                             "the formula puts it inside, sqrt(var + eps)")
    if close(centred / np.sqrt(var)):
        raise AssertionError(f"{label}: your output is (x - mean) / sqrt(var), without eps; the formula adds eps "
                             "inside the square root, sqrt(var + eps)")
    raise AssertionError(f"{label}: your output is not (x - mean) / sqrt(var + eps): is eps where the formula puts "
                         "it, inside the square root?")


def check_repeatable(fn, seeds=(1, 2), what: str = "your evaluation", atol: float = 1e-9) -> str:
    """Assert that ``fn(seed)`` gives the same output for every seed in ``seeds`` (the global random state set to
    it before the call): an evaluation that depends on the random state still samples something.

    Raises:
        AssertionError: the largest difference between two seeds' outputs.
    """
    outs = [as_float_array(fn(s), "answer", what) for s in seeds]
    for s, o in zip(seeds[1:], outs[1:]):
        if o.shape != outs[0].shape or not np.all(np.abs(o - outs[0]) <= atol):
            gap = np.nanmax(np.abs(o - outs[0])) if o.shape == outs[0].shape else float("nan")
            raise AssertionError(f"{what} changes with the random state (seeds {seeds[0]} and {s} differ by up to "
                                 f"{gap:.3g}): something random is still switched on")
    return f"correct: {what} does not depend on the random state (seeds {', '.join(map(str, seeds))})"


def check_first_loss(loss: float, vocab_size: int, below: float = 0.1, above: float = 0.3,
                     what: str = "the first loss") -> str:
    """Assert that a freshly initialised model's loss is about log |V| (nats), the loss of a uniform prediction over
    ``vocab_size`` tokens: at most ``below`` under it and at most ``above`` over it.

    The band is lopsided on purpose. A prediction made without the answer costs at least the entropy of the answers
    (Gibbs' inequality; log |A| for answers equally likely among |A| tokens), and a fresh model, which does not know
    which tokens can be answers, predicts nearly uniformly over the vocabulary: log |V| whatever the answers. So a
    first loss well below log |V| means the model can see the answer. A fresh model that is not exactly uniform
    (with tied embeddings it favours its input token) starts somewhat above it.

    Raises:
        AssertionError: too high (confident and wrong: logits too large) or too low (it knows the answer before
            learning: a leak).
    """
    expected = math.log(vocab_size)
    if not math.isfinite(loss):
        raise AssertionError(f"{what} is {loss}: a log of 0 or an overflow")
    if loss > (1 + above) * expected:
        raise AssertionError(f"{what} {loss:.3f} is far above log |V| = {expected:.3f}: the fresh model is confident "
                             "and wrong (logits too large: an initialisation, scale or temperature bug?)")
    if loss < (1 - below) * expected:
        raise AssertionError(f"{what} {loss:.3f} is {1 - loss / expected:.0%} below log |V| = {expected:.3f}, "
                             f"more than the {below:.0%} allowed: the model knows the answers before it has learnt "
                             "anything (does the input contain the target?)")
    side = "above" if loss >= expected else "below"
    return (f"correct: {what} {loss:.3f} is {abs(loss / expected - 1):.0%} {side} log |V| = {expected:.3f} "
            f"(allowed: {below:.0%} below to {above:.0%} above)")


def overfit_batch(model, src, tgt_in, tgt_out, steps: int = 100, lr: float = 3e-3, pad_id: int | None = 0,
                  accuracy: bool = False) -> np.ndarray:
    """Train ``model`` on one batch (``src`` ``(batch, n_src)``, ``tgt_in`` and ``tgt_out`` ``(batch, n_tgt)``)
    for ``steps`` Adam steps without label smoothing; returns the loss before each step ``(steps,)``, or with
    ``accuracy`` also the teacher-forced token accuracy before each step, ``(steps, 2)``. A correct model drives
    the loss towards 0."""
    import torch

    from tmlib.training.recipe import translation_loss

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    out = []
    for _ in range(steps):
        logits = model(src, tgt_in)  # (batch, n_tgt, vocab)
        loss = translation_loss(logits, tgt_out, pad_id=pad_id, label_smoothing=0.0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        real = tgt_out != pad_id if pad_id is not None else torch.ones_like(tgt_out, dtype=torch.bool)
        acc = ((logits.argmax(-1) == tgt_out) & real).sum().item() / real.sum().item()
        out.append((loss.item(), acc) if accuracy else loss.item())
    model.eval()
    return np.array(out)
