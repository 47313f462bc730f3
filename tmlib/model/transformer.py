"""The Transformer of the paper's Figure 1 (§3): embeddings, positional encoding, the encoder and decoder stacks,
the generator; and :func:`make_model`, the factory that builds one from a configuration or a preset's name.

"Most competitive neural sequence transduction models have an encoder-decoder structure. Here, the encoder maps
an input sequence of symbol representations (x_1, ..., x_n) to a sequence of continuous representations
z = (z_1, ..., z_n). Given z, the decoder then generates an output sequence (y_1, ..., y_m) of symbols one element
at a time." (§3)

The arguments are checked here, at the model's public boundary (:meth:`Transformer.forward`,
:meth:`~Transformer.encode`, :meth:`~Transformer.decode`, :func:`make_model`); the layers inside trust them. A
source without padding gets no mask at all (see :meth:`Transformer.source_mask`), so that PyTorch may pick its
fastest attention kernels on a GPU.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from tmlib.model.config import ModelConfig, get_preset
from tmlib.model.embeddings import Generator, TokenEmbedding
from tmlib.model.layers import Decoder, DecoderCache, Encoder
from tmlib.model.positional import make_positional
from tmlib.validation import check_sequence

__all__ = ["Transformer", "make_model", "count_parameters", "xavier_init_", "AUTO"]

#: Default of the ``src_key_padding_mask`` arguments of :class:`Transformer`: build the mask from ``pad_id``.
AUTO = "auto"


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
    """The encoder-decoder Transformer of the paper (§3, Figure 1), built from one configuration.

    src ids → TokenEmbedding (×√d_model) → + positional encoding → dropout → Encoder → memory;
    tgt ids → TokenEmbedding → + positional encoding → dropout → Decoder (causal self-attention, attention over
    the memory) → Generator → logits.

    Args:
        config: a :class:`~tmlib.model.config.ModelConfig` (``make_model`` builds one from a preset). Source
            keys equal to ``pad_id`` are masked; target padding is not: with right padding the causal mask
            already keeps real positions from seeing later pads, and the loss ignores pad positions. With
            ``config.tied`` one matrix serves the source embedding, the target embedding and the generator (§3.4).

    Initialisation: every parameter with more than one dimension (weight matrices and the embedding
    matrix) is drawn with ``nn.init.xavier_uniform_``, as in the Annotated Transformer; biases keep
    PyTorch's defaults, LayerNorms start at γ = 1, β = 0; the pad row of the embedding starts at zero.

    Attributes:
        config; src_embed, tgt_embed, positional, encoder, decoder, generator; and from the configuration
        src_vocab_size, tgt_vocab_size, d_model, n_heads, max_len, pad_id, norm_first, tie_embeddings.

    Shapes:
        forward ``src`` long ``(batch, src_len)``, ``tgt`` long ``(batch, tgt_len)``, optional
        ``src_key_padding_mask`` (see :meth:`source_mask`) → logits ``(batch, tgt_len, tgt_vocab_size)``
        (position t predicts token t + 1 of ``tgt``).

    Raises:
        TypeError: ``config`` is not a ``ModelConfig``; inputs that are not integer tensors.
        ValueError: in forward/encode/decode: inputs not 2-D, longer than ``max_len``, batch sizes that differ,
            ids outside the vocabulary, a source row made only of padding.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a tmlib.model.config.ModelConfig, got {type(config).__name__}")
        self.config = c = config
        # the sizes that decoding, training and analysis read from a model
        self.src_vocab_size, self.tgt_vocab_size = c.vocab_size, c.target_vocab_size
        self.d_model, self.n_heads, self.max_len, self.pad_id = c.d_model, c.n_heads, c.max_len, c.pad_id
        self.norm_first, self.tie_embeddings = c.norm_first, c.tied

        self.src_embed = TokenEmbedding(c.vocab_size, c.d_model, c.pad_id)  # (§3.4)
        self.tgt_embed = TokenEmbedding(c.target_vocab_size, c.d_model, c.pad_id)
        self.positional = make_positional(c.positions, c.d_model, c.max_len, c.dropout)  # (§3.5)
        self.encoder = Encoder(c)  # (§3.1)
        self.decoder = Decoder(c)
        self.generator = Generator(c.d_model, c.target_vocab_size)  # (§3.4)
        if self.tie_embeddings:  # one Parameter, three users (§3.4)
            self.tgt_embed.embedding.weight = self.src_embed.embedding.weight
            self.generator.proj.weight = self.src_embed.embedding.weight
        xavier_init_(self, (self.src_embed, self.tgt_embed))

    def padding_mask(self, src: torch.Tensor) -> torch.Tensor | None:
        """Bool ``(batch, src_len)``, True = real token (``src != pad_id``); ``None`` when ``pad_id`` is None."""
        return None if self.pad_id is None else src != self.pad_id

    def source_mask(self, src: torch.Tensor, src_key_padding_mask=AUTO, check_rows: bool = True) -> torch.Tensor | None:
        """The key-padding mask the encoder and the cross-attention use for ``src``, or ``None`` for none.

        A mask that hides nothing still costs: it is materialised, broadcast and applied, and on a GPU it rules
        out PyTorch's flash kernel. Whether a batch has padding is known on the host when the batch is built,
        so the caller may say it instead of the model reading it back from the device (which would make the
        host wait for the GPU at every call):

        * ``src_key_padding_mask=AUTO`` (default): ``src != pad_id``. For a tensor on the CPU the values are
          read (free there): a row of padding only raises ValueError (``check_rows``), and a batch without
          padding gets ``None``. On a GPU the mask is built on the device and nothing is read back.
        * ``None``: the caller states that there is no padding (e.g. the data pipeline knows every source in
          the batch has the same length); no mask.
        * a bool tensor ``(batch, src_len)``, True = real token: used as given (e.g. built on the host with the
          batch and copied with it).

        Raises:
            TypeError: a mask that is not a bool tensor.
            ValueError: a mask of the wrong shape, or (CPU, ``AUTO``) a source row made only of padding.
        """
        if isinstance(src_key_padding_mask, str):
            if src_key_padding_mask != AUTO:
                raise ValueError(f"src_key_padding_mask must be a bool tensor, None or {AUTO!r}, "
                                 f"got {src_key_padding_mask!r}")
        else:
            mask = src_key_padding_mask
            if mask is not None:
                if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
                    raise TypeError(f"src_key_padding_mask must be a bool tensor (True = real token) or None, got "
                                    f"{getattr(mask, 'dtype', type(mask).__name__)}")
                if tuple(mask.shape) != tuple(src.shape):
                    raise ValueError(f"src_key_padding_mask has shape {tuple(mask.shape)}, expected (batch, src_len) "
                                     f"= {tuple(src.shape)}")
            return mask
        mask = self.padding_mask(src)  # (batch, src_len)
        if mask is None or src.device.type != "cpu" or torch.compiler.is_compiling():
            return mask  # on a GPU: no value is read back
        # On the CPU reading values is free: a row of padding only has nothing to attend to, and a batch
        # without padding needs no mask.
        if check_rows and not bool(mask.any(dim=1).all()):
            row = int((~mask.any(dim=1)).nonzero()[0, 0])
            raise ValueError(f"src row {row} consists only of padding (pad_id={self.pad_id}): nothing to attend to")
        return None if bool(mask.all()) else mask

    def keep_attention(self, flag: bool = True) -> None:
        """Make every layer store its attention weights (``layer.attention_weights``) on the next forward pass."""
        for layer in list(self.encoder.layers) + list(self.decoder.layers):
            layer.keep_attention = flag
            layer.attention_weights = {}

    def new_cache(self) -> DecoderCache:
        """An empty :class:`DecoderCache` for incremental decoding with :meth:`decode`."""
        return self.decoder.new_cache()

    def encode(self, src: torch.Tensor, src_key_padding_mask=AUTO) -> torch.Tensor:
        """Source ids ``(batch, src_len)`` → memory ``(batch, src_len, d_model)``.

        ``src_key_padding_mask``: see :meth:`source_mask` (default: from ``pad_id``).
        """
        check_sequence(src, "src", self.max_len)
        mask = self.source_mask(src, src_key_padding_mask)  # (batch, src_len) or None: no padding
        x = self.src_embed(src)  # (batch, src_len, d_model)
        x = self.positional(x)  # (batch, src_len, d_model)
        return self.encoder(x, key_padding_mask=mask)  # (batch, src_len, d_model)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
               cache: DecoderCache | None = None, src_key_padding_mask=AUTO) -> torch.Tensor:
        """Target ids → logits ``(batch, n_new, tgt_vocab_size)``.

        Args:
            tgt: long ``(batch, n_new)``: the whole target prefix, or with ``cache`` only the new position(s),
                which then sit at positions ``len(cache)`` onwards.
            memory: ``(batch, src_len, d_model)`` from :meth:`encode`.
            src: the source ids ``(batch, src_len)`` (for the padding mask).
            cache: a :class:`DecoderCache` from :meth:`new_cache`, updated in place.
            src_key_padding_mask: see :meth:`source_mask` (default: from ``pad_id``).
        """
        check_sequence(tgt, "tgt", self.max_len)
        check_sequence(src, "src", self.max_len)
        expected = (src.shape[0], src.shape[1], self.d_model)
        if memory.dim() != 3 or tuple(memory.shape) != expected:
            raise ValueError(f"memory has shape {tuple(memory.shape)}, expected (batch, src_len, d_model) = {expected}")
        if tgt.shape[0] != src.shape[0]:
            raise ValueError(f"tgt batch size {tgt.shape[0]} differs from src batch size {src.shape[0]}")
        offset = len(cache) if cache is not None else 0
        mask = self.source_mask(src, src_key_padding_mask, check_rows=False)  # (batch, src_len) or None
        y = self.tgt_embed(tgt)  # (batch, n_new, d_model)
        y = self.positional(y, offset=offset)  # (batch, n_new, d_model)
        y = self.decoder(y, memory, mask, cache=cache)  # (batch, n_new, d_model)
        return self.generator(y)  # (batch, n_new, tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_key_padding_mask=AUTO) -> torch.Tensor:
        """Source ids ``(batch, src_len)`` and target ids ``(batch, tgt_len)`` → logits
        ``(batch, tgt_len, tgt_vocab_size)``: :meth:`encode`, then :meth:`decode` (teacher forcing)."""
        check_sequence(src, "src", self.max_len)
        check_sequence(tgt, "tgt", self.max_len)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src batch size {src.shape[0]} differs from tgt batch size {tgt.shape[0]}")
        mask = self.source_mask(src, src_key_padding_mask)  # computed once for the encoder and the decoder
        memory = self.encode(src, mask)  # (batch, src_len, d_model)
        return self.decode(tgt, memory, src, src_key_padding_mask=mask)  # (batch, tgt_len, tgt_vocab_size)


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


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """The number of *unique* parameters of ``model`` (any ``nn.Module``): a tied matrix used three times counts
    once, since ``model.parameters()`` yields each ``Parameter`` once. ``trainable_only``: count only those
    with ``requires_grad``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
