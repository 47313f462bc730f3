"""Where chapters 9, 11 and 14 find the trained run (tmlib.training.locations): the course's checkout whatever the
current folder, ``$TMLIB_RUN_DIR`` first, Colab's Google Drive when the student mounted it, the user data folder for
a tmlib installed outside a checkout; the command line's default ``--out`` is the same folder."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("torch")
from tmlib.training import RUN_DIR_ENV, default_run, locations, runs_root  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv(RUN_DIR_ENV, raising=False)
    monkeypatch.delenv("TMLIB_SMOKE", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)


@pytest.mark.parametrize("where", [".", "notebooks", "student", "tmlib/training", "/"])
def test_the_checkout_s_runs_whatever_the_current_folder(clean_env, monkeypatch, where):
    monkeypatch.chdir(ROOT / where)
    assert locations.repository_root() == ROOT
    assert default_run()[0] == ROOT / "runs" / "multi30k"
    assert default_run(smoke=True)[0] == ROOT / "runs" / "smoke-multi30k"


def test_the_environment_variable_names_the_run(clean_env, monkeypatch, tmp_path):
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "mine"))
    assert default_run()[0] == tmp_path / "mine"
    assert default_run(smoke=True)[0] == ROOT / "runs" / "smoke-multi30k"  # the smoke run keeps its own folder
    assert default_run(root=tmp_path, smoke=True)[0] == tmp_path / "runs" / "smoke-multi30k"


def test_colab_keeps_runs_in_drive_only_when_mounted(clean_env, monkeypatch, tmp_path):
    drive = tmp_path / "MyDrive"
    monkeypatch.setattr(locations, "COLAB_DRIVE", drive)
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert runs_root() == ROOT / "runs"  # Drive not mounted: the default
    drive.mkdir()
    assert runs_root() == drive / "attention-executable" / "runs"
    assert default_run()[0] == drive / "attention-executable" / "runs" / "multi30k"
    monkeypatch.delitem(sys.modules, "google.colab")
    assert runs_root() == ROOT / "runs"  # a folder of that name outside Colab means nothing


def test_installed_outside_a_checkout_uses_the_user_data_folder(tmp_path):
    """A copy of the package with no checkout around it (as pip installs it into site-packages), imported from
    another folder: its runs go to the user data folder (XDG_DATA_HOME on Linux)."""
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "tmlib", site / "tmlib", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in (RUN_DIR_ENV, "TMLIB_SMOKE")}
    env.update(PYTHONPATH=str(site), XDG_DATA_HOME=str(tmp_path / "data"), HOME=str(tmp_path / "home"))
    code = ("import tmlib, tmlib.training as T; assert tmlib.__file__.startswith(%r), tmlib.__file__; "
            "print(T.repository_root()); print(T.default_run()[0])" % str(site))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    expected = (Path(tmp_path / "data" / "tmlib" / "runs" / "multi30k") if sys.platform.startswith("linux")
                else Path(__import__("platformdirs").user_data_dir("tmlib")) / "runs" / "multi30k")
    assert out == ["None", str(expected)]


def test_command_line_trains_where_the_chapters_load(clean_env, monkeypatch, tmp_path):
    from tmlib.train import build_parser, parse_config

    monkeypatch.chdir(ROOT / "student")
    assert build_parser().parse_args([]).out == str(ROOT / "runs" / "multi30k")
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    assert parse_config(["--max-steps", "1"])[1].out == str(tmp_path / "run") == str(default_run()[0])


def test_import_stops_with_one_line_on_an_old_python():
    code = "import sys; sys.version_info = (3, 9, 18, 'final', 0); import tmlib"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        "ImportError: tmlib needs Python 3.10 or newer (the course's environment is made for Python 3.11); this is "
        "Python 3.9: install the course with Python 3.11 (README: Run it locally)")
