"""The student edition (`make book-student`): the site without solutions.

The first tests strip every executed notebook of the site (the chapters and the pages of `book/`) as the edition's
build does, and write the edition's sources without the instructors' page (its marking scheme holds the model
answers); they need no build. The last reads the built edition; `make student-edition` (part of `make test`)
builds it first, and elsewhere the test skips, saying so.
"""
from __future__ import annotations

import json
import re
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


def test_sources_leave_out_the_instructors_page(tmp_path):
    """By default the edition's sources lack the instructors' page, its entry in the table of contents and every link
    to it; the welcome page's course map lists the other appendices. `--with-instructors` keeps the page."""
    out = tmp_path / "src"
    out.mkdir()
    student_edition.write_sources(out)
    assert not (out / "book" / "instructors.md").exists()
    toc = (out / "_toc.yml").read_text(encoding="utf-8")
    assert "instructors" not in toc
    entries = lambda text: re.findall(r"file: (\S+)", text)  # noqa: E731
    assert entries(toc) == [e for e in entries((ROOT / "_toc.yml").read_text()) if e != "book/instructors"]
    linking = []
    for path in sorted([*out.rglob("*.md"), *out.rglob("*.ipynb")]):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
        if student_edition.links_to_instructors(text):
            linking.append(str(path.relative_to(out)))
    assert not linking, f"pages of the student edition that link the instructors' page: {linking}"
    intro = (out / "book" / "intro.md").read_text(encoding="utf-8")
    assert "instructor" not in intro.lower(), "the welcome page still mentions the instructors' page"
    assert "{doc}`measurements`" in intro and "{doc}`installation`" in intro

    kept = tmp_path / "kept"
    kept.mkdir()
    student_edition.write_sources(kept, with_instructors=True)
    assert (kept / "book" / "instructors.md").exists() and "book/instructors" in (kept / "_toc.yml").read_text()
    assert (kept / "book" / "intro.md").read_text(encoding="utf-8") == (ROOT / "book" / "intro.md").read_text(
        encoding="utf-8")


def test_links_to_the_instructors_page_become_text():
    text = ("See {doc}`For instructors <instructors>`, {ref}`the marking <instructors-marking>`, "
            "{ref}`instructors-grading`, [the page](https://example.org/book/instructors.html#x), "
            "[a part](#instructors-commands), [the source](../book/instructors.md), {doc}`installation`, "
            "[setup](installation.md) and {ref}`intro-setup`.")
    assert len(student_edition.links_to_instructors(text)) == 6
    plain = student_edition.unlink_instructors(text)
    assert plain == ("See For instructors, the marking, the instructors' page, the page, a part, the source, "
                     "{doc}`installation`, [setup](installation.md) and {ref}`intro-setup`.")
    assert student_edition.links_to_instructors(plain) == []
    assert student_edition.links_to_instructors('<a href="../book/instructors.html">') != []  # left: stops the build


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
    # the instructors' page, with its model answers of the questions answered in words, is left out, unlinked
    assert not (BUILT / "book" / "instructors.html").exists(), "the student edition holds the instructors' page"
    linking = [str(p.relative_to(BUILT)) for p in BUILT.rglob("*.html") if "instructors.html" in p.read_text("utf-8")]
    assert not linking, f"pages of the student edition that link the instructors' page: {linking}"
