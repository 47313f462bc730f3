"""Why a run stops early: a signal (:class:`Interrupted`) or a divergence (:class:`Diverged`).

Ctrl-C (SIGINT) or SIGTERM (``kill``, a job scheduler, ``torchrun``) during training lets the current step finish,
so that the run saves a consistent checkpoint (:func:`deferred_signals`); outside training, SIGTERM interrupts as
Ctrl-C does (:func:`sigterm_interrupts`).
"""
from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Interrupted", "Diverged", "deferred_signals", "sigterm_interrupts"]

#: The signals that stop a run: Ctrl-C, and what ``kill``, job schedulers and ``torchrun`` send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A run stopped by signal ``signum``; ``saved_step``: the step of the checkpoint written on the way out, or
    ``None`` (nothing saved). A command line exits with ``128 + signum``."""

    def __init__(self, signum: int = signal.SIGINT, saved_step: int | None = None):
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name} at step {saved_step}; checkpoint saved" if saved_step is not None
                         else f"interrupted by {name}; nothing saved")
        self.signum, self.saved_step = signum, saved_step


class Diverged(FloatingPointError):
    """A loss or a weight became NaN or infinite (``what``) at optimizer step ``step``; nothing more is saved."""

    ADVICE = "lower lr_factor, raise warmup_steps, or set grad_clip"

    def __init__(self, what: str, step: int):
        super().__init__(f"{what} at step {step}: {self.ADVICE}")
        self.what, self.step = what, step


@contextlib.contextmanager
def deferred_signals():
    """Inside ``with``, the first SIGINT or SIGTERM is only noted in the yielded list (the loop then finishes its
    step and saves); a second one raises :class:`Interrupted` at once. Does nothing outside the main thread."""
    caught: list[int] = []

    def handler(signum, frame):
        if caught:  # a second signal: stop now
            raise Interrupted(signum)
        caught.append(signum)

    previous = _install(handler, STOP_SIGNALS)
    try:
        yield caught
    finally:
        _restore(previous)


@contextlib.contextmanager
def sigterm_interrupts():
    """Inside ``with``, SIGTERM raises :class:`Interrupted` (nothing saved) as Ctrl-C raises ``KeyboardInterrupt``."""

    def handler(signum, frame):
        raise Interrupted(signum)

    previous = _install(handler, (signal.SIGTERM,))
    try:
        yield
    finally:
        _restore(previous)


def _install(handler, signals) -> dict:
    previous = {}
    if threading.current_thread() is threading.main_thread():  # handlers can be installed only there
        for signum in signals:
            try:
                previous[signum] = signal.signal(signum, handler)
            except (ValueError, OSError):
                pass
    return previous


def _restore(previous: dict) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)
