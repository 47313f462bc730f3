"""Keep the repository's address in one place: `_config.yml` (``repository.url``).

The launch buttons read it from there; the GitHub workflows use ``${{ github.repository }}`` and need no copy.
The one copy that cannot read it is the Colab install cell of each notebook (the second cell, tagged
``hide-cell``), which installs tmlib with ``%pip install "tmlib @ git+<address>"``; CONTRIBUTING.md shows the
same cell. This script rewrites those addresses to the one in `_config.yml`; ``tests/test_repository.py`` fails
while any differs.

Usage:

    .venv/bin/python tools/sync_repository.py          # rewrite the addresses that differ
    .venv/bin/python tools/sync_repository.py --check  # only list them; exit status 1 if any differs

Only the address changes (a text replacement inside the cell's JSON string): the rest of each notebook, its
outputs and its formatting stay byte for byte.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
#: ``git+https://github.com/<owner>/<name>`` inside a pip requirement (the address ends at a quote, ``@``, ``#``
#: or white space).
GIT_URL = re.compile(r"git\+(https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?(?=[\"'@#\s\\]|$)")


def repository_url(root: Path = ROOT) -> str:
    """The repository's address from `_config.yml` (``repository.url``), without a trailing slash or ``.git``."""
    url = yaml.safe_load((root / "_config.yml").read_text())["repository"]["url"]
    url = re.sub(r"(\.git)?/?$", "", url.strip())
    if not re.fullmatch(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", url):
        raise ValueError(f"_config.yml repository.url must be https://github.com/<owner>/<name>, got {url!r}")
    return url


def install_cell(nb: dict, path: Path) -> dict:
    """The notebook's Colab install cell: the second cell, code, tagged ``hide-cell``, installing tmlib."""
    cells = nb.get("cells", [])
    if len(cells) < 2:
        raise ValueError(f"{path}: fewer than two cells, no Colab install cell")
    cell = cells[1]
    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    if cell["cell_type"] != "code" or "hide-cell" not in cell.get("metadata", {}).get("tags", []):
        raise ValueError(f"{path}: the second cell must be the code cell tagged hide-cell that installs tmlib")
    if "tmlib" not in source or not GIT_URL.search(source):
        raise ValueError(f"{path}: the second cell does not install tmlib from git+https://github.com/...: {source!r}")
    return cell


def addresses(text: str) -> list[str]:
    return [m.group(1) for m in GIT_URL.finditer(text)]


def notebook_addresses(path: Path) -> list[str]:
    """The addresses that the install cell of the notebook at ``path`` installs from."""
    cell = install_cell(json.loads(path.read_text()), path)
    return addresses("".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"])


def targets(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb")) + [root / "CONTRIBUTING.md"]


def stale(root: Path = ROOT) -> dict[Path, list[str]]:
    """Files whose install address differs from `_config.yml`'s: {path: [the addresses found]}."""
    url, out = repository_url(root), {}
    for path in targets(root):
        found = notebook_addresses(path) if path.suffix == ".ipynb" else addresses(path.read_text())
        if not found:
            raise ValueError(f"{path}: no tmlib install address found")
        if any(a != url for a in found):
            out[path] = found
    return out


def sync(root: Path = ROOT) -> list[Path]:
    """Rewrite every differing address to `_config.yml`'s; return the files changed."""
    url, changed = repository_url(root), []
    for path, found in stale(root).items():
        text = path.read_text()
        new = GIT_URL.sub(lambda m: "git+" + url if m.group(1) in found else m.group(0), text)
        path.write_text(new)
        if path.suffix == ".ipynb":
            json.loads(new)  # still a notebook
            assert all(a == url for a in notebook_addresses(path)), path
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="list differing addresses, change nothing")
    args = parser.parse_args(argv)
    url = repository_url()
    if args.check:
        bad = stale()
        for path, found in bad.items():
            print(f"{path.relative_to(ROOT)}: installs from {', '.join(sorted(set(found)))}, _config.yml says {url}")
        return 1 if bad else 0
    for path in sync():
        print(f"updated {path.relative_to(ROOT)} -> {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
