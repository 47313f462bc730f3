"""Translate text with a trained checkpoint, from the command line.

Usage::

    python -m tmlib.translate --checkpoint runs/multi30k --beam-size 4 --input test.de
    echo "Ein Mann fährt Fahrrad." | python -m tmlib.translate --checkpoint runs/multi30k

One input line gives one output line. The checkpoint is the one written by ``python -m tmlib.train``
(:func:`tmlib.training.experiment.load_trained` reads it with ``torch.load(weights_only=True)``: model weights, model
configuration and the BPE tokenizer). Decoding is greedy with ``--beam-size 1``, otherwise beam search with
GNMT's length penalty (the paper, §6.1: beam 4, α = 0.6). When the input is a terminal each line is translated
as soon as it is typed; otherwise the lines are translated in length-sorted batches (``--batch-tokens``) and
printed in their original order.

Input is read as UTF-8; a byte-order mark at the start is ignored. A line that is empty or only whitespace
gives an empty line (a model asked to translate nothing would invent a sentence), and so does a line whose
tokens are all unknown to the vocabulary (another script or language), with a warning on stderr naming the
lines. Every user error (arguments, a missing or unreadable checkpoint, a missing input file, input that is
not UTF-8) prints one ``error: ...`` line and exits with status 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tmlib.validation import check_float, check_int

__all__ = ["build_parser", "main", "read_lines"]


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    class Parser(argparse.ArgumentParser):
        def error(self, message):  # one line instead of argparse's usage block
            raise _UsageError(f"{message} (see python -m tmlib.translate --help)")

    p = Parser(prog="python -m tmlib.translate", description="Translate lines of German text into English with a "
                                                              "trained tmlib checkpoint.")
    p.add_argument("--checkpoint", required=True,
                   help="checkpoint.pt written by `python -m tmlib.train`, or its run folder")
    p.add_argument("--beam-size", type=int, default=4, help="1 = greedy decoding; paper: 4 (default)")
    p.add_argument("--length-penalty", type=float, default=0.6, help="GNMT alpha for beam search (default 0.6)")
    p.add_argument("--max-len", type=int, default=None,
                   help="most output tokens per sentence (default: source length + 50, paper §6.1)")
    p.add_argument("--input", default="-", help="a UTF-8 text file with one sentence per line (default: stdin)")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    p.add_argument("--batch-tokens", type=int, default=4000, help="source tokens per batch, beams included")
    p.add_argument("--quiet", action="store_true", help="no progress bar or warnings on stderr")
    return p


def read_lines(data: bytes, name: str) -> list[str]:
    """Decode UTF-8 input into lines (without their line ends), ignoring a leading byte-order mark.

    Raises:
        ValueError: the bytes are not UTF-8; the message names the line and the byte offset.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise ValueError(f"{name} is not valid UTF-8 (line {line}, byte {err.start}: {data[err.start:err.start + 1]!r});"
                         " convert it, e.g. with `iconv -f latin1 -t utf-8`") from err
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final line end
    return [line.rstrip("\r") for line in lines]


def _check_args(args) -> None:
    """The numbers' ranges (argparse has checked that they are numbers), the input file and the checkpoint.

    Raises:
        _UsageError: the first problem, in one line naming the option.
    """
    try:
        check_int(args.beam_size, "--beam-size", minimum=1)
        check_int(args.max_len, "--max-len", minimum=1, allow_none=True)
        check_int(args.batch_tokens, "--batch-tokens", minimum=1)
        check_float(args.length_penalty, "--length-penalty", minimum=0.0)
    except ValueError as err:
        raise _UsageError(str(err)) from None
    if args.input != "-":
        path = Path(args.input)
        if path.is_dir():
            raise _UsageError(f"--input {args.input} is a folder, not a text file")
        if not path.is_file():
            raise _UsageError(f"--input {args.input} does not exist")
    ckpt = Path(args.checkpoint)
    if not ckpt.exists():
        raise _UsageError(f"no checkpoint at {ckpt}: train one with `python -m tmlib.train --out DIR`")


def main(argv=None) -> int:
    """Entry point; returns the process exit status (0 on success, 2 on a user error)."""
    try:
        args = build_parser().parse_args(argv)
        _check_args(args)
    except _UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    from tmlib.decoding.corpus import translate_corpus
    from tmlib.training.checkpoint import CheckpointError
    from tmlib.training.experiment import load_trained
    from tmlib.utils import get_device

    try:
        device = get_device(None if args.device == "auto" else args.device)
        trained = load_trained(args.checkpoint, device=device)
    except (FileNotFoundError, CheckpointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model, tokenizer = trained.model, trained.tokenizer

    def translate(lines: list[str], progress: bool) -> list[str]:
        """Blank and all-unknown lines give "" (with a warning for the latter); the rest is decoded."""
        out = [""] * len(lines)
        todo, unknown = [], []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            if tokenizer.is_all_unknown(line):
                unknown.append(i + 1)
                continue
            todo.append(i)
        if unknown and not args.quiet:
            shown = ", ".join(map(str, unknown[:10])) + (" ..." if len(unknown) > 10 else "")
            print(f"warning: {len(unknown)} line(s) made only of characters unknown to the vocabulary were not "
                  f"translated (line {shown}); is the input German?", file=sys.stderr)
        if todo:
            hyps = translate_corpus(model, tokenizer, [lines[i] for i in todo], beam_size=args.beam_size,
                                    batch_tokens=args.batch_tokens, length_penalty=args.length_penalty,
                                    max_len=args.max_len, progress=progress)
            for i, hyp in zip(todo, hyps):
                out[i] = hyp
        return out

    try:
        if args.input == "-" and sys.stdin.isatty():  # interactive: answer each line at once
            first = True
            for raw in sys.stdin.buffer:
                line = read_lines(raw, "stdin")[0] if raw.strip(b"\r\n") else ""
                if first:
                    line, first = line.lstrip("\ufeff"), False
                print(translate([line], progress=False)[0], flush=True)
        else:
            data = sys.stdin.buffer.read() if args.input == "-" else Path(args.input).read_bytes()
            lines = read_lines(data, "stdin" if args.input == "-" else args.input)
            for out in translate(lines, progress=not args.quiet):
                print(out)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: cannot read {args.input}: {err.strerror or err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
