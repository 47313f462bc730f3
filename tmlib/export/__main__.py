"""Command line: export a trained run as a Hugging Face folder (MarianMT, chapter 14) and/or ONNX graphs.

    python -m tmlib.export --out exported/                       # the chapters' run, both formats
    python -m tmlib.export --checkpoint runs/base --out hf/ --format hf --no-bleu

``--format hf`` writes ``OUT/hf/`` (or ``OUT`` itself with one format): ``config.json``, ``model.safetensors``,
``generation_config.json``, the tokenizer's files and a model card ``README.md`` with the BLEU on test 2016 and its
sacreBLEU signature (:func:`tmlib.export.marian.save_marian`), loadable with ``AutoTokenizer`` and
``MarianMTModel.from_pretrained`` on transformers 4 and 5. ``--format onnx`` writes ``OUT/onnx/``:
``encoder.onnx`` and ``decoder.onnx`` (a dynamic batch, padding masked; :func:`tmlib.export.onnx.export_onnx`)
and ``tokenizer.json``.

Exit status: 0 written; 2 a user error (no checkpoint, a folder that is not empty, a model that Marian cannot
express), reported as one ``error: ...`` line.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    class Parser(argparse.ArgumentParser):
        def error(self, message):  # one line instead of argparse's usage block
            raise _UsageError(f"{message} (see python -m tmlib.export --help)")

    p = Parser(prog="python -m tmlib.export", allow_abbrev=False,
               description="Export a trained translator as a Hugging Face MarianMT folder with a model card, "
                           "and/or as ONNX graphs.",
               epilog="Exit status: 0 written; 2 user error (one 'error:' line).")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint.pt or its run folder (default: the chapters' run, runs/multi30k)")
    p.add_argument("--out", required=True, help="output folder: new or empty")
    p.add_argument("--format", choices=["hf", "onnx", "both"], default="both", help="what to write (default: both)")
    p.add_argument("--beam-size", type=int, default=4, help="beam width of the model card's BLEU (default 4; 1 = greedy)")
    p.add_argument("--no-bleu", action="store_true", help="no BLEU on test 2016 in the model card (faster)")
    return p


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if not 1 <= args.beam_size <= 100:
            raise _UsageError(f"--beam-size must be from 1 to 100, got {args.beam_size}")
        out = Path(args.out)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise _UsageError(f"{out} exists and is not an empty folder: choose a new --out")
    except _UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from tmlib.training.checkpoint import CheckpointError
    from tmlib.training.experiment import default_run, load_trained

    try:
        trained = load_trained(args.checkpoint or default_run()[0], device="cpu")
    except (FileNotFoundError, CheckpointError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model, tok = trained.model.eval(), trained.tokenizer
    formats = ["hf", "onnx"] if args.format == "both" else [args.format]
    target = {f: (out / f if len(formats) > 1 else out) for f in formats}
    if "hf" in formats:
        from tmlib.export.marian import _check_expressible, save_marian

        try:
            _check_expressible(model.config)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        info = {"train_steps": trained.step, "train_minutes": round(trained.elapsed_s / 60, 1),
                "beam_size": args.beam_size}
        if not args.no_bleu:
            from tmlib.data import DataError, load_multi30k
            from tmlib.decoding import bleu_scores, translate_corpus

            try:
                test = load_multi30k("test")
            except DataError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            print(f"scoring on test 2016 ({len(test):,} sentences, beam {args.beam_size})...", file=sys.stderr)
            hyps = translate_corpus(model, tok, [de for de, _ in test], beam_size=args.beam_size, progress=True,
                                    warn=False)
            info["bleu"] = bleu_scores(hyps, [en for _, en in test])
        save_marian(model, tok, target["hf"], info)
        print(f"Hugging Face folder: {target['hf']}")
    if "onnx" in formats:
        from tmlib.export.onnx import export_onnx

        export_onnx(model, target["onnx"])
        tok.save(target["onnx"] / "tokenizer.json")
        print(f"ONNX graphs: {target['onnx']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
