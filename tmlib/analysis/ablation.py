"""Head ablation: switch heads off and measure what it costs in cross-entropy and BLEU (chapter 11).

MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O (paper §3.2.2).  Michel et al. (2019, "Are Sixteen Heads Really
Better than One?", §2) multiply each head by a mask ξ_h before W^O; ξ_h = 0 removes the head.  :func:`ablate_heads`
does exactly that with a hook on the output projection, and :func:`ablation_table` measures the effect of single
heads, of all heads of a layer but one (§3 of that paper), of whole layers and of every head.
"""
from __future__ import annotations

import contextlib
from typing import Iterable, Sequence

import numpy as np
import torch

from tmlib.analysis.capture import ATTENTION_KINDS, Head, check_head, all_heads, attention_module

__all__ = ["ablate_heads", "nll_per_token", "greedy_bleu", "ablation_experiments", "ablation_table"]


@contextlib.contextmanager
def ablate_heads(model, heads: Iterable):
    """Inside ``with``, ``heads`` (``(kind, layer, head)`` tuples) are switched off: a pre-hook on ``w_o`` zeroes their
    features ``i·d_k … (i+1)·d_k − 1`` of Concat(head_0, …, head_{h-1}) (§3.2.2, heads counted from 0), Michel et
    al.'s (2019) mask ξ_i = 0, on every forward path (cached decoding included); removed on exit, parameters never
    touched. Yields the heads.

    Raises:
        TypeError: an entry that is not a ``(kind, layer, head)`` tuple.
        ValueError: an unknown kind, a layer or head index out of range.
    """
    chosen = [check_head(model, h) for h in heads]
    per_module: dict = {}
    for h in chosen:
        module = attention_module(model, h.kind, h.layer)
        per_module.setdefault(id(module), (module, set()))[1].add(h.head)
    handles = []
    try:
        for module, idx in per_module.values():
            keep = torch.ones(module.d_model, dtype=torch.bool)
            for i in idx:
                keep[i * module.d_k:(i + 1) * module.d_k] = False

            def hook(_lin, args, keep=keep):
                x = args[0]  # (batch, n_q, d_model): Concat(head_0, …, head_{h-1})
                return (x.masked_fill(~keep.to(x.device), 0.0),) + tuple(args[1:])

            handles.append(module.w_o.register_forward_pre_hook(hook))
        yield chosen
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def nll_per_token(model, batches: Iterable) -> float:
    """Plain cross-entropy (no label smoothing) in nats per target token, over teacher-forced batches.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer` (evaluated in eval mode; its mode is restored).
        batches: :class:`tmlib.data.Batch` objects (``src``, ``tgt_in``, ``tgt_out``), on the model's device.

    Returns:
        the loss summed over all non-pad labels divided by their number (``translation_loss`` with
        ``label_smoothing=0``, weighted by tokens).

    Raises:
        ValueError: no batch or no target token.
    """
    from tmlib.training.recipe import translation_loss

    was_training = model.training
    model.eval()
    total, n = 0.0, 0
    try:
        for batch in batches:
            logits = model(batch.src, batch.tgt_in)  # (batch, tgt_len, vocab)
            total += float(translation_loss(logits, batch.tgt_out, model.pad_id, label_smoothing=0.0,
                                            reduction="sum"))
            n += int((batch.tgt_out != model.pad_id).sum())
    finally:
        model.train(was_training)
    if n == 0:
        raise ValueError("nll_per_token needs at least one batch with target tokens")
    return total / n


def greedy_bleu(model, tokenizer, sources: Sequence[str], references: Sequence[str]) -> float:
    """Cased corpus BLEU (sacreBLEU, 13a tokenization) of the greedy translations of ``sources``.

    Decodes with :func:`tmlib.decoding.translate_corpus` (beam size 1, maximum length source + 50, paper
    §6.1) on the model's device and scores with :func:`tmlib.decoding.metrics.bleu_scores`.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        tokenizer: its :class:`tmlib.data.BPETokenizer`.
        sources: n German sentences; references: their n English references.

    Returns:
        BLEU in [0, 100].

    Raises:
        TypeError / ValueError: from ``tmlib.decoding`` for non-text input or lists of different lengths.
    """
    from tmlib.decoding.metrics import bleu_scores
    from tmlib.decoding.corpus import translate_corpus

    hyps = translate_corpus(model, tokenizer, list(sources), beam_size=1, progress=False)
    return float(bleu_scores(hyps, list(references))["bleu"])


def ablation_experiments(model, single: bool = True, all_but_one: bool = True, whole: bool = True
                         ) -> list[tuple[str, Head | None, list[Head]]]:
    """Named sets of heads to switch off, for :func:`ablation_table`.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        single: one experiment per head (that head off).
        all_but_one: per (kind, layer) and head h, every head of that layer off except h (Michel et al. 2019, §3:
            "some layers can even be reduced to a single head").
        whole: per (kind, layer) all its heads off, and finally every head of every layer off.

    Returns:
        list of ``(experiment, head, heads_off)``: ``experiment`` in ``{"none", "one head", "all but one", "whole
        layer", "all heads"}``, ``head`` the head concerned (``layer``/``kind`` for whole layers: ``head`` = -1) or
        ``None``, ``heads_off`` the :class:`Head` list.  The first entry is always ``("none", None, [])``.

    Source: Michel et al. (2019), §2-3.
    """
    heads = all_heads(model)
    out: list = [("none", None, [])]
    layers = sorted({(h.kind, h.layer) for h in heads}, key=lambda kl: (ATTENTION_KINDS.index(kl[0]), kl[1]))
    if single:
        out += [("one head", h, [h]) for h in heads]
    if all_but_one:
        for kind, layer in layers:
            same = [h for h in heads if (h.kind, h.layer) == (kind, layer)]
            out += [("all but one", keep, [h for h in same if h != keep]) for keep in same]
    if whole:
        for kind, layer in layers:
            out.append(("whole layer", Head(kind, layer, -1), [h for h in heads if (h.kind, h.layer) == (kind, layer)]))
        out.append(("all heads", None, heads))
    return out


def ablation_table(model, tokenizer, batches, sources: Sequence[str] | None = None,
                   references: Sequence[str] | None = None, experiments=None, bleu_for=("none", "one head"),
                   progress: bool = False) -> "pd.DataFrame":
    """Validation cross-entropy, and greedy BLEU for the experiments in ``bleu_for``, with sets of heads switched off
    (:func:`ablation_experiments`): a table of ``experiment``, ``kind``, ``layer``, ``head`` (-1: a whole layer),
    ``n_off``, ``nll``, ``delta_nll``, ``bleu``, ``delta_bleu``. ValueError: sources and references of different
    lengths."""
    import pandas as pd

    if (sources is None) != (references is None) or (sources is not None and len(sources) != len(references)):
        raise ValueError("give both sources and references, of the same length, or neither")
    batches = list(batches)
    experiments = ablation_experiments(model) if experiments is None else experiments
    rows = []
    for name, head, off in experiments:
        with ablate_heads(model, off):
            nll = nll_per_token(model, batches)
            bleu = (greedy_bleu(model, tokenizer, sources, references)
                    if sources is not None and name in bleu_for else float("nan"))
        rows.append({"experiment": name, "kind": head.kind if head else None,
                     "layer": head.layer if head else np.nan, "head": head.head if head else np.nan,
                     "n_off": len(off), "nll": nll, "bleu": bleu})
        if progress:
            print(f"{name:12s} {head}: nll {nll:.3f} bleu {bleu:.1f}")
    table = pd.DataFrame(rows)
    base = table[table.experiment == "none"]
    if len(base):
        table["delta_nll"] = table["nll"] - float(base["nll"].iloc[0])
        table["delta_bleu"] = table["bleu"] - float(base["bleu"].iloc[0])
    return table
