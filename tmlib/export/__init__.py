"""Your model, everywhere: the course's Transformer as a Hugging Face ``transformers`` MarianMT model
(:mod:`tmlib.export.marian`, chapter 14) and as ONNX graphs for the translator in the web page
(:mod:`tmlib.export.onnx`). On the command line: ``python -m tmlib.export`` (:mod:`tmlib.export.__main__`)."""

from tmlib.export.marian import (marian_config, marian_permutation, marian_tokenizer, model_card, save_marian,
                                 to_marian)
from tmlib.export.onnx import (DECODER_FILE, ENCODER_FILE, DecoderGraph, EncoderGraph, OnnxTranslator,
                               compare_with_torch, export_onnx, quantize_int8, torch_greedy_with_attention)

__all__ = [
    "marian_config", "marian_permutation", "marian_tokenizer", "to_marian", "save_marian", "model_card",  # marian
    "ENCODER_FILE", "DECODER_FILE", "EncoderGraph", "DecoderGraph", "export_onnx", "OnnxTranslator",  # onnx
    "torch_greedy_with_attention", "compare_with_torch", "quantize_int8",
]
