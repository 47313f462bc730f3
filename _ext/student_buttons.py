"""Sphinx extension: the student notebooks behind the download and Colab buttons.

A chapter's source notebook holds its solutions, hidden tests and MyST markup; a student who downloads the page's
notebook or opens it in Colab gets the copy in ``student/`` instead (``tools/student_notebooks.py``, committed so that
Colab can open it from GitHub). The same holds for a page of ``book/`` that is a notebook with a student copy
(``book/distributed.ipynb`` -> ``student/distributed.ipynb``). :func:`point_to_student_notebooks` rewrites the
theme's two buttons on each such page (the ".ipynb" download to ``_static/student/NAME.ipynb``, the Colab link to
``.../blob/BRANCH/student/NAME.ipynb``), and the notebooks are copied into ``_static/student/``.
"""
from __future__ import annotations

import shutil
from pathlib import Path

STUDENT_DIR = "student"


def point_to_student_notebooks(buttons: list, name: str, download_url: str, folder: str = "notebooks") -> int:
    """Point the header's ".ipynb" download and Colab buttons (sphinx-book-theme's ``context["header_buttons"]``,
    groups nesting theirs in ``"buttons"``) of the page whose source is ``folder/name`` (``notebooks/NN_name.ipynb``,
    ``book/distributed.ipynb``) at the student notebook ``name``, downloaded from the page-relative
    ``download_url``; returns how many were rewritten (2 on a page with a student notebook)."""
    changed, source = 0, f"{folder}/{name}"
    for button in buttons:
        changed += point_to_student_notebooks(button.get("buttons", []), name, download_url, folder)
        url = button.get("url", "")
        if button.get("label", "").startswith("download-") and url.endswith(f"/{source}"):
            button["url"] = download_url  # the theme's ".ipynb" button of a notebook page (its source file)
            changed += 1
        elif button.get("text") == "Colab" and url.endswith(f"/{source}"):
            button["url"] = url[: -len(source)] + f"{STUDENT_DIR}/{name}"
            changed += 1
    return changed


def _student_buttons(app, pagename, templatename, context, doctree) -> None:
    """A chapter page (``notebooks/``) or a notebook page of ``book/`` whose student copy exists."""
    folder, _, stem = pagename.rpartition("/")
    name = stem + ".ipynb"
    if folder not in ("notebooks", "book") or not (Path(app.srcdir) / folder / name).is_file() \
            or not (Path(app.srcdir) / STUDENT_DIR / name).is_file():
        return
    point_to_student_notebooks(context.get("header_buttons", []), name,
                               context["pathto"](f"_static/{STUDENT_DIR}/{name}", 1), folder)


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
