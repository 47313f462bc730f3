"""``assignments.py grade``: one gradebook row or more for every file under SUBMISSIONS, written by the grader alone.

For each file (sorted; names starting with ``.`` and ``.ipynb_checkpoints`` folders are skipped, and so is the
gradebook itself) the grader

1. reads it as a version-4 notebook without following links and with a size cap; a file it cannot read gets one
   row ``TOTAL`` with 0 points and the note ``not gradable: <reason>`` (empty, invalid JSON, not a notebook...);
2. picks the instructor's assignment it belongs to: ``--chapter``, else the assignment whose name the notebook's
   ``tmlib_assignment.notebook`` metadata gives (used only as a key into the built assignments), else the chapter
   number in the file name (``alice__01_attention_by_hand.ipynb``); when both name different assignments, or
   neither names a built one, the file is not gradable. Exercises, points, checks and the chapter number come
   from the instructor's ``grading.json``, never from the submission;
3. runs the notebook's code cells in the sandbox (``sandbox.py``), which sends back the values the checks read;
   a run past the time limit, a process that died before sending its values, or a malformed message makes the
   file not gradable;
4. judges the values in this process (``judge.py``): one row per exercise and a ``TOTAL`` row.

When a student has more than one file for a chapter, every one of them is graded and each ``TOTAL`` row says
``duplicate``. The CSV is written once, after every sandbox has been killed, to a temporary file that then
replaces the gradebook (``os.replace``); a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return is prefixed with ``'`` so that a spreadsheet does not run it as a formula, and control characters in
student-chosen text become ``?``.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import traceback
from pathlib import Path

from .judge import ReferenceError, calls_for, job_names, judge, self_check
from .sandbox import Limits, choose
from .spec import SPEC_FILE, AssignmentSpec
from .values import BadValues

FIELDS = ["student", "chapter", "exercise", "points", "max_points", "file", "note"]
META = "tmlib_assignment"
MAX_NOTEBOOK_BYTES = 50 * 2**20
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
HERE = Path(__file__).parent  # driver.py and values.py are copied into each sandbox


class NotGradable(Exception):
    """A submission that cannot be graded; the message is the reason written in the gradebook."""


def student_id(path: Path, root: Path) -> str:
    """Student id of a submission: its sub-folder under ``root``, else the file stem up to the first ``__``."""
    rel = path.relative_to(root)
    if len(rel.parts) > 1:
        return rel.parts[0]
    return path.stem.split("__", 1)[0]


def printable(text: str) -> str:
    """``text`` on one line, its control characters (terminal escapes included) replaced by ``?``."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "?", text.replace("\n", " "))


def csv_cell(value):
    """A gradebook cell: numbers as they are; text with control characters replaced and formulas neutralised."""
    if not isinstance(value, str):
        return value
    text = printable(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def write_gradebook(rows: list[dict], path: Path) -> None:
    """Write the CSV atomically (temporary file in the same folder, fsync, ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows({k: csv_cell(row.get(k, "")) for k in FIELDS} for row in rows)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_assignments(folder: Path) -> dict[str, AssignmentSpec]:
    """The instructor's built assignments: ``{notebook stem: spec}`` from ``*/autograder/grading.json``.

    Raises:
        FileNotFoundError: no spec under ``folder`` (the assignments were not built).
        ValueError: a spec that does not load (see :meth:`AssignmentSpec.load`).
    """
    specs = {}
    for path in sorted(Path(folder).glob(f"*/autograder/{SPEC_FILE}")):
        spec = AssignmentSpec.load(path)
        specs[spec.notebook] = spec
    if not specs:
        raise FileNotFoundError(f"no {SPEC_FILE} under {folder}/*/autograder (run `make assignments` first)")
    return specs


def list_submissions(root: Path, exclude: Path) -> list[Path]:
    """Every entry to grade under ``root``: files and links (links are reported, never followed)."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(folder, d)))
        links = [d for d in os.listdir(folder) if os.path.islink(os.path.join(folder, d)) and d not in files]
        for name in sorted({*files, *links}):
            path = Path(folder, name)
            if not name.startswith(".") and path.absolute() != exclude.absolute():
                out.append(path)
    return sorted(out)


def read_notebook(path: Path) -> tuple[list[str], dict]:
    """The code cells (as strings) and metadata of a submitted notebook.

    Raises:
        NotGradable: a link, not a regular file, empty, too large, not UTF-8, invalid JSON, not a version-4
            notebook, or malformed cells.
    """
    if path.suffix != ".ipynb":
        raise NotGradable("not a notebook (.ipynb) file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise NotGradable("a symbolic link (not followed)" if os.path.islink(path) else f"unreadable ({err.strerror})")
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotGradable("not a regular file")
        if info.st_size == 0:
            raise NotGradable("empty file (0 bytes)")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise NotGradable(f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MB")
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    try:
        nb = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise NotGradable("not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise NotGradable(f"invalid JSON ({err.msg}, line {err.lineno})") from None
    except RecursionError:
        raise NotGradable("invalid JSON (nested too deeply)") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) or nb.get("nbformat") != 4:
        raise NotGradable("not a version-4 Jupyter notebook (no 'cells' list or nbformat is not 4)")
    cells = []
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict):
            raise NotGradable(f"malformed notebook (cell {i} is not an object)")
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            if isinstance(source, list) and all(isinstance(s, str) for s in source):
                source = "".join(source)
            if not isinstance(source, str):
                raise NotGradable(f"malformed notebook (cell {i} has no text source)")
            cells.append(source)
    meta = nb.get("metadata")
    return cells, meta if isinstance(meta, dict) else {}


def which_assignment(path: Path, meta: dict, specs: dict[str, AssignmentSpec]) -> AssignmentSpec:
    """The instructor's assignment a submission belongs to (see the module docstring, step 2).

    Raises:
        NotGradable: no built assignment is named, or the metadata and the file name disagree.
    """
    named = None
    mark = meta.get(META)
    if isinstance(mark, dict) and isinstance(mark.get("notebook"), str):
        named = specs.get(mark["notebook"])
        if named is None:
            raise NotGradable(f"its metadata names an assignment that was not built ({mark['notebook'][:60]!r})")
    rest = path.stem.split("__", 1)[-1]
    m = re.match(r"(\d+)(?:_|$)", rest)
    by_name = next((s for s in specs.values() if m and int(s.chapter) == int(m.group(1))), None)
    if named and by_name and named is not by_name:
        raise NotGradable(f"its file name says chapter {by_name.chapter} but its metadata says chapter "
                          f"{named.chapter} (grade it with --chapter)")
    if named or by_name:
        return named or by_name
    raise NotGradable("which assignment? no tmlib_assignment metadata and no chapter number in the file name")


def grade_one(spec: AssignmentSpec, cells: list[str], box, limits: Limits, *,
              show_output: bool = False) -> tuple[list[dict], list]:
    """Run one submission's code cells in ``box`` and judge it: (exercise rows, notes for its TOTAL row).

    Raises:
        NotGradable: time limit, a process that ended without sending values, or a malformed values message.
    """
    with tempfile.TemporaryDirectory(prefix="tm-grade-") as tmp:
        indir = Path(tmp, "in")
        indir.mkdir()
        for name in ("driver.py", "values.py"):
            shutil.copy(HERE / name, indir / name)
        calls = calls_for(spec)
        (indir / "calls.bin").write_bytes(calls.blob)
        (indir / "calls.bin").chmod(0o644)
        (indir / "values.py").chmod(0o644)
        out = box.run(indir, {"cells": cells, "names": job_names(spec), "calls": calls.nodes}, limits)
    if show_output:
        print(out.output)
    if out.timed_out:
        raise NotGradable(f"ran past the time limit of {limits.seconds:g} s")
    if out.overflow:
        raise NotGradable("wrote more to the grader's pipe than a values message may hold")
    if not out.message:
        how = f"signal {-out.returncode}" if (out.returncode or 0) < 0 else f"exit status {out.returncode}"
        last = out.output.strip().splitlines()[-1:] or ["no output"]
        raise NotGradable(f"its process ended ({how}) before sending the values; last output: {last[0][:150]}")
    try:
        results, notes = judge(spec, out.message)
    except BadValues as err:
        raise NotGradable(str(err)) from None
    rows = [{"exercise": r.qname, "points": round(r.points, 4), "max_points": r.max_points,
             "note": "; ".join(r.notes)} for r in results]
    return rows, notes


def grade(submissions: Path, assignments: Path, out_csv: Path, *, sandbox: str = "auto",
          limits: Limits = Limits(), chapter: str | None = None, expose: tuple[str, ...] = (),
          quiet: bool = True) -> list[dict]:
    """Grade every file under ``submissions``; write the gradebook CSV and return its rows.

    ``quiet=False`` prints the tail of each sandbox's output (the notebook's prints and tracebacks).

    Raises:
        FileNotFoundError: ``submissions`` is not a folder, or no assignment was built (:func:`load_assignments`).
        ValueError: ``chapter`` names no built assignment, a bad sandbox mode, or a private folder (assignments,
            submissions, gradebook, chapter sources) that the sandbox would show (under the venv, ``/usr``...).
        grading.sandbox.SandboxUnavailable: ``sandbox="bwrap"`` and bwrap does not work here.
    """
    submissions = Path(submissions)
    if not submissions.is_dir():
        raise FileNotFoundError(f"{submissions} is not a folder")
    specs = load_assignments(assignments)
    fixed = None
    if chapter is not None:
        fixed = next((s for s in specs.values() if chapter in (s.notebook, s.chapter)), None)
        if fixed is None:
            raise ValueError(f"--chapter {chapter}: not a built assignment ({', '.join(sorted(specs))})")
    box = choose(sandbox, expose)
    private = [Path(assignments), submissions, Path(out_csv).parent,
               *(Path(s.source_dir) for s in specs.values() if s.source_dir)]
    for path in private:
        if box.shown(path):
            raise ValueError(f"{path} would be visible inside the sandbox (it is under {box.shown(path)}): move it")
    checked: dict[str, str | None] = {}
    graded = []  # (student, chapter, file, exercise rows, total row)
    for path in list_submissions(submissions, out_csv):
        sid, rel = student_id(path, submissions), str(path.relative_to(submissions))
        spec, rows, notes = fixed, [], []
        try:
            cells, meta = read_notebook(path)
            spec = fixed or which_assignment(path, meta, specs)
            if spec.notebook not in checked:
                checked[spec.notebook] = _reference_problem(spec)
            if checked[spec.notebook]:
                raise NotGradable(checked[spec.notebook])
            rows, notes = grade_one(spec, cells, box, limits, show_output=not quiet)
            if not cells:
                notes.append("no code cells")
            if box.kind == "none":
                notes.append("graded without a sandbox")
        except Exception as err:  # noqa: BLE001 - one file never stops the class
            if not isinstance(err, NotGradable):
                traceback.print_exc()
                err = f"the grader failed on it ({type(err).__name__}: {err}); see the grader's output"
            rows, notes = [], [f"not gradable: {err}"]
            if spec is None and fixed is None:  # an unreadable file: its chapter from its name, for duplicates
                try:
                    spec = which_assignment(path, {}, specs)
                except NotGradable:
                    pass
        total = {"exercise": "TOTAL", "points": round(float(sum(r["points"] for r in rows)), 4),
                 "max_points": spec.max_points if spec else "", "notes": notes}
        graded.append((sid, spec.chapter if spec else "", rel, rows, total))
        verdict = notes[0] if rows == [] else f"{total['points']:g} / {total['max_points']:g}"
        print(printable(f"{sid} ({rel}): chapter {spec.chapter if spec else '?'}: {verdict}"), flush=True)
    if not graded:
        print(f"no submissions under {submissions}", file=sys.stderr)
    files_of: dict[tuple[str, str], list[str]] = {}
    for sid, ch, rel, _, _ in graded:
        files_of.setdefault((sid, ch), []).append(rel)
    out = []
    for sid, ch, rel, rows, total in graded:
        same = files_of[(sid, ch)]
        if len(same) > 1:
            total["notes"].append(f"duplicate: {len(same)} files for {sid}, chapter {ch or '?'}: {', '.join(same)}")
        total["note"] = "; ".join(total.pop("notes"))
        for row in [*rows, total]:
            out.append({"student": sid, "chapter": ch, "file": rel, **row})
    write_gradebook(out, out_csv)
    print(f"gradebook: {out_csv} ({len(graded)} file(s), sandbox: {box.kind})")
    return out


def _reference_problem(spec: AssignmentSpec) -> str | None:
    """Why the chapter cannot be graded at all (its reference code fails), else None; warns about bad checks."""
    try:
        failing = self_check(spec)
    except ReferenceError as err:
        print(f"ERROR: {err}", file=sys.stderr)
        return f"the instructor's reference code of chapter {spec.chapter} fails (see the grader's output)"
    for line in failing:
        print(f"WARNING: {spec.notebook}: a check fails on the reference solution: {line}", file=sys.stderr)
    return None
