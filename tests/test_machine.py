"""tmlib.analysis.machine: the machine description stored with every measured figure."""
import json

from tmlib.analysis import machine


def test_machine_info_is_json_and_complete():
    info = machine.machine_info()
    json.dumps(info)  # JSON-ready
    for key in ("cpu_model", "cpu_count", "cpu_flags", "cpu_native_bf16", "torch_version", "torch_threads",
                "gpu", "date", "python_version"):
        assert key in info
    assert info["cpu_count"] >= 1
    assert set(info["cpu_flags"]) <= set(machine.CPU_FLAGS_OF_INTEREST)


def test_cpu_flags_parsed_from_cpuinfo(monkeypatch):
    fake = "model name\t: Example CPU 9000\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_tile\n"
    monkeypatch.setattr(machine, "_cpuinfo", lambda: fake)
    assert machine.cpu_model() == "Example CPU 9000"
    assert machine.cpu_flags() == ["avx2", "avx512f", "avx512_bf16", "amx_tile"]


def test_describe_machine_names_cpu_flags_and_gpu():
    info = {"cpu_model": "Example CPU", "cpu_count": 4, "cpu_flags": ["avx2", "fma"], "cpu_native_bf16": False,
            "torch_version": "2.13.0", "torch_threads": 4,
            "gpu": {"name": "NVIDIA H100", "memory_gib": 79.1, "capability": "9.0", "count": 1}}
    text = machine.describe_machine(info)
    assert "Example CPU, 4 CPUs (avx2; native bf16: no)" in text
    assert "torch 2.13.0 with 4 threads" in text and "GPU NVIDIA H100 (79.1 GiB)" in text
