"""Measuring speed and memory honestly: timers, peak-memory probes, power-law fits, cache sizes.

Chapter 12 and the scripts in ``benchmarks/`` measure what the slides only state: that self-attention
costs O(n²·d) time and O(n²) memory, that a KV cache makes decoding cheaper, and so on.  This module
holds the measuring tools they share:

* :func:`time_call` – wall-clock seconds per call, after warm-up, with CUDA synchronisation;
* :func:`peak_memory_bytes` – the peak of memory allocated *during* a call, measured (the PyTorch
  profiler's allocator events on the CPU, ``torch.cuda.max_memory_allocated`` on a GPU), never
  computed from a formula;
* :func:`fit_power_law` – the exponent b of t ≈ a·n^b by least squares on log-log data, with a
  confidence interval from the slope's standard error and Student's t quantile;
* :func:`tensor_bytes`, :func:`decoder_cache_bytes` and :func:`kv_cache_bytes` – the bytes a KV cache
  actually holds, and the formula they should equal.

torch is imported inside the functions that need it, so the fit can be used without torch.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from tmlib.validation import check_float, check_int

__all__ = ["PowerLawFit", "fit_power_law", "time_call", "peak_memory_bytes", "tensor_bytes",
           "decoder_cache_bytes", "kv_cache_bytes", "RESULTS_URL", "GPU_RESULTS", "load_result"]

#: Where the committed benchmark results live online (used when the repository is not checked out, e.g. Colab).
RESULTS_URL = ("https://raw.githubusercontent.com/attention-executable/attention-executable/main/"
               "benchmarks/results/{name}")
#: The sub-folder of ``benchmarks/results`` that holds the records of the one-shot GPU run (``tools/gpu_check.py``).
GPU_RESULTS = "gpu"


# --------------------------------------------------------------------------- power-law fit
@dataclass(frozen=True)
class PowerLawFit:
    """Result of :func:`fit_power_law`: t ≈ prefactor · n^exponent.

    Unpacks as ``exponent, low, high = fit`` (the estimate and its confidence interval).

    Attributes:
        exponent: the least-squares slope b of log t against log n.
        low, high: the ends of the confidence interval of b.
        prefactor: a = exp(intercept), in the units of t.
        stderr: the standard error of b.
        confidence: the interval's confidence level (e.g. 0.95).
        n_points: number of (n, t) points fitted; the interval has ``n_points - 2`` degrees of freedom.
    """

    exponent: float
    low: float
    high: float
    prefactor: float
    stderr: float
    confidence: float
    n_points: int

    def __iter__(self) -> Iterator[float]:
        return iter((self.exponent, self.low, self.high))

    def predict(self, n) -> np.ndarray:
        """The fitted curve a·n^b at sizes ``n`` (array-like of positive numbers)."""
        return self.prefactor * np.asarray(n, dtype=np.float64) ** self.exponent

    def __str__(self) -> str:
        pct = round(100 * self.confidence)
        return f"{self.exponent:.2f} ({pct}% CI {self.low:.2f} to {self.high:.2f}, {self.n_points} points)"


def fit_power_law(n, t, confidence: float = 0.95) -> PowerLawFit:
    """Fit t ≈ a·n^b by least squares on (log n, log t); the slope's interval is b ± t_{(1+c)/2, k−2} · s /
    √Σ(x_i − x̄)² (Student's t). Pass one value per size (a median of repeats) and only sizes where the law should
    hold. n, t: 1-D, positive, finite, at least 3 points, not all n equal → :class:`PowerLawFit` (``exponent, low,
    high``).

    Raises:
        ValueError: lengths differ, fewer than 3 points, values not positive and finite, all n equal, ``confidence``
            outside (0, 1).
        TypeError: non-numeric input.
    """
    from scipy import stats

    try:
        x = np.asarray(n, dtype=np.float64)
        y = np.asarray(t, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"n and t must be numeric arrays: {exc}") from None
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"n and t must be 1-D arrays of the same length, got shapes {x.shape} and {y.shape}")
    if x.size < 3:
        raise ValueError(f"need at least 3 points to fit a line with an error estimate, got {x.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0) and np.all(y > 0)):
        raise ValueError(f"n and t must be positive and finite, got n={x.tolist()}, t={y.tolist()}")
    confidence = check_float(confidence, "confidence", minimum=0, maximum=1, min_inclusive=False,
                             max_inclusive=False)
    lx, ly = np.log(x), np.log(y)
    sxx = float(np.sum((lx - lx.mean()) ** 2))
    if sxx == 0.0:
        raise ValueError(f"all n are equal ({x[0]}): the slope is undefined")
    slope = float(np.sum((lx - lx.mean()) * (ly - ly.mean())) / sxx)
    intercept = float(ly.mean() - slope * lx.mean())
    residuals = ly - (intercept + slope * lx)
    dof = x.size - 2
    s2 = float(np.sum(residuals ** 2) / dof)
    stderr = math.sqrt(s2 / sxx)
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * stderr
    return PowerLawFit(exponent=slope, low=slope - half, high=slope + half, prefactor=math.exp(intercept),
                       stderr=stderr, confidence=confidence, n_points=int(x.size))


# --------------------------------------------------------------------------- timing
def _sync(device) -> None:
    import torch

    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], repeats: int = 5, warmup: int = 1, min_seconds: float = 0.0,
              device=None, clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Seconds per call of ``fn()``: ``warmup`` untimed calls, then ``repeats`` measurements, each a loop of ``inner``
    calls (doubled during warm-up until a loop lasts ``min_seconds``), synchronising a CUDA ``device`` around the
    clock (``clock``: wall by default, :func:`time.process_time` for CPU time). Report the median.

    Args:
        fn: the call to time, without arguments.
        repeats: how many timings to return.
        warmup: untimed calls before the first timing.
        min_seconds: the shortest loop; 0 times one call per timing.
        device: a CUDA device (or ``"cuda"``) to synchronise around the clock; None on the CPU.
        clock: the clock to read.

    Returns:
        list[float]: ``repeats`` timings, in seconds per call.

    Raises:
        TypeError: ``repeats``/``warmup`` not integers, ``min_seconds`` not a number.
        ValueError: ``repeats`` < 1, ``warmup`` or ``min_seconds`` < 0.
    """
    repeats = check_int(repeats, "repeats", minimum=1)
    warmup = check_int(warmup, "warmup", minimum=0)
    min_seconds = check_float(min_seconds, "min_seconds", minimum=0)
    for _ in range(warmup):  # untimed: the first calls allocate memory, fill caches and pick kernels
        fn()
    inner = 1
    if min_seconds > 0:
        while True:
            _sync(device)
            t0 = clock()
            for _ in range(inner):
                fn()
            _sync(device)
            if clock() - t0 >= min_seconds or inner >= 2 ** 20:
                break
            inner *= 2
    out = []
    for _ in range(repeats):
        _sync(device)  # a GPU runs asynchronously: wait until earlier work is done before starting the clock
        t0 = clock()
        for _ in range(inner):
            fn()
        _sync(device)  # ... and until this work is done before stopping it
        out.append((clock() - t0) / inner)
    return out


# --------------------------------------------------------------------------- memory
def peak_memory_bytes(fn: Callable[[], object], device="cpu") -> int:
    """Peak bytes allocated while ``fn()`` runs, above what was allocated before, measured: on the CPU from the
    profiler's allocation events (``torch.profiler``, ``profile_memory=True``), on CUDA from
    ``max_memory_allocated()``. Run ``fn`` once first if it builds caches. On the CPU it reads the profiler's raw
    memory events (``prof.profiler.kineto_results``), an internal PyTorch API that may change between versions: it is
    checked against the version pinned in ``requirements/torch.txt``. The public ``prof.key_averages()`` sums each
    operator's allocations and loses their order in time, so it cannot give a peak. On the CPU it sets the
    environment variable ``KINETO_LOG_LEVEL`` to 6 if unset, so that the profiler does not log each start and stop.
    ValueError: a device other than cpu or cuda."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return max(0, int(torch.cuda.max_memory_allocated(device) - before))
    if device.type != "cpu":
        raise ValueError(f"peak_memory_bytes measures 'cpu' or 'cuda', got {device}")
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # unless set: keep the profiler from logging each start and stop
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    current = peak = 0
    for _, nbytes in events:
        current += nbytes
        peak = max(peak, current)
    return int(peak)


def tensor_bytes(*tensors) -> int:
    """Bytes held by the elements of the given tensors (``numel × element_size``; ``None`` counts 0).

    Raises:
        TypeError: an argument is neither a tensor nor ``None``.
    """
    import torch

    total = 0
    for x in tensors:
        if x is None:
            continue
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"expected torch.Tensor or None, got {type(x).__name__}")
        total += x.numel() * x.element_size()
    return total


def decoder_cache_bytes(cache) -> dict[str, int]:
    """Bytes of the keys and values actually held by a :class:`tmlib.model.transformer.DecoderCache`.

    Args:
        cache: an object with lists ``self_attn`` and ``cross_attn`` of :class:`tmlib.model.attention.KVCache`
            (or ``None`` entries), each with tensors ``k``/``v`` ``(batch, n_heads, t, d_k)`` or ``None``.

    Returns:
        dict with ``"self_attn"`` (the growing per-token part), ``"cross_attn"`` (the projected encoder
        memory, filled once) and ``"total"``, in bytes.

    Raises:
        TypeError: ``cache`` lacks ``self_attn``/``cross_attn`` lists.
    """
    if not (hasattr(cache, "self_attn") and hasattr(cache, "cross_attn")):
        raise TypeError(f"expected a DecoderCache (with self_attn and cross_attn lists), got {type(cache).__name__}")
    self_b = sum(tensor_bytes(kv.k, kv.v) for kv in cache.self_attn if kv is not None)
    cross_b = sum(tensor_bytes(kv.k, kv.v) for kv in cache.cross_attn if kv is not None)
    return {"self_attn": self_b, "cross_attn": cross_b, "total": self_b + cross_b}


def kv_cache_bytes(n_layers: int, d_model: int, n_tokens: int, src_len: int = 0, batch: int = 1,
                   bytes_per_element: int = 4) -> dict[str, int]:
    """The KV cache by formula (§3.2.3): self-attention keeps a key and a value of width d_model per token and layer,
    2·n_layers·d_model·bytes per token; cross-attention the projected memory, 2·n_layers·src_len·d_model·bytes per
    sentence → ``{"per_token", "self_attn", "cross_attn", "total"}`` in bytes (whole batch).

    Raises:
        ValueError: a size out of range. TypeError: a size not an integer.
    """
    # a key and a value of width d_model per layer, for every sentence of the batch
    per_token = (2 * check_int(n_layers, "n_layers", minimum=1) * check_int(d_model, "d_model", minimum=1)
                 * check_int(bytes_per_element, "bytes_per_element", minimum=1) * check_int(batch, "batch", minimum=1))
    self_b = per_token * check_int(n_tokens, "n_tokens", minimum=0)  # grows with every decoded token
    cross_b = per_token * check_int(src_len, "src_len", minimum=0)  # the projected memory, once
    return {"per_token": per_token, "self_attn": self_b, "cross_attn": cross_b, "total": self_b + cross_b}


def load_result(name: str | None = None, device: str = "cpu", folder=None, *, file: str | None = None) -> dict:
    """A benchmark record ``<name>_<device>.json`` (``benchmarks/README.md``), or the record named ``file`` (for the
    files that do not follow that pattern, e.g. ``load_result(file="cpu_recipe.json")``): from ``folder``, else the
    checkout's ``benchmarks/results`` and its :data:`GPU_RESULTS` sub-folder (the GPU run's records,
    ``tools/gpu_check.py``), else downloaded from :data:`RESULTS_URL` (Colab), from the same two places.
    FileNotFoundError: neither. TypeError: neither or both of ``name`` and ``file``."""
    if (name is None) == (file is None):
        raise TypeError("load_result takes a record's name (and device) or file=..., not both or neither")
    if file is not None and (not str(file).endswith(".json") or "/" in str(file)):
        raise ValueError(f"file must be a record's file name, such as 'cpu_recipe.json', got {file!r}")
    filename = str(file) if file is not None else f"{name}_{device}.json"
    candidates = [Path(folder)] if folder is not None else [Path(__file__).resolve().parents[2] / "benchmarks" /
                                                            "results"]
    for base in candidates:
        for path in (base / filename, base / GPU_RESULTS / filename):
            if path.is_file():
                return json.loads(path.read_text(encoding="utf-8"))
    if folder is None:
        import urllib.error
        import urllib.request

        for url in (RESULTS_URL.format(name=filename), RESULTS_URL.format(name=f"{GPU_RESULTS}/{filename}")):
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    return json.loads(response.read().decode("utf-8"))
            except (urllib.error.URLError, OSError, ValueError) as err:
                error = err
        raise FileNotFoundError(f"{filename} is not in {candidates[0]} (nor its {GPU_RESULTS}/) and could not be "
                                f"downloaded from {RESULTS_URL.format(name='')}: {error}; run python "
                                "benchmarks/run_all.py") from None
    raise FileNotFoundError(f"{filename} is not in {folder}; run python benchmarks/run_all.py --out-dir {folder}")
