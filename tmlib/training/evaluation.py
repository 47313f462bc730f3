"""The validation loss: the label-smoothed loss and the plain cross-entropy per target token over a set of batches.

Both are sums over the non-pad target tokens divided by their number (the normalisation of the training loss,
:func:`tmlib.training.recipe.step_loss`, over the whole set), accumulated in float64.
"""
from __future__ import annotations

import torch

from tmlib.training import distributed
from tmlib.training.recipe import translation_loss

__all__ = ["evaluate_loss"]


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, batches, forward_fn, *, pad_id: int | None, label_smoothing: float,
                  precision, device: torch.device) -> tuple[float, float]:
    """``(label-smoothed loss, plain cross-entropy)`` in nats per target token over ``batches`` (``batches(0)``,
    ``collate_indices``), ``model`` in eval mode, under ``precision``'s autocast; no random numbers, one read from the
    device. With several processes each evaluates every N-th batch and the sums are added over the processes."""
    was_training = model.training
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64, device=device)  # loss sum, NLL sum, tokens
    for idx in batches.batches(0)[distributed.rank()::distributed.world_size()]:
        batch = batches.collate_indices(idx).to(device)
        with precision.autocast():
            logits = forward_fn(model, batch)  # (batch, tgt_len, V)
        totals[0] += translation_loss(logits, batch.tgt_out, pad_id, label_smoothing, "sum")
        totals[1] += translation_loss(logits, batch.tgt_out, pad_id, 0.0, "sum")
        totals[2] += batch.n_tokens
    distributed.all_reduce_sum(totals)
    model.train(was_training)
    loss, nll = (totals[:2] / totals[2].clamp(min=1)).tolist()
    return loss, nll
