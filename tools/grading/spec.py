"""The grading spec of a chapter: what the grader asks a submission for, and the checks that judge the answers.

``tools/assignments.py build`` writes one ``autograder/grading.json`` per chapter into the instructor's folder
(never into the student notebook). It holds, per exercise, its label, its points and its checks (the public checks
and the hidden tests, as code), and for each check the **student names**: the global variables of the exercise
that the check reads. Those are the variables the exercise's own solution or stub cells assign (found with
``ast``), so the list comes from the course's source notebook, not from a submission. The spec also keeps the
chapter's **reference code** (the source notebook's code cells, solutions included): the grader runs it once in
its own process to get every other name a check reads (the lecture's inputs, ``check_close``, the library).

At grading time a check runs in the grader's process on a copy of the reference namespace in which each student
name is replaced by the value the submission's sandbox sent back as data (or removed, when the submission did not
define it; a function is replaced by its outputs on the checks' inputs, see ``judge.calls_for``), so neither the
checks' helpers nor their inputs can be changed by the submission.
"""
from __future__ import annotations

import ast
import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

SPEC_FILE = "grading.json"
FORMAT = "tm-grading-spec/2"
KINDS = ("public", "hidden")


def _parse(code: str) -> ast.Module | None:
    """The AST of a cell (IPython magics commented out), or None when it is not valid Python."""
    lines = ["# " + line if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


class _Assigned(ast.NodeVisitor):
    """Names bound at module level (assignments, loops, with/except targets, imports, def and class names)."""

    def __init__(self):
        self.names: set[str] = set()

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            self.names.add(node.id)

    def _binds(self, node):
        self.names.add(node.name)  # a def or class binds its name; its body is another scope

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _binds

    def visit_Lambda(self, node):
        pass

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda

    def visit_alias(self, node):
        self.names.add(node.asname or node.name.split(".")[0])

    def visit_ExceptHandler(self, node):
        if node.name:
            self.names.add(node.name)
        self.generic_visit(node)


def assigned_names(code: str) -> set[str]:
    """Global names that ``code`` binds when run as a notebook cell (empty when it does not parse)."""
    tree = _parse(code)
    if tree is None:
        return set()
    visitor = _Assigned()
    visitor.visit(tree)
    return visitor.names


def referenced_names(code: str) -> set[str]:
    """Every identifier ``code`` uses (over-approximate: any scope, read or written)."""
    tree = _parse(code)
    return set() if tree is None else {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


@dataclass
class CheckSpec:
    """A public check or hidden test: its code, its points and the student names it reads."""
    kind: str
    points: float
    code: str
    names: list[str]


@dataclass
class ExerciseSpec:
    """An autograded exercise: its checks, its title ("Exercise 1.5") and the library references it forbids."""
    label: str
    qname: str
    checks: list[CheckSpec]
    title: str = ""
    forbid: list[str] = field(default_factory=list)

    @property
    def points(self) -> float:
        return sum(c.points for c in self.checks)


@dataclass
class AssignmentSpec:
    """One chapter's grading spec (see the module docstring); :meth:`load` validates a stored one."""
    chapter: str
    notebook: str
    exercises: list[ExerciseSpec]
    reference: list[str] = field(default_factory=list)
    source_dir: str | None = None  # where the chapter notebook lived at build time (its relative paths)
    manual: list[dict] = field(default_factory=list)  # exercises graded by hand: {"label", "title"}
    title: str = ""  # the chapter's title
    smoke: bool = False  # graded in the quick mode (TMLIB_SMOKE=1) unless the grader sets TMLIB_SMOKE (mode_env)

    @property
    def max_points(self) -> float:
        return sum(e.points for e in self.exercises)

    @property
    def names(self) -> list[str]:
        """Every student name any check reads: what the sandbox must send back."""
        return sorted({n for e in self.exercises for c in e.checks for n in c.names})

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"format": FORMAT, **asdict(self)}, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> "AssignmentSpec":
        """Read and validate a spec written by :meth:`save`.

        Raises:
            ValueError: not a spec of this format, or a field of the wrong type (the message names the file).
        """
        try:
            doc = json.loads(Path(path).read_text())
            if doc.get("format") != FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, expected {FORMAT!r} (rebuild the assignments)")
            exercises = [ExerciseSpec(str(e["label"]), str(e["qname"]),
                                      [CheckSpec(c["kind"], float(c["points"]), str(c["code"]),
                                                 [str(n) for n in c["names"]]) for c in e["checks"]],
                                      str(e.get("title", "")), [str(f) for f in e.get("forbid", [])])
                         for e in doc["exercises"]]
            spec = cls(str(doc["chapter"]), str(doc["notebook"]), exercises, [str(s) for s in doc["reference"]],
                       doc.get("source_dir"), [{"label": str(m["label"]), "title": str(m["title"])}
                                               for m in doc.get("manual", [])], str(doc.get("title", "")),
                       bool(doc.get("smoke", False)))
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as err:
            raise ValueError(f"{path}: not a grading spec ({type(err).__name__}: {err})") from None
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
        for e in spec.exercises:
            for c in e.checks:
                if c.kind not in KINDS or not c.points > 0:
                    raise ValueError(f"{path}: {e.label}: bad check kind {c.kind!r} or points {c.points}")
        return spec


SMOKE_ENV = "TMLIB_SMOKE"


def mode_env(spec: AssignmentSpec) -> dict[str, str]:
    """The quick-mode setting a chapter is graded under, the same in its sandbox and in the grader's reference.

    A chapter whose full run trains or loads chapter 9's model, or trains for minutes (``spec.smoke``, set by
    ``tools/assignments.py build`` from the notebook), would run past the sandbox's time limit (the sandbox holds no
    ``runs/``), so it gets ``TMLIB_SMOKE=1`` by default. The grader's own ``TMLIB_SMOKE``, when set, wins for every
    chapter (``TMLIB_SMOKE=0``: the full runs, with a ``--timeout`` long enough for them).
    """
    if SMOKE_ENV in os.environ:
        return {SMOKE_ENV: os.environ[SMOKE_ENV]}
    return {SMOKE_ENV: "1"} if spec.smoke else {}


@contextlib.contextmanager
def graded_mode(spec: AssignmentSpec):
    """Run the block with :func:`mode_env`'s variables set in this process (the reference and the checks)."""
    env = mode_env(spec)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def make_spec(*, chapter: str, notebook: str, exercises, solutions: dict[str, list[str]], reference: list[str],
              qname, source_dir: str | None = None, titles: dict[str, str] | None = None,
              manual: list[dict] | None = None, title: str = "", smoke: bool = False) -> AssignmentSpec:
    """The spec of a chapter from its exercises (objects with ``label``, ``forbid`` and ``checks`` of ``kind``,
    ``points``, ``code``), each exercise's solution and stub code (``solutions[label]``), the chapter's code cells,
    the exercises' titles (``titles[label]``, "Exercise 1.5"), the exercises graded by hand, the chapter's title and
    whether it is graded in the quick mode (``smoke``, see :func:`mode_env`).

    Raises:
        ValueError: a check reads none of its exercise's names (it could not tell a right answer from a wrong
            one, and the grader would have nothing to ask the submission for).
    """
    out = []
    for ex in exercises:
        own = set().union(*(assigned_names(code) for code in solutions.get(ex.label, [])))
        checks = []
        for check in ex.checks:
            names = sorted(referenced_names(check.code) & own)
            if not names:
                raise ValueError(f"{notebook}: a {check.kind} check of {ex.label} reads none of the variables its "
                                 f"solution defines ({', '.join(sorted(own)) or 'none found'})")
            checks.append(CheckSpec(check.kind, float(check.points), check.code, names))
        out.append(ExerciseSpec(ex.label, qname(ex.label), checks, (titles or {}).get(ex.label, ex.label),
                                list(getattr(ex, "forbid", []))))
    return AssignmentSpec(chapter, notebook, out, list(reference), source_dir, list(manual or []), title, smoke)
