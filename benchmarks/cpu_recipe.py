"""Choosing the CPU recipe of chapter 9: quality per CPU-minute on a machine without native bf16.

The recommended configuration must reach its BLEU within 15 minutes on a 2-core CPU *without* AVX512-BF16,
which trains in float32. This script measures candidate recipes in two separate parts, so that the slow part
does not need a quiet machine:

* ``speed``: training throughput (target tokens per second) of each variant in float32, in interleaved timed
  windows of one process (a change of machine load hits every variant alike). Run it on a quiet machine.
* ``train``: trains one variant for a fixed number of optimizer steps (float32, ``--threads``) and scores it on
  the validation set (plain cross-entropy, greedy and beam-4 BLEU); steps and tokens do not depend on the
  machine's load. ``--snapshots K --interval S`` also saves the weights every S steps over the last K·S steps
  and scores their average (the paper's checkpoint averaging, §6.1).

A variant's budget on the slower machine is its throughput there times 15 minutes. The throughput there is
estimated from ours: a course machine without AVX-512 trained the former recommended recipe (8,000 tokens,
float32) at 2,411 target tokens/s, while this script measures that recipe here in float32; the ratio scales
every variant's throughput (see ``--slow-reference``). Results go to ``benchmarks/results/cpu_recipe.json``
(one entry per run, with the machine).

    python benchmarks/cpu_recipe.py speed --threads 2 --windows 6
    python benchmarks/cpu_recipe.py train --variant v4000 --steps 1400 --threads 1
    python benchmarks/cpu_recipe.py budget        # steps each variant gets in 15 slow-machine minutes
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from tmlib.data import BatchIterator, encode_pairs, filter_by_length, load_multi30k, train_tokenizer
from tmlib.decoding import translate_corpus
from tmlib.training import RECOMMENDED
from tmlib.machine import machine_info
from tmlib.decoding import bleu_scores
from tmlib.model import PRESETS, make_model
from tmlib.training import Trainer

RESULTS = Path(__file__).resolve().parent / "results" / "cpu_recipe.json"
#: The former recommended recipe (8,000-token vocabulary, warm-up 200, factor 0.3, 2,000-token batches).
BASE = dataclasses.replace(RECOMMENDED, model=dataclasses.replace(PRESETS["cpu"], vocab_size=8000), max_tokens=2000,
                           warmup_steps=200, lr_factor=0.3, grad_clip=1.0, ema_decay=None, amp="off",
                           auto_dropout=None, max_minutes=None, progress=False, checkpoint_minutes=None)
#: Target tokens/s of BASE on a course machine without AVX-512 (measured there by a fresh `make book`).
SLOW_REFERENCE_TOKENS_PER_S = 2411.0


def _model(**kw):
    return {"model": dataclasses.replace(BASE.model, **kw)}


#: name -> changes to BASE.
VARIANTS = {
    "base": {},
    "v6000": _model(vocab_size=6000),
    "v4000": _model(vocab_size=4000),
    "v4000-f05": {**_model(vocab_size=4000), "lr_factor": 0.5},
    "v4000-f05-w400": {**_model(vocab_size=4000), "lr_factor": 0.5, "warmup_steps": 400},
    "v4000-ema": {**_model(vocab_size=4000), "ema_decay": 0.998},
    "v4000-t3000": {**_model(vocab_size=4000), "max_tokens": 3000},
    "v4000-drop0": {**_model(vocab_size=4000, dropout=0.0)},
    "v4000-f05-ema": {**_model(vocab_size=4000), "lr_factor": 0.5, "ema_decay": 0.998},
    "f05": {"lr_factor": 0.5},
    "drop0": _model(dropout=0.0),
    "ema": {"ema_decay": 0.998},
    "enc3-dec1": _model(n_encoder_layers=3, n_decoder_layers=1),
    "t3000": {"max_tokens": 3000},
    "w100": {"warmup_steps": 100},
}


def config_of(name: str, **extra):
    return dataclasses.replace(BASE, **VARIANTS[name], **extra)


def _data(config):
    pairs = {s: load_multi30k(s) for s in ("train", "val")}
    tok = train_tokenizer(pairs["train"], config.model.vocab_size)
    ids = dict(pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id, vocab_size=tok.vocab_size)
    train = BatchIterator(filter_by_length(encode_pairs(pairs["train"], tok), config.max_sentence_len),
                          config.max_tokens, seed=config.seed, **ids)
    val = BatchIterator(encode_pairs(pairs["val"], tok), config.max_tokens, shuffle=False, **ids)
    return tok, train, val, pairs["val"]


def _trainer(config, tok, train, val):
    torch.manual_seed(config.seed)
    model = make_model(dataclasses.replace(config.model, vocab_size=tok.vocab_size, pad_id=tok.pad_id))
    return Trainer(model, train, val, config)


def _load_results() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"runs": {}, "speed": {}}


def _update_results(change) -> dict:
    """Read the results file, apply ``change(results)`` and write it back, under a file lock (several
    ``train`` runs may finish at the same time)."""
    import fcntl

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = _load_results()
        change(results)
        RESULTS.write_text(json.dumps(results, indent=1))
    return results


def cmd_speed(args) -> None:
    torch.set_num_threads(args.threads)
    setups = {}
    for name in args.variants:
        config = config_of(name)
        tok, train, val, _ = _data(config)
        trainer = _trainer(config, tok, train, val)
        batches = [train.collate_indices(i) for i in train.batches(0)[: args.steps * (args.windows + 1)]]
        setups[name] = (trainer, batches)
    rates = {n: [] for n in setups}
    for n, (tr, b) in setups.items():  # warm-up window
        for batch in b[: args.steps]:
            tr.train_step(batch)
    for w in range(1, args.windows + 1):
        order = list(setups) if w % 2 else list(setups)[::-1]
        for n in order:
            tr, b = setups[n]
            window = b[w * args.steps:(w + 1) * args.steps]
            t0 = time.perf_counter()
            for batch in window:
                tr.train_step(batch)
            rates[n].append(sum(x.n_tokens for x in window) / (time.perf_counter() - t0))
        print(f"window {w}: " + ", ".join(f"{n} {rates[n][-1]:,.0f}" for n in setups), flush=True)
    speed = {"threads": args.threads, "steps_per_window": args.steps, "windows": args.windows,
             "precision": "float32", "machine": machine_info(),
             "target_tokens_per_s": {n: statistics.median(r) for n, r in rates.items()}, "all_windows": rates}
    results = _update_results(lambda r: r.__setitem__("speed", speed))
    print(json.dumps(results["speed"]["target_tokens_per_s"], indent=1))


def _score(model, tok, val_pairs, beam: bool) -> dict:
    sources, refs = [de for de, _ in val_pairs], [en for _, en in val_pairs]
    out = {"greedy": bleu_scores(translate_corpus(model, tok, sources, beam_size=1, progress=False), refs)}
    if beam:
        out["beam4"] = bleu_scores(translate_corpus(model, tok, sources, beam_size=4, progress=False), refs)
    return {k: {m: round(v[m], 2) for m in ("bleu", "bleu_lowercase", "chrf")} for k, v in out.items()}


def cmd_train(args) -> None:
    torch.set_num_threads(args.threads)
    config = config_of(args.variant, threads=args.threads)
    tok, train, val, val_pairs = _data(config)
    trainer = _trainer(config, tok, train, val)
    t0 = time.perf_counter()
    snapshots = []
    first_snapshot = args.steps - (args.snapshots - 1) * args.interval if args.snapshots else None
    snapshot_steps = {first_snapshot + i * args.interval for i in range(args.snapshots)} if args.snapshots else set()
    curve = []
    for target in sorted({args.steps} | snapshot_steps | set(args.eval_at)):
        trainer.apply_runtime(dataclasses.replace(trainer.config, max_steps=target))
        trainer.fit()
        if target in snapshot_steps:
            snapshots.append({k: v.detach().clone() for k, v in trainer.eval_model().state_dict().items()})
        if target in args.eval_at:
            greedy = _score(trainer.eval_model(), tok, val_pairs, beam=False)["greedy"]
            curve.append({"step": target, "val_nll": round(trainer.history["val_nll"][-1], 4), **greedy})
            print("curve:", curve[-1], flush=True)
    seconds = time.perf_counter() - t0
    h = trainer.history
    model = trainer.eval_model()
    entry = {"variant": args.variant, "changes": {k: (dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v)
                                                  for k, v in VARIANTS[args.variant].items()},
             "steps": trainer.step, "epochs": trainer.epoch,
             "val_nll": round(h["val_nll"][-1], 4), "val_loss": round(h["val_loss"][-1], 4),
             "threads": args.threads, "seconds": round(seconds, 1), "machine": machine_info(),
             "scores_val": _score(model, tok, val_pairs, beam=not args.no_beam), "curve": curve}
    tgt_tokens = train.lengths[:, 1] + 1  # labels per example (<eos> included)
    entry["target_tokens"] = int(sum(int(tgt_tokens[idx].sum()) for e in range(trainer.epoch + 1)
                                     for idx in train.batches(e)[:len(train.batches(e)) if e < trainer.epoch
                                                                  else trainer.batch_in_epoch]))
    if args.snapshots:
        avg = {k: sum(s[k].float() for s in snapshots) / len(snapshots) for k in snapshots[0]}
        model.load_state_dict({k: v.to(snapshots[0][k].dtype) for k, v in avg.items()})
        entry["averaged"] = {"snapshots": args.snapshots, "interval": args.interval,
                             "scores_val": _score(model, tok, val_pairs, beam=not args.no_beam), "curve": curve}
    _update_results(lambda r: r["runs"].__setitem__(args.name or f"{args.variant}@{args.steps}", entry))
    print(json.dumps({k: entry[k] for k in ("variant", "steps", "val_nll", "scores_val", "seconds")}, indent=1))
    if args.snapshots:
        print("averaged:", entry["averaged"]["scores_val"])


def cmd_budget(args) -> None:
    speed = _load_results().get("speed", {}).get("target_tokens_per_s")
    if not speed or "base" not in speed:
        sys.exit("run `speed` with the base variant first")
    scale = args.slow_reference / speed["base"]
    for name, rate in speed.items():
        config = config_of(name)
        tok, train, _, _ = _data(config)
        per_step = train.n_target_tokens() / len(train.batches(0))
        steps = args.minutes * 60 * rate * scale / per_step
        print(f"{name:>16}: {rate:,.0f} tok/s here, {rate * scale:,.0f} on the slower machine, "
              f"{per_step:,.0f} tokens/step -> {steps:,.0f} steps in {args.minutes:g} min")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--variants", nargs="+", default=list(VARIANTS))
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--steps", type=int, default=8, help="steps per timed window")
    s.add_argument("--windows", type=int, default=6)
    t = sub.add_parser("train")
    t.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--name", default=None)
    t.add_argument("--snapshots", type=int, default=0)
    t.add_argument("--interval", type=int, default=100)
    t.add_argument("--no-beam", action="store_true")
    t.add_argument("--eval-at", type=int, nargs="*", default=[],
                   help="also score greedy BLEU and the validation cross-entropy at these steps (a learning curve)")
    b = sub.add_parser("budget")
    b.add_argument("--minutes", type=float, default=15.0)
    b.add_argument("--slow-reference", type=float, default=SLOW_REFERENCE_TOKENS_PER_S)
    args = p.parse_args(argv)
    {"speed": cmd_speed, "train": cmd_train, "budget": cmd_budget}[args.cmd](args)


if __name__ == "__main__":
    main()
