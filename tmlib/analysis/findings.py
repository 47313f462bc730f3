"""What chapter 11's measurements of the trained translator say, as numbers and short lines.

The chapter measures each head (:func:`~tmlib.analysis.heads.head_statistics`), switches heads off
(:func:`~tmlib.analysis.ablation.ablation_table`) and shuffles their weights
(:func:`~tmlib.analysis.permutation.permutation_effects`). The functions here read those tables and return the
numbers the chapter's text quotes, as tables or as :class:`Findings` (the numbers, ``findings["median"]``, and the
short lines that report them, ``print(findings)``). Where the chapter draws a conclusion from these numbers in its
own cells (whether an alignment moves back, the one-head test, the costs of whole layers, the permutation test's two
comparisons), the printout gives the numbers only, so each conclusion is stated once, in code the reader sees;
``findings["verdicts"]`` of :func:`alignment_reading` and :func:`permutation_findings` holds the same decisions as
short keys, by the thresholds each docstring states. :func:`head_findings` and :func:`ratio_sharpness` alone print
verdict lines, ``finding: ...``:

* :func:`run_summary`: which run, how long it trained, which weights it kept;
* :func:`alignment_reading`: one panel of merged cross-attention read as a word alignment;
* :func:`layer_breadth`, :func:`strongest_heads`, :func:`sink_heads`, :func:`standout_heads`: the head statistics;
  :func:`head_findings`: what they say, as verdicts;
* :func:`layer_table`, :func:`ablation_findings`: what switching heads off costs;
* :func:`argmax_changed_off`, :func:`permutation_findings`: shuffled weights against the same head switched off;
  :func:`ratio_sharpness`: whether that comparison only ranks the heads by how sharp they are.

Heads are named short, as in the chapter's figures: ``"cross L1 H2"`` is cross-attention, layer 1, head 2 (from 0).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from tmlib.analysis.ablation import ablate_heads
from tmlib.analysis.capture import ATTENTION_KINDS, KIND_LABELS, Head, as_pair, check_head

__all__ = ["Findings", "head_name", "run_summary", "alignment_reading", "layer_breadth", "strongest_heads",
           "sink_heads", "standout_heads", "head_findings", "layer_table", "ablation_findings", "argmax_changed_off",
           "permutation_findings", "ratio_sharpness"]

SHARES = ("previous", "same", "first", "last", "diagonal")  # the per-head shares of head_statistics
WIDTH = 85  # the longest line a Findings prints
POSITIONAL = 0.5  # a positional head: more than this share of its weight on the previous token
SINK = 0.5  # a sink head: more than this share on the first or on the last key
SELF_LOOKING = 0.9  # a head that passes its own position on: more than this share on the query's own position
SAME_AS_OFF = (0.8, 1.25)  # shuffled / switched off within this range: "about as much as switching it off"
FEW_CHANGED = 0.2  # a head whose shuffle changes less than this share of the predictions changes "few"
FOLLOWS_SHARPNESS = 0.4  # |rank correlation| of the ratio with entropy / max from which the ratio follows sharpness
KEPT_ALONE = "delta_nll_best_alone"  # a column of layer_table


@dataclass
class Findings:
    """Numbers measured on one run (``numbers``, also ``findings[key]``) and the short lines that report them
    (``lines``; ``print(findings)`` prints them)."""

    numbers: dict
    lines: list = field(default_factory=list)

    def __getitem__(self, key):
        return self.numbers[key]

    def __str__(self) -> str:
        return "\n".join(self.lines)


def head_name(head) -> str:
    """``"cross L1 H2"`` for a :class:`~tmlib.analysis.capture.Head` or a table row with ``kind``, ``layer`` and
    ``head`` (a whole layer, head -1 or NaN: ``"cross L1"``)."""
    kind, layer, index = (head.kind, head.layer, head.head) if isinstance(head, Head) else \
        (head["kind"], head["layer"], head["head"])
    name = f"{KIND_LABELS[kind]} L{int(layer)}"
    return name if index is None or np.isnan(float(index)) or int(index) < 0 else f"{name} H{int(index)}"


def _wrap(text: str, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ")


def _wrap_items(items: Sequence[str], indent: str = "  ", sep: str = ",") -> list[str]:
    """``items`` joined by ``sep`` and a space into lines of at most :data:`WIDTH` characters, never breaking an
    item."""
    lines, line = [], indent
    for k, item in enumerate(items):
        piece = item + (sep if k < len(items) - 1 else "")
        if line.strip() and len(line) + 1 + len(piece) > WIDTH:
            lines.append(line)
            line = indent + "  "
        line += ("" if not line.strip() else " ") + piece
    return lines + [line] if line.strip() else lines


def run_summary(trained) -> str:
    """Two lines on a :class:`~tmlib.training.experiment.TrainedModel`: where it came from, its steps, epochs and
    training time; which weights the model holds and their cross-entropy on the whole validation split."""
    how = "loaded from" if trained.loaded else "trained into"
    lines = [f"{how} runs/{Path(trained.path).parent.name}: {trained.step:,} steps, {trained.epoch} epochs, "
             f"{trained.elapsed_s / 60:.1f} min of training"]
    val = list(trained.history.get("val_nll") or [])
    if trained.best_step is not None and val:
        lines.append(f"kept: the weights of step {trained.best_step:,}, its best validation pass "
                     f"({min(val):.3f} nats/token)")
    elif val:
        lines.append(f"kept: the last weights ({val[-1]:.3f} nats/token on the validation split)")
    return "\n".join(lines)


def alignment_reading(weights, src_words: Sequence[str], tgt_words: Sequence[str], title: str = "") -> Findings:
    """One panel of merged cross-attention (:func:`~tmlib.analysis.alignment.word_alignment`), ``weights``
    ``(English words + <eos>, German words)``, read as an alignment: for each English word the German word it
    reads most (``best``: ``(english, german, share)``), how often the next English word reads the same or a later
    German word (``forward``, the ``<eos>`` row left out), which German words several English words read
    (``shared``), and the range of the brightest cell of a row (``lowest``, ``highest``).

    The printout lists the numbers (``best``, ``shared``, the range of the brightest cell) and no verdict: chapter 11
    counts the steps back in view. ``verdicts`` (not printed): ``"in order"`` or ``"moves back"`` (``forward``
    below 1, a reordering; ``back`` lists the steps, ``(index, english, german, next english, next german)``), and
    ``"one each"`` or ``"shared"`` (``shared`` empty or not)."""
    w = np.asarray(weights, dtype=float)
    top = w.argmax(axis=1)
    best = [(t, src_words[j], float(w[i, j])) for i, (t, j) in enumerate(zip(tgt_words, top))]
    words = top[:-1]  # the <eos> row left out
    forward = float(np.mean(np.diff(words) >= 0)) if len(words) > 1 else 1.0
    shared = {src_words[j]: [t for t, b in zip(tgt_words, words) if b == j]
              for j in np.unique(words) if (words == j).sum() > 1}
    lowest, highest = float(w.max(axis=1).min()), float(w.max(axis=1).max())
    lines = [f"{title}: the German word each English word reads most" if title else
             "the German word each English word reads most"]
    lines += _wrap_items([f"{t} → {s} {share:.0%}" for t, s, share in best])
    groups = [f"{s} ({', '.join(ts)})" for s, ts in shared.items()] or ["none"]
    lines += _wrap_items([f"read by several English words: {groups[0]}"] + groups[1:], sep=";")
    lines += _wrap(f"the brightest cell holds {lowest:.0%} to {highest:.0%} of a row's weight")
    steps = max(len(words) - 1, 0)
    back = [(k, tgt_words[k], src_words[words[k]], tgt_words[k + 1], src_words[words[k + 1]])
            for k in range(steps) if words[k + 1] < words[k]]  # the steps that read an earlier German word
    verdicts = ["moves back" if back else "in order", "shared" if shared else "one each"]
    return Findings({"best": best, "forward": forward, "shared": shared, "lowest": lowest, "highest": highest,
                     "back": back, "verdicts": verdicts}, lines)


def layer_breadth(stats) -> "pd.DataFrame":
    """How broadly the heads of each layer spread their weight: the entropy as a fraction of its maximum, its
    ``min``, ``max`` and ``mean`` over the heads of each (kind, layer) of ``stats``
    (:func:`~tmlib.analysis.heads.head_statistics`); kinds in the order of ``ATTENTION_KINDS``."""
    ratio = stats["entropy"] / stats["max_entropy"]
    table = ratio.groupby([stats["kind"], stats["layer"]]).agg(["min", "max", "mean"])
    table.index.names = ["kind", "layer"]
    kinds = [k for k in ATTENTION_KINDS if k in set(stats["kind"])]
    return table.reindex(kinds, level="kind")


def strongest_heads(stats) -> "pd.DataFrame":
    """For each share of ``stats`` (previous, same, first, last, diagonal: rows) and each kind of attention
    (columns), the head with the largest share and that share, as ``"L1 H2: 39%"``; ``"–"`` where the share is not
    defined for that kind."""
    import pandas as pd

    table = {}
    for kind in [k for k in ATTENTION_KINDS if k in set(stats["kind"])]:
        part, column = stats[stats["kind"] == kind], {}
        for share in SHARES:
            values = part[share].dropna()
            row = part.loc[values.idxmax()] if len(values) else None
            column[share] = "–" if row is None else \
                f"L{int(row['layer'])} H{int(row['head'])}: {row[share] * 100:2.0f}%"  # " 5%": aligned
        table[kind] = column
    return pd.DataFrame(table)


def sink_heads(stats, share: float = 0.5) -> list[str]:
    """The heads of ``stats`` that put, on average, more than ``share`` of their weight on the first or on the last
    key: attention sinks (names as :func:`head_name`)."""
    sinks = stats[(stats["first"] > share) | (stats["last"] > share)]
    return [head_name(r) for _, r in sinks.iterrows()]


def standout_heads(stats) -> dict[str, list[str]]:
    """The heads that stand out in ``stats``: per kind of attention, the most diagonal, the most previous-token and
    the most self-looking head, as ``{name: ["the most diagonal cross head", ...]}``."""
    out: dict[str, list[str]] = {}
    for share, what in (("diagonal", "the most diagonal"), ("previous", "the most previous-token"),
                        ("same", "the most self-looking")):
        for kind in [k for k in ATTENTION_KINDS if stats.loc[stats["kind"] == k, share].notna().any()]:
            part = stats[stats["kind"] == kind]
            out.setdefault(head_name(part.loc[part[share].idxmax()]), []).append(f"{what} {KIND_LABELS[kind]} head")
    return out


def head_findings(stats, positional: float = POSITIONAL, sink: float = SINK,
                  self_looking: float = SELF_LOOKING) -> Findings:
    """What the head statistics ``stats`` (:func:`~tmlib.analysis.heads.head_statistics`) say, as verdicts.

    * **Breadth**: per kind of attention with more than one layer, whether the first layer's heads spread their
      weight more broadly than the last layer's (the mean over heads of entropy / maximum entropy, as
      :func:`layer_breadth`). Verdict ``"broad first"`` where every kind says so, ``"mixed"`` where some do,
      ``"focused first"`` where none does.
    * **Positional heads**: a head with more than ``positional`` (default half) of its weight on the previous
      token; ``"no positional head"`` names the largest previous-token share instead, a mere leaning.
    * **Sinks**: a head with more than ``sink`` (default half) of its weight on the first or on the last key
      (:func:`sink_heads`); ``"no sink head"`` names the largest such share.
    * **Self-looking heads**: more than ``self_looking`` (default 90 %) on the query's own position: heads that
      pass each position's own state on (``"self-looking"`` or ``"no self-looking head"``).

    Numbers: ``breadth`` (``{kind: (first layer, last layer)}``), ``broader`` (the kinds whose first layer is the
    broader), ``previous`` (the most previous-token head: name, share), ``positional``, ``sink_share`` (name,
    share), ``sinks``, ``self_looking`` (lists of names), ``verdicts`` (the four verdicts, in that order).
    """
    ratio = layer_breadth(stats)["mean"]
    kinds = [k for k in ATTENTION_KINDS if k in set(stats["kind"])]
    breadth = {}
    for kind in kinds:
        layers = ratio.loc[kind]
        if len(layers) > 1:
            breadth[kind] = (float(layers.iloc[0]), float(layers.iloc[-1]))
    broader = [k for k, (first, last) in breadth.items() if first > last]
    if broader and len(broader) == len(breadth):
        breadth_verdict = "broad first"
        text = (f"in {'all ' + str(len(breadth)) + ' kinds' if len(breadth) > 1 else KIND_LABELS[broader[0]]} "
                f"the first layer is broader than the last")
    elif broader:
        breadth_verdict = "mixed"
        text = (f"the first layer is broader than the last only in {', '.join(KIND_LABELS[k] for k in broader)}")
    else:
        breadth_verdict = "focused first"
        text = "in no kind is the first layer broader than the last"
    lines = _wrap(f"finding: {text}", indent="") if breadth else []

    prev = stats["previous"].dropna()
    top = stats.loc[prev.idxmax()] if len(prev) else None
    previous = (head_name(top), float(top["previous"])) if top is not None else None
    positional_heads = [head_name(r) for _, r in stats[stats["previous"] > positional].iterrows()]
    if positional_heads:
        shares = [f"{head_name(r)} {r['previous']:.0%}" for _, r in stats[stats["previous"] > positional].iterrows()]
        lines += _wrap("finding: positional heads: " + ", ".join(shares), indent="")
    elif previous:
        lines += _wrap(f"finding: no positional head (largest previous-token share {previous[1]:.0%}, "
                       f"{previous[0]})", indent="")

    ends = stats[["first", "last"]].max(axis=1)
    end_row = stats.loc[ends.idxmax()]
    sink_share = (head_name(end_row), float(ends.max()))
    sinks = sink_heads(stats, share=sink)
    if sinks:
        lines += _wrap(f"finding: sink heads: {', '.join(sinks)}", indent="")
    else:
        lines += _wrap(f"finding: no sink head (largest share on the first or last key {sink_share[1]:.0%}, "
                       f"{sink_share[0]})", indent="")

    looking = stats[stats["same"] > self_looking]
    self_heads = [head_name(r) for _, r in looking.iterrows()]
    if self_heads:
        lines += _wrap("finding: self-looking heads: "
                       + ", ".join(f"{head_name(r)} {r['same']:.0%}" for _, r in looking.iterrows()), indent="")
    else:
        same = stats["same"].dropna()
        top_same = stats.loc[same.idxmax()] if len(same) else None
        lines += _wrap("finding: no self-looking head" + (f" (largest share on its own position "
                       f"{top_same['same']:.0%}, {head_name(top_same)})" if top_same is not None else ""), indent="")
    verdicts = [breadth_verdict, "positional" if positional_heads else "no positional head",
                "sinks" if sinks else "no sink head", "self-looking" if self_heads else "no self-looking head"]
    return Findings({"breadth": breadth, "broader": broader, "previous": previous, "positional": positional_heads,
                     "sink_share": sink_share, "sinks": sinks, "self_looking": self_heads, "verdicts": verdicts},
                    lines)


def _kept_alone(ablation) -> "pd.Series":
    """Per (kind, layer): the cost of the layer reduced to its best head (the cheapest "all but one")."""
    return ablation[ablation["experiment"] == "all but one"].groupby(["kind", "layer"])["delta_nll"].min()


def layer_table(ablation) -> "pd.DataFrame":
    """The whole-layer rows of ``ablation`` (:func:`~tmlib.analysis.ablation.ablation_table`) and the row with every
    head off (kind and layer ``"all"``), indexed by experiment, kind and layer: heads off, cross-entropy and its
    change, BLEU and its change, and the change of the cross-entropy with the layer reduced to its best head
    (``"delta_nll_best_alone"``, where ``ablation`` measured it). Formatted as the chapter prints them:
    strings with 3 decimals, BLEU with 1, and "–" where a number was not measured."""
    import pandas as pd

    rows = ablation[ablation["experiment"].isin(["whole layer", "all heads"])].copy()
    kept = {(k, int(layer)): v for (k, layer), v in _kept_alone(ablation).items()}
    rows[KEPT_ALONE] = [kept.get((k, int(layer)), np.nan) if isinstance(k, str) else np.nan
                        for k, layer in zip(rows["kind"], rows["layer"])]
    rows["kind"] = [k if isinstance(k, str) else "all" for k in rows["kind"]]
    rows["layer"] = ["all" if np.isnan(float(v)) else str(int(v)) for v in rows["layer"]]
    decimals = {"nll": 3, "delta_nll": 3, "bleu": 1, "delta_bleu": 1, KEPT_ALONE: 3}
    table = rows.set_index(["experiment", "kind", "layer"])[["n_off", *decimals]].astype(object)
    for column, places in decimals.items():
        table[column] = ["–" if pd.isna(v) else f"{float(v):.{places}f}" for v in table[column]]
    return table


def _costliest(rank: int, n: int) -> str:
    """A rank in cost with its direction: ``"the costliest of 24"``, ``"9th costliest of 24"`` (rank 1 costs the
    most)."""
    if rank == 1:
        return f"the costliest of {n}"
    suffix = "th" if rank % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(rank % 10, "th")
    return f"{rank}{suffix} costliest of {n}"


def _not_standout(kind: str) -> str:
    """What a head of ``kind`` that :func:`standout_heads` does not name is not: the most diagonal head for
    cross-attention, the most previous-token and most self-looking for self-attention."""
    if kind == "cross":
        return "not the most diagonal cross head"
    return f"not the most previous-token or self-looking {KIND_LABELS[kind]} head"


def ablation_findings(stats, ablation, cheap: float = 0.02) -> Findings:
    """What switching single heads off costs (``ablation``, from :func:`~tmlib.analysis.ablation.ablation_table`
    with single heads and all-but-one; ``stats`` for the heads that stand out). Whole layers are left to
    :func:`layer_table` and to the chapter's own cells, which also apply the one-head test in view.

    Numbers: ``median`` (the median single head's cost, nats/token), ``cheap`` (heads costing less than
    ``cheap``), ``n_heads``, ``costliest`` (the two costliest single heads: ``(name, cost, which of the most
    diagonal, previous-token or self-looking heads they are)``), ``looker`` (the most self-looking head: name, its
    share, cost, rank in cost: 1 for the costliest head), ``kept_alone`` (cost of each layer reduced to its best
    head, ``{name: cost}``), ``prunable`` (the layers whose best head alone costs no more than the median single
    head: Michel et al.'s one-head test, measured in cross-entropy instead of BLEU; not printed).

    The printout gives these numbers and no verdict.
    """
    single = ablation[ablation["experiment"] == "one head"].sort_values("delta_nll", ascending=False)
    standout = standout_heads(stats)
    names = [head_name(r) for _, r in single.iterrows()]
    median = float(single["delta_nll"].median())
    costliest = [(n, float(c), " and ".join(standout.get(n, [])) or _not_standout(kind))
                 for n, c, kind in zip(names[:2], single["delta_nll"][:2], single["kind"][:2])]
    looking = stats.loc[stats["same"].idxmax()]
    rank = names.index(head_name(looking))
    looker = (head_name(looking), float(looking["same"]), float(single["delta_nll"].iloc[rank]), rank + 1)
    kept_alone = {f"{KIND_LABELS[k]} L{int(layer)}": float(v) for (k, layer), v in _kept_alone(ablation).items()}
    prunable = [n for n, v in kept_alone.items() if v <= median]
    numbers = {"median": median, "cheap": int((single["delta_nll"] < cheap).sum()), "n_heads": len(single),
               "costliest": costliest, "looker": looker, "kept_alone": kept_alone, "prunable": prunable}
    lines = [f"one head off: median +{median:.3f} nats/token; {numbers['cheap']} of {len(single)} heads cost "
             f"less than {cheap}"]
    for k, (n, c, why) in enumerate(costliest):
        lines += textwrap.wrap(f"  {'costliest:' if k == 0 else ' ' * 10} {n} +{c:.3f}, {why}", WIDTH,
                               subsequent_indent=" " * 15)
    lines += _wrap(f"most self-looking: {looker[0]} ({looker[1]:.0%} on itself), +{looker[2]:.3f}, "
                   f"{_costliest(looker[3], len(single))}")
    if kept_alone:
        low, high = min(kept_alone, key=kept_alone.get), max(kept_alone, key=kept_alone.get)
        lines.append(f"one head kept per layer: +{kept_alone[low]:.3f} ({low}, {kept_alone[low] / median:.1f} × "
                     f"median) to +{kept_alone[high]:.3f} ({high})")
    return Findings(numbers, lines)


@torch.no_grad()
def argmax_changed_off(model, batches, heads) -> np.ndarray:
    """For each head of ``heads``, the share of real decoder positions of ``batches`` (``Batch`` objects or
    ``(src, tgt_in)`` pairs, teacher-forced) whose most probable next token changes when that head alone is
    switched off (:func:`~tmlib.analysis.ablation.ablate_heads`): the yardstick of
    :func:`~tmlib.analysis.permutation.permutation_effects`'s ``argmax_changed``, counted on the same positions.

    Raises:
        ValueError: no real decoder position; a head that is not in ``model``.
    """
    heads = [check_head(model, h) for h in heads]
    changed, positions = np.zeros(len(heads)), 0
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            src, tgt_in = as_pair(batch)
            real = tgt_in != model.pad_id  # (batch, tgt_len): the real decoder positions
            kept = model(src, tgt_in).argmax(-1)  # (batch, tgt_len): every head in place
            positions += int(real.sum())
            for k, h in enumerate(heads):
                with ablate_heads(model, [h]):
                    changed[k] += int((model(src, tgt_in).argmax(-1) != kept)[real].sum())
    finally:
        model.train(was_training)
    if positions == 0:
        raise ValueError("argmax_changed_off needs at least one real decoder position")
    return changed / positions


def permutation_findings(perm, ablation, stats) -> Findings:
    """What shuffling one head's weights does (``perm``: :func:`~tmlib.analysis.permutation.permutation_effects`
    with the column ``argmax_changed_off`` of :func:`argmax_changed_off`), against the costs of ``ablation``.

    Numbers: ``tvd`` and ``changed`` (ranges over the heads of the attention's move and of the share of changed
    predictions), ``changed_off`` (the same heads switched off), ``ratios`` (per head, in the order of ``perm``,
    the share changed shuffled over the share changed switched off; 1 where both are 0, infinity where only the
    shuffle changes some), ``ratio`` (their median), ``below_one`` / ``above_one`` (how many heads change fewer /
    more predictions shuffled than switched off), ``lowest`` and ``highest`` (the heads of the lowest and of the
    highest ratio, as :class:`Head`: the head for which where it looks matters least against being there, and
    the head whose shuffled map misleads the model most against no head), ``moved_median`` (the median over heads
    of the attention's move), ``loud_head`` (the head whose shuffle changed the most, a :class:`Head`) and
    ``loud`` (its name, share, rank in the cost of switching it off: 1 for the costliest), ``layer_ratio`` (the
    costliest whole layer against the costliest single head), ``sharpness`` (:func:`ratio_sharpness` of these
    ratios: whether they only rank the heads by how sharp they are; not printed).

    The printout gives the ranges and the two example heads with their ratios, not the median ratio or a verdict:
    chapter 11 draws the conclusion in view. ``verdicts`` (not printed): shuffling a head's map does
    ``"about as much"`` as switching the head off where the median ratio lies within :data:`SAME_AS_OFF` (0.8 to
    1.25), ``"less"`` or ``"more"`` outside it; and ``"few changed"`` where no head's shuffle changes
    :data:`FEW_CHANGED` (a fifth) of the predictions or more, else ``"many changed"``.
    """
    single = ablation[ablation["experiment"] == "one head"].sort_values("delta_nll", ascending=False)
    whole = ablation[ablation["experiment"] == "whole layer"]
    median = float(perm["attention_tvd"].median())
    on, off = perm["argmax_changed"].to_numpy(float), perm["argmax_changed_off"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(off > 0, on / off, np.where(on > 0, np.inf, 1.0))  # shuffled / switched off, per head
    low_row, high_row = perm.iloc[int(np.argmin(ratios))], perm.iloc[int(np.argmax(ratios))]
    lowest, highest = (Head(r["kind"], int(r["layer"]), int(r["head"])) for r in (low_row, high_row))
    loud_row = perm.sort_values("argmax_changed").iloc[-1]
    loud = Head(loud_row["kind"], int(loud_row["layer"]), int(loud_row["head"]))
    rank = [head_name(r) for _, r in single.iterrows()].index(head_name(loud_row)) + 1
    top = whole.sort_values("delta_nll").iloc[-1]
    numbers = {
        "tvd": (float(perm["attention_tvd"].min()), float(perm["attention_tvd"].max())),
        "changed": (float(perm["argmax_changed"].min()), float(perm["argmax_changed"].max())),
        "changed_off": (float(perm["argmax_changed_off"].min()), float(perm["argmax_changed_off"].max())),
        "ratio": float(np.median(ratios)), "ratios": ratios, "below_one": int((ratios < 1).sum()),
        "above_one": int((ratios > 1).sum()), "lowest": lowest, "highest": highest,
        "moved_median": median, "loud_head": loud,
        "loud": (head_name(loud_row), float(loud_row["argmax_changed"]), rank),
        "layer_ratio": (head_name(top), float(top["delta_nll"]), float(single["delta_nll"].iloc[0]),
                        float(top["delta_nll"] / single["delta_nll"].iloc[0]))}
    (t0, t1), (c0, c1), (o0, o1) = numbers["tvd"], numbers["changed"], numbers["changed_off"]
    why = " and ".join(standout_heads(stats).get(numbers["loud"][0], []))
    layer, cost, worst, ratio = numbers["layer_ratio"]
    lines = [f"shuffled, one head at a time: attention moved by TVD {t0:.2f} to {t1:.2f}",
             f"  the predicted next token changed at {c0:.1%} to {c1:.1%} of the positions",
             f"switched off instead: {o0:.1%} to {o1:.1%}",
             f"shuffled / switched off, lowest: {head_name(lowest)} {ratios.min():.2f} "
             f"({low_row['argmax_changed']:.1%} / {low_row['argmax_changed_off']:.1%})",
             f"  highest: {head_name(highest)} {ratios.max():.2f} "
             f"({high_row['argmax_changed']:.1%} / {high_row['argmax_changed_off']:.1%})",
             f"the head whose shuffle changed the most: {numbers['loud'][0]} ({numbers['loud'][1]:.1%})"]
    if why:
        lines += _wrap(why)
    lines.append(f"  switched off alone: {_costliest(rank, len(single))} heads")
    r = numbers["ratio"]
    low, high = SAME_AS_OFF
    much = "about as much" if low <= r <= high else ("less" if r < low else "more")
    few = "few changed" if c1 < FEW_CHANGED else "many changed"
    numbers["verdicts"] = [much, few]
    numbers["sharpness"] = ratio_sharpness(perm, stats, ratios)
    return Findings(numbers, lines)


def _rank_correlation(x, y) -> float:
    """Spearman's rank correlation of two equally long sequences: the Pearson correlation of their ranks, tied values
    sharing the mean of their ranks; NaN where either is constant."""
    import pandas as pd

    rx, ry = pd.Series(np.asarray(x, dtype=float)).rank(), pd.Series(np.asarray(y, dtype=float)).rank()
    return float(rx.corr(ry))


def ratio_sharpness(perm, stats, ratios, threshold: float = FOLLOWS_SHARPNESS) -> Findings:
    """Whether the ratio of :func:`permutation_findings` (predictions changed shuffled over changed switched off,
    ``ratios``, one per row of ``perm``) follows how sharp the heads are. A shuffle moves a broad row
    little (a uniform row not at all) and a sharp row far, so a sharp head can reach a high ratio for that reason
    alone.

    Numbers: ``table`` (one row per head, highest ratio first: ``name``, ``kind``, ``layer``, ``head``, ``ratio``,
    ``entropy / max`` and ``same`` of ``stats``, and ``attention_tvd``, how far the shuffle moved the head's
    weights), ``rho`` (Spearman's rank correlation of the ratio with ``"entropy / max"`` and with
    ``"attention_tvd"``), ``highest`` and ``self_looking`` (the rows of the highest ratio and of the largest share
    on the query's own position), ``median_breadth`` (the median head's entropy / max) and ``verdict``:
    ``"sharper higher"`` where the rank correlation with entropy / max is ``-threshold`` or lower (the sharper
    heads have the higher ratios), ``"broader higher"`` where it is ``threshold`` or higher, else
    ``"independent"`` (also where every head has the same ratio or breadth, a correlation of NaN). The last line states the verdict as a finding, with the threshold.

    Raises:
        ValueError: ``ratios`` not one per row of ``perm``; a head of ``perm`` missing from ``stats``.
    """
    keys = ["kind", "layer", "head"]
    ratios = np.asarray(ratios, dtype=float)
    if ratios.shape != (len(perm),):
        raise ValueError(f"ratios must hold one value per row of perm ({len(perm)}), got shape {ratios.shape}")
    breadth = stats[keys + ["same"]].assign(**{"entropy / max": stats["entropy"] / stats["max_entropy"]})
    table = perm[keys + ["attention_tvd"]].assign(ratio=ratios).merge(breadth, on=keys, how="left", indicator=True)
    if (table["_merge"] != "both").any():
        missing = [head_name(r) for _, r in table[table["_merge"] != "both"].iterrows()]
        raise ValueError(f"heads of perm missing from stats: {', '.join(missing)}")
    table = table.drop(columns="_merge")
    table.insert(0, "name", [head_name(r) for _, r in table.iterrows()])
    table = table.sort_values("ratio", ascending=False, kind="stable").reset_index(drop=True)
    rho = {col: _rank_correlation(table["ratio"], table[col]) for col in ("entropy / max", "attention_tvd")}
    highest, lowest, looking = table.iloc[0], table.iloc[-1], table.loc[table["same"].idxmax()]
    median_breadth = float(table["entropy / max"].median())
    r = rho["entropy / max"]
    verdict = "sharper higher" if r <= -threshold else ("broader higher" if r >= threshold else "independent")
    lines = [f"rank correlation of the ratio with entropy / max {r:+.2f}, with the shuffle's TVD "
             f"{rho['attention_tvd']:+.2f}", f"highest ratio: {highest['name']} ({highest['ratio']:.2f})"]
    lines += _wrap(f"most self-looking head: {looking['name']} ({looking['same']:.0%} on itself, entropy / max "
                   f"{looking['entropy / max']:.2f})", indent="")
    if verdict == "sharper higher":
        text = (f"finding: the ratio follows how sharp a head is (rank correlation with entropy / max "
                f"{-threshold:+.1f} or lower): the sharper heads tend to have the higher ratios, since a shuffle "
                f"moves a broad head's rows less far, so compare ratios only between heads of similar sharpness")
        if lowest["entropy / max"] > median_breadth:
            text += (f"; the lowest ratio, {lowest['name']}'s, is a broad head's (entropy / max "
                     f"{lowest['entropy / max']:.2f}, the median head's {median_breadth:.2f})")
    elif verdict == "broader higher":
        text = (f"finding: the broader heads tend to have the higher ratios (rank correlation with entropy / max "
                f"{threshold:+.1f} or higher), although a shuffle moves a broad head's rows less far")
    elif np.isnan(r):  # every head of one ratio, or of one breadth: nothing to rank
        text = "finding: the ratio cannot follow how sharp a head is: every head has the same ratio or breadth"
    else:
        text = (f"finding: the ratio does not follow how sharp a head is (rank correlation with entropy / max "
                f"between {-threshold:+.1f} and {threshold:+.1f}), so it compares heads beyond their sharpness")
    lines += _wrap(text, indent="")
    return Findings({"table": table, "rho": rho, "highest": highest, "self_looking": looking,
                     "median_breadth": median_breadth, "verdict": verdict}, lines)
