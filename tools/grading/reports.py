"""What a grading run writes besides the gradebook: feedback per submission, statistics per exercise, LMS imports.

Every output lies beside the gradebook and is named after it (``gradebook.csv`` gives ``gradebook_feedback/``,
``gradebook_statistics.csv``, ``gradebook_canvas.csv``, ``gradebook_moodle.csv``). :meth:`Outputs.prepare` checks
before any grading that the folder can be written, so a read-only submissions folder or an ``--out`` that names a
folder fails at once (or is used as the folder) instead of after the last submission.

* **Feedback** (one Markdown file per submitted file): per exercise its points and either "passed" or what its
  public check said (a failing hidden test is reported as such, without its message: hidden tests stay hidden),
  the exercises graded by hand, and why a notebook could not be graded.
* **Statistics** (CSV, one row per exercise and one per chapter): submissions, mean points, full marks, zero
  points, the most frequent public-check message; per chapter the files not gradable, the longest run and the
  most memory a submission reached.
* **Canvas** and **Moodle** CSV: one row per student, one column per chapter's autograded total and, for chapters
  with exercises graded by hand, an empty column for those. Canvas's layout (``Student``, ``ID``, ``SIS User ID``,
  ``SIS Login ID``, ``Section``, then assignments, a ``Points Possible`` row) with the student id as SIS user id;
  Moodle's import takes any column as the identifier (map ``Username``). A student with two files for a chapter
  gets an empty cell there (the gradebook says ``duplicate``).
"""
from __future__ import annotations

import csv
import hashlib
import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SAFE = re.compile(r"[^A-Za-z0-9._-]")


def shown(text: str) -> str:
    """A name as text that can always be written: bytes that are not UTF-8 (a Windows zip's ``ren\\xe9``, read by
    Python as surrogates) become ``\\xe9`` escapes."""
    return os.fsencode(text).decode("utf-8", "backslashreplace")


def safe_name(text: str, limit: int = 120) -> str:
    """A file name made of letters, digits, ``.``, ``_`` and ``-``; a changed name gets a short hash of the
    original so that two names never meet."""
    out = SAFE.sub("_", text).lstrip(".")[:limit] or "_"
    if out != text:
        out += "-" + hashlib.sha256(os.fsencode(text)).hexdigest()[:8]
    return out


@dataclass
class Graded:
    """One submitted file's result: its exercise rows (``public``: the public checks' failure messages,
    ``hidden_failed``), its notes, whether it was graded, its run time and the most memory it reached."""
    student: str
    chapter: str
    file: str
    spec: object = None
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    gradable: bool = True
    seconds: float | None = None
    peak_mb: float | None = None

    @property
    def points(self) -> float:
        return round(float(sum(r["points"] for r in self.rows)), 4)


@dataclass
class Outputs:
    """Where a run's files go: the gradebook and, beside it, the files named after it."""
    gradebook: Path

    @property
    def folder(self) -> Path:
        return self.gradebook.parent

    def _beside(self, suffix: str) -> Path:
        return self.folder / f"{self.gradebook.stem}{suffix}"

    @property
    def feedback(self) -> Path:
        return self._beside("_feedback")

    @property
    def statistics(self) -> Path:
        return self._beside("_statistics.csv")

    @property
    def canvas(self) -> Path:
        return self._beside("_canvas.csv")

    @property
    def moodle(self) -> Path:
        return self._beside("_moodle.csv")

    def paths(self) -> list[Path]:
        return [self.gradebook, self.feedback, self.statistics, self.canvas, self.moodle]

    @classmethod
    def prepare(cls, out: Path | None, submissions: Path) -> "Outputs":
        """Resolve ``--out`` (a CSV path, or a folder: an existing one or a name without suffix, which then holds
        ``gradebook.csv``) and check, before grading, that every output can be written there.

        Raises:
            ValueError: the folder cannot be created or written (read-only, not a folder), or an output's name is
                taken by something else (the message says which and suggests ``--out``).
        """
        out = Path(submissions) / "gradebook.csv" if out is None else Path(out)
        if out.is_dir() or (not out.exists() and out.suffix == ""):
            out = out / "gradebook.csv"
        outputs = cls(out.absolute())
        try:
            outputs.folder.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=outputs.folder, prefix=".tm-grade-probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as err:
            raise ValueError(f"cannot write the gradebook into {shown(str(outputs.folder))} ({err.strerror or err}): "
                             "pass --out with a folder you can write to") from None
        for path in outputs.paths():
            wanted_dir = path == outputs.feedback
            if path.exists() and (path.is_dir() != wanted_dir or path.is_symlink()):
                raise ValueError(f"{shown(str(path))} exists and is not a {'folder' if wanted_dir else 'file'} "
                                 "this grader wrote: pass another --out")
        return outputs


def _csv(path: Path, header: list[str], rows: list[list], cell) -> None:
    """Write a CSV atomically (temporary file in the same folder, ``os.replace``), cells through ``cell``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow([cell(h) for h in header])
            writer.writerows([[cell(x) for x in row] for row in rows])
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------- feedback
def exercise_feedback(row: dict) -> str:
    """One exercise's line of feedback: passed, or what its public check said (never a hidden test's message)."""
    if row["points"] >= row["max_points"]:
        return "passed"
    if row.get("public"):
        return "the check says: " + " / ".join(row["public"])
    if row.get("hidden_failed"):
        return "the check in your notebook passes, but a hidden test does not (try other inputs, shapes and types)"
    return "not passed"


def feedback_text(g: Graded) -> str:
    spec = g.spec
    title = f"chapter {int(g.chapter)}" if g.chapter.isdigit() else "unknown chapter"
    if spec is not None and getattr(spec, "title", ""):
        title += f", {spec.title}"
    lines = [f"# Feedback: {title}", "", f"Student `{g.student}`, file `{g.file}`."]
    if not g.gradable:
        lines += ["", f"This notebook could not be graded: {'; '.join(g.notes) or 'no reason recorded'}."]
    else:
        total = spec.max_points if spec is not None else 0
        lines += ["", f"Autograded score: **{g.points:g} / {total:g}**.", "", "| Exercise | Points | Result |",
                  "|---|---|---|"]
        titles = {e.qname: e.title or e.label for e in spec.exercises} if spec is not None else {}
        for row in g.rows:
            text = exercise_feedback(row).replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {titles.get(row['exercise'], row['exercise'])} | {row['points']:g} / "
                         f"{row['max_points']:g} | {text} |")
        notes = [n for n in g.notes if not n.startswith("duplicate")]
        if notes:
            lines += ["", "About your notebook: " + "; ".join(notes) + "."]
    manual = [m["title"] for m in getattr(spec, "manual", [])] if spec is not None else []
    if manual:
        lines += ["", "Graded by hand: " + ", ".join(manual) + "."]
    if any(n.startswith("duplicate") for n in g.notes):
        lines += ["", "You submitted more than one file for this chapter; your instructor decides which counts."]
    return "\n".join(lines) + "\n"


def write_feedback(graded: list[Graded], folder: Path) -> None:
    """One Markdown file per submitted file in ``folder``, which is replaced as a whole."""
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        used: set[str] = set()
        for g in graded:
            name = safe_name(re.sub(r"\.ipynb$", "", g.file).replace("/", "__"))
            while name in used:
                name += "_"
            used.add(name)
            (tmp / f"{name}.md").write_text(feedback_text(g), encoding="utf-8")
        tmp.chmod(0o755)
        old = None
        if folder.exists():
            old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
            os.replace(folder, old)
        os.replace(tmp, folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --------------------------------------------------------------------------------------------- statistics
STAT_FIELDS = ["chapter", "exercise", "title", "max_points", "submissions", "mean_points", "full_marks",
               "zero_points", "not_gradable", "most_frequent_message", "times", "longest_run_s", "most_memory_mb"]


def statistics(graded: list[Graded]) -> list[list]:
    """Per exercise, and per chapter (``TOTAL``), how the class did (see the module docstring)."""
    rows, chapters = [], sorted({g.chapter for g in graded if g.spec is not None})
    for ch in chapters:
        files = [g for g in graded if g.chapter == ch and g.spec is not None]
        ok = [g for g in files if g.gradable]
        spec = files[0].spec
        for ex in spec.exercises:
            got = [r for g in ok for r in g.rows if r["exercise"] == ex.qname]
            points = [r["points"] for r in got]
            messages = Counter(m for r in got for m in r.get("public", []))
            top = messages.most_common(1)
            rows.append([ch, ex.qname, ex.title, ex.points, len(got),
                         round(sum(points) / len(points), 3) if points else "",
                         sum(p >= ex.points for p in points), sum(p == 0 for p in points), "",
                         top[0][0][:200] if top else "", top[0][1] if top else "", "", ""])
        totals = [g.points for g in ok]
        runs = [g.seconds for g in files if g.seconds is not None]
        peaks = [g.peak_mb for g in files if g.peak_mb]
        rows.append([ch, "TOTAL", spec.title, spec.max_points, len(ok),
                     round(sum(totals) / len(totals), 3) if totals else "",
                     sum(t >= spec.max_points for t in totals), sum(t == 0 for t in totals), len(files) - len(ok),
                     "", "", round(max(runs), 1) if runs else "", round(max(peaks)) if peaks else ""])
    return rows


def print_statistics(rows: list[list]) -> None:
    for ch, ex, _title, full, n, mean, full_marks, zero, not_gradable, message, times, *_ in rows:
        if n == 0 and ex != "TOTAL":
            continue
        line = f"  {ch} {ex:<28} mean {mean if mean != '' else '-':>6} / {full:g}  full {full_marks}/{n}  zero {zero}/{n}"
        if ex == "TOTAL" and not_gradable:
            line += f"  not gradable {not_gradable}"
        if message:
            line += f"  most frequent: {message[:70]} ({times}x)"
        print(line)


# --------------------------------------------------------------------------------------------- LMS imports
def lms_tables(graded: list[Graded]) -> tuple[list[str], list[str], list[list]]:
    """Columns (names, points possible) and one row per student: each chapter's autograded total (empty when the
    student has two files for it) and, for chapters with exercises graded by hand, an empty column for them."""
    specs = {}
    for g in graded:
        if g.spec is not None:
            specs.setdefault(g.chapter, g.spec)
    columns, possible = [], []
    for ch in sorted(specs):
        spec = specs[ch]
        name = f"Chapter {int(ch)}" + (f": {spec.title}" if spec.title else "")
        columns.append((ch, "auto", f"{name} (autograded)"))
        possible.append(spec.max_points)
        if spec.manual:
            columns.append((ch, "manual", f"{name} (graded by hand: {', '.join(m['title'] for m in spec.manual)})"))
            possible.append("")
    by_student: dict[str, dict[str, list[Graded]]] = {}
    for g in graded:
        if g.spec is not None:
            by_student.setdefault(g.student, {}).setdefault(g.chapter, []).append(g)
    rows = []
    for student in sorted(by_student):
        values = []
        for ch, kind, _ in columns:
            files = by_student[student].get(ch, [])
            values.append(files[0].points if kind == "auto" and len(files) == 1 else "")
        rows.append([student, values])
    return [c[2] for c in columns], possible, rows


def write_lms(graded: list[Graded], canvas: Path, moodle: Path, cell) -> None:
    """The Canvas and Moodle gradebook imports (see the module docstring)."""
    names, possible, rows = lms_tables(graded)
    _csv(canvas, ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *names],
         [["Points Possible", "", "", "", "", *possible]] + [[s, "", s, "", "", *v] for s, v in rows], cell)
    _csv(moodle, ["Username", *names], [[s, *v] for s, v in rows], cell)


def write_statistics(rows: list[list], path: Path, cell) -> None:
    _csv(path, STAT_FIELDS, rows, cell)
