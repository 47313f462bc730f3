"""The assignment loop: markup -> student notebooks and grading specs -> graded submissions -> gradebook.

The `graded` fixture builds every chapter's assignment and, from the built student notebooks, writes per chapter the
course's solution and one submission per round of typical mistakes (`exercise_mistakes.py`), plus two cheating
submissions of chapter 1, and grades them with `tools/assignments.py grade` (in the bubblewrap sandbox where it
works, else without). A few minutes. The attacks on the grader are in `test_grading_attacks.py`, its parts in
`test_grading_units.py`.
"""
from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
import assignments as A  # noqa: E402
import exercise_mistakes as M  # noqa: E402
import grading  # noqa: E402
import student_edition as S  # noqa: E402

MIN_MISTAKES = 3  # typical mistakes per build-it, at least (issue 24), in every graded chapter
MIN_MISTAKES_BY_CHAPTER: dict = {}  # a chapter that needs another minimum (none now)

# chapters 1-8, and the later chapters whose exercises are graded (by name: chapters after 9 may be renumbered);
# TMLIB_ASSIGNMENT_CHAPTERS=01,02,03 grades only those chapters (a quicker loop while working on them).
# Not yet chapters 9 (training_translator) and 11 (looking_inside), which read Multi30k and the trained run of
# runs/multi30k. Time is not the obstacle: with TMLIB_SMOKE=1 each trains the smoke model in its sandbox (no run is
# needed), and the course's solution of each was graded in 76 s (chapter 9) and 71 s (chapter 11) per submission, in
# bwrap on a loaded 2-core machine. Two things are: (1) the sandbox sees Multi30k only where the grading exposes
# TMLIB_DATA_DIR (`expose=`), which the fixture below does not; (2) the judge's reference namespace runs every code
# cell of the chapter, the `smoke-only` cells included, while the student notebook leaves those out, so in smoke mode
# the two sides measure different data (chapter 11: 20 sentences against 200) and the course's own solution of
# exercise 11.3 (ex-11-prune) scored 1 of 2 ("curve[0] ... far off"). The reference must leave out the smoke-only
# cells too (tools/assignments.py, `reference=` of build_one); then both chapters can join, with their typical
# mistakes in exercise_mistakes.py.
GRADED_LATER = {"finding_bugs", "efficiency", "modern_transformer"}
_ONLY = [c for c in os.environ.get("TMLIB_ASSIGNMENT_CHAPTERS", "").split(",") if c]
CHAPTERS = [p for p in sorted((ROOT / "notebooks").glob("0[1-8]_*.ipynb")) + [
    p for p in sorted((ROOT / "notebooks").glob("1[0-9]_*.ipynb")) if p.stem.split("_", 1)[1] in GRADED_LATER]
    if not _ONLY or p.stem[:2] in _ONLY]


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


def test_every_answer_in_words_has_a_marking_row(tmp_path):
    """The instructors' page gives each exercise graded by hand one row of its marking scheme (what a full answer
    says, a weight), numbered as on the site; the weights add up to the total the page states; the build copies a
    chapter's rows into its autograder folder."""
    import student_notebooks

    book, rows, manual = student_notebooks.Book(), A.marking_rows(), {}
    for path in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        _, exercises = A.student_notebook(_read(path), path=str(path))
        for m in A.graded_by_hand(A.exercise_titles(book, path)[1], exercises):
            manual[m["label"]] = m["title"].replace(" (in words)", "")
    assert set(rows) == set(manual), (sorted(set(manual) - set(rows)), sorted(set(rows) - set(manual)))
    for label, title in manual.items():
        assert rows[label].startswith(f"| {title} |"), (label, title, rows[label][:40])
    weights = [float(r.rstrip(" |").rsplit("|", 1)[1]) for r in rows.values()]
    page = A.MARKING_PAGE.read_text(encoding="utf-8")
    assert f"each of the {len(rows)} answers in words" in page and f": {sum(weights):g} points in all" in page
    A.write_marking(tmp_path, [{"label": "ex-01-sqrt", "title": "Exercise 1.4 (in words)"}], rows)
    assert (tmp_path / A.MARKING_FILE).read_text().count("| Exercise 1.4 |") == 1


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


def test_questions_in_words_get_an_answer_cell():
    """Issue 24: an exercise that asks for a value or a function and also a question in words (``"essay": true`` on
    its stub) gets a Markdown cell for the answer after its checks in the student notebook; the marker is checked."""
    import student_notebooks as sn

    numbers = sn.Book().exercise_numbers
    found = set()
    for path in CHAPTERS:
        essays = [c.metadata["assignment"]["exercise"] for c in _read(path).cells
                  if c.metadata.get("assignment", {}).get("essay")]
        cells = _read(ROOT / "student" / path.name).cells
        for label in essays:
            found.add(label)
            head = next(i for i, c in enumerate(cells)  # the exercise's heading may follow a section's heading
                        if re.search(rf"^### Exercise {re.escape(numbers[label])}\n", c.source, re.M))
            end = next((i for i, c in enumerate(cells) if i > head and c.cell_type == "markdown"
                        and re.match(r"#{2,3} ", c.source)), len(cells))
            assert cells[end - 1].source.startswith(f"*Your answer to Exercise {numbers[label]}, in words"), label
            assert any("assignment-stub" in c.metadata.get("tags", []) or "assignment" in c.metadata
                       for c in cells[head:end - 1]), f"{label}: the answer cell does not follow the exercise's work"
    if any(p.stem.startswith("02_") for p in CHAPTERS):
        assert {"ex-02-permute", "ex-02-memory", "ex-02-one-head"} <= found
    if any(p.stem.startswith("12_") for p in CHAPTERS):
        assert "ex-12-layer-crossover" in found
    stub = _cell("x = 1", mark={"exercise": "ex-00-toy", "stub": "x = ...", "essay": "yes"})
    with pytest.raises(ValueError, match="'essay' is true or false"):
        A.transform(_toy(stub))
    on_check = _cell("assert x == 1", tags=["remove-cell"], mark={"exercise": "ex-00-toy", "check": "public", "essay": True})
    with pytest.raises(ValueError, match="on a stub cell"):
        A.transform(_toy(_cell("x = 1", mark={"exercise": "ex-00-toy", "stub": "x = ..."}), on_check))


def test_a_value_exercise_may_forbid_without_check_own_work():
    """A value carries no trace of how it was computed, so an exercise whose stubs are values (exercise 6.1: the
    peak of the schedule, not from R.noam_lr) forbids references without ``check_own_work``: they raise while the
    submission's stub cells run. A build-it still needs the public check that tells the student."""
    public = A.Check("ex-00-toy", "public", "assert x > 0")
    A.check_forbid(A.Exercise("ex-00-toy", 1, [public], ["tmlib.ref.noam_lr"]), "toy")
    with pytest.raises(ValueError, match="must call check_own_work"):
        A.check_forbid(A.Exercise("ex-00-toy", 1, [public], ["tmlib.ref.noam_lr"], builds=True), "toy")
    with pytest.raises(ValueError, match="names nothing importable"):
        A.check_forbid(A.Exercise("ex-00-toy", 1, [public], ["tmlib.ref.no_such_function"]), "toy")
    _, exercises = A.transform(_read(ROOT / "notebooks" / "06_training_recipe.ipynb"))
    assert not exercises["ex-06-peak"].builds and exercises["ex-06-lrate"].builds
    assert {"tmlib.ref.noam_lr", "tmlib.training.NoamSchedule"} <= set(exercises["ex-06-peak"].forbid)


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


CH1 = "01_attention_by_hand"
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
CHEATS = {  # chapter 1, graded 7/7 by the Otter-based grader
    "carol": {("ex-01-example3", 0): PATCH_CHECKS + "my_answer = np.zeros((1, 1))",
              ("ex-01-shift", 0): "w_shifted = np.zeros((3, 3))\nw_other = np.zeros((3, 3))",
              ("ex-01-temperature", 0): "w_q3 = np.zeros((60, 3))", ("ex-01-sqrt", 0): "std_dk = 0.0",
              ("ex-01-softmax", 0): "def stable_softmax(x):\n    return np.zeros_like(x)",
              ("ex-01-masked", 0): "def masked_attention(q, k, v, mask):\n    return np.zeros((len(q), 1)), np.zeros(mask.shape)"},
    "dave": {("ex-01-example3", 0): PATCH_RUNNER, ("ex-01-shift", 0): None, ("ex-01-temperature", 0): None,
             ("ex-01-sqrt", 0): None, ("ex-01-softmax", 0): None, ("ex-01-masked", 0): None},
}


def mistakes_of(source) -> dict[str, list]:
    """The typical mistakes of a chapter's exercises (``exercise_mistakes.MISTAKES``, and "calls the library's own
    version" for each stub with ``forbid`` markup)."""
    out = {label: list(found) for label, found in M.MISTAKES.items()}
    for cell in source.cells:
        mark = cell.metadata.get("assignment", {})
        for name in mark.get("forbid", []):
            extra = M.delegating(mark["stub"], name)
            if extra is not None:
                out.setdefault(mark["exercise"], []).append(extra)
    return out


def write_submissions(out, subs) -> dict:
    """Per chapter with typical mistakes: the course's solution (``SOLUTION``) and one submission per round of
    mistakes (``mistakes<k>``, the k-th mistake of every exercise); the two cheats of chapter 1. Returns
    ``{(student, chapter): [(exercise label, mistake)]}``."""
    planted = {}
    for path in CHAPTERS:
        source, stem = _read(path), path.stem
        student = _read(out / stem / "student" / f"{stem}.ipynb")
        ref = A.reference_solutions(source)
        found = {label: ms for label, ms in mistakes_of(source).items() if (label, 0) in ref}
        if not found:
            continue
        nbformat.write(A.fill_stubs(student, source), subs / f"SOLUTION__{stem}.ipynb")
        for k in range(max(len(ms) for ms in found.values())):
            edits, who = {}, f"mistakes{k}"
            for label, ms in found.items():
                if k < len(ms):
                    edits[(label, ms[k].stub)] = ms[k].apply(ref[(label, ms[k].stub)])
                    planted.setdefault((who, stem[:2]), []).append((label, ms[k]))
            nbformat.write(A.fill_stubs(student, source, edits), subs / f"{who}__{stem}.ipynb")
        if stem == CH1:
            for who, edits in CHEATS.items():
                nbformat.write(A.fill_stubs(student, source, edits), subs / f"{who}__{stem}.ipynb")
    return planted


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Build every chapter (the Otter archive for chapter 1 only), grade the submissions once (about two minutes)."""
    tmp = tmp_path_factory.mktemp("grading_loop")
    out, subs = tmp / "assignments", tmp / "submissions"
    subs.mkdir()
    built = A.build(out, [p for p in CHAPTERS if p.stem != CH1], zip_it=False)
    built.update(A.build(out, [ROOT / "notebooks" / f"{CH1}.ipynb"]))
    planted = write_submissions(out, subs)
    sandbox = "bwrap" if grading.probe() is None else "none"
    A.grade(subs, out, tmp / "results", sandbox=sandbox)
    with (tmp / "results" / "gradebook.csv").open() as f:
        rows = {(r["student"], r["chapter"], r["exercise"]): (float(r["points"]), float(r["max_points"]))
                for r in csv.DictReader(f)}
    return {"out": out, "built": built, "rows": rows, "planted": planted, "results": tmp / "results"}


def test_grading_loop(graded):
    out, rows = graded["out"], graded["rows"]
    assert set(graded["built"]) == {p.stem for p in CHAPTERS}
    assert len(list((out / CH1 / "autograder").glob("*-autograder.zip"))) == 1
    for path in CHAPTERS:
        assert (out / path.stem / "autograder" / A.SPEC_FILE).is_file()
        assert (out / path.stem / "student" / path.name).read_bytes() == (ROOT / "student" / path.name).read_bytes(), \
            f"{path.name}: the assignment handed out differs from student/"
    solved = {ch for (who, ch, ex) in rows if who == "SOLUTION"}
    assert solved == {ch for (_, ch) in graded["planted"]}
    for ch in solved:
        got, full = rows[("SOLUTION", ch, "TOTAL")]
        assert got == full > 0, f"chapter {ch}: the course's solutions scored {got} of {full}"


def test_typical_mistakes_score_zero_on_their_exercise(graded):
    rows = graded["rows"]
    for (who, ch), planted in graded["planted"].items():
        for label, mistake in planted:
            got, full = rows[(who, ch, A.qname(label))]
            assert full > 0 and got == 0, f"{label}: the mistake '{mistake.what}' scored {got} of {full}"


def test_every_build_it_has_typical_mistakes():
    """Each exercise whose stub is a function or a class to write keeps its typical mistakes in exercise_mistakes.py
    (issue 24 asks for three per build-it; the exercises' writer raises MIN_MISTAKES as they are added)."""
    for path in CHAPTERS:
        source = _read(path)
        found = mistakes_of(source)
        for cell in source.cells:
            mark = cell.metadata.get("assignment", {})
            if "stub" in mark and re.search(r"^(def|class) \w+", mark["stub"], re.M):
                least = MIN_MISTAKES_BY_CHAPTER.get(path.stem[:2], MIN_MISTAKES)
                assert len(found.get(mark["exercise"], [])) >= least, f"{mark['exercise']}: too few mistakes"


def test_rebinding_check_close_and_zeros_score_nothing(graded):
    assert graded["rows"][("carol", "01", "TOTAL")] == (0, 13)


def test_patching_the_test_runner_and_the_driver_scores_nothing(graded):
    assert graded["rows"][("dave", "01", "TOTAL")] == (0, 13)


def test_student_id_rules(tmp_path):
    assert A.student_id(tmp_path / "alice__01_x.ipynb", tmp_path) == "alice"
    assert A.student_id(tmp_path / "bob.ipynb", tmp_path) == "bob"
    assert A.student_id(tmp_path / "carol" / "whatever__01.ipynb", tmp_path) == "carol"

