"""Does ``amp="auto"`` pick the faster precision on every kind of CPU?

On a CPU, ``amp="auto"`` times one forward and backward pass of the model's first training batch in float32 and
under bf16 autocast (:func:`tmlib.training.precision.time_precisions`, a few seconds) and keeps bf16 only where it
is at least ``BF16_MIN_SPEEDUP`` times faster. This script checks that choice against what training actually does,
on the recommended chapter 9 configuration, under several instruction sets that one machine can imitate:

* ``native``: the machine as it is;
* ``avx512-no-bf16``: oneDNN capped at AVX512_CORE_VNNI (``ONEDNN_MAX_CPU_ISA``), the class of Intel Xeons from
  Skylake to Ice Lake, where oneDNN emulates bf16 (and ``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` still
  answers yes);
* ``avx2``: PyTorch's AVX2 kernels and oneDNN capped at AVX2 (``ATEN_CPU_CAPABILITY=avx2``), an older or smaller
  CPU.

Each setting runs in its own process (the variables must be set before torch starts): the probe's timings and
choice, then training throughput in float32 and in bf16 (``Trainer.train_step`` on the same batches, in
interleaved windows), and whether the probe chose the precision that trains faster. Results:
``benchmarks/results/precision_probe_cpu.json``. Run it on a quiet machine:

    python benchmarks/precision_probe.py --threads 2 --windows 3 --steps 8
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SETTINGS = {
    "native": {},
    "avx512-no-bf16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}


def measure(threads: int, windows: int, steps: int, quick: bool) -> dict:
    """In this process: the probe's choice and the measured training throughput of both precisions."""
    import dataclasses

    import torch

    from tmlib.analysis import machine_info
    from tmlib.data import BatchIterator, encode_pairs, filter_by_length, load_multi30k, train_tokenizer
    from tmlib.model import make_model
    from tmlib.training import RECOMMENDED, MixedPrecision, Trainer

    torch.set_num_threads(threads)
    config = dataclasses.replace(RECOMMENDED, amp="auto", progress=False, threads=threads, checkpoint_minutes=None)
    pairs = load_multi30k("train")[: 2000 if quick else 29000]
    tokenizer = train_tokenizer(pairs, vocab_size=config.model.vocab_size)
    examples = filter_by_length(encode_pairs(pairs, tokenizer), config.max_sentence_len)
    batches = BatchIterator(examples, max_tokens=config.max_tokens, seed=config.seed, pad_id=tokenizer.pad_id,
                            bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id, vocab_size=tokenizer.vocab_size)
    torch.manual_seed(0)
    model_config = dataclasses.replace(config.model, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)
    trainer = Trainer(make_model(model_config), batches, None, config)
    start = time.perf_counter()
    trainer._choose_precision()  # what fit() does first with amp="auto" on a CPU
    probe_s = time.perf_counter() - start
    chosen = trainer.amp
    order = batches.batches(0)
    rates = {"float32": [], "bfloat16": []}
    for w in range(windows):  # interleaved windows: a busy moment of the machine slows both precisions
        for name, amp in (("float32", "off"), ("bfloat16", "bf16"))[:: 1 if w % 2 == 0 else -1]:
            trainer.amp = MixedPrecision(amp, torch.device("cpu"))
            idx = order[(w * steps) % len(order):][:steps]
            tokens, t0 = 0, time.perf_counter()
            for i in idx:
                batch = batches.collate_indices(i)
                trainer.train_step(batch)
                tokens += batch.n_tokens
            rates[name].append(tokens / (time.perf_counter() - t0))
    median = {k: statistics.median(v) for k, v in rates.items()}
    faster = "bfloat16" if median["bfloat16"] > median["float32"] else "float32"
    return {"machine": machine_info(), "probe": chosen.record(), "probe_wall_s": round(probe_s, 2),
            "probe_line": chosen.describe(),
            "training_target_tokens_per_s": {k: [round(r) for r in v] for k, v in rates.items()},
            "training_median_target_tokens_per_s": {k: round(v) for k, v in median.items()},
            "bf16_over_float32": round(median["bfloat16"] / median["float32"], 3),
            "faster_in_training": faster, "probe_chose_the_faster": chosen.name == faster}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--windows", type=int, default=3, help="timed windows per precision (interleaved)")
    parser.add_argument("--steps", type=int, default=8, help="training steps per window")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated: " + ", ".join(SETTINGS))
    parser.add_argument("--quick", action="store_true", help="a small training subset and one short window")
    parser.add_argument("--out", default=None, help="JSON file (default benchmarks/results/precision_probe_cpu.json)")
    parser.add_argument("--note", default="")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.windows, args.steps = 1, 2
    if args.child:
        print(json.dumps(measure(args.threads, args.windows, args.steps, args.quick)))
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import RESULTS

    started, results = time.perf_counter(), {}
    for name in args.settings.split(","):
        env = {**os.environ, **SETTINGS[name]}
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--threads", str(args.threads), "--windows",
               str(args.windows), "--steps", str(args.steps)] + (["--quick"] if args.quick else [])
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        results[name] = {"environment": SETTINGS[name], **json.loads(out.stdout.strip().splitlines()[-1])}
        r = results[name]
        print(f"{name:>15}: {r['probe_line']}\n{'':>17}training: float32 "
              f"{r['training_median_target_tokens_per_s']['float32']:,} and bf16 "
              f"{r['training_median_target_tokens_per_s']['bfloat16']:,} target tokens/s "
              f"(bf16/float32 {r['bf16_over_float32']}); the probe chose the faster: {r['probe_chose_the_faster']}")
    record = {"benchmark": "precision_probe", "device": "cpu", "command": " ".join(sys.argv),
              "settings": {"threads": args.threads, "windows": args.windows, "steps": args.steps,
                           "quick": args.quick}, "note": args.note,
              "elapsed_s": round(time.perf_counter() - started, 1), "results": results}
    if not args.quick or args.out:
        path = args.out or RESULTS / "precision_probe_cpu.json"
        with open(path, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
