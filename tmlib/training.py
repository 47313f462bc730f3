"""Training, in one import: the names of :mod:`tmlib.recipe` (the paper's §5), :mod:`tmlib.checkpoint`
(checkpoints and RNG state), :mod:`tmlib.trainer` (the loop) and :mod:`tmlib.experiment` (the Multi30k run).

Each of those modules does one job; this module only gathers their public names, so that
``from tmlib.training import Trainer, run_training, translation_loss`` keeps working.
"""
from __future__ import annotations

from .checkpoint import (CHECKPOINT_FORMAT, CHECKPOINT_NAME, CheckpointError, get_rng_state, load_checkpoint,
                         save_checkpoint, set_rng_state)
from .experiment import (RECOMMENDED, SMOKE, TrainedModel, TranslationData, default_run, load_or_train,
                         load_trained, run_training)
from .recipe import ADAM_BETAS, ADAM_EPS, NoamSchedule, make_optimizer, make_scheduler, translation_loss
from .trainer import RUNTIME_FIELDS, TrainConfig, Trainer, cpu_has_native_bf16, resolve_precision

__all__ = [
    "ADAM_BETAS", "ADAM_EPS", "make_optimizer", "NoamSchedule", "make_scheduler", "translation_loss",
    "TrainConfig", "Trainer", "RUNTIME_FIELDS", "cpu_has_native_bf16", "resolve_precision",
    "CHECKPOINT_NAME", "CHECKPOINT_FORMAT", "CheckpointError", "save_checkpoint", "load_checkpoint",
    "get_rng_state", "set_rng_state",
    "RECOMMENDED", "SMOKE", "TranslationData", "TrainedModel", "run_training", "load_trained", "load_or_train",
    "default_run",
]
