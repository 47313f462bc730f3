"""Sphinx extension: notebook outputs stay offline.

bertviz's views (``head_view``, ``model_view``) put a loader into their output::

    <script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"></script>

The site does not need it: d3, jQuery and a RequireJS stand-in (``assets/js/require-shim.js``) are served by the site
and answer bertviz's ``requirejs(["jquery", "d3"], ...)`` (a real RequireJS would leave the stand-in alone). The tag
only costs a request to a third party and, offline, a console error. :func:`strip_remote_loaders` removes such tags
from the HTML outputs of every page (``nodes.raw`` of format ``html``); the notebooks keep them, for Jupyter and
Colab. Found by the browser test (``tests/test_browser.py``).
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
    """``(html without remote RequireJS loader tags, number of tags removed)`` for an HTML fragment."""
    return REQUIREJS_LOADER.subn("", html)


def _strip_doctree(app, doctree, docname) -> None:
    for node in list(doctree.findall(nodes.raw)):
        if "html" not in node.get("format", "").split():
            continue
        new, n = strip_remote_loaders(node.astext())
        if n:
            node.clear()
            node += nodes.Text(new)
            node.rawsource = new


def setup(app):
    app.connect("doctree-resolved", _strip_doctree)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
