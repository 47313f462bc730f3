"""Chapter 12's stored benchmark records, read into the tables and short lines that the chapter shows.

The scripts in ``benchmarks/`` store their measurements as JSON records (read with
:func:`~tmlib.analysis.benchmarking.load_result`). The functions here unpack those records, so that the chapter's
cells show the measurements rather than the plumbing. Each ``*_findings`` function returns a
:class:`~tmlib.analysis.findings.Findings`: the numbers (``findings["table"]`` and the like) and the short lines
that report them (``print(findings)``).

* :func:`attention_rows`, :func:`attention_series`, :func:`disturbed_cases`, :func:`exponent_table`,
  :func:`attention_cost_findings`, :func:`attention_time_findings`: attention's time and peak memory against the
  sequence length n;
* :func:`gpu_attention_findings`: a GPU's record, with the fused kernels forced one by one;
* :func:`table1_ratios`, :func:`table1_findings`: self-attention against an LSTM and a convolution;
* :func:`kv_cache_findings`: decoding with and without the KV cache, on the CPU and on a GPU;
* :func:`throughput_findings`: training windows divided by the eager window of the same round;
* :func:`mfu_findings`, :func:`step_profile`: MFU of a training step on a GPU, and where its time goes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tmlib.analysis.findings import Findings

__all__ = ["PASSES", "BASIC_METHODS", "GPU_METHODS", "attention_rows", "attention_series", "disturbed_cases",
           "exponent_table", "attention_cost_findings", "attention_time_findings", "gpu_attention_findings",
           "table1_ratios",
           "table1_findings", "TABLE1_HEADERS", "kv_cache_findings", "KV_HEADERS", "throughput_findings", "mfu_findings", "step_profile"]

#: The passes an attention record times, and how the chapter names them.
PASSES = {"forward": "forward", "forward_backward": "forward + backward"}
#: The attention paths in the order of the chapter's figures: the three that every machine runs (the formula
#: written out, the default fused call, the unfused math backend), and all those timed on a GPU.
BASIC_METHODS = ("explicit", "sdpa", "sdpa_math")
GPU_METHODS = ("explicit", "sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math")
_COLUMNS = {"time": "median_s", "memory": "peak_bytes"}  # the record's column for each plotted quantity


def _ratio_range(ratios) -> str:
    return f"[{min(ratios):.2f}, {max(ratios):.2f}]"


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


def disturbed_cases(record: dict, factor: float = 2.0) -> pd.DataFrame:
    """The cases whose median time is more than ``factor`` times that of the same method and pass at the next
    larger n. Attention's work does not shrink as n grows, so such a case measured the machine (other work slowing
    every repeat), not attention. Returns the rows (``method``, ``pass``, ``n``, ``median_s``, ``times_s``) with
    ``next_n`` and ``next_median_s``, the next larger n and its median."""
    rows = attention_rows(record).sort_values(["method", "pass", "n"])
    groups = rows.groupby(["method", "pass"])
    rows["next_n"], rows["next_median_s"] = groups["n"].shift(-1), groups["median_s"].shift(-1)
    hit = rows[rows["median_s"] > factor * rows["next_median_s"]]
    return hit[["method", "pass", "n", "median_s", "times_s", "next_n", "next_median_s"]].reset_index(drop=True)


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


def attention_cost_findings(memory_record: dict, time_record: dict | None = None, methods=BASIC_METHODS) -> Findings:
    """Attention's peak memory at the largest n, in units of one ``(n, n)`` score matrix of the batch (from
    ``memory_record``), and, given ``time_record``, the findings of :func:`attention_time_findings` (the chapter
    takes the GPU's, a record whose machine ran nothing else).

    Numbers: ``matrices`` (pass → method → peak memory in score matrices), and with ``time_record`` also
    ``doublings`` and ``flat_until``."""
    rows = attention_rows(memory_record)
    n_max = rows["n"].max()
    lines, matrices = [], {}
    for pass_ in PASSES:
        big = rows[(rows["n"] == n_max) & (rows["pass"] == pass_)].set_index("method")
        mats = big["peak_bytes"] / big["formula_one_score_matrix_bytes"]
        matrices[pass_] = mats.to_dict()
        lines.append(f"n = {n_max}, {PASSES[pass_]}: peak memory {mats['explicit']:.1f} score matrices "
                     f"(explicit), {mats['sdpa']:.2f} (sdpa)")
    numbers = {"matrices": matrices}
    if time_record is not None:
        timed = attention_time_findings(time_record, methods)
        numbers.update(timed.numbers)
        lines += list(timed.lines)
    return Findings(numbers, lines)


def attention_time_findings(time_record: dict, methods=BASIC_METHODS, flat: float = 1.5) -> Findings:
    """The time exponent of each doubling of n from 512 on, in both passes, and the flat start of each path:
    the largest n up to which its time stays within ``flat`` times its time at the smallest n.

    Numbers: ``doublings`` (pass → a table: n × method, the exponent log2(t(n) / t(n/2))) and ``flat_until``
    (pass → method → n)."""
    timed = attention_rows(time_record)
    doublings, flat_until = {}, {}
    for pass_ in PASSES:
        t = timed[timed["pass"] == pass_].pivot(index="n", columns="method", values="median_s")[list(methods)]
        doublings[pass_] = np.log2(t / t.shift(1)).loc[1024:]  # from 512 -> 1024 on
        within = (t <= flat * t.iloc[0]).cummin()  # still within `flat` times the first time
        flat_until[pass_] = {m: int(t.index[within[m]].max()) for m in methods}
    steps = " -> ".join(str(n) for n in [512, *doublings["forward"].index])
    n_min = int(timed["n"].min())
    lines = [f"time exponent of each doubling of n ({steps}):",
             f"  {'':>10} {'forward':<18} forward + backward"]
    lines += [f"  {m + ':':>10} " + f"{', '.join(f'{v:.2f}' for v in doublings['forward'][m]):<18} "
              + ", ".join(f"{v:.2f}" for v in doublings["forward_backward"][m]) for m in methods]
    lines += [f"time within {flat:g} times its n = {n_min} value up to n = ({', '.join(methods)}):"]
    lines += [f"  {name}: " + ", ".join(str(flat_until[p][m]) for m in methods) for p, name in PASSES.items()]
    return Findings({"doublings": doublings, "flat_until": flat_until}, lines)


def gpu_attention_findings(record: dict) -> Findings:
    """The GPU's attention record with the fused kernels forced one by one: which forced kernel the default call's
    memory matches, the time exponent of the last doubling of n for each forced kernel, and the explicit path's
    time over each fused kernel's at the largest n.

    Numbers: ``table`` (each method at the largest n: times in ms, peaks in MB and in score matrices),
    ``default_kernels`` and ``doubling`` (method → exponent, forward)."""
    rows = attention_rows(record)
    n_max = rows["n"].max()
    at = rows.pivot_table(index=["method", "n"], columns="pass", values=["median_s", "peak_bytes"])
    methods = [m for m in GPU_METHODS if m in at.index.get_level_values("method")]
    peak = at["peak_bytes"]
    default = [m for m in methods[2:] if (peak.loc[m] == peak.loc["sdpa"]).all().all()]
    lines = [f"the default call's peak memory equals {' and '.join(default)}'s at every n, in both passes"]
    times = at["median_s"]["forward"]
    doubling = np.log2(times.xs(n_max, level="n") / times.xs(n_max // 2, level="n"))
    big = at.xs(n_max, level="n").reindex(methods)
    fused = [m for m in ("sdpa_cudnn", "sdpa_flash", "sdpa_efficient") if m in big.index]
    lines += [f"time exponent from n = {n_max // 2} to {n_max}, forward, each fused kernel forced:",
              "  " + ", ".join(f"{m} {doubling[m]:.2f}" for m in fused),
              f"at n = {n_max}, explicit time / each fused kernel's ({', '.join(m[5:] for m in fused)}):"]
    for pass_, name in PASSES.items():
        t = big[("median_s", pass_)]
        lines.append(f"  {name}: " + ", ".join(f"{t['explicit'] / t[m]:.1f}" for m in fused))
    one_matrix = rows.loc[rows["n"] == n_max, "formula_one_score_matrix_bytes"].iloc[0]
    table = pd.DataFrame({"forward ms": 1e3 * big[("median_s", "forward")],
                          "forward + backward ms": 1e3 * big[("median_s", "forward_backward")],
                          "forward peak, MB": big[("peak_bytes", "forward")] / 1e6,
                          "forward peak, in score matrices": big[("peak_bytes", "forward")] / one_matrix,
                          "forward + backward peak, MB": big[("peak_bytes", "forward_backward")] / 1e6})
    table = table.round(2).rename_axis(f"n = {n_max}")
    return Findings({"table": table, "default_kernels": default, "doubling": doubling.to_dict()}, lines)


# --------------------------------------------------------------------------- the paper's Table 1
def table1_ratios(record: dict) -> pd.DataFrame:
    """time(self-attention) / time(LSTM) of a ``table1`` record, medians of the repeats: n (rows) × d (columns)."""
    p = pd.DataFrame(record["results"]["grid"]).pivot_table(index="n", columns=["d", "layer"], values="median_s")
    return pd.DataFrame({d: p[(d, "self_attention")] / p[(d, "recurrent")]
                         for d in sorted(p.columns.get_level_values("d").unique())})


def table1_findings(record: dict) -> Findings:
    """The ``table1`` grid in three regions, n < d, n = d and n > d: how often attention's median time was above
    the LSTM's, and at how many points every repeat of one layer was faster than every repeat of the other.

    Numbers: ``table`` (the regions), ``grid`` (one row per (d, n): the three layers' medians, ``att / LSTM`` and
    ``clear``: +1 attention faster in every repeat, -1 slower in every repeat, 0 the repeats overlap),
    ``clear_slower`` (the (d, n) where attention was slower in every repeat)."""
    records = record["results"]["grid"]
    t = pd.DataFrame(records).pivot_table(index=["d", "n"], columns="layer", values="median_s")
    reps = {(r["d"], r["n"], r["layer"]): r["times_s"] for r in records}
    att, lstm = ([reps[(d, n, layer)] for d, n in t.index] for layer in ("self_attention", "recurrent"))
    t["att / LSTM"] = t["self_attention"] / t["recurrent"]
    t["clear"] = [1 if max(a) < min(r) else -1 if min(a) > max(r) else 0 for a, r in zip(att, lstm)]
    n_, d_ = t.index.get_level_values("n"), t.index.get_level_values("d")
    t["region"] = np.select([n_ < d_, n_ == d_], ["n < d", "n = d"], "n > d")
    clear_slower = [(int(d), int(n)) for d, n in t.index[t["clear"] < 0]]
    lines = [f"Conv1d faster than attention at {(t['convolutional'] < t['self_attention']).sum()} of {len(t)} "
             f"points, than the LSTM at {(t['convolutional'] < t['recurrent']).sum()}",
             "attention slower than the LSTM in every repeat at (d, n) = "
             + ", ".join(f"({d}, {n})" for d, n in clear_slower)]
    table = t.groupby("region").agg(points=("att / LSTM", "size"), median_ratio=("att / LSTM", "median"),
                                    attention_slower=("att / LSTM", lambda r: (r > 1).sum()),
                                    faster_in_every_repeat=("clear", lambda c: (c > 0).sum()),
                                    slower_in_every_repeat=("clear", lambda c: (c < 0).sum())).round(2)
    table = table.rename(columns=TABLE1_HEADERS)
    return Findings({"table": table, "grid": t, "clear_slower": clear_slower}, lines)


#: The headers of :func:`table1_findings`'s regions table.
TABLE1_HEADERS = {"median_ratio": "median time ratio", "attention_slower": "attention slower (median)",
                  "faster_in_every_repeat": "attention faster in every repeat",
                  "slower_in_every_repeat": "attention slower in every repeat"}


# --------------------------------------------------------------------------- the KV cache
def kv_cache_findings(cpu_record: dict, gpu_record: dict) -> Findings:
    """One cached decoding on each machine (its time a step, timed without the profiler, and the output projection's
    share of a step under the profiler), the spread of the GPU's repeats, and the speed-ups of the lengths both
    machines timed.

    Numbers: ``table`` (CPU and GPU side by side: speed-up, ms per token with and without the cache) and
    ``gpu_spread`` (the largest ratio slower / faster repeat of one GPU case)."""
    lines = []
    for where, record in (("CPU", cpu_record), ("GPU", gpu_record)):
        prof = record["results"]["profile"]
        lines += [f"{where}: cached decoding of {prof['tokens']} tokens, timed without the profiler: "
                  f"{prof['s_per_step'] * 1e3:.2f} ms a step;",
                  f"  under the profiler, the output projection, the largest product: "
                  f"{prof['output_projection_share_of_step']:.1%} of the step"]
    cpu, gpu = (pd.DataFrame(r["results"]["timing"]).set_index("output_tokens") for r in (cpu_record, gpu_record))
    spread = max(max(t) / min(t) for times in gpu["times_s"] for t in times.values())
    lines.append(f"GPU: the slower of two repeats took up to {spread:.2f} times as long as the faster")
    columns = ["speedup", "with_cache_per_token_ms", "without_cache_per_token_ms"]
    table = pd.concat({"CPU": cpu.loc[gpu.index, columns], "GPU": gpu[columns]}, axis=1).round(2)
    table = table.rename(columns=KV_HEADERS, level=1).rename_axis("output tokens")
    return Findings({"table": table, "gpu_spread": float(spread)}, lines)


#: Readable headers for the columns of a ``kv_cache`` record's timing table.
KV_HEADERS = {"same_tokens": "same tokens", "speedup": "speed-up", "with_cache_per_token_ms": "ms per token, cached",
              "without_cache_per_token_ms": "ms per token, uncached"}


# --------------------------------------------------------------------------- training throughput
_VARIANTS = {"nn": "nn.Transformer", "compile": "torch.compile", "bf16": "bf16 autocast",
             "explicit_attention": "explicit attention"}


def throughput_findings(record: dict) -> Findings:
    """A ``throughput`` record as ratios of windows measured side by side: each window of a model or variant divided
    by the course's eager float32 window of the same round, per preset.

    A round runs one window of each, so a change of the machine's load falls on the windows of one round alike,
    while it can change the rate of the same model several times over from round to round: a rate is compared only
    within its round. The column ``every round`` says ``> 1`` (faster in every round) or ``< 1`` (slower) where
    every ratio lies on one side of 1, else ``both sides of 1``: then the record does not show a difference.

    Numbers: ``table`` (rows: preset and what is compared with the eager step; columns: the ratio of each round and
    the verdict; no median, which would read as a result where the rounds disagree), ``eager`` (preset → the eager step's tokens/s in each round) and ``matmul`` (the
    record's measured rate of one large matrix product per dtype, FLOP/s)."""
    rows, eager = {}, {}
    for r in record["results"]:
        windows = {"nn": r["windows_tokens_per_s"]["nn"],
                   **{key: v["windows_tokens_per_s"] for key, v in r.get("variants", {}).items()}}
        base = np.asarray(r["windows_tokens_per_s"]["tmlib"], dtype=float)
        eager[r["preset"]] = base.tolist()
        for key, w in windows.items():
            ratio = np.asarray(w, dtype=float) / base
            verdict = "> 1" if (ratio > 1).all() else "< 1" if (ratio < 1).all() else "both sides of 1"
            rows[(r["preset"], _VARIANTS.get(key, key))] = {
                **{f"round {i + 1}": f"{x:.2f}" for i, x in enumerate(ratio)}, "every round": verdict}
    table = pd.DataFrame(rows).T.rename_axis(["preset", "÷ tmlib eager"])
    small = next(r for r in record["results"] if r["preset"] == "small")
    variants, matmul = small.get("variants", {}), record.get("matmul_flops_per_s", {})
    lines = [f"{r['preset']}: the eager step ran at " + ", ".join(f"{x:.0f}" for x in eager[r["preset"]])
             + " target tokens/s in rounds 1 to 5" for r in record["results"]]
    if "compile" in variants:
        lines.append(f"torch.compile took {variants['compile']['compile_s']:.0f} s before the first step")
    if {"float32", "bfloat16"} <= set(matmul):
        lines.append(f"one large matrix product on this CPU: {matmul['float32'] / 1e9:.0f} GFLOP/s in float32, "
                     f"{matmul['bfloat16'] / 1e9:.0f} in bf16")
    return Findings({"table": table, "eager": eager, "matmul": matmul}, lines)


# --------------------------------------------------------------------------- MFU on a GPU
_RUNS = {"tmlib": "tmlib, eager", "nn": "nn.Transformer, eager", "tmlib_compiled": "tmlib, torch.compile"}


def mfu_findings(record: dict, flops_per_token: float) -> Findings:
    """An ``mfu`` record (GPU) read with ``flops_per_token``, the training FLOPs per target token counted for its
    model: the device's two peaks, the FLOPs of a step, what compiling changed, and a table of each run's rate and
    MFU against the datasheet's peak and against the measured rate of one large product.

    Numbers: ``table``, ``step_tflop`` (the FLOPs of one step, in TFLOP) and ``record_flops_per_token``."""
    from tmlib.analysis.flops import mfu

    res = record["results"]
    models, tokens, peaks = res["models"], res["batch"]["target_tokens"], res["peaks"]
    size, gpu = peaks["measured_matmul_size"], record["machine"]["gpu"]["name"]
    compiled = models["tmlib_compiled"]
    lines = [f"{gpu}: datasheet dense bf16 peak {peaks['datasheet'] / 1e12:.1f} TFLOP/s; an {size} x {size} bf16",
             f"  product ran at {peaks['measured_matmul'] / 1e12:.0f} TFLOP/s",
             f"{models['tmlib']['parameters']:,} parameters, {flops_per_token / 1e6:.1f} MFLOP per target token,",
             f"  {tokens:,} target tokens a step = {flops_per_token * tokens / 1e12:.1f} TFLOP",
             f"torch.compile: {compiled['compile_s']:.0f} s to compile, {compiled['graph_breaks']} graph breaks, "
             f"{res['ratio_compiled_over_eager']:.2f} times as fast",
             f"  as the eager steps timed in its windows ({compiled['eager_tokens_per_s_same_windows'] / 1e3:,.1f}k "
             "tokens/s)", f"tmlib eager / nn.Transformer eager: {res['ratio_tmlib_over_nn']:.2f}"]
    w_tm, w_nn = (models[key].get("windows_tokens_per_s") for key in ("tmlib", "nn"))
    if w_tm and w_nn:
        apart = f"faster in all {len(w_tm)} windows" if min(w_tm) > max(w_nn) else \
            f"slower in all {len(w_tm)} windows" if max(w_tm) < min(w_nn) else "the windows overlap"
        lines += [f"the eager windows (target tokens/s): tmlib {min(w_tm) / 1e3:,.1f}k-{max(w_tm) / 1e3:,.1f}k, "
                  f"nn.Transformer {min(w_nn) / 1e3:,.1f}k-{max(w_nn) / 1e3:,.1f}k:", f"  tmlib {apart}"]
    table = pd.DataFrame({name: {
        "target tokens/s": f"{models[key]['tokens_per_s']:,.0f}",
        "ms per step": f"{1e3 * tokens / models[key]['tokens_per_s']:.1f}",
        "MFU (datasheet peak)": f"{mfu(models[key]['tokens_per_s'], flops_per_token, peaks['datasheet']):.1%}",
        "MFU (measured product rate)":
            f"{mfu(models[key]['tokens_per_s'], flops_per_token, peaks['measured_matmul']):.1%}"}
        for key, name in _RUNS.items()}).T
    return Findings({"table": table, "step_tflop": flops_per_token * tokens / 1e12,
                     "record_flops_per_token": res["flops_per_token"]}, lines)


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
    name, and the rest of the step: smaller kernels and time without a kernel), ``step_ms`` (one step measured without the profiler), ``at_product_rate`` (the
    step's FLOPs at the measured product rate, ms) and ``products_ms``."""
    res = record["results"]
    prof, tokens = res["profile"], res["batch"]["target_tokens"]
    ops = pd.DataFrame([t for t in prof["top"] if t["name"].startswith("aten::")]).set_index("name")
    ms = ops["self_device_ms"]
    step_ms = 1e3 * tokens / res["models"]["tmlib"]["tokens_per_s"]
    at_product_rate = 1e3 * flops_per_token * tokens / res["peaks"]["measured_matmul"]
    products = ms[_PRODUCTS].sum()
    fw, bw = (int(ops.loc[name, "calls"]) for name in _LOG_SOFTMAX)
    lines = [f"one step: {step_ms:.1f} ms; its FLOPs at the measured product rate: {at_product_rate:.1f} ms",
             f"matrix products (mm, addmm): {products:.1f} ms = {products / step_ms:.0%} of the step",
             f"the loss's log-softmax over {res['config']['vocab_size']:,} words, forward and backward: "
             f"{ms[_LOG_SOFTMAX].sum():.1f} ms",
             f"  calls: {fw} forward, {bw} backward ({bw} chunks, each forward run again in the backward)",
             f"copies and conversions: {ms['aten::copy_']:.1f} ms",
             f"GPU kernels of the profiled step: {prof['device_kernel_ms']:.1f} ms, against {step_ms:.1f} ms for "
             f"a step without",
             "  the profiler: the step is not waiting for the host",
             f"the rest of the step: {step_ms - ms.sum():.2f} ms = {prof['device_kernel_ms'] - ms.sum():.2f} ms of "
             f"smaller kernels + {step_ms - prof['device_kernel_ms']:.2f} ms without a kernel"]
    bars = pd.Series({"matrix products (mm, addmm)": products,
                      **{OPERATOR_NAMES.get(n, n): v for n, v in ms.drop(_PRODUCTS).items()},
                      "the rest of the step": step_ms - ms.sum()})
    return Findings({"bars": bars, "step_ms": step_ms, "at_product_rate": at_product_rate,
                     "products_ms": float(products)}, lines)
