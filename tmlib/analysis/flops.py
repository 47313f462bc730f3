"""FLOPs of the Transformer, counted once here, device peaks, and model FLOP utilisation (MFU).

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

Every count is built from two units, :func:`attention_flops` (one multi-head attention sub-layer) and
:func:`feed_forward_flops` (one position-wise feed-forward network): :func:`layer_flops` splits an encoder layer
term by term (chapter 6), :func:`transformer_flops` adds up the whole model (chapter 12), and
:func:`flops_per_token` and :func:`mfu` turn it into a rate.

A training step costs about 3× the forward pass: the backward pass computes, for every product, the gradient
with respect to both factors, two products of the same size (Kaplan et al. 2020, "Scaling laws", §2.1).

Peak FLOP/s: :data:`PEAK_FLOPS`, dense tensor-core (or FP32) figures from NVIDIA's datasheets.  Where a
datasheet prints the figure "with sparsity" (2:4 structured sparsity doubles it), the table holds half of it,
the dense rate that a Transformer's matrix products can reach.
"""
from __future__ import annotations

import re
from types import MappingProxyType

from tmlib.validation import check_float, check_int

__all__ = ["attention_flops", "feed_forward_flops", "layer_flops", "transformer_flops", "model_flops",
           "flops_per_token", "training_flops_from_hardware", "PEAK_FLOPS", "peak_flops", "gpu_peak_flops", "mfu"]


def _product(m: int, k: int, n: int) -> int:
    """FLOPs of an ``(m, k) @ (k, n)`` matrix product: m·n dot products of length k, a multiply-add = 2 FLOPs."""
    return 2 * m * k * n


def attention_flops(n_q: int, n_k: int, d_model: int) -> dict[str, int]:
    """Forward FLOPs of one multi-head attention sub-layer, ``n_q`` queries over ``n_k`` keys (§3.2.1-3.2.2; h heads of
    width d/h cost what one head of width d costs): ``"query_projection"`` 2·n_q·d², ``"key_value_projections"``
    4·n_k·d², ``"attention_scores"`` and ``"attention_weighted_sum"`` 2·n_q·n_k·d each, ``"output_projection"``
    2·n_q·d², ``"total"`` (ints; softmax, scaling and masks left out).

    Raises:
        TypeError: a size not an integer. ValueError: a size < 1.
    """
    n_q = check_int(n_q, "n_q", minimum=1)
    n_k = check_int(n_k, "n_k", minimum=1)
    d = check_int(d_model, "d_model", minimum=1)
    out = {
        "query_projection": _product(n_q, d, d),  # Q W^Q
        "key_value_projections": 2 * _product(n_k, d, d),  # K W^K and V W^V
        "attention_scores": _product(n_q, d, n_k),  # Q Kᵀ: h products (n_q, d_k) @ (d_k, n_k)
        "attention_weighted_sum": _product(n_q, n_k, d),  # weights · V: h products (n_q, n_k) @ (n_k, d_k)
        "output_projection": _product(n_q, d, d),  # Concat(head_1, …, head_h) W^O
    }
    out["total"] = sum(out.values())
    return out


def feed_forward_flops(seq_len: int, d_model: int, d_ff: int) -> int:
    """Forward FLOPs of FFN(x) = max(0, xW₁ + b₁)W₂ + b₂ on ``seq_len`` positions (§3.3): 4·n·d·d_ff.
    Raises TypeError (not integers) or ValueError (a size < 1)."""
    n = check_int(seq_len, "seq_len", minimum=1)
    d = check_int(d_model, "d_model", minimum=1)
    f = check_int(d_ff, "d_ff", minimum=1)
    return _product(n, d, f) + _product(n, f, d)


def layer_flops(seq_len: int, d_model: int, d_ff: int | None = None) -> dict[str, int]:
    """Forward FLOPs of one encoder layer on n positions (multiply-add = 2): ``"qkv_projections"`` 6·n·d²,
    ``"attention_scores"`` and ``"attention_weighted_sum"`` 2·n²·d each (the n² terms of the slides' O(n²·d + n·d²)),
    ``"output_projection"`` 2·n·d², ``"feed_forward"`` 4·n·d·d_ff (default d_ff = 4·d), ``"total"``.

    Raises:
        TypeError: a size not an integer. ValueError: a size < 1.
    """
    n = check_int(seq_len, "seq_len", minimum=1)
    d = check_int(d_model, "d_model", minimum=1)
    d_ff = 4 * d if d_ff is None else check_int(d_ff, "d_ff", minimum=1)
    attention = attention_flops(n, n, d)
    out = {
        "qkv_projections": attention["query_projection"] + attention["key_value_projections"],
        "attention_scores": attention["attention_scores"],
        "attention_weighted_sum": attention["attention_weighted_sum"],
        "output_projection": attention["output_projection"],
        "feed_forward": feed_forward_flops(n, d, d_ff),
    }
    out["total"] = sum(out.values())
    return out


def transformer_flops(d_model: int, n_encoder_layers: int, n_decoder_layers: int, d_ff: int, vocab_size: int,
                      src_len: int, tgt_len: int, batch: int = 1) -> dict[str, int]:
    """Forward FLOPs of the encoder-decoder on ``batch`` pairs of padded lengths S, T (the module's table):
    ``"encoder"``, ``"decoder_self_attention"``, ``"cross_attention"``, ``"decoder_ffn"``, ``"output_projection"``
    (T·d·V) and ``"total"``; a stack of 0 layers is left out.

    Raises:
        TypeError: a size not an integer. ValueError: a size out of range.
    """
    d = check_int(d_model, "d_model", minimum=1)
    n_e = check_int(n_encoder_layers, "n_encoder_layers", minimum=0)
    n_d = check_int(n_decoder_layers, "n_decoder_layers", minimum=0)
    f = check_int(d_ff, "d_ff", minimum=1)
    v = check_int(vocab_size, "vocab_size", minimum=1)
    s = check_int(src_len, "src_len", minimum=1)
    t = check_int(tgt_len, "tgt_len", minimum=1)
    b = check_int(batch, "batch", minimum=1)
    out = {
        "encoder": n_e * layer_flops(s, d, f)["total"],
        "decoder_self_attention": n_d * attention_flops(t, t, d)["total"],
        "cross_attention": n_d * attention_flops(t, s, d)["total"] if n_e else 0,
        "decoder_ffn": n_d * feed_forward_flops(t, d, f),
        "output_projection": _product(t, d, v),  # the generator (§3.4)
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
    """FLOPs per target token of a training step (≈ 3 × forward, Kaplan et al. 2020 §2.1) or, with ``training=False``,
    of a forward pass, for one pair of padded lengths (:func:`transformer_flops`); ``tokens``: the real target tokens
    that share them (default ``tgt_len``; the mean non-pad count charges padding to the real tokens).

    Raises:
        TypeError: ``tokens`` not a number. ValueError: ``tokens`` not positive, sizes as :func:`transformer_flops`.
    """
    total = transformer_flops(d_model, n_encoder_layers, n_decoder_layers, d_ff, vocab_size, src_len,
                              tgt_len)["total"]
    if tokens is None:
        tokens = tgt_len
    else:
        check_float(tokens, "tokens", minimum=0, min_inclusive=False)
    return (3 if training else 1) * total / tokens


def training_flops_from_hardware(hours: float, n_gpus: int, tflops_per_gpu: float) -> float:
    """The paper's training cost: hours × GPUs × sustained TFLOP/s per GPU (§6.1, Table 2: base, 12 h on 8 P100 at
    9.5 TFLOPS → 3.3·10¹⁸ FLOPs).

    Raises:
        TypeError: ``n_gpus`` not an integer, the others not numbers. ValueError: a value not positive.
    """
    n_gpus = check_int(n_gpus, "n_gpus", minimum=1)
    hours = check_float(hours, "hours", minimum=0, min_inclusive=False)
    tflops_per_gpu = check_float(tflops_per_gpu, "tflops_per_gpu", minimum=0, min_inclusive=False)
    return hours * 3600.0 * n_gpus * tflops_per_gpu * 1e12


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
    """Model FLOP utilisation, ``tokens_per_s × flops_per_token / peak_flops`` (Chowdhery et al. 2022, appendix B):
    usually in (0, 1); above 1, the FLOP count or the peak is wrong. ValueError: an argument not positive and finite."""
    import math

    for name, value in (("tokens_per_s", tokens_per_s), ("flops_per_token", flops_per_token),
                        ("peak_flops", peak_flops)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return tokens_per_s * flops_per_token / peak_flops
