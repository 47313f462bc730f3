"""The paper's Table 1, measured: per-layer time of self-attention, a recurrent and a convolutional layer.

Table 1 of Vaswani et al. (2017) compares layer types by complexity per layer (self-attention O(n²·d),
recurrent O(n·d²), convolutional O(k·n·d²)), sequential operations (O(1), O(n), O(1)) and path length, and
§4 concludes that self-attention is cheaper than recurrence when n < d.  This script times, for every n and d
of a grid, the forward pass (evaluation mode, ``torch.no_grad``) of

* ``self_attention``: :class:`tmlib.model.attention.MultiHeadAttention` (d_model = d, heads of width
  ``--d-head``, the fused SDPA path), projections included: 8·n·d² + 4·n²·d FLOPs per sequence;
* ``recurrent``: ``torch.nn.LSTM(d, d)``, one layer, PyTorch's fused kernel (oneDNN on the CPU, cuDNN on
  CUDA): 16·n·d² FLOPs (four gates, input and hidden products);
* ``convolutional``: ``torch.nn.Conv1d(d, d, k)``, padding k // 2: 2·k·n·d² FLOPs;

on ``--batch`` sequences, and reports for each d the smallest n at which self-attention becomes slower than
the LSTM (the crossover).  A second part measures the *sequential operations* column at d = ``--seq-d``: an
``nn.LSTMCell`` loop of n dependent steps against one matrix product of the same FLOPs over all positions at
once (what a layer without recurrence can do), with the fused ``nn.LSTM`` and the attention layer beside them.

Usage::

    python benchmarks/table1.py                 # CPU, 2 threads -> results/table1_cpu.json
    python benchmarks/table1.py --device cuda
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch
from torch import nn

from common import add_common_arguments, clock_of, start, write_record
from tmlib.model import MultiHeadAttention
from tmlib.analysis import attention_flops, fit_power_law, time_call

LAYERS = ("self_attention", "recurrent", "convolutional")


def layer_flops(layer: str, n: int, d: int, k: int = 3) -> int:
    """Forward FLOPs (multiply-add = 2) of one sequence through one layer, matrix products only.

    self_attention: 4 projections 8·n·d² plus QKᵀ and weights·V 4·n²·d; recurrent (LSTM): 4 gates × (input
    and hidden products) 16·n·d²; convolutional: 2·k·n·d²; lstm_cell_loop and batched_matmul: 16·n·d² (the
    LSTM's products).
    """
    if layer == "self_attention":
        return attention_flops(n, n, d)["total"]  # 8·n·d² + 4·n²·d
    if layer in ("recurrent", "lstm_cell_loop", "lstm_fused", "batched_matmul"):
        return 16 * n * d * d
    if layer == "convolutional":
        return 2 * k * n * d * d
    raise ValueError(f"unknown layer {layer!r}")


def make_layer(layer: str, n: int, d: int, batch: int, k: int, d_head: int, device, seed: int = 0):
    """A closure running one forward pass of ``layer`` on a ``(batch, n, d)`` input."""
    torch.manual_seed(seed)
    x = torch.randn(batch, n, d, device=device)  # (batch, n, d)
    if layer == "self_attention":
        mha = MultiHeadAttention(d, max(1, d // d_head)).to(device).eval()
        return lambda: mha(x, x, x)[0]  # (batch, n, d)
    if layer in ("recurrent", "lstm_fused"):
        lstm = nn.LSTM(d, d, batch_first=True).to(device).eval()
        return lambda: lstm(x)[0]  # (batch, n, d)
    if layer == "convolutional":
        conv = nn.Conv1d(d, d, k, padding=k // 2).to(device).eval()
        xc = x.transpose(1, 2).contiguous()  # (batch, d, n): Conv1d's layout, prepared outside the timing
        return lambda: conv(xc)  # (batch, d, n)
    if layer == "lstm_cell_loop":
        cell = nn.LSTMCell(d, d).to(device).eval()

        def loop():
            h = torch.zeros(batch, d, device=device)
            c = torch.zeros(batch, d, device=device)
            for t in range(n):  # n dependent steps: step t needs h from step t - 1
                h, c = cell(x[:, t], (h, c))  # (batch, d)
            return h
        return loop
    if layer == "batched_matmul":
        xh = torch.randn(batch * n, 2 * d, device=device)  # all positions' [x_t, h_t] at once
        w = torch.randn(2 * d, 4 * d, device=device) / (2 * d) ** 0.5
        return lambda: xh @ w  # (batch * n, 4d): the LSTM's products, without the dependence between steps
    raise ValueError(f"unknown layer {layer!r}")


def timed(args, layer, n, d, device) -> float:
    fn = make_layer(layer, n, d, args.batch, args.kernel, args.d_head, device)
    with torch.no_grad():
        times = time_call(fn, repeats=args.repeats, warmup=1, min_seconds=args.min_seconds, device=device,
                          clock=clock_of(args))
    return statistics.median(times), times


def grid(args, device) -> tuple[list, list]:
    rows, skipped = [], []
    for d in args.d:
        for layer in LAYERS:
            for n in args.n:
                med, times = timed(args, layer, n, d, device)
                fl = args.batch * layer_flops(layer, n, d, args.kernel)
                rows.append({"layer": layer, "n": n, "d": d, "median_s": med, "times_s": times, "flops": fl,
                             "gflop_per_s": fl / med / 1e9})
                print(f"d={d:5d} {layer:>15} n={n:5d}: {med * 1e3:9.3f} ms ({fl / med / 1e9:6.1f} GFLOP/s)",
                      file=sys.stderr)
                if med > args.max_seconds and n != args.n[-1]:
                    skipped.append({"layer": layer, "d": d, "n": [m for m in args.n if m > n],
                                    "reason": f"one call took {med:.2f} s > --max-seconds {args.max_seconds}"})
                    break
    return rows, skipped


def crossovers(rows, ns, ds) -> list:
    """Per d: the smallest n where self-attention is slower than the LSTM (and than the convolution)."""
    t = {(r["layer"], r["n"], r["d"]): r["median_s"] for r in rows}
    out = []
    for d in ds:
        entry = {"d": d}
        for other in ("recurrent", "convolutional"):
            common = [n for n in ns if ("self_attention", n, d) in t and (other, n, d) in t]
            slower = [n for n in common if t[("self_attention", n, d)] > t[(other, n, d)]]
            entry[f"attention_slower_than_{other}_from_n"] = min(slower) if slower else None
            entry[f"ratio_attention_over_{other}"] = {str(n): t[("self_attention", n, d)] / t[(other, n, d)] for n in common}
        out.append(entry)
    return out


def sequential(args, device) -> tuple[list, list]:
    rows, fits_ = [], []
    methods = ("lstm_cell_loop", "lstm_fused", "batched_matmul", "self_attention")
    for method in methods:
        for n in args.n:
            med, times = timed(args, method, n, args.seq_d, device)
            rows.append({"method": method, "n": n, "d": args.seq_d, "median_s": med, "times_s": times,
                         "per_step_s": med / n if method == "lstm_cell_loop" else None})
            print(f"sequential d={args.seq_d} {method:>15} n={n:5d}: {med * 1e3:9.3f} ms", file=sys.stderr)
        sel = [r for r in rows if r["method"] == method and r["n"] >= args.fit_min_n]
        if len(sel) >= 3:
            f = fit_power_law([r["n"] for r in sel], [r["median_s"] for r in sel])
            fits_.append({"method": method, "fit_min_n": args.fit_min_n, "exponent": f.exponent, "low": f.low,
                          "high": f.high, "stderr": f.stderr, "prefactor": f.prefactor})
    return rows, fits_


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(p)
    p.add_argument("--n", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512, 1024], help="sequence lengths")
    p.add_argument("--d", type=int, nargs="+", default=[64, 128, 256, 512, 1024], help="widths d (= d_model)")
    p.add_argument("--batch", type=int, default=4, help="sequences per call (default 4)")
    p.add_argument("--kernel", type=int, default=3, help="convolution kernel width k (default 3)")
    p.add_argument("--d-head", type=int, default=64, help="attention head width d_k (heads = d / d_k)")
    p.add_argument("--seq-d", type=int, default=256, help="width of the sequential-operations part")
    p.add_argument("--fit-min-n", type=int, default=64, help="fit time ~ n^b on n >= this (sequential part)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-seconds", type=float, default=0.02)
    p.add_argument("--max-seconds", type=float, default=3.0, help="stop growing n once a call takes longer")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    device, t0 = start(args)
    if args.quick:
        args.n, args.d, args.repeats, args.min_seconds, args.seq_d, args.fit_min_n = [8, 16, 32], [32, 64], 1, 0.0, 32, 8
    args.n, args.d = sorted(args.n), sorted(args.d)
    rows, skipped = grid(args, device)
    seq_rows, seq_fits = sequential(args, device)
    cross = crossovers(rows, args.n, args.d)
    for c in cross:
        print(f"d={c['d']:5d}: attention slower than LSTM from n = {c['attention_slower_than_recurrent_from_n']}, "
              f"than Conv1d from n = {c['attention_slower_than_convolutional_from_n']}")
    settings = {"n": args.n, "d": args.d, "batch": args.batch, "kernel": args.kernel, "d_head": args.d_head,
                "seq_d": args.seq_d, "repeats": args.repeats, "min_seconds": args.min_seconds,
                "max_seconds": args.max_seconds, "fit_min_n": args.fit_min_n, "threads": torch.get_num_threads(),
                "clock": args.clock,
                "pass": "forward, eval mode, torch.no_grad, float32", "quick": args.quick}
    results = {"grid": rows, "skipped": skipped, "crossovers": cross, "sequential": seq_rows,
               "sequential_fits": seq_fits}
    write_record(args, "table1", "per-layer forward time: self-attention vs LSTM vs Conv1d (paper Table 1)",
                 device, t0, settings, results, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
