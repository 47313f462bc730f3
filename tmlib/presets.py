"""Model configurations and the ``make_model`` factory (paper Table 3), in the spirit of the Annotated
Transformer's ``make_model``.

* ``"base"`` and ``"big"``: the paper's two models (Table 3; big uses P_drop 0.3 for EN-DE).
* ``"small"``: a size that trains a Multi30k translator on a CPU in a stated time budget (notebook 09).
* ``"tiny"``: toy tasks (copying, reversing) that learn in seconds.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType

import torch
from torch import nn

__all__ = ["ModelConfig", "PRESETS", "make_model", "count_parameters", "copy_task_batch"]


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of an encoder-decoder :class:`~tmlib.transformer.Transformer` (paper Table 3 names).

    d_model, n_heads (h), n_encoder_layers and n_decoder_layers (N), d_ff, dropout (P_drop), max_len,
    norm_first (False = the paper's post-LN).
    """

    d_model: int
    n_heads: int
    n_encoder_layers: int
    n_decoder_layers: int
    d_ff: int
    dropout: float
    max_len: int = 512
    norm_first: bool = False


PRESETS: MappingProxyType = MappingProxyType({
    "base": ModelConfig(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, dropout=0.1),
    "big": ModelConfig(d_model=1024, n_heads=16, n_encoder_layers=6, n_decoder_layers=6, d_ff=4096, dropout=0.3),
    "small": ModelConfig(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, dropout=0.1),
    "tiny": ModelConfig(d_model=32, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0,
                        max_len=64),
})


def make_model(preset: str | ModelConfig = "base", src_vocab_size: int | None = None,
               tgt_vocab_size: int | None = None, **overrides):
    """Build a :class:`~tmlib.transformer.Transformer` from a preset name or a :class:`ModelConfig`.

    Args:
        preset: a key of :data:`PRESETS` (``"base"``, ``"big"``, ``"small"``, ``"tiny"``) or a ``ModelConfig``.
        src_vocab_size: source vocabulary size (required).
        tgt_vocab_size: target vocabulary size; ``None`` = the same (one shared vocabulary, embeddings tied).
        overrides: any ``ModelConfig`` field (e.g. ``dropout=0.0``) or ``Transformer`` keyword
            (``pad_id``, ``tie_embeddings``).

    Returns:
        A freshly initialised ``Transformer``.

    Raises:
        ValueError: unknown preset name or missing ``src_vocab_size``.
        TypeError: unknown override keyword.
    """
    from .transformer import Transformer

    if isinstance(preset, str):
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
        config = PRESETS[preset]
    elif isinstance(preset, ModelConfig):
        config = preset
    else:
        raise TypeError(f"preset must be a name or a ModelConfig, got {type(preset).__name__}")
    if src_vocab_size is None:
        raise ValueError("make_model needs src_vocab_size")
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    extra = {"pad_id", "tie_embeddings"}
    unknown = set(overrides) - fields - extra
    if unknown:
        raise TypeError(f"unknown override(s) {sorted(unknown)}; allowed: {sorted(fields | extra)}")
    config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if k in fields})
    kwargs = {k: v for k, v in overrides.items() if k in extra}
    tgt_vocab_size = src_vocab_size if tgt_vocab_size is None else tgt_vocab_size
    return Transformer(src_vocab_size, tgt_vocab_size, **dataclasses.asdict(config), **kwargs)


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
