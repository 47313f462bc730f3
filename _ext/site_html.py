"""Sphinx extension: small fixes to the HTML of the course site, most found by the browser test
(`tests/test_browser.py`, headless Chromium). Enabled in `_config.yml` (``sphinx.local_extensions``).

1. **Notebook outputs stay offline.** bertviz's views (``head_view``, ``model_view``) put a loader into their
   output, whether shown in the notebook or returned with ``html_action="return"``::

       <script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"></script>

   The site does not need it: d3, jQuery and a RequireJS stand-in (``assets/js/require-shim.js``) are served by
   the site itself and answer bertviz's ``requirejs(["jquery", "d3"], ...)``; a real RequireJS arriving from the
   CDN would not even replace the stand-in (RequireJS leaves an existing ``requirejs`` function alone). The tag
   only costs a request to a third party and, offline, a console error. :func:`strip_remote_loaders` removes such
   tags from the HTML outputs of every page (``nodes.raw`` of format ``html``: MyST-NB's ``text/html`` and
   ``application/javascript`` outputs). The notebooks keep them, for Jupyter and Colab.

2. **Each inline script once.** Sphinx 7.x writes an inline script (``add_js_file(None, body=...)``) twice when an
   extension adds it after the builder started (sphinx-thebe and sphinx-togglebutton do): the builder's copy has
   ``filename=None``, the copy re-added from the registry in ``prepare_writing`` has ``filename=""``, so the two
   are not recognised as equal. The second ``const THEBE_JS_URL = ...`` then throws "Identifier 'THEBE_JS_URL'
   has already been declared" on every page. :func:`dedupe_scripts` keeps the first of equal scripts.

3. **The translator's model files.** The translator page (``assets/js/translator.js``) reads its model from
   ``_static/translator/``. The files are built, not committed (``make web-model``, ``tools/export_web_model.py``):
   :func:`ship_web_model` copies them from ``$TM_WEB_MODEL_DIR`` (default ``_build/web_model`` beside the book's
   sources) into the built site. Without them it writes a ``model.json`` that says how to build them, so the
   widget shows that one line instead of requesting files that are not there.

4. **The student notebooks behind the download and Colab buttons.** A chapter's source notebook holds its
   solutions, hidden tests and MyST markup; a student who downloads the page's notebook or opens it in Colab gets
   the copy in ``student/`` instead (``tools/student_notebooks.py``, committed so that Colab can open it from
   GitHub). :func:`point_to_student_notebooks` rewrites the theme's two buttons on each chapter page (the
   ".ipynb" download to ``_static/student/NN_name.ipynb``, the Colab link to ``.../blob/BRANCH/student/...``)
   and :func:`_ship_student_notebooks` copies the notebooks into ``_static/student/``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from docutils import nodes

#: The files of an exported model (tools/export_web_model.py), all of which the translator page needs.
WEB_MODEL_FILES = ("model.json", "tokenizer.json", "encoder.onnx", "decoder.onnx")
MISSING_MODEL_MESSAGE = ("The translator's model is not part of this build: run `make web-model` (after `make book` "
                         "has trained the model) and build the site again.")

#: A ``<script src=".../require(.min).js"></script>`` tag loading RequireJS from a remote host.
REQUIREJS_LOADER = re.compile(
    r"""<script\b[^>]*\bsrc\s*=\s*["'](?:https?:)?//[^"']*/require(?:\.min)?\.js(?:\?[^"']*)?["'][^>]*>\s*</script>\s*""",
    re.IGNORECASE,
)


def strip_remote_loaders(html: str) -> tuple[str, int]:
    """Remove remote RequireJS loader tags from an HTML fragment.

    Args:
        html: an HTML fragment (a notebook output).

    Returns:
        ``(html without the tags, number of tags removed)``.
    """
    return REQUIREJS_LOADER.subn("", html)


def _script_key(js) -> tuple:
    if isinstance(js, str):
        return (js,)
    attributes = getattr(js, "attributes", {}) or {}
    return (getattr(js, "filename", None) or "", getattr(js, "priority", None),
            tuple(sorted((k, str(v)) for k, v in attributes.items())))


def dedupe_scripts(scripts: list) -> list:
    """The scripts of a page without repeats (``None`` and ``""`` file names count as the same inline script),
    in their first order."""
    seen, out = set(), []
    for js in scripts:
        key = _script_key(js)
        if key not in seen:
            seen.add(key)
            out.append(js)
    return out


def _strip_doctree(app, doctree, docname) -> None:
    for node in list(doctree.findall(nodes.raw)):
        if "html" not in node.get("format", "").split():
            continue
        new, n = strip_remote_loaders(node.astext())
        if n:
            node.clear()
            node += nodes.Text(new)
            node.rawsource = new


def _dedupe_page_scripts(app, pagename, templatename, context, doctree) -> None:
    if context.get("script_files"):
        context["script_files"] = dedupe_scripts(context["script_files"])


def ship_web_model(source: Path | None, static_dir: Path) -> bool:
    """Copy the exported model from ``source`` into ``static_dir/translator/``; without a complete export there,
    write a ``model.json`` with ``"missing": true`` and :data:`MISSING_MODEL_MESSAGE` instead.

    Returns:
        whether the model was shipped.
    """
    target = Path(static_dir) / "translator"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    if source is not None and all((Path(source) / name).is_file() for name in WEB_MODEL_FILES):
        for name in WEB_MODEL_FILES:
            shutil.copy2(Path(source) / name, target / name)
        return True
    (target / "model.json").write_text(json.dumps({"missing": True, "message": MISSING_MODEL_MESSAGE}) + "\n")
    return False


def _ship_web_model(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source = Path(os.environ.get("TM_WEB_MODEL_DIR") or Path(app.srcdir) / "_build" / "web_model")
    if not source.is_absolute():
        source = Path(app.srcdir) / source
    shipped = ship_web_model(source, Path(app.outdir) / "_static")
    print(f"site_html: translator model {'copied from ' + str(source) if shipped else 'missing (' + str(source) + ')'}")


STUDENT_DIR = "student"


def point_to_student_notebooks(buttons: list, name: str, download_url: str) -> int:
    """Point the header's ".ipynb" download and Colab launch buttons at the student notebook ``name``.

    Args:
        buttons: sphinx-book-theme's ``context["header_buttons"]`` (dicts, groups nest theirs in ``"buttons"``).
        name: the notebook's file name, ``NN_name.ipynb``.
        download_url: the page-relative address of the copy in ``_static/student/``.

    Returns:
        how many buttons were rewritten (2 on a chapter page with both buttons).
    """
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
    app.connect("doctree-resolved", _strip_doctree)
    app.connect("html-page-context", _dedupe_page_scripts)
    app.connect("build-finished", _ship_web_model)
    # After the theme's own header buttons (priority 501).
    app.connect("html-page-context", _student_buttons, priority=600)
    app.connect("build-finished", _ship_student_notebooks)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
