"""Reproducibility and device helpers shared by every notebook.

torch is optional here: Part I notebooks run with NumPy alone.
"""
from __future__ import annotations

import contextlib
import os
import random
import tempfile
from pathlib import Path

import numpy as np

from tmlib.validation import check_int

__all__ = ["seed_everything", "get_device", "in_colab", "smoke_mode", "atomic_write", "remove_stale_temporaries"]


def seed_everything(seed: int = 0) -> np.random.Generator:
    """Seed Python's ``random``, NumPy's global generator and (if installed) torch on all devices.

    Args:
        seed: a non-negative integer.

    Returns:
        A fresh ``numpy.random.Generator`` seeded with ``seed``, for code that prefers the
        explicit generator API.

    Raises:
        TypeError: ``seed`` is not an integer.  ValueError: ``seed`` is negative.
    """
    seed = check_int(seed, "seed", minimum=0)
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:
        pass
    else:
        torch.manual_seed(seed)  # seeds CPU and every CUDA device
    return np.random.default_rng(seed)


def get_device(prefer: str | None = None):
    """The one place that picks a device: an NVIDIA GPU (CUDA) if available, else Apple's GPU (MPS), else the CPU.

    Args:
        prefer: ``None`` (automatic), ``"cpu"``, ``"cuda"`` (or ``"cuda:N"``) or ``"mps"``; the ``TMLIB_DEVICE``
            environment variable overrides the automatic choice.

    Returns:
        ``torch.device``.

    Raises:
        ValueError: ``"cuda"`` or ``"mps"`` asked for but not available, or an unknown device name.
    """
    import torch

    if prefer or os.environ.get("TMLIB_DEVICE"):
        name = prefer or os.environ["TMLIB_DEVICE"]
    elif torch.cuda.is_available():
        name = "cuda"
    else:
        name = "mps" if torch.backends.mps.is_available() else "cpu"
    if not (name == "cpu" or name.startswith("cuda") or name == "mps"):
        raise ValueError(f"unknown device {name!r}: use 'cpu', 'cuda' or 'mps'")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but torch.cuda.is_available() is False")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' was requested but torch.backends.mps.is_available() is False")
    return torch.device(name)


def in_colab() -> bool:
    """True when running inside Google Colab."""
    import sys

    return "google.colab" in sys.modules


def smoke_mode() -> bool:
    """True when ``TMLIB_SMOKE=1``: long-running notebook cells shrink to a quick smoke run (CI)."""
    return os.environ.get("TMLIB_SMOKE", "0") not in ("", "0", "false", "False")


@contextlib.contextmanager
def atomic_write(path, suffix: str = ".tmp"):
    """Write a file atomically and durably: yield a temporary path in the same folder, then ``os.replace`` it.

    Usage: ``with atomic_write(target) as tmp: torch.save(state, tmp)``.  If the body raises
    (an interruption, a full disk, a failed check), the target keeps its previous content and the temporary
    file is removed, so no reader ever sees a half-written file.  Before the rename the temporary file is
    flushed to the disk (``fsync``), and after it the folder, so that a power cut right after the rename
    cannot leave an empty file behind.  A process killed with SIGKILL while writing leaves its temporary file
    (``.<name>.<random><suffix>``); :func:`remove_stale_temporaries` deletes such leftovers.

    Args:
        path: the target file.
        suffix: suffix of the temporary file (e.g. ``".part"`` for downloads).

    Yields:
        ``pathlib.Path`` of the temporary file (already created, empty).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open a folder
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_stale_temporaries(path, suffix: str = ".tmp") -> list[Path]:
    """Delete the temporary files that :func:`atomic_write` left for ``path`` when its process was killed.

    Call it only where no other process is writing ``path`` at the same time (e.g. a run folder owned by
    one training process).

    Args:
        path: the target file whose leftovers to remove (``.<name>.*<suffix>`` in its folder).
        suffix: the suffix used when writing.

    Returns:
        The paths removed.
    """
    path = Path(path)
    removed = []
    if path.parent.is_dir():
        for leftover in path.parent.glob(f".{path.name}.*{suffix}"):
            try:
                leftover.unlink()
                removed.append(leftover)
            except OSError:
                pass
    return removed
