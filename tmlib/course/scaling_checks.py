"""Checks of the exercises of the page on scaling out (data parallelism): the tokens of a step with gradient
accumulation, the step from which a missing factor shows through clipping, the bytes of a naive and of a ring
all-reduce. The expected value is computed inside and never printed; a failure names the likely slip (see
:mod:`tmlib.course.exercise_checks`).
"""
from __future__ import annotations

import numpy as np

from tmlib.course.checks import require_answered

__all__ = ["check_accumulate", "check_first_unclipped_step", "check_all_reduce_bytes"]


def _number(answer, what: str, *, whole: bool) -> float:
    """``answer`` as a float. TypeError: still ``...`` or None; AssertionError: not a positive number (``whole``:
    not a positive whole number)."""
    require_answered(answer, what)
    if isinstance(answer, bool) or not isinstance(answer, (int, float, np.integer, np.floating)) \
            or not np.isfinite(answer) or answer <= 0 or (whole and not float(answer).is_integer()):
        raise AssertionError(f"{what} should be a positive {'whole ' if whole else ''}number, got {answer!r}")
    return float(answer)


def check_accumulate(accumulate, tokens, *, n_gpus: int, max_tokens: int, target: int,
                     what: tuple[str, str] = ("accumulate", "tokens")) -> str:
    """Check the ``--accumulate`` a whose step, ``max_tokens · a · n_gpus`` tokens, comes closest to ``target``
    without exceeding it, and the tokens per step it gives, exactly. Names a step over the target, an a that a
    larger one would beat, the GPUs or the accumulation left out of the tokens, and the target given as the
    answer; never the values."""
    a = int(_number(accumulate, what[0], whole=True))
    t = int(_number(tokens, what[1], whole=True))
    per_batch = max_tokens * n_gpus  # tokens of one accumulated batch on every GPU
    best = target // per_batch
    if best < 1:
        raise ValueError("not even one batch per GPU fits in the target")
    problems = []
    if a != best:
        if n_gpus > 1 and a * max_tokens <= target < (a + 1) * max_tokens:
            hint = "it fills the target with one GPU's batches, yet every GPU adds its own batches to the step"
        elif a * per_batch > target:
            hint = "with it a step holds more tokens than the target allows"
        else:
            hint = "a larger accumulate still stays within the target"
        problems.append(f"{what[0]} is not right yet ({hint})")
    expected = best * per_batch
    if t != expected:
        if a != best:
            hint = "count them again once accumulate is right"
        elif t == target:
            hint = "that is the target; give the tokens that the step holds"
        elif t == best * max_tokens:
            hint = "the GPUs are left out, yet each GPU trains on its own batches"
        elif t == per_batch:
            hint = "the accumulation is left out, yet each GPU trains on accumulate batches per step"
        else:
            hint = "a step holds max_tokens × accumulate × GPUs tokens"
        problems.append(f"{what[1]} is not right yet ({'too small' if t < expected else 'too large'}: {hint})")
    if problems:
        raise AssertionError("; ".join(problems))
    return f"correct: {what[0]} and {what[1]} are right (exact)"


def check_first_unclipped_step(answer, norms, *, factor: float = 0.5, max_norm: float = 1.0,
                               what: str = "first_differs") -> str:
    """Check the first step (counted from 1) at which a gradient scaled by ``factor`` is no longer clipped to
    ``max_norm``, given each step's gradient norm before clipping, ``norms``: from that step on, a run whose
    gradient misses the factor steps differently from one that has it. Names the last step that still agrees
    (or a count from 0), and the step at which the unscaled norm falls below ``max_norm``; never the value."""
    norms = np.asarray(norms, dtype=np.float64)
    below = np.flatnonzero(norms * factor <= max_norm)
    if below.size == 0:
        raise ValueError("the scaled gradient is clipped at every step: the runs never differ")
    expected = int(below[0]) + 1
    step = int(_number(answer, what, whole=True))
    if step == expected:
        return f"correct: {what} is right (exact)"
    unscaled = np.flatnonzero(norms <= max_norm)
    if step == expected - 1:
        hint = ("at that step both gradients are still clipped to the same norm: give the first step that differs "
                "(and count the steps from 1, as the table does)")
    elif unscaled.size and step == int(unscaled[0]) + 1 and step != expected:
        hint = "that is where the full gradient is no longer clipped; the run without the factor steps with the " \
               "scaled one"
    elif step > norms.size:
        hint = f"the table has {norms.size} steps"
    elif step < expected:
        hint = "at that step the gradients of both runs are still clipped to the same norm"
    else:
        hint = "an earlier step already differs"
    raise AssertionError(f"{what} is not right yet ({'too early' if step < expected else 'too late'}): {hint}")


def _near(x: float, value: float, rtol: float) -> bool:
    return abs(x - value) <= rtol * abs(value)


def check_all_reduce_bytes(to_rank0, per_process_ring, ratio, *, n_params: int, n_gpus: int,
                           bytes_per_number: int = 4, rtol: float = 1e-3,
                           what: tuple[str, str, str] = ("to_rank0", "ring", "ratio")) -> str:
    """Check, for gradients of ``n_params`` numbers on ``n_gpus`` processes, the bytes that cross rank 0's link in
    one direction in a naive all-reduce (rank 0 receives every other process's gradients), the bytes each process
    sends in a ring all-reduce, and the ratio of the two, each to a relative ``rtol`` (a value given to three
    significant figures passes). Names numbers counted instead of bytes, GB or MB given instead of bytes, both
    directions added, rank 0's own gradients counted, one phase of the ring, whole vectors sent at every step,
    and the ratio of many GPUs; a wrong ratio that follows from wrong bytes points to those bytes; never the
    values."""
    n, size = int(n_gpus), int(n_params) * int(bytes_per_number)
    expected = {"naive": (n - 1) * size, "ring": 2 * (n - 1) * size // n}
    units = [(bytes_per_number, "numbers counted, not bytes"),
             (1e9, "given in GB; give bytes"), (1e6, "given in MB; give bytes"),
             (1 / 8, "bits counted instead of bytes")]
    slips = {"naive": [(n * size, "rank 0's own gradients counted, but it receives only those of the other processes"),
                       (2 * (n - 1) * size, "both directions added; give one direction"),
                       (size, "one process's gradients, but rank 0 receives them from every other process")],
             "ring": [(2 * size, "the limit of many GPUs; with this number of GPUs the ring sends a little less"),
                      ((n - 1) * size / n, "one phase only; reduce-scatter and all-gather each send as much"),
                      (2 * (n - 1) * size, "whole gradients at every step; each step sends one chunk, 1/N_p "
                                           "of them")]}
    problems, given, wrong = [], {}, []
    for key, answer, name in (("naive", to_rank0, what[0]), ("ring", per_process_ring, what[1])):
        x, e = _number(answer, name, whole=False), expected[key]
        given[key] = x
        if _near(x, e, rtol):
            continue
        wrong.append(name)
        matches = [h for v, h in slips[key] if _near(x, v, rtol)] + [h for f, h in units if _near(x * f, e, rtol)]
        hint = "; or ".join(dict.fromkeys(matches)) or None  # with 8 GPUs two slips can give the same number
        size_word = "too small" if x < e else "too large"
        problems.append(f"{name} is not right yet ({size_word}" + (f": {hint})" if hint else ")"))
    r, e = _number(ratio, what[2], whole=False), expected["naive"] / expected["ring"]
    if not _near(r, e, rtol):
        if wrong and _near(r, given["naive"] / given["ring"], rtol):  # right from wrong bytes: blame the bytes
            those = "that" if len(wrong) == 1 else "those"
            hint = f": your ratio follows from your {' and '.join(wrong)}: fix {those} first"
        elif _near(r, 1 / e, rtol):
            hint = ": the ring's bytes divided by the naive ones; divide the naive bytes by the ring's"
        elif _near(r, n - 1, rtol) or _near(r, n, rtol):
            hint = ": the ring sends 2 (N_p - 1) / N_p of the gradients, not one copy"
        else:
            hint = ""
        problems.append(f"{what[2]} is not right yet ({'too small' if r < e else 'too large'}{hint})")
    if problems:
        raise AssertionError("; ".join(problems))
    return f"correct: {', '.join(what)} are right (to {rtol:.0e} relative)"
