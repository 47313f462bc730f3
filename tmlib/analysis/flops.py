"""FLOPs of the encoder-decoder Transformer, device peaks, and model FLOP utilisation (MFU).

How close does a training run come to what the hardware can do?  MFU (model FLOP utilisation, Chowdhery et
al. 2022, "PaLM", appendix B) answers it:

    MFU = (tokens per second × FLOPs per token) / peak FLOP/s of the device.

The FLOPs are those the *model* needs (the matrix products of the paper's equations), not what a particular
kernel happens to execute; recomputation or padding do not count as useful work.

Counting convention (as :class:`torch.utils.flop_counter.FlopCounterMode`): a multiply-add is 2 FLOPs, so a
product of an ``(m, k)`` and a ``(k, n)`` matrix costs ``2·m·k·n``.  Only matrix products are counted;
softmax, LayerNorm, residual additions, biases, dropout and embedding look-ups are O(n·d) or O(h·n²) memory-bound
element-wise work, a few per cent of the total for the sizes of this course.

Forward FLOPs of one sentence pair with S source and T target positions (d = d_model, V = target vocabulary,
f = d_ff, N_e/N_d encoder/decoder layers):

=======================  =====================================================  =================================
part                     per layer                                              what
=======================  =====================================================  =================================
encoder                  8·S·d² + 4·S²·d + 4·S·d·f                              Q, K, V, O projections; QKᵀ and
                                                                                weights·V; the FFN (§3.2, §3.3)
decoder self-attention   8·T·d² + 4·T²·d                                        the same on T positions; the causal
                                                                                mask does not skip the masked half
cross-attention          4·T·d² + 4·S·d² + 4·T·S·d                              Q, O on T; K, V on the S memory
                                                                                positions; T×S scores and sum
decoder FFN              4·T·d·f                                                two products through d_ff
output projection        2·T·d·V (once, not per layer)                          the generator (§3.4)
=======================  =====================================================  =================================

A training step costs about 3× the forward pass: the backward pass computes, for every product, the gradient
with respect to both factors, two products of the same size (Kaplan et al. 2020, "Scaling laws", §2.1).

Peak FLOP/s: :data:`PEAK_FLOPS`, dense tensor-core (or FP32) figures from NVIDIA's datasheets.  Where a
datasheet prints the figure "with sparsity" (2:4 structured sparsity doubles it), the table holds half of it,
the dense rate that a Transformer's matrix products can reach.
"""
from __future__ import annotations

import operator
import re
from types import MappingProxyType

__all__ = ["transformer_flops", "flops_per_token", "model_flops", "PEAK_FLOPS", "peak_flops", "gpu_peak_flops",
           "mfu"]


def _int(value, name: str, lowest: int = 1) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if value < lowest:
        raise ValueError(f"{name} must be at least {lowest}, got {value}")
    return int(value)


def transformer_flops(d_model: int, n_encoder_layers: int, n_decoder_layers: int, d_ff: int, vocab_size: int,
                      src_len: int, tgt_len: int, batch: int = 1) -> dict[str, int]:
    """Forward-pass FLOPs of the encoder-decoder Transformer on ``batch`` sentence pairs, split by part.

    See the module docstring for the formulas (multiply-add = 2 FLOPs, matrix products only).  The
    number of heads does not appear: h heads of width d/h cost what one head of width d costs.

    Args:
        d_model: d (int ≥ 1).
        n_encoder_layers, n_decoder_layers: N (int ≥ 0; 0 drops that stack).
        d_ff: inner width of the feed-forward networks (int ≥ 1).
        vocab_size: target vocabulary V of the output projection (int ≥ 1).
        src_len, tgt_len: S and T, the padded lengths the model computes on (int ≥ 1).
        batch: sentence pairs (int ≥ 1).

    Returns:
        dict of int FLOPs: ``"encoder"`` (self-attention and FFN of all encoder layers),
        ``"decoder_self_attention"``, ``"cross_attention"``, ``"decoder_ffn"``, ``"output_projection"``
        and ``"total"``.

    Raises:
        TypeError: a size is not an integer.  ValueError: a size out of range.

    Source: paper §3.1-3.4 (shapes); counting convention of ``torch.utils.flop_counter``.
    """
    d = _int(d_model, "d_model")
    n_e = _int(n_encoder_layers, "n_encoder_layers", 0)
    n_d = _int(n_decoder_layers, "n_decoder_layers", 0)
    f = _int(d_ff, "d_ff")
    v = _int(vocab_size, "vocab_size")
    s = _int(src_len, "src_len")
    t = _int(tgt_len, "tgt_len")
    b = _int(batch, "batch")
    out = {
        "encoder": n_e * (8 * s * d * d + 4 * s * s * d + 4 * s * d * f),
        "decoder_self_attention": n_d * (8 * t * d * d + 4 * t * t * d),
        "cross_attention": n_d * (4 * t * d * d + 4 * s * d * d + 4 * t * s * d) if n_e else 0,
        "decoder_ffn": n_d * 4 * t * d * f,
        "output_projection": 2 * t * d * v,
    }
    out = {k: b * val for k, val in out.items()}
    out["total"] = sum(out.values())
    return out


def model_flops(model, src_len: int, tgt_len: int, batch: int = 1) -> dict[str, int]:
    """:func:`transformer_flops` with the sizes read from a :class:`tmlib.model.transformer.Transformer`.

    Args:
        model: has ``d_model``, ``tgt_vocab_size``, ``encoder.layers`` and ``decoder.layers`` whose
            ``feed_forward`` has ``d_ff``.
        src_len, tgt_len, batch: as :func:`transformer_flops`.

    Raises:
        TypeError: ``model`` lacks those attributes.
    """
    try:
        d_ff = model.encoder.layers[0].feed_forward.d_ff if len(model.encoder.layers) else \
            model.decoder.layers[0].feed_forward.d_ff
        return transformer_flops(model.d_model, len(model.encoder.layers), len(model.decoder.layers), d_ff,
                                 model.tgt_vocab_size, src_len, tgt_len, batch)
    except AttributeError as exc:
        raise TypeError(f"model must be a tmlib Transformer (encoder/decoder stacks, d_model): {exc}") from None


def flops_per_token(d_model: int, n_encoder_layers: int, n_decoder_layers: int, d_ff: int, vocab_size: int,
                    src_len: int, tgt_len: int, training: bool = True, tokens: float | None = None) -> float:
    """FLOPs per target token of a training step (≈ 3 × forward) or of a forward pass.

    Args:
        d_model, n_encoder_layers, n_decoder_layers, d_ff, vocab_size, src_len, tgt_len: as
            :func:`transformer_flops` (one sentence pair of padded lengths S and T).
        training: True: forward + backward ≈ 3 × forward; False: forward only.
        tokens: the target tokens the FLOPs are shared by; default ``tgt_len`` (every position a real
            token).  Pass the mean number of non-pad target tokens per sentence to charge padding to the
            real tokens, as a throughput counted in non-pad tokens needs.

    Returns:
        float, FLOPs per target token.

    Raises:
        ValueError: ``tokens`` not positive; sizes as :func:`transformer_flops`.
    """
    total = transformer_flops(d_model, n_encoder_layers, n_decoder_layers, d_ff, vocab_size, src_len,
                              tgt_len)["total"]
    tokens = tgt_len if tokens is None else tokens
    if not tokens > 0:
        raise ValueError(f"tokens must be positive, got {tokens}")
    return (3 if training else 1) * total / tokens


#: Dense peak FLOP/s per GPU and number format, from NVIDIA's datasheets ("with sparsity" figures halved).
#:
#: * H100 SXM and PCIe: "NVIDIA H100 Tensor Core GPU" datasheet (2023): BF16/FP16 1,979 and 1,513 TFLOPS with
#:   sparsity, TF32 989 and 756 with sparsity, FP32 67 and 51 TFLOPS.
#: * H200 SXM: "NVIDIA H200 Tensor Core GPU" datasheet (2024): the same compute as H100 SXM (BF16 1,979 with
#:   sparsity, FP32 67), with more and faster memory (141 GB HBM3e, 4.8 TB/s).
#: * A100 (SXM and PCIe): "NVIDIA A100 Tensor Core GPU" datasheet (2021): BF16/FP16 312, TF32 156, FP32 19.5.
#: * A10: "NVIDIA A10 Tensor Core GPU" datasheet (2021): BF16/FP16 125, TF32 62.5, FP32 31.2.
#: * L4: "NVIDIA L4 Tensor Core GPU" datasheet (2023): BF16/FP16 242 with sparsity, TF32 120 with sparsity,
#:   FP32 30.3.
#: * T4: "NVIDIA T4 Tensor Core GPU" datasheet (2019): mixed-precision FP16 65, FP32 8.1 (no bf16).
#: * V100 SXM2: "NVIDIA Tesla V100 GPU" datasheet (2020): tensor performance 125 (FP16), FP32 15.7.
#: * P100: the paper's own estimate of sustained FP32 throughput, 9.5 TFLOPS (Vaswani et al. 2017, Table 2
#:   footnote), which its training-cost column uses.
PEAK_FLOPS = MappingProxyType({
    "H100 SXM": {"bf16": 989.5e12, "fp16": 989.5e12, "tf32": 494.5e12, "fp32": 67e12},
    "H100 PCIe": {"bf16": 756.5e12, "fp16": 756.5e12, "tf32": 378e12, "fp32": 51e12},
    "H200": {"bf16": 989.5e12, "fp16": 989.5e12, "tf32": 494.5e12, "fp32": 67e12},
    "A100": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "A10": {"bf16": 125e12, "fp16": 125e12, "tf32": 62.5e12, "fp32": 31.2e12},
    "L4": {"bf16": 121e12, "fp16": 121e12, "tf32": 60e12, "fp32": 30.3e12},
    "T4": {"fp16": 65e12, "fp32": 8.1e12},
    "V100": {"fp16": 125e12, "fp32": 15.7e12},
    "P100": {"fp32": 9.5e12},
})

# torch.cuda.get_device_name() spellings -> PEAK_FLOPS keys (first match wins; order matters: "H100 PCIe"
# before the generic H100, which is the SXM part ("NVIDIA H100 80GB HBM3")).
_GPU_NAME_PATTERNS = (
    (r"H100.*PCIe", "H100 PCIe"), (r"H200", "H200"), (r"H100", "H100 SXM"), (r"A100", "A100"),
    (r"\bA10\b", "A10"), (r"\bL4\b", "L4"), (r"\bT4\b", "T4"), (r"V100", "V100"), (r"P100", "P100"),
)


def peak_flops(device: str, dtype: str = "bf16") -> float:
    """Dense peak FLOP/s of a device of :data:`PEAK_FLOPS` in a number format.

    Args:
        device: a key of :data:`PEAK_FLOPS`, e.g. ``"H100 SXM"``.
        dtype: ``"bf16"``, ``"fp16"``, ``"tf32"`` or ``"fp32"``.

    Returns:
        float, FLOP/s.

    Raises:
        ValueError: unknown device, or no figure for that format (e.g. bf16 on a T4).
    """
    if device not in PEAK_FLOPS:
        raise ValueError(f"unknown device {device!r}; known: {sorted(PEAK_FLOPS)}")
    if dtype not in PEAK_FLOPS[device]:
        raise ValueError(f"no {dtype!r} peak for {device}; it has {sorted(PEAK_FLOPS[device])}")
    return PEAK_FLOPS[device][dtype]


def gpu_peak_flops(device_name: str, dtype: str = "bf16") -> tuple[str, float] | None:
    """Look up a GPU by the name ``torch.cuda.get_device_name()`` reports, e.g. ``"NVIDIA H100 80GB HBM3"``.

    Returns:
        ``(key, FLOP/s)`` with the :data:`PEAK_FLOPS` key it matched, or ``None`` when the GPU or the format
        is not in the table (a CPU, or a GPU the table lacks).

    Raises:
        TypeError: ``device_name`` is not a string.
    """
    if not isinstance(device_name, str):
        raise TypeError(f"device_name must be a string, got {device_name!r}")
    for pattern, key in _GPU_NAME_PATTERNS:
        if re.search(pattern, device_name):
            value = PEAK_FLOPS[key].get(dtype)
            return None if value is None else (key, value)
    return None


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOP utilisation: the fraction of the device's peak that the model's FLOPs use.

    ``MFU = tokens_per_s × flops_per_token / peak_flops`` (Chowdhery et al. 2022, "PaLM", appendix B).

    Args:
        tokens_per_s: measured throughput (> 0).
        flops_per_token: e.g. :func:`flops_per_token` with ``training=True`` (> 0).
        peak_flops: FLOP/s of the device in the format used, e.g. :func:`peak_flops` (> 0).

    Returns:
        float, usually in (0, 1); above 1 means the FLOP count or the peak is wrong.

    Raises:
        ValueError: an argument is not a positive finite number.
    """
    import math

    for name, value in (("tokens_per_s", tokens_per_s), ("flops_per_token", flops_per_token),
                        ("peak_flops", peak_flops)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return tokens_per_s * flops_per_token / peak_flops
