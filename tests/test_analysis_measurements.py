"""tmlib.analysis.measurements: the machine matching, the numbers stored as text and the "your run" sentence of the
records page."""
import pytest

from tmlib.analysis.measurements import course_machine, text_fields, your_run

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


def test_text_fields_read_the_sentences_of_the_records():
    kept = {"weights_scored": "kept best (keep_best): step 1429", "best_val_nll": 1.8743,
            "note": "amp=auto chose float32 (probe: float32 0.48 s, bf16 0.51 s); the machine quiet"}
    assert text_fields(kept) == {"kept_step": 1429, "lowest_val_nll": 1.8743,
                                 "probe_s": {"float32": 0.48, "bf16": 0.51}}
    last = {"weights_scored": "last (the run predates keep_best; its lowest validation NLL, 1.899 after epoch 5, was "
                              "25 steps before the end)", "note": "emulation"}
    assert text_fields(last) == {"kept_step": None, "lowest_val_nll": 1.899}
    avx2 = {"note": "amp=auto timed float32 0.92 s against bf16 autocast 20.95 s a step and chose float32"}
    assert text_fields(avx2) == {"probe_s": {"float32": 0.92, "bf16": 20.95}}
    recipe = {"speed": [{"what": "alternating windows (the compiled model's warm-up took 197.0 s on a loaded machine)"}]}
    assert text_fields(recipe) == {"compile_warmup_s": pytest.approx(197.0)}


def test_text_fields_of_the_stored_records():
    from tmlib.analysis.benchmarking import load_result

    assert text_fields(load_result(file="translate_cpu_auto.json"))["probe_s"] == {"float32": 0.48, "bf16": 0.51}
    assert text_fields(load_result(file="translate_cpu_fp32_emulated_run1.json"))["lowest_val_nll"] == 1.899
    assert text_fields(load_result(file="translate_cpu_fp32_emulated.json"))["kept_step"] == 1190
    assert text_fields(load_result(file="cpu_recipe.json"))["compile_warmup_s"] == 197.0
