"""tmlib.analysis.measurements: the machine matching and the "your run" sentence of the records page, and the
structured fields of the records that the page reads (once stated only in sentences)."""
import numpy as np
import pytest

from tmlib.analysis.measurements import course_machine, verdict, your_run

M1 = {"cpu_model": "AMD EPYC", "cpu_count": 2, "cpu_native_bf16": True, "gpu": None}
M3 = {**M1, "cpu_native_bf16": False}
M2 = {**M1, "cpu_model": "Intel(R) Xeon(R) Processor"}
HISTORY = {"step": [100, 2228], "elapsed_s": [60.0, 900.0], "val_nll": [2.5, 1.8712, 1.9], "val_step": [238, 1429, 2228]}
REFS = {"M1": {"steps": 2161, "best_val_nll": 1.8743}, "M3": {"steps": 939, "best_val_nll": 1.9888}}


def test_course_machine_matches_model_and_bf16():
    assert [course_machine(m) for m in (M1, M2, M3)] == ["M1", "M2", "M3"]
    assert course_machine(None) is None
    assert course_machine({**M1, "cpu_count": 4}) is None
    assert course_machine({**M1, "gpu": {"name": "NVIDIA H200"}}) is None
    assert course_machine({**M1, "cpu_model": "Other"}) is None


def test_your_run_against_the_machine_it_matches():
    text = your_run(HISTORY, M1, "bfloat16", REFS)
    assert text.startswith("2,228 steps in 15.0 minutes, lowest validation cross-entropy 1.8712 at step 1,429.")
    assert "in bf16 on a machine with the CPU model and instruction sets of M1: 1.03 times the 2,161 steps" in text
    assert "0.0031 below that run's 1.8743" in text


def test_your_run_recognises_a_stored_run_and_an_unknown_machine():
    stored = {"step": [939], "elapsed_s": [904.0], "val_nll": [1.9888], "val_step": [939]}
    assert your_run(stored, M3, "float32", REFS).endswith("This is M3's run in the table, the one that comes with the course.")
    assert "unlike M1, M2 and M3: not recorded." in your_run(HISTORY, None, "float32", REFS)
    assert "unlike M1, M2 and M3" in your_run(HISTORY, M2, "float32", REFS)  # no M2 run among the references


def test_your_run_against_the_yardstick():
    inside = your_run(HISTORY, M1, "bfloat16", REFS, yardstick=(0.003, 0.016))
    assert inside.endswith("within the gaps between two runs of the same kind (0.003 to 0.016): no difference shown.")
    outside = your_run(HISTORY, M1, "bfloat16", {"M1": {"steps": 2161, "best_val_nll": 1.95}}, yardstick=(0.003, 0.016))
    assert outside.endswith("larger than the gaps between two runs of the same kind (0.003 to 0.016).")


def test_your_run_with_another_dropout_leaves_out_the_yardstick():
    refs = {"M1": {"steps": 2161, "best_val_nll": 1.8743, "model_config": {"dropout": 0.0}}}
    text = your_run(HISTORY, M1, "bfloat16", refs, yardstick=(0.001, 0.004), dropout=0.1)
    assert text.endswith("The two runs differ in dropout (0.1 against 0), so that gap is not set beside the gaps "
                         "between two runs of the same kind.")
    assert "no difference shown" not in text
    same = your_run(HISTORY, M1, "bfloat16", refs, yardstick=(0.001, 0.004), dropout=0.0)
    assert same.endswith("(0.001 to 0.004): no difference shown.")


def test_records_store_as_fields_what_their_sentences_state():
    """The records page reads these numbers from fields; each must equal the number the record's sentence states."""
    import re

    from tmlib.analysis.benchmarking import load_result

    files = ["translate_cpu.json", "translate_cpu_auto.json", "translate_cpu_avx2.json", "translate_cpu_seed1.json",
             "translate_cpu_fp32_emulated.json", "translate_cpu_fp32_emulated_run1.json", "translate_cuda.json"]
    for file in files:
        record = load_result(file=file)
        kept = re.match(r"kept best \(keep_best\): step (\d+)", record["weights_scored"])
        assert record["kept_step"] == (int(kept.group(1)) if kept else None), file
        assert record["test_sentences"] == 1000 and "(1000 sentences)" in record["test_set"], file
    assert load_result(file="translate_cpu_fp32_emulated_run1.json")["kept_step"] is None  # scored its last weights
    for file, probe in (("translate_cpu_auto.json", {"float32": 0.48, "bf16": 0.51}),
                        ("translate_cpu_avx2.json", {"float32": 0.92, "bf16": 20.95})):
        record = load_result(file=file)
        assert record["probe_s"] == probe, file
        assert f"{probe['float32']:.2f} s" in record["note"] and f"{probe['bf16']:.2f} s" in record["note"], file
    for file in ("translate_cpu_fp32_emulated.json", "translate_cpu_fp32_emulated_run1.json"):
        record = load_result(file=file)
        assert record["step_budget"] == {"steps": 1215, "measured": 1105, "factor": 1.1}, file
        assert "step budget 1215 = 1105 steps measured there in 15 min x 1.10" in record["note"], file
    speed = load_result(file="cpu_recipe.json")["speed"][0]
    assert speed["compile_warmup_s"] == 197.0 and "warm-up took 197.0 s" in speed["what"]


def test_ratio_interval_known_values():
    from tmlib.analysis.measurements import ratio_interval

    # logs of [e, e**3]: mean 2, sd sqrt(2), t(0.975, 1) = 12.706, half-width 12.706 * sqrt(2) / sqrt(2)
    mean, low, high = ratio_interval([np.e, np.e**3])
    assert mean == pytest.approx(np.e**2) and low == pytest.approx(np.exp(2 - 12.7062), rel=1e-4)
    assert high == pytest.approx(np.exp(2 + 12.7062), rel=1e-4)
    # three windows: logs 0, 1, 2 (sd 1), t(0.975, 2) = 4.3027
    mean, low, high = ratio_interval(np.exp([0.0, 1.0, 2.0]))
    assert (mean, low, high) == pytest.approx((np.e, np.exp(1 - 4.3027 / np.sqrt(3)), np.exp(1 + 4.3027 / np.sqrt(3))),
                                              rel=1e-4)
    assert ratio_interval([2.0, 2.0, 2.0]) == pytest.approx((2.0, 2.0, 2.0))  # no spread: a point
    assert ratio_interval([0.8, 1.25], level=0.5)[0] == pytest.approx(1.0)
    for bad, level in (([1.0], 0.95), ([1.0, 2.0], 1.0), ([1.0, -2.0], 0.95)):
        with pytest.raises(ValueError):
            ratio_interval(bad, level)


def test_verdict_outcomes_and_bad_input():
    assert verdict([3.07, 3.89, 2.92]).endswith("excludes 1: the ratio stands")
    assert "3 windows, spread by a factor of 1.33" in verdict([3.07, 3.89, 2.92])
    assert "geometric mean 3.267, 95% interval 2.233 to 4.780" in verdict([3.07, 3.89, 2.92])
    assert verdict([0.78, 0.86, 1.14]).endswith("contains 1: no difference shown")
    assert "interval 0.560 to 1.492" in verdict([0.78, 0.86, 1.14])
    # a real 3% difference in 31 windows: all on one side of 1 it is not, yet the interval excludes 1
    noise = np.tile([0.98, 1.02], 16)[:31] * np.array([1.0] * 30 + [0.99])
    ratios = 1.03 * noise
    assert min(ratios) < 1 < max(ratios)
    assert verdict(ratios).endswith("excludes 1: the ratio stands")
    # without a difference, the same 31 windows show none
    assert verdict(noise).endswith("contains 1: no difference shown")
    assert verdict([1.2]).endswith("not yet a measurement")  # one window
    assert verdict([0.5, 1.2]).endswith("not yet a measurement")
    # a rejection by the spread test names both causes: steady noise over many windows also spreads them (rejection_rates)
    assert "the windows disagree (the load changed, or the noise is too large for this many windows)" in verdict([0.5, 1.2])
    assert "the load changed during the run" not in verdict([0.5, 1.2])
    assert verdict([0.4, 0.79]).endswith("no difference shown")  # agree (1.98), but two windows give a wide interval
    assert verdict([0.4, 0.8]).endswith("not yet a measurement")  # spread exactly 2 is not agreement
    for bad in ([], [1.0, 0.0], [1.0, float("nan")], [-1.2]):
        with pytest.raises(ValueError, match="positive, finite ratio"):
            verdict(bad)


def test_seed_yardstick_gaps_and_refusals():
    import copy

    from tmlib.analysis.benchmarking import load_result
    from tmlib.analysis.measurements import SEED_GAPS, seed_yardstick

    a = load_result(file="translate_cpu.json")
    b = copy.deepcopy(a)
    b["train_config"].update(seed=1, max_minutes=60.0, max_steps=a["steps"], amp="bf16")  # how it stopped may differ
    b["beam4"]["bleu"] -= 0.5
    b["greedy"]["bleu_lowercase"] += 0.25
    b["best_val_nll"] += 0.01
    gaps = seed_yardstick(a, b)
    assert list(gaps) == list(SEED_GAPS)
    assert gaps["BLEU, beam 4"] == pytest.approx(0.5) and gaps["BLEU lowercased, greedy"] == pytest.approx(0.25)
    assert gaps["lowest validation cross-entropy"] == pytest.approx(0.01) and gaps["BLEU lowercased, beam 4"] == 0
    assert seed_yardstick(b, a) == gaps
    with pytest.raises(ValueError, match="two seeds"):
        seed_yardstick(a, a)
    for change in ({"steps": a["steps"] - 1}, {"precision": "float32"}):
        with pytest.raises(ValueError, match="more than their seed"):
            seed_yardstick(a, {**b, **change})
    other = copy.deepcopy(b)
    other["train_config"]["lr_factor"] = 0.5
    with pytest.raises(ValueError, match="lr_factor"):
        seed_yardstick(a, other)


def test_seed_yardstick_accepts_the_stored_seed_pair():
    """The records page's yardstick: the book's bf16 run and its copy with seed 1 differ only in their seed."""
    from tmlib.analysis.benchmarking import load_result
    from tmlib.analysis.measurements import SEED_GAPS, seed_yardstick

    a, b = load_result(file="translate_cpu.json"), load_result(file="translate_cpu_seed1.json")
    gaps = seed_yardstick(a, b)
    assert list(gaps) == list(SEED_GAPS) and all(g > 0 for g in gaps.values())
    assert gaps["lowest validation cross-entropy"] == pytest.approx(abs(a["best_val_nll"] - b["best_val_nll"]))
    # your_run takes the seeds' two cross-entropy gaps as its yardstick
    gap = (gaps["lowest validation cross-entropy"], gaps["last validation cross-entropy"])
    assert your_run(HISTORY, M1, "bfloat16", REFS, yardstick=(min(gap), max(gap))).endswith(
        f"two runs of the same kind ({min(gap):.3f} to {max(gap):.3f}): no difference shown.")


def test_pace_four_outcomes_and_bad_input():
    from tmlib.analysis.measurements import PACE, pace

    assert PACE == 1.5
    assert pace([0.105, 0.031], [0.0999, 0.0310]).endswith(": at the record's pace")
    assert "1.91 and 1.91 times the record's" in pace([0.191, 0.0592], [0.1, 0.031])
    assert pace([0.191, 0.0592], [0.1, 0.031]).endswith("slower than the record's pace")  # the loaded machine
    assert pace([0.16, 0.031], [0.1, 0.031]).endswith("slower than the record's pace")  # one beyond, one at 1
    assert pace([0.15, 0.0310], [0.1, 0.031]).endswith(": at the record's pace")  # exactly PACE is within
    assert pace([0.05, 0.02], [0.1, 0.031]).endswith("faster than the record's pace")
    assert pace([0.05, 0.062], [0.1, 0.031]).endswith("not the record's pace")
    for live, stored in (([], []), ([0.1], [0.1, 0.2]), ([0.1, 0.0], [0.1, 0.1]), ([float("inf")], [0.1])):
        with pytest.raises(ValueError, match="positive, finite medians"):
            pace(live, stored)


def test_your_run_names_the_training_date_and_not_the_speed():
    text = your_run(HISTORY, {**M1, "date": "2026-11-29T11:06:35+00:00"}, "bfloat16", REFS, yardstick=(0.001, 0.004))
    assert "It trained in bf16 on 2026-11-29 on a machine with the CPU model and instruction sets of M1: 1.03" in text
    assert "The same kind of CPU is not a promise of the same speed." in text
    assert text.endswith("(0.001 to 0.004): no difference shown.")
    assert " on 20" not in your_run(HISTORY, M1, "bfloat16", REFS)  # no date recorded, none printed


def test_verdict_and_pace_return_plain_sentences_with_one_conclusion_each():
    """Each sentence is a plain str and ends in exactly one of the rule's conclusions, the right one."""
    from tmlib.analysis.measurements import pace

    verdicts = ("not yet a measurement", "the ratio stands", "no difference shown")
    cases = {"the ratio stands": [3.07, 3.89, 2.92], "no difference shown": [0.78, 0.86, 1.14],
             "not yet a measurement": [0.5, 1.2]}
    for outcome, ratios in cases.items():
        result = verdict(ratios)
        assert type(result) is str and result.endswith(outcome)
        assert [v for v in verdicts if v in result] == [outcome], result
    paces = ("at the record's pace", "slower than the record's pace", "faster than the record's pace",
             "not the record's pace")
    lives = ([0.105, 0.031], [0.191, 0.0592], [0.05, 0.02], [0.05, 0.062])
    for live, outcome in zip(lives, paces):
        result = pace(live, [0.1, 0.031])
        assert type(result) is str and result.endswith(": " + outcome), result
        assert [p for p in paces if result.endswith(p)] == [outcome], result


def test_record_threads_reads_tables_keyed_by_thread_count():
    from tmlib.analysis.benchmarking import load_result
    from tmlib.analysis.measurements import record_threads

    record = {"machine": {"torch_threads": 1}, "settings": {"threads": 1},
              "results": {"profile": {"s_per_token_by_threads": {"1": {"with_cache": 1e-3},
                                                                  "2": {"with_cache": 9e-4}}}}}
    assert record_threads(record) == [1, 2]
    assert record_threads({"machine": {"torch_threads": 2}, "note_by_threads": "2 and 4"}) == [2]  # not a table
    assert record_threads({}) == []
    assert record_threads(load_result("kv_cache")) == [1, 2]  # the KV-cache record times one step with 1 and 2 threads


def test_rejection_rates_apply_the_rule_of_verdict():
    """The simulation's two shares are verdict's spread test and ratio_interval's test, run by run, on the same draws."""
    from tmlib.analysis.measurements import ratio_interval, rejection_rates

    rates = rejection_rates((3, 8), 0.3, runs=300, seed=1)
    rng = np.random.default_rng(1)  # the same draws, in the same order
    for w in (3, 8):
        runs = np.exp(rng.normal(0, 0.3, size=(300, w)))
        rejected = np.mean([verdict(r).endswith("so not yet a measurement") for r in runs])
        found = np.mean([not (ratio_interval(r)[1] <= 1 <= ratio_interval(r)[2]) for r in runs])
        assert rates[w] == {"spread": pytest.approx(rejected), "interval": pytest.approx(found)}
    assert 0 < rates[3]["spread"] < rates[8]["spread"] < 1
    assert list(rejection_rates(5, 0.2, runs=10)) == [5]  # one int: one number of windows


def test_rejection_rates_known_shares_and_limits():
    from tmlib.analysis.measurements import rejection_rates

    rates = rejection_rates((3, 31), 0.2)  # the page's seeded simulation (seed 0, 10,000 runs)
    assert rates[3] == {"spread": 0.0361, "interval": 0.0489}  # drawn before 31's runs, from one generator
    assert rates[31]["spread"] == pytest.approx(0.8299) and abs(rates[31]["interval"] - 0.05) < 0.01
    assert rejection_rates(7, 1e-3, runs=500)[7]["spread"] == 0  # tiny noise: the windows always agree
    assert rejection_rates(7, 3.0, runs=500)[7]["spread"] == 1  # huge noise: they never do
    for bad in ({"windows": 1}, {"windows": (3, 1)}, {"windows": ()}, {"windows": 2.5}, {"sigma": 0},
                {"sigma": -0.1}, {"sigma": float("nan")}, {"runs": 0}):
        with pytest.raises(ValueError):
            rejection_rates(**{"windows": 3, "sigma": 0.2, "runs": 10, **bad})
