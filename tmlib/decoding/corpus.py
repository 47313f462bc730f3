"""Translating a whole corpus of text (paper §6.1): tokenize, batch by source length
(:func:`tmlib.data.batching.length_batches`), decode with greedy or beam search, detokenize, restore the original
order.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import torch

from tmlib.decoding.beam import beam_search
from tmlib.decoding.greedy import greedy_decode
from tmlib.validation import check_int, check_texts

__all__ = ["translate_corpus", "screen_sources"]


def _indices(ix: list[int], shown: int = 5) -> str:
    """The first ``shown`` indices of ``ix``, for a warning (``"1, 3, 8, ..."``)."""
    return ", ".join(map(str, ix[:shown])) + (", ..." if len(ix) > shown else "")


def screen_sources(sentences: Sequence[str], ids: Sequence[Sequence[int]], tokenizer,
                   max_len: int | None) -> tuple[list[int], list[int], list[int]]:
    """Which sources a model can translate (the input rules of :func:`translate_corpus`): ``(todo, unknown, long)``,
    0-based indices of the sentences to decode (neither blank nor all ``<unk>``), of those made only of unknown
    tokens, and of those of ``todo`` longer than ``max_len`` tokens (``ids``: the sentences' token ids)."""
    blank = [not s.strip() or not row for s, row in zip(sentences, ids)]  # translated to ""
    unknown = [i for i, row in enumerate(ids) if not blank[i] and tokenizer.unknown_fraction(row) == 1.0]
    skip = set(unknown)
    todo = [i for i in range(len(ids)) if not blank[i] and i not in skip]
    long = [i for i in todo if len(ids[i]) > max_len] if max_len is not None else []
    return todo, unknown, long


def translate_corpus(model, tokenizer, sentences: Sequence[str], beam_size: int = 1, batch_tokens: int = 4000,
                     device=None, length_penalty: float = 0.6, max_len: int | None = None,
                     progress: bool = True, warn: bool = True) -> list[str]:
    """Translate many sentences: tokenize, batch by source length, decode, detokenize, restore the order.

    Batches hold at most ``batch_tokens`` padded source tokens, beams included (:func:`tmlib.data.batching.
    length_batches`); each is decoded greedily (``beam_size=1``) or by beam search (§6.1: 4, ``length_penalty``
    0.6). A blank sentence gives ``""``; one of ``<unk>`` only gives ``""`` and one longer than ``model.max_len``
    is truncated, both with a :class:`UserWarning` naming them unless ``warn=False`` (:func:`screen_sources`).
    ``device``: ``None`` (the model's), ``"auto"`` (:func:`tmlib.utils.get_device`) or a device, the model moved
    there. ``max_len``: generated tokens (``None``: source length + 50). ``progress``: a tqdm bar.

    Raises:
        TypeError: ``sentences`` not a list of strings; ``beam_size``/``batch_tokens`` not integers.
        ValueError: ``beam_size`` or ``batch_tokens`` < 1; a tokenizer pad id other than ``model.pad_id``.
    """
    from tqdm import tqdm  # the text bar on stderr (a widget bar could not be drawn by the offline site)

    from tmlib.data.batch import pad_ids
    from tmlib.data.batching import length_batches
    from tmlib.utils import get_device

    sentences = check_texts(sentences, "sentences")
    beam_size = check_int(beam_size, "beam_size", minimum=1)
    batch_tokens = check_int(batch_tokens, "batch_tokens", minimum=1)
    pad_id = getattr(model, "pad_id", tokenizer.pad_id)
    if pad_id != tokenizer.pad_id:
        raise ValueError(f"tokenizer pad id {tokenizer.pad_id} differs from model.pad_id {pad_id}")
    if device is None:
        param = next(model.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
    elif device == "auto":
        device = get_device()
    device = torch.device(device)
    model.to(device)

    ids = tokenizer.encode_batch(sentences) if sentences else []
    limit = getattr(model, "max_len", None)
    todo, unknown, long = screen_sources(sentences, ids, tokenizer, limit)
    if unknown and warn:
        warnings.warn(f"{len(unknown)} source sentence(s) consist only of unknown tokens (<unk>), e.g. text in "
                      f"another script than the training data; they were given empty translations "
                      f"(sentences {_indices(unknown)}, counting from 0)", stacklevel=2)
    if long and warn:
        warnings.warn(f"{len(long)} source sentence(s) longer than model.max_len={limit} tokens were "
                      f"truncated (sentences {_indices(long)}, counting from 0)", stacklevel=2)
    for i in long:
        ids[i] = ids[i][:limit]

    outputs: list[str] = [""] * len(sentences)
    batches = length_batches([len(ids[i]) for i in todo], max(1, batch_tokens // beam_size))
    with tqdm(total=len(todo), desc=f"translating ({'greedy' if beam_size == 1 else f'beam {beam_size}'})",
              unit="sent", disable=not progress) as bar:
        for batch in batches:
            src = pad_ids([ids[todo[j]] for j in batch], pad_id).to(device)  # (batch, src_len)
            if beam_size == 1:
                hyps = greedy_decode(model, src, tokenizer.bos_id, tokenizer.eos_id, max_len=max_len)
            else:
                hyps = beam_search(model, src, tokenizer.bos_id, tokenizer.eos_id, beam_size=beam_size,
                                   length_penalty=length_penalty, max_len=max_len)
            for j, hyp in zip(batch, hyps):
                outputs[todo[j]] = tokenizer.decode(hyp)
            bar.update(len(batch))
    return outputs
