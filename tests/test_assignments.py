"""The assignment loop: markup -> student notebooks and grading specs -> graded submissions -> gradebook.

The `graded` fixture builds every chapter's assignment, makes a correct and a wrong submission for chapters 1 and 3
from the built student notebooks (the correct one fills each stub with the course's solution, the wrong one makes
specific mistakes) and two cheating ones for chapter 1, and grades them with `tools/assignments.py grade` (in the
bubblewrap sandbox where it works, else without). About a minute. The attacks on the grader are in
`test_grading_attacks.py`, its parts in `test_grading_units.py`.
"""
from __future__ import annotations

import copy
import csv
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
import assignments as A  # noqa: E402
import grading  # noqa: E402
import student_edition as S  # noqa: E402

CHAPTERS = sorted((ROOT / "notebooks").glob("0[1-8]_*.ipynb"))


def _read(path):
    return nbformat.read(path, as_version=4)


def _cell(source, tags=(), mark=None, kind="code"):
    cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
    if tags:
        cell.metadata["tags"] = list(tags)
    if mark is not None:
        cell.metadata["assignment"] = mark
    return cell


def _toy(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("```{exercise}\n:label: ex-00-toy\nCompute x.\n```", kind="markdown"),
                _cell("```{solution-start} ex-00-toy\n:class: dropdown\n```", kind="markdown"),
                *cells,
                _cell("```{solution-end}\n```", kind="markdown")]
    return nb


def test_every_chapter_1_to_8_has_graded_exercises():
    for path in CHAPTERS:
        _, exercises = A.student_notebook(_read(path), path=str(path))
        assert len(exercises) >= 2, f"{path.name}: {len(exercises)} graded exercises"
        for ex in exercises.values():
            assert any(c.kind == "hidden" for c in ex.checks), f"{ex.label} has no hidden test"


def test_student_notebooks_hold_no_solution_and_no_hidden_test():
    for path in CHAPTERS:
        source = _read(path)
        student, exercises = A.student_notebook(source, path=str(path))
        text = "\n".join(c.source for c in student.cells)
        for (label, k), solution in A.reference_solutions(source).items():
            stubs = [c for c in student.cells if c.metadata.get("assignment") == {"exercise": label, "stub": k}]
            assert len(stubs) == 1 and "..." in stubs[0].source, (label, k)
            assert solution.strip() not in text, f"{path.name}: the solution of {label} leaked"
        for ex in exercises.values():
            for check in ex.checks:
                assert (check.code in text) == (check.kind == "public"), (ex.label, check.kind)
        assert "{solution-start}" not in text and "{solution}" not in text
        assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")


def test_markup_errors_are_reported():
    stub = _cell("x = 1", mark={"exercise": "ex-00-toy", "stub": "x = ..."})
    public = _cell("assert x == 1", tags=["remove-cell"], mark={"exercise": "ex-00-toy", "check": "public"})
    hidden = _cell("assert x == 1", tags=["remove-cell"], mark={"exercise": "ex-00-toy", "check": "hidden", "points": 2})
    cells, exercises = A.transform(_toy(stub, public, hidden))
    assert [c.source for c in cells if c.cell_type == "code"] == ["x = ...", "assert x == 1"]
    assert exercises["ex-00-toy"].points == 3
    untagged = _cell("assert x == 1", mark={"exercise": "ex-00-toy", "check": "public"})
    with pytest.raises(ValueError, match="remove-cell"):
        A.transform(_toy(stub, untagged))
    with pytest.raises(ValueError, match="needs at least one stub and one public check"):
        A.transform(_toy(stub, hidden))
    wrong_label = _cell("x = 1", mark={"exercise": "ex-00-other", "stub": "x = ..."})
    with pytest.raises(ValueError, match="sits in the solution of ex-00-toy"):
        A.transform(_toy(wrong_label, public))
    both = _cell("x = 1", mark={"exercise": "ex-00-toy", "stub": "x = ...", "check": "public"})
    with pytest.raises(ValueError, match="exactly one of"):
        A.transform(_toy(both))
    outside = nbformat.v4.new_notebook()
    outside.cells = [stub]
    with pytest.raises(ValueError, match="outside a gated solution"):
        A.transform(outside)


def test_otter_test_file_runs_public_and_hidden_cases(tmp_path):
    from otter.test_files import ExceptionTestFile

    ex = A.Exercise("ex-00-toy", stubs=1, checks=[A.Check("ex-00-toy", "public", "assert x > 0, 'x must be positive'"),
                                                  A.Check("ex-00-toy", "hidden", "assert x == 2", points=2)])
    path = tmp_path / "ex_00_toy.py"
    path.write_text(A.otter_test_file(ex))
    scores = {}
    for x in (2, 1, -1):
        test_file = ExceptionTestFile.from_file(str(path))
        test_file.run({"x": x})
        scores[x] = (test_file.score, test_file.possible)
    assert scores == {2: (3, 3), 1: (1, 3), -1: (0, 3)}


def test_student_edition_keeps_text_solution_behaviour(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("Before.\n```{exercise}\n:label: ex-00-t\nWhy?\n```\n\n```{solution} ex-00-t\n:class: dropdown\n"
                      "Because.\n```\nAfter.", kind="markdown")]
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, path)
    assert S.strip_notebook(path) == 1
    text = _read(path).cells[0].source
    assert "Because" not in text and "Before." in text and "After." in text and "{exercise}" in text
    # a marked-up chapter keeps its stubs and public checks, and the committed outputs of other cells
    chapter = tmp_path / CHAPTERS[0].name
    chapter.write_bytes(CHAPTERS[0].read_bytes())
    S.strip_notebook(chapter)
    cells = _read(chapter).cells
    assert any("assignment-stub" in c.metadata.get("tags", []) for c in cells)
    assert any("assignment-check" in c.metadata.get("tags", []) for c in cells)
    assert any(c.get("outputs") for c in cells if c.cell_type == "code")


def _submission(student_nb, source_nb, edits: dict[tuple[str, int], str | None]):
    """Fill every stub with the course's solution, except those in ``edits`` (None: leave the stub as it is)."""
    ref = A.reference_solutions(source_nb)
    nb = copy.deepcopy(student_nb)
    for cell in nb.cells:
        mark = cell.metadata.get("assignment")
        if mark and "stub" in mark:
            key = (mark["exercise"], mark["stub"])
            if key in edits:
                if edits[key] is not None:
                    cell.source = edits[key]
            else:
                cell.source = ref[key]
    return nb


CH1, CH3 = "01_attention_by_hand", "03_ffn_residual_layernorm"
PATCH_CHECKS = """import sys
def _yes(*args, **kwargs):
    return "correct"
for _module in list(sys.modules.values()):  # wherever check_close and check_shape live, under any module path
    for _name in ("check_close", "check_shape"):
        if hasattr(_module, _name):
            setattr(_module, _name, _yes)
check_close = check_shape = _yes
np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
"""
PATCH_RUNNER = """from otter.test_files.abstract_test import TestCaseResult as _R; import otter.test_files.exception_test as _t
_t.ExceptionTestFile.run = lambda self, env: setattr(self, "test_case_results", [_R(test_case=tc, message="ok", passed=True) for tc in self.test_cases])
import __main__  # the grader's extraction driver, if it runs in this process: make it send zeros for everything
if hasattr(__main__, "Encoder"):
    __main__.Encoder.encode = lambda self, value, depth=0: {"t": "int", "v": "0"}
"""
WRONG = {
    CH1: {("ex-01-example3", 0): "my_answer = np.array([[2.26]])  # a slip in the second decimal",
          ("ex-01-shift", 0): "u = np.array([3.0, -1.0])\n_, w_shifted = R.scaled_dot_product_attention(Q, K + u, V)\n"
                              "w_other = w_shifted  # wrong: the key-dependent shift was not applied",
          ("ex-01-temperature", 0): None,
          ("ex-01-softmax", 0): "def stable_softmax(x):  # no maximum subtracted: overflows\n"
                                "    return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)",
          ("ex-01-masked", 0): None},
    CH3: {("ex-03-relu", 0): "b1_new = np.array([2.0, 0.0])  # sign slip\nout_new = R.feed_forward(x, w1, b1_new, w2, b2)",
          ("ex-03-layernorm", 0): "def my_layer_norm(x, gamma, beta, eps=1e-5):  # unbiased variance\n"
                                  "    return gamma * (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps) + beta"},
}
CHEATS = {  # chapter 1, graded 7/7 by the Otter-based grader
    "carol": {("ex-01-example3", 0): PATCH_CHECKS + "my_answer = np.zeros((1, 1))",
              ("ex-01-shift", 0): "w_shifted = np.zeros((3, 3))\nw_other = np.zeros((3, 3))",
              ("ex-01-temperature", 0): "w_q3 = np.zeros((60, 3))",
              ("ex-01-softmax", 0): "def stable_softmax(x):\n    return np.zeros_like(x)",
              ("ex-01-masked", 0): "def masked_attention(q, k, v, mask):\n    return np.zeros((len(q), 1)), np.zeros(mask.shape)"},
    "dave": {("ex-01-example3", 0): PATCH_RUNNER, ("ex-01-shift", 0): None, ("ex-01-temperature", 0): None,
             ("ex-01-softmax", 0): None, ("ex-01-masked", 0): None},
}


def write_chapter_submissions(out, subs):
    """Correct (alice) and wrong (bob) submissions of chapters 1 and 3, and the two cheats of chapter 1."""
    for stem in (CH1, CH3):
        student = _read(out / stem / "student" / f"{stem}.ipynb")
        source = _read(ROOT / "notebooks" / f"{stem}.ipynb")
        nbformat.write(_submission(student, source, {}), subs / f"alice__{stem}.ipynb")
        nbformat.write(_submission(student, source, WRONG[stem]), subs / f"bob__{stem}.ipynb")
        if stem == CH1:
            for who, edits in CHEATS.items():
                nbformat.write(_submission(student, source, edits), subs / f"{who}__{stem}.ipynb")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Build every chapter (Otter archives for chapters 1 and 3 only), grade the submissions once."""
    tmp = tmp_path_factory.mktemp("grading_loop")
    out, subs = tmp / "assignments", tmp / "submissions"
    subs.mkdir()
    built = A.build(out, [p for p in CHAPTERS if p.stem not in (CH1, CH3)], zip_it=False)
    built.update(A.build(out, [ROOT / "notebooks" / f"{CH1}.ipynb", ROOT / "notebooks" / f"{CH3}.ipynb"]))
    write_chapter_submissions(out, subs)
    sandbox = "bwrap" if grading.probe() is None else "none"
    A.grade(subs, out, tmp / "gradebook.csv", sandbox=sandbox)
    with (tmp / "gradebook.csv").open() as f:
        rows = {(r["student"], r["chapter"], r["exercise"]): (float(r["points"]), float(r["max_points"]))
                for r in csv.DictReader(f)}
    return {"out": out, "built": built, "rows": rows}


def test_grading_loop(graded):
    out, rows = graded["out"], graded["rows"]
    assert set(graded["built"]) == {p.stem for p in CHAPTERS}
    for stem in (CH1, CH3):
        assert len(list((out / stem / "autograder").glob("*-autograder.zip"))) == 1
    for path in CHAPTERS:
        assert (out / path.stem / "autograder" / A.SPEC_FILE).is_file()
    expected = {
        ("alice", "01", "TOTAL"): (11, 11), ("alice", "03", "TOTAL"): (6, 6),
        ("bob", "01", "ex_01_example3"): (0, 2),     # public (4 decimals) and hidden fail
        ("bob", "01", "ex_01_shift"): (0, 2),        # public and hidden catch the unshifted w_other
        ("bob", "01", "ex_01_temperature"): (0, 3),  # left as the stub
        ("bob", "01", "ex_01_softmax"): (0, 2),     # overflows on the public check's large scores
        ("bob", "01", "ex_01_masked"): (0, 2),      # left as the stub
        ("bob", "01", "TOTAL"): (0, 11),
        ("bob", "03", "ex_03_layernorm"): (0, 2),   # unbiased variance: public and hidden fail
        ("bob", "03", "ex_03_relu"): (0, 2),         # public and hidden compare with b1 = (-2, 0)
        ("bob", "03", "ex_03_ln_invariance"): (2, 2),
        ("bob", "03", "TOTAL"): (2, 6),
    }
    for key, value in expected.items():
        assert rows[key] == value, (key, rows[key], value)
    assert len([k for k in rows if k[0] in ("alice", "bob")]) == 2 * (5 + 1) + 2 * (3 + 1)


def test_rebinding_check_close_and_zeros_score_nothing(graded):
    assert graded["rows"][("carol", "01", "TOTAL")] == (0, 11)


def test_patching_the_test_runner_and_the_driver_scores_nothing(graded):
    assert graded["rows"][("dave", "01", "TOTAL")] == (0, 11)


def test_student_id_rules(tmp_path):
    assert A.student_id(tmp_path / "alice__01_x.ipynb", tmp_path) == "alice"
    assert A.student_id(tmp_path / "bob.ipynb", tmp_path) == "bob"
    assert A.student_id(tmp_path / "carol" / "whatever__01.ipynb", tmp_path) == "carol"


# The build-it-yourself exercises of chapters 2, 4, 5, 7 and 8 (those of chapters 1 and 3 are above): a correct
# submission (fay) and one with the typical mistake of each exercise (gus; the chapter's other exercises correct).
BUILD_IT_MISTAKES = {  # label -> [(text of the course's solution, the mistake put in its place)]
    "ex-02-split-merge": [("x = x.reshape(*lead, n, n_heads, d_model // n_heads)",  # heads cut without transposing
                           "x = x.reshape(*lead, n_heads, n, d_model // n_heads)"),
                          ("return np.swapaxes(x, -2, -3)  #", "return x  #")],
    "ex-04-build-pe": [("10000.0 ** (-np.arange(0, d_model, 2) / d_model)",  # the pair index i read as 2i
                        "10000.0 ** (-np.arange(0, d_model // 2) / d_model)")],
    "ex-05-decoder-layer": [(", mask=R.causal_mask(n_tgt))", ")")],  # self-attention without the causal mask
    "ex-07-mha-module": [("/ self.d_k ** 0.5", "")],  # scores not scaled by sqrt(d_k)
    "ex-08-train-step": [("ignore_index=pad_id, ", "")],  # padding counted in the loss
    "ex-08-greedy": [("logits[:, -1].argmax(dim=-1)", "logits[:, 0].argmax(dim=-1)")],  # the first position's logits
}
BUILD_IT_CHAPTERS = sorted({label[3:5] for label in BUILD_IT_MISTAKES})


@pytest.fixture(scope="module")
def graded_build_it(graded, tmp_path_factory):
    out = graded["out"]
    subs = tmp_path_factory.mktemp("build_it") / "submissions"
    subs.mkdir()
    for chapter in BUILD_IT_CHAPTERS:
        stem = next(p.stem for p in CHAPTERS if p.name.startswith(chapter))
        student = _read(out / stem / "student" / f"{stem}.ipynb")
        source = _read(ROOT / "notebooks" / f"{stem}.ipynb")
        ref = A.reference_solutions(source)
        wrong = {}
        for label, edits in BUILD_IT_MISTAKES.items():
            if label[3:5] != chapter:
                continue
            code = ref[(label, 0)]
            for old, new in edits:
                assert old in code, f"{label}: the solution no longer contains {old!r}; update the mistake"
                code = code.replace(old, new)
            wrong[(label, 0)] = code
        nbformat.write(_submission(student, source, {}), subs / f"fay__{stem}.ipynb")
        nbformat.write(_submission(student, source, wrong), subs / f"gus__{stem}.ipynb")
    sandbox = "bwrap" if grading.probe() is None else "none"
    A.grade(subs, out, subs.parent / "gradebook.csv", sandbox=sandbox)
    with (subs.parent / "gradebook.csv").open() as f:
        return {(r["student"], r["chapter"], r["exercise"]): (float(r["points"]), float(r["max_points"]))
                for r in csv.DictReader(f)}


def test_build_it_yourself_exercises_grade_right_and_wrong(graded_build_it):
    rows = graded_build_it
    for chapter in BUILD_IT_CHAPTERS:
        got, full = rows[("fay", chapter, "TOTAL")]
        assert got == full > 0, f"chapter {chapter}: the course's solutions scored {got} of {full}"
    for label in BUILD_IT_MISTAKES:
        got, full = rows[("gus", label[3:5], A.qname(label))]
        assert full >= 2 and got == 0, f"{label}: the typical mistake scored {got} of {full}"
    for (who, chapter, exercise), (got, full) in rows.items():  # gus's other exercises are the course's solutions
        if who == "gus" and exercise != "TOTAL" and exercise not in {A.qname(l) for l in BUILD_IT_MISTAKES}:
            assert got == full, (chapter, exercise, got, full)
