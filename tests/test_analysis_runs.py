"""tmlib.analysis.runs: chapter 9's table of the stored translation runs and a run of one's own, read against the
records themselves (the numbers of book/measurements.ipynb)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tmlib.analysis.runs import COLUMNS, STORED_RUNS, device_name, translation_runs

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def _record(name: str) -> dict:
    for path in (RESULTS / f"translate_{name}.json", RESULTS / "gpu" / f"translate_{name}.json"):
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    pytest.skip(f"translate_{name}.json is not in this checkout")


def _trained(best_step=1429, precision="float32"):
    """A stand-in for a TrainedModel: 900 steps in 7.5 minutes, three validation passes."""
    history = {"tokens_per_s": [np.nan, 3000.0, 4000.0, 5000.0], "val_nll": [2.5, 1.9, 2.1]}
    return SimpleNamespace(history=history, elapsed_s=450.0, step=900, epoch=3, best_step=best_step,
                           precision={"dtype": precision} if precision else None,
                           model=SimpleNamespace(config=SimpleNamespace(dropout=0.0)))


def test_device_names_are_short():
    assert device_name({"cpu_model": "Intel(R) Xeon(R) Processor", "cpu_count": 2}) == "Intel Xeon, 2 cores"
    assert device_name({"cpu_model": "AMD EPYC 7B13 64-Core Processor", "cpu_count": 4}) == "AMD EPYC 7B13 64-Core, 4 cores"
    assert device_name({"gpu": {"name": "NVIDIA H200"}, "cpu_model": "x"}) == "NVIDIA H200"
    assert device_name(None) == "?, ? cores"


def test_stored_rows_repeat_their_records():
    table = translation_runs()
    assert list(table.columns) == list(COLUMNS) and table.attrs["unavailable"] == []
    assert len(table) == len(STORED_RUNS)
    for (label, row), name in zip(table.iterrows(), STORED_RUNS):
        r = _record(name)
        assert label.endswith(f", {r['minutes_trained']:.0f} min")
        assert row["steps"] == r["steps"] and row["epochs"] == r["epochs_completed"]
        assert row["BLEU (cased, beam 4)"] == r["beam4"]["bleu"] and row["precision"] == r["precision"]
        assert row["steps per minute"] == round(r["steps"] / r["minutes_trained"])
        assert row["lowest validation cross-entropy"] == round(r["best_val_nll"], 3)
    # book/measurements.ipynb: the two CPU runs kept step 1,429, the H200 run step 5,722 (with dropout 0.1)
    assert list(table["kept step"]) == [1429, 1429, 5722]
    assert list(table["dropout"]) == [0.0, 0.0, 0.1]


def test_your_run_is_the_last_row(monkeypatch):
    monkeypatch.delenv("TMLIB_SMOKE", raising=False)  # the default label of a full run (CI sets smoke mode)
    table = translation_runs(_trained(), 36.789, label="mine")
    mine = table.loc["mine"]
    assert table.index[-1] == "mine"
    assert (mine["minutes"], mine["steps"], mine["epochs"], mine["steps per minute"]) == (7.5, 900, 3, 120)
    assert mine["target tokens/s"] == 4000  # the median of the measured windows, NaN left out
    assert (mine["kept step"], mine["lowest validation cross-entropy"]) == (1429, 1.9)
    assert (mine["BLEU (cased, beam 4)"], mine["precision"], mine["dropout"]) == (36.79, "float32", 0.0)
    last = translation_runs(_trained(best_step=None, precision=None), 1.0, names=())
    assert list(last.index) == ["this page's run"]
    assert (last.iloc[0]["kept step"], last.iloc[0]["precision"]) == ("last", "?")
    with pytest.raises(ValueError, match="BLEU"):
        translation_runs(_trained())
    monkeypatch.setenv("TMLIB_SMOKE", "1")  # a smoke run says so in its label
    assert list(translation_runs(_trained(), 1.0, names=()).index) == ["this page's run (smoke)"]


def test_missing_records_are_left_out_and_named(tmp_path, monkeypatch):
    monkeypatch.delenv("TMLIB_SMOKE", raising=False)
    table = translation_runs(_trained(), 30.0, folder=tmp_path)
    assert list(table.index) == ["this page's run"]
    assert table.attrs["unavailable"] == list(STORED_RUNS)
    assert list(translation_runs(folder=tmp_path).columns) == list(COLUMNS)


def test_rows_carry_their_machine_and_record(tmp_path, monkeypatch):
    """table.attrs names each row's machine (device_name) and stored record, so that a page compares machines
    without parsing the row names; a second seed of a stored run gets its own row."""
    monkeypatch.delenv("TMLIB_SMOKE", raising=False)
    record = _record("cpu")
    (tmp_path / "translate_cpu.json").write_text(json.dumps(record), encoding="utf-8")
    seed1 = dict(record, train_config=dict(record["train_config"], seed=1), steps=record["steps"] + 1)
    (tmp_path / "translate_cpu_seed1.json").write_text(json.dumps(seed1), encoding="utf-8")
    mine = _trained()
    mine.machine = {"cpu_model": "Intel(R) Xeon(R) CPU", "cpu_count": 2}
    table = translation_runs(mine, 30.0, names=("cpu", "cpu_seed1", "cuda"), folder=tmp_path)
    first = f"{device_name(record['machine'])}, {record['minutes_trained']:.0f} min"
    assert list(table.index) == [first, first + ", seed 1", "this page's run"]
    assert table.attrs["unavailable"] == ["cuda"]
    assert table.attrs["machine"] == {first: device_name(record["machine"]),
                                      first + ", seed 1": device_name(record["machine"]),
                                      "this page's run": "Intel Xeon, 2 cores"}
    assert table.attrs["record"] == {first: "cpu", first + ", seed 1": "cpu_seed1", "this page's run": None}
    assert table.loc[first + ", seed 1", "steps"] == record["steps"] + 1  # the second record, not the first again
    unknown = translation_runs(_trained(), 30.0, names=(), folder=tmp_path)  # a run that recorded no machine
    assert unknown.attrs["machine"] == {"this page's run": "?, ? cores"}


def test_run_pace_is_seconds_a_step_over_windows_after_the_first():
    from tmlib.analysis.runs import run_pace

    steps = np.arange(1, 501)  # 500 steps: 0.3 s each, but steps 301 to 400 take 1 s (a validation pass among them)
    elapsed = np.cumsum(np.where((steps > 300) & (steps <= 400), 1.0, 0.3))
    pace = run_pace({"step": steps.tolist(), "elapsed_s": elapsed.tolist()}, window=100)
    np.testing.assert_allclose(pace, [0.3, 0.3, 1.0, 0.3])  # windows ending at steps 200, 300, 400, 500
    np.testing.assert_allclose(run_pace({"step": [1, 2, 3, 4], "elapsed_s": [1.0, 2.0, 4.0, 8.0]}, window=1),
                               [1.0, 2.0, 4.0])
    # a smoke run of 30 steps, or a history without elapsed times: no window to report
    assert run_pace({"step": list(range(1, 31)), "elapsed_s": [0.1 * s for s in range(1, 31)]}).shape == (0,)
    assert run_pace({"step": [1, 2], "val_nll": [3.0]}).shape == (0,)
    with pytest.raises(ValueError, match="window"):
        run_pace({"step": [1], "elapsed_s": [1.0]}, window=0)
    with pytest.raises(ValueError, match="elapsed"):
        run_pace({"step": [1, 2], "elapsed_s": [1.0]})


def test_run_pace_of_the_stored_run_matches_its_history():
    from tmlib.analysis.runs import run_pace

    path = Path(__file__).resolve().parents[1] / "runs" / "multi30k" / "history.json"
    if not path.is_file():
        pytest.skip("no run in runs/multi30k")
    h = json.loads(path.read_text())
    pace = run_pace(h)
    assert len(pace) == h["step"][-1] // 100 - 1
    assert np.isclose(pace.sum() * 100, h["elapsed_s"][len(pace) * 100 + 99] - h["elapsed_s"][99])


def test_expected_epochs_divide_by_the_slowdown_only_with_dropout():
    from tmlib.analysis.runs import expected_epochs

    assert expected_epochs(13.2, 1.1, 0.1) == pytest.approx(12.0)  # with dropout: its steps take longer
    assert expected_epochs(13.2, 1.1, 0.0) == 13.2                  # without: the pace that was timed
    assert expected_epochs(0.0, 1.1, 0.1) == 0.0
    for bad in [(-1.0, 1.1, 0.1), (9.0, 0.9, 0.1), (9.0, 1.1, 1.0), (9.0, 1.1, -0.1)]:
        with pytest.raises(ValueError):
            expected_epochs(*bad)
