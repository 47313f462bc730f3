"""The modern Transformer on one budget (chapter 13): a decoder-only language model on the English captions of
Multi30k, trained once per variant with the same steps, batches and schedule.

Variants (``VARIANTS``): the 2017 baseline (post-LN, LayerNorm, ReLU FFN, sinusoids, multi-head attention,
biases), then pre-LN, then *one* change each on top of pre-LN (RMSNorm; SwiGLU with d_ff × 2/3 so that the
weights stay the same; RoPE; ALiBi; no positions; GQA with 2 key/value heads; MQA with 1), and the Llama-style
block with all of them (pre-RMSNorm, SwiGLU, RoPE, GQA, no biases). Six more runs (``LAYOUT_RUNS``) train the
post-LN and the pre-LN model without the learning-rate warm-up, at the recipe's peak (``lr_factor`` divided by
sqrt(warm-up)) and at ten times it (the recipe's ``lr_factor``), and with twice the learning rate: the pre-LN/post-LN
finding of the chapter.

What each run reports (JSON ``runs[]``):

* ``val_loss``: cross-entropy (nats per token) on the validation captions cut like the training ones
  (``--crop`` predictions, i.e. ``<bos>`` plus the first ``crop`` tokens);
* ``extrapolation``: on the *whole* validation captions, the loss at positions ``< crop`` and ``>= crop``
  (positions the model never saw in training; :func:`tmlib.data.captions.loss_by_position`);
* ``parameters``; ``tokens_per_s`` (median over the trainer's logging windows of target tokens per second,
  data included, 2 threads); ``train_seconds``; ``steps`` and ``tokens`` (every variant: the same);
* ``kv_cache_bytes_per_token``: bytes of keys and values the KV cache stores per generated token and sequence
  (float32, measured on a real cache: ``DecoderCache.nbytes() / (batch × positions)``);
* ``history``: training loss every ``log_every`` steps (the curves of the chapter).

Usage (from the repository root; the recorded run held the exclusive CPU lock)::

    flock -x /tmp/tm-cpu.lock .venv/bin/python benchmarks/modern.py
    python benchmarks/modern.py --steps 20 --only baseline llama --out /tmp/modern.json   # a quick try

Writes ``benchmarks/results/modern_cpu.json`` (with :func:`tmlib.machine.machine_info`).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import math
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from tmlib.model import swiglu_hidden_size
from tmlib.data import SentenceBatches, caption_corpus, lm_forward, loss_by_position
from tmlib.machine import machine_info
from tmlib.model import ModelConfig, count_parameters
from tmlib.training import TrainConfig, Trainer
from tmlib.utils import seed_everything
from tmlib.model import DecoderOnly

RESULTS = Path(__file__).resolve().parent / "results"

#: The language model of every variant before its change: 4 layers, d_model 128, 4 heads, d_ff 512.
BASE = ModelConfig(d_model=128, n_heads=4, n_encoder_layers=1, n_decoder_layers=4, d_ff=512, dropout=0.1,
                   max_len=128, vocab_size=2000, pad_id=0)
PRE = dict(norm_first=True)
#: name -> (description, ModelConfig overrides of BASE)
VARIANTS = {
    "baseline": ("2017: post-LN, LayerNorm, ReLU, sinusoids, MHA", {}),
    "pre-LN": ("pre-LN", PRE),
    "+RMSNorm": ("pre-LN + RMSNorm", {**PRE, "norm": "rms"}),
    "+SwiGLU": ("pre-LN + SwiGLU (d_ff × 2/3)", {**PRE, "ffn": "swiglu", "d_ff": swiglu_hidden_size(BASE.d_ff)}),
    "+RoPE": ("pre-LN + RoPE", {**PRE, "positions": "rope"}),
    "+ALiBi": ("pre-LN + ALiBi", {**PRE, "positions": "alibi"}),
    "+no positions": ("pre-LN, no positions at all", {**PRE, "positions": "none"}),
    "+GQA (2 KV heads)": ("pre-LN + grouped-query attention, 2 K/V heads", {**PRE, "n_kv_heads": 2}),
    "+MQA (1 KV head)": ("pre-LN + multi-query attention, 1 K/V head", {**PRE, "n_kv_heads": 1}),
    "Llama-style": ("pre-RMSNorm, SwiGLU, RoPE, GQA (2), no biases",
                    {**PRE, "norm": "rms", "ffn": "swiglu", "d_ff": swiglu_hidden_size(BASE.d_ff), "positions": "rope",
                     "n_kv_heads": 2, "bias": False}),
}
#: The layout experiment: name -> (overrides, warm-up: True = the recipe's / False = none (1 step), lr multiplier;
#: SAME_PEAK: warm-up^-0.5, so that warm-up 1 peaks where the recipe does: factor · d_model^-0.5 · warmup^-0.5).
#: The rows "baseline" (post-LN) and "pre-LN" are the same layouts with the recipe's warm-up and learning rate.
SAME_PEAK = None
LAYOUT_RUNS = {"post-LN, no warm-up": ({}, False, 1.0), "pre-LN, no warm-up": (PRE, False, 1.0),
               "post-LN, 2x lr": ({}, True, 2.0), "pre-LN, 2x lr": (PRE, True, 2.0),
               "post-LN, no warm-up, same peak": ({}, False, SAME_PEAK),
               "pre-LN, no warm-up, same peak": (PRE, False, SAME_PEAK)}


def kv_cache_bytes_per_token(model: DecoderOnly, batch: int = 2, positions: int = 8) -> float:
    """Bytes the KV cache holds per position and sequence, measured on a real cache (float32 model)."""
    model.eval()
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.full((batch, positions), 4, dtype=torch.long), cache=cache)
    return cache.nbytes() / (batch * positions)


def tokens_seen(batches: SentenceBatches, steps: int) -> int:
    """Target tokens (labels) in the first ``steps`` batches of training (epoch after epoch, one batch a step)."""
    total, epoch = 0, 0
    while steps > 0:
        order = batches.batches(epoch)[:steps]
        total += sum(int(batches.lengths[idx].sum()) for idx in order)
        steps -= len(order)
        epoch += 1
    return total


def run(name: str, config: ModelConfig, data: dict, args, warmup_steps: int, lr_multiplier: float = 1.0) -> dict:
    seed_everything(args.seed)
    model = DecoderOnly(config)
    train_config = TrainConfig(model=config, max_tokens=args.max_tokens, warmup_steps=warmup_steps,
                               lr_factor=args.lr_factor * lr_multiplier, label_smoothing=0.0, grad_clip=None, max_steps=args.steps,
                               seed=args.seed, device="cpu", threads=args.threads, amp="off", progress=False,
                               checkpoint_minutes=None, log_every=args.log_every, val_every_epoch=False)
    trainer = Trainer(model, data["train"], data["val"], train_config, forward_fn=lm_forward)
    t0 = time.perf_counter()
    diverged = None
    try:
        trainer.fit()
    except FloatingPointError as err:  # the loss became NaN or infinite: record where
        diverged = str(err)
    seconds = time.perf_counter() - t0
    h = trainer.history
    rates = [r for r in h["tokens_per_s"] if math.isfinite(r)]
    out = {"name": name, "config": config.to_dict(), "warmup_steps": warmup_steps,
           "lr_factor": train_config.lr_factor, "peak_lr": max(h["lr"]) if h["lr"] else None,
           "parameters": count_parameters(model), "steps": trainer.step,
           "tokens": tokens_seen(data["train"], trainer.step),
           "train_seconds": seconds, "tokens_per_s": statistics.median(rates) if rates else None,
           "diverged": diverged, "history": {"step": h["step"], "loss": h["loss"], "lr": h["lr"]}}
    if diverged is None:
        torch.set_num_threads(args.threads)
        out["val_loss"] = h["val_nll"][-1]
        out["extrapolation"] = loss_by_position(model, data["val_full"], split=args.crop)
        out["kv_cache_bytes_per_token"] = kv_cache_bytes_per_token(model)
    print(f"{name:22s} params {out['parameters']:,}  steps {out['steps']}  {seconds:5.1f} s  "
          f"{out['tokens_per_s'] or float('nan'):7,.0f} tok/s  val {out.get('val_loss', float('nan')):.3f}  "
          f"beyond crop {out.get('extrapolation', {}).get('from', float('nan')):.3f}"
          + (f"  DIVERGED: {diverged}" if diverged else ""), flush=True)
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300, help="optimizer steps per run (the same for every variant)")
    p.add_argument("--max-tokens", type=int, default=2000, help="padded tokens per batch")
    p.add_argument("--crop", type=int, default=16, help="training captions are cut to this many predictions")
    p.add_argument("--warmup", type=int, default=100, help="warm-up steps of the runs with warm-up")
    p.add_argument("--lr-factor", type=float, default=0.25, help="factor of the paper's schedule (§5.3)")
    p.add_argument("--vocab", type=int, default=2000, help="English BPE vocabulary size")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: robust on a shared machine)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--only", nargs="*", default=None, help="run only these variants / warm-up runs")
    p.add_argument("--note", default="")
    p.add_argument("--out", default=str(RESULTS / "modern_cpu.json"))
    args = p.parse_args(argv)

    t_start = time.perf_counter()
    load_start = os.getloadavg()[0]
    tokenizer, train_ids, val_ids = caption_corpus(args.vocab)
    ids = dict(pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id, vocab_size=tokenizer.vocab_size)
    data = {"train": SentenceBatches(train_ids, args.max_tokens, seed=args.seed, max_positions=args.crop, **ids),
            "val": SentenceBatches(val_ids, 4000, shuffle=False, max_positions=args.crop, **ids),
            "val_full": SentenceBatches(val_ids, 4000, shuffle=False, **ids)}
    base = dataclasses.replace(BASE, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)
    runs = []
    plan = [(name, overrides, args.warmup, 1.0) for name, (_, overrides) in VARIANTS.items()]
    plan += [(name, overrides, args.warmup if warm else 1, args.warmup ** -0.5 if lr is SAME_PEAK else lr)
             for name, (overrides, warm, lr) in LAYOUT_RUNS.items()]
    for name, overrides, warmup, lr in plan:
        if args.only and name not in args.only:
            continue
        runs.append(run(name, dataclasses.replace(base, **overrides), data, args, warmup, lr))
        runs[-1]["description"] = VARIANTS[name][0] if name in VARIANTS else name
    out = {
        "benchmark": "decoder-only LM on Multi30k English captions: modern variants on one budget",
        "machine": machine_info(), "threads": args.threads, "command": " ".join(shlex.quote(a) for a in sys.argv),
        "note": args.note, "total_seconds": time.perf_counter() - t_start,
        "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
        "data": {"vocab_size": tokenizer.vocab_size, "train_sentences": len(train_ids), "val_sentences": len(val_ids),
                 "crop": args.crop, "train_tokens_per_epoch": data["train"].n_tokens(),
                 "val_tokens": data["val"].n_tokens(), "val_full_tokens": data["val_full"].n_tokens()},
        "recipe": {"steps": args.steps, "max_tokens": args.max_tokens, "warmup_steps": args.warmup,
                   "lr_factor": args.lr_factor, "schedule": "paper §5.3: factor · d_model^-0.5 · min(s^-0.5, s · warmup^-1.5)",
                   "optimizer": "Adam (0.9, 0.98, 1e-9)", "label_smoothing": 0.0, "grad_clip": None,
                   "dropout": BASE.dropout, "seed": args.seed, "precision": "float32"},
        "runs": runs,
    }
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path} ({out['total_seconds'] / 60:.1f} min)")
    return out


if __name__ == "__main__":
    main()
