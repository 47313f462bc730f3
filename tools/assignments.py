"""Autograded assignments from the course notebooks (one source of truth), graded in a sandbox.

Usage (what `make assignments` and `make grade` run):

    python tools/assignments.py build [--out _build/assignments] [--no-zip] [--site URL] [NOTEBOOK ...]
    python tools/assignments.py grade SUBMISSIONS [--assignments _build/assignments] [--out CSV_OR_FOLDER]
                                      [--chapter NN] [--no-sandbox] [--timeout S] [--memory-mb M]
                                      [--processes P] [--judge-timeout S] [--jobs N] [--expose PATH] [--verbose]
    python tools/assignments.py solutions FOLDER [--assignments _build/assignments]

``build`` reads every chapter notebook ``notebooks/NN_*.ipynb`` that has exercises and writes, per chapter, under
``_build/assignments/NN_name/``:

* ``student/NN_name.ipynb``: the notebook of ``student/`` (``student_notebooks.make``): stubs instead of solutions,
  the public checks visible, hidden tests, solution text and quiz answers out, plain Markdown. Its metadata
  ``tmlib_assignment`` names the assignment (the grader uses it only to pick one of the built assignments, so a
  student may rename the file);
* ``autograder/grading.json`` (instructor only, mode 0700 folder): what ``grade`` uses, see ``grading/spec.py``;
* ``autograder/tests/<exercise>.py`` and ``autograder/NN_name-autograder.zip``: Otter-Grader test files and
  archive (``otter generate``; ``--no-zip`` skips it) for Gradescope, its environment pinned to the lock and to
  the commit (``grading/otter.py``). ``grade`` does not use them: Otter runs the tests in the student's kernel.

``grade`` runs each submission's code in a sandbox and judges the values it sends back outside it (package
``grading``, whose docstrings and CONTRIBUTING.md say what this protects against), and writes the gradebook and the
files beside it (``grading/reports.py``). Where bubblewrap does not work it refuses to grade, unless ``--no-sandbox``
accepts that the submissions' code can then read the hidden tests. ``solutions`` writes the course's own solutions as submissions.

The markup (cell metadata key ``assignment``; CONTRIBUTING.md, "Assignments", is the reference): a code cell of a
gated solution with ``{"exercise": LABEL, "stub": CODE}`` (and optionally ``"forbid": [dotted names]``, and
``"essay": true`` when the exercise also asks a question in words: the student notebook then gets a Markdown cell
for the answer after the exercise's checks) is replaced by ``CODE``; a cell tagged ``remove-cell`` with
``{"exercise": LABEL, "check": "public" | "hidden", "points": P}`` is a public check (shown to the student) or a hidden test. Checks run against the notebook's global variables,
also whenever the chapter is executed, so a check that rejects the course's own solution fails ``make test``.
"""
from __future__ import annotations

import argparse
import copy
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import myst  # noqa: E402
from grading import SPEC_FILE, Limits, SandboxUnavailable, grade, make_spec, student_id  # noqa: E402,F401
from grading.otter import (PYTHON_VERSION, grader_requirements, otter_test_file, otter_zip, qname,  # noqa: E402,F401
                           source_commit)

ROOT = Path(__file__).resolve().parent.parent
KEY = "assignment"
META = "tmlib_assignment"
SMOKE_ONLY = "smoke-only"  # the tag of a cell that only the quick test mode (TMLIB_SMOKE=1) needs: no student
#                            notebook holds it, so the grader's reference leaves it out too
CHECK_KINDS = ("public", "hidden")


# --------------------------------------------------------------------------------------------- markdown helpers
def directive_names(source: str) -> set[str]:
    """Names of the fenced MyST directives (```{name} or :::{name}) in a markdown string, nested ones included."""
    return {d.name for d in myst.directives(source, nested=True)}


def _without(source: str, spans: list[tuple[int, int]]) -> str:
    lines = source.splitlines(keepends=True)
    drop = {i for a, b in spans for i in range(a, b)}
    return "".join(line for i, line in enumerate(lines) if i not in drop)


def strip_solution_blocks(text: str) -> str:
    """Remove `{solution}` fenced blocks (``` or :::) from a markdown string."""
    return _without(text, [(d.start, d.end) for d in myst.directives(text) if d.name == "solution"])


def split_at(source: str, name: str) -> tuple[str, str]:
    """Split a markdown cell around the fenced `{name}` directive: (text before it, text after it)."""
    lines = source.splitlines(keepends=True)
    for d in myst.directives(source):
        if d.name == name:
            return "".join(lines[:d.start]), "".join(lines[d.end:])
    return source, ""


def solution_start_label(source: str) -> str | None:
    """The exercise label of a ```{solution-start} LABEL``` directive in a markdown cell, if any."""
    for d in myst.directives(source):
        if d.name == "solution-start":
            return d.arg or None
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
    forbid: list[str] = field(default_factory=list)  # library references the student must not call
    builds: bool = False  # a stub defines a function or class (a build-it), which check_own_work can inspect
    essay: bool = False  # it also asks a question in words, graded by hand

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
    forbid = mark.get("forbid", [])
    if not isinstance(forbid, list) or not all(isinstance(f, str) and f for f in forbid):
        raise ValueError(f"cell {cell.get('id')}: 'forbid' must be a list of dotted names, got {forbid!r}")
    if forbid and not has_stub:
        raise ValueError(f"cell {cell.get('id')} ({mark['exercise']}): 'forbid' belongs on a stub cell")
    essay = mark.get("essay", False)
    if not isinstance(essay, bool) or (essay and not has_stub):
        raise ValueError(f"cell {cell.get('id')} ({mark['exercise']}): 'essay' is true or false, on a stub cell; "
                         f"got {essay!r}")
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
            before = strip_solution_blocks(split_at(cell.source, "solution-start")[0])
            if before.strip():  # text before the solution (e.g. the exercise itself, less its text solutions) stays
                kept.append(nbformat.v4.new_markdown_cell(before))
            continue
        if inside is not None:
            if "solution-end" in names:
                inside = None
                after = strip_solution_blocks(split_at(cell.source, "solution-end")[1])
                if after.strip():  # text after the closing fence stays
                    kept.append(nbformat.v4.new_markdown_cell(after))
                continue
            if mark is None:
                continue  # solution code or text: left out
            if mark["exercise"] != inside:
                raise ValueError(f"{path}: cell {cell.get('id')} is marked for {mark['exercise']} but sits in the "
                                 f"solution of {inside}")
            ex = exercises.setdefault(inside, Exercise(inside))
            ex.forbid += [f for f in mark.get("forbid", []) if f not in ex.forbid]
            if "stub" in mark:
                ex.builds = ex.builds or bool(re.search(r"^(def|class) \w+", mark["stub"], re.M))
                ex.essay = ex.essay or mark.get("essay", False)
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


def solution_sources(nb) -> dict[str, list[str]]:
    """Per exercise label, the code of its marked solution cells and their stubs (what defines its variables)."""
    out: dict[str, list[str]] = {}
    for cell in nb.cells:
        mark = cell_markup(cell)
        if mark is not None and "stub" in mark:
            out.setdefault(mark["exercise"], []).extend([cell.source, mark["stub"]])
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


# --------------------------------------------------------------------------------------------- build
def chapter_of(path: Path) -> str:
    m = re.match(r"(\d+)_", path.name)
    if not m:
        raise ValueError(f"{path}: chapter notebooks are named NN_name.ipynb")
    return m.group(1)


def assignment_metadata(chapter: str, stem: str, exercises: dict[str, Exercise]) -> dict:
    """The student notebook's ``tmlib_assignment`` metadata: which assignment it is (chapter ``"NN"``, notebook
    stem) and the points of each exercise; the grader uses it to pick the built assignment."""
    return {"chapter": chapter, "notebook": stem, "exercises": {qname(e.label): e.points for e in exercises.values()}}


def exercise_titles(book, src: Path) -> tuple[str, dict[str, str]]:
    """The chapter's title and each of its exercises' titles ("Exercise 1.5", numbered as on the site), in order."""
    titles = {label: f"Exercise {number}" for label, number in book.exercise_numbers.items()
              if number.split(".")[0] == str(int(chapter_of(src)))}
    heading = book.titles.get(book.docname(src), src.stem)
    number, _, rest = heading.partition(". ")
    return (rest if number.isdigit() and rest else heading), titles


def graded_by_hand(titles: dict[str, str], exercises: dict[str, Exercise]) -> list[dict]:
    """The gradebook's hand-graded part of a chapter, in the order of ``titles``: each exercise without checks, and
    the question in words of each checked exercise marked ``essay`` (titled "Exercise 7.4 (in words)")."""
    return [{"label": label, "title": titles[label] if label not in exercises else f"{titles[label]} (in words)"}
            for label in titles if label not in exercises or exercises[label].essay]


def build_one(src: Path, out_root: Path, *, zip_it: bool = True, book=None, commit: str | None = None
              ) -> dict[str, Exercise] | None:
    """Build one chapter's assignment: the student notebook (the same as ``student/``, made by
    ``student_notebooks.make``), the grading spec, the Otter test files and autograder zip.

    The spec lists as graded by hand the exercises without checks and the questions in words of checked ones (the
    gradebook then has a column for them); a chapter whose exercises are all graded by hand gets a spec without
    checks, a chapter without exercises is skipped.

    Raises:
        ValueError: bad markup (:func:`transform`), a check that reads none of its exercise's variables
            (:func:`grading.make_spec`), or a ``forbid`` entry that names nothing importable.
    """
    import student_notebooks

    book = book or student_notebooks.Book()
    nb = nbformat.read(src, as_version=4)
    student = student_notebooks.make(src, book)
    _, exercises = student_notebook(nb, path=str(src))
    title, titles = exercise_titles(book, src)
    manual = graded_by_hand(titles, exercises)
    if not exercises and not manual:
        return None
    for ex in exercises.values():
        check_forbid(ex, str(src))
    stem, chapter = src.stem, chapter_of(src)
    base = out_root / stem
    shutil.rmtree(base, ignore_errors=True)
    (base / "student").mkdir(parents=True)
    tests = base / "autograder" / "tests"
    tests.mkdir(parents=True)
    nbformat.write(student, base / "student" / f"{stem}.ipynb")
    for ex in exercises.values():
        (tests / f"{qname(ex.label)}.py").write_text(otter_test_file(ex))
    (base / "autograder" / "requirements.txt").write_text(grader_requirements(ROOT, commit))
    make_spec(chapter=chapter, notebook=stem, exercises=exercises.values(), solutions=solution_sources(nb),
              reference=[c.source for c in nb.cells
                         if c.cell_type == "code" and SMOKE_ONLY not in c.metadata.get("tags", [])], qname=qname,
              source_dir=str(src.resolve().parent), titles=titles, manual=manual,
              title=title, smoke=graded_quick(nb)).save(base / "autograder" / SPEC_FILE)
    write_marking(base / "autograder", manual, marking_rows())
    (base / "autograder").chmod(0o700)  # hidden tests: for the instructor's user only
    if zip_it and exercises:
        otter_zip(base / "autograder", f"{stem}-autograder.zip", python_version=PYTHON_VERSION)
    return exercises


MARKING_PAGE = ROOT / "book" / "instructors.md"  # its section "Marking the answers in words": a row per answer
MARKING_FILE = "marking.md"


def marking_rows(text: str | None = None) -> dict[str, str]:
    """The marking scheme's rows of the instructors' page, by exercise label: ``{label: "| Exercise 1.4 | ... |"}``
    (a row names its exercise as ``{ref}`1.4 <ex-01-sqrt>```, written here as "Exercise 1.4")."""
    text = MARKING_PAGE.read_text(encoding="utf-8") if text is None else text
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| \{ref\}`([\d.]+) <(ex-[\w-]+)>` \|", line)
        if m:
            rows[m.group(2)] = f"| Exercise {m.group(1)} |" + line[m.end():]
    return rows


def write_marking(folder: Path, manual: list[dict], rows: dict[str, str]) -> None:
    """``folder/marking.md``: the chapter's answers in words, with what a full answer says and a suggested weight."""
    mine = [rows[m["label"]] for m in manual if m["label"] in rows]
    if mine:
        (folder / MARKING_FILE).write_text(
            "# Marking the answers in words (from the instructors' page of the course)\n\n"
            "Each numbered part is worth one point where the parts and the weight agree; where they do not, the row "
            "ends by saying how to split the weight.\n\n"
            "| Exercise | A full answer says | Weight |\n|---|---|---|\n" + "\n".join(mine) + "\n")


def graded_quick(nb) -> bool:
    """Whether the chapter is graded in the quick mode (``TMLIB_SMOKE=1``; ``grading.spec.mode_env``): its notebook
    shrinks a long run in that mode (a cell tagged ``smoke-only``, or code that asks ``smoke_mode()``). Its full run
    trains or loads chapter 9's model, which the sandbox cannot reach, or trains for minutes: past the time limit."""
    return any(c.cell_type == "code" and (SMOKE_ONLY in c.metadata.get("tags", []) or "smoke_mode(" in c.source)
               for c in nb.cells)


def check_forbid(ex: Exercise, where: str) -> None:
    """An exercise's ``forbid`` list names importable references, and, for a build-it (a stub that defines a
    function or class), a public check tells the student to write the code (``check_own_work``). A value carries no
    trace of how it was computed: for an exercise whose stubs are values, the references raise while the
    submission's stub cells run, and the exercise's statement says that they are ruled out. Raises ``ValueError``
    otherwise."""
    if not ex.forbid:
        return
    from tmlib.course.diagnostics import resolve_dotted
    for name in ex.forbid:
        try:
            resolve_dotted(name)
        except LookupError:
            raise ValueError(f"{where}: {ex.label} forbids {name!r}, which names nothing importable") from None
    if ex.builds and not any(c.kind == "public" and "check_own_work(" in c.code for c in ex.checks):
        raise ValueError(f"{where}: {ex.label} forbids {', '.join(ex.forbid)}: one of its public checks must call "
                         "check_own_work(...) so that the student learns it before grading")


def build(out: Path, notebooks: list[Path], *, zip_it: bool = True, site: str | None = None
          ) -> dict[str, dict[str, Exercise]]:
    """Build every chapter's assignment into ``out`` (see :func:`build_one`) and write ``out/.built`` (the
    commit it was built from), which ``make grade`` uses to skip a rebuild."""
    import student_notebooks

    out.mkdir(parents=True, exist_ok=True)
    book, commit = student_notebooks.Book(site=site), source_commit(ROOT)
    built = {}
    for src in notebooks:
        exercises = build_one(src, out, zip_it=zip_it, book=book, commit=commit)
        if exercises:
            built[src.stem] = exercises
            pts = sum(e.points for e in exercises.values())
            print(f"{src.stem}: {len(exercises)} graded exercise(s), {pts:g} points "
                  f"({sum(len(e.checks) for e in exercises.values())} checks)")
        elif exercises is not None:
            print(f"{src.stem}: no autograded exercise (its exercises are graded by hand)")
        else:
            print(f"{src.stem}: no exercise, skipped")
    (out / ".built").write_text(f"{commit or 'unknown'}\n")
    print(f"assignments in {out}")
    return built


def fill_stubs(student, source, edits: dict | None = None):
    """A copy of a built student notebook with every stub replaced by the course's solution (from ``source``),
    except the stubs in ``edits`` (``{(label, k): code}``; None keeps the stub): a submission."""
    ref, nb = reference_solutions(source), copy.deepcopy(student)
    for cell in nb.cells:
        mark = cell.metadata.get(KEY)
        if cell.cell_type == "code" and mark and "stub" in mark:
            key = (mark["exercise"], mark["stub"])
            code = (edits or {}).get(key, ref[key])
            if code is not None:
                cell.source = code
    return nb


def write_solutions(assignments: Path, folder: Path) -> list[Path]:
    """Write ``SOLUTION__NN_name.ipynb``, the course's solutions as submissions, for every built assignment."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for student in sorted(Path(assignments).glob("*/student/*.ipynb")):
        source = nbformat.read(ROOT / "notebooks" / student.name, as_version=4)
        path = folder / f"SOLUTION__{student.name}"
        nbformat.write(fill_stubs(nbformat.read(student, as_version=4), source), path)
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="student notebooks and autograders under --out")
    b.add_argument("notebooks", nargs="*", type=Path, help="chapter notebooks (default: notebooks/[0-9]*.ipynb)")
    b.add_argument("--out", type=Path, default=ROOT / "_build" / "assignments")
    b.add_argument("--no-zip", action="store_true", help="skip `otter generate` (no Gradescope archive)")
    b.add_argument("--site", help="the website the notebooks' links lead to (default: the course's), e.g. a "
                                  "student edition without solutions")
    so = sub.add_parser("solutions", help="the course's own solutions as submissions (to try the grading)")
    so.add_argument("folder", type=Path, help="where to write SOLUTION__NN_name.ipynb")
    so.add_argument("--assignments", type=Path, default=ROOT / "_build" / "assignments")
    g = sub.add_parser("grade", help="grade a folder of submitted notebooks into a gradebook CSV")
    g.add_argument("submissions", type=Path)
    g.add_argument("--assignments", type=Path, default=ROOT / "_build" / "assignments")
    g.add_argument("--out", type=Path, default=None,
                   help="the gradebook CSV, or a folder for it (default: SUBMISSIONS/gradebook.csv); feedback, "
                        "statistics and Canvas/Moodle files are written beside it")
    g.add_argument("--chapter", help="grade every file as this assignment (NN or NN_name), whatever it says")
    g.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="bwrap",
                   help="bwrap (default; auto is the same): the bubblewrap sandbox, or refuse to grade; none: the "
                        "same as --no-sandbox")
    g.add_argument("--no-sandbox", dest="sandbox", action="store_const", const="none",
                   help="grade without a sandbox where bubblewrap is missing, accepting that the submissions' code "
                        "can read the hidden tests, the other submissions and every file you can read")
    g.add_argument("--timeout", type=float, default=Limits.seconds, help="seconds per submission")
    g.add_argument("--memory-mb", type=int, default=Limits.memory_mb,
                   help="memory of a submission, all its processes together")
    g.add_argument("--processes", type=int, default=Limits.processes,
                   help="processes and threads of a submission, all together")
    g.add_argument("--judge-timeout", type=float, default=Limits.judge_seconds,
                   help="seconds to decode and judge one submission's values")
    g.add_argument("--jobs", type=int, default=None,
                   help="submissions graded at once (default: one per CPU, as many as the free memory holds)")
    g.add_argument("--expose", action="append", default=[], metavar="PATH",
                   help="a folder the notebooks need (data), visible read-only in the sandbox; repeatable")
    g.add_argument("--verbose", action="store_true", help="show each submission's output")
    args = parser.parse_args(argv)
    if args.command == "build":
        notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
        build(args.out, notebooks, zip_it=not args.no_zip, site=args.site)
        return
    if args.command == "solutions":
        for path in write_solutions(args.assignments, args.folder):
            print(path)
        return
    limits = Limits(seconds=args.timeout, memory_mb=args.memory_mb, processes=args.processes,
                    judge_seconds=args.judge_timeout)
    try:
        grade(args.submissions, args.assignments, args.out, sandbox=args.sandbox, limits=limits,
              chapter=args.chapter, expose=tuple(args.expose), quiet=not args.verbose, jobs=args.jobs)
    except (FileNotFoundError, ValueError, SandboxUnavailable) as err:
        raise SystemExit(f"grade: {err}") from None


if __name__ == "__main__":
    main()
