"""The decoder looks only at the past (paper §3.2.3): its causal mask, and the cache of past keys and values.

"We need to prevent leftward information flow in the decoder to preserve the auto-regressive property. We
implement this inside of scaled dot-product attention by masking out (setting to −∞) all values in the input of
the softmax which correspond to illegal connections."

* :func:`causal_mask`: that mask, for the last ``n_q`` of ``n_k`` positions (with a KV cache the new queries
  follow the cached keys); :func:`with_causal_mask` combines it with another mask.
* :class:`KVCache`: the keys and values of the positions seen so far. A new position attends to every earlier
  one, whose keys and values never change, so decoding keeps them instead of projecting them again.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["causal_mask", "with_causal_mask", "KVCache"]


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


def with_causal_mask(mask: Tensor | None, n_q: int, n_k: int, device=None) -> Tensor | None:
    """``mask`` and :func:`causal_mask` ``(n_q, n_k)`` combined by "and" (``mask=None``: the causal mask alone).

    A single query, the newest position, may see every key: it needs no causal mask, and ``mask`` is returned
    as it is.

    Args:
        mask: ``None`` or a bool mask broadcastable to ``(..., n_q, n_k)``, True = may attend.
        n_q, n_k: numbers of query and key positions, ``1 <= n_q <= n_k``.
        device: where to create the causal mask.

    Returns:
        ``None`` (``n_q == 1`` and no mask) or a bool tensor broadcastable to ``(..., n_q, n_k)``.
    """
    if n_q == 1:
        return mask
    causal = causal_mask(n_q, n_k, device=device)  # (n_q, n_k)
    return causal if mask is None else mask & causal


class KVCache:
    """Keys and values of the positions seen so far, for one attention layer (incremental decoding).

    In self-attention of the decoder (§3.2.3) a new position attends to every earlier one,
    whose projected keys and values do not change; keeping them turns each decoding step
    from O(t²) to O(t) work.  In cross-attention (``static_kv=True`` in
    :meth:`tmlib.model.attention.MultiHeadAttention.forward`) the cache holds the projected encoder memory,
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
        self._check_new(k_new, v_new)
        if self.k is None:
            # contiguous copies: the new entries may be views into a larger tensor
            self.k, self.v = k_new.contiguous(), v_new.contiguous()
        else:
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

    def _check_new(self, k_new, v_new) -> None:
        for name, x in (("k_new", k_new), ("v_new", v_new)):
            if not isinstance(x, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if k_new.dim() != 4 or v_new.dim() != 4 or k_new.shape[:3] != v_new.shape[:3]:
            raise ValueError(
                f"k_new and v_new must be (batch, n_heads, t_new, d) with the same first three sizes, "
                f"got {tuple(k_new.shape)} and {tuple(v_new.shape)}"
            )
        if self.k is not None and (k_new.shape[:2] != self.k.shape[:2] or k_new.shape[-1] != self.k.shape[-1]
                                   or v_new.shape[-1] != self.v.shape[-1]):
            raise ValueError(
                f"new keys/values {tuple(k_new.shape)}/{tuple(v_new.shape)} do not match the cache "
                f"{tuple(self.k.shape)}/{tuple(self.v.shape)} in batch, heads or width"
            )
