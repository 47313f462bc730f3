"""Make the source tree of the student edition: the book without exercise solutions.

Usage (what `make book-student` runs):

    python tools/student_edition.py _build/student_src

copies `_toc.yml`, `book/`, `notebooks/` and `assets/` into the target folder, writes a `_config.yml` that renders
the committed outputs (no execution) with sphinx-exercise's `hide_solutions: true`, and removes every solution
from the copied notebooks:

* a `{solution}` directive (backtick or colon fence) is cut out of its markdown cell;
* a gated solution, from the cell holding `{solution-start}` to the cell holding `{solution-end}`, is dropped
  whole, code cells included.

sphinx-exercise's own `hide_solutions` option drops plain `{solution}` blocks but cannot remove the code cells of
a gated solution (and fails on the leftover `solution-end`), hence this copy. The downloadable notebooks of the
student site are the stripped copies too.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
COPY = ["_toc.yml", "book", "notebooks", "assets"]
FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})\{(?P<name>[a-z-]+)\}")


def strip_solution_blocks(text: str) -> str:
    """Remove `{solution}` fenced blocks (``` or :::) from a markdown string."""
    out, lines, i = [], text.splitlines(keepends=True), 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if m and m.group("name") == "solution":
            fence = m.group("fence")
            i += 1
            while i < len(lines) and lines[i].strip() != fence:
                i += 1
            i += 1  # skip the closing fence
            continue
        out.append(lines[i])
        i += 1
    return "".join(out)


def split_at(source: str, name: str) -> tuple[str, str]:
    """Split a markdown cell around the fenced `{name}` directive: (text before it, text after it)."""
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = FENCE_OPEN.match(line)
        if m and m.group("name") == name:
            j = i + 1
            while j < len(lines) and lines[j].strip() != m.group("fence"):
                j += 1
            return "".join(lines[:i]), "".join(lines[j + 1:])
    return source, ""


def directive_names(source: str) -> set[str]:
    return {m.group("name") for m in map(FENCE_OPEN.match, source.splitlines()) if m}


def strip_notebook(path: Path) -> int:
    """Strip solutions from one notebook in place; return how many solutions were removed."""
    nb = nbformat.read(path, as_version=4)
    kept, removed, inside = [], 0, False
    for cell in nb.cells:
        names = directive_names(cell.source) if cell.cell_type == "markdown" else set()
        if "solution-start" in names:
            if inside:
                raise ValueError(f"{path}: solution-start inside another gated solution")
            inside, removed = True, removed + 1
            before = split_at(cell.source, "solution-start")[0]
            if before.strip():  # text before the solution (e.g. the exercise itself) stays
                kept.append(nbformat.v4.new_markdown_cell(before))
        if inside:
            if "solution-end" in names:
                inside = False
                after = split_at(cell.source, "solution-end")[1]
                if after.strip():  # text after the closing fence stays
                    kept.append(nbformat.v4.new_markdown_cell(after))
            continue
        if "solution" in names:
            cell.source = strip_solution_blocks(cell.source)
            removed += 1
            if not cell.source.strip():
                continue
        kept.append(cell)
    if inside:
        raise ValueError(f"{path}: solution-start without solution-end")
    nb.cells = kept
    nbformat.write(nb, path)
    return removed


def student_config(text: str) -> str:
    """The site configuration with execution off and solutions hidden."""
    for old, new in [("  execute_notebooks: cache\n", '  execute_notebooks: "off"\n'),
                     ("    hide_solutions: false\n", "    hide_solutions: true\n")]:
        if old not in text:
            raise ValueError(f"_config.yml lacks the line {old.strip()!r}")
        text = text.replace(old, new)
    return text


def main(target: str) -> None:
    out = Path(target).resolve()
    if out == ROOT or ROOT not in out.parents:
        raise SystemExit(f"refusing to write outside the repository's build folder: {out}")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, out / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        elif src.exists():
            shutil.copy2(src, out / name)
    (out / "_config.yml").write_text(student_config((ROOT / "_config.yml").read_text()))
    total = 0
    for nb in sorted((out / "notebooks").glob("*.ipynb")):
        n = strip_notebook(nb)
        total += n
        print(f"{nb.name}: {n} solution(s) removed")
    print(f"student sources in {out} ({total} solutions removed)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
