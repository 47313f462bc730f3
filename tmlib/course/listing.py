"""Show the source of the code a chapter teaches, read from the library when the notebook runs.

A chapter that prints a class or function with :func:`show_source` shows exactly the code that runs: the listing
is produced from the live source at execution time, so it cannot drift from the library. Docstrings are folded to
their first line and linters' ``# noqa`` markers are left out, so that a listing is code. The library marks the
statements that the paper's equations do not need (argument checks, caches) with a comment
``# [not in the paper] what it does``; ``paper=True`` folds each of them into that one comment line, so that the
listing shows the equation.
"""
from __future__ import annotations

import ast
import inspect
import io
import re
import textwrap
import tokenize

ASIDE = "[not in the paper]"  # the mark of a statement that paper=True folds


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


def show_source(obj, *, start: str | None = None, end: str | None = None, full_docstrings: bool = False,
                paper: bool = False) -> Listing:
    """The source of ``obj`` (a class, function, method or module), highlighted, each docstring folded to its first
    line and ``…`` (``full_docstrings=True``: as written). ``start``: show from the first line containing it;
    ``end``: stop before the next line containing it (some methods of a long class). ``paper``: each statement
    marked ``# [not in the paper] what`` (on its first line, or on a comment line just above it) folded into one
    line ``# … what`` (:func:`fold_asides`). Linters' ``# noqa`` markers are left out (:func:`strip_lint_markers`).

    Raises:
        TypeError: ``obj`` has no Python source (a built-in, for example).
        ValueError: ``start`` or ``end`` does not occur in the source (``end`` after ``start``).
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
    if end is not None:
        lines = source.splitlines(keepends=True)
        hits = [i for i, line in enumerate(lines) if end in line and i > 0]
        if not hits:
            raise ValueError(f"{end!r} does not occur in the source of {obj!r} after its first line")
        source = "".join(lines[:hits[0]])
    source = strip_lint_markers(textwrap.dedent(source).rstrip("\n"))
    source = source if full_docstrings else fold_docstrings(source)
    return Listing(fold_asides(source) if paper else source)


_NOQA = re.compile(r"\s*#\s*noqa\b(?::\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?\s*(?:-\s*)?")


def strip_lint_markers(source: str) -> str:
    """``source`` without linters' ``# noqa`` markers: a comment ``# why  # noqa: E731`` keeps ``# why``, a comment
    ``# noqa: E731 - why`` becomes ``# why``, and a bare ``# noqa`` goes with the spaces before it. Only comments are
    touched (a string that contains ``# noqa`` stays); ``source`` itself if it does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError):
        return source
    lines = source.split("\n")
    for tok in tokens:
        marker = _NOQA.search(tok.string) if tok.type == tokenize.COMMENT else None
        if marker is None:
            continue
        before, why = tok.string[:marker.start()].rstrip(), tok.string[marker.end():].strip()
        comment = " - ".join(part for part in (before, why) if part and part != "#")
        comment = comment if not comment or comment.startswith("#") else f"# {comment}"
        row, col = tok.start
        lines[row - 1] = (lines[row - 1][:col] + comment).rstrip()
    return "\n".join(lines)


def fold_asides(source: str) -> str:
    """``source`` with each statement marked ``# [not in the paper] what`` folded into one comment line ``# … what``
    at its indentation (a compound statement with its whole block; neighbours with the same text into one line).
    The mark sits on the statement's first line or alone on the line above it. ``source`` itself if it does not
    parse."""
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError):
        return source
    lines = source.split("\n")
    marks = {}  # line number -> (what, whether the comment stands alone on its line)
    for tok in tokens:
        if tok.type == tokenize.COMMENT and ASIDE in tok.string:
            what = tok.string.split(ASIDE, 1)[1].strip()
            marks[tok.start[0]] = (what, not lines[tok.start[0] - 1][:tok.start[1]].strip())
    statements = sorted((node for node in ast.walk(tree) if isinstance(node, ast.stmt)),
                        key=lambda node: (node.lineno, -node.end_lineno))
    folded: list[tuple[int, int, int, str]] = []  # (first line, last line, indentation, what)
    for node in statements:  # the outermost statement that starts on a marked line, or below a marked comment
        first = node.lineno
        above = first - 1 if marks.get(first - 1, ("", False))[1] else None
        if (first not in marks and above is None) or (folded and first <= folded[-1][1]):
            continue
        what = marks[first][0] if first in marks else marks[above][0]
        span = (above or first, node.end_lineno, node.col_offset, what)
        if folded and folded[-1][2:] == span[2:] and span[0] == folded[-1][1] + 1:
            span = (folded.pop()[0], *span[1:])  # the next line, the same text: one line for both
        folded.append(span)
    for first, last, col, what in reversed(folded):
        lines[first - 1:last] = [" " * col + f"# … {what}"]
    return "\n".join(lines)


def fold_docstrings(source: str) -> str:
    """``source`` with every docstring of more than one line cut to its first line of text and ``…``; ``source``
    itself if it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.split("\n")
    spans = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            doc = body[0]
            if (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)
                    and doc.end_lineno > doc.lineno):
                spans.append((doc.lineno, doc.end_lineno, doc.col_offset))
    for first, last, col in sorted(spans, reverse=True):
        opening = lines[first - 1]
        quote = '"""' if '"""' in opening else "'''"
        text = opening[opening.index(quote) + 3:].strip() or lines[first].strip()  # the first line of text
        lines[first - 1:last] = [f"{opening[:col]}{opening[col:opening.index(quote)]}{quote}{text} …{quote}"]
    return "\n".join(lines)


def glue(name: str, value) -> None:
    """Record ``value`` (a number already formatted as text) under ``name`` for the page's prose, where
    ``{glue:text}`name``` shows it: myst-nb's ``glue`` without displaying it, and nothing outside a site build
    (without myst-nb, e.g. in Colab)."""
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    myst_glue(name, value, display=False)
