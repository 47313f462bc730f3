"""Sphinx extension: two small fixes to the HTML of the course site, found by the browser test
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
"""
from __future__ import annotations

import re

from docutils import nodes

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


def setup(app):
    app.connect("doctree-resolved", _strip_doctree)
    app.connect("html-page-context", _dedupe_page_scripts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
