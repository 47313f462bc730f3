"""The keys and values of the positions decoded so far (incremental decoding, paper §3.2.3).

A new position attends to every earlier one, whose projected keys and values never change: decoding keeps them
instead of projecting them again, O(t) work per step instead of O(t²). :class:`KVCache` serves one attention
module, :class:`DecoderCache` a decoder stack.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["KVCache", "DecoderCache"]


class KVCache:
    """Keys and values of the positions seen so far, for one attention module.

    In the decoder's self-attention each call appends the new positions; in cross-attention (``static_kv=True``)
    it holds the projected encoder memory, computed on the first call. With grouped-query attention it holds only
    the ``n_kv_heads`` heads, the memory GQA saves.

    Attributes:
        k, v: ``None`` (empty) or ``(batch, n_kv_heads, t, d_k)``.
    """

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def __repr__(self) -> str:
        return f"KVCache(len={len(self)}, k shape={None if self.k is None else tuple(self.k.shape)})"

    def nbytes(self) -> int:
        """Bytes held by the cached keys and values (0 when empty)."""
        return 0 if self.k is None else self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()

    def append(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Add ``(batch, n_heads, t_new, d)`` keys and values; return all of them, ``(batch, n_heads, t + t_new, d)``.

        Raises:
            TypeError: not tensors.
            ValueError: not 4-D, or keys and values that disagree with each other or with the cache.
        """
        self._check_new(k_new, v_new)
        if self.k is None:  # contiguous copies: the new entries may be views into a larger tensor
            self.k, self.v = k_new.contiguous(), v_new.contiguous()
        else:
            self.k = torch.cat([self.k, k_new], dim=-2)  # (batch, n_heads, t + t_new, d_k)
            self.v = torch.cat([self.v, v_new], dim=-2)  # (batch, n_heads, t + t_new, d_v)
        return self.k, self.v

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (1-D, repeats allowed: beam search follows its hypotheses).

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
            raise ValueError(f"k_new and v_new must be (batch, n_heads, t_new, d) with the same first three sizes, "
                             f"got {tuple(k_new.shape)} and {tuple(v_new.shape)}")
        if self.k is not None and (k_new.shape[:2] != self.k.shape[:2] or k_new.shape[-1] != self.k.shape[-1]
                                   or v_new.shape[-1] != self.v.shape[-1]):
            raise ValueError(f"new keys/values {tuple(k_new.shape)}/{tuple(v_new.shape)} do not match the cache "
                             f"{tuple(self.k.shape)}/{tuple(self.v.shape)} in batch, heads or width")


class DecoderCache:
    """The :class:`KVCache` pairs of a decoder stack: ``self_attn[i]`` grows at every call, ``cross_attn[i]`` holds
    the projected memory (``None`` without cross-attention). ``len(cache)``: target positions decoded so far."""

    def __init__(self, n_layers: int, cross_attention: bool = True):
        self.self_attn = [KVCache() for _ in range(n_layers)]
        self.cross_attn = [KVCache() if cross_attention else None for _ in range(n_layers)]

    def __len__(self) -> int:
        return len(self.self_attn[0]) if self.self_attn else 0

    def layer(self, i: int) -> tuple[KVCache, KVCache | None]:
        """The ``(self_kv, cross_kv)`` pair of layer ``i``."""
        return self.self_attn[i], self.cross_attn[i]

    def nbytes(self, self_attention_only: bool = False) -> int:
        """Bytes held by every layer's keys and values (``self_attention_only``: without the projected memory)."""
        caches = self.self_attn if self_attention_only else self.self_attn + self.cross_attn
        return sum(kv.nbytes() for kv in caches if kv is not None)

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` in every non-empty cache, in place (beam search)."""
        for kv in self.self_attn + self.cross_attn:
            if kv is not None and len(kv) > 0:
                kv.reorder(index)
