"""The encoder-decoder Transformer (paper §3.1, with §3.2-§3.5 as building blocks).

"The encoder is composed of a stack of N = 6 identical layers. Each layer has two sub-layers. The first is a
multi-head self-attention mechanism, and the second is a simple, position-wise fully connected feed-forward
network. We employ a residual connection around each of the two sub-layers, followed by layer normalization.
[...] The decoder inserts a third sub-layer, which performs multi-head attention over the output of the encoder
stack. [...] We also modify the self-attention sub-layer in the decoder stack to prevent positions from attending
to subsequent positions."  Dropout is applied "to the output of each sub-layer, before it is added to the
sub-layer input and normalized" (§5.4): LayerNorm(x + Dropout(Sublayer(x))), the *post-LN* layout.
``norm_first=True`` gives the *pre-LN* layout x + Dropout(Sublayer(LayerNorm(x))) with a final LayerNorm on each
stack, as ``torch.nn.Transformer(norm_first=True)``.

The same layers build the modern variants of chapter 12 (see :class:`tmlib.model.presets.ModelConfig`): RMSNorm
instead of LayerNorm (``norm="rms"``), a SwiGLU feed-forward (``ffn="swiglu"``), rotary or linear-bias
positions inside self-attention instead of added sinusoids (``positions="rope" | "alibi" | "none"``),
grouped-query attention (``n_kv_heads``) and linear layers without biases (``bias=False``). The defaults are
the paper's model, with the same parameters and state-dict keys as before these options existed.

Masks follow :mod:`tmlib.model.attention`: boolean, True = may attend / real token. The decoder's causal mask is
not materialised (``is_causal``), and a source without padding gets no mask at all (see
:meth:`Transformer.source_mask`), so that PyTorch may pick its fastest attention kernels on a GPU.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tmlib.model.attention import MultiHeadAttention
from tmlib.model.embeddings import Generator, TokenEmbedding
from tmlib.model.feed_forward import make_feed_forward
from tmlib.model.kv_cache import KVCache, causal_mask  # noqa: F401  (causal_mask: re-exported)
from tmlib.model.norms import make_norm
from tmlib.model.positional import make_positional
from tmlib.model.presets import ModelConfig
from tmlib.validation import check_sequence

__all__ = [
    "xavier_init_", "check_sequence", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "DecoderCache", "Transformer",
    "to_nn_transformer", "nn_transformer_logits", "AUTO",
]

#: Default of the ``src_key_padding_mask`` arguments of :class:`Transformer`: build the mask from ``pad_id``.
AUTO = "auto"


def _attention_positions(positions: str | None) -> str | None:
    """The part of a position scheme that :class:`MultiHeadAttention` applies (RoPE, ALiBi), else None."""
    return positions if positions in ("rope", "alibi") else None


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


def _residual(x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor], norm: nn.Module,
              dropout: nn.Dropout, norm_first: bool) -> torch.Tensor:
    """One residual sub-layer (paper §3.1 and §5.4).

    post-LN (the paper): LayerNorm(x + Dropout(Sublayer(x))); pre-LN: x + Dropout(Sublayer(LayerNorm(x))).
    ``norm`` is a LayerNorm or an RMSNorm (:mod:`tmlib.model.norms`).
    Shapes: ``x`` ``(batch, seq_len, d_model)`` → same.
    """
    if norm_first:
        return x + dropout(sublayer(norm(x)))  # (batch, seq_len, d_model)
    return norm(x + dropout(sublayer(x)))  # (batch, seq_len, d_model)


class _Layer(nn.Module):
    """Shared plumbing of encoder and decoder layers: optional recording of attention weights."""

    def __init__(self):
        super().__init__()
        self.keep_attention = False  # set True to store the weights of the next forward pass
        self.attention_weights: dict[str, torch.Tensor] = {}

    def _attend(self, attn: MultiHeadAttention, query: torch.Tensor, kv: torch.Tensor, name: str,
                **kwargs) -> torch.Tensor:
        out, weights = attn(query, kv, kv, need_weights=self.keep_attention, **kwargs)  # (batch, n_q, d_model)
        if self.keep_attention:
            self.attention_weights[name] = weights.detach()  # (batch, n_heads, n_q, n_k)
        return out


class EncoderLayer(_Layer):
    """Self-attention and feed-forward sub-layers, each in a residual block (paper §3.1, encoder).

    Args:
        d_model, n_heads, d_ff: widths (paper: 512, 8, 2048).
        dropout: P_drop for the residual branches, the attention weights and the FFN activations.
        norm_first: False = post-LN as the paper, True = pre-LN.
        norm, ffn, positions, n_kv_heads, bias, max_len: the modern options (keyword only; see
            :class:`tmlib.model.presets.ModelConfig`): ``"layer"``/``"rms"``, ``"relu"``/``"swiglu"``, the position
            scheme (only ``"rope"`` and ``"alibi"`` act inside the layer), key/value heads, biases of the
            linear layers, longest sequence (for the rotary table).

    Shapes:
        forward ``x``: ``(batch, seq_len, d_model)``; ``key_padding_mask``: bool ``(batch, seq_len)``, True = real
        token; ``attn_mask``: bool ``(seq_len, seq_len)`` or as :class:`~tmlib.model.attention.MultiHeadAttention`,
        True = may attend (e.g. :func:`~tmlib.model.attention.causal_mask` for a GPT-style block, or
        ``is_causal=True``, the same without a mask tensor) → ``(batch, seq_len, d_model)``.

    Attributes:
        self_attn, feed_forward, norm1, norm2, dropout1, dropout2; with ``keep_attention = True`` the last
        weights are stored in ``attention_weights["self"]`` ``(batch, n_heads, seq_len, seq_len)``.

    Raises:
        ValueError: from the sub-modules, e.g. ``d_model`` not divisible by ``n_heads``.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False, *,
                 norm: str = "layer", ffn: str = "relu", positions: str | None = None, n_kv_heads: int | None = None,
                 bias: bool = True, max_len: int = 512):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias, n_kv_heads=n_kv_heads,
                                            positions=_attention_positions(positions), max_len=max_len)
        self.feed_forward = make_feed_forward(ffn, d_model, d_ff, dropout, bias=bias)
        self.norm1, self.norm2 = make_norm(norm, d_model), make_norm(norm, d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        def self_attention(h):  # (batch, seq_len, d_model) -> same
            return self._attend(self.self_attn, h, h, "self", attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal)

        x = _residual(x, self_attention, self.norm1, self.dropout1, self.norm_first)  # (batch, seq_len, d_model)
        return _residual(x, self.feed_forward, self.norm2, self.dropout2, self.norm_first)  # (batch, seq_len, d_model)


class DecoderLayer(_Layer):
    """Masked self-attention, cross-attention over the encoder output, feed-forward (paper §3.1, decoder).

    Args:
        d_model, n_heads, d_ff, dropout, norm_first: as :class:`EncoderLayer`.
        cross_attention: False drops the encoder-decoder attention sub-layer, giving the block of a
            decoder-only (GPT-style) model; ``cross_attn`` and ``norm2`` are then ``None``.
        norm, ffn, positions, n_kv_heads, bias, max_len: as :class:`EncoderLayer`; RoPE/ALiBi and the
            grouped key/value heads apply to the self-attention (the cross-attention relates two sequences:
            it keeps all heads and takes no positions).

    Shapes:
        forward ``x``: ``(batch, n_new, d_model)``, the new target positions; ``memory``: encoder output
        ``(batch, src_len, d_model)`` (unused without cross-attention); ``memory_key_padding_mask``: bool
        ``(batch, src_len)``, True = real source token; ``self_attn_mask``: bool ``(n_new, n_past + n_new)``
        (:func:`~tmlib.model.attention.causal_mask`), or ``is_causal=True`` for the same without a mask tensor (what
        :class:`Decoder` passes); ``cache``: ``(self_kv, cross_kv)`` :class:`~tmlib.model.attention.KVCache` pair or
        ``None`` → ``(batch, n_new, d_model)``.

    Attributes:
        self_attn, cross_attn, feed_forward, norm1 (self), norm2 (cross), norm3 (FFN), dropout1-3, in the
        order of ``nn.TransformerDecoderLayer``; with ``keep_attention = True`` the last weights are stored in
        ``attention_weights["self"]`` and ``attention_weights["cross"]``.

    Raises:
        ValueError: ``memory`` is missing although the layer has cross-attention.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False,
                 cross_attention: bool = True, *, norm: str = "layer", ffn: str = "relu", positions: str | None = None,
                 n_kv_heads: int | None = None, bias: bool = True, max_len: int = 512):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias, n_kv_heads=n_kv_heads,
                                            positions=_attention_positions(positions), max_len=max_len)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias) if cross_attention else None
        self.feed_forward = make_feed_forward(ffn, d_model, d_ff, dropout, bias=bias)
        self.norm1 = make_norm(norm, d_model)
        self.norm2 = make_norm(norm, d_model) if cross_attention else None
        self.norm3 = make_norm(norm, d_model)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                memory_key_padding_mask: torch.Tensor | None = None, self_attn_mask: torch.Tensor | None = None,
                cache: tuple[KVCache, KVCache | None] | None = None, is_causal: bool = False) -> torch.Tensor:
        self_kv, cross_kv = cache if cache is not None else (None, None)

        def self_attention(h):  # (batch, n_new, d_model) -> same; new keys/values join the cache
            return self._attend(self.self_attn, h, h, "self", attn_mask=self_attn_mask, cache=self_kv,
                                is_causal=is_causal)

        def cross_attention(h):  # (batch, n_new, d_model) -> same; memory keys/values projected once
            return self._attend(self.cross_attn, h, memory, "cross", key_padding_mask=memory_key_padding_mask,
                                cache=cross_kv, static_kv=cross_kv is not None)

        x = _residual(x, self_attention, self.norm1, self.dropout1, self.norm_first)  # (batch, n_new, d_model)
        if self.cross_attn is not None:
            if memory is None:
                raise ValueError("this DecoderLayer has cross-attention: pass memory (batch, src_len, d_model)")
            x = _residual(x, cross_attention, self.norm2, self.dropout2, self.norm_first)  # (batch, n_new, d_model)
        return _residual(x, self.feed_forward, self.norm3, self.dropout3, self.norm_first)  # (batch, n_new, d_model)


class DecoderCache:
    """Key/value caches of a decoder stack for incremental decoding (one entry per layer).

    ``self_attn[i]`` grows by the new positions at every call; ``cross_attn[i]`` holds the projected encoder
    memory, computed at the first call and reused (``None`` for a decoder without cross-attention).

    ``len(cache)`` is the number of target positions decoded so far; ``reorder(index)`` selects batch rows
    (beam search: ``index`` is a long tensor ``(new_batch,)`` of rows to keep, repeats allowed).
    """

    def __init__(self, n_layers: int, cross_attention: bool = True):
        self.self_attn = [KVCache() for _ in range(n_layers)]
        self.cross_attn = [KVCache() if cross_attention else None for _ in range(n_layers)]

    def __len__(self) -> int:
        return len(self.self_attn[0]) if self.self_attn else 0

    def layer(self, i: int) -> tuple[KVCache, KVCache | None]:
        """The ``(self_kv, cross_kv)`` pair of layer ``i``."""
        return self.self_attn[i], self.cross_attn[i]

    def nbytes(self, self_attention_only: bool = False) -> int:
        """Bytes held by the cached keys and values of every layer (``self_attention_only``: leave out the
        cross-attention's projected memory, which does not grow with the output)."""
        caches = self.self_attn if self_attention_only else self.self_attn + self.cross_attn
        return sum(kv.nbytes() for kv in caches if kv is not None)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (long ``(new_batch,)``) in every non-empty cache, in place."""
        for kv in self.self_attn + self.cross_attn:
            if kv is not None and len(kv) > 0:
                kv.reorder(index)


class Encoder(nn.Module):
    """A stack of ``n_layers`` :class:`EncoderLayer` (paper §3.1: N = 6), plus a final LayerNorm if pre-LN.

    Shapes: forward ``x`` ``(batch, src_len, d_model)``, ``key_padding_mask`` bool ``(batch, src_len)`` (True =
    real token) or ``None`` (no padding), ``attn_mask`` optional → ``(batch, src_len, d_model)``, the *memory*.
    Keyword ``options`` (``norm``, ``ffn``, ``positions``, ``n_kv_heads``, ``bias``, ``max_len``) go to every
    :class:`EncoderLayer`; the final norm of a pre-LN stack is of the same kind.
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, **options):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, **options)
                                    for _ in range(n_layers))
        # post-LN layers already end with a LayerNorm; pre-LN outputs are un-normalized, so add one
        self.norm = make_norm(options.get("norm", "layer"), d_model) if norm_first else None

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, key_padding_mask=key_padding_mask, attn_mask=attn_mask)  # (batch, src_len, d_model)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """A stack of ``n_layers`` :class:`DecoderLayer` with the causal mask built in (paper §3.1 and §3.2.3).

    Shapes: forward ``x`` ``(batch, n_new, d_model)`` (embedded target, all positions or, with ``cache``, only
    the new ones), ``memory`` ``(batch, src_len, d_model)``, ``memory_key_padding_mask`` bool ``(batch, src_len)``
    → ``(batch, n_new, d_model)``.  With a :class:`DecoderCache` holding ``n_past`` positions the new positions
    attend to the cached ones and to themselves causally.  The causal mask is passed as ``is_causal``, not
    as a tensor: no mask is built for a full sequence (PyTorch's flash kernel may run) nor for a single new
    token with a cache (it may see every cached position).  Keyword ``options`` go to every
    :class:`DecoderLayer`.
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, cross_attention: bool = True, **options):
        super().__init__()
        self.cross_attention = cross_attention
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, cross_attention, **options)
            for _ in range(n_layers)
        )
        self.norm = make_norm(options.get("norm", "layer"), d_model) if norm_first else None

    def new_cache(self) -> DecoderCache:
        """An empty :class:`DecoderCache` for this stack."""
        return DecoderCache(len(self.layers), self.cross_attention)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                memory_key_padding_mask: torch.Tensor | None = None, cache: DecoderCache | None = None) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, memory_key_padding_mask, cache=cache.layer(i) if cache is not None else None,
                      is_causal=True)  # (batch, n_new, d_model): new positions see the cached ones and the past
        return x if self.norm is None else self.norm(x)


class Transformer(nn.Module):
    """The encoder-decoder Transformer of the paper (§3, Figure 1).

    src ids → TokenEmbedding (×√d_model) → + positional encoding → dropout → Encoder → memory;
    tgt ids → TokenEmbedding → + PE → dropout → Decoder (causal self-attention, cross-attention on memory) →
    Generator → logits.

    Args:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model, n_heads, n_encoder_layers, n_decoder_layers, d_ff, dropout: the paper's d_model, h, N, N, d_ff,
            P_drop (defaults: the base model of Table 3).
        max_len: longest sequence accepted (size of the positional table).
        pad_id: padding id (source keys equal to it are masked), or ``None`` for no padding mask.  Target
            padding is not masked: with right padding the causal mask already keeps real positions from
            seeing later pads, and the loss ignores pad positions.
        tie_embeddings: share one matrix between source embedding, target embedding and the generator's
            weight (§3.4).  ``None`` (default) ties when ``src_vocab_size == tgt_vocab_size``.
        norm_first: False = post-LN (paper), True = pre-LN with a final LayerNorm on each stack.
        norm, ffn, positions, n_kv_heads, bias: the modern options of chapter 12 (keyword only; the
            defaults are the paper's model): ``"layer"``/``"rms"``; ``"relu"``/``"swiglu"``;
            ``"sinusoidal"`` (added to the embeddings), ``"rope"``/``"alibi"`` (in every self-attention;
            the cross-attention takes none) or ``"none"``; key/value heads of the self-attentions (GQA);
            biases of the attention and feed-forward linear layers.

    Initialisation: every parameter with more than one dimension (weight matrices and the embedding
    matrix) is drawn with ``nn.init.xavier_uniform_``, as in the Annotated Transformer; biases keep
    PyTorch's defaults, LayerNorms start at γ = 1, β = 0; the pad row of the embedding starts at zero.

    Shapes:
        forward ``src`` long ``(batch, src_len)``, ``tgt`` long ``(batch, tgt_len)``, optional
        ``src_key_padding_mask`` (see :meth:`source_mask`) → logits ``(batch, tgt_len, tgt_vocab_size)``
        (position t predicts token t + 1 of ``tgt``).

    Raises:
        ValueError: ``d_model`` not divisible by ``n_heads`` or odd; ``tie_embeddings=True`` with different
            vocabulary sizes; in forward/encode/decode: inputs not 2-D, longer than ``max_len``, batch sizes
            that differ, ids outside the vocabulary, a source row made only of padding.
        TypeError: inputs that are not integer tensors.
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 512, n_heads: int = 8,
                 n_encoder_layers: int = 6, n_decoder_layers: int = 6, d_ff: int = 2048, dropout: float = 0.1,
                 max_len: int = 512, pad_id: int | None = 0, tie_embeddings: bool | None = None,
                 norm_first: bool = False, *, norm: str = "layer", ffn: str = "relu", positions: str = "sinusoidal",
                 n_kv_heads: int | None = None, bias: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        tie_asked = tie_embeddings
        if tie_embeddings is None:
            tie_embeddings = src_vocab_size == tgt_vocab_size
        elif tie_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                f"tie_embeddings=True needs one shared vocabulary, got src_vocab_size={src_vocab_size} "
                f"and tgt_vocab_size={tgt_vocab_size}"
            )
        #: the one configuration type of the library (:class:`tmlib.model.presets.ModelConfig`); checkpoints store it
        self.config = ModelConfig(
            d_model=d_model, n_heads=n_heads, n_encoder_layers=n_encoder_layers, n_decoder_layers=n_decoder_layers,
            d_ff=d_ff, dropout=dropout, max_len=max_len, norm_first=norm_first, vocab_size=src_vocab_size,
            tgt_vocab_size=None if tgt_vocab_size == src_vocab_size else tgt_vocab_size, pad_id=pad_id,
            tie_embeddings=tie_asked, norm=norm, ffn=ffn, positions=positions, n_kv_heads=n_kv_heads, bias=bias)
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.d_model, self.n_heads, self.max_len, self.pad_id = d_model, n_heads, max_len, pad_id
        self.norm_first, self.tie_embeddings = norm_first, bool(tie_embeddings)

        self.src_embed = TokenEmbedding(src_vocab_size, d_model, pad_id)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model, pad_id)
        self.positional = make_positional(positions, d_model, max_len, dropout)
        options = dict(norm=norm, ffn=ffn, positions=positions, n_kv_heads=n_kv_heads, bias=bias, max_len=max_len)
        self.encoder = Encoder(n_encoder_layers, d_model, n_heads, d_ff, dropout, norm_first, **options)
        self.decoder = Decoder(n_decoder_layers, d_model, n_heads, d_ff, dropout, norm_first, **options)
        self.generator = Generator(d_model, tgt_vocab_size)
        if self.tie_embeddings:  # one Parameter, three users (§3.4)
            self.tgt_embed.embedding.weight = self.src_embed.embedding.weight
            self.generator.proj.weight = self.src_embed.embedding.weight
        xavier_init_(self, (self.src_embed, self.tgt_embed))

    @classmethod
    def from_config(cls, config: ModelConfig) -> "Transformer":
        """A freshly initialised model from a :class:`~tmlib.model.presets.ModelConfig` (what :func:`~tmlib.model.presets.make_model`
        calls)."""
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a tmlib.model.presets.ModelConfig, got {type(config).__name__}")
        return cls(config.vocab_size, config.target_vocab_size, d_model=config.d_model, n_heads=config.n_heads,
                   n_encoder_layers=config.n_encoder_layers, n_decoder_layers=config.n_decoder_layers, d_ff=config.d_ff,
                   dropout=config.dropout, max_len=config.max_len, pad_id=config.pad_id,
                   tie_embeddings=config.tie_embeddings, norm_first=config.norm_first, norm=config.norm, ffn=config.ffn,
                   positions=config.positions, n_kv_heads=config.n_kv_heads, bias=config.bias)

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
        check_sequence(src, "src", self.max_len)
        check_sequence(tgt, "tgt", self.max_len)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src batch size {src.shape[0]} differs from tgt batch size {tgt.shape[0]}")
        mask = self.source_mask(src, src_key_padding_mask)  # computed once for the encoder and the decoder
        memory = self.encode(src, mask)  # (batch, src_len, d_model)
        return self.decode(tgt, memory, src, src_key_padding_mask=mask)  # (batch, tgt_len, tgt_vocab_size)


# --------------------------------------------------------------------------- checking against torch.nn


def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """Copy W^Q, W^K, W^V (stacked into ``in_proj``) and W^O into an ``nn.MultiheadAttention``."""
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))  # (3 d_model, d_model)
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))  # (3 d_model,)
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)


def to_nn_transformer(model: Transformer) -> nn.Transformer:
    """A ``torch.nn.Transformer`` (batch_first, dropout 0) holding copies of ``model``'s encoder and decoder weights.

    ``nn.Transformer`` has no embeddings, positional encoding or generator: feed it ``model``'s.  It always adds a
    final LayerNorm to each stack; for a post-LN ``model`` (the paper) those norms are removed
    (``encoder.norm = decoder.norm = None``), for a pre-LN one they receive ``model``'s final norms.
    Use :func:`nn_transformer_logits` to run it with the same masks.

    Raises:
        ValueError: ``model`` uses an option ``nn.Transformer`` lacks (RMSNorm, SwiGLU, RoPE/ALiBi/no
            positions, grouped key/value heads, no biases).
    """
    c = model.config
    modern = {k: v for k, v in (("norm", c.norm), ("ffn", c.ffn), ("positions", c.positions), ("bias", c.bias))
              if v != getattr(ModelConfig, k)}
    if c.n_kv_heads not in (None, c.n_heads):
        modern["n_kv_heads"] = c.n_kv_heads
    if modern:
        raise ValueError(f"nn.Transformer has only the paper's layers; this model uses {modern}")
    enc0 = model.encoder.layers[0]
    p = next(model.parameters())
    ref = nn.Transformer(
        d_model=model.d_model, nhead=model.n_heads, num_encoder_layers=len(model.encoder.layers),
        num_decoder_layers=len(model.decoder.layers), dim_feedforward=enc0.feed_forward.d_ff, dropout=0.0,
        batch_first=True, norm_first=model.norm_first, device=p.device, dtype=p.dtype,
    )
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, ref.encoder.layers):
            _copy_attention(ours.self_attn, theirs.self_attn)
            for name in ("linear1", "linear2"):
                getattr(theirs, name).load_state_dict(getattr(ours.feed_forward, name).state_dict())
            for name in ("norm1", "norm2"):
                getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())
        for ours, theirs in zip(model.decoder.layers, ref.decoder.layers):
            _copy_attention(ours.self_attn, theirs.self_attn)
            _copy_attention(ours.cross_attn, theirs.multihead_attn)
            for name in ("linear1", "linear2"):
                getattr(theirs, name).load_state_dict(getattr(ours.feed_forward, name).state_dict())
            for name in ("norm1", "norm2", "norm3"):
                getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())
        if model.norm_first:
            ref.encoder.norm.load_state_dict(model.encoder.norm.state_dict())
            ref.decoder.norm.load_state_dict(model.decoder.norm.state_dict())
        else:
            ref.encoder.norm = None
            ref.decoder.norm = None
    return ref.train(model.training)


def nn_transformer_logits(model: Transformer, ref: nn.Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Logits ``(batch, tgt_len, tgt_vocab_size)`` of ``ref`` (from :func:`to_nn_transformer`) wrapped in ``model``'s
    embeddings, positional encoding and generator, with the same masks in ``nn``'s convention
    (``True`` = *blocked*: the causal mask ``~tril`` and ``src == pad_id`` as the key-padding masks).
    """
    n = tgt.shape[1]
    pad = None if model.pad_id is None else src == model.pad_id  # (batch, src_len), True = pad
    blocked = ~torch.ones(n, n, dtype=torch.bool, device=tgt.device).tril()  # (tgt_len, tgt_len), True = future
    out = ref(model.positional(model.src_embed(src)), model.positional(model.tgt_embed(tgt)), tgt_mask=blocked,
              src_key_padding_mask=pad, memory_key_padding_mask=pad)  # (batch, tgt_len, d_model)
    return model.generator(out)  # (batch, tgt_len, tgt_vocab_size)
