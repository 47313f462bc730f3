"""The trained Transformer as two ONNX graphs, for a translator that runs in a web page (``onnxruntime-web``).

"The encoder maps an input sequence of symbol representations (x_1, ..., x_n) to a sequence of continuous
representations z = (z_1, ..., z_n). Given z, the decoder then generates an output sequence (y_1, ..., y_m) of
symbols one element at a time." (§3)  The two halves of that sentence are the two graphs:

* ``encoder.onnx``: ``src`` int64 ``(batch, src_len)`` → ``memory`` float32 ``(batch, src_len, d_model)``;
* ``decoder.onnx``: ``tgt`` int64 ``(batch, tgt_len)`` (the whole prefix, ``<bos>`` first), ``memory`` and ``src``
  → ``logits`` ``(batch, vocab)`` of the next token and ``cross_attention`` ``(batch, n_layers, n_heads,
  src_len)``: the weights with which the last position attended over the source, in every decoder layer and head.

The batch and both lengths are dynamic. Sources of different lengths are padded with the model's ``pad_id`` at
the end: both graphs mask the padding keys (``src != pad_id``, True = may attend), so a padded row decodes as the
sentence alone does (the web page sends one sentence at a time). There is no key/value cache in the graphs: each step recomputes the prefix, as
:func:`tmlib.decoding.greedy.greedy_decode` does with ``use_cache=False``. A cache would add two inputs and two
outputs per layer (and an empty cache at the first step) for little gain here: the sentences are short (13
tokens on average in Multi30k), the model has two decoder layers, and a step over the whole prefix costs a few
milliseconds in the browser.

:class:`OnnxTranslator` runs the graphs with ``onnxruntime`` (one thread, as the page runs them), and
:func:`compare_with_torch` checks them against the PyTorch model: the next-token logits, the greedy outputs and
the cross-attention.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from tmlib.tolerance import tolerance, transformer_reduction_length

__all__ = ["ENCODER_FILE", "DECODER_FILE", "EncoderGraph", "DecoderGraph", "export_onnx", "OnnxTranslator",
           "torch_greedy_with_attention", "compare_with_torch", "quantize_int8"]

ENCODER_FILE, DECODER_FILE = "encoder.onnx", "decoder.onnx"
#: The ONNX operator set of the exported graphs (onnxruntime-web 1.30 runs up to 23).
OPSET = 17


class EncoderGraph(nn.Module):
    """The encoder half of a :class:`~tmlib.model.transformer.Transformer` for export: embeddings (§3.4), positional
    encoding (§3.5) and the encoder stack (§3.1) with the padding mask ``src != pad_id`` always built (the
    model's own ``real_tokens`` skips it when a batch has no padding, which tracing would make permanent).

    Shapes: ``src`` int64 ``(batch, src_len)`` → ``memory`` float32 ``(batch, src_len, d_model)``.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        m = self.model
        x = m.positional(m.src_embed(src))  # (batch, src_len, d_model)
        return m.encoder(x, _real(m, src))  # (batch, src_len, d_model)


class DecoderGraph(nn.Module):
    """One step of greedy decoding for export: the decoder over the whole target prefix (causal self-attention,
    attention over the memory, §3.1), the generator on the last position, and the cross-attention weights of
    that position in every layer (the layers record them: ``keep_attention``).

    Shapes: ``tgt`` int64 ``(batch, tgt_len)``, ``memory`` ``(batch, src_len, d_model)``, ``src`` int64
    ``(batch, src_len)`` (for its padding mask) → ``logits`` ``(batch, vocab)``, ``cross_attention`` ``(batch,
    n_layers, n_heads, src_len)``.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m = self.model
        for layer in m.decoder.layers:
            layer.keep_attention = True
        y = m.positional(m.tgt_embed(tgt))  # (batch, tgt_len, d_model)
        y = m.decoder(y, memory, _real(m, src))  # (batch, tgt_len, d_model)
        logits = m.generator(y[:, -1:])[:, 0]  # (batch, vocab): the next token after the prefix
        cross = [layer.attention_weights["cross"][:, :, -1] for layer in m.decoder.layers]  # (batch, n_heads, src_len)
        return logits, torch.stack(cross, dim=1)  # (batch, vocab), (batch, n_layers, n_heads, src_len)


def _real(model, src: torch.Tensor) -> torch.Tensor:
    """Bool ``(batch, src_len)``, True = a real token (may be attended to), False = padding."""
    if model.pad_id is None:
        return torch.ones_like(src, dtype=torch.bool)
    return src != model.pad_id


def _check_model(model) -> None:
    from tmlib.model.transformer import Transformer

    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a tmlib.model.transformer.Transformer, got {type(model).__name__}")
    if model.config.positions != "sinusoidal":
        raise ValueError(f"only the paper's sinusoidal positions are exported, got positions={model.config.positions!r}")


def _require(module: str) -> None:
    """Raise ModuleNotFoundError with the install command when ``module`` (an ONNX package) is missing."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(f"{module} is not installed: the ONNX export needs the course's export extra, "
                                  "pip install \"attention-executable[export]\" (onnx, onnxscript, onnxruntime)",
                                  name=module)


def export_onnx(model: nn.Module, folder: str | os.PathLike, opset: int = OPSET) -> dict[str, Path]:
    """Write ``encoder.onnx`` and ``decoder.onnx`` for ``model`` (sinusoidal positions) into ``folder``: traced with
    ``torch.onnx.export`` (TorchScript tracer; the dynamo exporter would turn shape checks into guards) on a float32 CPU
    copy in eval mode, the batch, ``src_len`` and ``tgt_len`` dynamic. Returns ``{"encoder": path, "decoder": path}``.

    Raises:
        TypeError: not a ``Transformer``. ValueError: positions other than sinusoidal. ModuleNotFoundError: onnx is
        not installed (the message gives the install command).
    """
    import copy
    import warnings

    _check_model(model)
    _require("onnx")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = copy.deepcopy(model).cpu().float().eval()
    src = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 8, 9]])  # (2, 5): any ids; the batch and lengths are dynamic
    tgt = torch.tensor([[1, 5, 6], [1, 5, 6]])  # (2, 3): a prefix longer than one, so the causal mask is in the graph
    paths = {"encoder": folder / ENCODER_FILE, "decoder": folder / DECODER_FILE}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings about Python values in shape checks
        memory = EncoderGraph(model)(src)
        torch.onnx.export(EncoderGraph(model), (src,), str(paths["encoder"]), dynamo=False, opset_version=opset,
                          input_names=["src"], output_names=["memory"],
                          dynamic_axes={"src": {0: "batch", 1: "src_len"}, "memory": {0: "batch", 1: "src_len"}})
        # No constant folding in the decoder: it would store the generator's transposed copy of the tied
        # embedding matrix (§3.4) beside the embedding, 8 MB more for the chapter 9 model.
        torch.onnx.export(DecoderGraph(model), (tgt, memory, src), str(paths["decoder"]), dynamo=False,
                          opset_version=opset, do_constant_folding=False, input_names=["tgt", "memory", "src"],
                          output_names=["logits", "cross_attention"],
                          dynamic_axes={"tgt": {0: "batch", 1: "tgt_len"}, "memory": {0: "batch", 1: "src_len"},
                                        "src": {0: "batch", 1: "src_len"}, "logits": {0: "batch"},
                                        "cross_attention": {0: "batch", 3: "src_len"}})
    return paths


class OnnxTranslator:
    """The exported graphs run by ``onnxruntime`` on the CPU with one thread, and the greedy loop the page runs.

    Args:
        folder: holds ``encoder.onnx`` and ``decoder.onnx`` (:func:`export_onnx`).

    Raises:
        FileNotFoundError: a graph is missing.
    """

    def __init__(self, folder: str | os.PathLike):
        _require("onnxruntime")
        import onnxruntime as ort

        folder = Path(folder)
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self.sessions = {}
        for name, file in (("encoder", ENCODER_FILE), ("decoder", DECODER_FILE)):
            if not (folder / file).is_file():
                raise FileNotFoundError(f"{folder / file} is missing: export the model first (export_onnx)")
            self.sessions[name] = ort.InferenceSession(str(folder / file), options,
                                                       providers=["CPUExecutionProvider"])

    def encode(self, src_ids: Sequence[int]) -> np.ndarray:
        """Source ids (a list of ints) → memory float32 ``(1, src_len, d_model)``."""
        src = np.asarray([list(src_ids)], dtype=np.int64)  # (1, src_len)
        return self.sessions["encoder"].run(["memory"], {"src": src})[0]

    def step(self, prefix: Sequence[int], memory: np.ndarray, src_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The logits of the next token ``(vocab,)`` and the cross-attention ``(n_layers, n_heads, src_len)``."""
        tgt = np.asarray([list(prefix)], dtype=np.int64)  # (1, tgt_len)
        src = np.asarray([list(src_ids)], dtype=np.int64)  # (1, src_len)
        logits, cross = self.sessions["decoder"].run(["logits", "cross_attention"],
                                                     {"tgt": tgt, "memory": memory, "src": src})
        return logits[0], cross[0]

    def run_batch(self, src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both graphs on a batch: ``src`` int64 ``(batch, src_len)`` padded with ``pad_id``, ``tgt`` int64
        ``(batch, tgt_len)`` → the next-token logits ``(batch, vocab)`` and cross-attention ``(batch, n_layers,
        n_heads, src_len)``."""
        src, tgt = np.asarray(src, dtype=np.int64), np.asarray(tgt, dtype=np.int64)
        memory = self.sessions["encoder"].run(["memory"], {"src": src})[0]  # (batch, src_len, d_model)
        logits, cross = self.sessions["decoder"].run(["logits", "cross_attention"],
                                                     {"tgt": tgt, "memory": memory, "src": src})
        return logits, cross

    def greedy(self, src_ids: Sequence[int], bos_id: int, eos_id: int, max_len: int | None = None) -> dict:
        """Greedy decoding (chapter 9): start from ``<bos>``, append the argmax, stop at ``<eos>`` or after
        ``max_len`` tokens (default: source length + 50, paper §6.1).

        Returns:
            ``{"tokens": ids without <bos>/<eos>, "logits": (steps, vocab), "attention": (steps, n_layers,
            n_heads, src_len)}``; a step is one decoder call (the last one may have produced ``<eos>``).
        """
        if not src_ids:
            raise ValueError("src_ids is empty: there is nothing to translate")
        limit = len(src_ids) + 50 if max_len is None else max_len
        memory = self.encode(src_ids)
        prefix, logits, attention = [bos_id], [], []
        for _ in range(limit):
            step_logits, cross = self.step(prefix, memory, src_ids)
            logits.append(step_logits)
            attention.append(cross)
            token = int(np.argmax(step_logits))
            if token == eos_id:
                break
            prefix.append(token)
        return {"tokens": prefix[1:], "logits": np.stack(logits), "attention": np.stack(attention)}


@torch.no_grad()
def torch_greedy_with_attention(model: nn.Module, src_ids: Sequence[int], bos_id: int, eos_id: int) -> dict:
    """tmlib's greedy decoding of one sentence (:func:`~tmlib.decoding.greedy.greedy_decode`), with the logits and
    cross-attention of every step read from one teacher-forced pass over ``<bos>`` + the output.

    Returns:
        as :meth:`OnnxTranslator.greedy`: ``tokens``, ``logits`` ``(steps, vocab)``, ``attention``
        ``(steps, n_layers, n_heads, src_len)`` (float32 NumPy arrays).
    """
    from tmlib.analysis.capture import capture_attention
    from tmlib.decoding.greedy import greedy_decode

    device = next(model.parameters()).device
    src = torch.tensor([list(src_ids)], device=device)  # (1, src_len)
    tokens = greedy_decode(model, src, bos_id, eos_id)[0]
    limit = len(src_ids) + 50
    ended = len(tokens) < min(limit, getattr(model, "max_len", limit))  # stopped by <eos>, not by the limit
    prefix = [bos_id] + (tokens if ended else tokens[:-1])  # the decoder input of every step
    captured = capture_attention(model, src, torch.tensor([prefix], device=device))
    cross = torch.stack([w[0] for w in captured.weights["cross"]])  # (n_layers, n_heads, steps, src_len)
    return {"tokens": tokens, "logits": captured.logits[0].float().cpu().numpy(),  # (steps, vocab)
            "attention": cross.permute(2, 0, 1, 3).float().cpu().numpy()}  # (steps, n_layers, n_heads, src_len)


def compare_with_torch(model: nn.Module, translator: OnnxTranslator, sources: Sequence[Sequence[int]],
                       bos_id: int, eos_id: int) -> dict:
    """Greedy-decode each source with PyTorch and with the ONNX graphs and compare.

    Args:
        model: the :class:`~tmlib.model.transformer.Transformer` that was exported.
        translator: the exported graphs.
        sources: token ids of the source sentences (no ``<bos>``/``<eos>``), none empty.

    Returns:
        ``{"sentences", "identical" (outputs equal token for token), "max_logit_diff", "max_attention_diff",
        "max_abs_logit", "max_source_len", "max_steps", "logit_tolerance", "attention_tolerance"}``; the
        differences are the largest absolute ones over the steps where both decoders had the same prefix; the
        tolerances are float32's for the model's forward chain at those lengths (:mod:`tmlib.tolerance`).
    """
    identical, logit_diff, attention_diff, scale, steps = 0, 0.0, 0.0, 0.0, 1
    for ids in sources:
        ref = torch_greedy_with_attention(model, ids, bos_id, eos_id)
        out = translator.greedy(ids, bos_id, eos_id)
        identical += out["tokens"] == ref["tokens"]
        n = min(len(ref["logits"]), len(out["logits"]))
        same = next((t for t in range(n) if int(np.argmax(ref["logits"][t])) != int(np.argmax(out["logits"][t]))),
                    n - 1) + 1  # steps up to and including the first that differs share their prefix
        logit_diff = max(logit_diff, float(np.abs(ref["logits"][:same] - out["logits"][:same]).max()))
        attention_diff = max(attention_diff, float(np.abs(ref["attention"][:same] - out["attention"][:same]).max()))
        scale, steps = max(scale, float(np.abs(ref["logits"]).max())), max(steps, len(ref["logits"]))
    src_len = max(map(len, sources))
    chain = transformer_reduction_length(model.config, src_len, steps)
    return {"sentences": len(sources), "identical": int(identical), "max_logit_diff": logit_diff,
            "max_attention_diff": attention_diff, "max_abs_logit": scale, "max_source_len": src_len,
            "max_steps": steps, "logit_tolerance": tolerance(torch.float32, chain, scale),
            "attention_tolerance": tolerance(torch.float32, chain, 1.0)}


def quantize_int8(folder: str | os.PathLike, out: str | os.PathLike) -> dict[str, Path]:
    """Dynamic int8 quantisation of both graphs (``onnxruntime.quantization.quantize_dynamic``: int8 weights of
    the matrix products, activations quantised on the fly), written to ``out``.

    Returns:
        ``{"encoder": path, "decoder": path}`` of the quantised graphs.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder, out = Path(folder), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, file in (("encoder", ENCODER_FILE), ("decoder", DECODER_FILE)):
        quantize_dynamic(str(folder / file), str(out / file), weight_type=QuantType.QInt8)
        paths[name] = out / file
    return paths
