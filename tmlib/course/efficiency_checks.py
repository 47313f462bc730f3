"""Checks for chapter 12's exercises (efficiency): counts that say which way an answer is off, never the answer.

* :func:`check_skipped_pairs`: the block pairs a causal, tiled attention skips (Exercise 12.2);
* :func:`check_tiled_reads`: that the same attention reads its keys and values one block at a time (Exercise 12.2);
* :func:`check_against_measured`: a count by hand against a measured or counted value (Exercises 12.1 and 12.4):
  too small or too large when they differ, never by what factor;
* :func:`check_training_flops`: Exercise 12.4's count against PyTorch's, naming a forward pass alone and a
  masked self-attention counted for half its scores.
"""
from __future__ import annotations

import math

import numpy as np

from tmlib.course.checks import check_close, require_answered
from tmlib.course.diagnostics import grader_references

__all__ = ["check_skipped_pairs", "check_tiled_reads", "check_against_measured", "check_training_flops"]


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


class _RowReads(np.ndarray):
    """An array that logs how many rows each read of its rows returns (``a[i:j]``, ``a[rows]``); what a read
    returns, and every array computed from it, is a plain ``np.ndarray``."""

    def __new__(cls, array, log: list):
        obj = np.array(array, dtype=float).view(cls)
        obj._log = log
        return obj

    def __array_finalize__(self, obj):
        self._log = None  # a view or a result of this array (a.T, a @ b) logs nothing

    def __getitem__(self, key):
        out = np.ndarray.__getitem__(self.view(np.ndarray), key)
        if self._log is not None:
            first = key[0] if isinstance(key, tuple) and key else key
            self._log.append(np.arange(self.shape[0])[first].size if first is not Ellipsis else self.shape[0])
        return out


def check_tiled_reads(fn, what: str = "causal_online_attention", *, n: int = 23, block_size: int = 4,
                      seed: int = 17) -> str:
    """Call ``fn(q, k, v, block_size)`` (``(n, d)`` arrays) with keys and values that log the rows each read of them
    returns, and check that it reads both one key block at a time (``k[k0:k0 + block_size]``): at most
    ``block_size`` rows a read. A version that takes the whole score matrix (``q @ k.T``) or a whole prefix of
    keys per query (``k[:i + 1]``) is named, and so is one that reads more blocks than there are pairs of blocks on
    or below the diagonal (it computes pairs it counts as skipped); never a value of the output. The autograder's
    stand-in for a student's function (it replays results computed in a sandbox, from plain arrays) cannot show its
    reads: for it the check says so and passes, and the notebook's own run of the check is the one that sees them."""
    if grader_references(fn) is not None:  # the autograder's stand-in: no reads to see
        return f"{what}: its reads are checked when the notebook runs this check, not by the autograder"
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(n, 4)) for _ in range(3))
    reads = {"k": [], "v": []}
    fn(q, _RowReads(k, reads["k"]), _RowReads(v, reads["v"]), block_size)
    blocks = -(-n // block_size)
    pairs = blocks * (blocks + 1) // 2  # the pairs of blocks on or below the diagonal
    kinds = {"k": "keys", "v": "values"}
    for name, log in reads.items():
        if not log:
            raise AssertionError(f"{what} never reads rows of `{name}`: a tiled version reads the {kinds[name]} one "
                                 f"block at a time, {name}[k0:k0 + block_size], for each pair of blocks it does not "
                                 f"skip (the whole of `{name}` at once, or a copy made with np.asarray, is not a block)")
    for name, log in reads.items():
        if max(log) > block_size:
            raise AssertionError(f"{what} reads {max(log)} rows of `{name}` at once (n = {n}, block_size = "
                                 f"{block_size}): a tiled version reads at most one block of {kinds[name]} at a time")
    for name, log in reads.items():
        if len(log) > pairs:
            raise AssertionError(f"{what} reads {len(log)} blocks of `{name}` for {blocks} blocks of queries (n = "
                                 f"{n}, block_size = {block_size}), but only {pairs} pairs of blocks lie on or below "
                                 f"the diagonal: does it compute the pairs it counts as skipped?")
    return f"correct: {what} reads its keys and values one block at a time (n = {n}, blocks of {block_size})"


def check_against_measured(answer, measured, what: str, *, rtol: float = 0.0, atol: float = 0.0,
                           measured_as: str = "measured",
                           hint="which term is missing or counted twice?", slips=()) -> str:
    """Check a count by hand against a value measured on a model (bytes held, FLOPs counted by PyTorch).

    A failure says whether the answer is too small or too large, never by what factor (a ratio of 0.5 or 2 would
    name the missing or doubled term); ``hint`` ends the message: one string for both sides, or a mapping with
    the keys ``"too small"`` and ``"too large"``, so that a hint that fits one kind of mistake is shown only for it.
    ``slips``: ``(value, hint)`` pairs, the counts that typical mistakes give (computed by the caller, never
    printed); an answer equal to one of them (to the same tolerance) gets that slip's hint instead of ``hint``.

    Raises:
        TypeError: the answer is still ``...`` or None.
        AssertionError: the answer differs from the measured value beyond the tolerance.
    """
    require_answered(answer, what)
    try:
        return check_close(answer, measured, what, atol=atol, rtol=rtol)
    except AssertionError:
        side = "too large" if float(answer) > float(measured) else "too small"
        told = hint.get(side, "") if isinstance(hint, dict) else hint
        told = next((h for value, h in slips if value != measured and np.isclose(
            float(answer), float(value), rtol=max(rtol, 1e-12), atol=atol)), told)
        raise AssertionError(f"{what}: yours is {side}, compared with the value {measured_as}"
                             + (f";\n  {told}" if told else "")) from None


def check_training_flops(answer, forward_flops, *, d_model: int, n_layers: int, tgt_len: int,
                         what: str = "FLOPs per target token") -> str:
    """Exercise 12.4: the training FLOPs per target token by hand against PyTorch's count of one forward pass
    (``forward_flops``, of an encoder-decoder with ``n_layers`` layers per stack and explicit attention, on one
    pair with ``tgt_len`` target tokens): the answer must be ``3 * forward_flops / tgt_len`` (relative tolerance
    1e-12). A failure says too small or too large and names two slips by the count they give: one forward pass
    without the backward pass, and the decoder's masked self-attention counted for half its scores (the products
    q·k, or q·k and the weights times the values), as if the causal mask removed products; never the value."""
    measured = 3 * float(forward_flops) / tgt_len
    d, layers, t = float(d_model), float(n_layers), float(tgt_len)
    masked = ("the causal mask removes no products: the decoder's masked self-attention computes the whole "
              "T x T matrix of scores and masks it afterwards, so count every score, and every product of the "
              "weights with the values")
    slips = [(measured / 3, "a training step is the forward pass plus the backward pass: count both"),
             (measured - 3 * layers * 2 * t * t * d / t, masked),   # both T x T products counted for half
             (measured - 3 * layers * t * t * d / t, masked)]       # the scores q·k alone counted for half
    return check_against_measured(answer, measured, what, rtol=1e-12,
                                  measured_as="PyTorch counts (3 x one forward pass)",
                                  hint={"too small": "which term is missing?",
                                        "too large": "which term is counted twice, or over too many tokens?"},
                                  slips=slips)
