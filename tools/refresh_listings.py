"""Refresh the outputs of the chapters' code listings (cells calling ``show_source``) without re-executing the
chapters.

    python tools/refresh_listings.py notebooks/09_training_translator.ipynb ...   # default: every notebook

A listing shows the live source of a library function, and the page checks that its stored output equals that
source. After a change to library code that a chapter lists, chapters that train for minutes (9, 10, 12) need not
run again: this script runs each listing cell alone (after the notebook's import lines) and stores its output.
It changes nothing else in the notebook.
"""
from __future__ import annotations

import ast
import contextlib
import io
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent


def _import_lines(nb) -> str:
    """The notebook's top-level import statements, in order (they define the names a listing cell uses)."""
    lines = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        lines += [ast.get_source_segment(cell.source, node) for node in tree.body
                  if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(lines)


def refresh(path: Path) -> int:
    """Re-run the listing cells of one notebook; returns how many outputs changed."""
    nb = nbformat.read(path, as_version=4)
    namespace: dict = {}
    exec(_import_lines(nb), namespace)
    changed = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or "show_source(" not in cell.source:
            continue
        tree = ast.parse(cell.source)
        last = tree.body[-1]
        if not (isinstance(last, ast.Expr) and "show_source(" in ast.get_source_segment(cell.source, last)):
            raise ValueError(f"{path.name}: a listing cell ends with a show_source(...) expression, got:\n{cell.source}")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):  # statements before the listing (a print, say)
            exec(compile(ast.Module(tree.body[:-1], type_ignores=[]), path.name, "exec"), namespace)
        listing = eval(compile(ast.Expression(last.value), path.name, "eval"), namespace)
        outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed.getvalue())] if printed.getvalue() else []
        outputs.append(nbformat.v4.new_output("execute_result", data={"text/plain": repr(listing),
                                                                      "text/html": listing._repr_html_()},
                                              execution_count=cell.execution_count))
        if [dict(o) for o in cell.outputs] != [dict(o) for o in outputs]:
            cell.outputs = outputs
            changed += 1
    if changed:
        path.write_text(nbformat.writes(nb) + "\n")
    return changed


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        print(f"{path.name}: {refresh(path)} listing(s) refreshed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
