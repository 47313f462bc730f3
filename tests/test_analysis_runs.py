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


def _history(val_nll, val_loss, n_steps=100, loss=2.0):
    """A made-up history: ``n_steps`` steps of constant training loss, a validation pass every 25 steps."""
    val_step = [25 * (i + 1) for i in range(len(val_nll))]
    return {"step": list(range(1, n_steps + 1)), "loss": [loss] * n_steps, "val_step": val_step,
            "val_loss": val_loss, "val_nll": val_nll}


def test_progress_sentence_says_whether_the_run_still_improved():
    from tmlib.analysis.runs import progress_sentence

    falling = progress_sentence(_history([3.0, 2.5, 2.0, 1.5], [3.2, 2.7, 1.9, 1.8]), best_step=100)
    assert falling == ("This run was still improving at its last validation pass: its lowest cross-entropy, 1.500 "
                       "nats (perplexity 4.5), at step 100, validation pass 4 of 4. The model holds the weights of "
                       "step 100. Of its 4 label-smoothed validation losses, 2 lie below the smoothed training loss, "
                       "at steps 75, 100.")
    rising = progress_sentence(_history([3.0, 1.5, 1.6, 1.7], [3.2, 1.9, 2.1, 2.2]))
    assert rising.startswith("This run's validation cross-entropy was lowest at 1.500 nats (perplexity 4.5), at step "
                             "50, validation pass 2 of 4, and rose in the 2 passes after it: the last, at step 100, "
                             "gave 1.700 (label-smoothed 2.200).")
    assert "holds the weights" not in rising and rising.endswith("1 lies below the smoothed training loss, at step 50.")
    one = progress_sentence(_history([1.5, 1.6], [2.5, 2.6]))
    assert "rose in the 1 pass after it" in one and one.endswith("0 lie below the smoothed training loss.")
    assert "Of its 1 label-smoothed validation loss," in progress_sentence(_history([1.5], [2.5]))
    with pytest.raises(ValueError, match="val_nll"):
        progress_sentence({"step": [1], "loss": [2.0]})
    with pytest.raises(ValueError, match="losses"):
        progress_sentence({**_history([1.5], [2.5]), "loss": [2.0]})


def test_beam_greedy_sentence_compares_the_rounded_scores():
    from tmlib.analysis.runs import beam_greedy_sentence

    def scores(beam, greedy):
        return {"beam 4": {"bleu": beam, "chrf": 57.31}, "greedy": {"bleu": greedy, "chrf": 56.64}}

    assert beam_greedy_sentence(scores(37.62, 36.61)) == ("On this run beam search scores 1.0 BLEU above greedy "
                                                          "decoding (37.6 against 36.6), and chrF 57.3 against 56.6.")
    assert "scores 0.3 BLEU below greedy decoding (36.3 against 36.6)" in beam_greedy_sentence(scores(36.3, 36.6))
    assert "scores the same BLEU as greedy decoding (36.6 against 36.6)" in beam_greedy_sentence(scores(36.62, 36.58))
    with pytest.raises(KeyError):
        beam_greedy_sentence({"greedy": {"bleu": 1.0, "chrf": 1.0}})


def test_stored_run_sentence_names_the_run_of_the_same_dropout():
    import pandas as pd
    from tmlib.analysis.runs import stored_run_sentence

    runs = pd.DataFrame({"dropout": [0.0, 0.0, 0.1], "lowest validation cross-entropy": [1.874, 1.875, 1.796],
                         "BLEU (cased, beam 4)": [37.62, 38.54, 38.44]},
                        index=["no dropout, first seed", "no dropout, second seed", "dropout 0.1, first seed"])
    with_dropout = stored_run_sentence(2262, 9, 0.1, 1.7921, runs)
    assert with_dropout == ("This page's run (2,262 steps, 9 epochs, dropout 0.1) reached a lowest validation "
                            "cross-entropy of 1.792 nats; the stored run \u201cdropout 0.1, first seed\u201d reached "
                            "1.796. The two seeds without dropout lie 0.9 BLEU and 0.001 nats of cross-entropy apart.")
    assert "\u201cno dropout, first seed\u201d reached 1.874." in stored_run_sentence(939, 3, 0.0, 2.1, runs)
    alone = stored_run_sentence(939, 3, 0.2, 2.1, runs.iloc[2:])  # no stored run of its dropout, no seed pair
    assert alone == ("This page's run (939 steps, 3 epochs, dropout 0.2) reached a lowest validation cross-entropy "
                     "of 2.100 nats.")


def test_same_run_sentence_tells_the_same_run_from_another():
    from tmlib.analysis.runs import common_steps_difference, same_run_sentence

    record = {"val_nll_per_epoch": [[1, 238, 3.9765], [2, 476, 2.918], [2, 500, 2.9]], "steps": 500,
              "kept_step": 500, "best_val_nll": 2.9, "beam4": {"bleu": 30.04},
              "train_config": {"seed": 0}, "machine": {"cpu_model": "AMD EPYC"}}
    history = {"val_step": [238, 476, 600], "val_nll": [3.97651, 2.91799, 2.8]}
    steps, differ = common_steps_difference(history, record)
    assert steps == [238, 476] and differ < 5e-5
    assert common_steps_difference({"val_step": [1], "val_nll": [3.0]}, record) is None
    kw = dict(seed=0, cpu_model="AMD EPYC", steps=600, lowest=2.8, best_step=600, bleu=29.6)
    same = same_run_sentence(differ, 476, record, **kw)
    assert same == ("Same seed, same configuration, same kind of CPU: up to step 476 this page's run computed the "
                    "same validation cross-entropies as the stored run, and it then made 100 more steps (600 against "
                    "500). Its kept weights, the same training 100 steps further on, have the lower cross-entropy "
                    "(2.800 against 2.900) yet the lower BLEU (29.6 against 30.0): 0.4 BLEU apart for nearly the same "
                    "model, which is BLEU's noise.")
    assert same_run_sentence(differ, 476, record, **{**kw, "bleu": 30.5}).endswith("(600 against 500).")
    other = "This page's run and the stored one differ by up to 0.0012 nats at their common steps."
    assert same_run_sentence(0.0012, 476, record, **kw) == other
    assert same_run_sentence(differ, 476, record, **{**kw, "seed": 1}).startswith("This page's run and the stored")
    assert same_run_sentence(differ, 476, record, **{**kw, "cpu_model": None}).startswith("This page's run and")


def test_dropout_choice_sentence_only_for_a_choice_made():
    from tmlib.analysis.runs import dropout_choice_sentence

    assert dropout_choice_sentence({"passes": 13.14, "p": 0.1}, 9) == (
        "This page's run: the budget bought about 13.1 epochs at the pace timed before the first step, so the trainer "
        "chose dropout 0.1; the run completed 9 epochs.")
    assert "chose dropout 0;" in dropout_choice_sentence({"passes": 3.2, "p": 0.0}, 3)
    assert dropout_choice_sentence(None, 3) is None and dropout_choice_sentence({"passes": None}, 3) is None
