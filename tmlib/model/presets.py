"""Model configurations and the ``make_model`` factory (paper Table 3), in the spirit of the Annotated
Transformer's ``make_model``.

* ``"base"`` and ``"big"``: the paper's two models (Table 3; big uses P_drop 0.3 for EN-DE).
* ``"cpu"``: the Multi30k translator of notebook 09, sized for a 15-minute CPU budget (2 + 2 layers,
  d_model 256, d_ff 512); ``"small"``: its 3 + 3-layer parent (d_ff 1024).
* ``"tiny"``: toy tasks (copying, reversing) that learn in seconds.

Every configuration is a :class:`ModelConfig`, the one configuration type of the library, and
:func:`make_model` is the one factory.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import torch
from torch import nn

from tmlib.validation import check_float, check_int, check_token_id, optional_field

__all__ = ["ModelConfig", "PRESETS", "get_preset", "make_model", "count_parameters", "copy_task_batch"]


@dataclass(frozen=True)
class ModelConfig:
    """The model: the paper's hyper-parameters (Table 3 names) plus the vocabulary and the padding id.

    This one type is used by the presets (:data:`PRESETS`), the factory (:func:`make_model`), the training
    configuration (:class:`tmlib.training.trainer.TrainConfig`), the checkpoints and the command line
    (``python -m tmlib.train``). It is frozen: derive variants with ``dataclasses.replace(config, d_ff=512)``.

    The last five fields are the modern options of chapter 12; their defaults are the paper's model (same
    parameters, same state-dict keys), so configurations and checkpoints written before they existed load
    unchanged. The Llama-style block is ``norm_first=True, norm="rms", ffn="swiglu", positions="rope",
    n_kv_heads=<a divisor of n_heads>, bias=False``.

    Raises:
        ValueError: (on construction) a size that is not a positive integer, ``d_model`` not divisible by
            ``n_heads``, ``d_model`` odd with sinusoidal positions, ``d_model / n_heads`` odd with RoPE,
            ``n_kv_heads`` not dividing ``n_heads``, an unknown ``norm``/``ffn``/``positions``, ``dropout``
            outside [0, 1), a ``pad_id`` outside the vocabulary, or ``tie_embeddings=True`` with two
            different vocabulary sizes.
    """

    d_model: int
    """model width d_model (paper: 512 base, 1024 big)"""
    n_heads: int
    """attention heads h; must divide d_model"""
    n_encoder_layers: int
    """encoder layers N (paper: 6)"""
    n_decoder_layers: int
    """decoder layers N (paper: 6)"""
    d_ff: int
    """inner width of the feed-forward network (paper: 2048 base, 4096 big)"""
    dropout: float
    """P_drop, on every sub-layer output, the embeddings and the attention weights (paper: 0.1 base)"""
    max_len: int = 512
    """longest sequence the model accepts, in tokens (rows of the positional-encoding table)"""
    norm_first: bool = False
    """False: post-LN as in the paper; True: pre-LN (the modern layout)"""
    vocab_size: int = 37000
    """(source) vocabulary size V; the paper's EN-DE model shares about 37,000 BPE tokens"""
    tgt_vocab_size: int | None = optional_field(None, int)
    """target vocabulary size; none: the same as vocab_size (one shared vocabulary)"""
    pad_id: int | None = optional_field(0, int)
    """id of the padding token (masked in the source, ignored by the loss); none: no padding"""
    tie_embeddings: bool | None = optional_field(None, bool)
    """share one matrix between both embeddings and the pre-softmax layer (paper §3.4); none: tie when
    the two vocabularies are the same"""
    norm: Literal["layer", "rms"] = "layer"
    """normalization: layer (LayerNorm, the paper) or rms (RMSNorm, Zhang & Sennrich 2019)"""
    ffn: Literal["relu", "swiglu"] = "relu"
    """feed-forward: relu (the paper, §3.3) or swiglu (Shazeer 2020; inner width d_ff, e.g. 2/3 of the ReLU one
    for the same parameters)"""
    positions: Literal["sinusoidal", "rope", "alibi", "none"] = "sinusoidal"
    """positions: sinusoidal (added to the embeddings, §3.5), rope (rotary, Su et al. 2021), alibi (linear
    biases, Press et al. 2022) in every self-attention, or none"""
    n_kv_heads: int | None = optional_field(None, int)
    """key/value heads of the self-attentions (grouped-query attention, Ainslie et al. 2023; 1 = multi-query);
    none: n_heads"""
    bias: bool = True
    """biases in the attention and feed-forward linear layers (Llama has none)"""

    def __post_init__(self):
        for name in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "max_len", "vocab_size"):
            check_int(getattr(self, name), name, minimum=1)
        check_int(self.tgt_vocab_size, "tgt_vocab_size", minimum=1, allow_none=True)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        for name, allowed in (("norm", ("layer", "rms")), ("ffn", ("relu", "swiglu")),
                              ("positions", ("sinusoidal", "rope", "alibi", "none"))):
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
            check_token_id(self.pad_id, "pad_id", min(self.vocab_size, self.target_vocab_size))
        if self.tie_embeddings and self.target_vocab_size != self.vocab_size:
            raise ValueError(f"tie_embeddings=True needs one shared vocabulary, got vocab_size={self.vocab_size} "
                             f"and tgt_vocab_size={self.tgt_vocab_size}")

    @property
    def target_vocab_size(self) -> int:
        """The target vocabulary size (``tgt_vocab_size``, or ``vocab_size`` when that is None)."""
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size

    def to_dict(self) -> dict:
        """The fields as a plain dict (stored in checkpoints and ``config.json``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: an unknown field (e.g. a typo, or a checkpoint from a newer version of tmlib).
        """
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s) {sorted(unknown)}")
        return cls(**d)


#: The named configurations. ``base`` and ``big`` are the paper's (Table 3; big uses P_drop 0.3 as for
#: EN-DE) with its shared 37,000-token vocabulary; ``cpu`` is the translator of chapter 9, sized for a
#: 15-minute CPU budget on Multi30k, without dropout (a run of 1,000-3,000 steps, 5-13 epochs, learns faster
#: without it: ``benchmarks/results/cpu_recipe.json``); ``small`` is its 3 + 3-layer parent; ``tiny`` learns
#: toy tasks in seconds.
PRESETS: MappingProxyType = MappingProxyType({
    "base": ModelConfig(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, dropout=0.1),
    "big": ModelConfig(d_model=1024, n_heads=16, n_encoder_layers=6, n_decoder_layers=6, d_ff=4096, dropout=0.3),
    "small": ModelConfig(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, dropout=0.1,
                         vocab_size=8000),
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


def make_model(preset: str | ModelConfig = "base", src_vocab_size: int | None = None,
               tgt_vocab_size: int | None = None, **overrides):
    """The one factory: build a :class:`~tmlib.model.transformer.Transformer` from a :class:`ModelConfig` or the
    name of a preset, in the spirit of the Annotated Transformer's ``make_model``.

    Args:
        preset: a :class:`ModelConfig`, or a key of :data:`PRESETS` (``"base"``, ``"big"``, ``"small"``,
            ``"cpu"``, ``"tiny"``).
        src_vocab_size: shorthand for ``vocab_size=...`` (the source, or shared, vocabulary).
        tgt_vocab_size: the target vocabulary size when it differs (then the embeddings are not tied).
        overrides: any :class:`ModelConfig` field, e.g. ``dropout=0.0`` or ``pad_id=None``.

    Returns:
        A freshly initialised ``Transformer`` whose ``config`` attribute is the resulting ``ModelConfig``.

    Raises:
        ValueError: an unknown preset name, or an invalid configuration (see :class:`ModelConfig`).
        TypeError: ``preset`` is neither a name nor a ``ModelConfig``, or an unknown override keyword.
    """
    from tmlib.model.transformer import Transformer

    if isinstance(preset, str):
        config = get_preset(preset)
    elif isinstance(preset, ModelConfig):
        config = preset
    else:
        raise TypeError(f"preset must be a name or a ModelConfig, got {type(preset).__name__}")
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = set(overrides) - fields
    if unknown:
        raise TypeError(f"unknown override(s) {sorted(unknown)}; allowed: {sorted(fields)}")
    if src_vocab_size is not None:
        overrides["vocab_size"] = src_vocab_size
    if tgt_vocab_size is not None:
        overrides["tgt_vocab_size"] = tgt_vocab_size
    config = dataclasses.replace(config, **overrides)
    return Transformer.from_config(config)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of *unique* parameters of ``model``: a tied matrix used three times counts once.

    ``nn.Module.parameters()`` already yields each ``Parameter`` object once, so this is the sum of their sizes.

    Args:
        model: any ``nn.Module``.
        trainable_only: count only parameters with ``requires_grad``.

    Returns:
        int.
    """
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def copy_task_batch(batch_size: int, seq_len: int, n_symbols: int, generator: torch.Generator | None = None,
                    pad_id: int = 0, bos_id: int = 1, eos_id: int = 2) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of the toy *copy task* for the ``"tiny"`` preset: the target is the source.

    Symbols are the ids ``3 … n_symbols + 2`` (0, 1, 2 are pad, BOS, EOS), so the vocabulary has
    ``n_symbols + 3`` tokens.  Teacher forcing: the decoder reads ``[BOS] + src`` and must predict ``src + [EOS]``.

    Args:
        batch_size, seq_len, n_symbols: positive integers.
        generator: a seeded ``torch.Generator`` for reproducible batches.

    Returns:
        ``(src, tgt_in, tgt_out)``, long tensors ``(batch, seq_len)``, ``(batch, seq_len + 1)``, ``(batch, seq_len + 1)``.

    Raises:
        ValueError: a size is not positive.
    """
    if min(batch_size, seq_len, n_symbols) < 1:
        raise ValueError(f"sizes must be positive, got batch_size={batch_size}, seq_len={seq_len}, n_symbols={n_symbols}")
    src = torch.randint(3, n_symbols + 3, (batch_size, seq_len), generator=generator)  # (batch, seq_len)
    bos = torch.full((batch_size, 1), bos_id, dtype=torch.long)
    eos = torch.full((batch_size, 1), eos_id, dtype=torch.long)
    return src, torch.cat([bos, src], dim=1), torch.cat([src, eos], dim=1)
