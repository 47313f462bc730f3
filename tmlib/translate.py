"""Translate text with a trained checkpoint, from the command line.

Usage::

    python -m tmlib.translate --checkpoint runs/multi30k --beam-size 4 --input test.de
    echo "Ein Mann fährt Fahrrad." | python -m tmlib.translate --checkpoint runs/multi30k

One input line gives one output line. The checkpoint is the one written by ``python -m tmlib.train``
(:func:`tmlib.training.experiment.load_trained` reads it with ``torch.load(weights_only=True)``: model weights, model
configuration and the BPE tokenizer). Decoding is greedy with ``--beam-size 1``, otherwise beam search with
GNMT's length penalty (the paper, §6.1: beam 4, α = 0.6). When the input is a terminal each line is translated
as soon as it is typed; otherwise the lines are translated in length-sorted batches (``--batch-tokens``) and
printed in their original order. ``--input`` is any readable path that is not a folder: a file, ``/dev/stdin``,
a named pipe.

Input is read as UTF-8; a byte-order mark at the start is ignored. A line that is empty or only whitespace
gives an empty line (a model asked to translate nothing would invent a sentence), and so does a line whose
tokens are all unknown to the vocabulary (another script or language); a line longer than the model's
positional table is cut to its first ``max_len`` tokens. Both get a one-line ``warning: line N ...`` on stderr
(lines counted from 1, as an editor does); ``--quiet`` silences warnings and the progress bar.

Exit status: 0 on success; 2 on a user error, reported as one ``error: ...`` line (arguments out of their
bounds, a missing or unreadable checkpoint or input, input that is not UTF-8, a checkpoint whose configuration
asks for absurd sizes, a model whose weights are not all finite, e.g. after a diverged run); 141 (128 +
SIGPIPE, what the shell reports for ``cat`` or ``yes`` in the same place) when the reader of the output went
away (``... | head -1``), silently: the output was not all delivered, so success would be wrong, but it is no
error to report either; 130 on Ctrl-C.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from tmlib.model.config import MAX_POSITIONS

__all__ = ["build_parser", "main", "read_lines", "read_pieces", "PIECE_BYTES", "MAX_LINE_BYTES", "BEAM_SIZE_MAX", "BATCH_TOKENS_MAX", "LENGTH_PENALTY_MAX",
           "CONFIG_LIMITS", "MAX_MODEL_NUMBERS", "EXIT_BROKEN_PIPE"]

#: Bounds of the command's numeric options (stated in ``--help``): wide enough for any real use, small enough
#: that a typo cannot ask for hours of decoding or gigabytes of memory.
BEAM_SIZE_MAX = 1_000
BATCH_TOKENS_MAX = 100_000
LENGTH_PENALTY_MAX = 5.0  # ((5 + 65,536) / 6) ** 5 ≈ 1.5e20: the penalty stays a finite float
#: Generous upper bounds on the sizes in a checkpoint's model configuration, checked before the model is built:
#: a damaged or forged file could otherwise make the model's constructor allocate gigabytes (``max_len=10**9``
#: asks for an 8 GB table of positions).
CONFIG_LIMITS = {"max_len": MAX_POSITIONS, "d_model": 65_536, "d_ff": 262_144, "n_heads": 1_024, "n_kv_heads": 1_024,
                 "n_encoder_layers": 1_024, "n_decoder_layers": 1_024, "vocab_size": 1_048_576,
                 "tgt_vocab_size": 1_048_576}
#: The most numbers (weights and positional table) a configuration may describe: 2**31, 8 GiB in float32, ten
#: times the paper's big model.
MAX_MODEL_NUMBERS = 2 ** 31
#: The input is read and translated in pieces of whole lines of about this many bytes (memory stays bounded).
PIECE_BYTES = 1 << 20
#: The longest input line read, in bytes: longer ones (``/dev/zero``, a binary file) are an error, not a
#: ``MemoryError``. A line of 1 MiB is already far past the model's positions, which cut it anyway.
MAX_LINE_BYTES = 1 << 20
#: Exit status when the output's reader went away (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser; errors raise ``_UsageError`` (one line) instead of exiting, and options
    must be written in full (``--beam 4`` is an error, not ``--beam-size 4``)."""
    class Parser(argparse.ArgumentParser):
        def error(self, message):  # one line instead of argparse's usage block
            raise _UsageError(f"{message} (see python -m tmlib.translate --help)")

    p = Parser(prog="python -m tmlib.translate", allow_abbrev=False,
               description="Translate lines of German text into English with a trained tmlib checkpoint.",
               epilog="Exit status: 0 success; 2 user error (one 'error:' line); 141 the output's reader closed the "
                      "pipe (e.g. | head); 130 Ctrl-C.")
    p.add_argument("--checkpoint", required=True,
                   help="checkpoint.pt written by `python -m tmlib.train`, or its run folder")
    p.add_argument("--beam-size", type=int, default=4,
                   help=f"1 = greedy decoding; paper: 4 (default); 1 to {BEAM_SIZE_MAX:,}")
    p.add_argument("--length-penalty", type=float, default=0.6,
                   help=f"GNMT alpha for beam search (default 0.6); 0 to {LENGTH_PENALTY_MAX:g}")
    p.add_argument("--max-len", type=int, default=None,
                   help="most output tokens per sentence (default: source length + 50, paper §6.1); 1 to the "
                        f"model's max_len (at most {MAX_POSITIONS:,})")
    p.add_argument("--input", default="-", help="a UTF-8 text file with one sentence per line, or any readable "
                                                "path that is not a folder, e.g. a named pipe (default: stdin)")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    p.add_argument("--batch-tokens", type=int, default=4000,
                   help=f"source tokens per batch, beams included (default 4000); 1 to {BATCH_TOKENS_MAX:,}")
    p.add_argument("--quiet", action="store_true", help="no progress bar or warnings on stderr")
    return p


def read_pieces(stream, name: str, piece_bytes: int | None = None, max_line_bytes: int | None = None):
    """Read a binary stream in pieces of whole lines, about ``piece_bytes`` each (default :data:`PIECE_BYTES`), so
    that memory stays bounded whatever the input's size (a 3 GB file, ``/dev/zero``); yields ``(number of the first
    line, lines)``. ``max_line_bytes``: default :data:`MAX_LINE_BYTES`.

    Raises:
        ValueError: a line longer than ``max_line_bytes`` (binary data, or text without line ends; the message
            names the line), bytes that are not UTF-8 (:func:`read_lines`), or the stream cannot be read.
    """
    piece_bytes = PIECE_BYTES if piece_bytes is None else piece_bytes
    max_line_bytes = MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    first, number, piece, size, offset = 1, 0, [], 0, 0
    while True:
        try:
            raw = stream.readline(max_line_bytes + 1)
        except OSError as err:
            raise ValueError(f"cannot read {name}: {err.strerror or err}") from err
        if not raw:
            break
        number += 1
        if len(raw.rstrip(b"\r\n")) > max_line_bytes:
            raise ValueError(f"line {number} of {name} is longer than {max_line_bytes:,} bytes (is it text, with one "
                             "sentence per line?)")
        piece.append(raw)
        size += len(raw)
        if size >= piece_bytes:
            yield first, read_lines(b"".join(piece), name, first=first, offset=offset)
            first, piece, offset, size = number + 1, [], offset + size, 0
    if piece or first == 1:
        yield first, read_lines(b"".join(piece), name, first=first, offset=offset)


def read_lines(data: bytes, name: str, first: int = 1, offset: int = 0) -> list[str]:
    """Decode UTF-8 input into lines (without their line ends), ignoring a leading byte-order mark. ``first`` and
    ``offset``: the number of the first line and the byte offset of ``data`` in the input (for the message).

    Raises:
        ValueError: the bytes are not UTF-8; the message names the line and the byte offset.
    """
    try:
        text = data.decode("utf-8-sig" if offset == 0 else "utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + first
        raise ValueError(f"{name} is not valid UTF-8 (line {line}, byte {offset + err.start}: {data[err.start:err.start + 1]!r});"
                         " convert it, e.g. with `iconv -f latin1 -t utf-8`") from err
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final line end
    return [line.rstrip("\r") for line in lines]


def _check_args(args) -> None:
    """Every argument within its bounds, the input readable and the checkpoint present, before any work."""
    from tmlib.validation import check_float, check_int, missing_path_reason

    try:
        check_int(args.beam_size, "--beam-size", minimum=1, maximum=BEAM_SIZE_MAX)
        check_int(args.max_len, "--max-len", minimum=1, maximum=MAX_POSITIONS, allow_none=True)
        check_int(args.batch_tokens, "--batch-tokens", minimum=1, maximum=BATCH_TOKENS_MAX)
        check_float(args.length_penalty, "--length-penalty", minimum=0.0, maximum=LENGTH_PENALTY_MAX)
    except (TypeError, ValueError) as err:
        raise _UsageError(str(err)) from None
    if args.input != "-":
        path = Path(args.input)
        if path.is_dir():
            raise _UsageError(f"--input {args.input} is a folder, not a text file")
        if missing_path_reason(path):
            raise _UsageError(f"--input {args.input} {missing_path_reason(path)}")
        if not os.access(path, os.R_OK):
            raise _UsageError(f"--input {args.input} cannot be read (permission denied)")
    ckpt = Path(args.checkpoint)
    if missing_path_reason(ckpt) not in (None, "does not exist"):
        raise _UsageError(f"--checkpoint {ckpt} {missing_path_reason(ckpt)}")
    if not ckpt.exists():
        raise _UsageError(f"no checkpoint at {ckpt}: train one with `python -m tmlib.train --out DIR`")


def _stored_model_configs(state: dict) -> list[dict]:
    """The dicts of model sizes a checkpoint holds: its ``model_config`` (with the ``overrides`` of the older
    layout) and its training configuration's ``model``."""
    model_config = state.get("model_config")
    found = [model_config, model_config.get("overrides") if isinstance(model_config, dict) else None,
             (state.get("config") or {}).get("model") if isinstance(state.get("config"), dict) else None]
    return [d for d in found if isinstance(d, dict)]


def _model_numbers(config: dict) -> int | None:
    """About how many numbers the model of ``config`` holds: the embedding, each layer's attention and
    feed-forward matrices, and a positional table of ``max_len × d_model`` (None when a size is missing)."""
    sizes = [config.get(name) for name in ("d_model", "d_ff", "n_encoder_layers", "n_decoder_layers", "max_len",
                                           "vocab_size")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in sizes):
        return None
    d, d_ff, n_enc, n_dec, max_len, vocab = sizes
    tgt_vocab = config.get("tgt_vocab_size") if isinstance(config.get("tgt_vocab_size"), int) else vocab
    return d * max(vocab, tgt_vocab) + (n_enc + n_dec) * 2 * d * (d + d_ff) + max_len * d


def _check_stored_config(checkpoint: str) -> None:
    """Refuse a checkpoint whose model configuration asks for absurd sizes, before the model is built.

    The checkpoint is read with its tensors on the meta device (their data is not read), so this costs little.

    Raises:
        FileNotFoundError, CheckpointError: no checkpoint, an unreadable one, or sizes above
            :data:`CONFIG_LIMITS` or :data:`MAX_MODEL_NUMBERS` (the message names the field and the bound).
    """
    from tmlib.training.checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint

    path = Path(checkpoint)
    path = path / CHECKPOINT_NAME if path.is_dir() else path
    damaged = "the file is damaged or was not written by tmlib"
    for config in _stored_model_configs(load_checkpoint(path, map_location="meta")):
        for name, limit in CONFIG_LIMITS.items():
            value = config.get(name)
            if isinstance(value, int) and value > limit:
                raise CheckpointError(f"{path} configures a model with {name}={value}, more than the {limit:,} "
                                      f"this command accepts; {damaged}")
        numbers = _model_numbers(config)
        if numbers is not None and numbers > MAX_MODEL_NUMBERS:
            raise CheckpointError(f"{path} configures a model of about {numbers:.2g} numbers, more than the "
                                  f"{MAX_MODEL_NUMBERS:,} (8 GiB) this command builds; {damaged}")


def _usable_device(device, name: str):
    """``device`` if a tensor can be put there (``--device mps`` on Linux, ``cuda:3`` on a one-GPU machine cannot).

    Raises:
        ValueError: the device cannot be used; the message gives torch's reason.
    """
    import torch

    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as err:
        reason = (str(err).split(". ")[0].splitlines() or [type(err).__name__])[0][:120]  # torch's first sentence
        raise ValueError(f"--device {name} cannot be used on this machine ({reason}); use cpu or cuda") from err
    return device


def _check_finite(model, path) -> None:
    """Refuse a model whose weights are not all finite (a diverged run decodes to empty or garbage lines).

    Raises:
        ValueError: how many numbers are NaN or infinite, in how many tensors, and the first such tensor.
    """
    import torch

    bad, tensors, first = 0, 0, None
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point():
            n = int((~torch.isfinite(tensor)).sum())
            if n:
                bad, tensors, first = bad + n, tensors + 1, first or name
    if bad:
        raise ValueError(f"the model in {path} has {bad:,} non-finite weights (NaN or inf) in {tensors} tensor(s), "
                         f"the first in {first}; its training probably diverged: use a checkpoint saved before "
                         "that, or train again (e.g. with a lower --lr-factor)")


def _warn(quiet: bool, numbers: list[int], one: str, many: str) -> None:
    """One ``warning:`` line on stderr about the input lines ``numbers`` (counted from 1), unless ``quiet``.
    ``one``/``many`` complete "line 3 ..." and "2 lines (3, 7) ..."."""
    if quiet or not numbers:
        return
    if len(numbers) == 1:
        print(f"warning: line {numbers[0]} {one}", file=sys.stderr)
        return
    shown = ", ".join(map(str, numbers[:10])) + (", ..." if len(numbers) > 10 else "")
    print(f"warning: {len(numbers)} lines ({shown}) {many}", file=sys.stderr)


def _show_warning(quiet: bool):
    """A ``warnings.showwarning`` that prints one plain ``warning: ...`` line (no source line), unless quiet."""
    def show(message, category, filename, lineno, file=None, line=None):
        if not quiet:
            print(f"warning: {str(message).splitlines()[0] if str(message) else category.__name__}", file=sys.stderr)
    return show


def _silence_stdout() -> None:
    """Point the standard output at /dev/null, so that Python's final flush cannot fail on a closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a real file (e.g. captured by a test): nothing is flushed at exit
        pass


def main(argv=None) -> int:
    """Entry point; returns the process exit status: 0 success, 2 user error (one ``error:`` line on stderr),
    141 the output's reader went away (nothing printed), 130 Ctrl-C (nothing printed)."""
    try:
        return _run(argv)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return 130


def _run(argv) -> int:
    """The command: check the arguments, load and check the model, translate the input line by line."""
    try:
        args = build_parser().parse_args(argv)
        _check_args(args)
    except _UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    from tmlib.decoding.corpus import screen_sources, translate_corpus
    from tmlib.training.checkpoint import CheckpointError
    from tmlib.training.experiment import load_trained
    from tmlib.utils import get_device

    try:
        device = _usable_device(get_device(None if args.device == "auto" else args.device), args.device)
        _check_stored_config(args.checkpoint)
        trained = load_trained(args.checkpoint, device=device)
        _check_finite(trained.model, trained.path)
        positions = trained.model.config.max_len
        if args.max_len is not None and args.max_len > positions:
            raise ValueError(f"--max-len {args.max_len} is more than the model's {positions} positions (its max_len)"
                             f"; use at most {positions}")
    except (FileNotFoundError, CheckpointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model, tokenizer = trained.model, trained.tokenizer

    def translate(lines: list[str], first: int, progress: bool) -> list[str]:
        """Translations of ``lines`` (numbered from ``first`` in the input): blank and all-unknown lines give ""
        (with a warning for the latter), over-long lines are cut to the model's positions (with a warning)."""
        out = [""] * len(lines)
        ids = tokenizer.encode_batch(lines) if lines else []
        todo, unknown, long = screen_sources(lines, ids, tokenizer, positions)
        _warn(args.quiet, [first + i for i in unknown], "is made only of characters unknown to the vocabulary "
              "and was not translated (is the input German?)", "are made only of characters unknown to the "
              "vocabulary and were not translated (is the input German?)")
        _warn(args.quiet, [first + i for i in long], f"has more tokens than the model's {positions} positions; only "
              f"its first {positions} tokens were translated", f"have more tokens than the model's {positions} "
              f"positions; only their first {positions} tokens were translated")
        if todo:
            hyps = translate_corpus(model, tokenizer, [lines[i] for i in todo], beam_size=args.beam_size,
                                    batch_tokens=args.batch_tokens, length_penalty=args.length_penalty,
                                    max_len=args.max_len, progress=progress, warn=False)
            for i, hyp in zip(todo, hyps):
                out[i] = hyp
        return out

    with warnings.catch_warnings():
        warnings.showwarning = _show_warning(args.quiet)
        try:
            if args.input == "-" and sys.stdin.isatty():  # interactive: answer each line at once
                for number, raw in enumerate(sys.stdin.buffer, start=1):
                    line = read_lines(raw, "stdin")[0] if raw.strip(b"\r\n") else ""
                    line = line.lstrip("\ufeff") if number == 1 else line
                    print(translate([line], number, progress=False)[0], flush=True)
                return 0
            name = "stdin" if args.input == "-" else args.input
            try:
                stream = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")  # noqa: SIM115
            except OSError as err:
                raise ValueError(f"cannot read {args.input}: {err.strerror or err}") from err
            with stream:
                for first, lines in read_pieces(stream, name):
                    for out in translate(lines, first, progress=not args.quiet):
                        print(out)
                    sys.stdout.flush()  # a closed pipe shows here, not in Python's flush at exit
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
