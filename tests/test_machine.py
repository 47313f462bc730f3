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


def test_native_bf16_comes_from_the_cpu_features_not_from_onednn(monkeypatch):
    """oneDNN's "bf16 supported" is true wherever it can emulate bf16 with AVX-512 (where bf16 runs at a third of
    float32's speed); native bf16 is read from the CPU's own features."""
    monkeypatch.setattr(machine.platform, "system", lambda: "Linux")
    for flags, native in ([("avx2", "avx512f", "avx512_vnni"), False], [("avx2", "avx512f", "avx512_bf16"), True],
                          [("avx2", "amx_bf16"), True], [("asimd", "bf16"), True], [("asimd",), False], [(), False]):
        monkeypatch.setattr(machine, "_cpuinfo", lambda f=flags: "flags\t: fpu " + " ".join(f) + "\n")
        assert machine.cpu_native_bf16() is native, flags
    monkeypatch.setattr(machine, "_cpuinfo", lambda: "processor\t: 0\nFeatures\t: fp asimd bf16\n")  # Arm's name
    assert machine.cpu_flags() == ["asimd", "bf16"] and machine.cpu_native_bf16() is True
    monkeypatch.setattr(machine, "_cpuinfo", lambda: "")  # no /proc/cpuinfo (Windows): unknown
    assert machine.cpu_native_bf16() is None


def test_describe_machine_names_capped_kernels():
    info = {"cpu_model": "Example CPU", "cpu_count": 2, "cpu_flags": ["avx2", "avx512f", "avx512_bf16"],
            "cpu_native_bf16": True, "onednn_max_cpu_isa": "AVX512_CORE_VNNI", "aten_cpu_capability_env": "avx2",
            "torch_version": "2.13.0", "torch_threads": 2, "gpu": None}
    assert ("(avx2 avx512f avx512_bf16; native bf16: yes; oneDNN capped at AVX512_CORE_VNNI; PyTorch kernels avx2)"
            in machine.describe_machine(info))


def test_cpu_class_names_the_kind_of_cpu_and_imitations():
    amd = {"cpu_flags": ["avx2", "avx512f", "avx512_bf16"], "cpu_native_bf16": True}
    assert machine.cpu_class(amd) == "native bf16"
    assert machine.cpu_class({**amd, "onednn_max_cpu_isa": "AVX512_CORE_VNNI"}) == "AVX-512 without bf16 (imitated)"
    assert machine.cpu_class({**amd, "onednn_max_cpu_isa": "AVX2", "aten_cpu_capability_env": "avx2"}) == \
        "AVX2 only (imitated)"
    assert machine.cpu_class({"cpu_flags": ["avx2", "avx512f", "avx512_vnni"], "cpu_native_bf16": False}) == \
        "AVX-512 without bf16"
    assert machine.cpu_class({"cpu_flags": ["avx2", "fma"], "cpu_native_bf16": False}) == "AVX2 only"
    assert machine.cpu_class({"cpu_flags": ["asimd", "bf16"], "cpu_native_bf16": True}) == "native bf16"
