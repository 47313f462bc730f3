"""The training loop (§5): :class:`Trainer` runs a :class:`~tmlib.training.config.TrainConfig` on token batches.

:meth:`Trainer.train_step` is the paper's recipe (§5.3-5.4), which chapter 9 writes by hand and checks bit for bit.
:meth:`Trainer.fit` repeats it until a budget (steps, epochs, minutes) is spent: it validates after each epoch, writes
checkpoints that resume exactly (RNG states included), and on Ctrl-C or SIGTERM finishes the step and saves. Under
``torchrun`` each process trains on its share of every step and ``DistributedDataParallel`` all-reduces the gradients
once per step (the ``self.ddp`` branches).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm  # the text bar: a widget bar would leave a view in the notebook that the offline site cannot draw

from tmlib.machine import machine_info
from tmlib.model.config import ModelConfig
from tmlib.model.transformer import set_dropout
from tmlib.training import distributed
from tmlib.training.budget import AUTO_DROPOUT_MIN_PASSES, describe_dropout, dropout_for_passes, passes_in_budget
from tmlib.training.checkpoint import (CHECKPOINT_FORMAT, CheckpointError, find_nonfinite, get_rng_state,
                                       load_checkpoint, save_checkpoint, set_rng_state)
from tmlib.training.config import RUNTIME_FIELDS, ConfigError, TrainConfig
from tmlib.training.evaluation import evaluate_loss
from tmlib.training.precision import MixedPrecision, machine_settings, measured_precision, resumed_precision
from tmlib.training.recipe import make_ema, make_optimizer, make_scheduler, step_loss
from tmlib.training.stops import Diverged, Interrupted, deferred_signals
from tmlib.utils import atomic_write, remove_stale_temporaries

__all__ = ["Trainer", "translation_forward", "STEP_FIELDS", "VALIDATION_FIELDS"]

#: The history of a run, per optimizer step (``loss``: label-smoothed, nats per target token) and per validation.
STEP_FIELDS = ("step", "epoch", "lr", "loss", "tokens_per_s", "elapsed_s")
VALIDATION_FIELDS = ("val_step", "val_epoch", "val_loss", "val_nll", "val_elapsed_s")


def translation_forward(model, batch) -> torch.Tensor:
    """``model(batch.src, batch.tgt_in)`` → logits ``(batch, tgt_len, V)`` aligned with ``batch.tgt_out`` (§3)."""
    return model(batch.src, batch.tgt_in)


class Trainer:
    """Train ``model`` on ``train_batches`` with the paper's recipe; checkpoint and resume exactly.

    ``train_batches``: a ``BatchIterator`` with ``shuffle=True`` (each epoch's order is fixed by its seed, which makes
    resuming exact); ``val_batches``: for the validation loss, or None; ``tokenizer``: stored in the checkpoints at
    ``checkpoint_path`` (None: none written); ``forward_fn(model, batch)`` → logits aligned with ``batch.tgt_out``
    (a language model passes ``lambda m, b: m(b.tgt_in)``). Under ``torchrun`` every process calls :meth:`fit`,
    :meth:`save` and :meth:`evaluate` together. State: ``step``, ``epoch``, ``batch_in_epoch``, ``elapsed_s``,
    ``finished``, ``history`` (:data:`STEP_FIELDS`, :data:`VALIDATION_FIELDS`), ``best`` (with ``keep_best``).
    Raises ValueError (a bad device), ConfigError (an epoch shorter than one step) or RuntimeError (processes
    holding different training batches).
    """

    def __init__(self, model, train_batches, val_batches=None, config: TrainConfig | None = None, tokenizer=None,
                 checkpoint_path: str | os.PathLike | None = None, *, forward_fn: Callable | None = None):
        self.config = c = config or TrainConfig()
        self.train_batches, self.val_batches, self.tokenizer = train_batches, val_batches, tokenizer
        self.checkpoint_path = Path(checkpoint_path) if checkpoint_path is not None else None
        self.forward_fn, self.pad_id = forward_fn or translation_forward, train_batches.pad_id
        self.rank, self.world_size = distributed.rank(), distributed.world_size()
        self.device = distributed.process_device(c.device)
        self.amp = MixedPrecision(c.amp, self.device)
        self.model = model.to(self.device)
        self.optimizer = make_optimizer(self.model)
        self.scheduler = make_scheduler(self.optimizer, model.d_model, c.warmup_steps, c.lr_factor)
        self.ema = make_ema(self.model, c.ema_decay) if c.ema_decay else None
        if self.world_size > 1:  # the same batches everywhere; each process its own dropout masks
            distributed.assert_same(train_batches.fingerprint(), "training batches")
            torch.manual_seed(int(np.random.SeedSequence([c.seed, self.rank]).generate_state(1)[0]))
        self.ddp, self.forward_model = self._wrap()
        self._check_epoch_length()
        self.step = self.epoch = self.batch_in_epoch = 0
        self.elapsed_s, self.finished, self.best = 0.0, False, None
        self.dropout_choice: dict | None = None  # what auto_dropout chose, once per run (None: not chosen)
        self.history: dict = {k: [] for k in STEP_FIELDS + VALIDATION_FIELDS}
        self._pending: list[tuple] = []  # (step, epoch, lr, loss on the device, elapsed_s), not yet in the history
        self._last_tick = self._saved_at = time.perf_counter()  # the training clock; the last checkpoint
        self._saved_step, self._window_tokens = None, 0
        self._lap()  # the throughput window

    def train_step(self, batches, step_tokens: int | None = None) -> torch.Tensor:
        """One optimizer step of the paper's recipe (§5.3-5.4) on this process's ``batches`` (one, or several whose
        gradients add up); each batch's summed loss is divided by ``step_tokens``, the non-pad target tokens of the
        whole step (default: of ``batches``, on all processes). Returns the step's loss, 0-dim, on the device."""
        batches = list(batches) if isinstance(batches, (list, tuple)) else [batches]
        if step_tokens is None:  # [not in the paper] the step's target tokens, summed over the processes
            count = torch.tensor([sum(b.n_tokens for b in batches)])
            step_tokens = int(distributed.all_reduce_sum(count, control=True)[0])
        self.optimizer.zero_grad(set_to_none=True)
        loss = 0.0
        for i, batch in enumerate(batches):
            batch = batch.to(self.device)
            sync = self.ddp is None or i == len(batches) - 1  # DDP all-reduces the gradients with the last batch
            with contextlib.nullcontext() if sync else self.ddp.no_sync():
                with self.amp.autocast():
                    logits = self.forward_fn(self.forward_model, batch)  # (batch, tgt_len, V)
                part = step_loss(logits, batch.tgt_out, self.pad_id, self.config.label_smoothing,  # §5.4: summed
                                 batch.n_tokens, step_tokens)  # over the batch's tokens / the step's tokens
                self.amp.backward(part * self.world_size)  # (DDP averages the gradients: × world_size sums them)
            loss = loss + part.detach()
        self.amp.unscale_(self.optimizer)  # [not in the paper] fp16: the gradients back at their true scale
        if self.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)  # global norm ≤ clip
        self.amp.step(self.optimizer)  # Adam (§5.3)
        self.scheduler.step()  # the learning rate of the next step
        if self.ema is not None:  # [not in the paper] a moving average of the weights (cf. checkpoint averaging, §6.1)
            self.ema.update_parameters(self.model)
        return distributed.all_reduce_sum(loss)  # the loss of the whole step

    def fit(self) -> dict:
        """Train until a budget is spent, saving every ``checkpoint_minutes`` / ``checkpoint_every`` steps and at the
        end; returns the history. Raises ValueError (no budget), Diverged (a loss or weight not finite: nothing
        diverged is saved) or, after saving, Interrupted (Ctrl-C, SIGTERM; a second one stops without saving)."""
        c = self.config
        if not c.has_budget():
            raise ValueError("give at least one budget: max_steps, max_epochs or max_minutes")
        total = c.max_steps if c.max_steps is not None else (
            c.max_epochs * self.steps_in_epoch(0) if c.max_epochs is not None else None)
        # a budget in minutes only: the bar counts minutes of training done of those planned (the steps it will
        # take are not known in advance); otherwise steps done of those planned
        by_minutes = total is None and c.max_minutes is not None
        bar = tqdm(total=c.max_minutes if by_minutes else total, initial=self.elapsed_s / 60 if by_minutes else self.step,
                   disable=not (c.progress and self.rank == 0), unit="min" if by_minutes else "step",
                   mininterval=c.progress_interval, dynamic_ncols=True,
                   bar_format=("{l_bar}{bar}| {n:.1f}/{total:.1f} min [{elapsed}<{remaining}{postfix}]"
                               if by_minutes else None))
        with machine_settings(c.threads, self.device, self.amp), bar:
            self._choose_precision(bar)
            self._choose_dropout(bar)
            self.model.train()
            self._last_tick = self._saved_at = time.perf_counter()  # (the state it starts from is saved)
            self._saved_step = self.step
            self._lap()
            steps = None  # this epoch's remaining steps: (this process's batches, the step's tokens)
            with deferred_signals() as signals:
                while True:  # decided together with the other processes: stop? save? interrupted?
                    stop, save, interrupted = distributed.agree((self._spent(), self._checkpoint_due()), (signals,))
                    if save:
                        self.save()
                    if stop or interrupted:
                        break
                    if self.batch_in_epoch >= self.steps_in_epoch(self.epoch) * self.batches_per_step:
                        self._end_epoch(bar)  # validation
                        steps = None
                        continue
                    steps = steps or self._steps(self.epoch, self.batch_in_epoch)
                    batches, step_tokens = next(steps)
                    lr = self.scheduler.get_last_lr()[0]
                    loss = self.train_step(batches, step_tokens)  # a 0-dim tensor on the device: no synchronisation
                    self.step, self.batch_in_epoch = self.step + 1, self.batch_in_epoch + self.batches_per_step
                    self._pending.append((self.step, self.epoch, lr, loss, self._tick()))
                    self._window_tokens += step_tokens
                    bar.update(min(self.elapsed_s / 60, c.max_minutes) - bar.n if by_minutes else 1)
                    if len(self._pending) >= c.log_every:  # copy the losses from the device, show the latest
                        rate = self._flush(self._lap())
                        bar.set_postfix(**({"step": self.step} if by_minutes else {}),
                                        loss=f"{self.history['loss'][-1]:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:,.0f}",
                                        refresh=False)
                if interrupted:
                    self.save()
                    raise Interrupted(signals[0] if signals else signal.SIGINT, self.step)  # (or another rank's)
            self._flush(self._lap())
            if self.history["val_step"][-1:] != [self.step]:
                self.validate()  # the validation loss of the final parameters
            self.finished = True
            self.save()
            self._tick()
        return self.history

    def _end_epoch(self, bar) -> None:
        """Move to the next epoch and validate (the time it takes is left out of the throughput)."""
        self._flush(self._lap())
        self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        if self.config.val_every_epoch and self.val_batches is not None:
            self.validate()
            h = self.history
            if self.rank == 0:
                bar.write(f"epoch {self.epoch}: step {self.step}, val loss {h['val_loss'][-1]:.3f} "
                          f"(NLL {h['val_nll'][-1]:.3f}), {self.elapsed_s / 60:.1f} min")
        self._tick()
        self._lap()

    def _spent(self) -> bool:
        """A budget is spent (steps, finished epochs, or minutes of this process's training clock)."""
        c = self.config
        return ((c.max_steps is not None and self.step >= c.max_steps)
                or (c.max_epochs is not None and self.epoch >= c.max_epochs)
                or (c.max_minutes is not None and self.elapsed_s >= 60 * c.max_minutes))

    def _checkpoint_due(self) -> bool:
        """Every ``checkpoint_every`` steps and/or ``checkpoint_minutes`` since the last save, at most once a step."""
        c = self.config
        if self.checkpoint_path is None or self.step == self._saved_step:
            return False
        return bool(c.checkpoint_every and self.step % c.checkpoint_every == 0) or (
            c.checkpoint_minutes is not None and time.perf_counter() - self._saved_at >= 60 * c.checkpoint_minutes)

    def _tick(self) -> float:  # the wall time since the last tick joins elapsed_s (not the time between runs)
        now = time.perf_counter()
        self.elapsed_s, self._last_tick = self.elapsed_s + now - self._last_tick, now
        return self.elapsed_s

    def _lap(self) -> float:
        """Target tokens per second since the window opened (NaN without a step; CUDA: by the GPU's own clock)."""
        rate = float("nan")
        if self._window_tokens and self.device.type == "cuda":
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            rate = self._window_tokens / max(self._window_event.elapsed_time(end) / 1000.0, 1e-9)
        elif self._window_tokens:
            rate = self._window_tokens / max(time.perf_counter() - self._window_start, 1e-9)
        self._window_tokens, self._window_start = 0, time.perf_counter()
        if self.device.type == "cuda":
            self._window_event = torch.cuda.Event(enable_timing=True)
            self._window_event.record()
        return rate

    def _flush(self, tokens_per_s: float = float("nan")) -> float:
        """Copy the pending losses from the device at once into the history (Diverged if one is not finite)."""
        if self._pending:
            losses = torch.stack([p[3] for p in self._pending]).float().cpu().tolist()
            pending, self._pending = self._pending, []
            for (step, epoch, lr, _, elapsed_s), loss in zip(pending, losses):
                if not math.isfinite(loss):
                    raise Diverged(f"the loss became {loss}", step)
                for key, value in zip(STEP_FIELDS, (step, epoch, lr, loss, tokens_per_s, elapsed_s)):
                    self.history[key].append(value)
        return tokens_per_s

    @property
    def batches_per_step(self) -> int:
        """``accumulate × processes`` consecutive batches of the epoch's order make one optimizer step."""
        return self.config.accumulate * self.world_size

    def steps_in_epoch(self, epoch: int) -> int:
        """Optimizer steps in ``epoch``; its last incomplete group of batches is left out (another every epoch)."""
        return len(self.train_batches.batches(epoch)) // self.batches_per_step

    def _steps(self, epoch: int, start: int):
        """Yield ``(this process's collated batches, the step's non-pad target tokens)`` for each step of ``epoch``
        from batch position ``start``; process r takes the ``accumulate`` batches ``r·accumulate …`` of each step."""
        order, per_step, n = self.train_batches.batches(epoch), self.batches_per_step, self.config.accumulate
        groups = [order[i:i + per_step] for i in range(start, self.steps_in_epoch(epoch) * per_step, per_step)]
        mine = [group[self.rank * n:(self.rank + 1) * n] for group in groups]
        workers = self.config.num_workers
        loader = iter(self.train_batches.loader(index_lists=[idx for share in mine for idx in share],
                                                num_workers=workers, pin_memory=self.device.type == "cuda",
                                                prefetch_factor=2 if workers else None))
        for group, share in zip(groups, mine):
            batches = [next(loader) for _ in share]
            tokens = (sum(b.n_tokens for b in batches) if self.ddp is None  # DDP: all processes' tokens, from the plan
                      else sum(self.train_batches.n_tokens_of(idx) for idx in group))
            yield batches, tokens

    def _check_epoch_length(self) -> None:
        if self.steps_in_epoch(0) < 1:
            raise ConfigError(f"an epoch has {len(self.train_batches.batches(0))} batches, fewer than the "
                              f"{self.batches_per_step} one optimizer step needs (accumulate {self.config.accumulate} "
                              f"× {self.world_size} process(es)): lower accumulate or max_tokens")

    def eval_model(self) -> torch.nn.Module:
        """The weights to evaluate and translate with: the moving average with ``ema_decay``, else the model."""
        return self.ema.module if self.ema is not None else self.model

    def evaluate(self, batches=None) -> tuple[float, float]:
        """``(label-smoothed loss, plain cross-entropy)`` in nats per target token over ``batches`` (default: the
        validation batches) with :meth:`eval_model`'s weights; each process evaluates a share, all get the sums."""
        model = self.ema.module if self.ema is not None else self.model if self.ddp else self.forward_model
        return evaluate_loss(model, batches or self.val_batches, self.forward_fn, pad_id=self.pad_id,
                             label_smoothing=self.config.label_smoothing, precision=self.amp, device=self.device)

    def validate(self) -> None:
        """Record the validation loss; with ``keep_best``, keep a copy of the weights of the lowest NLL so far.

        Raises:
            Diverged: a NaN or infinite validation loss (nothing is recorded).
        """
        if self.val_batches is None:
            return
        val_loss, val_nll = self.evaluate()
        if not (math.isfinite(val_loss) and math.isfinite(val_nll)):
            raise Diverged(f"the validation loss became {val_loss}", self.step)
        for key, value in zip(VALIDATION_FIELDS, (self.step, self.epoch, val_loss, val_nll, self._tick())):
            self.history[key].append(value)
        if self.config.keep_best and (self.best is None or val_nll < self.best["val_nll"]):
            weights = self.eval_model().state_dict()
            self.best = {"model": {k: v.detach().clone() for k, v in weights.items()}, "val_nll": val_nll,
                         "step": self.step, "epoch": self.epoch}

    def state_dict(self) -> dict:
        """Everything needed to continue exactly (this process's RNG states; :meth:`save` adds every process's)."""
        self._flush()
        model_config = getattr(self.model, "config", None)
        return {
            "format": CHECKPOINT_FORMAT, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "scaler": self.amp.scaler.state_dict(),
            "precision": self.amp.record(), "ema": self.ema.state_dict() if self.ema is not None else None,
            "best": self.best, "step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
            "elapsed_s": self.elapsed_s, "finished": self.finished, "config": self.config.to_dict(),
            "dropout_choice": self.dropout_choice,
            "model_config": model_config.to_dict() if isinstance(model_config, ModelConfig) else None,
            "tokenizer": self.tokenizer.to_json() if self.tokenizer is not None else None, "history": self.history,
            "world_size": self.world_size, "rng": get_rng_state(), "torch_version": str(torch.__version__),
            "machine": machine_info(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict` (tensors on any device; each process its own RNG states); WorldSizeMismatch
        if the run was written on another number of processes."""
        distributed.check_world_size(state["world_size"], self.world_size)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])  # moves the moments to the parameters' device
        self.scheduler.load_state_dict(state["scheduler"])
        if self.amp.needs_probe:  # continue in the precision the run measured, when it measured it here
            self.amp = resumed_precision(self.config.amp, self.device, state) or self.amp
        if state["scaler"]:  # empty when saved by a run without fp16
            self.amp.scaler.load_state_dict(state["scaler"])
        if self.ema is not None and state["ema"] is not None:
            self.ema.load_state_dict(state["ema"])
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.elapsed_s, self.finished, self.best = float(state["elapsed_s"]), state["finished"], state["best"]
        self.dropout_choice = state.get("dropout_choice")
        if self.dropout_choice is not None:  # the run continues with the dropout it chose
            self._set_dropout(self.dropout_choice["p"])
        self._last_tick = time.perf_counter()
        self.history = {k: list(state["history"].get(k, [])) for k in STEP_FIELDS + VALIDATION_FIELDS}
        self._pending = []
        ranks = state.get("rng_ranks")  # written by save(), not by state_dict()
        set_rng_state(ranks[self.rank] if ranks else state["rng"])

    def save(self) -> None:
        """Write the checkpoint atomically, and ``history.json`` and ``config.json`` beside it (rank 0, with every
        process's RNG states).
        Raises Diverged (a loss, weight, Adam moment or average not finite: nothing written, not finished), or
        CheckpointError on every process when the write failed."""
        if self.checkpoint_path is None:
            return
        self._flush(self._lap())  # Diverged on a NaN loss
        bad = find_nonfinite({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()["state"],
                              "ema": self.ema.state_dict() if self.ema is not None else None})
        if bad is not None:
            self.finished = False
            raise Diverged(f"{bad} became NaN or infinite", self.step)
        rngs, error = distributed.gather_to_rank0(get_rng_state()), None
        if self.rank == 0:
            try:
                remove_stale_temporaries(self.checkpoint_path)
                save_checkpoint(self.checkpoint_path, {**self.state_dict(), "rng_ranks": rngs})
                with atomic_write(self.checkpoint_path.with_name("history.json")) as tmp:
                    tmp.write_text(json.dumps(self.history, indent=1))
                with atomic_write(self.checkpoint_path.with_name("config.json")) as tmp:  # with the chosen dropout
                    tmp.write_text(json.dumps(self.config.to_dict(), indent=1))
            except (CheckpointError, OSError) as err:
                error = err
        failure = distributed.broadcast_from_rank0(None if error is None else str(error))
        if error is not None:
            raise error
        if failure is not None:
            raise CheckpointError(f"rank 0 could not write the checkpoint: {failure}")
        self._saved_at, self._saved_step = time.perf_counter(), self.step

    def resume(self, path: str | os.PathLike | None = None) -> bool:
        """Load the checkpoint at ``path`` (default: ``checkpoint_path``), read onto the CPU, if it exists."""
        path = Path(path) if path is not None else self.checkpoint_path
        if path is None or not path.is_file():
            return False
        self.load_state_dict(load_checkpoint(path, map_location="cpu"))
        return True

    def apply_runtime(self, config: TrainConfig) -> None:
        """Take the runtime fields (:data:`~tmlib.training.config.RUNTIME_FIELDS`) of ``config``, keeping the run's
        recipe: a run continued with other budgets or on another device."""
        new = dataclasses.replace(self.config, **{k: getattr(config, k) for k in RUNTIME_FIELDS})
        moved = (new.device, new.amp, new.compile) != (self.config.device, self.config.amp, self.config.compile)
        self.config = new
        if moved:
            self.device = distributed.process_device(new.device)
            self.amp = MixedPrecision(new.amp, self.device)
            self.model.to(self.device)
            if self.ema is not None:
                self.ema.to(self.device)
            self.ddp, self.forward_model = self._wrap()
        self._check_epoch_length()

    def _wrap(self) -> tuple[torch.nn.Module | None, torch.nn.Module]:
        """``(ddp, forward_model)``: the model in ``DistributedDataParallel`` (None in one process), and what the
        training step calls: that, or the model, compiled if asked."""
        ddp = distributed.wrap_model(self.model, self.device) if self.world_size > 1 else None
        model = ddp or self.model
        return ddp, torch.compile(model, dynamic=True) if self.config.compile else model

    def _choose_precision(self, bar=None) -> None:
        """``amp="auto"`` on a CPU: float32 or bf16, whichever makes this model's step faster here (once per run)."""
        if self.amp.needs_probe:
            batch = self.train_batches.collate_indices(self.train_batches.batches(0)[0]).to(self.device)
            self.amp = measured_precision(self.config.amp, self.device, lambda dtype: self._probe_step(batch, dtype))
        if self.config.amp == "auto" and bar is not None and self.rank == 0:
            bar.write(self.amp.describe())

    def _choose_dropout(self, bar=None) -> None:
        """``auto_dropout``: P_drop from the passes the budget buys (:mod:`tmlib.training.budget`), once per run, before
        the first step; a budget in minutes is converted at the step time measured here (rank 0, sent to all)."""
        c = self.config
        if c.auto_dropout is None or self.dropout_choice is not None:
            return
        per_epoch, step_s = self.steps_in_epoch(self.epoch), None
        counted = c.max_steps is not None or c.max_epochs is not None
        passes = passes_in_budget(per_epoch, c.max_steps, c.max_epochs) if counted else math.inf
        if c.max_minutes is not None and passes >= AUTO_DROPOUT_MIN_PASSES:  # the clock may allow fewer: time a step
            reuse = c.model.dropout == 0  # amp="auto"'s timings were taken without dropout, as the rule counts
            self._set_dropout(0.0)
            step_s = distributed.broadcast_from_rank0(self._step_seconds(reuse) if self.rank == 0 else None)
            passes = min(passes, passes_in_budget(per_epoch, max_minutes=c.max_minutes, step_s=step_s))
        self.dropout_choice = {"auto": c.auto_dropout, "p": dropout_for_passes(passes, c.auto_dropout),
                               "passes": passes, "step_s": step_s}
        self._set_dropout(self.dropout_choice["p"])
        if bar is not None and self.rank == 0:
            bar.write(describe_dropout(self.dropout_choice))

    def _set_dropout(self, p: float) -> None:
        """P_drop ``p`` in the model and in the configuration the checkpoints store."""
        set_dropout(self.model, p)
        self.config = dataclasses.replace(self.config, model=dataclasses.replace(self.config.model, dropout=p))

    def _step_seconds(self, reuse: bool = True) -> float:
        """Seconds per training step of this model, in the run's precision: the median of three timed steps after
        one to warm up (with ``reuse``, the timings of ``amp="auto"`` when it took them); random draws discarded."""
        timings = self.amp.record().get("timings") if reuse else None
        if timings:
            return timings["bf16_s" if self.amp.dtype == torch.bfloat16 else "float32_s"]
        batch = self.train_batches.collate_indices(self.train_batches.batches(0)[0]).to(self.device)
        times = []
        with torch.random.fork_rng(devices=[self.device.index or 0] if self.device.type == "cuda" else []):
            for _ in range(4):
                start = time.perf_counter()
                self._probe_step(batch, self.amp.dtype)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                times.append(time.perf_counter() - start)
        return float(np.median(times[1:]))

    def _probe_step(self, batch, dtype) -> None:
        with torch.autocast(self.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = self.forward_fn(self.model, batch)  # (batch, tgt_len, V)
        step_loss(logits, batch.tgt_out, self.pad_id, self.config.label_smoothing, batch.n_tokens,
                  batch.n_tokens).backward()
        self.model.zero_grad(set_to_none=True)
