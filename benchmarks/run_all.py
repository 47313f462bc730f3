"""Run every benchmark of chapter 12 with one command and record how long the whole suite took.

Runs, each in its own process (a fresh allocator, a fresh torch.compile cache):

1. ``attention_cost.py`` – attention time and peak memory against n, explicit vs fused (SDPA backends);
2. ``table1.py`` – the paper's Table 1 measured: self-attention vs LSTM vs Conv1d; sequential operations;
3. ``kv_cache.py`` – greedy decoding with and without the KV cache; the cache's bytes;
4. ``throughput.py`` – training tokens/s, tmlib vs ``nn.Transformer`` (presets small and base), and for
   ``small`` the effect of ``torch.compile``, bf16 autocast and the explicit (unfused) attention path.

``--threads`` (default 2) sets the torch threads of every benchmark but ``kv_cache.py``, which gets
``--decode-threads`` (default 1): decoding one sentence is latency-bound (microseconds of work per operator
call), and a second thread only adds a synchronisation per call.

Each writes ``<name>_<device>.json``; this script writes ``run_all_<device>.json`` with the time of each part and
of the whole (on the course machine, 2 cores: under 10 minutes).  Run it on a quiet machine: other jobs competing for
the cores change every timing.

The files go to ``benchmarks/my_results/`` unless ``--out-dir`` names another folder: the course's own records in
``benchmarks/results/``, which the pages read and their text quotes, stay as they are. Read yours with
``load_result(name, folder="benchmarks/my_results")``; to replace the course's records (the course's maintainers do),
pass ``--out-dir benchmarks/results``.

Usage::

    python benchmarks/run_all.py                 # CPU, 2 threads (kv_cache.py: 1 thread) -> benchmarks/my_results/
    python benchmarks/run_all.py --device cuda   # on a GPU (every SDPA backend, bf16 attention)
    python benchmarks/run_all.py --quick --out-dir /tmp/bench   # seconds: checks that everything runs
    python benchmarks/run_all.py --device cuda --short  # about a minute on a GPU (tools/gpu_check.py part 5)

``--short`` keeps real sizes but fewer repeats and drops ``table1.py``: attention at n = 64 … 4096 on 4 × 8 heads
(every SDPA backend on CUDA), the KV cache at 50, 100 and 200 tokens, and tmlib vs ``nn.Transformer`` on presets
small and base (on CUDA with batches of 128 sentences), without the variants.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Where the records go without ``--out-dir``: a folder of their own, so that a run never overwrites the course's
#: records (``benchmarks/results/``), which the pages read.
DEFAULT_OUT_DIR = HERE / "my_results"


def plan(args) -> list[tuple[str, list[str]]]:
    """``(name, argv)`` of each benchmark, with the common options applied."""
    out_dir = Path(args.out_dir) if args.out_dir else DEFAULT_OUT_DIR
    device = args.device

    def common(threads: int) -> list[str]:
        opts = ["--device", device, "--threads", str(threads), "--clock", args.clock]
        return opts + (["--note", args.note] if args.note else [])

    quick = ["--quick"] if args.quick else []
    dev = "cuda" if device in ("cuda", "auto") and _cuda() else "cpu"
    is_short = getattr(args, "short", False)
    short = {"attention_cost": ["--batch", "4", "--heads", "8", "--max-n", "4096", "--repeats", "3",
                                "--min-seconds", "0.01"],
             "kv_cache": ["--lengths", "50", "100", "200", "--repeats", "2"]} if is_short else {}
    steps = []
    for name in ("attention_cost", "kv_cache") if is_short else ("attention_cost", "table1", "kv_cache"):
        # batch-1 decoding is latency-bound: by default one thread, no barrier per operator call
        threads = args.decode_threads if name == "kv_cache" else args.threads
        steps.append((name, [str(HERE / f"{name}.py"), *common(threads), *short.get(name, []), *quick,
                             "--out-dir", str(out_dir)]))
    tp = [str(HERE / "throughput.py"), *common(args.threads), "--out", str(out_dir / f"throughput_{dev}.json")]
    if args.quick:
        tp += ["--presets", "tiny", "--repeats", "1", "--warmup", "1", "--steps", "1",
               "--variants", "bf16", "explicit_attention"]
    elif is_short:
        tp += ["--presets", "small", "base", "--repeats", "3", "--warmup", "2", "--steps", "5"]
        tp += ["--batch", "128"] if dev == "cuda" else []
    else:
        tp += ["--presets", "small", "base", "--variants", "compile", "bf16", "explicit_attention",
               "--variant-presets", "small"]
    steps.append(("throughput", tp))
    return steps


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--threads", type=int, default=2, help="torch threads of every benchmark but kv_cache (default 2)")
    p.add_argument("--decode-threads", type=int, default=1,
                   help="torch threads of kv_cache.py (default 1: decoding one sentence is latency-bound)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test of every script (seconds)")
    p.add_argument("--short", action="store_true",
                   help="real sizes, fewer repeats, no table1 and no variants: about a minute on a GPU")
    p.add_argument("--keep-going", action="store_true", help="run the next benchmark after one fails")
    p.add_argument("--out-dir", default=None, help="where the JSON files go (default benchmarks/my_results; "
                   "the course's records: benchmarks/results)")
    p.add_argument("--only", nargs="*", default=None, help="run only these benchmarks (names as listed above)")
    p.add_argument("--note", default="", help="stored in every JSON file")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="cpu: time this process's CPU time (a shared machine; use --threads 1)")
    args = p.parse_args(argv)
    out_dir = Path(args.out_dir) if args.out_dir else DEFAULT_OUT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)

    from tmlib.machine import describe_machine, machine_info

    print(describe_machine(), flush=True)
    parts = []
    t_all = time.perf_counter()
    for name, cmd in plan(args):
        if args.only is not None and name not in args.only:
            continue
        print(f"== {name}: python {shlex.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, *cmd], cwd=HERE.parent)
        parts.append({"benchmark": name, "seconds": round(time.perf_counter() - t0, 1), "returncode": proc.returncode})
        print(f"== {name}: {parts[-1]['seconds']:.0f} s", flush=True)
        if proc.returncode:
            print(f"{name} failed (exit {proc.returncode})", file=sys.stderr)
            if not args.keep_going:
                break
    total = time.perf_counter() - t_all
    dev = "cuda" if args.device in ("cuda", "auto") and _cuda() else "cpu"
    record = {"benchmark": "the whole suite (benchmarks/run_all.py)", "device": dev, "machine": machine_info(),
              "command": "python benchmarks/run_all.py " + shlex.join(sys.argv[1:] if argv is None else argv),
              "settings": {"threads": args.threads, "decode_threads": args.decode_threads, "clock": args.clock,
                           "quick": args.quick, "short": args.short, "only": args.only}, "note": args.note,
              "elapsed_s": round(total, 1), "results": parts}
    (out_dir / f"run_all_{dev}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"total: {total:.0f} s ({total / 60:.1f} min); records in {out_dir}")
    return max((p["returncode"] for p in parts), default=0)


if __name__ == "__main__":
    sys.exit(main())
