"""Keep the Colab install cells pointing at the repository and at the library the site was built from.

Each chapter's Colab install cell (the second cell of `notebooks/NN_*.ipynb` and of the pages `book/*.ipynb`,
tagged ``hide-cell``, and the install cell of a chapter's copy in `student/`) installs the course with

    %pip install -q "attention-executable[train] @ git+<address>@<commit>"

* ``<address>`` is `_config.yml`'s ``repository.url``, the one place it lives (the launch buttons read it there,
  the workflows use ``${{ github.repository }}``); CONTRIBUTING.md shows the same cell with ``@<commit>``.
* ``<commit>`` pins the library: a notebook cannot name its own commit, so it names the latest commit that changed
  ``tmlib/`` or ``pyproject.toml`` (:data:`LIBRARY`). Its library equals the one of every later commit until the
  next change to those paths, so a Colab student gets the very library the site was built with, not whatever
  ``main`` holds when they open the notebook.

This script rewrites both where they differ; ``tests/test_repository.py`` fails while any differs, or while
``git diff --quiet <commit> HEAD -- tmlib pyproject.toml`` does not hold (after a change to the library: commit it,
run this script, commit the notebooks).

Usage:

    .venv/bin/python tools/sync_repository.py          # rewrite the addresses and pins that differ
    .venv/bin/python tools/sync_repository.py --check  # only list them; exit status 1 if any differs

Only the requirement's address and commit change (a text replacement inside the cell's JSON string): the rest of
each notebook, its outputs and its formatting stay byte for byte.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
#: The paths whose content a pin stands for: the library and its metadata (dependencies, extras).
LIBRARY = ("tmlib", "pyproject.toml")
#: ``git+https://github.com/<owner>/<name>[@<40-hex commit>]`` inside a pip requirement (the address ends at a
#: quote, ``@``, ``#`` or white space).
GIT_URL = re.compile(r"git\+(https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?"
                     r"(?:@([0-9a-f]{40}))?(?=[\"'@#\s\\]|$)")


class HistoryUnavailable(RuntimeError):
    """The git history is missing (not a git checkout, git not installed, or a shallow clone without the commit)."""


def repository_url(root: Path = ROOT) -> str:
    """The repository's address from `_config.yml` (``repository.url``), without a trailing slash or ``.git``."""
    url = yaml.safe_load((root / "_config.yml").read_text())["repository"]["url"]
    url = re.sub(r"(\.git)?/?$", "", url.strip())
    if not re.fullmatch(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", url):
        raise ValueError(f"_config.yml repository.url must be https://github.com/<owner>/<name>, got {url!r}")
    return url


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    except FileNotFoundError as err:
        raise HistoryUnavailable("git is not installed") from err


def _history(root: Path) -> None:
    """Raise HistoryUnavailable unless ``root`` is a git checkout with its whole history."""
    shallow = _git(root, "rev-parse", "--is-shallow-repository")
    if shallow.returncode != 0:
        raise HistoryUnavailable(f"{root} is not a git checkout ({shallow.stderr.strip()})")
    if shallow.stdout.strip() == "true":
        raise HistoryUnavailable(f"{root} is a shallow clone (git fetch --unshallow gives the history)")


def library_commit(root: Path = ROOT) -> str:
    """The latest commit of HEAD's history that changed :data:`LIBRARY` (40 hex digits).

    Raises:
        HistoryUnavailable: no git history here.
        RuntimeError: ``tmlib/`` or ``pyproject.toml`` differ from HEAD (uncommitted changes): the pin would
            name a library without them.
    """
    _history(root)
    if _git(root, "diff", "--quiet", "HEAD", "--", *LIBRARY).returncode != 0:
        raise RuntimeError("tmlib/ or pyproject.toml has uncommitted changes: commit them, then run "
                           "tools/sync_repository.py again (the pin names a commit)")
    commit = _git(root, "log", "-1", "--format=%H", "HEAD", "--", *LIBRARY).stdout.strip()
    if not re.fullmatch(r"[0-9a-f]{40}", commit) or not pin_matches(commit, root):
        commit = _git(root, "rev-parse", "HEAD").stdout.strip()  # (a merge git log does not show: HEAD itself)
    return commit


def pin_matches(commit: str, root: Path = ROOT) -> bool:
    """Whether ``commit``'s ``tmlib/`` and ``pyproject.toml`` equal HEAD's (``git diff --quiet commit HEAD -- ...``).

    Raises:
        HistoryUnavailable: no git history here, or a shallow clone that lacks ``commit``.
    """
    exists = _git(root, "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0
    if not exists:
        _history(root)  # a whole history without the commit: the pin is wrong, not unavailable
        return False
    return _git(root, "diff", "--quiet", commit, "HEAD", "--", *LIBRARY).returncode == 0


def install_cell(nb: dict, path: Path) -> dict:
    """The notebook's Colab install cell: in a chapter, the second cell, code, tagged ``hide-cell``; in a student
    notebook, its first code cell. It installs the course from git+https://github.com/...

    Raises:
        ValueError: there is no such cell.
    """
    cells = nb.get("cells", [])
    if path.parent.name == "student":
        cell = next((c for c in cells if c["cell_type"] == "code"), None)
        if cell is None:
            raise ValueError(f"{path}: no code cell, no Colab install cell")
    else:
        if len(cells) < 2:
            raise ValueError(f"{path}: fewer than two cells, no Colab install cell")
        cell = cells[1]
        if cell["cell_type"] != "code" or "hide-cell" not in cell.get("metadata", {}).get("tags", []):
            raise ValueError(f"{path}: the second cell must be the code cell tagged hide-cell that installs tmlib")
    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    if "google.colab" not in source or not GIT_URL.search(source):
        raise ValueError(f"{path}: the install cell does not install the course from git+https://github.com/...: "
                         f"{source!r}")
    return cell


def requirements(text: str) -> list[tuple[str, str | None]]:
    """``(address, commit or None)`` of every git requirement in ``text``."""
    return [(m.group(1), m.group(2)) for m in GIT_URL.finditer(text)]


def notebook_requirements(path: Path) -> list[tuple[str, str | None]]:
    """``(address, commit)`` of what the install cell of the notebook at ``path`` installs."""
    cell = install_cell(json.loads(path.read_text(encoding="utf-8")), path)
    return requirements("".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"])


def notebooks(root: Path = ROOT) -> list[Path]:
    """The chapters, the pages that are notebooks (book/*.ipynb, laid out as a chapter) and the student copies."""
    return (sorted((root / "notebooks").glob("*.ipynb")) + sorted((root / "book").glob("*.ipynb"))
            + sorted((root / "student").glob("*.ipynb")))


def targets(root: Path = ROOT) -> list[Path]:
    return notebooks(root) + [root / "CONTRIBUTING.md"]


def stale(root: Path = ROOT, pin: str | None = None) -> dict[Path, list[tuple[str, str | None]]]:
    """Files whose install address differs from `_config.yml`'s, or (notebooks) whose commit differs from ``pin``
    (default: :func:`library_commit`): ``{path: [(address, commit), ...]}``."""
    url, out = repository_url(root), {}
    pin = library_commit(root) if pin is None else pin
    for path in targets(root):
        if path.suffix == ".ipynb":
            found = notebook_requirements(path)
            bad = any(a != url or c != pin for a, c in found)
        else:
            found = requirements(path.read_text(encoding="utf-8"))
            bad = any(a != url for a, _ in found)
        if not found:
            raise ValueError(f"{path}: no install address found")
        if bad:
            out[path] = found
    return out


def sync(root: Path = ROOT, pin: str | None = None) -> list[Path]:
    """Rewrite every differing address to `_config.yml`'s and every notebook's commit to ``pin`` (default:
    :func:`library_commit`); return the files changed."""
    url = repository_url(root)
    pin = library_commit(root) if pin is None else pin
    changed = []
    for path in stale(root, pin):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            new = GIT_URL.sub(f"git+{url}@{pin}", text)
        else:
            new = GIT_URL.sub(lambda m: f"git+{url}" + (f"@{m.group(2)}" if m.group(2) else ""), text)
        path.write_text(new, encoding="utf-8")
        if path.suffix == ".ipynb":
            json.loads(new)  # still a notebook
            assert all(a == url and c == pin for a, c in notebook_requirements(path)), path
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="list differing addresses and pins, change nothing")
    args = parser.parse_args(argv)
    try:
        url, pin = repository_url(), library_commit()
    except (HistoryUnavailable, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.check:
        bad = stale(pin=pin)
        for path, found in bad.items():
            print(f"{path.relative_to(ROOT)}: installs {', '.join(sorted({f'{a}@{c}' for a, c in found}))}; "
                  f"_config.yml and the library say {url}@{pin}")
        return 1 if bad else 0
    for path in sync(pin=pin):
        print(f"updated {path.relative_to(ROOT)} -> {url}@{pin[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
