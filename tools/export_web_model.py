"""Export a trained run for the translator page: ONNX encoder and decoder, tokenizer.json and model.json.

    python tools/export_web_model.py                          # the chapter 9 run (runs/multi30k or $TMLIB_RUN_DIR)
    TMLIB_SMOKE=1 python tools/export_web_model.py            # the smoke run (trained in seconds if absent)
    python tools/export_web_model.py --run DIR --out DIR --check 1000 --quantize int8

What it writes into ``--out`` (default ``_build/web_model``; the site build copies it to ``_static/translator/``,
see ``_ext/translator_model.py``): ``encoder.onnx``, ``decoder.onnx`` (:func:`tmlib.export.onnx.export_onnx`), the run's
``tokenizer.json``, and ``model.json``: the special ids, sizes, parameter count, the greedy BLEU on test 2016
(``--bleu``), the checkpoint's SHA-256 (the browser test checks it compares with the same model), and the check of
the graphs against PyTorch on the first ``--check`` test sentences (logits, identical greedy outputs,
cross-attention). ``--quantize int8`` also measures dynamic int8 weights and ships them only when every checked
sentence decodes to the same tokens as PyTorch; otherwise float32 is shipped (the measurement is in model.json).

Exit status: 0 written, 1 the ONNX graphs disagree with PyTorch, 2 no run / data error.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pooch

ROOT = Path(__file__).resolve().parent.parent


def _sizes(folder: Path, names) -> dict:
    return {n: (folder / n).stat().st_size for n in names}


def main(argv=None) -> int:
    from tmlib.utils import smoke_mode

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="run folder (default: the chapter 9 run, or the smoke run with TMLIB_SMOKE=1)")
    parser.add_argument("--out", default=str(ROOT / "_build" / "web_model"), help="output folder")
    parser.add_argument("--check", type=int, default=None,
                        help="test 2016 sentences compared with PyTorch (default 100; 20 in smoke mode)")
    parser.add_argument("--quantize", choices=["none", "int8"], default="none",
                        help="also measure int8 weights, shipped only if every checked output is unchanged")
    parser.add_argument("--no-bleu", action="store_true", help="skip the greedy BLEU on test 2016")
    args = parser.parse_args(argv)

    import torch

    from tmlib.data import DataError, load_multi30k
    from tmlib.decoding import bleu_scores, translate_corpus
    from tmlib.export import OnnxTranslator, compare_with_torch, export_onnx, quantize_int8
    from tmlib.export.onnx import DECODER_FILE, ENCODER_FILE
    from tmlib.model import count_parameters
    from tmlib.training import CHECKPOINT_NAME, default_run, load_or_train, load_trained

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    smoke = smoke_mode()
    out = Path(args.out)
    check = args.check if args.check is not None else (20 if smoke else 100)
    try:
        if args.run:
            run = Path(args.run)
            trained = load_trained(run, device="cpu")
        else:
            run, config = default_run(smoke=smoke, root=ROOT)
            if smoke:  # the smoke run trains in seconds; the chapter 9 run is `make book`'s first step
                trained = load_or_train(run, config, device="cpu")
            elif not (run / CHECKPOINT_NAME).is_file():
                print(f"error: no trained run in {run}: run `make book` (it trains it first), or point "
                      f"TMLIB_RUN_DIR at a finished run", file=sys.stderr)
                return 2
            else:
                trained = load_trained(run, device="cpu")
        test = load_multi30k("test")
    except (DataError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model, tok = trained.model.eval(), trained.tokenizer
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="web_model_", dir=out.parent if out.parent.is_dir() else None))
    try:
        export_onnx(model, tmp / "float32")
        sources = [ids for ids in (tok.encode(de) for de, _ in test[:check]) if ids]
        report = compare_with_torch(model, OnnxTranslator(tmp / "float32"), sources, tok.bos_id, tok.eos_id)
        # the tolerance: float32's for the model's forward chain at the longest source and output, at the scale of
        # the largest logit (tmlib.tolerance; ONNX Runtime's kernels round in other places and orders)
        print(f"float32 ONNX vs PyTorch on {report['sentences']} test sentences: {report['identical']} identical "
              f"outputs, largest logit difference {report['max_logit_diff']:.2g} (tolerance "
              f"{report['logit_tolerance']:.2g}), largest attention difference {report['max_attention_diff']:.2g}")
        if report["identical"] != report["sentences"] or report["max_logit_diff"] > report["logit_tolerance"]:
            print("error: the ONNX graphs disagree with PyTorch", file=sys.stderr)
            return 1
        chosen, measured = tmp / "float32", {"float32": {**report, "bytes": _sizes(tmp / "float32", (ENCODER_FILE, DECODER_FILE))}}
        if args.quantize == "int8":
            quantize_int8(tmp / "float32", tmp / "int8")
            q = compare_with_torch(model, OnnxTranslator(tmp / "int8"), sources, tok.bos_id, tok.eos_id)
            measured["int8"] = {**q, "bytes": _sizes(tmp / "int8", (ENCODER_FILE, DECODER_FILE))}
            print(f"int8 (dynamic) vs PyTorch: {q['identical']} of {q['sentences']} identical outputs, "
                  f"{sum(measured['int8']['bytes'].values()):,} bytes instead of "
                  f"{sum(measured['float32']['bytes'].values()):,}")
            if q["identical"] == q["sentences"]:
                chosen = tmp / "int8"
        bleu = None
        if not args.no_bleu:
            hyps = translate_corpus(model, tok, [de for de, _ in test], beam_size=1, progress=False, warn=False)
            bleu = round(bleu_scores(hyps, [en for _, en in test])["bleu"], 2)
            print(f"greedy BLEU on test 2016: {bleu:.2f}")
        out.mkdir(parents=True, exist_ok=True)
        for name in (ENCODER_FILE, DECODER_FILE):
            shutil.copy2(chosen / name, out / name)
        tok.save(out / "tokenizer.json")
        c = model.config
        info = {
            "format": 1,
            "weights": chosen.name,
            "smoke": smoke and not args.run,
            "pad_id": tok.pad_id, "bos_id": tok.bos_id, "eos_id": tok.eos_id, "unk_id": tok.unk_id,
            "vocab_size": tok.vocab_size, "d_model": c.d_model, "d_ff": c.d_ff, "n_heads": c.n_heads,
            "n_encoder_layers": c.n_encoder_layers, "n_decoder_layers": c.n_decoder_layers,
            "max_len": c.max_len, "parameters": count_parameters(model),
            "train_steps": trained.step, "train_minutes": round(trained.elapsed_s / 60, 1),
            "test_bleu_greedy": bleu,
            "checkpoint_sha256": pooch.file_hash(str(trained.path), alg="sha256"),
            "files": _sizes(out, (ENCODER_FILE, DECODER_FILE, "tokenizer.json")),
            "check": measured,
        }
        (out / "model.json").write_text(json.dumps(info, indent=1) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"web model written to {out} ({sum(info['files'].values()) / 2**20:.1f} MB, "
          f"{time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
