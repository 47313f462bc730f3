"""tools/kernels.py (`make kernels`): which tests it reruns, and that it skips a kernel path the CPU lacks."""
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import kernels  # noqa: E402


def test_numerics_files_are_the_equivalence_tests():
    files = kernels.numerics_files()
    for name in ("test_numpy_ref", "test_part1_attention", "test_part1_layers", "test_part1_assembly", "test_attention",
                 "test_model", "test_training"):
        assert f"tests/{name}.py" in files
    assert "tests/test_browser.py" not in files and "tests/test_kernels.py" not in files


def test_a_path_above_the_cpu_is_skipped_and_a_failure_fails(monkeypatch, capsys):
    calls = []

    def run(argv, cwd, env):  # pytest "fails" under avx2
        calls.append(env)
        return 1 if env["ATEN_CPU_CAPABILITY"] == "avx2" else 0

    # an AVX2-only CPU: asked for avx512, PyTorch runs AVX2
    monkeypatch.setattr(kernels, "capability_under", lambda cap: {"": "AVX2", "avx512": "AVX2"}.get(cap, cap.upper()))
    monkeypatch.setattr(subprocess, "call", run)
    assert kernels.main([]) == 1
    out = capsys.readouterr().out
    assert "ATEN_CPU_CAPABILITY=avx512 skipped: this CPU has no AVX512 kernels (PyTorch would run AVX2)" in out
    assert "ATEN_CPU_CAPABILITY=default: passed" in out and "ATEN_CPU_CAPABILITY=avx2: FAILED" in out
    assert [(e["ATEN_CPU_CAPABILITY"], e["NPY_DISABLE_CPU_FEATURES"]) for e in calls] == [
        ("default", kernels.NUMPY_DISABLED["default"]), ("avx2", kernels.NUMPY_DISABLED["avx2"])]
    assert kernels.main(["default"]) == 0
