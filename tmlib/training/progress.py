"""What a run records and shows: the history of losses, the throughput, the progress bar.

The training step does not read any value back from the device (no ``loss.item()``): :class:`History` keeps the
losses of the last steps on the device and copies them all at once every ``log_every`` steps, so that a GPU is
never made to wait by the host. A loss that is NaN or infinite, in training or validation, stops the run
(:class:`Diverged`) before anything is saved or kept as the best.
"""
from __future__ import annotations

import math
import time

import torch

# The text bar (on stderr), also in notebooks: a widget bar would put an ipywidgets view into the executed
# notebook, which the offline site could not draw.
from tqdm import tqdm

__all__ = ["History", "Throughput", "ProgressBar", "Diverged"]

STEP_FIELDS = ("step", "epoch", "lr", "loss", "tokens_per_s", "elapsed_s")
VALIDATION_FIELDS = ("val_step", "val_epoch", "val_loss", "val_nll", "val_elapsed_s")


class Diverged(FloatingPointError):
    """The training diverged: a loss or a weight became NaN or infinite (the message says where and what to
    change). ``what``: what went wrong (``"the loss became nan"``); ``step``: the optimizer step where it was
    found. A run that raises it saves nothing more."""

    ADVICE = "lower lr_factor, raise warmup_steps, or set grad_clip"

    def __init__(self, what: str, step: int):
        super().__init__(f"{what} at step {step}: {self.ADVICE}")
        self.what, self.step = what, step


class History:
    """The record of a run, ``records``: a dict of lists (stored in checkpoints and ``history.json``).

    Per optimizer step: ``step``, ``epoch``, ``lr`` (the rate that step used), ``loss`` (label-smoothed, nats per
    target token), ``tokens_per_s`` (target tokens per second over the logging window the step belongs to, data
    loading included), ``elapsed_s``. Per validation: ``val_step``, ``val_epoch``, ``val_loss``
    (label-smoothed), ``val_nll`` (plain cross-entropy; perplexity = exp), ``val_elapsed_s``.

    Args:
        records: a stored record to continue (copied), or ``None`` for a new run.
    """

    def __init__(self, records: dict | None = None):
        records = records or {}
        self.records = {k: list(records.get(k, [])) for k in STEP_FIELDS + VALIDATION_FIELDS}
        self.pending: list[tuple] = []  # (step, epoch, lr, loss on the device, elapsed_s), not yet copied

    def add_step(self, step: int, epoch: int, lr: float, loss: torch.Tensor, elapsed_s: float) -> None:
        """Record a step; its ``loss`` (a 0-dim tensor) stays on the device until :meth:`flush`."""
        self.pending.append((step, epoch, lr, loss, elapsed_s))

    def flush(self, tokens_per_s: float = float("nan")) -> None:
        """Copy the pending losses from the device (one synchronisation for many steps) into ``records``.

        Raises:
            Diverged: (a ``FloatingPointError``) a loss is NaN or infinite (the message says what to change).
        """
        if not self.pending:
            return
        losses = torch.stack([p[3] for p in self.pending]).float().cpu().tolist()
        pending, self.pending = self.pending, []
        for (step, epoch, lr, _, elapsed_s), loss in zip(pending, losses):
            if not math.isfinite(loss):
                raise Diverged(f"the loss became {loss}", step)
            for key, value in zip(STEP_FIELDS, (step, epoch, lr, loss, tokens_per_s, elapsed_s)):
                self.records[key].append(value)

    def add_validation(self, step: int, epoch: int, loss: float, nll: float, elapsed_s: float) -> None:
        """Record a validation pass after ``step`` steps.

        Raises:
            Diverged: a validation loss is NaN or infinite (the weights diverged; nothing is recorded).
        """
        if not (math.isfinite(loss) and math.isfinite(nll)):
            raise Diverged(f"the validation loss became {loss}", step)
        for key, value in zip(VALIDATION_FIELDS, (step, epoch, loss, nll, elapsed_s)):
            self.records[key].append(value)


class Throughput:
    """Target tokens per second over windows of steps, including the time spent waiting for data. On CUDA a
    window is timed with CUDA events (the GPU's own clock), synchronising once when it closes.

    Args:
        device: the training device.
    """

    def __init__(self, device: torch.device):
        self.cuda = torch.device(device).type == "cuda"
        self.restart()

    def restart(self) -> None:
        """Open a new window now."""
        self.tokens, self.start = 0, time.perf_counter()
        if self.cuda:
            self.start_event = torch.cuda.Event(enable_timing=True)
            self.start_event.record()

    def add(self, tokens: int) -> None:
        """Count the target tokens of a step."""
        self.tokens += tokens

    def lap(self) -> float:
        """Tokens per second over the window (NaN if it holds no step), then open a new window."""
        if self.tokens == 0:
            rate = float("nan")
        elif self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            rate = self.tokens / max(self.start_event.elapsed_time(end) / 1000.0, 1e-9)
        else:
            rate = self.tokens / max(time.perf_counter() - self.start, 1e-9)
        self.restart()
        return rate


class ProgressBar:
    """A ``tqdm`` bar of optimizer steps with the loss, the learning rate and the throughput, shown by the main
    process only (in a data-parallel run, the others stay silent).

    Args:
        total: steps the run will take (``None``: unknown), initial: steps already done.
        show: show the bar (``TrainConfig.progress``); main: this is the main process (it alone writes lines).
        interval: seconds between refreshes.
    """

    def __init__(self, total: int | None, initial: int, show: bool, main: bool, interval: float):
        self.main = main
        self.bar = tqdm(total=total, initial=initial, disable=not (show and main), unit="step", mininterval=interval,
                        dynamic_ncols=True)

    def update(self) -> None:
        """One more step."""
        self.bar.update(1)

    def show(self, loss: float, lr: float, tokens_per_s: float) -> None:
        """The latest loss, learning rate and throughput, shown at the next refresh."""
        self.bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:,.0f}", refresh=False)

    def write(self, line: str) -> None:
        """A line above the bar (e.g. the validation loss of an epoch), on the main process."""
        if self.main:
            self.bar.write(line)

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> bool:
        self.bar.close()
        return False
