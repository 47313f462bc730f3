"""Checks of exercises whose answer is a count (bytes of attention matrices and KV caches, projections a cache
saves, a model's parameters): exact, and on a failure naming the one factor that is missing or counted twice. None
prints the expected value (see :mod:`tmlib.course.exercise_checks`).
"""
from __future__ import annotations

import numpy as np

from tmlib.course.checks import require_answered
from tmlib.course.exercise_checks import _compare

__all__ = ["check_attention_bytes", "check_kv_cache_bytes", "check_cache_projections", "check_decoder_only_count",
           "check_ffn_parameters"]


def _whole_number(answer, what: str, unit: str = "") -> int:
    """``answer`` as an int. TypeError: still ``...`` or None; AssertionError: not a positive whole number (an int
    or an integral float). ``unit``: words after "whole number" in the message (" of bytes")."""
    require_answered(answer, what)
    if isinstance(answer, bool) or not isinstance(answer, (int, float, np.integer, np.floating)) \
            or not float(answer).is_integer() or answer <= 0:
        raise AssertionError(f"{what} should be a positive whole number{unit}, got {answer!r}")
    return int(answer)


def _check_byte_product(answer: int, expected: int, factors: dict, what: str, otherwise: str,
                        instead=()) -> str:
    """Compare a byte count with ``expected`` (a product of the named ``factors``) exactly; on a failure, name the
    one factor that is missing or counted twice (or bits counted for bytes), else say ``otherwise``. ``instead``:
    ``(given, other, hint)`` triples, a factor's given value and another the student may have used in its place
    (float32's 4 bytes for bfloat16's 2, say), named by ``hint`` before anything else (with bits for bytes beside
    it when that is the same factor 8). Never the value."""
    if answer == expected:
        return f"correct: {what} is right (exact)"
    size = "too small" if answer < expected else "too large"
    for given, other, hint in instead:
        if int(other) != int(given) and answer * int(given) == expected * int(other):
            if answer == expected * 8:  # the same factor as bits for bytes: name both causes
                hint = hint.rstrip("?") + ", or bits counted instead of bytes (the same factor here)?"
            raise AssertionError(f"{what} is not right yet ({size}): {hint}")
    hints = [f"{name} is missing" for name, f in factors.items() if f > 1 and answer * f == expected]
    hints += [f"{name} is counted twice" for name, f in factors.items() if f > 1 and answer == expected * f]
    if answer == expected * 8:
        hints.append("bits are counted instead of bytes")
    elif answer * 8 == expected:
        hints.append("bytes are divided by 8 once too often (bits and bytes mixed up)")
    raise AssertionError(f"{what} is not right yet ({size}): " + (f"{' or '.join(hints)}?" if hints else otherwise))


def check_attention_bytes(answer, *, batch: int, n_heads: int, seq_len: int, bytes_per_element: int,
                          n_layers: int, what: str = "the memory of the attention matrices") -> str:
    """Compare an integer count of bytes with the memory of the stored attention matrices, batch · heads · n² ·
    bytes · layers, naming the factor that is missing or counted twice, or the bytes of another number format
    (4 for float32, 8 for float64) used instead of ``bytes_per_element``; never the value."""
    answer = _whole_number(answer, what, " of bytes")
    expected = batch * n_heads * seq_len * seq_len * bytes_per_element * n_layers
    formats = {1: "8-bit", 2: "bfloat16", 4: "float32", 8: "float64"}
    mine = f"{bytes_per_element} ({formats.get(bytes_per_element, 'bytes')})"
    instead = [(bytes_per_element, other, f"{other} bytes ({formats[other]}) per element instead of {mine}?")
               for other in (4, 8)]
    factors = {"the batch": batch, "the number of heads": n_heads, "the sequence length (the matrices are n × n)":
               seq_len, "the bytes per element": bytes_per_element, "the number of layers": n_layers}
    if answer != expected and abs(answer - expected) <= 0.01 * expected:  # rounded (275e9): no factor is off
        raise AssertionError(f"{what} is not right yet, but within 1%: give the exact whole number of bytes, "
                             "not a rounded one")
    return _check_byte_product(answer, expected, factors, what, "it is not off by one of the factors alone", instead)


def check_kv_cache_bytes(answer, *, n_layers: int, n_kv_heads: int, d_head: int, bytes_per_number: int,
                         what: str = "KV cache bytes per token", n_query_heads: int | None = None) -> str:
    """Check the bytes a decoder-only model's KV cache holds per token of one sequence, 2 · layers · KV heads ·
    head size · bytes (a key and a value per layer and KV head), exactly, naming the factor that is missing or
    counted twice (or 16 bits counted instead of 2 bytes); never the value. ``n_query_heads``: the query heads of a
    grouped-query model (more than ``n_kv_heads``), so that a count with one key/value head per query head, as in
    multi-head attention, is named as such."""
    factors = {"the factor 2 for a key and a value": 2, "the number of layers": n_layers,
               "the number of key/value heads": n_kv_heads, "the head size": d_head,
               "the bytes per number": bytes_per_number}
    expected = 2 * n_layers * n_kv_heads * d_head * bytes_per_number
    answer = _whole_number(answer, what, " of bytes")
    instead = [] if n_query_heads is None else [(n_kv_heads, n_query_heads, "counted with the key/value heads of "
                                                 "multi-head attention (one per query head) instead of GQA's?")]
    return _check_byte_product(answer, expected, factors, what, "check each factor: 2 (a key and a "
                               "value), layers, key/value heads, head size, bytes per number", instead)


def check_cache_projections(without_cache, with_cache, *, n_steps: int, what: str = "key projections") -> str:
    """Check how many key projections (of one token each) decoding ``n_steps`` tokens performs without a KV cache
    (step t projects all t positions so far) and with one (one new token per step), exactly, naming the counts off
    by one at every step or in the first step, every step projecting all ``n_steps`` positions, and keys and values
    counted together; never the values."""
    n = int(n_steps)
    if n < 2:
        raise ValueError(f"n_steps must be at least 2, got {n_steps!r}")
    without = _whole_number(without_cache, f"{what} without a cache")
    with_ = _whole_number(with_cache, f"{what} with a cache")
    problems = []
    if without != n * (n + 1) // 2:
        hint = {n * (n - 1) // 2: "one position left out at every step: step t projects t positions, its own new "
                                  "token included",
                n * n: f"as if every step projected all {n} positions, as the last one does",
                n * (n + 1): "keys and values counted together? count the key projections only"}.get(
            without, "add up the positions that step t projects, over the steps t = 1 … n")
        problems.append(f"without a cache, the count is {'too small' if without < n * (n + 1) // 2 else 'too large'}"
                        f" ({hint})")
    if with_ != n:
        hint = {n - 1: "the first step projects its token too",
                2 * n: "keys and values counted together? count the key projections only",
                1: "with a cache every step still projects its own new token"}.get(
            with_, "with a cache, each step projects only its own new token")
        problems.append(f"with a cache, the count is {'too small' if with_ < n else 'too large'} ({hint})")
    if problems:
        raise AssertionError(f"{what} are not right yet: " + "; ".join(problems))
    return f"correct: {what} without and with a cache are right (exact)"


def check_decoder_only_count(answer, *, d_model: int, n_layers: int, d_ff: int, vocab: int, n_positions: int,
                             what: str = "parameter count") -> str:
    """Check the parameters of a GPT-2-style decoder-only model, exactly: a token table tied to the output layer
    (no output bias), a learned table of ``n_positions`` positions, ``n_layers`` pre-LN layers of self-attention and
    feed-forward network (with their biases, two LayerNorms each) and a final LayerNorm. Names the part left out
    or counted too often (positions, final norm, cross-attention, a third LayerNorm per layer, an untied or biased
    output layer, biases, LayerNorms); never the value.

    Raises:
        TypeError: still ``...`` or None.
        AssertionError: not an integer (a float, even a whole one, is rejected: a count is an int), or a wrong
            count (with its likely slip where one fits).
    """
    d, f = int(d_model), int(d_ff)
    attn, ffn, ln = 4 * (d * d + d), 2 * d * f + f + d, 2 * d
    expected = vocab * d + n_positions * d + n_layers * (attn + ffn + 2 * ln) + ln
    require_answered(answer, what)
    if isinstance(answer, (float, np.floating)):  # the value itself is not shown: it may be the right count
        raise AssertionError(f"{what} should be an integer, got a float ({type(answer).__name__}): a count of "
                             "parameters is a whole number, so compute it with integers only (* and +, or // "
                             "rather than /), or convert the result with int(...)")
    if isinstance(answer, bool) or not isinstance(answer, (int, np.integer)):
        raise AssertionError(f"{what} should be an integer, got {answer!r}")
    variants = [("the count gives without the learned position table", expected - n_positions * d),
                ("the count gives without the final LayerNorm", expected - ln),
                ("the count gives with cross-attention and a third LayerNorm in every layer (the encoder-decoder's "
                 "decoder layer; a decoder-only model has no encoder to attend to)", expected + n_layers * (attn + ln)),
                ("the count gives with three LayerNorms in every layer, as the encoder-decoder's decoder layer has: "
                 "there is a LayerNorm per sub-layer, and GPT-2's layer has two sub-layers (self-attention and the "
                 "feed-forward network), so two LayerNorms per layer", expected + n_layers * ln),
                ("the count gives with a separate output matrix (GPT-2 ties it to the token table)",
                 expected + vocab * d),
                ("the count gives with a bias in the output layer (GPT-2's has none)", expected + vocab),
                ("the count gives without the attention projections' biases", expected - n_layers * 4 * d),
                ("the count gives without the feed-forward biases", expected - n_layers * (f + d)),
                ("the count gives without the LayerNorms", expected - (2 * n_layers + 1) * ln)]
    return _compare(answer, expected, what, variants, atol=0)


def check_ffn_parameters(answer, *, d_model: int, d_ff: int, swiglu: bool, what: str = "parameter count") -> str:
    """Check the parameters of one feed-forward network with a bias in every linear layer, exactly: the paper's
    ReLU FFN (two matrices) or, with ``swiglu=True``, a SwiGLU FFN (three matrices), of inner width ``d_ff``, as
    the course's layers count it
    (:class:`~tmlib.model.PositionwiseFeedForward`, :class:`~tmlib.model.SwiGLUFeedForward`).
    Names a count of the weights alone (every bias left out), one bias vector missing or one too many, a bias
    vector of the wrong length, one weight matrix missing or one too many, and a SwiGLU FFN counted like a ReLU
    one; never the value.

    Raises:
        TypeError: still ``...`` or None.
        AssertionError: not a positive whole number, or a wrong count (with its likely slip where one fits).
    """
    import torch

    from tmlib.model import PositionwiseFeedForward, SwiGLUFeedForward, count_parameters

    d, f = int(d_model), int(d_ff)
    answer = _whole_number(answer, what, " of parameters")
    layer = SwiGLUFeedForward if swiglu else PositionwiseFeedForward
    with torch.device("meta"):  # shapes only: the course's own layers, with and without their biases
        expected, weights = (count_parameters(layer(d, f, bias=bias)) for bias in (True, False))
        relu = count_parameters(PositionwiseFeedForward(d, f, bias=True))
    if answer == expected:
        return f"correct: {what} is right (exact)"
    hints = [(weights, "it counts the weight matrices alone: every linear layer here has a bias vector too"),
             (expected - d, "one bias vector is missing"), (expected - f, "one bias vector is missing"),
             (expected + d, "one bias vector too many"), (expected + f, "one bias vector too many"),
             (expected - d * f, "one weight matrix is missing"), (expected + d * f, "one weight matrix too many"),
             (expected + (f - d), "a bias vector of the wrong length (d_ff entries where d_model belong)?"),
             (expected - (f - d), "a bias vector of the wrong length (d_model entries where d_ff belong)?")]
    if swiglu:
        hints.append((relu, "counted like the ReLU FFN, with two weight matrices and two bias vectors?"))
    hint = next((h for value, h in hints if value == answer), "it is not off by the biases, one bias vector or one "
                "weight matrix alone: count the weights and the bias of each linear layer")
    raise AssertionError(f"{what} is not right yet ({'too small' if answer < expected else 'too large'}): {hint}")
