"""Checks for chapter 12's exercises (efficiency): counts that say which way an answer is off, never the answer.

* :func:`check_skipped_pairs`: the block pairs a causal, tiled attention skips (Exercise 12.2);
* :func:`check_tiled_reads`: that the same attention reads its keys and values one block at a time (Exercise 12.2);
* :func:`check_against_measured`: a count by hand against a measured or counted value (Exercises 12.1 and 12.4):
  too small or too large when they differ, never by what factor;
* :func:`check_training_flops`: Exercise 12.4's count against PyTorch's, naming a forward pass alone, a
  masked self-attention counted for half its scores and a count divided by every token of the pair;
* the whole check of an exercise, what its check cell calls: :func:`check_kv_cache_function` (Exercise 12.1),
  :func:`check_causal_online_attention` (12.2), :func:`check_flops_per_token` (12.4), :func:`check_crossovers` (12.5);
  and the exercise's numbers, in a call of their own: :func:`check_big_model_cache` (12.1),
  :func:`check_big_model_flops` (12.4).
"""
from __future__ import annotations

import math

import numpy as np

from tmlib.course.checks import check_close, require_answered
from tmlib.course.diagnostics import grader_references

__all__ = ["check_skipped_pairs", "check_tiled_reads", "check_against_measured", "check_training_flops",
           "check_kv_cache_function", "check_causal_online_attention", "check_flops_per_token", "check_crossovers",
           "check_big_model_cache", "check_big_model_flops"]


def check_skipped_pairs(answer, n: int, block_size: int, what: str = "the block pairs skipped") -> str:
    """Check the number of (query block, key block) pairs that causal attention over ``n`` positions, cut into
    blocks of ``block_size``, skips. A failure says too few or too many, never the expected count.

    Raises:
        TypeError: the answer is still ``...`` or None.
        AssertionError: the answer is not a whole number, or not the count.
    """
    require_answered(answer, what)
    try:
        whole = float(answer).is_integer() and answer >= 0
    except (TypeError, ValueError):
        whole = False
    if not whole:
        raise AssertionError(f"{what}: count the skipped block pairs as a whole number, got {answer!r}")
    blocks = -(-n // block_size)
    expected = blocks * (blocks - 1) // 2
    if answer != expected:
        raise AssertionError(
            f"{what} (n = {n}, blocks of {block_size}): too {'few' if answer < expected else 'many'};\n  skip a "
            "pair exactly when every key of the key block lies in the future of every query of the query block")
    return f"correct: {what} (n = {n}, blocks of {block_size})"


class _RowReads(np.ndarray):
    """An array that logs how many rows each read of its rows returns (``a[i:j]``, ``a[rows]``); what a read
    returns, and every array computed from it, is a plain ``np.ndarray``."""

    def __new__(cls, array, log: list):
        obj = np.array(array, dtype=float).view(cls)
        obj._log = log
        return obj

    def __array_finalize__(self, obj):
        self._log = None  # a view or a result of this array (a.T, a @ b) logs nothing

    def __getitem__(self, key):
        out = np.ndarray.__getitem__(self.view(np.ndarray), key)
        if self._log is not None:
            first = key[0] if isinstance(key, tuple) and key else key
            self._log.append(np.arange(self.shape[0])[first].size if first is not Ellipsis else self.shape[0])
        return out


def check_tiled_reads(fn, what: str = "causal_online_attention", *, n: int = 23, block_size: int = 4,
                      seed: int = 17) -> str:
    """Call ``fn(q, k, v, block_size)`` (``(n, d)`` arrays) with keys and values that log the rows each read of them
    returns, and check that it reads both one key block at a time (``k[k0:k0 + block_size]``): at most
    ``block_size`` rows a read. A version that takes the whole score matrix (``q @ k.T``) or a whole prefix of
    keys per query (``k[:i + 1]``) is named, and so is one that reads more blocks than there are pairs of blocks on
    or below the diagonal (it computes pairs it counts as skipped); never a value of the output. The autograder's
    stand-in for a student's function (it replays results computed in a sandbox, from plain arrays) cannot show its
    reads: for it the check says so and passes, and the notebook's own run of the check is the one that sees them."""
    if grader_references(fn) is not None:  # the autograder's stand-in: no reads to see
        return f"{what}: its reads are checked when the notebook runs this check, not by the autograder"
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(n, 4)) for _ in range(3))
    reads = {"k": [], "v": []}
    fn(q, _RowReads(k, reads["k"]), _RowReads(v, reads["v"]), block_size)
    blocks = -(-n // block_size)
    pairs = blocks * (blocks + 1) // 2  # the pairs of blocks on or below the diagonal
    kinds = {"k": "keys", "v": "values"}
    for name, log in reads.items():
        if not log:
            raise AssertionError(f"{what} never reads rows of `{name}`: a tiled version reads the {kinds[name]} one "
                                 f"block at a time, {name}[k0:k0 + block_size], for each pair of blocks it does not "
                                 f"skip (the whole of `{name}` at once, or a copy made with np.asarray, is not a block)")
    for name, log in reads.items():
        if max(log) > block_size:
            raise AssertionError(f"{what} reads {max(log)} rows of `{name}` at once (n = {n}, block_size = "
                                 f"{block_size}): a tiled version reads at most one block of {kinds[name]} at a time")
    for name, log in reads.items():
        if len(log) > pairs:
            raise AssertionError(f"{what} reads {len(log)} blocks of `{name}` for {blocks} blocks of queries (n = "
                                 f"{n}, block_size = {block_size}), but only {pairs} pairs of blocks lie on or below "
                                 f"the diagonal: does it compute the pairs it counts as skipped?")
    return f"correct: {what} reads its keys and values one block at a time (n = {n}, blocks of {block_size})"


def check_against_measured(answer, measured, what: str, *, rtol: float = 0.0, atol: float = 0.0,
                           measured_as: str = "measured",
                           hint="which term is missing or counted twice?", slips=()) -> str:
    """Check a count by hand against a value measured on a model (bytes held, FLOPs counted by PyTorch).

    A failure says whether the answer is too small or too large, never by what factor (a ratio of 0.5 or 2 would
    name the missing or doubled term); ``hint`` ends the message: one string for both sides, or a mapping with
    the keys ``"too small"`` and ``"too large"``, so that a hint that fits one kind of mistake is shown only for it.
    ``slips``: ``(value, hint)`` pairs, the counts that typical mistakes give (computed by the caller, never
    printed); an answer equal to one of them (to the same tolerance) gets that slip's hint instead of ``hint``.

    Raises:
        TypeError: the answer is still ``...`` or None.
        AssertionError: the answer differs from the measured value beyond the tolerance.
    """
    require_answered(answer, what)
    try:
        return check_close(answer, measured, what, atol=atol, rtol=rtol)
    except AssertionError:
        side = "too large" if float(answer) > float(measured) else "too small"
        told = hint.get(side, "") if isinstance(hint, dict) else hint
        told = next((h for value, h in slips if value != measured and np.isclose(
            float(answer), float(value), rtol=max(rtol, 1e-12), atol=atol)), told)
        raise AssertionError(f"{what}: yours is {side}, compared with the value {measured_as}"
                             + (f";\n  {told}" if told else "")) from None


def check_training_flops(answer, forward_flops, *, d_model: int, n_layers: int, tgt_len: int,
                         src_len: int | None = None, what: str = "FLOPs per target token") -> str:
    """Exercise 12.4: the training FLOPs per target token by hand against PyTorch's count of one forward pass
    (``forward_flops``, of an encoder-decoder with ``n_layers`` layers per stack and explicit attention, on one
    pair with ``tgt_len`` target tokens): the answer must be ``3 * forward_flops / tgt_len`` (relative tolerance
    1e-12). A failure says too small or too large and names two slips by the count they give: one forward pass
    without the backward pass, and the decoder's masked self-attention counted for half its scores (the products
    q·k, or q·k and the weights times the values), as if the causal mask removed products; given ``src_len``, also
    a third: the count divided by all ``src_len + tgt_len`` tokens of the pair; never the value."""
    measured = 3 * float(forward_flops) / tgt_len
    d, layers, t = float(d_model), float(n_layers), float(tgt_len)
    masked = ("the causal mask removes no products: the decoder's masked self-attention computes the whole "
              "T x T matrix of scores and masks it afterwards, so count every score, and every product of the "
              "weights with the values")
    slips = [(measured / 3, "a training step is the forward pass plus the backward pass: count both"),
             (measured - 3 * layers * 2 * t * t * d / t, masked),   # both T x T products counted for half
             (measured - 3 * layers * t * t * d / t, masked)]       # the scores q·k alone counted for half
    if src_len:  # the same count divided by every token of the pair
        slips.append((measured * t / (t + src_len), "divided by the wrong number of tokens: the count is per "
                                                    "target token, so divide by tgt_len"))
    return check_against_measured(answer, measured, what, rtol=1e-12,
                                  measured_as="PyTorch counts (3 x one forward pass)",
                                  hint={"too small": "which term is missing?",
                                        "too large": "which term is counted twice, or over too many tokens?"},
                                  slips=slips)


_BIG_CACHE = {  # n_tokens, src_len, batch of Exercise 12.1's two numbers, and what each is, in the exercise's words
    "bytes_per_token": ((1, 0, 1), "what one generated token adds to the cache of one sentence"),
    "bytes_batch": ((1024, 1024, 32), "the cache of a batch of 32 sentences of 1,024 generated tokens with 1,024 "
                                      "source tokens each")}


def check_kv_cache_function(fn, *, seed: int = 31) -> str:
    """Exercise 12.1: ``fn(n_layers, d_model, n_tokens, src_len, batch, bytes_per_element)`` against the bytes of
    the keys and values that freshly built models of random sizes hold after decoding through their cache (twice
    float32, once bfloat16), without a source and with one. A failure says too small or too large, never the value;
    a count that ignores ``bytes_per_element`` and is off by a ratio of element sizes (a fixed 4 bytes a number
    in bfloat16, say) is told to count the bytes of one number instead of looking for a missing term. Each case
    also calls ``fn`` with the other dtype's element size, to see whether the count scales with it.
    It also applies ``fn`` to the big model's two cases (what :func:`check_big_model_cache` compares with), so that
    the autograder, which replays the results of the calls made before the check reads the student's numbers, has
    them. Returns the lines of the successes, one per check."""
    import torch

    from tmlib.analysis.benchmarking import decoder_cache_bytes
    from tmlib.model import make_model

    g = torch.Generator().manual_seed(seed)
    lines = []
    for dtype in (torch.float32, torch.bfloat16, torch.float32):
        n_layers, batch = (int(x) for x in torch.randint(1, 4, (2,), generator=g))
        n_tokens, src_len = (int(x) for x in torch.randint(1, 9, (2,), generator=g))
        d_model = 16 * int(torch.randint(1, 5, (1,), generator=g))
        model = make_model("tiny", 40, d_model=d_model, n_heads=4, n_encoder_layers=1,
                           n_decoder_layers=n_layers, d_ff=32, pad_id=0).to(dtype).eval()
        src = torch.randint(4, 40, (batch, src_len), generator=g)
        token, cache = torch.ones(batch, 1, dtype=torch.long), model.new_cache()
        with torch.no_grad():
            memory = model.encode(src)
            for _ in range(n_tokens):  # decode through the cache, one token per step
                token = model.decode(token, memory, src, cache=cache)[:, -1:].argmax(-1)
        held = decoder_cache_bytes(cache)  # bytes of the keys and values: self_attn, cross_attn, total
        size = dtype.itemsize
        case = (f"{n_layers} layer{'s' * (n_layers > 1)}, d_model {d_model}, "
                f"{n_tokens} generated token{'s' * (n_tokens > 1)}, batch {batch}, {size} bytes per number")
        for n_source, measured, what, measured_as in (  # without a source: the self-attention part of the cache
                (0, held["self_attn"], f"the cache without a source (src_len 0), {case}",
                 "the self-attention keys and values hold"),
                (src_len, held["total"], f"the cache with {src_len} source tokens, {case}", "the cache holds")):
            args = (n_layers, d_model, n_tokens, n_source, batch)
            # every call before the comparison, right answer or wrong, so that the autograder has its result
            answer, other = fn(*args, size), fn(*args, 6 - size)  # 6 - size: the other dtype's size (4 or 2)
            lines.append(check_against_measured(answer, measured, what, measured_as=measured_as,
                                                slips=_element_size_slips(answer, other, size, measured)))
    for args, _ in _BIG_CACHE.values():
        fn(6, 1024, *args, 2)
    return "\n".join(lines)


_ELEMENT_SIZE_HINT = ("count the bytes of one number of the cache's dtype: it is the argument bytes_per_element, "
                      "not a fixed size")


def _element_size_slips(answer, other, size: int, measured) -> list:
    """Exercise 12.1's slip of a fixed element size: when ``fn`` does not scale with its ``bytes_per_element``
    (``answer`` for ``size`` bytes, ``other`` for ``6 - size``), the counts that a fixed size of 1, 2, 4 or 8 bytes
    gives, as :func:`check_against_measured`'s ``slips``; none when it scales (then a count off by a factor of 2
    is a missing or doubled term, and the usual hint stays)."""
    try:
        if float(answer) * (6 - size) == float(other) * size:
            return []
    except (TypeError, ValueError):  # not a number: check_against_measured says so
        return []
    return [(float(measured) * fixed / size, _ELEMENT_SIZE_HINT) for fixed in (1, 2, 4, 8) if fixed != size]


def _built_on(fn, check, numbers: str) -> None:
    """Raise when ``fn`` fails its own ``check``: the two numbers built on it cannot be "correct" then, even when
    they are ``fn`` applied to the big model. The message names the function's slip (``check``'s own message)."""
    name = getattr(fn, "__name__", "your function")
    try:
        check(fn)
    except AssertionError as slip:
        raise AssertionError(f"{numbers} are built on {name}, which is not right yet: {slip}") from None


def check_big_model_cache(fn, bytes_per_token, bytes_batch) -> str:
    """Exercise 12.1's two numbers against ``fn`` applied to the big model (6 layers, d_model 1024, bf16); a
    failure names the number and what it should count, in the exercise's words, never the arguments or the value.
    ``fn`` must first pass :func:`check_kv_cache_function` (its failure is named): numbers built on a wrong
    function are never "correct"."""
    _built_on(fn, check_kv_cache_function, "bytes_per_token and bytes_batch")
    for name, value in (("bytes_per_token", bytes_per_token), ("bytes_batch", bytes_batch)):
        require_answered(value, name)
        args, meant = _BIG_CACHE[name]
        if value != fn(6, 1024, *args, 2):
            raise AssertionError(f"{name} is not your function applied to the big model (6 layers, d_model 1024, "
                                 f"bf16) for {meant}")
    return "correct: bytes_per_token and bytes_batch are your function applied to the big model"


def _check_causal_blocks(out, q, k, v, b: int, where: str = "") -> None:
    """``out`` ``(n, d_v)`` against causal attention of ``q``, ``k``, ``v``, block of ``b`` rows by block; a failure
    names the first block that differs (NaN counts as different), never a value."""
    from tmlib import ref

    n = len(q)
    want, _ = ref.scaled_dot_product_attention(q, k, v, mask=ref.causal_mask(n))
    off = ~np.isclose(np.asarray(out, dtype=float), want, rtol=0, atol=1e-10).all(axis=1)  # rows that differ
    if off.any():
        block = int(np.argmax(off)) // b
        raise AssertionError(f"the rows of query block {block} (positions {block * b} to "
                             f"{min(block * b + b, n) - 1}) do not match causal attention{where}"
                             + ("; the blocks before it match" if block else ", already in the first block"))


def check_causal_online_attention(fn, *, seed: int = 17) -> str:
    """Exercise 12.2: ``fn(q, k, v, block_size)`` on fresh random inputs (n = 23, blocks of 4; then n = 21 with
    blocks of 4 and n = 9 with blocks of 1, whose edges catch a skip test off by one): that it returns a
    pair (output, pairs skipped), the pairs it skips, that no output changes when a later input changes, each block
    of rows against causal attention (a failure names the first block that differs, never a value), and that it
    reads its keys and values one block at a time. Returns the lines of the successes, one per check."""
    from tmlib.course.checks import check_shape
    from tmlib.course.diagnostics import check_causal

    g = np.random.default_rng(seed)
    n, b, d_k = 23, 4, 6
    w = g.normal(size=(3, d_k, d_k))  # projections: queries, keys and values of one input x
    x = g.normal(size=(n, d_k))
    got = fn(x @ w[0], x @ w[1], x @ w[2], b)
    assert isinstance(got, tuple) and len(got) == 2, "return a pair: (output, number of block pairs skipped)"
    check_shape(np.asarray(got[0]), (n, d_k), "the output (n, d_v)")
    lines = [check_skipped_pairs(got[1], n, b)]  # too few or too many

    def project_and_attend(x_in):
        return fn(x_in @ w[0], x_in @ w[1], x_in @ w[2], b)[0]

    name = getattr(fn, "__name__", "causal_online_attention")
    lines.append(check_causal(project_and_attend, x, name))
    _check_causal_blocks(got[0], x @ w[0], x @ w[1], x @ w[2], b)
    # block edges the first case lacks: a last block of one query (n = 21, blocks of 4) and blocks of one position,
    # where a key block that starts at its query block's last row must still be read
    for n_more, b_more in ((21, 4), (9, 1)):
        q_more, k_more, v_more = (g.normal(size=(n_more, d_k)) for _ in range(3))
        out, skipped = fn(q_more, k_more, v_more, b_more)
        check_skipped_pairs(skipped, n_more, b_more)
        _check_causal_blocks(out, q_more, k_more, v_more, b_more,
                             f" (n = {n_more}, blocks of {b_more}; a key block that starts at a query block's last "
                             "row must be read)")
    lines.append("correct: every block of rows matches causal attention (to 1e-10), also with n = 21 and blocks of 4, "
                 "and with blocks of 1")
    lines.append(check_tiled_reads(fn, name))  # one key block read at a time
    return "\n".join(lines)


def check_flops_per_token(fn, *, seed: int = 41) -> str:
    """Exercise 12.4: ``fn(d_model, n_layers, d_ff, vocab, src_len, tgt_len)`` against PyTorch's FLOP counter on
    freshly built models of random sizes (explicit attention: every product counted), through
    :func:`check_training_flops`. It also applies ``fn`` to the big model (what :func:`check_big_model_flops`
    compares with), for the autograder, as :func:`check_kv_cache_function` does. Returns the lines of the successes,
    one per model."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from tmlib.model import make_model

    g = torch.Generator().manual_seed(seed)
    lines = []
    for d_model in (16, 32, 64):  # three widths; the rest drawn at random
        n_layers = int(torch.randint(1, 4, (1,), generator=g))
        d_ff = 8 * int(torch.randint(2, 9, (1,), generator=g))
        vocab = int(torch.randint(20, 90, (1,), generator=g))
        src_len, tgt_len = (int(x) for x in torch.randint(2, 12, (2,), generator=g))
        model = make_model("tiny", vocab, d_model=d_model, n_heads=4, n_encoder_layers=n_layers,
                           n_decoder_layers=n_layers, d_ff=d_ff, pad_id=0, dropout=0.0).eval()
        model.keep_attention(True)
        with FlopCounterMode(display=False) as counted, torch.no_grad():
            model(torch.randint(4, vocab, (1, src_len), generator=g),
                  torch.randint(4, vocab, (1, tgt_len), generator=g))
        lines.append(check_training_flops(
            fn(d_model, n_layers, d_ff, vocab, src_len, tgt_len), counted.get_total_flops(), d_model=d_model,
            n_layers=n_layers, tgt_len=tgt_len, src_len=src_len,
            what=f"FLOPs per target token, d_model {d_model}, {n_layers} + {n_layers} layers, d_ff {d_ff}, "
                 f"vocabulary {vocab}, {src_len} + {tgt_len} tokens"))
    fn(*_BIG_FLOPS)
    return "\n".join(lines)


_BIG_FLOPS = (1024, 6, 4096, 37000, 25, 25)  # the big model, 25 + 25 tokens


def check_big_model_flops(fn, flops_big, mfu_big) -> str:
    """Exercise 12.4's two numbers: ``flops_big`` against ``fn`` for the big model (25 + 25 tokens) and ``mfu_big``
    against the definition of MFU (a percentage instead of a fraction is named). ``fn`` must first pass
    :func:`check_flops_per_token` (its failure is named): numbers built on a wrong function are never "correct".
    Returns one line per number."""
    from tmlib.analysis.flops import mfu

    _built_on(fn, check_flops_per_token, "flops_big and mfu_big")
    yours = fn(*_BIG_FLOPS)
    lines = []
    require_answered(flops_big, "flops_big")
    require_answered(mfu_big, "mfu_big")
    lines.append(check_close(flops_big, yours, "flops_big against your function for the big model, 25 + 25 tokens",
                             rtol=1e-12))
    expected = mfu(25_000 / 1.0, flops_big, 8 * 9.5e12)
    assert not np.isclose(float(mfu_big), 100 * expected, rtol=1e-6), \
        "mfu_big is a percentage: give the MFU as a fraction of the peak (0.5 for 50%)"
    assert not any(np.isclose(float(mfu_big), expected * k, rtol=1e-6) for k in (8, 1 / 8)), \
        "mfu_big is 8 times too large or too small: the peak is that of all 8 GPUs together, and so is the throughput"
    lines.append(check_close(mfu_big, expected,
                             "mfu_big: 25,000 target tokens a second at flops_big each, over 8 x 9.5 TFLOP/s",
                             rtol=1e-9))
    return "\n".join(lines)


def check_crossovers(n_a, n_b, *, d: int = 512) -> str:
    """Exercise 12.5: at ``n_a`` the two attention products of ``FL.layer_flops`` (width ``d``, d_ff = 4d) cost as
    much as the feed-forward network, at ``n_b`` as much as the four projections plus it. A failure says which
    length is not the crossover and how to find it, never the value. Returns one line per length."""
    from tmlib.analysis.flops import layer_flops

    for name, value in (("n_a", n_a), ("n_b", n_b)):
        require_answered(value, name)
        assert isinstance(value, (int, float, np.integer, np.floating)) and float(value).is_integer(), \
            f"{name} must be a whole number of positions, got {value!r}"
    lines = []
    for n, parts in ((n_a, ["feed_forward"]), (n_b, ["qkv_projections", "output_projection", "feed_forward"])):
        f = layer_flops(seq_len=int(n), d_model=d, d_ff=4 * d)
        products, rest = f["attention_scores"] + f["attention_weighted_sum"], sum(f[k] for k in parts)
        assert np.isclose(products, rest, rtol=1e-9, atol=0), (
            f"at n = {n} the two attention products do not cost as much as {' + '.join(parts)}: n is not the "
            "crossover. Write both counts of FL.layer_flops as formulas in n and d, set them equal and solve for n")
        lines.append(f"correct: at n = {int(n)} the two attention products cost as much as {' + '.join(parts)}")
    return "\n".join(lines)
