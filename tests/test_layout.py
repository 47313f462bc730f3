"""The library's layout: each subpackage exports only what its own modules define, Part I's references import no
torch, no notebook imports a private name, and no module of tmlib imports another in a cycle."""
import ast
import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ["ref", "course", "model", "training", "data", "decoding", "analysis"]


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_subpackage_exports_only_its_own_names(name):
    pytest.importorskip("torch")
    package = importlib.import_module(f"tmlib.{name}")
    for attr in package.__all__:
        obj = getattr(package, attr)
        module = getattr(obj, "__module__", None)
        if module is not None and not isinstance(obj, (dict, tuple, str, int, float)):
            assert module.startswith(f"tmlib.{name}."), f"tmlib.{name}.{attr} is defined in {module}"


def test_notebooks_import_no_private_name():
    bad = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            try:
                tree = ast.parse("\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!"))))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tmlib"):
                    bad += [f"{path.name}: from {node.module} import {a.name}" for a in node.names
                            if a.name.startswith("_")]
                if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                    base = node.value
                    if isinstance(base, ast.Name) and base.id in {"T", "R", "E", "I", "C", "B", "FL", "P"}:
                        bad.append(f"{path.name}: {base.id}.{node.attr}")
    assert not bad, bad


def _imports_of(path: Path) -> set[str]:
    """The tmlib modules that ``path`` imports, at module level or inside a function."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tmlib"):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tmlib")}
    return found


def test_no_import_cycles_between_modules():
    """Deferred imports (inside a function) count too: a cycle hidden in a function is still a cycle."""
    modules = {}
    for path in (ROOT / "tmlib").rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        modules[name] = path
    graph = {}
    for name, path in modules.items():
        if path.name == "__init__.py":
            continue  # a subpackage's __init__ gathers its modules' names; it is imported by nothing inside
        graph[name] = {m for m in _imports_of(path) if m in modules and modules[m].name != "__init__.py"}
    state, cycle = {}, []

    def visit(node, stack):
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                cycle.append(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [node])
    assert not cycle, cycle
