"""Make the source tree of the student edition: the book without exercise solutions.

Usage (what `make book-student` runs):

    python tools/student_edition.py _build/student_src

copies `_toc.yml`, `book/`, `notebooks/` and `assets/` into the target folder, writes a `_config.yml` that renders
the committed outputs (no execution) with sphinx-exercise's `hide_solutions: true`, and rewrites the copied
notebooks (the chapters, and the executed pages of `book/` such as the scaling-out page) with the same
transformation as the assignments (`tools/assignments.py`, one source of truth):

* a `{solution}` directive (backtick or colon fence) is cut out of its markdown cell (text solutions);
* a gated solution, from the cell holding `{solution-start}` to the cell holding `{solution-end}`, is dropped
  with its text and code, except that the exercise's **stubs** take the place of the marked solution cells and
  its **public checks** are shown (without output), so a student who downloads the page's notebook can work the
  exercise and check the answer; hidden tests are left out.

sphinx-exercise's own `hide_solutions` option drops plain `{solution}` blocks but cannot remove the code cells of
a gated solution (and fails on the leftover `solution-end`), hence this copy. The downloadable notebooks of the
student site are the rewritten copies too.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from assignments import split_at, strip_solution_blocks, student_notebook  # noqa: E402,F401  (re-exported)

ROOT = Path(__file__).resolve().parent.parent
COPY = ["_toc.yml", "book", "notebooks", "assets", "student"]


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
    for nb in sorted([*(out / "notebooks").glob("*.ipynb"), *(out / "book").glob("*.ipynb")]):  # chapters, pages
        n = strip_notebook(nb)
        total += n
        print(f"{nb.name}: {n} solution(s) removed")
    print(f"student sources in {out} ({total} solutions removed)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
