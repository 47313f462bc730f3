"""The tests' numerical comparisons, with the tolerance of :func:`tmlib.tolerance.tolerance`.

``assert_close(actual, expected, n=..., magnitude=...)`` passes when every entry satisfies
``|actual - expected| <= 4 · eps(dtype) · √n · magnitude`` (see ``tmlib/tolerance.py`` for the reasoning), where

* ``dtype`` is the least precise floating-point dtype of the two (a float32 result against a float64 reference
  is a float32 comparison; Python numbers and integer arrays are exact, they do not lower it);
* ``n`` is the number of roundings on the longest chain that leads to a compared value, which each test states
  (for attention over n_k keys with head size d_k: ``d_k + 2 * n_k``; for a whole model:
  :func:`tmlib.tolerance.transformer_reduction_length`);
* ``magnitude`` is the size of the values those roundings apply to, by default the largest ``|expected|``; a
  test passes a larger one where the compared values come from larger intermediates (a sine of a large
  argument, a cancellation). Where only some roundings of a chain reach the result multiplied by a factor k
  (the angle of a rotation, in radians), those count k² times in ``n`` instead: errors add in quadrature.

Comparisons that are exact by construction (same operations, same order, same shapes) use ``torch.equal`` or
``atol=0`` instead, and say so.

With ``TMLIB_TOLERANCE_LOG=file`` every comparison appends a JSON line (test, dtype, n, magnitude, tolerance,
largest difference, CPU capability): how close each test comes to its bound on each kernel path.
"""
from __future__ import annotations

import json
import os

import numpy as np

from tmlib.tolerance import eps_of, tolerance, transformer_reduction_length

__all__ = ["assert_close", "max_difference", "tolerance", "transformer_reduction_length", "least_precise",
           "attention_length", "layer_norm_length", "layer_norm_magnitude", "gradient_length", "adam_tolerance"]


def _dtype_of(x):
    """The floating-point dtype of a tensor or array, ``None`` for exact values (integers, Python numbers)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return None
    try:
        eps_of(dtype)
    except TypeError:
        return None
    return dtype


def least_precise(*values):
    """The floating-point dtype of ``values`` with the largest epsilon (float64 when none has a float dtype)."""
    dtypes = [d for d in map(_dtype_of, values) if d is not None]
    return max(dtypes, key=eps_of) if dtypes else np.float64


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor (any dtype, any device)
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def attention_length(d_k: int, n_k: int) -> int:
    """The roundings of one attention head: the score (d_k), the softmax normaliser (n_k), the weighted sum
    (n_k)."""
    return d_k + 2 * n_k


def layer_norm_length(d: int) -> int:
    """The roundings of a layer norm over d features: the mean (d), the variance (d), the square root, the
    division, the scale and shift."""
    return 2 * d + 4


def layer_norm_magnitude(x) -> float:
    """The magnitude of a layer norm's roundings in units of its output: the mean is rounded at the scale of
    ``max |x|``, and ``x - mean`` is then divided by the row's standard deviation."""
    x = _numpy(x)
    return float(np.abs(x).max() / x.std(-1).min())


def gradient_length(config, src_len: int, tgt_len: int, tokens: int) -> int:
    """The roundings behind a weight's gradient: the forward chain, the same chain backwards, and the sum over the
    batch's ``tokens`` positions."""
    return 2 * transformer_reduction_length(config, src_len, tgt_len) + tokens


def adam_tolerance(lrs, grad_tolerance: float, eps: float = 1e-9, grad=None):
    """How far weights may drift apart through Adam steps when their gradients may differ by ``grad_tolerance``.

    A step moves a weight by ``lr · m̂ / (√v̂ + ε)``; a change δ of the gradient changes that by at most
    ``lr · δ / ε`` (``lr · δ / (|g| + ε)`` on the first step, where √v̂ = |g|), and never by more than the
    whole step, 2·lr. A gradient that is rounding noise (the key projection's bias: softmax ignores a constant
    added to a row of scores, so its gradient is exactly 0 in exact arithmetic) takes a step of any size up to
    lr. ``lrs``: the learning rates of the steps; ``grad`` (a tensor): the first step's gradient, for a
    tolerance per entry.
    """
    if grad is not None:
        import torch

        return sum(lr * torch.clamp(grad_tolerance / (grad.detach().abs().double() + eps), max=2.0) for lr in lrs)
    return sum(lr * min(2.0, grad_tolerance / eps) for lr in lrs)


def max_difference(actual, expected) -> float:
    """``max |actual - expected|`` in float64 (``expected`` broadcast to ``actual``); equal infinities count 0."""
    a, e = _numpy(actual), _numpy(expected)
    e = np.broadcast_to(e, a.shape) if e.shape != a.shape and e.size == 1 else e
    if a.shape != e.shape:
        raise AssertionError(f"shapes differ: actual {a.shape}, expected {e.shape}")
    if a.size == 0:
        return 0.0
    same = a == e
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a - e))
    return float(np.nanmax(diff)) if not np.isnan(diff).any() else float("inf")


def assert_close(actual, expected, *, n: int = 1, magnitude: float | None = None, dtype=None,
                 what: str = "values") -> float:
    """Assert ``max |actual - expected| <= tolerance(dtype, n, magnitude)``; return the largest difference.

    ``dtype`` defaults to :func:`least_precise` of the two, ``magnitude`` to the largest ``|expected|``.
    """
    dtype = least_precise(actual, expected) if dtype is None else dtype
    if magnitude is None:
        e = _numpy(expected)
        magnitude = float(np.abs(e[np.isfinite(e)]).max()) if np.isfinite(e).any() else 0.0
        if magnitude == 0.0:
            raise ValueError(f"{what}: the expected values are all 0 (or not finite): give the magnitude of the "
                             "computation explicitly")
    tol = tolerance(dtype, n, magnitude)
    diff = max_difference(actual, expected)
    _log(dtype, n, magnitude, tol, diff)
    if not diff <= tol:
        raise AssertionError(f"{what}: max |actual - expected| = {diff:.3g} > tolerance {tol:.3g} "
                             f"(4 · eps({dtype}) · √{n} · {magnitude:.3g})")
    return diff


def _log(dtype, n, magnitude, tol, diff, planted: str = "") -> None:
    path = os.environ.get("TMLIB_TOLERANCE_LOG")
    if not path:
        return
    record = {"test": os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0], "dtype": str(dtype),
              "n": n, "magnitude": magnitude, "tolerance": tol, "diff": diff, "planted": planted,
              "aten": os.environ.get("ATEN_CPU_CAPABILITY", "native"),
              "onednn": os.environ.get("ONEDNN_MAX_CPU_ISA", "native")}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
