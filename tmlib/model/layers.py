"""The encoder and decoder stacks (paper §3.1), built from attention (§3.2) and the feed-forward network (§3.3).

"The encoder is composed of a stack of N = 6 identical layers. Each layer has two sub-layers. The first is a
multi-head self-attention mechanism, and the second is a simple, position-wise fully connected feed-forward
network. We employ a residual connection around each of the two sub-layers, followed by layer normalization.
[...] The decoder inserts a third sub-layer, which performs multi-head attention over the output of the encoder
stack. [...] We also modify the self-attention sub-layer in the decoder stack to prevent positions from attending
to subsequent positions."

Every layer is built from one :class:`~tmlib.model.config.ModelConfig`, whose defaults are the paper's layers;
its modern options (chapter 12) swap a part: RMSNorm for LayerNorm, SwiGLU for the ReLU network, rotary or
linear-bias positions and grouped key/value heads in the self-attentions, linear layers without biases.

Masks follow :mod:`tmlib.model.attention`: boolean, True = may attend / real token.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tmlib.model.attention import MultiHeadAttention
from tmlib.model.kv_cache import KVCache
from tmlib.model.config import ModelConfig
from tmlib.model.feed_forward import make_feed_forward
from tmlib.model.norms import make_norm

__all__ = ["residual", "AttentionRecording", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "DecoderCache"]


def residual(x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor], norm: nn.Module,
             dropout: nn.Dropout, norm_first: bool = False) -> torch.Tensor:
    """A sub-layer with its residual connection and normalization (§3.1, with the dropout of §5.4).

    "The output of each sub-layer is LayerNorm(x + Sublayer(x))", and dropout is applied "to the output of each
    sub-layer, before it is added to the sub-layer input and normalized": LayerNorm(x + Dropout(Sublayer(x))),
    the *post-LN* layout. ``norm_first=True`` gives the *pre-LN* layout x + Dropout(Sublayer(LayerNorm(x))).

    Args:
        x: ``(batch, seq_len, d_model)``.
        sublayer: self-attention, cross-attention or the feed-forward network, ``(batch, seq_len, d_model)`` →
            same.
        norm: ``nn.LayerNorm`` or :class:`~tmlib.model.norms.RMSNorm`; dropout: ``nn.Dropout(P_drop)``.

    Returns:
        ``(batch, seq_len, d_model)``.
    """
    if norm_first:
        return x + dropout(sublayer(norm(x)))  # (batch, seq_len, d_model)
    return norm(x + dropout(sublayer(x)))  # (batch, seq_len, d_model)


def _self_attention(config: ModelConfig) -> MultiHeadAttention:
    """The self-attention of a layer: h heads (``n_kv_heads`` of them for keys and values), with RoPE or ALiBi
    inside when ``config.positions`` says so."""
    positions = config.positions if config.positions in ("rope", "alibi") else None
    return MultiHeadAttention(config.d_model, config.n_heads, dropout=config.dropout, bias=config.bias,
                              n_kv_heads=config.n_kv_heads, positions=positions, max_len=config.max_len)


def _cross_attention(config: ModelConfig) -> MultiHeadAttention:
    """The attention over the encoder output: it relates two sequences, so all h heads and no positions."""
    return MultiHeadAttention(config.d_model, config.n_heads, dropout=config.dropout, bias=config.bias)


def _feed_forward(config: ModelConfig) -> nn.Module:
    """The feed-forward sub-layer of ``config`` (ReLU as §3.3, or SwiGLU)."""
    return make_feed_forward(config.ffn, config.d_model, config.d_ff, config.dropout, bias=config.bias)


def _norm(config: ModelConfig) -> nn.Module:
    """The normalization of ``config`` (LayerNorm as §3.1, or RMSNorm)."""
    return make_norm(config.norm, config.d_model)


class AttentionRecording(nn.Module):
    """What the encoder and decoder layers share: recording the attention weights of the next forward pass (chapter 10) when
    ``keep_attention`` is True, in ``attention_weights["self"]`` (and ``["cross"]``),
    ``(batch, n_heads, n_q, n_k)``."""

    def __init__(self):
        super().__init__()
        self.keep_attention = False
        self.attention_weights: dict[str, torch.Tensor] = {}

    def attend(self, attn: MultiHeadAttention, query: torch.Tensor, kv: torch.Tensor, name: str,
               **kwargs) -> torch.Tensor:
        """``attn(query, kv, kv)`` → ``(batch, n_q, d_model)``, recording the weights as ``name``."""
        out, weights = attn(query, kv, kv, need_weights=self.keep_attention, **kwargs)  # (batch, n_q, d_model)
        if self.keep_attention:
            self.attention_weights[name] = weights.detach()  # (batch, n_heads, n_q, n_k)
        return out


class EncoderLayer(AttentionRecording):
    """Self-attention, then the feed-forward network, each in a :func:`residual` (paper §3.1, encoder).

    Args:
        config: the sizes, P_drop, layout and modern options (:class:`~tmlib.model.config.ModelConfig`).

    Shapes:
        forward ``x``: ``(batch, seq_len, d_model)``; ``key_padding_mask``: bool ``(batch, seq_len)``, True = real
        token; ``attn_mask``: bool ``(seq_len, seq_len)``, True = may attend, or ``is_causal=True`` (the causal
        mask without a tensor) for a GPT-style block → ``(batch, seq_len, d_model)``.

    Attributes:
        self_attn, feed_forward, norm1, norm2, dropout (state-dict keys as ``nn.TransformerEncoderLayer``'s).
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm_first = config.norm_first
        self.self_attn = _self_attention(config)
        self.feed_forward = _feed_forward(config)
        self.norm1, self.norm2 = _norm(config), _norm(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        def self_attention(h):  # (batch, seq_len, d_model) -> same
            return self.attend(self.self_attn, h, h, "self", attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                               is_causal=is_causal)

        x = residual(x, self_attention, self.norm1, self.dropout, self.norm_first)  # (batch, seq_len, d_model)
        return residual(x, self.feed_forward, self.norm2, self.dropout, self.norm_first)  # (batch, seq_len, d_model)


class DecoderLayer(AttentionRecording):
    """Masked self-attention, attention over the encoder output, then the feed-forward network, each in a
    :func:`residual` (paper §3.1, decoder).

    Args:
        config: as :class:`EncoderLayer`; RoPE/ALiBi and grouped key/value heads apply to the self-attention
            only (the cross-attention relates two sequences: all heads, no positions).
        cross_attention: False leaves out the attention over the encoder output: the block of a decoder-only
            (GPT-style) model; ``cross_attn`` and ``norm2`` are then ``None``.

    Shapes:
        forward ``x``: ``(batch, n_new, d_model)``, the new target positions; ``memory``: the encoder output
        ``(batch, src_len, d_model)`` (required with cross-attention); ``memory_key_padding_mask``: bool
        ``(batch, src_len)``, True = real source token; ``self_attn_mask``: bool ``(n_new, n_past + n_new)``, or
        ``is_causal=True`` (what :class:`Decoder` passes); ``cache``: a ``(self_kv, cross_kv)`` pair of
        :class:`~tmlib.model.attention.KVCache` or ``None`` → ``(batch, n_new, d_model)``.

    Attributes:
        self_attn, cross_attn, feed_forward, norm1 (self), norm2 (cross), norm3 (feed-forward), dropout
        (state-dict keys as ``nn.TransformerDecoderLayer``'s).
    """

    def __init__(self, config: ModelConfig, cross_attention: bool = True):
        super().__init__()
        self.norm_first = config.norm_first
        self.self_attn = _self_attention(config)
        self.cross_attn = _cross_attention(config) if cross_attention else None
        self.feed_forward = _feed_forward(config)
        self.norm1 = _norm(config)
        self.norm2 = _norm(config) if cross_attention else None
        self.norm3 = _norm(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                memory_key_padding_mask: torch.Tensor | None = None, self_attn_mask: torch.Tensor | None = None,
                cache: tuple[KVCache, KVCache | None] | None = None, is_causal: bool = False) -> torch.Tensor:
        self_kv, cross_kv = cache if cache is not None else (None, None)

        def self_attention(h):  # (batch, n_new, d_model) -> same; the new keys/values join the cache
            return self.attend(self.self_attn, h, h, "self", attn_mask=self_attn_mask, cache=self_kv,
                               is_causal=is_causal)

        def cross_attention(h):  # (batch, n_new, d_model) -> same; the memory is projected once per cache
            return self.attend(self.cross_attn, h, memory, "cross", key_padding_mask=memory_key_padding_mask,
                               cache=cross_kv, static_kv=cross_kv is not None)

        x = residual(x, self_attention, self.norm1, self.dropout, self.norm_first)  # (batch, n_new, d_model)
        if self.cross_attn is not None:
            x = residual(x, cross_attention, self.norm2, self.dropout, self.norm_first)  # (batch, n_new, d_model)
        return residual(x, self.feed_forward, self.norm3, self.dropout, self.norm_first)  # (batch, n_new, d_model)


class Encoder(nn.Module):
    """The encoder: a stack of N = ``config.n_encoder_layers`` :class:`EncoderLayer` (paper §3.1), with a final
    norm when pre-LN (its last residual sum is not normalized otherwise; a post-LN layer already ends with one).

    Shapes:
        forward ``x``: ``(batch, src_len, d_model)``; ``key_padding_mask``: bool ``(batch, src_len)``, True = real
        token, or ``None`` (no padding) → the *memory* ``(batch, src_len, d_model)``.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.norm = _norm(config) if config.norm_first else None

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, key_padding_mask=key_padding_mask, attn_mask=attn_mask)  # (batch, src_len, d_model)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """The decoder: a stack of N = ``config.n_decoder_layers`` :class:`DecoderLayer` whose self-attention is
    causal (paper §3.1 and §3.2.3), with a final norm when pre-LN.

    The causal mask is passed as ``is_causal``, not as a tensor: none is built for a whole sequence (PyTorch's
    flash kernel may run), nor for one new token after a :class:`DecoderCache` of ``n_past`` positions (it may
    see them all); new positions see the cached ones and, causally, each other.

    Shapes:
        forward ``x``: ``(batch, n_new, d_model)``, the embedded target (all positions, or with ``cache`` the new
        ones); ``memory``: ``(batch, src_len, d_model)``; ``memory_key_padding_mask``: bool ``(batch, src_len)``
        → ``(batch, n_new, d_model)``.
    """

    def __init__(self, config: ModelConfig, cross_attention: bool = True):
        super().__init__()
        self.cross_attention = cross_attention
        self.layers = nn.ModuleList(DecoderLayer(config, cross_attention) for _ in range(config.n_decoder_layers))
        self.norm = _norm(config) if config.norm_first else None

    def new_cache(self) -> DecoderCache:
        """An empty :class:`DecoderCache` for this stack."""
        return DecoderCache(len(self.layers), self.cross_attention)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                memory_key_padding_mask: torch.Tensor | None = None, cache: DecoderCache | None = None) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, memory_key_padding_mask, cache=cache.layer(i) if cache is not None else None,
                      is_causal=True)  # (batch, n_new, d_model)
        return x if self.norm is None else self.norm(x)


class DecoderCache:
    """The key/value caches of a decoder stack for incremental decoding, one pair per layer.

    ``self_attn[i]`` grows by the new positions at every call; ``cross_attn[i]`` holds the projected encoder
    memory, computed at the first call and reused (``None`` for a decoder without cross-attention).
    ``len(cache)`` is the number of target positions decoded so far.
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
        """Keep batch rows ``index`` (long ``(new_batch,)``, repeats allowed: beam search) in every non-empty
        cache, in place."""
        for kv in self.self_attn + self.cross_attn:
            if kv is not None and len(kv) > 0:
                kv.reorder(index)
