"""Make the source tree of the student edition: the book without exercise solutions.

Usage (what `make book-student` runs):

    python tools/student_edition.py [--with-instructors] _build/student_src

copies `_toc.yml`, `book/`, `notebooks/`, `assets/` and `student/` into the target folder, writes a `_config.yml`
that renders the committed outputs (no execution) with sphinx-exercise's `hide_solutions: true`, and rewrites the
copied notebooks (the chapters, and the executed pages of `book/` such as the scaling-out page) with the same
transformation as the assignments (`tools/assignments.py`, one source of truth):

* a `{solution}` directive (backtick or colon fence) is cut out of its markdown cell (text solutions);
* a gated solution, from the cell holding `{solution-start}` to the cell holding `{solution-end}`, is dropped
  with its text and code, except that the exercise's **stubs** take the place of the marked solution cells and
  its **public checks** are shown (without output), so a student who downloads the page's notebook can work the
  exercise and check the answer; hidden tests are left out.

sphinx-exercise's own `hide_solutions` option drops plain `{solution}` blocks but cannot remove the code cells of
a gated solution (and fails on the leftover `solution-end`), hence this copy. The downloadable notebooks of the
student site are the rewritten copies too.

The instructors' page (`book/instructors.md`) is left out: its marking scheme gives the model answers of the
questions answered in words. It is not copied, its line leaves the copied `_toc.yml`, and every link to it (or to
one of its sections) in the copied pages and notebooks becomes plain text; a link this script does not recognise
stops the build. `--with-instructors` keeps the page and its links.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path, PurePosixPath

import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assignments import split_at, strip_solution_blocks, student_notebook  # noqa: E402,F401  (re-exported)

ROOT = Path(__file__).resolve().parent.parent
COPY = ["_toc.yml", "book", "notebooks", "assets", "student"]
INSTRUCTORS = "book/instructors"  # left out of the student edition unless --with-instructors

# a MyST role {doc}`instructors`, {doc}`Title <../book/instructors>`, {ref}`Title <instructors-marking>`, ...
_ROLE = re.compile(r"\{(doc|ref|numref)\}`(?:([^`<]*?)\s*<([^`>]+)>|([^`<>]+))`")
# a Markdown link [text](instructors.md), [text](https://.../book/instructors.html#x), [text](#instructors-x)
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
# the welcome page's course map lists the appendices, "{doc}`measurements`; {doc}`installation`; {doc}`instructors`",
# and describes them, "...; installing the course; running it as an instructor.": the entry and its description go
_LIST_ENTRY = re.compile(r"[,;]\s*\{doc\}`(?:[./]*book/)?instructors`")
_DESCRIPTION = re.compile(r";\s*running it as an instructor(?=\.)")
# or gives the page a row of its own, "* - For instructors\n  - {doc}`instructors`\n  - Running ...": the row goes
_TABLE_ROW = re.compile(r"^\* - [^\n]*\n(?:  [^\n]*\n)*", re.M)


def _is_instructors(role: str, target: str) -> bool:
    if role == "doc" or role == "link":
        path, _, anchor = target.partition("#")
        name = PurePosixPath(path).name
        return name in ("instructors", "instructors.md", "instructors.html") or (
            role == "link" and not path and anchor.startswith("instructors"))
    return target == "instructors" or target.startswith("instructors-")  # a section label of the page


def unlink_instructors(text: str) -> str:
    """`text` (Markdown) without links to the instructors' page: a list entry of the welcome page's course map is
    dropped with its description, a row of a list table that links the page is dropped, any other link becomes its
    text."""
    text = _DESCRIPTION.sub("", text) if _LIST_ENTRY.search(text) else text
    text = _LIST_ENTRY.sub("", text)
    text = _TABLE_ROW.sub(lambda m: "" if _links_in(m.group(0)) else m.group(0), text)

    def role(m: re.Match) -> str:
        kind, title, target = m.group(1), m.group(2), m.group(3) or m.group(4)
        if not _is_instructors(kind, target.strip()):
            return m.group(0)
        return title.strip() if title and title.strip() else "the instructors' page"

    def link(m: re.Match) -> str:
        return m.group(1) if _is_instructors("link", m.group(2)) else m.group(0)

    return _LINK.sub(link, _ROLE.sub(role, text))


def _links_in(text: str) -> bool:
    return any(_is_instructors(m.group(1), (m.group(3) or m.group(4)).strip()) for m in _ROLE.finditer(text))


def links_to_instructors(text: str) -> list[str]:
    """The links to the instructors' page (or its sections) that `text` holds; after `unlink_instructors`, none."""
    found = [m.group(0) for m in _ROLE.finditer(text)
             if _is_instructors(m.group(1), (m.group(3) or m.group(4)).strip())]
    found += [m.group(0) for m in _LINK.finditer(text) if _is_instructors("link", m.group(2))]
    found += re.findall(r"\S*instructors\.html\S*", _LINK.sub("", text))  # a raw address, in HTML or elsewhere
    return found


def student_toc(text: str, leave_out: str = INSTRUCTORS) -> str:
    """The table of contents (`_toc.yml`'s text) without the entry `leave_out` (and a part it leaves empty)."""
    toc = yaml.safe_load(text)

    def keep(entries: list) -> list:
        kept = []
        for entry in entries:
            if entry.get("file") == leave_out:
                continue
            for key in ("chapters", "sections"):
                if key in entry:
                    entry[key] = keep(entry[key])
            if entry.get("chapters") == [] or entry.get("sections") == []:
                continue
            kept.append(entry)
        return kept

    if toc.get("root") == leave_out:
        raise ValueError(f"{leave_out} is the book's root page")
    for key in ("parts", "chapters", "sections"):
        if key in toc:
            toc[key] = keep(toc[key])
    return yaml.safe_dump(toc, sort_keys=False, allow_unicode=True)


def unlink_file(path: Path) -> int:
    """Rewrite one copied page or notebook (its markdown cells) without links to the instructors' page; return how
    many links it had. Raise if one is left that `unlink_instructors` does not recognise."""
    raw = path.read_text(encoding="utf-8")
    if "instructors" not in raw:
        return 0
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        cells = [c for c in nb.cells if c.cell_type == "markdown"]
        n = sum(len(links_to_instructors(c.source)) for c in cells)
        for c in cells:
            c.source = unlink_instructors(c.source)
        left = [x for c in cells for x in links_to_instructors(c.source)]
        if n:
            nbformat.write(nb, path)
    else:
        n = len(links_to_instructors(raw))
        text = unlink_instructors(raw)
        left = links_to_instructors(text)
        if n:
            path.write_text(text, encoding="utf-8")
    if left:
        raise SystemExit(f"{path}: links to the instructors' page that the student edition cannot rewrite: {left}")
    return n


def strip_notebook(path: Path) -> int:
    """Rewrite one notebook in place for the student edition; return how many solutions were removed.

    Committed outputs of the remaining cells are kept (the student site renders them); stub and check cells
    have none.
    """
    nb = nbformat.read(path, as_version=4)
    n_solutions = sum(1 for c in nb.cells if c.cell_type == "markdown"
                      for line in c.source.splitlines() if line.lstrip().startswith(("```{solution", ":::{solution"))
                      and "{solution-end}" not in line)
    student, _ = student_notebook(nb, path=str(path), clear_outputs=False)
    nbformat.write(student, path)
    return n_solutions


def student_config(text: str) -> str:
    """The site configuration with execution off and solutions hidden."""
    for old, new in [("  execute_notebooks: cache\n", '  execute_notebooks: "off"\n'),
                     ("    hide_solutions: false\n", "    hide_solutions: true\n")]:
        if old not in text:
            raise ValueError(f"_config.yml lacks the line {old.strip()!r}")
        text = text.replace(old, new)
    return text


def main(target: str, with_instructors: bool = False) -> None:
    out = Path(target).resolve()
    if out == ROOT or ROOT not in out.parents:
        raise SystemExit(f"refusing to write outside the repository's build folder: {out}")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    write_sources(out, with_instructors=with_instructors)


def write_sources(out: Path, with_instructors: bool = False) -> None:
    """The student edition's sources in the empty folder `out`."""
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, out / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        elif src.exists():
            shutil.copy2(src, out / name)
    if not with_instructors:
        (out / f"{INSTRUCTORS}.md").unlink(missing_ok=True)
        (out / "_toc.yml").write_text(student_toc((out / "_toc.yml").read_text(encoding="utf-8")), encoding="utf-8")
        unlinked = sum(unlink_file(p) for p in sorted([*out.rglob("*.md"), *out.rglob("*.ipynb")]))
        print(f"{INSTRUCTORS}.md left out ({unlinked} link(s) to it made plain text; --with-instructors keeps it)")
    (out / "_config.yml").write_text(student_config((ROOT / "_config.yml").read_text()))
    total = 0
    for nb in sorted([*(out / "notebooks").glob("*.ipynb"), *(out / "book").glob("*.ipynb")]):  # chapters, pages
        n = strip_notebook(nb)
        total += n
        print(f"{nb.name}: {n} solution(s) removed")
    print(f"student sources in {out} ({total} solutions removed)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("target", help="the folder to write, inside the repository's build folder")
    parser.add_argument("--with-instructors", action="store_true",
                        help="keep the instructors' page, with its model answers, and the links to it")
    args = parser.parse_args()
    main(args.target, with_instructors=args.with_instructors)
