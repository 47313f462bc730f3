"""What machine a number was measured on: CPU model, cores, instruction sets, GPU, torch version, date.

Every measured figure of the course (throughput, timings, training budgets) depends on the machine: a CPU
with AVX512-BF16 trains the chapter 9 model about twice as fast as one without AVX-512, and the same bf16 code runs
1.5 times faster than float32 on one CPU and 3 times slower on another that only emulates bf16. Benchmarks store
:func:`machine_info` next to their results, and notebooks print :func:`describe_machine` next to the
numbers they measured, so a reader can tell whose machine a number came from.
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import re
import subprocess

__all__ = ["CPU_FLAGS_OF_INTEREST", "cpu_class", "cpu_flags", "cpu_model", "cpu_native_bf16", "machine_info",
           "describe_machine"]

#: Instruction-set flags (Linux ``/proc/cpuinfo`` names; ``bf16`` and ``asimd`` are Arm's) that change PyTorch's
#: CPU speed.
CPU_FLAGS_OF_INTEREST = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
                         "amx_bf16", "amx_int8", "avx_vnni", "asimd", "bf16")
#: The flags of a CPU that computes bf16 matrix products in hardware (x86: AVX512-BF16, AMX; Arm: BF16).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


def _cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`), e.g. ``"AMD EPYC"``."""
    m = re.search(r"^model name\s*:\s*(.+)$", _cpuinfo(), re.MULTILINE)
    return m.group(1).strip() if m else (platform.processor() or platform.machine() or "unknown")


def cpu_flags() -> list[str]:
    """The flags of :data:`CPU_FLAGS_OF_INTEREST` that this CPU reports (x86 ``flags``, Arm ``Features``; empty
    where /proc/cpuinfo is missing)."""
    m = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", _cpuinfo(), re.MULTILINE)
    present = set(m.group(1).split()) if m else set()
    return [f for f in CPU_FLAGS_OF_INTEREST if f in present]


def cpu_native_bf16(flags: list[str] | None = None) -> bool | None:
    """Whether the CPU computes bf16 in hardware, from its own features (not from oneDNN, whose "bf16 supported"
    includes emulation): :data:`NATIVE_BF16_FLAGS` on Linux, ``hw.optional.arm.FEAT_BF16`` on a Mac; ``None``
    where it cannot tell (Windows). Native bf16 is necessary for bf16 to be fast, not sufficient: training
    measures it (:func:`tmlib.training.precision.time_precisions`)."""
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True,
                                 timeout=5).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
        return out == "1" if out else None
    if not _cpuinfo():
        return None
    return any(f in NATIVE_BF16_FLAGS for f in (cpu_flags() if flags is None else flags))


def machine_info() -> dict:
    """A JSON-ready description of this machine, for the results of a measurement.

    Returns:
        dict with ``cpu_model`` (str), ``cpu_count`` (logical CPUs the process may use), ``cpu_flags`` (list of
        str, see :data:`CPU_FLAGS_OF_INTEREST`), ``cpu_native_bf16`` (bool or None, :func:`cpu_native_bf16`),
        ``onednn_bf16`` (bool: oneDNN runs bf16, natively or emulated), ``onednn_max_cpu_isa`` and
        ``aten_cpu_capability_env`` (the environment variables that cap oneDNN's and PyTorch's kernels, or None),
        ``torch_cpu_capability`` (e.g. ``"AVX512"``), ``torch_threads`` (int), ``gpu`` (``None`` or a dict with
        ``name``, ``capability``, ``memory_gib``, ``count``), ``torch_version``, ``cuda_version``,
        ``python_version``, ``platform`` and ``date`` (ISO 8601, UTC, seconds).
        The torch fields are ``None`` when torch is not installed.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count()
    flags = cpu_flags()
    info = {
        "cpu_model": cpu_model(),
        "cpu_count": cpus,
        "cpu_flags": flags,
        "cpu_native_bf16": cpu_native_bf16(flags),
        "onednn_bf16": None,
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"),
        "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY"),
        "torch_cpu_capability": None,
        "torch_threads": None,
        "gpu": None,
        "torch_version": None,
        "cuda_version": None,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
    }
    try:
        import torch
    except ImportError:
        return info
    info["torch_version"] = str(torch.__version__)
    info["cuda_version"] = torch.version.cuda
    info["torch_threads"] = torch.get_num_threads()
    try:
        info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        pass
    try:
        info["onednn_bf16"] = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        info["onednn_bf16"] = False
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info["gpu"] = {"name": props.name, "capability": f"{props.major}.{props.minor}",
                       "memory_gib": round(props.total_memory / 2**30, 1), "count": torch.cuda.device_count()}
    return info


def cpu_class(info: dict) -> str:
    """The kind of CPU that decides the speed of training, from a :func:`machine_info` record: ``"native bf16"``
    (AVX512-BF16, AMX or Arm's BF16), ``"AVX-512 without bf16"``, ``"AVX2 only"`` or ``"other"``; with
    ``" (imitated)"`` where ``ONEDNN_MAX_CPU_ISA``/``ATEN_CPU_CAPABILITY`` capped the kernels of a larger CPU."""
    flags, native = set(info.get("cpu_flags") or []), bool(info.get("cpu_native_bf16"))
    onednn = (info.get("onednn_max_cpu_isa") or "").upper()
    aten = (info.get("aten_cpu_capability_env") or "").lower()
    avx512 = "avx512f" in flags and aten not in ("avx2", "default") and not onednn.startswith(("AVX2", "SSE", "AVX_"))
    native = native and (not onednn or "BF16" in onednn or "AMX" in onednn or onednn in ("ALL", "DEFAULT"))
    kind = ("native bf16" if native else "AVX-512 without bf16" if avx512 else "AVX2 only" if "avx2" in flags
            else "other")
    return kind + (" (imitated)" if onednn or aten else "")


def describe_machine(info: dict | None = None) -> str:
    """One line for a notebook or a log, e.g. ``"AMD EPYC, 2 CPUs (avx2 avx512f avx512_bf16; native bf16: yes),
    torch 2.13.0+cpu with 2 threads, no GPU"``.

    Args:
        info: a dict from :func:`machine_info` (default: this machine, now).

    Returns:
        str, one line: CPU model and count, the AVX-512/AMX flags, torch and its threads, the GPU.

    Raises:
        KeyError: ``info`` lacks ``cpu_model`` or ``cpu_count`` (not a :func:`machine_info` dict).
    """
    info = machine_info() if info is None else info
    flags = " ".join(f for f in info.get("cpu_flags", []) if f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16",
                                                                     "asimd", "bf16"))
    bf16 = info.get("cpu_native_bf16")
    bf16_text = "" if bf16 is None else f"; native bf16: {'yes' if bf16 else 'no'}"
    caps = [f"{name} {info[key]}" for key, name in (("onednn_max_cpu_isa", "oneDNN capped at"),
                                                     ("aten_cpu_capability_env", "PyTorch kernels"))
            if info.get(key)]
    bf16_text += "".join(f"; {c}" for c in caps)
    gpu = info.get("gpu")
    gpu_text = "no GPU" if not gpu else f"GPU {gpu['name']} ({gpu['memory_gib']} GiB)"
    threads = info.get("torch_threads")
    torch_text = (f"torch {info['torch_version']} with {threads} thread{'' if threads == 1 else 's'}"
                  if info.get("torch_version") else "no torch")
    return (f"{info['cpu_model']}, {info['cpu_count']} CPUs ({flags or 'no AVX2'}{bf16_text}), "
            f"{torch_text}, {gpu_text}")
