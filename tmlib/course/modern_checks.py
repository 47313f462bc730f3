"""Checks of chapter 13's exercises on the modern Transformer: the tokens of KV cache that fit in a memory
(:func:`check_tokens_in_memory`) and the ALiBi slopes of a head count that is not a power of two
(:func:`check_alibi_slopes`); the parameters of a ReLU or SwiGLU feed-forward network are a count,
:func:`tmlib.course.count_checks.check_ffn_parameters`. Like :mod:`tmlib.course.exercise_checks`, they compute
the expected values inside, never print them, and name the likely slip; an answer that is still the stub's ``...``
gets the course's "still `...`" message.
"""
from __future__ import annotations

import math

import numpy as np

from tmlib.course.checks import as_float_array, check_close, require_answered

__all__ = ["check_alibi_slopes", "check_tokens_in_memory"]


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
                             f"{first}-head slopes first, then the extra ones")
    n = int(n_heads)
    if n & (n - 1) and got.size == n and np.allclose(got, [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)],
                                                      rtol=1e-9, atol=0):
        first = 2 ** int(np.floor(np.log2(n)))
        raise AssertionError(f"{what}: that is the formula for a power of two, and {n} is not one: take the "
                             f"{first}-head slopes, then the extra ones")
    return check_close(answer, expected, what, rtol=1e-9, atol=0)
