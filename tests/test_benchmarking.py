"""tmlib.analysis.benchmarking: the power-law fit (synthetic data of known exponent), timers, measured memory, cache bytes."""
import math
import os

import numpy as np
import pytest
import torch

from tmlib.analysis import benchmarking as B
from tmlib.model import make_model


# ---------------------------------------------------------------- fit_power_law
def test_fit_exact_power_law_recovers_exponent_and_prefactor():
    n = np.array([64, 128, 256, 512, 1024])
    fit = B.fit_power_law(n, 3.0 * n ** 2.0)
    exponent, low, high = fit  # unpacks as a triple
    assert exponent == pytest.approx(2.0, abs=1e-12)
    assert fit.prefactor == pytest.approx(3.0, rel=1e-10)
    assert fit.stderr < 1e-10 and high - low < 1e-9
    np.testing.assert_allclose(fit.predict([10, 100]), [300.0, 30000.0], rtol=1e-10)


def test_fit_interval_matches_textbook_formula():
    # independent reference: numpy's polyfit covariance (scaled by residual variance) and the
    # tabulated t quantile t_{0.975, 5} = 2.570581836
    rng = np.random.default_rng(1)
    n = np.array([16, 32, 64, 128, 256, 512, 1024], dtype=float)
    t = 0.5 * n ** 1.5 * np.exp(rng.normal(0, 0.1, n.size))
    fit = B.fit_power_law(n, t)
    coef, cov = np.polyfit(np.log(n), np.log(t), 1, cov=True)
    se = math.sqrt(cov[0, 0])
    assert fit.exponent == pytest.approx(coef[0], abs=1e-12)
    assert fit.stderr == pytest.approx(se, rel=1e-9)
    assert fit.high - fit.exponent == pytest.approx(2.570581836 * se, rel=1e-8)
    assert fit.low < 1.5 < fit.high


def test_fit_interval_has_its_nominal_coverage():
    # 400 noisy data sets with true exponent 2: about 95% of the intervals contain it
    rng = np.random.default_rng(0)
    n = 2.0 ** np.arange(6, 13)
    hits = 0
    for _ in range(400):
        t = 1e-9 * n ** 2 * np.exp(rng.normal(0, 0.2, n.size))
        _, lo, hi = B.fit_power_law(n, t)
        hits += lo <= 2.0 <= hi
    assert 0.92 <= hits / 400 <= 0.98


def test_fit_confidence_level_widens_interval():
    n = [1, 2, 4, 8, 16]
    t = [1.0, 2.2, 3.9, 8.5, 15.0]
    f90, f99 = B.fit_power_law(n, t, 0.90), B.fit_power_law(n, t, 0.99)
    assert f90.exponent == f99.exponent
    assert f99.low < f90.low < f90.exponent < f90.high < f99.high
    assert "90% CI" in str(f90)


@pytest.mark.parametrize("n, t, msg", [
    ([1, 2, 3], [1, 2], "same length"),
    ([1, 2], [1, 2], "at least 3"),
    ([1, 2, 0], [1, 2, 3], "positive"),
    ([1, 2, 3], [1, -2, 3], "positive"),
    ([1, 2, np.inf], [1, 2, 3], "finite"),
    ([4, 4, 4], [1, 2, 3], "all n are equal"),
    ([[1, 2, 3]], [[1, 2, 3]], "1-D"),
])
def test_fit_rejects_bad_input(n, t, msg):
    with pytest.raises(ValueError, match=msg):
        B.fit_power_law(n, t)


def test_fit_rejects_bad_confidence_and_types():
    with pytest.raises(ValueError, match="confidence"):
        B.fit_power_law([1, 2, 4], [1, 2, 4], confidence=1.0)
    with pytest.raises(TypeError):
        B.fit_power_law(["a", "b", "c"], [1, 2, 3])


# ---------------------------------------------------------------- timing
def test_time_call_counts_calls_and_returns_repeats():
    calls = []
    times = B.time_call(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(times) == 4 and all(t >= 0 for t in times)
    assert len(calls) == 2 + 4


def test_time_call_min_seconds_repeats_short_calls():
    now = [0.0]
    clock = lambda: now[0]

    def call():  # each call "takes" 0.1 ms of the fake clock
        now[0] += 1e-4

    times = B.time_call(call, repeats=2, warmup=0, min_seconds=1e-3, clock=clock)
    # the loop doubles 1, 2, 4, 8, 16 calls until it lasts >= 1 ms; the result is per call
    assert times == [pytest.approx(1e-4), pytest.approx(1e-4)]
    assert now[0] == pytest.approx(1e-4 * (1 + 2 + 4 + 8 + 16 + 2 * 16))


def test_time_call_rejects_bad_arguments():
    with pytest.raises(ValueError):
        B.time_call(lambda: None, repeats=0)
    with pytest.raises(ValueError):
        B.time_call(lambda: None, min_seconds=-1)


# ---------------------------------------------------------------- memory
def test_peak_memory_cpu_is_measured_exactly():
    def two_alive():
        a = torch.empty(1000, 1000)  # 4,000,000 bytes
        b = torch.empty(500, 1000)  # 2,000,000 bytes, while a is alive
        del a, b
        return torch.empty(250, 1000)  # 1,000,000 bytes

    def one_at_a_time():
        a = torch.empty(1000, 1000)
        del a
        b = torch.empty(1000, 1000)
        del b

    assert B.peak_memory_bytes(two_alive) == 6_000_000
    assert B.peak_memory_bytes(one_at_a_time) == 4_000_000
    assert B.peak_memory_bytes(lambda: None) == 0


def test_peak_memory_quiets_the_profiler_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    B.peak_memory_bytes(lambda: None)
    assert os.environ["KINETO_LOG_LEVEL"] == "6"
    monkeypatch.setenv("KINETO_LOG_LEVEL", "2")  # a reader's own setting is kept
    B.peak_memory_bytes(lambda: None)
    assert os.environ["KINETO_LOG_LEVEL"] == "2"


def test_peak_memory_of_explicit_attention_holds_the_score_matrix():
    n, bh = 256, 2
    q = torch.randn(1, bh, n, 16)
    peak = B.peak_memory_bytes(lambda: torch.softmax(q @ q.transpose(-2, -1), -1) @ q)
    assert peak >= bh * n * n * 4  # at least one (n, n) float32 matrix per head


def test_peak_memory_rejects_other_devices():
    with pytest.raises(ValueError, match="cpu' or 'cuda"):
        B.peak_memory_bytes(lambda: None, device="meta")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_peak_memory_cuda():
    peak = B.peak_memory_bytes(lambda: torch.empty(1024, 1024, device="cuda"), device="cuda")
    assert peak == 4 * 1024 * 1024


# ---------------------------------------------------------------- cache bytes
def test_tensor_bytes():
    assert B.tensor_bytes(torch.zeros(3, 4), None, torch.zeros(5, dtype=torch.bfloat16)) == 48 + 10
    with pytest.raises(TypeError):
        B.tensor_bytes([1, 2])


def test_kv_cache_formula_closed_form():
    got = B.kv_cache_bytes(n_layers=2, d_model=256, n_tokens=50, src_len=20)
    assert got == {"per_token": 4096, "self_attn": 204_800, "cross_attn": 81_920, "total": 286_720}
    assert B.kv_cache_bytes(6, 512, 1, batch=3, bytes_per_element=2)["per_token"] == 2 * 6 * 512 * 2 * 3
    with pytest.raises(ValueError):
        B.kv_cache_bytes(0, 256, 1)
    with pytest.raises(TypeError):
        B.kv_cache_bytes(2, 256.0, 1)


def test_decoder_cache_bytes_match_formula_after_decoding():
    torch.manual_seed(0)
    model = make_model("tiny", 30, pad_id=0).eval()
    src = torch.randint(4, 30, (2, 7))
    cache = model.new_cache()
    with torch.no_grad():
        memory = model.encode(src)
        tok = torch.ones(2, 1, dtype=torch.long)
        for _ in range(5):
            tok = model.decode(tok, memory, src, cache=cache)[:, -1:].argmax(-1)
    measured = B.decoder_cache_bytes(cache)
    formula = B.kv_cache_bytes(2, 32, 5, src_len=7, batch=2)
    assert measured == {k: formula[k] for k in ("self_attn", "cross_attn", "total")}
    with pytest.raises(TypeError):
        B.decoder_cache_bytes(object())


def test_load_result_reads_a_folder(tmp_path):
    (tmp_path / "demo_cpu.json").write_text('{"benchmark": "demo", "results": [1, 2]}')
    assert B.load_result("demo", "cpu", folder=tmp_path)["results"] == [1, 2]
    with pytest.raises(FileNotFoundError, match="demo_cuda.json"):
        B.load_result("demo", "cuda", folder=tmp_path)


def test_load_result_reads_a_file_by_its_name(tmp_path):
    """file= reads the records whose names do not follow <name>_<device>.json (cpu_recipe.json, the stand-ins)."""
    (tmp_path / "cpu_recipe.json").write_text('{"benchmark": "recipe", "results": [3]}')
    assert B.load_result(file="cpu_recipe.json", folder=tmp_path)["results"] == [3]
    assert B.load_result(file="translate_cpu_fp32_emulated_run1.json")["steps"] == 1215  # the committed record
    with pytest.raises(TypeError):
        B.load_result()
    with pytest.raises(TypeError):
        B.load_result("cpu", file="cpu_recipe.json")
    with pytest.raises(ValueError):
        B.load_result(file="cpu_recipe")


def test_load_result_reads_the_gpu_runs_sub_folder(tmp_path):
    """The GPU run's records (tools/gpu_check.py) live in results/gpu/; a record beside it comes first."""
    (tmp_path / B.GPU_RESULTS).mkdir()
    (tmp_path / B.GPU_RESULTS / "mfu_cuda.json").write_text('{"benchmark": "mfu", "results": {"mfu": 0.4}}')
    assert B.load_result("mfu", "cuda", folder=tmp_path)["results"] == {"mfu": 0.4}
    (tmp_path / "mfu_cuda.json").write_text('{"benchmark": "mfu", "results": {"mfu": 0.5}}')
    assert B.load_result("mfu", "cuda", folder=tmp_path)["results"] == {"mfu": 0.5}
    with pytest.raises(FileNotFoundError, match="fp16_cuda.json"):
        B.load_result("fp16", "cuda", folder=tmp_path)


def test_load_result_reads_the_committed_records_by_default():
    # without a folder, the repository's benchmarks/results (a checkout) comes before any download
    record = B.load_result("table1", "cpu")
    assert record["device"] == "cpu" and record["results"]


def test_power_law_plot_draws_points_and_fit():
    import matplotlib

    matplotlib.use("Agg")
    from tmlib.course import power_law_plot

    n = np.array([64, 128, 256, 512])
    fit = B.fit_power_law(n, 2.0 * n ** 2)
    ax = power_law_plot([{"label": "explicit", "n": n, "y": 2.0 * n ** 2, "fit": fit, "fit_min_n": 128},
                         {"label": "fused", "n": n, "y": n}], "t", "n", "seconds")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and ax.get_title() == "t"
    assert len(ax.lines) == 3  # two series + one fitted line
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("explicit (slope 2.00, 95% CI 2.00 to 2.00)") and labels[1] == "fused"
    with pytest.raises(ValueError, match="positive"):
        power_law_plot([{"label": "bad", "n": [1, 2], "y": [0, 1]}], "t", "n", "y")
