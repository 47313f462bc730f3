"""The Colab install cells point at the repository and at the library the site was built from: the address lives in
one place, `_config.yml` (``repository.url``), and the pinned commit is the latest that changed ``tmlib/`` or
``pyproject.toml``; `tools/sync_repository.py` rewrites both in the chapters, in `student/` and in CONTRIBUTING.md's
copy of the cell. The workflows must not spell the address (they use ``${{ github.repository }}``)."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("sync_repository", ROOT / "tools" / "sync_repository.py")
sync_repository = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sync_repository)

OTHER_PIN = "1" * 40


def _pins() -> set[str | None]:
    return {c for nb in sync_repository.notebooks() for _, c in sync_repository.notebook_requirements(nb)}


def test_install_cells_use_the_configured_address():
    url = sync_repository.repository_url()
    notebooks = sync_repository.notebooks()
    chapters, pages = (list((ROOT / folder).glob("*.ipynb")) for folder in ("notebooks", "book"))
    copies = [p for p in pages if (ROOT / "student" / p.name).is_file()]  # a page with exercises: book/distributed
    assert pages and copies  # each chapter, its student copy, each page, the student copy of a page with exercises
    assert len(notebooks) == 2 * len(chapters) + len(pages) + len(copies)
    for nb in notebooks:
        found = sync_repository.notebook_requirements(nb)
        assert found and all(a == url for a, _ in found), (f"{nb.relative_to(ROOT)} installs from {found}, "
                                                           f"_config.yml says {url}: run tools/sync_repository.py")
    contributing = sync_repository.requirements((ROOT / "CONTRIBUTING.md").read_text())
    assert contributing and all(a == url for a, _ in contributing)


def test_install_cells_pin_one_commit_with_this_library():
    """Every install cell pins the same commit, and its tmlib/ and pyproject.toml equal HEAD's."""
    pins = _pins()
    assert len(pins) == 1 and None not in pins, f"the install cells pin {pins}: run tools/sync_repository.py"
    (pin,) = pins
    try:
        same = sync_repository.pin_matches(pin)
    except sync_repository.HistoryUnavailable as err:
        pytest.skip(f"cannot compare the pinned library with this one: {err}")
    assert same, (f"the install cells pin {pin[:12]}, whose tmlib/ or pyproject.toml differ from HEAD's (`git diff "
                  f"{pin[:12]} HEAD -- tmlib pyproject.toml`): commit the library, run tools/sync_repository.py, "
                  "commit the notebooks")


def test_drive_opt_in_in_the_training_chapters_only():
    """Chapters 9, 11 and 14 load or train the same run: their set-up offers to keep it in Google Drive, and it is off
    unless the student turns it on."""
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        import json

        cell = sync_repository.install_cell(json.loads(nb.read_text()), nb)
        source = "".join(cell["source"])
        if nb.name[:2] in ("09", "11", "14"):
            assert "KEEP_RUN_IN_DRIVE = False\n" in source and 'drive.mount("/content/drive")' in source, nb.name
        else:
            assert "drive" not in source, nb.name


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
    for folder in ["notebooks", "student"]:
        (tmp_path / folder).mkdir()
        for nb in sorted((ROOT / folder).glob("*.ipynb"))[-2:]:
            shutil.copy2(nb, tmp_path / folder / nb.name)
    return tmp_path


def test_sync_rewrites_only_the_address_and_the_pin(copy):
    old, (pin,) = sync_repository.repository_url(copy), _pins()
    new = "https://github.com/someone-else/a-fork"
    cfg = copy / "_config.yml"
    cfg.write_text(cfg.read_text().replace(f"url: {old}", f"url: {new}"))
    assert sync_repository.repository_url(copy) == new
    before = {p: p.read_text() for p in sync_repository.targets(copy)}
    assert len(before) == 5
    assert set(sync_repository.stale(copy, OTHER_PIN)) == set(before)  # every copy is now stale
    changed = sync_repository.sync(copy, OTHER_PIN)
    assert set(changed) == set(before)
    assert sync_repository.stale(copy, OTHER_PIN) == {}
    for path, text in before.items():
        if path.suffix == ".ipynb":
            expected = text.replace(f"git+{old}@{pin}", f"git+{new}@{OTHER_PIN}")
            assert text.count(f"git+{old}@{pin}") == (2 if path.parent.name == "student" else 1)  # + the hint
        else:
            expected = text.replace(f"git+{old}", f"git+{new}")
        assert path.read_text() == expected  # nothing else moved
    assert sync_repository.sync(copy, OTHER_PIN) == []  # idempotent


def test_bad_install_cell_is_reported(copy):
    nb = sorted((copy / "notebooks").glob("*.ipynb"))[0]
    nb.write_text(nb.read_text().replace('"hide-cell"', '"hide-input"', 1))
    with pytest.raises(ValueError, match="hide-cell"):
        sync_repository.stale(copy, OTHER_PIN)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def history(tmp_path):
    """A small repository: a library commit, then a commit that changes only a notebook."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "tmlib").mkdir(parents=True)
    (repo / "tmlib" / "__init__.py").write_text("x = 1\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "attention-executable"\n')
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "library")
    lib = _git(repo, "rev-parse", "HEAD")
    (repo / "notes.md").write_text("a chapter\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "not the library")
    return repo, lib


def test_library_commit_is_the_last_that_changed_the_library(history):
    repo, lib = history
    assert sync_repository.library_commit(repo) == lib != _git(repo, "rev-parse", "HEAD")
    assert sync_repository.pin_matches(lib, repo)
    (repo / "tmlib" / "__init__.py").write_text("x = 2\n")  # uncommitted: the pin would name the old library
    with pytest.raises(RuntimeError, match="uncommitted"):
        sync_repository.library_commit(repo)
    _git(repo, "commit", "-q", "-am", "library again")
    assert not sync_repository.pin_matches(lib, repo)  # the old pin no longer matches
    assert sync_repository.library_commit(repo) == _git(repo, "rev-parse", "HEAD")
    assert not sync_repository.pin_matches(OTHER_PIN, repo)  # a commit this whole history lacks: wrong, not missing


def test_history_unavailable_is_said(history, tmp_path):
    repo, lib = history
    with pytest.raises(sync_repository.HistoryUnavailable, match="not a git checkout"):
        sync_repository.pin_matches(lib, tmp_path / "nowhere")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    with pytest.raises(sync_repository.HistoryUnavailable, match="shallow"):
        sync_repository.pin_matches(lib, shallow)


def test_committed_notebooks_are_executed_top_to_bottom():
    """Every code cell of a committed page has an execution count (one run in a fresh kernel, in order): a cell
    added or re-stored later keeps None, which nbval refuses where the cell has outputs and readers see as unrun."""
    import json

    for path in sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("book/*.ipynb")]):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        unrun = [c.get("id") for c in cells if c.get("execution_count") is None]
        assert not unrun, f"{path.name}: code cells without an execution count: {unrun}"
        counts = [c["execution_count"] for c in cells]
        assert counts == sorted(counts), f"{path.name}: execution counts out of order: {counts}"
