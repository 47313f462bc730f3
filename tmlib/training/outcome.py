"""How a run that stopped early is reported to the user of the command line: what it saved, and what to do next.

A run stops early on a signal (:class:`tmlib.training.stops.Interrupted`, or Python's ``KeyboardInterrupt``
before training starts), on a divergence (:class:`tmlib.training.stops.Diverged`) or when memory runs out.
Each function gives the one line the command line prints; each says only what is true of the run folder: which
checkpoint is there (none, an earlier one, the one just saved) and the command that continues or restarts.
"""
from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

from tmlib.training.checkpoint import CHECKPOINT_NAME

__all__ = ["describe_checkpoint", "describe_interruption", "describe_divergence", "describe_out_of_memory",
           "is_out_of_memory"]


def describe_checkpoint(out: str | os.PathLike) -> str | None:
    """``"the checkpoint of step N in OUT"`` (the step read from ``history.json``, which is written beside the
    checkpoint), or ``None`` when the run folder ``out`` holds no checkpoint."""
    out = Path(out)
    if not (out / CHECKPOINT_NAME).is_file():
        return None
    try:
        return f"the checkpoint of step {json.loads((out / 'history.json').read_text())['step'][-1]} in {out}"
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return f"the checkpoint in {out}"


def describe_interruption(stop: KeyboardInterrupt, out: str | os.PathLike, launcher: str) -> str:
    """What a signal did: the checkpoint saved on the way out, or that nothing new was saved (a signal before
    the first step, or a second one that stops at once).

    Args:
        stop: the ``KeyboardInterrupt`` (an :class:`~tmlib.training.stops.Interrupted` carries ``signum`` and
            ``saved_step``; a plain one is Ctrl-C, nothing saved).
        out: the run folder.
        launcher: the command that continues, e.g. ``"python -m tmlib.train"``.
    """
    signum = getattr(stop, "signum", signal.SIGINT)
    how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    resume = f"continue with `{launcher} --out {out} --resume`"
    if getattr(stop, "saved_step", None) is not None:
        return f"interrupted ({how}) at step {stop.saved_step}: the checkpoint in {out} is saved; {resume}"
    note = describe_checkpoint(out)
    if note is not None:
        return f"interrupted ({how}) before saving: nothing new was saved, {note} is intact; {resume}"
    return f"interrupted ({how}) before the first checkpoint: nothing was saved; run the same command again to start"


def describe_divergence(err, config, out: str | os.PathLike) -> str:
    """After a :class:`~tmlib.training.stops.Diverged`: the checkpoint kept (the last one written, whose losses
    and weights were finite), and the changes of the recipe (``config``, a
    :class:`~tmlib.training.config.TrainConfig`) that help. Resuming is not advised: a resumed run repeats the
    same steps exactly, and the recipe of a run cannot change."""
    note = describe_checkpoint(out)
    kept = f"{note} is kept (saved before the divergence showed; nothing since was written)" if note else \
        "nothing was saved"
    clip = "" if config.grad_clip is not None else " or --grad-clip 1"
    return (f"the training diverged ({err.what} at step {err.step}); {kept}: start a new run with a lower --lr-factor "
            f"(this run: {config.lr_factor:g}), a longer --warmup-steps{clip} (resuming would repeat the same steps)")


def is_out_of_memory(err: BaseException) -> bool:
    """True when ``err`` (a ``RuntimeError`` of torch) says that the device or the CPU ran out of memory."""
    text = str(err)
    return "out of memory" in text.lower() or "can't allocate memory" in text


def describe_out_of_memory(err: BaseException, config, out: str | os.PathLike) -> str:
    """After running out of memory: torch's reason (its first sentence, without the C++ assertion), what to lower,
    and the checkpoint kept."""
    note = describe_checkpoint(out)
    reason = re.sub(r"^\[enforce fail[^\]]*\]\s*(err == 0\.\s*)?", "", str(err).splitlines()[0]).split(". ")[0]
    return (f"out of memory ({reason[:160]}): lower --max-tokens (this run: {config.max_tokens}) or train a smaller "
            f"model; {f'{note} is intact' if note else 'nothing was saved'}")
