"""Data-parallel training (tmlib.training.distributed, the trainer's data-parallel branch, and tmlib.train).

Two CPU processes talk over gloo on 127.0.0.1 (``torch.multiprocessing.spawn``, a free port, a time limit, the
processes killed if they overrun). The claims checked:

* k steps on two ranks give the parameters of one process that trains on the combined batch of each step
  (float64: gradients to 1e-12, parameters to 1e-9 after Adam, see ``test_two_ranks_equal_one_process_...``);
* the two ranks train on disjoint batches that together make up each step's group;
* a two-rank run killed after a checkpoint and resumed in new processes, and one stopped by Ctrl-C on one
  rank and resumed, continue exactly: bit-identical losses and parameters against an uninterrupted run;
* a checkpoint resumed on another number of processes gives a clear error;
* the command line under ``torchrun --nproc_per_node=2`` (with Multi30k, when available).
"""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.multiprocessing as mp  # noqa: E402

from tmlib.training import distributed as D  # noqa: E402
from tmlib.data import BatchIterator  # noqa: E402
from tmlib.model import make_model  # noqa: E402
from toy_data import toy_examples  # noqa: E402
from tmlib import ref as R  # noqa: E402
from tolerances import adam_tolerance, gradient_length, tolerance  # noqa: E402
from tmlib.training import make_optimizer, make_scheduler, translation_loss  # noqa: E402
from tmlib.training import TrainConfig, Trainer  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                reason="this torch build has no torch.distributed with gloo")

SHARED = Path(os.environ.get("TMLIB_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
TIME_LIMIT_S = 90  # per launch of two processes; a launch takes a few seconds


# ------------------------------------------------------------------ launching two processes


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world_size, port, device, fn, args):
    """What each spawned process runs: join the group on 127.0.0.1, run ``fn(rank, *args)``, leave."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    with D.process_group(device, D.DistEnv(rank=rank, world_size=world_size, local_rank=rank), timeout_s=120):
        assert D.is_distributed() and D.rank() == rank and D.world_size() == world_size
        fn(rank, *args)
    assert not torch.distributed.is_initialized()  # destroyed on the way out


def _launch(fn, *args, world_size=2, device="cpu", time_limit_s=TIME_LIMIT_S, entry=None):
    """Run ``fn(rank, *args)`` in ``world_size`` new processes; wait at most ``time_limit_s``, then kill them.
    ``entry`` (default :func:`_entry`, which joins the group) is what each process runs.
    Raises what ``torch.multiprocessing`` raises when a process fails."""
    ctx = mp.spawn(entry or _entry, args=(world_size, _free_port(), device, fn, args), nprocs=world_size, join=False)
    deadline = time.monotonic() + time_limit_s
    try:
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {world_size} processes did not finish within {time_limit_s} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
            p.join()


# ------------------------------------------------------------------ the toy task




def _batches():
    return BatchIterator(toy_examples(), max_tokens=96, seed=0), BatchIterator(toy_examples(30, seed=1),
                                                                              max_tokens=96, shuffle=False)


def _model(float64: bool, dropout: float):
    torch.manual_seed(0)
    model = make_model("tiny", 20, dropout=dropout)
    return model.double() if float64 else model


def _config(model, **cfg):
    base = dict(warmup_steps=5, lr_factor=2.0, max_tokens=96, seed=0, device="cpu", amp="off", progress=False,
                checkpoint_minutes=None, grad_clip=1.0, threads=1, log_every=3)
    return TrainConfig(model=model.config, **{**base, **cfg})


def _trainer(path, float64=False, dropout=0.1, **cfg):
    model = _model(float64, dropout)
    train, val = _batches()
    return Trainer(model, train, val, _config(model, **cfg), checkpoint_path=path)


def _result(trainer) -> dict:
    return {"loss": list(trainer.history["loss"]), "lr": list(trainer.history["lr"]),
            "val_loss": list(trainer.history["val_loss"]), "step": trainer.step, "epoch": trainer.epoch,
            "params": [p.detach().clone() for p in trainer.model.parameters()]}


# ------------------------------------------------------------------ equivalence with one process


K_STEPS, ACCUMULATE = 6, 2


def _equivalence_worker(rank, out_dir, device):
    trainer = _trainer(None, float64=True, dropout=0.0, max_steps=K_STEPS, accumulate=ACCUMULATE, device=device)
    grads, tokens, shares, losses = [], [], [], []
    assert trainer.ddp is not None and trainer.world_size == 2 and trainer.rank == rank
    real_step = trainer.train_step

    def train_step(micro, step_tokens):  # record the gradients (all-reduced by DDP) and the step's global token count
        loss = real_step(micro, step_tokens)
        losses.append(loss.item())  # float64 (the history keeps float32)
        grads.append([p.grad.detach().cpu().clone() for p in trainer.model.parameters()])
        tokens.append(step_tokens)
        shares.append([b.src.cpu() for b in micro])  # which batches this rank trained on
        return loss

    real_no_sync, no_sync_entries = trainer.ddp.no_sync, []

    def no_sync():  # count the micro-batches whose gradients are not all-reduced
        no_sync_entries.append(1)
        return real_no_sync()

    trainer.train_step, trainer.ddp.no_sync = train_step, no_sync
    trainer.fit()
    result = _result(trainer)
    result.update(grads=grads, tokens=tokens, shares=shares, step_losses=losses, no_sync=len(no_sync_entries),
                  params=[p.cpu() for p in result["params"]])
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def _one_process_on_combined_batches(k_steps, batches_per_step, device="cpu"):
    """The reference, written independently of Trainer: each step takes the next ``batches_per_step`` batches of
    the epoch's order (an incomplete group at the end of an epoch is skipped), pads all their examples into ONE
    batch, and takes the mean label-smoothed loss over its target tokens; clip, Adam, schedule."""
    model = _model(True, 0.0).to(device)
    config = _config(model)
    train, _ = _batches()
    opt = make_optimizer(model)
    sched = make_scheduler(opt, model.d_model, config.warmup_steps, config.lr_factor)
    epoch, pos, losses, grads, tokens = 0, 0, [], [], []
    for _ in range(k_steps):
        order = train.batches(epoch)
        if pos + batches_per_step > len(order):
            epoch, pos = epoch + 1, 0
            order = train.batches(epoch)
        examples = [i for b in order[pos:pos + batches_per_step] for i in b]
        pos += batches_per_step
        batch = train.collate_indices(examples).to(device)  # the combined batch
        loss = translation_loss(model(batch.src, batch.tgt_in), batch.tgt_out, train.pad_id, config.label_smoothing)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
        grads.append([p.grad.detach().cpu().clone() for p in model.parameters()])
        tokens.append(batch.n_tokens)
    return model, losses, grads, tokens, epoch


def _max_abs(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def _check_equivalence(tmp_path, device):
    _launch(_equivalence_worker, str(tmp_path), device, device=device)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    model, losses, grads, tokens, ref_epoch = _one_process_on_combined_batches(K_STEPS, 2 * ACCUMULATE, device)
    assert ref_epoch >= 1  # the k steps cross an epoch end (and its left-over batches)
    # rank r trained on batches r·accumulate … (r+1)·accumulate − 1 of each step's group (from the epoch's order)
    assert len(r0["shares"]) == len(r1["shares"]) == K_STEPS
    train, _ = _batches()
    per_step, epoch, pos = 2 * ACCUMULATE, 0, 0
    for k in range(K_STEPS):
        if pos + per_step > len(train.batches(epoch)):
            epoch, pos = epoch + 1, 0
        group = train.batches(epoch)[pos:pos + per_step]
        pos += per_step
        for r, result in enumerate((r0, r1)):
            expected = [train.collate_indices(idx).src for idx in group[r * ACCUMULATE:(r + 1) * ACCUMULATE]]
            assert len(result["shares"][k]) == ACCUMULATE
            assert all(torch.equal(a, b) for a, b in zip(result["shares"][k], expected))
    # gradients are all-reduced once per step: no_sync on all micro-batches but the last
    assert r0["no_sync"] == r1["no_sync"] == K_STEPS * (ACCUMULATE - 1)
    # both ranks hold the same parameters (DDP), and the same losses (all-reduced)
    assert all(torch.equal(a, b) for a, b in zip(r0["params"], r1["params"]))
    assert r0["step_losses"] == r1["step_losses"] and r0["val_loss"] == r1["val_loss"]
    # ... equal to one process on the combined batch of each step
    assert r0["tokens"] == tokens  # the global token count of every step, from the batch plan
    # float64; a step's loss and gradient: the forward and backward chains over a combined batch of at most
    # 4 × 96 tokens (sentences of up to 8 tokens, 10 with BOS/EOS)
    config = model.config
    n_grad = gradient_length(config, 10, 10, 4 * 96)
    loss_tol = tolerance(torch.float64, gradient_length(config, 10, 10, 4 * 96), max(losses))
    assert max(abs(a - b) for a, b in zip(r0["step_losses"], losses)) <= loss_tol
    grad_err = _max_abs(r0["grads"][0], grads[0])
    grad_tol = tolerance(torch.float64, n_grad, max(float(g.abs().max()) for g in grads[0]))
    param_err = _max_abs(r0["params"], [p.detach().cpu() for p in model.parameters()])
    lrs = [R.noam_lr(k, config.d_model, 5, 2.0) for k in range(1, K_STEPS + 1)]  # _config's schedule
    w_max = max(float(p.detach().abs().max()) for p in model.parameters())
    param_tol = adam_tolerance(lrs, grad_tol) + tolerance(torch.float64, 3 * K_STEPS, w_max)
    print(f"\n{device}: max |Δ gradient| step 1 = {grad_err:.1e} (tolerance {grad_tol:.1e}), max |Δ parameter| "
          f"after {K_STEPS} steps = {param_err:.1e} (tolerance {param_tol:.1e})")
    assert grad_err <= grad_tol
    assert param_err <= param_tol
    # the sharded, all-reduced validation loss equals one process's on (almost) the same parameters: the
    # evaluation's roundings, plus the loss's first-order change Σ g_i Δw_i, where Adam kept each
    # |g_i Δw_i| <= Σ lr · δg (see adam_tolerance), over the parameters' independent roundings: √n_params times
    train, val = _batches()
    single = Trainer(model, train, val, _config(model, device=device))
    n_params = sum(p.numel() for p in model.parameters())
    val_tol = tolerance(torch.float64, n_grad, r0["val_loss"][-1]) + sum(lrs) * grad_tol * n_params ** 0.5
    assert abs(r0["val_loss"][-1] - single.evaluate()[0]) <= val_tol


def test_two_ranks_equal_one_process_on_the_combined_batch(tmp_path):
    """K steps of 2 processes × accumulate 2 (4 batches per step) against one process that pads the 4 batches of
    each step into one batch, in float64.

    Tolerances (tests/tolerances.py): the two computations add the same float64 numbers in another order (each
    rank sums its two micro-batches, DDP sums the ranks and divides by 2, the reference sums one batch), so the
    gradients differ by rounding, within the tolerance of the forward and backward chains and the batch sum.
    Adam divides by √v̂ + ε with ε = 1e-9: for a gradient component g near 0 the update lr·g/(|g| + ε) changes
    by up to lr·|Δg|/ε (adam_tolerance), summed over the k steps. A wrong share, a wrong normalisation (e.g.
    forgetting DDP's division by the number of processes) or a skipped all-reduce gives errors of 1e-4 to 1e-2."""
    _check_equivalence(tmp_path, "cpu")


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="NCCL needs two CUDA GPUs; this machine has none (the gloo/CPU test covers the logic)")
def test_two_gpus_with_nccl_equal_one_process(tmp_path):
    _check_equivalence(tmp_path, "cuda")


def _alone(rank, world_size, port, device, fn, args):
    """One process in a group of its own: NCCL on a GPU (two processes may not share one GPU under NCCL, so one
    is the most a single-GPU machine can run), gloo on the CPU."""
    import datetime

    if device == "cuda":
        torch.cuda.set_device(0)
    torch.distributed.init_process_group(D.backend_for(torch.device(device)), init_method=f"tcp://127.0.0.1:{port}",
                                         rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    try:
        fn(rank, device, *args)
    finally:
        torch.distributed.destroy_process_group()


def _one_process_group_worker(rank, device, out_dir):
    from torch.nn.parallel import DistributedDataParallel

    t = torch.arange(5, dtype=torch.float64, device=device)
    torch.distributed.all_reduce(t)  # the sum over one process: the tensor itself
    plain = _model(True, 0.0).to(device)
    ddp = DistributedDataParallel(_model(True, 0.0).to(device), device_ids=[0] if device == "cuda" else None)
    train, _ = _batches()
    batch = train.collate_indices(train.batches(0)[0]).to(device)
    for m in (plain, ddp):
        translation_loss(m(batch.src, batch.tgt_in), batch.tgt_out, train.pad_id, 0.1).backward()
    control = D.control_group()  # NCCL: a gloo group for the trainer's control messages; gloo: the group itself
    torch.distributed.barrier(group=control)
    same = [torch.equal(a.grad, b.grad) for a, b in zip(plain.parameters(), ddp.module.parameters())]
    torch.save({"backend": torch.distributed.get_backend(), "sum": t.cpu(), "control": control is not None,
                "same_grads": same}, Path(out_dir) / "one.pt")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available() or not torch.distributed.is_nccl_available(),
    reason="NCCL needs a CUDA GPU; this machine has none (the gloo case runs the same code)"))])
def test_one_process_group_nccl_or_gloo_ddp_gradients_equal_the_plain_model(tmp_path, device):
    """A group of one process, NCCL on a GPU (what one GPU allows), gloo on the CPU: it starts, all-reduce returns
    the tensor, a DDP step's gradients equal the unwrapped model's bit for bit (float64; a sum over one process and
    DDP's division by 1 are exact), and the control group answers (NCCL: a gloo group beside it)."""
    _launch(_one_process_group_worker, str(tmp_path), world_size=1, device=device, entry=_alone)
    result = torch.load(tmp_path / "one.pt", weights_only=False)
    assert result["backend"] == ("nccl" if device == "cuda" else "gloo")
    assert torch.equal(result["sum"], torch.arange(5, dtype=torch.float64))
    assert result["control"] == (device == "cuda")
    assert result["same_grads"] and all(result["same_grads"])


# ------------------------------------------------------------------ exact resume with two processes

N_STEPS = 16


class _Crash(Exception):
    pass


def _full_and_killed_worker(rank, root):
    root = Path(root)
    full = _trainer(root / "full" / "checkpoint.pt", max_steps=N_STEPS)
    full.fit()
    res = _result(full)
    torch.save(res, root / f"full_rank{rank}.pt")
    cut = _trainer(root / "cut" / "checkpoint.pt", max_steps=N_STEPS, checkpoint_every=5)
    real, calls = cut.train_step, []

    def train_step(*args):  # both processes die in the middle of step 8: only the step-5 checkpoint survives
        calls.append(1)
        if len(calls) == 8:
            sys.stdout.flush()
            os._exit(3)
        return real(*args)

    cut.train_step = train_step
    cut.fit()


def _scramble(trainer, seed):
    torch.manual_seed(seed)  # a new process would have other RNG states ...
    np.random.seed(seed)
    for p in trainer.model.parameters():  # ... and other weights
        torch.nn.init.normal_(p)


def _resume_worker(rank, root):
    root = Path(root)
    again = _trainer(root / "cut" / "checkpoint.pt", max_steps=N_STEPS)
    _scramble(again, 100 + rank)
    assert again.resume() and again.step == 5
    again.fit()
    torch.save(_result(again), root / f"resumed_rank{rank}.pt")
    # Ctrl-C on rank 1 only, during step 6: every rank finishes the step, saves, and raises KeyboardInterrupt
    ctrl = _trainer(root / "ctrl" / "checkpoint.pt", max_steps=N_STEPS)
    real, calls = ctrl.train_step, []

    def train_step(*args):
        calls.append(1)
        if rank == 1 and len(calls) == 6:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args)

    ctrl.train_step = train_step
    with pytest.raises(KeyboardInterrupt):
        ctrl.fit()
    assert ctrl.step == 6
    later = _trainer(root / "ctrl" / "checkpoint.pt", max_steps=N_STEPS)
    _scramble(later, 200 + rank)
    assert later.resume() and later.step == 6
    later.fit()
    torch.save(_result(later), root / f"ctrl_rank{rank}.pt")


def test_two_rank_run_killed_and_resumed_continues_exactly(tmp_path):
    with pytest.raises(mp.ProcessExitedException) as info:  # the processes really die (os._exit)
        _launch(_full_and_killed_worker, str(tmp_path))
    assert info.value.exit_code in (3, -signal.SIGKILL, -signal.SIGTERM)
    state = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 5 and state["world_size"] == 2 and len(state["rng_ranks"]) == 2
    assert not torch.equal(state["rng_ranks"][0]["torch"], state["rng_ranks"][1]["torch"])  # own dropout masks
    assert torch.equal(state["rng"]["torch"], state["rng_ranks"][0]["torch"])

    _launch(_resume_worker, str(tmp_path))  # new processes
    full = [torch.load(tmp_path / f"full_rank{r}.pt", weights_only=False) for r in (0, 1)]
    ckpt = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=True)
    assert ckpt["finished"] and ckpt["step"] == N_STEPS and ckpt["epoch"] >= 1  # crossed an epoch end
    assert full[0]["loss"] == full[1]["loss"]
    for name in ("resumed", "ctrl"):
        for r in (0, 1):
            got = torch.load(tmp_path / f"{name}_rank{r}.pt", weights_only=False)
            assert got["step"] == N_STEPS
            assert got["loss"] == full[r]["loss"], name  # bit-identical losses
            assert got["lr"] == full[r]["lr"] and got["val_loss"] == full[r]["val_loss"], name
            for a, b in zip(got["params"], full[r]["params"]):
                assert torch.equal(a, b), name  # bit-identical parameters
    assert np.mean(full[0]["loss"][-4:]) < np.mean(full[0]["loss"][:4])  # and it learns


def test_resume_on_another_number_of_processes_is_refused(tmp_path):
    path = tmp_path / "checkpoint.pt"
    two = _trainer(path, max_steps=1)
    state = two.state_dict()
    state["world_size"] = 2  # as written by a two-process run
    torch.save(state, path)
    one = _trainer(path, max_steps=2)
    before = [p.detach().clone() for p in one.model.parameters()]
    with pytest.raises(D.WorldSizeMismatch, match=r"2 process\(es\), and this run has 1: continue it with "
                                                  r"torchrun with 2 processes"):
        one.resume()
    assert all(torch.equal(a, b) for a, b in zip(before, one.model.parameters()))  # nothing was loaded
    with pytest.raises(D.WorldSizeMismatch, match="continue it with plain python"):
        D.check_world_size(1, 4)
    D.check_world_size(3, 3)


# ------------------------------------------------------------------ the pieces


def test_n_tokens_of_equals_the_collated_batch():
    train, _ = _batches()
    for epoch in (0, 1):
        for idx in train.batches(epoch):
            assert train.n_tokens_of(idx) == train.collate_indices(idx).n_tokens
    assert train.n_tokens_of([0]) == len(toy_examples()[0][1]) + 1  # the target plus <eos>
    with pytest.raises(ValueError, match="at least one index"):
        train.n_tokens_of([])
    with pytest.raises(ValueError, match=r"\[0, 120\)"):
        train.n_tokens_of([0, 120])


def test_fingerprint_tells_different_batches_apart():
    a, b = BatchIterator(toy_examples(), 96, seed=0), BatchIterator(toy_examples(), 96, seed=0)
    assert a.fingerprint() == b.fingerprint()
    assert BatchIterator(toy_examples(), 96, seed=1).fingerprint() != a.fingerprint()
    assert BatchIterator(toy_examples(), 95, seed=0).fingerprint() != a.fingerprint()
    assert BatchIterator(toy_examples(seed=5), 96, seed=0).fingerprint() != a.fingerprint()


def test_torchrun_environment_and_devices(monkeypatch):
    assert D.torchrun_env({}) is None
    assert D.torchrun_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == D.DistEnv(3, 4, 1)
    with pytest.raises(ValueError, match="LOCAL_RANK=None is not an integer"):
        D.torchrun_env({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match=r"rank must be in \[0, 2\), got 2"):
        D.torchrun_env({"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    assert D.local_device("cpu", D.DistEnv(1, 2, 1)) == torch.device("cpu")
    assert D.backend_for(torch.device("cpu")) == "gloo" and D.backend_for(torch.device("cuda", 1)) == "nccl"
    # as if on a node with 2 GPUs: each process takes cuda:LOCAL_RANK; a numbered GPU is refused
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert D.local_device("auto", D.DistEnv(3, 4, 1)) == torch.device("cuda", 1)
    assert D.local_device("cuda", D.DistEnv(0, 4, 0)) == torch.device("cuda", 0)
    assert D.local_device("cuda", None) == torch.device("cuda")
    with pytest.raises(ValueError, match="names one GPU"):
        D.local_device("cuda:1", D.DistEnv(0, 2, 0))
    with pytest.raises(ValueError, match="LOCAL_RANK=2 but this node has 2 GPU"):
        D.local_device("cuda", D.DistEnv(2, 4, 2))


def test_single_process_helpers_are_no_ops():
    assert not D.is_distributed() and D.rank() == 0 and D.world_size() == 1
    assert D.agree((True, False), (True,)) == (True, False, True)
    assert D.gather_to_rank0("x") == ["x"] and D.broadcast_from_rank0(5) == 5
    t = torch.ones(2)
    assert D.all_reduce_sum(t) is t and torch.equal(t, torch.ones(2))
    model = torch.nn.Linear(2, 2)
    assert D.wrap_model(model, torch.device("cpu")) is model
    assert D.process_device("cpu") == torch.device("cpu")
    with D.process_group("cpu", D.DistEnv()) as env:
        assert env == D.DistEnv() and not torch.distributed.is_initialized()


# ------------------------------------------------------------------ the command line under torchrun


def _run_bounded(cmd, env) -> subprocess.CompletedProcess:
    """Run ``cmd`` for at most ``TIME_LIMIT_S``; past it, SIGTERM (which torchrun forwards to its workers, which
    run in sessions of their own), then SIGKILL, and fail."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd[:6])} ... did not finish within {TIME_LIMIT_S} s:\n{out[-2000:]}\n{err[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.skipif(not (SHARED / "multi30k" / "train.de.gz").is_file(),
                    reason="Multi30k not available locally (set TMLIB_DATA_DIR)")
def test_cli_under_torchrun_with_two_processes(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "TMLIB_DATA_DIR": str(SHARED), "OMP_NUM_THREADS": "1"}
    args = ["--out", str(out), "--preset", "tiny", "--vocab-size", "500", "--max-len", "128", "--max-tokens", "512", "--max-steps", "3",
            "--warmup-steps", "2", "--threads", "1", "--device", "cpu", "--amp", "off", "--noprogress"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={_free_port()}", "-m", "tmlib.train", *args]
    done = _run_bounded(cmd, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("done: 3 steps") == 1  # rank 0 alone reports
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    assert state["world_size"] == 2 and state["step"] == 3 and len(state["history"]["loss"]) == 3
    assert len(state["rng_ranks"]) == 2
    assert {"checkpoint.pt", "history.json", "tokenizer.json", "config.json"} <= {p.name for p in out.iterdir()}
    from tmlib.training import load_trained

    trained = load_trained(out, device="cpu")  # the plain model's weights, not DDP's ("module." prefixes)
    assert trained.step == 3 and trained.tokenizer.vocab_size == 500
    # continuing it in one process is refused with one line, exit status 2
    single = _run_bounded([sys.executable, "-m", "tmlib.train", "--out", str(out), "--resume", "--max-steps", "4",
                           "--threads", "1", "--noprogress"], env)
    assert single.returncode == 2
    lines = single.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the checkpoint was written by a run on 2 process(es)")


# ------------------------------------------------------------------ the ring all-reduce of the scaling-out page


def test_ring_all_reduce_simulation():
    """Every process ends with the column sums; after the reduce-scatter process r holds the full sum of chunk
    (r + 1) mod N; each step sends N chunks (one per process), 2 (N - 1) steps in all."""
    from tmlib.training import ring_all_reduce

    for n in (2, 3, 4):
        rng = np.random.default_rng(n)
        vectors = rng.integers(-9, 10, (n, 2 * n)).astype(float)
        states = ring_all_reduce(vectors)
        assert [p for p, _ in states] == ["start"] + ["reduce-scatter"] * (n - 1) + ["all-gather"] * (n - 1)
        np.testing.assert_array_equal(states[0][1], vectors)
        np.testing.assert_array_equal(states[-1][1], np.tile(vectors.sum(axis=0), (n, 1)))
        scattered = states[n - 1][1]
        for r in range(n):
            k = (r + 1) % n
            np.testing.assert_array_equal(scattered[r, 2 * k:2 * k + 2], vectors[:, 2 * k:2 * k + 2].sum(axis=0))
    for bad in (np.ones(4), np.ones((1, 4)), np.ones((3, 4))):
        with pytest.raises(ValueError, match="divisible"):
            ring_all_reduce(bad)
