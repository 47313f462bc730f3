"""Multi-head attention with chapter 13's options: grouped key/value heads, rotary positions, linear biases.

* Grouped-query attention (GQA, Ainslie et al. 2023): only ``n_kv_heads`` key and value heads, each shared by
  ``n_heads / n_kv_heads`` query heads (:func:`~tmlib.model.attention.repeat_kv`); ``n_kv_heads = 1`` is multi-query
  attention (Shazeer 2019). The KV cache holds the ``n_kv_heads`` heads only.
* RoPE (:mod:`tmlib.model.rotary`): queries and keys turned by their positions before the scores.
* ALiBi (:mod:`tmlib.model.alibi`): a distance penalty added to the scores.

Query r sits at position ``offset + r`` and key j at j, ``offset`` being the cache's length before the call.
"""
from __future__ import annotations

from torch import Tensor, nn

from tmlib.model.alibi import ALiBi
from tmlib.model.attention import MultiHeadAttention, repeat_kv
from tmlib.model.checks import check_attention_config, check_multi_head_args
from tmlib.model.kv_cache import KVCache
from tmlib.model.masks import merge_masks
from tmlib.model.rotary import RotaryEmbedding

__all__ = ["ModernAttention"]


class ModernAttention(MultiHeadAttention):
    """:class:`~tmlib.model.attention.MultiHeadAttention` with ``n_kv_heads`` key/value heads (``None``: ``n_heads``)
    and ``positions`` ``None``, ``"rope"`` (a rotary table of ``max_len`` positions, base ``rope_base``) or
    ``"alibi"``. Self-attention only: ``static_kv`` is refused. Same state-dict keys as the paper's module.

    Raises:
        ValueError: as the paper's module, and ``n_kv_heads`` not dividing ``n_heads``, an unknown ``positions``, or
            an odd ``d_k`` with RoPE.
    """

    cross_attention = False  # positions and grouped heads belong to self-attention

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True, device=None,
                 dtype=None, *, n_kv_heads: int | None = None, positions: str | None = None, max_len: int = 512,
                 rope_base: float = 10000.0) -> None:
        nn.Module.__init__(self)  # the paper's attributes, with W^K and W^V narrower under GQA
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        check_attention_config(d_model, n_heads, dropout, n_kv_heads, positions)
        self.d_model, self.n_heads, self.d_k, self.dropout = d_model, n_heads, d_model // n_heads, dropout
        self.n_kv_heads, self.positions = n_kv_heads, positions
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.w_q = nn.Linear(d_model, d_model, **kw)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, **kw)  # n_kv_heads heads
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, **kw)
        self.w_o = nn.Linear(d_model, d_model, **kw)
        self.rotary = RotaryEmbedding(self.d_k, max_len, rope_base) if positions == "rope" else None
        self.alibi = ALiBi(n_heads) if positions == "alibi" else None

    def forward(self, query: Tensor, key: Tensor | None, value: Tensor | None, attn_mask: Tensor | None = None,
                real_keys: Tensor | None = None, need_weights: bool = False, cache: KVCache | None = None,
                static_kv: bool = False, is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """As :meth:`MultiHeadAttention.forward <tmlib.model.attention.MultiHeadAttention.forward>`, with the
        positions and the grouped heads as named steps."""
        attn_mask, real_keys = check_multi_head_args(self, query, key, value, attn_mask, real_keys, cache,
                                                     static_kv, is_causal)
        offset = len(cache) if cache is not None else 0  # position of the first new query
        q = self.split_heads(self.w_q(query))  # (batch, n_heads, n_q, d_k)
        k = self.split_heads(self.w_k(key), self.n_kv_heads)  # (batch, n_kv_heads, n_new, d_k)
        v = self.split_heads(self.w_v(value), self.n_kv_heads)  # (batch, n_kv_heads, n_new, d_k)
        if self.rotary is not None:  # RoPE: turn queries and keys by their positions
            q, k = self.rotary(q, offset), self.rotary(k, offset)
        if cache is not None:  # decoding: the keys and values of the past too
            k, v = cache.append(k, v)  # (batch, n_kv_heads, n_k, d_k)
        n_q, n_k = q.shape[-2], k.shape[-2]
        bias = None if self.alibi is None else self.alibi(n_q, n_k, offset, dtype=q.dtype, device=q.device)
        group = self.n_heads // self.n_kv_heads  # GQA: query heads per key/value head
        k, v = repeat_kv(k, group), repeat_kv(v, group)  # (batch, n_heads, n_k, d_k)
        mask = merge_masks(attn_mask, real_keys)  # (batch | 1, n_heads | 1, n_q, n_k) or None
        heads, weights = self.attention(q, k, v, mask, need_weights, is_causal, bias)  # (batch, n_heads, n_q, d_k)
        return self.w_o(self.merge_heads(heads)), weights  # (batch, n_q, d_model)

    def extra_repr(self) -> str:
        extra = "" if self.n_kv_heads == self.n_heads else f", n_kv_heads={self.n_kv_heads}"
        extra += "" if self.positions is None else f", positions={self.positions}"
        return super().extra_repr() + extra
