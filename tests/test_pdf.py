"""The PDF edition: `make pdf` (Jupyter Book's LaTeX builder, XeLaTeX, from the committed outputs) builds it, and the
PDF is read back with poppler's pdftotext:

* its page count is that of a book of this size, and the build's time, size and pages go to `_build/pdf/report.json`;
* its table of contents lists every page of `_toc.yml` by its title, in order;
* no page shows raw markup (`{ref}`, `{cite}`, a code fence, `$$`, `\\begin`, `:label:`, ...) or an object's repr
  where a browser would show a widget, and XeLaTeX reported no missing character;
* what only works in a browser has its static stand-in (_ext/latex_edition.py): every self-check question, every
  bertviz view and the translator.

`make test` runs this file as its last step (`make pdf-check`); `make unit` leaves it out. Without XeLaTeX,
rsvg-convert or pdftotext the build tests skip and say what to install; with ``TM_REQUIRE_PDF=1`` (`.ci/run`) they
fail instead. ``TM_PDF`` names an existing PDF to check instead of building one (its LaTeX log beside it).
The stand-ins themselves are tested without TeX, on the quiz widget's own HTML.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
LATEX = ROOT / "_build" / "pdf" / "_build" / "latex"
PDF = Path(os.environ.get("TM_PDF", LATEX / "attention-executable.pdf"))
REQUIRED = os.environ.get("TM_REQUIRE_PDF", "") not in ("", "0")
TOOLS = {"xelatex": "texlive-xetex", "latexmk": "latexmk", "rsvg-convert": "librsvg2-bin", "pdftotext": "poppler-utils"}
INSTALL = ("sudo apt-get install --no-install-recommends latexmk texlive-latex-recommended texlive-latex-extra "
           "texlive-fonts-recommended texlive-xetex fonts-freefont-otf fonts-dejavu-core fonts-wqy-microhei "
           "librsvg2-bin poppler-utils")
#: Markup that must never reach a page: MyST roles and fences, TeX that was not typeset, directive options.
RAW = ["{ref}", "{cite}", "{doc}", "{numref}", "{eq}", "{glue", "{exercise}", "{solution", "```", "$$", "\\begin{",
       ":label:", ":class: dropdown", "(notation)=", "{{", "\\text{"]
#: What a widget's text form looks like when no stand-in replaced it.
REPR = re.compile(r"<IPython\.core\.display\.\w+ object>|<[\w.]+ (object )?at 0x[0-9a-f]+>|Quiz '[\w-]+':")

sys.path.insert(0, str(ROOT / "_ext"))
import latex_edition  # noqa: E402


# ------------------------------------------------------------------ the stand-ins, without TeX


def test_quiz_stand_in_keeps_the_question_and_options_but_not_the_answer():
    from tmlib.course import quiz

    q = quiz.choice("pdf-test", "Which mask hides the future?", [("causal", True, "yes"), ("padding", False, "no")],
                    "The causal mask is lower-triangular.")
    (box,) = latex_edition.fallback(q.to_html(), "https://example.org/page.html")
    text = box.astext()
    assert "Which mask hides the future?" in text and "causal" in text and "padding" in text
    assert "lower-triangular" not in text, "the explanation (the answer) must stay on the site"
    assert box.next_node(lambda n: n.tagname == "reference")["refuri"] == "https://example.org/page.html"
    n = quiz.numeric("pdf-num", "How many steps?", 49, 0, "Forty-nine.")
    (box,) = latex_edition.fallback(n.to_html(), "")
    assert "How many steps?" in box.astext() and "type a number" in box.astext() and "Forty-nine" not in box.astext()
    both = latex_edition.fallback(q.to_html() + n.to_html(), "")
    assert len(both) == 2  # a block holding several questions (the paper page) gives one box each


def test_other_stand_ins():
    bertviz = latex_edition.fallback('<div id="bertviz-0123"></div><script>draw()</script>', "https://x/p.html")
    assert "attention view" in bertviz[0].astext()
    translator = latex_edition.fallback('<div class="tm-translator"></div>', "")
    assert "translator runs in the browser" in translator[0].astext()
    assert latex_edition.fallback("<p>plain</p>", "") is None
    table = latex_edition.html_table_text("<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>")
    assert table.split() == ["a", "b", "1", "2"]


def test_site_address_comes_from_the_repository():
    class App:
        class config:  # noqa: N801 - stands in for Sphinx's config object
            html_theme_options = {"repository_url": "https://github.com/owner/name"}

    assert latex_edition.site_address(App) == "https://owner.github.io/name/"


# ------------------------------------------------------------------ the built PDF


def _missing(reason: str):
    if REQUIRED:
        pytest.fail(f"{reason} (TM_REQUIRE_PDF is set, so this fails instead of skipping)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def pdf() -> dict:
    """The PDF's text, page by page, and its LaTeX log; builds it with `make pdf` unless TM_PDF is given."""
    tools = [t for t in (["pdftotext", "pdfinfo"] if "TM_PDF" in os.environ else TOOLS) if not shutil.which(t)]
    if tools:
        _missing(f"{', '.join(tools)} not found: install TeX and poppler with `{INSTALL}` to build the PDF")
    seconds = None
    if "TM_PDF" not in os.environ:
        start = time.perf_counter()
        done = subprocess.run(["make", "pdf"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
        seconds = time.perf_counter() - start
        assert done.returncode == 0, f"make pdf failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert PDF.is_file(), f"no PDF at {PDF}"
    text = subprocess.run(["pdftotext", "-layout", str(PDF), "-"], capture_output=True, text=True, check=True).stdout
    info = subprocess.run(["pdfinfo", str(PDF)], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    log = PDF.with_suffix(".log")
    report = {"pdf": str(PDF), "pages": pages, "bytes": PDF.stat().st_size, "build_seconds": seconds}
    if "TM_PDF" not in os.environ:
        (ROOT / "_build" / "pdf" / "report.json").write_text(json.dumps(report, indent=1))
    print(f"\nPDF: {pages} pages, {PDF.stat().st_size / 1e6:.2f} MB"
          + (f", built in {seconds:.0f} s" if seconds else ""))
    return {"pages": text.split("\f"), "count": pages, "log": log.read_text(errors="replace") if log.is_file() else ""}


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = []
    for part in toc.get("parts", []):
        files += [c["file"] for c in part.get("chapters", [])]
    return files


def _title(rel: str) -> str:
    """A page's H1: a book page's first '# ' line, a notebook's first markdown cell's."""
    for suffix in (".md", ".ipynb"):
        path = ROOT / f"{rel}{suffix}"
        if path.is_file():
            text = path.read_text()
            if suffix == ".ipynb":
                text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
            return re.search(r"^# (.+)$", text, re.M).group(1).strip()
    raise FileNotFoundError(rel)


def _norm(s: str) -> str:
    s = s.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"').replace("`", "")
    s = re.sub(r"\*+", "", s)
    return re.sub(r"\s+", " ", s).strip()


def test_page_count(pdf):
    assert 150 <= pdf["count"] <= 600, f"{pdf['count']} pages: far from the book's size (about 300)"


def test_table_of_contents_lists_every_page_in_order(pdf):
    contents = _norm(" ".join(pdf["pages"][:14]))
    assert "Contents" in contents or "CONTENTS" in contents
    position = 0
    for rel in _toc_files():
        title = _norm(_title(rel))
        found = contents.find(title, position)
        assert found >= 0, f"the table of contents lacks {title!r} ({rel}), or lists it out of order"
        position = found + len(title)


def test_no_page_shows_raw_markup_or_a_widget_repr(pdf):
    problems = []
    for number, page in enumerate(pdf["pages"], start=1):
        problems += [f"page {number}: {token!r}" for token in RAW if token in page]
        problems += [f"page {number}: {m.group(0)!r}" for m in REPR.finditer(page)]
    assert not problems, "\n".join(problems[:40])


def test_no_missing_characters(pdf):
    missing = sorted(set(re.findall(r"Missing character: There is no (.) \((U\+[0-9A-F]+)\) in font ([^/!\s]+)",
                                    pdf["log"])))
    assert not missing, f"characters the PDF's fonts lack: {missing}"


def _widgets() -> tuple[int, int]:
    """(self-check questions, bertviz views) on the pages, counted in the notebooks' outputs and the pages' HTML."""
    quizzes = views = 0
    for rel in _toc_files():
        for suffix in (".md", ".ipynb"):
            path = ROOT / f"{rel}{suffix}"
            if not path.is_file():
                continue
            text = path.read_text()
            if suffix == ".ipynb":
                html = [o.get("data", {}).get("text/html", "") for c in json.loads(text)["cells"]
                        for o in c.get("outputs", [])]
                text = "\n".join("".join(h) for h in html)
            quizzes += len(re.findall(r'class=\\?"tm-quiz\\?" id=', text))
            views += len(set(re.findall(r'<div id=\\?"(bertviz-[0-9a-f]+)', text)))
    return quizzes, views


def test_browser_only_parts_have_their_stand_ins(pdf):
    text = _norm(" ".join(pdf["pages"]))
    quizzes, views = _widgets()
    assert quizzes >= 5 and text.count("Answer it on the course site") == quizzes, (quizzes, text.count("Answer it on"))
    assert text.count("An interactive attention view (bertviz) stands here") == views, views
    assert "The translator runs in the browser" in text
