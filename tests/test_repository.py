"""The repository's address lives in one place, `_config.yml` (``repository.url``): the notebooks' Colab install
cells and CONTRIBUTING.md's copy of that cell must equal it (`tools/sync_repository.py` rewrites them), and the
workflows must not spell it (they use ``${{ github.repository }}``)."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("sync_repository", ROOT / "tools" / "sync_repository.py")
sync_repository = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sync_repository)


def test_install_cells_use_the_configured_address():
    url = sync_repository.repository_url()
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for nb in notebooks:
        assert sync_repository.notebook_addresses(nb), nb
    bad = sync_repository.stale()
    assert not bad, (f"install addresses differ from _config.yml's repository.url ({url}): "
                     f"{ {str(p.relative_to(ROOT)): a for p, a in bad.items()} }; "
                     f"run `.venv/bin/python tools/sync_repository.py`")


def test_workflows_do_not_spell_the_address():
    owner_name = sync_repository.repository_url().removeprefix("https://github.com/")
    workflows = list((ROOT / ".github" / "workflows").glob("*.y*ml"))
    assert workflows, "no GitHub workflows"
    for wf in workflows:
        assert owner_name not in wf.read_text(), f"{wf.name} spells {owner_name}: use ${{{{ github.repository }}}}"


@pytest.fixture
def copy(tmp_path):
    for name in ["_config.yml", "CONTRIBUTING.md"]:
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "notebooks").mkdir()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb"))[-2:]:
        shutil.copy2(nb, tmp_path / "notebooks" / nb.name)
    return tmp_path


def test_sync_rewrites_only_the_address(copy):
    old = sync_repository.repository_url(copy)
    new = "https://github.com/someone-else/a-fork"
    cfg = copy / "_config.yml"
    cfg.write_text(cfg.read_text().replace(f"url: {old}", f"url: {new}"))
    assert sync_repository.repository_url(copy) == new
    before = {p: p.read_text() for p in sync_repository.targets(copy)}
    assert set(sync_repository.stale(copy)) == set(before)  # every copy is now stale
    changed = sync_repository.sync(copy)
    assert set(changed) == set(before)
    assert sync_repository.stale(copy) == {}
    for path, text in before.items():
        assert path.read_text() == text.replace(f"git+{old}", f"git+{new}")  # nothing else moved
    assert sync_repository.sync(copy) == []  # idempotent


def test_bad_install_cell_is_reported(copy):
    nb = sorted((copy / "notebooks").glob("*.ipynb"))[0]
    nb.write_text(nb.read_text().replace('"hide-cell"', '"hide-input"', 1))
    with pytest.raises(ValueError, match="hide-cell"):
        sync_repository.stale(copy)
