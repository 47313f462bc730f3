"""Sphinx extension: the student notebooks behind the download and Colab buttons.

A chapter's source notebook holds its solutions, hidden tests and MyST markup; a student who downloads the page's
notebook or opens it in Colab gets the copy in ``student/`` instead (``tools/student_notebooks.py``, committed so that
Colab can open it from GitHub). :func:`point_to_student_notebooks` rewrites the theme's two buttons on each chapter
page (the ".ipynb" download to ``_static/student/NN_name.ipynb``, the Colab link to ``.../blob/BRANCH/student/...``),
and the notebooks are copied into ``_static/student/``.
"""
from __future__ import annotations

import shutil
from pathlib import Path

STUDENT_DIR = "student"


def point_to_student_notebooks(buttons: list, name: str, download_url: str) -> int:
    """Point the header's ".ipynb" download and Colab buttons (sphinx-book-theme's ``context["header_buttons"]``,
    groups nesting theirs in ``"buttons"``) at the student notebook ``name`` (``NN_name.ipynb``, downloaded from the
    page-relative ``download_url``); returns how many were rewritten (2 on a chapter page)."""
    changed = 0
    for button in buttons:
        changed += point_to_student_notebooks(button.get("buttons", []), name, download_url)
        url = button.get("url", "")
        if button.get("label", "").startswith("download-") and url.endswith(f"/notebooks/{name}"):
            button["url"] = download_url  # the theme's ".ipynb" button of a notebook page (its source file)
            changed += 1
        elif button.get("text") == "Colab" and url.endswith(f"/notebooks/{name}"):
            button["url"] = url[: -len(f"notebooks/{name}")] + f"{STUDENT_DIR}/{name}"
            changed += 1
    return changed


def _student_buttons(app, pagename, templatename, context, doctree) -> None:
    name = pagename.rsplit("/", 1)[-1] + ".ipynb"
    if not pagename.startswith("notebooks/") or not (Path(app.srcdir) / STUDENT_DIR / name).is_file():
        return
    point_to_student_notebooks(context.get("header_buttons", []), name,
                               context["pathto"](f"_static/{STUDENT_DIR}/{name}", 1))


def _ship_student_notebooks(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source, target = Path(app.srcdir) / STUDENT_DIR, Path(app.outdir) / "_static" / STUDENT_DIR
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for path in sorted(source.glob("*.ipynb")):
        shutil.copy2(path, target / path.name)


def setup(app):
    app.connect("html-page-context", _student_buttons, priority=600)  # after the theme's own buttons (501)
    app.connect("build-finished", _ship_student_notebooks)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
