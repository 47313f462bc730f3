"""Checkpoints and random-number-generator state: nothing a user trained is lost.

* :func:`save_checkpoint` writes atomically and durably (temporary file in the same folder, ``fsync``,
  ``os.replace``): an interruption, a full disk or a crash leaves the previous checkpoint intact.
* :func:`find_nonfinite` names a NaN or infinite tensor of a state: a diverged run is never saved.
* :func:`load_checkpoint` reads with ``torch.load(weights_only=True)``, which refuses files that carry
  Python code, and turns every failure into a :class:`CheckpointError` that says what the file is and what
  to do (never torch's advice to retry with ``weights_only=False``).
* :func:`get_rng_state` / :func:`set_rng_state` capture Python's, NumPy's and torch's generators (CPU and
  CUDA) as plain tensors, so that a resumed run draws the same dropout masks as an uninterrupted one.

A checkpoint written by :class:`tmlib.training.trainer.Trainer` is a dict with ``"format": CHECKPOINT_FORMAT``.
"""
from __future__ import annotations

import errno
import os
import pickle
import random
from pathlib import Path

import numpy as np
import torch

from tmlib.utils import atomic_write, mount_point

__all__ = ["CHECKPOINT_NAME", "CHECKPOINT_FORMAT", "CheckpointError", "save_checkpoint", "load_checkpoint",
           "find_nonfinite", "get_rng_state", "set_rng_state"]

#: File name of the checkpoint inside a run folder.
CHECKPOINT_NAME = "checkpoint.pt"
#: The ``"format"`` entry of the checkpoints this version writes, and the only one it reads.
CHECKPOINT_FORMAT = "tmlib-checkpoint-2"


class CheckpointError(RuntimeError):
    """A checkpoint cannot be written or read; the message names the file and says what to do."""


def _size(n: int) -> str:
    """``n`` bytes in words: ``"12 MB"``, ``"4 KB"``."""
    return f"{n / 2**20:.0f} MB" if n >= 2**20 else f"{n / 2**10:.0f} KB"


def _nbytes(obj) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 0


def _starts_like_zip(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def find_nonfinite(state, name: str = "") -> str | None:
    """The name (``"model.encoder.layers.0.ff.w1.weight"``) of the first floating-point tensor of ``state`` that
    holds a NaN or an infinity, or ``None`` when every one is finite.

    Args:
        state: tensors in nested dicts, lists and tuples (a checkpoint, a ``state_dict``); other values are
            ignored. One host synchronisation per tensor: call it when saving, not every step.
        name: the prefix of the names.
    """
    if isinstance(state, torch.Tensor):
        finite = not state.is_floating_point() or bool(torch.isfinite(state).all())
        return None if finite else name
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, (list, tuple)) else ()
    for key, value in items:
        found = find_nonfinite(value, f"{name}.{key}" if name else str(key))
        if found is not None:
            return found
    return None


def save_checkpoint(path: str | os.PathLike, state: dict) -> None:
    """``torch.save(state, path)``, atomically and durably.

    Args:
        path: the checkpoint file (its folder is created if needed).
        state: tensors and plain containers (what ``torch.load(weights_only=True)`` can read back).

    Raises:
        CheckpointError: the disk is full (``torch.save`` reports it as a ``RuntimeError``, a write as an
            ``OSError``) or not writable; the previous checkpoint at ``path`` is intact and the message names
            the file system and says how large the checkpoint is.
    """
    path = Path(path)
    size = _nbytes(state)
    try:
        with atomic_write(path, size=size) as tmp:
            torch.save(state, tmp)
    except (OSError, RuntimeError) as err:
        kept = ("the previous checkpoint is intact: free some space and continue with --resume" if path.is_file()
                else "no checkpoint was written: free some space and start again")
        if getattr(err, "errno", None) in (errno.ENOSPC, errno.EDQUOT):  # (atomic_write's DiskFullError too)
            raise CheckpointError(f"no space left on the device ({mount_point(path.parent)}) while saving {path} "
                                  f"(the checkpoint needs about {_size(size)}); {kept}") from err
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0]
        kept = "the previous checkpoint is intact" if path.is_file() else "no checkpoint was written"
        raise CheckpointError(f"cannot write {path} ({reason}); {kept}") from err


def _missing_checkpoint(path: Path) -> str:
    """Why there is no checkpoint file at ``path``: a link that loops or leads nowhere, a run that is still
    before its first save (it holds its folder's lock), or simply none yet."""
    from tmlib.training.rundir import RUN_MARKER, training_in_progress
    from tmlib.validation import missing_path_reason

    for candidate in (path, path.parent):
        reason = missing_path_reason(candidate)
        if reason not in (None, "does not exist"):
            return f"no checkpoint at {path}: {candidate} {reason}"
    holder = training_in_progress(path.parent)
    if holder is not None:
        return (f"no checkpoint at {path} yet: a training run ({holder}) is writing into {path.parent} and has not "
                "saved its first checkpoint; it saves every --checkpoint-minutes (5 by default), at its end and at "
                "Ctrl-C: try again then")
    if (path.parent / RUN_MARKER).is_file():
        return (f"no checkpoint at {path}: a run started in {path.parent} but stopped before its first save; train "
                f"again with `python -m tmlib.train --out {path.parent}`")
    return (f"no checkpoint at {path}: train one with `python -m tmlib.train --out {path.parent}` (or "
            "tmlib.training.experiment.run_training)")


def _holds_code(message: str) -> bool:
    """Whether torch's weights-only unpickler refused the file because it names Python objects to import or call
    (what a pickle uses to run code), rather than because the bytes are not a pickle at all."""
    return any(s in message for s in ("Unsupported global", "not an allowed global", "Trying to call reduce",
                                      "reduce for unrecognized function", "Trying to instantiate",
                                      "Unsupported class", "unsupported GLOBAL", "is blocked"))


def _pickle_calls(path: Path, limit: int = 1 << 24) -> bool:
    """Whether ``path`` is a plain pickle that imports or calls Python objects (read with ``pickletools``, which
    runs nothing; torch's unpickler stops earlier on some protocols' framing)."""
    import pickletools

    try:
        with open(path, "rb") as f:
            ops = {op.name for op, _, _ in pickletools.genops(f.read(limit))}
    except Exception:  # noqa: BLE001 - not a pickle at all
        return False
    return bool(ops & {"GLOBAL", "STACK_GLOBAL", "REDUCE", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX"})


def load_checkpoint(path: str | os.PathLike, map_location="cpu", *, require_format: bool = True) -> dict:
    """Read a checkpoint with ``torch.load(weights_only=True)``.

    Args:
        path: the ``checkpoint.pt`` file.
        map_location: where to put the tensors (default: CPU; the trainer moves what it restores).
        require_format: check that the file is a tmlib checkpoint of this version (a dict with ``"format"``
            equal to :data:`CHECKPOINT_FORMAT`).

    Returns:
        The checkpoint dict.

    Raises:
        FileNotFoundError: no file at ``path`` (the message says how to produce one).
        CheckpointError: ``path`` is a folder, not a PyTorch file, truncated or corrupt, a file that carries
            Python code (refused, never run), a PyTorch file that is not a tmlib checkpoint, or a checkpoint of
            another format (an older version of tmlib).
    """
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint file: pass the run folder's {CHECKPOINT_NAME}")
    if not path.is_file():
        raise FileNotFoundError(_missing_checkpoint(path))
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if _holds_code(str(err)) or _pickle_calls(path):
            raise CheckpointError(
                f"{path} holds Python objects that could run code when loaded; it was refused (tmlib checkpoints "
                "hold only tensors and plain values, so this file was not written by tmlib)") from err
        raise CheckpointError(f"{path} is not a PyTorch checkpoint file (it cannot be unpickled)") from err
    except Exception as err:  # noqa: BLE001 - whatever torch raises on a damaged or foreign file
        text = str(err).splitlines()[0].split(". ")[0] if str(err) else type(err).__name__  # (torch's first sentence)
        if _starts_like_zip(path):  # torch.save writes a zip archive: this one is cut short or damaged
            raise CheckpointError(f"cannot read checkpoint {path}: it is truncated or corrupt ({text}); delete it "
                                  "and train again") from err
        raise CheckpointError(f"{path} is not a PyTorch checkpoint file ({text})") from err
    if require_format:
        found = state.get("format") if isinstance(state, dict) else None
        if found is None:
            raise CheckpointError(f"{path} is a PyTorch file but not a tmlib checkpoint (expected a dict with 'format' "
                                  f"{CHECKPOINT_FORMAT!r}); train one with `python -m tmlib.train`")
        if found != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{path} is a tmlib checkpoint of format {found!r}, which this version does not "
                                  f"read (it reads {CHECKPOINT_FORMAT!r}): train the model again with "
                                  "`python -m tmlib.train`")
    return state


# --------------------------------------------------------------------------------------------------
# Random-number-generator state
# --------------------------------------------------------------------------------------------------

def get_rng_state() -> dict:
    """The states of Python's, NumPy's and torch's (CPU and every CUDA device) generators, as CPU tensors and
    plain containers (loadable with ``torch.load(weights_only=True)``)."""
    version, state, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": [version, torch.tensor(state, dtype=torch.int64), gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
        "cuda": [s.cpu() for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict) -> None:
    """Inverse of :func:`get_rng_state`. Works whatever device the checkpoint was mapped to: every state is
    brought to the CPU first (``torch.set_rng_state`` and NumPy need CPU data). CUDA states are restored only
    where CUDA is available (a run moved from a GPU to a CPU keeps its CPU generators)."""
    version, st, gauss = state["python"]
    random.setstate((version, tuple(int(x) for x in st.cpu().tolist()), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.cpu().numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"].cpu().to(torch.uint8))
    cuda = state.get("cuda") or []
    if cuda and torch.cuda.is_available():
        n = min(len(cuda), torch.cuda.device_count())
        for i in range(n):
            torch.cuda.set_rng_state(cuda[i].cpu().to(torch.uint8), i)
