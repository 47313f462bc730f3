"""Judging in the grader's own process: the reference namespace and the checks, on values received as data.

No code of a submission runs here. The reference namespace is what the chapter's own code (the course's notebook,
solutions included, stored in the spec) defines when run top to bottom; it is computed once per chapter and
process. Each check runs on a copy of it in which the check's student names are the submission's values
(decoded afresh for every check), so ``check_close``, NumPy, the lecture's inputs and the checks themselves are the
grader's, whatever the submission did in its sandbox.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from . import driver
from .spec import AssignmentSpec, CheckSpec
from .values import decode_message, fresh_value

CHECK_SECONDS = 60  # one check on one submission's values; a check is the instructor's code, this is a backstop
_REFERENCES: dict[str, dict] = {}


class ReferenceError(RuntimeError):
    """The chapter's reference code does not run, or a check rejects the reference solution."""


@dataclass
class ExerciseResult:
    qname: str
    points: float
    max_points: float
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _quiet_in(folder: str):
    """Run with stdout/stderr captured, the working directory at ``folder`` and matplotlib off-screen."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    old = os.getcwd()
    sink = io.StringIO()
    try:
        os.chdir(folder)
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            yield sink
    finally:
        os.chdir(old)


def reference_namespace(spec: AssignmentSpec) -> dict:
    """The globals of the chapter's reference code, run once per process (cached by the code's hash).

    Raises:
        ReferenceError: a cell of the reference code raised (the message names the cell and the error).
    """
    key = hashlib.sha256("\0".join([spec.notebook, *spec.reference]).encode()).hexdigest()
    if key in _REFERENCES:
        return _REFERENCES[key]
    namespace = {"__name__": "__main__", "get_ipython": driver._Shell}
    folder = spec.source_dir if spec.source_dir and Path(spec.source_dir).is_dir() else tempfile.gettempdir()
    with _quiet_in(folder):
        for i, cell in enumerate(spec.reference):
            try:
                exec(compile(driver.python_source(cell), f"<{spec.notebook} reference cell {i}>", "exec"), namespace)
            except Exception as err:
                raise ReferenceError(f"{spec.notebook}: the reference code fails at code cell {i} "
                                     f"({type(err).__name__}: {err})") from err
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
    _REFERENCES[key] = namespace
    return namespace


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def run_check(check: CheckSpec, reference: dict, student: dict) -> str | None:
    """Run one check; None when it passes, else a one-line reason.

    ``student`` maps the check's student names to zero-argument callables that return a fresh copy of the value;
    a name absent from it is removed from the namespace, so the check sees a NameError rather than the
    reference's value.
    """
    namespace = dict(reference)
    for name in check.names:
        namespace.pop(name, None)
        if name in student:
            namespace[name] = student[name]()
    use_alarm = (hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
                 and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None))
    if use_alarm:
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(CHECK_SECONDS)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(check.code, f"<{check.kind} check>", "exec"), namespace)
    except _Timeout:
        return f"the check ran past {CHECK_SECONDS} s"
    except Exception as err:  # noqa: BLE001 - any failure of the check means no points for it
        text = " ".join(str(err).split())
        return f"{type(err).__name__}: {text}"[:240] if text else type(err).__name__
    finally:
        if use_alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
    return None


def judge(spec: AssignmentSpec, message: bytes) -> tuple[list[ExerciseResult], list[str]]:
    """Score a sandbox's values message against the spec: per-exercise results and submission-level notes.

    A name the submission did not define, or defined as something that is not data, fails the checks that read
    it. The notes say how many of the notebook's cells raised.

    Raises:
        BadValues: the message is not well formed (see :func:`grading.values.decode_message`).
        ReferenceError: from :func:`reference_namespace`.
    """
    reference = reference_namespace(spec)
    got, raw, blob = decode_message(message)
    notes = [f"{len(got.errors)} cell(s) raised, first: {got.errors[0]}"[:300]] if got.errors else []
    student = {n: (lambda n=n: fresh_value(raw, blob, n)) for n in raw}
    results = []
    for ex in spec.exercises:
        res = ExerciseResult(ex.qname, 0.0, ex.points)
        for check in ex.checks:
            why = run_check(check, reference, student)
            if why is None:
                res.points += check.points
                continue
            absent = [n for n in check.names if n not in raw]
            if absent:
                reasons = [f"{n} {got.unsupported[n]}" if n in got.unsupported else f"{n} not defined"
                           for n in absent]
                if not any(why == f"NameError: name '{n}' is not defined" for n in absent):
                    reasons.append(why)
                why = "; ".join(reasons)
            res.notes.append(f"{check.kind}: {why}"[:300])
        results.append(res)
    return results, notes


def self_check(spec: AssignmentSpec) -> list[str]:
    """Checks that fail on the reference solution itself, after its values went through the data encoding.

    An empty list means: the reference scores full marks through the same path as a submission.

    Raises:
        ReferenceError: from :func:`reference_namespace`.
    """
    reference = reference_namespace(spec)
    message = driver.message(reference, spec.names, [])
    results, notes = judge(spec, message)
    return notes + [f"{r.qname}: {n}" for r in results for n in r.notes]
