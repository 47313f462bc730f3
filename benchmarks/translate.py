"""Benchmark: train the Multi30k translator within a budget, then score it on test 2016 (greedy and beam).

One command (the measured CPU run; best on a quiet machine):

    python benchmarks/translate.py --train --max-minutes 15 --threads 2

trains ``python -m tmlib.train``'s recommended configuration into ``runs/multi30k`` (from scratch; an
existing run folder is kept unless ``--fresh`` is given), translates the 1,000 sentences of
test_2016_flickr with greedy decoding and with beam search (beam 4, α = 0.6, paper §6.1), and writes
``benchmarks/results/translate_<device>.json``: device name, torch version, preset, parameter count,
minutes trained, steps, epochs, target tokens/s, validation loss, and for each decoder the cased BLEU,
lowercased BLEU (13a) and chrF of sacreBLEU, with signatures and decoding time.

Without ``--train`` it scores the checkpoint already in ``--out`` (e.g. one written by
``python -m tmlib.train``).
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def device_name(device: torch.device) -> str:
    """A readable name of the machine that trained/decoded (CPU model or GPU name)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    from tmlib.data import load_multi30k
    from tmlib.metrics import bleu_scores, translate_corpus
    from tmlib.presets import count_parameters
    from tmlib.train import main as train_main
    from tmlib.training import load_trained

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "runs" / "multi30k"), help="run folder with checkpoint.pt")
    p.add_argument("--train", action="store_true", help="train first (python -m tmlib.train, recommended config)")
    p.add_argument("--fresh", action="store_true", help="with --train: delete the run folder first")
    p.add_argument("--max-minutes", type=float, default=15.0, help="training budget with --train")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for training and decoding")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--data-dir", default=None, help="folder holding multi30k/*.gz")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--results", default=str(ROOT / "benchmarks" / "results"), help="folder of the JSON file")
    p.add_argument("--note", default="", help="free text stored in the JSON (e.g. the machine's load)")
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
        train_main(targs + args.train_arg)

    from tmlib.utils import get_device

    device = get_device(None if args.device == "auto" else args.device)
    model, tokenizer, history, state = load_trained(out, device)
    test = load_multi30k("test", args.data_dir)
    src = [de for de, _ in test]
    refs = [en for _, en in test]
    result = {
        "device": device.type,
        "device_name": device_name(device),
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "torch_version": str(torch.__version__),
        "preset": state["model_config"]["preset"],
        "model_config": state["model_config"],
        "train_config": state["config"],
        "parameters": count_parameters(model),
        "minutes_trained": round(state["elapsed_s"] / 60, 2),
        "steps": state["step"],
        "epochs_completed": state["epoch"],
        "target_tokens_per_s_median": round(float(np.median(history["tokens_per_s"])), 1),
        "val_loss": round(history["val_loss"][-1], 4) if history["val_loss"] else None,
        "val_nll": round(history["val_nll"][-1], 4) if history["val_nll"] else None,
        "test_set": "multi30k test_2016_flickr (1000 sentences), German->English",
        "note": args.note,
    }
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
    path = results / f"translate_{device.type}.json"
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
