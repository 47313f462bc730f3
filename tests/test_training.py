"""Tests of the training side: the paper's recipe (§5, tmlib.training.recipe), checkpoints (tmlib.training.checkpoint), the loop
and exact resume (tmlib.training.trainer), the experiment (tmlib.training.experiment) and the command line (tmlib.train)."""
import dataclasses
import os
import random
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from tmlib import ref as R  # noqa: E402
from tmlib import training as T  # noqa: E402
from tmlib.data import BatchIterator  # noqa: E402
from tmlib.model import make_model  # noqa: E402
from toy_data import toy_examples  # noqa: E402
from tolerances import adam_tolerance, assert_close, gradient_length, tolerance  # noqa: E402

numerics = pytest.mark.numerics

SHARED = Path(os.environ.get("TMLIB_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
needs_data = pytest.mark.skipif(not (SHARED / "multi30k" / "train.de.gz").is_file(),
                                reason="Multi30k not available locally (set TMLIB_DATA_DIR)")


# ------------------------------------------------------------------ the recipe


def test_adam_settings():
    opt = T.make_optimizer(torch.nn.Linear(2, 2))
    g = opt.param_groups[0]
    assert g["betas"] == (0.9, 0.98) and g["eps"] == 1e-9


@numerics
@pytest.mark.parametrize("d_model,warmup,factor", [(512, 4000, 1.0), (256, 50, 2.0)])
def test_schedule_matches_numpy_reference(d_model, warmup, factor):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = T.make_optimizer(torch.nn.ParameterList([p]))
    sched = T.make_scheduler(opt, d_model, warmup, factor)
    used = []
    for _ in range(3 * warmup):
        used.append(opt.param_groups[0]["lr"])  # the lr the next optimizer.step() uses
        p.grad = torch.ones(1)
        opt.step()
        sched.step()
    steps = np.arange(1, 3 * warmup + 1)
    # relative: two powers, a minimum, the factor and LambdaLR's product with the base rate (float64)
    assert_close(np.asarray(used) / R.noam_lr(steps, d_model, warmup, factor), 1.0, n=6)
    assert int(np.argmax(used)) + 1 == warmup
    assert_close(T.NoamSchedule(d_model, warmup, factor).peak(), factor * (d_model * warmup) ** -0.5, n=6)
    # the lecture's worked values: d_model 512, warm-up 4000
    if (d_model, warmup, factor) == (512, 4000, 1.0):
        assert_close(used[3999], 512**-0.5 * 4000**-0.5, n=6)
    with pytest.raises(ValueError):
        T.NoamSchedule(0, 10)


@numerics
def test_label_smoothed_loss_against_explicit_distribution():
    torch.manual_seed(0)
    V, eps = 7, 0.1
    logits = torch.randn(2, 4, V, dtype=torch.float64)
    tgt = torch.tensor([[3, 5, 2, 0], [1, 0, 0, 0]])
    loss = T.translation_loss(logits, tgt, pad_id=0, label_smoothing=eps)
    # independent computation: q = (1 - ε)·onehot + ε/V over all classes, loss = -Σ q log p, mean over non-pad
    logp = logits - logits.logsumexp(-1, keepdim=True)
    total, n = 0.0, 0
    for b in range(2):
        for t in range(4):
            y = int(tgt[b, t])
            if y == 0:
                continue
            q = torch.full((V,), eps / V, dtype=torch.float64)
            q[y] += 1 - eps
            total += float(-(q * logp[b, t]).sum())
            n += 1
    assert n == 4
    # float64: log-sum-exp over 7 logits, the sum over 7 classes, the mean over 4 tokens
    length, scale = 7 + 7 + 4, logits.abs().max().item()
    assert_close(float(loss), total / n, n=length, magnitude=scale)
    # padding positions do not matter
    logits2 = logits.clone()
    logits2[1, 1:] = 100 * torch.randn(3, V, dtype=torch.float64)
    assert_close(float(T.translation_loss(logits2, tgt, 0, eps)), float(loss), n=length, magnitude=scale)
    # with ε = 0 it is the plain negative log-likelihood
    nll = -sum(float(logp[b, t, tgt[b, t]]) for b, t in [(0, 0), (0, 1), (0, 2), (1, 0)]) / 4
    assert_close(float(T.translation_loss(logits, tgt, 0, 0.0)), nll, n=length, magnitude=scale)
    with pytest.raises(ValueError, match="do not match"):
        T.translation_loss(logits, tgt[:, :3])


@numerics
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_chunked_half_precision_loss_equals_direct(reduction):
    """bf16 logits larger than ``chunk_elements`` go through float32 chunks under checkpointing: the loss and the
    gradient equal the direct float32 computation (same float32 arithmetic per row; summation order differs)."""
    torch.manual_seed(0)
    V = 11
    base = torch.randn(3, 5, V).to(torch.bfloat16)
    tgt = torch.randint(1, V, (3, 5))
    tgt[2, 3:] = 0  # padding
    direct = base.clone().requires_grad_(True)
    chunked = base.clone().requires_grad_(True)
    ref = F.cross_entropy(direct.float().reshape(-1, V), tgt.reshape(-1), ignore_index=0, label_smoothing=0.1,
                          reduction=reduction)
    got = T.translation_loss(chunked, tgt, 0, 0.1, reduction, chunk_elements=2 * V)  # 2 rows per chunk: 8 chunks
    assert got.dtype == torch.float32
    # float32 (the bf16 logits are exact in float32): log-sum-exp and label smoothing over 11 classes, then
    # the sum or mean over 13 tokens, in chunks or at once
    assert_close(got, ref, n=2 * 11 + 13, magnitude=max(ref.item(), base.float().abs().max().item()))
    ref.backward()
    got.backward()
    # each row's gradient is computed from that row alone by the same float32 operations, then rounded to
    # bf16: exact by construction
    torch.testing.assert_close(chunked.grad, direct.grad, rtol=0, atol=0)
    with pytest.raises(ValueError, match="chunk_elements"):
        T.translation_loss(chunked, tgt, 0, 0.1, chunk_elements=V - 1)


# ------------------------------------------------------------------ RNG states and checkpoints


def test_rng_state_roundtrip_through_weights_only_load(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    state = T.get_rng_state()
    T.save_checkpoint(tmp_path / "rng.pt", {"rng": state})
    expected = (random.random(), np.random.rand(), torch.rand(1).item(), np.random.randn())
    T.set_rng_state(T.load_checkpoint(tmp_path / "rng.pt", require_format=False)["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item(), np.random.randn()) == expected


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ck.pt"
    T.save_checkpoint(path, {"x": torch.arange(3)})
    real_save = torch.save

    def crash(obj, f, *a, **k):
        real_save(obj, f, *a, **k)
        with open(f, "r+b") as fh:
            fh.truncate(10)  # half-written
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        T.save_checkpoint(path, {"x": torch.arange(5)})
    assert torch.equal(T.load_checkpoint(path, require_format=False)["x"], torch.arange(3))  # the old one is intact
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]  # no temporary file left behind


def test_load_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m tmlib.train"):
        T.load_checkpoint(tmp_path / "none.pt")
    with pytest.raises(T.CheckpointError, match="is a folder"):
        T.load_checkpoint(tmp_path)
    (tmp_path / "bad.pt").write_bytes(b"garbage")
    with pytest.raises(T.CheckpointError, match="not a PyTorch checkpoint file"):
        T.load_checkpoint(tmp_path / "bad.pt")
    good = tmp_path / "good.pt"
    T.save_checkpoint(good, {"format": T.CHECKPOINT_FORMAT, "x": torch.arange(1000)})
    (tmp_path / "cut.pt").write_bytes(good.read_bytes()[:-300])
    with pytest.raises(T.CheckpointError, match="truncated or corrupt.*delete it and train again"):
        T.load_checkpoint(tmp_path / "cut.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(T.CheckpointError, match="not a tmlib checkpoint"):
        T.load_checkpoint(tmp_path / "other.pt")


class _CodeCarrier:  # a pickle that would call a function when loaded
    def __reduce__(self):
        return (print, ("this must never run",))


def test_load_checkpoint_refuses_code_without_torch_advice(tmp_path, capsys):
    torch.save({"format": T.CHECKPOINT_FORMAT, "payload": _CodeCarrier()}, tmp_path / "evil.pt")
    with pytest.raises(T.CheckpointError) as info:
        T.load_checkpoint(tmp_path / "evil.pt")
    assert "could run code" in str(info.value) and "weights_only=False" not in str(info.value)
    assert "must never run" not in capsys.readouterr().out


def test_save_is_durable_and_cleans_leftovers(tmp_path, monkeypatch):
    import tmlib.utils as U

    path = tmp_path / "run" / "checkpoint.pt"
    path.parent.mkdir()
    leftover = path.parent / ".checkpoint.pt.abc123.tmp"  # what a `kill -9` during a write leaves
    leftover.write_bytes(b"x" * 1000)
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(U.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    from tmlib.utils import remove_stale_temporaries
    assert remove_stale_temporaries(path) == [leftover]
    T.save_checkpoint(path, {"format": T.CHECKPOINT_FORMAT})
    assert len(synced) >= 1  # the file (and the folder) are flushed before and after the rename
    assert sorted(p.name for p in path.parent.iterdir()) == ["checkpoint.pt"]


def test_full_disk_gives_a_clear_error_and_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    import errno

    path = tmp_path / "checkpoint.pt"
    T.save_checkpoint(path, {"format": T.CHECKPOINT_FORMAT, "step": 1})

    def full(obj, f, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(T.CheckpointError, match="no space left on the device.*previous checkpoint is intact"):
        T.save_checkpoint(path, {"format": T.CHECKPOINT_FORMAT, "step": 2, "w": torch.zeros(1000)})
    monkeypatch.undo()
    assert T.load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


# ------------------------------------------------------------------ the loop and exact resume




DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                               reason="needs a CUDA GPU (none on this machine)"))]


def _trainer(tmp_path, name, device="cpu", **cfg):
    torch.manual_seed(0)
    model = make_model("tiny", 20, dropout=0.1)  # dropout on: resume must restore torch's RNG
    cfg = {"amp": "off", "log_every": 3, **cfg}
    config = T.TrainConfig(model=model.config, warmup_steps=5, lr_factor=2.0, max_tokens=96, seed=0, device=device,
                           progress=False, checkpoint_minutes=None, grad_clip=1.0, threads=1, **cfg)
    train = BatchIterator(toy_examples(), max_tokens=96, seed=0)
    val = BatchIterator(toy_examples(30, seed=1), max_tokens=96, shuffle=False)
    return T.Trainer(model, train, val, config, checkpoint_path=tmp_path / name / "checkpoint.pt")


@pytest.mark.parametrize("device", DEVICES)
def test_resume_is_exact(tmp_path, device):
    """Also on a GPU: the checkpoint is read on the CPU and restored onto the device, RNG states included."""
    if device == "cuda":
        torch.backends.cudnn.deterministic = True
    n_total, k = 40, 13
    full = _trainer(tmp_path, "full", device, max_steps=n_total)
    n_per_epoch = len(full.train_batches)
    assert n_per_epoch < k < n_total - n_per_epoch  # crosses epoch boundaries before and after the cut
    full.fit()

    first = _trainer(tmp_path, "cut", device, max_steps=k)
    first.fit()  # "interrupted" after k steps: the checkpoint is all that survives
    assert first.step == k
    torch.manual_seed(123), random.seed(5), np.random.seed(7)  # a new process would have other RNG states
    second = _trainer(tmp_path, "cut", device, max_steps=n_total)
    for p in second.model.parameters():  # and other weights
        torch.nn.init.normal_(p)
    assert second.resume()
    assert (second.step, second.epoch) == (k, first.epoch)
    second.fit()

    assert second.step == full.step == n_total
    assert second.history["loss"] == full.history["loss"]  # bit-identical losses
    assert second.history["lr"] == full.history["lr"]
    for (name, a), b in zip(full.model.state_dict().items(), second.model.state_dict().values()):
        assert torch.equal(a, b), name
    # the loss went down on the toy task and validation ran at every epoch end
    assert np.mean(full.history["loss"][-5:]) < np.mean(full.history["loss"][:5])
    assert full.history["val_epoch"][:2] == [1, 2]
    assert (tmp_path / "full" / "history.json").is_file()


def test_mid_epoch_checkpoint_resume_is_exact(tmp_path):
    full = _trainer(tmp_path, "full", max_steps=20)
    full.fit()
    cut = _trainer(tmp_path, "cut", max_steps=20, checkpoint_every=7)
    assert len(cut.train_batches) > 8  # step 7 is mid-epoch

    class Interrupt(Exception):
        pass

    real = cut.train_step
    calls = []

    def train_step(*args):  # a crash in the middle of step 9: only the step-7 checkpoint survives
        calls.append(1)
        if len(calls) == 9:
            raise Interrupt
        return real(*args)

    cut.train_step = train_step
    with pytest.raises(Interrupt):
        cut.fit()
    again = _trainer(tmp_path, "cut", max_steps=20)
    assert again.resume() and again.step == 7 and again.batch_in_epoch == 7 % len(again.train_batches)
    again.fit()
    assert again.history["loss"] == full.history["loss"]
    for a, b in zip(full.model.parameters(), again.model.parameters()):
        assert torch.equal(a, b)


def test_budgets(tmp_path):
    t = _trainer(tmp_path, "epochs", max_epochs=2)
    t.fit()
    assert t.step == 2 * len(t.train_batches) and t.epoch == 2 and t.finished
    t = _trainer(tmp_path, "minutes", max_minutes=1e-9)
    t.fit()
    assert t.step <= 1 and len(t.history["val_loss"]) == 1
    state = T.load_checkpoint(tmp_path / "minutes" / "checkpoint.pt")
    assert state["finished"] and state["step"] == t.step


# ------------------------------------------------------------------ the Multi30k experiment


@needs_data
def test_run_training_load_or_train_and_cli(tmp_path):
    tiny = dataclasses.replace(T.SMOKE.model, vocab_size=500, max_len=128)
    config = T.TrainConfig(model=tiny, max_tokens=512, max_steps=3, warmup_steps=2, device="cpu", progress=False,
                           threads=1, amp="off")
    out = tmp_path / "run"
    trainer = T.run_training(config, out, data_dir=SHARED)
    assert trainer.step == 3 and len(trainer.history["loss"]) == 3
    assert {"checkpoint.pt", "history.json", "tokenizer.json", "config.json"} <= {p.name for p in out.iterdir()}
    with pytest.raises(FileExistsError, match="resume"):
        T.run_training(config, out, data_dir=SHARED)
    with pytest.raises(FileNotFoundError, match="no checkpoint to resume"):
        T.run_training(config, tmp_path / "typo", resume=True, data_dir=SHARED)
    trained = T.load_or_train(out, config, data_dir=SHARED, device="cpu")
    assert trained.loaded and trained.step == 3 and trained.tokenizer.vocab_size == 500
    assert trained.config.model.vocab_size == 500 and trained.model.config == trained.config.model
    for a, b in zip(trainer.model.state_dict().values(), trained.model.state_dict().values()):
        assert torch.equal(a, b)
    # the CLI extends the same run by two steps (resume), keeping the stored config
    from tmlib.train import main

    assert main(["--out", str(out), "--resume", "--max-steps", "5", "--data-dir", str(SHARED), "--device", "cpu",
                 "--threads", "1", "--noprogress"]) == 0
    state = T.load_checkpoint(out / "checkpoint.pt")
    assert state["step"] == 5 and state["config"]["model"]["d_model"] == 32 and len(state["history"]["loss"]) == 5


@pytest.mark.parametrize("float32_s, bf16_s, expected", [
    (0.30, 0.20, torch.bfloat16),  # native bf16 (AVX512-BF16, AMX): about 1.5 times faster
    (0.30, 0.28, None),            # faster, but by less than BF16_MIN_SPEEDUP: float32 is the more accurate
    (0.30, 0.85, None),            # emulated bf16 (AVX-512 without bf16): about 3 times slower
])
def test_amp_auto_on_cpu_takes_bf16_only_where_the_probe_finds_it_faster(float32_s, bf16_s, expected):
    timings = {"float32_s": float32_s, "bf16_s": bf16_s}
    assert T.resolve_precision("auto", torch.device("cpu"), timings) == expected
    assert T.resolve_precision("auto", torch.device("cpu")) is None  # no measurement: float32
    assert T.resolve_precision("bf16", torch.device("cpu"), timings) == torch.bfloat16  # forced, whatever the timings


@pytest.mark.parametrize("bf16_s, autocast_on", [(0.1, True), (0.9, False)])
def test_trainer_times_the_model_then_trains_in_the_faster_precision(tmp_path, monkeypatch, bf16_s, autocast_on):
    import tmlib.training.precision as precision_module

    calls = []

    def fake_time_precisions(run_step, max_repeats=3):  # runs the real step in both types, returns given timings
        for dtype in (None, torch.bfloat16):
            run_step(dtype)
        calls.append(1)
        return {"float32_s": 0.3, "bf16_s": bf16_s}

    monkeypatch.setattr(precision_module, "time_precisions", fake_time_precisions)
    t = _trainer(tmp_path, f"auto{bf16_s}", amp="auto", max_steps=3)
    assert t.amp.needs_probe and t.amp.dtype is None  # undecided (float32) until fit() has timed the model
    weights = {k: v.clone() for k, v in t.model.state_dict().items()}
    rng = torch.get_rng_state()
    t.fit()
    assert calls == [1] and t.amp.dtype == (torch.bfloat16 if autocast_on else None)
    with t.amp.autocast():
        assert torch.is_autocast_enabled("cpu") is autocast_on
    stored = T.load_checkpoint(tmp_path / f"auto{bf16_s}" / "checkpoint.pt")["precision"]
    assert stored == {"amp": "auto", "dtype": "bfloat16" if autocast_on else "float32",
                      "timings": {"float32_s": 0.3, "bf16_s": bf16_s}}
    # the probe neither trained the model nor moved the random state: a run without it starts from the same place
    probe_free = _trainer(tmp_path, f"fixed{bf16_s}", amp="bf16" if autocast_on else "off", max_steps=3)
    assert all(torch.equal(weights[k], v) for k, v in probe_free.model.state_dict().items())
    torch.set_rng_state(rng)
    probe_free.fit()
    assert probe_free.history["loss"] == t.history["loss"]
    # resumed on the same machine, the run keeps its choice without timing again (so that it continues exactly)
    monkeypatch.setattr(precision_module, "time_precisions", lambda *a, **k: pytest.fail("timed again on resume"))
    again = _trainer(tmp_path, f"auto{bf16_s}", amp="auto", max_steps=5)
    assert again.resume() and not again.amp.needs_probe and again.amp.dtype == t.amp.dtype
    again.fit()


@pytest.mark.parametrize("native_bf16, expected", [(True, torch.bfloat16), (False, torch.float16)])
def test_amp_auto_on_cuda_asks_for_native_bf16(monkeypatch, native_bf16, expected):
    """A T4 (Colab's GPU) only emulates bf16: ``is_bf16_supported()`` says yes with its default
    ``including_emulation=True``. "auto" must ask for native bf16 and give the T4 fp16 with a gradient scaler."""
    asked = []

    def is_bf16_supported(including_emulation=True):
        asked.append(including_emulation)
        return native_bf16 or including_emulation

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    assert T.resolve_precision("auto", torch.device("cuda")) == expected
    assert asked == [False]


def test_a_checkpoint_of_another_format_is_refused(tmp_path):
    t = _trainer(tmp_path, "run", max_steps=1)
    t.save()
    state = T.load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    state["format"] = "tmlib-checkpoint-1"  # as written by tmlib 0.1
    torch.save(state, tmp_path / "old.pt")
    with pytest.raises(T.CheckpointError, match="format 'tmlib-checkpoint-1', which this version does not read"):
        t.resume(tmp_path / "old.pt")
    with pytest.raises(T.CheckpointError, match="format 'tmlib-checkpoint-1'"):
        T.load_trained(tmp_path / "old.pt", device="cpu")


@numerics
def test_step_loss_divides_the_summed_loss_by_the_tokens_of_the_step():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 7, dtype=torch.float64)
    tgt = torch.tensor([[3, 5, 2, 0], [1, 0, 0, 0]])  # 4 target tokens
    total = T.translation_loss(logits, tgt, 0, 0.1, "sum")
    # the same operations in the same order: exact
    assert torch.equal(T.step_loss(logits, tgt, 0, 0.1, 4, 10), total / 10)  # a part of a step of 10 tokens
    # a batch that is the whole step: its mean, as cross_entropy computes it (bit for bit a hand-written step)
    assert torch.equal(T.step_loss(logits, tgt, 0, 0.1, 4, 4), T.translation_loss(logits, tgt, 0, 0.1))
    # the mean and the sum divided by 4 round differently (float64: log-sum-exp over 7, 7 classes, 4 tokens)
    assert_close(float(T.step_loss(logits, tgt, 0, 0.1, 4, 4)), float(total) / 4, n=7 + 7 + 4,
                 magnitude=logits.abs().max().item())


def test_budgets_and_checkpoint_cadence(tmp_path):
    t = _trainer(tmp_path, "cadence", max_steps=None, max_epochs=2, max_minutes=1.0, checkpoint_every=3)
    assert not t._spent()
    t.step, t.epoch, t.elapsed_s = 100, 1, 59.0
    assert not t._spent()
    t.epoch = 2
    assert t._spent()
    t.epoch, t.elapsed_s = 0, 60.0
    assert t._spent()
    t._saved_step = None
    due = []
    for s in range(1, 10):
        t.step = s
        due += [s] if t._checkpoint_due() else []
    assert due == [3, 6, 9]
    t.step, t._saved_step = 6, 6
    assert not t._checkpoint_due()  # at most once per step
    by_time = _trainer(tmp_path, "minutes", max_steps=5)
    by_time.config = dataclasses.replace(by_time.config, checkpoint_minutes=0.5)
    by_time.step = 1
    assert not by_time._checkpoint_due()
    by_time._saved_at -= 31.0  # the last save was 31 s ago
    assert by_time._checkpoint_due()
    no_budget = _trainer(tmp_path, "none", max_steps=None, max_epochs=None, max_minutes=None)
    with pytest.raises(ValueError, match="give at least one budget"):
        no_budget.fit()
    # the progress bar's total: the step budget, or epochs × steps per epoch
    assert t.steps_in_epoch(0) == len(t.train_batches.batches(0)) // t.batches_per_step


def test_without_a_checkpoint_path_nothing_is_saved(tmp_path, monkeypatch):
    t = _trainer(tmp_path, "none", max_steps=6, checkpoint_every=1)
    t.checkpoint_path = None
    saves = []
    real = t.save
    monkeypatch.setattr(t, "save", lambda: (saves.append(t.step), real())[1])
    t.fit()
    assert saves == [6]  # only the final call, which writes nothing
    assert not (tmp_path / "none").exists()


# ------------------------------------------------------------------ resume anywhere, Ctrl-C, accumulation, compile


def test_resume_reads_the_checkpoint_on_the_cpu_whatever_the_device(tmp_path, monkeypatch):
    """RNG states must be restored from CPU tensors: a checkpoint mapped to the training device (CUDA) broke
    ``set_rng_state``. Here the trainer's device is "meta" (not the CPU): resume must still restore exactly."""
    t = _trainer(tmp_path, "dev", max_steps=3)
    t.fit()
    again = _trainer(tmp_path, "dev", max_steps=3)
    seen = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: (seen.append(k.get("map_location")), real_load(*a, **k))[1])
    again.device = torch.device("meta")  # as if the run continued on another device
    assert again.resume()
    assert seen == ["cpu"]
    assert again.step == 3 and torch.equal(next(again.model.parameters()), next(t.model.parameters()))


@needs_data
def test_resumed_run_takes_device_precision_and_budget_from_the_command_line(tmp_path):
    tiny = dataclasses.replace(T.SMOKE.model, vocab_size=300, max_len=128)
    config = T.TrainConfig(model=tiny, max_tokens=512, max_steps=2, warmup_steps=2, device="cpu", progress=False,
                           threads=1, amp="off", lr_factor=0.5)
    T.run_training(config, tmp_path / "run", data_dir=SHARED)
    later = dataclasses.replace(config, max_steps=4, amp="bf16", lr_factor=9.0)  # lr_factor is not a runtime field
    trainer = T.run_training(later, tmp_path / "run", resume=True, data_dir=SHARED)
    assert trainer.step == 4 and trainer.config.amp == "bf16" and trainer.amp.dtype == torch.bfloat16
    assert trainer.config.lr_factor == 0.5  # the run's recipe is kept


def test_ctrl_c_finishes_the_step_saves_and_resumes_exactly(tmp_path):
    import signal

    full = _trainer(tmp_path, "full", max_steps=20)
    full.fit()
    cut = _trainer(tmp_path, "cut", max_steps=20)
    real = cut.train_step
    calls = []

    def train_step(*args):  # Ctrl-C arrives in the middle of step 6
        calls.append(1)
        if len(calls) == 6:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args)

    cut.train_step = train_step
    with pytest.raises(KeyboardInterrupt):
        cut.fit()
    state = T.load_checkpoint(tmp_path / "cut" / "checkpoint.pt")
    assert state["step"] == 6 and not state["finished"]  # step 6 completed, then saved
    again = _trainer(tmp_path, "cut", max_steps=20)
    assert again.resume()
    again.fit()
    assert again.history["loss"] == full.history["loss"]
    for a, b in zip(full.model.parameters(), again.model.parameters()):
        assert torch.equal(a, b)


@numerics
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_trainer_step_equals_a_hand_written_step(dtype):
    """One Trainer step against the recipe written out (chapter 8's exercise): teacher-forced forward pass, the
    label-smoothed loss averaged over the real target tokens, backward, clipping to norm 1, Adam (β = 0.9, 0.98,
    ε = 1e-9) at the schedule's first learning rate. Loss and clipped gradients: the same operations in the same
    order, so bit for bit equal (exact by construction); the weights: Adam's learning rate comes from the NumPy
    reference of the schedule here, so they agree to that rate's rounding."""
    from tmlib.data import collate

    ex = toy_examples(16)
    batch = collate(ex)
    runs = []
    for how in ("trainer", "by hand"):
        torch.manual_seed(0)
        model = make_model("tiny", 20, dropout=0.0).to(dtype)
        params = list(model.parameters())
        if how == "trainer":
            config = T.TrainConfig(model=model.config, warmup_steps=5, max_steps=1, device="cpu", amp="off",
                                   progress=False, grad_clip=1.0)
            loss = T.Trainer(model, BatchIterator(ex, max_tokens=96), None, config).train_step(batch)
        else:
            lr = R.noam_lr(1, model.d_model, 5)
            opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.98), eps=1e-9)
            logits = model(batch.src, batch.tgt_in)  # (batch, tgt_len, V)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.tgt_out.reshape(-1), ignore_index=0,
                                   label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
        runs.append((loss.detach(), [p.grad.clone() for p in params], [p.detach().clone() for p in params]))
    (loss_t, g_t, w_t), (loss_h, g_h, w_h) = runs
    assert torch.equal(loss_t, loss_h)
    assert all(torch.equal(a, b) for a, b in zip(g_t, g_h))
    # the same update, w - lr · m̂ / (√v̂ + ε), with learning rates that may differ by their own 2 roundings: the
    # weights agree to the update's subtraction and those roundings of a step of at most lr
    for a, b in zip(w_t, w_h):
        assert_close(a, b, n=3)


def one_step(accumulate: bool):
    """One float64 Trainer step on 16 toy pairs: two batches (6 and 10 pairs) accumulated, or one holding all.
    Returns the model, the loss, the gradients and the weights after the step."""
    from tmlib.data import collate

    ex = toy_examples(16)
    torch.manual_seed(0)
    model = make_model("tiny", 20, dropout=0.0).double()
    config = T.TrainConfig(model=model.config, warmup_steps=5, max_steps=1, device="cpu", amp="off",
                           progress=False, accumulate=2 if accumulate else 1, grad_clip=None)
    trainer = T.Trainer(model, BatchIterator(ex, max_tokens=96), None, config)
    loss = trainer.train_step([collate(ex[:6]), collate(ex[6:])] if accumulate else collate(ex))
    params = list(model.parameters())
    return model, float(loss), [p.grad.clone() for p in params], [p.detach().clone() for p in params]


@numerics
def test_gradient_accumulation_equals_one_batch_holding_all_tokens(tmp_path):
    """Two batches accumulated in one step give the update of a single batch holding both (float64)."""
    (_, loss_acc, g_acc, p_acc), (model, loss_one, g_one, p_one) = one_step(True), one_step(False)
    # float64; the same gradient, summed over the batch's at most 96 tokens in one or two parts
    n = gradient_length(model.config, 10, 10, 96)
    assert_close(loss_acc, loss_one, n=n)
    grad_tol = tolerance(torch.float64, n, max(float(g.abs().max()) for g in g_one))
    assert max(float((a - b).abs().max()) for a, b in zip(g_acc, g_one)) <= grad_tol
    # after Adam's division by |g| + ε (ε = 1e-9), the rounding of near-zero gradients moves a weight by up to
    # lr · δg / (|g| + ε) (tests/tolerances.py: adam_tolerance), on top of the update's own roundings
    lr = R.noam_lr(1, model.d_model, 5)
    for a, b, g in zip(p_acc, p_one, g_one):
        allowed = adam_tolerance([lr], grad_tol, grad=g) + tolerance(torch.float64, 3, float(b.abs().max()))
        assert ((a - b).abs() <= allowed).all()


def test_compile_option_trains_the_same(tmp_path, monkeypatch):
    """``compile=True`` runs the model through torch.compile with dynamic shapes (graph capture checked with the
    quick "aot_eager" backend here; the default inductor backend is measured in benchmarks/throughput.py)."""
    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real_compile(model, **kw, backend="aot_eager"))
    eager = _trainer(tmp_path, "eager", max_steps=4)
    eager.fit()
    compiled = _trainer(tmp_path, "compiled", max_steps=4, compile=True)
    assert compiled.forward_model is not compiled.model
    compiled.fit()
    # float32; the traced graph may reorder: each loss has its forward chain's roundings (batches of at most 96
    # tokens), plus the effect of the weights' drift through the earlier Adam steps, Σ g_i Δw_i with each
    # |g_i Δw_i| <= Σ lr · δg (adam_tolerance), over the parameters' independent roundings: √n_params times
    config, n_params = eager.model.config, sum(p.numel() for p in eager.model.parameters())
    n = gradient_length(config, 10, 10, 96)
    grad_tol = tolerance(torch.float32, n, 1.0)  # gradients clipped to norm 1
    lrs = [R.noam_lr(k, config.d_model, 5, 2.0) for k in range(1, 4)]
    for a, b in zip(compiled.history["loss"], eager.history["loss"]):
        assert abs(a - b) <= tolerance(torch.float32, n, b) + sum(lrs) * grad_tol * n_params ** 0.5


def test_train_config_checks():
    with pytest.raises(ValueError, match="max_minutes must be > 0.0, got -1.0"):
        T.TrainConfig(max_minutes=-1)
    with pytest.raises(ValueError, match="max_steps must be >= 1, got -5"):
        T.TrainConfig(max_steps=-5)
    with pytest.raises(ValueError, match="grad_clip must be > 0.*none for no clipping"):
        T.TrainConfig(grad_clip=0.0)
    with pytest.raises(ValueError, match="amp must be"):
        T.TrainConfig(amp="yes")
    with pytest.raises(ValueError, match="device must be auto, cpu, cuda, cuda:N or mps, got 'gpu'"):
        T.TrainConfig(device="gpu")
    with pytest.raises(TypeError, match="model must be a tmlib.model.ModelConfig, got dict"):
        T.TrainConfig(model={"d_model": 8})
    with pytest.raises(ValueError, match=r"unknown TrainConfig field\(s\) \['preset'\]"):
        T.TrainConfig.from_dict({"preset": "small"})  # the layout of tmlib 0.1 is not read
    assert T.TrainConfig.from_dict(T.RECOMMENDED.to_dict()) == T.RECOMMENDED


# ------------------------------------------------------------------ the command line


def _cli_error(capsys, argv):
    from tmlib.train import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.mark.parametrize("argv, message", [
    (["--max-minutes", "-1"], "--max-minutes must be > 0.0, got -1.0"),
    (["--max-steps", "-5"], "--max-steps must be >= 1, got -5"),
    (["--max-steps", "x"], "invalid int value: 'x'"),
    (["--grad-clip", "0"], "--grad-clip must be > 0"),
    (["--max-minutes", "none"], "give at least one budget"),
    (["--d-model", "30"], "d_model=30 is not divisible by n_heads=4"),
    (["--preset", "huge"], "unknown preset 'huge'"),
    (["--amp", "fp16", "--device", "cpu"], "fp16' needs a CUDA device"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_cli_user_errors_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "run"
    assert message in _cli_error(capsys, argv + ["--out", str(out)])
    assert not out.exists()


def test_cli_resume_errors(tmp_path, capsys):
    assert "no checkpoint to resume" in _cli_error(capsys, ["--resume", "--out", str(tmp_path / "tpyo")])
    run = tmp_path / "run"
    run.mkdir()
    config = dataclasses.replace(T.RECOMMENDED, model=dataclasses.replace(T.SMOKE.model, vocab_size=50))
    T.save_checkpoint(run / "checkpoint.pt", {"format": T.CHECKPOINT_FORMAT, "config": config.to_dict()})
    assert "already holds a run" in _cli_error(capsys, ["--out", str(run), "--max-steps", "3"])
    msg = _cli_error(capsys, ["--out", str(run), "--resume", "--lr-factor", "1.0"])
    assert "cannot change --lr-factor (the run has 0.3, the command line gives 1.0)" in msg
    assert "keeps its model" in _cli_error(capsys, ["--out", str(run), "--resume", "--preset", "base"])


EXPECTED_PARAMETERS = {"base": 63_119_496, "big": 214_282_376, "small": 7_585_600, "cpu": 4_691_776,
                       "tiny": 306_752}


@pytest.mark.parametrize("preset", [None, *EXPECTED_PARAMETERS])
def test_cli_builds_exactly_the_preset_it_names(preset):
    """`--preset base` must build the paper's base model (not the recommended CPU model with base's name)."""
    from tmlib.model import PRESETS, count_parameters
    from tmlib.train import parse_config

    config, _ = parse_config(["--out", "/nonexistent/run"] + (["--preset", preset] if preset else []))
    name = preset or "cpu"
    assert config.model == PRESETS[name]
    with torch.device("meta"):
        model = make_model(config.model)
    assert count_parameters(model) == EXPECTED_PARAMETERS[name]
    c = config.model  # an independent count: embeddings (tied) + layers + generator bias
    attn, ffn, ln = 4 * (c.d_model**2 + c.d_model), 2 * c.d_model * c.d_ff + c.d_ff + c.d_model, 2 * c.d_model
    independent = (c.vocab_size * c.d_model + c.n_encoder_layers * (attn + ffn + 2 * ln)
                   + c.n_decoder_layers * (2 * attn + ffn + 3 * ln) + c.vocab_size)
    assert independent == EXPECTED_PARAMETERS[name]
    if preset:  # the recipe stays the recommended one; only the model changes
        assert dataclasses.replace(config, model=T.RECOMMENDED.model) == T.RECOMMENDED


def test_cli_grad_clip_can_be_switched_off_and_model_fields_are_options():
    from tmlib.train import parse_config

    config, _ = parse_config(["--out", "/nonexistent/run", "--grad-clip", "none", "--n-encoder-layers", "3",
                              "--preset", "small", "--amp", "off"])
    assert config.grad_clip is None and config.model.n_encoder_layers == 3 and config.model.d_ff == 1024


def test_ema_of_the_weights_is_kept_saved_and_loaded(tmp_path):
    """ema_decay: after every step ema ← d·ema + (1 − d)·weights (the first update copies the weights); the
    checkpoint keeps it, resume restores it, and evaluation uses it."""
    d = 0.9
    t = _trainer(tmp_path, "ema", max_steps=3, ema_decay=d)
    history = []
    real = t.train_step

    def step(*args):
        loss = real(*args)
        history.append([p.detach().clone() for p in t.model.parameters()])
        return loss

    t.train_step = step
    t.fit()
    expected = history[0]
    for weights in history[1:]:
        expected = [d * e + (1 - d) * w for e, w in zip(expected, weights)]
    for e, a in zip(expected, t.ema.module.parameters()):  # float32: two products and a sum per step, 3 steps
        assert_close(a, e, n=3 * 3, magnitude=float(e.abs().max()))
    again = _trainer(tmp_path, "ema", max_steps=3, ema_decay=d)
    assert again.resume()
    for a, b in zip(again.ema.module.parameters(), t.ema.module.parameters()):
        assert torch.equal(a, b)
    assert again.evaluate() == t.evaluate()  # both evaluate the average


def test_keep_best_keeps_the_weights_of_the_lowest_validation_nll(tmp_path):
    """keep_best: after every validation pass the weights are copied if their validation NLL is the lowest so far;
    the checkpoint stores them, resume restores them, and load_trained returns them (not the last weights)."""
    from tmlib.training import load_trained

    from tmlib.data import train_tokenizer

    t = _trainer(tmp_path, "best", max_steps=40, keep_best=True)
    t.tokenizer = train_tokenizer([("a b c d", "e f g h")] * 3, vocab_size=20)  # load_trained needs one
    snapshots = {}
    real = t.validate

    def validate():
        real()
        snapshots[t.step] = {k: v.detach().clone() for k, v in t.model.state_dict().items()}

    t.validate = validate
    scripted = iter([(3.0, 3.0), (2.0, 2.0), (2.5, 2.5), (1.5, 1.5), (2.2, 2.2), (2.9, 2.9)])
    real_evaluate = t.evaluate
    t.evaluate = lambda batches=None: next(scripted)  # validation NLLs that fall, rise, fall and rise again
    t.fit()
    nll, steps = t.history["val_nll"], t.history["val_step"]
    i = int(np.argmin(nll))
    assert i < len(nll) - 1, f"the test needs a run whose best validation is not the last: {nll}"
    assert t.best["step"] == steps[i] and t.best["val_nll"] == nll[i]
    for k, v in snapshots[steps[i]].items():
        assert torch.equal(t.best["model"][k], v), k
    again = _trainer(tmp_path, "best", max_steps=40, keep_best=True)
    assert again.resume()
    assert again.best["step"] == t.best["step"]
    loaded = load_trained(tmp_path / "best", device="cpu")
    assert loaded.best_step == steps[i]
    for k, v in loaded.model.state_dict().items():
        assert torch.equal(v, snapshots[steps[i]][k]), k
    assert nll[i] == 1.5 and len(nll) == 5
    t.model.load_state_dict(t.best["model"])
    assert real_evaluate() == again.__class__.evaluate(t)  # the kept weights are evaluable as a model
    # without keep_best nothing is kept and load_trained returns the last weights
    plain = _trainer(tmp_path, "plain", max_steps=5)
    plain.tokenizer = t.tokenizer
    plain.fit()
    assert plain.best is None and load_trained(tmp_path / "plain", device="cpu").best_step is None


def test_time_precisions_times_both_types_interleaved_and_stops_once_clear(monkeypatch):
    import tmlib.training.precision as P

    now, calls = [0.0], []
    monkeypatch.setattr(P.time, "perf_counter", lambda: now[0])  # a clock that only the steps move

    def step_costing(cost):
        def step(dtype):
            calls.append(dtype)
            now[0] += cost[dtype]
        return step

    t = P.time_precisions(step_costing({None: 0.25, torch.bfloat16: 1.0}))  # emulated bf16: clear after one pair
    assert calls == [None, torch.bfloat16, None, torch.bfloat16]  # warm-ups, then one timed pair
    assert t == {"float32_s": 0.25, "bf16_s": 1.0}  # (binary fractions: the clock's sums are exact)
    calls.clear()
    t = P.time_precisions(step_costing({None: 0.3125, torch.bfloat16: 0.25}), max_repeats=3)  # close: three pairs
    assert calls[2:] == [None, torch.bfloat16, torch.bfloat16, None, None, torch.bfloat16]  # the order alternates
    assert t == {"float32_s": 0.3125, "bf16_s": 0.25}
    calls.clear()
    t = P.time_precisions(step_costing({None: 0.25, torch.bfloat16: 4.0}))  # bf16 emulated with AVX2: 16 times
    assert calls == [None, torch.bfloat16, None]  # its warm-up settles it: not called again, float32 timed once
    assert t == {"float32_s": 0.25, "bf16_s": 4.0}


# ------------------------------------------------------------------ auto_dropout: P_drop from the budget's passes


def test_passes_in_budget_is_the_first_budget_to_run_out():
    from tmlib.training.budget import passes_in_budget

    assert passes_in_budget(200, max_epochs=3) == 3.0
    assert passes_in_budget(200, max_steps=500, max_epochs=3) == 2.5
    assert passes_in_budget(238, max_minutes=15, step_s=0.29) == pytest.approx(900 / 0.29 / 238)  # 13.0
    assert passes_in_budget(238, max_steps=238, max_minutes=15, step_s=0.29) == 1.0
    with pytest.raises(ValueError, match="step_s"):
        passes_in_budget(238, max_minutes=15)
    with pytest.raises(ValueError, match="budget"):
        passes_in_budget(238)


def test_dropout_for_passes_switches_at_the_threshold():
    from tmlib.training.budget import AUTO_DROPOUT_MIN_PASSES, dropout_for_passes

    assert dropout_for_passes(AUTO_DROPOUT_MIN_PASSES, 0.1) == 0.1
    assert dropout_for_passes(AUTO_DROPOUT_MIN_PASSES - 0.01, 0.1) == 0.0
    with pytest.raises(ValueError, match="auto_dropout"):
        T.TrainConfig(auto_dropout=1.0)


def test_set_dropout_equals_a_model_built_with_that_dropout():
    """Every dropout of the model (sub-layers, embeddings, attention weights) takes the new P_drop: in training mode
    the model then computes what a model built with it computes, draw for draw."""
    from tmlib.model import set_dropout

    torch.manual_seed(0)
    built = make_model("tiny", 20, dropout=0.3)
    torch.manual_seed(0)
    switched = make_model("tiny", 20, dropout=0.0)
    set_dropout(switched, 0.3)
    assert switched.config == built.config
    src, tgt = torch.randint(1, 20, (2, 7)), torch.randint(1, 20, (2, 5))
    outs = []
    for model in (built, switched):
        model.train()
        torch.manual_seed(1)
        outs.append(model(src, tgt))  # (2, 5, 20)
    assert torch.equal(outs[0], outs[1])
    torch.manual_seed(1)
    assert not torch.equal(make_model("tiny", 20, dropout=0.0).train()(src, tgt), outs[0])  # dropout matters here


@pytest.mark.parametrize("budget, chosen", [({"max_epochs": 9}, 0.1), ({"max_epochs": 8}, 0.0),
                                            ({"max_minutes": 60.0}, 0.1), ({"max_minutes": 1e-4}, 0.0),
                                            ({"max_steps": 3, "max_minutes": 60.0}, 0.0)])
def test_trainer_chooses_dropout_from_the_budget_stores_it_and_keeps_it_on_resume(tmp_path, budget, chosen):
    t = _trainer(tmp_path, "run", auto_dropout=0.1, **budget)
    for module in t.model.modules():  # the model starts as built (dropout 0.1 in the toy model): auto sets it
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.5
    t._choose_dropout()
    assert t.dropout_choice["p"] == chosen and t.model.config.dropout == chosen == t.config.model.dropout
    assert {m.p for m in t.model.modules() if isinstance(m, torch.nn.Dropout)} == {chosen}
    if list(budget) == ["max_minutes"]:
        assert t.dropout_choice["step_s"] > 0  # timed here
    else:  # the steps or epochs settle it: no step is timed
        assert t.dropout_choice["step_s"] is None
    t.save()
    stored = T.load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert stored["dropout_choice"] == t.dropout_choice and stored["config"]["model"]["dropout"] == chosen
    import json
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model"]["dropout"] == chosen
    again = _trainer(tmp_path, "run", auto_dropout=0.1, max_epochs=20)  # a longer budget: the choice stays
    assert again.resume() and again.dropout_choice == t.dropout_choice
    again._choose_dropout()
    assert {m.p for m in again.model.modules() if isinstance(m, torch.nn.Dropout)} == {chosen}


def test_auto_dropout_threshold_follows_from_the_stored_runs():
    """AUTO_DROPOUT_MIN_PASSES is where the records put it: the kept weights of the run with dropout 0.1, given the
    time of P passes without dropout (its steps 1.1 times as long: cpu_recipe.json's speed trial), are first better
    at P = 9."""
    from tmlib.analysis.benchmarking import load_result
    from tmlib.analysis.runs import dropout_pays_from
    from tmlib.training.budget import AUTO_DROPOUT_MIN_PASSES

    speed = load_result(file="cpu_recipe.json")["speed"][0]["median_tokens_per_s"]
    slowdown = speed["eager_drop0"] / speed["eager"]
    assert 1.05 < slowdown < 1.15
    without, with_dropout = (load_result(file=f) for f in ("translate_cpu_seed1.json", "translate_cpu_dropout01.json"))
    assert dropout_pays_from(without, with_dropout, slowdown) == AUTO_DROPOUT_MIN_PASSES == 9
