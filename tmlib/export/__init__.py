"""Exporting a trained model to other runtimes: ONNX for the translator in the web page (:mod:`tmlib.export.onnx`)."""
from tmlib.export.onnx import (DECODER_FILE, ENCODER_FILE, DecoderGraph, EncoderGraph, OnnxTranslator,
                               compare_with_torch, export_onnx, quantize_int8, torch_greedy_with_attention)

__all__ = ["ENCODER_FILE", "DECODER_FILE", "EncoderGraph", "DecoderGraph", "export_onnx", "OnnxTranslator",
           "torch_greedy_with_attention", "compare_with_torch", "quantize_int8"]
