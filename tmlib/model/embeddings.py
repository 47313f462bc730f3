"""Embeddings and the pre-softmax linear map (paper §3.4).

"We use learned embeddings to convert the input tokens and output tokens to vectors of dimension d_model. We also
use the usual learned linear transformation and softmax function to convert the decoder output to predicted
next-token probabilities. [...] In the embedding layers, we multiply those weights by √d_model." The model that
owns both ties them (:class:`tmlib.model.transformer.Transformer`).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from tmlib.validation import check_int

__all__ = ["TokenEmbedding", "Generator"]


class TokenEmbedding(nn.Module):
    """Learned embedding × √d_model (§3.4): ids ``(batch, seq_len)`` → ``(batch, seq_len, d_model)``.

    ``pad_id``'s row starts at zero and gets no gradient through the lookup (``padding_idx``). ``embedding.weight``
    ``(vocab_size, d_model)`` is the matrix a :class:`Generator` may share. The model checks the ids.

    Raises:
        TypeError, ValueError: sizes that are not positive integers, ``pad_id`` outside the vocabulary.
    """

    def __init__(self, vocab_size: int, d_model: int, pad_id: int | None = None, device=None, dtype=None):
        super().__init__()
        check_int(vocab_size, "vocab_size", minimum=1)  # [not in the paper] argument checks
        check_int(d_model, "d_model", minimum=1)  # [not in the paper] argument checks
        if pad_id is not None and not 0 <= pad_id < vocab_size:  # [not in the paper] argument checks
            raise ValueError(f"pad_id {pad_id} is outside the vocabulary [0, {vocab_size})")
        self.vocab_size, self.d_model, self.pad_id = vocab_size, d_model, pad_id
        self.scale = math.sqrt(d_model)
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id, device=device, dtype=dtype)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids) * self.scale  # (batch, seq_len, d_model)


class Generator(nn.Module):
    """The pre-softmax linear map (§3.4): ``(batch, seq_len, d_model)`` → logits ``(batch, seq_len, vocab_size)``, or
    log-probabilities with ``log_softmax``. ``proj.weight`` has an embedding matrix's shape, so a model can tie them.
    ``bias``: True as the Annotated Transformer (the paper does not say).

    Raises:
        TypeError, ValueError: sizes that are not positive integers.
    """

    def __init__(self, d_model: int, vocab_size: int, bias: bool = True, log_softmax: bool = False,
                 device=None, dtype=None):
        super().__init__()
        check_int(d_model, "d_model", minimum=1)  # [not in the paper] argument checks
        check_int(vocab_size, "vocab_size", minimum=1)  # [not in the paper] argument checks
        self.d_model, self.vocab_size, self.log_softmax = d_model, vocab_size, log_softmax
        self.proj = nn.Linear(d_model, vocab_size, bias=bias, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.proj(x)  # (batch, seq_len, vocab_size)
        return torch.log_softmax(logits, dim=-1) if self.log_softmax else logits
