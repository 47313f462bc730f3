"""Model FLOP utilisation (MFU) of the paper's base model in training: tmlib vs ``torch.nn.Transformer``, eager and
compiled, and a profile of one step.

What it measures: target tokens per second of a training step (forward under bf16 autocast, the course's
label-smoothed loss :func:`tmlib.training.recipe.translation_loss`, backward, fused Adam) of ``make_model("base")``
(d_model 512, 6 + 6 layers, d_ff 2048, the paper's shared vocabulary of 37,000 tokens) and of
``torch.nn.Transformer`` in the same embeddings (``benchmarks/throughput.py``'s ``NNTransformerModel``), on batches
of ``--batch`` sentences of exactly ``--len`` source and target tokens (no padding: every position computed is a
real token, so the FLOP count is not inflated by padding). Defaults: 512 × 64 = 32,768 target tokens a step, about
the paper's 25,000-token batches (§5.1).

MFU = tokens/s × FLOPs per token / peak (Chowdhery et al. 2022): FLOPs per token from
:func:`tmlib.analysis.flops.flops_per_token` (matrix products, training = 3 × forward), the peak from
:data:`tmlib.analysis.flops.PEAK_FLOPS` by the GPU's name (dense bf16: 989.5 TFLOP/s for an H100 SXM), and also
against the measured FLOP/s of one large bf16 matrix product on the same device (a practical peak). On a CPU (a
rehearsal) only the measured one exists.

How: after ``--warmup`` steps each, ``--repeats`` timed windows of ``--steps`` steps alternate between the models
(CUDA synchronised around each window); the median window is reported. Then one eager tmlib step under
``torch.profiler`` (top kernels by device time, host time) -> ``mfu_profile_<device>.txt`` beside the JSON. Then
``torch.compile`` of the tmlib model (``--compile-backend``, default inductor, from an empty cache): the first step
is timed on its own (``compile_s`` = first step - one steady step) and the compiled model's windows alternate with
the eager model's. The JSON is rewritten after each stage, so a stage that runs out of time loses nothing before it.

Usage::

    python benchmarks/mfu.py --device cuda         # -> results/mfu_cuda.json, results/mfu_profile_cuda.txt
    python benchmarks/mfu.py --device cpu --quick  # seconds: the tiny model, compile backend "eager"
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

import torch

from common import add_common_arguments, output_path, start, write_record
from throughput import NNTransformerModel, _graph_breaks, _sync, matmul_flops_per_s, timed_window
from tmlib.analysis import flops_per_token, gpu_peak_flops
from tmlib.model import PRESETS, make_model
from tmlib.training import make_optimizer, translation_loss

#: The targets of the GPU run (issue 27): MFU at least 40 % (nanoGPT reports about 37 % on an A100).
MFU_TARGET = 0.40


def full_length_batches(n: int, batch: int, length: int, vocab: int, device, seed: int = 0) -> list:
    """``n`` batches ``(src, tgt_in, tgt_out, n_tokens)`` of ``batch`` sentences of exactly ``length`` tokens."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        src = torch.randint(4, vocab, (batch, length), generator=g)
        tgt = torch.randint(4, vocab, (batch, length + 1), generator=g)
        out.append((src.to(device), tgt[:, :-1].to(device), tgt[:, 1:].to(device), batch * length))
    return out


def make_step(dtype):
    """A training step ``step(model, optimizer, src, tgt_in, tgt_out)`` with the forward under ``dtype`` autocast
    (None: float32) and the course's label-smoothed loss (float32 softmax, chunked for large logits)."""
    def step(model, optimizer, src, tgt_in, tgt_out):
        with torch.autocast(src.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = model(src, tgt_in)  # (batch, len, vocab)
        loss = translation_loss(logits, tgt_out, 0, 0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def _device_time(event) -> float:
    """Self device time (µs) of a profiler row, in torch 2.11 and 2.13 spelling."""
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def _is_kernel(event) -> bool:
    """Whether a profiler row is a device kernel: an operator's row repeats its kernels' time, so the device total
    sums kernels only (as the profiler's own "Self CUDA time total" does)."""
    from torch.autograd import DeviceType

    return event.device_type != DeviceType.CPU and not getattr(event, "is_user_annotation", False)


def profile_step(step, model, optimizer, batch, device) -> tuple[dict, str]:
    """One step under ``torch.profiler``: ``({wall_ms, host_ms, device_ms, top[]}, table text)``."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    _sync(device)
    t0 = time.perf_counter()
    with profile(activities=acts) as prof:
        step(model, optimizer, *batch[:3])
        _sync(device)
    wall = time.perf_counter() - t0
    rows = prof.key_averages()
    on_device = device.type == "cuda"
    key = _device_time if on_device else (lambda e: float(e.self_cpu_time_total))
    top = sorted(rows, key=key, reverse=True)[:15]
    summary = {"wall_ms": wall * 1e3, "host_op_ms": sum(e.self_cpu_time_total for e in rows) / 1e3,
               "device_kernel_ms": sum(_device_time(e) for e in rows if _is_kernel(e)) / 1e3 if on_device else None,
               "top": [{"name": e.key, "calls": e.count, "self_device_ms": _device_time(e) / 1e3,
                        "self_host_ms": e.self_cpu_time_total / 1e3} for e in top],
               "note": "profiler overhead included; host_op_ms sums every operator's own CPU time"}
    if on_device:
        summary["device_busy_fraction"] = summary["device_kernel_ms"] / summary["wall_ms"]
    table = None
    for sort in (("self_device_time_total", "self_cuda_time_total") if on_device else ("self_cpu_time_total",)):
        try:
            table = rows.table(sort_by=sort, row_limit=25)
            break
        except (AttributeError, KeyError, ValueError):
            continue
    return summary, table or ""


def measure(models: dict, batches, args, device) -> dict:
    """Median tokens/s of each ``name -> (model, optimizer, step)`` over alternating windows."""
    windows = {k: [] for k in models}
    names = list(models)
    for r in range(args.repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            model, opt, step = models[name]
            windows[name].append(timed_window(model, opt, batches, r * args.steps, args.steps, device, step=step))
    return {k: {"tokens_per_s": statistics.median(v), "windows_tokens_per_s": v} for k, v in windows.items()}


def _mfu(entry) -> str:
    if entry["mfu"] is not None:
        return f"{entry['mfu']:.1%} of the datasheet peak"
    return f"{entry['mfu_vs_measured_matmul']:.1%} of a measured matrix product"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(p)
    p.add_argument("--preset", default="base", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=512, help="sentences per step (default 512)")
    p.add_argument("--len", type=int, default=64, help="source and target tokens per sentence (default 64)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10, help="steps per timed window")
    p.add_argument("--repeats", type=int, default=5, help="timed windows per model (median reported)")
    p.add_argument("--amp", choices=["bf16", "off"], default="bf16", help="autocast of the forward pass")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--compile-backend", default="inductor", help="torch.compile backend (default inductor)")
    p.add_argument("--no-profile", action="store_true")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    device, t0 = start(args)
    if args.quick:
        args.preset, args.batch, args.len, args.steps, args.repeats, args.warmup = "tiny", 8, 16, 2, 2, 1
        args.compile_backend = "eager"  # dynamo's tracing without inductor's code generation: seconds
    cfg = PRESETS[args.preset]
    dtype = torch.bfloat16 if args.amp == "bf16" else None
    torch.manual_seed(0)
    ours = make_model(args.preset, pad_id=0).to(device).train()
    theirs = NNTransformerModel(cfg.vocab_size, cfg.d_model, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers,
                                cfg.d_ff, cfg.dropout, cfg.max_len).to(device).train()
    step = make_step(dtype)
    models = {name: (m, make_optimizer(m), step) for name, m in (("tmlib", ours), ("nn", theirs))}
    batches = full_length_batches(4, args.batch, args.len, cfg.vocab_size, device)
    fpt = flops_per_token(cfg.d_model, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.d_ff, cfg.vocab_size,
                          args.len, args.len)
    size = 8192 if device.type == "cuda" else 512
    measured_peak = matmul_flops_per_s(device, dtype or torch.float32, size=size)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    table_peak = gpu_peak_flops(name, args.amp if dtype else "fp32") if name else None
    peaks = {"datasheet": table_peak[1] if table_peak else None, "datasheet_key": table_peak[0] if table_peak else None,
             "measured_matmul": measured_peak, "measured_matmul_size": size}
    results = {"preset": args.preset, "config": cfg.to_dict(), "batch": {"sentences": args.batch, "len": args.len,
               "target_tokens": args.batch * args.len}, "amp": args.amp, "flops_per_token": fpt, "peaks": peaks,
               "models": {}}

    def rates(entry):
        entry["model_flops_per_s"] = entry["tokens_per_s"] * fpt
        entry["mfu"] = entry["model_flops_per_s"] / peaks["datasheet"] if peaks["datasheet"] else None
        entry["mfu_vs_measured_matmul"] = entry["model_flops_per_s"] / measured_peak
        return entry

    def save(stage):
        m = results["models"]
        best = max((e["mfu"] or e["mfu_vs_measured_matmul"]) for e in m.values())
        results["targets"] = {"mfu_at_least": MFU_TARGET, "best_mfu": best, "mfu_met": best >= MFU_TARGET,
                              "tmlib_at_least_as_fast_as_nn": m["tmlib"]["tokens_per_s"] >= m["nn"]["tokens_per_s"],
                              "mfu_against": "datasheet dense peak" if peaks["datasheet"] else "measured matmul"}
        results["stage"] = stage
        write_record(args, "mfu", "MFU of the base model in training: tmlib vs nn.Transformer, eager and compiled",
                     device, t0, {k: v for k, v in vars(args).items() if k not in ("out", "out_dir")}, results, argv)

    for name_, (m, opt, fn) in models.items():  # warm-up; peak memory of each
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        timed_window(m, opt, batches, 0, args.warmup, device, step=fn)
        results["models"][name_] = {"parameters": sum(p.numel() for p in m.parameters()),
                                    "peak_memory_bytes": torch.cuda.max_memory_allocated(device)
                                    if device.type == "cuda" else None}
    for name_, entry in measure(models, batches, args, device).items():
        results["models"][name_].update(rates(entry))
    m = results["models"]
    results["ratio_tmlib_over_nn"] = m["tmlib"]["tokens_per_s"] / m["nn"]["tokens_per_s"]
    save("eager")
    t = results["models"]
    print(f"{args.preset}: tmlib {t['tmlib']['tokens_per_s']:,.0f} tok/s (MFU {_mfu(t['tmlib'])}), "
          f"nn.Transformer {t['nn']['tokens_per_s']:,.0f} tok/s (MFU {_mfu(t['nn'])})", flush=True)

    if not args.no_profile:
        summary, table = profile_step(step, ours, models["tmlib"][1], batches[0], device)
        results["profile"] = summary
        text_path = output_path(args, "mfu", device).with_name(f"mfu_profile_{device.type}.txt")
        text_path.write_text(f"one eager training step of tmlib's {args.preset} model ({args.batch} x {args.len} "
                             f"tokens, {args.amp}); {summary['wall_ms']:.1f} ms wall\n\n{table}\n", encoding="utf-8")
        results["profile"]["table_file"] = text_path.name
        save("profile")

    if not args.no_compile:
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="tm-inductor-"))  # a cold compile
        compiled = torch.compile(copy.deepcopy(ours), backend=args.compile_backend)
        opt = make_optimizer(compiled)
        breaks = _graph_breaks()
        _sync(device)
        start_s = time.perf_counter()
        step(compiled, opt, *batches[0][:3])  # compiles the forward and backward graphs
        _sync(device)
        first = time.perf_counter() - start_s
        timed_window(compiled, opt, batches, 1, args.warmup, device, step=step)
        pair = measure({"tmlib_compiled": (compiled, opt, step), "tmlib": models["tmlib"]}, batches, args, device)
        entry = rates(pair["tmlib_compiled"])
        steady = args.batch * args.len / entry["tokens_per_s"]
        entry.update(first_step_s=first, compile_s=first - steady, graph_breaks=_graph_breaks() - breaks,
                     backend=args.compile_backend, eager_tokens_per_s_same_windows=pair["tmlib"]["tokens_per_s"])
        results["models"]["tmlib_compiled"] = entry
        results["ratio_compiled_over_eager"] = entry["tokens_per_s"] / pair["tmlib"]["tokens_per_s"]
        save("compiled")
        print(f"compiled ({args.compile_backend}): {entry['tokens_per_s']:,.0f} tok/s (MFU {_mfu(entry)}), "
              f"compile {entry['compile_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
