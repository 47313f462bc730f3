"""Where chapter 9's training runs are kept, whatever folder a notebook or a terminal was started in.

:func:`runs_root` is the folder that holds the run folders (``multi30k``, ``smoke-multi30k``, ...), the first of:

1. on Colab with Google Drive mounted (the set-up cell of chapters 9, 11 and 14 offers it):
   ``MyDrive/attention-executable/runs``, so that a run outlives the Colab session and the three chapters share it;
2. in a checkout of the course (tmlib imported from it, as ``make venv`` installs it): ``<checkout>/runs``, the
   same from ``notebooks/``, ``student/`` or a terminal anywhere;
3. otherwise (tmlib installed as a package): the user data folder, ``platformdirs.user_data_dir("tmlib")/runs``
   (``~/.local/share/tmlib/runs`` on Linux, ``~/Library/Application Support/tmlib/runs`` on macOS).

``$TMLIB_RUN_DIR`` names the run folder itself and wins over all three
(:func:`tmlib.training.experiment.default_run`).
"""
from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["DISTRIBUTION", "COLAB_DRIVE", "repository_root", "colab_drive_runs", "runs_root"]

#: The course's distribution name (pyproject.toml); the package it installs is ``tmlib``.
DISTRIBUTION = "attention-executable"
#: Where Colab mounts the user's Google Drive (``drive.mount("/content/drive")``).
COLAB_DRIVE = Path("/content/drive/MyDrive")


def repository_root() -> Path | None:
    """The checkout of the course that this tmlib was imported from, or None (installed as a package).

    A checkout is the folder above the ``tmlib`` package when it holds the course's ``pyproject.toml``.
    """
    root = Path(__file__).resolve().parents[2]  # tmlib/training/locations.py -> the folder above tmlib/
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if f'name = "{DISTRIBUTION}"' in text else None


def colab_drive_runs() -> Path | None:
    """``MyDrive/attention-executable/runs`` when running in Colab with Google Drive mounted, else None."""
    if "google.colab" in sys.modules and COLAB_DRIVE.is_dir():
        return COLAB_DRIVE / DISTRIBUTION / "runs"
    return None


def runs_root() -> Path:
    """The folder that holds the course's run folders: Colab's mounted Drive, else the checkout's ``runs/``, else
    the user data folder (see the module's docstring)."""
    drive = colab_drive_runs()
    if drive is not None:
        return drive
    root = repository_root()
    if root is not None:
        return root / "runs"
    import platformdirs

    return Path(platformdirs.user_data_dir("tmlib")) / "runs"
