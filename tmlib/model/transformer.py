"""The Transformer of the paper's Figure 1 (§3): embeddings, positional encoding, the encoder and decoder stacks,
the generator; and :func:`make_model`, the factory that builds one from a configuration or a preset's name.

"Most competitive neural sequence transduction models have an encoder-decoder structure. Here, the encoder maps
an input sequence of symbol representations (x_1, ..., x_n) to a sequence of continuous representations
z = (z_1, ..., z_n). Given z, the decoder then generates an output sequence (y_1, ..., y_m) of symbols one element
at a time." (§3)

The arguments are checked once, at the model's public boundary (``forward``, ``encode``, ``decode``,
:func:`make_model`); the layers inside trust them.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from tmlib.model.checks import check_model_config, check_model_inputs
from tmlib.model.config import ModelConfig, get_preset
from tmlib.model.embeddings import Generator, TokenEmbedding
from tmlib.model.kv_cache import DecoderCache
from tmlib.model.layers import Decoder, Encoder
from tmlib.model.masks import real_tokens
from tmlib.model.positional import make_positional

__all__ = ["Transformer", "make_model", "count_parameters", "set_dropout", "xavier_init_"]


def xavier_init_(model: nn.Module, embeddings: tuple = ()) -> None:
    """Initialise ``model`` in place as the Annotated Transformer: ``xavier_uniform_`` on every parameter with
    more than one dimension (each unique Parameter once, so a tied matrix is drawn once); biases keep PyTorch's
    defaults and LayerNorms γ = 1, β = 0.  The pad row of each :class:`TokenEmbedding` in ``embeddings`` that has
    a ``pad_id`` is then set to zero.
    """
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    with torch.no_grad():
        for emb in embeddings:
            if emb.pad_id is not None:
                emb.embedding.weight[emb.pad_id].zero_()


class Transformer(nn.Module):
    """The encoder-decoder of Figure 1 (§3) from one :class:`~tmlib.model.config.ModelConfig`: embeddings × √d_model
    (§3.4) plus positions (§3.5), the encoder and decoder stacks (§3.1), the generator (§3.4).

    forward: ``src`` ``(batch, src_len)``, ``tgt`` ``(batch, tgt_len)`` → logits ``(batch, tgt_len, tgt_vocab_size)``,
    position t predicting token t + 1; source pads are masked. Initialised as the Annotated Transformer. Raises
    TypeError or ValueError at the boundary (:func:`~tmlib.model.checks.check_model_inputs`).
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        check_model_config(config)  # [not in the paper] argument checks
        self.config = c = config
        self.src_vocab_size, self.tgt_vocab_size = c.vocab_size, c.tgt_vocab_size or c.vocab_size
        self.tie_embeddings = c.vocab_size == self.tgt_vocab_size if c.tie_embeddings is None else c.tie_embeddings
        self.d_model, self.n_heads = c.d_model, c.n_heads  # [not in the paper] settings kept for the methods
        self.max_len, self.pad_id = c.max_len, c.pad_id  # [not in the paper] settings kept for the methods
        self.norm_first = c.norm_first  # [not in the paper] settings kept for the methods
        self.src_embed = TokenEmbedding(c.vocab_size, c.d_model, c.pad_id)  # (§3.4)
        self.tgt_embed = TokenEmbedding(self.tgt_vocab_size, c.d_model, c.pad_id)
        self.positional = make_positional(c.positions, c.d_model, c.max_len, c.dropout)  # (§3.5)
        self.encoder, self.decoder = Encoder(c), Decoder(c)  # (§3.1)
        self.generator = Generator(c.d_model, self.tgt_vocab_size)  # (§3.4)
        if self.tie_embeddings:  # one Parameter, three users (§3.4)
            self.tgt_embed.embedding.weight = self.src_embed.embedding.weight
            self.generator.proj.weight = self.src_embed.embedding.weight
        xavier_init_(self, (self.src_embed, self.tgt_embed))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        check_model_inputs(self, src, tgt)  # [not in the paper] argument checks
        real_src = self.real_tokens(src)  # (batch, src_len), True = real token; None: no padding
        memory = self.encoder(self.positional(self.src_embed(src)), real_src)  # (batch, src_len, d_model)
        y = self.decoder(self.positional(self.tgt_embed(tgt)), memory, real_src)  # (batch, tgt_len, d_model)
        return self.generator(y)  # (batch, tgt_len, tgt_vocab_size)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """Source ids ``(batch, src_len)`` → the memory ``(batch, src_len, d_model)``."""
        check_model_inputs(self, src)  # [not in the paper] argument checks
        return self.encoder(self.positional(self.src_embed(src)), self.real_tokens(src))  # (batch, src_len, d_model)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
               cache: DecoderCache | None = None) -> torch.Tensor:
        """Target ids ``(batch, n_new)`` (the whole prefix, or with ``cache`` the new positions, at ``len(cache)``
        onwards), the memory and the source ids → logits ``(batch, n_new, tgt_vocab_size)``; ``cache`` (from
        :meth:`new_cache`) is updated in place."""
        check_model_inputs(self, src, tgt, memory, padding_rows=True)  # [not in the paper] argument checks
        offset = len(cache) if cache is not None else 0
        y = self.positional(self.tgt_embed(tgt), offset=offset)  # (batch, n_new, d_model)
        y = self.decoder(y, memory, self.real_tokens(src), cache=cache)  # (batch, n_new, d_model)
        return self.generator(y)  # (batch, n_new, tgt_vocab_size)

    def real_tokens(self, src: torch.Tensor) -> torch.Tensor | None:
        """Bool ``(batch, src_len)``, True = real token (``src != pad_id``); ``None`` when nothing needs masking: no
        ``pad_id``, or on the CPU (where reading values is free) no padding, so that no mask is built or applied."""
        return real_tokens(src, self.pad_id)

    def new_cache(self) -> DecoderCache:
        """An empty :class:`~tmlib.model.kv_cache.DecoderCache` for incremental decoding with :meth:`decode`."""
        return self.decoder.new_cache()

    def keep_attention(self, flag: bool = True) -> None:
        """Make every layer store its attention weights (``layer.attention_weights``) on the next forward pass."""
        for layer in list(self.encoder.layers) + list(self.decoder.layers):
            layer.keep_attention = flag
            layer.attention_weights = {}


def make_model(preset: str | ModelConfig = "base", src_vocab_size: int | None = None,
               tgt_vocab_size: int | None = None, **overrides) -> Transformer:
    """A freshly initialised :class:`Transformer` from a :class:`~tmlib.model.config.ModelConfig` or the name of a
    preset, in the spirit of the Annotated Transformer's ``make_model``.

    Args:
        preset: a ``ModelConfig``, or a key of :data:`~tmlib.model.config.PRESETS` (``"base"``, ``"big"``,
            ``"small"``, ``"cpu"``, ``"tiny"``).
        src_vocab_size: shorthand for ``vocab_size=...`` (the source, or shared, vocabulary).
        tgt_vocab_size: the target vocabulary size when it differs (then the embeddings are not tied).
        overrides: any ``ModelConfig`` field, e.g. ``dropout=0.0`` or ``pad_id=None``.

    Returns:
        a ``Transformer`` whose ``config`` is the resulting ``ModelConfig``.

    Raises:
        ValueError: an unknown preset name, or an invalid configuration (see ``ModelConfig``).
        TypeError: ``preset`` is neither a name nor a ``ModelConfig``, or an unknown override keyword.
    """
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
    return Transformer(dataclasses.replace(config, **overrides))


def set_dropout(model: nn.Module, p: float) -> None:
    """Set P_drop (§5.4) of every dropout in ``model``: each ``nn.Dropout``, each attention module's ``dropout`` (the
    probability it applies to the attention weights), and ``model.config`` when it has one (checkpoints store it).
    Raises ValueError: ``p`` outside [0, 1)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {p}")
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p
        elif isinstance(getattr(module, "dropout", None), float):
            module.dropout = p
    if isinstance(getattr(model, "config", None), ModelConfig):
        model.config = dataclasses.replace(model.config, dropout=p)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """The number of *unique* parameters of ``model`` (any ``nn.Module``): a tied matrix used three times counts
    once, since ``model.parameters()`` yields each ``Parameter`` once. ``trainable_only``: count only those
    with ``requires_grad``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
