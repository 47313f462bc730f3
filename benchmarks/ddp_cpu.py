"""Benchmark: training throughput of ``python -m tmlib.train`` in one process and under ``torchrun`` with two
processes (data parallelism, gloo), on the CPU, target tokens per second.

Four runs of the real command line on Multi30k, with the "tiny" model (so that the numbers say something about
the machinery rather than about matrix products) and the recommended recipe (2,000-token batches):

* ``1 process, 1 thread`` — the baseline: 2,000 padded tokens per step;
* ``1 process, 2 threads`` — the same, with both cores for torch's intra-op parallelism;
* ``1 process, 1 thread, accumulate 2`` — 4,000 padded tokens per step, the step of the two-process run;
* ``2 processes (torchrun), 1 thread each`` — 2 × 2,000 padded tokens per step, gradients all-reduced by DDP.

Each run trains ``--steps`` optimizer steps (logging every 10); the throughput is the median of the history's
``tokens_per_s`` over the logging windows after the first (warm-up). The data preparation (tokenizer, batches)
is not timed. On a machine with 2 cores, two processes can at best double the one-thread throughput; this
measures how much of that the all-reduce and the per-step agreement leave. The 1-minute load average before
and after each run is recorded: on a shared machine, work outside the benchmark's lock shows there (above 2 on
2 cores, the runs competed for the cores).

    flock -x /tmp/tm-cpu.lock python benchmarks/ddp_cpu.py     # -> benchmarks/results/ddp_cpu.json
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(name: str, launcher: list[str], extra: list[str], steps: int, out: Path) -> dict:
    args = ["-m", "tmlib.train", "--out", str(out), "--preset", "tiny", "--max-steps", str(steps), "--log-every", "10",
            "--checkpoint-minutes", "none", "--noprogress", "--device", "cpu", *extra]
    cmd = launcher + args
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    history = json.loads((out / "history.json").read_text())
    rates = [r for s, r in zip(history["step"], history["tokens_per_s"]) if s % 10 == 0 and r == r]
    rates = rates[1:]  # one value per logging window; the first (warm-up) is dropped
    print(f"{name:42s} {statistics.median(rates):9,.0f} target tokens/s", flush=True)
    return {"name": name, "command": " ".join(["python" if c == sys.executable else c for c in cmd]),
            "tokens_per_s": statistics.median(rates), "windows_tokens_per_s": rates,
            "steps": len(history["loss"]), "final_loss": history["loss"][-1], "wall_s_with_data_preparation": wall,
            "load_average_1min_before_after": [load_before, os.getloadavg()[0]]}


def main(argv=None) -> int:
    from tmlib.machine import describe_machine, machine_info

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ddp_cpu.json"))
    a = p.parse_args(argv)
    os.environ.setdefault("TMLIB_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    os.environ["OMP_NUM_THREADS"] = "1"
    py = [sys.executable]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1"]
    print(describe_machine())
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, launcher, extra) in enumerate([
            ("1 process, 1 thread", py, ["--threads", "1"]),
            ("1 process, 2 threads", py, ["--threads", "2"]),
            ("1 process, 1 thread, accumulate 2", py, ["--threads", "1", "--accumulate", "2"]),
            ("2 processes (torchrun), 1 thread each", torchrun + [f"--master_port={free_port()}"], ["--threads", "1"]),
        ]):
            results.append(run(name, launcher, extra, a.steps, Path(tmp) / f"run{i}"))
    base = results[0]["tokens_per_s"]
    for r in results:
        r["speedup_vs_1_process_1_thread"] = r["tokens_per_s"] / base
    Path(a.out).write_text(json.dumps({"benchmark": "ddp_cpu", "steps": a.steps, "machine": machine_info(),
                                       "results": results}, indent=1))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
