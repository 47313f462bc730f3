"""Attention in PyTorch (paper §3.2): equation 1, its fused kernel, and multi-head attention.

* :func:`attend`: Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V, written as the paper writes it, with its weights;
  :func:`attend_fused`: the same output from PyTorch's fused kernel, which never stores the weights;
  :func:`scaled_dot_product_attention`: the checked entry point to the two.
* :class:`MultiHeadAttention`: MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O (§3.2.2), with the KV cache of
  incremental decoding. Chapter 13's options (RoPE, ALiBi, grouped key/value heads) are its subclass
  :class:`~tmlib.model.modern_attention.ModernAttention`.

Masks are boolean, True = may attend (:mod:`tmlib.model.masks`); a query with no allowed key gets weights and
output 0, not NaN.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tmlib.model.checks import (
    check_attention_args, check_attention_config, check_multi_head_args, check_per_head_weights
)
from tmlib.model.kv_cache import KVCache
from tmlib.model.masks import merge_masks, with_causal_mask

__all__ = ["attend", "attend_fused", "repeat_kv", "scaled_dot_product_attention", "MultiHeadAttention"]


def attend(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, bias: Tensor | None = None,
           dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V (§3.2.1, equation 1), unchecked: ``(output, weights)``.

    query ``(..., n_q, d_k)``, key ``(..., n_k, d_k)``, value ``(..., n_k, d_v)``; mask: bool, True = may attend;
    bias: float, added to the scores (ALiBi) → ``(..., n_q, d_v)``, ``(..., n_q, n_k)``.
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., n_q, n_k)
    if bias is not None:
        scores = scores + bias  # ALiBi: a penalty that grows with the distance
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # blocked: weight exactly 0
    weights = torch.softmax(scores, dim=-1)  # (..., n_q, n_k), each row sums to 1
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # no allowed key: 0, not NaN
    weights = F.dropout(weights, p=dropout_p)  # (..., n_q, n_k)
    return weights @ value, weights  # (..., n_q, d_v), (..., n_q, n_k)


def attend_fused(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                 bias: Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False) -> Tensor:
    """The output of :func:`attend` from PyTorch's fused kernel, which never stores the ``(n_q, n_k)`` weights
    (FlashAttention, Dao et al. 2022). ``is_causal``: the queries are the last ``n_q`` of the ``n_k`` positions and
    see no later key; with ``n_q == n_k`` and nothing else that is PyTorch's own flag (no mask tensor)."""
    n_q, n_k = query.shape[-2], key.shape[-2]
    if is_causal and mask is None and bias is None and n_q == n_k:  # the plain lower triangle: no mask tensor
        return F.scaled_dot_product_attention(query, key, value, dropout_p=dropout_p, is_causal=True)
    if is_causal:
        mask = with_causal_mask(mask, n_q, n_k, device=query.device)  # (..., n_q, n_k) or None (one query)
    if mask is None:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=bias, dropout_p=dropout_p)
    row_ok = mask.any(dim=-1, keepdim=True)  # (..., n_q, 1): the query may see at least one key
    mask = mask | ~row_ok  # a row with no key would be NaN: let it see every key, zero it below
    if bias is not None:
        mask = torch.where(mask, bias, float("-inf"))  # one float mask: the bias where allowed, −∞ elsewhere
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)  # (..., n_q, d_v)
    return out.masked_fill(~row_ok, 0.0)


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """Grouped-query attention (Ainslie et al. 2023): ``(..., n_kv_heads, n_k, d)`` → ``(..., n_kv_heads * n_rep,
    n_k, d)``, head h of the result being head ``h // n_rep`` of ``x`` (as PyTorch's ``enable_gqa``)."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=-3)


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
    need_weights: bool = False, training: bool = False, *, is_causal: bool = False,
    attn_bias: Tensor | None = None, enable_gqa: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Equation 1 with its arguments checked: :func:`attend` when ``need_weights``, else :func:`attend_fused` (the
    weights are then ``None``); dropout only when ``training``.

    Args:
        query ``(..., n_q, d_k)``, key ``(..., n_k, d_k)``, value ``(..., n_k, d_v)``: one floating dtype.
        attn_mask: bool, broadcastable to ``(..., n_q, n_k)``, True = may attend.
        is_causal: the queries are the *last* ``n_q`` of ``n_k`` positions (unlike PyTorch's flag, aligned to the
            top-left corner): right after a KV cache. attn_bias: float, added to the scores (ALiBi).
        enable_gqa: key/value have ``n_kv_heads`` (dividing ``n_heads``) heads on axis -3.

    Returns:
        ``(output, weights)``: ``(..., n_q, d_v)``; ``(..., n_q, n_k)`` or ``None``.

    Raises:
        TypeError: not tensors, dtypes that differ, a mask that is not boolean, a bias that is not floating point.
        ValueError: shapes that disagree (named in the message), ``is_causal`` with more queries than keys, or
            ``dropout_p`` outside [0, 1).
    """
    attn_mask, attn_bias = check_attention_args(query, key, value, attn_mask, attn_bias, dropout_p, is_causal,
                                                enable_gqa)
    if enable_gqa:
        n_rep = query.shape[-3] // key.shape[-3]
        key, value = repeat_kv(key, n_rep), repeat_kv(value, n_rep)  # (..., n_heads, n_k, d)
    p = dropout_p if training else 0.0
    if need_weights:  # the formula, which also gives the weights
        mask = with_causal_mask(attn_mask, query.shape[-2], key.shape[-2], query.device) if is_causal else attn_mask
        return attend(query, key, value, mask, attn_bias, p)
    return attend_fused(query, key, value, attn_mask, attn_bias, p, is_causal), None


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O, head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i) (§3.2.2).

    d_k = d_v = d_model / h. The h projections of Q (of K, of V) sit side by side in one ``nn.Linear(d_model,
    d_model)``: head i owns output features ``i*d_k … (i+1)*d_k - 1``.

    Raises:
        ValueError: ``n_heads`` does not divide ``d_model``, a size is not positive, ``dropout`` outside [0, 1).
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        check_attention_config(d_model, n_heads, dropout)
        self.d_model, self.n_heads, self.d_k, self.dropout = d_model, n_heads, d_model // n_heads, dropout
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.w_q = nn.Linear(d_model, d_model, **kw)  # W^Q_1 … W^Q_h side by side
        self.w_k = nn.Linear(d_model, d_model, **kw)
        self.w_v = nn.Linear(d_model, d_model, **kw)
        self.w_o = nn.Linear(d_model, d_model, **kw)  # W^O

    def forward(self, query: Tensor, key: Tensor | None, value: Tensor | None, attn_mask: Tensor | None = None,
                real_keys: Tensor | None = None, need_weights: bool = False, cache: KVCache | None = None,
                static_kv: bool = False, is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """Project, split into heads, attend (equation 1), concatenate, project with W^O (§3.2.2).

        query ``(batch, n_q, d_model)``, key and value ``(batch, n_k, d_model)``; ``attn_mask`` bool ``(n_q, n_k)``,
        ``(batch, n_q, n_k)`` or ``(batch, n_heads, n_q, n_k)``, True = may attend; ``real_keys`` bool ``(batch, n_k)``,
        True = real token; ``cache``: a KVCache the new keys join (``static_kv``: projected once) → ``(batch, n_q,
        d_model)``, weights ``(batch, n_heads, n_q, n_k)`` or None. Raises TypeError, ValueError (shapes named).
        """
        # [not in the paper] argument checks (shapes, dtypes, masks)
        attn_mask, real_keys = check_multi_head_args(self, query, key, value, attn_mask, real_keys, cache,
                                                     static_kv, is_causal)
        q = self.split_heads(self.w_q(query))  # (batch, n_heads, n_q, d_k)
        k, v = self.keys_values(key, value, cache, static_kv)  # (batch, n_heads, n_k, d_k), the cached ones too
        mask = merge_masks(attn_mask, real_keys)  # (batch | 1, n_heads | 1, n_q, n_k) or None
        heads, weights = self.attention(q, k, v, mask, need_weights, is_causal)  # (batch, n_heads, n_q, d_k)
        return self.w_o(self.merge_heads(heads)), weights  # (batch, n_q, d_model): Concat(head_1, …, head_h) W^O

    def split_heads(self, x: Tensor, n_heads: int | None = None) -> Tensor:
        """``(batch, n, n_heads * d_k)`` → ``(batch, n_heads, n, d_k)``: each head a separate matrix."""
        batch, n, _ = x.shape
        return x.view(batch, n, n_heads or self.n_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:
        """``(batch, n_heads, n, d_k)`` → ``(batch, n, n_heads * d_k)``: Concat(head_1, …, head_h)."""
        batch, _, n, _ = x.shape
        return x.transpose(1, 2).reshape(batch, n, self.n_heads * self.d_k)

    def keys_values(self, key: Tensor, value: Tensor, cache: KVCache | None = None,
                    static_kv: bool = False) -> tuple[Tensor, Tensor]:
        """K W^K and V W^V split into heads, ``(batch, n_heads, n_k, d_k)`` each; with a cache, after the cached
        positions (self-attention), or projected on the first call and reused (``static_kv``: the memory)."""
        if static_kv and cache is not None and len(cache) > 0:
            return cache.k, cache.v  # cross-attention: the memory, projected on the first step
        k, v = self.split_heads(self.w_k(key)), self.split_heads(self.w_v(value))  # (batch, n_heads, n_new, d_k)
        return (k, v) if cache is None else cache.append(k, v)

    def attention(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, need_weights: bool = False,
                  is_causal: bool = False, bias: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Equation 1 on every head: :func:`attend` (with the weights) or :func:`attend_fused` (``None``), with
        dropout on the weights in training mode (§5.4)."""
        p = self.dropout if self.training else 0.0
        if need_weights:
            mask = with_causal_mask(mask, q.shape[-2], k.shape[-2], q.device) if is_causal else mask
            return attend(q, k, v, mask, bias, p)  # (batch, n_heads, n_q, d_k), (…, n_q, n_k)
        return attend_fused(q, k, v, mask, bias, p, is_causal), None

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, dropout={self.dropout}"

    cross_attention = True  # may attend over another sequence's cached keys (static_kv)

    @classmethod
    def from_per_head_weights(cls, w_q, w_k, w_v, w_o, dtype=None, device=None) -> "MultiHeadAttention":
        """A bias-free module from the lecture's per-head matrices ``w_q``, ``w_k``, ``w_v`` ``(h, d_model, d_k)``
        and ``w_o`` ``(h * d_k, d_model)`` (arrays or tensors; dtype: theirs, or the default for integers).

        Head i computes ``X @ w_q[i]``, so side by side ``X @ [w_q[0] | w_q[1] | …]``; ``nn.Linear`` computes
        ``X @ weight.T``, so ``weight`` is that matrix transposed.

        Raises:
            ValueError: shapes that disagree, or ``h * d_k != d_model``.
        """
        ws = [w.detach() if isinstance(w, Tensor) else torch.from_numpy(np.array(w)) for w in (w_q, w_k, w_v, w_o)]
        if dtype is None:
            dtype = ws[0].dtype if ws[0].is_floating_point() else torch.get_default_dtype()
        wq, wk, wv, wo = [w.to(dtype=dtype) for w in ws]
        check_per_head_weights(wq, wk, wv, wo)
        h, d_model, d_k = wq.shape
        mha = cls(d_model, h, bias=False, device=device, dtype=dtype)
        with torch.no_grad():
            for lin, w in ((mha.w_q, wq), (mha.w_k, wk), (mha.w_v, wv)):
                side_by_side = w.permute(1, 0, 2).reshape(d_model, h * d_k)  # (d_model, h*d_k), head-major columns
                lin.weight.copy_(side_by_side.T)  # nn.Linear stores (out, in)
            mha.w_o.weight.copy_(wo.T)
        return mha
