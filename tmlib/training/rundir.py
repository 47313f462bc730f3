"""The run folder: which folders a run may write into, and one run at a time in each.

A run folder holds ``checkpoint.pt``, ``history.json``, ``tokenizer.json``, ``config.json`` and
:data:`RUN_MARKER`, a small file written when a run starts. The marker says that the folder belongs to a
training run (so that a later run may continue in it, or start again in it when no checkpoint was written yet),
and it is the run's lock: the run holds an exclusive ``fcntl.flock`` on it for its whole life and writes its
process id into it, so that a second run into the same folder stops at once and names the first one. The
operating system releases the lock when the process ends, however it ends (``kill -9`` included).

A run never writes into a folder that is not empty and is not a run folder (it would overwrite a user's
``config.json`` or ``history.json``), nor into the current folder unless that is a run folder. A checkpoint
copied into a folder of one's own makes it look like a run folder: before a run continues there,
:func:`check_run_files` checks that its ``config.json`` and ``history.json`` are the checkpoint's own.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import warnings
from pathlib import Path

from tmlib.training import distributed
from tmlib.training.checkpoint import CHECKPOINT_NAME

__all__ = ["RUN_MARKER", "RunFolderError", "is_run_folder", "check_run_folder", "check_run_files", "hold_run_folder",
           "training_in_progress"]

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


def _history_is_prefix(found, history) -> bool:
    """``found`` (history.json's contents) is ``history`` or an earlier state of it: the same keys, each list a
    prefix of the checkpoint's (history.json is written just after the checkpoint, so it may lag one save)."""
    if not isinstance(found, dict) or not isinstance(history, dict) or set(found) != set(history):
        return False
    dump = lambda v: json.dumps(v, sort_keys=True)  # noqa: E731 (NaN compares equal as text)
    return all(isinstance(v, list) and isinstance(history[k], list) and dump(v) == dump(history[k][:len(v)])
               for k, v in found.items())


def _same_recipe(found, stored) -> bool:
    """``found`` (config.json's contents) is the configuration ``stored`` in the checkpoint, but for its runtime
    settings; both are read as a ``TrainConfig`` first, so that fields added by a later tmlib take their defaults."""
    from tmlib.training.config import RUNTIME_FIELDS, TrainConfig

    if not isinstance(found, dict) or not isinstance(stored, dict):
        return False
    try:
        found, stored = TrainConfig.from_dict(found).to_dict(), TrainConfig.from_dict(stored).to_dict()
    except (KeyError, TypeError, ValueError):
        pass
    keep = lambda d: json.dumps({k: v for k, v in d.items() if k not in RUNTIME_FIELDS}, sort_keys=True)  # noqa: E731
    return keep(found) == keep(stored)


def check_run_files(folder: str | os.PathLike, state: dict) -> None:
    """Check that the ``config.json`` and ``history.json`` in ``folder``, which a continued run rewrites, are those
    of the run whose checkpoint ``state`` is about to be continued there (the runtime settings of config.json may
    differ: a run continued with another budget rewrites them before its first save).

    Raises:
        RunFolderError: either file is not the run's (a user's own file, or another run's): the message names it.
    """
    folder = Path(folder)
    foreign = []
    for name in ("config.json", "history.json"):
        path = folder / name
        if not path.exists() and not path.is_symlink():
            continue
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            foreign.append(name)
            continue
        if name == "config.json":
            own = _same_recipe(found, state.get("config"))
        else:
            own = _history_is_prefix(found, state.get("history"))
        if not own:
            foreign.append(name)
    if foreign:
        names = " and ".join(foreign)
        raise RunFolderError(f"{folder} holds a {names} that {'is' if len(foreign) == 1 else 'are'} not its "
                             f"checkpoint's own, and continuing the run would overwrite {'it' if len(foreign) == 1 else 'them'}: "
                             f"move {'it' if len(foreign) == 1 else 'them'} out of the folder, or copy {CHECKPOINT_NAME} "
                             "into a new folder and continue the run there (--out NEW --resume)")


def training_in_progress(folder: str | os.PathLike) -> str | None:
    """The holder of the run folder's lock (``"pid N on HOST"``) when a training run is writing into ``folder``
    right now, else ``None``."""
    marker = Path(folder) / RUN_MARKER
    try:
        import fcntl
        with open(marker, "r", encoding="utf-8") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return f.read().strip() or "a process that has not written its id yet"
            except OSError:
                return None
            fcntl.flock(f, fcntl.LOCK_UN)
    except (ImportError, OSError):
        return None
    return None


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
