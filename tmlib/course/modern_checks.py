"""Checks of chapter 13's exercises on the modern Transformer: the tokens of KV cache that fit in a memory
(:func:`check_tokens_in_memory`), the ALiBi slopes of a head count that is not a power of two
(:func:`check_alibi_slopes`) and causal grouped-query attention written by hand
(:func:`check_grouped_query_attention`); the parameters of a ReLU or SwiGLU feed-forward network are a count,
:func:`tmlib.course.count_checks.check_ffn_parameters`. Like :mod:`tmlib.course.exercise_checks`, they compute
the expected values inside, never print them, and name the likely slip; an answer that is still the stub's ``...``
gets the course's "still `...`" message.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tmlib.course.checks import as_float_array, check_close, require_answered

if TYPE_CHECKING:  # the annotations' torch.Tensor; PyTorch itself is imported only by the GQA check
    import torch

__all__ = ["check_alibi_slopes", "check_grouped_query_attention", "check_tokens_in_memory"]


def check_tokens_in_memory(answers: dict, bytes_per_token, memory_bytes: float) -> str:
    """Check, for each entry of ``answers`` (a name, such as ``"tokens_gqa"``, and the student's count), how many
    whole tokens of a KV cache of ``bytes_per_token`` bytes each (in the same order) fit in ``memory_bytes`` bytes,
    exactly. A count that is not a whole number, one token too many (the last one's cache does not fit whole), a
    gigabyte read as 2^30 bytes, bits mixed with bytes, and two counts swapped are named; never the values.

    Raises:
        TypeError: a count still ``...`` or None.
        AssertionError: a count that is wrong, each such count named with its likely slip.
    """
    names = list(answers)
    sizes = [int(b) for b in bytes_per_token]
    if len(sizes) != len(names):
        raise ValueError(f"{len(names)} answers but {len(sizes)} sizes in bytes_per_token")
    for name in names:
        require_answered(answers[name], name)
    expected = [int(memory_bytes // size) for size in sizes]
    given = [answers[n] for n in names]
    if len(names) == 2 and expected[0] != expected[1] and all(
            isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool) for a in given) \
            and [int(a) for a in given] == expected[::-1]:
        raise AssertionError(f"{names[0]} and {names[1]} are not right yet: the two counts swapped?")
    problems = []
    for name, size in zip(names, sizes):
        a = answers[name]
        if isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating)) \
                or not float(a).is_integer():
            problems.append(f"{name} should be a whole number of tokens, got {a!r}")
            continue
        a, expected = int(a), int(memory_bytes // size)
        if a == expected:
            continue
        gib = memory_bytes / 1e9 * 2 ** 30  # the same number of gigabytes, 2^30 bytes each
        hints = {math.ceil(memory_bytes / size): "one token too many: the cache of the last one does not fit whole",
                 int(gib // size): f"a gigabyte read as 2^30 bytes? Here {memory_bytes / 1e9:g} GB are "
                                   f"{memory_bytes / 1e9:g} × 10^9 bytes",
                 int(8 * memory_bytes // size): "bits and bytes mixed up?",
                 int(memory_bytes // (8 * size)): "bits and bytes mixed up?"}
        hints.pop(expected, None)
        problems.append(f"{name} is not right yet ({'too small' if a < expected else 'too large'})"
                        + (f": {hints[a]}" if a in hints else ""))
    if problems:
        raise AssertionError("; ".join(problems))
    return f"correct: {', '.join(names)} are right (exact)"


def check_alibi_slopes(answer, n_heads: int, what: str = "the slopes, in head order") -> str:
    """Check ``answer``, the ALiBi slopes of ``n_heads`` heads in head order, against
    :func:`tmlib.model.alibi_slopes` (relative tolerance 1e-9). The right numbers in another order (sorted, or the
    extra heads first) get a hint to list them in head order, and ``2^(−8h/n)`` applied directly to an ``n`` that is
    not a power of two is named as such; never the values.

    Raises:
        TypeError: still ``...`` or None.
        AssertionError: another number of slopes, the right slopes in another order, the power-of-two formula, or
            wrong slopes.
    """
    from tmlib.model import alibi_slopes

    require_answered(answer, what)
    expected = alibi_slopes(int(n_heads)).tolist()
    got = as_float_array(answer, "answer", what).reshape(-1)
    if got.size == len(expected) and not np.allclose(got, expected, rtol=1e-9, atol=0) \
            and np.allclose(np.sort(got), np.sort(expected), rtol=1e-9, atol=0):
        first = 2 ** int(np.floor(np.log2(int(n_heads))))  # the largest power of two not above n_heads
        raise AssertionError(f"{what}: the right numbers in another order? List them in head order: the "
                             f"{first}-head slopes first, then the extra ones, largest first")
    n = int(n_heads)
    if n & (n - 1) and got.size == n and np.allclose(got, [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)],
                                                      rtol=1e-9, atol=0):
        first = 2 ** int(np.floor(np.log2(n)))
        raise AssertionError(f"{what}: that is the formula for a power of two, and {n} is not one: take the "
                             f"{first}-head slopes, then the extra ones")
    return check_close(answer, expected, what, rtol=1e-9, atol=0)


def _gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: list[int], causal: bool = True,
         scale: float | None = None) -> torch.Tensor:
    """Attention of query head ``j`` with key/value head ``heads[j]``: q ``(batch, n_heads, n, d_k)``, k and v
    ``(batch, n_kv_heads, n, d_k)`` → ``(batch, n_heads, n, d_k)``, the scores times ``scale`` (default
    ``1/sqrt(d_k)``), causal or not. The reference of :func:`check_grouped_query_attention` and its slips."""
    import torch  # here, not at the top: chapter 13's other checks and tmlib.course run without PyTorch
    k, v = k[:, heads], v[:, heads]  # (batch, n_heads, n, d_k)
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)  # (batch, n_heads, n, n)
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(dim=-1) @ v


def check_grouped_query_attention(fn, what: str = "my_gqa") -> str:
    """Check ``fn(q, k, v)``, causal grouped-query attention (Ainslie et al. 2023) written by hand: q
    ``(batch, n_heads, n, d_k)``, k and v ``(batch, n_kv_heads, n, d_k)`` → ``(batch, n_heads, n, d_k)``, query head
    ``j`` attending with key/value head ``j // (n_heads // n_kv_heads)``. On fresh float64 inputs of four head
    counts (grouped, multi-query with one key/value head, multi-head with as many as query heads), against the
    formula (relative tolerance 1e-9); then against PyTorch's ``scaled_dot_product_attention(..., enable_gqa=True)``.
    Names the likely slips by their symptoms, never the values nor the remedy: the key/value heads shared in the
    order 0, 1, 0, 1 (``repeat``, a tiling) instead of 0, 0, 1, 1; no causal mask; the scores not divided by sqrt(d_k), or divided by d_k; one output
    head per key/value head; inputs changed in place; an error raised.

    Raises:
        TypeError: ``fn`` returns ``...`` or None.
        AssertionError: a wrong output, with the slip it matches where it matches one.
    """
    import torch  # here, not at the top: chapter 13's other checks and tmlib.course run without PyTorch
    g = torch.Generator().manual_seed(1313)
    cases = ((2, 4, 2, 5, 8), (1, 6, 3, 4, 4), (2, 4, 1, 3, 8), (1, 2, 2, 4, 4))  # batch, h, n_kv, n, d_k
    for batch, h, n_kv, n, d_k in cases:
        q = torch.randn(batch, h, n, d_k, generator=g, dtype=torch.float64)
        k = torch.randn(batch, n_kv, n, d_k, generator=g, dtype=torch.float64)
        v = torch.randn(batch, n_kv, n, d_k, generator=g, dtype=torch.float64)
        shapes = f"q {tuple(q.shape)}, k and v {tuple(k.shape)} ({h} query heads, {n_kv} key/value heads)"
        inputs = (q.clone(), k.clone(), v.clone())
        try:
            out = fn(*inputs)
        except Exception as err:  # noqa: BLE001 (the student's error, reported with the inputs that raised it)
            raise AssertionError(f"{what} raises on {shapes}: {type(err).__name__}: {err}") from None
        require_answered(out, what)
        if not all(torch.equal(a, b) for a, b in zip(inputs, (q, k, v))):
            raise AssertionError(f"{what} changes its inputs in place on {shapes}: compute new tensors instead")
        out = torch.as_tensor(out)
        if tuple(out.shape) != (batch, h, n, d_k):
            hint = (f": one head per key/value head ({n_kv}), but every query head ({h}) needs its output"
                    if out.ndim == 4 and out.shape[1] == n_kv else "")
            raise AssertionError(f"{what} returns shape {tuple(out.shape)} on {shapes}, expected "
                                 f"(batch, n_heads, n, d_k) = {(batch, h, n, d_k)}{hint}")
        out = out.detach().to(torch.float64)
        if not torch.isfinite(out).all():
            raise AssertionError(f"{what} is not finite on {shapes} ({int((~torch.isfinite(out)).sum())} entries)")
        group = h // n_kv
        right = [j // group for j in range(h)]
        if torch.allclose(out, _gqa(q, k, v, right), rtol=1e-9, atol=1e-12):
            continue
        slips = []
        tiled = [j % n_kv for j in range(h)]
        if tiled != right:
            slips.append((_gqa(q, k, v, tiled),
                          "query head 1 attends with key/value head 1, but heads 0 and 1 form one group and share "
                          "one key/value head: the key/value heads are shared in the order 0, 1, 0, 1"))
        slips += [(_gqa(q, k, v, right, causal=False),
                   "each position also attends to the positions after it: is the causal mask missing?"),
                  (_gqa(q, k, v, right, scale=1.0), "the scores are not divided by sqrt(d_k)"),
                  (_gqa(q, k, v, right, scale=1.0 / d_k), "the scores are divided by d_k, not by sqrt(d_k)")]
        for wrong, message in slips:
            if torch.allclose(out, wrong, rtol=1e-9, atol=1e-12):
                raise AssertionError(f"{what} is not right yet on {shapes}: {message}")
        raise AssertionError(f"{what} is not right yet on {shapes}: query head j should attend, causally, with "
                             f"key/value head j // (n_heads // n_kv_heads), scores divided by sqrt(d_k)")
    q = torch.randn(2, 8, 6, 4, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 2, 6, 4, generator=g, dtype=torch.float64) for _ in range(2))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    check_close(torch.as_tensor(fn(q, k, v)).detach(), expected,
                f"{what} against PyTorch's scaled_dot_product_attention(..., enable_gqa=True)", rtol=1e-9, atol=1e-12)
    return (f"correct: {what} matches grouped-query attention with 1, 2, 3 and as many key/value heads as query "
            "heads, and PyTorch's enable_gqa")
