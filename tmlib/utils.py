"""Reproducibility and device helpers shared by every notebook.

torch is optional here: Part I notebooks run with NumPy alone.
"""
from __future__ import annotations

import contextlib
import errno
import os
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np

from tmlib.validation import check_int

__all__ = ["seed_everything", "get_device", "in_colab", "smoke_mode", "atomic_write", "remove_stale_temporaries",
           "DiskFullError", "mount_point", "out_of_space", "SEED_MAX"]

#: The largest seed: NumPy's global generator takes seeds below 2**32.
SEED_MAX = 2**32 - 1


def seed_everything(seed: int = 0) -> np.random.Generator:
    """Seed Python's ``random``, NumPy's global generator and (if installed) torch on all devices.

    Args:
        seed: an integer from 0 to :data:`SEED_MAX` (2**32 - 1, what NumPy's global generator takes).

    Returns:
        A fresh ``numpy.random.Generator`` seeded with ``seed``, for code that prefers the
        explicit generator API.

    Raises:
        TypeError: ``seed`` is not an integer.  ValueError: ``seed`` is negative or above :data:`SEED_MAX`.
    """
    seed = check_int(seed, "seed", minimum=0, maximum=SEED_MAX)
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


class DiskFullError(OSError):
    """A file could not be written because its file system is full (``errno`` ENOSPC); the message names the
    file system and the file, and says that the previous version of the file is intact."""

    def __init__(self, message: str):
        super().__init__(message)
        self.errno = errno.ENOSPC


def mount_point(path) -> Path:
    """The mount point of the file system that holds ``path`` (an existing file or folder), e.g. ``/`` or
    ``/home``: what a user frees space on."""
    path = Path(path).resolve()
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def out_of_space(err: BaseException, folder, needed: int = 0) -> bool:
    """True when ``err``, raised while writing a file of about ``needed`` bytes into ``folder``, means that the
    file system is full: an ``OSError`` with errno ENOSPC or EDQUOT (a quota), or a ``RuntimeError`` (what
    ``torch.save``'s writer raises, without an errno) while fewer than ``needed`` bytes are free."""
    if isinstance(err, OSError):
        return err.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(err, RuntimeError) and needed > 0:
        try:
            return shutil.disk_usage(folder).free < needed
        except OSError:
            return False
    return False


@contextlib.contextmanager
def atomic_write(path, suffix: str = ".tmp", *, size: int = 0):
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
        size: about how many bytes the file will have (``torch.save`` reports a full disk as a
            ``RuntimeError`` without an errno: fewer free bytes than this on the file system then mean a full
            disk); 0: only an ``OSError`` tells.

    Yields:
        ``pathlib.Path`` of the temporary file (already created, empty).

    Raises:
        DiskFullError: the file system is full (see :func:`out_of_space`); the message names it and the file.
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
    except (OSError, RuntimeError) as err:
        if os.path.exists(tmp):
            os.unlink(tmp)  # (the space it took is free again when the disk is measured)
        if isinstance(err, DiskFullError) or not out_of_space(err, path.parent, size):
            raise
        kept = f"the previous {path.name} is intact" if path.exists() else f"no {path.name} was written"
        raise DiskFullError(f"no space left on the device ({mount_point(path.parent)}) while saving {path}; "
                            f"{kept}") from err
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
