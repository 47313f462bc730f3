"""How many processes train, as one object: :class:`SingleProcess` or :class:`DataParallel`.

The training loop is written once; what differs between one process and several data-parallel ones is in these
two classes, which have the same small interface: pick the device, wrap the model, take this process's share of
each step's batches, sum the numbers the loop needs over the processes, agree on decisions, and say which process
writes. In a single process every one of these is the identity.

Data parallelism (Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB
2020): each of N processes holds a copy of the model, trains on its own share of the step's batches, and
``DistributedDataParallel`` averages the gradients over the processes during the backward pass, so that every
copy takes the same optimizer step. The process group is started by :func:`tmlib.training.distributed.process_group`
(under ``torchrun``); :func:`current_strategy` picks the strategy that matches it.
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch

from tmlib.training import distributed
from tmlib.utils import get_device

__all__ = ["SingleProcess", "DataParallel", "current_strategy"]


class SingleProcess:
    """Training in one process: the model as it is, every batch of a step trained here, no communication.

    Attributes:
        rank: 0. world_size: 1. is_main: True (this process logs and writes checkpoints).
    """

    rank = 0
    world_size = 1
    is_main = True

    def device(self, name: str | None) -> torch.device:
        """The device called ``name`` (``"auto"``: :func:`tmlib.utils.get_device`'s choice).

        Raises:
            ValueError: an unknown or absent device.
        """
        return get_device(None if name in (None, "auto") else name)

    def prepare(self, train_batches, seed: int) -> None:
        """Nothing to prepare: the generators seeded by the caller draw the dropout masks."""

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """The module the training step calls: ``model`` itself."""
        return model

    def sync_gradients(self, now: bool):
        """Context of a backward pass; gradients are local, so there is nothing to synchronise."""
        return contextlib.nullcontext()

    def backward_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss this process back-propagates: ``loss`` itself."""
        return loss

    def share(self, group: list) -> list:
        """This process's batches of a step (index lists): all of them."""
        return group

    def share_evaluation(self, batches: list) -> list:
        """This process's validation batches (index lists): all of them."""
        return batches

    def step_tokens(self, batches: list, group: list, source) -> int:
        """The non-pad target tokens of a step: those of its batches (all here)."""
        return sum(b.n_tokens for b in batches)

    def total(self, count: int) -> int:
        """``count`` summed over the processes: ``count``."""
        return count

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the processes: ``tensor``."""
        return tensor

    def agree(self, main_flags: tuple, any_flags: tuple) -> tuple[bool, ...]:
        """Decisions taken together: the flags as given."""
        return tuple(bool(f) for f in main_flags + any_flags)

    def gather(self, obj) -> list:
        """Every process's ``obj``, on the main process: ``[obj]``."""
        return [obj]

    def broadcast(self, obj):
        """The main process's ``obj`` on every process: ``obj``."""
        return obj


class DataParallel:
    """Training in the N processes of an initialised process group (``torchrun``), each on a share of every step.

    Every process computes the same epoch order of batches; a step takes ``accumulate × N`` consecutive batches,
    and process ``r`` trains on the ``accumulate`` batches ``r·accumulate … (r+1)·accumulate − 1`` of them. The
    model is wrapped in ``DistributedDataParallel``, which averages the gradients over the processes during the
    backward pass of the last accumulated batch (``no_sync`` on the others); each process multiplies its loss by N
    first, so that the average is the gradient of the step's loss. Numbers the loop needs (the step's loss, the
    validation sums) are summed over the processes; decisions (stop, save, Ctrl-C) are taken together; the main
    process (rank 0) writes the checkpoints, which hold every process's random-number-generator states.

    Raises:
        RuntimeError: (on construction) no process group of several processes is initialised.
    """

    is_main: bool

    def __init__(self):
        if not distributed.is_distributed():
            raise RuntimeError("DataParallel needs an initialised process group of several processes "
                               "(tmlib.training.distributed.process_group, under torchrun)")
        self.rank, self.world_size = distributed.rank(), distributed.world_size()
        self.is_main = self.rank == 0
        self.ddp: torch.nn.Module | None = None

    def device(self, name: str | None) -> torch.device:
        """This process's device: ``cuda:LOCAL_RANK`` (the current CUDA device, which
        :func:`~tmlib.training.distributed.process_group` set) on GPUs, else the CPU.

        Raises:
            ValueError: a numbered GPU (``cuda:1``), or what :func:`tmlib.utils.get_device` raises.
        """
        local_rank = torch.cuda.current_device() if torch.cuda.is_available() else 0
        return distributed.local_device(name, distributed.DistEnv(self.rank, self.world_size, local_rank))

    def prepare(self, train_batches, seed: int) -> None:
        """Check that every process holds the same training batches, and reseed this process's torch generator
        with ``(seed, rank)``, so that the processes draw different dropout masks.

        Raises:
            RuntimeError: the processes hold different batches.
        """
        distributed.assert_same(train_batches.fingerprint(), "training batches")
        torch.manual_seed(int(np.random.SeedSequence([seed, self.rank]).generate_state(1)[0]))

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """``model`` in ``DistributedDataParallel`` (kept as ``ddp``), which copies rank 0's weights to all."""
        self.ddp = distributed.wrap_model(model, device)
        return self.ddp

    def sync_gradients(self, now: bool):
        """Context of a backward pass: the gradients are all-reduced only when ``now`` (the last accumulated batch
        of a step), so that they cross the network once per step."""
        return contextlib.nullcontext() if now else self.ddp.no_sync()

    def backward_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """``N × loss``: DDP divides the summed gradients by N, which this undoes."""
        return loss * self.world_size

    def share(self, group: list) -> list:
        """This process's batches of a step (index lists): its contiguous ``len(group) / N`` of them."""
        n = len(group) // self.world_size
        return group[self.rank * n:(self.rank + 1) * n]

    def share_evaluation(self, batches: list) -> list:
        """This process's validation batches (index lists): every N-th one, from its rank on."""
        return batches[self.rank::self.world_size]

    def step_tokens(self, batches: list, group: list, source) -> int:
        """The non-pad target tokens of a step over all processes, from the batch plan that every process knows
        (``source.n_tokens_of``), without communicating."""
        return sum(source.n_tokens_of(idx) for idx in group)

    def total(self, count: int) -> int:
        """``count`` summed over the processes (on the control group)."""
        return int(distributed.all_reduce_sum(torch.tensor([count]), control=True)[0])

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` (on this process's device) summed over the processes, in place."""
        return distributed.all_reduce_sum(tensor)

    def agree(self, main_flags: tuple, any_flags: tuple) -> tuple[bool, ...]:
        """Decisions taken together: ``main_flags`` as rank 0 sees them (e.g. its clock's), ``any_flags`` true when
        true on any process (e.g. Ctrl-C), the same on every process (:func:`tmlib.training.distributed.agree`)."""
        return distributed.agree(main_flags, any_flags)

    def gather(self, obj) -> list | None:
        """Every process's ``obj`` in rank order on the main process, ``None`` on the others."""
        return distributed.gather_to_rank0(obj)

    def broadcast(self, obj):
        """The main process's ``obj`` on every process."""
        return distributed.broadcast_from_rank0(obj)


def current_strategy() -> SingleProcess | DataParallel:
    """:class:`DataParallel` inside an initialised process group of several processes, else :class:`SingleProcess`."""
    return DataParallel() if distributed.is_distributed() else SingleProcess()
