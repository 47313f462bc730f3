"""Mixed precision and the machine settings of a run.

Mixed-precision training (Micikevicius et al., "Mixed Precision Training", ICLR 2018) runs the matrix products of
the forward pass in a 16-bit type and keeps the weights, the optimizer state and the loss in float32:

* bf16 has float32's exponent range, so its gradients neither underflow nor overflow: autocast alone suffices;
* fp16 has a narrow range: the loss is multiplied by a large factor before the backward pass so that small
  gradients survive, and the gradients are divided by it again before clipping and the optimizer step; a step
  whose gradients overflowed is skipped and the factor lowered (``torch.amp.GradScaler``).

:class:`MixedPrecision` holds that choice for a run; :func:`resolve_precision` makes it, on a CPU from
:func:`time_precisions`, which times the model's own training step in both types (whether bf16 pays on a CPU is
measured, not read from a flag); :func:`machine_settings` applies the thread count and TF32 matrix products for the
duration of a ``with`` block.
"""
from __future__ import annotations

import contextlib
import statistics
import time

import torch

from tmlib.machine import machine_info
from tmlib.training import distributed

__all__ = ["BF16_MIN_SPEEDUP", "time_precisions", "resolve_precision", "MixedPrecision", "describe_precision",
           "measured_precision", "resumed_precision", "machine_settings"]

#: On a CPU, ``amp="auto"`` takes bf16 only where it makes a training step at least this many times faster than
#: float32 (a tie keeps float32, which is the more accurate of the two).
BF16_MIN_SPEEDUP = 1.1
#: bf16 whose first call takes this many times as long as float32's is not timed again (:func:`time_precisions`)
CLEARLY_SLOWER = 10


def time_precisions(run_step, max_repeats: int = 3) -> dict:
    """Seconds per call of ``run_step(dtype)`` in float32 (``dtype=None``) and under bf16 autocast
    (``torch.bfloat16``): one warm-up call each (oneDNN builds its kernels then), then timed calls of both,
    interleaved so that a busy moment of the machine slows both, until the ratio is clear (one pair where one type
    is more than 1.4 times faster, else ``max_repeats`` pairs); the median of each.

    Whether bf16 pays on a CPU depends on the CPU and on the matrix shapes: where the CPU computes bf16 natively
    (AVX512-BF16, AMX) it is faster on some processors and not on others for a small model, and where oneDNN
    emulates it (AVX-512 without bf16, AVX2) it is several times slower, so a flag cannot tell; timing the model's
    own step can.

    Where bf16's warm-up call alone takes more than :data:`CLEARLY_SLOWER` times float32's (bf16 emulated with
    AVX2 kernels: 80 times slower), that call is bf16's time and it is not called again (one-off costs can only
    make it look slower than it is, and a step of it would cost half a minute).

    Returns:
        ``{"float32_s": float, "bf16_s": float}``.
    """
    warm_up = {}
    for dtype in (None, torch.bfloat16):
        start = time.perf_counter()
        run_step(dtype)
        warm_up[dtype] = time.perf_counter() - start
    if warm_up[torch.bfloat16] > CLEARLY_SLOWER * warm_up[None]:
        start = time.perf_counter()
        run_step(None)
        return {"float32_s": time.perf_counter() - start, "bf16_s": warm_up[torch.bfloat16]}
    times = {None: [], torch.bfloat16: []}
    for i in range(max_repeats):
        for dtype in ((None, torch.bfloat16) if i % 2 == 0 else (torch.bfloat16, None)):
            start = time.perf_counter()
            run_step(dtype)
            times[dtype].append(time.perf_counter() - start)
        ratio = statistics.median(times[None]) / statistics.median(times[torch.bfloat16])
        if not 1 / 1.4 <= ratio <= 1.4:
            break
    return {"float32_s": statistics.median(times[None]), "bf16_s": statistics.median(times[torch.bfloat16])}


def resolve_precision(amp: str, device: torch.device, timings: dict | None = None) -> torch.dtype | None:
    """The autocast dtype for ``amp`` on ``device``, or ``None`` for float32.

    ``"auto"``: on a CUDA GPU, bf16 where it computes bf16 natively (Ampere and later), fp16 with a gradient scaler
    elsewhere (a T4, Colab's GPU, only emulates bf16, slowly); on a CPU, bf16 where ``timings``
    (:func:`time_precisions` on the model being trained) show it at least :data:`BF16_MIN_SPEEDUP` times faster
    than float32, float32 otherwise and without timings; float32 on Apple's MPS. ``"bf16"``/``"fp16"`` force the
    type (fp16 only on CUDA); ``"off"`` is float32.

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
    if device.type == "cpu" and timings is not None:
        return torch.bfloat16 if timings["float32_s"] >= BF16_MIN_SPEEDUP * timings["bf16_s"] else None
    return None


class MixedPrecision:
    """The precision of a run: the autocast type of the forward pass, and the gradient scaler that fp16 needs.

    Args:
        amp: ``"auto"``, ``"bf16"``, ``"fp16"`` or ``"off"`` (see :func:`resolve_precision`).
        device: the training device.
        timings: :func:`time_precisions` of the model being trained (``amp="auto"`` on a CPU decides by them).

    Attributes:
        dtype: ``torch.bfloat16``, ``torch.float16`` or ``None`` (float32).
        needs_probe: ``amp="auto"`` on a CPU without ``timings``: float32 until the trainer has timed the model
            and made a new ``MixedPrecision`` with them.
        scaler: a ``torch.amp.GradScaler``, enabled for fp16 only (disabled, each of its methods passes its
            argument through unchanged).

    Raises:
        ValueError: what :func:`resolve_precision` raises.
    """

    def __init__(self, amp: str, device: torch.device, timings: dict | None = None):
        self.amp, self.timings, self.device_type = amp, timings, torch.device(device).type
        self.dtype = resolve_precision(amp, device, timings)
        self.needs_probe = amp == "auto" and self.device_type == "cpu" and timings is None
        self.scaler = torch.amp.GradScaler(self.device_type, enabled=self.dtype == torch.float16)

    @property
    def name(self) -> str:
        """``"bfloat16"``, ``"float16"`` or ``"float32"``."""
        return str(self.dtype or torch.float32).removeprefix("torch.")

    def record(self) -> dict:
        """What a run stores of its precision: ``{"amp", "dtype", "timings"}`` (``timings``: the probe's, or None)."""
        return {"amp": self.amp, "dtype": self.name, "timings": self.timings}

    def describe(self) -> str:
        """One line for the log: :func:`describe_precision` of :meth:`record`."""
        return describe_precision(self.record())

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


def describe_precision(record: dict) -> str:
    """One line on a run's precision (:meth:`MixedPrecision.record`), e.g. ``"precision: bfloat16 autocast
    (amp=auto timed this model's training step: float32 0.41 s, bf16 autocast 0.27 s; ...)"``."""
    what = "float32" if record["dtype"] == "float32" else f"{record['dtype']} autocast"
    timings = record.get("timings")
    if not timings:
        return f"precision: {what} (amp={record['amp']})"
    return (f"precision: {what} (amp={record['amp']} timed this model's training step: float32 "
            f"{timings['float32_s']:.2f} s, bf16 autocast {timings['bf16_s']:.2f} s; bf16 is taken where it is at "
            f"least {BF16_MIN_SPEEDUP} times faster)")


def measured_precision(amp: str, device: torch.device, run_step) -> MixedPrecision:
    """The precision of ``amp="auto"`` on a CPU, measured: rank 0 times ``run_step(dtype)``, the model's own step, in
    float32 and bf16 (:func:`time_precisions`, its random draws discarded) and every process takes the result."""
    timings = None
    if distributed.rank() == 0:
        with torch.random.fork_rng(devices=[]):  # dropout's draws here leave the run's random state alone
            timings = time_precisions(run_step)
    return MixedPrecision(amp, device, distributed.broadcast_from_rank0(timings))


def resumed_precision(amp: str, device: torch.device, state: dict) -> MixedPrecision | None:
    """The precision a checkpointed run (``state``) measured, so that it continues exactly: when its probe ran on this
    CPU (model, flags, oneDNN cap) with this ``amp``; ``None`` otherwise (the probe runs again)."""
    stored, machine, here = state.get("precision"), state.get("machine") or {}, machine_info()
    same_cpu = all(machine.get(k) == here[k] for k in ("cpu_model", "cpu_flags", "onednn_max_cpu_isa"))
    if stored and stored["timings"] and stored["amp"] == amp and same_cpu:
        return MixedPrecision(amp, device, stored["timings"])
    return None


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
