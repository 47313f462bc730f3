"""Command line: train the Multi30k German→English translator of chapter 9.

    python -m tmlib.train                                   # the recommended CPU run: 15 minutes, the chapters' run
    python -m tmlib.train --preset base --max-minutes 600 --device cuda --out runs/base
    python -m tmlib.train --out runs/multi30k --resume --max-minutes 30    # continue the same run
    torchrun --nproc_per_node=4 -m tmlib.train --preset base --accumulate 2 --max-tokens 3125 --out runs/ddp

Under ``torchrun`` (one node or several: ``--nnodes``, ``--node_rank``, ``--rdzv_backend c10d``,
``--rdzv_endpoint host:port``) the same program trains with data parallelism (:mod:`tmlib.training.distributed`):
each process uses the GPU ``cuda:LOCAL_RANK`` (NCCL) or the CPU (gloo), trains on its share of every step's
batches (a step holds about ``max_tokens × accumulate × processes`` padded tokens), and rank 0 alone shows the
progress bar and writes the run folder, which must be on a file system every node sees for ``--resume``. A
run continues only on as many processes as it started with.

Every option comes from a configuration dataclass, through ``simple_parsing``: one per field of
:class:`tmlib.training.config.TrainConfig`, and one per field of its model, :class:`tmlib.model.config.ModelConfig`,
whose command-line help is written here (:data:`MODEL_HELP`: the model's configuration carries no command-line
metadata). ``--preset NAME`` chooses the model of :data:`tmlib.model.config.PRESETS` exactly; the recipe options
keep the recommended values (:data:`tmlib.training.experiment.RECOMMENDED`) unless given.

Every argument is checked before any work; a user error prints one ``error: ...`` line and exits with
status 2 (a missing or corrupt data set too: the message says how to get it). A few checks need the prepared
data (the tokenized sentences must fit ``--max-len``, an epoch must hold one optimizer step); they also exit
with status 2, before the first step and before anything is written. The sizes of a new run have lower bounds
that Multi30k sets whatever the vocabulary (:data:`MIN_VOCAB_SIZE`, :data:`MIN_MAX_LEN`,
:data:`MIN_SENTENCE_LEN`): ``--vocab-size`` at least 105, ``--max-len`` from 37 to 65,536,
``--max-sentence-len`` at least 5; ``--threads`` and ``--num-workers`` at most the machine's CPUs.

Ctrl-C (SIGINT) or SIGTERM (what ``kill``, job schedulers and ``torchrun`` send) finishes the current step,
writes a checkpoint and exits with status 130 (Ctrl-C) or 143 (SIGTERM), 128 + the signal's number;
``--resume`` continues exactly. A signal before the first step (while the data is prepared) exits the same way
and says that nothing was saved. A loss or weight that becomes NaN or infinite stops the run with status 1:
nothing diverged is saved, so the last checkpoint stays the last good one. Other failures (a full disk, out of
memory) exit with status 1 and one ``error: ...`` line too; the previous checkpoint is intact.

Writes into ``--out``: ``checkpoint.pt`` (model, optimizer, scheduler, position, RNG states, tokenizer,
configuration, history; atomic), ``history.json``, ``tokenizer.json``, ``config.json`` and ``.tmlib-run``, the
folder's marker and lock (:mod:`tmlib.training.rundir`): a folder that holds other files, or the current
folder, is refused unless it is a run folder, and a second run into a folder in use stops with status 2.
Translate with ``python -m tmlib.translate --checkpoint OUT``.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import signal
import sys
import textwrap
import typing
from pathlib import Path

from tmlib.data.multi30k import MULTI30K_SIZES
from tmlib.model.config import MAX_POSITIONS, PRESETS, ModelConfig, get_preset
from tmlib.training.checkpoint import CHECKPOINT_NAME, CheckpointError
from tmlib.training.experiment import RECOMMENDED, default_run, resume_config
from tmlib.training.config import RUNTIME_FIELDS, TrainConfig
from tmlib.training.rundir import RunFolderError, check_run_folder
from tmlib.validation import parse_optional, parse_optional_bool

__all__ = ["main", "build_parser", "parse_config", "UsageError", "RECOMMENDED", "MODEL_HELP", "MIN_VOCAB_SIZE",
           "MIN_MAX_LEN", "MIN_SENTENCE_LEN"]

# The bounds of a new run's sizes. Multi30k's files are checked by their sha256, so these facts about them hold:
#: Multi30k's training text has 101 distinct characters (after NFKC normalisation), which a BPE vocabulary always
#: holds, beside the 4 special tokens: a smaller ``--vocab-size`` cannot be honoured.
MIN_VOCAB_SIZE = 105
#: The longest Multi30k validation sentence has 37 words and punctuation marks, and a tokenizer makes at least one
#: token of each: a model with a smaller ``--max-len`` cannot be validated, whatever the vocabulary.
MIN_MAX_LEN = 37
#: The shortest Multi30k training pair needs 5 tokens (its target with ``<eos>``), whatever the vocabulary: a
#: smaller ``--max-sentence-len`` keeps no pair.
MIN_SENTENCE_LEN = 5

#: The help of the model's options, one per field of :class:`~tmlib.model.config.ModelConfig`.
MODEL_HELP = {
    "d_model": "model width d_model (paper: 512 base, 1024 big)",
    "n_heads": "attention heads h; must divide d_model",
    "n_encoder_layers": "encoder layers N (paper: 6)",
    "n_decoder_layers": "decoder layers N (paper: 6)",
    "d_ff": "inner width of the feed-forward network (paper: 2048 base, 4096 big)",
    "dropout": "P_drop, on every sub-layer output, the embeddings and the attention weights (paper: 0.1 base)",
    "max_len": "longest sequence the model accepts, in tokens (rows of the positional-encoding table; a new run: "
               f"{MIN_MAX_LEN} to {MAX_POSITIONS:,}, and at least the longest tokenized sentence)",
    "norm_first": "False: post-LN as in the paper; True: pre-LN (the modern layout)",
    "vocab_size": "(source) vocabulary size V; the paper's EN-DE model shares about 37,000 BPE tokens (a new run: "
                  f"at least {MIN_VOCAB_SIZE}, the special tokens and Multi30k's characters)",
    "tgt_vocab_size": "target vocabulary size; none: the same as vocab_size (one shared vocabulary)",
    "pad_id": "id of the padding token (masked in the source, ignored by the loss); none: no padding",
    "tie_embeddings": "share one matrix between both embeddings and the pre-softmax layer (paper §3.4); none: tie "
                      "when the two vocabularies are the same",
    "norm": "normalization: layer (LayerNorm, the paper) or rms (RMSNorm, Zhang & Sennrich 2019)",
    "ffn": "feed-forward: relu (the paper, §3.3) or swiglu (Shazeer 2020; inner width d_ff, e.g. 2/3 of the ReLU "
           "one for the same parameters)",
    "positions": "positions: sinusoidal (added to the embeddings, §3.5), rope (rotary, Su et al. 2021), alibi "
                 "(linear biases, Press et al. 2022) in every self-attention, or none",
    "n_kv_heads": "key/value heads of the self-attentions (grouped-query attention, Ainslie et al. 2023; 1 = "
                  "multi-query); none: n_heads",
    "bias": "biases in the attention and feed-forward linear layers (Llama has none)",
}


class UsageError(Exception):
    """A user error on the command line: printed as one ``error: ...`` line, exit status 2."""


def _fail(message: str):
    raise UsageError(message)


def _presets_help() -> str:
    import torch

    from tmlib.model.transformer import count_parameters, make_model

    lines = []
    for name, cfg in PRESETS.items():
        with torch.device("meta"):
            n = count_parameters(make_model(cfg))
        lines.append(f"{name} ({cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers, d_model {cfg.d_model}, "
                     f"{n / 1e6:.1f}M parameters with V={cfg.vocab_size})")
    return "; ".join(lines)


def _model_options(default: ModelConfig) -> type:
    """A dataclass for ``simple_parsing`` with the fields of :class:`~tmlib.model.config.ModelConfig` (same names,
    types and order), defaulting to ``default``, with the help of :data:`MODEL_HELP`; optional values (``int |
    None``, ``bool | None``) accept ``none``."""
    hints = typing.get_type_hints(ModelConfig)

    def option(field: dataclasses.Field) -> tuple:
        custom = {}
        kinds = typing.get_args(hints[field.name])
        if type(None) in kinds:
            kind = next(k for k in kinds if k is not type(None))
            custom["type"] = parse_optional_bool if kind is bool else parse_optional(kind)
        metadata = {"help": MODEL_HELP[field.name], "custom_args": custom}
        return field.name, hints[field.name], dataclasses.field(default=getattr(default, field.name), metadata=metadata)

    options = dataclasses.make_dataclass("ModelConfig", [option(f) for f in dataclasses.fields(ModelConfig)])
    options.__doc__ = "the model (paper Table 3 hyper-parameters, vocabulary size and padding id)"
    return options


def _recipe_options(default: TrainConfig) -> type:
    """:class:`~tmlib.training.config.TrainConfig` for ``simple_parsing``, without options for its ``model``
    (:func:`_model_options` gives those)."""

    @dataclasses.dataclass(frozen=True)
    class Options(TrainConfig):
        __doc__ = TrainConfig.__doc__
        model: ModelConfig = dataclasses.field(default=default.model, metadata={"cmd": False})

    Options.__qualname__ = Options.__name__ = "TrainConfig"
    return Options


def _default_out() -> str:
    """The run folder that chapters 9, 11 and 14 load (:func:`tmlib.training.experiment.default_run`):
    ``runs/multi30k`` of the course's checkout wherever the command starts, or ``$TMLIB_RUN_DIR``."""
    return str(default_run(smoke=False)[0])


#: The help's sections for the two configuration dataclasses (simple_parsing would title them
#: "TrainConfig ['config']" and "ModelConfig ['model']", under the classes' whole docstrings).
SECTIONS = {
    "TrainConfig ['config']": ("training recipe", "The paper's recipe (§5), the budgets and the runtime settings. A "
                               "resumed run keeps its recipe; budgets, device, precision, threads and logging may "
                               "change."),
    "ModelConfig ['model']": ("model", "The architecture (the paper's Table 3 sizes, vocabulary, padding) and the "
                              "variants of chapter 13. A resumed run keeps its model."),
}


def plain_text(text: str) -> str:
    """``text`` without reStructuredText markup: ``code`` → code, :class:`~a.B` → B, :data:`X` → X."""
    text = re.sub(r":[a-z]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`", lambda m: m.group(1).split(".")[-1] if "~" in m.group(0)
                  else m.group(1), text)
    return re.sub(r"``([^`]*)``", r"\1", text)


def _help_formatter():
    """simple_parsing's help formatter with one default per option (none where the help states it, none for an
    option without one), plain text instead of reST markup, and the :data:`SECTIONS` titles."""
    from simple_parsing.help_formatter import SimpleHelpFormatter

    class HelpFormatter(SimpleHelpFormatter):
        _next_description = None

        def start_section(self, heading):
            title, self._next_description = SECTIONS.get(heading, (heading, None))
            super().start_section(title)

        def add_text(self, text):
            if self._next_description is not None:
                text, self._next_description = self._next_description, None
            if text and "\n" not in text:  # one paragraph: wrapped to the terminal (the raw formatter would not)
                text = textwrap.fill(plain_text(text), self._width)
            super().add_text(text)

        def _get_help_string(self, action):
            text = plain_text(action.help or "")
            if ("(default" in text or "%(default)" in text or not action.option_strings
                    or action.default in (None, argparse.SUPPRESS) or action.nargs == 0):  # (a flag: --resume)
                return text
            return text + " (default: %(default)s)"

    return HelpFormatter


def build_parser(default: TrainConfig = RECOMMENDED) -> argparse.ArgumentParser:
    """The argument parser, whose configuration options default to ``default``.

    Run options: ``--out``, ``--resume``, ``--data-dir``, ``--preset``. Configuration options: one per field
    of :class:`~tmlib.training.config.TrainConfig` (into ``args.config``, its ``model`` left at the default) and
    of :class:`~tmlib.model.config.ModelConfig` (into ``args.model``), e.g. ``--max-minutes``, ``--lr-factor``,
    ``--d-model``, ``--n-encoder-layers``; optional values accept ``none`` (``--grad-clip none``: no clipping).
    """
    from simple_parsing import ArgumentParser, DashVariant

    class Parser(ArgumentParser):
        def error(self, message):  # one line instead of argparse's usage block
            raise UsageError(f"{message} (see python -m tmlib.train --help)")

    p = Parser(
        prog="python -m tmlib.train", add_option_string_dash_variants=DashVariant.DASH, add_config_path_arg=False,
        formatter_class=_help_formatter(),
        allow_abbrev=False,  # --lr is not --lr-factor
        description="Train a Transformer (Vaswani et al. 2017) on Multi30k German→English with the paper's recipe: "
                    "Adam (0.9, 0.98, 1e-9), warm-up then inverse-square-root learning rate, label smoothing 0.1, "
                    "token-count batches. Stops at the first budget reached (default: 15 minutes).",
        epilog=f"Presets: {_presets_help()}. Data: TMLIB_DATA_DIR (or --data-dir) names a folder holding "
               "multi30k/*.gz; otherwise the files are downloaded to the user cache. Exit status: 0 done, 1 failed "
               "(diverged, disk full, out of memory; the last checkpoint is intact), 2 user error (nothing done), "
               "130 Ctrl-C, 143 SIGTERM (128 + the signal; the checkpoint is saved first).")
    run = p.add_argument_group("run")
    run.add_argument("--out", default=_default_out(), metavar="DIR",
                     help="run folder (checkpoint.pt, history.json, tokenizer.json): new, empty or a run folder; one "
                          "run at a time")
    run.add_argument("--resume", action="store_true",
                     help="continue the run in --out exactly (its model, recipe and data are kept; budgets, device, "
                          "precision, threads and logging may change)")
    run.add_argument("--data-dir", default=None, metavar="DIR",
                     help="folder holding multi30k/*.gz (default: $TMLIB_DATA_DIR, else the user cache)")
    run.add_argument("--preset", default=None, choices=sorted(PRESETS),
                     help="the model: a preset of tmlib.model.config.PRESETS exactly (default: cpu); model options "
                          "given with it override its fields")
    p.add_arguments(_recipe_options(default), dest="config", default=default)
    p.add_arguments(_model_options(default.model), dest="model")
    return p


def parse_config(argv=None) -> tuple[TrainConfig, argparse.Namespace]:
    """Parse and check the command line; no data is read and nothing is written.

    Returns:
        ``(config, args)``: the :class:`~tmlib.training.config.TrainConfig` to train with and the run options.

    Raises:
        UsageError: any invalid argument, a run folder that exists without ``--resume`` or is missing with it,
            a checkpoint that cannot be read, an ``--out`` that is not a run folder and holds other files (or
            is the current folder), an attempt to change a non-runtime setting of a resumed run, sizes of a new
            run outside the bounds Multi30k sets (:func:`_check_sizes`), or no budget.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--out", default=_default_out())
    pre.add_argument("--resume", action="store_true")
    pre.add_argument("--preset", default=None)
    known, _ = pre.parse_known_args(argv)
    try:
        check_run_folder(known.out)
    except RunFolderError as err:
        _fail(str(err))
    stored = None
    if known.resume:
        if known.preset is not None:
            _fail("--preset cannot be combined with --resume: a resumed run keeps its model")
        try:
            stored = resume_config(known.out)
        except (FileNotFoundError, CheckpointError, RunFolderError) as err:
            _fail(str(err))
        default = stored
    elif known.preset is not None:
        try:
            default = dataclasses.replace(RECOMMENDED, model=get_preset(known.preset))
        except ValueError as err:
            _fail(str(err))
    else:
        default = RECOMMENDED
    try:
        args = build_parser(default).parse_args(argv)
        model = ModelConfig(**dataclasses.asdict(args.model))
        config = TrainConfig(**{f.name: getattr(args.config, f.name) for f in dataclasses.fields(TrainConfig)
                                if f.name != "model"}, model=model)
    except ValueError as err:  # raised by the dataclasses' own checks (__post_init__): name the option
        _fail(re.sub(r"^([a-z_]+) (must|is|has)", lambda m: f"--{m.group(1).replace('_', '-')} {m.group(2)}",
                     str(err)))
    if stored is not None:
        changed = _changed_fields(stored, config)
        if changed:
            _fail("a resumed run keeps its model, data and recipe; cannot change " + "; ".join(changed))
    else:
        _check_sizes(config)
    if not config.has_budget():
        _fail("give at least one budget: --max-minutes, --max-steps or --max-epochs")
    ckpt = Path(args.out) / CHECKPOINT_NAME
    if not args.resume and ckpt.exists():
        _fail(f"{args.out} already holds a run: continue it with --resume, or choose another --out")
    return config, args


def _changed_fields(stored: TrainConfig, config: TrainConfig) -> list[str]:
    """The non-runtime settings in which ``config`` differs from the resumed run's ``stored`` one, each as
    ``"--option (the run has A, the command line gives B)"``; the model's fields one by one."""
    pairs = [(f.name, getattr(stored, f.name), getattr(config, f.name)) for f in dataclasses.fields(TrainConfig)
             if f.name not in RUNTIME_FIELDS and f.name != "model"]
    pairs += [(f.name, getattr(stored.model, f.name), getattr(config.model, f.name))
              for f in dataclasses.fields(ModelConfig)]
    return [f"--{name.replace('_', '-')} (the run has {old!r}, the command line gives {new!r})"
            for name, old, new in pairs if old != new]


def _check_sizes(config: TrainConfig) -> None:
    """The bounds that Multi30k sets on a new run's sizes, whatever the vocabulary (:data:`MIN_VOCAB_SIZE`,
    :data:`MIN_MAX_LEN`, :data:`MAX_POSITIONS`, :data:`MIN_SENTENCE_LEN`). A resumed run keeps the sizes it has."""
    m = config.model
    if m.vocab_size < MIN_VOCAB_SIZE:
        _fail(f"--vocab-size must be >= {MIN_VOCAB_SIZE}, got {m.vocab_size}: a BPE vocabulary of Multi30k holds its "
              "101 characters and the 4 special tokens")
    if m.max_len < MIN_MAX_LEN:
        _fail(f"--max-len must be >= {MIN_MAX_LEN}, got {m.max_len}: the longest Multi30k validation sentence has "
              f"{MIN_MAX_LEN} words and punctuation marks, each at least one token")
    if m.max_len > MAX_POSITIONS:
        _fail(f"--max-len must be <= {MAX_POSITIONS}, got {m.max_len}: Multi30k's longest sentence has about 200 tokens, "
              "and a longer positional table only takes memory")
    if config.max_sentence_len < MIN_SENTENCE_LEN:
        _fail(f"--max-sentence-len must be >= {MIN_SENTENCE_LEN}, got {config.max_sentence_len}: the shortest "
              f"Multi30k training pair needs {MIN_SENTENCE_LEN} tokens, so a smaller limit keeps none")


def _cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _check_environment(config: TrainConfig, data_dir, env) -> None:
    """Checks that need the machine or the data, still before any work: the ``torchrun`` environment, device,
    precision, threads and data-loader workers (at most this machine's CPUs: more threads than cores only slow
    torch down, and an absurd number crashes it), the batches of a step, the data files."""
    from tmlib.training import distributed
    from tmlib.training.precision import resolve_precision

    try:
        device = distributed.local_device(config.device, env)
        resolve_precision(config.amp, device)
    except ValueError as err:
        _fail(str(err))
    cpus = _cpus()
    for name, value in (("threads", config.threads), ("num_workers", config.num_workers)):
        if value is not None and value > cpus:
            _fail(f"--{name.replace('_', '-')} must be <= {cpus} (the CPUs of this machine), got {value}")
    processes = env.world_size if env is not None else 1
    if config.accumulate * processes > MULTI30K_SIZES["train"]:
        _fail(f"--accumulate {config.accumulate} × {processes} process(es) asks for more batches per step than "
              f"Multi30k's {MULTI30K_SIZES['train']:,} training pairs can make: lower --accumulate")
    from tmlib import data

    try:
        if hasattr(data, "check_multi30k"):
            data.check_multi30k(data_dir)
        else:
            for split in ("train", "val"):
                data.load_multi30k(split, data_dir)
    except data.DataError as err:
        _fail(str(err))


def _as_options(message: str) -> str:
    """``message`` with the configuration's field names (``max_len``) written as options (``--max-len``)."""
    names = {f.name for f in dataclasses.fields(TrainConfig) + dataclasses.fields(ModelConfig)} - {"model"}
    return re.sub(r"\b[a-z]+(?:_[a-z]+)*\b", lambda m: f"--{m.group(0).replace('_', '-')}" if m.group(0) in names
                  else m.group(0), message)


def _count(n: float, unit: str) -> str:
    """``n`` and ``unit`` (singular) in words: ``"1 epoch"``, ``"2 epochs"``, ``"0.5 minutes"``."""
    return f"{n:g} {unit}{'' if n == 1 else 's'}"


def _budget(config: TrainConfig) -> str:
    """The run's budgets in words: ``"15 minutes"``, ``"30 steps or 1 epoch"``."""
    parts = [_count(n, unit) for n, unit in ((config.max_minutes, "minute"), (config.max_steps, "step"),
                                             (config.max_epochs, "epoch")) if n is not None]
    return " or ".join(parts) + (", whichever comes first" if len(parts) > 1 else "")


def _first_line(config: TrainConfig, args) -> str:
    """The line printed at once, before the seconds of data preparation: what runs, where, for how long."""
    what = f"continuing the run in {args.out}" if args.resume else f"a new run in {args.out}"
    return (f"tmlib.train: {what}, training for {_budget(config)}{' in total' if args.resume else ''}; first "
            "loading Multi30k and "
            f"{'reading the stored' if args.resume else 'training the'} BPE tokenizer (about 10 seconds)")


def main(argv=None) -> int:
    """Entry point of ``python -m tmlib.train``; returns the exit status: 0 done, 1 failure (diverged, a
    checkpoint that cannot be written, out of memory; the last checkpoint is intact), 2 user error (before any
    training step, nothing written), 130 Ctrl-C, 143 SIGTERM (128 + the signal's number; the checkpoint is saved
    first). Under ``torchrun`` every process runs it inside :func:`tmlib.training.distributed.process_group`;
    errors are printed by every process (prefixed with its rank), the other messages by rank 0."""
    from tmlib.data.multi30k import DataError
    from tmlib.training import distributed
    from tmlib.training.stops import sigterm_interrupts
    from tmlib.training.config import ConfigError
    from tmlib.training.outcome import (describe_divergence, describe_interruption, describe_out_of_memory,
                                        is_out_of_memory)
    from tmlib.training.stops import Diverged

    try:
        env = distributed.torchrun_env()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    rank = env.rank if env is not None and env.world_size > 1 else None

    def error(message) -> None:
        print(f"error: {message}" if rank is None else f"error: (rank {rank}) {message}", file=sys.stderr)

    try:
        config, args = parse_config(argv)
        _check_environment(config, args.data_dir, env)
    except UsageError as err:
        error(err)
        return 2
    from tmlib.training.experiment import run_training

    if not rank:  # the data takes seconds to prepare before the progress bar appears: say what is happening
        print(_first_line(config, args), flush=True)
    try:
        with sigterm_interrupts(), distributed.process_group(config.device, env):
            trainer = run_training(config, args.out, resume=args.resume, data_dir=args.data_dir)
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: budget.Interrupted, or Python's own during preparation
        if not rank:
            launcher = "python -m tmlib.train" if rank is None else "torchrun ... -m tmlib.train"
            print("\n" + describe_interruption(stop, args.out, launcher), file=sys.stderr)
        return 128 + getattr(stop, "signum", signal.SIGINT)
    except ConfigError as err:
        error(_as_options(str(err)))
        return 2
    except (DataError, distributed.WorldSizeMismatch, RunFolderError) as err:
        error(err)
        return 2
    except Diverged as err:
        error(describe_divergence(err, config, args.out))
        return 1
    except (CheckpointError, FloatingPointError, OSError) as err:
        error(err)
        return 1
    except RuntimeError as err:
        if not is_out_of_memory(err):
            raise
        error(describe_out_of_memory(err, config, args.out))
        return 1
    if rank:
        return 0
    h = trainer.history
    val = f", val loss {h['val_loss'][-1]:.3f} (NLL {h['val_nll'][-1]:.3f})" if h["val_loss"] else ""
    print(f"done: {_count(trainer.step, 'step')}, {_count(trainer.epoch, 'epoch')}, "
          f"{trainer.elapsed_s / 60:.1f} min{val}; "
          f"checkpoint: {trainer.checkpoint_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
