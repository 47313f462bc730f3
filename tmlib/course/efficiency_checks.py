"""Checks for chapter 12's exercises (efficiency): counts that say which way an answer is off, never the answer.

* :func:`check_skipped_pairs`: the block pairs a causal, tiled attention skips (Exercise 12.2);
* :func:`check_against_measured`: a count by hand against a measured or counted value (Exercises 12.1 and 12.4),
  with the ratio yours / measured when they differ.
"""
from __future__ import annotations

import math

from tmlib.course.checks import check_close, require_answered

__all__ = ["check_skipped_pairs", "check_against_measured"]


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


def check_against_measured(answer, measured, what: str, *, rtol: float = 0.0, atol: float = 0.0,
                           measured_as: str = "measured",
                           hint: str = "which term is missing or counted twice?") -> str:
    """Check a count by hand against a value measured on a model (bytes held, FLOPs counted by PyTorch).

    A failure gives the ratio answer / measured (too large or too small, and by what factor), which points at the
    term that is missing or doubled without giving the formula; ``hint`` ends the message (a question, or where
    to look).

    Raises:
        TypeError: the answer is still ``...`` or None.
        AssertionError: the answer differs from the measured value beyond the tolerance.
    """
    require_answered(answer, what)
    try:
        return check_close(answer, measured, what, atol=atol, rtol=rtol)
    except AssertionError:
        ratio = float(answer) / float(measured) if float(measured) != 0 else math.inf
        side = "too large" if ratio > 1 else "too small"
        raise AssertionError(f"{what}: yours is {ratio:.3g} times the value {measured_as} ({side});\n  "
                             f"{hint}") from None
