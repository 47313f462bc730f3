"""Scoring translations with sacreBLEU, and translating a whole corpus (paper §6.1, Table 2).

BLEU is computed by a library, not by hand: sacreBLEU (Post 2018, "A Call for Clarity in Reporting
BLEU Scores") scores detokenized text with its own fixed tokenizer and prints a *signature* that
says exactly how the number was computed, so scores can be compared across papers. The paper's
28.4 (EN-DE) was computed on tokenized text (``multi-bleu.perl``), which is not directly
comparable to a sacreBLEU score.

* :func:`bleu_scores` — cased BLEU (the standard), lowercased BLEU, and chrF, with signatures.
* :func:`translate_corpus` — tokenize, batch by length, decode (greedy or beam), detokenize, and
  restore the original order.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import torch

from .validation import check_int

__all__ = ["bleu_scores", "translate_corpus"]


def _check_texts(texts, name: str) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"{name} must be a list of strings (one per sentence), got {type(texts).__name__}")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"{name}[{bad[0]}] is {type(texts[bad[0]]).__name__}, expected str")
    return list(texts)


def bleu_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """Corpus-level BLEU (cased and lowercased) and chrF of detokenized translations, by sacreBLEU.

    Args:
        hypotheses: n system translations, plain detokenized text, one per sentence.
        references: n reference translations, aligned with ``hypotheses`` (one reference each).

    Returns:
        dict with
        ``"bleu"`` (float, 0–100): cased BLEU, sacreBLEU's defaults (13a tokenizer, exp smoothing);
        ``"bleu_lowercase"`` (float): the same with ``lowercase=True``;
        ``"chrf"`` (float, 0–100): chrF (character 6-grams, β = 2);
        ``"bleu_precisions"`` (list of 4 floats): the modified n-gram precisions in percent;
        ``"brevity_penalty"`` (float), ``"hyp_len"``/``"ref_len"`` (ints, 13a tokens);
        ``"signatures"``: dict with the sacreBLEU signature of each score
        (e.g. ``"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"``).

    Raises:
        TypeError: not lists of strings.
        ValueError: different lengths, or empty.
    """
    from sacrebleu.metrics import BLEU, CHRF

    hypotheses = _check_texts(hypotheses, "hypotheses")
    references = _check_texts(references, "references")
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


def _length_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, each with (longest length) × size <= batch_tokens."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches, current, longest = [], [], 0
    for i in order:
        new_longest = max(longest, lengths[i])
        if current and new_longest * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, new_longest = [], lengths[i]
        current.append(i)
        longest = new_longest
    if current:
        batches.append(current)
    return batches


def translate_corpus(model, tokenizer, sentences: Sequence[str], beam_size: int = 1, batch_tokens: int = 4000,
                     device=None, length_penalty: float = 0.6, max_len: int | None = None,
                     progress: bool = True) -> list[str]:
    """Translate many sentences: tokenize, batch by length, decode, detokenize, restore the order.

    Args:
        model: a :class:`tmlib.transformer.Transformer` (or anything with its ``encode``/``decode``/
            ``new_cache`` interface and ``pad_id``, ``max_len`` attributes).
        tokenizer: a :class:`tmlib.data.BPETokenizer` (``encode_batch``, ``decode``, ``pad_id``,
            ``bos_id``, ``eos_id``); source ids carry no ``<bos>``/``<eos>``, as in training.
        sentences: n source sentences (plain text).
        beam_size: 1 for greedy decoding, >1 for beam search (the paper: 4).
        batch_tokens: at most this many source tokens per batch, padding and beams included
            (``beam_size × batch × longest source``).
        device: where to decode; ``None`` keeps the model's device, ``"auto"`` uses
            :func:`tmlib.utils.get_device`, otherwise a ``torch.device`` or name. The model is moved there.
        length_penalty: GNMT's α for beam search (paper: 0.6).
        max_len: largest number of generated tokens; ``None``: source length + 50 (paper §6.1).
        progress: show a tqdm progress bar (in sentences).

    Returns:
        n translations (detokenized text), in the order of ``sentences``. An empty source gives "".

    Raises:
        TypeError: ``sentences`` is not a list of strings.
        ValueError: ``beam_size`` < 1 or ``batch_tokens`` < 1; the tokenizer's pad id differs from
            ``model.pad_id``.
    """
    from tqdm.auto import tqdm

    from tmlib.decoding import beam_search, greedy_decode
    from tmlib.utils import get_device

    sentences = _check_texts(sentences, "sentences")
    check_int(beam_size, "beam_size", minimum=1)
    check_int(batch_tokens, "batch_tokens", minimum=1)
    pad_id = getattr(model, "pad_id", tokenizer.pad_id)
    if pad_id != tokenizer.pad_id:
        raise ValueError(f"tokenizer pad id {tokenizer.pad_id} differs from model.pad_id {pad_id}")
    if device is None:
        param = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
        device = param.device if param is not None else torch.device("cpu")
    elif device == "auto":
        device = get_device()
    device = torch.device(device)
    if hasattr(model, "to"):
        model.to(device)

    ids = tokenizer.encode_batch(sentences) if sentences else []
    limit = getattr(model, "max_len", None)
    if limit is not None and any(len(s) > limit for s in ids):
        n_long = sum(len(s) > limit for s in ids)
        warnings.warn(f"{n_long} source sentence(s) longer than model.max_len={limit} tokens were truncated")
        ids = [s[:limit] for s in ids]
    outputs: list[str] = [""] * len(sentences)
    todo = [i for i, s in enumerate(ids) if s]  # empty sources translate to ""
    batches = _length_batches([len(ids[i]) for i in todo], max(1, batch_tokens // beam_size))
    with tqdm(total=len(todo), desc=f"translating ({'greedy' if beam_size == 1 else f'beam {beam_size}'})",
              unit="sent", disable=not progress) as bar:
        for batch in batches:
            rows = [ids[todo[j]] for j in batch]
            src = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)  # (batch, src_len)
            for r, row in enumerate(rows):
                src[r, :len(row)] = torch.tensor(row)
            src = src.to(device)
            if beam_size == 1:
                hyps = greedy_decode(model, src, tokenizer.bos_id, tokenizer.eos_id, max_len=max_len)
            else:
                hyps = beam_search(model, src, tokenizer.bos_id, tokenizer.eos_id, beam_size=beam_size,
                                   length_penalty=length_penalty, max_len=max_len)
            for j, hyp in zip(batch, hyps):
                outputs[todo[j]] = tokenizer.decode(hyp)
            bar.update(len(batch))
    return outputs
