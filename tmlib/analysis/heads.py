"""Per-head statistics of attention: what each head of a trained translator looks at, measured (chapter 11).

For each head, averaged over the real query positions of a corpus: the entropy of its weights and the share of its
mass on the previous token, the same position, the first token, the last token, and (cross-attention) near the
proportional diagonal.  The statistics follow Voita et al. (2019, "Analyzing Multi-Head Self-Attention", §4:
positional heads attending to the previous/next token) and Clark et al. (2019, "What Does BERT Look At?", §3:
attention to special tokens and punctuation, per-head entropy).
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch import Tensor

from tmlib.analysis.capture import ATTENTION_KINDS, as_pair, check_kind, capture_attention

__all__ = ["STATISTICS", "attention_statistics", "diagonal_centre", "head_statistics", "statistic_sums"]

#: The per-head statistics of :func:`attention_statistics`, in table order.
STATISTICS = ("entropy", "max_entropy", "previous", "same", "first", "last", "diagonal")


def _check_contiguous(mask: Tensor, name: str) -> Tensor:
    """Lengths ``(batch,)`` of a right-padded bool mask; ValueError unless each row is True…True False…False."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.dim() != 2:
        raise TypeError(f"{name} must be a bool tensor (batch, seq_len), True = real token; got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)} of shape {tuple(getattr(mask, 'shape', ()))}")
    lengths = mask.sum(dim=1)  # (batch,)
    expected = torch.arange(mask.shape[1], device=mask.device)[None, :] < lengths[:, None]
    if not torch.equal(mask, expected):
        raise ValueError(f"{name} must be right-padded (each row True…True then False…False)")
    return lengths


def _checked_lengths(weights: Tensor, query_mask: Tensor, key_mask: Tensor, kind: str) -> tuple[Tensor, Tensor]:
    """The real lengths ``(batch,)`` of queries and keys, after checking the inputs of :func:`attention_statistics`."""
    check_kind(kind)
    if not isinstance(weights, Tensor) or not weights.is_floating_point() or weights.dim() != 4:
        raise ValueError(f"weights must be a float tensor (batch, n_heads, n_q, n_k), got "
                         f"{getattr(weights, 'dtype', type(weights).__name__)} of shape "
                         f"{tuple(getattr(weights, 'shape', ()))}")
    batch, n_heads, n_q, n_k = weights.shape
    n_q_real = _check_contiguous(query_mask, "query_mask")
    n_k_real = _check_contiguous(key_mask, "key_mask")
    if tuple(query_mask.shape) != (batch, n_q) or tuple(key_mask.shape) != (batch, n_k):
        raise ValueError(f"masks {tuple(query_mask.shape)} and {tuple(key_mask.shape)} do not match weights "
                         f"{tuple(weights.shape)}: expected (batch, n_q) = {(batch, n_q)} and (batch, n_k) = "
                         f"{(batch, n_k)}")
    if kind != "cross" and n_q != n_k:
        raise ValueError(f"{kind} attention needs n_q == n_k, got weights of shape {tuple(weights.shape)}")
    if bool((n_k_real[n_q_real > 0] == 0).any()):
        raise ValueError("a sentence with real queries has no real key")
    return n_q_real, n_k_real


def diagonal_centre(positions, n_q, n_k):
    """The proportional diagonal of cross-attention: the key position ``(i + 1/2) n_k / n_q - 1/2`` at which query
    ``i`` of ``n_q`` sits when the ``n_q`` queries are spread evenly over the ``n_k`` keys (the centres of equal
    slices). NumPy arrays, tensors or numbers, broadcast together (``n_q`` > 0); the result has their shape."""
    return (positions + 0.5) * (n_k / n_q) - 0.5


def statistic_sums(weights: Tensor, query_mask: Tensor, key_mask: Tensor, kind: str) -> tuple[Tensor, Tensor]:
    """The sums behind :func:`attention_statistics` (which divides them): per statistic, its sum over the real
    queries of every head, ``(len(STATISTICS), n_heads)`` float64, and the number of queries summed,
    ``(len(STATISTICS),)``; inputs and errors as :func:`attention_statistics`.

    Each statistic is a value per head and query, ``(batch, n_heads, n_q')``, with the queries it is defined for,
    ``(batch, n_q')``; a statistic that does not apply to ``kind`` sums to NaN over no query.
    """
    n_q_real, n_k_real = _checked_lengths(weights, query_mask, key_mask, kind)
    batch, n_heads, n_q, n_k = weights.shape
    device = weights.device
    w = weights.detach().to(torch.float64)  # (batch, h, n_q, n_k)
    i = torch.arange(n_q, device=device)  # query positions
    j = torch.arange(n_k, device=device)  # key positions
    allowed = key_mask[:, None, :].expand(batch, n_q, n_k)  # (batch, n_q, n_k)
    if kind == "decoder self":
        allowed = allowed & (j[None, :] <= i[:, None])[None]
    n_allowed = allowed.sum(dim=-1)  # (batch, n_q)
    terms = {}  # statistic -> (value (batch, h, n_q'), valid queries (batch, n_q'))

    # entropy in nats, 0 log 0 = 0
    plogp = torch.where(w > 0, w * torch.log(w.clamp_min(1e-300)), torch.zeros_like(w))
    terms["entropy"] = -plogp.sum(dim=-1), query_mask
    # entropy of the uniform distribution over the allowed keys
    max_ent = torch.log(n_allowed.clamp_min(1).to(torch.float64))  # (batch, n_q)
    terms["max_entropy"] = max_ent[:, None, :].expand(batch, n_heads, n_q), query_mask
    chooses = query_mask & (n_allowed > 1)  # (batch, n_q): a query that sees one key only has no choice
    if kind != "cross":
        # previous token: weight of key i-1 for queries i >= 1
        terms["previous"] = torch.diagonal(w, offset=-1, dim1=-2, dim2=-1), chooses[:, 1:]  # (batch, h, n_q - 1)
        terms["same"] = torch.diagonal(w, dim1=-2, dim2=-1), chooses  # (batch, h, n_q)
    terms["first"] = w[..., 0], chooses
    # the last real key is visible only to the last query of causal attention: not defined there
    if kind != "decoder self":
        last_index = (n_k_real - 1).clamp_min(0)[:, None, None, None].expand(batch, n_heads, n_q, 1)
        terms["last"] = w.gather(-1, last_index)[..., 0], chooses  # (batch, h, n_q)
    if kind == "cross":
        # the proportional diagonal: query i of n_q_real sits at key position (i + 1/2) n_k / n_q - 1/2
        centre = diagonal_centre(i[None, :].to(torch.float64), n_q_real.clamp_min(1).to(torch.float64)[:, None],
                                 n_k_real.to(torch.float64)[:, None])  # (batch, n_q)
        near = (j[None, None, :] - centre[:, :, None]).abs() <= 1.0  # (batch, n_q, n_k): within ±1 key
        near = near & key_mask[:, None, :]
        terms["diagonal"] = (w * near[:, None].to(torch.float64)).sum(dim=-1), chooses  # (batch, h, n_q)

    sums, counts = [], []
    for name in STATISTICS:
        if name in terms:
            values, valid = terms[name]
            valid = valid.to(torch.float64)
            sums.append((values * valid[:, None, :]).sum(dim=(0, 2)))  # (h,)
            counts.append(valid.sum())
        else:
            sums.append(torch.full((n_heads,), float("nan"), dtype=torch.float64, device=device))
            counts.append(torch.tensor(0.0, dtype=torch.float64, device=device))
    return torch.stack(sums), torch.stack(counts)


def attention_statistics(weights: Tensor, query_mask: Tensor, key_mask: Tensor, kind: str) -> dict:
    """Per-head statistics of attention weights, averaged over every real query of every sentence (Voita et al. 2019
    §4; Clark et al. 2019 §3): ``entropy`` (nats) and its bound ``max_entropy`` (ln of the keys a query may see),
    the weight on the ``previous`` key, the ``same`` key (self-attention), the ``first`` key, the ``last`` real key
    (the final full stop: the "sink" heads find) and, for cross-attention, within ±1 of the proportional
    ``diagonal``; NaN where a statistic does not apply. The shares (previous, same, first, last, diagonal) leave out
    a query that may see one key only, as the decoder's first query sees only ``<bos>``: it has no choice to make.

    weights ``(batch, n_heads, n_q, n_k)``; query_mask ``(batch, n_q)`` and key_mask ``(batch, n_k)``, bool, True =
    real, right-padded; kind ``"encoder self"``, ``"decoder self"`` (causal) or ``"cross"`` → ``{statistic:
    (n_heads,)}``.

    Raises:
        ValueError: an unknown kind, weights not 4-D float, masks of the wrong shape or not right-padded, a sentence
            with queries but no key, self-attention with ``n_q != n_k``.
        TypeError: a mask that is not a 2-D bool tensor.
    """
    sums, counts = statistic_sums(weights, query_mask, key_mask, kind)
    means = sums / counts[:, None]  # NaN where nothing was counted
    return {name: means[k].cpu().numpy() for k, name in enumerate(STATISTICS)}


def head_statistics(model, batches: Iterable) -> "pd.DataFrame":
    """A table of :func:`attention_statistics` for every head of ``model`` over teacher-forced ``batches`` (Batches or
    ``(src, tgt_in)`` pairs, right-padded): one row per head (``kind``, ``layer``, ``head``, the statistics).
    Raises ValueError: no batch, or batches that are not right-padded."""
    import pandas as pd

    totals: dict = {}
    for batch in batches:
        src, tgt_in = as_pair(batch)
        cap = capture_attention(model, src, tgt_in)
        for kind in ATTENTION_KINDS:
            qm, km, _ = cap.masks(kind)
            for layer, w in enumerate(cap.weights[kind]):
                s, c = statistic_sums(w, qm, km, kind)
                if (kind, layer) in totals:
                    s0, c0 = totals[(kind, layer)]
                    s, c = s0 + s, c0 + c
                totals[(kind, layer)] = (s, c)
    if not totals:
        raise ValueError("head_statistics needs at least one batch")
    rows = []
    for (kind, layer), (s, c) in totals.items():
        means = (s / c[:, None]).cpu().numpy()  # (n_stats, n_heads)
        for h in range(means.shape[1]):
            rows.append({"kind": kind, "layer": layer, "head": h,
                         **{name: float(means[k, h]) for k, name in enumerate(STATISTICS)}})
    return pd.DataFrame(rows)
