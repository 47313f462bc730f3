"""The training recipe in NumPy (paper §5.3-5.4): the learning-rate schedule, label-smoothed targets and the
cross-entropy they are scored with.
"""
from __future__ import annotations

import numpy as np

from tmlib.validation import check_float, check_float_array, check_int, check_int_array

__all__ = ["noam_lr", "label_smoothing_targets", "cross_entropy"]


def noam_lr(step, d_model: int, warmup_steps: int, factor: float = 1.0):
    """lr = factor · d_model^−0.5 · min(step^−0.5, step · warmup_steps^−1.5) (§5.3, equation 3): linear warm-up, peak
    at ``warmup_steps``, then ∝ 1/√step; steps count from 1 (an int or an array).

    Raises:
        TypeError: ``d_model``/``warmup_steps`` not integers, ``factor`` not a number.
        ValueError: a step < 1, ``d_model`` or ``warmup_steps`` not positive.
    """
    d_model, warmup_steps = check_int(d_model, "d_model"), check_int(warmup_steps, "warmup_steps")
    if d_model <= 0 or warmup_steps <= 0:
        raise ValueError(f"d_model and warmup_steps must be positive, got {d_model} and {warmup_steps}")
    factor = check_float(factor, "factor")
    s = np.asarray(step, dtype=np.float64)
    if (s < 1).any():
        raise ValueError(f"steps count from 1, got {step!r}")
    lr = factor * d_model**-0.5 * np.minimum(s**-0.5, s * warmup_steps**-1.5)
    return float(lr) if lr.ndim == 0 else lr


def label_smoothing_targets(targets, vocab_size: int, label_smoothing: float = 0.1,
                            convention: str = "uniform") -> np.ndarray:
    """Smoothed target distributions ``(..., vocab_size)`` for class indices ``targets`` (§5.4), in two conventions:
    ``"uniform"``, t = (1 − ε)·onehot + ε/V (Szegedy et al. 2016, and PyTorch's ``cross_entropy(label_smoothing=ε)``);
    ``"exclusive"``, 1 − ε on the true class and ε/(V − 1) on each other (the paper's tensor2tensor code).

    Raises:
        TypeError: targets or ``vocab_size`` not integers, ε not a number.
        ValueError: ``vocab_size`` < 2, ε outside [0, 1), a target out of range, an unknown convention.
    """
    vocab_size = check_int(vocab_size, "vocab_size")
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2, got {vocab_size}")
    eps = check_float(label_smoothing, "label_smoothing")
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    if convention not in ("uniform", "exclusive"):
        raise ValueError(f"convention must be 'uniform' or 'exclusive', got {convention!r}")
    t = check_int_array(targets, "targets", "integer class indices")
    if t.size and (t.min() < 0 or t.max() >= vocab_size):
        raise ValueError(f"targets must lie in 0..{vocab_size - 1}, got values {np.unique(t).tolist()}")
    onehot = (t[..., None] == np.arange(vocab_size)).astype(np.float64)  # (..., V)
    if convention == "uniform":
        return (1.0 - eps) * onehot + eps / vocab_size
    return (1.0 - eps) * onehot + eps / (vocab_size - 1) * (1.0 - onehot)


def cross_entropy(logits, target_dist) -> np.ndarray:
    """H(t, softmax(z)) = −Σ_k t_k log softmax(z)_k per row, with a stable log-softmax: logits and target_dist
    ``(..., V)`` → ``(...)``.

    Raises:
        TypeError: non-numeric input. ValueError: shapes differ, or a target row is not a distribution (to 1e-9).
    """
    z = check_float_array(logits, "logits")
    t = check_float_array(target_dist, "target_dist")
    if z.shape != t.shape or z.ndim < 1:
        raise ValueError(f"logits {z.shape} and target_dist {t.shape} must have the same shape (..., V)")
    if (t < 0).any() or not np.allclose(t.sum(axis=-1), 1.0, atol=1e-9):
        raise ValueError("target_dist rows must be non-negative and sum to 1")
    z_max = z.max(axis=-1, keepdims=True)  # (..., 1)
    log_probs = z - z_max - np.log(np.exp(z - z_max).sum(axis=-1, keepdims=True))  # (..., V)
    return -(t * log_probs).sum(axis=-1)  # (...)
