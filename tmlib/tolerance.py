"""How far two correct floating-point computations of the same mathematics may differ: the one rule behind every
numerical tolerance of the course (the tests, the notebooks' checks, the web export's check of its graphs).

A result that passes through ``n`` roundings (a dot product of length d is d of them; a layer, the sum of its
reductions, see :func:`transformer_reduction_length`) carries an error of about ``eps · √n · magnitude``: ``eps``
is the spacing of the dtype's numbers at 1 (float32 1.19e-7, float64 2.22e-16) and ``magnitude`` the size of the
values the roundings apply to (the partial sums; for a result that is not a cancellation, the size of the
result). Each rounding errs by at most eps/2 of its value, with a sign that varies, so the errors add like a
random walk: √n, not the worst case n (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1
and §4.2), which needs every error to have the same sign and which the blocked, pairwise and FMA summations of
BLAS, oneDNN and NumPy make rarer still. Two kernels (AVX-512, AVX2, scalar, a GPU, another BLAS) round in
other places and orders, so they agree to about that much, and no better: float32 relative error grows with the
length of the reduction, whatever the kernel.

:func:`tolerance` is ``SAFETY · eps · √n · magnitude`` with ``SAFETY = 4``. The difference of two independent
computations has a standard deviation of at most ``eps/(2√3) · √2 · √n · magnitude ≈ 0.41 · eps · √n ·
magnitude``; four times eps is ten of those (chance does not reach it), which leaves a factor of about two for
what the random-walk model leaves out: the amplification of earlier errors by later layers (a layer norm
divides by a standard deviation near 1, a softmax multiplies an error in a score by its weight) and elementary
functions accurate to a few units in the last place rather than half of one (NumPy's and SLEEF's vectorised
``exp``, ``log``, ``sin``: up to 4 ulp). A real bug (a mask off by one, a missing √d_k) changes results by
1e-3 to 1, orders of magnitude above any of these bounds (``tests/test_tolerances_catch_bugs.py`` measures it).

Comparisons that repeat the same operations in the same order on the same shapes (the same function called
twice, a dropout layer in evaluation mode, a copy) are exact by construction and compare with tolerance 0.

NumPy only (no torch import): the course's NumPy-only parts use it too. Torch dtypes are read by name.
"""
from __future__ import annotations

import math

import numpy as np

from tmlib.validation import check_float, check_int

__all__ = ["SAFETY", "eps_of", "tolerance", "transformer_reduction_length", "decoder_block_reduction_length",
           "float32_rounding"]

#: The factor of ``eps · √n · magnitude`` (see the module's docstring for why 4).
SAFETY = 4.0
_EPS = {"bfloat16": 2.0 ** -7, "tf32": 2.0 ** -10}  # NumPy has neither (TF32: the 10-bit significand of
# the float32 products NVIDIA tensor cores compute when torch.set_float32_matmul_precision("high"))


def eps_of(dtype) -> float:
    """The machine epsilon (spacing of the numbers at 1) of a floating-point dtype.

    Args:
        dtype: a NumPy dtype or type, a torch dtype (``torch.float32``), or a name (``"float32"``, ``"bfloat16"``,
            ``"tf32"``).

    Raises:
        TypeError: ``dtype`` is not a floating-point dtype.
    """
    name = str(dtype).removeprefix("torch.")
    if name in _EPS:
        return _EPS[name]
    try:
        np_dtype = np.dtype(dtype if not str(dtype).startswith("torch.") else name)
    except TypeError:
        np_dtype = None
    if np_dtype is None or np_dtype.kind != "f":
        raise TypeError(f"eps_of: {dtype!r} is not a floating-point dtype")
    return float(np.finfo(np_dtype).eps)


def tolerance(dtype, n: int = 1, magnitude: float = 1.0) -> float:
    """``SAFETY · eps(dtype) · √n · magnitude``: how far two correct computations may differ.

    Args:
        dtype: the least precise dtype the compared values were computed in (see :func:`eps_of`).
        n: the number of roundings on the longest chain that leads to a compared value (the length of a dot
            product or a sum, the sum of them through several layers; an elementwise operation counts 1).
        magnitude: the size of the values those roundings apply to (usually the largest ``|expected|``).

    Raises:
        TypeError, ValueError: ``n`` is not a positive integer, ``magnitude`` is not a finite number >= 0.

    Source: the course's rule (module docstring); the √n growth is Higham (2002), §3.1 and §4.2.
    """
    n = check_int(n, "tolerance: n", minimum=1)
    magnitude = check_float(magnitude, "tolerance: magnitude", minimum=0.0)
    return SAFETY * eps_of(dtype) * math.sqrt(n) * magnitude


def transformer_reduction_length(config, src_len: int | None, tgt_len: int | None) -> int:
    """The roundings on the longest chain of a Transformer's forward pass, for :func:`tolerance`.

    Counted per sublayer: attention over n_k keys ``2·d_model + d_k + 2·n_k`` (projection, score, softmax
    normaliser, weighted sum, output projection), feed-forward ``d_model + d_ff``, each residual and layer norm
    ``1 + 2·d_model`` (the mean, then the variance); the embedding 2, the output projection ``d_model``, and for
    pre-LN a final norm per stack. An encoder layer is self-attention and the feed-forward network; a decoder
    layer adds cross-attention over the source when there is an encoder.

    Args:
        config: a :class:`~tmlib.model.config.ModelConfig` (or any object with ``d_model``, ``n_heads``,
            ``d_ff``, ``n_encoder_layers``, ``n_decoder_layers`` and ``norm_first``).
        src_len, tgt_len: the (padded) source and target lengths; ``tgt_len=None`` for an encoder-only model,
            ``src_len=None`` for a decoder-only one.

    Raises:
        ValueError: both lengths are ``None``, or one is not a positive integer.
    """
    if src_len is None and tgt_len is None:
        raise ValueError("transformer_reduction_length: give src_len, tgt_len or both")
    d, d_ff = config.d_model, config.d_ff
    d_k = d // config.n_heads
    norm = 1 + 2 * d
    final_norm = norm if getattr(config, "norm_first", False) else 0

    def attention(n_k: int) -> int:
        return 2 * d + d_k + 2 * n_k

    total = 2 + d
    if src_len is not None:
        src_len = check_int(src_len, "transformer_reduction_length: src_len", minimum=1)
        total += config.n_encoder_layers * (attention(src_len) + d + d_ff + 2 * norm) + final_norm
    if tgt_len is not None:
        tgt_len = check_int(tgt_len, "transformer_reduction_length: tgt_len", minimum=1)
        cross = attention(src_len) + norm if src_len is not None else 0
        total += config.n_decoder_layers * (attention(tgt_len) + cross + d + d_ff + 2 * norm) + final_norm
    return total


def decoder_block_reduction_length(config, seq_len: int) -> int:
    """The roundings on the longest chain through one pre-norm decoder-only block, for :func:`tolerance`.

    The block of chapter 13 (no embedding, no output projection): a norm, self-attention over ``seq_len`` keys, a
    residual sum, a norm, the feed-forward network, a residual sum. Counted: each norm ``d_model + 4`` for RMSNorm
    (the mean square, ε, the root, the division, the gain) or ``1 + 2·d_model`` for LayerNorm (as
    :func:`transformer_reduction_length`); the projections into the sub-layers ``2·d_model`` (W^Q, W^K, W^V and the
    feed-forward's first matrices); the scores and the softmax ``d_k + 2·seq_len``; the output projection and its
    residual ``d_model + 2``; the feed-forward's last matrix and its residual ``d_ff + 2``. With RoPE the two
    libraries round the angles ``m·θ_i`` (up to ``seq_len − 1`` radians) differently, an error of about
    ``eps · angle`` in the rotated queries and keys: counted as ``(2·(seq_len − 1))²`` roundings, so that its
    square root is the largest angle for the query plus that for the key.

    Args:
        config: a :class:`~tmlib.model.config.ModelConfig` (or any object with ``d_model``, ``n_heads``,
            ``d_ff``, and optionally ``norm`` and ``positions``).
        seq_len: the number of positions (keys) of the block's input.

    Raises:
        ValueError: ``seq_len`` is not a positive integer.
    """
    seq_len = check_int(seq_len, "decoder_block_reduction_length: seq_len", minimum=1)
    d, d_ff = config.d_model, config.d_ff
    d_k = d // config.n_heads
    norm = d + 4 if getattr(config, "norm", "layer") == "rms" else 1 + 2 * d
    total = 2 * norm + 2 * d + (d_k + 2 * seq_len) + (d + 2) + (d_ff + 2)
    if getattr(config, "positions", None) == "rope":
        total += (2 * (seq_len - 1)) ** 2
    return total


def float32_rounding(config, src_len: int, tgt_len: int, magnitude: float, extra_sums: int = 0) -> float:
    """How far two correct float32 forward passes of one encoder-decoder Transformer may differ.

    :func:`tolerance` for ``float32`` over the longest chain of roundings of the forward pass
    (:func:`transformer_reduction_length`), plus ``extra_sums`` roundings after it: for a loss, the log-softmax over
    the vocabulary (``vocab_size``) and the mean over the labels (their number). Chapter 14 compares ``tmlib``'s
    model with its ``transformers`` conversion this way (logits, cross-attention weights, the loss).

    Args:
        config: the model's :class:`~tmlib.model.config.ModelConfig` (``model.config``).
        src_len, tgt_len: the padded source and target lengths of the batch (``src.shape[1]``,
            ``tgt_in.shape[1]``: the inputs are ``(batch, src_len)`` and ``(batch, tgt_len)`` integer ids).
        magnitude: the size of the compared values (the largest ``|logit|``; 1 for attention weights); a float or
            a 0-dimensional tensor.
        extra_sums: roundings after the forward pass (0 for the logits themselves).

    Returns:
        the largest difference allowed, in the units of the compared values.

    Source: the course's rule, ``4 · eps · √n · magnitude`` (module docstring; Higham 2002, §3.1 and §4.2).
    """
    n = transformer_reduction_length(config, src_len, tgt_len) + check_int(extra_sums, "extra_sums", minimum=0)
    return tolerance("float32", n, float(magnitude))
