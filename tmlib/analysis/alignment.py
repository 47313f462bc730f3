"""From BPE pieces to words: cross-attention read as a soft word alignment (chapter 11).

The model attends between sub-word pieces (``▁lä`` + ``dt``); a reader thinks in words.  :func:`word_spans` groups
the pieces of the course's tokenizer into words, :func:`merge_attention` turns attention between pieces into
attention between words (Clark et al. 2019, §2 "word-level attention maps"), and :func:`word_alignment` applies
both to the cross-attention of one sentence pair, the soft alignment that Bahdanau et al. (2015) first drew.
"""
from __future__ import annotations

import unicodedata
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["word_spans", "word_labels", "merge_attention", "word_alignment"]


def _is_special(piece: str) -> bool:
    """``<bos>``, ``<eos>``, ``<pad>``, ``<unk>``: a special token of the tokenizer."""
    return len(piece) > 2 and piece.startswith("<") and piece.endswith(">")


def _is_punctuation(piece: str) -> bool:
    """A piece made of punctuation only (after removing ``▁``), which the tokenizer splits off as a word."""
    text = piece.replace("▁", "")
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def word_spans(pieces: Sequence[str]) -> list[tuple[int, int]]:
    """Group BPE pieces into words: ``[(start, end), …]`` half-open index ranges covering all pieces in order.

    The course's tokenizer (``tmlib.data.train_tokenizer``: Metaspace, punctuation split off) writes ``▁`` at the
    start of every word.  A piece starts a new word when it begins with ``▁``, when it is a special token
    (``<bos>``, ``<eos>``, …) or punctuation, or when the piece before it was one of those; otherwise it continues
    the current word (``▁lä`` + ``dt`` = *lädt*).  A bare ``▁`` piece joins the piece after it.

    Args:
        pieces: token strings, e.g. from ``tokenizer.tokens(text)``.

    Returns:
        list of ``(start, end)`` with ``pieces[start:end]`` one word.

    Raises:
        TypeError: ``pieces`` is a string or holds non-strings.
    """
    if isinstance(pieces, str) or not all(isinstance(p, str) for p in pieces):
        raise TypeError("pieces must be a sequence of token strings, e.g. tokenizer.tokens(text)")
    spans: list[tuple[int, int]] = []
    start = 0
    for k in range(1, len(pieces) + 1):
        if k == len(pieces):
            break
        prev, piece = pieces[k - 1], pieces[k]
        if prev == "▁":
            continue
        if (piece.startswith("▁") or _is_special(piece) or _is_special(prev) or _is_punctuation(piece)
                or _is_punctuation(prev)):
            spans.append((start, k))
            start = k
    if pieces:
        spans.append((start, len(pieces)))
    return spans


def word_labels(pieces: Sequence[str], spans: Sequence[tuple[int, int]] | None = None) -> list[str]:
    """The words of :func:`word_spans`: the pieces of each span joined, without ``▁``.

    Args:
        pieces: token strings.
        spans: their word spans (default: :func:`word_spans` of ``pieces``).

    Returns:
        one string per span (a bare ``▁`` piece stays ``"▁"``).

    Raises:
        TypeError: as :func:`word_spans`.
    """
    spans = word_spans(pieces) if spans is None else spans
    return ["".join(pieces[a:b]).replace("▁", "") or "▁" for a, b in spans]


def _check_spans(spans, n: int, name: str) -> list[tuple[int, int]]:
    """``spans`` as int pairs; ValueError unless they are consecutive non-empty ranges covering ``0 … n``."""
    spans = [tuple(int(x) for x in s) for s in spans]
    position = 0
    for a, b in spans:
        if a != position or b <= a:
            raise ValueError(f"{name} must be consecutive non-empty (start, end) ranges from 0, got {spans}")
        position = b
    if position != n:
        raise ValueError(f"{name} cover {position} positions, but the weights have {n}: {spans}")
    return spans


def merge_attention(weights, query_spans: Sequence[tuple[int, int]], key_spans: Sequence[tuple[int, int]]
                    ) -> np.ndarray:
    """Attention between BPE pieces → attention between words.

    Rule: **sum over the key pieces** of a word, **average over the query pieces** of a word.  A query's weights
    are a probability distribution over keys, so the mass a query puts on a word is the sum of the masses on its
    pieces (rows keep summing to 1); a word made of several query pieces has several such distributions, and
    their mean is again a distribution (summing would make rows add up to the number of pieces).  The same rule
    as Clark et al. (2019, §2 "word-level attention maps") and bertviz's word-level views.

    Args:
        weights: ``(n_q, n_k)`` array or tensor over pieces.
        query_spans: word spans of the query pieces (:func:`word_spans`), covering ``0 … n_q``.
        key_spans: word spans of the key pieces, covering ``0 … n_k``.

    Returns:
        float64 array ``(len(query_spans), len(key_spans))``.

    Raises:
        ValueError: weights not 2-D, or spans that are not consecutive ranges covering the axis exactly.
    """
    w = weights.detach().cpu().to(torch.float64).numpy() if isinstance(weights, Tensor) else np.asarray(
        weights, dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (n_q, n_k), got shape {w.shape}")
    qs = _check_spans(query_spans, w.shape[0], "query_spans")
    ks = _check_spans(key_spans, w.shape[1], "key_spans")
    by_key = np.stack([w[:, a:b].sum(axis=1) for a, b in ks], axis=1)  # (n_q, n_key_words): sum over key pieces
    return np.stack([by_key[a:b].mean(axis=0) for a, b in qs], axis=0)  # (n_query_words, n_key_words)


def word_alignment(pair: dict, layer: int = -1, heads: Sequence[int] | None = None
                   ) -> tuple[np.ndarray, list[str], list[str]]:
    """Cross-attention of one sentence as a word-level soft alignment.

    Args:
        pair: the dict of :func:`tmlib.analysis.capture.translate_and_capture`.
        layer: decoder layer (negative counts from the end).
        heads: heads to average (default: all heads of the layer).

    Returns:
        ``(weights, source_words, target_words)``: float64 ``(n_target_words, n_source_words)``, rows = the words
        the decoder produces (``y_1 … <eos>``), columns = source words; pieces merged with :func:`merge_attention`.

    Raises:
        IndexError: ``layer`` or a head outside the model.
    """
    w = pair["capture"].weights["cross"][layer][0]  # (n_heads, tgt_len, src_len)
    w = w.mean(dim=0) if heads is None else w[list(heads)].mean(dim=0)  # (tgt_len, src_len)
    q_spans, k_spans = word_spans(pair["produced_pieces"]), word_spans(pair["src_pieces"])
    return (merge_attention(w, q_spans, k_spans), word_labels(pair["src_pieces"], k_spans),
            word_labels(pair["produced_pieces"], q_spans))
