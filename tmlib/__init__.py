"""tmlib: the shared library of the course "Attention, executable".

* :mod:`tmlib.numpy_ref` – NumPy references of every building block (Part I); no torch.
* :mod:`tmlib.examples` – the lecture's worked-example inputs, defined once.
* :mod:`tmlib.plotting` – titled, labelled figures (attention heatmaps and friends).
* Part II, PyTorch, one paper section per module: :mod:`tmlib.attention` (§3.2),
  :mod:`tmlib.feed_forward` (§3.3), :mod:`tmlib.embeddings` (§3.4), :mod:`tmlib.positional` (§3.5),
  :mod:`tmlib.transformer` (§3.1), :mod:`tmlib.variants` (encoder-only, decoder-only),
  :mod:`tmlib.presets` (Table 3 configurations, ``make_model``).
* Beyond the paper (chapter 12): :mod:`tmlib.norms` (RMSNorm), :mod:`tmlib.rotary` (RoPE), :mod:`tmlib.alibi`
  (ALiBi), SwiGLU in :mod:`tmlib.feed_forward`, grouped-query attention in :mod:`tmlib.attention`,
  :mod:`tmlib.language_model` (caption batches for a decoder-only language model).

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
    "copy_task_batch": "presets",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
