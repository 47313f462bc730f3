"""The model's configuration and the named configurations of the paper's Table 3.

One frozen dataclass, :class:`ModelConfig`, describes a model: the paper's hyper-parameters, the vocabulary, the
padding id, and the modern options of chapter 13. :class:`tmlib.model.transformer.Transformer` is built from it
(``Transformer(config)``), :func:`tmlib.model.transformer.make_model` builds one from a preset name, checkpoints
store it. This module imports nothing of the model, so that every part of the model may import it.

* ``"base"`` and ``"big"``: the paper's two models (Table 3; big uses P_drop 0.3 as for EN-DE).
* ``"cpu"``: the Multi30k translator of chapter 9, sized for a 15-minute CPU budget (2 + 2 layers, d_model 256,
  d_ff 512); ``"small"``: its 3 + 3-layer parent (d_ff 1024).
* ``"tiny"``: toy tasks (copying, reversing) that learn in seconds.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from tmlib.validation import check_float, check_int, check_token_id

#: The most positions (``max_len``, rows of the positional table) the command lines accept for a model: far more
#: than any sentence of the course needs, small enough that a typo or a damaged file cannot ask for gigabytes.
MAX_POSITIONS = 65_536

__all__ = ["MAX_POSITIONS", "ModelConfig", "PRESETS", "get_preset", "NORMS", "FEED_FORWARDS", "POSITIONS"]

#: The normalizations: LayerNorm (the paper) or RMSNorm (:mod:`tmlib.model.norms`).
NORMS = ("layer", "rms")
#: The feed-forward networks: the paper's ReLU FFN or SwiGLU (:mod:`tmlib.model.feed_forward`).
FEED_FORWARDS = ("relu", "swiglu")
#: The position schemes: added sinusoids (the paper), rotary embeddings, linear biases, or none
#: (:mod:`tmlib.model.positional`).
POSITIONS = ("sinusoidal", "rope", "alibi", "none")


@dataclass(frozen=True)
class ModelConfig:
    """A Transformer: the paper's hyper-parameters (Table 3 names), the vocabulary and the padding id.

    The defaults are the paper's base model with its shared vocabulary of about 37,000 byte-pair tokens; frozen:
    derive variants with ``dataclasses.replace(config, d_ff=512)``.

    Attributes:
        d_model, n_heads, d_ff: the widths d_model, h (must divide d_model) and d_ff (paper: 512, 8, 2048).
        n_encoder_layers, n_decoder_layers: the N of each stack (paper: 6).
        dropout: P_drop, on every sub-layer output, the embeddings and the attention weights (paper: 0.1).
        max_len: the longest sequence the model accepts (rows of the positional table).
        norm_first: False: post-LN, LayerNorm(x + Sublayer(x)), as the paper; True: pre-LN.
        vocab_size: the source (or shared) vocabulary size V.
        tgt_vocab_size: the target vocabulary size; None: ``vocab_size`` (one shared vocabulary).
        pad_id: the padding id (masked in the source, ignored by the loss); None: no padding.
        tie_embeddings: one matrix for both embeddings and the pre-softmax layer (§3.4); None: tie when the
            two vocabularies are the same.
        norm, ffn, positions, n_kv_heads, bias: the modern options of chapter 13, whose defaults are the paper's
            layers: ``"layer"`` or ``"rms"``; ``"relu"`` or ``"swiglu"``; ``"sinusoidal"`` (added to the
            embeddings), ``"rope"`` or ``"alibi"`` (in every self-attention) or ``"none"``; the key/value heads of
            the self-attentions (grouped-query attention; None: ``n_heads``); biases in the attention and
            feed-forward linear layers. The Llama-style block is ``norm_first=True, norm="rms", ffn="swiglu",
            positions="rope", n_kv_heads=<a divisor of n_heads>, bias=False``.

    Raises:
        TypeError, ValueError: (on construction, as :func:`tmlib.validation.check_int`) a size that is not a
            positive integer; ValueError: ``d_model`` not divisible by ``n_heads``, ``d_model`` odd with
            sinusoidal positions, ``d_model / n_heads`` odd with RoPE, ``n_kv_heads`` not dividing ``n_heads``, an
            unknown ``norm``/``ffn``/``positions``, ``dropout`` outside [0, 1), a ``pad_id`` outside the
            vocabulary, or ``tie_embeddings=True`` with two different vocabulary sizes.
    """

    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 512
    norm_first: bool = False
    vocab_size: int = 37000
    tgt_vocab_size: int | None = None
    pad_id: int | None = 0
    tie_embeddings: bool | None = None
    norm: Literal["layer", "rms"] = "layer"
    ffn: Literal["relu", "swiglu"] = "relu"
    positions: Literal["sinusoidal", "rope", "alibi", "none"] = "sinusoidal"
    n_kv_heads: int | None = None
    bias: bool = True

    def __post_init__(self):
        for name in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "max_len", "vocab_size"):
            check_int(getattr(self, name), name, minimum=1)
        check_int(self.tgt_vocab_size, "tgt_vocab_size", minimum=1, allow_none=True)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        for name, allowed in (("norm", NORMS), ("ffn", FEED_FORWARDS), ("positions", POSITIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; choose one of {list(allowed)}")
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"d_model must be even for the sinusoidal positional encoding, got {self.d_model}")
        if self.positions == "rope" and (self.d_model // self.n_heads) % 2:
            raise ValueError(f"rotary embeddings rotate pairs of features: d_model / n_heads = "
                             f"{self.d_model // self.n_heads} must be even")
        check_int(self.n_kv_heads, "n_kv_heads", minimum=1, allow_none=True)
        if self.n_kv_heads is not None and self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads}")
        if not isinstance(self.bias, bool):
            raise ValueError(f"bias must be True or False, got {self.bias!r}")
        check_float(self.dropout, "dropout", minimum=0.0, maximum=1.0, max_inclusive=False)
        if self.pad_id is not None:
            check_token_id(self.pad_id, "pad_id", min(self.vocab_size, self.tgt_vocab_size or self.vocab_size))
        if self.tie_embeddings and (self.tgt_vocab_size or self.vocab_size) != self.vocab_size:
            raise ValueError(f"tie_embeddings=True needs one shared vocabulary, got vocab_size={self.vocab_size} "
                             f"and tgt_vocab_size={self.tgt_vocab_size}")

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        """Inverse of :meth:`to_dict`; ValueError for an unknown field (a typo, a checkpoint of a newer tmlib)."""
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s) {sorted(unknown)}")
        return cls(**d)

    def to_dict(self) -> dict:
        """The fields as a plain dict (stored in checkpoints and ``config.json``)."""
        return dataclasses.asdict(self)


#: The named configurations. ``base`` and ``big`` are the paper's (Table 3; big uses P_drop 0.3 as for
#: EN-DE) with its shared 37,000-token vocabulary; ``cpu`` is the translator of chapter 9, sized for a
#: 15-minute CPU budget on Multi30k, without dropout (a run of 1,000-3,000 steps, 5-13 epochs, learns faster
#: without it: ``benchmarks/results/cpu_recipe.json``); ``small`` is its 3 + 3-layer parent; ``tiny`` learns
#: toy tasks in seconds.
PRESETS: MappingProxyType = MappingProxyType({
    "base": ModelConfig(),
    "big": ModelConfig(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3),
    "small": ModelConfig(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, vocab_size=8000),
    "cpu": ModelConfig(d_model=256, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=512, dropout=0.0,
                       vocab_size=8000),
    "tiny": ModelConfig(d_model=32, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0,
                        max_len=64, vocab_size=8000),
})


def get_preset(name: str) -> ModelConfig:
    """The :class:`ModelConfig` called ``name`` in :data:`PRESETS`.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
