"""Checks of chapter 6's build-it exercises (the learning-rate schedule, the label-smoothed loss): the reference
values are computed inside and never printed; a failure names the likely slip, including the other
label-smoothing convention (see :mod:`tmlib.course.exercise_checks`).
"""
from __future__ import annotations

import math

import numpy as np

from tmlib import ref
from tmlib.course.checks import check_close, require_answered
from tmlib.course.exercise_checks import _compare

__all__ = ["check_lrate", "check_smoothed_loss"]

_EXCLUSIVE = ("the exclusive convention gives (1 - eps on the true class, eps/(|V| - 1) on each other); "
              "this exercise uses the uniform one")


def check_lrate(my_lrate, *, seed: int = 606) -> str:
    """Exercise 6.4: ``my_lrate(step, d_model, warmup_steps)`` on two model widths and warm-ups drawn at random:
    positive and finite, peaking at warmup_steps, linear before, 1/sqrt(step) after, scaling as d_model^-0.5, then
    equal to the schedule at every step; each symptom named, never the rate itself."""
    rng = np.random.default_rng(seed)
    lines = []
    for d_model, warmup in [(2 ** int(rng.integers(6, 11)), int(rng.integers(20, 60))) for _ in range(2)]:
        steps = np.arange(1, 3 * warmup + 1)
        first = my_lrate(1, d_model, warmup)
        require_answered(first, f"my_lrate(1, {d_model}, {warmup})")  # `...` or a missing `return`: say so
        if np.ndim(first) != 0:
            raise AssertionError(f"my_lrate must return one number, a float; my_lrate(1, {d_model}, {warmup}) "
                                 f"returned an array of shape {np.shape(first)}")
        lr = np.array([float(my_lrate(int(s), d_model, warmup)) for s in steps])
        if not (np.isfinite(lr).all() and (lr > 0).all()):
            raise AssertionError("the learning rate must be a positive, finite number at every step")
        peak = int(steps[np.argmax(lr)])
        if peak != warmup:
            raise AssertionError(f"the peak is not at warmup_steps: with warmup_steps = {warmup}, your rate peaks at "
                                 f"step {peak}")
        q = warmup // 4
        if not math.isclose(lr[2 * q - 1] / lr[q - 1], 2.0, rel_tol=1e-9):
            raise AssertionError("the warm-up is not linear: doubling a step before the peak must double the rate")
        late = float(my_lrate(16 * warmup, d_model, warmup)) / float(my_lrate(4 * warmup, d_model, warmup))
        if not math.isclose(late, 0.5, rel_tol=1e-9):
            raise AssertionError("after the peak the rate does not fall as 1/sqrt(step)")
        wide = float(my_lrate(warmup, 4 * d_model, warmup)) / float(my_lrate(warmup, d_model, warmup))
        if not math.isclose(wide, 0.5, rel_tol=1e-9):
            raise AssertionError("the rate does not scale as d_model^-0.5: four times wider, half the rate")
        expected = ref.noam_lr(steps, d_model, warmup)
        lines.append(check_close(lr, expected, f"my_lrate for d_model = {d_model}, warmup_steps = {warmup}",
                                 rtol=1e-9, atol=0))
    return "\n".join(lines)


def _smoothed(z, y, eps, pad, convention) -> float:
    z, y = np.asarray(z, dtype=float), np.asarray(y)
    per = ref.cross_entropy(z, ref.label_smoothing_targets(y, z.shape[-1], eps, convention))
    return float(per[y != pad].mean())


def check_smoothed_loss(smoothed_loss, *, seed: int = 616) -> str:
    """Exercise 6.5: ``smoothed_loss(logits, targets, label_smoothing, pad_id)`` on random logits with two padded
    positions. Names: not one number; a mean over the classes; a mean over all n positions (padding dilutes it); a
    sum over the positions; a target row that does not sum to 1; padding not excluded; log 0 for logits far apart;
    the exclusive convention. Never the loss itself."""
    rng = np.random.default_rng(seed)
    n, v, pad = int(rng.integers(6, 10)), int(rng.integers(5, 12)), 0
    z = rng.normal(size=(n, v)) * 2.0                                       # (n, V)
    y = rng.integers(1, v, size=n)
    y[-2:] = pad                                                            # the last two positions are padding
    got = smoothed_loss(z, y, 0.1, pad)
    require_answered(got, "smoothed_loss(...)")
    if np.ndim(got) != 0:
        raise AssertionError(f"smoothed_loss must return one number (the mean over the real positions), got shape "
                             f"{np.shape(got)}")
    if not math.isfinite(float(got)):
        raise AssertionError("the loss is NaN or infinite on ordinary logits")
    flat = float(smoothed_loss(np.zeros((n, v)), y, 0.1, pad))
    if math.isclose(flat, math.log(v) / v, rel_tol=1e-9):
        raise AssertionError("the loss is |V| times too small: the cross-entropy sums over the classes, it does not "
                             "average over them")
    n_real = int((y != pad).sum())
    if math.isclose(flat, math.log(v) * n_real / n, rel_tol=1e-9):
        raise AssertionError("you average over all n positions, the padded ones included: padding must not dilute "
                             "the mean; divide by the number of real positions")
    if math.isclose(flat, math.log(v) * n_real, rel_tol=1e-9):
        raise AssertionError("the loss is a sum over the real positions, not their mean: divide by the number of "
                             "real positions")
    if not math.isclose(flat, math.log(v), rel_tol=1e-9):
        raise AssertionError("a row's target distribution does not sum to 1 (with all logits equal, the loss must be "
                             "ln |V| whatever the smoothing)")
    moved = z.copy()
    moved[-2:] += rng.normal(size=(2, v)) * 3.0                              # only the padded positions' logits
    if not math.isclose(float(smoothed_loss(moved, y, 0.1, pad)), float(got), rel_tol=1e-12, abs_tol=1e-12):
        raise AssertionError("the loss changes when the logits of padding positions change: padding is not excluded")
    far = z.copy()
    far[0, 0], far[1, 1] = -800.0, 800.0                                     # probabilities that underflow to 0
    if not math.isfinite(float(smoothed_loss(far, y, 0.1, pad))):
        raise AssertionError("log 0 in the loss: with logits far apart a probability underflows to 0 (or exp "
                             "overflows); use a log-softmax")
    return _compare(float(got), _smoothed(z, y, 0.1, pad, "uniform"), "smoothed_loss on random logits",
                    [(_EXCLUSIVE, _smoothed(z, y, 0.1, pad, "exclusive"))], rtol=1e-9)
