"""Attention in PyTorch (paper §3.2): equation 1, its fused kernel, and multi-head attention.

* :func:`attend`: Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V (§3.2.1, equation 1), written as the paper
  writes it, returning the attention weights too.
* :func:`attend_fused`: the same output from PyTorch's fused kernel, which never stores the weights.
* :func:`scaled_dot_product_attention`: the checked entry point: validates its arguments, then runs one of the two.
* :class:`MultiHeadAttention`: MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O (§3.2.2).

Beyond the paper (chapter 12), each a named step of :meth:`MultiHeadAttention.forward`: grouped-query attention
(:func:`repeat_kv`), rotary positions (:mod:`tmlib.model.rotary`) and linear biases (:mod:`tmlib.model.alibi`).
The decoder's causal mask and its KV cache are in :mod:`tmlib.model.kv_cache`.

Conventions
-----------
* Masks are **boolean**, ``True`` = *may attend*, as in :func:`torch.nn.functional.scaled_dot_product_attention`
  and :mod:`tmlib.ref`; float ("additive") masks are refused with a :class:`TypeError`.
* ``key_padding_mask`` is ``True`` for a **real** token: the *opposite* of :class:`torch.nn.MultiheadAttention`,
  whose ``key_padding_mask`` is ``True`` for padding (convert with ``~mask``).
* A query whose keys are *all* masked (a left-padded query that is itself padding) has no softmax distribution:
  its output and its weights are defined as **zeros** (the fused kernel could return NaN;
  :func:`tmlib.ref.scaled_dot_product_attention` raises instead).
* Shapes are never broadcast silently: every mismatch raises :class:`ValueError` naming the shapes.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tmlib.model.alibi import ALiBi
from tmlib.model.attention_checks import check_attention_args, check_multi_head_args, check_multi_head_config
from tmlib.model.kv_cache import KVCache, with_causal_mask
from tmlib.model.rotary import RotaryEmbedding

__all__ = ["attend", "attend_fused", "repeat_kv", "scaled_dot_product_attention", "MultiHeadAttention"]


def attend(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, bias: Tensor | None = None,
           dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V, the paper's equation 1 (§3.2.1), with its weights.

    "We compute the dot products of the query with all keys, divide each by √d_k, and apply a softmax function to
    obtain the weights on the values."  The arguments are not checked: :func:`scaled_dot_product_attention` and
    :class:`MultiHeadAttention` check them first.

    Args:
        query: ``(..., n_q, d_k)``; key: ``(..., n_k, d_k)``; value: ``(..., n_k, d_v)``; one floating dtype.
        mask: bool, broadcastable to ``(..., n_q, n_k)``, True = may attend (§3.2.3: the others are set to −∞).
        bias: float, broadcastable to ``(..., n_q, n_k)``, added to the scores (ALiBi, :mod:`tmlib.model.alibi`).
        dropout_p: probability of zeroing a weight (§5.4; 0 when not training).

    Returns:
        ``(output, weights)``: ``(..., n_q, d_v)`` and ``(..., n_q, n_k)`` (after dropout: the weights that
        multiplied ``value``).  A query with no allowed key gets weights 0 and output 0.
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
    """The output of :func:`attend` from PyTorch's fused kernel (flash, memory-efficient or math, PyTorch's
    choice), which never stores the ``(n_q, n_k)`` weights (FlashAttention, Dao et al. 2022).

    Same arguments as :func:`attend`, plus ``is_causal``: the queries are the last ``n_q`` of the ``n_k``
    positions and see no later key (§3.2.3).  Alone and with ``n_q == n_k`` that is PyTorch's own flag, which
    needs no mask tensor and so lets the flash kernel run; otherwise the causal mask is built.

    Returns:
        ``(..., n_q, d_v)``; 0 for a query with no allowed key (where the kernel could return NaN).
    """
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
    """Grouped-query attention (Ainslie et al. 2023): each key/value head serves ``n_rep`` consecutive query heads.

    Args:
        x: keys or values ``(..., n_kv_heads, n_k, d)``.
        n_rep: query heads per key/value head, ``n_heads / n_kv_heads``.

    Returns:
        ``(..., n_kv_heads * n_rep, n_k, d)``: head h of the result is head ``h // n_rep`` of ``x`` (``x`` itself
        when ``n_rep == 1``), as PyTorch's ``enable_gqa`` and Hugging Face's ``repeat_kv``.
    """
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=-3)


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
    need_weights: bool = False, training: bool = False, *, is_causal: bool = False,
    attn_bias: Tensor | None = None, enable_gqa: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V (paper §3.2.1, equation 1), with its arguments checked.

    ``need_weights=True`` runs :func:`attend`, the formula written out, and returns the weights;
    ``need_weights=False`` (default) runs :func:`attend_fused`, PyTorch's fused kernel, and returns ``None``
    for them.  Both give the same output up to rounding.

    Args:
        query: ``(..., n_q, d_k)``, floating point.
        key: ``(..., n_k, d_k)``, same dtype and leading (batch) dimensions as ``query``.
        value: ``(..., n_k, d_v)``, same dtype and leading dimensions.
        attn_mask: optional bool tensor broadcastable to ``(..., n_q, n_k)`` (e.g. ``(n_q, n_k)`` or
            ``(batch, 1, 1, n_k)``); True = the query may attend to that key.  A query row with no allowed key
            gets output 0 and weights 0.
        dropout_p: probability of zeroing an attention weight, used only when ``training`` is True.
        need_weights: return the attention weights (the formula) or ``None`` (the fused kernel).
        training: apply dropout (True) or not (False: deterministic).
        is_causal: the queries are the *last* ``n_q`` of ``n_k`` positions and attend causally, as
            :func:`~tmlib.model.kv_cache.causal_mask` (combined with ``attn_mask`` by "and"); unlike PyTorch's
            flag (aligned to the top-left corner) it stays right for queries that follow cached keys.
        attn_bias: optional float tensor broadcastable to ``(..., n_q, n_k)``, added to the scores (ALiBi).
        enable_gqa: grouped-query attention: ``key``/``value`` have fewer heads than ``query`` on axis -3
            (``n_kv_heads`` dividing ``n_heads``), expanded by :func:`repeat_kv`.

    Returns:
        ``(output, weights)``: ``(..., n_q, d_v)`` in the dtype of ``query``; ``(..., n_q, n_k)`` (after
        dropout) or ``None``.

    Raises:
        TypeError: an input is not a tensor, the dtypes differ, the mask is not boolean, or the bias is not
            floating point.
        ValueError: fewer than 2 dimensions, ``d_k`` of query and key differ, key and value have a different
            number of positions, leading dimensions differ (with ``enable_gqa``: key heads that do not divide
            query heads), the mask or bias does not broadcast to ``(..., n_q, n_k)``, ``is_causal`` with more
            queries than keys, or ``dropout_p`` is outside [0, 1).
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
    """Multi-head attention (paper §3.2.2), optionally with grouped key/value heads and rotary or linear-bias
    positions (chapter 12).

    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,  head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i).

    The h per-head projections ``(d_model, d_k)`` are stored side by side as one ``nn.Linear(d_model, d_model)``
    each for Q, K and V (head i owns output features ``i*d_k … (i+1)*d_k - 1``), so one matrix product projects
    all heads and a reshape separates them.  d_k = d_v = d_model / h, as in the paper.

    Grouped-query attention (GQA, Ainslie et al. 2023): with ``n_kv_heads < n_heads`` only ``n_kv_heads`` key and
    value heads are projected (``w_k``, ``w_v`` have ``n_kv_heads * d_k`` outputs), each shared by
    ``n_heads / n_kv_heads`` consecutive query heads; ``n_kv_heads = 1`` is multi-query attention (Shazeer 2019).
    The KV cache stores only the ``n_kv_heads`` heads.

    Args:
        d_model: model width.
        n_heads: number of (query) heads h; must divide ``d_model``.
        dropout: dropout probability on the attention weights (training mode only).
        bias: whether the four linear layers have biases (the paper's equations have none;
            ``nn.MultiheadAttention`` has them by default).
        device, dtype: passed to the linear layers.
        n_kv_heads: key/value heads (``None``: ``n_heads``, the paper's multi-head attention); must divide
            ``n_heads``.
        positions: ``None`` (positions come from the input, as the paper's sinusoids), ``"rope"`` (rotate queries
            and keys, :class:`~tmlib.model.rotary.RotaryEmbedding`) or ``"alibi"`` (linear biases on the scores,
            :class:`~tmlib.model.alibi.ALiBi`).  Query r sits at position ``offset + r`` and key j at j, where
            ``offset`` is the KV cache's length before the call (0 without a cache).
        max_len: positions of the rotary table (``positions="rope"``).
        rope_base: the base of the rotary frequencies (10000).

    Attributes:
        w_q, w_o: ``nn.Linear(d_model, d_model)``; w_k, w_v: ``nn.Linear(d_model, n_kv_heads * d_k)``.
        d_model, n_heads, n_kv_heads, d_k, dropout, positions: the settings.
        rotary: :class:`~tmlib.model.rotary.RotaryEmbedding` or ``None``; alibi: :class:`~tmlib.model.alibi.ALiBi`
            or ``None`` (no parameters: state dicts are those of the paper's module).

    Raises:
        ValueError: ``d_model`` is not divisible by ``n_heads``, ``n_heads`` by ``n_kv_heads``, a size is not
            positive, ``dropout`` is outside [0, 1), an unknown ``positions``, or an odd ``d_k`` with RoPE.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 device=None, dtype=None, *, n_kv_heads: int | None = None, positions: str | None = None,
                 max_len: int = 512, rope_base: float = 10000.0) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        check_multi_head_config(d_model, n_heads, n_kv_heads, dropout, positions)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_k = d_model // n_heads  # width of one head, d_k = d_v = d_model / h
        self.dropout, self.positions = dropout, positions
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.w_q = nn.Linear(d_model, n_heads * self.d_k, **kw)  # W^Q_1 … W^Q_h side by side
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, **kw)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, **kw)
        self.w_o = nn.Linear(n_heads * self.d_k, d_model, **kw)  # W^O
        self.rotary = RotaryEmbedding(self.d_k, max_len, rope_base) if positions == "rope" else None
        self.alibi = ALiBi(n_heads) if positions == "alibi" else None

    def extra_repr(self) -> str:
        extra = "" if self.n_kv_heads == self.n_heads else f", n_kv_heads={self.n_kv_heads}"
        extra += "" if self.positions is None else f", positions={self.positions}"
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, dropout={self.dropout}{extra}"

    def split_heads(self, x: Tensor, n_heads: int) -> Tensor:
        """``(batch, n, n_heads * d_k)`` → ``(batch, n_heads, n, d_k)``: each head a separate matrix."""
        batch, n, _ = x.shape
        return x.view(batch, n, n_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:
        """``(batch, n_heads, n, d_k)`` → ``(batch, n, n_heads * d_k)``: Concat(head_1, …, head_h)."""
        batch, _, n, _ = x.shape
        return x.transpose(1, 2).reshape(batch, n, self.n_heads * self.d_k)

    @staticmethod
    def merge_masks(attn_mask: Tensor | None, key_padding_mask: Tensor | None) -> Tensor | None:
        """One bool mask for all heads from :meth:`MultiHeadAttention.forward`'s two (checked) masks.

        Args:
            attn_mask: ``None``, ``(n_q, n_k)``, ``(batch, n_q, n_k)`` or ``(batch, n_heads, n_q, n_k)``.
            key_padding_mask: ``None`` or ``(batch, n_k)``, True = real token.

        Returns:
            ``None`` or a mask broadcastable to ``(batch, n_heads, n_q, n_k)``: both masks combined by "and".
        """
        if attn_mask is not None and attn_mask.dim() == 2:
            attn_mask = attn_mask[None, None]  # (1, 1, n_q, n_k): the same for every sentence and head
        elif attn_mask is not None and attn_mask.dim() == 3:
            attn_mask = attn_mask[:, None]  # (batch, 1, n_q, n_k): the same for every head
        if key_padding_mask is None:
            return attn_mask
        padding = key_padding_mask[:, None, None, :]  # (batch, 1, 1, n_k): no query sees a padding key
        return padding if attn_mask is None else attn_mask & padding

    def forward(self, query: Tensor, key: Tensor | None, value: Tensor | None, attn_mask: Tensor | None = None,
                key_padding_mask: Tensor | None = None, need_weights: bool = False, cache: KVCache | None = None,
                static_kv: bool = False, is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value`` with h heads: project, split, attend, merge, W^O.

        Args:
            query: ``(batch, n_q, d_model)``.
            key, value: ``(batch, n_k_new, d_model)``; may be ``None`` only with ``static_kv=True`` and a filled cache.
            attn_mask: bool, ``(n_q, n_k)``, ``(batch, n_q, n_k)`` or ``(batch, n_heads, n_q, n_k)``; True = may
                attend.  (The 3-D form is per batch element, not ``nn.MultiheadAttention``'s ``(batch*n_heads, …)``.)
            key_padding_mask: bool ``(batch, n_k)``, **True = real token**, False = padding (the opposite of
                ``nn.MultiheadAttention``).  ``None`` when there is no padding: no mask is built, which keeps
                PyTorch's fastest kernels available.
            need_weights: also return the per-head weights (:func:`attend`; otherwise :func:`attend_fused`
                runs and ``None`` is returned).
            cache: a :class:`~tmlib.model.kv_cache.KVCache` for incremental decoding; ``n_k`` in the mask shapes
                is the number of keys attended over (the cache length after appending).
            static_kv: with a cache: False (decoder self-attention) appends the new keys/values to the cache;
                True (cross-attention) projects ``key``/``value`` on the first call only and reuses them.
            is_causal: the queries are the last ``n_q`` of the ``n_k`` positions and see no later one (§3.2.3),
                without a mask tensor: equal to ``attn_mask=causal_mask(n_q, n_k)`` (and-ed with ``attn_mask``).

        Returns:
            ``(output, weights)``: ``(batch, n_q, d_model)``; ``(batch, n_heads, n_q, n_k)`` or ``None``.  A query
            with every key masked gets output ``w_o``'s bias (the heads give zeros) and an all-zero weight row.

        Raises:
            TypeError: inputs are not tensors, or a mask is not boolean.
            ValueError: inputs not 3-D, last size not ``d_model``, batch sizes differ, key and value lengths
                differ, a mask has the wrong shape, key/value are missing, ``is_causal`` with more queries than
                keys, positions with ``static_kv``, or positions past the rotary table.
        """
        attn_mask, key_padding_mask = check_multi_head_args(self, query, key, value, attn_mask, key_padding_mask,
                                                            cache, static_kv, is_causal)
        offset = len(cache) if cache is not None and not static_kv else 0  # position of the first new query
        q = self.split_heads(self.w_q(query), self.n_heads)  # (batch, n_heads, n_q, d_k)
        if static_kv and cache is not None and len(cache) > 0:  # cross-attention: memory projected on step 1
            k, v = cache.k, cache.v  # (batch, n_kv_heads, n_k, d_k)
        else:
            k = self.split_heads(self.w_k(key), self.n_kv_heads)  # (batch, n_kv_heads, n_k_new, d_k)
            v = self.split_heads(self.w_v(value), self.n_kv_heads)  # (batch, n_kv_heads, n_k_new, d_k)
            if self.rotary is not None:  # RoPE: turn queries and keys by their positions
                q, k = self.rotary(q, offset), self.rotary(k, offset)
            if cache is not None:  # decoding: keep the keys and values of the past
                k, v = cache.append(k, v)  # (batch, n_kv_heads, n_k, d_k), n_k = cached + new
        n_q, n_k = q.shape[-2], k.shape[-2]
        mask = self.merge_masks(attn_mask, key_padding_mask)  # (batch | 1, n_heads | 1, n_q, n_k) or None
        bias = None if self.alibi is None else self.alibi(n_q, n_k, offset, dtype=q.dtype, device=q.device)
        group = self.n_heads // self.n_kv_heads  # GQA: query heads per key/value head (1 in the paper)
        k, v = repeat_kv(k, group), repeat_kv(v, group)  # (batch, n_heads, n_k, d_k)
        p = self.dropout if self.training else 0.0
        if need_weights:  # the formula, which also gives the weights
            mask = with_causal_mask(mask, n_q, n_k, q.device) if is_causal else mask
            heads, weights = attend(q, k, v, mask, bias, p)  # (batch, n_heads, n_q, d_k), (…, n_q, n_k)
        else:  # PyTorch's fused kernel: the same output, the weights never stored
            heads, weights = attend_fused(q, k, v, mask, bias, p, is_causal), None
        return self.w_o(self.merge_heads(heads)), weights  # (batch, n_q, d_model): Concat(head_1, …) W^O

    @classmethod
    def from_per_head_weights(cls, w_q, w_k, w_v, w_o, dtype=None, device=None) -> "MultiHeadAttention":
        """Build a bias-free module from per-head matrices, as the lecture writes them.

        Head i computes ``X @ w_q[i]``; side by side the heads compute ``X @ W`` with
        ``W = [w_q[0] | w_q[1] | …]`` of shape ``(d_model, h*d_k)``.  ``nn.Linear`` computes
        ``X @ weight.T``, so ``weight = W.T``.  The output projection ``w_o`` multiplies the
        concatenated heads, ``(h*d_v, d_model)``, so ``w_o.weight = w_o.T``.

        Args:
            w_q, w_k, w_v: ``(h, d_model, d_k)`` arrays or tensors (NumPy is fine).
            w_o: ``(h * d_k, d_model)``.
            dtype: torch dtype of the module; default the inputs' floating dtype (NumPy float64 gives float64).
            device: where to put the module.

        Returns:
            A :class:`MultiHeadAttention` with ``bias=False`` and ``dropout=0``.

        Raises:
            ValueError: shapes disagree, or ``h * d_k != d_model`` (this module keeps d_k = d_model / h;
                :data:`tmlib.course.examples.MHA_EXAMPLE_3` with 3 heads of width 2 on d_model 4 does not fit).
        """
        ws = [w.detach() if isinstance(w, Tensor) else torch.from_numpy(np.array(w)) for w in (w_q, w_k, w_v, w_o)]
        if dtype is None:
            dtype = ws[0].dtype if ws[0].is_floating_point() else torch.get_default_dtype()
        wq, wk, wv, wo = [w.to(dtype=dtype) for w in ws]
        if wq.dim() != 3 or wk.shape != wq.shape or wv.shape != wq.shape:
            raise ValueError(f"w_q, w_k, w_v must all have shape (h, d_model, d_k), got "
                             f"{tuple(wq.shape)}, {tuple(wk.shape)}, {tuple(wv.shape)}")
        h, d_model, d_k = wq.shape
        if h * d_k != d_model:
            raise ValueError(f"h * d_k = {h} * {d_k} = {h * d_k} must equal d_model = {d_model} for this module")
        if tuple(wo.shape) != (h * d_k, d_model):
            raise ValueError(f"w_o must have shape (h * d_k, d_model) = {(h * d_k, d_model)}, got {tuple(wo.shape)}")
        mha = cls(d_model, h, bias=False, device=device, dtype=dtype)
        with torch.no_grad():
            for lin, w in ((mha.w_q, wq), (mha.w_k, wk), (mha.w_v, wv)):
                side_by_side = w.permute(1, 0, 2).reshape(d_model, h * d_k)  # (d_model, h*d_k), head-major columns
                lin.weight.copy_(side_by_side.T)  # nn.Linear stores (out, in)
            mha.w_o.weight.copy_(wo.T)
        return mha

