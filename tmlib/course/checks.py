"""Assertions for exercises and notebooks, with messages a student can act on and that never give the answer away.

In the spirit of d2l.ai's ``check_shape``: where a shape or a value *is* the lesson, the notebook asserts it with one
of these, and an exercise checks the student's answer with :func:`check_close`. A failing check says what is
wrong (the shape, which entries and how far off relative to the tolerance, a pattern such as a transpose or a
constant factor) and states the tolerance, but never prints the expected value. The diagnostics in
``tmlib.course.diagnostics`` (rows that sum to 1, causality, padding, sub-layers, the student's own work) follow
the same rule.
"""
from __future__ import annotations

import math

import numpy as np

from tmlib.tolerance import eps_of, tolerance
from tmlib.validation import check_float, check_int

__all__ = ["check_shape", "check_close", "tolerance_text", "as_float_array", "how_far", "require_answered",
           "still_to_do", "call_on_batch", "rounding_atol"]

_DEFAULT_ATOL = 1e-6
_MAX_LISTED = 5  # entries listed in a failure message


def check_shape(x, shape: tuple, name: str = "tensor") -> None:
    """Assert that ``x.shape == shape`` (``None`` in ``shape`` matches any size).

    Works for NumPy arrays and torch tensors.

    Raises:
        TypeError: ``x`` has no shape (``None``, or ``...`` still to be replaced by an answer).
        ValueError: the shapes differ; the message names both.
    """
    require_answered(x, name)
    if not hasattr(x, "shape"):
        raise TypeError(f"{name} must be an array or a tensor with a shape, got {type(x).__name__}")
    actual = tuple(x.shape)
    if len(actual) != len(shape) or any(s is not None and a != s for a, s in zip(actual, shape)):
        raise ValueError(f"{name} has shape {actual}, expected {tuple(shape)}")


def _unanswered(x, depth: int = 0) -> bool:
    """Whether ``x`` is, or a list/tuple in it holds, ``...`` (an exercise's placeholder)."""
    if x is Ellipsis:
        return True
    return depth < 3 and isinstance(x, (list, tuple)) and any(_unanswered(v, depth + 1) for v in x)


def still_to_do(what: str) -> str:
    """The one message for an answer that is still the stub's ``...`` (a value, or a function whose body is only
    ``...``: :func:`tmlib.course.diagnostics.check_own_work`)."""
    return f"{what}: still `...`; replace the `...` with your answer and run that cell again"


def _none_message(what: str) -> str:
    return f"{what} is None: is its code still `...`, or is a `return` missing? Finish it and run that cell again"


def require_answered(x, what: str) -> None:
    """Raise TypeError with :func:`still_to_do`'s message if ``x`` is, or holds, ``...``, or is None."""
    if _unanswered(x):
        raise TypeError(still_to_do(what))
    if x is None:
        raise TypeError(_none_message(what))


def call_on_batch(call, x: np.ndarray, what: str, hint: str):
    """``call(x)``: the student's function on a batch ``x`` of sequences, ``(batch, n, d)``. If it raises while
    ``call(x[0])``, one sequence ``(n, d)``, does not, the error is an AssertionError that says so, with its own
    message and ``hint`` (how to act on the last axis whatever the leading ones); otherwise its own error.

    Raises:
        AssertionError: the function works on one sequence and fails on a batch.
    """
    try:
        return call(x)
    except Exception as err:  # noqa: BLE001: a function written for 2-D input only fails here
        try:
            call(x[0])
        except Exception:  # noqa: BLE001: it fails on one sequence too: its own error says more
            raise err from None
        raise AssertionError(f"{what} works on one sequence {tuple(x[0].shape)} but fails on a batch "
                             f"{tuple(x.shape)} with {type(err).__name__}: {err}\n  x may have any number of "
                             f"leading axes: {hint}") from None


def as_float_array(x, role: str, what: str) -> np.ndarray:
    """A NumPy float64 copy of a scalar, list, array or (CPU/GPU, grad-tracking) torch tensor.

    Raises:
        TypeError: ``x`` is ``...``, None, or not numeric (the message names ``what`` and ``role``).
    """
    if hasattr(x, "detach"):  # torch tensor: leave the graph and the device (NumPy has no bfloat16)
        x = x.detach().cpu()
        x = x.double() if x.is_floating_point() else x
    if role == "answer":
        require_answered(x, what)
    elif x is None:
        raise TypeError(f"{what}: the {role} is None")
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{what}: the {role} must be a number, a list of numbers, an array or a tensor, "
                        f"got {type(x).__name__} ({err})") from None


def _low_precision_rtol(*values) -> float:
    """The default relative tolerance: 0 for float64 (and Python numbers), else ``tolerance(dtype)`` (4 eps) of
    the least precise floating-point dtype among ``values`` (a float32, bfloat16 or float16 array or tensor)."""
    eps = []
    for x in values:
        dtype = getattr(x, "dtype", None)
        try:
            eps.append((eps_of(dtype), dtype))
        except TypeError:  # not a floating-point dtype, or no dtype: exact or float64
            continue
    if not eps:
        return 0.0
    worst, dtype = max(eps, key=lambda e: e[0])
    return tolerance(dtype) if worst > np.finfo(np.float64).eps else 0.0


def rounding_atol(decimals: int) -> float:
    """The absolute tolerance of an answer given to ``decimals`` decimals: half a unit of the last decimal, with a
    little slack for the binary representation of decimals (the rule of :func:`check_close`'s ``decimals``)."""
    return 0.5 * 10.0 ** -decimals * (1 + 1e-9)


def tolerance_text(atol: float, rtol: float = 0.0, decimals: int | None = None) -> str:
    """The tolerance of :func:`check_close` in words, e.g. ``"|answer - expected| <= 5e-05 (4 decimals)"``."""
    if decimals is not None:
        return f"|answer - expected| <= {0.5 * 10.0 ** -decimals:g}, i.e. correct to {decimals} decimals"
    if rtol == 0:
        return "exact equality" if atol == 0 else f"|answer - expected| <= {atol:g}"
    return f"|answer - expected| <= {atol:g} + {rtol:g} * |expected|"


def how_far(ratio: float) -> str:
    """An error as a multiple of the tolerance, to the decade: how far off, without the expected value."""
    if not math.isfinite(ratio):
        return "not the exact value, and no difference is allowed here"
    if ratio < 10:
        return "just outside the tolerance (less than 10 times it)"
    decade = int(math.floor(math.log10(ratio)))
    if decade >= 3:
        return "far off (more than 1,000 times the tolerance)"
    return f"off by {10 ** decade:,} to {10 ** (decade + 1):,} times the tolerance"


def _pattern(a: np.ndarray, e: np.ndarray, close, n_wrong: int = 2, name_sign: bool = True) -> str:
    """A hint about how the answer relates to the expected value, without giving either: a transpose, a sign, a
    constant factor or offset. ``close(x)`` tells whether ``x`` would pass; ``n_wrong``: how many entries are off
    (a factor or an offset shared by every entry needs two of them, and a factor further from 1 than rounding);
    ``name_sign=False``: an answer of the opposite sign gets no hint (where the sign is the question)."""
    if a.size < 2 or not (np.isfinite(a).all() and np.isfinite(e).all()):
        return ""
    if a.ndim >= 2 and a.shape[-1] == a.shape[-2] and close(np.swapaxes(a, -1, -2)):
        return " Your answer is the expected one transposed (its last two axes swapped)."
    if close(-a):
        return " Your answer has the opposite sign of the expected one." if name_sign else ""
    if np.ptp(a) == 0 or np.ptp(e) == 0 or n_wrong < 2:  # a constant answer or expected value, or one entry off:
        return ""  # a factor or offset shared by every entry says nothing
    denominator = float(np.dot(e.ravel(), e.ravel()))
    if denominator > 0:
        factor = float(np.dot(a.ravel(), e.ravel())) / denominator
        if factor != 0 and abs(factor - 1.0) > 1e-3 and close(a / factor):
            return " Every entry is off by the same factor: a scale missing or applied twice?"
    offset = float(np.mean(a - e))
    if offset != 0 and close(a - offset):
        return " Every entry is off by the same amount: a constant added or left out?"
    return ""


def check_close(answer, expected, what: str = "your answer", atol: float | None = None, rtol: float = 0.0,
                *, decimals: int | None = None, name_sign: bool = True) -> str:
    """Check an exercise answer against the expected value and say what, if anything, is wrong.

    The test is NumPy's ``allclose`` rule, entry by entry: ``|answer - expected| <= atol + rtol * |expected|``.
    A failure names the shape, which entries are wrong and how far off they are relative to the tolerance (to the
    decade), with a hint where the answer is a transpose, a sign flip, a constant factor or offset of the expected
    value; it never prints the expected value.

    Args:
        answer: the student's value: a scalar, a (nested) list, a NumPy array or a torch tensor (any dtype or
            device; it is compared in float64 on the CPU).
        expected: the reference value, with the same shape as ``answer``.
        what: a short description used in the messages ("attention output").
        atol: absolute tolerance; default ``1e-6`` (right for an answer computed in float64 with NumPy or torch,
            or by hand to six decimals).
        rtol: relative tolerance, as in ``numpy.allclose``; default 0, except with the default ``atol`` when the
            answer or the expected value is a lower-precision array or tensor (float32, bfloat16, float16): then
            4 eps of that dtype (:func:`tmlib.tolerance.tolerance`; 4.8e-7 for float32), since float32 cannot
            hold a value of magnitude 100 closer than 3.8e-6 (``tolerance`` gives the bound of a longer
            computation: pass it as ``atol``).
        decimals: accept a hand computation given to this many decimals: ``atol = 0.5 * 10**-decimals`` (the
            answer must be the expected value correctly rounded, or closer). Give either ``atol`` or
            ``decimals``, not both.
        name_sign: ``False`` leaves out the hint for an answer of the opposite sign (an exercise that asks for
            the sign).

    Returns:
        A one-line confirmation that names the tolerance, e.g.
        ``"correct: attention output matches the expected value (|answer - expected| <= 1e-06)"``.

    Raises:
        TypeError: an argument is not numeric, ``decimals`` is not an integer, or both ``atol`` and ``decimals``
            were given.
        ValueError: the shapes differ (the message gives both shapes and a hint when a reshape or transpose
            would fix it), a tolerance is negative or not finite, or ``decimals`` is negative.
        AssertionError: values differ beyond the tolerance, or the answer contains NaN or infinity.

    Source: the course's own convention for exercises (CONTRIBUTING.md, "Assignments"); the comparison rule is
    ``numpy.allclose``'s.
    """
    if decimals is not None:
        if atol is not None:
            raise TypeError("check_close: give either atol or decimals, not both")
        decimals = check_int(decimals, "check_close: decimals", minimum=0)
        atol = rounding_atol(decimals)
    elif atol is None:
        atol = _DEFAULT_ATOL
        if rtol == 0:
            rtol = _low_precision_rtol(answer, expected)
    atol, rtol = check_float(atol, "check_close: atol"), check_float(rtol, "check_close: rtol")
    if atol < 0 or rtol < 0:
        raise ValueError(f"check_close: tolerances must be non-negative, got atol={atol}, rtol={rtol}")
    tol = tolerance_text(atol, rtol, decimals)
    exact = atol == 0 and rtol == 0
    tol_failed = "the answer must be exact" if exact else f"tolerance: {tol}"  # how a failure names it

    a = as_float_array(answer, "answer", what)
    e = as_float_array(expected, "expected value", what)
    if a.shape != e.shape:
        hint = ""
        if a.size == e.size:
            if a.ndim == 2 and e.ndim == 2 and a.shape[::-1] == e.shape:
                hint = " (the transpose has the right shape: is a `.T` missing or extra?)"
            else:
                hint = f" (same number of entries: `np.reshape(answer, {e.shape})` would fit, if the order is right)"
        raise ValueError(f"{what} has shape {a.shape}, expected shape {e.shape}{hint}")

    bad_value = ~np.isfinite(a) & np.isfinite(e)
    if bad_value.any():
        count = int(bad_value.sum())
        first = tuple(int(i) for i in np.argwhere(bad_value)[0])
        raise AssertionError(f"{what} contains NaN or infinity in {count} entr{'y' if count == 1 else 'ies'} "
                             f"(first at index {first}): a division by zero, a log of 0 or an overflow? "
                             f"({tol_failed})")

    def wrong_of(x):
        same = x == e  # catches equal infinities, whose difference is NaN
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(same, 0.0, np.abs(x - e))
            allowed = atol + (rtol * np.abs(e) if rtol else 0.0)
        return ~(same | (diff <= allowed)), diff, allowed

    wrong, diff, allowed = wrong_of(a)
    if not wrong.any():
        return f"correct: {what} matches the expected value ({tol})"
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(wrong, diff / np.broadcast_to(allowed, diff.shape), 0.0)
    hint = _pattern(a, e, lambda x: not wrong_of(x)[0].any(), int(wrong.sum()), name_sign)
    if a.ndim == 0:
        if exact:
            raise AssertionError(f"{what} is not right yet: not the exact value (the answer must be exact).{hint}")
        raise AssertionError(f"{what} is not right yet: {how_far(float(ratio))} (tolerance: {tol}).{hint}")
    n_wrong, n = int(wrong.sum()), a.size
    order = np.argsort(-np.where(wrong, np.nan_to_num(ratio, posinf=np.finfo(float).max), -1.0),
                       axis=None)[:min(n_wrong, _MAX_LISTED)]
    lines = [f"  index {tuple(int(i) for i in np.unravel_index(flat, a.shape))}: "
             f"{'not the exact value' if exact else how_far(float(ratio.flat[flat]))}" for flat in order]
    more = f"\n  ... and {n_wrong - len(order)} more" if n_wrong > len(order) else ""
    verb = "is" if n_wrong == 1 else "are"
    raise AssertionError(f"{what} is not right yet: {n_wrong} of {n} entries {verb} off (shape {a.shape}; "
                         f"{tol_failed}).{hint}\n" + "\n".join(lines) + more)
