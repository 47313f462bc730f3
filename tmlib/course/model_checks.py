"""Checks of chapter 8's exercises on the whole model: the vocabulary ranges that round to the paper's counts
(:func:`check_vocab_ranges`), the two stages of a pre-LN encoder (:func:`check_preln_stages`) and a student's
greedy decoding against :func:`tmlib.decoding.greedy_decode` (:func:`check_greedy_decode`); and chapter 7's check
that a mask blocks every position it should (:func:`check_blocked_weights`) and chapter 3's build-it of layer
normalisation (:func:`check_layer_norm`) and chapter 5's properties of a decoder layer
(:func:`check_decoder_layer_properties`). Like
:mod:`tmlib.course.exercise_checks`, they compute the expected values inside, never print them, and name the likely
slip; an answer that is still the stub's ``...`` gets the course's "still `...`" message.
"""
from __future__ import annotations

import numpy as np

from tmlib.course.checks import as_float_array, call_on_batch, check_close, check_shape, require_answered
from tmlib.course.diagnostics import _not_written, _unwritten_inside, answer_cell_source

__all__ = ["check_blocked_weights", "check_decoder_layer_properties", "check_layer_norm", "check_greedy_decode", "check_preln_stages", "check_vocab_ranges"]

PAPER_COUNTS = {"base": 65_000_000, "big": 213_000_000}  # Table 3, rounded to the nearest million


def check_blocked_weights(weights, allowed, what: str = "the attention weights") -> str:
    """Assert that ``weights`` is exactly 0 at every position that the boolean ``allowed`` (True = may attend)
    blocks; ``allowed`` must broadcast to ``weights`` (e.g. ``(batch, 1, n_q, n_k)`` against the heads' weights
    ``(batch, heads, n_q, n_k)``), with as many axes as ``weights``.

    Raises:
        ValueError: ``allowed`` is not boolean, has another number of axes or does not broadcast to the weights.
        AssertionError: a blocked position with a nonzero weight (the message names the first and how many).
    """
    w = as_float_array(weights, "answer", what)
    mask = np.asarray(allowed.detach().cpu() if hasattr(allowed, "detach") else allowed)
    if mask.dtype != np.bool_:
        raise ValueError(f"allowed must be a boolean mask (True = may attend), got dtype {mask.dtype}")
    if mask.ndim != w.ndim:  # broadcasting would align the mask's batch axis with the weights' heads axis
        raise ValueError(f"the mask has {mask.ndim} axes and {what} {w.ndim}: give it one axis per axis of the "
                         "weights (size 1 where it is shared, e.g. the heads)")
    try:
        blocked = ~np.broadcast_to(mask, w.shape)
    except ValueError:
        raise ValueError(f"the mask of shape {mask.shape} does not broadcast to {what}, of shape {w.shape}") from None
    leaks = blocked & (w != 0)
    if leaks.any():
        first = tuple(int(i) for i in np.argwhere(leaks)[0])
        raise AssertionError(f"{what}: {int(leaks.sum())} of the {int(blocked.sum())} blocked positions have a "
                             f"nonzero weight, the first at index {first}: is every blocked score set to -inf "
                             "before the softmax?")
    return f"correct: all {int(blocked.sum())} blocked positions of {what} have weight exactly 0"


def _layer_norm_variants(x, gamma, beta, eps: float) -> dict:
    """The layer normalisation of ``x`` over its last axis, right and with each typical slip."""
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    var_unbiased = x.var(axis=-1, ddof=1, keepdims=True)
    mu0, var0 = x.mean(axis=0, keepdims=True), x.var(axis=0, keepdims=True)
    return {
        None: gamma * (x - mu) / np.sqrt(var + eps) + beta,
        "is what the unbiased variance gives: divide the variance by d, not d - 1 (the biased variance, as "
        "torch.nn.LayerNorm)": gamma * (x - mu) / np.sqrt(var_unbiased + eps) + beta,
        "has eps outside the square root, (x - mu) / (sigma + eps): it belongs inside, "
        "(x - mu) / sqrt(sigma^2 + eps)": gamma * (x - mu) / (np.sqrt(var) + eps) + beta,
        "uses the unbiased standard deviation and eps outside the square root: divide the variance by d, and "
        "put eps inside the square root": gamma * (x - mu) / (np.sqrt(var_unbiased) + eps) + beta,
        "leaves eps out, (x - mu) / sigma: the difference is small but real; eps belongs inside the square root, "
        "(x - mu) / sqrt(sigma^2 + eps), and keeps a constant row finite": gamma * (x - mu) / np.sqrt(var) + beta,
        "leaves gamma and beta out: scale by gamma and add beta after normalising":
            (x - mu) / np.sqrt(var + eps),
        "normalises over the first axis: the statistics belong to each vector, over the last axis (axis=-1)":
            gamma * (x - mu0) / np.sqrt(var0 + eps) + beta,
    }


_LAST_AXIS = ("take the mean and the variance over the last axis (axis=-1, keepdims=True); axis=1 is the last axis "
              "of one sequence only")


def check_layer_norm(fn, what: str = "my_layer_norm", atol: float = 1e-12) -> str:
    """Exercise 3.2: ``fn(x, gamma, beta, eps=...)``, layer normalisation over the last axis with the biased
    variance and ``eps`` inside the square root, on a random ``(2, 3, 6)`` batch (eps = 1e-5 and 0.1) and on a
    constant row. An answer that is a typical slip (the unbiased variance, eps outside the square root, eps left
    out, no gamma and beta, the statistics over the wrong axis) is named; the expected values are never printed.
    """
    rng = np.random.default_rng(8)
    x = rng.normal(loc=2.0, scale=1.5, size=(2, 3, 6))                     # (batch, n, d_model)
    gamma, beta = np.linspace(0.5, 1.5, 6), np.linspace(-1.0, 1.0, 6)
    for eps in (1e-5, 0.1):
        label = f"{what} of a (2, 3, 6) batch with eps = {eps:g}"
        got = call_on_batch(lambda x_: fn(x_, gamma, beta, eps=eps), x, label, _LAST_AXIS)
        got = as_float_array(got, "answer", f"{what} of a (2, 3, 6) batch")
        check_shape(got, x.shape, label)
        variants = _layer_norm_variants(x, gamma, beta, eps)
        if np.allclose(got, variants[None], rtol=0.0, atol=atol):
            continue
        for slip, value in variants.items():
            if slip is not None and np.allclose(got, value, rtol=0.0, atol=1e-9):
                raise AssertionError(f"{label}: your output {slip}")
        if eps != 1e-5 and np.allclose(got, _layer_norm_variants(x, gamma, beta, 1e-5)[None], rtol=0.0, atol=1e-9):
            raise AssertionError(f"{label}: your output is the one for eps = 1e-5: use the eps argument")
        one = as_float_array(fn(x[0], gamma, beta, eps=eps), "answer", f"{what} of one (3, 6) sequence")
        if one.shape == x[0].shape and np.allclose(one, variants[None][0], rtol=0.0, atol=atol):
            raise AssertionError(f"{label}: right on one sequence (3, 6) but not on the batch; {_LAST_AXIS}")
        check_close(got, variants[None], label, atol=atol)
    const = np.full((1, 4), 7.0)  # variance 0: only eps keeps the division finite, and the row becomes beta
    got = as_float_array(fn(const, np.ones(4), np.arange(4.0), eps=1e-5), "answer", f"{what} of a constant row")
    check_close(got, np.arange(4.0)[None], f"{what} of a constant row (variance 0: the row becomes beta)", atol=atol)
    return (f"correct: {what} normalises a (2, 3, 6) batch with eps = 1e-5 and 0.1, and a constant row "
            f"(tolerance {atol:g})")


def check_decoder_layer_properties(fn, self_attn, cross_attn, ffn, what: str = "my_decoder_layer") -> str:
    """Exercise 5.5: properties of the post-LN decoder layer ``fn(y, memory, self_attn, cross_attn, ffn)`` on random
    inputs (d_model = 4), each named when it fails: the cross-attention's queries and memory not swapped (tried first
    with a memory as long as the target, where a swap raises no error), every output row normalised, the output
    depending on the memory, causality (positions counted from 1, as in the chapter), and the two attentions' weights
    not swapped nor one set used twice, and last the whole output: the checks run with a cross-attention whose
    matrices are ``cross_attn``'s with their columns reversed, so that the two sets differ even where the worked
    example gives both the same.
    """
    from tmlib import ref

    cross_attn = tuple(np.asarray(w, dtype=float)[..., ::-1].copy() for w in cross_attn)  # differs from self_attn
    rng = np.random.default_rng(505)
    y, memory = rng.normal(size=(5, 4)), rng.normal(size=(3, 4))
    moved = memory + rng.normal(size=(3, 4))
    y_sq, memory_sq = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))

    def run(y_, memory_, label):
        out = fn(y_, memory_, self_attn, cross_attn, ffn)
        if out is None:
            raise AssertionError(f"{what} returned None: end it with `return ...`")
        out = as_float_array(out, "answer", f"{what} {label}")
        check_shape(out, (y_.shape[0], y_.shape[1]), f"{what} {label} (n_tgt, d_model)")
        return out

    got_sq = run(y_sq, memory_sq, "with a memory as long as the target")
    mha, ln, ff = ref.multi_head_attention, ref.layer_norm, ref.feed_forward
    a = ln(y_sq + mha(y_sq, y_sq, y_sq, *self_attn, mask=ref.causal_mask(5))[0])
    c = ln(a + mha(memory_sq, a, a, *cross_attn)[0])                 # the swap: queries from the memory
    if np.allclose(got_sq, ln(c + ff(c, *ffn)), rtol=0.0, atol=1e-9):
        raise AssertionError(f"{what}: the cross-attention's arguments are swapped: its queries come from the "
                             "decoder (a, the self-attention sub-layer's output), its keys and values from the memory")
    swapped = ref.decoder_layer(y_sq, memory_sq, cross_attn, self_attn, ffn)
    if np.allclose(got_sq, swapped, rtol=0.0, atol=1e-9) and \
            not np.allclose(swapped, ref.decoder_layer(y_sq, memory_sq, self_attn, cross_attn, ffn), rtol=0, atol=1e-9):
        raise AssertionError(f"{what}: given two different sets of attention weights, the layer uses them the other way "
                             "round: the masked self-attention takes self_attn, the cross-attention cross_attn")
    for used, sub_layer in ((self_attn, "cross-attention"), (cross_attn, "masked self-attention")):
        if np.allclose(got_sq, ref.decoder_layer(y_sq, memory_sq, used, used, ffn), rtol=0.0, atol=1e-9):
            raise AssertionError(f"{what}: given two different sets of attention weights, both attentions use the same "
                                 f"set: the {sub_layer} takes the other sub-layer's weights")
    from_y = [ln(r + mha(y_sq, memory_sq, memory_sq, *cross_attn)[0]) for r in (a, y_sq)]  # queries from y, not a
    if any(np.allclose(got_sq, ln(c_y + ff(c_y, *ffn)), rtol=0.0, atol=1e-9) for c_y in from_y):
        raise AssertionError(f"{what}: the cross-attention's queries are the layer's input y: they must be the first "
                             "sub-layer's output a, the target after its masked self-attention")
    got = run(y, memory, "on a 5-token target and a 3-token memory")
    if not (np.allclose(got.mean(axis=-1), 0, atol=1e-9) and np.allclose(got.var(axis=-1), 1, atol=1e-3)):
        raise AssertionError(f"{what}: the output rows are not normalised: the paper's layer is post-LN, each "
                             "sub-layer ends with LayerNorm(x + sublayer(x))")
    if np.allclose(run(y, moved, "with another memory"), got, rtol=0.0, atol=1e-9):
        raise AssertionError(f"{what}: the output does not change when the memory changes: the cross-attention's "
                             "keys and values must be the memory")
    for t in range(4):  # the inputs after position t + 1 (row t) changed: rows 0 to t must stay
        later = y.copy()
        later[t + 1:] += rng.normal(size=(4 - t, 4))
        changed = np.abs(run(later, memory, "with later inputs changed")[: t + 1] - got[: t + 1]).max(axis=-1) > 1e-9
        if changed.any():
            first = int(np.argmax(changed))
            raise AssertionError(f"{what}: position {first + 1} (row {first}) changes when a later input changes: "
                                 "it sees the future; mask the self-attention with R.causal_mask(n_tgt)")
    if not np.allclose(got, ref.decoder_layer(y, memory, self_attn, cross_attn, ffn), rtol=0.0, atol=1e-9):
        slip = _decoder_residual_slip(got, y, memory, self_attn, cross_attn, ffn)
        if slip is not None:
            raise AssertionError(f"{what}: normalised, causal and reading the memory, but {slip}")
        raise AssertionError(f"{what}: normalised, causal and reading the memory, but its output differs from the "
                             "paper's layer: check each sub-layer's input, its weights and its residual, "
                             "LayerNorm(x + sublayer(x)) with x that sub-layer's own input (tolerance 1e-09)")
    return f"correct: {what} reads the memory through cross-attention, normalises every row and is causal"


def _decoder_residual_slip(got, y, memory, self_attn, cross_attn, ffn) -> str | None:
    """Which residual of the post-LN decoder layer adds the wrong stream (or none), where ``got`` is the layer with
    that one slip; None if no single residual slip gives ``got``."""
    from tmlib import ref

    mha, ln = ref.multi_head_attention, ref.layer_norm

    def layer(residuals):  # residuals: what each sub-layer adds, in order ("y", "a", "c" or "nothing")
        streams = {"y": y, "nothing": np.zeros_like(y)}
        streams["a"] = ln(streams[residuals[0]] + mha(y, y, y, *self_attn, mask=ref.causal_mask(len(y)))[0])
        streams["c"] = ln(streams[residuals[1]] + mha(streams["a"], memory, memory, *cross_attn)[0])
        return ln(streams[residuals[2]] + ref.feed_forward(streams["c"], *ffn))

    right = ("y", "a", "c")
    names = ("the masked self-attention", "the cross-attention", "the feed-forward sub-layer")
    for k, wrong in enumerate((("nothing",), ("y", "nothing"), ("a", "y", "nothing"))):
        for added in wrong:
            if np.allclose(got, layer(right[:k] + (added,) + right[k + 1:]), rtol=0.0, atol=1e-9):
                own = right[k]
                return (f"the residual of {names[k]} adds {added}: it must add that sub-layer's own input, {own} "
                        f"(LayerNorm({own} + sublayer({own})))")
    return None


def _rounded_count(preset: str, vocab: int) -> int:
    import torch

    from tmlib.model import count_parameters, make_model

    with torch.device("meta"):  # shapes only: no memory
        count = count_parameters(make_model(preset, vocab))
    return (count + 500_000) // 10**6 * 10**6


def check_vocab_ranges(vocab_range, what: str = "vocab_range") -> str:
    """Exercise 8.2: ``vocab_range = {"base": (smallest, largest), "big": (smallest, largest)}``, the shared
    vocabularies whose tied model rounds to the paper's 65M and 213M. Both ends of each range must round to the
    paper's count, and one entry beyond either end must not; the ranges are never printed.

    Raises:
        TypeError: ``vocab_range`` (or one of its ends) is still ``...``.
        AssertionError: not a dict with the two keys, or which end of which range is off.
    """
    require_answered(vocab_range, what)
    if not isinstance(vocab_range, dict) or set(vocab_range) != set(PAPER_COUNTS):
        raise AssertionError(f"{what} should be a dict with the keys {sorted(PAPER_COUNTS)}, each a pair "
                             "(smallest, largest)")
    for name, target in PAPER_COUNTS.items():
        pair = vocab_range[name]
        require_answered(pair, f"{what}[{name!r}]")
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise AssertionError(f"{what}[{name!r}] should be a pair (smallest, largest), got {pair!r}")
        try:
            low, high = (int(v) for v in pair)
        except (TypeError, ValueError):
            raise AssertionError(f"{what}[{name!r}] should hold two whole numbers of tokens") from None
        if (low, high) != tuple(pair) or low > high:
            raise AssertionError(f"{what}[{name!r}] should hold two whole numbers, the smallest first")
        rounded = {v: _rounded_count(name, v) for v in (low - 1, low, high, high + 1)}
        if rounded[low] != target:
            raise AssertionError(f"{name}: a model with your smallest vocabulary does not round to {target:,}")
        if rounded[high] != target:
            hint = (": is the upper end of the rounding included? (65,500,000 rounds up, to 66M)"
                    if low < high and _rounded_count(name, high - 1) == target else "")
            raise AssertionError(f"{name}: a model with your largest vocabulary does not round to {target:,}{hint}")
        if rounded[low - 1] == target:
            raise AssertionError(f"{name}: one entry below your smallest still rounds to {target:,}")
        if rounded[high + 1] == target:
            raise AssertionError(f"{name}: one entry above your largest still rounds to {target:,}")
    return f"correct: {what}: every vocabulary of each range, and no other, rounds to the paper's count"


def check_preln_stages(last_layer, after_norm, src, what: str = "your pre-LN encoder", *, atol: float = 1e-5,
                       namespace: dict | None = None) -> str:
    """Exercise 8.3: ``last_layer``, the output of the last encoder layer of the pre-LN ``"tiny"`` model built
    after ``seed_everything(0)`` for the source batch ``src``, and ``after_norm``, that output after
    ``encoder.norm``. The reference is computed inside; a failure names the likely slip (the padding mask not passed,
    the first layer only, the last layer on the embedded input, the final norm already applied, the positional
    encoding left out), never a value. At initialisation ``encoder.norm`` has gamma = 1 and beta = 0, so a fresh
    LayerNorm gives the same values: where the notebook's input history is there (``namespace``: the notebook's
    globals, default the caller's), the cell that assigns ``after_norm`` must use ``encoder.norm`` itself.

    Raises:
        TypeError: an answer is still ``...``.
        AssertionError: a stage differs (how, and how far, relative to ``atol``), or ``after_norm`` comes from a
            fresh LayerNorm rather than ``pre.encoder.norm``.
    """
    import sys

    import torch

    from tmlib.model import make_model
    from tmlib.utils import seed_everything

    require_answered(last_layer, "last_layer")
    require_answered(after_norm, "after_norm")
    seed_everything(0)
    pre = make_model("tiny", 13, norm_first=True).eval()
    with torch.no_grad():
        def through(x, real):
            for layer in pre.encoder.layers:
                x = layer(x, real_keys=real)
            return x

        embedded = pre.src_embed(src)
        x0, real = pre.positional(embedded), pre.real_tokens(src)
        want = through(x0, real)  # (batch, src_len, d_model)
        slips = [("only the padded sentence differs: did you pass the padding mask (real_keys) to every layer?",
                  through(x0, None)),
                 ("it is the output of the first layer only: run every layer of pre.encoder.layers, in order",
                  pre.encoder.layers[0](x0, real_keys=real)),
                 ("it is the last layer applied to the embedded input: feed each layer the previous layer's output "
                  "(x = layer(x, ...))", pre.encoder.layers[-1](x0, real_keys=real)),
                 ("it is already normalised: pre.encoder(...) applies the final norm; run the layers one by one",
                  pre.encoder.norm(want)),
                 ("the positional encoding is missing: add it to the scaled embeddings before the first layer",
                  through(embedded, pre.real_tokens(src)))]
        want_norm = pre.encoder.norm(want)

    def near(a, b):
        a = torch.as_tensor(a).detach().to(torch.float64)
        return a.shape == b.shape and bool(((a - b.to(torch.float64)).abs() <= atol).all())

    check_shape(last_layer, tuple(want.shape), "last_layer (batch, src_len, d_model)")
    check_shape(after_norm, tuple(want.shape), "after_norm (batch, src_len, d_model)")
    if not near(last_layer, want):
        hint = next((h for h, alt in slips if near(last_layer, alt)), None)
        if hint is not None:
            raise AssertionError(f"last_layer is not the last encoder layer's output yet: {hint}")
        check_close(last_layer, want, "last_layer, the last encoder layer's output", atol=atol)
    if not near(after_norm, want_norm) and near(after_norm, want):
        raise AssertionError("after_norm equals last_layer: apply pre.encoder.norm to it")
    check_close(after_norm, want_norm, "after_norm, last_layer after pre.encoder.norm", atol=atol)
    if _fresh_layer_norm(answer_cell_source("after_norm", sys._getframe(1).f_globals if namespace is None
                                            else namespace)):
        raise AssertionError("after_norm comes from a new LayerNorm, not from pre.encoder.norm: the values agree only "
                             "because a new norm's gamma and beta (1 and 0) are still those of pre.encoder.norm; after "
                             "training they differ, so apply the stack's own final norm, pre.encoder.norm")
    return f"correct: both stages of {what} match the reference (to {atol:g})"


def _fresh_layer_norm(source: str | None) -> bool:
    """Whether the cell ``source`` (None: no history to read) calls a LayerNorm of its own (``layer_norm``,
    ``LayerNorm``) and never reads an ``.norm`` attribute (such as ``pre.encoder.norm``)."""
    import ast

    if source is None:
        return False
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    names = attributes | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return bool(names & {"layer_norm", "LayerNorm"}) and "norm" not in attributes


# (model, seed of the batch, sentences, length, max_len): the trained copier, and the model after 40 steps, whose
# sentences end at different lengths
GREEDY_CASES = (("copier", 123, 3, 8, 9), ("early", 7, 4, 5, 14), ("early", 11, 6, 11, 4), ("early", 11, 6, 11, 14))


def check_greedy_decode(decode_with, models: dict, vocab_size: int = 13, *, cases=GREEDY_CASES,
                        what: str = "your greedy decoding") -> str:
    """Exercise 8.5: the given ``decode_with(which, src, max_len)`` runs the student's ``my_greedy_decode`` on
    ``models[which]``; every case ``(which, seed, sentences, length, max_len)`` (a copy-task batch) is compared
    with :func:`tmlib.decoding.greedy_decode` (BOS 1, EOS 2). The student's function is called on every case first.

    Raises:
        TypeError: ``my_greedy_decode`` is still the stub (or returns None).
        AssertionError: not a list of lists, the first sentence whose tokens differ where both have tokens, or
            sentence lengths that differ (where each sentence must stop); never the expected tokens.
    """
    import torch

    from tmlib.data import copy_task_batch
    from tmlib.decoding import greedy_decode

    batches = [copy_task_batch(n, length, vocab_size - 3, torch.Generator().manual_seed(seed))[0]
               for _, seed, n, length, _ in cases]
    got = [decode_with(which, src, max_len) for (which, _, _, _, max_len), src in zip(cases, batches)]
    stub = _unwritten_inside(decode_with, ["my_greedy_decode"])
    if stub is not None:
        raise _not_written(stub)
    for (which, _, n, length, max_len), src, answer in zip(cases, batches, got):
        where = f"{what} ({which}, {n} sentences of {length} symbols, max_len {max_len})"
        require_answered(answer, where)
        want = greedy_decode(models[which], src, bos_id=1, eos_id=2, max_len=max_len)
        if not isinstance(answer, list) or len(answer) != len(want) or not all(isinstance(s, list) for s in answer):
            raise AssertionError(f"{where}: expected a list of {len(want)} lists of token ids, one per sentence")
        for i, (mine, ref) in enumerate(zip(answer, want)):  # tokens first: a wrong token also ends a sentence early
            mine = [int(t) for t in mine]
            if mine[:1] == [1] and ref[:1] != [1]:
                continue  # BOS kept: the lengths' hint below says so
            if any(a != b for a, b in zip(mine, ref)):
                wrong = sum(a != b for a, b in zip(mine, ref))
                raise AssertionError(f"{where}: sentence {i + 1} differs from greedy decoding at {wrong} of its first "
                                     f"{min(len(mine), len(ref))} tokens: take the most probable token of the last "
                                     "position")
        lengths = [len(s) for s in answer]
        if lengths != [len(s) for s in want]:
            i = next(j for j, (mine, ref) in enumerate(zip(answer, want)) if len(mine) != len(ref))
            mine, ref = [int(t) for t in answer[i]], list(want[i])
            if mine[:1] == [1]:
                hint = f"sentence {i + 1} starts with BOS (id 1), which the decoder is given, not one it wrote"
            elif max(lengths) > max_len:
                hint = f"a sentence has {max(lengths)} tokens, more than max_len"
            elif 2 in mine:
                hint = (f"sentence {i + 1} holds EOS (id 2) or goes on after it: a sentence ends where its EOS is "
                        "written, and EOS itself is not a token of the translation")
            elif len(mine) < len(ref):
                hint = f"sentence {i + 1} stops before its own EOS: does one sentence's EOS stop the others?"
            else:
                hint = f"sentence {i + 1} is longer than greedy decoding makes it"
            raise AssertionError(f"{where}: sentence lengths {lengths} are not right: {hint}")
        for i, (mine, ref) in enumerate(zip(answer, want)):
            if [int(t) for t in mine] != list(ref):
                raise AssertionError(f"{where}: sentence {i + 1} differs from greedy decoding: take the most "
                                     "probable token of the last position")
    return f"correct: {what} matches greedy_decode on {len(cases)} batches"
