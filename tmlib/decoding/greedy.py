"""Greedy decoding (paper §6.1, beam size 1), and the steps beam search shares with it.

A decoder takes any ``model`` with :class:`tmlib.model.transformer.Transformer`'s interface: ``encode(src)`` →
memory, ``decode(tgt, memory, src, cache)`` → logits (with a cache, ``tgt`` holds the new positions only),
``new_cache()``, ``pad_id`` and optionally ``max_len``. Conventions: the output starts after ``<bos>``; ``<eos>``
is predicted like any token and counts towards ``max_len`` but is not returned; ``max_len=None`` is the paper's
"input length + 50" per sentence (non-pad tokens), capped by ``model.max_len``; a padded batch decodes as each
sentence alone would.
"""
from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from tmlib.validation import check_int, check_sequence, check_token_id

__all__ = ["greedy_decode", "default_max_lengths"]


@torch.no_grad()
def greedy_decode(model, src: Tensor, bos_id: int, eos_id: int, max_len: int | None = None,
                  use_cache: bool = True) -> list[list[int]]:
    """At each step append the most probable token; stop a sentence at ``<eos>`` or its limit.

    ``src`` ``(batch, src_len)`` integer ids padded with ``model.pad_id`` → ``batch`` lists of ids, without
    ``<bos>``/``<eos>``. ``use_cache``: one new position per step through the model's KV cache (``False``: the
    whole prefix again, the same tokens). One value is read back per step (whether all sentences are done).

    Raises:
        TypeError: ``src`` not a tensor of integer ids; ``bos_id``, ``eos_id`` or ``max_len`` not integers.
        ValueError: ``src`` not 2-D or empty; a negative id; ``max_len`` < 1.
    """
    src, limits = check_decoding_args(model, src, bos_id, eos_id, max_len)
    limit = torch.tensor(limits, device=src.device)  # (batch,): generated tokens allowed, <eos> included
    with eval_mode(model):
        memory, cache = model.encode(src), model.new_cache() if use_cache else None  # (batch, src_len, d_model)
        tokens = torch.full((len(src), 1), bos_id, dtype=torch.long, device=src.device)  # (batch, 1): <bos>
        done = torch.zeros(len(src), dtype=torch.bool, device=src.device)  # (batch,)
        for step in range(max(limits)):
            next_tokens = next_log_probs(model, tokens, memory, src, cache).argmax(dim=-1)  # (batch,)
            next_tokens = next_tokens.masked_fill(done, eos_id)  # a finished sentence is fed <eos>
            done = done | (next_tokens == eos_id) | (step + 1 >= limit)
            tokens = torch.cat([tokens, next_tokens[:, None]], dim=1)  # (batch, step + 2)
            if bool(done.all()):  # the one value read back per step
                break
    return [row[:row.index(eos_id)] if eos_id in row else row for row in tokens[:, 1:].tolist()]


def default_max_lengths(model, src: Tensor, max_len: int | None = None) -> list[int]:
    """Per-sentence limits on the generated tokens (``<eos>`` included), each >= 1: ``max_len``, or ``None`` for
    the paper's non-pad source length + 50; capped by ``model.max_len`` when the model has one.

    Raises:
        TypeError, ValueError: ``max_len`` not an integer >= 1.
    """
    if max_len is None:
        limits = [int(n) + 50 for n in (src != getattr(model, "pad_id", 0)).sum(dim=1).tolist()]
    else:
        limits = [check_int(max_len, "max_len", minimum=1)] * src.shape[0]
    positions = getattr(model, "max_len", None)
    if positions is not None:  # <bos> takes position 0; the last generated token needs no position
        limits = [max(1, min(n, int(positions))) for n in limits]
    return limits


def check_decoding_args(model, src, bos_id, eos_id, max_len) -> tuple[Tensor, list[int]]:
    """The arguments every decoder takes (see :func:`greedy_decode`'s Raises) → ``src`` as int64 and the limits of
    :func:`default_max_lengths`."""
    check_sequence(src, "src", getattr(model, "max_len", None) or float("inf"))
    if src.numel() == 0:
        raise ValueError(f"src must have shape (batch, src_len) with batch, src_len >= 1, got {tuple(src.shape)}")
    check_token_id(bos_id, "bos_id")
    check_token_id(eos_id, "eos_id")
    return src.long(), default_max_lengths(model, src, max_len)


@contextlib.contextmanager
def eval_mode(model):
    """``model`` in evaluation mode (no dropout) inside a ``with``; its mode restored afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def next_log_probs(model, tokens: Tensor, memory: Tensor, src: Tensor, cache) -> Tensor:
    """Float32 log-probabilities ``(rows, vocab)`` of the token after each prefix of ``tokens`` ``(rows, t)``: with a
    cache only the last position is fed (the cache holds the others), without one the whole prefix."""
    step_input = tokens[:, -1:] if cache is not None else tokens  # (rows, 1) or (rows, t)
    logits = model.decode(step_input, memory, src, cache=cache)  # (rows, t_in, vocab)
    return torch.log_softmax(logits[:, -1].float(), dim=-1)  # (rows, vocab)
