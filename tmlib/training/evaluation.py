"""The validation loss: the label-smoothed loss and the plain cross-entropy per target token over a set of batches.

Both are sums over the non-pad target tokens divided by their number (the normalisation of the training loss,
:func:`tmlib.training.recipe.step_loss`, over the whole set), accumulated in float64.
"""
from __future__ import annotations

import torch

from tmlib.training.recipe import translation_loss

__all__ = ["evaluate_loss"]


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, batches, forward_fn, *, pad_id: int | None, label_smoothing: float,
                  precision, strategy, device: torch.device) -> tuple[float, float]:
    """``(label-smoothed loss, plain cross-entropy)`` in nats per target token over ``batches``, in eval mode (no
    dropout). Uses no random numbers; reads the result from the device once.

    Args:
        model: what ``forward_fn`` calls (its training mode is restored afterwards).
        batches: a ``BatchIterator`` (``batches(0)``: its index lists, ``collate_indices``).
        forward_fn: ``forward_fn(model, batch) -> logits (batch, tgt_len, V)`` aligned with ``batch.tgt_out``.
        pad_id: the padding label (not a target).
        label_smoothing: ε_ls of the first value (§5.4).
        precision: the run's :class:`tmlib.training.precision.MixedPrecision` (its autocast).
        strategy: the run's :mod:`tmlib.training.strategy`: each process evaluates its share of the batches
            and the sums are added over the processes, so every process returns the same values.
        device: where the batches go.
    """
    was_training = model.training
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64, device=device)  # loss sum, NLL sum, tokens
    for idx in strategy.share_evaluation(batches.batches(0)):
        batch = batches.collate_indices(idx).to(device)
        with precision.autocast():
            logits = forward_fn(model, batch)  # (batch, tgt_len, V)
        totals[0] += translation_loss(logits, batch.tgt_out, pad_id, label_smoothing, "sum")
        totals[1] += translation_loss(logits, batch.tgt_out, pad_id, 0.0, "sum")
        totals[2] += batch.n_tokens
    strategy.sum(totals)
    model.train(was_training)
    loss, nll = (totals[:2] / totals[2].clamp(min=1)).tolist()
    return loss, nll
