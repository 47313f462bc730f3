"""What a budget buys: the passes over the training set, and the dropout chosen from them (``auto_dropout``).

Dropout (§5.4) slows learning at first and pays later: on chapter 9's model, in the same training time, the weights
kept after the budget were better without dropout up to eight passes and better with P_drop 0.1 from nine
(``benchmarks/results/translate_cpu_dropout01.json`` against ``translate_cpu_seed1.json``; steps with dropout take
1.1 times as long). How many passes a 15-minute budget buys depends on the machine (from under four to nine and more
on the CPUs measured), so the choice is made at the start of a run, from the measured step time, as ``amp="auto"``
chooses the precision.
"""
from __future__ import annotations

__all__ = ["AUTO_DROPOUT_MIN_PASSES", "passes_in_budget", "dropout_for_passes", "describe_dropout"]

#: ``auto_dropout`` switches dropout on when the budget buys at least this many passes, counted at the pace of
#: steps without dropout (chapter 9, "When does dropout pay?"; tested against the records).
AUTO_DROPOUT_MIN_PASSES = 9


def passes_in_budget(steps_per_epoch: int, max_steps: int | None = None, max_epochs: int | None = None,
                     max_minutes: float | None = None, step_s: float | None = None) -> float:
    """The passes over the training set that the first budget to run out allows: ``max_epochs``, ``max_steps /
    steps_per_epoch`` or ``max_minutes · 60 / step_s / steps_per_epoch`` (``step_s``: seconds per optimizer step,
    measured). Raises ValueError: no budget, or minutes without a positive ``step_s``."""
    passes = []
    if max_epochs is not None:
        passes.append(float(max_epochs))
    if max_steps is not None:
        passes.append(max_steps / steps_per_epoch)
    if max_minutes is not None:
        if not step_s or step_s <= 0:
            raise ValueError(f"a budget in minutes needs the measured seconds per step, got step_s={step_s!r}")
        passes.append(max_minutes * 60 / step_s / steps_per_epoch)
    if not passes:
        raise ValueError("give at least one budget: max_steps, max_epochs or max_minutes")
    return min(passes)


def dropout_for_passes(passes: float, p: float) -> float:
    """``p`` when ``passes`` ≥ :data:`AUTO_DROPOUT_MIN_PASSES`, else 0.0 (no dropout)."""
    return p if passes >= AUTO_DROPOUT_MIN_PASSES else 0.0


def describe_dropout(record: dict) -> str:
    """One line on the dropout ``auto_dropout`` chose, e.g. ``"dropout: 0.1 (auto_dropout: the budget buys about
    13.1 epochs at 0.29 s a step, timed without dropout or validation; 0.1 from 9 epochs)"``."""
    pace = f" at {record['step_s']:.2f} s a step, timed without dropout or validation" if record.get("step_s") else ""
    return (f"dropout: {record['p']:g} (auto_dropout: the budget buys about {record['passes']:.1f} epochs{pace}; "
            f"{record['auto']:g} from {AUTO_DROPOUT_MIN_PASSES} epochs)")
