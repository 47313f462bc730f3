"""The grader's parts, without running a sandbox: the values format, the gradebook, reading and routing files,
the spec's variable analysis, judging, and the sandbox's command line and fallback. Fast (no notebook runs)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
import grading  # noqa: E402
from grading import driver, gradebook as G, judge as J, sandbox as S, spec as P, values as V  # noqa: E402


def roundtrip(namespace, names=None):
    got, _, _ = V.decode_message(driver.message(namespace, names or list(namespace), []))
    return got


def test_values_round_trip_as_data():
    a = np.arange(12.0).reshape(3, 4)
    t = torch.arange(6, dtype=torch.float32, requires_grad=True).reshape(2, 3)
    ns = {"n": 3, "big": 10**30, "f": float("nan"), "c": 1 + 2j, "s": "x", "none": None, "b": True,
          "lst": [1, (2.5, "y")], "st": {3, 1}, "d": {1: 0.5, "k": [a[0]]}, "a": a[:, ::2], "zero_d": np.array(2.0),
          "be": np.arange(3, dtype=">i4"), "mask": np.eye(2, dtype=bool), "i64": np.int64(7), "nb": np.bool_(False),
          "t": t.t(), "bf": torch.ones(2, dtype=torch.bfloat16), "labels": np.array(["ab", "c"])}
    got = roundtrip(ns).values
    assert got["n"] == 3 and type(got["n"]) is int and got["big"] == 10**30 and np.isnan(got["f"])
    assert (got["c"], got["s"], got["none"], got["b"], got["lst"], got["st"]) == (1 + 2j, "x", None, True,
                                                                                 [1, (2.5, "y")], {1, 3})
    assert got["d"][1] == 0.5 and np.array_equal(got["d"]["k"][0], a[0])
    assert np.array_equal(got["a"], a[:, ::2]) and got["zero_d"].shape == () and got["be"].tolist() == [0, 1, 2]
    assert got["mask"].dtype == bool and type(got["i64"]) is np.int64 and type(got["nb"]) is np.bool_
    assert torch.is_tensor(got["t"]) and torch.equal(got["t"], t.detach().t()) and not got["t"].requires_grad
    assert got["bf"].dtype == torch.bfloat16 and got["labels"].tolist() == ["ab", "c"]


def test_values_refuse_code_and_objects():
    class Always(float):
        def __eq__(self, other):
            return True

    ns = {"fn": len, "mod": np, "obj": Always(1.0), "objarr": np.array([None, 1], dtype=object), "deep": []}
    x = ns["deep"]
    for _ in range(40):
        x.append([])
        x = x[0]
    got = roundtrip({**ns, "ok": 1}, [*ns, "ok", "undefined"])
    assert set(got.values) == {"ok"} and got.missing == ["undefined"]
    assert set(got.unsupported) == set(ns) and "Always" in got.unsupported["obj"]


@pytest.mark.parametrize("part, mutate, error", [
    ("message", lambda m: b"\x80\x04\x95pickle" + m, "no values message"),
    ("message", lambda m: m[:-3], "truncated"),
    ("blob", lambda b: b.replace(b"'descr': '<f8'", b"'descr': '|O8'"), "not allowed"),  # an object (pickle) array
    ("blob", lambda b: b.replace(b"'shape': (2,), ", b"'shape': (200,),"), "does not match"),  # same header length
    ("blob", lambda b: b.replace(b"\x93NUMPY", b"\x93PICKLE"[:6]), "bad array record"),
    ("json", lambda j: j.replace(b'"t": "ndarray"', b'"t": "pickle"'), "unknown value tag"),
    ("json", lambda j: j.replace(b'"offset": 0', b'"offset": 5'), "bad array"),
])
def test_values_reject_forged_messages(part, mutate, error):
    message = driver.message({"a": np.array([1.0, 2.0])}, ["a"], [])
    doc, blob = V.parse_message(message)
    body = json.dumps(doc).encode()
    if part == "message":
        message = mutate(message)
    else:  # forge the JSON or the .npy record, keep the framing right
        body, blob = (mutate(body), blob) if part == "json" else (body, mutate(blob))
        assert (body, blob) != (json.dumps(doc).encode(), V.parse_message(message)[1]), "the forgery changed nothing"
        message = driver.MAGIC + len(body).to_bytes(8, "big") + body + len(blob).to_bytes(8, "big") + blob
    with pytest.raises(V.BadValues, match=error):
        V.decode_message(message)


def test_csv_cells_are_neutralised_and_written_atomically(tmp_path):
    assert [G.csv_cell(x) for x in ["=1+1", "+a", "-2", "@SUM(A1)", "\tx", "alice", "a\nb\x07", 3.5, -1]] == [
        "'=1+1", "'+a", "'-2", "'@SUM(A1)", "'\tx", "alice", "a b?", 3.5, -1]
    path = tmp_path / "gradebook.csv"
    path.write_text("old")
    G.write_gradebook([{"student": "=cmd()", "points": 1.0}], path)
    assert path.read_text().splitlines() == [",".join(G.FIELDS), "'=cmd(),,,1.0,,,"]
    assert os.listdir(tmp_path) == ["gradebook.csv"]


def _nb(path, metadata=None, cells=("x = 1",)):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata.update(metadata or {})
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("content, reason", [
    (b"", "empty file"), (b"{", "invalid JSON"), (b"\xff\xfe", "not UTF-8"), (b"[1, 2]", "not a version-4"),
    (b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": 3}]}', "cell 0 has no text source"),
])
def test_unreadable_notebooks_say_why(tmp_path, content, reason):
    path = tmp_path / "a.ipynb"
    path.write_bytes(content)
    with pytest.raises(G.NotGradable, match=reason):
        G.read_notebook(path)


def test_links_and_other_files_are_not_read(tmp_path):
    secret = _nb(tmp_path / "secret.ipynb")
    (tmp_path / "link.ipynb").symlink_to(secret)
    with pytest.raises(G.NotGradable, match="symbolic link"):
        G.read_notebook(tmp_path / "link.ipynb")
    with pytest.raises(G.NotGradable, match="not a notebook"):
        G.read_notebook(tmp_path / "notes.txt")
    cells, _, marks = G.read_notebook(_nb(tmp_path / "ok.ipynb", cells=["a = 1", "b = 2"]))
    assert marks == [None, None]
    assert cells == ["a = 1", "b = 2"]
    listed = G.list_submissions(tmp_path, tmp_path / "gradebook.csv")
    assert [p.name for p in listed] == ["link.ipynb", "ok.ipynb", "secret.ipynb"]


def _spec(chapter="01", notebook="01_a", checks=(("public", 1.0, "assert x == 2", ["x"]),)):
    return P.AssignmentSpec(chapter, notebook, [P.ExerciseSpec("ex-a", "ex_a", [P.CheckSpec(*c) for c in checks])],
                            ["import numpy as np"])


def test_the_assignment_comes_from_the_instructor(tmp_path):
    specs = {"01_a": _spec(), "03_c": _spec("03", "03_c")}
    meta = lambda name: {"tmlib_assignment": {"notebook": name, "chapter": "99"}}  # noqa: E731
    assert G.which_assignment(tmp_path / "al__03_c.ipynb", {}, specs).chapter == "03"
    assert G.which_assignment(tmp_path / "al.ipynb", meta("01_a"), specs).chapter == "01"
    with pytest.raises(G.NotGradable, match="not built"):
        G.which_assignment(tmp_path / "al__01_a.ipynb", meta("/tmp/evil"), specs)
    with pytest.raises(G.NotGradable, match="file name says chapter 03 but its metadata says chapter 01"):
        G.which_assignment(tmp_path / "al__03_c.ipynb", meta("01_a"), specs)
    with pytest.raises(G.NotGradable, match="which assignment"):
        G.which_assignment(tmp_path / "al.ipynb", {}, specs)


def test_spec_names_come_from_the_solution():
    assert P.assigned_names("import numpy as np\nfor i in range(2):\n    y = i\n[z for z in 'ab']\n"
                            "def f(a):\n    q = a\nwith open('f') as fh:\n    pass\n%time w = 1") == {
        "np", "i", "y", "f", "fh"}
    assert P.referenced_names("check_close(y, f(2), lambda t: t)") == {"check_close", "y", "f", "t"}
    ex = type("Ex", (), {"label": "ex-a", "checks": [type("C", (), {"kind": "public", "points": 1,
                                                                     "code": "assert np.isclose(y, 1)"})]})
    spec = P.make_spec(chapter="01", notebook="01_a", exercises=[ex], solutions={"ex-a": ["y = 1", "y = ..."]},
                       reference=["y = 1"], qname=lambda s: s.replace("-", "_"))
    assert spec.exercises[0].checks[0].names == ["y"]
    with pytest.raises(ValueError, match="reads none of the variables"):
        P.make_spec(chapter="01", notebook="01_a", exercises=[ex], solutions={"ex-a": ["z = 1"]}, reference=[],
                    qname=str)


def test_spec_save_and_load(tmp_path):
    spec = _spec()
    spec.save(tmp_path / "grading.json")
    assert P.AssignmentSpec.load(tmp_path / "grading.json") == spec
    (tmp_path / "bad.json").write_text(json.dumps({"format": P.FORMAT, "chapter": "01"}))
    with pytest.raises(ValueError, match="not a grading spec"):
        P.AssignmentSpec.load(tmp_path / "bad.json")


def test_judging_uses_the_reference_and_the_values_only():
    spec = _spec(checks=(("public", 1.0, "assert x == 2, 'x is not 2'", ["x"]),
                         ("hidden", 2.0, "assert np.isclose(x * 1.0, 2.0)", ["x"])))
    score = lambda ns: [(r.points, r.notes) for r in J.judge(spec, driver.message(ns, spec.names, []))[0]]  # noqa
    assert score({"x": 2}) == [(3.0, [])]
    assert score({"x": 3}) == [(0.0, ["public: AssertionError: x is not 2", "hidden: AssertionError"])]
    assert score({}) == [(0.0, ["public: x not defined", "hidden: x not defined"])]
    assert score({"x": len})[0][1][0] == "public: x type builtins.builtin_function_or_method"
    assert J.self_check(spec) == ["ex_a: public: x not defined", "ex_a: hidden: x not defined"]


def test_bwrap_command_binds_only_the_allow_list(tmp_path):
    box = S.Sandbox("bwrap", expose=(str(tmp_path),))
    box.bwrap = box.bwrap or "/usr/bin/bwrap"
    argv, _ = box.command(tmp_path / "in", grading.Limits())
    binds = [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a in ("--ro-bind", "--bind")]
    assert all(a == "--ro-bind" for a in argv if a in ("--ro-bind", "--bind"))
    assert (str(tmp_path / "in"), "/grader/in") in binds and (str(tmp_path), str(tmp_path)) in binds
    records = S.tmlib_dir().parent / "benchmarks" / "results"  # read-only: chapter 12 reads the stored records
    assert (str(records), "/grader/lib/benchmarks/results") in binds
    allowed = ("/usr", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", sys.prefix, sys.base_prefix,
               str(S.tmlib_dir()), str(records), str(tmp_path))
    assert all(src.startswith(allowed) or src in map(os.path.realpath, allowed) for src, _ in binds), binds
    assert str(ROOT) not in [src for src, _ in binds] and "/" not in [src for src, _ in binds]
    for flag in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert box.shown(Path(sys.prefix) / "assignments") and box.shown(Path("/etc/x"))  # grade() refuses these
    assert box.shown(tmp_path.parent / "other") is None and box.shown(ROOT / "notebooks") is None


def test_without_bwrap_the_grader_refuses_unless_told_to_run_unsandboxed(monkeypatch, capsys, tmp_path):
    """Without bubblewrap the grader refuses (a submission could read the hidden tests), says how to install it and
    names the flag that accepts the risk; only --no-sandbox (or --sandbox none) runs submissions unsandboxed."""
    monkeypatch.setattr(S.shutil, "which", lambda name: None)
    monkeypatch.setattr(S, "_PROBES", {})
    assert S.probe() == "bubblewrap (bwrap) is not installed"
    for mode in ("bwrap", "auto"):  # "auto", the old default, used to fall back to no sandbox with a warning
        with pytest.raises(grading.SandboxUnavailable) as err:
            S.choose(mode)
        message = " ".join(str(err.value).split())
        for part in ("not installed", "read the hidden tests", "sudo apt-get install bubblewrap", "--no-sandbox"):
            assert part in message, message
    assert S.choose("none").kind == "none"
    assert "WITHOUT A SANDBOX" in capsys.readouterr().err
    # the command line: the default refuses, --no-sandbox passes "none" on (grade itself is replaced here)
    import assignments as A
    modes = []
    monkeypatch.setattr(A, "grade", lambda *a, sandbox, **k: modes.append(sandbox) or S.choose(sandbox))
    with pytest.raises(SystemExit, match="(?s)grade: no sandbox: bubblewrap .* --no-sandbox"):
        A.main(["grade", str(tmp_path)])
    A.main(["grade", str(tmp_path), "--no-sandbox"])
    assert modes == ["bwrap", "none"]


def test_data_folder_through_a_link_reaches_the_sandbox(tmp_path, monkeypatch):
    data = tmp_path / "store"
    data.mkdir()
    (tmp_path / "link").symlink_to(data)
    monkeypatch.setenv("TMLIB_DATA_DIR", str(tmp_path / "link"))
    assert S.Sandbox("bwrap", expose=(str(tmp_path / "link"),))._env("/lib")["TMLIB_DATA_DIR"] == str(data)
    assert "TMLIB_DATA_DIR" not in S.Sandbox("bwrap", expose=())._env("/lib")  # not exposed: not passed on


def test_long_chapters_are_graded_in_smoke_mode_unless_the_grader_says_otherwise(tmp_path, monkeypatch):
    """Chapters 9, 11, 13 and 14 train or load chapter 9's model, past the sandbox's 300 s: a plain `make grade`
    grades them in smoke mode, in the sandbox and in the reference alike; TMLIB_SMOKE, when set, wins."""
    import assignments as A

    quick = {p.stem[:2] for p in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
             if A.graded_quick(nbformat.read(p, as_version=4))}
    assert quick == {"09", "11", "13", "14"}
    monkeypatch.delenv("TMLIB_SMOKE", raising=False)
    long, short = _spec("09", "09_a"), _spec()
    long.smoke = True
    long.reference = ["from tmlib.utils import smoke_mode\nquick = smoke_mode()"]
    long.save(tmp_path / "spec.json")
    assert P.AssignmentSpec.load(tmp_path / "spec.json").smoke and not short.smoke
    assert P.mode_env(long) == {"TMLIB_SMOKE": "1"} and P.mode_env(short) == {}
    assert S.Sandbox("bwrap")._env("/lib", P.mode_env(long))["TMLIB_SMOKE"] == "1"
    assert "TMLIB_SMOKE" not in S.Sandbox("bwrap")._env("/lib", P.mode_env(short))
    _, env = S.Sandbox("none").command(tmp_path / "in", grading.Limits(), str(tmp_path), mode=P.mode_env(long))
    assert env["TMLIB_SMOKE"] == "1"
    assert J.reference_namespace(long)["quick"] is True and "TMLIB_SMOKE" not in os.environ  # restored after
    monkeypatch.setenv("TMLIB_SMOKE", "0")  # the instructor's choice: full runs (with a longer --timeout)
    assert P.mode_env(long) == {"TMLIB_SMOKE": "0"}
    assert J.reference_namespace(long)["quick"] is False


@pytest.mark.skipif(os.geteuid() != 0, reason="user ids of their own need root (without root: the grader's user id)")
def test_each_submission_gets_a_user_id_of_its_own():
    from grading import limits as L

    a, b = L.reserve_uid(), L.reserve_uid()
    try:
        assert a.uid != b.uid and a.uid >= L.UID_BASE and b.uid >= L.UID_BASE
    finally:
        a.release()
        b.release()


def test_cgroup_support_is_probed_and_can_be_turned_off(monkeypatch):
    from grading import limits as L

    monkeypatch.setattr(L, "_SUPPORT", {})
    monkeypatch.setenv("TM_GRADE_CGROUP", "0")
    assert L.cgroup_support() == ("none", "cgroups turned off (TM_GRADE_CGROUP=0)")
    assert L.new_cgroup(2**30, 16) is None
    monkeypatch.setattr(L, "_SUPPORT", {})
    monkeypatch.delenv("TM_GRADE_CGROUP")
    kind, where = L.cgroup_support()
    group = L.new_cgroup(2**30, 16)
    assert (group is None) == (kind == "none"), (kind, where)
    if group is not None:
        assert group.pids() == [] and group.oom_kills() == 0
        group.remove()
        assert not group.memory.exists()


def test_the_watchdog_kills_past_the_limit():
    from grading import limits as L

    killed = []
    watch = L.MemoryWatch(10 * 2**20, lambda: [os.getpid()], lambda: killed.append(True))  # this process: > 10 MB
    watch._sample()
    assert watch.exceeded and killed == [True] and watch.peak > 10 * 2**20


def test_default_jobs_follow_cpus_and_memory():
    from grading import pool

    assert 1 <= pool.default_jobs(4096) <= (os.cpu_count() or 1)
    assert pool.default_jobs(10**9) == 1  # no machine holds two submissions of a petabyte
