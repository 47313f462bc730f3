"""The shape every chapter shares, read from the notebooks' markdown (no execution):

* "You will learn" near the top, a "Summary", exercises, and a link to the page that follows it in `_toc.yml`;
* no talk of the course's machinery in the prose a student reads (the same rule as the book's pages,
  `tests/test_pages.py`), except the one switch a student uses on purpose: ``TMLIB_SMOKE=1`` (a quick run), and
  where a chapter tells a reader how to point it at their own run (``TMLIB_RUN_DIR``);
* figures are numbered by chapter: every figure a chapter draws or includes is titled "Figure N.M: ..." with N its
  chapter's number.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import yaml

from test_pages import MACHINERY
from test_site import BUILDS as SITES

ROOT = Path(__file__).resolve().parent.parent


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc["parts"]:
        files += [c["file"] for c in part["chapters"]]
    return files


TOC = _toc_files()
CHAPTERS = [f for f in TOC if f.startswith("notebooks/")]


def _labels(rel: str) -> list[str]:
    """The MyST labels ``(name)=`` defined on a page of the book (a notebook's markdown or a .md page)."""
    path = ROOT / f"{rel}.ipynb"
    text = _markdown(rel) if path.exists() else (ROOT / f"{rel}.md").read_text()
    return re.findall(r"^\(([\w-]+)\)=\s*$", text, re.M)


def _markdown(rel: str) -> str:
    nb = nbformat.read(ROOT / f"{rel}.ipynb", as_version=4)
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def test_every_numbered_notebook_is_a_chapter_of_the_book():
    on_disk = sorted(f"notebooks/{p.stem}" for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(CHAPTERS) == on_disk


@pytest.mark.parametrize("rel", CHAPTERS)
def test_chapter_has_goals_summary_exercises_and_next_link(rel):
    text = _markdown(rel)
    missing = [what for what, pattern in [
        ("'You will learn'", r"You will learn"),
        ("a Summary heading", r"^#+ .*Summary", ),
        ("exercises", r"^#+ .*Exercises|```\{exercise\}|:label: ex-"),
    ] if not re.search(pattern, text, re.M)]
    nxt = TOC[TOC.index(rel) + 1] if TOC.index(rel) + 1 < len(TOC) else None
    if nxt is not None:
        name = nxt.split("/")[-1]
        doc = r"\{doc\}`(?:[^`<]*<)?(?:[^`<>]*/)?" + re.escape(name) + r">?`"  # {doc}`name`, {doc}`text <../x/name>`
        labels = _labels(nxt)  # or {ref} to a label on the next page
        ref = r"\{ref\}`(?:[^`<]*<)?(?:" + "|".join(map(re.escape, labels)) + r")>?`" if labels else r"(?!)"
        if not re.search(doc, text) and not re.search(ref, text):
            missing.append(f"a link to the next page ({nxt})")
    assert not missing, f"{rel} lacks {', '.join(missing)}"


ALLOWED = re.compile(r"TMLIB_SMOKE=1|TMLIB_SMOKE|TMLIB_RUN_DIR|TMLIB_DATA_DIR")


@pytest.mark.parametrize("rel", CHAPTERS)
def test_chapter_prose_does_not_talk_about_the_machinery(rel):
    text = _markdown(rel)
    text = re.sub(r"```\{raw\} html.*?```", "", text, flags=re.S)  # generated widget HTML
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code: identifiers and commands a student types
    text = ALLOWED.sub("", text)
    text = re.sub(r"(?<=\d)[ \u00a0\u202f](?=\d{3}\b)", "", text)  # 100 000 is a number, not a seed's name
    hits = sorted({m.group(0) for m in MACHINERY.finditer(text)})
    assert not hits, f"{rel} talks about the course's machinery: {hits}"


@pytest.mark.parametrize("rel", CHAPTERS)
def test_figures_are_numbered_by_chapter(rel):
    number = int(rel.split("/")[-1][:2])
    nb = nbformat.read(ROOT / f"{rel}.ipynb", as_version=4)
    # the titles a chapter draws (code cells) and the captions of its MyST figures
    titles = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    captions = "\n".join(m.group(0) for c in nb.cells if c.cell_type == "markdown"
                         for m in re.finditer(r"```\{figure\}.*?```", c.source, re.S))
    wrong = sorted({m.group(0) for m in re.finditer(r"Figure (\d+)\.\d+:", titles + "\n" + captions)
                    if int(m.group(1)) != number})
    assert not wrong, f"{rel} names figures of another chapter: {wrong}"


NOT_FOR_STUDENTS = ("book/instructors", "book/measurements", "book/measurements_record")  # the instructors' page,
# the methods appendix and its record of how the stored figures were made


@pytest.mark.skipif(not SITES, reason="no built site (run `make book` or `make site-strict`)")
@pytest.mark.parametrize("site", SITES, ids=lambda p: str(p.relative_to(ROOT)))
def test_built_student_pages_do_not_talk_about_the_machinery(site):
    """The rendered prose of every page a student reads: the text of `<main>` without code (listings, inline
    code a student types) and without cell outputs, searched with the same words as the sources."""
    from bs4 import BeautifulSoup

    checked, found = 0, {}
    for rel in _toc_files():
        if rel in NOT_FOR_STUDENTS:
            continue
        main = BeautifulSoup((site / f"{rel}.html").read_text(errors="replace"), "html.parser").find("main")
        for tag in main.find_all(["pre", "code", "script", "style"]):
            tag.decompose()
        for tag in main.select(".cell_output"):
            tag.decompose()
        text = re.sub(r"(?<=\d)[ \u00a0\u202f](?=\d{3}\b)", "", main.get_text(" "))  # 100 000 is a number
        hits = sorted({m.group(0) for m in MACHINERY.finditer(text)})
        if hits:
            found[rel] = hits
        checked += 1
    assert checked >= 20, f"only {checked} pages found in {site}"
    assert not found, f"pages that talk about the course's machinery: {found}"
