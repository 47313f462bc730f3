"""Translate text with a trained checkpoint, from the command line.

Usage::

    python -m tmlib.translate --checkpoint runs/multi30k/checkpoint.pt --beam-size 4 --input test.de
    echo "Ein Mann fährt Fahrrad." | python -m tmlib.translate --checkpoint runs/multi30k

One input line gives one output line. The checkpoint is the one written by ``python -m tmlib.train``
(:func:`tmlib.training.load_trained` reads it with ``torch.load(weights_only=True)``: model
weights, model configuration and the BPE tokenizer). Decoding is greedy with ``--beam-size 1``,
otherwise beam search with GNMT's length penalty (the paper, §6.1: beam 4, α = 0.6). When the
input is a terminal each line is translated as soon as it is typed; otherwise the lines are
translated in length-sorted batches (``--batch-tokens``) and printed in their original order.
"""
from __future__ import annotations

import argparse
import sys

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tmlib.translate",
                                description="Translate lines of text with a trained tmlib checkpoint.")
    p.add_argument("--checkpoint", required=True,
                   help="checkpoint.pt written by `python -m tmlib.train`, or its run folder")
    p.add_argument("--beam-size", type=int, default=4, help="1 = greedy decoding; paper: 4 (default)")
    p.add_argument("--length-penalty", type=float, default=0.6, help="GNMT alpha for beam search (default 0.6)")
    p.add_argument("--max-len", type=int, default=None,
                   help="most output tokens per sentence (default: source length + 50, paper §6.1)")
    p.add_argument("--input", default="-", help="a text file with one sentence per line (default: stdin)")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    p.add_argument("--batch-tokens", type=int, default=4000, help="source tokens per batch, beams included")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    return p


def main(argv=None) -> int:
    """Entry point; returns the process exit status (0 on success, 2 on bad arguments)."""
    args = build_parser().parse_args(argv)
    if args.beam_size < 1:
        print(f"error: --beam-size must be >= 1, got {args.beam_size}", file=sys.stderr)
        return 2
    if args.max_len is not None and args.max_len < 1:
        print(f"error: --max-len must be >= 1, got {args.max_len}", file=sys.stderr)
        return 2
    if args.batch_tokens < 1:
        print(f"error: --batch-tokens must be >= 1, got {args.batch_tokens}", file=sys.stderr)
        return 2

    from .metrics import translate_corpus
    from .training import load_trained
    from .utils import get_device

    try:
        device = get_device(None if args.device == "auto" else args.device)
        model, tokenizer, _, _ = load_trained(args.checkpoint, device=device)
    except (FileNotFoundError, RuntimeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    def translate(lines, progress):
        return translate_corpus(model, tokenizer, lines, beam_size=args.beam_size, batch_tokens=args.batch_tokens,
                                length_penalty=args.length_penalty, max_len=args.max_len, progress=progress)

    stream = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    try:
        if stream.isatty():  # interactive: answer each line at once
            for line in stream:
                print(translate([line.rstrip("\n")], progress=False)[0], flush=True)
        else:
            lines = [line.rstrip("\r\n") for line in stream]
            for out in translate(lines, progress=not args.quiet):
                print(out)
    finally:
        if stream is not sys.stdin:
            stream.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
