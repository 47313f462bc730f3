"""Training throughput: the hand-written tmlib Transformer vs torch.nn.Transformer, same configuration.

Both models get the same embeddings (shared vocabulary, ×√d_model, tied with the generator), the same
sinusoidal positional encoding, dropout, label-smoothed cross-entropy (ε = 0.1) and Adam
(β = (0.9, 0.98), ε = 1e-9, paper §5.3), on the same batches (random ids, random source and target
lengths, right-padded). One *step* is forward + backward + optimizer step; throughput is counted in
non-pad target tokens per second (the unit of the paper's batches, §5.1).

Method: both models are built in the same process; after warm-up steps the timed windows alternate
between them (tmlib, nn, nn, tmlib, ...) so that a change in machine load hits both; each window runs
``--steps`` steps; the reported figure is the median over ``--repeats`` windows.

Variants (``--variants``, on the presets of ``--variant-presets``): the tmlib model again, changed in one
way, each timed in the same alternating windows and reported as a ratio against the plain float32 eager
tmlib model of the same run:

* ``compile``: ``torch.compile(model)`` (inductor).  The first step, which compiles the forward and backward
  graphs, is timed separately (``first_step_s``; ``compile_s`` = first step minus a steady step); the
  inductor cache starts empty (``--compile-cache fresh``) so that the compile time is a cold one.
* ``bf16``: forward and loss under ``torch.autocast(dtype=torch.bfloat16)`` (float32 weights and optimizer);
  on a CPU without native bf16 (``machine.cpu_native_bf16`` false) bf16 is emulated and slow.
* ``explicit_attention``: ``model.keep_attention(True)``, which makes every attention layer take the explicit
  path (``need_weights=True``: scores and weights materialised) instead of the fused SDPA kernel that the plain
  model uses; its ratio is the fused path's speed-up inverted.

Usage (from the repository root)::

    python benchmarks/throughput.py                       # CPU, 2 threads, presets small and base
    python benchmarks/throughput.py --presets small --threads 8 --repeats 7
    python benchmarks/throughput.py --device cuda         # writes benchmarks/results/throughput_cuda.json
    python benchmarks/throughput.py --variants compile bf16 explicit_attention --variant-presets small

The result goes to ``benchmarks/results/throughput_<device>.json`` (see benchmarks/README.md).
"""
from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from tmlib.analysis import transformer_flops
from tmlib.machine import machine_info
from tmlib.model import PRESETS, make_model

RESULTS = Path(__file__).resolve().parent / "results"

# Batch shapes per preset: (sentences, longest source, longest target). Multi30k sentences are ~12-15
# BPE tokens; "base" uses short sequences so that a CPU run stays within minutes.
DEFAULT_SHAPES = {"tiny": (64, 24, 24), "small": (64, 32, 32), "base": (16, 24, 24), "big": (8, 24, 24)}
# Steps per timed window when --steps is not given (a base-model step takes seconds on a CPU).
DEFAULT_STEPS = {"tiny": 8, "small": 4, "base": 2, "big": 1}
VARIANTS = ("compile", "bf16", "explicit_attention")


# --------------------------------------------------------------------------- the torch.nn reference model
def sinusoid_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...) (paper §3.5); ``(max_len, d_model)``."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))  # (d/2,)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class NNTransformerModel(nn.Module):
    """torch.nn.Transformer (post-LN, batch_first) with the same embeddings, PE, dropout and tied generator.

    ``nn.Transformer`` adds a final LayerNorm after each stack, which tmlib's post-LN model does not have;
    they are removed here so that both compute the same function (2 LayerNorms of difference otherwise).
    """

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, n_encoder_layers: int, n_decoder_layers: int,
                 d_ff: int, dropout: float, max_len: int, pad_id: int = 0):
        super().__init__()
        self.pad_id, self.d_model = pad_id, d_model
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.register_buffer("pe", sinusoid_table(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.core = nn.Transformer(d_model, n_heads, n_encoder_layers, n_decoder_layers, d_ff, dropout,
                                   batch_first=True)
        self.core.encoder.norm = None
        self.core.decoder.norm = None
        self.generator = nn.Linear(d_model, vocab_size)
        self.generator.weight = self.embed.weight  # tied (paper §3.4), as tmlib with one shared vocabulary

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) * math.sqrt(self.d_model)  # (batch, len, d_model)
        return self.dropout(x + self.pe[:ids.shape[1]])

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        pad = src == self.pad_id  # (batch, src_len), True = padding (nn's convention)
        n = tgt.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool, device=tgt.device).triu(1)  # True = blocked
        y = self.core(self._embed(src), self._embed(tgt), tgt_mask=causal, src_key_padding_mask=pad,
                      memory_key_padding_mask=pad, tgt_is_causal=True)  # (batch, tgt_len, d_model)
        return self.generator(y)  # (batch, tgt_len, vocab)


# --------------------------------------------------------------------------- batches and one training step
def make_batches(n: int, batch: int, src_len: int, tgt_len: int, vocab: int, seed: int, device) -> list:
    """``n`` batches ``(src, tgt_in, tgt_out, n_tokens)`` with lengths uniform in [len/2, len], right-padded."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        s_lens = torch.randint(max(1, src_len // 2), src_len + 1, (batch,), generator=g)
        t_lens = torch.randint(max(1, tgt_len // 2), tgt_len + 1, (batch,), generator=g)
        s_lens[0], t_lens[0] = src_len, tgt_len  # the longest sentence fixes the padded shape
        src = torch.randint(4, vocab, (batch, src_len), generator=g)
        tgt = torch.randint(4, vocab, (batch, tgt_len + 1), generator=g)
        tgt[:, 0] = 1  # <bos>
        src[torch.arange(src_len)[None, :] >= s_lens[:, None]] = 0  # pad
        pad_t = torch.arange(tgt_len + 1)[None, :] > t_lens[:, None]
        tgt[pad_t] = 0
        tgt[torch.arange(batch), t_lens] = 2  # <eos>
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        out.append((src.to(device), tgt_in.to(device), tgt_out.to(device), int((tgt_out != 0).sum())))
    return out


def train_step(model, optimizer, src, tgt_in, tgt_out) -> None:
    logits = model(src, tgt_in)  # (batch, tgt_len, vocab)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0,
                           label_smoothing=0.1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def train_step_bf16(model, optimizer, src, tgt_in, tgt_out) -> None:
    """:func:`train_step` with the forward pass and the loss under bf16 autocast (weights stay float32)."""
    with torch.autocast(device_type=src.device.type, dtype=torch.bfloat16):
        logits = model(src, tgt_in)  # (batch, tgt_len, vocab), bf16
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0,
                               label_smoothing=0.1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_window(model, optimizer, batches, start: int, steps: int, device, clock=time.perf_counter,
                 step=train_step) -> float:
    """Tokens per second over ``steps`` consecutive steps (batches taken cyclically from ``start``).

    ``clock``: ``time.perf_counter`` (wall clock) or ``time.process_time`` (CPU time of this process,
    which other processes' load hardly changes; meaningful with one thread).  ``step``: the training step
    (:func:`train_step` or :func:`train_step_bf16`).
    """
    tokens = 0
    _sync(device)
    t0 = clock()
    for i in range(steps):
        src, tgt_in, tgt_out, n = batches[(start + i) % len(batches)]
        step(model, optimizer, src, tgt_in, tgt_out)
        tokens += n
    _sync(device)
    return tokens / (clock() - t0)


def device_name(device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _graph_breaks() -> int:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0
    return int(sum(counters["graph_break"].values()))


def make_variant(name: str, ours: nn.Module, args):
    """``(model, step, info)`` of a variant of the tmlib model (a deep copy, same initial weights)."""
    model = copy.deepcopy(ours)
    info: dict = {}
    if name == "compile":
        return torch.compile(model), train_step, info
    if name == "bf16":
        info["cpu_native_bf16"] = machine_info()["cpu_native_bf16"]
        return model, train_step_bf16, info
    if name == "explicit_attention":
        if not hasattr(model, "keep_attention"):
            raise SystemExit("explicit_attention needs Transformer.keep_attention (the switch to need_weights=True)")
        model.keep_attention(True)  # every attention layer: need_weights=True, the explicit (unfused) path
        return model, train_step, info
    raise ValueError(f"unknown variant {name!r}; choose from {VARIANTS}")


def bench_preset(preset: str, shape, args, device, variants=()) -> dict:
    cfg = PRESETS[preset]
    steps = args.steps or DEFAULT_STEPS.get(preset, 2)
    batch, src_len, tgt_len = shape
    max_len = max(cfg.max_len, src_len, tgt_len + 1)
    torch.manual_seed(args.seed)
    ours = make_model(preset, args.vocab, pad_id=0, max_len=max_len).to(device).train()
    theirs = NNTransformerModel(args.vocab, cfg.d_model, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers,
                                cfg.d_ff, cfg.dropout, max_len).to(device).train()
    n_ours = sum(p.numel() for p in ours.parameters())
    n_theirs = sum(p.numel() for p in theirs.parameters())
    models = {"tmlib": ours, "nn": theirs}
    step_fns = {"tmlib": train_step, "nn": train_step}
    infos: dict = {}
    for v in variants:  # copies made before any training step: the same initial weights as "tmlib"
        models[v], step_fns[v], infos[v] = make_variant(v, ours, args)
    optims = {k: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) for k, m in models.items()}
    batches = make_batches(args.n_batches, batch, src_len, tgt_len, args.vocab, args.seed, device)

    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    for name in models:  # warm-up (allocator, kernels, autograd graph caches; compilation)
        if name == "compile":
            breaks = _graph_breaks()
            _sync(device)
            t0 = time.perf_counter()
            train_step(models[name], optims[name], *batches[0][:3])  # compiles forward and backward
            _sync(device)
            infos[name]["first_step_s"] = time.perf_counter() - t0
            infos[name]["graph_breaks"] = _graph_breaks() - breaks
            timed_window(models[name], optims[name], batches, 1, max(0, args.warmup - 1), device, clock)
        else:
            timed_window(models[name], optims[name], batches, 0, args.warmup, device, clock, step_fns[name])
    windows = {name: [] for name in models}
    names = list(models)
    for r in range(args.repeats):
        order = names if r % 2 == 0 else names[::-1]  # tmlib, nn, ... then ..., nn, tmlib
        for name in order:
            windows[name].append(timed_window(models[name], optims[name], batches, r * steps, steps, device, clock,
                                              step_fns[name]))
        if args.verbose:
            print(f"  {preset} repeat {r + 1}/{args.repeats}: " + ", ".join(
                f"{k} {windows[k][-1]:,.0f} tok/s" for k in names), file=sys.stderr)
    med = {k: statistics.median(v) for k, v in windows.items()}
    mean_tokens = statistics.mean(b[3] for b in batches)
    fwd = transformer_flops(cfg.d_model, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.d_ff, args.vocab,
                            src_len, tgt_len, batch)
    flops_per_token = 3 * fwd["total"] / mean_tokens  # training step ≈ 3 × forward, per non-pad target token
    out = {
        "preset": preset,
        "config": {"d_model": cfg.d_model, "n_heads": cfg.n_heads, "n_encoder_layers": cfg.n_encoder_layers,
                   "n_decoder_layers": cfg.n_decoder_layers, "d_ff": cfg.d_ff, "dropout": cfg.dropout,
                   "vocab_size": args.vocab, "norm_first": cfg.norm_first, "tied_embeddings": True},
        "parameters": {"tmlib": n_ours, "nn": n_theirs},
        "batch": {"sentences": batch, "max_src_len": src_len, "max_tgt_len": tgt_len,
                  "mean_target_tokens": mean_tokens},
        "steps_per_window": steps, "warmup_steps": args.warmup, "repeats": args.repeats,
        "tokens_per_s": {"tmlib": med["tmlib"], "nn": med["nn"]},
        "ratio_tmlib_over_nn": med["tmlib"] / med["nn"],
        "windows_tokens_per_s": {"tmlib": windows["tmlib"], "nn": windows["nn"]},
        "flops_per_token": flops_per_token,
        "forward_flops_per_batch": fwd,
        "model_flops_per_s": {k: med[k] * flops_per_token for k in ("tmlib", "nn")},
    }
    if variants:
        out["variants"] = {}
        for v in variants:
            paired = [a / b for a, b in zip(windows[v], windows["tmlib"])]
            entry = {"tokens_per_s": med[v], "ratio_over_eager_fp32": med[v] / med["tmlib"],
                     "median_paired_ratio": statistics.median(paired), "windows_tokens_per_s": windows[v], **infos[v]}
            if v == "compile":
                entry["compile_s"] = entry["first_step_s"] - mean_tokens / med[v]
            out["variants"][v] = entry
    return out


def matmul_flops_per_s(device, dtype, size: int = 1024, repeats: int = 5) -> float:
    """Measured FLOP/s of a square float matrix product on this device (a practical peak for MFU on a CPU)."""
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    for _ in range(2):
        a @ b
    times = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        times.append(time.perf_counter() - t0)
    return 2 * size ** 3 / statistics.median(times)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", nargs="+", default=["small", "base"], choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=None, help="sentences per batch (default: per preset)")
    p.add_argument("--src-len", type=int, default=None, help="longest source length (default: per preset)")
    p.add_argument("--tgt-len", type=int, default=None, help="longest target length (default: per preset)")
    p.add_argument("--vocab", type=int, default=8000, help="shared vocabulary size (Multi30k BPE: 8000)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (CPU)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per model before timing")
    p.add_argument("--steps", type=int, default=None, help="steps per timed window (default: per preset)")
    p.add_argument("--repeats", type=int, default=5, help="timed windows per model (median reported)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall: elapsed time (default); cpu: this process's CPU time, for a shared machine "
                        "(use with --threads 1; CUDA needs wall)")
    p.add_argument("--n-batches", type=int, default=8, help="distinct batches, used cyclically")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--note", default="", help="free text stored in the JSON (e.g. 'shared machine')")
    p.add_argument("--out", default=None, help="output JSON (default: benchmarks/results/throughput_<device>.json)")
    p.add_argument("--verbose", action="store_true", help="print every window to stderr")
    p.add_argument("--variants", nargs="*", default=[], choices=VARIANTS,
                   help="also time these variants of the tmlib model (ratios against the plain float32 eager one)")
    p.add_argument("--variant-presets", nargs="*", default=None,
                   help="presets that get the variants (default: all of --presets)")
    p.add_argument("--compile-cache", choices=["fresh", "shared"], default="fresh",
                   help="fresh: an empty inductor cache, so compile_s is a cold compile (default)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    if args.clock == "cpu" and device.type != "cpu":
        raise SystemExit("--clock cpu measures CPU time: use it with --device cpu")
    torch.set_num_threads(args.threads)
    if "compile" in args.variants and args.compile_cache == "fresh":
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="tm-inductor-")
    t_start = time.perf_counter()
    variant_presets = args.presets if args.variant_presets is None else args.variant_presets
    results = []
    for preset in args.presets:
        default = DEFAULT_SHAPES.get(preset, (32, 24, 24))
        shape = (args.batch or default[0], args.src_len or default[1], args.tgt_len or default[2])
        res = bench_preset(preset, shape, args, device, args.variants if preset in variant_presets else ())
        results.append(res)
        t = res["tokens_per_s"]
        print(f"{preset:>6}: tmlib {t['tmlib']:,.0f} tok/s | nn.Transformer {t['nn']:,.0f} tok/s | "
              f"ratio {res['ratio_tmlib_over_nn']:.3f}")
        for v, e in res.get("variants", {}).items():
            extra = f", compile {e['compile_s']:.0f} s" if "compile_s" in e else ""
            print(f"{'':>6}  {v}: {e['tokens_per_s']:,.0f} tok/s, x{e['ratio_over_eager_fp32']:.3f} vs eager fp32{extra}")
    matmul = {str(dt_).replace("torch.", ""): matmul_flops_per_s(device, dt_) for dt_ in (torch.float32, torch.bfloat16)}
    record = {
        "benchmark": "training throughput, target tokens/s (forward + backward + Adam step)",
        "device": device.type,
        "device_name": device_name(device),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "clock": args.clock,
        "cpu_count": os.cpu_count(),
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python benchmarks/throughput.py " + shlex.join(sys.argv[1:] if argv is None else argv),
        "note": args.note,
        "machine": machine_info(),
        "settings": {"variants": args.variants, "variant_presets": variant_presets,
                     "compile_cache": args.compile_cache, "seed": args.seed, "n_batches": args.n_batches,
                     "vocab": args.vocab},
        "matmul_flops_per_s": matmul,
        "elapsed_s": round(time.perf_counter() - t_start, 2),
        "results": results,
    }
    out = Path(args.out) if args.out else RESULTS / f"throughput_{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
