"""Autograded assignments from the course notebooks (one source of truth), graded with Otter-Grader.

Usage (what `make assignments` and `make grade` run):

    python tools/assignments.py build [--out _build/assignments] [NOTEBOOK ...]
    python tools/assignments.py grade SUBMISSIONS [--assignments _build/assignments] [--out gradebook.csv]

``build`` reads every chapter notebook ``notebooks/NN_*.ipynb`` whose exercises carry the markup below and writes,
per chapter, under ``_build/assignments/NN_name/``:

* ``student/NN_name.ipynb``: the chapter with every exercise solution replaced by its stub, the public checks as
  visible code cells (they only need ``tmlib``, so they run in Colab too), hidden tests and solution text removed,
  outputs cleared. Its metadata ``tmlib_assignment`` names the chapter (the grader reads it, so a student may
  rename the file).
* ``autograder/tests/<exercise>.py``: one Otter test file per exercise (public checks and hidden tests, as
  Otter exception-based test cases).
* ``autograder/NN_name-autograder.zip``: Otter's autograder (``otter generate``), for ``otter run``,
  ``tools/assignments.py grade`` or an upload to Gradescope as a programming assignment.

``grade`` executes each submitted notebook with Otter's non-containerized runner (no Docker) against the
autograder of its chapter and writes a gradebook CSV with one row per student and exercise (``student``,
``chapter``, ``exercise``, ``points``, ``max_points``) and one ``TOTAL`` row per student and chapter.
The **student id is taken from the file name**: the part before the first ``__`` of the file's stem
(``alice__01_attention_by_hand.ipynb`` -> ``alice``), or the whole stem when there is no ``__``
(``alice.ipynb`` -> ``alice``); a submission inside a sub-folder of SUBMISSIONS takes the sub-folder's name
instead (``SUBMISSIONS/alice/anything.ipynb`` -> ``alice``), as LMS downloads are often laid out.

The markup (cell metadata key ``assignment``; CONTRIBUTING.md, "Assignments", is the reference):

* a code cell of a gated solution (between ``{solution-start}`` and ``{solution-end}``) with
  ``{"assignment": {"exercise": LABEL, "stub": CODE}}`` is replaced by ``CODE`` in the student notebook;
  solution code cells without a stub, and the solution's markdown, are left out;
* a code cell tagged ``remove-cell`` with ``{"assignment": {"exercise": LABEL, "check": "public", "points": P}}``
  is a public check: hidden on the site, shown (untagged, without output) in the student notebook, and an Otter
  test case worth P points (default 1);
* the same with ``"check": "hidden"`` is a hidden test: only in the autograder.

Check and test cells run against the notebook's global variables; they should call ``tmlib.course.checks.check_close``
(whose messages state the tolerance) or ``assert`` with a message. They also run, against the reference
solution, whenever the chapter is executed (the site build and nbval), so a check that rejects the course's own
solution fails ``make test``.
"""
from __future__ import annotations

import argparse
import copy
import csv
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
KEY = "assignment"
META = "tmlib_assignment"
FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})\{(?P<name>[a-z-]+)\}")
LABEL = re.compile(r"^[ \t]*:label:[ \t]*(?P<label>\S+)", re.MULTILINE)
CHECK_KINDS = ("public", "hidden")


# --------------------------------------------------------------------------------------------- markdown helpers
def directive_names(source: str) -> set[str]:
    """Names of the fenced MyST directives (```{name} or :::{name}) that open in a markdown string."""
    return {m.group("name") for m in map(FENCE_OPEN.match, source.splitlines()) if m}


def strip_solution_blocks(text: str) -> str:
    """Remove `{solution}` fenced blocks (``` or :::) from a markdown string."""
    out, lines, i = [], text.splitlines(keepends=True), 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if m and m.group("name") == "solution":
            fence = m.group("fence")
            i += 1
            while i < len(lines) and lines[i].strip() != fence:
                i += 1
            i += 1  # skip the closing fence
            continue
        out.append(lines[i])
        i += 1
    return "".join(out)


def split_at(source: str, name: str) -> tuple[str, str]:
    """Split a markdown cell around the fenced `{name}` directive: (text before it, text after it)."""
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = FENCE_OPEN.match(line)
        if m and m.group("name") == name:
            j = i + 1
            while j < len(lines) and lines[j].strip() != m.group("fence"):
                j += 1
            return "".join(lines[:i]), "".join(lines[j + 1:])
    return source, ""


def solution_start_label(source: str) -> str | None:
    """The exercise label of a ```{solution-start} LABEL``` directive in a markdown cell, if any."""
    for line in source.splitlines():
        m = FENCE_OPEN.match(line)
        if m and m.group("name") == "solution-start":
            rest = line[m.end():].strip()
            return rest or None
    return None


# --------------------------------------------------------------------------------------------- the transformation
@dataclass
class Check:
    """One public check or hidden test of an exercise: code run against the notebook's globals."""
    exercise: str
    kind: str  # "public" or "hidden"
    code: str
    points: float = 1.0


@dataclass
class Exercise:
    label: str
    stubs: int = 0
    checks: list[Check] = field(default_factory=list)

    @property
    def points(self) -> float:
        return sum(c.points for c in self.checks)


def cell_markup(cell) -> dict | None:
    """The ``assignment`` metadata of a cell, validated; None when the cell has none."""
    mark = cell.get("metadata", {}).get(KEY)
    if mark is None:
        return None
    if not isinstance(mark, dict) or not isinstance(mark.get("exercise"), str):
        raise ValueError(f"cell {cell.get('id')}: metadata '{KEY}' must be a dict with an 'exercise' label, got {mark!r}")
    if cell.cell_type != "code":
        raise ValueError(f"cell {cell.get('id')}: '{KEY}' metadata belongs on code cells only")
    has_stub, kind = "stub" in mark, mark.get("check")
    if has_stub == (kind is not None):
        raise ValueError(f"cell {cell.get('id')} ({mark['exercise']}): give exactly one of 'stub' or 'check'")
    if kind is not None:
        if kind not in CHECK_KINDS:
            raise ValueError(f"cell {cell.get('id')}: 'check' must be one of {CHECK_KINDS}, got {kind!r}")
        if "remove-cell" not in cell.metadata.get("tags", []):
            raise ValueError(f"cell {cell.get('id')} ({mark['exercise']}): a {kind} check must be tagged "
                             "'remove-cell' so that the site does not show it")
        points = mark.get("points", 1)
        if isinstance(points, bool) or not isinstance(points, (int, float)) or points <= 0:
            raise ValueError(f"cell {cell.get('id')}: points must be a positive number, got {points!r}")
    return mark


def transform(nb, *, path: str = "notebook") -> tuple[list, dict[str, Exercise]]:
    """Student cells of a chapter notebook and its marked-up exercises.

    Removes every solution (``{solution}`` blocks, gated solutions with their code and text), puts the stubs
    of marked solution cells and the public checks in their place, and drops hidden tests. Returns the new
    cell list (fresh cells, no outputs for the replaced ones) and the exercises keyed by label, in order.

    Raises:
        ValueError: unbalanced solution-start/solution-end, markup outside a gated solution, markup whose
            exercise label differs from the enclosing solution's, or malformed markup (see :func:`cell_markup`).
    """
    kept, exercises = [], {}
    inside: str | None = None  # the label of the gated solution we are in
    for cell in nb.cells:
        names = directive_names(cell.source) if cell.cell_type == "markdown" else set()
        mark = cell_markup(cell)
        if "solution-start" in names:
            if inside is not None:
                raise ValueError(f"{path}: solution-start inside the gated solution of {inside}")
            inside = solution_start_label(cell.source) or "?"
            before = split_at(cell.source, "solution-start")[0]
            if before.strip():  # text before the solution (e.g. the exercise itself) stays
                kept.append(nbformat.v4.new_markdown_cell(before))
            continue
        if inside is not None:
            if "solution-end" in names:
                inside = None
                after = split_at(cell.source, "solution-end")[1]
                if after.strip():  # text after the closing fence stays
                    kept.append(nbformat.v4.new_markdown_cell(after))
                continue
            if mark is None:
                continue  # solution code or text: left out
            if mark["exercise"] != inside:
                raise ValueError(f"{path}: cell {cell.get('id')} is marked for {mark['exercise']} but sits in the "
                                 f"solution of {inside}")
            ex = exercises.setdefault(inside, Exercise(inside))
            if "stub" in mark:
                stub = nbformat.v4.new_code_cell(mark["stub"].rstrip("\n"))
                stub.metadata["tags"] = ["assignment-stub"]
                stub.metadata[KEY] = {"exercise": inside, "stub": ex.stubs}  # which stub, never the solution
                kept.append(stub)
                ex.stubs += 1
            else:
                check = Check(inside, mark["check"], cell.source, float(mark.get("points", 1)))
                ex.checks.append(check)
                if check.kind == "public":
                    visible = nbformat.v4.new_code_cell(cell.source)
                    visible.metadata["tags"] = ["assignment-check"]
                    kept.append(visible)
            continue
        if mark is not None:
            raise ValueError(f"{path}: cell {cell.get('id')} has '{KEY}' markup outside a gated solution")
        if "solution" in names:
            cell = copy.deepcopy(cell)
            cell.source = strip_solution_blocks(cell.source)
            if not cell.source.strip():
                continue
        kept.append(cell)
    if inside is not None:
        raise ValueError(f"{path}: solution-start of {inside} without solution-end")
    for ex in exercises.values():
        if ex.stubs == 0 or not any(c.kind == "public" for c in ex.checks):
            raise ValueError(f"{path}: exercise {ex.label} needs at least one stub and one public check")
    return kept, exercises


def reference_solutions(nb) -> dict[tuple[str, int], str]:
    """The course's solution code for each stub: ``{(exercise label, stub index): source}``.

    The student notebook's stub cells carry ``{"exercise": label, "stub": index}`` in their ``assignment``
    metadata; this maps them back to the source notebook's solution cells (for tests and for instructors).
    """
    out, counts = {}, {}
    for cell in nb.cells:
        mark = cell_markup(cell)
        if mark is not None and "stub" in mark:
            k = counts.get(mark["exercise"], 0)
            out[(mark["exercise"], k)] = cell.source
            counts[mark["exercise"]] = k + 1
    return out


def student_notebook(nb, *, path: str = "notebook", clear_outputs: bool = True):
    """A copy of ``nb`` with solutions replaced by stubs and public checks (see :func:`transform`)."""
    out = copy.deepcopy(nb)
    out.cells, exercises = transform(out, path=path)
    for cell in out.cells:
        if cell.cell_type == "code" and clear_outputs:
            cell.outputs, cell.execution_count = [], None
    for i, cell in enumerate(out.cells):  # fresh, unique cell ids
        cell["id"] = f"c{i:03d}"
    return out, exercises


# --------------------------------------------------------------------------------------------- Otter test files
def qname(label: str) -> str:
    """Otter question name of an exercise label: ``ex-01-example3`` -> ``ex_01_example3``."""
    return re.sub(r"\W", "_", label)


def otter_test_file(ex: Exercise) -> str:
    """An Otter exception-based test file: one test case per public check and hidden test."""
    lines = [
        f'"""Tests of exercise {ex.label}, generated by tools/assignments.py from the chapter notebook."""',
        "from otter.test_files import test_case",
        "",
        "OK_FORMAT = False",
        "",
        f"name = {qname(ex.label)!r}",
        f"points = {ex.points:g}",
        "",
        "",
        "def _run(env, code):",
        "    # the check's code runs on a copy of the submission's globals (it cannot change them)",
        f"    exec(compile(code, {ex.label + ' check'!r}, 'exec'), dict(env))",
    ]
    for i, check in enumerate(ex.checks, start=1):
        lines += [
            "",
            "",
            f"@test_case(points={check.points:g}, hidden={check.kind == 'hidden'})",
            f"def test_{check.kind}_{i}(env):",
            f"    _run(env, {check.code!r})",
        ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------- build
def chapter_of(path: Path) -> str:
    m = re.match(r"(\d+)_", path.name)
    if not m:
        raise ValueError(f"{path}: chapter notebooks are named NN_name.ipynb")
    return m.group(1)


GRADER_REQUIREMENTS = """\
# What the grading environment needs (Gradescope builds it from this file; local grading uses the course venv).
numpy>=1.24
pandas>=2
matplotlib>=3.7
seaborn>=0.12
torch>=2.1
tmlib @ git+https://github.com/attention-executable/attention-executable
"""

INTRO = """\
**Assignment.** This is the notebook of chapter {chapter} with the exercise solutions taken out. For each
exercise, fill in the cell(s) marked `...`, then run the check cell below it: it says what is wrong and which
tolerance it used. Hidden tests grade your final notebook, so run it top to bottom before you submit it as
`YOURID__{stem}.ipynb` (your id, two underscores, anything).
"""


def build_one(src: Path, out_root: Path, *, zip_it: bool = True) -> dict[str, Exercise]:
    """Build the student notebook, the test files and the autograder zip of one chapter."""
    nb = nbformat.read(src, as_version=4)
    student, exercises = student_notebook(nb, path=str(src))
    if not exercises:
        return {}
    stem, chapter = src.stem, chapter_of(src)
    student.cells.insert(1, nbformat.v4.new_markdown_cell(INTRO.format(chapter=int(chapter), stem=stem)))
    student.cells[1]["id"] = "assignment-intro"
    student.metadata[META] = {"chapter": chapter, "notebook": stem,
                              "exercises": {qname(e.label): e.points for e in exercises.values()}}
    base = out_root / stem
    shutil.rmtree(base, ignore_errors=True)
    (base / "student").mkdir(parents=True)
    tests = base / "autograder" / "tests"
    tests.mkdir(parents=True)
    nbformat.write(student, base / "student" / f"{stem}.ipynb")
    for ex in exercises.values():
        (tests / f"{qname(ex.label)}.py").write_text(otter_test_file(ex))
    req = base / "autograder" / "requirements.txt"
    req.write_text(GRADER_REQUIREMENTS)
    if zip_it:
        otter = Path(sys.executable).with_name("otter")
        cmd = [str(otter) if otter.exists() else "otter", "generate", "--tests-dir", "tests",
               "--output-path", f"{stem}-autograder.zip", "--requirements", "requirements.txt",
               "--no-config", "--no-environment"]
        subprocess.run(cmd, cwd=base / "autograder", check=True, capture_output=True, text=True)
    return exercises


def build(out: Path, notebooks: list[Path], *, zip_it: bool = True) -> dict[str, dict[str, Exercise]]:
    out.mkdir(parents=True, exist_ok=True)
    built = {}
    for src in notebooks:
        exercises = build_one(src, out, zip_it=zip_it)
        if exercises:
            built[src.stem] = exercises
            pts = sum(e.points for e in exercises.values())
            print(f"{src.stem}: {len(exercises)} graded exercise(s), {pts:g} points "
                  f"({sum(len(e.checks) for e in exercises.values())} checks)")
        else:
            print(f"{src.stem}: no marked-up exercise, skipped")
    print(f"assignments in {out}")
    return built


# --------------------------------------------------------------------------------------------- grade
def student_id(path: Path, root: Path) -> str:
    """Student id of a submission: its sub-folder under ``root``, else the file stem up to the first ``__``."""
    rel = path.relative_to(root)
    if len(rel.parts) > 1:
        return rel.parts[0]
    return path.stem.split("__", 1)[0]


def grade(submissions: Path, assignments: Path, out_csv: Path, *, quiet: bool = True) -> list[dict]:
    """Grade every ``*.ipynb`` under ``submissions``; write and return the gradebook rows."""
    from otter.api import grade_submission  # imported here: `build` does not need otter's runtime

    files = sorted(p for p in submissions.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    if not files:
        raise SystemExit(f"no .ipynb submissions under {submissions}")
    rows = []
    for path in files:
        nb = nbformat.read(path, as_version=4)
        meta = nb.metadata.get(META)
        if not meta:
            print(f"skipped {path}: not an assignment notebook (no '{META}' metadata)", file=sys.stderr)
            continue
        zips = list((assignments / meta["notebook"] / "autograder").glob("*-autograder.zip"))
        if len(zips) != 1:
            raise SystemExit(f"{path}: no autograder for {meta['notebook']} in {assignments} (run the build first)")
        sid = student_id(path, submissions)
        try:
            results = grade_submission(str(path), str(zips[0]), quiet=quiet).results
        except Exception as err:  # a broken submission scores 0 and does not stop the others
            print(f"{sid}: grading {path.name} failed ({type(err).__name__}: {err}); scored 0", file=sys.stderr)
            results = {}
        total = possible = 0.0
        for q, max_points in meta["exercises"].items():
            res = results.get(q)
            score = float(res.score) if res is not None else 0.0
            rows.append({"student": sid, "chapter": meta["chapter"], "exercise": q,
                         "points": round(score, 4), "max_points": max_points})
            total, possible = total + score, possible + max_points
        rows.append({"student": sid, "chapter": meta["chapter"], "exercise": "TOTAL",
                     "points": round(total, 4), "max_points": possible})
        print(f"{sid} chapter {meta['chapter']}: {total:g} / {possible:g}")
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with out_csv.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "chapter", "exercise", "points", "max_points"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"gradebook: {out_csv}")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="student notebooks and autograders under --out")
    b.add_argument("notebooks", nargs="*", type=Path, help="chapter notebooks (default: notebooks/[0-9]*.ipynb)")
    b.add_argument("--out", type=Path, default=ROOT / "_build" / "assignments")
    b.add_argument("--no-zip", action="store_true", help="skip `otter generate` (test files only)")
    g = sub.add_parser("grade", help="grade a folder of submitted notebooks into a gradebook CSV")
    g.add_argument("submissions", type=Path)
    g.add_argument("--assignments", type=Path, default=ROOT / "_build" / "assignments")
    g.add_argument("--out", type=Path, default=None, help="CSV path (default: SUBMISSIONS/gradebook.csv)")
    g.add_argument("--verbose", action="store_true", help="show Otter's output for each submission")
    args = parser.parse_args(argv)
    if args.command == "build":
        notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
        build(args.out, notebooks, zip_it=not args.no_zip)
    else:
        out = args.out or args.submissions / "gradebook.csv"
        grade(args.submissions, args.assignments, out, quiet=not args.verbose)


if __name__ == "__main__":
    main()
