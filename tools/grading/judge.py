"""Judging in the grader's own process: the reference namespace and the checks, on values received as data.

No code of a submission runs here. The reference namespace is what the chapter's own code (the course's notebook,
solutions included, stored in the spec) defines when run top to bottom; it is computed once per chapter and
process. Each check runs on a copy of it in which the check's student names are the submission's values
(decoded afresh for every check), so ``check_close``, NumPy, the lecture's inputs and the checks themselves are the
grader's, whatever the submission did in its sandbox.

A student name that is a function in the reference (an exercise that asks for a function) cannot travel as data.
Its inputs can: :func:`calls_for` runs the checks on the reference with a recorder in place of the function, the
sandbox calls the student's function on exactly those inputs, and in the judge the name is a stand-in that returns
the recorded outputs for those inputs (and raises for any other input, or where the student's call raised).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from . import driver
from .spec import AssignmentSpec, CheckSpec, graded_mode, mode_env
from .values import Decoder, decode_message, fresh_value

CHECK_SECONDS = 60  # one check on one submission's values; a check is the instructor's code, this is a backstop
_REFERENCES: dict[str, dict] = {}
_CALLS: dict[str, "Calls"] = {}


class ReferenceError(RuntimeError):
    """The chapter's reference code does not run, or a check rejects the reference solution."""


@dataclass
class ExerciseResult:
    """One exercise's score; ``notes`` say why checks failed (``"public: ..."``, ``"hidden: ..."``)."""
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


def _key(spec: AssignmentSpec) -> str:
    return hashlib.sha256(json.dumps([spec.notebook, spec.reference, [str(e) for e in spec.exercises],
                                      mode_env(spec)]).encode()).hexdigest()


def reference_namespace(spec: AssignmentSpec) -> dict:
    """The globals of the chapter's reference code, run once per process (cached by the code's hash), in the
    chapter's quick mode (:func:`grading.spec.mode_env`), as its sandbox runs it.

    Raises:
        ReferenceError: a cell of the reference code raised (the message names the cell and the error).
    """
    key = _key(spec)
    if key in _REFERENCES:
        return _REFERENCES[key]
    namespace = {"__name__": "__main__"}
    shell = driver._Shell(namespace)
    namespace.update(get_ipython=lambda: shell, display=lambda *args, **kwargs: None)
    folder = spec.source_dir if spec.source_dir and Path(spec.source_dir).is_dir() else tempfile.gettempdir()
    with _quiet_in(folder), graded_mode(spec):  # the quick mode of the chapter's sandbox (spec.mode_env)
        for i, cell in enumerate(spec.reference):
            try:  # optimize=0: the course's asserts run even when the grader runs with -O or PYTHONOPTIMIZE
                exec(compile(driver.python_source(cell), f"<{spec.notebook} reference cell {i}>", "exec", optimize=0),
                     namespace)
            except Exception as err:
                raise ReferenceError(f"{spec.notebook}: the reference code fails at code cell {i} "
                                     f"({type(err).__name__}: {err})") from err
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
    _REFERENCES[key] = namespace
    return namespace


@dataclass
class Calls:
    """The inputs the checks give each student function: encoded ``[args, kwargs]`` per call (arrays in ``blob``,
    which the sandbox gets as ``calls.bin``) and the canonical key of each call, in the same order."""
    nodes: dict[str, list] = field(default_factory=dict)
    keys: dict[str, list[bytes]] = field(default_factory=dict)
    blob: bytes = b""


def call_key(args: tuple, kwargs: dict) -> bytes:
    """A canonical byte string for a call's inputs (equal inputs, equal keys). Raises ``driver.Unsupported``."""
    enc = driver.Encoder()
    node = enc.encode([list(args), kwargs])
    return json.dumps(node, sort_keys=True).encode() + b"\0" + bytes(enc.blob)


def calls_for(spec: AssignmentSpec) -> Calls:
    """Record what the checks pass to the student functions, by running them on the reference (once per process).

    Raises:
        ReferenceError: from :func:`reference_namespace`.
    """
    reference = reference_namespace(spec)
    key = _key(spec)
    if key in _CALLS:
        return _CALLS[key]
    funcs = [n for n in spec.names if callable(reference.get(n)) and not isinstance(reference.get(n), type)]
    calls, enc = Calls({n: [] for n in funcs}, {n: [] for n in funcs}), driver.Encoder()

    def recorder(name, fn):
        def record(*args, **kwargs):
            try:
                k = call_key(args, kwargs)
                if k not in calls.keys[name]:
                    calls.nodes[name].append(enc.encode([list(args), kwargs]))
                    calls.keys[name].append(k)
            except driver.Unsupported:
                pass  # inputs that are not data: the replay will fail, and self_check says so
            return fn(*args, **kwargs)
        return record

    with graded_mode(spec):
        for check in (c for e in spec.exercises for c in e.checks):
            names = [n for n in check.names if n in calls.nodes]
            if names:
                run_check(check, reference, {n: (lambda n=n: recorder(n, reference[n])) for n in names})
    calls.blob = bytes(enc.blob)
    _CALLS[key] = calls
    return calls


def forbid_map(spec: AssignmentSpec) -> dict[str, list[str]]:
    """Per student function, the library references its exercise forbids (made unavailable during its calls)."""
    out: dict[str, list[str]] = {}
    for ex in spec.exercises:
        for name in (n for c in ex.checks for n in c.names):
            if ex.forbid:
                out.setdefault(name, [])
                out[name] += [f for f in ex.forbid if f not in out[name]]
    return out


def _replay(name: str, keys: list[bytes], results: list, blob: bytes, refs: list[str] | None = None):
    """The stand-in for a student function in the judge: the sandbox's outputs for the recorded inputs.

    ``refs``: the forbidden references the sandbox found in the student's function (read by
    ``tmlib.course.checks.check_own_work`` through the stand-in's ``__tm_references__``).
    """
    def stand_in(*args, **kwargs):
        try:
            i = keys.index(call_key(args, kwargs))
        except (ValueError, driver.Unsupported):
            raise LookupError(f"{name} was called on inputs the submission's sandbox did not get") from None
        if i >= len(results):
            raise LookupError(f"the submission sent no result of {name} for these inputs")
        node = results[i]
        if isinstance(node, dict) and node.get("t") == "raised":
            raise RuntimeError(f"{name} raised in the submission: {node.get('v')}")
        return Decoder(blob).decode(node)
    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__tm_references__ = list(refs or [])
    return stand_in


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
            try:
                namespace[name] = student[name]()
            except Exception as err:  # noqa: BLE001 - a value that does not decode fails the check
                return f"{name} could not be decoded ({type(err).__name__})"
    use_alarm = (hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
                 and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None))
    if use_alarm:
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(CHECK_SECONDS)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            # optimize=0: a check's `assert` runs even when the grader runs with -O or PYTHONOPTIMIZE=1
            exec(compile(check.code, f"<{check.kind} check>", "exec", optimize=0), namespace)
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
    it; a student function is replaced by the outputs the sandbox sent for the recorded inputs. The notes say how
    many of the notebook's cells raised.

    Raises:
        BadValues: the message is not well formed (see :func:`grading.values.decode_message`).
        ReferenceError: from :func:`reference_namespace`.
    """
    reference, calls = reference_namespace(spec), calls_for(spec)
    got, raw, blob = decode_message(message)
    notes = [f"{len(got.errors)} cell(s) raised, first: {got.errors[0]}"[:300]] if got.errors else []
    student = {n: (lambda n=n: fresh_value(raw, blob, n)) for n in raw if n not in calls.nodes}
    student.update({n: (lambda n=n: _replay(n, calls.keys[n], got.calls.get(n, []), blob, got.references.get(n)))
                    for n in calls.nodes})
    results = []
    for ex in spec.exercises:
        res = ExerciseResult(ex.qname, 0.0, ex.points)
        for check in ex.checks:
            with graded_mode(spec):
                why = run_check(check, reference, student)
            if why is None:
                res.points += check.points
                continue
            absent = [n for n in check.names if n not in student]
            if absent:
                reasons = [f"{n} {got.unsupported[n]}" if n in got.unsupported else f"{n} not defined"
                           for n in absent]
                if not any(why == f"NameError: name '{n}' is not defined" for n in absent):
                    reasons.append(why)
                why = "; ".join(reasons)
            res.notes.append(f"{check.kind}: {why}"[:300])
        results.append(res)
    return results, notes


def job_names(spec: AssignmentSpec) -> list[str]:
    """The variables to ask the sandbox for (the student functions are called instead, see :func:`calls_for`)."""
    return [n for n in spec.names if n not in calls_for(spec).nodes]


def self_check(spec: AssignmentSpec) -> list[str]:
    """Checks that fail on the reference solution itself, after its values went through the data encoding.

    An empty list means: the reference scores full marks through the same path as a submission.

    Raises:
        ReferenceError: from :func:`reference_namespace`.
    """
    reference, calls = reference_namespace(spec), calls_for(spec)
    forbid = forbid_map(spec)
    with graded_mode(spec):
        results_ = driver.call_results(reference, calls.nodes, calls.blob, forbid)
    refs = {n: driver.references(reference[n], names) for n, names in forbid.items() if callable(reference.get(n))}
    message = driver.message(reference, job_names(spec), [], results_, refs)
    results, notes = judge(spec, message)
    return notes + [f"{r.qname}: {n}" for r in results for n in r.notes]
