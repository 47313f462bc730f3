"""The notebooks a student downloads or opens in Colab: ``student/NN_name.ipynb``, made from the chapters, and
``student/NAME.ipynb`` for each page of ``book/`` that is a notebook with exercises (:data:`PAGES`).

Usage (what `make student-notebooks` runs; `--check` is what the tests run):

    python tools/student_notebooks.py [--out student] [--check] [NOTEBOOK ...]

A chapter notebook under ``notebooks/`` is the source of its page: it holds the exercise solutions, the hidden
tests of the autograded exercises, the quiz answers, MyST markup that only the site understands (``{exercise}``,
``{cite}``, ``(label)=``...), the tags and timestamps of its execution. A student who downloads the page's notebook
or opens it in Colab gets none of that; the site's download and Colab buttons lead to the copy made here
(``_ext/student_buttons.py`` points them there), which is:

* the chapter with the exercises as the assignments have them (``tools/assignments.py``, one transformation):
  each solution replaced by its stub, the public checks visible, the hidden tests and solution text removed;
* plain Markdown that Jupyter and Colab render: an exercise becomes a "### Exercise N.k" heading (numbered per
  chapter as on the site, ``_ext/exercise_numbers.py``) followed by a code cell for the work, or a Markdown cell
  for the answer when the exercise is a question answered in words (and one after the checks of an exercise that
  also asks a question in words, marked ``"essay": true`` on its stub); an admonition a quoted block; a dropdown a
  ``<details>`` block, still collapsed; a figure an image embedded as a ``data:`` URI with its caption; a
  citation "Vaswani et al. (2017)" from ``book/references.bib``; a cross-reference to another page a link to that
  page on the course website (``--site`` names another, e.g. a student edition), to this notebook its text;
  labels are dropped;
* a quiz (``choice``/``numeric`` of ``tmlib.course.quiz``) as its question and options, without the answer,
  which the page's widget gives;
* without the cells tagged ``site-only`` (what only the page shows, e.g. an exercise's function run on its
  check, which the notebook holds as cells to run), nor those tagged ``smoke-only`` (the cell that shrinks a run
  in the course's quick test mode, ``TMLIB_SMOKE=1``, e.g. fewer test sentences: machinery of the course's tests,
  which a student's run never takes); a Markdown cell tagged ``remove-cell``, which the page leaves out, stays:
  what the notebook says in its own words (a number glued from the page's run, ``{glue:text}``, may stand only in
  a ``site-only`` cell: the student's run prints its own);
* no outputs, execution counts, cell tags or execution timestamps; fresh cell ids; a first note on how to work
  and hand in, without a link to the chapter's page (it holds the solutions; the instructor decides whether
  they are published). A page of :data:`PAGES` is converted the same way; its note names the page and says
  nothing about handing in (the assignments, ``tools/assignments.py``, are the chapters'); its exercises may have
  stubs and public checks (``assignment`` markup), which the student copy keeps, but no hidden tests: only a
  chapter is graded, and only a chapter's notebook gets the grader's metadata. The notebook metadata
  ``tmlib_assignment``, and the stub cells' ``assignment`` metadata (which exercise, never the solution), let the
  grader take the finished notebook.

``tools/assignments.py build`` hands out this same notebook.

The website's address is derived from the repository address in ``_config.yml`` (GitHub Pages:
``https://OWNER.github.io/NAME/``). Markup this tool does not know raises ``ValueError`` naming the cell, so new
markup is converted deliberately rather than leaked.
"""
from __future__ import annotations

import argparse
import ast
import base64
import copy
import html
import io
import re
import sys
import tokenize
from pathlib import Path

import nbformat
import yaml
from sphinx.util.nodes import split_explicit_title

sys.path.insert(0, str(Path(__file__).resolve().parent))
import myst  # noqa: E402
from assignments import KEY, META, SMOKE_ONLY, assignment_metadata, chapter_of, student_notebook  # noqa: E402


def _load_exercise_numbers():
    """``_ext/exercise_numbers.py``, the site's exercise numbering, which the notebooks must repeat."""
    from importlib import util

    spec = util.spec_from_file_location("exercise_numbers", Path(__file__).resolve().parent.parent / "_ext" /
                                        "exercise_numbers.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXERCISE_NUMBERS = _load_exercise_numbers()

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "student"
# Pages of book/ that are executed notebooks with exercises (and solutions): each gets a student copy too,
# student/NAME.ipynb, behind its page's download and Colab buttons like a chapter's
PAGES = ("book/distributed.ipynb",)
# Raw HTML lines (inside the parser's HTML blocks) that the site's JavaScript turns into something: not MyST.
SCRIPT = re.compile(r"^\s*<script\b[^>]*>\s*</script>\s*$")
WIDGET = re.compile(r"^\s*<div class=\"tm-[a-z-]+\"[^>]*>\s*</div>\s*$")
SITE_ONLY = "site-only"  # the tag of a cell that only the chapter's page shows (see the module docstring)
LEFT_OUT = (SITE_ONLY, SMOKE_ONLY)  # cells with one of these tags are not in the student notebook


# --------------------------------------------------------------------------------------------- the book's context
class Book:
    """What converting a page needs from the rest of the book: addresses, page titles, labels, citations."""

    def __init__(self, root: Path = ROOT, site: str | None = None):
        self.root = root
        config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
        repo = config["repository"]
        m = re.match(r"https://github\.com/(?P<owner>[^/]+)/(?P<name>[^/]+?)/?$", repo["url"])
        if not m:
            raise ValueError(f"_config.yml: repository.url {repo['url']!r} is not a GitHub address")
        self.site = site.rstrip("/") + "/" if site else f"https://{m['owner']}.github.io/{m['name']}/"
        self.titles: dict[str, str] = {}  # docname -> first heading
        self.labels: dict[str, tuple[str, str | None]] = {}  # label -> (docname, link text or None)
        self.exercise_numbers: dict[str, str] = {}  # exercise label -> "N.k"
        pages = [*root.glob("notebooks/[0-9]*.ipynb"), *root.glob("book/*.md"), *root.glob("book/*.ipynb")]
        for page in sorted(pages):
            docname = page.relative_to(root).with_suffix("").as_posix()
            self._index(docname, page_markdown(page))
        self.citations = read_bibliography(root / "book" / "references.bib")

    def _index(self, docname: str, cells: list[str]) -> None:
        prefix, counter, pending = EXERCISE_NUMBERS.page_prefix(docname), [0], [None]

        def walk(text: str) -> None:
            tree = myst.outline(text)
            heading_at = {line: title for _, title, line in tree.headings}
            target_at = dict((line, label) for label, line in tree.targets)
            directive_at = {d.start: d for d in tree.directives}
            for _, line in tree.blocks:
                if line in target_at:
                    pending[0] = target_at[line]
                    continue
                if line in heading_at:
                    self.titles.setdefault(docname, heading_at[line])
                    if pending[0]:
                        self.labels[pending[0]] = (docname, heading_at[line])
                d = directive_at.get(line)
                if d is not None and d.name == "exercise":
                    counter[0] += 1
                    self.exercise_numbers[d.options.get("label", "")] = f"{prefix}.{counter[0]}"
                    if "label" in d.options:
                        self.labels[d.options["label"]] = (docname, f"Exercise {prefix}.{counter[0]}")
                elif d is not None and d.name == "figure" and "name" in d.options:
                    self.labels[d.options["name"]] = (docname, "the figure")
                if pending[0] and pending[0] not in self.labels:  # a label on a paragraph: link text required
                    self.labels[pending[0]] = (docname, None)
                pending[0] = None
                if d is not None:
                    walk(d.body)

        for text in cells:
            walk(text)

    def docname(self, path: Path) -> str:
        """The docname of a chapter notebook; one outside the book (a test's chapter) is indexed on first use."""
        try:
            return path.resolve().relative_to(self.root).with_suffix("").as_posix()
        except ValueError:
            docname = f"notebooks/{path.stem}"
            if docname not in self.titles:
                self._index(docname, page_markdown(path))
            return docname

    def page_url(self, docname: str, anchor: str = "") -> str:
        return f"{self.site}{docname}.html" + (f"#{anchor}" if anchor else "")


def page_markdown(path: Path) -> list[str]:
    """The markdown cells of a notebook, or the text of a Markdown page, as a list of strings."""
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return [c.source for c in nb.cells if c.cell_type == "markdown"]
    return [path.read_text(encoding="utf-8")]


def split_at_exercises(source: str) -> list[str]:
    """A markdown string cut before each top-level ``{exercise}`` directive but the first (one exercise per piece)."""
    lines = source.splitlines()
    cuts = [d.start for d in myst.directives(source) if d.name == "exercise" and not d.indent][1:]
    bounds = [0, *cuts, len(lines)]
    return ["\n".join(lines[a:b]) for a, b in zip(bounds, bounds[1:])]


def directive_count(source: str, name: str) -> int:
    """How many ``{name}`` directives open in a markdown string (nested ones included)."""
    return sum(1 for d in myst.directives(source, nested=True) if d.name == name)


def read_bibliography(path: Path) -> dict[str, tuple[str, str]]:
    """``{key: (authors for the text, year)}`` from a BibTeX file: "Vaswani et al.", "Ba and Kiros"...; works with the
    same authors and year get the year with "a", "b"... (Touvron et al., 2023a), as the book's references do."""
    from pybtex.database import parse_file

    out, order = {}, {}
    for key, entry in parse_file(str(path)).entries.items():
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [latex_to_text(" ".join(p.last_names)) for p in people]
        if not names:
            who = entry.fields.get("organization", entry.fields.get("title", key)).strip("{}")
        elif len(names) == 1:
            who = names[0]
        elif len(names) == 2:
            who = f"{names[0]} and {names[1]}"
        else:
            who = f"{names[0]} et al."
        out[key] = (who, entry.fields.get("year", "n.d."))
        order[key] = ([" ".join(p.last_names + p.first_names).lower() for p in people],
                      entry.fields.get("title", "").strip("{}").lower())
    # the same authors and year: 2023a, 2023b, as the book's author-year labels (sorted by authors, then title)
    groups: dict[tuple[str, str], list[str]] = {}
    for key, label in out.items():
        groups.setdefault(label, []).append(key)
    for (who, year), keys in groups.items():
        if len(keys) > 1:
            for suffix, key in zip("abcdefghijklmnopqrstuvwxyz", sorted(keys, key=order.__getitem__)):
                out[key] = (who, year + suffix)
    return out


def latex_to_text(text: str) -> str:
    """The LaTeX of author names (``Doll{\\'a}r``, ``{\\L}ukasz``) as Unicode (latexcodec), braces dropped.

    Raises:
        ValueError: LaTeX left that latexcodec does not convert.
    """
    import codecs
    import unicodedata

    import latexcodec  # noqa: F401 - registers the "ulatex" codec

    out = unicodedata.normalize("NFC", codecs.decode(text, "ulatex")).replace("{", "").replace("}", "")
    if "\\" in out:
        raise ValueError(f"book/references.bib: an author name with LaTeX this tool does not convert: {text!r}")
    return out


# --------------------------------------------------------------------------------------------- markdown
class Converter:
    """Converts one page's MyST markdown to plain Markdown (see the module docstring)."""

    def __init__(self, book: Book, docname: str):
        self.book, self.docname = book, docname

    def cell(self, source: str, where: str) -> str:
        return re.sub(r"\n{3,}", "\n\n", self.convert(source, where)).strip("\n")

    def convert(self, source: str, where: str) -> str:
        """``source`` with its directives, targets, roles and widget lines converted (directive bodies too)."""
        try:
            tree, roles = myst.outline(source), myst.role_spans(source)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        lines = source.splitlines(keepends=True)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line))
        by_line: dict[int, list] = {}
        for r in roles:
            line = max(i for i, a in enumerate(starts[:-1]) if a <= r.start)
            if r.end > starts[line + 1] - (1 if lines[line].endswith("\n") else 0):
                raise ValueError(f"{where}: a role split over two lines: {source[r.start:r.end]!r}")
            by_line.setdefault(line, []).append(r)
        targets = {line for _, line in tree.targets}
        directive_at = {d.start: d for d in tree.directives}
        out, i = [], 0
        while i < len(lines):
            d = directive_at.get(i)
            if d is not None:
                body = self.convert(d.body, where).strip("\n")
                out.extend(self.directive(d.name, self.inline(d.arg, where), d.options, body, where).splitlines())
                i = d.end
                continue
            text = lines[i].rstrip("\n")
            if i in targets or (i in tree.html_lines and SCRIPT.match(text)):
                i += 1
                continue
            if i in tree.html_lines and WIDGET.match(text):
                out.append(self.widget())
            else:
                offset = starts[i]
                for r in sorted(by_line.get(i, []), key=lambda r: -r.start):
                    text = text[:r.start - offset] + self.role(r.name, r.content, where) + text[r.end - offset:]
                out.append(text)
            i += 1
        return "\n".join(out)

    def inline(self, text: str, where: str) -> str:
        """One line of Markdown (a directive's title) with its roles converted."""
        for r in sorted(myst.role_spans(text), key=lambda r: -r.start):
            text = text[:r.start] + self.role(r.name, r.content, where) + text[r.end:]
        return text

    def widget(self) -> str:
        """A page's widget (``<div class="tm-...">``, drawn by the site's JavaScript): a note, not a link (the page
        holds the solutions, which the instructor may not publish)."""
        return "*(Here the chapter's page on the course website has a widget that runs in the browser; a notebook " \
               "cannot draw it.)*"

    def directive(self, name: str, arg: str, options: dict, body: str, where: str) -> str:
        if name == "exercise":
            number = self.book.exercise_numbers.get(options.get("label", ""))
            if number is None:
                raise ValueError(f"{where}: an exercise without a :label:")
            title = f"### Exercise {number}" + (f": {arg}" if arg else "")
            return f"\n{title}\n\n{body}\n"
        if name == "dropdown" or (name == "admonition" and "dropdown" in options.get("class", "")):
            return f"\n<details>\n<summary><b>{html.escape(arg, quote=False)}</b></summary>\n\n{body}\n\n</details>\n"
        if name in ("admonition", "note", "tip", "important", "warning"):
            title = arg or name.capitalize()
            quoted = "\n".join(f"> {line}".rstrip() for line in body.splitlines())
            return f"\n> **{title}**\n>\n{quoted}\n"
        if name == "figure":
            return f"\n{self.figure(arg, options, where)}\n\n*{body}*\n" if body else f"\n{self.figure(arg, options, where)}\n"
        raise ValueError(f"{where}: no plain-Markdown form for the {{{name}}} directive (tools/student_notebooks.py)")

    def figure(self, path: str, options: dict, where: str) -> str:
        file = (self.book.root / self.docname).parent / path
        if not file.is_file():
            raise ValueError(f"{where}: figure {path} not found at {file}")
        mime = {".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg"}[file.suffix.lower()]
        data = base64.b64encode(file.read_bytes()).decode("ascii")
        alt = options.get("alt", file.stem).replace("[", "(").replace("]", ")")
        return f"![{alt}](data:{mime};base64,{data})"

    def role(self, role: str, body: str, where: str) -> str:
        if role in ("cite", "cite:p", "cite:t"):
            refs = []
            for key in (k.strip() for k in body.split(",")):
                if key not in self.book.citations:
                    raise ValueError(f"{where}: citation {key!r} is not in book/references.bib")
                refs.append(self.book.citations[key])
            if role == "cite:t":
                return "; ".join(f"{who} ({year})" for who, year in refs)
            return "(" + "; ".join(f"{who}, {year}" for who, year in refs) + ")"
        explicit, title_, target = split_explicit_title(body)
        text, target = (title_, target) if explicit else (None, body.strip())
        if role in ("ref", "numref"):
            if target not in self.book.labels:
                raise ValueError(f"{where}: {{{role}}} to an unknown label {target!r}")
            docname, title = self.book.labels[target]
            if not (text or title):
                raise ValueError(f"{where}: {{{role}}}`{target}` needs link text (the label is not on a heading)")
            if docname == self.docname:  # in this notebook: the text alone (a link would open the solutions' page)
                return f"*{text or title}*"
            return f"[{text or title}]({self.book.page_url(docname, target)})"
        if role == "doc":
            target = re.sub(r"\.(md|ipynb)$", "", target)
            docname = normalise(target.lstrip("/") if target.startswith("/") else f"{Path(self.docname).parent}/{target}")
            if docname not in self.book.titles:
                raise ValueError(f"{where}: {{doc}} to an unknown page {target!r}")
            return f"[{text or self.book.titles[docname]}]({self.book.page_url(docname)})"
        if role == "math":
            return f"${body}$"
        if role.startswith("glue"):  # a number of the page's run: the student's run prints its own
            raise ValueError(f"{where}: {{{role}}} in a cell the notebook keeps: put the sentence in a Markdown cell "
                             "tagged site-only, and what the notebook says instead in one tagged remove-cell")
        raise ValueError(f"{where}: no plain-Markdown form for the {{{role}}} role (tools/student_notebooks.py)")


def normalise(docname: str) -> str:
    """``notebooks/../book/errata`` -> ``book/errata``."""
    parts: list[str] = []
    for part in docname.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


# --------------------------------------------------------------------------------------------- the install cell
PIP_LINE = re.compile(r'^(?P<indent>\s+)%pip install -q "(?P<requirement>[^"]+)"\s*$', re.M)


def install_everywhere(source: str) -> str:
    """The chapter's install cell (``if "google.colab" in sys.modules: %pip install ...``) with an ``else`` branch
    for a student's own Jupyter: where the course library is missing, it says what to install instead of
    leaving the next cell to fail with a bare ``ModuleNotFoundError``.

    Raises:
        ValueError: the cell is not the install cell the chapters begin with.
    """
    m = PIP_LINE.search(source)
    if "google.colab" not in source or m is None:
        raise ValueError(f"the second cell is not the chapter's Colab install cell: {source!r}")
    return source.rstrip("\n") + f"""
else:  # your own Jupyter: the course library must be installed in this kernel's environment
    import importlib.util
    if importlib.util.find_spec("tmlib") is None:
        raise ModuleNotFoundError('the course library is not installed here: run  %pip install "{m["requirement"]}"'
                                  "  in a cell, then restart the kernel")"""


# --------------------------------------------------------------------------------------------- quizzes
def quiz_markdown(source: str, where: str) -> str | None:
    """A quiz cell (``choice(...)`` or ``numeric(...)``) as Markdown without its answer; None for other cells.

    Only the title, the question and the options' texts are read, without running the cell, so they must be
    literals (the answer and the feedback may be computed).

    Raises:
        ValueError: a quiz whose question, title or options are missing or not a literal (an f-string, a name,
            a call); the message names ``where`` and the first characters of the cell.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id in ("choice", "numeric")]
    if not calls:
        return None
    cell = f"{where} (the cell that starts {source.strip()[:60]!r})"

    def node(call, position, keyword, required=True):  # the argument of the call, positional or by keyword
        found = call.args[position] if len(call.args) > position else next(
            (k.value for k in call.keywords if k.arg == keyword), None)
        if found is None and required:
            raise ValueError(f"{cell}: {call.func.id}(...) has no {keyword}")
        return found

    def literal(call, tree_node, what):
        try:
            return ast.literal_eval(tree_node)
        except (ValueError, TypeError):
            raise ValueError(f"{cell}: the {what} of {call.func.id}(...) is `{ast.unparse(tree_node)[:60]}`, not a "
                             "literal: the student notebook shows it without running the cell, so write it out "
                             "as a plain string") from None

    parts = []
    for call in calls:
        title_node = node(call, 4 if call.func.id == "choice" else 5, "title", required=False)
        title = "Check yourself" if title_node is None else literal(call, title_node, "title")
        text = f"**{title}.** {literal(call, node(call, 1, 'question'), 'question')}"
        if call.func.id == "choice":
            options = node(call, 2, "options")
            if not isinstance(options, (ast.List, ast.Tuple)) or not all(
                    isinstance(o, (ast.List, ast.Tuple)) and o.elts for o in options.elts):
                raise ValueError(f"{cell}: the options of choice(...) are `{ast.unparse(options)[:60]}`, not a "
                                 "list of (text, correct) pairs written out in the cell")
            text += "\n\n" + "\n".join(f"- {literal(call, o.elts[0], 'text of an option')}" for o in options.elts)
        parts.append(text)
    return "\n\n".join(parts) + "\n\n*Write your answer in the cell below; the same question on the chapter's web page tells you whether your choice is right.*"


# --------------------------------------------------------------------------------------------- a notebook
def answer_markdown(title: str):
    """The empty Markdown cell a student writes an answer in words into, headed ``*title (double-click …):*``."""
    return nbformat.v4.new_markdown_cell(f"*{title} (double-click this cell to write it):*")


def exercise_kinds(nb) -> dict[str, str]:
    """Per exercise label of a chapter notebook, ``"code"`` when its solution has code cells (or there is none),
    ``"text"`` when it is text only (an essay question: the student answers in a Markdown cell)."""
    kinds, inside, has_code = {}, None, False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for d in myst.directives(cell.source, nested=True):
                if d.name == "exercise" and "label" in d.options:
                    kinds.setdefault(d.options["label"], "code")
                elif d.name == "solution" and d.arg:
                    kinds[d.arg] = "text"
                elif d.name == "solution-start":
                    inside, has_code = d.arg, False
                elif d.name == "solution-end" and inside:
                    kinds[inside] = "code" if has_code else "text"
                    inside = None
        elif inside is not None:
            has_code = True
    return kinds


def asks_in_words(text: str) -> bool:
    """Whether an exercise's text asks a question (a "?" outside its code and maths), which the student answers in
    words beside the code of their work."""
    return "?" in re.sub(r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$", "", text, flags=re.S)


def has_ellipsis(code: str) -> bool:
    """Whether Python code holds the `...` a student is to complete (comments and strings do not count)."""
    try:
        return any(tok.type == tokenize.OP and tok.string == "..."
                   for tok in tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return "..." in code


def note(chapter: int | str, stem: str, checked: bool, essays: bool, repair: bool = False) -> str:
    """The first note of a student notebook: how to work and hand in (no link to the page with the solutions).
    ``chapter``: the chapter's number, or the title of a page outside the chapters (:data:`PAGES`), whose notebook
    is not an assignment: its note says nothing about handing in. ``repair``: the exercises hand out working code
    with a bug to fix, not code with ``...`` to complete."""
    what = f"chapter {chapter}" if isinstance(chapter, int) else f'the page "{chapter}"'
    text = (f"*This is the notebook of {what} for you to run and work in. Run the cells from the top. "
            "Each exercise is followed by a cell for your work")
    if checked and repair:
        text += ": where it holds a function with a bug in it, find the bug and fix it; the check cell below it " \
                "says what is still wrong"
    elif checked:
        text += ": where it holds a function or a variable with `...` to complete, the check cell below it says " \
                "what is wrong"
    if essays:
        text += "; a question is answered in the Markdown cell below it"
    if not isinstance(chapter, int):
        return text + ".*"
    return text + (f". To hand the notebook in, run it from the top and save it as `YOURID__{stem}.ipynb` (your id, "
                   "two underscores, the name).*")


def sources(root: Path = ROOT) -> list[Path]:
    """The notebooks that get a student copy: the chapters ``notebooks/NN_*.ipynb``, then the pages :data:`PAGES`."""
    return sorted((root / "notebooks").glob("[0-9]*.ipynb")) + [root / page for page in PAGES]


def make(path: Path, book: Book | None = None):
    """The student notebook of one chapter notebook (a new ``NotebookNode``): the same notebook
    ``tools/assignments.py build`` hands out. Stub cells keep their ``assignment`` metadata (which exercise, which
    stub; never the solution), so that the grader knows them. A page of :data:`PAGES` (not named ``NN_name``) gets
    the same conversion and a note of its own.

    Raises:
        ValueError: markup with no plain-Markdown form, a dangling reference, or bad exercise markup.
    """
    book = book or Book()
    nb = nbformat.read(path, as_version=4)
    docname = book.docname(path)
    student, exercises = student_notebook(nb, path=str(path), clear_outputs=True)
    student.cells = [c for c in student.cells if not set(LEFT_OUT) & set(c.metadata.get("tags", []))]
    convert = Converter(book, docname)
    kinds = exercise_kinds(nb)
    label_of = {number: label for label, number in book.exercise_numbers.items()}
    essays = {c.metadata[KEY]["exercise"] for c in nb.cells if c.cell_type == "code"
              and isinstance(c.metadata.get(KEY), dict) and c.metadata[KEY].get("essay") is True}
    cells, pending = [], None  # pending: an exercise with a question in words whose answer cell is still to come

    def answer_cell(label):
        return answer_markdown(f"Your answer to Exercise {book.exercise_numbers[label]}, in words")

    for i, cell in enumerate(student.cells):
        where = f"{path.name}, cell {i}"
        if cell.cell_type == "markdown" and pending is not None:  # after the exercise's stub and checks
            cells.append(answer_cell(pending))
            pending = None
        if cell.cell_type == "markdown":
            following = student.cells[i + 1] if i + 1 < len(student.cells) else None
            has_stub = following is not None and "assignment-stub" in following.metadata.get("tags", [])
            chunks = split_at_exercises(cell.source)
            for k, chunk in enumerate(chunks):
                text = convert.cell(chunk, where)
                if text.strip():
                    cells.append(nbformat.v4.new_markdown_cell(text))
                number = re.search(r"^### Exercise (\S+?)(?::|$)", text, re.M)
                if number and not (has_stub and k == len(chunks) - 1):
                    if kinds.get(label_of.get(number[1], ""), "code") == "text":
                        cells.append(answer_markdown(f"Your answer to Exercise {number[1]}"))
                    else:
                        cells.append(nbformat.v4.new_code_cell(f"# Exercise {number[1]}: your work"))
                        if asks_in_words(text):
                            cells.append(answer_markdown(f"Your answer to Exercise {number[1]}, in words"))
            continue
        quiz = quiz_markdown(cell.source, where) if "remove-input" in cell.metadata.get("tags", []) else None
        if quiz is not None:
            cells.append(nbformat.v4.new_markdown_cell(convert.cell(quiz, where)))
            cells.append(answer_markdown("Your answer"))
            continue
        in_book = book.root in path.resolve().parents  # a chapter of the book starts with its install cell
        install = i == 1 and (in_book or "google.colab" in cell.source)
        code = nbformat.v4.new_code_cell(install_everywhere(cell.source) if install else cell.source)
        if "assignment" in cell.metadata and "stub" in cell.metadata["assignment"]:
            code.metadata["assignment"] = copy.deepcopy(cell.metadata["assignment"])
            if cell.metadata["assignment"]["exercise"] in essays:
                pending = cell.metadata["assignment"]["exercise"]
        cells.append(code)
    if pending is not None:
        cells.append(answer_cell(pending))
    chapter = chapter_of(path) if re.match(r"\d+_", path.name) else None  # None: a page outside the chapters
    hidden = [e.label for e in exercises.values() if any(c.kind != "public" for c in e.checks)]
    if chapter is None and hidden:
        raise ValueError(f"{path.name}: hidden tests of {', '.join(hidden)}: a page outside the chapters is not "
                         "graded, so its exercises have public checks only (the chapters are the assignments)")
    essays = any(c.cell_type == "markdown" and c.source.startswith("*Your answer to Exercise") for c in cells)
    stubs = [c.source for c in cells if c.cell_type == "code" and "stub" in c.metadata.get("assignment", {})]
    repair = bool(stubs) and not any(map(has_ellipsis, stubs))  # every stub is working code with a bug
    what = int(chapter) if chapter is not None else book.titles.get(docname, path.stem)
    cells.insert(1, nbformat.v4.new_markdown_cell(note(what, path.stem, bool(exercises), essays, repair)))
    out = nbformat.v4.new_notebook(cells=cells)
    out.metadata = copy.deepcopy({k: v for k, v in nb.metadata.items() if k in ("kernelspec", "language_info")})
    if exercises and chapter is not None:  # a page's checks help the student; only a chapter is graded
        out.metadata[META] = assignment_metadata(chapter, path.stem, exercises)
    for i, cell in enumerate(out.cells):
        cell["id"] = f"c{i:03d}"
    return out


def render(nb) -> str:
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="chapter notebooks (default: notebooks/NN_*.ipynb and the pages " + ", ".join(PAGES) + ")")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="write nothing; fail if a student notebook is stale")
    parser.add_argument("--site", help="the website the links lead to (default: the course's, from _config.yml), "
                                       "e.g. a student edition without solutions")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sources()
    book, stale = Book(site=args.site), []
    args.out.mkdir(parents=True, exist_ok=True)
    for path in notebooks:
        text = render(make(path.resolve(), book))
        target = args.out / path.name
        if args.check:
            if not target.is_file() or target.read_text(encoding="utf-8") != text:
                stale.append(target)
            continue
        target.write_text(text, encoding="utf-8")
        print(f"{target.relative_to(ROOT) if ROOT in target.resolve().parents else target}")
    if stale:
        print("stale student notebooks (run `make student-notebooks`): " + ", ".join(map(str, stale)))
        return 1
    if args.out == OUT and not args.notebooks:  # the instructors' hours count the student notebooks' words
        import instructor_hours

        return instructor_hours.main(["--check"] if args.check else [])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
