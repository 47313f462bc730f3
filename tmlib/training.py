"""The training recipe of the paper (§5) and a small, readable training loop with exact resume.

* Optimizer (§5.3): Adam with β₁ = 0.9, β₂ = 0.98, ε = 10⁻⁹ (:func:`make_optimizer`).
* Learning rate (§5.3, eq. 3): ``lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)``:
  linear warm-up, then inverse-square-root decay (:class:`NoamSchedule`, :func:`make_scheduler`); its values
  equal :func:`tmlib.numpy_ref.noam_lr`.
* Label smoothing ε_ls = 0.1 (§5.4) and the loss over non-pad target tokens (:func:`translation_loss`).
* Dropout P_drop = 0.1 lives in the model (§5.4).

:class:`Trainer` runs the loop: a ``tqdm`` bar with loss, lr and target tokens/s; validation loss after
every epoch; budgets in steps, epochs and minutes; a history for plotting; atomic checkpoints that
hold everything needed to continue *exactly* (model, optimizer, scheduler, position in the epoch, RNG
states, tokenizer, config, history). :func:`run_training` is the whole Multi30k experiment (data,
tokenizer, model, loop) used by ``python -m tmlib.train``, and :func:`load_or_train` is the notebook's
"load the checkpoint if it is there, otherwise train" helper.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

with warnings.catch_warnings():  # without ipywidgets, tqdm.auto warns once and falls back to a text bar
    warnings.simplefilter("ignore")
    from tqdm.auto import tqdm

from .utils import atomic_write
from .data import BatchIterator, BPETokenizer, encode_pairs, filter_by_length, load_multi30k, train_tokenizer

__all__ = [
    "ADAM_BETAS",
    "ADAM_EPS",
    "make_optimizer",
    "NoamSchedule",
    "make_scheduler",
    "translation_loss",
    "TrainConfig",
    "Trainer",
    "save_checkpoint",
    "load_checkpoint",
    "get_rng_state",
    "set_rng_state",
    "build_model",
    "run_training",
    "load_trained",
    "load_or_train",
    "CHECKPOINT_NAME",
]

#: Adam's β₁, β₂ and ε in the paper (§5.3).
ADAM_BETAS = (0.9, 0.98)
ADAM_EPS = 1e-9
#: File name of the checkpoint inside a run folder.
CHECKPOINT_NAME = "checkpoint.pt"


# --------------------------------------------------------------------------------------------------
# The recipe
# --------------------------------------------------------------------------------------------------

def cpu_has_native_bf16() -> bool:
    """True when oneDNN computes bf16 matrix products natively on this CPU (AVX512-BF16 or AMX).

    Without native support bf16 is emulated and slower than float32, so ``cpu_amp`` is ignored.
    """
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def make_optimizer(model: torch.nn.Module, betas=ADAM_BETAS, eps: float = ADAM_EPS) -> torch.optim.Adam:
    """Adam with the paper's settings (§5.3); the base lr is 1 and the schedule sets the actual value.

    Args:
        model: the parameters to optimize.
        betas, eps: default (0.9, 0.98) and 1e-9 as in the paper.

    Returns:
        ``torch.optim.Adam`` whose learning rate :func:`make_scheduler` multiplies by the schedule.
    """
    return torch.optim.Adam(model.parameters(), lr=1.0, betas=betas, eps=eps)


class NoamSchedule:
    """The learning rate of §5.3 (eq. 3) as a multiplier for ``torch.optim.lr_scheduler.LambdaLR``.

    ``LambdaLR`` calls it with the number of scheduler steps taken so far (0 before the first optimizer
    step), so ``__call__(i)`` returns the lr of training step ``i + 1`` (steps count from 1):
    ``factor · d_model^-0.5 · min(s^-0.5, s · warmup_steps^-1.5)`` with ``s = i + 1``. It rises linearly
    to its peak ``factor · (d_model · warmup_steps)^-0.5`` at ``s = warmup_steps`` and then decays as
    ``s^-0.5``. A callable object (not a lambda) so that the scheduler's ``state_dict`` records it.

    Args:
        d_model: model width (> 0).
        warmup_steps: warm-up length in steps (> 0); the paper uses 4000.
        factor: overall multiplier (1 in the paper; small models tolerate larger values).
    """

    def __init__(self, d_model: int, warmup_steps: int, factor: float = 1.0):
        if d_model <= 0 or warmup_steps <= 0 or factor <= 0:
            raise ValueError(f"d_model, warmup_steps and factor must be positive, got {d_model}, "
                             f"{warmup_steps}, {factor}")
        self.d_model, self.warmup_steps, self.factor = int(d_model), int(warmup_steps), float(factor)

    def __call__(self, i: int) -> float:
        s = i + 1
        return self.factor * self.d_model**-0.5 * min(s**-0.5, s * self.warmup_steps**-1.5)

    def peak(self) -> float:
        """The largest learning rate, reached at step ``warmup_steps``."""
        return self(self.warmup_steps - 1)


def make_scheduler(optimizer: torch.optim.Optimizer, d_model: int, warmup_steps: int = 4000,
                   factor: float = 1.0) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` that gives the optimizer the paper's learning rate; call ``.step()`` after each
    ``optimizer.step()``. The optimizer's base lr must be 1 (:func:`make_optimizer`)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, NoamSchedule(d_model, warmup_steps, factor))


def translation_loss(logits: torch.Tensor, tgt_out: torch.Tensor, pad_id: int = 0,
                     label_smoothing: float = 0.1) -> torch.Tensor:
    """Label-smoothed cross-entropy averaged over the non-pad target tokens (§5.4: ε_ls = 0.1).

    PyTorch's ``label_smoothing=ε`` mixes the one-hot target with the uniform distribution over *all*
    V classes: the correct token gets probability ``1 − ε + ε/V`` and every other one ``ε/V`` (the
    Annotated Transformer instead spreads ε over the V − 2 classes that are neither correct nor pad).
    The minimum of the smoothed loss is therefore not 0 but the entropy of that target distribution.

    Args:
        logits: ``(batch, tgt_len, V)`` float, unnormalized scores.
        tgt_out: ``(batch, tgt_len)`` int64 labels, ``pad_id`` where there is no token.
        pad_id: ignored label.
        label_smoothing: ε_ls in [0, 1).

    Returns:
        0-dim float tensor: mean loss in nats per target token.
    """
    if logits.shape[:-1] != tgt_out.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match tgt_out {tuple(tgt_out.shape)}: expected "
                         "(batch, tgt_len, V) and (batch, tgt_len)")
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # the softmax of autocast's bf16 logits is computed in float32
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=pad_id, label_smoothing=label_smoothing)


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------

@dataclass
class TrainConfig:
    """Everything that defines a training run (stored in checkpoints as a plain dict).

    Model: ``preset`` (a key of :data:`tmlib.presets.PRESETS`) and ``model_overrides`` (any ``ModelConfig``
    field); ``vocab_size`` of the shared BPE vocabulary; ``max_len``: training pairs longer than this
    (in tokens) are dropped.
    Recipe: ``warmup_steps``, ``lr_factor`` (schedule), ``label_smoothing``, ``grad_clip`` (max global
    norm, ``None`` = no clipping as in the paper), ``max_tokens`` per batch (padded tokens).
    Budgets (whichever comes first; ``None`` = no limit): ``max_steps``, ``max_epochs``, ``max_minutes``
    (wall time of training, validation included, summed over resumed runs).
    Other: ``seed``, ``device`` (``"auto"``, ``"cpu"``, ``"cuda"``), ``threads`` (CPU threads, ``None`` =
    torch's default), ``amp`` (bf16 autocast on CUDA), ``cpu_amp`` (bf16 autocast on a CPU that computes
    bf16 natively, e.g. AVX512-BF16 or AMX, where it is about 1.5x faster; ignored elsewhere), ``checkpoint_every`` (steps between
    checkpoints, besides every epoch end and the end of training), ``val_every_epoch``, ``progress``
    (tqdm bar), ``progress_interval`` (seconds between bar refreshes).
    """

    preset: str = "small"
    model_overrides: dict = field(default_factory=dict)
    vocab_size: int = 8000
    max_len: int = 100
    warmup_steps: int = 4000
    lr_factor: float = 1.0
    label_smoothing: float = 0.1
    grad_clip: float | None = None
    max_tokens: int = 4096
    max_steps: int | None = None
    max_epochs: int | None = None
    max_minutes: float | None = None
    seed: int = 0
    device: str = "auto"
    threads: int | None = None
    amp: bool = True
    cpu_amp: bool = False
    checkpoint_every: int | None = 500
    val_every_epoch: bool = True
    progress: bool = True
    progress_interval: float = 1.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown TrainConfig field(s) {sorted(unknown)}")
        return cls(**d)


# --------------------------------------------------------------------------------------------------
# RNG state and checkpoints
# --------------------------------------------------------------------------------------------------

def get_rng_state() -> dict:
    """The states of Python's, NumPy's and torch's (CPU and every CUDA device) generators, as tensors
    and plain containers (loadable with ``torch.load(weights_only=True)``)."""
    version, state, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": [version, torch.tensor(state, dtype=torch.int64), gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict) -> None:
    """Inverse of :func:`get_rng_state`."""
    version, st, gauss = state["python"]
    random.setstate((version, tuple(int(x) for x in st.tolist()), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | os.PathLike, state: dict) -> None:
    """``torch.save`` atomically: write a temporary file in the same folder, then ``os.replace``.

    A crash while writing leaves the previous checkpoint intact (never a half-written file).
    """
    with atomic_write(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: str | os.PathLike, map_location="cpu") -> dict:
    """Load a checkpoint written by :class:`Trainer` with ``torch.load(weights_only=True)``.

    Raises:
        FileNotFoundError: no file at ``path`` (the message says how to produce one).
        RuntimeError: the file is not a readable checkpoint (e.g. truncated): delete it and train again.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: train one with `python -m tmlib.train --out "
                                f"{path.parent}` (or tmlib.training.run_training)")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 - re-raised with advice
        raise RuntimeError(f"cannot read checkpoint {path} ({err}); delete it and train again") from err


def _atomic_json(path: Path, obj) -> None:
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=1))


# --------------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------------

def _resolve_device(name: str) -> torch.device:
    from .utils import get_device

    return get_device(None if name in (None, "auto") else name)


def _new_history() -> dict:
    return {"step": [], "epoch": [], "lr": [], "loss": [], "tokens_per_s": [], "elapsed_s": [],
            "val_step": [], "val_epoch": [], "val_loss": [], "val_nll": [], "val_elapsed_s": []}


class Trainer:
    """Train an encoder-decoder on token batches with the paper's recipe; checkpoint and resume exactly.

    Args:
        model: a :class:`tmlib.transformer.Transformer` (any module with ``model(src, tgt) -> logits``
            ``(batch, tgt_len, V)`` and a ``d_model`` attribute).
        train_batches: :class:`tmlib.data.BatchIterator` with ``shuffle=True``; epoch ``e`` has a fixed
            batch order given its seed, which is what makes resuming exact.
        val_batches: a :class:`~tmlib.data.BatchIterator` for the validation loss, or ``None``.
        config: :class:`TrainConfig` (recipe and budgets).
        tokenizer: stored (as JSON) in the checkpoints, so a checkpoint is all a translator needs.
        checkpoint_path: where to write checkpoints (``None``: never).
        model_config: plain dict describing how to rebuild the model (stored in the checkpoint).

    State: ``step`` (optimizer steps done), ``epoch`` and ``batch_in_epoch`` (the next batch to train
    on), ``elapsed_s`` (training wall time so far), ``history`` (lists: per step ``step``, ``epoch``,
    ``lr``, ``loss`` (label-smoothed, nats/token), ``tokens_per_s`` (target tokens), ``elapsed_s``; per
    validation ``val_step``, ``val_epoch``, ``val_loss`` (label-smoothed), ``val_nll`` (plain
    cross-entropy; perplexity = exp), ``val_elapsed_s``).
    """

    def __init__(self, model, train_batches: BatchIterator, val_batches: BatchIterator | None = None,
                 config: TrainConfig | None = None, tokenizer: BPETokenizer | None = None,
                 checkpoint_path: str | os.PathLike | None = None, model_config: dict | None = None):
        self.config = config or TrainConfig()
        self.device = _resolve_device(self.config.device)
        self.model = model.to(self.device)
        self.train_batches, self.val_batches = train_batches, val_batches
        self.tokenizer = tokenizer
        self.checkpoint_path = Path(checkpoint_path) if checkpoint_path is not None else None
        self.model_config = model_config or {}
        self.pad_id = train_batches.pad_id
        self.optimizer = make_optimizer(self.model)
        self.scheduler = make_scheduler(self.optimizer, model.d_model, self.config.warmup_steps,
                                        self.config.lr_factor)
        self.step, self.epoch, self.batch_in_epoch, self.elapsed_s = 0, 0, 0, 0.0
        self.history = _new_history()
        self.finished = False
        self._t_last = time.perf_counter()

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Everything needed to continue exactly, as tensors and plain containers."""
        return {
            "format": "tmlib-checkpoint-1",
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
            "elapsed_s": self.elapsed_s, "finished": self.finished,
            "config": self.config.to_dict(), "model_config": dict(self.model_config),
            "tokenizer": self.tokenizer.to_json() if self.tokenizer is not None else None,
            "history": self.history,
            "rng": get_rng_state(),
            "torch_version": str(torch.__version__),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict` (model, optimizer, scheduler, position, history, RNG states)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.elapsed_s, self.finished = state["elapsed_s"], state["finished"]
        self.history = {k: list(v) for k, v in state["history"].items()}
        set_rng_state(state["rng"])

    def save(self) -> None:
        """Write the checkpoint (atomically) and ``history.json`` beside it."""
        if self.checkpoint_path is None:
            return
        save_checkpoint(self.checkpoint_path, self.state_dict())
        _atomic_json(self.checkpoint_path.with_name("history.json"), self.history)

    def resume(self, path: str | os.PathLike | None = None) -> bool:
        """Load the checkpoint at ``path`` (default: ``checkpoint_path``) if it exists; True if loaded."""
        path = Path(path) if path is not None else self.checkpoint_path
        if path is None or not path.is_file():
            return False
        self.load_state_dict(load_checkpoint(path, map_location=self.device))
        return True

    # ---------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self, batches: BatchIterator | None = None) -> tuple[float, float]:
        """``(label-smoothed loss, plain cross-entropy)`` in nats per target token over ``batches``
        (default: the validation batches), in eval mode (no dropout). Uses no random numbers."""
        batches = batches or self.val_batches
        was_training = self.model.training
        self.model.eval()
        total_ls = total_nll = 0.0
        n = 0
        for batch in batches.epoch(0):
            batch = batch.to(self.device)
            with self._autocast():
                logits = self.model(batch.src, batch.tgt_in)
            total_ls += float(translation_loss(logits, batch.tgt_out, self.pad_id,
                                               self.config.label_smoothing)) * batch.n_tokens
            total_nll += float(translation_loss(logits, batch.tgt_out, self.pad_id, 0.0)) * batch.n_tokens
            n += batch.n_tokens
        self.model.train(was_training)
        return total_ls / n, total_nll / n

    def _autocast(self):
        """bf16 autocast where it pays: on CUDA (``amp``), and on CPUs with native bf16 (``cpu_amp``)."""
        enabled = ((self.device.type == "cuda" and self.config.amp)
                   or (self.device.type == "cpu" and self.config.cpu_amp and cpu_has_native_bf16()))
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=enabled)

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

    def train_step(self, batch) -> float:
        """One optimizer step on ``batch``; returns the loss (label-smoothed, nats per target token)."""
        batch = batch.to(self.device)
        with self._autocast():
            logits = self.model(batch.src, batch.tgt_in)  # (batch, tgt_len, V)
        loss = translation_loss(logits, batch.tgt_out, self.pad_id, self.config.label_smoothing)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        return loss.item()

    def fit(self) -> dict:
        """Train until a budget runs out (or ``max_epochs`` epochs); returns the history.

        Checkpoints (if ``checkpoint_path``) every ``checkpoint_every`` steps, after every epoch and at the
        end. A run stopped at any of these points and resumed with :meth:`resume` produces the same
        losses and parameters as one that was never interrupted (same device and thread count).
        """
        c = self.config
        threads_before = torch.get_num_threads()
        if c.threads:
            torch.set_num_threads(c.threads)
        self.model.train()
        total = c.max_steps
        if total is None and c.max_epochs is not None:
            total = c.max_epochs * len(self.train_batches)
        bar = tqdm(total=total, initial=self.step, disable=not c.progress, unit="step",
                   mininterval=c.progress_interval, dynamic_ncols=True)
        tok_rate = None
        self._t_last = time.perf_counter()
        try:
            while not self._out_of_budget():
                n_batches = len(self.train_batches.batches(self.epoch))
                if self.batch_in_epoch >= n_batches:  # epoch done: validate, then move on
                    self.epoch, self.batch_in_epoch = self.epoch + 1, 0
                    if c.val_every_epoch:
                        self._validate()
                        bar.write(f"epoch {self.epoch}: step {self.step}, val loss {self.history['val_loss'][-1]:.3f}"
                                  f" (NLL {self.history['val_nll'][-1]:.3f}), {self.elapsed_s / 60:.1f} min"
                                  if self.val_batches is not None else f"epoch {self.epoch} done")
                    self.save()
                    self._tick()
                    continue
                idx = self.train_batches.batches(self.epoch)[self.batch_in_epoch]
                batch = self.train_batches.collate_indices(idx)
                lr = self.scheduler.get_last_lr()[0]
                t0 = time.perf_counter()
                loss = self.train_step(batch)
                rate = batch.n_tokens / (time.perf_counter() - t0)
                if not math.isfinite(loss):
                    raise FloatingPointError(f"loss became {loss} at step {self.step + 1}: lower lr_factor or "
                                             "raise warmup_steps, or set grad_clip")
                self.step += 1
                self.batch_in_epoch += 1
                self._tick()
                tok_rate = rate if tok_rate is None else 0.9 * tok_rate + 0.1 * rate
                h = self.history
                for k, v in (("step", self.step), ("epoch", self.epoch), ("lr", lr), ("loss", loss),
                             ("tokens_per_s", rate), ("elapsed_s", self.elapsed_s)):
                    h[k].append(v)
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{tok_rate:,.0f}", refresh=False)
                if c.checkpoint_every and self.step % c.checkpoint_every == 0:
                    self.save()
                    self._tick()
        finally:
            bar.close()
            torch.set_num_threads(threads_before)
        if not self.history["val_step"] or self.history["val_step"][-1] != self.step:
            self._validate()  # the validation loss of the final parameters
        self.finished = True
        self.save()
        self._tick()
        return self.history


# --------------------------------------------------------------------------------------------------
# The Multi30k experiment
# --------------------------------------------------------------------------------------------------

def build_model(model_config: dict):
    """A fresh :class:`tmlib.transformer.Transformer` from the ``model_config`` stored in checkpoints:
    ``{"preset": str, "vocab_size": int, "overrides": dict}`` (one shared vocabulary, tied embeddings)."""
    from .presets import make_model

    return make_model(model_config["preset"], model_config["vocab_size"], **model_config.get("overrides", {}))


def _prepare(config: TrainConfig, data_dir, tokenizer: BPETokenizer | None):
    train_pairs = load_multi30k("train", data_dir)
    val_pairs = load_multi30k("val", data_dir)
    if tokenizer is None:
        tokenizer = train_tokenizer(train_pairs, config.vocab_size)
    train_ex = filter_by_length(encode_pairs(train_pairs, tokenizer), config.max_len)
    val_ex = encode_pairs(val_pairs, tokenizer)
    ids = dict(pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
    train_it = BatchIterator(train_ex, config.max_tokens, shuffle=True, seed=config.seed, **ids)
    val_it = BatchIterator(val_ex, config.max_tokens, shuffle=False, **ids)
    return tokenizer, train_it, val_it


def run_training(config: TrainConfig, out_dir: str | os.PathLike | None = None, *, resume: bool = False,
                 data_dir=None) -> Trainer:
    """The whole Multi30k German→English experiment: data, shared BPE tokenizer, model, training.

    Args:
        config: :class:`TrainConfig`.
        out_dir: run folder: ``checkpoint.pt``, ``history.json``, ``tokenizer.json``, ``config.json``
            (``None``: keep nothing on disk).
        resume: continue from ``out_dir/checkpoint.pt`` if it exists (its config, tokenizer, model and
            position; the budgets of ``config`` replace the stored ones so that a run can be extended).
        data_dir: where Multi30k is (see :func:`tmlib.data.load_multi30k`).

    Returns:
        The :class:`Trainer` after training (``.model``, ``.tokenizer``, ``.history``).

    Raises:
        FileExistsError: ``out_dir`` already holds a checkpoint and ``resume`` is False.
        tmlib.data.DataError: Multi30k is missing or corrupt (the message says how to get it).
    """
    from .utils import seed_everything

    out = Path(out_dir) if out_dir is not None else None
    ckpt = out / CHECKPOINT_NAME if out is not None else None
    state = None
    if not resume and ckpt is not None and ckpt.is_file():
        raise FileExistsError(f"{ckpt} exists: pass resume=True (--resume) to continue that run, or choose another "
                              "output folder, or delete it to start over")
    if resume and ckpt is not None and ckpt.is_file():
        state = load_checkpoint(ckpt)
        stored = TrainConfig.from_dict(state["config"])
        budgets = {k: getattr(config, k) for k in ("max_steps", "max_epochs", "max_minutes", "progress",
                                                   "progress_interval", "checkpoint_every", "threads")}
        config = dataclasses.replace(stored, **budgets)
    seed_everything(config.seed)
    tokenizer = BPETokenizer.from_json(state["tokenizer"]) if state is not None else None
    tokenizer, train_it, val_it = _prepare(config, data_dir, tokenizer)
    model_config = {"preset": config.preset, "vocab_size": tokenizer.vocab_size,
                    "overrides": {"pad_id": tokenizer.pad_id, **config.model_overrides}}
    model = build_model(model_config)
    trainer = Trainer(model, train_it, val_it, config, tokenizer, ckpt, model_config)
    if state is not None:
        trainer.load_state_dict(state)
        trainer.finished = False
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        tokenizer.save(out / "tokenizer.json")
        _atomic_json(out / "config.json", {"train": config.to_dict(), "model": model_config})
    trainer.fit()
    return trainer


def load_trained(path: str | os.PathLike, device=None):
    """Rebuild a trained model from a checkpoint (a run folder or the ``checkpoint.pt`` file).

    Args:
        path: ``<out_dir>`` or ``<out_dir>/checkpoint.pt`` written by :func:`run_training` /
            ``python -m tmlib.train``.
        device: where to put the model (default: :func:`tmlib.utils.get_device`).

    Returns:
        ``(model, tokenizer, history, state)``: the model in eval mode, the :class:`BPETokenizer`, the
        training history dict and the full checkpoint dict (``config``, ``step``, ``elapsed_s``, ...).
    """
    from .utils import get_device

    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    device = get_device() if device is None else torch.device(device)
    state = load_checkpoint(path)
    model = build_model(state["model_config"])
    model.load_state_dict(state["model"])
    model.to(device).eval()
    return model, BPETokenizer.from_json(state["tokenizer"]), state["history"], state


def load_or_train(out_dir: str | os.PathLike, config: TrainConfig, data_dir=None, device=None):
    """Load the finished run in ``out_dir`` if there is one, otherwise train it (UvA-tutorial style).

    Args:
        out_dir: run folder (``checkpoint.pt`` inside). An unfinished checkpoint is resumed.
        config: used when training (ignored when a finished checkpoint is loaded).

    Returns:
        ``(model, tokenizer, history, state)`` as :func:`load_trained`, plus ``state["loaded"]``: True if
        the model came from disk without training.
    """
    ckpt = Path(out_dir) / CHECKPOINT_NAME
    if ckpt.is_file() and load_checkpoint(ckpt).get("finished"):
        result = load_trained(ckpt, device)
        result[3]["loaded"] = True
        return result
    run_training(config, out_dir, resume=True, data_dir=data_dir)
    result = load_trained(ckpt, device)
    result[3]["loaded"] = False
    return result
