"""The training loop: a readable trainer with budgets, evaluation, progress and exact resume.

:class:`TrainConfig` holds everything that defines a run (the model's :class:`~tmlib.model.config.ModelConfig`,
the data sizes, the paper's recipe, the budgets and the runtime settings); :class:`Trainer` runs it:

* one optimizer step = forward, label-smoothed loss, backward, gradient clipping, Adam step, schedule step
  (the recipe of :mod:`tmlib.training.recipe`; chapter 9 writes the same step by hand and checks that both agree);
* budgets in steps, epochs and wall-clock minutes (the first one reached stops training);
* the validation loss after every epoch and at the end;
* a ``tqdm`` bar with the loss, the learning rate and target tokens per second, measured over whole logging
  windows including the time spent waiting for data;
* checkpoints every few minutes, at the end and on Ctrl-C, holding everything needed to continue *exactly*
  (model, optimizer, scheduler, gradient scaler, position in the epoch, RNG states, tokenizer, configuration,
  history): a run stopped anywhere and resumed produces the same losses and parameters, bit for bit, as one
  that never stopped (same device and thread count);
* mixed precision: bf16 autocast on CUDA (fp16 with a gradient scaler on GPUs without bf16) and on CPUs that
  compute bf16 natively; TF32 matrix products for float32 runs on CUDA; optional ``torch.compile``;
* gradient accumulation (several batches per optimizer step), with the loss normalised by the tokens of the
  whole step so that the update equals the one of a single batch holding all of them;
* data parallelism under ``torchrun`` (:mod:`tmlib.training.distributed`): the model wrapped in
  ``DistributedDataParallel``, every process computing the same epoch order and training on its own share of
  each step's batches, the loss normalised by the tokens of the whole step over all processes (so the update
  equals the one of a single process on the combined batch), decisions (budgets, Ctrl-C, checkpoints) taken
  together, the validation sharded and summed, rank 0 alone logging and writing checkpoints that hold every
  process's RNG states.

The step does not read any value back from the device (no ``loss.item()``): losses stay on the device and are
copied to the history every ``log_every`` steps, so a GPU is never made to wait by the host.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import torch

# The text bar (on stderr), also in notebooks: a widget bar would put an ipywidgets view into the executed
# notebook, which the offline site could not draw.
from tqdm import tqdm

from tmlib.training import distributed
from tmlib.training.checkpoint import (CHECKPOINT_FORMAT, CheckpointError, get_rng_state, load_checkpoint,
                         remove_stale_temporaries, save_checkpoint, set_rng_state)
from tmlib.model.config import PRESETS, ModelConfig
from tmlib.training.recipe import make_optimizer, make_scheduler, translation_loss
from tmlib.utils import atomic_write
from tmlib.validation import check_float, check_int, optional_field

__all__ = ["TrainConfig", "Trainer", "RUNTIME_FIELDS", "cpu_has_native_bf16", "resolve_precision",
           "translation_forward"]

Precision = Literal["auto", "bf16", "fp16", "off"]


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run (stored in every checkpoint): the model, the data sizes, the
    recipe, the budgets and the runtime settings.

    The defaults are the paper's recipe (§5) for the base model; ``tmlib.training.experiment.RECOMMENDED`` is the
    configuration for a CPU budget. Frozen: derive variants with ``dataclasses.replace(config, ...)``.
    The budgets, device, precision, threads, logging and checkpoint cadence (``RUNTIME_FIELDS``) may change
    when a run is resumed; the other fields define the run and may not.

    Raises:
        ValueError: (on construction) an invalid value, e.g. a negative budget, ``grad_clip <= 0`` (use
            ``None`` for no clipping), ``label_smoothing`` outside [0, 1), an unknown precision.
    """

    model: ModelConfig = PRESETS["base"]
    """the model (paper Table 3 hyper-parameters, vocabulary size and padding id)"""
    max_sentence_len: int = 100
    """training pairs with a side longer than this many tokens are left out"""
    max_tokens: int = 25000
    """padded tokens per batch (the paper: about 25,000 source and 25,000 target tokens, §5.1)"""
    warmup_steps: int = 4000
    """linear warm-up of the learning rate, in optimizer steps (§5.3)"""
    lr_factor: float = 1.0
    """multiplier of the paper's schedule d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)"""
    label_smoothing: float = 0.1
    """ε_ls of the loss (§5.4)"""
    grad_clip: float | None = optional_field(None, float)
    """largest global gradient norm; none: no clipping (as in the paper)"""
    accumulate: int = 1
    """batches per optimizer step and process (gradient accumulation); a step holds about max_tokens ×
    accumulate × processes padded tokens"""
    ema_decay: float | None = optional_field(None, float)
    """keep an exponential moving average of the weights with this decay per step (e.g. 0.998) and
    evaluate, save and translate with it; the modern form of the paper's checkpoint averaging (§6.1);
    none: off"""
    keep_best: bool = False
    """keep a copy of the evaluated weights with the lowest validation NLL (model selection on the validation
    set, as early stopping does, without stopping); checkpoints store it and ``load_trained`` returns it"""
    max_steps: int | None = optional_field(None, int)
    """budget: optimizer steps"""
    max_epochs: int | None = optional_field(None, int)
    """budget: passes over the training set"""
    max_minutes: float | None = optional_field(None, float)
    """budget: wall-clock minutes of training, validation included, summed over resumed runs"""
    seed: int = 0
    """seed of the initialisation, the dropout masks and the batch order"""
    device: str = "auto"
    """auto (CUDA if available), cpu or cuda"""
    threads: int | None = optional_field(None, int)
    """CPU threads for torch (none: torch's default)"""
    amp: Precision = "auto"
    """mixed precision: auto (bf16 on CUDA, or fp16 where the GPU lacks bf16; bf16 on a CPU that computes it
    natively; float32 elsewhere), bf16, fp16 (CUDA only) or off"""
    compile: bool = False
    """run the model through torch.compile (dynamic shapes); the compile time counts in the budget"""
    checkpoint_minutes: float | None = optional_field(5.0, float)
    """minutes of training between checkpoints (besides the end and Ctrl-C); none: only those"""
    checkpoint_every: int | None = optional_field(None, int)
    """optimizer steps between checkpoints (besides checkpoint_minutes); none: not by steps"""
    val_every_epoch: bool = True
    """compute the validation loss after every epoch (and always at the end)"""
    log_every: int = 10
    """steps between copies of the losses from the device (the progress bar and history are updated then)"""
    progress: bool = True
    """show a tqdm progress bar"""
    progress_interval: float = 1.0
    """seconds between progress-bar refreshes"""
    num_workers: int = 0
    """data-loader worker processes that build the padded batches (0: in the training process)"""

    def __post_init__(self):
        if not isinstance(self.model, ModelConfig):
            raise TypeError(f"model must be a tmlib.model.config.ModelConfig, got {type(self.model).__name__}")
        check_int(self.max_sentence_len, "max_sentence_len", minimum=1)
        check_int(self.max_tokens, "max_tokens", minimum=1)
        check_int(self.warmup_steps, "warmup_steps", minimum=1)
        check_float(self.lr_factor, "lr_factor", minimum=0.0, min_inclusive=False)
        check_float(self.label_smoothing, "label_smoothing", minimum=0.0, maximum=1.0, max_inclusive=False)
        if self.grad_clip is not None and check_float(self.grad_clip, "grad_clip") <= 0:
            raise ValueError(f"grad_clip must be > 0, got {self.grad_clip} (use none for no clipping: a norm of 0 "
                             "would zero every gradient)")
        check_int(self.accumulate, "accumulate", minimum=1)
        check_float(self.ema_decay, "ema_decay", minimum=0.0, maximum=1.0, min_inclusive=False, max_inclusive=False,
                    allow_none=True)
        check_int(self.max_steps, "max_steps", minimum=1, allow_none=True)
        check_int(self.max_epochs, "max_epochs", minimum=1, allow_none=True)
        check_float(self.max_minutes, "max_minutes", minimum=0.0, min_inclusive=False, allow_none=True)
        check_int(self.seed, "seed", minimum=0)
        if not (self.device in ("auto", "cpu", "cuda", "mps") or str(self.device).startswith("cuda:")):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        check_int(self.threads, "threads", minimum=1, allow_none=True)
        if self.amp not in ("auto", "bf16", "fp16", "off"):
            raise ValueError(f"amp must be auto, bf16, fp16 or off, got {self.amp!r}")
        check_float(self.checkpoint_minutes, "checkpoint_minutes", minimum=0.0, min_inclusive=False, allow_none=True)
        check_int(self.checkpoint_every, "checkpoint_every", minimum=1, allow_none=True)
        check_int(self.log_every, "log_every", minimum=1)
        check_float(self.progress_interval, "progress_interval", minimum=0.0)
        check_int(self.num_workers, "num_workers", minimum=0)

    def has_budget(self) -> bool:
        """True when at least one of max_steps, max_epochs, max_minutes is set."""
        return any(v is not None for v in (self.max_steps, self.max_epochs, self.max_minutes))

    def to_dict(self) -> dict:
        """Plain dict (the model as a nested dict), for checkpoints and ``config.json``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """Inverse of :meth:`to_dict`; also reads the configuration of checkpoints written by tmlib 0.1
        (``preset`` + ``model_overrides`` + ``vocab_size``, ``amp``/``cpu_amp`` booleans).

        Raises:
            ValueError: an unknown field.
        """
        d = dict(d)
        if "preset" in d:  # tmlib 0.1 layout
            from tmlib.model.config import get_preset

            overrides = dict(d.pop("model_overrides", {}) or {})
            overrides.pop("pad_id", None)
            model = dataclasses.replace(get_preset(d.pop("preset")), vocab_size=d.pop("vocab_size", 8000), **overrides)
            d["model"] = model
            if "max_len" in d:
                d["max_sentence_len"] = d.pop("max_len")
            amp, cpu_amp = d.pop("amp", True), d.pop("cpu_amp", False)
            d["amp"] = "auto" if (amp and cpu_amp) else ("off" if not amp and not cpu_amp else "auto")
            d.setdefault("checkpoint_every", None)
        elif isinstance(d.get("model"), dict):
            d["model"] = ModelConfig.from_dict(d["model"])
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown TrainConfig field(s) {sorted(unknown)}")
        return cls(**d)


#: Fields that may differ between a run and its continuation (``--resume``).
RUNTIME_FIELDS = ("max_steps", "max_epochs", "max_minutes", "device", "threads", "amp", "compile", "checkpoint_minutes",
                  "checkpoint_every", "val_every_epoch", "log_every", "progress", "progress_interval", "num_workers")


# --------------------------------------------------------------------------------------------------
# Devices and precision
# --------------------------------------------------------------------------------------------------

def cpu_has_native_bf16() -> bool:
    """True when oneDNN computes bf16 matrix products natively on this CPU (AVX512-BF16 or AMX).

    Without native support bf16 is emulated and slower than float32, so ``amp="auto"`` keeps float32 there.
    """
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_precision(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``amp`` on ``device``, or ``None`` for float32.

    ``"auto"``: bf16 on a CUDA GPU that supports it, fp16 on an older GPU (with a gradient scaler), bf16 on a
    CPU with native bf16, float32 elsewhere. ``"bf16"``/``"fp16"`` force the type (fp16 only on CUDA);
    ``"off"`` is float32.

    Raises:
        ValueError: ``"fp16"`` on a CPU, or an unknown value.
    """
    device = torch.device(device)
    if amp == "off":
        return None
    if amp == "bf16":
        return torch.bfloat16
    if amp == "fp16":
        if device.type != "cuda":
            raise ValueError("amp='fp16' needs a CUDA device (use bf16 or off on a CPU)")
        return torch.float16
    if amp != "auto":
        raise ValueError(f"amp must be auto, bf16, fp16 or off, got {amp!r}")
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "cpu" and cpu_has_native_bf16():
        return torch.bfloat16
    return None


def _resolve_device(name: str) -> torch.device:
    """The device called ``name``; with several processes on GPUs, this process's GPU (the current CUDA device,
    which :func:`tmlib.training.distributed.process_group` sets to ``cuda:LOCAL_RANK``).

    Raises:
        ValueError: an unknown or absent device, or a numbered GPU (``cuda:1``) with several processes.
    """
    from tmlib.utils import get_device

    device = get_device(None if name in (None, "auto") else name)
    if device.type == "cuda" and distributed.is_distributed():
        if name not in (None, "auto", "cuda"):
            raise ValueError(f"device {name!r} names one GPU, but {distributed.world_size()} processes are running: "
                             "use cuda (or auto), and each process takes cuda:LOCAL_RANK")
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def translation_forward(model, batch) -> torch.Tensor:
    """The default forward of :class:`Trainer`: ``model(batch.src, batch.tgt_in)`` → logits
    ``(batch, tgt_len, V)``, aligned with ``batch.tgt_out`` (teacher forcing, paper §3)."""
    return model(batch.src, batch.tgt_in)


class _DeferredInterrupt:
    """Inside ``with``, the first SIGINT (Ctrl-C) only sets ``requested``, so that the loop can finish the current
    optimizer step and save a consistent checkpoint; a second SIGINT interrupts at once. Outside the main
    thread (where handlers cannot be installed) it does nothing."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handler(self, signum, frame):
        if self.requested:  # second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self):
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            try:
                self._previous = signal.signal(signal.SIGINT, self._handler)
            except (ValueError, OSError):
                self._previous = None
        return self

    def __exit__(self, *exc):
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


class _BatchList(torch.utils.data.Dataset):
    """Items are padded batches: item ``i`` collates the examples ``index_lists[i]`` (for a DataLoader's
    workers; the order is fixed by the list, so resuming stays exact)."""

    def __init__(self, batches, index_lists):
        self.batches, self.index_lists = batches, index_lists

    def __len__(self):
        return len(self.index_lists)

    def __getitem__(self, i):
        return self.batches.collate_indices(self.index_lists[i])


def _new_history() -> dict:
    return {"step": [], "epoch": [], "lr": [], "loss": [], "tokens_per_s": [], "elapsed_s": [],
            "val_step": [], "val_epoch": [], "val_loss": [], "val_nll": [], "val_elapsed_s": []}


class Trainer:
    """Train a model on token batches with the paper's recipe; checkpoint and resume exactly.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer` (or any module with a ``d_model`` attribute that
            ``forward_fn`` can call).
        train_batches: :class:`tmlib.data.batching.BatchIterator` with ``shuffle=True``; epoch ``e`` has a fixed
            batch order given its seed, which is what makes resuming exact.
        val_batches: a ``BatchIterator`` for the validation loss, or ``None``.
        config: :class:`TrainConfig` (recipe, budgets, runtime); its ``model`` field is informational here
            (the model is built by the caller, e.g. :func:`tmlib.training.experiment.run_training`).
        tokenizer: stored (as JSON) in the checkpoints, so that a checkpoint is all a translator needs.
        checkpoint_path: where to write checkpoints (``None``: never).
        forward_fn: ``forward_fn(model, batch) -> logits (batch, tgt_len, V)`` aligned with
            ``batch.tgt_out``; default :func:`translation_forward`. A decoder-only language model passes
            ``lambda m, b: m(b.tgt_in)``.

    State: ``step`` (optimizer steps done), ``epoch`` and ``batch_in_epoch`` (the next batch of the epoch's
    order to train on), ``elapsed_s`` (training wall time so far), ``finished``, ``history`` (lists: per step
    ``step``, ``epoch``, ``lr`` (the rate that step used), ``loss`` (label-smoothed, nats per target token),
    ``tokens_per_s`` (target tokens per second over the logging window the step belongs to, data loading
    included), ``elapsed_s``; per validation ``val_step``, ``val_epoch``, ``val_loss`` (label-smoothed),
    ``val_nll`` (plain cross-entropy; perplexity = exp), ``val_elapsed_s``).

    Data parallelism: when a ``torch.distributed`` process group of several processes is initialised (by
    :func:`tmlib.training.distributed.process_group` under ``torchrun``), the trainer wraps the model in
    ``DistributedDataParallel`` (``ddp_model``; ``model`` stays the plain module, whose state is saved), checks
    that every process holds the same training batches, and reseeds each process's torch generator with
    ``(seed, rank)`` so that the dropout masks differ between processes. Every process must then call
    :meth:`fit`, :meth:`save` and :meth:`evaluate` together (they communicate).

    Raises:
        ValueError: an invalid configuration or device.
        RuntimeError: with several processes, the processes hold different training batches.
    """

    def __init__(self, model, train_batches, val_batches=None, config: TrainConfig | None = None, tokenizer=None,
                 checkpoint_path: str | os.PathLike | None = None, *, forward_fn: Callable | None = None):
        self.config = config or TrainConfig()
        self.device = _resolve_device(self.config.device)
        self.precision = resolve_precision(self.config.amp, self.device)
        self.model = model.to(self.device)
        self.forward_fn = forward_fn or translation_forward
        self.train_batches, self.val_batches = train_batches, val_batches
        self.tokenizer = tokenizer
        self.checkpoint_path = Path(checkpoint_path) if checkpoint_path is not None else None
        self.pad_id = train_batches.pad_id
        self.optimizer = make_optimizer(self.model)
        self.scheduler = make_scheduler(self.optimizer, model.d_model, self.config.warmup_steps, self.config.lr_factor)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == torch.float16)
        self.ema = self._new_ema() if self.config.ema_decay else None
        self.rank, self.world_size = distributed.rank(), distributed.world_size()
        if self.world_size > 1:
            distributed.assert_same(train_batches.fingerprint(), "training batches")
            import numpy as np

            torch.manual_seed(int(np.random.SeedSequence([self.config.seed, self.rank]).generate_state(1)[0]))
        self._wrap()
        self.step = self.epoch = self.batch_in_epoch = 0
        self.elapsed_s = 0.0
        self.finished = False
        self.history = _new_history()
        self.best: dict | None = None  # keep_best: {"model": weights, "val_nll", "step", "epoch"}
        self._pending: list = []  # (step, epoch, lr, loss tensor, elapsed_s) not yet copied from the device
        self._t_last = time.perf_counter()

    def _new_ema(self):
        """An exponential moving average of the weights (``torch.optim.swa_utils.AveragedModel``): after every
        optimizer step ``ema ← decay · ema + (1 − decay) · weights``."""
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

        return AveragedModel(self.model, multi_avg_fn=get_ema_multi_avg_fn(self.config.ema_decay))

    def eval_model(self):
        """The weights to evaluate and translate with: the moving average when ``ema_decay`` is set, else the
        trained weights themselves."""
        return self.ema.module if self.ema is not None else self.model

    @staticmethod
    def _compiled(model):
        return torch.compile(model, dynamic=True)

    def _wrap(self) -> None:
        """``ddp_model``: the model in ``DistributedDataParallel`` (with several processes; else the model
        itself); ``forward_model``: what the training step calls (``ddp_model``, compiled if asked)."""
        self.ddp_model = distributed.wrap_model(self.model, self.device)
        self.forward_model = self._compiled(self.ddp_model) if self.config.compile else self.ddp_model

    # ---------------------------------------------------------------- configuration on resume
    def apply_runtime(self, config: TrainConfig) -> None:
        """Take the runtime fields (:data:`RUNTIME_FIELDS`: budgets, device, precision, threads, logging,
        checkpoint cadence) from ``config``, keeping this run's other fields. Used when a run is continued
        with different budgets or on another device."""
        changes = {k: getattr(config, k) for k in RUNTIME_FIELDS}
        new = dataclasses.replace(self.config, **changes)
        if new.device != self.config.device or new.amp != self.config.amp or new.compile != self.config.compile:
            self.device = _resolve_device(new.device)
            self.precision = resolve_precision(new.amp, self.device)
            self.model.to(self.device)
            if self.ema is not None:
                self.ema.to(self.device)
            self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == torch.float16)
            self.config = new
            self._wrap()
        self.config = new

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Everything needed to continue exactly, as tensors and plain containers (this process's view: its
        own RNG states; :meth:`save` adds every process's as ``"rng_ranks"``)."""
        from tmlib.analysis.machine import machine_info

        self._flush()
        model_config = getattr(self.model, "config", None)
        return {
            "format": CHECKPOINT_FORMAT,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "best": self.best,
            "step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
            "elapsed_s": self.elapsed_s, "finished": self.finished,
            "config": self.config.to_dict(),
            "model_config": model_config.to_dict() if isinstance(model_config, ModelConfig) else None,
            "tokenizer": self.tokenizer.to_json() if self.tokenizer is not None else None,
            "history": self.history,
            "world_size": self.world_size,
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
        distributed.check_world_size(state.get("world_size", 1), self.world_size)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])  # moves the moments to the parameters' device
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if self.ema is not None and state.get("ema") is not None:
            self.ema.load_state_dict(state["ema"])
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.elapsed_s, self.finished = state["elapsed_s"], state["finished"]
        self.history = {k: list(v) for k, v in state["history"].items()}
        self.best = state.get("best")
        self._pending = []
        ranks = state.get("rng_ranks")
        set_rng_state(ranks[self.rank] if ranks else state["rng"])

    def save(self) -> None:
        """Write the checkpoint (atomically, durably) and ``history.json`` beside it; remove the temporary
        files that a killed earlier write may have left.

        With several processes every process calls it: rank 0 gathers the RNG states of all of them
        (``"rng_ranks"``), writes, and tells the others whether the write succeeded.

        Raises:
            tmlib.training.checkpoint.CheckpointError: the checkpoint could not be written (on every process).
        """
        if self.checkpoint_path is None:
            return
        self._flush()
        rngs = distributed.gather_to_rank0(get_rng_state()) if self.world_size > 1 else None
        error = None
        if self.rank == 0:
            try:
                remove_stale_temporaries(self.checkpoint_path)
                state = self.state_dict()
                if rngs is not None:
                    state["rng_ranks"] = rngs
                save_checkpoint(self.checkpoint_path, state)
                with atomic_write(self.checkpoint_path.with_name("history.json")) as tmp:
                    tmp.write_text(json.dumps(self.history, indent=1))
            except (CheckpointError, OSError) as err:
                error = err
        if self.world_size > 1:
            failure = distributed.broadcast_from_rank0(None if error is None else str(error))
            if failure is not None and error is None:
                raise CheckpointError(f"rank 0 could not write the checkpoint: {failure}")
        if error is not None:
            raise error
        self._last_save = time.perf_counter()

    def resume(self, path: str | os.PathLike | None = None) -> bool:
        """Load the checkpoint at ``path`` (default: ``checkpoint_path``) if it exists; True if loaded.

        The file is always read onto the CPU (``map_location="cpu"``): the RNG states must be CPU tensors, and
        the model and optimizer move their parts to ``self.device`` themselves."""
        path = Path(path) if path is not None else self.checkpoint_path
        if path is None or not path.is_file():
            return False
        self.load_state_dict(load_checkpoint(path, map_location="cpu"))
        return True

    # ---------------------------------------------------------------- evaluation
    def autocast(self):
        """The autocast context of this run's precision (a no-op for float32)."""
        if self.precision is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.precision)

    _autocast = autocast  # the name of tmlib 0.1

    @torch.no_grad()
    def evaluate(self, batches=None) -> tuple[float, float]:
        """``(label-smoothed loss, plain cross-entropy)`` in nats per target token over ``batches``
        (default: the validation batches), in eval mode (no dropout). Uses no random numbers; reads the
        result from the device once.

        With several processes the batches are sharded (process ``r`` evaluates batches ``r, r + N, …``
        through the plain model, without DDP) and the sums of losses and tokens are all-reduced, so every
        process returns the same values (equal to a single process's up to the order of the float64 sums)."""
        batches = batches or self.val_batches
        model = self.model if self.world_size > 1 else self.forward_model
        if self.ema is not None:
            model = self.ema.module  # the moving average is what the run evaluates and keeps
        was_training = model.training
        model.eval()
        totals = torch.zeros(3, dtype=torch.float64, device=self.device)  # loss sum, NLL sum, tokens
        if self.world_size > 1:
            mine = (batches.collate_indices(idx) for idx in batches.batches(0)[self.rank::self.world_size])
        else:
            mine = batches.epoch(0)
        for batch in mine:
            batch = batch.to(self.device)
            with self.autocast():
                logits = self.forward_fn(model, batch)
            totals[0] += translation_loss(logits, batch.tgt_out, self.pad_id, self.config.label_smoothing, "sum")
            totals[1] += translation_loss(logits, batch.tgt_out, self.pad_id, 0.0, "sum")
            totals[2] += batch.n_tokens
        distributed.all_reduce_sum(totals)
        model.train(was_training)
        ls, nll = (totals[:2] / totals[2].clamp(min=1)).tolist()
        return ls, nll

    def _validate(self) -> None:
        if self.val_batches is None:
            return
        val_loss, val_nll = self.evaluate()
        self._tick()
        h = self.history
        h["val_step"].append(self.step)
        h["val_epoch"].append(self.epoch)
        h["val_loss"].append(val_loss)
        h["val_nll"].append(val_nll)
        h["val_elapsed_s"].append(self.elapsed_s)
        if self.config.keep_best and (self.best is None or val_nll < self.best["val_nll"]):
            weights = self.eval_model().state_dict()  # every process holds the same weights and val_nll
            self.best = {"model": {k: v.detach().clone() for k, v in weights.items()}, "val_nll": val_nll,
                         "step": self.step, "epoch": self.epoch}

    # ---------------------------------------------------------------- training
    def _tick(self) -> None:
        """Add the wall time since the last tick to ``elapsed_s`` (steps, validation and saving count)."""
        now = time.perf_counter()
        self.elapsed_s += now - self._t_last
        self._t_last = now

    def _out_of_budget(self) -> bool:
        c = self.config
        return ((c.max_steps is not None and self.step >= c.max_steps)
                or (c.max_epochs is not None and self.epoch >= c.max_epochs)
                or (c.max_minutes is not None and self.elapsed_s >= 60 * c.max_minutes))

    def batches_per_step(self) -> int:
        """Batches consumed by one optimizer step across all processes (``accumulate × world_size``)."""
        return self.config.accumulate * self.world_size

    def steps_in_epoch(self, epoch: int) -> int:
        """Optimizer steps in ``epoch``: ``len(batches) // batches_per_step()``. The last incomplete group of
        fewer than ``batches_per_step()`` batches is left out of that epoch (at most ``accumulate × processes
        − 1`` batches; the order is reshuffled every epoch, so different examples are left out each time)."""
        return len(self.train_batches.batches(epoch)) // self.batches_per_step()

    def _my_batches(self, group: list) -> list:
        """This process's share of one step's batches: the step takes ``accumulate × world_size`` consecutive
        batches of the epoch's order (which every process computes from the seed), and rank ``r`` trains on
        the ``accumulate`` batches ``r·accumulate … (r+1)·accumulate − 1`` of them (no overlap; all of them in
        a single process)."""
        a = self.config.accumulate
        return group[self.rank * a:(self.rank + 1) * a]

    def train_step(self, batches) -> torch.Tensor:
        """One optimizer step; returns the loss (label-smoothed, nats per target token) as a 0-dim tensor
        on the device (no host synchronisation).

        Args:
            batches: one :class:`~tmlib.data.batching.Batch`, or this process's list of batches of the step
                (gradient accumulation). With several, the summed token losses are divided by the number of
                target tokens of the whole step, so the gradient is the one of a single batch holding them all.

        With several processes, the step's tokens are those of all processes (:meth:`fit` knows them from the
        batch plan; a direct call sums them with an all-reduce). Each process multiplies its loss by the
        number of processes, since DDP divides the summed gradients by it; the gradients are all-reduced only
        during the backward of the last micro-batch (``no_sync`` on the others), and the returned loss is
        summed over the processes (queued on the device, no host synchronisation).
        """
        micro = [batches] if not isinstance(batches, (list, tuple)) else list(batches)
        step_tokens = getattr(self, "_step_tokens", None)
        if step_tokens is None:
            step_tokens = sum(b.n_tokens for b in micro)
            if self.world_size > 1:
                step_tokens = int(distributed.all_reduce_sum(torch.tensor([step_tokens]), control=True)[0])
        single = len(micro) == 1 and self.world_size == 1
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        for i, batch in enumerate(micro):
            batch = batch.to(self.device)
            last = i == len(micro) - 1
            no_sync = self.ddp_model.no_sync() if self.world_size > 1 and not last else contextlib.nullcontext()
            with no_sync:  # the forward and the backward of a micro-batch whose gradients wait
                with self.autocast():
                    logits = self.forward_fn(self.forward_model, batch)  # (batch, tgt_len, V)
                if single:  # the plain mean over the batch's target tokens, as chapter 9 writes it
                    loss = translation_loss(logits, batch.tgt_out, self.pad_id, self.config.label_smoothing)
                    total = loss.detach()
                else:
                    loss_sum = translation_loss(logits, batch.tgt_out, self.pad_id, self.config.label_smoothing,
                                                "sum")
                    loss = loss_sum * (self.world_size / step_tokens)  # DDP averages the gradients over processes
                    total = total + loss_sum.detach() / step_tokens
                self.scaler.scale(loss).backward()
        if self.world_size > 1:
            distributed.all_reduce_sum(total)  # the loss of the whole step
        if self.config.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        if self.ema is not None:
            self.ema.update_parameters(self.model)
        return total

    def _flush(self, rate: float | None = None) -> None:
        """Copy the pending losses from the device into the history (one synchronisation for many steps)."""
        if not self._pending:
            return
        losses = torch.stack([p[3] for p in self._pending]).float().cpu().tolist()
        h = self.history
        for (step, epoch, lr, _, elapsed), loss in zip(self._pending, losses):
            if not math.isfinite(loss):
                self._pending = []
                raise FloatingPointError(f"the loss became {loss} at step {step}: lower lr_factor, raise "
                                         "warmup_steps, or set grad_clip")
            for k, v in (("step", step), ("epoch", epoch), ("lr", lr), ("loss", loss),
                         ("tokens_per_s", rate if rate is not None else float("nan")), ("elapsed_s", elapsed)):
                h[k].append(v)
        self._pending = []

    def _loader(self, epoch: int, start: int):
        """Batches of this process for the steps of ``epoch`` from batch index ``start`` on, as lists of
        ``accumulate`` batches; built by ``num_workers`` worker processes when asked."""
        order = self.train_batches.batches(epoch)
        per_step = self.batches_per_step()
        end = self.steps_in_epoch(epoch) * per_step
        groups = [self._my_batches(order[i:i + per_step]) for i in range(start, end, per_step)]
        flat = [idx for g in groups for idx in g]
        c = self.config
        from tmlib.data.batch import Batch

        pin = self.device.type == "cuda" and hasattr(Batch, "pin_memory")  # page-locked: the copy can overlap
        loader = torch.utils.data.DataLoader(
            _BatchList(self.train_batches, flat), batch_size=None, shuffle=False, num_workers=c.num_workers,
            pin_memory=pin,
            prefetch_factor=2 if c.num_workers else None, persistent_workers=False,
            generator=torch.Generator().manual_seed(0))  # its own generator: the global RNG (dropout) stays untouched
        it = iter(loader)
        for g in groups:
            yield [next(it) for _ in g]

    def fit(self) -> dict:
        """Train until a budget runs out; returns the history.

        Checkpoints (if ``checkpoint_path``) every ``checkpoint_minutes`` / ``checkpoint_every`` steps and at the
        end. Ctrl-C (SIGINT) lets the current step finish, writes a checkpoint and raises ``KeyboardInterrupt``
        (a second Ctrl-C stops at once, without saving). A run stopped at any point and resumed with
        :meth:`resume` produces the same losses and parameters as one that was never interrupted (same device
        and thread count).

        With several processes, every process runs ``fit``; after each step they agree (:meth:`_decide`) on
        whether to stop (rank 0's budget, measured on its clock; a Ctrl-C on any process) and whether to save
        (rank 0's checkpoint clock), so that all stop after the same step and save together.

        Raises:
            ValueError: no budget is set (``max_steps``, ``max_epochs`` or ``max_minutes``), or an epoch holds
                fewer batches than one step needs.
            FloatingPointError: the loss became NaN or infinite.
            KeyboardInterrupt: after saving, when interrupted.
        """
        c = self.config
        if not c.has_budget():
            raise ValueError("give at least one budget: max_steps, max_epochs or max_minutes")
        if self.steps_in_epoch(0) < 1:
            raise ValueError(f"an epoch has {len(self.train_batches.batches(0))} batches, fewer than the "
                             f"{self.batches_per_step()} one optimizer step needs (accumulate × processes)")
        threads_before = torch.get_num_threads()
        if c.threads:
            torch.set_num_threads(c.threads)
        tf32_before = torch.get_float32_matmul_precision()
        if self.device.type == "cuda" and self.precision is None:
            torch.set_float32_matmul_precision("high")  # TF32 tensor cores for float32 matrix products
        self.model.train()
        total = c.max_steps
        if total is None and c.max_epochs is not None:
            total = c.max_epochs * self.steps_in_epoch(0)
        bar = tqdm(total=total, initial=self.step, disable=not c.progress or self.rank != 0, unit="step",
                   mininterval=c.progress_interval, dynamic_ncols=True)
        self._t_last = self._last_save = time.perf_counter()
        window = self._new_window()
        try:
            with _DeferredInterrupt() as interrupt:
                stop = interrupted = False
                while True:
                    stop, _, interrupted = self._decide(interrupt)
                    if stop or interrupted:
                        break
                    if self.batch_in_epoch >= self.steps_in_epoch(self.epoch) * self.batches_per_step():
                        self._flush(self._close_window(window))
                        self._end_epoch(bar)
                        window = self._new_window()
                        continue
                    for micro in self._loader(self.epoch, self.batch_in_epoch):
                        lr = self.scheduler.get_last_lr()[0]
                        self._step_tokens = self._global_tokens(micro)
                        loss = self.train_step(micro)  # (0-dim tensor on the device: no synchronisation)
                        self.step += 1
                        self.batch_in_epoch += self.batches_per_step()
                        self._tick()
                        self._pending.append((self.step, self.epoch, lr, loss, self.elapsed_s))
                        window["tokens"] += self._step_tokens
                        bar.update(1)
                        if len(self._pending) >= c.log_every:
                            rate = self._close_window(window)
                            self._flush(rate)
                            bar.set_postfix(loss=f"{self.history['loss'][-1]:.3f}", lr=f"{lr:.2e}",
                                            tok_s=f"{rate:,.0f}", refresh=False)
                            window = self._new_window()
                        stop, save_now, interrupted = self._decide(interrupt)
                        if save_now:
                            self._flush(self._close_window(window))
                            self.save()
                            self._tick()
                            window = self._new_window()
                        if stop or interrupted:
                            break
                    self._step_tokens = None
                    if stop or interrupted:
                        break
                self._flush(self._close_window(window))
                if interrupted:
                    self.save()
                    raise KeyboardInterrupt(f"interrupted at step {self.step}; checkpoint saved")
            if not self.history["val_step"] or self.history["val_step"][-1] != self.step:
                self._validate()  # the validation loss of the final parameters
            self.finished = True
            self.save()
            self._tick()
        finally:
            self._step_tokens = None
            bar.close()
            torch.set_num_threads(threads_before)
            torch.set_float32_matmul_precision(tf32_before)
        return self.history

    # ---------------------------------------------------------------- helpers of fit
    def _decide(self, interrupt) -> tuple[bool, bool, bool]:
        """``(stop, save_now, interrupted)`` after a step: a budget is spent, a checkpoint is due, Ctrl-C was
        pressed. With several processes the first two are rank 0's (its wall clock) and the third is true if
        any process was interrupted; one small all-reduce on the control group makes them the same on every
        process (:func:`tmlib.training.distributed.agree`)."""
        flags = (self._out_of_budget(), self._checkpoint_due()), (interrupt.requested,)
        if self.world_size == 1:
            return flags[0] + flags[1]
        return distributed.agree(*flags)

    def _end_epoch(self, bar) -> None:
        self._flush(float("nan"))
        self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        if self.config.val_every_epoch and self.val_batches is not None:
            self._validate()
            h = self.history
            if self.rank == 0:
                bar.write(f"epoch {self.epoch}: step {self.step}, val loss {h['val_loss'][-1]:.3f} "
                          f"(NLL {h['val_nll'][-1]:.3f}), {self.elapsed_s / 60:.1f} min")
        self._tick()

    def _global_tokens(self, micro) -> int:
        """Target tokens of the whole step (all processes; the batch plan is known to every process, so no
        communication is needed)."""
        return sum(b.n_tokens for b in micro) if self.world_size == 1 else self._plan_tokens()

    def _plan_tokens(self) -> int:
        """Target tokens of the step that starts at ``batch_in_epoch``, from the batch plan."""
        order = self.train_batches.batches(self.epoch)
        per_step = self.batches_per_step()
        group = order[self.batch_in_epoch:self.batch_in_epoch + per_step]
        return sum(self.train_batches.n_tokens_of(idx) for idx in group)

    def _checkpoint_due(self) -> bool:
        c = self.config
        if c.checkpoint_every and self.step % c.checkpoint_every == 0:
            return True
        return (c.checkpoint_minutes is not None
                and time.perf_counter() - self._last_save >= 60 * c.checkpoint_minutes)

    def _new_window(self) -> dict:
        w = {"tokens": 0, "t0": time.perf_counter(), "event": None}
        if self.device.type == "cuda":
            w["event"] = torch.cuda.Event(enable_timing=True)
            w["event"].record()
        return w

    def _close_window(self, w: dict) -> float:
        """Target tokens per second over the window: the steps and the time spent waiting for their data.
        On CUDA the window is timed with CUDA events (the GPU's own clock), synchronising once."""
        if w["tokens"] == 0:
            return float("nan")
        if w["event"] is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            seconds = w["event"].elapsed_time(end) / 1000.0
        else:
            seconds = time.perf_counter() - w["t0"]
        return w["tokens"] / max(seconds, 1e-9)
