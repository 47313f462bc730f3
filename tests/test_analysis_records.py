"""tmlib.analysis.records: chapter 12's benchmark records read into tables, figure series and lines (small synthetic
records of known answer, and the stored records the chapter shows)."""
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
    cpu = {name: B.load_result(name, "cpu") for name in ("attention_cost",)}
    gpu = {name: B.load_result(name, "cuda") for name in ("attention_cost", "mfu")}
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


def test_exponent_table_names_the_passes_as_the_figures_do():
    record = _attention_record({("a", "forward"): [1, 2, 3, 4], ("a", "forward_backward"): [1, 2, 3, 4]})
    table = RC.exponent_table(record)
    assert list(table.index) == [("a", "forward"), ("a", "forward + backward")]
    assert table.loc[("a", "forward"), "time exponent [95% interval]"] == "2.00 [1.90, 2.10]"


def test_gpu_attention_table_at_the_largest_n():
    record = _attention_record({(m, p): [1e-3, 2e-3, 3e-3, 4e-3] for m in ("explicit", "sdpa_math", "sdpa")
                                for p in ("forward", "forward_backward")})
    table = RC.gpu_attention_table(record)
    assert list(table.index) == ["explicit", "sdpa", "sdpa_math"] and table.index.name == "n = 512"  # GPU_METHODS order
    assert table.loc["sdpa", "forward ms"] == 4.0
    assert table.loc["sdpa", "forward peak, in score matrices"] == 2.0  # 8 n² bytes against 4 n²


def test_stored_attention_cost_records(stored):
    cpu, gpu = stored
    memory = RC.exponent_table(cpu["attention_cost"], quantities=("memory",))
    assert list(memory.columns) == ["memory exponent [95% interval]"]
    table = RC.gpu_attention_table(gpu["attention_cost"])
    assert list(table.index) == list(RC.GPU_METHODS)


# ---------------------------------------------------------------- MFU on a GPU
def test_stored_mfu_record_step_profile(stored):
    mfu = stored[1]["mfu"]
    base = PRESETS["base"]
    fpt = flops_per_token(base.d_model, base.n_encoder_layers, base.n_decoder_layers, base.d_ff, 37000, 64, 64)
    # the chapter counts the FLOPs per token with the library; the benchmark counted them when it measured
    assert fpt == pytest.approx(mfu["results"]["flops_per_token"], rel=1e-3)
    profile = RC.step_profile(mfu, fpt)
    _short(profile)
    assert profile["bars"].sum() == pytest.approx(profile["step_ms"])
    assert profile["bars"].iloc[0] == profile["products_ms"] < profile["step_ms"]
    assert profile["bars"].index[-1] == "the rest of the step"
    assert "22.97 ms = 20.39 ms of smaller kernels + 2.58 ms without a kernel" in str(profile)  # the fourth GPU run
    for name, ms in profile["bars"].items():  # the printout names every bar of the figure, with its time
        assert any(line.strip().startswith(name) and f"{ms:.1f}" in line for line in profile.lines), name


# ---------------------------------------------------------------- repeated timings
def test_repeats_apart_only_when_the_repeats_do_not_overlap():
    assert RC.repeats_apart([1.0, 2.0], [3.0, 2.5]) == "faster"
    assert RC.repeats_apart((3.0, 2.5), (1.0, 2.0)) == "slower"
    assert RC.repeats_apart([1.0, 3.0], [2.0, 4.0]) is None  # medians differ, repeats overlap
    assert RC.repeats_apart([1.0, 2.0], [2.0, 3.0]) is None  # a shared edge is an overlap
    assert RC.repeats_apart([5.0], [5.0, 6.0]) is None
    assert RC.repeats_apart(iter([1.0]), iter([2.0])) == "faster"  # any sequence, read once
    for a, b in (([], [1.0]), ([1.0], []), ([], [])):
        with pytest.raises(ValueError):
            RC.repeats_apart(a, b)


def test_repeats_apart_in_the_stored_table1_record():
    """Figure 12.3's asterisks: attention against the LSTM, 3 repeats each, at the 35 points of the CPU grid."""
    cases = {}
    for r in B.load_result("table1", "cpu")["results"]["grid"]:
        cases.setdefault((r["d"], r["n"]), {})[r["layer"]] = r["times_s"]
    sides = {k: RC.repeats_apart(v["self_attention"], v["recurrent"]) for k, v in cases.items()}
    assert len(sides) == 35 and sum(s is not None for s in sides.values()) == 17
    assert sorted(k for k, s in sides.items() if s == "slower") == [(128, 1024), (256, 1024)]
