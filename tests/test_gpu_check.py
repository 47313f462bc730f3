"""The one-shot GPU run (tools/gpu_check.py, issue 27), rehearsed on the CPU so that it cannot rot before a GPU is
available: the plan fits the nine minutes, what the GPU machine lacks travels, and every part runs end to end in
``--device cpu --quick`` mode and writes its JSON record (numbers meaningless, structure and mechanics checked).
"""
import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plan_fits_nine_minutes_with_every_part_once():
    g = _gpu_check()
    assert sorted(p for stage in g.STAGES for p in stage) == [1, 2, 3, 4, 5, 6]
    total = g.SETUP_BUDGET_S + sum(max(g.BUDGETS_S[p] for p in stage) for stage in g.STAGES)
    assert total <= g.DEADLINE_S < g.LIMIT_S == 540
    est = g.estimates()
    for part, (seconds, basis) in est.items():
        assert 0 < seconds <= g.BUDGETS_S[part], (part, seconds, basis)
    # part 2 trains for the recipe's four minutes, part 3 for one: their budgets hold that and the rest
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_train import GPU_RECIPE

    assert GPU_RECIPE.max_minutes == 4.0 and g.BUDGETS_S[2] >= 60 * GPU_RECIPE.max_minutes + 30
    assert g.BUDGETS_S[3] >= 60 + 20
    # the estimate of part 2 comes from the FLOP counter: 2.83e7 FLOPs per token of the cpu preset (V = 8000,
    # 15 + 15 tokens), the same figure as 3 x the forward count written out for one layer pair here
    d, f, v, n = 256, 512, 8000, 15
    enc = 8 * n * d * d + 4 * n * n * d + 4 * n * d * f
    dec = (8 * n * d * d + 4 * n * n * d) + (8 * n * d * d + 4 * n * n * d) + 4 * n * d * f
    per_token = 3 * (2 * enc + 2 * dec + 2 * n * d * v) / n
    assert g.GPU_BATCH_TOKENS == GPU_RECIPE.max_tokens
    assert f"{per_token * g.REAL_TOKEN_SHARE * GPU_RECIPE.max_tokens / 1e9:.2f} GFLOP" in est[2][1]


def _imports(path: Path) -> set:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_what_the_gpu_machine_lacks_travels_as_wheels():
    """Every module that tmlib, the GPU run's scripts and its tests import is in the standard library, on the GPU
    machine's image, among the wheels of tools/gpu_requirements.txt, or one of chapter 11's lazy imports."""
    g = _gpu_check()
    sources = [*(ROOT / "tmlib").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"), ROOT / "tools" / "gpu_check.py",
               *(ROOT / "tests" / f"{name}.py" for name in g.TEST_FILES), ROOT / "tests" / "toy_data.py",
               ROOT / "tests" / "tolerances.py"]
    local = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} | {"tmlib", "toy_data", "tolerances"}
    imported = set().union(*map(_imports, sources)) - set(sys.stdlib_module_names) - local
    assert imported - set(g.GPU_IMAGE_MODULES) - set(g.WHEEL_MODULES) == set(g.NOT_NEEDED_ON_GPU)
    # the wheels are pinned as in the course's lock file (the versions CI tests)
    lock = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements" / "dev.txt").read_text(), re.M))
    lock = {k.lower().replace("_", "-"): v for k, v in lock.items()}
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "tools" / "gpu_requirements.txt").read_text(), re.M)
    assert len(pins) == len(g.WHEEL_MODULES)
    for name, version in pins:
        assert lock[name.lower().replace("_", "-")] == version, name


def test_junit_xml_becomes_a_list_of_outcomes(tmp_path):
    xml = tmp_path / "t.xml"
    xml.write_text('<testsuites><testsuite><testcase classname="tests.test_a" name="test_ok" time="0.5"/>'
                   '<testcase classname="tests.test_a" name="test_bad" time="1"><failure message="boom"/></testcase>'
                   '<testcase classname="tests.test_b" name="test_gpu[cuda]" time="0">'
                   '<skipped message="needs a CUDA GPU"/></testcase></testsuite></testsuites>')
    out = _gpu_check().junit_to_json(xml)
    assert out["counts"] == {"passed": 1, "failed": 1, "error": 0, "skipped": 1}
    assert [c["outcome"] for c in out["cases"]] == ["passed", "failed", "skipped"]
    assert out["cases"][2]["name"] == "tests.test_b::test_gpu[cuda]" and out["cases"][1]["message"] == "boom"


@pytest.mark.skipif(not (SHARED / "multi30k").is_dir() and not (ROOT / ".gpu" / "data").is_dir(),
                    reason="the rehearsal trains on Multi30k: set TMLIB_DATA_DIR or run make gpu-data")
def test_rehearsal_runs_every_part_and_writes_every_record(tmp_path):
    out, work, bundle = tmp_path / "out", tmp_path / "work", tmp_path / "bundle"
    env = None
    if "TMLIB_DATA_DIR" not in os.environ and (SHARED / "multi30k").is_dir():
        env = dict(os.environ, TMLIB_DATA_DIR=str(SHARED))
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--device", "cpu", "--quick",
                           "--out-dir", str(out), "--work-dir", str(work), "--bundle", str(bundle), "--no-install",
                           "--budget-scale", "4", "--deadline", "1800"], capture_output=True, text=True, env=env,
                          timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "gpu_check_cpu.json").read_text())
    assert {k: v["status"] for k, v in summary["parts"].items()} == {str(p): "ok" for p in range(1, 7)}

    def record(name):
        r = json.loads((out / f"{name}_cpu.json").read_text())
        assert r["machine"]["cpu_model"] and r["device"] == "cpu", name  # every record names its machine
        return r

    tests = record("cuda_tests")["results"]
    assert tests["counts"]["failed"] == tests["counts"]["error"] == 0 and tests["counts"]["skipped"] > 0
    assert all("CUDA" in c["message"] or "cuda" in c["message"] for c in tests["cases"] if c["outcome"] == "skipped")
    translate = record("translate")
    for decoder in ("greedy", "beam4"):
        assert set(translate[decoder]["signatures"]) == {"bleu", "bleu_lowercase", "chrf"}
        assert "case:lc" in translate[decoder]["signatures"]["bleu_lowercase"]
    assert translate["gpu_check"]["target_bleu_lowercase_beam4"] == 38.0
    train = record("gpu_train")["results"]
    assert train["loss_finite"] and train["steps"] > 0 and "square-root scaling" in train["why"]
    fp16 = record("fp16")["results"]
    assert fp16["trains"] and fp16["resume"]["bit_identical"] is True  # the CPU path is deterministic
    assert fp16["resume"]["steps_after_resume"] > 0
    mfu = record("mfu")["results"]
    assert set(mfu["models"]) == {"tmlib", "nn", "tmlib_compiled"} and mfu["profile"]["top"]
    assert (out / "mfu_profile_cpu.txt").read_text().count("\n") > 10
    run_all = json.loads((out / "run_all_cpu.json").read_text())
    assert [p["benchmark"] for p in run_all["results"]] == ["attention_cost", "kv_cache", "throughput"]
    assert all(p["returncode"] == 0 for p in run_all["results"]) and run_all["settings"]["short"]
    for name in ("attention_cost", "kv_cache", "throughput"):
        assert json.loads((out / f"{name}_cpu.json").read_text())["machine"]
    decode = record("cpu_decode")["results"]
    assert decode["greedy"]["identical"] == decode["greedy"]["sentences"] > 0
    with tarfile.open(bundle / "gpu_results.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"results/translate_cpu.json", "results/mfu_cpu.json", "logs/part2.log"} <= names
    assert summary["headline"]["fp16"]["resume_bit_identical"] is True
    # what the lead does with the bundle that comes back: unpack the records where the loader reads them
    g, back = _gpu_check(), tmp_path / "back"
    g.unpack(str(bundle / "gpu_results.tar.gz"), type("A", (), {"out_dir": str(back / "gpu"),
                                                              "work_dir": str(back / "work")}))
    from tmlib.analysis import load_result

    assert load_result("fp16", "cpu", folder=back)["results"]["trains"]
    assert (back / "work" / "logs" / "part5.log").is_file()
