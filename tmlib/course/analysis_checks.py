"""Checks of chapter 11's exercises (the entropy of an attention row, pruning heads cheapest first, the diagonal
share of a perfect alignment): the expected
values are computed inside and never printed; a failure names the variable that is off and, where it can, the
likely slip; an answer that is still the stub's ``...`` gets the course's "still `...`" message.
"""
from __future__ import annotations

import numpy as np

from tmlib.course.checks import as_float_array, check_close, check_shape, require_answered, rounding_atol
from tmlib.course.exercise_checks import _compare_rounded

__all__ = ["check_row_entropy", "check_max_entropy", "check_ln2_row", "check_greedy_pruning", "check_alignment_reads",
           "check_perfect_alignment"]

# Exercise 11.4: for each token the decoder produces (the English words of the translation, then <eos>), the
# German word it translates; the separable verb "führen ... auf" counts as "führen", <eos> reads the full stop
_READS = {
    "Mehrere Frauen führen vor einem Gebäude einen Tanz auf .": (
        "Mehrere", "Frauen", "führen", "führen", "einen", "Tanz", "vor", "vor", "vor", "einem", "Gebäude", ".", "."),
}


def _entropy(p) -> float:
    p = np.asarray(p, dtype=float)
    p = p[p > 0]
    return float(-np.sum(p * np.log(p)))


def check_row_entropy(answer, weights, what: str = "entropy", *, decimals: int = 4) -> str:
    """Check the entropy -Σ p log p of one attention row ``weights`` in nats, to ``decimals`` decimals, naming bits
    (log base 2) for nats, the minus sign left out and the largest weight's term alone; never the value."""
    p = np.asarray(weights, dtype=float)
    variants = [("the entropy in bits gives (the course measures in nats: natural logarithms)",
                 _entropy(p) / np.log(2)),
                ("Σ p log p gives without the minus sign (an entropy is never negative)", -_entropy(p)),
                ("the largest weight's term alone gives (every key's weight has a term)",
                 _entropy([p.max()]))]
    return _compare_rounded(answer, _entropy(p), what, variants, decimals)


def check_max_entropy(answer, n_keys: int, what: str = "max_entropy", *, decimals: int = 4) -> str:
    """Check the largest entropy of a row of attention over ``n_keys`` keys, in nats, to ``decimals`` decimals,
    naming bits for nats and the number of keys itself; never the value."""
    variants = [("the largest entropy in bits is (the course measures in nats: natural logarithms)",
                 np.log2(n_keys)),
                ("the number of keys is, not the entropy of the row that spreads over all of them", float(n_keys))]
    return _compare_rounded(answer, np.log(n_keys), what, variants, decimals)


def check_ln2_row(answer, n_keys: int = 4, what: str = "ln2_row", *, decimals: int = 4) -> str:
    """Check a row of ``n_keys`` attention weights (none negative, summing to 1) whose entropy is ln 2 nats, to
    ``decimals`` decimals; a failure says which of the three conditions fails, never a row that passes."""
    require_answered(answer, what)
    row = as_float_array(answer, "answer", what)
    check_shape(row, (n_keys,), f"{what} ({n_keys} weights, one per key)")
    if not np.all(np.isfinite(row)) or (row < 0).any():
        raise AssertionError(f"{what}: attention weights are never negative (or infinite)")
    check_close(row.sum(), 1.0, f"the sum of {what}'s weights", decimals=decimals)
    check_close(_entropy(row), np.log(2), f"the entropy of {what}", decimals=decimals)
    return f"correct: {what} has {n_keys} weights that sum to 1, with entropy ln 2 nats ({decimals} decimals)"


def check_greedy_pruning(n_ok, curve, model, batches, single, *, max_rise: float = 0.1, decimals: int = 4) -> str:
    """Check exercise 11.3: ``n_ok``, the number of heads that can be switched off, cheapest first (by
    ``single.delta_nll``, the one-head ablations), before the cross-entropy of ``batches`` rises by more than
    ``max_rise`` nats; and ``curve``, that cross-entropy with 0, 1, ..., ``n_ok`` + 1 heads off
    (:func:`tmlib.analysis.ablation.ablate_heads`, :func:`tmlib.analysis.ablation.nll_per_token`). A failure says
    whether ``n_ok`` is too many or too few, or which entry of ``curve`` is off; never a value."""
    from tmlib.analysis.ablation import ablate_heads, nll_per_token
    from tmlib.analysis.capture import Head

    require_answered(n_ok, "n_ok")
    require_answered(curve, "curve")
    order = [Head(r.kind, int(r.layer), int(r.head)) for r in single.sort_values("delta_nll").itertuples()]
    if isinstance(n_ok, bool) or not isinstance(n_ok, (int, np.integer)) or not 0 <= n_ok <= len(order):
        raise AssertionError(f"n_ok: a whole number of heads, 0 to {len(order)}, got {n_ok!r}")
    points = as_float_array(curve, "answer", "curve").reshape(-1)
    start = nll_per_token(model, batches)

    def rise(k):  # the rise of the cross-entropy with the k cheapest heads off
        with ablate_heads(model, order[:k]):
            return nll_per_token(model, batches) - start

    if points.size >= 2 and not np.isclose(points[1], start + rise(1), rtol=0, atol=rounding_atol(decimals)):
        check_close(points[0], start, "curve[0], every head in place", decimals=decimals)
        raise AssertionError("curve[1] is not the cross-entropy with the cheapest head off: are the heads switched "
                             "off in the order of the one-head table, cheapest (smallest delta_nll) first?")
    if rise(n_ok) > max_rise:
        raise AssertionError(f"n_ok is too large: with your n_ok heads off the cross-entropy has already risen by "
                             f"more than {max_rise} nats")
    if n_ok < len(order) and rise(n_ok + 1) <= max_rise:
        raise AssertionError(f"n_ok is too small: one more head can go before the rise exceeds {max_rise} nats")
    needed = min(n_ok + 2, len(order) + 1)
    if points.size < needed:
        raise AssertionError(f"curve has {points.size} entries: give the cross-entropy with 0, 1, ..., n_ok heads "
                             "off, and with one more (the first rise over the limit)")
    for k in range(needed):
        check_close(points[k], start + rise(k), f"curve[{k}], the {k} cheapest heads off", decimals=decimals)
    return (f"correct: n_ok heads can go within {max_rise} nats, and one more cannot; curve matches "
            f"({decimals} decimals)")


def check_alignment_reads(reads, keys, queries) -> str:
    """Check the first step of exercise 11.4: ``reads[k]``, the German word (one of ``keys``) that the ``k``-th token
    the decoder produces translates, where ``queries`` are the decoder inputs (``<bos>`` first) and ``queries[k]``
    predicts that token. Known sentences only (test sentence 882, ``_READS``). A failure names the first wrong
    entry by the English token and its query, never the German word it should be; a list shifted by one gets a
    hint on the indexing.

    Raises:
        TypeError: ``reads`` is still ``...``.
        ValueError: ``keys`` is not a sentence this check knows.
        AssertionError: a wrong length, a word that is not a key, or a wrong entry.
    """
    require_answered(reads, "reads")
    sentence = " ".join(keys)
    if sentence not in _READS:
        raise ValueError(f"check_alignment_reads knows no reference for the German sentence {sentence!r}")
    gold, queries = list(_READS[sentence]), list(queries)
    produced = queries[1:] + ["<eos>"]
    got = [str(r) for r in reads] if isinstance(reads, (list, tuple)) else None
    if got is None:
        raise AssertionError("reads: give a list of German words, one per token the decoder produces")
    if len(got) != len(gold):
        raise AssertionError(f"reads has {len(got)} entries: it needs one per token the decoder produces, <eos> "
                             f"included ({len(gold)})")
    strange = [k for k, r in enumerate(got) if r not in keys]
    if strange:
        raise AssertionError(f"reads[{strange[0]}] = {got[strange[0]]!r} is not one of the German words (the keys)")
    wrong = [k for k in range(len(gold)) if got[k] != gold[k]]
    if not wrong:
        return "correct: reads, the German word of each token produced"
    if got[1:] == gold[:-1]:
        raise AssertionError("reads looks shifted by one: reads[k] belongs to the k-th token produced, the one "
                             "queries[k] predicts, not to queries[k] itself")
    k = wrong[0]
    more = f" ({len(wrong) - 1} more entries differ)" if len(wrong) > 1 else ""
    raise AssertionError(f"reads[{k}]: the token {produced[k]!r} (predicted by the query at {queries[k]!r}) does "
                         f"not translate {got[k]!r}{more}")


def check_perfect_alignment(perfect, diagonal, keys, queries, *, decimals: int = 4) -> str:
    """Check exercise 11.4: ``perfect``, the cross-attention ``(len(queries), len(keys))`` of a hard aligner whose
    query ``i`` (the decoder input ``queries[i]``, ``<bos>`` first) puts all its weight on the German word of the
    token it predicts (the sentence's reference, as :func:`check_alignment_reads` knows it, so that a wrong ``reads``
    cannot make its own matrix pass); and ``diagonal``, that matrix's diagonal share
    (:func:`tmlib.analysis.heads.attention_statistics`), to ``decimals`` decimals; a number, or a tensor or array of
    one element (0-d or shape ``(1,)``). A failure names the first wrong row by its query, never the matrix or the
    value.

    Raises:
        TypeError: an answer is still ``...``.
        ValueError: ``keys`` is not a sentence this check knows.
        AssertionError: a wrong shape, row or share.
    """
    import torch

    from tmlib.analysis.heads import attention_statistics

    require_answered(perfect, "perfect")
    require_answered(diagonal, "diagonal")
    keys, n_q, n_k = list(keys), len(queries), len(keys)
    if " ".join(keys) not in _READS:
        raise ValueError(f"check_perfect_alignment knows no reference for the German sentence {' '.join(keys)!r}")
    want = np.zeros((n_q, n_k))
    for i, word in enumerate(_READS[" ".join(keys)]):
        want[i, keys.index(word)] = 1.0
    got = as_float_array(perfect, "answer", "perfect")
    check_shape(got, (n_q, n_k), f"perfect ({n_q} queries, {n_k} German words)")
    wrong = [i for i in range(n_q) if not np.allclose(got[i], want[i], atol=1e-6)]
    if wrong:
        more = f" ({len(wrong) - 1} more rows differ)" if len(wrong) > 1 else ""
        raise AssertionError(f"perfect: row {wrong[0]}, the query at {queries[wrong[0]]!r}, does not put all its "
                             f"weight on the German word of the token it predicts{more}")
    real_q, real_k = torch.ones(1, n_q, dtype=torch.bool), torch.ones(1, n_k, dtype=torch.bool)

    def share(w):
        return float(attention_statistics(torch.tensor(w)[None, None], real_q, real_k, "cross")["diagonal"][0])

    late = np.zeros_like(want)
    late[1:] = want[:-1]
    late[0, 0] = 1.0
    variants = [("the matrix without the shift by one gives (a query reads what it predicts)", share(late))]
    one = as_float_array(diagonal, "answer", "diagonal")
    if one.size == 1:  # a 0-d or shape-(1,) tensor or array, as attention_statistics returns it: its value
        diagonal = float(one.reshape(()))
    _compare_rounded(diagonal, share(want), "diagonal", variants, decimals)
    return f"correct: perfect, row by row, and its diagonal share ({decimals} decimals)"
