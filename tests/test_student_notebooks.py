"""The notebooks behind the site's download and Colab buttons (`student/`, made by tools/student_notebooks.py):
up to date with the chapters and the notebook pages of book/ (`book/distributed.ipynb`), free of solutions, hidden
tests, quiz answers, site markup and execution clutter, with links that lead to pages of the book; and the site
extensions that number exercises per chapter and point the buttons at these notebooks."""
from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
import assignments  # noqa: E402
import student_notebooks as sn  # noqa: E402
from test_chapters import _toc_files  # noqa: E402
from test_site import BUILDS  # noqa: E402

CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
PAGES = [ROOT / page for page in sn.PAGES]  # pages of book/ with exercises and solutions: a student copy each
SOURCES = CHAPTERS + PAGES
BOOK = sn.Book()


def _student(path: Path):
    return nbformat.read(ROOT / "student" / path.name, as_version=4)


def _markdown(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def _code(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def test_one_student_notebook_per_chapter_and_page():
    assert PAGES and all(p.is_file() for p in PAGES)
    assert sn.sources() == SOURCES
    assert sorted(p.name for p in (ROOT / "student").glob("*.ipynb")) == sorted(p.name for p in SOURCES)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_student_notebook_is_up_to_date(path):
    committed = (ROOT / "student" / path.name).read_text(encoding="utf-8")
    assert committed == sn.render(sn.make(path, BOOK)), \
        f"student/{path.name} is stale: run `make student-notebooks` and commit it"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_no_site_markup_or_execution_clutter(path):
    nb = _student(path)
    text = _markdown(nb)
    assert not re.search(r"^\s*(`{3,}|:{3,})\{[a-z-]+\}", text, re.M), "a MyST directive is left"
    assert not re.search(r"\{[a-z]+(:[a-z]+)?\}`", text), "a MyST role ({cite}, {ref}, {doc}...) is left"
    assert not re.search(r"^\([^)\s]+\)=\s*$", text, re.M), "a MyST label is left"
    assert not re.search(r"\]\((\.\./|[^):]+\.(svg|png|md|ipynb))", text), "a relative link that Colab cannot follow"
    for cell in nb.cells:
        mark = cell.metadata.get("assignment", {})
        if mark:  # a stub cell says which exercise and which stub (for the grader), never the solution
            assert set(mark) == {"exercise", "stub"} and isinstance(mark["stub"], int), mark
        assert set(cell.metadata) <= {"assignment"}, f"cell {cell.id} keeps metadata {dict(cell.metadata)}"
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {cell.id} has outputs"
    assert set(nb.metadata) <= {"kernelspec", "language_info", assignments.META}
    assert "google.colab" in nb.cells[2].source, "the Colab install cell comes right after the title and the note"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_exercises_are_stubs_with_public_checks_and_no_hidden_tests(path):
    source, nb = nbformat.read(path, as_version=4), _student(path)
    code = _code(nb)
    _, exercises = assignments.transform(source, path=str(path))
    given = {c.source.strip() for c in source.cells  # a cell the student is given as it is: its stub is its source
             if c.metadata.get("assignment", {}).get("stub", "").strip() == c.source.strip()}
    for (label, _k), solution in assignments.reference_solutions(source).items():
        if solution.strip() not in given:
            assert solution.strip() not in code, f"{label}: the solution is in the student notebook"
    stubs = [c.metadata["assignment"]["stub"] for c in source.cells if "stub" in c.metadata.get("assignment", {})]
    for stub in stubs:
        assert stub.rstrip("\n") in code
    for ex in exercises.values():
        for check in ex.checks:
            present = check.code.strip() in code
            assert present == (check.kind == "public"), f"{ex.label}: {check.kind} check present={present}"
    meta = nb.metadata.get(assignments.META)
    if path in PAGES:  # a page's checks are the student's own: no hidden tests, not graded
        assert meta is None and all(c.kind == "public" for ex in exercises.values() for c in ex.checks)
    elif exercises:
        assert meta["notebook"] == path.stem and meta["chapter"] == path.name[:2]
        assert set(meta["exercises"]) == {assignments.qname(e.label) for e in exercises.values()}
    headings = re.findall(r"^### Exercise (\S+?)(?::|$)", _markdown(nb), re.M)
    n_exercises = sum(sn.directive_count(c.source, "exercise") for c in source.cells if c.cell_type == "markdown")
    chapter = sn.EXERCISE_NUMBERS.page_prefix(BOOK.docname(path))  # "3" for chapter 3, "D" for book/distributed
    assert headings == [f"{chapter}.{k}" for k in range(1, n_exercises + 1)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_quizzes_keep_their_question_and_lose_their_answer(path):
    source, nb = nbformat.read(path, as_version=4), _student(path)
    assert not re.search(r"\b(choice|numeric)\(", _code(nb)), "a quiz call (with its answers) is left"
    for cell in source.cells:
        if cell.cell_type == "code" and re.search(r"\b(choice|numeric)\(", cell.source):
            question = re.search(r'\(\s*"[^"]+",\s*"([^"]{20,}?)"', cell.source)
            assert question and question.group(1)[:20] in _markdown(nb), "the quiz's question is missing"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_links_lead_to_pages_of_the_book(path):
    pages = set(_toc_files())
    for url in re.findall(r"\]\((https?://[^)\s]+)\)", _markdown(_student(path))):
        if not url.startswith(BOOK.site):
            continue
        page, _, anchor = url[len(BOOK.site):].partition("#")
        assert page.endswith(".html") and page[:-5] in pages, f"{url}: not a page of the book"
        if anchor:
            assert anchor in BOOK.labels, f"{url}: no label {anchor!r}"
            assert BOOK.labels[anchor][0] == page[:-5], f"{url}: the label lives on another page"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_figures_are_embedded_images(path):
    for mime, data in re.findall(r"\(data:(image/[a-z+]+);base64,([A-Za-z0-9+/=]+)\)", _markdown(_student(path))):
        raw = base64.b64decode(data, validate=True)
        if mime == "image/svg+xml":
            assert ET.fromstring(raw).tag.endswith("svg")


def test_site_markup_is_converted():
    convert = sn.Converter(BOOK, "notebooks/04_positional_encoding")
    out = convert.cell("(x-label)=\n## Title\n\nSee {cite}`vaswani2017attention` and {cite:t}`vaswani2017attention`, "
                       "{doc}`the errata <../book/errata>`, {ref}`pe-pseudocode-bug`.\n\n"
                       "````{dropdown} More\nText with\n```python\ncode\n```\n````\n\n"
                       "```{admonition} Note\n:class: tip\nA tip.\n```", "test")
    assert "(x-label)=" not in out and out.startswith("## Title")
    assert "(Vaswani et al., 2017)" in out and "Vaswani et al. (2017)" in out
    assert f"[the errata]({BOOK.site}book/errata.html)" in out
    assert "*Two ways to write it, one way to get it wrong*" in out  # this notebook's own section: no link
    assert BOOK.page_url("notebooks/04_positional_encoding") not in out
    assert "<details>\n<summary><b>More</b></summary>" in out and "```python\ncode\n```" in out
    assert "> **Note**\n>\n> A tip." in out


@pytest.mark.parametrize("markup, message", [
    ("```{margin}\ntext\n```", "margin"),
    ("{term}`attention`", "term"),
    ("{ref}`no-such-label`", "unknown label"),
    ("{doc}`no_such_page`", "unknown page"),
    ("{cite}`nobody2099`", "not in book/references.bib"),
    ("```{admonition} Open\ntext", "no closing"),
])
def test_unknown_or_dangling_markup_is_an_error(markup, message):
    with pytest.raises(ValueError, match=message):
        sn.Converter(BOOK, "notebooks/01_attention_by_hand").cell(markup, "test")


def test_quiz_markdown_has_no_answer():
    src = 'choice("q-name", "Which one?", [("Yes", True, "feedback-yes"), ("No", False)], "explanation-why")'
    out = sn.quiz_markdown(src, "test")
    assert "Which one?" in out and "- Yes" in out and "- No" in out
    assert "True" not in out and "feedback-yes" not in out and "explanation-why" not in out
    assert sn.quiz_markdown("x = 1", "test") is None


@pytest.mark.parametrize("src, names", [
    ('choice("q", f"Which {n}?", [("Yes", True), ("No", False)], "why")',
     'question of choice(...) is `f\'Which {n}?\'`'),
    ('numeric("q", QUESTION, 2.0, 0.1, "why")', "question of numeric(...) is `QUESTION`"),
    ('choice("q", "Which?", OPTIONS, "why")', "options of choice(...) are `OPTIONS`"),
    ('choice("q", "Which?", [(label, True), ("No", False)], "why")', "text of an option of choice(...) is `label`"),
    ('choice("q", "Which?", [("Yes", True), ("No", False)], "why", title=name.title())', "title"),
    ('numeric("q", answer=2.0, tolerance=0.1, explanation="why")', "numeric(...) has no question"),
])
def test_quiz_markdown_names_the_cell_when_a_text_is_not_a_literal(src, names):
    with pytest.raises(ValueError) as err:
        sn.quiz_markdown(src, "01_x.ipynb, cell 7")
    text = str(err.value)
    assert text.startswith("01_x.ipynb, cell 7 (the cell that starts ") and repr(src[:60]) in text, text
    assert names in text, text


def test_quiz_markdown_reads_only_the_texts_so_the_answer_may_be_computed():
    src = 'numeric("q", "How many?", 2 * d_model, 0.5, f"because {d_model}", title="Count")'
    assert sn.quiz_markdown(src, "test").startswith("**Count.** How many?")


def test_author_names_with_latex_accents():
    assert sn.latex_to_text("Doll{\\'a}r") == "Dollár" and sn.latex_to_text("{\\L}ukasz") == "Łukasz"
    with pytest.raises(ValueError):
        sn.latex_to_text("\\textsc{Name}")


def test_citations_of_the_same_authors_and_year_keep_their_letters():
    # as the book's references: LLaMA is 2023a, Llama 2 is 2023b
    assert BOOK.citations["touvron2023llama"] == ("Touvron et al.", "2023a")
    assert BOOK.citations["touvron2023llama2"] == ("Touvron et al.", "2023b")
    assert BOOK.citations["vaswani2017attention"] == ("Vaswani et al.", "2017")


# --------------------------------------------------------------------------------------------- the site extensions
def test_exercises_are_numbered_per_chapter():
    numbers = sn.EXERCISE_NUMBERS  # the site's _ext/exercise_numbers.py, as the tool loads it
    toc = {"notebooks/01_a": {"exercise": {"e1": (1,), "e2": (2,)}, "figure": {"f": (1,)}},
           "notebooks/03_c": {"exercise": {"x": (4,), "w": (3,)}},
           "book/distributed": {"exercise": {"d": (9,)}},
           "book/paper": {"figure": {"g": (2,)}}}
    changed = numbers.renumber(toc)
    assert toc["notebooks/01_a"]["exercise"] == {"e1": ("1", 1), "e2": ("1", 2)}
    assert toc["notebooks/03_c"]["exercise"] == {"w": ("3", 1), "x": ("3", 2)}
    assert toc["book/distributed"]["exercise"] == {"d": ("D", 1)}
    assert toc["notebooks/01_a"]["figure"] == {"f": (1,)}, "figures keep Sphinx's numbers"
    assert sorted(changed) == ["book/distributed", "notebooks/01_a", "notebooks/03_c"]
    assert numbers.renumber(toc) == [], "idempotent"
    assert numbers.page_prefix("notebooks/13_modern_transformer") == "13"


def test_download_and_colab_buttons_point_at_the_student_notebook():
    import student_buttons as site
    name = "01_attention_by_hand.ipynb"
    colab = f"https://colab.research.google.com/github/o/r/blob/main/notebooks/{name}"
    buttons = [{"type": "group", "label": "launch-buttons", "buttons": [{"text": "Colab", "url": colab},
                                                                         {"text": "Binder", "url": "b"}]},
               {"type": "group", "label": "download-buttons", "buttons": [
                   {"label": "download-source-button", "url": f"../_sources/notebooks/{name}"},
                   {"label": "download-pdf-button", "url": "../_sources/x.pdf"}]}]
    assert site.point_to_student_notebooks(buttons, name, f"../_static/student/{name}") == 2
    assert buttons[0]["buttons"][0]["url"] == f"https://colab.research.google.com/github/o/r/blob/main/student/{name}"
    assert buttons[0]["buttons"][1]["url"] == "b"
    assert buttons[1]["buttons"][0]["url"] == f"../_static/student/{name}"
    assert buttons[1]["buttons"][1]["url"] == "../_sources/x.pdf"


def _theme_buttons(source: str) -> list:
    """sphinx-book-theme's header buttons of the page whose source is ``source`` (``book/distributed.ipynb``)."""
    return [{"type": "group", "label": "launch-buttons", "buttons": [
                {"text": "Colab", "url": f"https://colab.research.google.com/github/o/r/blob/main/{source}"}]},
            {"type": "group", "label": "download-buttons", "buttons": [
                {"label": "download-source-button", "url": f"../_sources/{source}"}]}]


def test_the_scaling_out_pages_buttons_point_at_its_student_notebook():
    """The scaling-out page (book/distributed.ipynb) holds the solutions of its exercises, like a chapter: its
    download and Colab buttons lead to student/distributed.ipynb. The extension's page hook, run as Sphinx runs it
    on this repository, rewrites the buttons of every chapter and of that page, and leaves a Markdown page's."""
    import student_buttons as site
    name = "distributed.ipynb"
    buttons = _theme_buttons(f"book/{name}")
    assert site.point_to_student_notebooks(buttons, name, f"../_static/student/{name}") == 0, "not a chapter"
    assert site.point_to_student_notebooks(buttons, name, f"../_static/student/{name}", "book") == 2
    assert buttons[0]["buttons"][0]["url"] == f"https://colab.research.google.com/github/o/r/blob/main/student/{name}"
    assert buttons[1]["buttons"][0]["url"] == f"../_static/student/{name}"

    class App:
        srcdir = str(ROOT)

    def hook(pagename: str, source: str) -> list:
        context = {"header_buttons": _theme_buttons(source), "pathto": lambda target, _resource: f"../{target}"}
        site._student_buttons(App(), pagename, "page.html", context, None)
        return [b["buttons"][0]["url"] for b in context["header_buttons"]]

    for path in SOURCES:
        docname = BOOK.docname(path)
        assert hook(docname, f"{docname}.ipynb") == [
            f"https://colab.research.google.com/github/o/r/blob/main/student/{path.name}",
            f"../_static/student/{path.name}"], docname
    assert hook("book/distributed", "book/distributed.ipynb")[0].endswith("/blob/main/student/distributed.ipynb")
    assert hook("book/paper", "book/paper.md") == [  # a Markdown page keeps the theme's buttons
        "https://colab.research.google.com/github/o/r/blob/main/book/paper.md", "../_sources/book/paper.md"]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_the_pages_student_notebook_holds_no_solution(path):
    """A page of book/ with exercises (the scaling-out page) hands out its notebook without the solutions: no line of
    a `{solution}` block, no cell of a gated solution (`solution-start` to `solution-end`) but its public checks;
    each exercise is followed by a cell to answer in, or by the stub of its numbers and their check (and a cell
    for its question in words); the first note names the page and has no grader metadata (only chapters are
    graded)."""
    source, nb = nbformat.read(path, as_version=4), _student(path)
    markdown, code = _markdown(nb), _code(nb)
    solution_lines, solution_code, inside = [], [], False
    for cell in source.cells:
        names = [d.name for d in sn.myst.directives(cell.source, nested=True)] if cell.cell_type == "markdown" else []
        if "solution-end" in names:
            inside = False
        elif inside and "check" in cell.metadata.get("assignment", {}):
            pass  # a public check: the student copy keeps it
        elif inside and cell.cell_type == "code":
            solution_code.append(cell.source.strip())
        elif inside:
            solution_lines += cell.source.splitlines()
        inside = inside or "solution-start" in names
        for d in sn.myst.directives(cell.source, nested=True) if cell.cell_type == "markdown" else []:
            if d.name == "solution":
                solution_lines += d.body.splitlines()
    solution_lines = [line.strip() for line in solution_lines if len(line.strip()) >= 20]
    assert solution_lines and solution_code, "the page has text and code solutions"
    leaked = [line for line in solution_lines if line in markdown or line in code]
    assert not leaked, f"solution text in student/{path.name}: {leaked[:3]}"
    assert not [c for c in solution_code if c in code], f"solution code in student/{path.name}"
    assert not re.search(r"solution-(start|end)|\{solution\}", markdown + code)
    numbers = re.findall(r"^### Exercise (\S+?)(?::|$)", markdown, re.M)
    assert numbers == [f"D.{k}" for k in range(1, len(numbers) + 1)] and len(numbers) == 3
    _, exercises = assignments.transform(source, path=str(path))
    checked = {BOOK.exercise_numbers[label]: ex for label, ex in exercises.items()}
    assert sorted(checked) == ["D.1", "D.2", "D.3"], "the numbers of D.1 to D.3 are checked"
    stubs = [c.metadata["assignment"]["stub"] for c in source.cells if "stub" in c.metadata.get("assignment", {})]
    for number in numbers:
        heading = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                       and re.search(rf"^### Exercise {re.escape(number)}$", c.source, re.M))
        after = nb.cells[heading + 1]
        if number not in checked:
            assert after.source.startswith(f"*Your answer to Exercise {number}"), f"no answer cell for {number}"
            continue
        ex = checked[number]
        assert after.cell_type == "code" and after.source in [s.rstrip("\n") for s in stubs], number
        assert "..." in after.source, f"Exercise {number}: the stub holds `...` to complete"
        check = nb.cells[heading + 2]
        assert [check.source.strip()] == [c.code.strip() for c in ex.checks if c.kind == "public"], number
        if ex.essay:
            assert nb.cells[heading + 3].source.startswith(f"*Your answer to Exercise {number}, in words"), number
    note = nb.cells[1].source
    assert note.startswith(f'*This is the notebook of the page "{BOOK.titles[BOOK.docname(path)]}"'), note
    assert "hand" not in note and assignments.META not in nb.metadata


@pytest.mark.skipif(not BUILDS, reason="no built site (run `make book` or `make site-strict`)")
@pytest.mark.parametrize("html_dir", BUILDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_built_chapter_pages_offer_the_student_notebooks(html_dir):
    for path in SOURCES:  # the chapters and the notebook pages of book/ (the scaling-out page)
        docname = BOOK.docname(path)
        page = (html_dir / f"{docname}.html").read_text(errors="replace")
        assert f'href="../_static/student/{path.name}"' in page, f"{path.stem}: download button"
        assert f"/blob/main/student/{path.name}" in page, f"{path.stem}: Colab button"
        assert f"/{docname}.ipynb" not in page.split("colab.research.google.com", 1)[-1][:300]
        assert (html_dir / "_static" / "student" / path.name).read_text() == \
            (ROOT / "student" / path.name).read_text()
        first = re.search(r"Exercise ([0-9A-Z]+)\.1\b", page)
        if first:
            assert first.group(1) == sn.EXERCISE_NUMBERS.page_prefix(docname), f"{path.stem}: numbered per page"


def test_install_cell_says_what_to_install_outside_colab(monkeypatch):
    import importlib.util

    cell = _student(CHAPTERS[0]).cells[2].source
    code = cell.replace("%pip install", "pass  # %pip install")  # IPython magic: not plain Python
    exec(compile(code, "install cell", "exec"), {})  # tmlib is installed here: nothing happens
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    pinned = r'%pip install "attention-executable.* @ git\+https://github\.com/.+@[0-9a-f]{40}"'
    with pytest.raises(ModuleNotFoundError, match=pinned):
        exec(compile(code, "install cell", "exec"), {})


def test_myst_structure_comes_from_markdown_it():
    """tools/myst.py reads MyST with markdown-it-py: a role in a code span or a code block is not a role, colon
    fences and nested directives are directives, options go through MyST's own option parser."""
    import myst

    text = ("(sec-a)=\n# Title {math}`x`\n\nSee {ref}`sec-a` and `{ref}`not-a-role``.\n\n```python\n{cite}`nope`\n```\n\n"
            ":::{note} Head\n:class: dropdown\nBody {cite}`x`.\n:::\n\n````{admonition} Outer\n```{exercise}\n"
            ":label: ex-00-a\nQ.\n```\n````\n")
    tree = myst.outline(text)
    assert tree.targets == [("sec-a", 0)] and tree.headings == [(1, "Title {math}`x`", 1)]
    assert [(d.name, d.arg, d.options) for d in tree.directives] == [("note", "Head", {"class": "dropdown"}),
                                                                     ("admonition", "Outer", {})]
    assert [d.name for d in myst.directives(text, nested=True)] == ["note", "admonition", "exercise"]
    assert [(r.name, r.content, text[r.start:r.end]) for r in myst.role_spans(text)] == [
        ("math", "x", "{math}`x`"), ("ref", "sec-a", "{ref}`sec-a`")]
    with pytest.raises(ValueError, match="no closing"):
        myst.outline("```{note}\nnever closed\n")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_no_link_to_the_page_with_the_solutions(path):
    """Issue 24: the header linked to the chapter's page "with the solutions"; the notebook links to no page that
    shows this chapter's solutions, and essay questions get a Markdown cell to answer in."""
    nb = _student(path)
    docname = BOOK.docname(path)
    assert BOOK.page_url(docname) not in _markdown(nb) and "solution" not in nb.cells[1].source.lower()
    kinds = sn.exercise_kinds(nbformat.read(path, as_version=4))
    numbers = {BOOK.exercise_numbers[label]: kind for label, kind in kinds.items()}
    for i, cell in enumerate(nb.cells):
        m = re.search(r"^### Exercise (\S+?)(?::|$)", cell.source, re.M) if cell.cell_type == "markdown" else None
        if m and numbers[m[1]] == "text":
            answer = nb.cells[i + 1]
            assert answer.cell_type == "markdown" and answer.source.startswith(f"*Your answer to Exercise {m[1]}")


def test_the_first_note_says_whether_to_complete_or_to_repair():
    """Chapter 10 hands out working code with a bug in it (its `# ...` comments do not count as gaps); chapter 2
    hands out code with `...` to complete."""
    assert sn.has_ellipsis("x = ...\n") and not sn.has_ellipsis("x = 1  # ... a bug here\ns = '...'\n")
    for stem, words in (("10_finding_bugs", "find the bug and fix it"), ("02_multi_head_attention", "`...` to complete")):
        note = _student(ROOT / "notebooks" / f"{stem}.ipynb").cells[1].source
        assert words in note, (stem, note[:200])


def test_questions_in_words_of_checked_exercises_are_graded_by_hand():
    """Chapter 7's exercise 7.4 is checked and also asks a question in words: the gradebook's hand-graded part lists
    it (its Canvas/Moodle column), beside the exercises that have no checks at all, and leaves out checked
    exercises without a question in words."""
    path = next(p for p in CHAPTERS if p.name.startswith("07_"))
    _, exercises = assignments.transform(nbformat.read(path, as_version=4), path=str(path))
    assert exercises["ex-07-masks"].essay
    exercises["ex-07-checked-only"] = assignments.Exercise("ex-07-checked-only", stubs=1)
    titles = {label: f"Exercise 7.{k}" for k, label in enumerate(
        ["ex-07-checked-only", "ex-07-masks", "ex-07-text-only"], start=1)}
    manual = assignments.graded_by_hand(titles, exercises)
    assert manual == [{"label": "ex-07-masks", "title": "Exercise 7.2 (in words)"},
                      {"label": "ex-07-text-only", "title": "Exercise 7.3"}]


# Chapters whose quick test mode is written inside cells that a student also runs (`STEPS = 20 if smoke_mode() else
# 400`), not in a cell of its own tagged `smoke-only`: the student edition keeps the mention until the chapter
# moves it into such a cell. The test below fails when one of these no longer needs the exception.
SMOKE_INLINE: set[str] = set()  # chapters whose student notebook still mentions the quick mode: none


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_no_quick_test_mode_in_the_student_notebook(path):
    """The cells tagged `smoke-only` shrink a run for the course's quick test mode (TMLIB_SMOKE=1, CI): the student
    notebook leaves them out, and mentions neither TMLIB_SMOKE nor smoke_mode."""
    source, nb = nbformat.read(path, as_version=4), _student(path)
    code = _code(nb)
    for cell in source.cells:
        if sn.SMOKE_ONLY in cell.metadata.get("tags", []):
            assert cell.source.strip() not in code, f"{path.name}: a cell tagged smoke-only is in the student notebook"
    mentions = re.findall(r"TMLIB_SMOKE|smoke_mode", code + _markdown(nb))
    if path.stem in SMOKE_INLINE:
        assert mentions, f"{path.stem} no longer mentions the quick test mode: remove it from SMOKE_INLINE"
    else:
        assert not mentions, f"student/{path.name} mentions {sorted(set(mentions))}: tag the cell smoke-only"


def test_smoke_only_and_site_only_cells_are_left_out(tmp_path):
    """The mechanism, on a notebook of its own: `make` drops the cells tagged `smoke-only` or `site-only` and keeps
    the others (a code cell tagged `remove-cell` among them)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    cells = [("markdown", "# 99. A chapter", []), ("code", "x = 1", ["hide-cell"]),
             ("code", "from tmlib.utils import smoke_mode\nif smoke_mode():\n    x = 0", ["remove-cell", "smoke-only"]),
             ("code", "print('the page only')", ["site-only", "hide-cell"]), ("code", "y = x + 1", ["remove-cell"])]
    for kind, text, tags in cells:
        cell = nbformat.v4.new_code_cell(text) if kind == "code" else nbformat.v4.new_markdown_cell(text)
        cell.metadata["tags"] = tags
        nb.cells.append(cell)
    path = tmp_path / "99_toy.ipynb"
    nbformat.write(nb, path)
    code = _code(sn.make(path, BOOK))
    assert "x = 1" in code and "y = x + 1" in code
    assert "smoke_mode" not in code and "the page only" not in code


def test_checked_exercise_with_a_question_gets_its_answer_cell_after_its_checks():
    """Chapter 6's exercise 6.3 asks for three numbers (a stub and its public check) and a question in words: the
    Markdown answer cell follows the check. An unchecked exercise's text is read for a question the same way."""
    cells = _student(next(p for p in CHAPTERS if p.name.startswith("06_"))).cells
    stub = next(i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.startswith("per_wrong = ..."))
    assert "check_smoothing_mass" in cells[stub + 1].source
    assert cells[stub + 2].cell_type == "markdown"
    assert cells[stub + 2].source.startswith("*Your answer to Exercise 6.3, in words")
    assert sn.asks_in_words("Why can a model not favour a wrong token? Compute `x`.")
    assert not sn.asks_in_words("Compute `per_wrong` (is it `a?`) and $p(x?)$.")
