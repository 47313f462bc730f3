"""The training recipe of the paper (§5.3-5.4): optimizer, learning-rate schedule, label-smoothed loss.

* Optimizer (§5.3): Adam with β₁ = 0.9, β₂ = 0.98, ε = 10⁻⁹ (:func:`make_optimizer`).
* Learning rate (§5.3, eq. 3): ``lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)``:
  linear warm-up, then inverse-square-root decay (:class:`NoamSchedule`, :func:`make_scheduler`); its values
  equal :func:`tmlib.ref.noam_lr`.
* Label smoothing ε_ls = 0.1 (§5.4) and the loss over the non-pad target tokens (:func:`translation_loss`); the
  loss of an optimizer step is its sum over the step's target tokens divided by their number, whatever the
  number of batches and processes the step is spread over (:func:`step_loss`).
* Dropout P_drop = 0.1 lives in the model (§5.4).
* Checkpoint averaging (§6.1), in its modern form: a moving average of the weights (:func:`make_ema`).

The loop that uses them is :class:`tmlib.training.trainer.Trainer`; chapter 9 writes the same training step by hand.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

from tmlib.validation import check_float, check_int

__all__ = ["ADAM_BETAS", "ADAM_EPS", "make_optimizer", "NoamSchedule", "make_scheduler", "translation_loss", "step_loss",
           "make_ema"]

#: Adam's β₁, β₂ and ε in the paper (§5.3).
ADAM_BETAS = (0.9, 0.98)
ADAM_EPS = 1e-9


def make_optimizer(model: torch.nn.Module, betas=ADAM_BETAS, eps: float = ADAM_EPS,
                   fused: bool | None = None) -> torch.optim.Adam:
    """Adam with the paper's settings (§5.3); the base lr is 1 and the schedule sets the actual value.

    Args:
        model: the parameters to optimize.
        betas, eps: default (0.9, 0.98) and 1e-9 as in the paper.
        fused: use PyTorch's fused Adam kernel (one kernel for all parameters instead of several per
            parameter). ``None`` (default): fused when the parameters are on a CUDA device, PyTorch's
            default (the multi-tensor ``foreach`` implementation) elsewhere. The update is the same
            mathematics either way.

    Returns:
        ``torch.optim.Adam`` whose learning rate :func:`make_scheduler` multiplies by the schedule.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if fused is None:
        fused = bool(params) and all(p.device.type == "cuda" for p in params)
    return torch.optim.Adam(params, lr=1.0, betas=betas, eps=eps, fused=fused or None)


class NoamSchedule:
    """The learning rate of §5.3 (eq. 3) as a multiplier for ``torch.optim.lr_scheduler.LambdaLR``.

    ``LambdaLR`` calls it with the number of scheduler steps taken so far (0 before the first optimizer
    step), so ``__call__(i)`` returns the lr of training step ``i + 1`` (steps count from 1):
    ``factor · d_model^-0.5 · min(s^-0.5, s · warmup_steps^-1.5)`` with ``s = i + 1``. It rises linearly
    to its peak ``factor · (d_model · warmup_steps)^-0.5`` at ``s = warmup_steps`` and then decays as
    ``s^-0.5``. A callable object (not a lambda) so that the scheduler's ``state_dict`` records it.

    Args:
        d_model: model width (> 0).
        warmup_steps: warm-up length in steps (> 0); the paper uses 4000.
        factor: overall multiplier (1 in the paper; small models want other values).

    Raises:
        ValueError: a non-positive argument.
    """

    def __init__(self, d_model: int, warmup_steps: int, factor: float = 1.0):
        if d_model <= 0 or warmup_steps <= 0 or factor <= 0:
            raise ValueError(f"d_model, warmup_steps and factor must be positive, got {d_model}, "
                             f"{warmup_steps}, {factor}")
        self.d_model, self.warmup_steps, self.factor = int(d_model), int(warmup_steps), float(factor)

    def __call__(self, i: int) -> float:
        s = i + 1
        return self.factor * self.d_model**-0.5 * min(s**-0.5, s * self.warmup_steps**-1.5)

    def peak(self) -> float:
        """The largest learning rate, reached at step ``warmup_steps``."""
        return self(self.warmup_steps - 1)


def make_scheduler(optimizer: torch.optim.Optimizer, d_model: int, warmup_steps: int = 4000,
                   factor: float = 1.0) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` that gives the optimizer the paper's learning rate; call ``.step()`` after each
    ``optimizer.step()``. The optimizer's base lr must be 1 (:func:`make_optimizer`)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, NoamSchedule(d_model, warmup_steps, factor))


def translation_loss(logits: torch.Tensor, tgt_out: torch.Tensor, pad_id: int | None = 0,
                     label_smoothing: float = 0.1, reduction: str = "mean",
                     chunk_elements: int = 1 << 26) -> torch.Tensor:
    """Label-smoothed cross-entropy over the non-pad target tokens (§5.4: ε_ls = 0.1).

    PyTorch's ``label_smoothing=ε`` mixes the one-hot target with the uniform distribution over *all*
    V classes: the correct token gets probability ``1 − ε + ε/V`` and every other one ``ε/V`` (the
    Annotated Transformer instead spreads ε over the V − 2 classes that are neither correct nor pad).
    The minimum of the smoothed loss is therefore not 0 but the entropy of that target distribution.

    The softmax is computed in float32 even when the model ran under bf16/fp16 autocast (a half-precision
    log-probability has about three significant digits). A float32 copy of all the logits would cost
    ``tokens × V × 4`` bytes (3.7 GB for the paper's 25,000-token batches and V = 37,000), so half-precision
    logits with more than ``chunk_elements`` numbers are processed in chunks of rows under activation
    checkpointing: one chunk's float32 copy exists at a time, in the forward and in the backward pass (which
    recomputes it), at the price of recomputing a cast and a softmax. Smaller logits take the direct path.

    Args:
        logits: ``(batch, tgt_len, V)`` float, unnormalized scores.
        tgt_out: ``(batch, tgt_len)`` int64 labels, ``pad_id`` where there is no token.
        pad_id: ignored label (``None``: every position counts).
        label_smoothing: ε_ls in [0, 1).
        reduction: ``"mean"`` (per non-pad token; what a single batch trains on) or ``"sum"`` (for gradient
            accumulation and data parallelism, where the sum is divided by the tokens of the whole step).
        chunk_elements: largest number of half-precision logits cast to float32 at once (default 2²⁶: 256 MB
            of float32); float32/float64 logits are never chunked.

    Returns:
        0-dim float32/float64 tensor: the loss in nats (per target token for ``"mean"``).

    Raises:
        ValueError: shapes that do not match, ``label_smoothing`` outside [0, 1), an unknown reduction, a
            ``chunk_elements`` smaller than one row of logits.
    """
    if logits.dim() != 3 or logits.shape[:-1] != tgt_out.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match tgt_out {tuple(tgt_out.shape)}: expected "
                         "(batch, tgt_len, V) and (batch, tgt_len)")
    check_float(label_smoothing, "label_smoothing", minimum=0.0, maximum=1.0, max_inclusive=False)
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    ignore = -100 if pad_id is None else check_int(pad_id, "pad_id")
    vocab = logits.shape[-1]
    check_int(chunk_elements, "chunk_elements", minimum=vocab)
    rows, labels = logits.reshape(-1, vocab), tgt_out.reshape(-1)
    if logits.dtype not in (torch.float16, torch.bfloat16):
        return F.cross_entropy(rows, labels, ignore_index=ignore, label_smoothing=label_smoothing,
                               reduction=reduction)
    if rows.numel() <= chunk_elements or not torch.is_grad_enabled() or not rows.requires_grad:
        rows = rows.float()  # the softmax of half-precision logits is computed in float32
        return F.cross_entropy(rows, labels, ignore_index=ignore, label_smoothing=label_smoothing,
                               reduction=reduction)

    def chunk_sum(chunk, chunk_labels):  # recomputed in the backward pass: its float32 copy is not kept
        return F.cross_entropy(chunk.float(), chunk_labels, ignore_index=ignore, label_smoothing=label_smoothing,
                               reduction="sum")

    step = max(1, chunk_elements // vocab)
    # split, not rows[i:i + step]: the backward of a slice writes a zero tensor of all the logits for every
    # chunk and adds them up; split's backward concatenates the chunks' gradients once
    total = sum(torch.utils.checkpoint.checkpoint(chunk_sum, chunk, chunk_labels, use_reentrant=False)
                for chunk, chunk_labels in zip(rows.split(step), labels.split(step)))
    if reduction == "sum":
        return total
    return total / (labels != ignore).sum()  # the mean over the labels that count, as F.cross_entropy takes it


def make_ema(model: torch.nn.Module, decay: float) -> torch.optim.swa_utils.AveragedModel:
    """An exponential moving average of the weights: after every optimizer step, ``update_parameters(model)`` sets
    ``ema ← decay · ema + (1 − decay) · weights`` (the first update copies the weights); ``.module`` holds the
    average. The modern form of the paper's checkpoint averaging (§6.1: the last 5 or 20 checkpoints averaged).

    Args:
        model: the trained module.
        decay: in (0, 1), e.g. 0.998.

    Raises:
        ValueError: ``decay`` outside (0, 1).
    """
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    check_float(decay, "decay", minimum=0.0, maximum=1.0, min_inclusive=False, max_inclusive=False)
    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))


def step_loss(logits: torch.Tensor, tgt_out: torch.Tensor, pad_id: int | None, label_smoothing: float,
              batch_tokens: int, step_tokens: int) -> torch.Tensor:
    """One batch's part of the loss of an optimizer step: its label-smoothed loss summed over its non-pad target
    tokens, divided by ``step_tokens``, the non-pad target tokens of the whole step (every batch it accumulates,
    on every process). The parts of a step add up to the mean over all its tokens, so the step's gradient is
    the one of a single batch holding them all. This is the trainer's one normalisation of the loss.

    When the batch is the whole step (``batch_tokens == step_tokens``) its part is its mean, computed as
    ``F.cross_entropy(reduction="mean")`` computes it: bit for bit the loss of a training step written by hand.

    Args:
        logits: ``(batch, tgt_len, V)``; tgt_out: ``(batch, tgt_len)`` labels (see :func:`translation_loss`).
        pad_id, label_smoothing: as for :func:`translation_loss`.
        batch_tokens: the batch's non-pad target tokens (``Batch.n_tokens``).
        step_tokens: the step's non-pad target tokens (>= ``batch_tokens``).

    Returns:
        0-dim float32/float64 tensor, in nats.

    Raises:
        ValueError: what :func:`translation_loss` raises.
    """
    if batch_tokens == step_tokens:
        return translation_loss(logits, tgt_out, pad_id, label_smoothing)
    return translation_loss(logits, tgt_out, pad_id, label_smoothing, "sum") / step_tokens
