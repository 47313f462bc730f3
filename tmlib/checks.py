"""Assertions for exercises and notebooks, with messages a student can act on.

In the spirit of d2l.ai's ``check_shape``: where a shape or a value *is* the lesson, the
notebook asserts it with one of these, and an exercise checks the student's answer with
:func:`check_close`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["check_shape", "check_close"]


def check_shape(x, shape: tuple, name: str = "tensor") -> None:
    """Assert that ``x.shape == shape`` (``None`` in ``shape`` matches any size).

    Works for NumPy arrays and torch tensors.

    Raises:
        ValueError: the shapes differ; the message names both.
    """
    actual = tuple(x.shape)
    if len(actual) != len(shape) or any(s is not None and a != s for a, s in zip(actual, shape)):
        raise ValueError(f"{name} has shape {actual}, expected {tuple(shape)}")


def check_close(answer, expected, what: str = "your answer", atol: float = 1e-6, rtol: float = 0.0) -> str:
    """Check an exercise answer against the expected value and say so.

    Args:
        answer: the student's value (scalar, list, NumPy array or torch tensor).
        expected: the reference value, same shape.
        what: a short description used in the messages.
        atol, rtol: tolerances as in ``numpy.allclose``.

    Returns:
        A one-line confirmation, e.g. ``"correct: attention weights match to 1e-06"``.

    Raises:
        ValueError: shapes differ.
        AssertionError: values differ; the message gives the largest difference and where.
    """
    a = np.asarray(answer.detach().cpu() if hasattr(answer, "detach") else answer, dtype=np.float64)
    e = np.asarray(expected.detach().cpu() if hasattr(expected, "detach") else expected, dtype=np.float64)
    if a.shape != e.shape:
        raise ValueError(f"{what} has shape {a.shape}, expected shape {e.shape}")
    if not np.allclose(a, e, atol=atol, rtol=rtol):
        diff = np.abs(a - e)
        idx = np.unravel_index(np.argmax(diff), diff.shape) if diff.ndim else ()
        raise AssertionError(
            f"{what} is not right yet: largest difference {diff.max():.4g} at index {idx} "
            f"(got {a[idx] if a.ndim else a}, expected {e[idx] if e.ndim else e})"
        )
    return f"correct: {what} matches to {atol:g}"
