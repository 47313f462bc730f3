"""The Multi30k German→English experiment of chapter 9: the recommended configuration, the data pipeline as
objects, training into a run folder, and loading a trained model back.

* :data:`RECOMMENDED`: the configuration for a 15-minute CPU budget (how it was chosen: chapter 9 and
  ``benchmarks/results/``); :data:`SMOKE`: a few seconds of training for CI (``TMLIB_SMOKE=1``).
* :class:`TranslationData`: the tokenizer and the training and validation batches. Chapter 9 builds it in
  its cells and passes it to the training, so the objects the chapter shows are the ones that train.
* :func:`run_training`: data, model (:func:`tmlib.model.make_model`), :class:`tmlib.training.trainer.Trainer`, run folder.
* :func:`load_trained` / :func:`load_or_train`: a :class:`TrainedModel` (model, tokenizer, history, config, ...)
  from a run folder, training it first if needed (the UvA tutorials' "load the checkpoint if present,
  otherwise train").
* :func:`default_run`: the run folder and configuration that chapters 9, 11 and 14 share, so that ``make book``
  trains once (where: :mod:`tmlib.training.locations`).

Under ``torchrun`` (``python -m tmlib.train`` initialises the process group, see :mod:`tmlib.training.distributed`),
:func:`run_training` trains the tokenizer on rank 0 only and sends it to the other processes, and only rank 0
writes into the run folder.

A run folder holds ``checkpoint.pt`` (everything, see :mod:`tmlib.training.checkpoint`), ``history.json``,
``tokenizer.json``, ``config.json`` and the marker and lock of :mod:`tmlib.training.rundir`.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tmlib.model.config import PRESETS, ModelConfig
from tmlib.model.transformer import make_model
from tmlib.training.checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint
from tmlib.training.config import RUNTIME_FIELDS, TrainConfig
from tmlib.training import distributed
from tmlib.training.rundir import check_run_files, hold_run_folder
from tmlib.training.trainer import Trainer
from tmlib.utils import atomic_write

__all__ = ["RECOMMENDED", "SMOKE", "TranslationData", "TrainedModel", "run_training", "load_trained", "load_or_train",
           "default_run", "resume_config", "RUN_DIR_ENV"]

#: The configuration recommended for a 15-minute CPU budget: the paper's recipe with the changes that a small
#: model and a few thousand steps (instead of 100,000) need:
#:
#: * the ``"cpu"`` preset: d_model 256, 4 heads, 2 + 2 layers, d_ff 512, a shared 8,000-token BPE vocabulary
#:   (4.7M parameters);
#: * dropout chosen from the passes the budget buys (``auto_dropout``, :mod:`tmlib.training.budget`): the paper's
#:   P_drop 0.1 from nine passes, none below (without dropout the kept weights are better up to eight passes, with it
#:   from nine: ``translate_cpu_seed1.json`` against ``translate_cpu_dropout01.json``; and steps are 10% faster);
#: * batches of 2,000 padded tokens (more updates per minute than the paper's 25,000);
#: * a short warm-up (200 steps instead of 4,000) and a factor 0.3 on the schedule (peak lr 1.33e-3);
#: * gradient clipping at norm 1, a guard against the loss spikes of a post-LN model;
#: * bf16 autocast where it is measurably faster than float32 on the machine (``amp="auto"`` times the model's own
#:   step in both types at the start of training), float32 elsewhere;
#: * the weights of the validation pass with the lowest NLL are kept (``keep_best``): without dropout, a fast
#:   machine's 15 minutes would run past the best epoch (``translate_cpu.json``, a run without dropout: validation NLL
#:   1.874 after epoch 6, 1.957 at the end; test BLEU 37.85 with the kept weights, 37.02 with the last ones);
#: * a 15-minute budget.
#:
#: On a CPU without native bf16 the budget buys fewer steps: a 2-core machine without AVX-512 trained the
#: earlier recipe (P_drop 0.1 always) at 2,411 target tokens/s, 1,105 steps in 15 minutes (under five passes), and
#: scored 34.8. Without dropout, run in float32 for 1,215 steps (those 1,105 steps × 1.10 for the faster steps), it
#: scored 38.46 and 37.55 lowercased BLEU with beam 4 on test 2016 in two runs (float32 CPU training with 2 threads is
#: not bit-reproducible; ``benchmarks/results/translate_cpu_fp32_emulated*.json``).
#:
#: The measurements behind these choices are in chapter 9, ``benchmarks/results/translate_cpu*.json`` and
#: ``benchmarks/results/cpu_recipe.json``.
RECOMMENDED = TrainConfig(model=PRESETS["cpu"], max_tokens=2000, warmup_steps=200, lr_factor=0.3, grad_clip=1.0,
                          keep_best=True, auto_dropout=0.1, max_minutes=15.0, progress_interval=10.0)

#: A smoke run for CI (``TMLIB_SMOKE=1``): the "tiny" model for 30 steps on one thread, a few seconds.
SMOKE = dataclasses.replace(RECOMMENDED, model=dataclasses.replace(PRESETS["tiny"], max_len=256,
                                                                 vocab_size=RECOMMENDED.model.vocab_size), max_tokens=1000,
                            warmup_steps=30, max_minutes=None, max_steps=30, threads=1)

#: Environment variable that points chapters 9 and 11 at another run folder.
RUN_DIR_ENV = "TMLIB_RUN_DIR"


def default_run(smoke: bool | None = None, root: str | os.PathLike | None = None) -> tuple[Path, TrainConfig]:
    """The run folder and configuration that chapters 9, 11 and 14 share (so ``make book`` trains once).

    Args:
        smoke: ``True`` for the CI smoke run; default: :func:`tmlib.utils.smoke_mode` (``TMLIB_SMOKE=1``).
        root: the folder that holds ``runs/``; default: :func:`tmlib.training.locations.runs_root` (the course's
            checkout, whatever the current folder; Colab's mounted Drive; else the user data folder).

    Returns:
        ``(run_dir, config)``: ``$TMLIB_RUN_DIR`` or ``<runs>/multi30k`` with :data:`RECOMMENDED`, or
        ``<runs>/smoke-multi30k`` with :data:`SMOKE`.
    """
    from tmlib.training.locations import runs_root
    from tmlib.utils import smoke_mode

    smoke = smoke_mode() if smoke is None else smoke
    runs = Path(root) / "runs" if root is not None else runs_root()
    if smoke:
        return runs / "smoke-multi30k", SMOKE
    return Path(os.environ.get(RUN_DIR_ENV) or runs / "multi30k"), RECOMMENDED


@dataclass
class TranslationData:
    """The data pipeline of the experiment as objects: tokenizer and batches.

    Attributes:
        tokenizer: the shared :class:`tmlib.data.tokenizer.BPETokenizer`.
        train_batches: :class:`tmlib.data.batching.BatchIterator` over the training pairs (shuffled, bucketed).
        val_batches: ``BatchIterator`` over the validation pairs (fixed order).
    """

    tokenizer: object
    train_batches: object
    val_batches: object

    @classmethod
    def prepare(cls, config: TrainConfig, data_dir=None, tokenizer=None) -> "TranslationData":
        """Load Multi30k, train the shared BPE tokenizer (``config.model.vocab_size`` tokens; unless one is
        given), tokenize, drop training pairs longer than ``config.max_sentence_len`` and batch by token count.

        Raises:
            tmlib.data.DataError: the data is missing or corrupt (the message says how to get it).
            tmlib.training.config.ConfigError: ``max_sentence_len`` keeps no training pair, or a kept training
                pair or a validation pair is longer than ``config.model.max_len``
                (:meth:`~tmlib.training.config.TrainConfig.check_lengths`).
        """
        from tmlib.data.batching import BatchIterator, encode_pairs, filter_by_length
        from tmlib.data.multi30k import load_multi30k
        from tmlib.data.tokenizer import train_tokenizer

        train_pairs = load_multi30k("train", data_dir)
        val_pairs = load_multi30k("val", data_dir)
        if tokenizer is None:
            tokenizer = train_tokenizer(train_pairs, config.model.vocab_size)
        train_ex = filter_by_length(encode_pairs(train_pairs, tokenizer), config.max_sentence_len)
        val_ex = encode_pairs(val_pairs, tokenizer)
        config.check_lengths(train_ex, val_ex)
        ids = dict(pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id,
                   vocab_size=tokenizer.vocab_size)  # ids are checked here, on the host
        return cls(tokenizer, BatchIterator(train_ex, config.max_tokens, shuffle=True, seed=config.seed, **ids),
                   BatchIterator(val_ex, config.max_tokens, shuffle=False, **ids))

    def check_matches(self, config: TrainConfig) -> None:
        """Raise ValueError unless the batches were built with ``config``'s batch size and seed."""
        if self.train_batches.max_tokens != config.max_tokens or self.train_batches.seed != config.seed:
            raise ValueError(f"the training batches were built with max_tokens={self.train_batches.max_tokens}, "
                             f"seed={self.train_batches.seed}, but the configuration says max_tokens="
                             f"{config.max_tokens}, seed={config.seed}")


@dataclass
class TrainedModel:
    """A trained model and what came with it, as returned by :func:`load_trained` and :func:`load_or_train`.

    Attributes:
        model: the model, in eval mode, on the requested device.
        tokenizer: its :class:`~tmlib.data.tokenizer.BPETokenizer`.
        history: the training history (see :class:`tmlib.training.trainer.Trainer`).
        config: the :class:`~tmlib.training.config.TrainConfig` it was trained with.
        step, epoch: optimizer steps and completed epochs.
        elapsed_s: training wall time in seconds.
        finished: whether the run reached its budget (False: interrupted, resumable).
        loaded: True if the model came from disk without training in this call.
        path: the checkpoint file.
        torch_version: the torch version that wrote it.
        machine: :func:`tmlib.machine.machine_info` of the machine that wrote the checkpoint.
        precision: how it trained, ``{"amp", "dtype", "timings"}``
            (:meth:`tmlib.training.precision.MixedPrecision.record`; None for checkpoints older than the record).
        dropout_choice: what ``auto_dropout`` chose, ``{"auto", "p", "passes", "step_s"}``
            (:func:`tmlib.training.budget.describe_dropout` prints it); None when the run did not choose.

    When the run kept a moving average of its weights (``TrainConfig.ema_decay``), ``model`` holds the average.
    When it kept its best weights (``TrainConfig.keep_best``), ``model`` holds those: the evaluated weights with
    the lowest validation NLL, reached at optimizer step ``best_step`` (None when the run did not keep them).
    """

    model: torch.nn.Module
    tokenizer: object
    history: dict
    config: TrainConfig
    step: int
    epoch: int
    elapsed_s: float
    finished: bool
    loaded: bool
    path: Path
    torch_version: str = ""
    machine: dict | None = field(default=None, repr=False)
    best_step: int | None = None
    precision: dict | None = None
    dropout_choice: dict | None = None


def _model_config(state: dict) -> ModelConfig:
    """The configuration of the checkpoint's model: the model's own, or the run's when the model had none."""
    if state["model_config"] is not None:
        return ModelConfig.from_dict(state["model_config"])
    return TrainConfig.from_dict(state["config"]).model


def resume_config(path: str | os.PathLike) -> TrainConfig:
    """The :class:`TrainConfig` stored in the checkpoint of a run folder (or checkpoint file).

    Raises:
        FileNotFoundError: there is no checkpoint (the message says to check the folder or start a new run).
        tmlib.training.checkpoint.CheckpointError: the file is not a readable tmlib checkpoint.
        tmlib.training.rundir.RunFolderError: the folder's config.json or history.json is not the checkpoint's own
            (:func:`~tmlib.training.rundir.check_run_files`), so a continued run would overwrite a user's file.
    """
    path = Path(path)
    ckpt = path / CHECKPOINT_NAME if path.suffix != ".pt" else path
    if not ckpt.is_file():
        raise FileNotFoundError(f"there is no checkpoint to resume in {ckpt.parent} ({ckpt.name} is missing): check "
                                "the run folder, or start a new run without resuming")
    state = load_checkpoint(ckpt)
    if path.suffix != ".pt":
        check_run_files(path, state)
    try:
        return TrainConfig.from_dict(state["config"])
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{ckpt} holds no training configuration this version of tmlib reads ({err})") from err


def run_training(config: TrainConfig, out_dir: str | os.PathLike | None = None, *, resume: bool = False,
                 data: TranslationData | None = None, data_dir=None) -> Trainer:
    """The whole Multi30k German→English experiment: data, shared BPE tokenizer, model, training.

    Args:
        config: :class:`~tmlib.training.config.TrainConfig`; its ``model.vocab_size`` is the size of the BPE vocabulary
            to train, and the model gets the tokenizer's actual size and padding id.
        out_dir: run folder (``None``: keep nothing on disk).
        resume: continue the run in ``out_dir``: its stored configuration, tokenizer, model and position; the
            runtime fields of ``config`` (budgets, device, precision, threads, logging; see
            :data:`tmlib.training.config.RUNTIME_FIELDS`) replace the stored ones.
        data: the tokenizer and batches to train on (chapter 9 passes the ones it built); default: built here
            with :meth:`TranslationData.prepare`. When resuming, its tokenizer must equal the stored one.
        data_dir: where Multi30k is (see :func:`tmlib.data.load_multi30k`).

    Returns:
        The :class:`~tmlib.training.trainer.Trainer` after training (``.model``, ``.tokenizer``, ``.history``).

    Raises:
        tmlib.training.rundir.RunFolderError: ``out_dir`` is not a run folder and holds other files, is the
            current folder, cannot be created, or another run holds it (:func:`~tmlib.training.rundir.hold_run_folder`);
            or (``resume``) its config.json or history.json is not the checkpoint's own
            (:func:`~tmlib.training.rundir.check_run_files`).
        FileExistsError: ``out_dir`` already holds a checkpoint and ``resume`` is False.
        FileNotFoundError: ``resume`` is True but ``out_dir`` holds no checkpoint (a mistyped folder would
            otherwise silently start a new run).
        ValueError: ``config`` has no budget, or ``data`` does not match ``config`` or the stored tokenizer.
        tmlib.training.distributed.WorldSizeMismatch: (a ``ValueError``) ``resume`` with another number of processes
            than the run was started with.
        tmlib.data.DataError: Multi30k is missing or corrupt (the message says how to get it).
        tmlib.training.config.ConfigError: the data does not fit ``config`` (too long for the model, an epoch
            shorter than one step); found before any training step.
        tmlib.training.stops.Diverged: (a ``FloatingPointError``) the training diverged; nothing diverged
            was saved.
        tmlib.training.stops.Interrupted: (a ``KeyboardInterrupt``) after saving, on Ctrl-C or SIGTERM.

    With several processes (an initialised process group) every process calls it: rank 0 trains the tokenizer
    and sends it to the others (unless resuming: the stored one), and only rank 0 writes into ``out_dir`` (and
    holds its lock while the run lives).
    """
    out = Path(out_dir) if out_dir is not None else None
    with hold_run_folder(out):
        return _train_in(config, out, resume, data, data_dir)


def _train_in(config: TrainConfig, out: Path | None, resume: bool, data, data_dir) -> Trainer:
    """:func:`run_training`, once the run folder ``out`` is held."""
    from tmlib.data.tokenizer import BPETokenizer
    from tmlib.utils import seed_everything

    ckpt = out / CHECKPOINT_NAME if out is not None else None
    state = None
    if resume:
        if ckpt is None or not ckpt.is_file():
            raise FileNotFoundError(f"there is no checkpoint to resume in {out} ({CHECKPOINT_NAME} is missing): "
                                    "check the run folder, or start a new run without resuming")
        state = load_checkpoint(ckpt)
        check_run_files(out, state)  # a user's config.json or history.json beside a copied checkpoint
        distributed.check_world_size(state["world_size"], distributed.world_size())
        stored = TrainConfig.from_dict(state["config"])
        config = dataclasses.replace(stored, **{k: getattr(config, k) for k in RUNTIME_FIELDS})
    elif ckpt is not None and ckpt.is_file():
        raise FileExistsError(f"{ckpt} exists: resume that run (resume=True, --resume), choose another output "
                              "folder, or delete it to start over")
    if not config.has_budget():
        raise ValueError("give at least one budget: max_steps, max_epochs or max_minutes")
    seed_everything(config.seed)
    stored_tokenizer = BPETokenizer.from_json(state["tokenizer"]) if state is not None else None
    if data is None and stored_tokenizer is None:  # one tokenizer for all processes: trained once, sent to the others
        data = TranslationData.prepare(config, data_dir) if distributed.rank() == 0 else None
        tokenizer_json = distributed.broadcast_from_rank0(data.tokenizer.to_json() if data is not None else None)
        if data is None:
            data = TranslationData.prepare(config, data_dir, BPETokenizer.from_json(tokenizer_json))
    elif data is None:
        data = TranslationData.prepare(config, data_dir, stored_tokenizer)
    else:
        data.check_matches(config)
        if stored_tokenizer is not None and data.tokenizer.to_json() != stored_tokenizer.to_json():
            raise ValueError(f"the tokenizer passed in differs from the one stored in {ckpt}")
    if state is not None:
        model_config = _model_config(state)
    else:
        model_config = dataclasses.replace(config.model, vocab_size=data.tokenizer.vocab_size, tgt_vocab_size=None,
                                           pad_id=data.tokenizer.pad_id)
    config = dataclasses.replace(config, model=model_config)
    model = make_model(model_config)
    trainer = Trainer(model, data.train_batches, data.val_batches, config, data.tokenizer, ckpt)
    if state is not None:
        trainer.load_state_dict(state)
        trainer.finished = False
    if out is not None and distributed.rank() == 0:
        out.mkdir(parents=True, exist_ok=True)
        data.tokenizer.save(out / "tokenizer.json")
        with atomic_write(out / "config.json") as tmp:
            tmp.write_text(json.dumps(config.to_dict(), indent=1))
    trainer.fit()
    return trainer


def load_trained(path: str | os.PathLike, device=None) -> TrainedModel:
    """Rebuild a trained model from a checkpoint (a run folder or its ``checkpoint.pt``).

    Args:
        path: ``<out_dir>`` or ``<out_dir>/checkpoint.pt`` written by :func:`run_training` or
            ``python -m tmlib.train``.
        device: where to put the model (default: :func:`tmlib.utils.get_device`).

    Returns:
        :class:`TrainedModel` with the model in eval mode.

    Raises:
        FileNotFoundError: no checkpoint there.
        tmlib.training.checkpoint.CheckpointError: the file is not a readable tmlib checkpoint.
    """
    from tmlib.data.tokenizer import BPETokenizer
    from tmlib.utils import get_device

    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    device = get_device() if device is None else torch.device(device)
    state = load_checkpoint(path)
    try:
        model = make_model(_model_config(state))
        best = state["best"]
        if best is not None:  # keep_best: the weights with the lowest validation NLL
            weights = best["model"]
        elif state["ema"] is not None:  # the moving average of the weights is what the run evaluates with
            weights = {k.removeprefix("module."): v for k, v in state["ema"].items() if k.startswith("module.")}
        else:
            weights = state["model"]
        model.load_state_dict(weights)
        trained = TrainedModel(model=model, tokenizer=BPETokenizer.from_json(state["tokenizer"]),
                               history=state["history"], config=TrainConfig.from_dict(state["config"]),
                               step=state["step"], epoch=state["epoch"], elapsed_s=state["elapsed_s"],
                               finished=bool(state["finished"]), loaded=True, path=path,
                               torch_version=state["torch_version"], machine=state["machine"],
                               best_step=best["step"] if best is not None else None,
                               precision=state.get("precision"), dropout_choice=state.get("dropout_choice"))
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path} does not hold a model this version of tmlib can rebuild ({err})") from err
    model.to(device).eval()
    return trained


def load_or_train(out_dir: str | os.PathLike, config: TrainConfig, data: TranslationData | None = None,
                  data_dir=None, device=None) -> TrainedModel:
    """Load the finished run in ``out_dir`` if there is one, otherwise train it (an unfinished one is resumed).

    Args:
        out_dir: run folder (``checkpoint.pt`` inside).
        config: used when training (ignored when a finished checkpoint is loaded).
        data: the tokenizer and batches to train on (see :func:`run_training`); when a finished run is
            loaded, its tokenizer must equal ``data.tokenizer``.
        data_dir: where Multi30k is.
        device: where to put the model (default: :func:`tmlib.utils.get_device`).

    Returns:
        :class:`TrainedModel`; ``loaded`` is True if the model came from disk without training.

    Raises:
        ValueError: ``data``'s tokenizer differs from the finished run's.
        and what :func:`run_training` raises.
    """
    ckpt = Path(out_dir) / CHECKPOINT_NAME
    if ckpt.is_file() and load_checkpoint(ckpt)["finished"]:
        result = load_trained(ckpt, device)
        if data is not None and data.tokenizer.to_json() != result.tokenizer.to_json():
            raise ValueError(f"the tokenizer passed in differs from the one of the finished run in {out_dir}")
        return result
    run_training(config, out_dir, resume=ckpt.is_file(), data=data, data_dir=data_dir)
    result = load_trained(ckpt, device)
    result.loaded = False
    return result
