"""What attention weights do not explain: replace one head's weights and measure how far the output moves.

Jain & Wallace (2019, "Attention is not Explanation", §4.2) shuffle a model's attention weights and find that the
prediction often barely changes: a heatmap then shows where a head looked, not why the model decided.  Chapter 11
runs the same test on each head of the translator: :func:`permute_rows` shuffles each query's weights among the
keys it may see, :func:`override_head_attention` runs the model with one head's weights replaced, and
:func:`permutation_effects` measures the change with :func:`total_variation` and :func:`js_distance`.
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
import torch
from torch import Tensor

from tmlib.analysis.capture import (
    AttentionCapture, as_pair, check_head, all_heads, attention_module, capture_attention
)

__all__ = ["total_variation", "js_distance", "permute_rows", "override_head_attention", "permutation_effects"]


def _check_distributions(p: Tensor, q: Tensor) -> None:
    """TypeError unless ``p`` and ``q`` are tensors, ValueError unless they share a shape ``(..., n)``."""
    if not isinstance(p, Tensor) or not isinstance(q, Tensor):
        raise TypeError("p and q must be torch tensors")
    if p.shape != q.shape or p.dim() == 0:
        raise ValueError(f"p and q must have the same shape with a last axis of outcomes, got "
                         f"{tuple(p.shape)} and {tuple(q.shape)}")


def total_variation(p: Tensor, q: Tensor) -> Tensor:
    """Total variation distance ½ Σ |p − q| over the last axis, in [0, 1].

    Args:
        p, q: probability distributions over the last axis, same shape ``(..., n)``.

    Returns:
        float tensor ``(...)``.

    Raises:
        TypeError / ValueError: not tensors, or shapes that differ.
    """
    _check_distributions(p, q)
    return 0.5 * (p - q).abs().sum(dim=-1)


def js_distance(p: Tensor, q: Tensor) -> Tensor:
    """Jensen–Shannon distance √JSD(p, q) with natural logarithms, in [0, √ln 2] (a metric).

    JSD(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m), m = ½ (p + q), as ``scipy.spatial.distance.jensenshannon`` (base e);
    Jain & Wallace (2019) report JSD between attention distributions.  ``p`` and ``q`` are distributions over the
    last axis, of one shape ``(..., n)`` (TypeError / ValueError otherwise, as :func:`total_variation`); the
    result, computed in float64, has shape ``(...)`` and ``p``'s float dtype.
    """
    _check_distributions(p, q)
    p64, q64 = p.to(torch.float64), q.to(torch.float64)
    m = 0.5 * (p64 + q64)

    def kl(a: Tensor) -> Tensor:
        return torch.where(a > 0, a * (torch.log(a.clamp_min(1e-300)) - torch.log(m.clamp_min(1e-300))),
                           torch.zeros_like(a)).sum(dim=-1)

    return (0.5 * kl(p64) + 0.5 * kl(q64)).clamp_min(0).sqrt().to(p.dtype if p.is_floating_point() else torch.float64)


def permute_rows(weights: Tensor, allowed: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Shuffle each row's weights among its allowed positions (Jain & Wallace 2019, §4.2).

    Args:
        weights: float ``(..., n_k)``; entries at disallowed positions should be 0.
        allowed: bool, same shape, True where a key may be attended to.
        generator: a ``torch.Generator`` for reproducible permutations.

    Returns:
        a tensor of the same shape: in every row the values at allowed positions are a random permutation of that
        row's values at allowed positions; disallowed positions are 0.  Row sums are preserved.

    Raises:
        ValueError: shapes differ.  TypeError: ``allowed`` is not boolean.
    """
    if not isinstance(allowed, Tensor) or allowed.dtype != torch.bool:
        raise TypeError("allowed must be a bool tensor (True = may attend)")
    if weights.shape != allowed.shape:
        raise ValueError(f"weights {tuple(weights.shape)} and allowed {tuple(allowed.shape)} must have the same shape")
    n_k = weights.shape[-1]
    index = torch.arange(n_k, device=weights.device, dtype=torch.float64).expand(weights.shape)
    big = float(n_k + 1)
    # allowed positions in increasing order, then the others
    targets = torch.where(allowed, index, index + big).argsort(dim=-1)
    # allowed positions in random order, then the others (in increasing order)
    noise = torch.rand(weights.shape, generator=generator, dtype=torch.float64).to(weights.device)
    sources = torch.where(allowed, noise, 2.0 + index).argsort(dim=-1)
    out = torch.zeros_like(weights)
    out.scatter_(-1, targets, weights.masked_fill(~allowed, 0.0).gather(-1, sources))
    return out


@torch.no_grad()
def override_head_attention(model, src: Tensor, tgt_in: Tensor, head, new_weights: Callable,
                            capture: AttentionCapture | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``(logits, W, W')`` of a teacher-forced pass in which ``head`` uses ``W' = new_weights(W, allowed)`` instead of
    its own weights ``W`` ``(batch, n_q, n_k)`` (Jain & Wallace 2019 §4.2): a first pass records ``W``, the second keeps
    the head's values (hook on ``w_v``) and replaces its slice of Concat(head_1, …) by ``W' @ V`` (pre-hook on
    ``w_o``); everything upstream is unchanged. ``capture``: the first pass, already run on these inputs.

    Raises:
        ValueError: ``W'`` of another shape, a ``capture`` of other inputs, a bad head.
    """
    head = check_head(model, head)
    cap = capture_attention(model, src, tgt_in) if capture is None else capture
    if cap.src_mask.shape != src.shape or cap.tgt_mask.shape != tgt_in.shape:
        raise ValueError(f"capture was recorded on src {tuple(cap.src_mask.shape)} / tgt_in "
                         f"{tuple(cap.tgt_mask.shape)}, not on {tuple(src.shape)} / {tuple(tgt_in.shape)}")
    original = cap.weights[head.kind][head.layer][:, head.head]  # (batch, n_q, n_k)
    qm, km, causal = cap.masks(head.kind)
    allowed = km[:, None, :].expand_as(original)
    if causal:
        n = original.shape[-1]
        allowed = allowed & torch.ones(n, n, dtype=torch.bool, device=original.device).tril()
    replaced = new_weights(original, allowed)
    if not isinstance(replaced, Tensor) or replaced.shape != original.shape:
        raise ValueError(f"new_weights must return a tensor of shape {tuple(original.shape)}, got "
                         f"{tuple(getattr(replaced, 'shape', ()))}")
    module = attention_module(model, head.kind, head.layer)
    cols = slice(head.head * module.d_k, (head.head + 1) * module.d_k)  # the head's slice of Concat(head_1, …)
    kv = head.head // (module.n_heads // getattr(module, "n_kv_heads", module.n_heads))  # its value head (GQA)
    store: dict = {}

    def keep_values(_lin, _args, output):  # w_v projects the values of all heads
        store["v"] = output[..., kv * module.d_k:(kv + 1) * module.d_k]  # (batch, n_k, d_k)

    def substitute(_lin, args):
        x = args[0].clone()  # (batch, n_q, d_model)
        v = store["v"]  # (batch, n_k, d_k)
        x[..., cols] = replaced.to(v.dtype) @ v  # (batch, n_q, d_k)
        return (x,) + tuple(args[1:])

    handles = [module.w_v.register_forward_hook(keep_values), module.w_o.register_forward_pre_hook(substitute)]
    was_training = model.training
    model.eval()
    try:
        logits = model(src, tgt_in)  # (batch, tgt_len, vocab)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return logits, original, replaced


def permutation_effects(model, batches: Iterable, heads=None, seed: int = 0) -> "pd.DataFrame":
    """Jain & Wallace's (2019, §4.2) test, one head at a time: shuffle each row of the head's attention among the keys
    it may see (:func:`permute_rows`, seeded) and compare with the unchanged model. A table per head: ``attention_tvd``
    and ``attention_jsd`` (mean distances of the weights), ``output_tvd`` (of the next-token distributions) and
    ``argmax_changed`` (share of positions whose most probable token changed), over real positions. ValueError: no
    batch."""
    import pandas as pd

    heads = all_heads(model) if heads is None else [check_head(model, h) for h in heads]
    sums = {h: np.zeros(3) for h in heads}  # per head: attention TVD, output TVD, predictions changed
    jsd = {h: 0.0 for h in heads}  # per head: Jain & Wallace's distance of the weights
    n_q = {h: 0 for h in heads}
    n_t = 0
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            src, tgt_in = as_pair(batch)
            base = capture_attention(model, src, tgt_in)
            with torch.no_grad():
                p_base = torch.softmax(model(src, tgt_in).float(), dim=-1)  # (batch, tgt_len, vocab): normal forward
            real = base.tgt_mask  # (batch, tgt_len)
            n_t += int(real.sum())
            for h in heads:
                gen = torch.Generator().manual_seed(seed)
                logits, w, w_new = override_head_attention(
                    model, src, tgt_in, h, lambda w_, a_: permute_rows(w_, a_, gen), capture=base)
                qm = base.masks(h.kind)[0]  # (batch, n_q)
                p_new = torch.softmax(logits.float(), dim=-1)
                sums[h] += [float(total_variation(w, w_new)[qm].sum()),
                            float(total_variation(p_base, p_new)[real].sum()),
                            float((p_base.argmax(-1) != p_new.argmax(-1))[real].sum())]
                n_q[h] += int(qm.sum())
                jsd[h] += float(js_distance(w, w_new)[qm].sum())
    finally:
        model.train(was_training)
    if n_t == 0:
        raise ValueError("permutation_effects needs at least one batch with target positions")
    return pd.DataFrame([{"kind": h.kind, "layer": h.layer, "head": h.head,
                          "attention_tvd": sums[h][0] / n_q[h], "attention_jsd": jsd[h] / n_q[h],
                          "output_tvd": sums[h][1] / n_t, "argmax_changed": sums[h][2] / n_t} for h in heads])
