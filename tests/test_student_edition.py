"""The student edition (`make book-student`): the site without solutions.

The first test strips every executed notebook of the site (the chapters and the pages of `book/`) as the edition's
build does, and needs no build. The second reads the built edition; `make student-edition` (part of `make test`)
builds it first, and elsewhere the test skips, saying so.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import student_edition  # noqa: E402

NOTEBOOKS = sorted([*(ROOT / "notebooks").glob("[0-9]*.ipynb"), *(ROOT / "book").glob("*.ipynb")])
BUILT = ROOT / "_build" / "student" / "_build" / "html"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_stripping_leaves_no_solution_markup(path, tmp_path):
    copy = tmp_path / path.name
    shutil.copy2(path, copy)
    student_edition.strip_notebook(copy)
    text = copy.read_text(encoding="utf-8")
    for marker in ("{solution-start}", "{solution-end}", "{solution}"):
        assert marker not in text, f"{path.name}: {marker} is left in the student edition's copy"


def test_the_built_student_edition_shows_no_solution():
    if not (BUILT / "index.html").exists():
        pytest.skip("the student edition is not built here; `make student-edition` builds it and runs this test")
    pages = sorted([*(BUILT / "notebooks").glob("*.html"), *(BUILT / "book").glob("*.html")])
    assert len(pages) >= len(NOTEBOOKS)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert 'class="solution' not in text, f"{page.relative_to(BUILT)} shows a solution"
    exercises = sum(p.read_text(encoding="utf-8").count('class="exercise') for p in pages)
    assert exercises > 50, f"only {exercises} exercises on the student edition's pages"
