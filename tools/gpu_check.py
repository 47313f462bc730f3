"""The one-shot GPU run (issue 27): every GPU measurement of the course in one command of under nine minutes.

    python3 tools/gpu_check.py --device cuda --bundle "$OUT"     # on the GPU machine (benchmarks/README.md)
    python tools/gpu_check.py --device cpu --quick --out-dir /tmp/g --work-dir /tmp/w   # the rehearsal, ~1 min
    python tools/gpu_check.py --plan                              # the plan: parts, budgets, estimates

Six parts, each a process of its own with a time budget (killed past it), writing JSON records into
``--out-dir`` (default ``benchmarks/results/gpu``), each naming the machine (``machine_info``):

1. the CUDA tests (``-k "cuda or gpu or nccl"`` over the test files that have CUDA cases, but not the compile test:
   part 4 compiles) ->
   ``cuda_tests_<device>.json`` (every test's outcome) and the junit XML;
2. chapter 9's model for four minutes in bf16 with the GPU recipe, test 2016 BLEU (``benchmarks/gpu_train.py
   train``) -> ``gpu_train_<device>.json``, ``translate_<device>.json``;
3. the same for one minute in fp16 with the gradient scaler, and an exact resume (``gpu_train.py fp16``) ->
   ``fp16_<device>.json``;
4. the base model's throughput and MFU, eager and compiled, with a profile (``benchmarks/mfu.py``) ->
   ``mfu_<device>.json``, ``mfu_profile_<device>.txt``;
5. ``benchmarks/run_all.py --short`` -> ``attention_cost_``, ``kv_cache_``, ``throughput_``, ``run_all_<device>.json``;
6. part 2's checkpoint decoded on the CPU against the GPU (``gpu_train.py cpu-decode``) -> ``cpu_decode_<device>.json``.

Order: part 2 first and alone (its four minutes are the headline and get a quiet GPU), then parts 1, 3 and 6
together (checks of correctness, not timings; 6 needs part 2's checkpoint), then 5 and 4 alone (timings); part 4
comes last because its cold compile is the least predictable step, and it may use whatever time the others left. After
every part the summary ``gpu_check_<device>.json`` is rewritten and, with ``--bundle DIR``, so is
``DIR/gpu_results.tar.gz`` (the records and the logs): a part that fails or runs out of time loses nothing before
it. At the start, wheels in ``.whl/`` (``make gpu-wheels``) are installed offline and tmlib with ``--no-deps``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 540  # the nine minutes
DEADLINE_S = 530  # the parts stop here; bundling needs seconds
SETUP_BUDGET_S = 15  # wheel install, tmlib install, data check
STAGES = ((2,), (1, 3, 6), (5,), (4,))  # the last stage also gets whatever time the others left
#: Padded tokens per batch of part 2's recipe (``benchmarks/gpu_train.py``'s ``GPU_RECIPE.max_tokens``; a test
#: checks they agree), and the share of them that are target tokens (6,500 of 8,000 measured on Multi30k).
GPU_BATCH_TOKENS, REAL_TOKEN_SHARE = 2000, 6500 / 8000
#: From the H200 run of 27 November 2026: part 1 without the compile test ~60 s beside parts 3 and 6; part 5 was
#: stopped at 55 s inside its third benchmark (attention 24 s, KV cache 20 s); part 4 needed 81 s.
BUDGETS_S = {1: 90, 2: 275, 3: 85, 4: 75, 5: 75, 6: 40}
TEST_FILES = ("test_cuda", "test_attention", "test_model", "test_batching", "test_benchmarking", "test_benchmarks",
              "test_distributed", "test_training", "test_utils")
#: test_compile_on_cuda is left to part 4, which compiles the base model on the GPU: on the H200 its cold compile
#: took 111 of the 162 s the tests needed alone (results/gpu/cuda_tests_cuda.xml, 27 November 2026).
TEST_SELECTION = "(cuda or gpu or nccl) and not test_compile_on_cuda"
TEST_FILES_QUICK = ("test_cuda", "test_benchmarking")  # the rehearsal checks the mechanics, not the cases
#: Modules the GPU machine's Python has (its image's package list, 2026-11) among those tmlib, its tests and
#: these scripts import; what they import beyond these and the standard library must travel as wheels
#: (tools/gpu_requirements.txt; tests/test_gpu_check.py checks the list).
GPU_IMAGE_MODULES = ("torch", "numpy", "matplotlib", "seaborn", "pandas", "scipy", "tokenizers", "sacrebleu",
                     "tqdm", "transformers", "accelerate", "onnx", "onnxruntime", "onnxscript", "requests",
                     "packaging", "typing_extensions", "yaml", "pygments", "jinja2", "pytest", "PIL")
#: Their wheels (import names), installed offline at the start.
WHEEL_MODULES = ("pooch", "platformdirs", "simple_parsing", "docstring_parser")
#: Imported only lazily, by chapter 11's attention views and by tmlib.course.glue (a site build), never on the GPU
#: run's path: they do not travel.
NOT_NEEDED_ON_GPU = ("bertviz", "IPython", "myst_nb")
#: Launch-bound cost of an eager CUDA operator on the host (dispatcher, autograd, launch), an assumption.
HOST_US_PER_KERNEL = 10.0
#: Kernel-launching operators of one training step of the cpu preset (forward, backward, clipping; fused Adam
#: adds a few), counted on the CPU with a TorchDispatchMode (views and detaches left out).
KERNELS_PER_STEP_CPU_PRESET = 820
#: The trainer's own host work per step (collating the batch, the loop's bookkeeping), an assumption.
TRAINER_HOST_MS = 1.5
#: Padded tokens of one Multi30k epoch at the GPU recipe's batches (238 batches of 2,000 on the CPU).
EPOCH_TOKENS = 476_000
#: Cold torch.compile (inductor) of the base model's forward and backward: an assumption, not a FLOP figure.
COMPILE_GUESS_S = 45.0
PROCESS_START_S = 5.0  # python, torch, CUDA context


def estimates() -> dict:
    """``part -> (seconds, basis)`` on an H100 SXM, from FLOPs, its dense bf16 peak and the host costs above."""
    from tmlib.analysis.flops import PEAK_FLOPS, flops_per_token
    from tmlib.model.config import PRESETS

    peak = PEAK_FLOPS["H100 SXM"]["bf16"]
    c, b = PRESETS["cpu"], PRESETS["base"]
    real = REAL_TOKEN_SHARE * GPU_BATCH_TOKENS  # target tokens of a batch of GPU_BATCH_TOKENS padded tokens
    small_step = flops_per_token(c.d_model, c.n_encoder_layers, c.n_decoder_layers, c.d_ff, 8000, 15, 15) * real
    host = KERNELS_PER_STEP_CPU_PRESET * HOST_US_PER_KERNEL * 1e-6 + TRAINER_HOST_MS * 1e-3
    step = max(host, small_step / (0.3 * peak))
    epochs = 240 / step * GPU_BATCH_TOKENS / EPOCH_TOKENS
    base_step = flops_per_token(b.d_model, b.n_encoder_layers, b.n_decoder_layers, b.d_ff, 37000, 64, 64) * 32768
    base_s = base_step / (0.4 * peak)
    mfu_steps = 2 * (3 + 50) + (1 + 3 + 2 * 50)
    return {
        1: (60, "measured on the H200: 162 s alone, of which test_compile_on_cuda's cold inductor compile 111 s (left "
                "to part 4) and two DDP cases 25 s; ~60 s in parallel with parts 3 and 6"),
        2: (PROCESS_START_S + 8 + 240 + 2 + 8,
            f"240 s of training (a step: {small_step / 1e9:.2f} GFLOP = {small_step / (0.3 * peak) * 1e3:.2f} ms at "
            f"30% of {peak / 1e12:.0f} TFLOP/s, but ~{host * 1e3:.0f} ms on the host: {KERNELS_PER_STEP_CPU_PRESET} "
            f"kernel launches at ~{HOST_US_PER_KERNEL:.0f} us and the trainer's loop: ~{240 / step:,.0f} steps, "
            f"~{epochs:.0f} epochs; measured on the H200: 39 ms a step, 6,097 steps, 25 epochs, the host's loop "
            f"slower than this guess), data 8 s, scoring 8 s"),
        3: (PROCESS_START_S + 5 + 60 + 6 + 2, "60 s of fp16 training, 6 s resumed after the 0.9-minute checkpoint"),
        4: (round(PROCESS_START_S + mfu_steps * base_s + COMPILE_GUESS_S + 3),
            f"{mfu_steps} steps of {base_step / 1e12:.1f} TFLOP ({base_s * 1e3:.0f} ms each at the 40% MFU target), "
            f"a cold compile guessed at {COMPILE_GUESS_S:.0f} s, profile and matmul peak 3 s"),
        5: (3 * PROCESS_START_S + 55, "measured on the H200: attention 24 s, KV cache 20 s (launch- and "
                                      "repeat-bound, the FLOPs are <0.1 s); throughput ~10 s"),
        6: (PROCESS_START_S + 10, "300 greedy and 100 beam-4 sentences on the GPU (~2 s) and the CPU (~8 s)"),
    }


def part_commands(args) -> dict:
    """``part -> argv`` of each part's process."""
    py, dev, out, work = sys.executable, args.device, args.out_dir, args.work_dir
    quick = ["--quick"] if args.quick else []
    threads = ["--threads", "1"] if args.device == "cpu" else []
    train = [py, str(ROOT / "benchmarks" / "gpu_train.py")]
    common = ["--device", dev, "--out-dir", out, "--work-dir", work, *quick]
    return {
        1: [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", f"--junitxml={out}/cuda_tests_{dev}.xml",
            "-k", TEST_SELECTION, *(f"tests/{f}.py" for f in (TEST_FILES_QUICK if args.quick else TEST_FILES))],
        2: [*train, "train", *common, *(["--minutes", str(args.train_minutes)] if args.train_minutes else [])],
        3: [*train, "fp16", *common, *(["--minutes", str(args.fp16_minutes)] if args.fp16_minutes else [])],
        4: [py, str(ROOT / "benchmarks" / "mfu.py"), "--device", dev, "--out-dir", out, *quick, *threads],
        5: [py, str(ROOT / "benchmarks" / "run_all.py"), "--device", dev, "--short", "--keep-going", "--out-dir", out,
            *quick, *threads],
        6: [*train, "cpu-decode", *common],
    }


WHAT = {1: "CUDA tests", 2: "ch. 9 model, 4 min bf16, BLEU", 3: "fp16 + scaler, 1 min, exact resume",
        4: "base model MFU, compile on/off, profile", 5: "run_all --short", 6: "GPU checkpoint decoded on the CPU"}


def print_plan(est: dict) -> None:
    print(f"plan (budget = the part is killed past it; estimate = H100 SXM, from FLOPs and host costs):")
    total_b, total_e = SETUP_BUDGET_S, 10
    for stage in STAGES:
        total_b += max(BUDGETS_S[p] for p in stage)
        total_e += max(est[p][0] for p in stage)
        for p in stage:
            print(f"  part {p} {WHAT[p]:<40} budget {BUDGETS_S[p]:>4} s  estimate {est[p][0]:>4.0f} s  "
                  f"{'(together: ' + ', '.join(map(str, stage)) + ') ' if len(stage) > 1 else ''}{est[p][1]}")
    print(f"  setup {SETUP_BUDGET_S} s; total budget {total_b} s (limit {LIMIT_S} s), estimate {total_e:.0f} s",
          flush=True)


def install(args) -> dict:
    """Install ``.whl/`` offline (``tools/gpu_requirements.txt``) and tmlib without its dependencies; where the
    machine's setuptools is too old for the project's metadata (``license = "MIT"`` needs 77 or later), a ``.pth``
    file puts the checkout on the path instead. The parts also get ``PYTHONPATH`` pointing at it."""
    wheels = ROOT / ".whl"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
           "--no-cache-dir"]
    steps = []
    if wheels.is_dir() and any(wheels.glob("*.whl")):
        steps.append(pip + ["--find-links", str(wheels), "-r", str(ROOT / "tools" / "gpu_requirements.txt")])
    steps.append(pip + ["--no-deps", "--no-build-isolation", "-e", str(ROOT)])
    pth = ("import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'tmlib-checkout.pth')"
           f".write_text({str(ROOT)!r} + '\\n')")
    steps.append([sys.executable, "-c", f"import tmlib, {', '.join(WHEEL_MODULES)}; print(tmlib.__file__)"])
    done = []
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=Path.home())
        if proc.returncode and "-e" in cmd:  # the editable install failed: the .pth file instead
            proc = subprocess.run([sys.executable, "-c", pth], capture_output=True, text=True)
            cmd = [*cmd[:3], "(editable install failed: a .pth file)", proc.stderr[-300:]]
        label = " ".join(cmd[3:] if cmd[1:3] == ["-m", "pip"] else cmd[1:])
        done.append({"command": label, "returncode": proc.returncode, "stderr": proc.stderr[-1500:],
                     "stdout": proc.stdout[-300:]})
        print(f"install: {label[:100]}: exit {proc.returncode} {proc.stderr[-300:]}", flush=True)
    return {"steps": done}


def junit_to_json(xml_path: Path) -> dict:
    """Every test case of a junit XML file: ``{name, outcome, seconds, message}`` and the counts."""
    cases = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message = (node.get("message") or node.text or "")[:600]
        cases.append({"name": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome,
                      "seconds": float(case.get("time") or 0), "message": message})
    counts = {k: sum(c["outcome"] == k for c in cases) for k in ("passed", "failed", "error", "skipped")}
    return {"counts": counts, "cases": cases}


def bundle(args) -> None:
    """Write ``<bundle>/gpu_results.tar.gz`` (records and logs) and the summary beside it, atomically."""
    if not args.bundle:
        return
    dest = Path(args.bundle)
    dest.mkdir(parents=True, exist_ok=True)
    tmp = dest / ".gpu_results.tar.gz.tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(args.out_dir, arcname="results")
        logs = Path(args.work_dir) / "logs"
        if logs.is_dir():
            tar.add(logs, arcname="logs")
    os.replace(tmp, dest / "gpu_results.tar.gz")
    summary = Path(args.out_dir) / f"gpu_check_{args.device}.json"
    if summary.is_file():
        shutil.copyfile(summary, dest / summary.name)


def run_stage(stage, args, env, t_start, summary, write, last=False) -> None:
    """Start the parts of ``stage`` together; wait for each within its budget and the deadline (the ``last``
    stage: up to the deadline, at least its budget)."""
    logs = Path(args.work_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cmds, running = part_commands(args), {}
    for p in stage:
        left = args.deadline - (time.perf_counter() - t_start)
        limit = min(max(BUDGETS_S[p] * args.budget_scale, left if last else 0), left)
        if limit < 5:
            summary["parts"][str(p)] = {"what": WHAT[p], "status": "skipped: no time left"}
            continue
        log = open(logs / f"part{p}.log", "w", encoding="utf-8")
        print(f"== part {p} ({WHAT[p]}): up to {limit:.0f} s: {' '.join(cmds[p])}", flush=True)
        proc = subprocess.Popen(cmds[p], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        running[p] = (proc, log, time.perf_counter(), limit)
    ended = {}  # part -> (status, end time): polled, so parts side by side are timed each on its own
    while len(ended) < len(running):
        for p, (proc, log, t0, limit) in running.items():
            if p in ended:
                continue
            rc = proc.poll()
            if rc is not None:
                ended[p] = ("ok" if rc == 0 else f"failed (exit {rc})", time.perf_counter())
            elif time.perf_counter() - t0 > limit:
                os.killpg(proc.pid, signal.SIGTERM)  # the trainer saves and stops; others just stop
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                ended[p] = (f"timed out after {limit:.0f} s", time.perf_counter())
        time.sleep(0.2)
    for p, (proc, log, t0, limit) in running.items():
        status, t_end = ended[p]
        log.close()
        seconds = t_end - t0
        tail = (logs / f"part{p}.log").read_text(encoding="utf-8", errors="replace").splitlines()[-25:]
        print(f"== part {p}: {status} in {seconds:.0f} s\n" + "\n".join("   " + line[-200:] for line in tail),
              flush=True)
        summary["parts"][str(p)] = {"what": WHAT[p], "status": status, "seconds": round(seconds, 1),
                                    "budget_s": limit, "command": cmds[p]}
        if p == 1:
            xml = Path(args.out_dir) / f"cuda_tests_{args.device}.xml"
            if xml.is_file():
                write_tests(xml, args)
        write()


def write_tests(xml: Path, args) -> None:
    from tmlib.machine import machine_info

    record = {"benchmark": "the CUDA tests (tools/gpu_check.py part 1)", "device": args.device,
              "machine": machine_info(), "selection": {"files": TEST_FILES, "k": TEST_SELECTION},
              "results": junit_to_json(xml)}
    (Path(args.out_dir) / f"cuda_tests_{args.device}.json").write_text(json.dumps(record, indent=1) + "\n")


def headline(args) -> dict:
    """The figures the issue asks for, read back from the records (None where a record is missing)."""
    def read(name):
        path = Path(args.out_dir) / f"{name}_{args.device}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    out = {}
    if (t := read("cuda_tests")) is not None:
        out["tests"] = t["results"]["counts"]
        out["tests_failed"] = [c["name"] for c in t["results"]["cases"] if c["outcome"] in ("failed", "error")]
    if (t := read("translate")) is not None:
        out["bleu"] = {k: {m: t[k][m] for m in ("bleu", "bleu_lowercase")} for k in ("greedy", "beam4")}
        out["bleu_target_met"] = t.get("gpu_check", {}).get("met")
    if (t := read("fp16")) is not None:
        r = t["results"]
        out["fp16"] = {"trains": r["trains"], "resume_bit_identical": r["resume"]["bit_identical"]}
    if (t := read("mfu")) is not None:
        out["mfu"] = t["results"]["targets"]
        out["compile_s"] = t["results"]["models"].get("tmlib_compiled", {}).get("compile_s")
    if (t := read("cpu_decode")) is not None:
        out["cpu_decode"] = {k: f"{t['results'][k]['identical']}/{t['results'][k]['sentences']}"
                             for k in ("greedy", "beam4")}
    return out


def travel_size(carried) -> dict:
    """Bytes the GPU call sends: tracked and untracked-not-ignored files (``git ls-files -co --exclude-standard``)
    plus the ``carried`` paths, by top-level entry; the limit is 64 MiB."""
    names = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    files = [ROOT / n for n in names if n] + [f for c in carried for f in
                                              ([ROOT / c] if (ROOT / c).is_file() else (ROOT / c).rglob("*"))]
    by_top: dict = {}
    for f in files:
        if f.is_file() and not f.is_symlink():
            top = f.relative_to(ROOT).parts[0]
            by_top[top] = by_top.get(top, 0) + f.stat().st_size
    total = sum(by_top.values())
    return {"total_bytes": total, "total_mib": round(total / 2**20, 2), "limit_mib": 64,
            "largest": dict(sorted(by_top.items(), key=lambda kv: -kv[1])[:12])}


def unpack(tarball: str, args) -> dict:
    """Extract a bundle's ``results/*`` into ``--out-dir`` and ``logs/*`` into ``--work-dir/logs`` (plain files
    only, no path outside them); returns the summary's headline."""
    targets = {"results": Path(args.out_dir), "logs": Path(args.work_dir) / "logs"}
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and len(parts) == 2 and parts[0] in targets and parts[1] not in ("..", "."):
                targets[parts[0]].mkdir(parents=True, exist_ok=True)
                (targets[parts[0]] / parts[1]).write_bytes(tar.extractfile(member).read())
    summary = Path(args.out_dir) / "gpu_check_cuda.json"
    return json.loads(summary.read_text(encoding="utf-8")).get("headline", {}) if summary.is_file() else {}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--quick", action="store_true", help="every part for seconds (a rehearsal; numbers meaningless)")
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results" / "gpu"))
    p.add_argument("--work-dir", default=str(ROOT / "runs" / "gpu_check"), help="run folders and logs")
    p.add_argument("--bundle", default=None, help="folder for gpu_results.tar.gz (e.g. $OUT on the GPU machine)")
    p.add_argument("--parts", type=int, nargs="+", default=None, help="run only these parts")
    p.add_argument("--train-minutes", type=float, default=None,
                   help="part 2's training budget (default 4; shorter where less GPU time is left)")
    p.add_argument("--fp16-minutes", type=float, default=None, help="part 3's training budget (default 1)")
    p.add_argument("--deadline", type=float, default=DEADLINE_S, help=f"seconds (default {DEADLINE_S})")
    p.add_argument("--budget-scale", type=float, default=1.0, help="multiply every budget (a slow rehearsal)")
    p.add_argument("--no-install", action="store_true", help="do not pip-install .whl/ and tmlib")
    p.add_argument("--plan", action="store_true", help="print the plan and exit")
    p.add_argument("--travel-size", nargs="*", metavar="CARRIED", default=None,
                   help="print the size of what the GPU call sends (with these carried paths) and exit")
    p.add_argument("--unpack", metavar="TARBALL", default=None,
                   help="extract a run's gpu_results.tar.gz into --out-dir (records) and --work-dir/logs, and exit")
    args = p.parse_args(argv)
    if args.unpack:
        print(json.dumps(unpack(args.unpack, args), indent=1))
        return 0
    if args.travel_size is not None:
        size = travel_size(args.travel_size)
        print(json.dumps(size, indent=1))
        return 0 if size["total_mib"] < 64 else 1
    t_start = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    est = estimates()
    print_plan(est)
    if args.plan:
        return 0
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    if "TMLIB_DATA_DIR" not in env and (ROOT / ".gpu" / "data" / "multi30k").is_dir():
        env["TMLIB_DATA_DIR"] = str(ROOT / ".gpu" / "data")  # the copy that travels (make gpu-data)
    summary = {"benchmark": "the one-shot GPU run (tools/gpu_check.py)", "device": args.device,
               "command": "python tools/gpu_check.py " + " ".join(sys.argv[1:] if argv is None else argv),
               "limit_s": LIMIT_S, "stages": STAGES,
               "plan": {str(k): {"what": WHAT[k], "budget_s": BUDGETS_S[k], "estimate_s": v[0], "basis": v[1]}
                        for k, v in est.items()},
               "install": None if args.no_install else install(args), "parts": {}}
    os.environ.update(env)
    from tmlib.machine import machine_info

    summary["machine"] = machine_info()
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                              "--format=csv,noheader"], capture_output=True, text=True)
        summary["nvidia_smi"] = smi.stdout.strip()
    path = Path(args.out_dir) / f"gpu_check_{args.device}.json"

    def write():
        summary["elapsed_s"] = round(time.perf_counter() - t_start, 1)
        summary["headline"] = headline(args)
        path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        bundle(args)

    write()
    for i, stage in enumerate(STAGES):
        stage = tuple(q for q in stage if args.parts is None or q in args.parts)
        if stage:
            run_stage(stage, args, env, t_start, summary, write, last=i == len(STAGES) - 1)
    write()
    print(f"done in {summary['elapsed_s']:.0f} s: " + json.dumps(summary["headline"], indent=1), flush=True)
    return 0 if all(v.get("status") == "ok" for v in summary["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
