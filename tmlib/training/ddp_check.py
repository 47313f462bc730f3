"""Data parallelism shown on the CPU in seconds: two processes on one machine (gloo over 127.0.0.1) train the
``tiny`` model on the reversing task, and three checks compare them with one process.

* :func:`check_same_update`: the two processes' gradients and parameters against one process that trains on the
  combined batch of each step (float64);
* :func:`check_exact_resume`: a two-process run killed in the middle of a step and resumed in new processes against a
  run that never stopped (bit for bit);
* :func:`measure_speedup`: target tokens per second of one and of two single-threaded processes, in alternating
  launches.

The runs share :func:`reversing_batches`, :func:`tiny_model` and :func:`tiny_trainer`; :func:`same_update_rank` is
what each process of the first check runs, :func:`one_process` the single process it is compared with.

The book's page on scaling out runs them (``book/distributed.ipynb``); ``tests/test_distributed.py`` checks the
same claims with its own reference. Each launch starts fresh processes (``torch.multiprocessing.spawn``, a free
port, a time limit after which they are killed), so the functions work from a notebook as from a script.
"""
from __future__ import annotations

import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from tmlib.data.batching import BatchIterator
from tmlib.data.toy import reverse_pairs
from tmlib.model.transformer import make_model
import tmlib.training.distributed as D
from tmlib.training.config import TrainConfig
from tmlib.training.recipe import make_optimizer, make_scheduler, translation_loss
from tmlib.training.trainer import Trainer

__all__ = ["launch_processes", "ring_all_reduce", "reversing_batches", "tiny_model", "tiny_trainer", "same_update_rank",
           "one_process", "max_abs_difference", "check_same_update", "check_exact_resume", "measure_speedup"]

VOCAB = 20  # ids 0-3 special, 4-19 the reversing task's symbols


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world_size, port, fn, args):
    sys.stdout = open(os.devnull, "w")  # the trainer's epoch lines: the caller reports what it needs  # noqa: SIM115
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    with D.process_group("cpu", D.DistEnv(rank=rank, world_size=world_size, local_rank=rank), timeout_s=120):
        fn(rank, *args)


def launch_processes(fn, *args, world_size: int = 2, time_limit_s: float = 120.0, expect_exit: bool = False) -> None:
    """Run ``fn(rank, *args)`` in ``world_size`` new CPU processes joined by a gloo group on 127.0.0.1.

    ``fn`` must be importable (a module-level function). Past ``time_limit_s`` the processes are killed and a
    ``TimeoutError`` is raised; a process that fails raises what ``torch.multiprocessing`` raises, unless
    ``expect_exit`` (the processes are meant to die with ``os._exit``).
    """
    import logging

    import torch.multiprocessing as mp

    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)  # not "Terminating process ..."
    ctx = mp.spawn(_entry, args=(world_size, _free_port(), fn, args), nprocs=world_size, join=False)
    deadline = time.monotonic() + time_limit_s
    try:
        while not ctx.join(timeout=0.5):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {world_size} processes did not finish within {time_limit_s} s")
    except mp.ProcessExitedException:
        if not expect_exit:
            raise
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
            p.join()


# ------------------------------------------------------------------ the ring all-reduce, simulated


def ring_all_reduce(vectors) -> list:
    """The ring all-reduce of ``n`` equal-length vectors, simulated step by step in NumPy.

    Each vector is cut into ``n`` chunks. In ``n - 1`` *reduce-scatter* steps, process ``r`` sends chunk
    ``(r - t) mod n`` to process ``r + 1``, which adds it to its own; afterwards process ``r`` holds the full sum
    of chunk ``(r + 1) mod n``. In ``n - 1`` *all-gather* steps the summed chunks travel once more around the ring,
    replacing the receivers' partial ones. Every process sends ``2 (n - 1)`` chunks: ``2 (n - 1) / n`` of the vector.

    Args:
        vectors: ``(n, S)`` array-like, one row per process, ``S`` divisible by ``n``.

    Returns:
        list of ``(phase, buffers)``: the starting buffers (phase ``"start"``), then the buffers after every step
        (``"reduce-scatter"``, then ``"all-gather"``), each an ``(n, S)`` float64 array; the last one holds the
        column sums on every row.

    Raises:
        ValueError: ``vectors`` is not 2-D, has fewer than 2 rows, or its length is not divisible by ``n``.
    """
    import numpy as np

    buf = np.array(vectors, dtype=np.float64)  # (n, S): one row per process
    if buf.ndim != 2 or buf.shape[0] < 2 or buf.shape[1] % buf.shape[0]:
        raise ValueError(f"vectors must be (n, S) with n >= 2 processes and S divisible by n, got {buf.shape}")
    n, c = buf.shape[0], buf.shape[1] // buf.shape[0]
    chunk = lambda k: slice(k * c, (k + 1) * c)  # noqa: E731 - the k-th chunk of a buffer
    states = [("start", buf.copy())]
    for phase, offset in (("reduce-scatter", 0), ("all-gather", 1)):
        for t in range(n - 1):
            sent = [(r, (r - t + offset) % n, buf[r, chunk((r - t + offset) % n)].copy()) for r in range(n)]
            for r, k, data in sent:  # all processes send at once: rank r to rank r + 1
                dst = (r + 1) % n
                buf[dst, chunk(k)] = buf[dst, chunk(k)] + data if phase == "reduce-scatter" else data
            states.append((phase, buf.copy()))
    return states


# ------------------------------------------------------------------ the same update as one process


def reversing_batches(n: int = 120, max_tokens: int = 96) -> tuple[BatchIterator, BatchIterator]:
    """The batches of this module's runs: ``n`` training pairs and 30 validation pairs of the reversing task.

    The training batches are bucketed by length, at most ``max_tokens`` padded tokens each, and shuffled with seed
    0, so every process computes the same order of batches in every epoch.

    Returns:
        ``(train, val)``: two :class:`~tmlib.data.batching.BatchIterator`.
    """
    return (BatchIterator(reverse_pairs(n), max_tokens=max_tokens, seed=0),
            BatchIterator(reverse_pairs(30, seed=1), max_tokens=max_tokens, shuffle=False))


def tiny_model(float64: bool = False, dropout: float = 0.1) -> torch.nn.Module:
    """The ``tiny`` Transformer (d_model 32) over the reversing task's 20 ids, the same weights in every process.

    The seed 0 is set before the weights are drawn; ``float64``: the model in double precision.
    """
    torch.manual_seed(0)  # the same initial weights in every process
    model = make_model("tiny", VOCAB, dropout=dropout)
    return model.double() if float64 else model


def tiny_trainer(path=None, *, float64: bool = False, dropout: float = 0.1, n: int = 120, max_tokens: int = 96,
                 **cfg) -> Trainer:
    """Chapter 9's :class:`Trainer` for :func:`tiny_model` on :func:`reversing_batches`, on the CPU in one thread.

    The schedule of §5.3 with 5 warm-up steps and factor 2, gradients clipped to a global norm of 1; ``cfg``
    overrides other :class:`TrainConfig` fields (``max_steps``, ``accumulate``, ...), ``path`` is the checkpoint.
    In a process group (:func:`launch_processes`) the trainer trains data-parallel by itself.
    """
    model = tiny_model(float64, dropout)
    train, val = reversing_batches(n, max_tokens)
    base = dict(warmup_steps=5, lr_factor=2.0, grad_clip=1.0, max_tokens=max_tokens, seed=0, device="cpu",
                threads=1, amp="off", progress=False, checkpoint_minutes=None, log_every=3)
    return Trainer(model, train, val, TrainConfig(model=model.config, **{**base, **cfg}), checkpoint_path=path)


def same_update_rank(rank: int, out: str, steps: int, accumulate: int) -> None:
    """What each of the two processes runs: the trainer, float64 and no dropout, and a record of every step.

    ``steps`` optimizer steps of ``accumulate`` batches per process. Saves to ``out/rank{rank}.pt`` each step's
    gradients (all-reduced and clipped), the number of batches in the step and the sentences of each batch this
    process trained on, the losses, the learning rates and the parameters after the last step.
    """
    trainer = tiny_trainer(float64=True, dropout=0.0, max_steps=steps, accumulate=accumulate)
    trainer_step, grads, shares = trainer.train_step, [], []

    def train_step(batches, step_tokens=None):  # the trainer's own step, then a copy of what it left in .grad
        loss = trainer_step(batches, step_tokens)
        grads.append([p.grad.detach().clone() for p in trainer.model.parameters()])
        shares.append((trainer.batches_per_step, [len(b.tgt_out) for b in batches]))  # sentences per batch
        return loss

    trainer.train_step = train_step  # fit() calls it once per optimizer step, with this process's batches
    trainer.fit()
    torch.save({"grads": grads, "shares": shares, "loss": list(trainer.history["loss"]),
                "lr": list(trainer.history["lr"]),
                "params": [p.detach().clone() for p in trainer.model.parameters()]}, Path(out) / f"rank{rank}.pt")


def one_process(steps: int, batches_per_step: int, loss_scale: float = 1.0):
    """One process, written without :class:`Trainer`, on the same batches: each step trains on them padded into one.

    Each step pads the next ``batches_per_step`` batches of the epoch's order into one batch and takes the mean
    label-smoothed loss over its target tokens; its gradient is multiplied by ``loss_scale`` (1/2 gives what two
    processes would all-reduce without the trainer's factor ``world_size``), clipped to norm 1, and Adam steps.

    Returns:
        ``(grads, losses, params, norms)``: per step the clipped gradients (a list of tensors, one per parameter),
        the loss and the gradient norm before clipping; ``params``: the parameters after the last step.
    """
    model = tiny_model(float64=True, dropout=0.0)
    train, _ = reversing_batches()
    opt = make_optimizer(model)
    sched = make_scheduler(opt, model.d_model, 5, 2.0)
    epoch, pos, grads, losses, norms = 0, 0, [], [], []
    for _ in range(steps):
        order = train.batches(epoch)
        if pos + batches_per_step > len(order):  # an incomplete group at the end of an epoch is left out
            epoch, pos = epoch + 1, 0
            order = train.batches(epoch)
        batch = train.collate_indices([i for b in order[pos:pos + batches_per_step] for i in b])
        pos += batches_per_step
        loss = translation_loss(model(batch.src, batch.tgt_in), batch.tgt_out, train.pad_id, 0.1)
        opt.zero_grad()
        (loss * loss_scale).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))  # the norm before clipping
        opt.step()
        sched.step()
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        losses.append(loss.item())
    return grads, losses, [p.detach().clone() for p in model.parameters()], norms


def max_abs_difference(a, b) -> float:
    """The largest absolute difference between two lists of tensors of the same shapes, component by component."""
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def check_same_update(steps: int = 6, accumulate: int = 2) -> dict:
    """Two processes × ``accumulate`` batches per step against one process on the combined batches, float64.

    Returns:
        dict: ``grad_diff`` (per step, the largest difference of a gradient component), ``grad_rel`` (per step,
        ``grad_diff`` divided by the largest component of that step's gradient), ``grad_norm`` (per step, the one
        process's gradient norm before clipping), ``param_diff`` (after the last step), ``ranks_equal`` (the
        two processes hold identical parameters), ``loss_two``/``loss_one`` and ``lr`` (per step) and ``shares``
        (per step: batches in the group, then the sentences of each batch rank 0 and rank 1 trained on).
    """
    with tempfile.TemporaryDirectory() as tmp:
        launch_processes(same_update_rank, tmp, steps, accumulate)  # two processes joined by gloo
        r0, r1 = (torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    grads, losses, params, norms = one_process(steps, 2 * accumulate)  # the same batches, in one process
    diff = [max_abs_difference(a, b) for a, b in zip(r0["grads"], grads)]
    return {"grad_diff": diff,
            "grad_rel": [d / max(float(g.abs().max()) for g in step) for d, step in zip(diff, grads)],
            "grad_norm": norms,
            "param_diff": max_abs_difference(r0["params"], params),
            "ranks_equal": all(torch.equal(a, b) for a, b in zip(r0["params"], r1["params"])),
            "loss_two": r0["loss"], "loss_one": losses, "lr": r0["lr"],
            "shares": [(n, a, b) for (n, a), (_, b) in zip(r0["shares"], r1["shares"])]}


# ------------------------------------------------------------------ resuming exactly


def _result(trainer) -> dict:
    return {"loss": list(trainer.history["loss"]), "lr": list(trainer.history["lr"]), "step": trainer.step,
            "params": [p.detach().clone() for p in trainer.model.parameters()]}


def _full_and_killed_worker(rank, root, steps, checkpoint_every, die_in_step):
    root = Path(root)
    full = tiny_trainer(root / "full" / "checkpoint.pt", max_steps=steps)
    full.fit()
    torch.save(_result(full), root / f"full{rank}.pt")
    cut = tiny_trainer(root / "cut" / "checkpoint.pt", max_steps=steps, checkpoint_every=checkpoint_every)
    real, calls = cut.train_step, []

    def train_step(*args):  # both processes die in the middle of this step: only the last checkpoint survives
        calls.append(1)
        if len(calls) == die_in_step:
            sys.stdout.flush()
            os._exit(3)
        return real(*args)

    cut.train_step = train_step
    cut.fit()


def _resume_worker(rank, root, steps):
    root = Path(root)
    again = tiny_trainer(root / "cut" / "checkpoint.pt", max_steps=steps)
    torch.manual_seed(100 + rank)  # a new process: other random states and other weights until resume()
    for p in again.model.parameters():
        torch.nn.init.normal_(p)
    again.resume()
    resumed_at = again.step
    again.fit()
    torch.save({**_result(again), "resumed_at": resumed_at}, root / f"resumed{rank}.pt")


def check_exact_resume(steps: int = 16, checkpoint_every: int = 5, die_in_step: int = 8) -> dict:
    """A two-process run (dropout 0.1, so each process's random state matters) killed in step ``die_in_step``
    after a checkpoint every ``checkpoint_every`` steps, resumed in new processes, against one that never stopped.

    Returns:
        dict: ``resumed_at`` (the checkpoint's step), ``loss_full``/``loss_resumed`` (rank 0's losses),
        ``lr`` (the learning rate of each step of the run that never stopped), ``identical`` (per rank: losses and
        every parameter bit for bit equal) and ``steps``.
    """
    with tempfile.TemporaryDirectory() as tmp:
        launch_processes(_full_and_killed_worker, tmp, steps, checkpoint_every, die_in_step, expect_exit=True)
        launch_processes(_resume_worker, tmp, steps)
        full = [torch.load(Path(tmp) / f"full{r}.pt", weights_only=False) for r in (0, 1)]
        resumed = [torch.load(Path(tmp) / f"resumed{r}.pt", weights_only=False) for r in (0, 1)]
    identical = [f["loss"] == r["loss"] and all(torch.equal(a, b) for a, b in zip(f["params"], r["params"]))
                 for f, r in zip(full, resumed)]
    return {"resumed_at": resumed[0]["resumed_at"], "loss_full": full[0]["loss"], "loss_resumed": resumed[0]["loss"],
            "lr": full[0]["lr"], "identical": identical, "steps": resumed[0]["step"]}


# ------------------------------------------------------------------ speed


def _timing_worker(rank, out, steps, warmup, max_tokens):
    trainer = tiny_trainer(dropout=0.0, n=4000, max_tokens=max_tokens, max_steps=warmup + steps, val_every_epoch=False)
    real, marks = trainer.train_step, []

    def train_step(batches, step_tokens=None):
        loss = real(batches, step_tokens)
        loss.item()  # wait for the step (a no-op on the CPU, kept for clarity)
        marks.append((time.perf_counter(), step_tokens))
        return loss

    trainer.train_step = train_step
    trainer.fit()
    if rank == 0:
        (t0, _), timed = marks[warmup - 1], marks[warmup:]
        tokens = sum(t for _, t in timed)
        Path(out).write_text(f"{tokens / (timed[-1][0] - t0)}")


def measure_speedup(steps: int = 40, warmup: int = 5, max_tokens: int = 1024, rounds: int = 2) -> dict:
    """Target tokens per second of one process and of two processes (one thread each, ``max_tokens`` padded
    tokens per process and step), timed over ``steps`` steps after ``warmup``, in ``rounds`` alternating rounds
    (1, 2, 2, 1, ...). Returns ``one``/``two`` (tokens/s per launch), ``speedup`` (ratio of the medians) and
    ``load`` (the 1-minute load average before and after)."""
    one, two, load = [], [], [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rate"
        for n in [n for r in range(rounds) for n in ((1, 2) if r % 2 == 0 else (2, 1))]:
            launch_processes(_timing_worker, str(out), steps, warmup, max_tokens, world_size=n)
            (one if n == 1 else two).append(float(out.read_text()))
    load.append(os.getloadavg()[0])
    return {"one": one, "two": two, "speedup": statistics.median(two) / statistics.median(one), "load": load}
