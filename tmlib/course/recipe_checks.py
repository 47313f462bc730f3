"""Checks of chapter 6's build-it exercises (the learning-rate schedule, the label-smoothed loss): the reference
values are computed inside and never printed; a failure names the likely slip, including the other
label-smoothing convention (see :mod:`tmlib.course.exercise_checks`).
"""
from __future__ import annotations

import math

import numpy as np

from tmlib import ref
from tmlib.course.checks import check_close, check_shape, require_answered
from tmlib.course.exercise_checks import _compare

__all__ = ["check_half_step", "check_descend", "check_descend_steps", "check_lrate", "check_smoothed_loss"]

_EXCLUSIVE = ("the exclusive convention gives (1 - eps on the true class, eps/(|V| - 1) on each other); "
              "this exercise uses the uniform one")


def check_half_step(half_step, *, warmup: int = 4000) -> str:
    """Exercise 6.1: ``half_step``, the first step after the peak (at step ``warmup``) at which the rate of
    equation 3 has fallen to half its peak, for any ``d_model`` (the factor cancels): exactly ``4 * warmup``. A whole
    number, exact; a wrong step is called too early (the rate still above half its peak there) or too late (already
    at half one step before), with the likely slip named (half the peak on the way up, a 1/s decay, the steps
    counted from the peak, a rounded peak), never the answer. Raises AssertionError."""
    require_answered(half_step, "half_step")
    if isinstance(half_step, bool) or not isinstance(half_step, (int, np.integer)) or half_step < 1:
        extra = (" (a float: if yours is a whole number up to rounding, store round() of it)"
                 if isinstance(half_step, (float, np.floating)) else "")
        raise AssertionError(f"half_step must be a whole step number (an int) of at least 1, got {half_step!r}{extra}")
    s, w = int(half_step), int(warmup)
    # rate / peak is s / w on the warm-up branch (s <= w) and sqrt(w / s) on the decay branch (s >= w), so past the
    # peak it is at most 1/2 exactly when s >= 4 w: integer comparisons, no rounding
    close = abs(s - 4 * w) <= 0.005 * 4 * w
    rounding = (": close, so a rounded peak or square root has moved the step; solve equation (3) with symbols, "
                "where the step comes out a whole number" if close else "")
    if s <= w:
        slip = {w // 2: ": that is where the rate passes half its peak on the way up, on the warm-up branch; the "
                        "question asks where it has fallen to half after the peak",
                w: ": that is the peak itself"}.get(s, "")
        raise AssertionError(f"too early: step {s} is not past the peak yet{slip}")
    if s < 4 * w:
        slip = {2 * w: ": doubling the step halves a rate that falls as 1/s, but the decay branch falls as 1/sqrt(s)",
                3 * w: ": is this the number of steps after the peak? Give the step counted from the start of training",
                math.floor(math.sqrt(2) * w): ": multiplying the step by sqrt(2) divides s^-0.5 only by 2^(1/4)",
                math.ceil(math.sqrt(2) * w): ": multiplying the step by sqrt(2) divides s^-0.5 only by 2^(1/4)",
                }.get(s, rounding)
        raise AssertionError(f"too early: at step {s} the rate is still above half its peak{slip}")
    if s > 4 * w:
        raise AssertionError(f"too late: the rate has already fallen to half its peak before step {s}{rounding}")
    return "correct: half_step is the first step at which the rate has fallen to half its peak (exact)"


def _smoothed_target(vocab_size: int, eps_ls: float) -> np.ndarray:
    return ref.label_smoothing_targets([0], vocab_size, eps_ls, "uniform")[0]     # (vocab_size,)


def check_descend_steps(descend, *, vocab_size: int = 10, eps_ls: float = 0.1) -> None:
    """Exercise 6.2, the steps: ``descend(lr, steps)`` (the logits ``(vocab_size,)`` after ``steps`` gradient steps
    of size ``lr`` on the cross-entropy against the uniform smoothed target, class 0 the true one, from zeros) must
    start from zeros and step against a central-difference gradient of that loss, which must fall. Names a one-hot
    target, the exclusive smoothed target, an ascent, a step that is not a gradient step. Raises AssertionError (the slip named), TypeError for an
    unanswered ``...`` and ValueError for a wrong shape; returns None."""
    t = _smoothed_target(vocab_size, eps_ls)

    def loss(z):
        return float(ref.cross_entropy(np.asarray(z, dtype=float), t))

    def gradient(z, h=1e-6):  # the gradient of the loss by central differences, one logit at a time
        return np.array([(loss(z + h * e) - loss(z - h * e)) / (2 * h) for e in np.eye(vocab_size)])

    start = descend(0.5, 0)
    require_answered(start, "descend(0.5, 0)")
    start = np.asarray(start, dtype=float)
    check_shape(start, (vocab_size,), "descend(0.5, 0)")
    assert np.abs(start).max() == 0, \
        f"descend(lr, 0) must return the starting point: {vocab_size} logits equal to zero"
    for lr in (0.5, 2.0):
        step = np.asarray(descend(lr, 1), dtype=float)
        assert np.abs(step + lr * (np.full(vocab_size, 1 / vocab_size) - np.eye(vocab_size)[0])).max() > 1e-6, \
            f"descend({lr}, 1) steps on the loss against the one-hot target; the loss is against the smoothed target t"
        exclusive = np.full(vocab_size, eps_ls / (vocab_size - 1))
        exclusive[0] = 1 - eps_ls
        assert np.abs(step + lr * (np.full(vocab_size, 1 / vocab_size) - exclusive)).max() > 1e-6, \
            f"descend({lr}, 1) steps on the loss against the exclusive smoothed target: {_EXCLUSIVE}"
        assert np.abs(step - lr * gradient(start)).max() > 1e-6, \
            f"descend({lr}, 1) climbs: it adds the gradient; a descent step subtracts lr times the gradient"
        assert np.abs(step + lr * gradient(start)).max() < 1e-6, \
            f"descend({lr}, 1): one step from zeros does not move the logits by -{lr} times the gradient of the loss"
    one = np.asarray(descend(0.5, 1), dtype=float)
    assert np.abs(np.asarray(descend(0.5, 2), dtype=float) - (one - 0.5 * gradient(one))).max() < 1e-6, \
        "descend(0.5, 2): the second step is not a gradient step from where the first one ended"
    losses = [loss(descend(1.0, k)) for k in (0, 1, 2, 5, 10, 50)]
    assert all(b < a for a, b in zip(losses, losses[1:])), "the smoothed loss does not fall as descend takes more steps"


def check_descend(descend, z_opt, closed_form, *, vocab_size: int = 10, eps_ls: float = 0.1) -> str:
    """Exercise 6.2: the steps of ``descend`` (:func:`check_descend_steps`), then ``z_opt``, which must be the run
    ``descend(1.0, 5000)`` and at the minimum, and ``closed_form``, the optimal logit gap, which must give the true
    class its smoothed target probability (a gap within 5e-5, 4 decimals). Never shows the expected values.
    Raises AssertionError (the slip named), TypeError for an unanswered ``...`` and ValueError for a wrong shape.
    """
    check_descend_steps(descend, vocab_size=vocab_size, eps_ls=eps_ls)
    t = _smoothed_target(vocab_size, eps_ls)
    run = np.asarray(descend(1.0, 5000), dtype=float)  # the exercise's run, which z_opt must hold
    require_answered(z_opt, "z_opt")
    check_shape(np.asarray(z_opt), (vocab_size,), "z_opt")
    assert np.abs(np.asarray(z_opt, dtype=float) - run).max() < 1e-9, \
        "z_opt is not what your descend(1.0, 5000) returns: store the logits of that run"
    assert np.abs(ref.softmax(np.asarray(z_opt, dtype=float)) - t).max() < 1e-6, \
        "z_opt is not at the minimum of the smoothed loss: softmax(z_opt) still differs from the smoothed target"
    require_answered(closed_form, "closed_form")
    # at the optimal gap the softmax gives the true class its target probability p = t[0]; p changes by p (1 - p)
    # per unit of gap, so a gap correct to 4 decimals (within 5e-5) gives p within p (1 - p) 5e-5 (1% to spare)
    p = ref.softmax(np.r_[float(closed_form), np.zeros(vocab_size - 1)])[0]
    assert p > t[0] - t[0] * (1 - t[0]) * 5e-5 * 1.01, \
        ("closed_form is too small: with that gap the softmax gives the true class less than its smoothed "
         "target probability")
    assert p < t[0] + t[0] * (1 - t[0]) * 5e-5 * 1.01, \
        ("closed_form is too large: with that gap the softmax gives the true class more than its smoothed "
         "target probability")
    return ("correct: closed_form is the optimal gap (the softmax gives the true class its smoothed target, to 4 "
            "decimals)\ncorrect: descend descends and z_opt is at the minimum")


def check_lrate(my_lrate, *, seed: int = 606) -> str:
    """Exercise 6.4: ``my_lrate(step, d_model, warmup_steps)`` on two model widths and warm-ups drawn at random:
    positive and finite, peaking at warmup_steps, linear before, 1/sqrt(step) after, scaling as d_model^-0.5, then
    equal to the schedule at every step to a relative 1e-9 (a rate right only to float32 precision is named); each
    symptom named, never the rate itself."""
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
        if peak == steps[-1] and lr[-1] > lr[-2]:
            raise AssertionError(f"the peak is not at warmup_steps: with warmup_steps = {warmup}, your rate is still "
                                 f"rising at step {peak}, the last step checked; does your schedule use the "
                                 f"warmup_steps argument?")
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
        worst = float(np.max(np.abs(lr - expected) / expected))  # the largest relative error
        if 1e-9 < worst < 1e-6:
            raise AssertionError(f"my_lrate for d_model = {d_model}, warmup_steps = {warmup} is right only to float32 "
                                 f"precision (a relative error of {worst:.0e}, where 1e-9 is asked for): compute in "
                                 "Python floats or float64, not in float32 arrays or tensors")
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
    the exclusive convention; log-probabilities capped (the log of a clipped probability) on logits hundreds apart.
    Never the loss itself."""
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
    result = _compare(float(got), _smoothed(z, y, 0.1, pad, "uniform"), "smoothed_loss on random logits",
                      [(_EXCLUSIVE, _smoothed(z, y, 0.1, pad, "exclusive"))], rtol=1e-9)
    apart = z.copy()
    apart[0] = 0.0
    apart[0, 1:] = -300.0 * np.arange(1, v)                                  # row 0: logits hundreds apart
    apart[0, y[0]] = -300.0                                                  # its true class is not the top one
    if not math.isclose(float(smoothed_loss(apart, y, 0.1, pad)), _smoothed(apart, y, 0.1, pad, "uniform"),
                        rel_tol=1e-9):
        raise AssertionError("right on ordinary logits, wrong when a row's logits lie hundreds apart: a "
                             "log-probability is capped, as the log of a clipped (or floored) probability is; "
                             "compute the log-probabilities with a log-softmax (the log-sum-exp shift: z - max z - "
                             "log sum exp(z - max z))")
    return result
