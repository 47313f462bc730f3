"""The benchmark scripts run (quick sizes) and their code paths compute the right thing.

No timing is asserted here (speed numbers live in benchmarks/results/); what is asserted is what must hold on
any machine: the attention methods agree, the forced MATH backend runs on the CPU, the explicit path holds the
score matrix while the fused one does not, the KV cache holds exactly the formula's bytes, and every script
writes its JSON with the machine record.
"""
import json
from pathlib import Path

import pytest
import torch

from tolerances import assert_close, attention_length

import attention_cost  # noqa: E402
import kv_cache  # noqa: E402
import table1  # noqa: E402
import throughput  # noqa: E402

ARGS = ["--threads", "1", "--quick"]


def _load(path, script):
    """The record a script wrote with ``ARGS``: its header says what ran, where and with which arguments."""
    from tmlib.machine import machine_info

    record = json.loads(Path(path).read_text())
    assert record["device"] == "cpu" and record["note"] == ""
    assert record["command"] == f"python benchmarks/{script}.py " + " ".join([*ARGS, "--out-dir", str(path.parent)])
    assert record["machine"]["cpu_model"] == machine_info()["cpu_model"]
    assert record["results"] and 0 <= record["elapsed_s"] < 600
    return record


def test_attention_methods_agree_and_math_backend_runs_on_cpu():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 64, 16, generator=g) for _ in range(3))
    ref = attention_cost.attention_fn("explicit")(q, k, v)
    for method in ("sdpa", "sdpa_math"):  # float32, d_k = 16, 64 keys
        assert_close(attention_cost.attention_fn(method)(q, k, v), ref, n=attention_length(16, 64))
    assert attention_cost.available("sdpa_math", torch.float32, torch.device("cpu")) is None
    with pytest.raises(ValueError, match="unknown method"):
        attention_cost.attention_fn("sdpa_turbo")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the flash / memory-efficient / cuDNN backends need CUDA")
def test_every_sdpa_backend_on_cuda_agrees_or_reports_why():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 128, 64, generator=g).cuda().bfloat16() for _ in range(3))
    ref = attention_cost.attention_fn("explicit")(q.float(), k.float(), v.float())
    for backend in attention_cost.BACKENDS:
        method = f"sdpa_{backend}"
        reason = attention_cost.available(method, torch.bfloat16, torch.device("cuda"))
        if reason is None:  # bf16 inputs and outputs; the kernels accumulate in float32
            assert_close(attention_cost.attention_fn(method)(q, k, v), ref, n=4, dtype=torch.bfloat16)
        else:
            assert isinstance(reason, str) and reason


def test_attention_cost_script(tmp_path):
    attention_cost.main([*ARGS, "--out-dir", str(tmp_path)])
    rec = _load(tmp_path / "attention_cost_cpu.json", "attention_cost")
    rows = {(r["method"], r["pass"], r["n"]): r for r in rec["results"]["rows"]}
    explicit = rows[("explicit", "forward", 256)]
    fused = rows[("sdpa", "forward", 256)]
    # the explicit path materialises at least one (n, n) score matrix per head; the fused kernel does not
    assert explicit["peak_bytes"] >= explicit["formula_one_score_matrix_bytes"]
    assert fused["peak_bytes"] < fused["formula_one_score_matrix_bytes"]
    assert {f["method"] for f in rec["results"]["fits"]} == {"explicit", "sdpa", "sdpa_math"}


def test_table1_script(tmp_path):
    table1.main([*ARGS, "--out-dir", str(tmp_path)])
    rec = _load(tmp_path / "table1_cpu.json", "table1")
    layers = {r["layer"] for r in rec["results"]["grid"]}
    assert layers == set(table1.LAYERS)
    assert {r["method"] for r in rec["results"]["sequential"]} == {
        "lstm_cell_loop", "lstm_fused", "batched_matmul", "self_attention"}
    assert table1.layer_flops("self_attention", 10, 4) == 8 * 10 * 16 + 4 * 100 * 4


def test_table1_layers_compute_shapes():
    for layer in ("self_attention", "recurrent", "convolutional", "lstm_cell_loop", "batched_matmul"):
        with torch.no_grad():
            out = table1.make_layer(layer, 6, 8, 2, 3, 4, torch.device("cpu"))()
        assert out.shape[0] in (2, 12)


def test_kv_cache_script(tmp_path):
    kv_cache.main([*ARGS, "--out-dir", str(tmp_path)])
    rec = _load(tmp_path / "kv_cache_cpu.json", "kv_cache")
    assert all(row["same_tokens"] for row in rec["results"]["timing"])
    assert all(m["equal"] for m in rec["results"]["memory"])
    assert rec["settings"]["model"]["parameters"] > 0


def test_kv_cache_defaults_to_one_thread():
    # batch-1 decoding is latency-bound: one thread by default, --threads still overrides; the others keep 2
    assert kv_cache.build_parser().parse_args([]).threads == 1
    assert kv_cache.build_parser().parse_args(["--threads", "2"]).threads == 2
    assert table1.build_parser().parse_args([]).threads == 2
    assert attention_cost.build_parser().parse_args([]).threads == 2


def test_throughput_variants(tmp_path):
    import statistics

    from tmlib.model import count_parameters, make_model

    out = tmp_path / "tp.json"
    throughput.main(["--presets", "tiny", "--threads", "1", "--repeats", "1", "--warmup", "1", "--steps", "1",
                     "--variants", "bf16", "explicit_attention", "--out", str(out)])
    rec = json.loads(out.read_text())
    res = rec["results"][0]
    # the format of the original throughput.py is kept, and every figure is what its windows say
    tokens, windows = res["tokens_per_s"], res["windows_tokens_per_s"]
    for name in ("tmlib", "nn"):
        assert len(windows[name]) == 1 and tokens[name] == statistics.median(windows[name]) > 0
    assert res["ratio_tmlib_over_nn"] == tokens["tmlib"] / tokens["nn"]
    assert res["parameters"]["tmlib"] == count_parameters(make_model("tiny", res["config"]["vocab_size"]))
    assert res["config"]["d_model"] == 32 and res["batch"]["sentences"] >= 1
    assert 1 <= res["batch"]["mean_target_tokens"] <= res["batch"]["sentences"] * (res["batch"]["max_tgt_len"] + 1)
    assert set(res["variants"]) == {"bf16", "explicit_attention"}
    for name, entry in res["variants"].items():
        assert entry["ratio_over_eager_fp32"] == entry["tokens_per_s"] / tokens["tmlib"], name
        assert entry["median_paired_ratio"] == entry["windows_tokens_per_s"][0] / windows["tmlib"][0], name
    forward = res["forward_flops_per_batch"]["total"]
    assert res["flops_per_token"] == 3 * forward / res["batch"]["mean_target_tokens"]
    assert res["model_flops_per_s"]["tmlib"] == tokens["tmlib"] * res["flops_per_token"]
    assert rec["machine"]["cpu_model"] and rec["threads"] == 1 and rec["settings"]["variants"] == ["bf16",
                                                                                                   "explicit_attention"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.compile imports torch.jit internals
def test_compile_variant_is_a_compiled_copy():
    model = throughput.make_model("tiny", 100, pad_id=0)
    compiled, step, _ = throughput.make_variant("compile", model, None)
    assert compiled is not model and hasattr(compiled, "_orig_mod") and step is throughput.train_step
    explicit, _, _ = throughput.make_variant("explicit_attention", model, None)
    assert all(layer.keep_attention for layer in explicit.encoder.layers)
    assert not any(layer.keep_attention for layer in model.encoder.layers)


def test_run_all_plans_every_benchmark(tmp_path):
    import argparse

    import run_all

    args = argparse.Namespace(device="cpu", threads=2, decode_threads=1, quick=False, out_dir=str(tmp_path), note="",
                              clock="wall")
    steps = dict(run_all.plan(args))
    assert list(steps) == ["attention_cost", "table1", "kv_cache", "throughput"]
    threads = {name: cmd[cmd.index("--threads") + 1] for name, cmd in steps.items()}
    assert threads == {"attention_cost": "2", "table1": "2", "kv_cache": "1", "throughput": "2"}
    tp = steps["throughput"]
    assert tp[tp.index("--variants") + 1:tp.index("--variant-presets")] == ["compile", "bf16", "explicit_attention"]
    assert tp[tp.index("--out") + 1] == str(tmp_path / "throughput_cpu.json")


def test_run_all_short_mode_plans_the_gpu_minute(tmp_path):
    """``--short`` (the GPU run's part 5): attention, KV cache and throughput at real sizes, no table1, no variants."""
    import argparse

    import run_all

    args = argparse.Namespace(device="cpu", threads=2, decode_threads=1, quick=False, short=True,
                              out_dir=str(tmp_path), note="", clock="wall")
    steps = dict(run_all.plan(args))
    assert list(steps) == ["attention_cost", "kv_cache", "throughput"]
    att, kv, tp = steps["attention_cost"], steps["kv_cache"], steps["throughput"]
    assert att[att.index("--heads") + 1] == "8" and att[att.index("--max-n") + 1] == "4096"
    assert kv[kv.index("--lengths") + 1:kv.index("--repeats")] == ["50", "100", "200"]
    assert "--variants" not in tp and tp[tp.index("--presets") + 1:tp.index("--repeats")] == ["small", "base"]


def test_run_all_never_writes_into_the_course_records_by_default():
    """Without ``--out-dir`` the records go to benchmarks/my_results/, so that the pages keep reading the course's
    records in benchmarks/results/ (whose numbers their prose quotes)."""
    import argparse

    import run_all

    args = argparse.Namespace(device="cpu", threads=2, decode_threads=1, quick=False, out_dir=None, note="",
                              clock="wall")
    steps = dict(run_all.plan(args))
    tp = steps["throughput"]
    out = Path(tp[tp.index("--out") + 1])
    assert out.parent == run_all.DEFAULT_OUT_DIR and out.parent.name == "my_results"
    assert out.parent != Path(run_all.__file__).resolve().parent / "results"


def test_modern_runs_without_warm_up_at_the_recipes_peak():
    """The "no warm-up, same peak" runs of the modern comparison (chapter 13) start at the recipe's peak learning
    rate (peak = factor · d_model^-0.5 · warmup^-0.5: factor / 10 with warm-up 1 equals factor with warm-up 100), and
    the stored record holds them with the recipe's steps, at the baseline's peak, next to the runs at ten times it."""
    import modern
    from tmlib.analysis import load_result

    record = load_result("modern")
    runs, recipe = {r["name"]: r for r in record["runs"]}, record["recipe"]
    for layout in ("post-LN", "pre-LN"):
        overrides, warm, lr = modern.LAYOUT_RUNS[f"{layout}, no warm-up, same peak"]
        assert not warm and lr is modern.SAME_PEAK
        assert overrides.get("norm_first", False) == (layout == "pre-LN")
        same, tenfold = runs[f"{layout}, no warm-up, same peak"], runs[f"{layout}, no warm-up"]
        assert same["warmup_steps"] == tenfold["warmup_steps"] == 1 and same["diverged"] is None
        assert same["steps"] == recipe["steps"] and same["tokens"] == runs["baseline"]["tokens"]
        assert same["config"] == tenfold["config"]
        assert same["peak_lr"] == pytest.approx(runs["baseline"]["peak_lr"], rel=1e-9)
        assert tenfold["peak_lr"] == pytest.approx(10 * runs["baseline"]["peak_lr"], rel=1e-9)
    assert {r["name"] for r in record["runs"]} >= set(modern.VARIANTS) | set(modern.LAYOUT_RUNS)
