"""When a run stops and when it saves: the budgets, the training clock, the checkpoint cadence and the signals.

* :class:`Budget`: optimizer steps, epochs or wall-clock minutes; the first one spent stops the run.
* :class:`Clock`: the wall time of training (steps, validation and saving), summed over resumed runs.
* :class:`CheckpointSchedule`: a checkpoint every few minutes and/or every few steps.
* :class:`DeferredInterrupt`: Ctrl-C (SIGINT) or SIGTERM (``kill``, a job scheduler, ``torchrun``) lets the
  current step finish, so that the run saves a consistent checkpoint; then :class:`Interrupted` is raised.
* :func:`sigterm_interrupts`: outside the loop (e.g. while the data is prepared), SIGTERM interrupts like Ctrl-C.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time

__all__ = ["Budget", "Clock", "CheckpointSchedule", "DeferredInterrupt", "Interrupted", "sigterm_interrupts"]

#: The signals that stop a run: Ctrl-C, and what ``kill``, job schedulers and ``torchrun`` send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Budget:
    """The budgets of a run: it stops when the first one is spent.

    Args:
        max_steps: optimizer steps, or ``None``.
        max_epochs: passes over the training set, or ``None``.
        max_minutes: minutes of training (:class:`Clock`), or ``None``.

    Raises:
        ValueError: no budget at all (a run would never stop).
    """

    def __init__(self, max_steps: int | None, max_epochs: int | None, max_minutes: float | None):
        if max_steps is None and max_epochs is None and max_minutes is None:
            raise ValueError("give at least one budget: max_steps, max_epochs or max_minutes")
        self.max_steps, self.max_epochs, self.max_minutes = max_steps, max_epochs, max_minutes

    def spent(self, step: int, epoch: int, elapsed_s: float) -> bool:
        """True when ``step`` steps, ``epoch`` finished epochs or ``elapsed_s`` seconds reach a budget."""
        return ((self.max_steps is not None and step >= self.max_steps)
                or (self.max_epochs is not None and epoch >= self.max_epochs)
                or (self.max_minutes is not None and elapsed_s >= 60 * self.max_minutes))

    def total_steps(self, steps_per_epoch: int) -> int | None:
        """The number of steps the run will take, when a step or epoch budget tells (for a progress bar)."""
        if self.max_steps is not None:
            return self.max_steps
        return self.max_epochs * steps_per_epoch if self.max_epochs is not None else None


class Clock:
    """The wall time of training in seconds, ``elapsed_s``: :meth:`tick` adds the time since the last tick (or
    :meth:`restart`), so that what happens between two runs of a resumed training does not count."""

    def __init__(self, elapsed_s: float = 0.0):
        self.elapsed_s = float(elapsed_s)
        self.last = time.perf_counter()

    def restart(self) -> None:
        """Count from now on (at the start of :meth:`tmlib.training.trainer.Trainer.fit`)."""
        self.last = time.perf_counter()

    def tick(self) -> float:
        """Add the time since the last tick to ``elapsed_s``; returns ``elapsed_s``."""
        now = time.perf_counter()
        self.elapsed_s += now - self.last
        self.last = now
        return self.elapsed_s


class CheckpointSchedule:
    """When a checkpoint is due: every ``every_steps`` optimizer steps and/or every ``every_minutes`` minutes
    since the last save (``None``: not by that criterion), at most once per step.

    Args:
        every_minutes: minutes between checkpoints, or ``None``.
        every_steps: optimizer steps between checkpoints, or ``None``.
    """

    def __init__(self, every_minutes: float | None, every_steps: int | None):
        self.every_minutes, self.every_steps = every_minutes, every_steps
        self.saved_at = time.perf_counter()
        self.saved_step: int | None = None

    def saved(self, step: int) -> None:
        """Record a checkpoint of step ``step``, written now (or restored: the run starts from it)."""
        self.saved_at, self.saved_step = time.perf_counter(), step

    def due(self, step: int) -> bool:
        """True when step ``step`` (not saved yet) should be saved."""
        if step == self.saved_step:
            return False
        if self.every_steps and step % self.every_steps == 0:
            return True
        return self.every_minutes is not None and time.perf_counter() - self.saved_at >= 60 * self.every_minutes


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal. ``signum``: the signal (``signal.SIGINT`` for Ctrl-C, ``signal.SIGTERM``);
    ``saved_step``: the optimizer step of the checkpoint written on the way out, or ``None`` when nothing was
    saved (the signal came before training or as a second one). A command line exits with ``128 + signum``."""

    def __init__(self, signum: int = signal.SIGINT, saved_step: int | None = None):
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name} at step {saved_step}; checkpoint saved" if saved_step is not None
                         else f"interrupted by {name}; nothing saved")
        self.signum, self.saved_step = signum, saved_step


def _install(handler, signals=STOP_SIGNALS) -> dict:
    """Install ``handler`` for ``signals``; returns the previous handlers (none outside the main thread, where
    handlers cannot be installed)."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in signals:
            try:
                previous[signum] = signal.signal(signum, handler)
            except (ValueError, OSError):
                pass
    return previous


def _restore(previous: dict) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)


class DeferredInterrupt:
    """Inside ``with``, the first SIGINT (Ctrl-C) or SIGTERM only sets ``requested`` (and ``signum``), so that
    the loop can finish the current optimizer step and save a consistent checkpoint; a second one interrupts at
    once (:class:`Interrupted` with nothing saved). Outside the main thread (where handlers cannot be
    installed) it does nothing."""

    def __init__(self):
        self.requested = False
        self.signum: int | None = None
        self.previous: dict = {}

    def _handler(self, signum, frame):
        if self.requested:  # a second signal: stop now
            raise Interrupted(signum)
        self.requested, self.signum = True, signum

    def __enter__(self) -> "DeferredInterrupt":
        self.previous = _install(self._handler)
        return self

    def __exit__(self, *exc) -> bool:
        _restore(self.previous)
        return False


@contextlib.contextmanager
def sigterm_interrupts():
    """Inside ``with``, SIGTERM raises :class:`Interrupted` (nothing saved) as Ctrl-C raises
    ``KeyboardInterrupt``, instead of ending the process without a word; :class:`DeferredInterrupt` takes over
    both signals while a run trains."""

    def handler(signum, frame):
        raise Interrupted(signum)

    previous = _install(handler, (signal.SIGTERM,))
    try:
        yield
    finally:
        _restore(previous)
