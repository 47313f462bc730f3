"""Checks of chapter 13's exercises on the modern Transformer: the ALiBi slopes of a head count that is not a power
of two (:func:`check_alibi_slopes`). Like :mod:`tmlib.course.exercise_checks`, they compute the expected values
inside, never print them, and name the likely slip; an answer that is still the stub's ``...`` gets the course's
"still `...`" message.
"""
from __future__ import annotations

import numpy as np

from tmlib.course.checks import as_float_array, check_close, require_answered

__all__ = ["check_alibi_slopes"]


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
