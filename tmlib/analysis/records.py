"""Chapter 12's stored benchmark records, read into tables, the series of its figures and short lines.

The scripts in ``benchmarks/`` store their measurements as JSON records (read with
:func:`~tmlib.analysis.benchmarking.load_result`). The functions here unpack those records, so that the chapter's
cells show the measurements rather than the plumbing. :func:`step_profile` returns a
:class:`~tmlib.analysis.findings.Findings`: the numbers (``findings["bars"]`` and the like) and the short lines that
report them (``print(findings)``).

* :func:`attention_rows`, :func:`attention_series`, :func:`exponent_table`: attention's time and peak memory
  against the sequence length n;
* :func:`gpu_attention_table`: a GPU's record, with the fused kernels forced one by one, at the largest n;
* :data:`KV_HEADERS`: readable headers for a ``kv_cache`` record's timing table;
* :func:`step_profile`: where the time of a training step on a GPU goes (an ``mfu`` record);
* :func:`repeats_apart`: whether one timing beat another in every repeat, or the repeats overlap.
"""
from __future__ import annotations

import pandas as pd

from tmlib.analysis.findings import Findings

__all__ = ["PASSES", "BASIC_METHODS", "GPU_METHODS", "attention_rows", "attention_series", "exponent_table",
           "gpu_attention_table", "KV_HEADERS", "step_profile", "repeats_apart"]

#: The passes an attention record times, and how the chapter names them.
PASSES = {"forward": "forward", "forward_backward": "forward + backward"}
#: The attention paths in the order of the chapter's figures: the three that every machine runs (the formula
#: written out, the default fused call, the unfused math backend), and all those timed on a GPU.
BASIC_METHODS = ("explicit", "sdpa", "sdpa_math")
GPU_METHODS = ("explicit", "sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math")
_COLUMNS = {"time": "median_s", "memory": "peak_bytes"}  # the record's column for each plotted quantity


# --------------------------------------------------------------------------- attention cost against n
def attention_rows(record: dict) -> pd.DataFrame:
    """The rows of an ``attention_cost`` record as a table: one row per method, pass and n, with the median time
    ``median_s``, the repeats ``times_s``, the measured ``peak_bytes`` and ``formula_one_score_matrix_bytes``."""
    return pd.DataFrame(record["results"]["rows"])


def attention_series(record: dict, pass_: str, quantity: str, methods=None, fits: bool = True) -> list[dict]:
    """The series of one panel of an attention-cost figure, for :func:`tmlib.course.power_law_plot`.

    Args:
        record: an ``attention_cost`` record.
        pass_: ``"forward"`` or ``"forward_backward"``.
        quantity: ``"time"`` (median seconds per call) or ``"memory"`` (measured peak bytes).
        methods: the methods to draw, in order (default: every method of the record, in its order).
        fits: add the record's fitted power law to each series (drawn from its ``fit_min_n`` on).

    Returns:
        One dict per method with ``label``, ``n``, ``y`` and, with ``fits``, ``fit`` and ``fit_min_n``.

    Raises:
        ValueError: an unknown pass or quantity, or a method without rows for that pass.
    """
    if pass_ not in PASSES or quantity not in _COLUMNS:
        raise ValueError(f"pass_ must be one of {list(PASSES)} and quantity one of {list(_COLUMNS)}, "
                         f"got {pass_!r} and {quantity!r}")
    rows = attention_rows(record)
    rows = rows[rows["pass"] == pass_].sort_values("n")
    methods = list(dict.fromkeys(rows["method"])) if methods is None else list(methods)
    fitted = {(f["method"], f["pass"]): f for f in record["results"].get("fits", [])}
    series = []
    for m in methods:
        sel = rows[rows["method"] == m]
        if sel.empty:
            raise ValueError(f"the record has no {pass_} rows for method {m!r}")
        one = {"label": m, "n": sel["n"].to_numpy(), "y": sel[_COLUMNS[quantity]].to_numpy()}
        if fits and (m, pass_) in fitted:
            one.update(fit=fitted[(m, pass_)][quantity], fit_min_n=fitted[(m, pass_)]["fit_min_n"])
        series.append(one)
    return series


def exponent_table(record: dict, quantities=("time", "memory")) -> pd.DataFrame:
    """The fitted exponents of time and peak memory (``t = c·n^p``), each with its 95% interval, one row per method
    and pass (passes named as in the figures: ``forward``, ``forward + backward``); ``quantities`` picks the
    columns (``"time"``, ``"memory"``)."""
    def cell(f):
        return f"{f['exponent']:.2f} [{f['low']:.2f}, {f['high']:.2f}]"

    table = pd.DataFrame([{"method": f["method"], "pass": PASSES[f["pass"]],
                           **{f"{q} exponent [95% interval]": cell(f[q]) for q in quantities}}
                          for f in record["results"]["fits"]])
    return table.set_index(["method", "pass"])


def gpu_attention_table(record: dict) -> pd.DataFrame:
    """The GPU's attention record with the fused kernels forced one by one, at the largest n.

    Returns:
        One row per method (:data:`GPU_METHODS` order): the times of both passes in ms, the peaks in MB, and the
        forward peak in ``(n, n)`` score matrices of the batch; rounded to 2 decimals, index named ``"n = <n>"``."""
    rows = attention_rows(record)
    n_max = rows["n"].max()
    at = rows.pivot_table(index=["method", "n"], columns="pass", values=["median_s", "peak_bytes"])
    methods = [m for m in GPU_METHODS if m in at.index.get_level_values("method")]
    big = at.xs(n_max, level="n").reindex(methods)
    one_matrix = rows.loc[rows["n"] == n_max, "formula_one_score_matrix_bytes"].iloc[0]
    table = pd.DataFrame({"forward ms": 1e3 * big[("median_s", "forward")],
                          "forward + backward ms": 1e3 * big[("median_s", "forward_backward")],
                          "forward peak, MB": big[("peak_bytes", "forward")] / 1e6,
                          "forward peak, in score matrices": big[("peak_bytes", "forward")] / one_matrix,
                          "forward + backward peak, MB": big[("peak_bytes", "forward_backward")] / 1e6})
    return table.round(2).rename_axis(f"n = {n_max}")


# --------------------------------------------------------------------------- the KV cache
#: Readable headers for the columns of a ``kv_cache`` record's timing table.
KV_HEADERS = {"same_tokens": "same tokens", "speedup": "speed-up", "with_cache_per_token_ms": "ms per token, cached",
              "without_cache_per_token_ms": "ms per token, uncached"}


# --------------------------------------------------------------------------- a training step on a GPU
#: Short names for the operators of a profiled training step.
OPERATOR_NAMES = {"aten::copy_": "copies, dtype conversions", "aten::sum": "sums (reductions)",
                  "aten::_log_softmax": "the loss's log-softmax (forward, recomputed)",
                  "aten::_log_softmax_backward_data": "the loss's log-softmax, backward",
                  "aten::native_layer_norm_backward": "layer norm, backward", "aten::add": "additions",
                  "aten::_cudnn_attention_backward": "attention (cuDNN), backward"}
_PRODUCTS = ["aten::mm", "aten::addmm"]
_LOG_SOFTMAX = ["aten::_log_softmax", "aten::_log_softmax_backward_data"]


def step_profile(record: dict, flops_per_token: float) -> Findings:
    """Where one eager training step of an ``mfu`` record spends its GPU time, from the profile of the operators
    with the most device time.

    Numbers: ``bars`` (a Series of milliseconds: the matrix products, each other profiled operator under a short
    name, and the rest of the step: smaller kernels and time without a kernel; they add up to ``step_ms``),
    ``step_ms`` (one step measured without the profiler), ``at_product_rate`` (the step's FLOPs at the measured product rate, ms) and
    ``products_ms``; ``print(findings)`` prints the short lines that report them."""
    res = record["results"]
    prof, tokens = res["profile"], res["batch"]["target_tokens"]
    ops = pd.DataFrame([t for t in prof["top"] if t["name"].startswith("aten::")]).set_index("name")
    ms = ops["self_device_ms"]
    step_ms = 1e3 * tokens / res["models"]["tmlib"]["tokens_per_s"]
    at_product_rate = 1e3 * flops_per_token * tokens / res["peaks"]["measured_matmul"]
    products = ms[_PRODUCTS].sum()
    fw, bw = (int(ops.loc[name, "calls"]) for name in _LOG_SOFTMAX)
    bars = pd.Series({"matrix products (mm, addmm)": products,
                      **{OPERATOR_NAMES.get(n, n): v for n, v in ms.drop(_PRODUCTS).items()},
                      "the rest of the step": step_ms - ms.sum()})
    width = max(len(name) for name in bars.index)
    lines = [f"one step: {step_ms:.1f} ms; its FLOPs at the measured product rate: {at_product_rate:.1f} ms",
             f"GPU kernels of the profiled step: {prof['device_kernel_ms']:.1f} ms, against {step_ms:.1f} ms for "
             f"a step without the profiler",
             "GPU time per operator (the bars of Figure 12.4), ms and share of the step:",
             *(f"  {name:<{width}} {value:5.1f} {value / step_ms:4.0%}" for name, value in bars.items()),
             f"the rest of the step: {step_ms - ms.sum():.2f} ms = {prof['device_kernel_ms'] - ms.sum():.2f} ms of "
             f"smaller kernels + {step_ms - prof['device_kernel_ms']:.2f} ms without a kernel",
             f"the loss's log-softmax over {res['config']['vocab_size']:,} words, forward and backward: "
             f"{ms[_LOG_SOFTMAX].sum():.1f} ms",
             f"  calls: {fw} forward, {bw} backward ({bw} chunks, each forward run again in the backward)"]
    return Findings({"bars": bars, "step_ms": step_ms, "at_product_rate": at_product_rate,
                     "products_ms": float(products)}, lines)


# --------------------------------------------------------------------------- repeated timings
def repeats_apart(a, b) -> str | None:
    """Whether the repeated timings ``a`` beat ``b`` in every repeat, lost in every repeat, or overlap.

    A difference of medians can be noise; two sets of repeats that do not overlap cannot both come from one
    spread (a point of chapter 12's Figure 12.3 gets its asterisk this way).

    Args:
        a, b: the repeated times (seconds, or any one unit) of two measurements, each a non-empty sequence.

    Returns:
        ``"faster"`` when every repeat of ``a`` is shorter than every repeat of ``b`` (``max(a) < min(b)``),
        ``"slower"`` when every repeat of ``a`` is longer (``min(a) > max(b)``), ``None`` when they overlap
        (equal times at the edges count as overlap).

    Raises:
        ValueError: ``a`` or ``b`` holds no times.
    """
    a, b = list(a), list(b)
    if not a or not b:
        raise ValueError(f"each side needs at least one time, got {len(a)} and {len(b)}")
    if max(a) < min(b):
        return "faster"
    if min(a) > max(b):
        return "slower"
    return None
