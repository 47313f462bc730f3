"""tmlib.analysis.records: chapter 12's benchmark records read into tables and lines (small synthetic records of
known answer, and the stored records the chapter shows)."""
import numpy as np
import pytest

from tmlib.analysis import benchmarking as B, records as RC
from tmlib.analysis.flops import flops_per_token
from tmlib.model import PRESETS


def _attention_record(times):
    """A synthetic attention-cost record: ``times[(method, pass)]`` are the medians at n = 64, 128, 256, 512."""
    rows, fits = [], []
    for (method, pass_), ts in times.items():
        for n, t in zip((64, 128, 256, 512), ts):
            rows.append({"method": method, "pass": pass_, "n": n, "median_s": t, "times_s": [t, t],
                         "peak_bytes": 8 * n * n, "formula_one_score_matrix_bytes": 4 * n * n})
        fit = {"exponent": 2.0, "low": 1.9, "high": 2.1, "prefactor": 1e-9}
        fits.append({"method": method, "pass": pass_, "fit_min_n": 256, "time": fit, "memory": fit})
    return {"results": {"rows": rows[::-1], "fits": fits}}  # rows out of order: the readers sort them


@pytest.fixture(scope="module")
def stored():
    cpu = {name: B.load_result(name, "cpu") for name in ("attention_cost", "table1", "kv_cache", "throughput")}
    gpu = {name: B.load_result(name, "cuda") for name in ("attention_cost", "kv_cache", "mfu")}
    return cpu, gpu


def _short(findings, width=90):
    assert findings.lines and all(len(line) <= width for line in findings.lines), str(findings)


# ---------------------------------------------------------------- attention cost
def test_attention_series_sorts_by_n_and_attaches_the_fit():
    record = _attention_record({("a", "forward"): [1, 2, 3, 4], ("b", "forward"): [5, 6, 7, 8],
                                ("a", "forward_backward"): [9, 9, 9, 9]})
    series = RC.attention_series(record, "forward", "time", methods=["b", "a"])
    assert [s["label"] for s in series] == ["b", "a"]
    np.testing.assert_array_equal(series[1]["n"], [64, 128, 256, 512])
    np.testing.assert_array_equal(series[1]["y"], [1, 2, 3, 4])
    assert series[0]["fit"]["exponent"] == 2.0 and series[0]["fit_min_n"] == 256
    memory = RC.attention_series(record, "forward", "memory", fits=False)
    np.testing.assert_array_equal(memory[0]["y"], 8 * memory[0]["n"] ** 2)
    assert "fit" not in memory[0]
    with pytest.raises(ValueError):
        RC.attention_series(record, "backward", "time")
    with pytest.raises(ValueError):
        RC.attention_series(record, "forward_backward", "time", methods=["b"])


def test_disturbed_cases_are_slower_than_the_next_larger_n():
    record = _attention_record({("a", "forward"): [9.0, 1.0, 4.0, 16.0], ("b", "forward"): [1.5, 1.0, 4.0, 16.0]})
    hit = RC.disturbed_cases(record)
    assert hit[["method", "pass", "n", "next_n"]].values.tolist() == [["a", "forward", 64, 128]]
    assert len(RC.disturbed_cases(record, factor=1.2)) == 2


def test_exponent_table_names_the_passes_as_the_figures_do():
    record = _attention_record({("a", "forward"): [1, 2, 3, 4], ("a", "forward_backward"): [1, 2, 3, 4]})
    table = RC.exponent_table(record)
    assert list(table.index) == [("a", "forward"), ("a", "forward + backward")]
    assert table.loc[("a", "forward"), "time exponent [95% interval]"] == "2.00 [1.90, 2.10]"


def test_stored_attention_cost_record(stored):
    cpu, gpu = stored
    found = RC.attention_cost_findings(cpu["attention_cost"], gpu["attention_cost"])  # memory, time
    _short(found)
    assert found["matrices"]["forward"]["explicit"] == pytest.approx(2.0, abs=0.1)
    assert found["matrices"]["forward_backward"]["explicit"] == pytest.approx(3.0, abs=0.1)
    for pass_, doublings in found["doublings"].items():
        assert list(doublings.index) == [1024, 2048, 4096], pass_
        assert doublings.loc[4096].between(1.8, 2.3).all(), pass_  # chapter 12: the GPU's last doubling ~ n^2
    # chapter 12's flat start: 512 or 1024 forward, 1024 or 2048 forward + backward
    assert found["flat_until"] == {"forward": {"explicit": 512, "sdpa": 1024, "sdpa_math": 512},
                                   "forward_backward": {"explicit": 1024, "sdpa": 2048, "sdpa_math": 1024}}
    assert "matrices" in RC.attention_cost_findings(cpu["attention_cost"]).numbers  # memory only
    # the one case that measured the machine: explicit forward at n = 64, a hundred times n = 128's time
    assert RC.disturbed_cases(cpu["attention_cost"])[["method", "pass", "n"]].values.tolist() == [
        ["explicit", "forward", 64]]
    assert RC.disturbed_cases(gpu["attention_cost"]).empty
    memory = RC.exponent_table(cpu["attention_cost"], quantities=("memory",))
    assert list(memory.columns) == ["memory exponent [95% interval]"]
    on_gpu = RC.gpu_attention_findings(gpu["attention_cost"])
    _short(on_gpu)
    assert on_gpu["default_kernels"] == ["sdpa_cudnn"]
    assert list(on_gpu["table"].index) == list(RC.GPU_METHODS)
    assert "CPU" not in str(on_gpu)


# ---------------------------------------------------------------- Table 1 and the KV cache
def test_stored_table1_record(stored):
    found = RC.table1_findings(stored[0]["table1"])
    _short(found)
    assert found["clear_slower"] == [(128, 1024), (256, 1024)]
    assert found["table"]["points"].to_dict() == {"n < d": 20, "n = d": 5, "n > d": 10}
    ratios = RC.table1_ratios(stored[0]["table1"])
    assert ratios.shape == (7, 5) and (ratios > 0).all().all()
    grid = found["grid"]
    np.testing.assert_allclose(ratios.loc[1024, 128], grid.loc[(128, 1024), "att / LSTM"])


def test_stored_kv_cache_records(stored):
    cpu, gpu = stored
    found = RC.kv_cache_findings(cpu["kv_cache"], gpu["kv_cache"])
    _short(found)
    assert list(found["table"].index) == [50, 100, 200]
    assert found["gpu_spread"] >= 1


# ---------------------------------------------------------------- training throughput
def test_throughput_ratios_compare_windows_of_the_same_round():
    record = {"results": [{"preset": "small", "windows_tokens_per_s": {"tmlib": [100, 400, 200],
                                                                       "nn": [90, 360, 180]},
                           "variants": {"bf16": {"windows_tokens_per_s": [150, 200, 300]}}}]}
    found = RC.throughput_findings(record)
    table = found["table"]
    assert list(table.index) == [("small", "nn.Transformer"), ("small", "bf16 autocast")]  # no eager row
    assert table.loc[("small", "nn.Transformer")].tolist() == ["0.90", "0.90", "0.90", "< 1"]
    assert table.loc[("small", "bf16 autocast")].tolist() == ["1.50", "0.50", "1.50", "both sides of 1"]
    assert found["eager"] == {"small": [100.0, 400.0, 200.0]}


def test_stored_throughput_record(stored):
    found = RC.throughput_findings(stored[0]["throughput"])
    _short(found)
    table = found["table"]
    assert table.loc[("small", "torch.compile"), "every round"] == "< 1"
    assert table.loc[("small", "bf16 autocast"), "every round"] == "both sides of 1"
    assert "median" not in table.columns  # a median of rounds that disagree would read as a result
    assert (table.xs("base")["every round"] == "both sides of 1").all()
    assert found["matmul"]["bfloat16"] > found["matmul"]["float32"]


# ---------------------------------------------------------------- MFU on a GPU
def test_stored_mfu_record(stored):
    mfu = stored[1]["mfu"]
    base = PRESETS["base"]
    fpt = flops_per_token(base.d_model, base.n_encoder_layers, base.n_decoder_layers, base.d_ff, 37000, 64, 64)
    found = RC.mfu_findings(mfu, fpt)
    _short(found)
    assert fpt == pytest.approx(found["record_flops_per_token"], rel=1e-3)
    assert list(found["table"].index) == ["tmlib, eager", "nn.Transformer, eager", "tmlib, torch.compile"]
    # the 1.04 of the page: every tmlib window above every nn.Transformer window
    assert "tmlib 346.5k-347.2k, nn.Transformer 330.6k-332.2k:\n  tmlib faster in all 5 windows" in str(found)
    profile = RC.step_profile(mfu, fpt)
    _short(profile)
    assert profile["bars"].sum() == pytest.approx(profile["step_ms"])
    assert profile["bars"].iloc[0] == profile["products_ms"] < profile["step_ms"]
    assert profile["bars"].index[-1] == "the rest of the step"
    assert "22.74 ms = 20.38 ms of smaller kernels + 2.36 ms without a kernel" in str(profile)
