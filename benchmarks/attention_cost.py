"""Attention cost against sequence length: wall time and peak memory, explicit vs fused (SDPA).

For n = 64, 128, …, 4096 query/key positions of width d_k = 64 (``--batch`` × ``--heads`` independent
attention problems), it measures

* ``explicit``: :func:`tmlib.model.attention.scaled_dot_product_attention` with ``need_weights=True``, the formula
  written out: the (n, n) scores and weights are materialised;
* ``sdpa``: :func:`torch.nn.functional.scaled_dot_product_attention`, PyTorch's dispatcher picking a kernel
  (on the CPU a FlashAttention-style tiled kernel, on a GPU flash / memory-efficient / cuDNN);
* ``sdpa_<backend>``: the same call restricted to one backend with :func:`torch.nn.attention.sdpa_kernel`
  (``--backends``; default ``math`` on the CPU, ``flash efficient cudnn math`` on CUDA); a backend that
  cannot run the case is recorded as unavailable with PyTorch's reason;

each in a ``forward`` pass (under ``torch.no_grad``) and a ``forward_backward`` pass (gradients with respect to
Q, K and V).  Time: median of ``--repeats`` timed calls (:func:`tmlib.analysis.benchmarking.time_call`).  Peak
memory: measured with :func:`tmlib.analysis.benchmarking.peak_memory_bytes` (the profiler's allocator events on the CPU,
``torch.cuda.max_memory_allocated`` on CUDA), next to the formula batch·heads·n²·bytes of *one* score
matrix (:func:`tmlib.analysis.costs.attention_matrix_bytes`), which is shown, not substituted.  The exponent of n is
fitted by least squares on log-log data for n ≥ ``--fit-min-n`` with a 95% interval
(:func:`tmlib.analysis.benchmarking.fit_power_law`).

A method stops growing n once one call takes longer than ``--max-seconds`` (the JSON says where and why).

Usage::

    python benchmarks/attention_cost.py                     # CPU, 2 threads -> results/attention_cost_cpu.json
    python benchmarks/attention_cost.py --device cuda       # every SDPA backend, bf16 -> attention_cost_cuda.json
"""
from __future__ import annotations

import argparse
import statistics
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from common import add_common_arguments, clock_of, start, write_record
from tmlib.model import scaled_dot_product_attention
from tmlib.analysis import fit_power_law, peak_memory_bytes, time_call
from tmlib.analysis import attention_matrix_bytes

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def attention_fn(method: str):
    """The attention function of a method name: ``explicit``, ``sdpa`` or ``sdpa_<backend>``.

    Returns a callable ``(q, k, v) -> output`` of shape ``(batch, heads, n, d_v)``.

    Raises:
        ValueError: an unknown method or backend.
    """
    if method == "explicit":
        return lambda q, k, v: scaled_dot_product_attention(q, k, v, need_weights=True)[0]
    if method == "sdpa":
        return F.scaled_dot_product_attention
    if method.startswith("sdpa_") and method[5:] in BACKENDS:
        backend = BACKENDS[method[5:]]

        def run(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v)
        return run
    raise ValueError(f"unknown method {method!r}: use explicit, sdpa or sdpa_<{'|'.join(BACKENDS)}>")


def make_case(method: str, pass_: str, batch: int, heads: int, n: int, d_k: int, dtype, device, seed: int = 0):
    """A closure running one attention call (``pass_`` = ``forward`` or ``forward_backward``) on fresh inputs."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, n, d_k, generator=g).to(device=device, dtype=dtype) for _ in range(3))
    fn = attention_fn(method)
    if pass_ == "forward":
        def run():
            with torch.no_grad():
                return fn(q, k, v)
        return run
    if pass_ != "forward_backward":
        raise ValueError(f"pass must be forward or forward_backward, got {pass_!r}")
    for x in (q, k, v):
        x.requires_grad_(True)
    grad_out = torch.randn(batch, heads, n, d_k, generator=g).to(device=device, dtype=dtype)

    def run():  # gradients returned, not accumulated in .grad: every call allocates (and frees) the same
        return torch.autograd.grad(fn(q, k, v), (q, k, v), grad_out)
    return run


def available(method: str, dtype, device) -> str | None:
    """``None`` if the method runs a small case (forward and backward), else PyTorch's reason."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make_case(method, "forward_backward", 1, 1, 64, 64, dtype, device)()
    except RuntimeError as exc:
        return str(exc).strip().splitlines()[0][:300]
    return None


def measure(args, device, dtype, methods, sizes) -> tuple[list, list, dict]:
    rows, skipped, unavailable = [], [], {}
    for method in methods:
        reason = available(method, dtype, device)
        if reason:
            unavailable[method] = reason
            print(f"{method}: unavailable ({reason})", file=sys.stderr)
            continue
        for pass_ in ("forward", "forward_backward"):
            for n in sizes:
                run = make_case(method, pass_, args.batch, args.heads, n, args.d_k, dtype, device)
                times = time_call(run, repeats=args.repeats, warmup=1, min_seconds=args.min_seconds, device=device,
                                  clock=clock_of(args))
                peak = peak_memory_bytes(run, device)
                med = statistics.median(times)
                rows.append({
                    "method": method, "pass": pass_, "n": n, "median_s": med, "times_s": times,
                    "peak_bytes": peak,
                    "formula_one_score_matrix_bytes": attention_matrix_bytes(
                        args.batch, args.heads, n, bytes_per_element=torch.finfo(dtype).bits // 8),
                })
                print(f"{method:>14} {pass_:>16} n={n:5d}: {med * 1e3:9.3f} ms, peak {peak / 2**20:9.2f} MiB",
                      file=sys.stderr)
                if med > args.max_seconds and n != sizes[-1]:
                    bigger = [m for m in sizes if m > n]
                    skipped.append({"method": method, "pass": pass_, "n": bigger,
                                    "reason": f"one call took {med:.2f} s > --max-seconds {args.max_seconds} at n={n}"})
                    break
    return rows, skipped, unavailable


def fits(rows, fit_min_n: int, confidence: float = 0.95) -> list:
    """Power-law fits of time and peak memory against n (n ≥ fit_min_n), per method and pass."""
    out = []
    for method, pass_ in sorted({(r["method"], r["pass"]) for r in rows}):
        sel = [r for r in rows if r["method"] == method and r["pass"] == pass_ and r["n"] >= fit_min_n]
        entry = {"method": method, "pass": pass_, "fit_min_n": fit_min_n, "n": [r["n"] for r in sel]}
        for quantity, key in (("time", "median_s"), ("memory", "peak_bytes")):
            if len(sel) >= 3 and all(r[key] > 0 for r in sel):
                f = fit_power_law([r["n"] for r in sel], [r[key] for r in sel], confidence)
                entry[quantity] = {"exponent": f.exponent, "low": f.low, "high": f.high, "stderr": f.stderr,
                                   "prefactor": f.prefactor, "confidence": confidence}
            else:
                entry[quantity] = None
        out.append(entry)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(p)
    p.add_argument("--batch", type=int, default=1, help="sequences (default 1)")
    p.add_argument("--heads", type=int, default=2, help="heads per sequence (default 2)")
    p.add_argument("--d-k", type=int, default=64, help="query/key/value width (default 64)")
    p.add_argument("--min-n", type=int, default=64)
    p.add_argument("--max-n", type=int, default=4096)
    p.add_argument("--fit-min-n", type=int, default=256, help="fit the exponent on n >= this (default 256)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-seconds", type=float, default=0.02, help="shortest timed loop (short calls repeat)")
    p.add_argument("--max-seconds", type=float, default=5.0, help="stop growing n once a call takes longer")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                   help="default float32 on the CPU, bfloat16 on CUDA (flash kernels need 16-bit)")
    p.add_argument("--methods", nargs="+", default=None,
                   help="default: explicit sdpa + sdpa_<backend> for each of --backends")
    p.add_argument("--backends", nargs="*", default=None, choices=sorted(BACKENDS),
                   help="SDPA backends to force (default: math on CPU; flash efficient cudnn math on CUDA)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    device, t0 = start(args)
    if args.quick:
        args.max_n, args.repeats, args.min_seconds, args.fit_min_n = 256, 2, 0.0, 64
    dtype = DTYPES[args.dtype or ("bfloat16" if device.type == "cuda" else "float32")]
    backends = args.backends if args.backends is not None else (
        ["flash", "efficient", "cudnn", "math"] if device.type == "cuda" else ["math"])
    methods = args.methods or ["explicit", "sdpa"] + [f"sdpa_{b}" for b in backends]
    sizes = []
    n = args.min_n
    while n <= args.max_n:
        sizes.append(n)
        n *= 2
    rows, skipped, unavailable = measure(args, device, dtype, methods, sizes)
    results = {"rows": rows, "fits": fits(rows, args.fit_min_n), "skipped": skipped, "unavailable": unavailable}
    for f in results["fits"]:
        t, m = f["time"], f["memory"]
        print(f"{f['method']:>14} {f['pass']:>16}: time ~ n^{t['exponent']:.2f} [{t['low']:.2f}, {t['high']:.2f}]"
              + (f", memory ~ n^{m['exponent']:.2f} [{m['low']:.2f}, {m['high']:.2f}]" if m else "")
              if t else f"{f['method']} {f['pass']}: too few sizes to fit")
    settings = {"batch": args.batch, "heads": args.heads, "d_k": args.d_k, "sizes": sizes, "dtype": str(dtype),
                "repeats": args.repeats, "min_seconds": args.min_seconds, "max_seconds": args.max_seconds,
                "fit_min_n": args.fit_min_n, "methods": methods, "threads": torch.get_num_threads(), "clock": args.clock,
                "quick": args.quick}
    write_record(args, "attention_cost", "attention time and peak memory against sequence length n",
                 device, t0, settings, results, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
