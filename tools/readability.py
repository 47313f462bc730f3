"""How quickly a reader reaches the computation: two measures of Python source, read with ``ast`` and ``tokenize``.

* **Header to first computation** of a unit: for a function, the line of its first statement that computes minus
  the line of its ``def``; for a class, the same counted from the ``class`` line to the first computing statement
  of its ``forward`` (or ``__call__``). Not computing: the docstring, ``assert``, an ``if`` whose body only
  raises, and a call (or an assignment from a call) to a function whose name starts with ``check`` or
  ``_check``. (Issue 25's table: the Annotated Transformer's ``attention`` gives 2, its ``MultiHeadedAttention``
  14, its ``EncoderDecoder`` 16.)
* **Docstring-to-code ratio**: lines inside docstrings (module, class, function) per line of code (a line with a
  token that is neither a comment nor part of a docstring), per subpackage of ``tmlib`` or per file.

Usage::

    python tools/readability.py                    # tmlib's units and subpackages
    python tools/readability.py --anchors DIR      # also the anchors' files in DIR (see UNITS)
    python tools/readability.py --json out.json
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The units of issue 25's table: label, (file, qualified name) in tmlib, and the same unit in the anchors (files
#: in the anchors' folder: the Annotated Transformer's ``the_annotated_transformer.py`` as ``annotated.py``,
#: nanoGPT's ``model.py`` as ``nanogpt_model.py``).
UNITS = {
    "attend (equation 1)": (("tmlib/model/attention.py", "attend"), [("annotated.py", "attention")]),
    "multi-head attention": (("tmlib/model/attention.py", "MultiHeadAttention"),
                             [("annotated.py", "MultiHeadedAttention"), ("nanogpt_model.py", "CausalSelfAttention")]),
    "EncoderLayer": (("tmlib/model/layers.py", "EncoderLayer"), [("annotated.py", "EncoderLayer")]),
    "DecoderLayer": (("tmlib/model/layers.py", "DecoderLayer"), [("annotated.py", "DecoderLayer")]),
    "Transformer": (("tmlib/model/transformer.py", "Transformer"), [("annotated.py", "EncoderDecoder")]),
    "greedy decoding": (("tmlib/decoding/greedy.py", "greedy_decode"), [("annotated.py", "greedy_decode")]),
}


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _is_check(stmt: ast.stmt) -> bool:
    """A statement that only checks arguments: assert, ``if ...: raise``, or a call to ``check*``/``_check*``."""
    if isinstance(stmt, ast.Assert):
        return True
    if isinstance(stmt, ast.If) and all(isinstance(s, ast.Raise) for s in stmt.body) and not stmt.orelse:
        return True
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name.startswith(("check", "_check"))
    return False


def first_computation(body: list[ast.stmt]) -> ast.stmt | None:
    """The first statement of ``body`` that is neither a docstring nor a check."""
    return next((s for s in body if not _is_docstring(s) and not _is_check(s)), None)


def _find(tree: ast.Module, qualname: str) -> ast.AST:
    node: ast.AST = tree
    for part in qualname.split("."):
        node = next(n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
    return node


def header_to_computation(path: Path, qualname: str) -> int:
    """Lines from the header of ``qualname`` in ``path`` to its first computing statement (see the module)."""
    node = _find(ast.parse(path.read_text()), qualname)
    body = node.body
    if isinstance(node, ast.ClassDef):
        method = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name in ("forward", "__call__"))
        body = method.body
    stmt = first_computation(body)
    return stmt.lineno - node.lineno


def docstring_and_code_lines(path: Path) -> tuple[int, int]:
    """``(docstring lines, code lines)`` of one Python file."""
    source = path.read_text()
    tree = ast.parse(source)
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if _is_docstring(first):
                doc_lines.update(range(first.lineno, first.end_lineno + 1))
    code_lines: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
            tokenize.ENCODING}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(doc_lines), len(code_lines - doc_lines)


def ratios(root: Path) -> dict[str, dict]:
    """Per subpackage of ``root/tmlib`` (and the top-level modules as ``tmlib``), and overall."""
    groups: dict[str, list[int]] = {}
    for path in sorted((root / "tmlib").rglob("*.py")):
        rel = path.relative_to(root / "tmlib")
        group = rel.parts[0] if len(rel.parts) > 1 else "(top level)"
        doc, code = docstring_and_code_lines(path)
        for key in (group, "all"):
            d, c = groups.setdefault(key, [0, 0])
            groups[key] = [d + doc, c + code]
    return {k: {"docstring": d, "code": c, "ratio": round(d / c, 2)} for k, (d, c) in groups.items()}


def file_ratio(path: Path) -> dict:
    doc, code = docstring_and_code_lines(path)
    return {"docstring": doc, "code": code, "ratio": round(doc / code, 2)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository to measure")
    parser.add_argument("--anchors", type=Path, help="folder with annotated.py, nanogpt_model.py, nanogpt_train.py")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    result = {"units": {label: header_to_computation(args.root / f, q) for label, ((f, q), _) in UNITS.items()},
              "ratios": ratios(args.root)}
    print("header to first computation (lines):")
    for label, n in result["units"].items():
        print(f"  {label:24s} {n:4d}")
    print("docstring lines per code line:")
    for group, r in result["ratios"].items():
        print(f"  {group:14s} {r['ratio']:5.2f}  ({r['docstring']} / {r['code']})")
    if args.anchors:
        result["anchors"] = {f"{label} ({f})": header_to_computation(args.anchors / f, q)
                             for label, (_, anchors) in UNITS.items() for f, q in anchors}
        result["anchor_ratios"] = {p.name: file_ratio(p) for p in sorted(args.anchors.glob("*.py"))}
        print("anchors:")
        for label, n in result["anchors"].items():
            print(f"  {label:40s} {n:4d}")
        for name, r in result["anchor_ratios"].items():
            print(f"  {name:24s} ratio {r['ratio']:5.2f}  ({r['docstring']} / {r['code']})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
