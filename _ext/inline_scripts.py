"""Sphinx extension: each inline script once.

Sphinx 7.x writes an inline script (``add_js_file(None, body=...)``) twice when an extension adds it after the builder
started (sphinx-thebe and sphinx-togglebutton do): the builder's copy has ``filename=None``, the copy re-added from the
registry in ``prepare_writing`` has ``filename=""``, so the two are not recognised as equal, and the second
``const THEBE_JS_URL = ...`` throws "Identifier 'THEBE_JS_URL' has already been declared" on every page.
:func:`dedupe_scripts` keeps the first of equal scripts. Found by the browser test (``tests/test_browser.py``).
"""
from __future__ import annotations


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


def _dedupe_page_scripts(app, pagename, templatename, context, doctree) -> None:
    if context.get("script_files"):
        context["script_files"] = dedupe_scripts(context["script_files"])


def setup(app):
    app.connect("html-page-context", _dedupe_page_scripts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
