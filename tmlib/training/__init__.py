"""Training (§5): the recipe (Adam, the learning-rate schedule, the label-smoothed loss), the training loop
(``Trainer``, with its precision, evaluation, checkpoints and stops), data parallelism, and the Multi30k experiment
of chapter 9.
"""

from tmlib.training.budget import AUTO_DROPOUT_MIN_PASSES, describe_dropout, dropout_for_passes, passes_in_budget
from tmlib.training.checkpoint import (
    CHECKPOINT_FORMAT, CHECKPOINT_NAME, CheckpointError, find_nonfinite, get_rng_state, load_checkpoint,
    save_checkpoint, set_rng_state
)
from tmlib.training.config import RUNTIME_FIELDS, ConfigError, TrainConfig
from tmlib.training.distributed import (
    DistEnv, WorldSizeMismatch, agree, all_reduce_sum, assert_same, backend_for, broadcast_from_rank0,
    check_world_size, control_group, gather_to_rank0, is_distributed, local_device, process_device, process_group,
    rank, torchrun_env, world_size, wrap_model
)
from tmlib.training.ddp_check import (
    check_exact_resume, check_same_update, launch_processes, measure_speedup, ring_all_reduce
)
from tmlib.training.evaluation import evaluate_loss
from tmlib.training.experiment import (
    RECOMMENDED, RUN_DIR_ENV, SMOKE, TrainedModel, TranslationData, default_run, load_or_train, load_trained,
    resume_config, run_training
)
from tmlib.training.locations import DISTRIBUTION, colab_drive_runs, repository_root, runs_root
from tmlib.training.outcome import (
    describe_checkpoint, describe_divergence, describe_interruption, describe_out_of_memory, is_out_of_memory
)
from tmlib.training.precision import (BF16_MIN_SPEEDUP, MixedPrecision, describe_precision, machine_settings,
                                      resolve_precision, time_precisions)
from tmlib.training.recipe import (
    ADAM_BETAS, ADAM_EPS, NoamSchedule, make_ema, make_optimizer, make_scheduler, step_loss, translation_loss
)
from tmlib.training.rundir import RUN_MARKER, RunFolderError, check_run_folder, hold_run_folder, is_run_folder
from tmlib.training.stops import Diverged, Interrupted, deferred_signals, sigterm_interrupts
from tmlib.training.trainer import STEP_FIELDS, VALIDATION_FIELDS, Trainer, translation_forward

__all__ = [
    "ADAM_BETAS", "ADAM_EPS", "AUTO_DROPOUT_MIN_PASSES", "BF16_MIN_SPEEDUP", "CHECKPOINT_FORMAT", "CHECKPOINT_NAME", "CheckpointError",
    "ConfigError", "DISTRIBUTION", "DistEnv", "Diverged", "Interrupted", "MixedPrecision", "NoamSchedule",
    "RECOMMENDED", "RUNTIME_FIELDS", "RUN_DIR_ENV", "RUN_MARKER", "RunFolderError", "SMOKE", "STEP_FIELDS",
    "TrainConfig", "TrainedModel", "Trainer", "TranslationData", "VALIDATION_FIELDS", "WorldSizeMismatch", "agree",
    "all_reduce_sum", "assert_same", "backend_for", "broadcast_from_rank0", "check_exact_resume", "check_run_folder",
    "check_same_update", "check_world_size", "colab_drive_runs", "control_group", "default_run", "deferred_signals",
    "describe_checkpoint", "describe_divergence", "describe_interruption", "describe_out_of_memory",
    "describe_dropout", "describe_precision", "dropout_for_passes", "evaluate_loss", "find_nonfinite", "gather_to_rank0", "get_rng_state", "hold_run_folder",
    "is_distributed", "is_out_of_memory", "is_run_folder", "launch_processes", "load_checkpoint", "load_or_train",
    "load_trained", "local_device", "machine_settings", "make_ema", "make_optimizer", "make_scheduler",
    "measure_speedup", "passes_in_budget", "process_device", "process_group", "rank", "repository_root", "resolve_precision",
    "resume_config", "ring_all_reduce", "run_training", "runs_root", "save_checkpoint", "set_rng_state",
    "sigterm_interrupts", "step_loss", "time_precisions", "torchrun_env", "translation_forward", "translation_loss",
    "world_size", "wrap_model"
]
