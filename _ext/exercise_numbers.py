"""Sphinx extension: exercises numbered per chapter ("Exercise 3.2"), not across the whole book ("Exercise 12").

sphinx-exercise numbers its ``{exercise}`` directives with Sphinx's figure numbering (``numfig``). The book's
table of contents is not numbered (the chapters carry their numbers in their titles), so Sphinx counts exercises
across every page: chapter 3's first exercise was "Exercise 12", and a student could not tell from the number
which chapter it belongs to.

After Sphinx has assigned its numbers (``env-get-updated``, :func:`renumber`), this extension replaces each
page's exercise numbers with ``(chapter, k)``: the chapter is the ``NN`` of ``notebooks/NN_name``, and ``k``
counts the page's exercises from 1 in the order Sphinx numbered them (the order of the page). A page outside
the numbered chapters (``book/distributed.md``) gets a letter instead of a chapter number (:data:`PAGE_PREFIX`,
else the upper-cased first letter of the file name). Titles and ``{numref}`` references then read
"Exercise 3.2", "Exercise D.1". The student notebooks (``tools/student_notebooks.py``) number exercises the same
way.
"""
from __future__ import annotations

import re

#: The figure type sphinx-exercise registers its exercise nodes under.
FIGTYPE = "exercise"
#: Pages outside the numbered chapters whose exercises get a letter: docname -> prefix.
PAGE_PREFIX = {"book/distributed": "D"}
CHAPTER = re.compile(r"^notebooks/(\d+)_")


def page_prefix(docname: str) -> str:
    """The first part of an exercise number on a page: its chapter number, or a letter for other pages.

    >>> page_prefix("notebooks/03_ffn_residual_layernorm"), page_prefix("book/distributed")
    ('3', 'D')
    """
    m = CHAPTER.match(docname)
    if m:
        return str(int(m.group(1)))
    return PAGE_PREFIX.get(docname, docname.rsplit("/", 1)[-1][:1].upper())


def renumber(toc_fignumbers: dict) -> list[str]:
    """Replace each page's exercise numbers by ``(prefix, k)``, in place; return the pages changed.

    Args:
        toc_fignumbers: Sphinx's ``env.toc_fignumbers``: ``{docname: {figtype: {node_id: (n, ...)}}}``.
    """
    changed = []
    for docname, per_type in toc_fignumbers.items():
        numbers = per_type.get(FIGTYPE)
        if not numbers:
            continue
        prefix = page_prefix(docname)
        order = sorted(numbers, key=lambda node_id: numbers[node_id])
        new = {node_id: (prefix, k) for k, node_id in enumerate(order, start=1)}
        if new != numbers:
            per_type[FIGTYPE] = new
            changed.append(docname)
    return changed


def _renumber(app, env) -> list[str]:
    return renumber(env.toc_fignumbers)


def setup(app):
    # After Sphinx's own TocTreeCollector (priority 500) has assigned the global numbers.
    app.connect("env-get-updated", _renumber, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
