"""The MyST structure of a Markdown cell, read with markdown-it-py (the parser MyST itself is built on).

``tools/assignments.py`` and ``tools/student_notebooks.py`` rewrite chapter cells line by line: they need where each
directive (```` ```{name} arg ```` or ``:::{name}``) opens and closes, its options and body, the targets
``(label)=``, the headings, the raw HTML blocks, and where each role ``{name}`content``` sits in the source. The
parser finds them as MyST does (a role inside a code span or a fenced code block is not a role; a fence closes
where CommonMark says), and :func:`role_spans` maps each role back to its character offsets so that the text
around it is kept as written. Options are read by MyST's own option parser (``myst_parser``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from mdit_py_plugins.colon_fence import colon_fence_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.myst_blocks import myst_block_plugin
from mdit_py_plugins.myst_role import myst_role_plugin
from mdit_py_plugins.myst_role.index import myst_role
from myst_parser.parsers.options import TokenizeError, options_to_items


def _recording_role(state, silent: bool) -> bool:
    """MyST's role rule, which also records where the role starts and ends in the inline source."""
    start = state.pos
    if not myst_role(state, silent):
        return False
    if not silent:
        state.tokens[-1].meta["span"] = (start, state.pos)
    return True


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark").use(myst_role_plugin).use(myst_block_plugin).use(colon_fence_plugin)
    md.use(dollarmath_plugin)
    md.inline.ruler.at("myst_role", _recording_role)
    return md


MD = _parser()


@dataclass
class Directive:
    """A fenced directive: ``lines[start:end]`` of its source hold it, fences included."""
    name: str
    arg: str
    options: dict[str, str]
    body: str
    start: int
    end: int
    fence: str
    indent: str = ""


@dataclass
class Role:
    """A role ``{name}`content``` at ``source[start:end]``."""
    name: str
    content: str
    start: int
    end: int


@dataclass
class Outline:
    """The MyST structure of one Markdown text, in source order (see the module docstring)."""
    directives: list[Directive] = field(default_factory=list)
    targets: list[tuple[str, int]] = field(default_factory=list)         # (label, line)
    headings: list[tuple[int, str, int]] = field(default_factory=list)  # (level, title, line)
    html_lines: set[int] = field(default_factory=set)
    blocks: list[tuple[str, int]] = field(default_factory=list)         # (kind, first line) of every top block


def split_options(content: str) -> tuple[dict[str, str], str]:
    """A directive body's leading ``:key: value`` lines as a dict (MyST's option parser), and the rest.

    Raises:
        ValueError: options MyST cannot read.
    """
    lines = content.splitlines()
    k = 0
    while k < len(lines) and lines[k].lstrip().startswith(":"):
        k += 1
    if not k:
        return {}, content
    try:
        items, _ = options_to_items("\n".join(line.lstrip()[1:] for line in lines[:k]))
    except TokenizeError as err:
        raise ValueError(f"directive options MyST cannot read: {err.problem}") from None
    return {key: str(value).strip() for key, value in items}, "\n".join(lines[k:])


def _directive(token, lines: list[str]) -> Directive | None:
    info = token.info.strip()
    if not info.startswith("{") or "}" not in info:
        return None
    name, arg = info[1:info.index("}")], info[info.index("}") + 1:].strip()
    start, end = token.map
    closing = lines[end - 1].strip() if end - 1 > start and end - 1 < len(lines) else ""
    if not (closing.startswith(token.markup) and set(closing) == {token.markup[0]}):
        raise ValueError(f"the {{{name}}} block has no closing {token.markup}")
    options, body = split_options(token.content)
    first = lines[start]
    return Directive(name, arg, options, body, start, end, token.markup, first[:len(first) - len(first.lstrip())])


def outline(source: str) -> Outline:
    """Parse ``source`` (see :class:`Outline`). Raises ``ValueError`` for a directive without its closing fence or
    with options MyST cannot read."""
    lines = source.splitlines()
    out = Outline()
    tokens = MD.parse(source)
    for i, token in enumerate(tokens):
        if token.level == 0 and token.map and token.nesting >= 0:
            out.blocks.append((token.type, token.map[0]))
        if token.type in ("fence", "colon_fence"):
            d = _directive(token, lines)
            if d is not None:
                out.directives.append(d)
        elif token.type == "myst_target":
            out.targets.append((token.content, token.map[0]))
        elif token.type == "heading_open":
            out.headings.append((int(token.tag[1]), tokens[i + 1].content.strip(), token.map[0]))
        elif token.type == "html_block":
            out.html_lines.update(range(*token.map))
    return out


def directives(source: str, *, nested: bool = False) -> list[Directive]:
    """The directives of ``source`` (with ``nested``, also those inside their bodies, with lines of the body)."""
    found = outline(source).directives
    if not nested:
        return found
    return [x for d in found for x in [d, *directives(d.body, nested=True)]]


def role_spans(source: str) -> list[Role]:
    """Every role of ``source`` (outside code spans, code blocks and maths) with its offsets into ``source``.

    Raises:
        ValueError: a role the parser saw but whose text cannot be found where it should be.
    """
    starts, pos = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    starts.append(pos)
    found = []
    for token in MD.parse(source):
        if token.type != "inline" or not token.children or not token.map:
            continue
        cursor = starts[token.map[0]]
        limit = starts[min(token.map[1], len(starts) - 1)]
        for child in token.children:
            if child.type != "myst_role":
                continue
            a, b = child.meta["span"]
            literal = token.content[a:b]
            at = source.find(literal, cursor, limit)
            if at < 0:
                raise ValueError(f"cannot locate the role {literal!r} in its paragraph")
            found.append(Role(child.meta["name"], child.content, at, at + len(literal)))
            cursor = at + len(literal)
    return found
