"""Embeddings and the output projection ("softmax") (paper §3.4).

"We use learned embeddings to convert the input tokens and output tokens to vectors of dimension
d_model. We also use the usual learned linear transformation and softmax function to convert the decoder
output to predicted next-token probabilities. [...] we share the same weight matrix between the two
embedding layers and the pre-softmax linear transformation [...]. In the embedding layers, we multiply
those weights by √d_model."  Tying is done by the model that owns both modules (see
:class:`tmlib.model.transformer.Transformer`).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from tmlib.validation import check_int, check_token_ids

__all__ = ["TokenEmbedding", "Generator"]


class TokenEmbedding(nn.Module):
    """Learned token embedding multiplied by √d_model (paper §3.4).

    Args:
        vocab_size: number of tokens V.
        d_model: embedding width.
        pad_id: id of the padding token, or ``None``.  Its row starts at zero and receives no
            gradient through the lookup (``nn.Embedding(padding_idx=...)``); with tied weights the
            output projection may still update it.
        device, dtype: passed to ``nn.Embedding``.

    Attributes:
        embedding: ``nn.Embedding`` whose ``weight`` ``(vocab_size, d_model)`` is the matrix that
            :class:`Generator` may share.

    Shapes:
        forward ``ids``: integer tensor ``(batch, seq_len)`` (any shape works) →
        ``(batch, seq_len, d_model)`` in the weight's dtype.

    Raises:
        ValueError: bad sizes, ``pad_id`` outside the vocabulary, or an id outside ``[0, vocab_size)``
            (the message names the id and the vocabulary size).
        TypeError: ``ids`` is not an integer tensor.
    """

    def __init__(self, vocab_size: int, d_model: int, pad_id: int | None = None, device=None, dtype=None):
        super().__init__()
        check_int(vocab_size, "vocab_size", minimum=1)
        check_int(d_model, "d_model", minimum=1)
        if pad_id is not None and not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id {pad_id} is outside the vocabulary [0, {vocab_size})")
        self.vocab_size, self.d_model, self.pad_id = vocab_size, d_model, pad_id
        self.scale = math.sqrt(d_model)
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id, device=device, dtype=dtype)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_token_ids(ids, self.vocab_size)
        return self.embedding(ids) * self.scale  # (batch, seq_len, d_model)


class Generator(nn.Module):
    """The pre-softmax linear map from d_model to the vocabulary (paper §3.4).

    Args:
        d_model: input width.
        vocab_size: number of output tokens.
        bias: add a bias vector (default True, as the Annotated Transformer; the paper does not say).
        log_softmax: if True ``forward`` returns log-probabilities instead of logits.
        device, dtype: passed to ``nn.Linear``.

    Attributes:
        proj: ``nn.Linear(d_model, vocab_size)``; its ``weight`` ``(vocab_size, d_model)`` has the same
            shape as an embedding matrix, so a model can tie the two.

    Shapes:
        forward ``x``: ``(batch, seq_len, d_model)`` → ``(batch, seq_len, vocab_size)`` logits
        (or log-probabilities), same dtype.

    Raises:
        ValueError: bad sizes, or the last dimension of ``x`` is not ``d_model``.
    """

    def __init__(self, d_model: int, vocab_size: int, bias: bool = True, log_softmax: bool = False,
                 device=None, dtype=None):
        super().__init__()
        check_int(d_model, "d_model", minimum=1)
        check_int(vocab_size, "vocab_size", minimum=1)
        self.d_model, self.vocab_size, self.log_softmax = d_model, vocab_size, log_softmax
        self.proj = nn.Linear(d_model, vocab_size, bias=bias, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has shape {tuple(x.shape)}: last dimension must be d_model={self.d_model}")
        logits = self.proj(x)  # (batch, seq_len, vocab_size)
        return torch.log_softmax(logits, dim=-1) if self.log_softmax else logits
