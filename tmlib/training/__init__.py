"""Training (§5): the recipe (Adam, the learning-rate schedule, the label-smoothed loss), the training loop and its
collaborators (precision, budgets, the batches of each step, progress, evaluation, checkpoints), data parallelism,
and the Multi30k experiment of chapter 9.
"""

from tmlib.training.budget import Budget, CheckpointSchedule, Clock, DeferredInterrupt, Interrupted, sigterm_interrupts
from tmlib.training.checkpoint import (
    CHECKPOINT_FORMAT, CHECKPOINT_NAME, CheckpointError, find_nonfinite, get_rng_state, load_checkpoint,
    save_checkpoint, set_rng_state
)
from tmlib.training.config import RUNTIME_FIELDS, ConfigError, TrainConfig
from tmlib.training.distributed import (
    DistEnv, WorldSizeMismatch, agree, all_reduce_sum, assert_same, backend_for, broadcast_from_rank0,
    check_world_size, control_group, gather_to_rank0, is_distributed, local_device, process_group, rank,
    torchrun_env, world_size, wrap_model
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
from tmlib.training.plan import StepPlan
from tmlib.training.precision import (BF16_MIN_SPEEDUP, MixedPrecision, describe_precision, machine_settings,
                                      resolve_precision, time_precisions)
from tmlib.training.progress import Diverged, History, ProgressBar, Throughput
from tmlib.training.recipe import (
    ADAM_BETAS, ADAM_EPS, NoamSchedule, make_ema, make_optimizer, make_scheduler, step_loss, translation_loss
)
from tmlib.training.rundir import RUN_MARKER, RunFolderError, check_run_folder, hold_run_folder, is_run_folder
from tmlib.training.strategy import DataParallel, SingleProcess, current_strategy
from tmlib.training.trainer import Trainer, translation_forward

__all__ = [
    "ADAM_BETAS", "ADAM_EPS", "BF16_MIN_SPEEDUP", "Budget", "CHECKPOINT_FORMAT", "CHECKPOINT_NAME", "CheckpointError",
    "DISTRIBUTION",
    "CheckpointSchedule", "Clock", "ConfigError", "DataParallel", "DeferredInterrupt", "DistEnv", "Diverged",
    "History", "Interrupted", "MixedPrecision", "NoamSchedule", "ProgressBar", "RECOMMENDED", "RUNTIME_FIELDS",
    "RUN_DIR_ENV", "RUN_MARKER", "RunFolderError", "SMOKE", "SingleProcess", "StepPlan", "Throughput",
    "TrainConfig", "TrainedModel", "Trainer", "TranslationData", "WorldSizeMismatch", "agree", "all_reduce_sum",
    "assert_same", "backend_for", "broadcast_from_rank0", "check_exact_resume", "check_run_folder",
    "check_same_update", "check_world_size", "colab_drive_runs", "control_group",
    "current_strategy", "default_run", "describe_checkpoint", "describe_precision", "describe_divergence",
    "describe_interruption", "describe_out_of_memory", "evaluate_loss", "find_nonfinite", "gather_to_rank0",
    "get_rng_state", "hold_run_folder", "is_distributed", "is_out_of_memory", "is_run_folder", "launch_processes", "load_checkpoint",
    "load_or_train", "load_trained", "local_device", "machine_settings", "make_ema", "make_optimizer",
    "make_scheduler", "measure_speedup", "process_group", "rank", "repository_root", "ring_all_reduce",
    "resolve_precision", "resume_config", "run_training", "runs_root",
    "save_checkpoint", "set_rng_state", "sigterm_interrupts", "step_loss", "torchrun_env", "translation_forward",
    "time_precisions", "translation_loss", "world_size", "wrap_model"
]
