"""tmlib: the shared library of the course "Attention, executable". One job per module:

Part I (NumPy): :mod:`tmlib.numpy_ref` (every building block; no torch), :mod:`tmlib.examples` (the lecture's
worked-example inputs, defined once), :mod:`tmlib.costs` (parameter and memory counts), :mod:`tmlib.checks`
(``check_close``/``check_shape`` for notebooks and exercises), :mod:`tmlib.quiz` (self-check questions),
:mod:`tmlib.plotting` (titled, labelled figures).

The model (PyTorch), one paper section per module: :mod:`tmlib.attention` (§3.2), :mod:`tmlib.feed_forward`
(§3.3), :mod:`tmlib.embeddings` (§3.4), :mod:`tmlib.positional` (§3.5), :mod:`tmlib.transformer` (§3.1),
:mod:`tmlib.variants` (encoder-only, decoder-only), :mod:`tmlib.presets` (``ModelConfig``, the one configuration
type; ``PRESETS``, Table 3; ``make_model``, the one factory).

Training (§5): :mod:`tmlib.recipe` (Adam, the schedule, the label-smoothed loss), :mod:`tmlib.trainer`
(``TrainConfig`` and the ``Trainer`` loop), :mod:`tmlib.checkpoint` (atomic checkpoints, RNG state),
:mod:`tmlib.experiment` (the Multi30k run: ``RECOMMENDED``, ``run_training``, ``load_or_train``).

Data: :mod:`tmlib.multi30k` (the files, through pooch), :mod:`tmlib.tokenizer` (shared BPE),
:mod:`tmlib.batching` (token-count batches). Decoding and scoring: :mod:`tmlib.decoding` (greedy, beam search,
corpus translation), :mod:`tmlib.metrics` (sacreBLEU). Command lines: ``python -m tmlib.train``,
``python -m tmlib.translate``. Shared helpers: :mod:`tmlib.validation` (argument checks), :mod:`tmlib.utils`
(seeding, devices, atomic writes), :mod:`tmlib.machine` (what machine a number was measured on).
:mod:`tmlib.data` and :mod:`tmlib.training` gather the names of the data and training modules in one import.

Beyond the paper (chapter 12): :mod:`tmlib.norms` (RMSNorm), :mod:`tmlib.rotary` (RoPE), :mod:`tmlib.alibi` (ALiBi),
SwiGLU in :mod:`tmlib.feed_forward`, grouped-query attention in :mod:`tmlib.attention` (all of them ``ModelConfig``
fields whose defaults are the paper), :mod:`tmlib.llama` (a Llama block checked against ``transformers``),
:mod:`tmlib.language_model` (caption batches for a decoder-only language model). Scaling out:
:mod:`tmlib.distributed` (``torchrun``, data parallelism).

The PyTorch parts are imported lazily (module ``__getattr__``), so ``import tmlib.numpy_ref`` works
without torch installed, while ``tmlib.Transformer`` imports torch on first use.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "scaled_dot_product_attention": "attention", "KVCache": "attention", "MultiHeadAttention": "attention",
    "PositionwiseFeedForward": "feed_forward", "SwiGLUFeedForward": "feed_forward",
    "RMSNorm": "norms", "RotaryEmbedding": "rotary", "ALiBi": "alibi",
    "TokenEmbedding": "embeddings", "Generator": "embeddings",
    "PositionalEncoding": "positional",
    "EncoderLayer": "transformer", "DecoderLayer": "transformer", "Encoder": "transformer",
    "Decoder": "transformer", "DecoderCache": "transformer", "Transformer": "transformer",
    "causal_mask": "attention",
    "EncoderOnly": "variants", "DecoderOnly": "variants",
    "ModelConfig": "presets", "PRESETS": "presets", "make_model": "presets", "count_parameters": "presets",
    "copy_task_batch": "presets", "TrainConfig": "trainer", "Trainer": "trainer",
    "load_trained": "experiment", "load_or_train": "experiment",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
