"""The encoder and decoder layers and stacks (paper §3.1).

"The encoder is composed of a stack of N = 6 identical layers. Each layer has two sub-layers. The first is a
multi-head self-attention mechanism, and the second is a simple, position-wise fully connected feed-forward
network. We employ a residual connection around each of the two sub-layers, followed by layer normalization.
[...] The decoder inserts a third sub-layer, which performs multi-head attention over the output of the encoder
stack."

Every layer is built from one :class:`~tmlib.model.config.ModelConfig`, whose defaults are the paper's layers and
whose modern options (chapter 13) swap a part. Masks: boolean, True = may attend / real token.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tmlib.model.attention import MultiHeadAttention
from tmlib.model.config import ModelConfig
from tmlib.model.feed_forward import make_feed_forward
from tmlib.model.kv_cache import DecoderCache, KVCache
from tmlib.model.modern_attention import ModernAttention
from tmlib.model.norms import make_norm

__all__ = ["residual", "AttentionRecording", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder"]


def residual(x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor], norm: nn.Module,
             dropout: nn.Dropout, norm_first: bool = False) -> torch.Tensor:
    """LayerNorm(x + Dropout(Sublayer(x))) (§3.1 and §5.4, post-LN), or with ``norm_first`` the pre-LN
    x + Dropout(Sublayer(LayerNorm(x))); ``x`` and the result ``(batch, seq_len, d_model)``."""
    if norm_first:
        return x + dropout(sublayer(norm(x)))  # (batch, seq_len, d_model)
    return norm(x + dropout(sublayer(x)))  # (batch, seq_len, d_model)


def _self_attention(config: ModelConfig) -> MultiHeadAttention:
    """The paper's multi-head attention, or :class:`ModernAttention` with ``config``'s positions or grouped heads."""
    positions = config.positions if config.positions in ("rope", "alibi") else None
    if positions is None and config.n_kv_heads in (None, config.n_heads):
        return MultiHeadAttention(config.d_model, config.n_heads, dropout=config.dropout, bias=config.bias)
    return ModernAttention(config.d_model, config.n_heads, dropout=config.dropout, bias=config.bias,
                           n_kv_heads=config.n_kv_heads, positions=positions, max_len=config.max_len)


def _cross_attention(config: ModelConfig) -> MultiHeadAttention:
    """The attention over the encoder output: it relates two sequences, so all h heads and no positions."""
    return MultiHeadAttention(config.d_model, config.n_heads, dropout=config.dropout, bias=config.bias)


def _feed_forward(config: ModelConfig) -> nn.Module:
    return make_feed_forward(config.ffn, config.d_model, config.d_ff, config.dropout, bias=config.bias)


def _norm(config: ModelConfig) -> nn.Module:
    return make_norm(config.norm, config.d_model)


class AttentionRecording(nn.Module):
    """A layer that keeps the attention weights of its next forward pass when ``keep_attention`` is set (chapter 11),
    in ``attention_weights["self"]`` (and ``["cross"]``), ``(batch, n_heads, n_q, n_k)``."""

    def __init__(self):
        super().__init__()
        self.keep_attention = False
        self.attention_weights: dict[str, torch.Tensor] = {}

    def record(self, name: str, weights: torch.Tensor | None) -> None:
        """Keep an attention module's ``weights`` as ``name`` if asked (they are None otherwise)."""
        if self.keep_attention:
            self.attention_weights[name] = weights.detach()  # (batch, n_heads, n_q, n_k)


class EncoderLayer(AttentionRecording):
    """Self-attention, then the feed-forward network, each in a :func:`residual` (§3.1, encoder).

    forward: ``x`` ``(batch, n, d_model)``; ``real_keys`` bool ``(batch, n)``, True = real token; ``attn_mask`` bool
    ``(n, n)`` or ``is_causal`` (a GPT-style block) → ``(batch, n, d_model)``. Keys as ``nn.TransformerEncoderLayer``.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn, self.feed_forward = _self_attention(config), _feed_forward(config)
        self.norm1, self.norm2 = _norm(config), _norm(config)
        self.dropout, self.norm_first = nn.Dropout(config.dropout), config.norm_first

    def forward(self, x: torch.Tensor, real_keys: torch.Tensor | None = None, attn_mask: torch.Tensor | None = None,
                is_causal: bool = False) -> torch.Tensor:
        extras = dict(need_weights=self.keep_attention)  # [not in the paper] extras: the kept attention weights

        def self_attention(h):  # (batch, n, d_model) -> same
            out, weights = self.self_attn(h, h, h, attn_mask, real_keys, is_causal=is_causal, **extras)
            self.record("self", weights)  # [not in the paper] keep the weights if asked (chapter 11)
            return out

        x = residual(x, self_attention, self.norm1, self.dropout, self.norm_first)  # (batch, n, d_model)
        return residual(x, self.feed_forward, self.norm2, self.dropout, self.norm_first)  # (batch, n, d_model)


class DecoderLayer(AttentionRecording):
    """Masked self-attention, attention over the encoder output, then the feed-forward network, each in a
    :func:`residual` (§3.1, decoder). ``cross_attention=False``: a GPT-style block (``cross_attn``, ``norm2`` None).

    forward: ``x`` ``(batch, n_new, d_model)``; ``memory`` ``(batch, src_len, d_model)``; ``memory_real_keys`` bool
    ``(batch, src_len)``; ``attn_mask`` bool ``(n_new, n_past + n_new)`` or ``is_causal``; ``cache`` a ``(self_kv,
    cross_kv)`` pair of KVCache → ``(batch, n_new, d_model)``. Keys as ``nn.TransformerDecoderLayer``'s.
    """

    def __init__(self, config: ModelConfig, cross_attention: bool = True):
        super().__init__()
        self.self_attn = _self_attention(config)
        self.cross_attn = _cross_attention(config) if cross_attention else None
        self.feed_forward = _feed_forward(config)
        self.norm1, self.norm2, self.norm3 = _norm(config), _norm(config) if cross_attention else None, _norm(config)
        self.dropout, self.norm_first = nn.Dropout(config.dropout), config.norm_first

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                memory_real_keys: torch.Tensor | None = None, attn_mask: torch.Tensor | None = None,
                cache: tuple[KVCache, KVCache | None] | None = None, is_causal: bool = False) -> torch.Tensor:
        self_kv, cross_kv = cache or (None, None)  # [not in the paper] extras: KV caches, kept attention weights
        extras = {  # [not in the paper] extras: KV caches, kept attention weights
            "self": dict(cache=self_kv, need_weights=self.keep_attention),  # the new keys/values join the cache
            "cross": dict(cache=cross_kv, static_kv=cross_kv is not None,  # the memory, projected once per cache
                          need_weights=self.keep_attention)}

        def self_attention(h):  # (batch, n_new, d_model) -> same
            out, weights = self.self_attn(h, h, h, attn_mask, is_causal=is_causal, **extras["self"])
            self.record("self", weights)  # [not in the paper] keep the weights if asked (chapter 11)
            return out

        def cross_attention(h):  # (batch, n_new, d_model) -> same; queries h, keys and values the memory
            out, weights = self.cross_attn(h, memory, memory, None, memory_real_keys, **extras["cross"])
            self.record("cross", weights)  # [not in the paper] keep the weights if asked (chapter 11)
            return out

        x = residual(x, self_attention, self.norm1, self.dropout, self.norm_first)  # (batch, n_new, d_model)
        if self.cross_attn is not None:
            x = residual(x, cross_attention, self.norm2, self.dropout, self.norm_first)  # (batch, n_new, d_model)
        return residual(x, self.feed_forward, self.norm3, self.dropout, self.norm_first)  # (batch, n_new, d_model)


class Encoder(nn.Module):
    """N = ``config.n_encoder_layers`` :class:`EncoderLayer` (§3.1), with a final norm when pre-LN (its last sum is
    not normalized otherwise). forward: ``x`` ``(batch, src_len, d_model)``, ``real_keys`` ``(batch, src_len)`` or
    None → the memory ``(batch, src_len, d_model)``."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.norm = _norm(config) if config.norm_first else None

    def forward(self, x: torch.Tensor, real_keys: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, real_keys, attn_mask)  # (batch, src_len, d_model)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """N = ``config.n_decoder_layers`` :class:`DecoderLayer`, causal (§3.1, §3.2.3), with a final norm when pre-LN.

    The causal mask is ``is_causal``, not a tensor: none is built for a whole sequence (the flash kernel may run) nor
    for one new token after a cache (it sees every cached one). forward: ``x`` ``(batch, n_new, d_model)`` (with a
    :class:`~tmlib.model.kv_cache.DecoderCache`: the new positions), ``memory``, ``memory_real_keys`` → same shape.
    """

    def __init__(self, config: ModelConfig, cross_attention: bool = True):
        super().__init__()
        self.cross_attention = cross_attention
        self.layers = nn.ModuleList(DecoderLayer(config, cross_attention) for _ in range(config.n_decoder_layers))
        self.norm = _norm(config) if config.norm_first else None

    def new_cache(self) -> DecoderCache:
        """An empty :class:`~tmlib.model.kv_cache.DecoderCache` for this stack."""
        return DecoderCache(len(self.layers), self.cross_attention)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                memory_real_keys: torch.Tensor | None = None, cache: DecoderCache | None = None) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            layer_cache = cache.layer(i) if cache is not None else None
            x = layer(x, memory, memory_real_keys, cache=layer_cache, is_causal=True)  # (batch, n_new, d_model)
        return x if self.norm is None else self.norm(x)
