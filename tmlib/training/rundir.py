"""The run folder: which folders a run may write into, and one run at a time in each.

A run folder holds ``checkpoint.pt``, ``history.json``, ``tokenizer.json``, ``config.json`` and
:data:`RUN_MARKER`, a small file written when a run starts. The marker says that the folder belongs to a
training run (so that a later run may continue in it, or start again in it when no checkpoint was written yet),
and it is the run's lock: the run holds an exclusive ``fcntl.flock`` on it for its whole life and writes its
process id into it, so that a second run into the same folder stops at once and names the first one. The
operating system releases the lock when the process ends, however it ends (``kill -9`` included).

A run never writes into a folder that is not empty and is not a run folder (it would overwrite a user's
``config.json`` or ``history.json``), nor into the current folder unless that is a run folder.
"""
from __future__ import annotations

import contextlib
import os
import socket
import warnings
from pathlib import Path

from tmlib.training import distributed
from tmlib.training.checkpoint import CHECKPOINT_NAME

__all__ = ["RUN_MARKER", "RunFolderError", "is_run_folder", "check_run_folder", "hold_run_folder"]

#: The marker and lock file of a run folder.
RUN_MARKER = ".tmlib-run"


class RunFolderError(Exception):
    """A folder that cannot take a run: a path the system refuses, a file, a folder with other files in it,
    the current folder, or a folder in use by another run. The message names it and says what to do."""


def is_run_folder(path: str | os.PathLike) -> bool:
    """True when ``path`` is a folder written by a training run (it holds ``checkpoint.pt`` or :data:`RUN_MARKER`)."""
    path = Path(path)
    return (path / CHECKPOINT_NAME).is_file() or (path / RUN_MARKER).is_file()


def check_run_folder(path: str | os.PathLike) -> Path:
    """Check, without writing anything, that a run may write into ``path``; returns it as a ``Path``.

    Allowed: a folder that does not exist yet, an empty folder, a run folder (:func:`is_run_folder`).

    Raises:
        RunFolderError: the system refuses the path (a name too long, a file where a folder is needed, no
            permission), ``path`` is a file, a folder with other files that is not a run folder, or the
            current folder when it is not a run folder.
    """
    path = Path(path)
    shown = str(path) if len(str(path)) <= 80 else str(path)[:60] + "…" + str(path)[-19:]
    try:
        if not path.exists():
            return path
        if not path.is_dir():
            raise RunFolderError(f"{shown} is a file, not a folder: choose a folder for the run (--out)")
        if is_run_folder(path):
            return path
        if path.resolve() == Path.cwd().resolve():
            raise RunFolderError(f"{shown} is the current folder, which is not a training run folder: give the run "
                                 "a folder of its own, e.g. --out runs/NAME")
        if any(path.iterdir()):
            raise RunFolderError(f"{shown} holds other files and is not a training run folder (no {CHECKPOINT_NAME}, "
                                 f"no {RUN_MARKER}): a run would overwrite its config.json and history.json; choose "
                                 "a new or empty folder (--out)")
    except OSError as err:
        raise RunFolderError(f"cannot use {shown} as the run folder: {err.strerror or err}") from err
    return path


def _lock(folder: Path):
    """Create ``folder`` if needed, and take the lock of :data:`RUN_MARKER` in it; returns the open marker file
    (closing it releases the lock).

    Raises:
        RunFolderError: what :func:`check_run_folder` raises, the folder cannot be created, or another process
            holds the lock.
    """
    check_run_folder(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        marker = open(folder / RUN_MARKER, "a+", encoding="utf-8")
    except OSError as err:
        raise RunFolderError(f"cannot create the run folder {folder}: {err.strerror or err}") from err
    try:
        import fcntl
    except ImportError:  # (Windows: no flock; the run goes on without a lock)
        return marker
    try:
        fcntl.flock(marker, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        marker.seek(0)
        holder = marker.read().strip() or "a process that has not written its id yet"
        marker.close()
        raise RunFolderError(f"{folder} is in use by another training run ({holder}): wait for it to end, or "
                             "choose another folder (--out)") from None
    except OSError as err:  # a file system without locks (some network file systems)
        warnings.warn(f"cannot lock {folder / RUN_MARKER} ({err.strerror or err}): make sure no other run writes "
                      "into this folder", RuntimeWarning, stacklevel=3)
    marker.seek(0)
    marker.truncate()
    marker.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    marker.flush()
    return marker


@contextlib.contextmanager
def hold_run_folder(path: str | os.PathLike | None):
    """Inside ``with``, this run owns the run folder ``path``: the main process creates it, writes
    :data:`RUN_MARKER` and holds its lock; ``None``: nothing (a run that keeps nothing on disk).

    With several processes, rank 0 takes the lock and tells the others whether it could.

    Raises:
        RunFolderError: (on every process) see :func:`_lock`.
    """
    marker, failure = None, None
    if path is not None and distributed.rank() == 0:
        try:
            marker = _lock(Path(path))
        except RunFolderError as err:
            failure = str(err)
    if path is not None:
        failure = distributed.broadcast_from_rank0(failure)
    if failure is not None:
        raise RunFolderError(failure)
    try:
        yield
    finally:
        if marker is not None:
            marker.close()  # releases the lock
