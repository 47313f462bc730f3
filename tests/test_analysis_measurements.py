"""tmlib.analysis.measurements: the machine matching and the "your run" sentence of the records page."""
from tmlib.analysis.measurements import course_machine, your_run

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
