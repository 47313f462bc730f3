"""Figures for the course: every plot titled, every axis labelled.

Built on seaborn/matplotlib.  Each function takes an optional ``ax`` and returns it, so
notebooks can compose figures.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch
import seaborn as sns

__all__ = ["positional_encoding_heatmap", "attention_heatmap", "attention_heads", "mask_panels", "power_law_plot",
           "head_grid", "alignment_panels"]


def _to_numpy(x) -> np.ndarray:
    """``x`` (an array, a nested list, or a torch tensor on any device) as a float64 NumPy array."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def _matrices(x, name: str, axes: str) -> np.ndarray:
    """``x`` as a float64 array with one dimension per name in ``axes`` (e.g. ``"(n_q, n_k)"``).

    Raises:
        ValueError: another number of dimensions; the message names ``name``, ``axes`` and the shape.
    """
    w = _to_numpy(x)
    ndim = axes.count(",") + 1
    if w.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D {axes}, got shape {w.shape}")
    return w


def attention_heatmap(
    weights,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str = "Attention weights",
    ax=None,
    annot: bool | None = None,
    fmt: str = ".2f",
    cmap: str = "viridis",
    xlabel: str = "key position",
    ylabel: str = "query position",
    vmax: float | None = None,
):
    """Heatmap of one attention matrix, rows = queries, columns = keys.

    Args:
        weights: ``(n_q, n_k)`` array or tensor, rows summing to 1.
        x_labels: ``n_k`` key tokens; y_labels: ``n_q`` query tokens (default: indices).
        title: the figure title.
        ax: matplotlib axes to draw on (a new figure if ``None``).
        annot: write the numbers in the cells (default: when the matrix is at most 12×12).
        vmax: top of the colour scale (default: the largest weight); give ``1.0`` to put several panels on
            one scale from 0 to 1.

    Returns:
        The matplotlib ``Axes``.

    Raises:
        ValueError: ``weights`` is not 2-D or the labels do not match its shape.
    """
    w = _matrices(weights, "weights", "(n_q, n_k)")
    n_q, n_k = w.shape
    if x_labels is not None and len(x_labels) != n_k:
        raise ValueError(f"{len(x_labels)} x_labels for {n_k} keys (weights shape {w.shape})")
    if y_labels is not None and len(y_labels) != n_q:
        raise ValueError(f"{len(y_labels)} y_labels for {n_q} queries (weights shape {w.shape})")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.6 * n_k, 0.8 + 0.5 * n_q) if max(n_q, n_k) <= 12 else (7, 6))
    if annot is None:
        annot = max(n_q, n_k) <= 12
    sns.heatmap(
        w, ax=ax, annot=annot, fmt=fmt, cmap=cmap, vmin=0.0,
        vmax=vmax if vmax is not None else (max(1e-12, float(w.max())) if w.size else 1.0),
        xticklabels=list(x_labels) if x_labels is not None else True,
        yticklabels=list(y_labels) if y_labels is not None else True,
        square=max(n_q, n_k) <= 12, cbar_kws={"label": "weight"},
    )
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="y", rotation=0)
    return ax


def attention_heads(weights, x_labels=None, y_labels=None, title: str = "Attention weights per head", **kwargs):
    """One heatmap per head, side by side.

    Args:
        weights: ``(n_heads, n_q, n_k)``.
        x_labels, y_labels, kwargs: as :func:`attention_heatmap`.

    Returns:
        The matplotlib ``Figure``.

    Raises:
        ValueError: ``weights`` is not 3-D.
    """
    w = _matrices(weights, "weights", "(n_heads, n_q, n_k)")
    h = w.shape[0]
    fig, axes = plt.subplots(1, h, figsize=(min(4.2 * h, 18), 3.6), squeeze=False)
    for i, ax in enumerate(axes[0]):
        attention_heatmap(w[i], x_labels, y_labels, title=f"head {i + 1}", ax=ax, **kwargs)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def positional_encoding_heatmap(pe, title: str = "Sinusoidal positional encoding", ax=None,
                                cmap: str = "RdBu_r"):
    """Heatmap of a positional-encoding matrix: rows = positions, columns = dimensions.

    Paper §3.5.  Values lie in [-1, 1], so the colour scale is fixed to that range with a
    diverging colour map (0 is white).

    Args:
        pe: ``(seq_len, d_model)`` array or tensor, e.g. from
            :func:`tmlib.ref.positional.positional_encoding`.
        title: the figure title.
        ax: matplotlib axes to draw on (a new figure if ``None``).
        cmap: a diverging matplotlib colour map.

    Returns:
        The matplotlib ``Axes``.

    Raises:
        ValueError: ``pe`` is not 2-D.
    """
    w = _matrices(pe, "pe", "(seq_len, d_model)")
    seq_len, d_model = w.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    sns.heatmap(w, ax=ax, cmap=cmap, vmin=-1.0, vmax=1.0, cbar_kws={"label": "PE value"},
                xticklabels=max(1, d_model // 8), yticklabels=max(1, seq_len // 10))
    ax.set_title(title)
    ax.set_xlabel("dimension (even = sin, odd = cos)")
    ax.set_ylabel("position")
    ax.tick_params(axis="y", rotation=0)
    return ax


def mask_panels(masks, titles: Sequence[str], x_labels=None, y_labels=None,
                suptitle: str = "Attention masks (dark = may attend)", xlabel: str = "key position",
                ylabel: str = "query position", square_cells: bool = False, xtick_rotation: float = 45,
                figsize: tuple[float, float] | None = None, share_ylabel: bool = False,
                blocked_dark: bool = False, footnote: str | None = None):
    """Boolean masks side by side, one panel each, True (may attend) drawn dark, or light with ``blocked_dark``.

    Args:
        masks: sequence of 2-D boolean arrays ``(n_q, n_k)`` (shapes may differ).
        titles: one title per mask.
        x_labels, y_labels: optional sequences (one per mask) of token labels, or ``None``.
        suptitle, xlabel, ylabel: figure title and axis labels.
        square_cells: draw every panel's cells at the size of the tallest panel's, so that masks of
            different shapes compare cell for cell (default: each panel fills its own box).
        xtick_rotation: rotation of the key labels in degrees (0: horizontal and centred).
        figsize: the figure's size in inches (default: 3.2 wide per panel, at most 16, and 3.4 high).
        share_ylabel: write ``ylabel`` on the first panel only.
        blocked_dark: draw blocked cells (False) dark and allowed ones light, as a weight of 0 is dark in a
            viridis attention heatmap, and add a two-entry legend ("may attend", "blocked").
        footnote: optional line of text under the panels.

    Returns:
        The matplotlib ``Figure``.

    Raises:
        ValueError: a mask is not 2-D, or the number of titles/labels does not match.
        TypeError: a mask is not boolean.
    """
    masks = [np.asarray(m) for m in masks]
    if len(titles) != len(masks):
        raise ValueError(f"{len(titles)} titles for {len(masks)} masks")
    for name, labels in (("x_labels", x_labels), ("y_labels", y_labels)):
        if labels is not None and len(labels) != len(masks):
            raise ValueError(f"{name} must hold one label list per mask: {len(labels)} for {len(masks)} masks")
    for i, m in enumerate(masks):
        if m.dtype != bool:
            raise TypeError(f"mask {i} must be boolean (True = may attend), got dtype {m.dtype}")
        if m.ndim != 2:
            raise ValueError(f"mask {i} must be 2-D (n_q, n_k), got shape {m.shape}")
    fig, axes = plt.subplots(1, len(masks), figsize=figsize or (min(3.2 * len(masks), 16), 3.4), squeeze=False)
    for i, (ax, m) in enumerate(zip(axes[0], masks)):
        ax.imshow(~m if blocked_dark else m, cmap="Greys", vmin=-0.25 if blocked_dark else 0, vmax=1.4)
        ax.set_title(titles[i])
        ax.set_xlabel(xlabel)
        if i == 0 or not share_ylabel:
            ax.set_ylabel(ylabel)
        n_q, n_k = m.shape
        ax.set_xticks(range(n_k))
        ax.set_yticks(range(n_q))
        if x_labels is not None and x_labels[i] is not None:
            ax.set_xticklabels(x_labels[i], rotation=xtick_rotation, ha="right" if xtick_rotation else "center")
        if y_labels is not None and y_labels[i] is not None:
            ax.set_yticklabels(y_labels[i])
        ax.set_xticks(np.arange(-0.5, n_k, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, n_q, 1), minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="minor", length=0)
    fig.suptitle(suptitle)
    fig.tight_layout()
    if square_cells:
        fig.canvas.draw()
        tallest = max(range(len(masks)), key=lambda i: masks[i].shape[0])
        cell = axes[0][tallest].get_window_extent().height / masks[tallest].shape[0]  # pixels per cell
        top = max(ax.get_position().y1 for ax in axes[0])  # every panel's top edge on one line
        for ax, m in zip(axes[0], masks):
            box = ax.get_position()  # the panel as drawn, in figure coordinates
            w, h = m.shape[1] * cell / fig.bbox.width, m.shape[0] * cell / fig.bbox.height
            ax.set_position([box.x0 + (box.width - w) / 2, top - h, w, h])
    if blocked_dark:
        shade = plt.get_cmap("Greys")
        fig.legend(handles=[Patch(facecolor=shade(0.25 / 1.65), edgecolor="grey", label="may attend"),
                            Patch(facecolor=shade(1.25 / 1.65), edgecolor="grey", label="blocked")],
                   loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)  # under the panels
    if footnote is not None:
        fig.text(0.5, -0.08 if blocked_dark else 0.0, footnote, ha="center", va="top")  # under the legend
    return fig


def power_law_plot(series, title: str, xlabel: str, ylabel: str, ax=None, fit_label: str = "slope"):
    """Measurements against size on log-log axes, each with its fitted power law drawn over the fitted range.

    On log-log axes y = a·n^b is a straight line of slope b, so an O(n²) cost shows as slope 2.

    Args:
        series: sequence of dicts with ``label`` (str), ``n`` and ``y`` (equal-length sequences of positive
            numbers), and optionally ``fit``: an object or dict with ``exponent``, ``low``, ``high`` and
            ``prefactor`` (e.g. :class:`tmlib.analysis.benchmarking.PowerLawFit` or a benchmark JSON's fit entry),
            drawn as a dashed line for ``n >= fit_min_n`` (key ``fit_min_n``, default: all n).
        title, xlabel, ylabel: the figure's title and axis labels (with units).
        ax: matplotlib axes (a new figure if ``None``).
        fit_label: word used in the legend for the exponent.

    Returns:
        The matplotlib ``Axes``.

    Raises:
        ValueError: a series without points, with ``n`` and ``y`` of different lengths, or non-positive values.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, s in enumerate(series):
        n = np.asarray(s["n"], dtype=np.float64)
        y = np.asarray(s["y"], dtype=np.float64)
        if n.size == 0 or n.shape != y.shape:
            raise ValueError(f"series {s.get('label', i)!r}: n and y must be non-empty and equally long, "
                             f"got {n.shape} and {y.shape}")
        if (n <= 0).any() or (y <= 0).any():
            raise ValueError(f"series {s.get('label', i)!r}: log-log axes need positive n and y")
        label = s.get("label", f"series {i}")
        fit = s.get("fit")
        if fit is not None:
            get = (lambda k: fit[k]) if isinstance(fit, dict) else (lambda k: getattr(fit, k))
            label += f" ({fit_label} {get('exponent'):.2f}, 95% CI {get('low'):.2f} to {get('high'):.2f})"
        (line,) = ax.plot(n, y, "o-", label=label, lw=1.2, ms=4)
        if fit is not None:
            lo = s.get("fit_min_n", n.min())
            nn = np.geomspace(max(lo, n.min()), n.max(), 20)
            ax.plot(nn, get("prefactor") * nn ** get("exponent"), "--", color=line.get_color(), lw=2, alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def _row_label(kind: str, layer: int) -> str:
    from tmlib.analysis.capture import KIND_LABELS  # the names chapter 11's findings print

    return f"{KIND_LABELS.get(kind, kind)} L{int(layer)}"


def head_grid(table, value: str, title: str | None = None, ax=None, fmt: str = ".2f", cmap: str = "viridis",
              vmin: float | None = None, vmax: float | None = None, cbar_label: str | None = None,
              kinds: Sequence[str] | None = None, annot: bool = True, cbar: bool = True):
    """Heatmap of one per-head number: rows = (attention kind, layer), columns = heads (chapter 11).

    Rows are labelled ``enc-self L0``, ``dec-self L1``, ``cross L1``, … (encoder self-attention, decoder
    self-attention, cross-attention; layers from 0); NaN cells (a statistic not defined for that kind) stay empty.

    Args:
        table: a pandas DataFrame with columns ``kind``, ``layer``, ``head`` and ``value`` (one row per head), e.g.
            from :func:`tmlib.analysis.heads.head_statistics` or the one-head rows of
            :func:`tmlib.analysis.ablation.ablation_table`.
        value: the column to show.
        title: figure title (default: ``value``).
        ax: matplotlib axes (a new figure if ``None``).
        fmt: format of the numbers written in the cells.
        cmap, vmin, vmax: colour map and range (default: the data's range).
        cbar_label: colour-bar label (default: ``value``).
        kinds: row order of the attention kinds (default: encoder self, decoder self, cross, as present).
        annot: write the numbers in the cells (they make the PNG several times larger: leave them out in a
            notebook that also prints the table).
        cbar: draw a colour bar.

    Returns:
        The matplotlib ``Axes``.

    Raises:
        ValueError: a missing column, or two rows for the same head.
    """
    missing = {"kind", "layer", "head", value} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks column(s) {sorted(missing)}; it has {list(table.columns)}")
    if table.duplicated(["kind", "layer", "head"]).any():
        raise ValueError("table has several rows for the same (kind, layer, head)")
    order = kinds or [k for k in ("encoder self", "decoder self", "cross") if k in set(table["kind"])]
    order += [k for k in dict.fromkeys(table["kind"]) if k not in order]
    rows = [(k, int(l)) for k in order for l in sorted(set(table.loc[table["kind"] == k, "layer"]))]
    heads = sorted(int(h) for h in set(table["head"]))
    grid = np.full((len(rows), len(heads)), np.nan)
    for _, r in table.iterrows():
        grid[rows.index((r["kind"], int(r["layer"]))), heads.index(int(r["head"]))] = float(r[value])
    if ax is None:
        _, ax = plt.subplots(figsize=(1.6 + 0.9 * len(heads), 0.8 + 0.45 * len(rows)))
    sns.heatmap(grid, ax=ax, annot=annot, fmt=fmt, cmap=cmap, vmin=vmin, vmax=vmax, cbar=cbar,
                xticklabels=[str(h) for h in heads], yticklabels=[_row_label(k, l) for k, l in rows],
                cbar_kws={"label": cbar_label or value} if cbar else None)
    ax.set_title(title or value)
    ax.set_xlabel("head")
    ax.set_ylabel("attention kind, layer")
    ax.tick_params(axis="y", rotation=0)
    return ax


def alignment_panels(alignments, titles: Sequence[str] | None = None, suptitle: str = "Cross-attention as soft alignment",
                     xlabel: str = "source word (German)", ylabel: str = "target word produced (English)",
                     cmap: str = "viridis"):
    """Several attention matrices side by side on one colour scale [0, 1] (rows = queries, columns = keys).

    Made for soft word alignments (rows = target words, columns = source words), usable for any attention maps.
    One colour bar, on the last panel; no numbers in the cells (keeps the PNG small).

    Args:
        alignments: sequence of ``(weights, key_labels, query_labels)`` with ``weights`` ``(n_q, n_k)``.
        titles: one title per panel (default: none).
        suptitle, xlabel, ylabel: figure title and axis labels.
        cmap: matplotlib colour map.

    Returns:
        The matplotlib ``Figure``.

    Raises:
        ValueError: no alignment, a matrix that is not 2-D, labels that do not match a matrix, or a wrong number
            of titles.
    """
    alignments = [(_to_numpy(w), list(k), list(q)) for w, k, q in alignments]
    if not alignments:
        raise ValueError("alignment_panels needs at least one (weights, key_labels, query_labels)")
    if titles is not None and len(titles) != len(alignments):
        raise ValueError(f"{len(titles)} titles for {len(alignments)} alignments")
    for i, (w, k, q) in enumerate(alignments):
        if w.ndim != 2 or w.shape != (len(q), len(k)):
            raise ValueError(f"panel {i}: weights of shape {w.shape} do not match {len(q)} query and {len(k)} key "
                             f"labels")
    widths = [w.shape[1] for w, _, _ in alignments]
    fig, axes = plt.subplots(1, len(alignments), squeeze=False, layout="constrained",  # no gaps between panels
                             figsize=(min(16, 1.5 + 0.36 * sum(widths) + 1.3 * len(alignments)),
                                      1.3 + 0.3 * max(w.shape[0] for w, _, _ in alignments)),
                             gridspec_kw={"width_ratios": widths})
    last = len(alignments) - 1
    for i, (ax, (w, keys, queries)) in enumerate(zip(axes[0], alignments)):
        sns.heatmap(w, ax=ax, cmap=cmap, vmin=0.0, vmax=1.0, xticklabels=keys, yticklabels=queries,
                    cbar=i == last, cbar_kws={"label": "weight", "shrink": 0.8} if i == last else None)
        ax.set_title(titles[i] if titles else "")
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.tick_params(axis="x", rotation=90)
        ax.tick_params(axis="y", rotation=0)
    fig.suptitle(suptitle)
    fig.supxlabel(xlabel)  # one label for all the panels
    fig.supylabel(ylabel)
    return fig
