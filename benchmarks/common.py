"""Shared plumbing of the benchmark scripts: the record every JSON result starts with, and writing it.

Every result file holds ``benchmark`` (what is measured), ``device``, ``machine``
(:func:`tmlib.machine.machine_info`: CPU model, cores, instruction sets, native bf16, GPU, torch version,
date), ``command`` (the exact command line), ``settings`` (every option), ``note``, ``elapsed_s`` (the
script's own run time) and ``results``.
"""
from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import torch

from tmlib.machine import machine_info

RESULTS = Path(__file__).resolve().parent / "results"


def resolve_device(name: str) -> torch.device:
    """``"auto"`` → CUDA if available, else CPU; otherwise ``torch.device(name)`` (CUDA must exist)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {name}: no CUDA device is available")
    return torch.device(name)


def add_common_arguments(parser, default_threads: int = 2) -> None:
    """Options every benchmark takes: --device, --threads, --quick, --out, --out-dir, --note.

    ``default_threads`` is the default of ``--threads``: 2 (the course machine's cores) for benchmarks whose
    operators carry enough work to share; 1 for batch-1 decoding (``kv_cache.py``), whose operators are so
    small that a second thread only adds a synchronisation per operator call.
    """
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    parser.add_argument("--threads", type=int, default=default_threads,
                        help=f"torch.set_num_threads on the CPU (default {default_threads})")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes, few repeats: checks that the script runs (numbers meaningless)")
    parser.add_argument("--out", default=None, help="output JSON file (default results/<name>_<device>.json)")
    parser.add_argument("--out-dir", default=None, help="folder for the default file name (default results/)")
    parser.add_argument("--note", default="", help="free text stored in the JSON (conditions of the run)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall: elapsed time (default); cpu: this process's CPU time, which other jobs on a "
                             "shared machine hardly change (use with --threads 1; not on CUDA)")


def start(args) -> tuple[torch.device, float]:
    """Apply --threads, resolve --device, check --clock; return ``(device, start time)``."""
    device = resolve_device(args.device)
    if args.clock == "cpu" and device.type != "cpu":
        raise SystemExit("--clock cpu measures this process's CPU time: use it with --device cpu")
    torch.set_num_threads(args.threads)
    return device, time.perf_counter()


def clock_of(args):
    """The timer of --clock: ``time.perf_counter`` (wall) or ``time.process_time`` (CPU time of the process)."""
    return time.process_time if args.clock == "cpu" else time.perf_counter


def output_path(args, name: str, device: torch.device) -> Path:
    if args.out:
        return Path(args.out)
    folder = Path(args.out_dir) if args.out_dir else RESULTS
    return folder / f"{name}_{device.type}.json"


def write_record(args, name: str, benchmark: str, device: torch.device, t_start: float, settings: dict,
                 results, argv=None) -> Path:
    """Write the JSON record (header + ``results``) and return its path."""
    script = Path(sys.argv[0]).name if argv is None else f"{name}.py"
    record = {
        "benchmark": benchmark,
        "device": device.type,
        "machine": machine_info(),
        "command": f"python benchmarks/{script} " + shlex.join(sys.argv[1:] if argv is None else argv),
        "settings": settings,
        "note": args.note,
        "elapsed_s": round(time.perf_counter() - t_start, 2),
        "results": results,
    }
    out = output_path(args, name, device)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({record['elapsed_s']:.0f} s)")
    return out

