"""Which batches each optimizer step trains on.

Every epoch has a fixed order of batches given the seed (:class:`tmlib.data.batching.BatchIterator` with
``shuffle=True``), which is what makes resuming exact: a run continues from its position in that order. One
optimizer step takes the next ``accumulate × processes`` batches of it (gradient accumulation and data
parallelism); each process trains on its share (:meth:`tmlib.training.strategy.DataParallel.share`).
"""
from __future__ import annotations

import torch

from tmlib.training.config import ConfigError

__all__ = ["StepPlan"]


class StepPlan:
    """The optimizer steps of each epoch over ``source``'s batches.

    Args:
        source: the training batches (``batches(epoch)``: the epoch's index lists; ``collate_indices``).
        accumulate: batches per step and process.
        strategy: the :mod:`tmlib.training.strategy` of the run (its share of each step, its token count).
        device: the training device (CUDA: batches in page-locked memory, so that the copy can overlap).
        num_workers: data-loader worker processes that collate the batches (0: in this process).

    Raises:
        tmlib.training.config.ConfigError: an epoch holds fewer batches than one step needs.
    """

    def __init__(self, source, accumulate: int, strategy, device: torch.device, num_workers: int = 0):
        self.source, self.strategy, self.num_workers = source, strategy, num_workers
        self.batches_per_step = accumulate * strategy.world_size
        self.pin_memory = torch.device(device).type == "cuda"
        if self.steps_in_epoch(0) < 1:
            raise ConfigError(f"an epoch has {len(source.batches(0))} batches, fewer than the "
                              f"{self.batches_per_step} one optimizer step needs (accumulate {accumulate} × "
                              f"{strategy.world_size} process(es)): lower accumulate or max_tokens")

    def steps_in_epoch(self, epoch: int) -> int:
        """Optimizer steps in ``epoch``: ``len(batches) // batches_per_step``. The last incomplete group of
        fewer than ``batches_per_step`` batches is left out of that epoch (at most ``accumulate × processes
        − 1`` batches; the order is reshuffled every epoch, so different examples are left out each time)."""
        return len(self.source.batches(epoch)) // self.batches_per_step

    def epoch_end(self, epoch: int) -> int:
        """The batch position in ``epoch``'s order at which its last step ends."""
        return self.steps_in_epoch(epoch) * self.batches_per_step

    def steps(self, epoch: int, start: int):
        """Yield, for every step of ``epoch`` from batch position ``start`` on, ``(batches, step_tokens)``: this
        process's collated batches of the step and the non-pad target tokens of the whole step."""
        order = self.source.batches(epoch)
        per_step = self.batches_per_step
        groups = [order[i:i + per_step] for i in range(start, self.epoch_end(epoch), per_step)]
        mine = [self.strategy.share(group) for group in groups]
        loader = torch.utils.data.DataLoader(
            _Collated(self.source, [idx for share in mine for idx in share]), batch_size=None, shuffle=False,
            num_workers=self.num_workers, pin_memory=self.pin_memory,
            prefetch_factor=2 if self.num_workers else None, persistent_workers=False,
            generator=torch.Generator().manual_seed(0))  # its own generator: the global RNG (dropout) stays untouched
        batches = iter(loader)
        for group, share in zip(groups, mine):
            step_batches = [next(batches) for _ in share]
            yield step_batches, self.strategy.step_tokens(step_batches, group, self.source)


class _Collated(torch.utils.data.Dataset):
    """Item ``i`` is the padded batch of the examples ``index_lists[i]`` (for a DataLoader's workers; the order
    is fixed by the list, so resuming stays exact)."""

    def __init__(self, source, index_lists):
        self.source, self.index_lists = source, index_lists

    def __len__(self):
        return len(self.index_lists)

    def __getitem__(self, i):
        return self.source.collate_indices(self.index_lists[i])
