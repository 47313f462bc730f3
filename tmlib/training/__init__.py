"""Training (§5): the recipe (Adam, the learning-rate schedule, the label-smoothed loss), the training
loop, checkpoints, data parallelism, and the Multi30k experiment of chapter 9.
"""

from tmlib.training.checkpoint import (
    CHECKPOINT_FORMAT, CHECKPOINT_NAME, CheckpointError, get_rng_state, load_checkpoint, remove_stale_temporaries,
    save_checkpoint, set_rng_state
)
from tmlib.training.distributed import (
    DistEnv, WorldSizeMismatch, agree, all_reduce_sum, assert_same, backend_for, broadcast_from_rank0,
    check_world_size, control_group, gather_to_rank0, is_distributed, local_device, process_group, rank,
    torchrun_env, world_size, wrap_model
)
from tmlib.training.experiment import (
    RECOMMENDED, RUN_DIR_ENV, SMOKE, TrainedModel, TranslationData, default_run, load_or_train, load_trained,
    resume_config, run_training
)
from tmlib.training.recipe import ADAM_BETAS, ADAM_EPS, NoamSchedule, make_optimizer, make_scheduler, translation_loss
from tmlib.training.trainer import (
    RUNTIME_FIELDS, TrainConfig, Trainer, cpu_has_native_bf16, resolve_precision, translation_forward
)

__all__ = [
    "ADAM_BETAS", "ADAM_EPS", "CHECKPOINT_FORMAT", "CHECKPOINT_NAME", "CheckpointError", "DistEnv",
    "NoamSchedule", "RECOMMENDED", "RUNTIME_FIELDS", "RUN_DIR_ENV", "SMOKE", "TrainConfig", "TrainedModel",
    "Trainer", "TranslationData", "WorldSizeMismatch", "agree", "all_reduce_sum", "assert_same", "backend_for",
    "broadcast_from_rank0", "check_world_size", "control_group", "cpu_has_native_bf16", "default_run",
    "gather_to_rank0", "get_rng_state", "is_distributed", "load_checkpoint", "load_or_train", "load_trained",
    "local_device", "make_optimizer", "make_scheduler", "process_group", "rank", "remove_stale_temporaries",
    "resolve_precision", "resume_config", "run_training", "save_checkpoint", "set_rng_state", "torchrun_env",
    "translation_forward", "translation_loss", "world_size", "wrap_model"
]
