"""Measuring speed and memory honestly: timers, peak-memory probes, power-law fits, cache sizes.

Chapter 11 and the scripts in ``benchmarks/`` measure what the slides only state: that self-attention
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
    """Fit t ≈ a·n^b by ordinary least squares on (log n, log t) and give a confidence interval for b.

    The model is log t_i = log a + b·log n_i + ε_i.  The slope's standard error is
    ``s / sqrt(Σ (x_i - x̄)²)`` with ``s² = Σ residual² / (k - 2)`` (k points), and the interval is
    ``b ± t_{(1+confidence)/2, k-2} · stderr`` (Student's t quantile from :mod:`scipy.stats`).  The interval
    covers the noise *around the straight line*: pass one value per size (e.g. the median of repeats;
    repeats of one size are not independent draws) and only the sizes where the power law should hold
    (the large-n part; small sizes are dominated by fixed overheads).

    Args:
        n: sizes, 1-D array-like of positive finite numbers, at least 3 values, not all equal.
        t: measurements (seconds, bytes, ...), 1-D, same length, positive and finite.
        confidence: level of the interval, in (0, 1); default 0.95.

    Returns:
        :class:`PowerLawFit` (unpacks as ``exponent, low, high``).

    Raises:
        ValueError: lengths differ, fewer than 3 points, non-positive or non-finite values, all ``n``
            equal, or ``confidence`` outside (0, 1).
        TypeError: non-numeric input.

    Source: the standard simple-regression slope interval (e.g. Montgomery & Runger, "Applied Statistics
    and Probability for Engineers", §11.4).
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
    """Seconds per call of ``fn()``: ``warmup`` untimed calls, then ``repeats`` timed measurements.

    A measurement times a loop of ``inner`` calls and divides by ``inner``; ``inner`` is 1 unless
    ``min_seconds`` > 0, in which case it is doubled (during warm-up) until one loop lasts at least
    ``min_seconds`` (so that microsecond calls are not drowned by the clock's resolution).  On CUDA the
    device is synchronised before starting and before stopping the clock, since kernels run
    asynchronously.

    Args:
        fn: a callable without arguments (a closure over the inputs).
        repeats: number of timed measurements (int ≥ 1).
        warmup: untimed calls first (int ≥ 0): allocator, oneDNN/cuBLAS kernel selection, autotuning.
        min_seconds: smallest duration of one timed loop (≥ 0).
        device: ``torch.device``/str to synchronise (CUDA), or ``None``.
        clock: the clock, default :func:`time.perf_counter` (wall); :func:`time.process_time` gives
            the process's CPU time.

    Returns:
        list of ``repeats`` floats, seconds per call (report the median).

    Raises:
        TypeError: ``repeats``/``warmup`` not integers, ``min_seconds`` not a number.
        ValueError: ``repeats`` < 1, ``warmup`` < 0 or ``min_seconds`` < 0.
    """
    repeats = check_int(repeats, "repeats", minimum=1)
    warmup = check_int(warmup, "warmup", minimum=0)
    min_seconds = check_float(min_seconds, "min_seconds", minimum=0)
    for _ in range(warmup):
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
        _sync(device)
        t0 = clock()
        for _ in range(inner):
            fn()
        _sync(device)
        out.append((clock() - t0) / inner)
    return out


# --------------------------------------------------------------------------- memory
def peak_memory_bytes(fn: Callable[[], object], device="cpu") -> int:
    """Peak memory allocated while ``fn()`` runs, above what was allocated before it, in bytes (measured).

    * CPU: runs ``fn`` under ``torch.profiler.profile(profile_memory=True)`` and replays the allocator's
      events (every allocation and free with its size, in time order); the peak of their running sum is
      the answer.  Memory that ``fn`` returns and keeps alive counts, memory freed before it returns
      counts only while it was held.
    * CUDA: ``torch.cuda.reset_peak_memory_stats``, then ``max_memory_allocated() - memory_allocated()``
      measured before the call (the caching allocator's bookkeeping, not ``nvidia-smi``'s reserved pool).

    Run ``fn`` once before measuring if its first call allocates caches (oneDNN, cuBLAS workspaces).

    Args:
        fn: callable without arguments.
        device: ``"cpu"``, ``"cuda"`` or a ``torch.device``.

    Returns:
        int, bytes (≥ 0).

    Raises:
        ValueError: a device type other than cpu or cuda.

    Source: ``torch.profiler`` memory events (PyTorch docs, "Profiling memory consumption"); CUDA:
    ``torch.cuda.max_memory_allocated``.
    """
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
    """The KV cache's size by formula, for an encoder-decoder with ``n_layers`` decoder layers.

    Per decoded token and layer, self-attention keeps one key and one value of width
    h·d_k = d_model: ``2 · n_layers · d_model · bytes_per_element`` bytes per token.  Cross-attention
    keeps the projected encoder memory, ``2 · n_layers · src_len · d_model · bytes_per_element``, once
    per sentence, whatever the output length.

    Args:
        n_layers: decoder layers (int ≥ 1).
        d_model: model width (= n_heads · d_k) (int ≥ 1).
        n_tokens: target positions in the cache (int ≥ 0).
        src_len: source positions (int ≥ 0; 0 for a decoder-only model).
        batch: sentences (int ≥ 1).
        bytes_per_element: 4 for float32, 2 for bf16/fp16.

    Returns:
        dict with ``"per_token"`` (bytes per target token, whole batch), ``"self_attn"``, ``"cross_attn"``
        and ``"total"``, in bytes.

    Raises:
        ValueError: a size out of range.  TypeError: a size that is not an integer.

    Source: paper §3.2.3 (the decoder attends to earlier positions, whose keys and values do not change).
    """
    # a key and a value of width d_model per layer, for every sentence of the batch
    per_token = (2 * check_int(n_layers, "n_layers", minimum=1) * check_int(d_model, "d_model", minimum=1)
                 * check_int(bytes_per_element, "bytes_per_element", minimum=1) * check_int(batch, "batch", minimum=1))
    self_b = per_token * check_int(n_tokens, "n_tokens", minimum=0)  # grows with every decoded token
    cross_b = per_token * check_int(src_len, "src_len", minimum=0)  # the projected memory, once
    return {"per_token": per_token, "self_attn": self_b, "cross_attn": cross_b, "total": self_b + cross_b}


def load_result(name: str, device: str = "cpu", folder=None) -> dict:
    """Read a benchmark result ``benchmarks/results/<name>_<device>.json`` (see ``benchmarks/README.md``).

    Looks in ``folder`` if given, else in the repository's ``benchmarks/results`` next to this package (a
    checkout, where tmlib is installed in editable mode), and then in its :data:`GPU_RESULTS` sub-folder, where
    the GPU run's records are (``tools/gpu_check.py``: ``translate_cuda``, ``fp16_cuda``, ``mfu_cuda``,
    ``cuda_tests_cuda``, ``gpu_check_cuda``...); if the file is not there and no ``folder`` was given,
    downloads the committed copy from :data:`RESULTS_URL` (Colab), in the same two places.

    Args:
        name: the benchmark, e.g. ``"attention_cost"``, ``"table1"``, ``"kv_cache"``, ``"throughput"``, ``"mfu"``.
        device: ``"cpu"`` or ``"cuda"``.
        folder: a folder holding the JSON files.

    Returns:
        the parsed JSON record (dict with ``benchmark``, ``device``, ``machine``, ``command``, ``results``...).

    Raises:
        FileNotFoundError: the file is neither on disk nor downloadable.
    """
    filename = f"{name}_{device}.json"
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
