"""The notebooks a student downloads or opens in Colab: ``student/NN_name.ipynb``, made from the chapters.

Usage (what `make student-notebooks` runs; `--check` is what the tests run):

    python tools/student_notebooks.py [--out student] [--check] [NOTEBOOK ...]

A chapter notebook under ``notebooks/`` is the source of its page: it holds the exercise solutions, the hidden
tests of the autograded exercises, the quiz answers, MyST markup that only the site understands (``{exercise}``,
``{cite}``, ``(label)=``...), the tags and timestamps of its execution. A student who downloads the page's notebook
or opens it in Colab gets none of that; the site's download and Colab buttons lead to the copy made here
(``_ext/site_html.py`` points them there), which is:

* the chapter with the exercises as the assignments have them (``tools/assignments.py``, one transformation):
  each solution replaced by its stub, the public checks visible, the hidden tests and solution text removed;
* plain Markdown that Jupyter and Colab render: an exercise becomes a "### Exercise N.k" heading (numbered per
  chapter as on the site, ``_ext/exercise_numbers.py``); an admonition a quoted block; a dropdown a
  ``<details>`` block, still collapsed; a figure an image embedded as a ``data:`` URI with its caption;
  a citation "Vaswani et al. (2017)" from ``book/references.bib``; a cross-reference a link to the page on the
  course website; labels are dropped;
* a quiz (``choice``/``numeric`` of ``tmlib.course.quiz``) as its question and options, without the answer,
  which the page's widget gives;
* no outputs, execution counts, cell tags or execution timestamps; fresh cell ids; a first note with the link
  to the executed page. The notebook metadata ``tmlib_assignment`` lets the grader take the finished notebook.

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
import re
import sys
from pathlib import Path

import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assignments import FENCE_OPEN, META, assignment_metadata, chapter_of, student_notebook  # noqa: E402


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
FENCE = re.compile(FENCE_OPEN.pattern + r"[ \t]*(?P<arg>.*)$")  # a directive's opening line, with its argument
OPTION = re.compile(r"^[ \t]*:(?P<key>[a-z-]+):[ \t]*(?P<value>.*)$")
LABEL_LINE = re.compile(r"^\((?P<label>[^)\s]+)\)=[ \t]*$")
ROLE = re.compile(r"\{(?P<role>[a-z]+(?::[a-z]+)?)\}`(?P<body>[^`]*)`")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
SCRIPT = re.compile(r"^\s*<script\b[^>]*>\s*</script>\s*$")
WIDGET = re.compile(r"^\s*<div class=\"tm-[a-z-]+\"[^>]*>\s*</div>\s*$")
HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*$")


# --------------------------------------------------------------------------------------------- the book's context
class Book:
    """What converting a page needs from the rest of the book: addresses, page titles, labels, citations."""

    def __init__(self, root: Path = ROOT):
        self.root = root
        config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
        repo = config["repository"]
        m = re.match(r"https://github\.com/(?P<owner>[^/]+)/(?P<name>[^/]+?)/?$", repo["url"])
        if not m:
            raise ValueError(f"_config.yml: repository.url {repo['url']!r} is not a GitHub address")
        self.site = f"https://{m['owner']}.github.io/{m['name']}/"
        self.titles: dict[str, str] = {}  # docname -> first heading
        self.labels: dict[str, tuple[str, str | None]] = {}  # label -> (docname, link text or None)
        self.exercise_numbers: dict[str, str] = {}  # exercise label -> "N.k"
        pages = [*root.glob("notebooks/[0-9]*.ipynb"), *root.glob("book/*.md"), *root.glob("book/*.ipynb")]
        for page in sorted(pages):
            docname = page.relative_to(root).with_suffix("").as_posix()
            self._index(docname, page_markdown(page))
        self.citations = read_bibliography(root / "book" / "references.bib")

    def _index(self, docname: str, cells: list[str]) -> None:
        prefix, k, pending = EXERCISE_NUMBERS.page_prefix(docname), 0, None
        for text in cells:
            lines = text.splitlines()
            for i, line in enumerate(lines):
                m, h, f = LABEL_LINE.match(line), HEADING.match(line), FENCE.match(line)
                if m:
                    pending = m["label"]
                    continue
                if h:
                    self.titles.setdefault(docname, h["title"])
                    if pending:
                        self.labels[pending] = (docname, h["title"])
                elif f and f["name"] in ("exercise", "figure"):
                    options = fence_options(lines, i + 1)
                    if f["name"] == "exercise":
                        k += 1
                        self.exercise_numbers[options.get("label", "")] = f"{prefix}.{k}"
                        if "label" in options:
                            self.labels[options["label"]] = (docname, f"Exercise {prefix}.{k}")
                    elif "name" in options:
                        self.labels[options["name"]] = (docname, "the figure")
                if line.strip():
                    if pending and pending not in self.labels:  # a label on a paragraph: link text required
                        self.labels[pending] = (docname, None)
                    pending = None

    def page_url(self, docname: str, anchor: str = "") -> str:
        return f"{self.site}{docname}.html" + (f"#{anchor}" if anchor else "")


def page_markdown(path: Path) -> list[str]:
    """The markdown cells of a notebook, or the text of a Markdown page, as a list of strings."""
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return [c.source for c in nb.cells if c.cell_type == "markdown"]
    return [path.read_text(encoding="utf-8")]


def split_at_exercises(source: str) -> list[str]:
    """A markdown string cut before each ``{exercise}`` directive but the first (one exercise per piece)."""
    pieces, current, seen = [], [], False
    for line in source.splitlines():
        m = FENCE.match(line)
        if m and m["name"] == "exercise" and not m["indent"]:
            if seen:
                pieces.append("\n".join(current))
                current = []
            seen = True
        current.append(line)
    pieces.append("\n".join(current))
    return pieces


def directive_count(source: str, name: str) -> int:
    """How many ``{name}`` directives open in a markdown string."""
    return sum(1 for line in source.splitlines() if (m := FENCE.match(line)) and m["name"] == name)


def fence_options(lines: list[str], start: int) -> dict[str, str]:
    """The ``:key: value`` option lines of a directive whose body starts at ``lines[start]``."""
    out = {}
    for line in lines[start:]:
        m = OPTION.match(line)
        if not m:
            break
        out[m["key"]] = m["value"].strip()
    return out


def read_bibliography(path: Path) -> dict[str, tuple[str, str]]:
    """``{key: (authors for the text, year)}`` from a BibTeX file: "Vaswani et al.", "Ba and Kiros"..."""
    from pybtex.database import parse_file

    out = {}
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
    return out


ACCENT = {"'": "\u0301", "`": "\u0300", '"': "\u0308", "^": "\u0302", "~": "\u0303", "c": "\u0327"}


def latex_to_text(text: str) -> str:
    """The LaTeX accents of author names (``Doll{\\'a}r``, ``{\\L}ukasz``) as Unicode, braces dropped.

    Raises:
        ValueError: LaTeX left that this function does not convert.
    """
    import unicodedata

    text = text.replace("\\L", "Ł").replace("\\l", "ł").replace("\\o", "ø")
    text = re.sub(r"\\([\'`\"^~c])\s*\{?([A-Za-z])\}?",
                  lambda m: unicodedata.normalize("NFC", m[2] + ACCENT[m[1]]), text)
    text = text.replace("{", "").replace("}", "")
    if "\\" in text:
        raise ValueError(f"book/references.bib: an author name with LaTeX this tool does not convert: {text!r}")
    return text


# --------------------------------------------------------------------------------------------- markdown
class Converter:
    """Converts one page's MyST markdown to plain Markdown (see the module docstring)."""

    def __init__(self, book: Book, docname: str):
        self.book, self.docname = book, docname

    def cell(self, source: str, where: str) -> str:
        lines = [self.widget(line) for line in source.splitlines()
                 if not LABEL_LINE.match(line) and not SCRIPT.match(line)]
        text = "\n".join(self.blocks(lines, where))
        text = ROLE.sub(lambda m: self.role(m["role"], m["body"], where), text)
        return re.sub(r"\n{3,}", "\n\n", text).strip("\n")

    def widget(self, line: str) -> str:
        """A page's widget (``<div class="tm-...">``, drawn by the site's JavaScript) as a link to the page."""
        if not WIDGET.match(line):
            return line
        return (f"*(This widget runs in the browser, on [the chapter's page]({self.book.page_url(self.docname)}); "
                "a notebook cannot draw it.)*")

    def blocks(self, lines: list[str], where: str) -> list[str]:
        out, i = [], 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                out.append(lines[i])
                i += 1
                continue
            fence, name, arg = m["fence"], m["name"], m["arg"].strip()
            options = fence_options(lines, i + 1)
            j = i + 1 + len(options)
            k = j
            while k < len(lines) and lines[k].strip() != fence:
                k += 1
            if k == len(lines):
                raise ValueError(f"{where}: the {{{name}}} block has no closing {fence}")
            body = "\n".join(self.blocks(lines[j:k], where)).strip("\n")
            out.extend(self.directive(name, arg, options, body, where).splitlines())
            i = k + 1
        return out

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
        m = EXPLICIT.match(body)
        text, target = (m["text"], m["target"]) if m else (None, body.strip())
        if role in ("ref", "numref"):
            if target not in self.book.labels:
                raise ValueError(f"{where}: {{{role}}} to an unknown label {target!r}")
            docname, title = self.book.labels[target]
            if not (text or title):
                raise ValueError(f"{where}: {{{role}}}`{target}` needs link text (the label is not on a heading)")
            return f"[{text or title}]({self.book.page_url(docname, target)})"
        if role == "doc":
            target = re.sub(r"\.(md|ipynb)$", "", target)
            docname = normalise(target.lstrip("/") if target.startswith("/") else f"{Path(self.docname).parent}/{target}")
            if docname not in self.book.titles:
                raise ValueError(f"{where}: {{doc}} to an unknown page {target!r}")
            return f"[{text or self.book.titles[docname]}]({self.book.page_url(docname)})"
        if role == "math":
            return f"${body}$"
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
    """A quiz cell (``choice(...)`` or ``numeric(...)``) as Markdown without its answer; None for other cells."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id in ("choice", "numeric")]
    if not calls:
        return None
    parts = []
    for call in calls:
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        title = kwargs.get("title", "Check yourself")
        question = args[1] if len(args) > 1 else kwargs["question"]
        text = f"**{title}.** {question}"
        if call.func.id == "choice":
            options = args[2] if len(args) > 2 else kwargs["options"]
            text += "\n\n" + "\n".join(f"- {opt[0]}" for opt in options)
        parts.append(text)
    if not parts:
        raise ValueError(f"{where}: a quiz cell without a question")
    return "\n\n".join(parts) + "\n\n*Answer on the chapter's page, where the question checks your choice.*"


# --------------------------------------------------------------------------------------------- a notebook
def make(path: Path, book: Book | None = None):
    """The student notebook of one chapter notebook (a new ``NotebookNode``).

    Raises:
        ValueError: markup with no plain-Markdown form, a dangling reference, or bad exercise markup.
    """
    book = book or Book()
    nb = nbformat.read(path, as_version=4)
    docname = path.resolve().relative_to(book.root).with_suffix("").as_posix()
    student, exercises = student_notebook(nb, path=str(path), clear_outputs=True)
    convert = Converter(book, docname)
    cells = []
    for i, cell in enumerate(student.cells):
        where = f"{path.name}, cell {i}"
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
                    cells.append(nbformat.v4.new_code_cell(f"# Exercise {number[1]}: your work"))
            continue
        quiz = quiz_markdown(cell.source, where) if "remove-input" in cell.metadata.get("tags", []) else None
        if quiz is not None:
            cells.append(nbformat.v4.new_markdown_cell(convert.cell(quiz, where)))
            continue
        cells.append(nbformat.v4.new_code_cell(install_everywhere(cell.source) if i == 1 else cell.source))
    chapter = chapter_of(path)
    note = (f"*This is the notebook of chapter {int(chapter)} for you to run and work in. The [chapter's page]"
            f"({book.page_url(docname)}) shows it executed, with the solutions of the exercises. Run the cells "
            "from the top. Each exercise is followed by a cell for your work")
    note += (": where it holds a function or a variable with `...` to complete, the check cell below it says what "
             "is wrong.*" if exercises else ".*")
    cells.insert(1, nbformat.v4.new_markdown_cell(note))
    out = nbformat.v4.new_notebook(cells=cells)
    out.metadata = copy.deepcopy({k: v for k, v in nb.metadata.items() if k in ("kernelspec", "language_info")})
    if exercises:
        out.metadata[META] = assignment_metadata(chapter, path.stem, exercises)
    for i, cell in enumerate(out.cells):
        cell["id"] = f"c{i:03d}"
    return out


def render(nb) -> str:
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="chapter notebooks (default: notebooks/NN_*.ipynb)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="write nothing; fail if a student notebook is stale")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    book, stale = Book(), []
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
