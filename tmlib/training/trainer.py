"""The training loop: :class:`Trainer` runs a :class:`~tmlib.training.config.TrainConfig` on token batches.

One optimizer step (:meth:`Trainer.train_step`) is the paper's recipe (§5.3-5.4): forward, label-smoothed loss,
backward, gradient clipping, Adam step, schedule step; chapter 9 writes the same step by hand and checks that both
agree bit for bit. :meth:`Trainer.fit` repeats it until a budget runs out, with named collaborators:

* precision: :class:`~tmlib.training.precision.MixedPrecision` (bf16 or fp16 autocast; fp16's gradient scaler);
  with ``amp="auto"`` on a CPU, :meth:`Trainer.fit` first times a training step in float32 and in bf16 and keeps the
  faster (:func:`~tmlib.training.precision.time_precisions`); the choice is stored in the checkpoint;
* budget and interruption: :class:`~tmlib.training.budget.Budget` (steps, epochs, minutes of the
  :class:`~tmlib.training.budget.Clock`), Ctrl-C and SIGTERM (:class:`~tmlib.training.budget.DeferredInterrupt`);
* the batches of each step: :class:`~tmlib.training.plan.StepPlan` (gradient accumulation);
* throughput, history and progress bar: :mod:`tmlib.training.progress`;
* evaluation: :func:`~tmlib.training.evaluation.evaluate_loss`, after every epoch and at the end;
* checkpoint state: :meth:`Trainer.state_dict`, everything needed to continue *exactly* (RNG states included),
  written atomically by :meth:`Trainer.save` when the :class:`~tmlib.training.budget.CheckpointSchedule` says so,
  at the end and on Ctrl-C or SIGTERM, never once diverged (:class:`~tmlib.training.progress.Diverged`); a resumed
  run reproduces an uninterrupted one bit for bit (same device and threads);
* the processes: a strategy of :mod:`tmlib.training.strategy`, one process or data parallelism under ``torchrun``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
from pathlib import Path
from typing import Callable

import torch

from tmlib.analysis.machine import machine_info
from tmlib.model.config import ModelConfig
from tmlib.training.budget import Budget, CheckpointSchedule, Clock, DeferredInterrupt, Interrupted
from tmlib.training.checkpoint import (CHECKPOINT_FORMAT, CheckpointError, find_nonfinite, get_rng_state,
                                       load_checkpoint, save_checkpoint, set_rng_state)
from tmlib.training.config import RUNTIME_FIELDS, TrainConfig
from tmlib.training.distributed import check_world_size
from tmlib.training.evaluation import evaluate_loss
from tmlib.training.plan import StepPlan
from tmlib.training.precision import MixedPrecision, machine_settings, time_precisions
from tmlib.training.progress import Diverged, History, ProgressBar, Throughput
from tmlib.training.recipe import make_ema, make_optimizer, make_scheduler, step_loss
from tmlib.training.strategy import current_strategy
from tmlib.utils import atomic_write, remove_stale_temporaries

__all__ = ["Trainer", "translation_forward"]


def translation_forward(model, batch) -> torch.Tensor:
    """The default forward of :class:`Trainer`: ``model(batch.src, batch.tgt_in)`` → logits
    ``(batch, tgt_len, V)``, aligned with ``batch.tgt_out`` (teacher forcing, paper §3)."""
    return model(batch.src, batch.tgt_in)


class Trainer:
    """Train a model on token batches with the paper's recipe; checkpoint and resume exactly.

    Args:
        model: a :class:`tmlib.model.Transformer` (or any module with a ``d_model`` attribute that ``forward_fn``
            can call).
        train_batches: :class:`tmlib.data.batching.BatchIterator` with ``shuffle=True``; epoch ``e`` has a fixed
            batch order given its seed, which is what makes resuming exact.
        val_batches: a ``BatchIterator`` for the validation loss, or ``None``.
        config: :class:`~tmlib.training.config.TrainConfig` (recipe, budgets, runtime); its ``model`` field is
            informational here (the model is built by the caller, e.g. :func:`tmlib.training.experiment.run_training`).
        tokenizer: stored (as JSON) in the checkpoints, so that a checkpoint is all a translator needs.
        checkpoint_path: where to write checkpoints (``None``: never).
        forward_fn: ``forward_fn(model, batch) -> logits (batch, tgt_len, V)`` aligned with ``batch.tgt_out``;
            default :func:`translation_forward`. A decoder-only language model passes ``lambda m, b: m(b.tgt_in)``.
        strategy: :class:`~tmlib.training.strategy.SingleProcess` or :class:`~tmlib.training.strategy.DataParallel`;
            default: :func:`~tmlib.training.strategy.current_strategy` (data parallelism inside a process group of
            several processes, started by :func:`tmlib.training.distributed.process_group` under ``torchrun``;
            every process must then call :meth:`fit`, :meth:`save` and :meth:`evaluate` together).

    State: ``step`` (optimizer steps done), ``epoch`` and ``batch_in_epoch`` (the next batch of the epoch's order to
    train on), ``elapsed_s`` (training wall time so far), ``finished``, ``history`` (see
    :class:`~tmlib.training.progress.History`), ``best`` (with ``keep_best``: the weights of the lowest validation
    NLL, with ``val_nll``, ``step``, ``epoch``). ``model`` is the plain module, whose state is saved;
    ``forward_model`` is what the training step calls (wrapped by the strategy, compiled if asked).

    Raises:
        ValueError: an invalid configuration or device; :class:`~tmlib.training.config.ConfigError` when an
            epoch holds fewer batches than one optimizer step needs.
        RuntimeError: with several processes, the processes hold different training batches.
    """

    def __init__(self, model, train_batches, val_batches=None, config: TrainConfig | None = None, tokenizer=None,
                 checkpoint_path: str | os.PathLike | None = None, *, forward_fn: Callable | None = None,
                 strategy=None):
        self.config = config or TrainConfig()
        self.strategy = strategy or current_strategy()
        self.train_batches, self.val_batches, self.tokenizer = train_batches, val_batches, tokenizer
        self.checkpoint_path = Path(checkpoint_path) if checkpoint_path is not None else None
        self.forward_fn = forward_fn or translation_forward
        self.pad_id = train_batches.pad_id
        self.device = self.strategy.device(self.config.device)
        self.amp = MixedPrecision(self.config.amp, self.device)
        self.model = model.to(self.device)
        self.optimizer = make_optimizer(self.model)
        self.scheduler = make_scheduler(self.optimizer, model.d_model, self.config.warmup_steps, self.config.lr_factor)
        self.ema = make_ema(self.model, self.config.ema_decay) if self.config.ema_decay else None
        self.strategy.prepare(train_batches, self.config.seed)
        self.forward_model, self.eval_forward_model = self._wrap()
        self.plan, self.checkpoints, self.throughput = self._runtime_parts()
        self.step = self.epoch = self.batch_in_epoch = 0
        self.finished = False
        self.clock = Clock()
        self.log = History()
        self.best: dict | None = None

    @property
    def history(self) -> dict:
        """The record of the run (lists per step and per validation; see :class:`~tmlib.training.progress.History`)."""
        return self.log.records

    @property
    def elapsed_s(self) -> float:
        """Wall time of training so far, in seconds, summed over resumed runs."""
        return self.clock.elapsed_s

    # ---------------------------------------------------------------- one optimizer step
    def train_step(self, batches, step_tokens: int | None = None) -> torch.Tensor:
        """One optimizer step of the paper's recipe (§5.3-5.4); returns its loss (label-smoothed, nats per target
        token) as a 0-dim tensor on the device (no host synchronisation).

        Args:
            batches: one :class:`~tmlib.data.batching.Batch`, or this process's batches of the step (gradient
                accumulation: their gradients add up before the update).
            step_tokens: the non-pad target tokens of the whole step (all its batches, on all processes), which
                each batch's summed loss is divided by (:func:`~tmlib.training.recipe.step_loss`); default:
                those of ``batches``, summed over the processes.
        """
        batches = list(batches) if isinstance(batches, (list, tuple)) else [batches]
        if step_tokens is None:
            step_tokens = self.strategy.total(sum(b.n_tokens for b in batches))
        self.optimizer.zero_grad(set_to_none=True)
        loss = 0.0
        for i, batch in enumerate(batches):
            batch = batch.to(self.device)
            with self.strategy.sync_gradients(now=i == len(batches) - 1):  # once per step, with the last batch
                with self.amp.autocast():
                    logits = self.forward_fn(self.forward_model, batch)  # (batch, tgt_len, V)
                part = step_loss(logits, batch.tgt_out, self.pad_id, self.config.label_smoothing,  # §5.4: summed
                                 batch.n_tokens, step_tokens)  # over the batch's tokens / the step's tokens
                self.amp.backward(self.strategy.backward_loss(part))  # the gradients of the batches add up
            loss = loss + part.detach()
        self.amp.unscale_(self.optimizer)  # (fp16: the gradients at their true scale)
        if self.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)  # global norm ≤ clip
        self.amp.step(self.optimizer)  # Adam (§5.3)
        self.scheduler.step()  # the learning rate of the next step
        if self.ema is not None:
            self.ema.update_parameters(self.model)
        return self.strategy.sum(loss)  # the loss of the whole step

    # ---------------------------------------------------------------- the loop
    def fit(self) -> dict:
        """Train until a budget runs out; returns the history.

        Every iteration first decides, with the other processes if any (:meth:`_decide`), whether to save and
        whether to stop; then it ends the epoch (validation) or takes one optimizer step. Checkpoints (if
        ``checkpoint_path``) every ``checkpoint_minutes`` / ``checkpoint_every`` steps and at the end. Ctrl-C
        (SIGINT) or SIGTERM lets the current step finish, writes a checkpoint and raises
        :class:`~tmlib.training.budget.Interrupted` (a ``KeyboardInterrupt``; a second signal stops at once,
        without saving). A run stopped at any point and resumed with :meth:`resume` continues exactly as if it
        had never stopped (same device and thread count).

        Raises:
            ValueError: no budget is set (``max_steps``, ``max_epochs`` or ``max_minutes``).
            tmlib.training.progress.Diverged: (a ``FloatingPointError``) a loss or a weight became NaN or
                infinite (checked every ``log_every`` steps, at validation and before saving): nothing diverged
                is saved, kept as the best or marked finished.
            tmlib.training.budget.Interrupted: after saving, when interrupted.
        """
        c = self.config
        budget = Budget(c.max_steps, c.max_epochs, c.max_minutes)
        bar = ProgressBar(budget.total_steps(self.plan.steps_in_epoch(0)), self.step, c.progress,
                          self.strategy.is_main, c.progress_interval)
        with machine_settings(c.threads, self.device, self.amp), bar:
            if self.amp.needs_probe:
                self._choose_precision()
            if c.amp == "auto":
                bar.write(self.amp.describe())
            self.model.train()
            self.clock.restart()
            self.checkpoints.saved(self.step)  # (the state it starts from)
            self.throughput.restart()
            steps = None  # the remaining steps of this epoch: (this process's batches, the step's tokens)
            with DeferredInterrupt() as ctrl_c:
                while True:
                    stop, save_now, interrupted = self._decide(budget, ctrl_c)
                    if save_now:
                        self.save()
                    if stop or interrupted:
                        break
                    if self.batch_in_epoch >= self.plan.epoch_end(self.epoch):
                        self._end_epoch(bar)  # validation
                        steps = None
                        continue
                    if steps is None:
                        steps = self.plan.steps(self.epoch, self.batch_in_epoch)
                    batches, step_tokens = next(steps)
                    lr = self.scheduler.get_last_lr()[0]
                    loss = self.train_step(batches, step_tokens)  # a 0-dim tensor on the device: no synchronisation
                    self.step, self.batch_in_epoch = self.step + 1, self.batch_in_epoch + self.plan.batches_per_step
                    self.log.add_step(self.step, self.epoch, lr, loss, self.clock.tick())
                    self.throughput.add(step_tokens)
                    bar.update()
                    if len(self.log.pending) >= c.log_every:
                        self._show(bar, lr)  # copy the losses from the device, show the latest
                if interrupted:
                    self.save()
                    raise Interrupted(ctrl_c.signum or signal.SIGINT, self.step)
            self.log.flush(self.throughput.lap())
            if self.history["val_step"][-1:] != [self.step]:
                self.validate()  # the validation loss of the final parameters
            self.finished = True
            self.save()
            self.clock.tick()
        return self.history

    def _decide(self, budget: Budget, ctrl_c: DeferredInterrupt) -> tuple[bool, bool, bool]:
        """``(stop, save_now, interrupted)``: a budget is spent, a checkpoint is due, Ctrl-C was pressed. The
        first two are the main process's (its clock), the third is true if any process was interrupted; the
        strategy makes them the same on every process."""
        due = self.checkpoint_path is not None and self.checkpoints.due(self.step)
        return self.strategy.agree((budget.spent(self.step, self.epoch, self.clock.elapsed_s), due),
                                   (ctrl_c.requested,))

    def _show(self, bar: ProgressBar, lr: float) -> None:
        """Copy the pending losses from the device into the history; show the latest loss, lr and throughput."""
        rate = self.throughput.lap()
        self.log.flush(rate)
        bar.show(self.history["loss"][-1], lr, rate)

    def _end_epoch(self, bar: ProgressBar) -> None:
        """Move to the next epoch; validate if asked (the time it takes is not counted in the throughput)."""
        self.log.flush(self.throughput.lap())
        self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        if self.config.val_every_epoch and self.val_batches is not None:
            self.validate()
            h = self.history
            bar.write(f"epoch {self.epoch}: step {self.step}, val loss {h['val_loss'][-1]:.3f} "
                      f"(NLL {h['val_nll'][-1]:.3f}), {self.elapsed_s / 60:.1f} min")
        self.clock.tick()
        self.throughput.restart()

    # ---------------------------------------------------------------- evaluation
    def eval_model(self) -> torch.nn.Module:
        """The weights to evaluate and translate with: the moving average when ``ema_decay`` is set, else the
        trained weights themselves."""
        return self.ema.module if self.ema is not None else self.model

    def evaluate(self, batches=None) -> tuple[float, float]:
        """``(label-smoothed loss, plain cross-entropy)`` in nats per target token over ``batches`` (default: the
        validation batches), with :meth:`eval_model`'s weights (:func:`~tmlib.training.evaluation.evaluate_loss`;
        with several processes, each evaluates its share and every process returns the same values)."""
        model = self.ema.module if self.ema is not None else self.eval_forward_model
        return evaluate_loss(model, batches or self.val_batches, self.forward_fn, pad_id=self.pad_id,
                             label_smoothing=self.config.label_smoothing, precision=self.amp,
                             strategy=self.strategy, device=self.device)

    def validate(self) -> None:
        """Record the validation loss of the current weights; with ``keep_best``, keep a copy of them when their
        validation NLL is the lowest so far (every process holds the same weights and NLL)."""
        if self.val_batches is None:
            return
        val_loss, val_nll = self.evaluate()
        self.log.add_validation(self.step, self.epoch, val_loss, val_nll, self.clock.tick())
        if self.config.keep_best and (self.best is None or val_nll < self.best["val_nll"]):
            weights = self.eval_model().state_dict()
            self.best = {"model": {k: v.detach().clone() for k, v in weights.items()}, "val_nll": val_nll,
                         "step": self.step, "epoch": self.epoch}

    # ---------------------------------------------------------------- checkpoint state
    def state_dict(self) -> dict:
        """Everything needed to continue exactly, as tensors and plain containers (this process's view: its own
        RNG states; :meth:`save` adds every process's as ``"rng_ranks"``)."""
        self.log.flush()
        model_config = getattr(self.model, "config", None)
        return {
            "format": CHECKPOINT_FORMAT,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.amp.scaler.state_dict(),
            "precision": self.amp.record(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "best": self.best,
            "step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
            "elapsed_s": self.elapsed_s, "finished": self.finished,
            "config": self.config.to_dict(),
            "model_config": model_config.to_dict() if isinstance(model_config, ModelConfig) else None,
            "tokenizer": self.tokenizer.to_json() if self.tokenizer is not None else None,
            "history": self.history,
            "world_size": self.strategy.world_size,
            "rng": get_rng_state(),
            "torch_version": str(torch.__version__),
            "machine": machine_info(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict` (model, optimizer, scheduler, scaler, position, history, RNG states).
        Tensors may come mapped to any device: the model and optimizer copy them to theirs, and the RNG states
        are read on the CPU. With several processes, each restores its own RNG states (``"rng_ranks"``).

        Raises:
            tmlib.training.distributed.WorldSizeMismatch: the checkpoint was written by a run on another number of
                processes (an optimizer step takes ``accumulate × processes`` batches, and each process has its
                own random state, so the run can only continue on as many processes as it had).
        """
        check_world_size(state["world_size"], self.strategy.world_size)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])  # moves the moments to the parameters' device
        self.scheduler.load_state_dict(state["scheduler"])
        self._restore_precision(state)
        if state["scaler"]:  # empty when saved by a run without fp16
            self.amp.scaler.load_state_dict(state["scaler"])
        if self.ema is not None and state["ema"] is not None:
            self.ema.load_state_dict(state["ema"])
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.clock, self.finished = Clock(state["elapsed_s"]), state["finished"]
        self.log, self.best = History(state["history"]), state["best"]
        ranks = state.get("rng_ranks")  # written by save(), not by state_dict()
        set_rng_state(ranks[self.strategy.rank] if ranks else state["rng"])

    def save(self) -> None:
        """Write the checkpoint (atomically, durably) and ``history.json`` beside it; remove the temporary files
        that a killed earlier write may have left. Every process calls it: the main one writes the RNG states of
        all (``"rng_ranks"``) and tells the others whether the write succeeded.

        Raises:
            tmlib.training.progress.Diverged: a pending loss, a weight, Adam's moments or the moving average
                hold a NaN or an infinity: nothing is written, the run is not finished (on every process).
            tmlib.training.checkpoint.CheckpointError: the checkpoint could not be written (on every process).
        """
        if self.checkpoint_path is None:
            return
        self.log.flush(self.throughput.lap())  # Diverged on a NaN loss
        bad = find_nonfinite({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()["state"],
                              "ema": self.ema.state_dict() if self.ema is not None else None})
        if bad is not None:
            self.finished = False
            raise Diverged(f"{bad} became NaN or infinite", self.step)
        rngs = self.strategy.gather(get_rng_state())
        error = None
        if self.strategy.is_main:
            try:
                remove_stale_temporaries(self.checkpoint_path)
                save_checkpoint(self.checkpoint_path, {**self.state_dict(), "rng_ranks": rngs})
                with atomic_write(self.checkpoint_path.with_name("history.json")) as tmp:
                    tmp.write_text(json.dumps(self.history, indent=1))
            except (CheckpointError, OSError) as err:
                error = err
        failure = self.strategy.broadcast(None if error is None else str(error))
        if error is not None:
            raise error
        if failure is not None:
            raise CheckpointError(f"rank 0 could not write the checkpoint: {failure}")
        self.checkpoints.saved(self.step)

    def resume(self, path: str | os.PathLike | None = None) -> bool:
        """Load the checkpoint at ``path`` (default: ``checkpoint_path``) if it exists; True if loaded.

        The file is always read onto the CPU (``map_location="cpu"``): the RNG states must be CPU tensors, and
        the model and optimizer move their parts to ``self.device`` themselves."""
        path = Path(path) if path is not None else self.checkpoint_path
        if path is None or not path.is_file():
            return False
        self.load_state_dict(load_checkpoint(path, map_location="cpu"))
        return True

    # ---------------------------------------------------------------- runtime settings
    def apply_runtime(self, config: TrainConfig) -> None:
        """Take the runtime fields (:data:`~tmlib.training.config.RUNTIME_FIELDS`: budgets, device, precision,
        threads, logging, checkpoint cadence) from ``config``, keeping this run's other fields. Used when a run
        is continued with different budgets or on another device."""
        new = dataclasses.replace(self.config, **{k: getattr(config, k) for k in RUNTIME_FIELDS})
        moved = (new.device, new.amp, new.compile) != (self.config.device, self.config.amp, self.config.compile)
        self.config = new
        if moved:
            self.device = self.strategy.device(new.device)
            self.amp = MixedPrecision(new.amp, self.device)
            self.model.to(self.device)
            if self.ema is not None:
                self.ema.to(self.device)
            self.forward_model, self.eval_forward_model = self._wrap()
        self.plan, self.checkpoints, self.throughput = self._runtime_parts()

    def _wrap(self) -> tuple[torch.nn.Module, torch.nn.Module]:
        """``(forward_model, eval_forward_model)``: what the training step calls (the model as the strategy wraps
        it, compiled if asked), and what evaluation calls: the same without a data-parallel wrapper (the
        processes evaluate different shares, and no gradient is synchronised)."""
        wrapped = self.strategy.wrap(self.model, self.device)
        forward_model = self._compiled(wrapped) if self.config.compile else wrapped
        return forward_model, (forward_model if wrapped is self.model else self.model)

    @staticmethod
    def _compiled(model):
        return torch.compile(model, dynamic=True)

    # ---------------------------------------------------------------- precision, measured
    def _choose_precision(self) -> None:
        """``amp="auto"`` on a CPU: time one forward and backward pass of the first training batch in float32 and
        in bf16 (a few seconds) and keep the faster; the main process times it and the others take its choice."""
        timings = None
        if self.strategy.is_main:
            batch = self.train_batches.collate_indices(self.train_batches.batches(0)[0]).to(self.device)
            with torch.random.fork_rng(devices=[]):  # dropout's draws here leave the run's random state untouched
                timings = time_precisions(lambda dtype: self._probe_step(batch, dtype))
        self.amp = MixedPrecision(self.config.amp, self.device, self.strategy.broadcast(timings))

    def _probe_step(self, batch, dtype) -> None:
        """One forward and backward pass on ``batch`` in ``dtype`` (None: float32), its gradients dropped."""
        with torch.autocast(self.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = self.forward_fn(self.model, batch)  # (batch, tgt_len, V)
        step_loss(logits, batch.tgt_out, self.pad_id, self.config.label_smoothing, batch.n_tokens,
                  batch.n_tokens).backward()
        self.model.zero_grad(set_to_none=True)

    def _restore_precision(self, state: dict) -> None:
        """Continue a run in the precision it chose (so that it continues exactly), when its probe ran on this
        CPU with the same ``amp``; on another machine, or with another ``amp``, :meth:`fit` decides again."""
        stored, machine, here = state.get("precision"), state.get("machine") or {}, machine_info()
        same_cpu = all(machine.get(k) == here[k] for k in ("cpu_model", "cpu_flags", "onednn_max_cpu_isa"))
        if stored and stored["timings"] and stored["amp"] == self.config.amp and self.amp.needs_probe and same_cpu:
            self.amp = MixedPrecision(self.config.amp, self.device, stored["timings"])

    def _runtime_parts(self) -> tuple[StepPlan, CheckpointSchedule, Throughput]:
        c = self.config
        return (StepPlan(self.train_batches, c.accumulate, self.strategy, self.device, c.num_workers),
                CheckpointSchedule(c.checkpoint_minutes, c.checkpoint_every), Throughput(self.device))
