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

    # an AVX2-only CPU: asked for avx512, torch 2.13 says AVX512 (and would die of an illegal instruction)
    monkeypatch.setattr(kernels, "capability_under", lambda cap: {"": "AVX2"}.get(cap, cap.upper()))
    monkeypatch.setattr(subprocess, "call", run)
    assert kernels.main([]) == 1
    out = capsys.readouterr().out
    assert "ATEN_CPU_CAPABILITY=avx512 skipped: this CPU's own path is AVX2, below AVX512" in out
    assert "ATEN_CPU_CAPABILITY=default: passed" in out and "ATEN_CPU_CAPABILITY=avx2: FAILED" in out
    assert [(e["ATEN_CPU_CAPABILITY"], e["NPY_DISABLE_CPU_FEATURES"]) for e in calls] == [
        ("default", kernels.NUMPY_DISABLED["default"]), ("avx2", kernels.NUMPY_DISABLED["avx2"])]
    assert kernels.main(["default"]) == 0


def test_supported_follows_the_cpus_own_path():
    assert [kernels.supported(c, "AVX2") for c in kernels.CAPABILITIES] == [True, True, False]
    assert [kernels.supported(c, "AVX512") for c in kernels.CAPABILITIES] == [True, True, True]
    assert [kernels.supported(c, "DEFAULT") for c in kernels.CAPABILITIES] == [True, False, False]
    assert [kernels.supported(c, "SVE256") for c in kernels.CAPABILITIES] == [True, False, False]


def test_the_environment_does_not_decide_the_cpus_own_path(monkeypatch, capsys):
    """`ATEN_CPU_CAPABILITY=avx512 make kernels` on an AVX2 CPU still skips avx512 (the CPU's path is asked unset)."""
    asked = []
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx512")
    monkeypatch.setattr(kernels, "capability_under", lambda cap: asked.append(cap) or {"": "AVX2"}.get(cap, cap.upper()))
    monkeypatch.setattr(subprocess, "call", lambda argv, cwd, env: 0)
    assert kernels.main(["avx512"]) == 0
    assert asked == [""] and "avx512 skipped" in capsys.readouterr().out
