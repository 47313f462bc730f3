"""Greedy decoding for an encoder-decoder Transformer, and the decoding steps that beam search shares (paper §6.1).

The decoders take any ``model`` (a ``torch.nn.Module``) with the interface of
:class:`tmlib.model.transformer.Transformer`:

* ``model.encode(src) -> memory`` with ``src`` ``(batch, src_len)`` int64 and ``memory``
  ``(batch, src_len, d_model)``;
* ``model.decode(tgt, memory, src, cache=None) -> logits`` ``(batch, tgt_len, vocab)``; with a
  cache, ``tgt`` holds only the new position(s);
* ``model.new_cache()``: an empty key/value cache; ``cache.reorder(index)`` keeps batch rows
  ``index`` (beam search), ``len(cache)`` is the number of positions decoded so far;
* ``model.pad_id`` and (optionally) ``model.max_len``.

Conventions shared by greedy decoding and beam search (:mod:`tmlib.decoding.beam`):

* A generated sequence starts after ``<bos>``; ``<eos>`` counts as a generated token (it is
  predicted like any other), but is not returned. The returned token ids contain neither.
* ``max_len`` is the largest number of generated tokens (``<eos>`` included). ``None`` means
  the paper's rule, per sentence: (number of non-pad source tokens) + 50, capped so that
  ``<bos>`` plus the output fits in ``model.max_len`` positions. The paper (§6.1): "We set the maximum
  output length during inference to input length + 50, but terminate early when possible."
* Sentences are independent: decoding a padded batch gives what decoding each sentence alone
  gives (the padding mask hides the padding; the length limit uses the unpadded length).
"""
from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from tmlib.validation import check_int, check_token_id

__all__ = ["greedy_decode", "default_max_lengths"]


def _check_src(src) -> Tensor:
    """``src`` as int64 source ids ``(batch, src_len)``, both at least 1.

    Raises:
        TypeError: not a tensor, or not an integer dtype.
        ValueError: not 2-D, or empty.
    """
    if not isinstance(src, Tensor):
        raise TypeError(f"src must be a torch.Tensor of token ids, got {type(src).__name__}")
    if src.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise TypeError(f"src must hold integer token ids, got dtype {src.dtype}")
    if src.dim() != 2 or src.shape[0] == 0 or src.shape[1] == 0:
        raise ValueError(f"src must have shape (batch, src_len) with batch, src_len >= 1, got {tuple(src.shape)}")
    return src.long()


def default_max_lengths(model, src: Tensor, max_len: int | None = None) -> list[int]:
    """Per-sentence limits on the number of generated tokens.

    Args:
        model: provides ``pad_id`` and optionally ``max_len`` (positions of the positional encoding).
        src: ``(batch, src_len)`` int64 source ids padded with ``model.pad_id``.
        max_len: ``None`` for the paper's "input length + 50", or a positive int for all sentences.

    Returns:
        list of ``batch`` ints, each >= 1.

    Raises:
        TypeError: ``max_len`` is not an integer.
        ValueError: ``max_len`` < 1.
    """
    if max_len is None:
        pad_id = getattr(model, "pad_id", 0)
        limits = [int(n) + 50 for n in (src != pad_id).sum(dim=1).tolist()]
    else:
        max_len = check_int(max_len, "max_len", minimum=1)
        limits = [max_len] * src.shape[0]
    positions = getattr(model, "max_len", None)
    if positions is not None:  # <bos> takes position 0; the last generated token needs no position
        limits = [max(1, min(n, int(positions))) for n in limits]
    return limits


@contextlib.contextmanager
def _eval_mode(model):
    """Put ``model`` in eval mode (no dropout) inside a ``with``; restore its mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _next_log_probs(model, tokens: Tensor, memory: Tensor, src: Tensor, cache) -> Tensor:
    """Log-probabilities of the next token after each prefix in ``tokens`` ``(rows, t)``.

    With a cache only the last position is fed (the cache holds the earlier ones); without one
    the whole prefix is recomputed. Returns ``(rows, vocab)`` float32.
    """
    step_input = tokens[:, -1:] if cache is not None else tokens  # (rows, 1) or (rows, t)
    logits = model.decode(step_input, memory, src, cache=cache)  # (rows, t_in, vocab)
    return torch.log_softmax(logits[:, -1].float(), dim=-1)  # (rows, vocab)


@torch.no_grad()
def greedy_decode(model, src: Tensor, bos_id: int, eos_id: int, max_len: int | None = None,
                  use_cache: bool = True) -> list[list[int]]:
    """Greedy decoding: at each step append the most probable next token.

    The loop keeps its state in tensors on the model's device and reads one value back per step (whether
    every sentence has finished), so a GPU is not made to wait more than that.

    Args:
        model: an encoder-decoder with ``encode``/``decode``/``new_cache`` (module docstring).
        src: ``(batch, src_len)`` integer source ids, padded with ``model.pad_id``.
        bos_id: id of ``<bos>``, the first decoder input.
        eos_id: id of ``<eos>``; a sentence stops when it is generated.
        max_len: largest number of generated tokens (``<eos>`` included); ``None``: source
            length + 50 per sentence (paper §6.1), capped by ``model.max_len``.
        use_cache: feed one new position per step and reuse the cached keys/values
            (``model.new_cache()``); ``False`` recomputes the whole prefix every step (same result,
            O(t²) work per sentence instead of O(t)).

    Returns:
        ``batch`` lists of token ids, without ``<bos>`` and ``<eos>``.

    Raises:
        TypeError: ``src`` is not a tensor of integer ids; ``bos_id``/``eos_id``/``max_len`` not integers.
        ValueError: ``src`` is not 2-D or empty; ``bos_id``/``eos_id`` negative, ``max_len`` < 1.
    """
    src = _check_src(src)
    bos_id, eos_id = check_token_id(bos_id, "bos_id"), check_token_id(eos_id, "eos_id")
    limits = default_max_lengths(model, src, max_len)
    batch, device = src.shape[0], src.device
    limit = torch.tensor(limits, device=device)  # (batch,)
    with _eval_mode(model):
        memory = model.encode(src)  # (batch, src_len, d_model)
        cache = model.new_cache() if use_cache else None
        tokens = torch.full((batch, 1), bos_id, dtype=torch.long, device=device)  # (batch, 1)
        finished = torch.zeros(batch, dtype=torch.bool, device=device)  # (batch,)
        length = torch.zeros(batch, dtype=torch.long, device=device)  # generated tokens, <eos> excluded
        for _ in range(max(limits)):
            log_probs = _next_log_probs(model, tokens, memory, src, cache)  # (batch, vocab)
            next_tokens = log_probs.argmax(dim=-1).masked_fill(finished, eos_id)  # finished rows are fed <eos>
            length += ~finished & (next_tokens != eos_id)
            finished = finished | (next_tokens == eos_id) | (length >= limit)
            tokens = torch.cat([tokens, next_tokens[:, None]], dim=1)  # (batch, step + 2)
            if bool(finished.all()):  # the one value read back per step
                break
    rows, lengths = tokens[:, 1:].tolist(), length.tolist()
    return [row[:n] for row, n in zip(rows, lengths)]
