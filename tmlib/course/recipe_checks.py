"""Checks of chapter 6's build-it exercises (the optimal logit gap and gradient descent to it, the learning-rate
schedule, the label-smoothed loss): the reference values are computed inside and never printed; a failure names
the likely slip, including the other label-smoothing convention (see :mod:`tmlib.course.exercise_checks`).
"""
from __future__ import annotations

import math

import numpy as np

from tmlib import ref
from tmlib.course.checks import check_close, check_shape, require_answered
from tmlib.course.exercise_checks import _compare, _compare_rounded

__all__ = ["check_descend", "check_lrate", "check_smoothed_loss"]

_EXCLUSIVE = ("the exclusive convention gives (1 - eps on the true class, eps/(|V| - 1) on each other); "
              "this exercise uses the uniform one")


def _loss(z, t) -> float:
    return float(ref.cross_entropy(np.asarray(z, dtype=float), t))


def _gradient(z, t, h: float = 1e-6) -> np.ndarray:
    """The gradient of the cross-entropy against ``t`` in the logits, by central differences."""
    return np.array([(_loss(z + h * e, t) - _loss(z - h * e, t)) / (2 * h) for e in np.eye(len(t))])


def _descend_part(descend, z_opt, t) -> None:
    v = len(t)
    start = descend(0.5, 0)
    require_answered(start, "descend(0.5, 0)")
    start = np.asarray(start, dtype=float)
    check_shape(start, (v,), "descend(0.5, 0)")
    if np.abs(start).max() != 0:
        raise AssertionError(f"descend(lr, 0) must return the starting point: {v} logits equal to zero")
    for lr in (0.5, 2.0):
        if np.abs(np.asarray(descend(lr, 1), dtype=float) + lr * _gradient(start, t)).max() >= 1e-6:
            raise AssertionError(f"descend({lr}, 1): one step from zeros does not move the logits by -{lr} times "
                                 "the gradient of the loss")
    one = np.asarray(descend(0.5, 1), dtype=float)
    if np.abs(np.asarray(descend(0.5, 2), dtype=float) - (one - 0.5 * _gradient(one, t))).max() >= 1e-6:
        raise AssertionError("descend(0.5, 2): the second step is not a gradient step from where the first one ended")
    losses = [_loss(descend(1.0, k), t) for k in (0, 1, 2, 5, 10, 50)]
    if not all(b < a for a, b in zip(losses, losses[1:])):
        raise AssertionError("the smoothed loss does not fall as descend takes more steps")
    require_answered(z_opt, "z_opt")
    check_shape(np.asarray(z_opt), (v,), "z_opt")
    if np.abs(ref.softmax(np.asarray(z_opt, dtype=float)) - t).max() >= 1e-6:
        raise AssertionError("z_opt is not at the minimum of the smoothed loss: softmax(z_opt) still differs from "
                             "the smoothed target")


def check_descend(closed_form, descend, z_opt, *, vocab_size: int = 10, label_smoothing: float = 0.1) -> str:
    """Exercise 6.2: ``closed_form`` is the optimal gap z_true - z_other under uniform smoothing (4 decimals; the
    exclusive convention's gap and the one-hot target's are named), checked first and on its own; then ``descend``
    steps against the gradient of the smoothed loss from zeros, and ``z_opt`` is at the minimum. Never the value."""
    v, eps = int(vocab_size), float(label_smoothing)
    t = ref.label_smoothing_targets([0], v, eps, "uniform")[0]
    require_answered(closed_form, "closed_form")
    variants = [(_EXCLUSIVE, math.log((1 - eps) / (eps / (v - 1)))),
                ("the ratio t_true / t_other gives without its logarithm", t[0] / t[1]),
                ("log base 10 gives (the softmax uses e: natural logarithms)", math.log10(t[0] / t[1]))]
    first = _compare_rounded(closed_form, math.log(t[0] / t[1]), "closed_form, the optimal gap", variants, decimals=4)
    try:
        _descend_part(descend, z_opt, t)
    except (AssertionError, TypeError, ValueError) as err:
        raise type(err)(f"{first}\n  but: {err}") from None
    return f"{first}\ncorrect: descend descends and z_opt is at the minimum"


def _lrate(step, d_model, warmup_steps) -> float:
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def check_lrate(my_lrate, *, seed: int = 606) -> str:
    """Exercise 6.4: ``my_lrate(step, d_model, warmup_steps)`` on two model widths and warm-ups drawn at random:
    positive and finite, peaking at warmup_steps, linear before, 1/sqrt(step) after, scaling as d_model^-0.5, then
    equal to the schedule at every step; each symptom named, never the rate itself."""
    rng = np.random.default_rng(seed)
    lines = []
    for d_model, warmup in [(2 ** int(rng.integers(6, 11)), int(rng.integers(20, 60))) for _ in range(2)]:
        steps = np.arange(1, 3 * warmup + 1)
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
        expected = [_lrate(int(s), d_model, warmup) for s in steps]
        lines.append(check_close(lr, expected, f"my_lrate for d_model = {d_model}, warmup_steps = {warmup}",
                                 rtol=1e-9, atol=0))
    return "\n".join(lines)


def _smoothed(z, y, eps, pad, convention) -> float:
    z, y = np.asarray(z, dtype=float), np.asarray(y)
    per = ref.cross_entropy(z, ref.label_smoothing_targets(y, z.shape[-1], eps, convention))
    return float(per[y != pad].mean())


def check_smoothed_loss(smoothed_loss, *, seed: int = 616) -> str:
    """Exercise 6.5: ``smoothed_loss(logits, targets, label_smoothing, pad_id)`` on random logits with two padded
    positions. Names: not one number; a mean over the classes; a mean over all n positions (padding dilutes it);
    a target row that does not sum to 1; padding not excluded; log 0 for logits far apart; the exclusive
    convention. Never the loss itself."""
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
