"""Attacks on the grader (`tools/assignments.py grade`), one test each, on a toy chapter that grades in a second.

One batch of submissions is graded once (module fixture): a correct one, a wrong one, and one per attack. The toy
chapter (`42_toy`) has three exercises: `answer` (public check: a positive int, 1 point; hidden test:
`check_close(answer, 42)`, 2 points), `v` (public: shape (3,); hidden: equals [0, 2, 4]; 1 point each) and a
function `double` (public: on [1, 2]; hidden: on 0..4; 1 point each), 7 in all. Each sandbox attack sets `answer = 42` only when the attack worked, so a score shows whether it did.

The attacks that need the sandbox (reading hidden files, detached processes, network, process and memory limits)
run only where bubblewrap works; elsewhere those tests skip and say why, and fail when TM_REQUIRE_SANDBOX=1
(CI, `.ci/run`). The other attacks run with or without it.
"""
from __future__ import annotations

import csv
import os
import socket
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
import assignments as A  # noqa: E402
import grading  # noqa: E402

TOKEN = "tm-grading-detached-child-7f3a"
DOUBLE = "def double(x):\n    return 2 * np.asarray(x, dtype=float)"
WITHOUT_ANSWER = 4  # the points of a submission whose `answer` is wrong and everything else right
LIMITS = grading.Limits(seconds=20, memory_mb=2048, processes=32)


def _cell(source, *, mark=None, tags=(), kind="code"):
    cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
    if mark:
        cell.metadata["assignment"] = mark
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def _exercise(label, solution, stub, public, hidden, points):
    md = lambda s: _cell(s, kind="markdown")  # noqa: E731
    check = lambda code, kind, p: _cell(code, tags=["remove-cell"],  # noqa: E731
                                        mark={"exercise": label, "check": kind, "points": p})
    return [md(f"```{{exercise}}\n:label: {label}\nDefine it.\n```"),
            md(f"```{{solution-start}} {label}\n:class: dropdown\n```"),
            _cell(solution, mark={"exercise": label, "stub": stub}),
            check(public, "public", points[0]), check(hidden, "hidden", points[1]),
            md("```{solution-end}\n```")]


def toy_chapter(folder: Path) -> Path:
    """Write the toy chapter notebook `42_toy.ipynb` into ``folder``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("# A toy chapter", kind="markdown"),
                _cell("import numpy as np\n\n\ndef check_close(a, b, what):\n"
                      "    assert np.allclose(np.asarray(a, dtype=float), b), f'{what} is wrong'"),
                *_exercise("ex-42-answer", "answer = 42", "answer = ...  # an int",
                           "assert isinstance(answer, int) and answer > 0, 'answer must be a positive int'",
                           "check_close(answer, 42, 'the answer')", (1, 2)),
                *_exercise("ex-42-vector", "v = np.arange(3) * 2.0", "v = ...  # a (3,) array",
                           "assert np.shape(v) == (3,), 'v must have shape (3,)'",
                           "check_close(v, [0, 2, 4], 'v')", (1, 1)),
                *_exercise("ex-42-double", DOUBLE, "def double(x):\n    ...  # 2 x, as a float array",
                           "check_close(double([1, 2]), [2, 4], 'double([1, 2])')",
                           "check_close(double(np.arange(5.0)), 2 * np.arange(5.0), 'double(0..4)')", (1, 1))]
    path = folder / "42_toy.ipynb"
    nbformat.write(nb, path)
    return path


def fill(student, answer="answer = 42", vector="v = np.arange(3) * 2.0", double=None, extra=()):
    """A submission: the built student notebook with its three stubs filled, plus extra cells at the end."""
    nb = nbformat.from_dict(student)
    for cell in nb.cells:
        mark = cell.metadata.get("assignment", {})
        if "stub" in mark:
            cell.source = {"ex-42-answer": answer, "ex-42-vector": vector}.get(mark["exercise"], double or DOUBLE)
    nb.cells += [_cell(code) for code in extra]
    return nb


def attack_code(paths: dict) -> dict[str, str]:
    """The sandbox attacks, as an ``answer`` cell each: ``answer = 42`` exactly when the attack worked."""
    return {
        "leak": f"""import os, shutil
needle, found = b"check_close(answer, " + b"42", False
for top in {[paths['assignments'], paths['submissions'], paths['source'],
             *(str(ROOT / d) for d in ("notebooks", "_build", "tools", "tests"))]!r}:
    for folder, _, files in os.walk(top):
        for name in files:
            try:
                data = open(os.path.join(folder, name), 'rb').read()
            except OSError:
                continue
            found = found or needle in data
            for dst in ({paths['leak']!r}, {paths['submissions']!r}):
                try:
                    shutil.copy(os.path.join(folder, name), os.path.join(dst, 'stolen_' + name))
                except OSError:
                    pass
answer = 42 if found else -1""",
        "detached": f"""import subprocess, sys
code = "import time; time.sleep(3); open({paths['gradebook']!r}, 'w').write('pwned'); open({paths['marker']!r}, 'w')"
subprocess.Popen([sys.executable, '-c', code, {TOKEN!r}], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
answer = -1""",
        "network": f"""import socket
try:
    socket.create_connection(('127.0.0.1', {paths['port']}), timeout=3).close()
    answer = 42
except OSError:
    answer = -1""",
        "processes": """import subprocess
started = []
try:
    for _ in range(100):
        started.append(subprocess.Popen(['sleep', '30']))
except OSError:
    pass
answer = 42 if len(started) == 100 else -1""",
        "memory": """import mmap
try:
    block = mmap.mmap(-1, 8 * 2**30)  # 8 GiB of address space, never touched
    answer = 42
except (OSError, MemoryError, ValueError):
    answer = -1""",
    }


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Build the toy chapter, write every submission, grade them once; the rows and paths for the tests."""
    tmp = tmp_path_factory.mktemp("grading_attacks")
    src, out, subs, leak = (tmp / n for n in ("src", "assignments", "submissions", "leak"))
    for d in (src, subs, leak):
        d.mkdir()
    A.build(out, [toy_chapter(src)], zip_it=False)
    student = nbformat.read(out / "42_toy" / "student" / "42_toy.ipynb", as_version=4)
    sandboxed = grading.probe() is None
    listener = socket.create_server(("127.0.0.1", 0))
    paths = {"assignments": str(out), "submissions": str(subs), "source": str(src), "leak": str(leak),
             "gradebook": str(subs / "gradebook.csv"), "marker": str(tmp / "marker"),
             "port": listener.getsockname()[1]}
    write = lambda nb, name: nbformat.write(nb, subs / name)  # noqa: E731
    write(fill(student), "alice__42_toy.ipynb")
    write(fill(student, answer="answer = 41"), "bob__42_toy.ipynb")
    write(fill(student, answer="while True:\n    pass"), "loop__42_toy.ipynb")
    write(fill(student, double="def double(x):\n    return np.asarray(x, dtype=float) * (2 if len(x) < 3 else 1)"),
          "fnwrong__42_toy.ipynb")  # right on the public check's input only
    write(fill(student, double="class Yes:\n    def __eq__(self, other):\n        return True\n"
                               "    __array_priority__ = 1000\n\ndef double(x):\n    return Yes()"),
          "fnobject__42_toy.ipynb")
    if sandboxed:
        for name, code in attack_code(paths).items():
            write(fill(student, answer=code), f"{name}__42_toy.ipynb")
    forged = fill(student, answer="answer = 0", vector="v = 0")
    forged.metadata["tmlib_assignment"] = {"chapter": "01", "notebook": str(tmp / "evil"),
                                           "exercises": {"ex_42_answer": 1000}}
    write(forged, "archive__42_toy.ipynb")
    forged.metadata["tmlib_assignment"] = {"chapter": "07", "notebook": "42_toy",
                                           "exercises": {"ex_42_answer": 1000, "bonus": 50}}
    write(forged, "points__42_toy.ipynb")
    (subs / "badjson__42_toy.ipynb").write_text('{"cells": [')
    (subs / "zero__42_toy.ipynb").write_bytes(b"")
    nochapter = fill(student)
    nochapter.metadata.pop("tmlib_assignment")
    write(nochapter, "nochapter.ipynb")
    write(nbformat.v4.new_notebook(), "empty__42_toy.ipynb")
    (subs / "dup").mkdir()
    write(fill(student), "dup__42_toy.ipynb")
    write(fill(student, answer="answer = 41"), "dup/second_try.ipynb")
    write(fill(student), '=HYPERLINK("evil.example","click")__42_toy.ipynb')
    write(fill(student), "+cmd__42_toy.ipynb")
    try:
        rows = A.grade(subs, out, subs / "gradebook.csv", sandbox="bwrap" if sandboxed else "none", limits=LIMITS)
        time.sleep(5)  # longer than the detached child's sleep
    finally:
        listener.close()
    with (subs / "gradebook.csv").open(newline="") as f:
        raw = list(csv.reader(f))
    return {"rows": rows, "raw": raw, "paths": paths, "sandboxed": sandboxed, "tmp": tmp}


def total(batch, file):
    """The TOTAL row of one file."""
    [row] = [r for r in batch["rows"] if r["file"] == file and r["exercise"] == "TOTAL"]
    return row


def need_sandbox(batch):
    if not batch["sandboxed"]:
        reason = f"no working bubblewrap sandbox: {grading.probe()}"
        if os.environ.get("TM_REQUIRE_SANDBOX") == "1":
            pytest.fail(reason + " (TM_REQUIRE_SANDBOX=1)")
        pytest.skip(reason)


def test_correct_gets_full_marks_and_wrong_gets_partial(batch):
    assert (total(batch, "alice__42_toy.ipynb")["points"], total(batch, "alice__42_toy.ipynb")["max_points"]) == (7, 7)
    bob = [r for r in batch["rows"] if r["file"] == "bob__42_toy.ipynb"]
    assert [(r["exercise"], r["points"]) for r in bob] == [("ex_42_answer", 1), ("ex_42_vector", 2),
                                                           ("ex_42_double", 2), ("TOTAL", 5)]
    assert "hidden: AssertionError: the answer is wrong" in bob[0]["note"]


def test_functions_are_judged_on_the_graders_inputs(batch):
    [wrong] = [r for r in batch["rows"] if r["file"] == "fnwrong__42_toy.ipynb" and r["exercise"] == "ex_42_double"]
    assert wrong["points"] == 1 and wrong["note"].startswith("hidden: AssertionError: double(0..4) is wrong")
    [obj] = [r for r in batch["rows"] if r["file"] == "fnobject__42_toy.ipynb" and r["exercise"] == "ex_42_double"]
    assert obj["points"] == 0 and "double raised in the submission: returned something that is not data" in obj["note"]


def test_infinite_loop_is_stopped_and_the_batch_goes_on(batch):
    row = total(batch, "loop__42_toy.ipynb")
    assert row["points"] == 0 and row["note"] == f"not gradable: ran past the time limit of {LIMITS.seconds:g} s"
    assert total(batch, "zero__42_toy.ipynb")  # files after it were graded


def test_hidden_tests_and_other_files_are_not_readable_nor_copied(batch):
    need_sandbox(batch)
    assert total(batch, "leak__42_toy.ipynb")["points"] == WITHOUT_ANSWER  # the hidden test was not found
    assert not os.listdir(batch["paths"]["leak"])
    assert not [p for p in Path(batch["paths"]["submissions"]).rglob("stolen_*")]


def test_detached_child_dies_with_the_sandbox_and_cannot_touch_the_gradebook(batch):
    need_sandbox(batch)
    assert batch["raw"][0] == grading.FIELDS and len(batch["raw"]) == len(batch["rows"]) + 1
    assert not Path(batch["paths"]["marker"]).exists()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            assert TOKEN.encode() not in cmdline.read_bytes(), f"{cmdline.parent}: the detached child survived"
        except OSError:
            pass


def test_no_network(batch):
    need_sandbox(batch)
    assert total(batch, "network__42_toy.ipynb")["points"] == WITHOUT_ANSWER


def test_process_limit(batch):
    need_sandbox(batch)
    assert total(batch, "processes__42_toy.ipynb")["points"] == WITHOUT_ANSWER


def test_memory_limit(batch):
    need_sandbox(batch)
    assert total(batch, "memory__42_toy.ipynb")["points"] == WITHOUT_ANSWER


def test_archive_path_from_the_metadata_is_refused(batch):
    row = total(batch, "archive__42_toy.ipynb")
    assert row["points"] == 0 and row["note"].startswith("not gradable: its metadata names an assignment that was")


def test_chapter_and_points_come_from_the_instructor(batch):
    rows = [r for r in batch["rows"] if r["file"] == "points__42_toy.ipynb"]
    assert [(r["chapter"], r["exercise"], r["max_points"]) for r in rows] == [
        ("42", "ex_42_answer", 3), ("42", "ex_42_vector", 2), ("42", "ex_42_double", 2), ("42", "TOTAL", 7)]
    assert rows[-1]["points"] == 2  # `double` was right


@pytest.mark.parametrize("file, reason", [
    ("badjson__42_toy.ipynb", "not gradable: invalid JSON"),
    ("zero__42_toy.ipynb", "not gradable: empty file (0 bytes)"),
    ("nochapter.ipynb", "not gradable: which assignment?"),
])
def test_malformed_files_get_a_row_and_do_not_stop_grading(batch, file, reason):
    row = total(batch, file)
    assert row["points"] == 0 and row["note"].startswith(reason), row


def test_empty_notebook_gets_a_row(batch):
    row = total(batch, "empty__42_toy.ipynb")
    assert (row["student"], row["chapter"], row["points"], row["max_points"]) == ("empty", "42", 0, 7)
    assert "no code cells" in row["note"]


def test_duplicates_are_flagged(batch):
    for file in ("dup__42_toy.ipynb", "dup/second_try.ipynb"):
        assert "duplicate: 2 files for dup, chapter 42" in total(batch, file)["note"]
    assert "duplicate" not in total(batch, "alice__42_toy.ipynb")["note"]


def test_formula_ids_are_neutralised_in_the_csv(batch):
    cells = [cell for row in batch["raw"][1:] for cell in row]
    assert "'=HYPERLINK(\"evil.example\",\"click\")" in cells and "'+cmd" in cells
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")]
    assert total(batch, "+cmd__42_toy.ipynb")["points"] == 7  # neutralised, still graded


def test_every_file_has_a_row(batch):
    files = {str(p.relative_to(batch["paths"]["submissions"])) for p in Path(batch["paths"]["submissions"]).rglob("*")
             if p.is_file() and p.name != "gradebook.csv"}
    assert files == {r["file"] for r in batch["rows"]}
