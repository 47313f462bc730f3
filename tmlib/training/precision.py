"""Mixed precision and the machine settings of a run.

Mixed-precision training (Micikevicius et al., "Mixed Precision Training", ICLR 2018) runs the matrix products of
the forward pass in a 16-bit type and keeps the weights, the optimizer state and the loss in float32:

* bf16 has float32's exponent range, so its gradients neither underflow nor overflow: autocast alone suffices;
* fp16 has a narrow range: the loss is multiplied by a large factor before the backward pass so that small
  gradients survive, and the gradients are divided by it again before clipping and the optimizer step; a step
  whose gradients overflowed is skipped and the factor lowered (``torch.amp.GradScaler``).

:class:`MixedPrecision` holds that choice for a run; :func:`resolve_precision` makes it; :func:`machine_settings`
applies the thread count and TF32 matrix products for the duration of a ``with`` block.
"""
from __future__ import annotations

import contextlib

import torch

__all__ = ["cpu_has_native_bf16", "resolve_precision", "MixedPrecision", "machine_settings"]


def cpu_has_native_bf16() -> bool:
    """True when oneDNN computes bf16 matrix products natively on this CPU (AVX512-BF16 or AMX).

    Without native support bf16 is emulated and slower than float32, so ``amp="auto"`` keeps float32 there.
    """
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``amp`` on ``device``, or ``None`` for float32.

    ``"auto"``: bf16 on a CUDA GPU that computes it natively (Ampere and later), fp16 with a gradient scaler on
    an older GPU (a T4, Colab's GPU, only emulates bf16, slowly), bf16 on a CPU with native bf16, float32
    elsewhere (a CPU without it, Apple's MPS). ``"bf16"``/``"fp16"`` force the type (fp16 only on CUDA);
    ``"off"`` is float32.

    Raises:
        ValueError: ``"fp16"`` on a device that is not CUDA, or an unknown value.
    """
    device = torch.device(device)
    if amp == "off":
        return None
    if amp == "bf16":
        return torch.bfloat16
    if amp == "fp16":
        if device.type != "cuda":
            raise ValueError("amp='fp16' needs a CUDA device (use bf16 or off on a CPU)")
        return torch.float16
    if amp != "auto":
        raise ValueError(f"amp must be auto, bf16, fp16 or off, got {amp!r}")
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else torch.float16
    if device.type == "cpu" and cpu_has_native_bf16():
        return torch.bfloat16
    return None


class MixedPrecision:
    """The precision of a run: the autocast type of the forward pass, and the gradient scaler that fp16 needs.

    Args:
        amp: ``"auto"``, ``"bf16"``, ``"fp16"`` or ``"off"`` (see :func:`resolve_precision`).
        device: the training device.

    Attributes:
        dtype: ``torch.bfloat16``, ``torch.float16`` or ``None`` (float32).
        scaler: a ``torch.amp.GradScaler``, enabled for fp16 only (disabled, each of its methods passes its
            argument through unchanged).

    Raises:
        ValueError: what :func:`resolve_precision` raises.
    """

    def __init__(self, amp: str, device: torch.device):
        self.device_type = torch.device(device).type
        self.dtype = resolve_precision(amp, device)
        self.scaler = torch.amp.GradScaler(self.device_type, enabled=self.dtype == torch.float16)

    def autocast(self):
        """The autocast context of the forward pass (a no-op for float32)."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        """The backward pass of ``loss`` (0-dim), multiplied by the loss scale when it is fp16."""
        self.scaler.scale(loss).backward()

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the gradients by the loss scale (fp16), so that clipping sees their true norm."""
        self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``; with fp16 it is skipped when a gradient overflowed, and the scale adapts."""
        self.scaler.step(optimizer)
        self.scaler.update()


@contextlib.contextmanager
def machine_settings(threads: int | None, device: torch.device, precision: MixedPrecision):
    """Inside the ``with`` block: torch uses ``threads`` CPU threads (``None``: unchanged), and float32 matrix
    products on CUDA use TF32 tensor cores when the run trains in float32. Both are restored on the way out."""
    threads_before, tf32_before = torch.get_num_threads(), torch.get_float32_matmul_precision()
    if threads:
        torch.set_num_threads(threads)
    if torch.device(device).type == "cuda" and precision.dtype is None:
        torch.set_float32_matmul_precision("high")  # TF32 tensor cores for float32 matrix products
    try:
        yield
    finally:
        torch.set_num_threads(threads_before)
        torch.set_float32_matmul_precision(tf32_before)
