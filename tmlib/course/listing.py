"""Show the source of the code a chapter teaches, read from the library when the notebook runs.

A chapter that prints a class or function with :func:`show_source` shows exactly the code that runs: the listing
is produced from the live source at execution time, so it cannot drift from the library.
"""
from __future__ import annotations

import inspect
import textwrap


class Listing:
    """Source code for a notebook: shown highlighted on the page, as plain text everywhere else.

    Its plain-text form is the code itself, and its HTML form colours it with inline styles (no style sheet is
    repeated in every output), so a listing costs a few kilobytes in the notebook.

    Attributes:
        code: the source text.
    """

    def __init__(self, code: str):
        self.code = code

    def __repr__(self) -> str:
        return self.code

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        return highlight(self.code, PythonLexer(), HtmlFormatter(noclasses=True, nobackground=True))


def show_source(obj, *, start: str | None = None) -> Listing:
    """The source of ``obj`` (a class, function or method), syntax-highlighted in the notebook and on the page.

    Args:
        obj: anything :func:`inspect.getsource` accepts: a class, function, method or module.
        start: optional text of the first line to show (for example ``"def forward"``): the listing then
            starts at the first line containing it, to show one method of a long class.

    Returns:
        a :class:`Listing`; its plain-text form is the source itself.

    Raises:
        TypeError: ``obj`` has no Python source (a built-in, for example).
        ValueError: ``start`` does not occur in the source.
    """
    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError) as err:
        raise TypeError(f"no Python source for {obj!r}: {err}") from None
    if start is not None:
        lines = source.splitlines(keepends=True)
        hits = [i for i, line in enumerate(lines) if start in line]
        if not hits:
            raise ValueError(f"{start!r} does not occur in the source of {obj!r}")
        source = "".join(lines[hits[0]:])
    return Listing(textwrap.dedent(source).rstrip("\n"))
