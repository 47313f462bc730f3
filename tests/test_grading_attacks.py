"""Attacks on the grader (`tools/assignments.py grade`), one test each, on a toy chapter that grades in a second.

One batch of submissions is graded once (module fixture): a correct one, a wrong one, and one per attack. The toy
chapter (`42_toy`) has three exercises: `answer` (public check: a positive int, 1 point; hidden test:
`check_close(answer, 42)`, 2 points), `v` (public: shape (3,); hidden: equals [0, 2, 4]; 1 point each) and a
function `double` (public: on [1, 2]; hidden: on 0..4; 1 point each), 7 in all. Each sandbox attack sets `answer = 42` only when the attack worked, so a score shows whether it did.

The attacks that need the sandbox (reading hidden files, detached processes, network, process and memory limits)
run only where bubblewrap works; elsewhere those tests skip and say why, and fail when TM_REQUIRE_SANDBOX=1
(CI, `.ci/run`). The other attacks run with or without it. Issue 26's cases (the forged values message, limits
per submission, honest cells with magics, a data folder behind a symbolic link, public checks reading what the
student set, asserts under PYTHONOPTIMIZE, a file name that is not UTF-8, an output that cannot be written) are
here too, each with the score or message it got before and must not get again.
"""
from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
import assignments as A  # noqa: E402
import grading  # noqa: E402

TOKEN = "tm-grading-detached-child-7f3a"
DOUBLE = "def double(x):\n    return 2 * np.asarray(x, dtype=float)"
WITHOUT_ANSWER = 4  # the points of a submission whose `answer` is wrong and everything else right
LIMITS = grading.Limits(seconds=20, memory_mb=1024, processes=32)
NOT_UTF8 = os.fsdecode(b"ren\xe9__42_toy.ipynb")  # a name from a Windows zip: Latin-1 bytes, not UTF-8
# A values message written by the submission itself: a dict whose 60,000 integer keys share one hash (k * (2**61 - 1)
# hashes to 0), which made decoding quadratic: 12 s for 20,000 keys, about 2 minutes for 60,000, three times a file.
FORGED = '''import json, os, sys
_job = json.load(open(sys.argv[1]))
_node = {"t": "dict", "v": [[{"t": "int", "v": str(k * (2**61 - 1))}, {"t": "none"}] for k in range(1, 60_001)]}
_body = json.dumps({"values": {"answer": _node}, "missing": [], "unsupported": {}, "errors": [], "calls": {}}).encode()
os.write(_job["fd"], b"TM-GRADING-VALUES/2\\n" + len(_body).to_bytes(8, "big") + _body + (0).to_bytes(8, "big"))
os._exit(0)'''
HONEST_MAGICS = {  # right answers in cells IPython runs: each scored 0 ("answer not defined") with the old driver
    "time": "%%time\nanswer = 42",
    "capture": "%%capture captured\nanswer = 42\nprint('not shown')",
    "linetime": "%time answer = 42",
    "display": "answer = 42\ndisplay(answer)",
}


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
        # three processes of 450 MB each, within the 1024 MB address space each may have, 1350 MB together
        "memtotal": """import subprocess, sys
code = "import sys, time; block = b'x' * (450 * 2**20); print('held', flush=True); time.sleep(8)"
children = [subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE) for _ in range(3)]
held = [c.stdout.readline().strip() == b'held' for c in children]
answer = 42 if all(held) else -1""",
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
    write(fill(student, answer=FORGED), "forged__42_toy.ipynb")
    for name, code in HONEST_MAGICS.items():
        write(fill(student, answer=code), f"magic{name}__42_toy.ipynb")
    write(fill(student, answer="import os\nanswer = int(open(os.path.join(os.environ['TMLIB_DATA_DIR'], "
                               "'answer.txt')).read())"), "datadir__42_toy.ipynb")
    write(fill(student), NOT_UTF8)
    data, link = tmp / "data_store", tmp / "data_link"  # the course's layout: TMLIB_DATA_DIR through a link
    data.mkdir()
    (data / "answer.txt").write_text("42")
    link.symlink_to(data)
    start = time.monotonic()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TMLIB_DATA_DIR", str(link))
            rows = A.grade(subs, out, subs / "gradebook.csv", sandbox="bwrap" if sandboxed else "none",
                           limits=LIMITS, expose=(str(link),))
        seconds = time.monotonic() - start
        time.sleep(5)  # longer than the detached child's sleep
    finally:
        listener.close()
    with (subs / "gradebook.csv").open(newline="", encoding="utf-8") as f:
        raw = list(csv.reader(f))
    return {"rows": rows, "raw": raw, "paths": paths, "sandboxed": sandboxed, "tmp": tmp, "seconds": seconds,
            "out": out, "student": student}


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
    subs = Path(batch["paths"]["submissions"])
    outputs = ("gradebook.csv", "gradebook_feedback", "gradebook_statistics.csv", "gradebook_canvas.csv",
               "gradebook_moodle.csv")
    files = {grading.reports.shown(str(p.relative_to(subs))) for p in subs.rglob("*")
             if p.is_file() and p.relative_to(subs).parts[0] not in outputs}
    assert files == {r["file"] for r in batch["rows"]}


# --------------------------------------------------------------------------------------------- issue 26's cases
def test_forged_values_message_is_refused_at_once(batch):
    """Before: 60,000 colliding keys, about 2 minutes per decode, three decodes (20,000 keys: 12 s)."""
    row = total(batch, "forged__42_toy.ipynb")
    assert row["points"] == 0 and row["note"].startswith("not gradable: a dict or set larger than 2000 entries")


def test_decoding_colliding_keys_is_bounded():
    keys = [{"t": "int", "v": str(k * (2**61 - 1))} for k in range(1, 60_001)]
    body = json.dumps({"values": {"answer": {"t": "dict", "v": [[k, {"t": "none"}] for k in keys]}}, "missing": [],
                       "unsupported": {}, "errors": []}).encode()
    message = grading.driver.MAGIC + len(body).to_bytes(8, "big") + body + (0).to_bytes(8, "big")
    start = time.monotonic()
    with pytest.raises(grading.values.BadValues, match="larger than 2000 entries"):
        grading.values.decode_message(message)
    assert time.monotonic() - start < 5  # JSON parsing only; the dict is never built
    collide = {k * (2**61 - 1): 0 for k in range(1, 2001)}  # the largest dict that travels: at most 2000 hashes
    got, _, _ = grading.values.decode_message(grading.driver.message({"d": collide}, ["d"], []))
    assert got.values["d"] == collide
    big = grading.driver.message({"d": dict.fromkeys(range(2001))}, ["d"], [])  # refused where it is encoded
    assert "at most 2000 per dict or set" in grading.values.decode_message(big)[0].unsupported["d"]


@pytest.mark.parametrize("name", sorted(HONEST_MAGICS))
def test_honest_cells_with_magics_get_full_marks(batch, name):
    """Before: 4 / 7 ("answer not defined"): the old driver turned every magic into a no-op."""
    row = total(batch, f"magic{name}__42_toy.ipynb")
    assert (row["points"], row["note"]) == (7, "" if batch["sandboxed"] else "graded without a sandbox"), row


def test_data_folder_through_a_symbolic_link(batch):
    """Before: TMLIB_DATA_DIR was compared with the resolved exposed path and dropped ("could not download")."""
    need_sandbox(batch)
    assert total(batch, "datadir__42_toy.ipynb")["points"] == 7


def test_a_file_name_that_is_not_utf8_keeps_the_gradebook(batch):
    """Before: every file graded, then no gradebook ('utf-8' codec can't encode character '\\udce9'), exit 1."""
    row = total(batch, "ren\\xe9__42_toy.ipynb")
    assert (row["student"], row["points"]) == ("ren\\xe9", 7)
    feedback = Path(batch["paths"]["submissions"]) / "gradebook_feedback"
    assert len(list(feedback.glob("ren_xe9__42_toy-*.md"))) == 1


def test_memory_is_limited_per_submission(batch):
    """Before: three processes holding 1.2 GB each under --memory-mb 2048 graded 11/11 (here 450 MB each, 1024)."""
    need_sandbox(batch)
    row = total(batch, "memtotal__42_toy.ipynb")
    assert row["points"] == 0 and row["note"].startswith(
        f"not gradable: used more memory than the limit of {LIMITS.memory_mb} MB (all its processes together)"), row


def test_outputs_are_checked_before_grading(batch, tmp_path):
    """Before: `--out` naming a folder, or a read-only submissions folder, failed after all the grading."""
    subs = Path(batch["paths"]["submissions"])
    start = time.monotonic()
    with pytest.raises(ValueError, match="cannot write the gradebook into /proc"):  # read-only even for root
        A.grade(subs, batch["out"], Path("/proc/gradebook.csv"), sandbox="none", limits=LIMITS)
    (tmp_path / "blocker").write_text("a file where a folder should be")
    with pytest.raises(ValueError, match="cannot write the gradebook"):
        A.grade(subs, batch["out"], tmp_path / "blocker" / "gradebook.csv", sandbox="none", limits=LIMITS)
    assert time.monotonic() - start < 5  # refused before the first submission ran
    one = tmp_path / "one"
    one.mkdir()
    nbformat.write(fill(batch["student"]), one / "alice__42_toy.ipynb")
    folder = tmp_path / "results"
    folder.mkdir()
    A.grade(one, batch["out"], folder, sandbox="bwrap" if batch["sandboxed"] else "none", limits=LIMITS)
    assert sorted(p.name for p in folder.iterdir()) == ["gradebook.csv", "gradebook_canvas.csv", "gradebook_feedback",
                                                        "gradebook_moodle.csv", "gradebook_statistics.csv"]


def test_asserts_in_checks_survive_pythonoptimize(batch, tmp_path):
    """Before: under PYTHONOPTIMIZE=1 a check written as `assert` vanished (an all-False mask scored 2/2); here a
    wrong `v` kept its public point."""
    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(fill(batch["student"], vector="v = np.zeros(2)"), subs / "opt__42_toy.ipynb")
    env = {**os.environ, "PYTHONOPTIMIZE": "1"}
    subprocess.run([sys.executable, str(ROOT / "tools" / "assignments.py"), "grade", str(subs), "--assignments",
                    str(batch["out"]), "--sandbox", "bwrap" if batch["sandboxed"] else "none", "--timeout", "60",
                    "--memory-mb", str(LIMITS.memory_mb)], check=True, env=env, capture_output=True)
    with (subs / "gradebook.csv").open() as f:
        rows = {r["exercise"]: float(r["points"]) for r in csv.DictReader(f)}
    assert rows["ex_42_vector"] == 0 and rows["TOTAL"] == 5


HOG = """import subprocess, time
held = []
try:
    for _ in range(40):  # as many processes as it may have, held while the other submission runs
        held.append(subprocess.Popen(['sleep', '12']))
except OSError:
    pass
time.sleep(6)
answer = 42"""
THREADS = """import threading, time
time.sleep(2)  # the other submission holds its processes by now
threads = [threading.Thread(target=time.sleep, args=(1,)) for _ in range(16)]
try:
    for t in threads:
        t.start()
    answer = 42
except RuntimeError:  # can't start new thread: Resource temporarily unavailable
    answer = -1"""


def test_processes_are_limited_per_submission(batch, tmp_path):
    """Before: every submission ran as uid 65534, whose process limit counts the whole host: one submission holding
    its processes (or a second grader) cost an honest notebook its points ("Resource temporarily unavailable")."""
    need_sandbox(batch)
    if os.geteuid() != 0:
        pytest.skip("without root the submissions share the grader's user id (CONTRIBUTING.md says so)")
    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(fill(batch["student"], answer=HOG), subs / "a_hog__42_toy.ipynb")
    nbformat.write(fill(batch["student"], answer=THREADS), subs / "b_threads__42_toy.ipynb")
    rows = A.grade(subs, batch["out"], sandbox="bwrap", limits=LIMITS, jobs=2)  # both at once
    assert [r["points"] for r in rows if r["exercise"] == "TOTAL"] == [7, 7]


def test_judging_is_time_limited(tmp_path):
    """A check that never ends on one submission's values costs that submission its grade, not the class's time."""
    src, out, subs = tmp_path / "src", tmp_path / "assignments", tmp_path / "subs"
    for d in (src, subs):
        d.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("import numpy as np"),
                *_exercise("ex-43-answer", "answer = 42", "answer = ...", "assert answer > 0, 'positive'",
                           "import time\nwhile answer == 13:  # the instructor's check, stuck on one value\n"
                           "    time.sleep(0.01)\nassert answer == 42", (1, 1))]
    nbformat.write(nb, src / "43_slow.ipynb")
    A.build(out, [src / "43_slow.ipynb"], zip_it=False)
    student = nbformat.read(out / "43_slow" / "student" / "43_slow.ipynb", as_version=4)
    for who, value in (("stuck", 13), ("right", 42)):
        nb = nbformat.from_dict(student)
        for cell in nb.cells:
            if "stub" in cell.metadata.get("assignment", {}):
                cell.source = f"answer = {value}"
        nbformat.write(nb, subs / f"{who}__43_slow.ipynb")
    limits = grading.Limits(seconds=20, memory_mb=LIMITS.memory_mb, judge_seconds=2)
    start = time.monotonic()
    rows = A.grade(subs, out, sandbox="bwrap" if grading.probe() is None else "none", limits=limits, jobs=1)
    totals = {r["student"]: (r["points"], r["note"]) for r in rows if r["exercise"] == "TOTAL"}
    unsandboxed = "" if grading.probe() is None else "graded without a sandbox"
    assert totals["right"] == (2, unsandboxed) and totals["stuck"] == (0, "not gradable: judging its values ran past 2 s")
    assert time.monotonic() - start < 40


STUDENT_SET_INPUTS = {  # exercise -> the values a student set to satisfy a public check that read them
    "ex-04-rope": {"q_vec": np.zeros(8), "k_vec": np.zeros(8), "scores": [0.0, 0.0, 0.0]},  # kept 9/10
    "ex-06-gap": {"closed_form": 0.0, "z_opt": np.zeros(10)},  # kept 5/6 (then with V10 = 2 and z_opt of 2 logits)
    "ex-07-cache-cost": {"n": 10**9, "without_cache": 5 * 10**8, "with_cache": 1},         # kept 9/10
}


@pytest.fixture(scope="module")
def chapter_specs(tmp_path_factory):
    out = tmp_path_factory.mktemp("chapter_specs")
    stems = {label[3:5]: next(ROOT.glob(f"notebooks/{label[3:5]}_*.ipynb")) for label in STUDENT_SET_INPUTS}
    A.build(out, sorted(stems.values()), zip_it=False)
    return {ch: grading.spec.AssignmentSpec.load(out / path.stem / "autograder" / A.SPEC_FILE)
            for ch, path in stems.items()}


@pytest.mark.parametrize("label", sorted(STUDENT_SET_INPUTS))
def test_public_checks_use_the_graders_inputs(chapter_specs, label):
    """The public checks of ex-04-rope, ex-06-gap and ex-07-cache-cost read inputs the student set: such answers
    kept their public points. Now they score 0 on the exercise; the course's solution still passes."""
    from grading import judge as J

    spec = chapter_specs[label[3:5]]
    assert J.self_check(spec) == []
    namespace = dict(J.reference_namespace(spec))
    namespace.update(STUDENT_SET_INPUTS[label])
    results, _ = J.judge(spec, grading.driver.message(namespace, J.job_names(spec), []))
    [row] = [r for r in results if r.qname == A.qname(label)]
    assert row.points == 0 and any(n.startswith("public: ") for n in row.notes), row


OWN_SOFTMAX = ("def my_softmax(x):\n    x = np.asarray(x, dtype=float)\n    e = np.exp(x - x.max(-1, keepdims=True))\n"
               "    return e / e.sum(-1, keepdims=True)")
DELEGATIONS = {  # ways to hand the build-it to the library's own softmax: each scores 0
    "direct": "def my_softmax(x):\n    return R.softmax(x)",
    "alias": "from tmlib.ref import softmax as _sm\n\ndef my_softmax(x, f=_sm):\n    return f(x)",
    "dynamic": "def my_softmax(x):\n    return getattr(R, 'soft' + 'max')(x)",  # unseen by inspection, stopped when run
}


def _forbid_chapter(folder: Path, public: str) -> Path:
    mark = {"exercise": "ex-44-softmax", "stub": "def my_softmax(x):\n    ...", "forbid": ["tmlib.ref.softmax"]}
    check = lambda code, kind: _cell(code, tags=["remove-cell"],  # noqa: E731
                                     mark={"exercise": "ex-44-softmax", "check": kind})
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("import numpy as np\nfrom tmlib import ref as R\nfrom tmlib.course import check_close, check_own_work"),
                _cell("```{exercise}\n:label: ex-44-softmax\nWrite softmax.\n```", kind="markdown"),
                _cell("```{solution-start} ex-44-softmax\n:class: dropdown\n```", kind="markdown"),
                _cell(OWN_SOFTMAX, mark=mark), check(public, "public"),
                check("x_ = np.arange(6.0).reshape(2, 3)\ncheck_close(my_softmax(x_), R.softmax(x_), 'my_softmax')",
                      "hidden"),
                _cell("```{solution-end}\n```", kind="markdown")]
    nbformat.write(nb, folder / "44_forbid.ipynb")
    return folder / "44_forbid.ipynb"


def test_a_build_it_cannot_delegate_to_the_library(tmp_path):
    """Issue 24: a build-it passed by returning the reference's output; now the grader runs it with the forbidden
    reference raising "write it yourself", and the public check says so in the student's notebook."""
    src, out, subs = tmp_path / "src", tmp_path / "assignments", tmp_path / "subs"
    for d in (src, subs):
        d.mkdir()
    public = ("print(check_own_work(my_softmax, ['tmlib.ref.softmax']))\n"
              "print(check_close(my_softmax([[1.0, 2.0, 3.0]]), R.softmax([[1.0, 2.0, 3.0]]), 'my_softmax'))")
    with pytest.raises(ValueError, match="must call check_own_work"):
        A.build(out, [_forbid_chapter(src, public.split("\n")[1])], zip_it=False)
    A.build(out, [_forbid_chapter(src, public)], zip_it=False)
    student = nbformat.read(out / "44_forbid" / "student" / "44_forbid.ipynb", as_version=4)
    for who, code in {"own": OWN_SOFTMAX, **DELEGATIONS}.items():
        nb = nbformat.from_dict(student)
        for cell in nb.cells:
            if "stub" in cell.metadata.get("assignment", {}):
                cell.source = code
        nbformat.write(nb, subs / f"{who}__44_forbid.ipynb")
    rows = A.grade(subs, out, sandbox="bwrap" if grading.probe() is None else "none", limits=LIMITS)
    got = {r["student"]: (r["points"], r["note"]) for r in rows if r["exercise"] == "ex_44_softmax"}
    assert got.pop("own") == (2, "")
    for who, (points, note) in got.items():
        assert points == 0 and "tmlib.ref.softmax is not available in the exercise of my_softmax: write it yourself" \
            in note, (who, note)
    assert "public: AssertionError: my_softmax calls tmlib.ref.softmax: this exercise asks you to write it" in \
        dict((k, v[1]) for k, v in got.items())["direct"]


def test_reports_for_instructors(batch):
    """Feedback per file (public messages only), statistics per exercise, Canvas and Moodle imports."""
    subs = Path(batch["paths"]["submissions"])
    bob = (subs / "gradebook_feedback" / "bob__42_toy.md").read_text()
    assert "Autograded score: **5 / 7**" in bob and "a hidden test does not" in bob
    assert "the answer is wrong" not in bob  # the hidden test's own message stays hidden
    fn = (subs / "gradebook_feedback" / "fnwrong__42_toy.md").read_text()
    assert "passed" in fn
    loop = (subs / "gradebook_feedback" / "loop__42_toy.md").read_text()
    assert "could not be graded: not gradable: ran past the time limit" in loop
    with (subs / "gradebook_statistics.csv").open() as f:
        stats = {r["exercise"]: r for r in csv.DictReader(f)}
    if batch["sandboxed"]:  # unsandboxed, the submissions that probe the sandbox fail otherwise (CI has bubblewrap)
        assert stats["ex_42_answer"]["most_frequent_message"] == "AssertionError: answer must be a positive int"
    # the files that cannot be graded: 5 without the sandbox, 6 in it (as measured with and without bwrap)
    assert int(stats["TOTAL"]["not_gradable"]) >= (6 if batch["sandboxed"] else 5) and float(stats["TOTAL"]["most_memory_mb"]) > 0
    with (subs / "gradebook_canvas.csv").open() as f:
        canvas = list(csv.reader(f))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Chapter 42: A toy chapter (autograded)"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "7.0"]
    by_id = {row[0]: row[5] for row in canvas[2:]}
    assert by_id["alice"] == "7.0" and by_id["dup"] == "" and by_id["bob"] == "5.0"
    with (subs / "gradebook_moodle.csv").open() as f:
        moodle = list(csv.reader(f))
    assert moodle[0] == ["Username", "Chapter 42: A toy chapter (autograded)"] and ["alice", "7.0"] in moodle
