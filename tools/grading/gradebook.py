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
   a run past the time or memory limit, a process that died before sending its values, or a malformed message
   makes the file not gradable;
4. judges the values (``judge.py``): one row per exercise and a ``TOTAL`` row.

Steps 3 and 4 run in a worker process per submission, several at once (``pool.py``), each under deadlines and
limits of its own. The outputs are checked before grading starts and written together at the end
(``reports.py``: the gradebook, feedback per file, statistics per exercise, Canvas and Moodle imports).

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

from . import pool
from . import reports as R
from .judge import ReferenceError, calls_for, forbid_map, job_names, judge, self_check
from .reports import Graded, Outputs, shown
from .sandbox import Limits, choose
from .spec import SPEC_FILE, AssignmentSpec, graded_mode, mode_env
from .values import BadValues

FIELDS = ["student", "chapter", "exercise", "points", "max_points", "file", "note"]
META = "tmlib_assignment"
MAX_NOTEBOOK_BYTES = 50 * 2**20
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
HERE = Path(__file__).parent  # driver.py, values.py and forbid.py are copied into each sandbox


class NotGradable(Exception):
    """A submission that cannot be graded; the message is the reason written in the gradebook."""


def student_id(path: Path, root: Path) -> str:
    """Student id of a submission: its sub-folder under ``root``, else the file stem up to the first ``__``
    (as text that can be written: see :func:`grading.reports.shown`)."""
    rel = path.relative_to(root)
    if len(rel.parts) > 1:
        return shown(rel.parts[0])
    return shown(path.stem.split("__", 1)[0])


def printable(text: str) -> str:
    """``text`` on one line, its control characters (terminal escapes included) replaced by ``?`` and bytes that
    are not UTF-8 (a file name from a Windows zip) by ``\\x..`` escapes."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "?", shown(text).replace("\n", " "))


def csv_cell(value):
    """A gradebook cell: numbers as they are; text with control characters replaced and formulas neutralised."""
    if not isinstance(value, str):
        return value
    text = printable(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def write_gradebook(rows: list[dict], path: Path) -> None:
    """Write the CSV atomically (temporary file in the same folder, fsync, ``os.replace``), in UTF-8."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
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


def list_submissions(root: Path, exclude) -> list[Path]:
    """Every entry to grade under ``root``: files and links (links are reported, never followed), except the
    paths in ``exclude`` (the run's own outputs; a folder there is skipped whole)."""
    skip = {Path(p).absolute() for p in ([exclude] if isinstance(exclude, (str, Path)) else exclude)}
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(folder, d))
                         and Path(folder, d).absolute() not in skip)
        links = [d for d in os.listdir(folder) if os.path.islink(os.path.join(folder, d)) and d not in files]
        for name in sorted({*files, *links}):
            path = Path(folder, name)
            if not name.startswith(".") and path.absolute() not in skip:
                out.append(path)
    return sorted(out)


def read_notebook(path: Path) -> tuple[list[str], dict, list[str | None]]:
    """The code cells (as strings), the metadata of a submitted notebook and, per code cell, the exercise its
    ``assignment`` metadata names (the stub cells of the built notebook keep it; None for the others).

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
    cells, marks = [], []
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
            mark = (cell.get("metadata") or {}).get("assignment") if isinstance(cell.get("metadata"), dict) else None
            marks.append(mark["exercise"] if isinstance(mark, dict) and isinstance(mark.get("exercise"), str)
                         else None)
    meta = nb.get("metadata")
    return cells, meta if isinstance(meta, dict) else {}, marks




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


def sandbox_job(spec: AssignmentSpec, cells: list[str], marks: list[str | None] | None = None) -> dict:
    """What the driver gets: the cells, the names to send back, the functions to call on the grader's inputs, the
    references each function's exercise forbids, and per cell the references its stub's exercise forbids."""
    by_label = {e.label: e.forbid for e in spec.exercises if e.forbid}
    calls = calls_for(spec)
    forbid = {name: names for name, names in forbid_map(spec).items() if name in calls.nodes}
    cell_forbid = {str(i): by_label[m] for i, m in enumerate(marks or []) if m in by_label}
    return {"cells": cells, "names": job_names(spec), "calls": calls.nodes, "forbid": forbid,
            "cell_forbid": cell_forbid}


def grade_one(spec: AssignmentSpec, cells: list[str], box, limits: Limits, *, marks: list | None = None,
              slot=None, start_judging=None, show_output: bool = False) -> tuple[list[dict], list, dict]:
    """Run one submission's code cells in ``box`` and judge it: (exercise rows, notes for its TOTAL row, run info:
    ``seconds`` and ``peak_mb``). ``start_judging()`` is called between the two (the worker's limits change).

    Raises:
        NotGradable: time or memory limit, a process that ended without sending values, or a malformed message.
    """
    with tempfile.TemporaryDirectory(prefix="tm-grade-") as tmp:
        indir = Path(tmp, "in")
        indir.mkdir()
        for name in ("driver.py", "values.py", "forbid.py"):
            shutil.copy(HERE / name, indir / name)
            (indir / name).chmod(0o644)
        (indir / "calls.bin").write_bytes(calls_for(spec).blob)
        (indir / "calls.bin").chmod(0o644)
        out = box.run(indir, sandbox_job(spec, cells, marks), limits, slot, mode_env(spec))
    info = {"seconds": round(out.seconds, 2), "peak_mb": round(out.peak_bytes / 2**20, 1) if out.peak_bytes else None}
    if show_output:
        print(out.output)
    if out.memory_exceeded:
        raise NotGradable(f"used more memory than the limit of {limits.memory_mb} MB (all its processes together)")
    if out.timed_out:
        raise NotGradable(f"ran past the time limit of {limits.seconds:g} s")
    if out.overflow:
        raise NotGradable("wrote more to the grader's pipe than a values message may hold")
    if not out.message:
        how = f"signal {-out.returncode}" if (out.returncode or 0) < 0 else f"exit status {out.returncode}"
        last = out.output.strip().splitlines()[-1:] or ["no output"]
        raise NotGradable(f"its process ended ({how}) before sending the values; last output: {last[0][:150]}")
    if start_judging is not None:
        start_judging()
    try:
        results, notes = judge(spec, out.message)
    except BadValues as err:
        raise NotGradable(str(err)) from None
    rows = []
    for r in results:
        public = [n[len("public: "):] for n in r.notes if n.startswith("public: ")]
        rows.append({"exercise": r.qname, "points": round(r.points, 4), "max_points": r.max_points,
                     "note": "; ".join(r.notes), "public": public,
                     "hidden_failed": any(n.startswith("hidden: ") for n in r.notes)})
    return rows, notes, info


def _work(box, limits: Limits, show_output: bool):
    """The function a worker runs for one task ``(spec, cells, marks)``: a JSON-able result."""
    def work(task, slot, start_judging):
        spec, cells, marks = task
        try:
            rows, notes, info = grade_one(spec, cells, box, limits, marks=marks, slot=slot,
                                          start_judging=start_judging, show_output=show_output)
            return {"rows": rows, "notes": notes, **info}
        except NotGradable as err:
            return {"not_gradable": str(err)}
        except Exception as err:  # noqa: BLE001 - one file never stops the class
            traceback.print_exc()
            return {"not_gradable": f"the grader failed on it ({type(err).__name__}: {err}); see the grader's output"}
    return work


def grade(submissions: Path, assignments: Path, out_csv: Path | None = None, *, sandbox: str = "bwrap",
          limits: Limits = Limits(), chapter: str | None = None, expose: tuple[str, ...] = (),
          quiet: bool = True, jobs: int | None = None) -> list[dict]:
    """Grade every file under ``submissions``; write the gradebook CSV (and the files beside it, ``reports.py``)
    and return its rows.

    ``out_csv``: the gradebook's path, or a folder to hold ``gradebook.csv`` (default:
    ``submissions/gradebook.csv``); checked before grading. ``jobs``: submissions graded at once (default: one per
    CPU, as many as the free memory holds at ``limits.memory_mb``). ``quiet=False`` prints the tail of each
    sandbox's output.

    Raises:
        FileNotFoundError: ``submissions`` is not a folder, or no assignment was built (:func:`load_assignments`).
        ValueError: the outputs cannot be written there, ``chapter`` names no built assignment, a bad sandbox mode,
            or a private folder (assignments, submissions, gradebook, chapter sources) that the sandbox would
            show (under the venv, ``/usr``...).
        grading.sandbox.SandboxUnavailable: bwrap does not work here and ``sandbox`` is not ``"none"`` (the
            grader does not run submissions unsandboxed unless asked to).
    """
    submissions = Path(submissions)
    if not submissions.is_dir():
        raise FileNotFoundError(f"{shown(str(submissions))} is not a folder")
    outputs = Outputs.prepare(out_csv, submissions)
    specs = load_assignments(assignments)
    fixed = None
    if chapter is not None:
        fixed = next((s for s in specs.values() if chapter in (s.notebook, s.chapter)), None)
        if fixed is None:
            raise ValueError(f"--chapter {chapter}: not a built assignment ({', '.join(sorted(specs))})")
    box = choose(sandbox, expose)
    private = [Path(assignments), submissions, outputs.folder,
               *(Path(s.source_dir) for s in specs.values() if s.source_dir)]
    for path in private:
        if box.shown(path):
            raise ValueError(f"{path} would be visible inside the sandbox (it is under {box.shown(path)}): move it")
    graded: list[Graded] = []
    tasks, task_of = [], []  # (spec, cells, marks), index into graded
    for path in list_submissions(submissions, outputs.paths()):
        g = Graded(student_id(path, submissions), "", shown(str(path.relative_to(submissions))), fixed)
        graded.append(g)
        try:
            cells, meta, marks = read_notebook(path)
            g.spec = fixed or which_assignment(path, meta, specs)
            if not g.spec.exercises:  # every exercise of this chapter is graded by hand: nothing to run
                g.notes.append(f"no autograded exercise; graded by hand: {', '.join(m['title'] for m in g.spec.manual)}")
            else:
                if not cells:
                    g.notes.append("no code cells")
                tasks.append((g.spec, cells, marks))
                task_of.append(len(graded) - 1)
        except NotGradable as err:
            g.gradable, g.notes = False, [f"not gradable: {err}"]
            if g.spec is None:  # an unreadable file: its chapter from its name, for duplicates
                try:
                    g.spec = which_assignment(path, {}, specs)
                except NotGradable:
                    pass
        g.chapter = g.spec.chapter if g.spec else ""
    for spec in sorted({id(t[0]): t[0] for t in tasks}.values(), key=lambda s: s.notebook):
        from tmlib.utils import smoke_mode  # the notebooks' own reading of TMLIB_SMOKE

        with graded_mode(spec):
            quick = smoke_mode()
        if quick:
            why = "TMLIB_SMOKE is set" if "TMLIB_SMOKE" in os.environ else \
                "its full run is too long for the sandbox; TMLIB_SMOKE=0 grades it in full"
            print(f"chapter {spec.chapter}: graded in smoke mode, its reference too ({why})", flush=True)
    problems = {spec.notebook: _reference_problem(spec) for spec in {id(t[0]): t[0] for t in tasks}.values()}
    todo = []
    for task, index in zip(tasks, task_of):
        if problems[task[0].notebook]:
            graded[index].gradable, graded[index].notes = False, [f"not gradable: {problems[task[0].notebook]}"]
        else:
            todo.append((task, index))
    jobs = jobs or pool.default_jobs(limits.memory_mb)
    done = [0]

    def record(k: int, result) -> None:
        g = graded[todo[k][1]]
        if isinstance(result, pool.WorkerFailed) or "not_gradable" in result:
            reason = str(result) if isinstance(result, pool.WorkerFailed) else result["not_gradable"]
            g.gradable, g.rows, g.notes = False, [], [f"not gradable: {reason}"]
        else:
            g.rows, g.seconds, g.peak_mb = result["rows"], result.get("seconds"), result.get("peak_mb")
            g.notes = result["notes"] + g.notes + (["graded without a sandbox"] if box.kind == "none" else [])
        done[0] += 1
        verdict = g.notes[0] if not g.gradable else f"{g.points:g} / {g.spec.max_points:g}"
        extra = f" ({g.seconds:.0f} s, {g.peak_mb:.0f} MB)" if g.seconds is not None and g.peak_mb else ""
        print(printable(f"[{done[0]}/{len(todo)}] {g.student} ({g.file}): chapter {g.chapter}: {verdict}{extra}"),
              flush=True)

    for g in graded:
        if not g.gradable:
            print(printable(f"{g.student} ({g.file}): chapter {g.chapter or '?'}: {g.notes[0]}"), flush=True)
    pool.run([t for t, _ in todo], _work(box, limits, not quiet), jobs=jobs, seconds=limits.seconds,
             judge_seconds=limits.judge_seconds, judge_memory_mb=limits.judge_memory_mb,
             open_slot=lambda: box.open_slot(limits), on_result=record)
    if not graded:
        print(f"no submissions under {shown(str(submissions))}", file=sys.stderr)
    rows = _gradebook_rows(graded)
    write_gradebook(rows, outputs.gradebook)
    R.write_feedback(graded, outputs.feedback)
    stats = R.statistics(graded)
    R.write_statistics(stats, outputs.statistics, csv_cell)
    R.write_lms(graded, outputs.canvas, outputs.moodle, csv_cell)
    R.print_statistics(stats)
    print(printable(f"gradebook: {outputs.gradebook} ({len(graded)} file(s), sandbox: {box.kind}, {jobs} at a time); "
                    f"feedback, statistics, Canvas and Moodle files beside it"))
    return rows


def _gradebook_rows(graded: list[Graded]) -> list[dict]:
    """The gradebook's rows: per file its exercise rows and a TOTAL row (duplicates flagged there)."""
    files_of: dict[tuple[str, str], list[str]] = {}
    for g in graded:
        files_of.setdefault((g.student, g.chapter), []).append(g.file)
    out = []
    for g in graded:
        same = files_of[(g.student, g.chapter)]
        if len(same) > 1:
            g.notes.append(f"duplicate: {len(same)} files for {g.student}, chapter {g.chapter or '?'}: "
                           f"{', '.join(same)}")
        total = {"exercise": "TOTAL", "points": g.points, "max_points": g.spec.max_points if g.spec else "",
                 "note": "; ".join(g.notes)}
        for row in [*g.rows, total]:
            out.append({"student": g.student, "chapter": g.chapter, "file": g.file,
                        **{k: row[k] for k in ("exercise", "points", "max_points", "note")}})
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
