"""Scoring translations with sacreBLEU (paper §6.1, Table 2).

BLEU is computed by a library, not by hand: sacreBLEU (Post 2018, "A Call for Clarity in Reporting
BLEU Scores") scores detokenized text with its own fixed tokenizer and prints a *signature* that
says exactly how the number was computed, so scores can be compared across papers. The paper's
28.4 (EN-DE) was computed on tokenized text (``multi-bleu.perl``), which is not directly
comparable to a sacreBLEU score. The translations come from :func:`tmlib.decoding.corpus.translate_corpus`.
"""
from __future__ import annotations

from typing import Sequence

from tmlib.validation import check_texts

__all__ = ["bleu_scores"]


def bleu_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """Corpus-level BLEU (cased and lowercased) and chrF of n detokenized ``hypotheses`` against n ``references``,
    by sacreBLEU with its defaults (13a tokenizer, exp smoothing; chrF: character 6-grams, β = 2).

    Returns:
        ``{"bleu", "bleu_lowercase", "chrf"}`` (0-100), ``"bleu_precisions"`` (4 n-gram precisions, %),
        ``"brevity_penalty"``, ``"hyp_len"``, ``"ref_len"`` (13a tokens) and ``"signatures"`` (each score's).

    Raises:
        TypeError: not lists of strings. ValueError: different lengths, or empty.
    """
    from sacrebleu.metrics import BLEU, CHRF

    hypotheses = check_texts(hypotheses, "hypotheses")
    references = check_texts(references, "references")
    if len(hypotheses) != len(references):
        raise ValueError(f"hypotheses and references must have the same length, "
                         f"got {len(hypotheses)} and {len(references)}")
    if not hypotheses:
        raise ValueError("hypotheses and references are empty")
    bleu, bleu_lc, chrf = BLEU(), BLEU(lowercase=True), CHRF()
    cased = bleu.corpus_score(hypotheses, [references])
    lower = bleu_lc.corpus_score(hypotheses, [references])
    char = chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": float(cased.score),
        "bleu_lowercase": float(lower.score),
        "chrf": float(char.score),
        "bleu_precisions": [float(p) for p in cased.precisions],
        "brevity_penalty": float(cased.bp),
        "hyp_len": int(cased.sys_len),
        "ref_len": int(cased.ref_len),
        "signatures": {"bleu": str(bleu.get_signature()), "bleu_lowercase": str(bleu_lc.get_signature()),
                       "chrf": str(chrf.get_signature())},
    }
