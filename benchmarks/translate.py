"""Benchmark: train the Multi30k translator within a budget, then score it on test 2016 (greedy and beam).

One command (the measured CPU run; best on a quiet machine):

    python benchmarks/translate.py --train --max-minutes 15 --threads 2

trains ``python -m tmlib.train``'s recommended configuration into ``runs/multi30k`` (from scratch; an
existing run folder is kept unless ``--fresh`` is given), translates the 1,000 sentences of
test_2016_flickr with greedy decoding and with beam search (beam 4, α = 0.6, paper §6.1), and writes
``benchmarks/results/translate_<device>.json``: device name, torch version, preset, parameter count,
minutes trained, steps, epochs, target tokens/s, validation loss, and for each decoder the cased BLEU,
lowercased BLEU (13a) and chrF of sacreBLEU, with signatures and decoding time, and the machine that trained
(``tmlib.machine.machine_info()``, stored in the checkpoint) and the one that decoded; also ``kept_step`` (the
step whose weights were scored, None for the last), ``test_sentences``, ``probe_s`` (``amp="auto"``'s timing of
each precision, seconds per step, where it timed them) and, with ``--step-budget``, ``step_budget`` (a fixed step
count predicted for another machine: the steps, the steps measured there in 15 minutes, the factor).

Without ``--train`` it scores the checkpoint already in ``--out`` (e.g. one written by
``python -m tmlib.train``). ``--name`` changes the result file's name (``translate_<name>.json``), e.g.
``--name cpu_fp32`` for the float32 run that emulates a CPU without native bf16:

    python benchmarks/translate.py --train --fresh --out runs/fp32 --name cpu_fp32 --max-minutes 10 \
        --threads 2 --train-arg=--amp=off
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    from tmlib.data import load_multi30k
    from tmlib.decoding import translate_corpus
    from tmlib.training import load_trained
    from tmlib.machine import machine_info
    from tmlib.decoding import bleu_scores
    from tmlib.model import count_parameters
    from tmlib.train import main as train_main

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "runs" / "multi30k"), help="run folder with checkpoint.pt")
    p.add_argument("--train", action="store_true", help="train first (python -m tmlib.train, recommended config)")
    p.add_argument("--fresh", action="store_true", help="with --train: delete the run folder first")
    p.add_argument("--max-minutes", type=float, default=15.0, help="training budget with --train")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for training and decoding")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--data-dir", default=None, help="folder holding multi30k/*.gz")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--limit", type=int, default=None, help="score only the first N test sentences (a rehearsal)")
    p.add_argument("--results", default=str(ROOT / "benchmarks" / "results"), help="folder of the JSON file")
    p.add_argument("--name", default=None, help="result file translate_<name>.json (default: the device type)")
    p.add_argument("--note", default="", help="free text stored in the JSON (e.g. the machine's load)")
    p.add_argument("--step-budget", nargs=3, type=float, default=None, metavar=("STEPS", "MEASURED", "FACTOR"),
                   help="a fixed step count predicted for another machine: the STEPS trained, the steps MEASURED "
                        "there in 15 minutes and the FACTOR that scaled them; stored as step_budget (pass the steps "
                        "to train with --train-arg)")
    p.add_argument("--train-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for python -m tmlib.train (repeatable), e.g. --train-arg=--max-tokens=4000")
    args = p.parse_args(argv)

    out = Path(args.out)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.train:
        if args.fresh and out.exists():
            shutil.rmtree(out)
        targs = ["--out", str(out), "--max-minutes", str(args.max_minutes), "--device", args.device,
                 "--progress-interval", "10"]
        if args.threads:
            targs += ["--threads", str(args.threads)]
        if args.data_dir:
            targs += ["--data-dir", args.data_dir]
        if (out / "checkpoint.pt").is_file():
            targs.append("--resume")
        status = train_main(targs + args.train_arg)
        if status != 0:
            return status

    from tmlib.utils import get_device

    device = get_device(None if args.device == "auto" else args.device)
    trained = load_trained(out, device)
    model, tokenizer, history = trained.model, trained.tokenizer, trained.history
    test = load_multi30k("test", args.data_dir)[:args.limit]
    src = [de for de, _ in test]
    refs = [en for _, en in test]
    train_machine = trained.machine or {}
    amp = trained.config.amp  # the precision the run trained in, on the machine that trained it
    trained_on_gpu = bool(train_machine.get("gpu")) and trained.config.device != "cpu"
    if trained.precision:  # what the run chose (amp="auto" on a CPU: by timing both types at its start)
        precision = trained.precision["dtype"]
    else:  # an older checkpoint: auto meant bf16 on a GPU or wherever oneDNN said bf16 was supported
        precision = {"off": None, "bf16": "bfloat16", "fp16": "float16"}.get(
            amp, "bfloat16" if trained_on_gpu or train_machine.get("cpu_native_bf16") else None)
    result = {
        "device": device.type,
        "machine": train_machine,
        "decode_machine": machine_info(),
        "threads": trained.config.threads,
        "precision": precision or "float32",
        "torch_version": trained.torch_version,
        "model_config": trained.config.model.to_dict(),
        "train_config": trained.config.to_dict(),
        "parameters": count_parameters(model),
        "minutes_trained": round(trained.elapsed_s / 60, 2),
        "steps": trained.step,
        "epochs_completed": trained.epoch,
        "target_tokens_per_s_median": round(float(np.nanmedian(history["tokens_per_s"])), 1),
        "val_loss": round(history["val_loss"][-1], 4) if history["val_loss"] else None,
        "val_nll": round(history["val_nll"][-1], 4) if history["val_nll"] else None,
        "weights_scored": (f"kept best (keep_best): step {trained.best_step}" if trained.best_step is not None
                           else "last"),
        "kept_step": trained.best_step,  # the step whose weights were scored; None: the last weights
        "best_val_nll": round(min(history["val_nll"]), 4) if trained.best_step is not None else None,
        "test_set": "multi30k test_2016_flickr (1000 sentences), German->English",
        "test_sentences": len(test),
        "note": args.note,
    }
    timings = (trained.precision or {}).get("timings")  # amp="auto"'s probe: seconds per step of each precision
    if timings:
        result["probe_s"] = {"float32": round(timings["float32_s"], 2), "bf16": round(timings["bf16_s"], 2)}
    if args.step_budget:
        steps, measured, factor = args.step_budget
        result["step_budget"] = {"steps": int(steps), "measured": int(measured), "factor": factor}
    for name, beam in (("greedy", 1), (f"beam{args.beam_size}", args.beam_size)):
        t0 = time.perf_counter()
        hyps = translate_corpus(model, tokenizer, src, beam_size=beam, device=device, progress=False)
        seconds = time.perf_counter() - t0
        scores = bleu_scores(hyps, refs)
        result[name] = {
            "bleu": round(scores["bleu"], 2),
            "bleu_lowercase": round(scores["bleu_lowercase"], 2),
            "chrf": round(scores["chrf"], 2),
            "signatures": scores["signatures"],
            "decode_seconds": round(seconds, 1),
            "examples": [{"src": s, "ref": r, "hyp": h} for s, r, h in list(zip(src, refs, hyps))[:3]],
        }
        print(f"{name}: BLEU {scores['bleu']:.2f}, lowercased BLEU {scores['bleu_lowercase']:.2f}, "
              f"chrF {scores['chrf']:.2f} ({seconds:.0f} s)")
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"translate_{args.name or device.type}.json"
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
