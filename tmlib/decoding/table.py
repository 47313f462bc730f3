"""A next-token table posing as a model, so that the real decoders can be run on an example small enough to check
by hand (chapter 9).
"""
from __future__ import annotations

import torch
from torch import Tensor

from tmlib.validation import check_int, check_token_id

__all__ = ["TableModel"]


class TableModel(torch.nn.Module):
    """A toy "model" whose next-token probabilities come from ``table`` ``{prefix: {token: probability}}`` (prefix:
    the ids generated after ``<bos>``; a missing prefix gives ``<eos>``), with the interface the decoders use, so
    that they can run on an example small enough to check by hand (chapter 9). The source is ignored.

    Raises:
        TypeError: ``vocab_size`` or an id not an integer.
        ValueError: ``vocab_size`` < 1, an id outside the vocabulary, a probability outside (0, 1].
    """

    max_len = 64

    class _PrefixCache:
        """The "cache" of a table: the prefix decoded so far (the table is keyed by whole prefixes)."""

        def __init__(self):
            self.tokens = None

        def __len__(self):
            return 0 if self.tokens is None else self.tokens.shape[1]

        def reorder(self, index):
            if self.tokens is not None:
                self.tokens = self.tokens.index_select(0, index.to(self.tokens.device))

    def __init__(self, table: dict, vocab_size: int, eos_id: int = 2, pad_id: int = 0):
        super().__init__()
        vocab_size = check_int(vocab_size, "vocab_size", minimum=1)
        eos_id, pad_id = check_token_id(eos_id, "eos_id", vocab_size), check_token_id(pad_id, "pad_id", vocab_size)
        for prefix, dist in table.items():
            for token, p in dist.items():
                check_token_id(token, f"token of prefix {prefix}", vocab_size)
                if not 0.0 < p <= 1.0:
                    raise ValueError(f"probability of token {token} after {prefix} must be in (0, 1], got {p}")
        self.table, self.vocab_size, self.eos_id, self.pad_id = dict(table), vocab_size, eos_id, pad_id

    def new_cache(self):
        """An empty prefix cache (see :meth:`decode`)."""
        return self._PrefixCache()

    def encode(self, src: Tensor) -> Tensor:
        """A ``(batch, src_len, 1)`` zero "memory": the table ignores the source."""
        return torch.zeros(src.shape[0], src.shape[1], 1)  # (batch, src_len, 1): the source plays no role

    def decode(self, tgt: Tensor, memory: Tensor, src: Tensor, cache=None) -> Tensor:
        """Log-probabilities ``(rows, 1, vocab)`` of the token after each prefix ``tgt`` ``(rows, t)`` (``<bos>``
        first); with a cache, ``tgt`` holds only the newest position and the cache the earlier ones."""
        if cache is not None:
            cache.tokens = tgt if cache.tokens is None else torch.cat([cache.tokens, tgt], dim=1)
            tgt = cache.tokens
        probs = torch.full((tgt.shape[0], self.vocab_size), 1e-30)  # (rows, vocab)
        for row, prefix in enumerate(tgt[:, 1:].tolist()):
            for token, p in self.table.get(tuple(prefix), {self.eos_id: 1.0}).items():
                probs[row, token] = p
        return probs.log()[:, None, :]  # (rows, 1, vocab): the next-token log-probabilities
