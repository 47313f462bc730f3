"""Scaled dot-product and multi-head attention in PyTorch (paper §3.2).

This is the PyTorch counterpart of :mod:`tmlib.ref.numpy_ref`: the same equations, written
for batches of tensors on any device, with an incremental-decoding cache.

* :func:`scaled_dot_product_attention` – Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V
  (§3.2.1, equation 1), either through PyTorch's fused kernel or written out so that the
  attention weights can be returned.
* :class:`MultiHeadAttention` – MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O
  (§3.2.2), with all heads computed at once by reshaping.
* :class:`KVCache` – the keys and values of past positions, for decoding one token at a
  time (§3.2.3: the decoder attends only to earlier positions, so earlier keys and values
  never change and can be kept).
* :func:`causal_mask` – the decoder's "no peeking ahead" mask (§3.2.3).

Beyond the paper (chapter 12), :class:`MultiHeadAttention` also offers grouped-query attention
(``n_kv_heads``; Ainslie et al. 2023, multi-query for 1 head, Shazeer 2019) and positions applied inside
attention (``positions="rope"``, :mod:`tmlib.model.rotary`; ``positions="alibi"``, :mod:`tmlib.model.alibi`).

Speed on a GPU, without changing any result:

* self-attention projects Q, K and V with **one** matrix product (the three weights side by side), still
  stored as the modules ``w_q``, ``w_k``, ``w_v`` (checkpoints and the lecture's per-head weights keep
  their names);
* ``is_causal=True`` describes the causal mask instead of materialising it: with no other mask PyTorch's
  flash kernel can run (it refuses explicit masks); a single new query with a KV cache needs no mask at all;
* nothing on the forward path reads a value back from the device (no ``.item()``, ``bool(tensor)``).

Conventions
-----------
* Masks are **boolean**, ``True`` = *may attend*, as in
  :func:`torch.nn.functional.scaled_dot_product_attention` and :mod:`tmlib.ref.numpy_ref`.
  Float ("additive") masks are refused with a :class:`TypeError`.
* ``key_padding_mask`` of :meth:`MultiHeadAttention.forward` is ``True`` for a **real**
  token.  This is the *opposite* of :class:`torch.nn.MultiheadAttention`, whose
  ``key_padding_mask`` is ``True`` for a *padding* token; convert with ``~mask``.
* A query row whose keys are *all* masked has no softmax distribution.  Here its output
  is defined as **zeros** and its attention weights as all zeros (the fused kernel would
  return NaN; :func:`tmlib.ref.numpy_ref.scaled_dot_product_attention` raises instead).  This
  happens, for example, for a left-padded query that is itself padding.
* Shapes are never broadcast silently: batch sizes and widths must match exactly, and
  every mismatch raises :class:`ValueError` naming the shapes.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["scaled_dot_product_attention", "causal_mask", "KVCache", "MultiHeadAttention"]


def _check_tensor(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _check_bool_mask(mask, name: str) -> Tensor:
    _check_tensor(mask, name)
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a boolean tensor (True = may attend), got dtype {mask.dtype}; "
            f"float (additive) masks are not accepted"
        )
    return mask


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    training: bool = False,
    *,
    is_causal: bool = False,
    attn_bias: Tensor | None = None,
    enable_gqa: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V  (paper §3.2.1, equation 1).

    Two paths compute the same thing:

    * ``need_weights=False`` (default): :func:`torch.nn.functional.scaled_dot_product_attention`,
      PyTorch's fused kernel (flash / memory-efficient / math, chosen by PyTorch).  The
      weights are never materialised, so ``None`` is returned for them.
    * ``need_weights=True``: the formula written out, returning the weights.

    With ``is_causal=True`` and no other mask or bias the fused path passes PyTorch's own ``is_causal``
    flag (no mask tensor, so the flash kernel is allowed); otherwise the causal mask is built and combined.

    Args:
        query: ``(..., n_q, d_k)``, floating point.
        key: ``(..., n_k, d_k)``, same dtype, device and leading (batch) dimensions as ``query``.
        value: ``(..., n_k, d_v)``, same dtype, device and leading dimensions.
        attn_mask: optional bool tensor broadcastable to ``(..., n_q, n_k)`` (for example
            ``(n_q, n_k)`` or ``(batch, 1, 1, n_k)``); ``True`` = the query may attend to that
            key.  Blocked weights are exactly 0.  A query row with no allowed key gets
            output 0 and weights 0 (see the module docstring).
        dropout_p: probability of zeroing an attention weight (§5.4 applies dropout to
            sub-layer outputs; applying it to the weights is the common practice of the
            reference implementations).  Used only when ``training`` is True.
        need_weights: return the attention weights (explicit path) or ``None`` (fused path).
        training: apply dropout (True) or not (False, evaluation: deterministic).
        is_causal: the queries are the *last* ``n_q`` of ``n_k`` positions and attend causally: query r may
            see key j when ``j <= r + n_k - n_q`` (as :func:`causal_mask`; combined with ``attn_mask`` by
            "and").  With ``n_q == n_k`` this is PyTorch's ``is_causal``; unlike PyTorch's flag (aligned
            to the top-left corner), it stays right for queries that follow cached keys.
        attn_bias: optional float tensor broadcastable to ``(..., n_q, n_k)``, added to the scores before
            the softmax (ALiBi's linear biases, :mod:`tmlib.model.alibi`).  Not a mask: blocking stays with the
            boolean ``attn_mask``.
        enable_gqa: grouped-query attention (Ainslie et al. 2023): ``key``/``value`` have fewer heads than
            ``query`` on axis -3 (``n_kv_heads`` dividing ``n_heads``); query head h uses key/value head
            ``h // (n_heads / n_kv_heads)``, as PyTorch's ``enable_gqa`` and Hugging Face's ``repeat_kv``.

    Returns:
        ``(output, weights)``: output ``(..., n_q, d_v)`` in the dtype of ``query``; weights
        ``(..., n_q, n_k)`` (after dropout, i.e. the weights that multiplied ``value``) or
        ``None`` when ``need_weights`` is False.

    Raises:
        TypeError: an input is not a tensor, the dtypes differ, the mask is not boolean, or the bias is
            not floating point.
        ValueError: fewer than 2 dimensions, ``d_k`` of query and key differ, key and value
            have a different number of positions, leading dimensions differ (with ``enable_gqa``: key
            heads that do not divide query heads), the mask or bias does not broadcast to
            ``(..., n_q, n_k)``, ``is_causal`` with more queries than keys, or ``dropout_p`` is outside
            [0, 1).
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        _check_tensor(x, name)
        if x.dim() < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (..., seq_len, dim), got shape {tuple(x.shape)}")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"query, key and value must share a dtype, got {query.dtype}, {key.dtype}, {value.dtype}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must share d_k: query has shape {tuple(query.shape)}, key has shape {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same number of positions n_k: "
            f"key has shape {tuple(key.shape)}, value has shape {tuple(value.shape)}"
        )
    if key.shape[:-2] != value.shape[:-2]:
        raise ValueError(f"key and value must share their leading dimensions: got {tuple(key.shape)}, {tuple(value.shape)}")
    if enable_gqa:
        if (query.dim() < 3 or key.dim() != query.dim() or query.shape[:-3] != key.shape[:-3]
                or query.shape[-3] % key.shape[-3]):
            raise ValueError(
                f"with enable_gqa, query (..., n_heads, n_q, d_k) and key/value (..., n_kv_heads, n_k, d) must share "
                f"their batch dimensions and n_kv_heads must divide n_heads: got {tuple(query.shape)}, "
                f"{tuple(key.shape)}"
            )
    elif not (query.shape[:-2] == key.shape[:-2]):
        raise ValueError(
            f"query, key and value must share their leading (batch) dimensions exactly: got "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    n_q, d_k = query.shape[-2], query.shape[-1]
    n_k = key.shape[-2]
    scores_shape = (*query.shape[:-2], n_q, n_k)

    if is_causal and n_q > n_k:
        raise ValueError(f"is_causal needs at least as many keys as queries (queries are the last positions), "
                         f"got n_q={n_q}, n_k={n_k}")
    if attn_bias is not None:
        _check_tensor(attn_bias, "attn_bias")
        if not attn_bias.is_floating_point():
            raise TypeError(f"attn_bias must be a floating-point tensor (added to the scores), got {attn_bias.dtype}")
        try:
            ok = attn_bias.dim() <= len(scores_shape) and torch.broadcast_shapes(attn_bias.shape, scores_shape) == scores_shape
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(f"attn_bias of shape {tuple(attn_bias.shape)} does not broadcast to the scores' shape "
                             f"(..., n_q, n_k) = {scores_shape}")
        attn_bias = attn_bias.to(device=query.device, dtype=query.dtype)

    row_ok = None  # (..., n_q, 1): True where the query row may attend to at least one key
    if attn_mask is not None:
        _check_bool_mask(attn_mask, "attn_mask")
        try:
            ok = attn_mask.dim() <= len(scores_shape) and torch.broadcast_shapes(attn_mask.shape, scores_shape) == scores_shape
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the scores' shape "
                f"(..., n_q, n_k) = {scores_shape}"
            )
        attn_mask = attn_mask.to(query.device)

    p = dropout_p if training else 0.0
    # PyTorch's own causal flag: no mask tensor at all, which lets the flash kernel run. Only when the causal
    # mask is the plain lower triangle (n_q == n_k) and nothing else is combined with it.
    torch_causal = is_causal and n_q == n_k and attn_mask is None and attn_bias is None and not need_weights
    if is_causal and not torch_causal and n_q > 1:  # a single query after n_k - 1 keys may see them all
        causal = causal_mask(n_q, n_k, device=query.device)  # (n_q, n_k)
        attn_mask = causal if attn_mask is None else attn_mask & causal
    if attn_mask is not None:
        row_ok = attn_mask.any(dim=-1, keepdim=True)  # (..., n_q or 1, 1)
        attn_mask = attn_mask | ~row_ok  # fully masked rows attend everywhere; zeroed below

    if not need_weights:
        # Fused kernel; it takes the same boolean convention (True = may attend). A bias becomes a float mask.
        mask = attn_mask
        if attn_bias is not None:
            mask = attn_bias if attn_mask is None else torch.where(attn_mask, attn_bias, float("-inf"))
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=p,
                                             is_causal=torch_causal, enable_gqa=enable_gqa)  # (..., n_q, d_v)
        weights = None
    else:
        if enable_gqa and key.shape[-3] != query.shape[-3]:
            group = query.shape[-3] // key.shape[-3]  # query heads per key/value head
            key = key.repeat_interleave(group, dim=-3)  # (..., n_heads, n_k, d_k): kv head h//group for head h
            value = value.repeat_interleave(group, dim=-3)
        scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., n_q, n_k)
        if attn_bias is not None:
            scores = scores + attn_bias  # (..., n_q, n_k)
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf"))  # blocked -> weight exactly 0
        weights = torch.softmax(scores, dim=-1)  # (..., n_q, n_k), rows sum to 1
        if row_ok is not None:
            weights = weights.masked_fill(~row_ok, 0.0)  # no allowed key: all-zero row
        if p > 0.0:
            weights = F.dropout(weights, p=p, training=True)
        out = weights @ value  # (..., n_q, d_v)
    if row_ok is not None:
        out = out.masked_fill(~row_ok, 0.0)  # defined output for fully masked rows
    return out, weights


def causal_mask(n_q: int, n_k: int | None = None, device=None) -> Tensor:
    """Boolean causal mask ``(n_q, n_k)``: the last ``n_q`` of ``n_k`` positions attend to the past (§3.2.3).

    Query i (counting the queries as the *last* n_q positions of the sequence) may attend to
    key j when ``j <= i + (n_k - n_q)``.  With ``n_k = n_q`` this is the lower triangle;
    with a KV cache holding ``n_k - n_q`` earlier positions it is the same mask shifted.

    Args:
        n_q: number of query positions (≥ 1).
        n_k: number of key positions (≥ n_q), default ``n_q``.
        device: where to create the mask.

    Returns:
        bool tensor ``(n_q, n_k)``, True = may attend.

    Raises:
        ValueError: ``n_q`` < 1 or ``n_k`` < ``n_q``.
    """
    n_k = n_q if n_k is None else n_k
    if n_q < 1 or n_k < n_q:
        raise ValueError(f"need 1 <= n_q <= n_k, got n_q={n_q}, n_k={n_k}")
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=n_k - n_q)


class KVCache:
    """Keys and values of the positions seen so far, for one attention layer (incremental decoding).

    In self-attention of the decoder (§3.2.3) a new position attends to every earlier one,
    whose projected keys and values do not change; keeping them turns each decoding step
    from O(t²) to O(t) work.  In cross-attention (``static_kv=True`` in
    :meth:`MultiHeadAttention.forward`) the cache holds the projected encoder memory,
    computed once.

    With grouped-query attention the cache holds only the ``n_kv_heads`` key/value heads: that is the
    memory GQA saves (``n_heads / n_kv_heads`` times less), and :meth:`nbytes` measures it.

    Attributes:
        k: ``None`` (empty) or ``(batch, n_kv_heads, t, d_k)`` (``n_kv_heads = n_heads`` without GQA).
        v: ``None`` (empty) or ``(batch, n_kv_heads, t, d_v)``.
    """

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def __len__(self) -> int:
        """The cached length t (0 when empty)."""
        return 0 if self.k is None else self.k.shape[-2]

    def __repr__(self) -> str:
        shape = None if self.k is None else tuple(self.k.shape)
        return f"KVCache(len={len(self)}, k shape={shape})"

    def nbytes(self) -> int:
        """Bytes held by the cached keys and values (0 when empty)."""
        return 0 if self.k is None else self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()

    def append(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Add new positions along the sequence axis, store and return everything cached.

        Args:
            k_new: ``(batch, n_heads, t_new, d_k)``.
            v_new: ``(batch, n_heads, t_new, d_v)``.

        Returns:
            ``(k_all, v_all)`` of shapes ``(batch, n_heads, t + t_new, d_k)`` and ``(…, d_v)``.

        Raises:
            TypeError: not tensors.
            ValueError: not 4-D, k and v disagree, or the new entries do not match the cache's
                batch, heads or widths.
        """
        _check_tensor(k_new, "k_new")
        _check_tensor(v_new, "v_new")
        if k_new.dim() != 4 or v_new.dim() != 4 or k_new.shape[:3] != v_new.shape[:3]:
            raise ValueError(
                f"k_new and v_new must be (batch, n_heads, t_new, d) with the same first three sizes, "
                f"got {tuple(k_new.shape)} and {tuple(v_new.shape)}"
            )
        if self.k is None:
            # contiguous copies: the new entries may be views into a larger tensor (the fused Q|K|V projection)
            self.k, self.v = k_new.contiguous(), v_new.contiguous()
        else:
            if (k_new.shape[:2] != self.k.shape[:2] or k_new.shape[-1] != self.k.shape[-1]
                    or v_new.shape[-1] != self.v.shape[-1]):
                raise ValueError(
                    f"new keys/values {tuple(k_new.shape)}/{tuple(v_new.shape)} do not match the cache "
                    f"{tuple(self.k.shape)}/{tuple(self.v.shape)} in batch, heads or width"
                )
            self.k = torch.cat([self.k, k_new], dim=-2)  # (batch, n_heads, t + t_new, d_k)
            self.v = torch.cat([self.v, v_new], dim=-2)  # (batch, n_heads, t + t_new, d_v)
        return self.k, self.v

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search: follow the surviving hypotheses).

        Args:
            index: 1-D integer tensor of batch indices (may repeat rows).

        Raises:
            ValueError: ``index`` is not 1-D.
        """
        index = torch.as_tensor(index)
        if index.dim() != 1:
            raise ValueError(f"index must be 1-D, got shape {tuple(index.shape)}")
        if self.k is not None:
            index = index.to(self.k.device)
            self.k = self.k.index_select(0, index)  # (len(index), n_heads, t, d_k)
            self.v = self.v.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (paper §3.2.2), optionally with grouped key/value heads and rotary or linear-bias
    positions (chapter 12).

    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,  head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i).

    The h per-head projections ``(d_model, d_k)`` are stored side by side as one
    ``nn.Linear(d_model, d_model)`` each for Q, K and V (head i owns output features
    ``i*d_k … (i+1)*d_k - 1``), so all heads are projected by one matrix product and then
    separated by a reshape.  d_k = d_v = d_model / h, as in the paper.  In self-attention (``key`` and
    ``value`` are the very tensor ``query``) the three weights are concatenated and applied as **one**
    product ``x [W^Q | W^K | W^V]``, the same numbers in one matrix multiplication instead of three.

    Grouped-query attention (GQA, Ainslie et al. 2023): with ``n_kv_heads < n_heads`` only ``n_kv_heads``
    key and value heads are projected (``w_k``, ``w_v`` have ``n_kv_heads * d_k`` outputs), and each is shared
    by ``n_heads / n_kv_heads`` consecutive query heads; ``n_kv_heads = 1`` is multi-query attention
    (Shazeer 2019).  The KV cache stores only the ``n_kv_heads`` heads.

    Args:
        d_model: model width.
        n_heads: number of (query) heads h; must divide ``d_model``.
        dropout: dropout probability on the attention weights (training mode only).
        bias: whether the four linear layers have biases (the paper's equations have none;
            ``nn.MultiheadAttention`` has them by default).
        device, dtype: passed to the linear layers.
        n_kv_heads: key/value heads (``None``: ``n_heads``, the paper's multi-head attention); must divide
            ``n_heads``.
        positions: ``None`` (positions come from the input, as the paper's sinusoids), ``"rope"`` (rotate
            queries and keys, :class:`tmlib.model.rotary.RotaryEmbedding`) or ``"alibi"`` (linear biases on the
            scores, :class:`tmlib.model.alibi.ALiBi`).  Query r sits at position ``offset + r`` and key j at j, where
            ``offset`` is the KV cache's length before the call (0 without a cache).
        max_len: positions of the rotary table (``positions="rope"``).
        rope_base: the base of the rotary frequencies (10000).

    Attributes:
        w_q, w_o: ``nn.Linear(d_model, d_model)``; w_k, w_v: ``nn.Linear(d_model, n_kv_heads * d_k)``.
        d_model, n_heads, n_kv_heads, d_k: the sizes.
        rotary: :class:`~tmlib.model.rotary.RotaryEmbedding` or ``None``; alibi: :class:`~tmlib.model.alibi.ALiBi` or ``None``
            (no parameters: state dicts are those of the paper's module).

    Raises:
        ValueError: ``d_model`` is not divisible by ``n_heads``, ``n_heads`` by ``n_kv_heads``, a size is
            not positive, an unknown ``positions``, or an odd ``d_k`` with RoPE.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True,
                 device=None, dtype=None, *, n_kv_heads: int | None = None, positions: str | None = None,
                 max_len: int = 512, rope_base: float = 10000.0) -> None:
        super().__init__()
        if d_model < 1 or n_heads < 1:
            raise ValueError(f"d_model and n_heads must be positive, got d_model={d_model}, n_heads={n_heads}")
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}: each head needs d_model / n_heads columns"
            )
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must be a positive divisor of n_heads={n_heads} "
                             f"(each key/value head serves n_heads / n_kv_heads query heads)")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if positions not in (None, "rope", "alibi"):
            raise ValueError(f"positions must be None, 'rope' or 'alibi' inside attention, got {positions!r}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.d_k = d_model // n_heads
        self.dropout = dropout
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.w_q = nn.Linear(d_model, d_model, **kw)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, **kw)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, **kw)
        self.w_o = nn.Linear(d_model, d_model, **kw)
        self._qkv_cache = None  # (version key, stacked weight, stacked bias) for inference, see _qkv_parameters
        self.positions = positions
        self.rotary = None
        self.alibi = None
        if positions == "rope":
            from tmlib.model.rotary import RotaryEmbedding

            self.rotary = RotaryEmbedding(self.d_k, max_len, rope_base)
        elif positions == "alibi":
            from tmlib.model.alibi import ALiBi

            self.alibi = ALiBi(n_heads)

    def extra_repr(self) -> str:
        extra = "" if self.n_kv_heads == self.n_heads else f", n_kv_heads={self.n_kv_heads}"
        extra += "" if self.positions is None else f", positions={self.positions}"
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, dropout={self.dropout}{extra}"

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
            dtype: torch dtype of the module; default the inputs' floating dtype
                (NumPy float64 gives float64).
            device: where to put the module.

        Returns:
            A :class:`MultiHeadAttention` with ``bias=False`` and ``dropout=0``.

        Raises:
            ValueError: shapes disagree, or ``h * d_k != d_model`` (this module keeps
                d_k = d_model / h; :data:`tmlib.course.examples.MHA_EXAMPLE_3` with 3 heads of width 2
                on d_model 4 does not fit).
        """
        ws = [w.detach() if isinstance(w, Tensor) else torch.from_numpy(np.array(w)) for w in (w_q, w_k, w_v, w_o)]
        if dtype is None:
            dtype = ws[0].dtype if ws[0].is_floating_point() else torch.get_default_dtype()
        ws = [w.to(dtype=dtype) for w in ws]
        wq, wk, wv, wo = ws
        if wq.dim() != 3 or wk.shape != wq.shape or wv.shape != wq.shape:
            raise ValueError(
                f"w_q, w_k, w_v must all have shape (h, d_model, d_k), got "
                f"{tuple(wq.shape)}, {tuple(wk.shape)}, {tuple(wv.shape)}"
            )
        h, d_model, d_k = wq.shape
        if h * d_k != d_model:
            raise ValueError(
                f"h * d_k = {h} * {d_k} = {h * d_k} must equal d_model = {d_model} for this module"
            )
        if tuple(wo.shape) != (h * d_k, d_model):
            raise ValueError(f"w_o must have shape (h * d_k, d_model) = {(h * d_k, d_model)}, got {tuple(wo.shape)}")
        mha = cls(d_model, h, bias=False, device=device, dtype=dtype)
        with torch.no_grad():
            for lin, w in ((mha.w_q, wq), (mha.w_k, wk), (mha.w_v, wv)):
                side_by_side = w.permute(1, 0, 2).reshape(d_model, h * d_k)  # (d_model, h*d_k), head-major columns
                lin.weight.copy_(side_by_side.T)  # nn.Linear stores (out, in)
            mha.w_o.weight.copy_(wo.T)
        return mha

    # --- shape helpers -------------------------------------------------------------------
    def _split_heads(self, x: Tensor, n_heads: int | None = None) -> Tensor:
        """(batch, n, n_heads * d_k) -> (batch, n_heads, n, d_k)."""
        batch, n, _ = x.shape
        return x.view(batch, n, n_heads or self.n_heads, self.d_k).transpose(1, 2)

    def _merge_heads(self, x: Tensor) -> Tensor:
        """(batch, n_heads, n, d_k) -> (batch, n, d_model)."""
        batch, _, n, _ = x.shape
        return x.transpose(1, 2).reshape(batch, n, self.d_model)

    def _check_input(self, x, name: str, batch: int | None) -> Tensor:
        _check_tensor(x, name)
        if x.dim() != 3:
            raise ValueError(f"{name} must be (batch, seq_len, d_model), got shape {tuple(x.shape)}")
        if x.shape[-1] != self.d_model:
            raise ValueError(f"{name} has shape {tuple(x.shape)}: its last size must be d_model={self.d_model}")
        if batch is not None and x.shape[0] != batch:
            raise ValueError(f"{name} has batch size {x.shape[0]} (shape {tuple(x.shape)}) but query has batch {batch}")
        return x

    def _qkv_parameters(self) -> tuple[Tensor, Tensor | None]:
        """``[W^Q; W^K; W^V]`` and ``[b^Q; b^K; b^V]`` stacked along the output features.

        When gradients flow to the weights (training) the concatenation is part of the autograd graph and is
        redone at every call, a copy of 3·d_model² numbers that the matrix product of a whole batch dwarfs. For
        inference (no gradient needed) the stacked copy is kept and reused until a weight changes (an optimizer
        step or ``load_state_dict`` bumps the tensors' version counters, ``.to()`` replaces their storage):
        decoding one token at a time would otherwise copy the weights at every step.
        """
        # The three layers' parameter dictionaries are read directly: nn.Module's attribute lookup costs about a
        # microsecond per name, and this runs at every attention call (when decoding, per token and layer).
        layers = [self._modules[name]._parameters for name in ("w_q", "w_k", "w_v")]
        params = [p["weight"] for p in layers] + ([p["bias"] for p in layers] if layers[0]["bias"] is not None else [])

        def stack():
            return torch.cat(params[:3]), (torch.cat(params[3:]) if len(params) > 3 else None)

        if torch.compiler.is_compiling() or (torch.is_grad_enabled() and any(p.requires_grad for p in params)):
            self._qkv_cache = None
            return stack()
        key = [p._version for p in params] + [p.data_ptr() for p in params] + [params[0].dtype]
        cached = getattr(self, "_qkv_cache", None)
        if cached is None or cached[0] != key:
            with torch.no_grad():
                cached = self._qkv_cache = (key, *stack())
        return cached[1], cached[2]

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention's three projections as one matrix product: ``x [W^Q | W^K | W^V] + [b^Q | b^K | b^V]``.

        Args:
            x: ``(batch, n, d_model)``.

        Returns:
            ``(q, k, v)``: ``(batch, n_heads, n, d_k)``, ``(batch, n_kv_heads, n, d_k)`` twice; the same values
            as ``w_q(x)``, ``w_k(x)``, ``w_v(x)`` split into heads.
        """
        weight, bias = self._qkv_parameters()  # (d_model + 2 kv_dim, d_model), (d_model + 2 kv_dim,) or None
        kv_dim = self.n_kv_heads * self.d_k
        q, k, v = F.linear(x, weight, bias).split([self.d_model, kv_dim, kv_dim], dim=-1)  # one product
        return self._split_heads(q), self._split_heads(k, self.n_kv_heads), self._split_heads(v, self.n_kv_heads)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None,
        value: Tensor | None,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        static_kv: bool = False,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value`` with h heads.

        Args:
            query: ``(batch, n_q, d_model)``.
            key: ``(batch, n_k_new, d_model)``; for self-attention pass the same tensor as
                ``query`` (then Q, K and V are projected by one fused product).  May be ``None`` only
                with ``static_kv=True`` and a filled cache.
            value: ``(batch, n_k_new, d_model)``, same positions as ``key``.
            attn_mask: bool, ``(n_q, n_k)``, ``(batch, n_q, n_k)`` or
                ``(batch, n_heads, n_q, n_k)``; True = may attend.  (Note: the 3-D form is
                per batch element, not ``nn.MultiheadAttention``'s ``(batch*n_heads, …)``.)
            key_padding_mask: bool ``(batch, n_k)``, **True = real token** (may be attended
                to), False = padding.  The opposite of ``nn.MultiheadAttention``'s convention
                (pass ``~mask`` to it).  Pass ``None`` when the batch has no padding: no mask is then
                built, which keeps PyTorch's fastest kernels available.
            need_weights: also return the per-head weights (explicit path; otherwise the
                fused kernel runs and ``None`` is returned).
            cache: a :class:`KVCache` for incremental decoding.  ``n_k`` in the mask shapes is
                the number of keys attended over, i.e. the cache length after appending.
            static_kv: with a cache: False (decoder self-attention) appends the new
                positions' keys/values to the cache and attends over all of it; True
                (cross-attention) projects ``key``/``value`` on the first call only, stores
                them, and reuses them afterwards (later ``key``/``value`` are ignored).
            is_causal: the queries are the last ``n_q`` of the ``n_k`` positions and may not see later
                ones (decoder self-attention, §3.2.3), without a mask tensor: equal to passing
                ``attn_mask=causal_mask(n_q, n_k)`` (combined with any ``attn_mask`` by "and").

        Returns:
            ``(output, weights)``: output ``(batch, n_q, d_model)``; weights
            ``(batch, n_heads, n_q, n_k)`` or ``None``.  A query row with every key masked
            gives output ``w_o``'s bias (0 without bias) — the heads contribute zeros — and
            an all-zero weight row.

        Raises:
            TypeError: inputs are not tensors, or a mask is not boolean.
            ValueError: inputs not 3-D, last size not ``d_model``, batch sizes differ, key and
                value lengths differ, a mask has the wrong shape, key/value are missing, or the positions
                run past the rotary table.
        """
        self._check_input(query, "query", None)
        batch, n_q, _ = query.shape
        if static_kv and self.positions is not None:
            raise ValueError(f"positions={self.positions!r} apply to self-attention; cross-attention (static_kv) "
                             "relates two sequences and takes no positions")
        # position of the first new query (and new key): the length of a self-attention cache before this call
        offset = len(cache) if cache is not None and not static_kv else 0

        if static_kv and cache is not None and len(cache) > 0:
            q = self._split_heads(self.w_q(query))  # (batch, n_heads, n_q, d_k)
            k, v = cache.k, cache.v  # (batch, n_kv_heads, n_k, d_k): memory projected on the first call
            if k.shape[0] != batch:
                raise ValueError(f"cached keys {tuple(k.shape)} have batch {k.shape[0]}, query has batch {batch}")
        else:
            if key is None or value is None:
                raise ValueError("key and value are required unless static_kv=True and the cache is filled")
            if key is query and value is query and not static_kv:  # self-attention: one fused product
                q, k, v = self.project_qkv(query)  # (batch, n_heads | n_kv_heads, n_q, d_k)
            else:
                self._check_input(key, "key", batch)
                self._check_input(value, "value", batch)
                if key.shape[1] != value.shape[1]:
                    raise ValueError(
                        f"key {tuple(key.shape)} and value {tuple(value.shape)} must have the same number of positions"
                    )
                q = self._split_heads(self.w_q(query))  # (batch, n_heads, n_q, d_k)
                k = self._split_heads(self.w_k(key), self.n_kv_heads)  # (batch, n_kv_heads, n_k_new, d_k)
                v = self._split_heads(self.w_v(value), self.n_kv_heads)  # (batch, n_kv_heads, n_k_new, d_k)
            if self.rotary is not None:  # RoPE: rotate by position before the keys are cached
                q, k = self.rotary(q, offset), self.rotary(k, offset)
            if cache is not None:
                if len(cache) > 0 and cache.k.shape[0] != batch:
                    raise ValueError(f"cache holds batch {cache.k.shape[0]}, query has batch {batch}")
                k, v = cache.append(k, v)  # (batch, n_kv_heads, n_k, d_k), n_k = cached + new
        n_k = k.shape[-2]

        mask = self._combine_masks(attn_mask, key_padding_mask, batch, n_q, n_k, query.device)  # (b|1, h|1, n_q, n_k)
        bias = None if self.alibi is None else self.alibi(n_q, n_k, offset, dtype=q.dtype, device=q.device)

        out, weights = scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout, need_weights=need_weights, training=self.training,
            is_causal=is_causal, attn_bias=bias, enable_gqa=self.n_kv_heads != self.n_heads,
        )  # out: (batch, n_heads, n_q, d_k); weights: (batch, n_heads, n_q, n_k) or None
        out = self._merge_heads(out)  # (batch, n_q, d_model): Concat(head_1, …, head_h)
        return self.w_o(out), weights  # (batch, n_q, d_model)

    def _combine_masks(self, attn_mask, key_padding_mask, batch, n_q, n_k, device) -> Tensor | None:
        """Validate both masks and fold them into one bool mask broadcastable to (batch, n_heads, n_q, n_k)."""
        mask = None
        if attn_mask is not None:
            _check_bool_mask(attn_mask, "attn_mask")
            shapes = {2: (n_q, n_k), 3: (batch, n_q, n_k), 4: (batch, self.n_heads, n_q, n_k)}
            if shapes.get(attn_mask.dim()) != tuple(attn_mask.shape):
                raise ValueError(
                    f"attn_mask has shape {tuple(attn_mask.shape)}; expected (n_q, n_k) = {(n_q, n_k)}, "
                    f"(batch, n_q, n_k) = {(batch, n_q, n_k)} or (batch, n_heads, n_q, n_k) = "
                    f"{(batch, self.n_heads, n_q, n_k)}"
                )
            mask = attn_mask.to(device)
            if mask.dim() == 2:
                mask = mask[None, None]  # (1, 1, n_q, n_k)
            elif mask.dim() == 3:
                mask = mask[:, None]  # (batch, 1, n_q, n_k)
        if key_padding_mask is not None:
            _check_bool_mask(key_padding_mask, "key_padding_mask")
            if tuple(key_padding_mask.shape) != (batch, n_k):
                raise ValueError(
                    f"key_padding_mask has shape {tuple(key_padding_mask.shape)}, expected (batch, n_k) = {(batch, n_k)}"
                )
            kpm = key_padding_mask.to(device)[:, None, None, :]  # (batch, 1, 1, n_k)
            mask = kpm if mask is None else mask & kpm
        return mask
