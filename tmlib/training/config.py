"""The configuration of a training run: the model, the data sizes, the paper's recipe (§5), the budgets and the
runtime settings, in one frozen dataclass that every checkpoint stores.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np

from tmlib.model.config import PRESETS, ModelConfig
from tmlib.utils import SEED_MAX
from tmlib.validation import check_float, check_int, optional_field

__all__ = ["TrainConfig", "RUNTIME_FIELDS", "ConfigError"]

Precision = Literal["auto", "bf16", "fp16", "off"]

#: The largest learning rate Adam's first update can take in float32: the step is lr / (1 - β1) = 10·lr.
_LR_LIMIT = float(np.finfo(np.float32).max) / 10


class ConfigError(ValueError):
    """A configuration that the prepared data cannot satisfy, found before the first training step: an epoch
    with fewer batches than one optimizer step needs, a sentence longer than the model takes, no training pair
    left by ``max_sentence_len``. The message names the fields and the values that would work."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run (stored in every checkpoint): the model, the data sizes, the
    recipe, the budgets and the runtime settings.

    The defaults are the paper's recipe (§5) for the base model; ``tmlib.training.experiment.RECOMMENDED`` is the
    configuration for a CPU budget. Frozen: derive variants with ``dataclasses.replace(config, ...)``.
    The budgets, device, precision, threads, logging and checkpoint cadence (``RUNTIME_FIELDS``) may change
    when a run is resumed; the other fields define the run and may not.

    Raises:
        TypeError: (on construction) ``model`` is not a :class:`tmlib.model.ModelConfig`.
        ValueError: (on construction) an invalid value, e.g. a negative budget, ``grad_clip <= 0`` (use
            ``None`` for no clipping), ``label_smoothing`` outside [0, 1), a seed outside [0, 2**32 - 1], an
            ``lr_factor`` whose peak learning rate overflows float32, an unknown precision or device.
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
    auto_dropout: float | None = optional_field(None, float)
    """choose dropout from the budget: P_drop = this value when the budget buys at least
    ``tmlib.training.budget.AUTO_DROPOUT_MIN_PASSES`` passes over the training set (a budget in minutes: at the step
    time measured before the first step), else 0; the choice replaces ``model.dropout`` and is stored in the
    checkpoint; none: ``model.dropout`` as given"""
    max_steps: int | None = optional_field(None, int)
    """budget: optimizer steps"""
    max_epochs: int | None = optional_field(None, int)
    """budget: passes over the training set"""
    max_minutes: float | None = optional_field(None, float)
    """budget: wall-clock minutes of training, validation included, summed over resumed runs"""
    seed: int = 0
    """seed of the initialisation, the dropout masks and the batch order (0 to 2**32 - 1)"""
    device: str = "auto"
    """auto (CUDA, else Apple's MPS, else the CPU), cpu, cuda or mps"""
    threads: int | None = optional_field(None, int)
    """CPU threads for torch (none: torch's default)"""
    amp: Precision = "auto"
    """mixed precision: auto (bf16 on CUDA, or fp16 where the GPU lacks native bf16; on a CPU, bf16 only if a
    timing of the model's first steps finds it faster than float32; float32 elsewhere), bf16, fp16 (CUDA only) or
    off"""
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
            raise TypeError(f"model must be a tmlib.model.ModelConfig, got {type(self.model).__name__}")
        check_int(self.max_sentence_len, "max_sentence_len", minimum=1)
        check_int(self.max_tokens, "max_tokens", minimum=1)
        check_int(self.warmup_steps, "warmup_steps", minimum=1)
        check_float(self.lr_factor, "lr_factor", minimum=0.0, min_inclusive=False)
        peak = self.lr_factor * (self.model.d_model * self.warmup_steps) ** -0.5  # NoamSchedule.peak() (§5.3)
        if peak > _LR_LIMIT:
            raise ValueError(f"lr_factor must keep the peak learning rate lr_factor · (d_model · warmup_steps)^-0.5 "
                             f"within float32 (at most {_LR_LIMIT:.3g}), got {self.lr_factor:g}: a peak of {peak:.3g}")
        check_float(self.label_smoothing, "label_smoothing", minimum=0.0, maximum=1.0, max_inclusive=False)
        if self.grad_clip is not None and check_float(self.grad_clip, "grad_clip") <= 0:
            raise ValueError(f"grad_clip must be > 0, got {self.grad_clip} (use none for no clipping: a norm of 0 "
                             "would zero every gradient)")
        check_int(self.accumulate, "accumulate", minimum=1)
        check_float(self.ema_decay, "ema_decay", minimum=0.0, maximum=1.0, min_inclusive=False, max_inclusive=False,
                    allow_none=True)
        check_float(self.auto_dropout, "auto_dropout", minimum=0.0, maximum=1.0, max_inclusive=False, allow_none=True)
        check_int(self.max_steps, "max_steps", minimum=1, allow_none=True)
        check_int(self.max_epochs, "max_epochs", minimum=1, allow_none=True)
        check_float(self.max_minutes, "max_minutes", minimum=0.0, min_inclusive=False, allow_none=True)
        check_int(self.seed, "seed", minimum=0, maximum=SEED_MAX)
        if not (self.device in ("auto", "cpu", "cuda", "mps") or str(self.device).startswith("cuda:")):
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")
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

    def check_lengths(self, train_examples, val_examples) -> None:
        """Raise :class:`ConfigError` unless the training examples ``(src_ids, tgt_ids)`` (already filtered by
        ``max_sentence_len``) are not empty and the model takes every training and validation pair: a source of
        at most ``model.max_len`` tokens, a target that fits with its ``<bos>``/``<eos>`` (``len + 1``)."""
        if not train_examples:
            raise ConfigError(f"max_sentence_len {self.max_sentence_len} keeps none of the training pairs: raise it")
        limit = self.model.max_len
        for name, examples, advice in (("training", train_examples, f"lower max_sentence_len to {limit} or raise "
                                        "max_len to"), ("validation", val_examples, "raise max_len to")):
            longest = max((max(len(src), len(tgt) + 1) for src, tgt in examples), default=0)
            if longest > limit:
                raise ConfigError(f"a {name} pair has {longest} tokens, more than the model's max_len {limit}: "
                                  f"{advice} {longest} (a larger vocab_size also makes shorter sequences)")

    def to_dict(self) -> dict:
        """Plain dict (the model as a nested dict), for checkpoints and ``config.json``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: an unknown field (a typo, or a configuration written by another version of tmlib).
        """
        d = dict(d)
        if isinstance(d.get("model"), dict):
            d["model"] = ModelConfig.from_dict(d["model"])
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown TrainConfig field(s) {sorted(unknown)}")
        return cls(**d)


#: Fields that may differ between a run and its continuation (``--resume``).
RUNTIME_FIELDS = ("max_steps", "max_epochs", "max_minutes", "device", "threads", "amp", "compile", "checkpoint_minutes",
                  "checkpoint_every", "val_every_epoch", "log_every", "progress", "progress_interval", "num_workers")
