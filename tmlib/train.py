"""Command line: train the Multi30k German→English translator of notebook 09.

    python -m tmlib.train --preset small --max-minutes 15 --out runs/multi30k
    python -m tmlib.train --out runs/multi30k --resume --max-minutes 30   # continue the same run

Writes into ``--out``: ``checkpoint.pt`` (model, optimizer, scheduler, position, RNG states, tokenizer,
config, history; atomic), ``history.json``, ``tokenizer.json`` and ``config.json``. Translate with the
checkpoint through :func:`tmlib.training.load_trained` (or ``python -m tmlib.translate``).
"""
from __future__ import annotations

import argparse
import json
import sys

from .training import TrainConfig

__all__ = ["main", "build_parser", "RECOMMENDED"]

#: The configuration recommended for a CPU budget of 15 minutes (notebook 09, benchmarks/translate.py);
#: ``python -m tmlib.train`` uses it when no option is given. The paper's recipe with the changes that a
#: small model and a short budget (a few thousand steps instead of 100,000) need:
#:
#: * the ``"small"`` preset cut to 2 + 2 layers and d_ff 512 (4.7M parameters instead of 7.6M);
#: * batches of 2000 padded tokens (more updates per minute than the paper's 25,000);
#: * a short warm-up (200 steps instead of 4000) and a factor 0.3 on the schedule (peak lr 1.33e-3);
#: * gradient clipping at norm 1, a guard against the loss spikes of a post-LN model;
#: * bf16 autocast on CPUs that compute bf16 natively (``cpu_amp``; ignored elsewhere).
#:
#: Measured on the course machine (AMD EPYC, AVX512-BF16, 2 cores), validation NLL after epochs 1, 2, 3:
#: 3 + 3 layers / d_ff 1024 (12 min, 1 thread, shared): 239 steps, NLL 4.28 at the end;
#: 2 + 2 / 3000 tokens / factor 0.6, float32, 2 threads: 3,540 target tokens/s, 4.41 / 3.72 / 3.32;
#: the same with bf16: about 1.5x the tokens/s (5,400 vs 3,650 in a 35-step A/B), 4.40 / 3.70 / 3.33;
#: then, bf16, 1 thread each, two runs side by side: factor 1.0: 4.45 / 3.96 / 3.77;
#: 2000 tokens, factor 0.6: 4.05 / 3.53 / 3.18; 1500 tokens, factor 0.6: 3.93 / 3.52;
#: 2000 tokens, factor 0.4: 3.97 / 3.00; factor 0.3: 3.98 / 2.90 (this configuration); factor 0.2: 4.15 / 3.02.
RECOMMENDED = TrainConfig(preset="small", model_overrides={"n_encoder_layers": 2, "n_decoder_layers": 2, "d_ff": 512},
                          vocab_size=8000, max_tokens=2000, warmup_steps=200, lr_factor=0.3, grad_clip=1.0,
                          cpu_amp=True)


def build_parser() -> argparse.ArgumentParser:
    d = RECOMMENDED
    p = argparse.ArgumentParser(
        prog="python -m tmlib.train",
        description="Train a Transformer (Vaswani et al. 2017) on Multi30k German→English with the paper's "
                    "recipe: Adam (0.9, 0.98, 1e-9), warm-up + inverse-square-root learning rate, label "
                    "smoothing 0.1, token-count batches. Stops at the first budget reached.",
        epilog="Data: set TMLIB_DATA_DIR to a folder holding multi30k/*.gz (or pass --data-dir); otherwise the "
               "files are downloaded to the user cache. Example: python -m tmlib.train --preset small "
               "--max-minutes 15 --threads 2 --out runs/multi30k",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("run")
    g.add_argument("--out", default="runs/multi30k", help="run folder (checkpoint.pt, history.json, tokenizer.json)")
    g.add_argument("--resume", action="store_true",
                   help="continue from OUT/checkpoint.pt with its stored config (only the budgets change)")
    g.add_argument("--data-dir", default=None, help="folder holding multi30k/*.gz (otherwise $TMLIB_DATA_DIR, "
                                                    "else the user cache)")
    g.add_argument("--device", default=d.device, help="auto, cpu or cuda")
    g.add_argument("--threads", type=int, default=d.threads, help="CPU threads for torch (default: torch's)")
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    g.add_argument("--progress-interval", type=float, default=d.progress_interval,
                   help="seconds between progress-bar refreshes")
    g.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every,
                   help="steps between checkpoints (also after every epoch and at the end)")
    b = p.add_argument_group("budgets (the first one reached stops training)")
    b.add_argument("--max-minutes", type=float, default=None, help="wall-clock minutes of training")
    b.add_argument("--max-steps", type=int, default=None, help="optimizer steps")
    b.add_argument("--max-epochs", type=int, default=None, help="passes over the training set")
    m = p.add_argument_group("model")
    m.add_argument("--preset", default=d.preset, help="a key of tmlib.presets.PRESETS")
    m.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a model field of the preset, e.g. --override d_ff=512 (repeatable)")
    m.add_argument("--vocab-size", type=int, default=d.vocab_size, help="shared BPE vocabulary size")
    m.add_argument("--max-len", type=int, default=d.max_len, help="drop training pairs longer than this (tokens)")
    r = p.add_argument_group("recipe (paper §5)")
    r.add_argument("--max-tokens", type=int, default=d.max_tokens, help="padded tokens per batch")
    r.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    r.add_argument("--lr-factor", type=float, default=d.lr_factor, help="multiplier of the paper's schedule")
    r.add_argument("--label-smoothing", type=float, default=d.label_smoothing)
    r.add_argument("--grad-clip", type=float, default=d.grad_clip, help="max gradient norm (default: none)")
    r.add_argument("--no-amp", action="store_true", help="no bf16 autocast on CUDA")
    r.add_argument("--cpu-amp", action=argparse.BooleanOptionalAction, default=d.cpu_amp,
                   help="bf16 autocast on a CPU with native bf16 (AVX512-BF16/AMX); ignored on other CPUs")
    return p


def _parse_override(text: str):
    key, sep, value = text.partition("=")
    if not sep:
        raise SystemExit(f"--override expects KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def config_from_args(args) -> TrainConfig:
    """The :class:`~tmlib.training.TrainConfig` described by parsed command-line arguments."""
    overrides = dict(RECOMMENDED.model_overrides)
    overrides.update(_parse_override(o) for o in args.override)
    return TrainConfig(
        preset=args.preset, model_overrides=overrides, vocab_size=args.vocab_size, max_len=args.max_len,
        warmup_steps=args.warmup_steps, lr_factor=args.lr_factor, label_smoothing=args.label_smoothing,
        grad_clip=args.grad_clip, max_tokens=args.max_tokens, max_steps=args.max_steps,
        max_epochs=args.max_epochs, max_minutes=args.max_minutes, seed=args.seed, device=args.device,
        threads=args.threads, amp=not args.no_amp, cpu_amp=args.cpu_amp, checkpoint_every=args.checkpoint_every,
        progress=not args.no_progress, progress_interval=args.progress_interval)


def main(argv=None) -> int:
    """Entry point of ``python -m tmlib.train``; returns the exit status."""
    args = build_parser().parse_args(argv)
    config = config_from_args(args)
    if config.max_minutes is None and config.max_steps is None and config.max_epochs is None:
        build_parser().error("give at least one budget: --max-minutes, --max-steps or --max-epochs")
    from .training import run_training

    trainer = run_training(config, args.out, resume=args.resume, data_dir=args.data_dir)
    h = trainer.history
    val = f", val loss {h['val_loss'][-1]:.3f} (NLL {h['val_nll'][-1]:.3f})" if h["val_loss"] else ""
    print(f"done: {trainer.step} steps, {trainer.epoch} epochs, {trainer.elapsed_s / 60:.1f} min{val}; "
          f"checkpoint: {trainer.checkpoint_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
