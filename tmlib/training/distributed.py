"""Data-parallel plumbing: the process group of a ``torchrun`` launch, the device of each process, and the few
collective operations the trainer needs besides the gradient all-reduce of ``DistributedDataParallel``.

``torchrun --nproc_per_node=N -m tmlib.train ...`` starts N copies of the training program and tells each one
who it is through environment variables: ``RANK`` (0 … WORLD_SIZE − 1, unique over all nodes), ``WORLD_SIZE``
(processes in all), ``LOCAL_RANK`` (0 … N − 1 on this node), plus ``MASTER_ADDR``/``MASTER_PORT`` where the
rendezvous store listens. :func:`process_group` reads them, picks the device (``cuda:LOCAL_RANK`` on GPUs,
the CPU otherwise) and the backend (NCCL for GPUs, gloo for CPUs), initialises the process group and destroys
it on the way out, errors included. Without ``torchrun`` (or with one process) it does nothing, and every
helper here behaves as in a single process: rank 0 of a world of size 1.

Two channels, as in most data-parallel trainers:

* the *data plane*: gradients, all-reduced by :class:`torch.nn.parallel.DistributedDataParallel` on the
  default group (NCCL on GPUs), and the loss and validation sums (:func:`all_reduce_sum`);
* the *control plane*: small decisions and Python objects (stop or save now, the RNG states gathered into a
  checkpoint, the tokenizer trained on rank 0) on a gloo group over CPU tensors (:func:`control_group`), so
  that a decision made by the host never waits for the GPU's queue of work.

Reference: the PyTorch documentation of ``torch.distributed``, ``torchrun`` and ``DistributedDataParallel``
(Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist

__all__ = ["DistEnv", "WorldSizeMismatch", "check_world_size", "torchrun_env", "local_device", "process_device",
           "backend_for", "process_group", "is_distributed", "rank", "world_size", "control_group", "all_reduce_sum",
           "agree", "gather_to_rank0", "broadcast_from_rank0", "assert_same", "wrap_model"]


class WorldSizeMismatch(ValueError):
    """A checkpoint written by a run on one number of processes is resumed on another (the message says which
    command continues it)."""


def check_world_size(saved: int, current: int) -> None:
    """Raise :class:`WorldSizeMismatch` unless a checkpoint written on ``saved`` processes is resumed on as
    many (``current``).

    A run cannot change its number of processes: an optimizer step takes ``accumulate × processes`` batches
    (so the position in the epoch and the batch size would change meaning), and every process has its own
    random state (its dropout masks), stored in the checkpoint.
    """
    saved, current = int(saved), int(current)
    if saved == current:
        return
    how = ("plain python (one process)" if saved == 1 else
           f"torchrun with {saved} processes in all (e.g. torchrun --nproc_per_node={saved})")
    raise WorldSizeMismatch(
        f"the checkpoint was written by a run on {saved} process(es), and this run has {current}: continue it "
        f"with {how}; a step takes accumulate × processes batches and each process has its own random state, "
        "so a run keeps its number of processes")


@dataclass(frozen=True)
class DistEnv:
    """Who this process is in a data-parallel launch.

    Attributes:
        rank: global rank, 0 … ``world_size`` − 1 (rank 0 logs and writes the checkpoints).
        world_size: number of processes over all nodes.
        local_rank: rank on this node, 0 … processes per node − 1 (picks the GPU ``cuda:local_rank``).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    def __post_init__(self):
        for name in ("rank", "world_size", "local_rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if self.world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}), got {self.rank}")
        if self.local_rank < 0:
            raise ValueError(f"local_rank must be >= 0, got {self.local_rank}")


def torchrun_env(environ=None) -> DistEnv | None:
    """The :class:`DistEnv` that ``torchrun`` describes in the environment, or ``None`` outside ``torchrun``.

    Args:
        environ: a mapping like ``os.environ`` (default: ``os.environ``).

    Returns:
        ``None`` when ``WORLD_SIZE`` is not set (a plain ``python -m tmlib.train``), else the process's ranks
        (a world of size 1 is returned too; :func:`process_group` then starts no group).

    Raises:
        ValueError: ``WORLD_SIZE`` is set but ``RANK``/``LOCAL_RANK`` are missing or not integers, or they are
            out of range.
    """
    environ = os.environ if environ is None else environ
    if "WORLD_SIZE" not in environ:
        return None
    values = {}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        text = environ.get(key)
        try:
            values[key] = int(text)
        except (TypeError, ValueError):
            raise ValueError(f"WORLD_SIZE is set, so this looks like a torchrun launch, but {key}={text!r} is not "
                             "an integer: start the program with torchrun, which sets RANK, WORLD_SIZE and "
                             "LOCAL_RANK") from None
    return DistEnv(rank=values["RANK"], world_size=values["WORLD_SIZE"], local_rank=values["LOCAL_RANK"])


def local_device(name: str | None, env: DistEnv | None) -> torch.device:
    """The device of this process: ``cuda:LOCAL_RANK`` for a CUDA run with several processes, otherwise
    :func:`tmlib.utils.get_device` of ``name``.

    Args:
        name: ``"auto"``/``None`` (CUDA if available), ``"cpu"`` or ``"cuda"``.
        env: this process's ranks (``None``: a single process).

    Raises:
        ValueError: a numbered GPU (``"cuda:1"``) with several processes (each process takes the GPU of its
            local rank), or what :func:`tmlib.utils.get_device` raises (CUDA asked for but absent).
    """
    from tmlib.utils import get_device

    device = get_device(None if name in (None, "auto") else name)
    if env is None or env.world_size == 1 or device.type != "cuda":
        return device
    if name not in (None, "auto", "cuda"):
        raise ValueError(f"device {name!r} names one GPU, but {env.world_size} processes are running: use --device "
                         "cuda (or auto), and each process takes cuda:LOCAL_RANK")
    if env.local_rank >= torch.cuda.device_count():
        raise ValueError(f"LOCAL_RANK={env.local_rank} but this node has {torch.cuda.device_count()} GPU(s): start "
                         "at most one process per GPU (torchrun --nproc_per_node)")
    return torch.device("cuda", env.local_rank)


def process_device(name: str | None) -> torch.device:
    """This process's training device: :func:`local_device` of ``name`` for its ranks in the current process group
    (on GPUs the current CUDA device, which :func:`process_group` set), or of a single process."""
    if not is_distributed():
        return local_device(name, None)
    local_rank = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return local_device(name, DistEnv(rank(), world_size(), local_rank))


def backend_for(device: torch.device) -> str:
    """``"nccl"`` for CUDA devices (GPU-to-GPU collectives), ``"gloo"`` for CPUs."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


_CONTROL: dict = {}  # the gloo group for control messages, when the default group is NCCL


@contextlib.contextmanager
def process_group(device: str | None = "auto", env: DistEnv | None = None, timeout_s: float | None = None
                  ) -> Iterator[DistEnv]:
    """Initialise the process group of a ``torchrun`` launch for the duration of a ``with`` block.

    With several processes: selects the GPU ``cuda:LOCAL_RANK`` (``torch.cuda.set_device``) and uses NCCL on
    GPUs, gloo on CPUs; the rendezvous address comes from ``MASTER_ADDR``/``MASTER_PORT`` (set by ``torchrun``,
    or by the caller). On leaving the block, normally or by an exception, the group is destroyed. With one
    process (or outside ``torchrun``) it does nothing.

    Args:
        device: the configuration's device (``"auto"``, ``"cpu"``, ``"cuda"``).
        env: the ranks (default: :func:`torchrun_env`).
        timeout_s: how long a collective may wait for the other processes (default: torch's, 10 minutes
            for NCCL, 30 for gloo).

    Yields:
        The :class:`DistEnv` of this process (rank 0 of 1 without ``torchrun``).

    Raises:
        ValueError: a malformed ``torchrun`` environment or an impossible device (see :func:`local_device`).
        RuntimeError: a process group already exists.
    """
    import datetime

    env = torchrun_env() if env is None else env
    if env is None or env.world_size == 1:
        yield env or DistEnv()
        return
    if dist.is_initialized():
        raise RuntimeError("a torch.distributed process group is already initialised")
    dev = local_device(device, env)
    kwargs = {}
    if timeout_s is not None:
        kwargs["timeout"] = datetime.timedelta(seconds=timeout_s)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)  # NCCL and the object collectives use the current device
        kwargs["device_id"] = dev
    dist.init_process_group(backend_for(dev), rank=env.rank, world_size=env.world_size, **kwargs)
    ok = False
    try:
        yield env
        ok = True
    finally:
        _quiesce(ok)
        _CONTROL.clear()
        dist.destroy_process_group()


def _quiesce(all_done: bool) -> None:
    """Let the process groups' worker threads go idle before the groups are destroyed.

    A gloo worker thread frees each finished collective itself, and freeing tensors that Python knows needs the
    interpreter lock. The group's destructor joins those threads while holding that lock (when the last
    reference, e.g. DDP's reducer, is dropped from Python), so a thread still freeing the last collective
    deadlocks the exit (observed with torch 2.13 in about one run in five). A barrier (when every process got
    here normally) waits for every collective to finish, releasing the lock meanwhile, and a short sleep lets
    the threads free the last ones.
    """
    import time

    if all_done:
        try:
            if "group" in _CONTROL:
                dist.barrier(group=_CONTROL["group"])
            dist.barrier()
        except RuntimeError:  # another process failed: nothing left to wait for
            pass
    time.sleep(0.05)


def is_distributed() -> bool:
    """True inside an initialised process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    """This process's global rank (0 in a single process)."""
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    """Number of processes (1 in a single process)."""
    return dist.get_world_size() if is_distributed() else 1


def control_group():
    """The group for control messages over CPU tensors: the default group when it is gloo, otherwise a gloo
    group over the same processes, created on first use (every process must reach the first call)."""
    if dist.get_backend() == "gloo":
        return None  # the default group
    if "group" not in _CONTROL:
        _CONTROL["group"] = dist.new_group(backend="gloo")
    return _CONTROL["group"]


def all_reduce_sum(tensor: torch.Tensor, control: bool = False) -> torch.Tensor:
    """Sum ``tensor`` over all processes, in place; returns it. A no-op in a single process.

    Args:
        tensor: on this process's device (the data plane: with NCCL the sum is queued on the GPU without
            waiting for the host), or a CPU tensor with ``control=True``.
        control: use the control group (gloo, CPU tensors).
    """
    if is_distributed():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=control_group() if control else None)
    return tensor


def agree(rank0: tuple[bool, ...] = (), any_rank: tuple[bool, ...] = ()) -> tuple[bool, ...]:
    """Decisions that every process must take together: the flags in ``rank0`` are rank 0's (e.g. "the
    wall-clock budget is spent", measured on its clock), those in ``any_rank`` are true if they are true on
    any process (e.g. "Ctrl-C was pressed"). One all-reduce (maximum) of a small CPU tensor on the control
    group; without a process group the flags are returned as given.

    Returns:
        ``rank0 + any_rank`` as agreed booleans, the same on every process.
    """
    flags = tuple(bool(f) for f in rank0) + tuple(bool(f) for f in any_rank)
    if not is_distributed():
        return flags
    mine = [f if rank() == 0 else False for f in flags[:len(rank0)]] + list(flags[len(rank0):])
    t = torch.tensor(mine, dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=control_group())
    return tuple(bool(v) for v in t.tolist())


def gather_to_rank0(obj) -> list | None:
    """The picklable ``obj`` of every process, in rank order, on rank 0 (``None`` on the others); ``[obj]`` in
    a single process. Used to put every rank's RNG states into rank 0's checkpoint."""
    if not is_distributed():
        return [obj]
    out = [None] * world_size() if rank() == 0 else None
    dist.gather_object(obj, out, dst=0, group=control_group())
    return out


def broadcast_from_rank0(obj):
    """Rank 0's picklable ``obj`` on every process (the argument of the other ranks is ignored); ``obj`` in a
    single process."""
    if not is_distributed():
        return obj
    box = [obj if rank() == 0 else None]
    dist.broadcast_object_list(box, src=0, group=control_group())
    return box[0]


def assert_same(value, what: str) -> None:
    """Raise unless every process holds the same picklable ``value`` (compared by a SHA-256 of its pickle).

    Raises:
        RuntimeError: the processes disagree; the message names ``what`` and the ranks that differ from rank 0.
    """
    if not is_distributed():
        return
    digest = hashlib.sha256(pickle.dumps(value)).hexdigest()
    digests = [None] * world_size()
    dist.all_gather_object(digests, digest, group=control_group())
    differ = [r for r, d in enumerate(digests) if d != digests[0]]
    if differ:
        raise RuntimeError(f"the processes hold different {what}: rank(s) {differ} differ from rank 0 (check that "
                           "every node reads the same data and runs the same code)")


def wrap_model(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model`` wrapped in :class:`~torch.nn.parallel.DistributedDataParallel` (a single process: unchanged).

    DDP copies rank 0's parameters to every process when it is built, then, during each backward pass, sums
    the gradients of all processes bucket by bucket (overlapping the all-reduce with the rest of the backward)
    and divides them by the number of processes. No buffer is re-broadcast before each forward
    (``forward_sync_buffers=False``, formerly ``broadcast_buffers=False``): the Transformer's only buffer is the
    constant sinusoid table.

    Args:
        model: the module, already on ``device``.
        device: this process's device (``cuda:LOCAL_RANK`` or the CPU).
    """
    if not is_distributed():
        return model
    from torch.nn.parallel import DistributedDataParallel

    import inspect

    device = torch.device(device)
    ids = [device] if device.type == "cuda" else None
    # no buffer sync before each forward (the option's name changed in torch 2.13)
    no_sync = ({"forward_sync_buffers": False} if "forward_sync_buffers" in inspect.signature(
        DistributedDataParallel).parameters else {"broadcast_buffers": False})
    return DistributedDataParallel(model, device_ids=ids, output_device=device if ids else None, **no_sync)
