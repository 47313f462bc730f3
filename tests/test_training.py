"""Tests of tmlib.training: the paper's recipe (§5), checkpoints, exact resume, budgets, the CLI."""
import math
import os
import random
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tmlib import numpy_ref as R  # noqa: E402
from tmlib import training as T  # noqa: E402
from tmlib.data import BatchIterator  # noqa: E402
from tmlib.presets import make_model  # noqa: E402

SHARED = Path(os.environ.get("TMLIB_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
needs_data = pytest.mark.skipif(not (SHARED / "multi30k" / "train.de.gz").is_file(),
                                reason="Multi30k not available locally (set TMLIB_DATA_DIR)")


# ------------------------------------------------------------------ the recipe


def test_adam_settings():
    opt = T.make_optimizer(torch.nn.Linear(2, 2))
    g = opt.param_groups[0]
    assert g["betas"] == (0.9, 0.98) and g["eps"] == 1e-9


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
    np.testing.assert_allclose(used, R.noam_lr(steps, d_model, warmup, factor), rtol=1e-12, atol=0)
    assert int(np.argmax(used)) + 1 == warmup
    assert math.isclose(T.NoamSchedule(d_model, warmup, factor).peak(), factor * (d_model * warmup) ** -0.5)
    # the lecture's worked values: d_model 512, warm-up 4000
    if (d_model, warmup, factor) == (512, 4000, 1.0):
        assert math.isclose(used[3999], 512**-0.5 * 4000**-0.5)
    with pytest.raises(ValueError):
        T.NoamSchedule(0, 10)


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
    assert math.isclose(float(loss), total / n, rel_tol=1e-6)
    # padding positions do not matter
    logits2 = logits.clone()
    logits2[1, 1:] = 100 * torch.randn(3, V, dtype=torch.float64)
    assert math.isclose(float(T.translation_loss(logits2, tgt, 0, eps)), float(loss), rel_tol=1e-6)
    # with ε = 0 it is the plain negative log-likelihood
    nll = -sum(float(logp[b, t, tgt[b, t]]) for b, t in [(0, 0), (0, 1), (0, 2), (1, 0)]) / 4
    assert math.isclose(float(T.translation_loss(logits, tgt, 0, 0.0)), nll, rel_tol=1e-6)
    with pytest.raises(ValueError, match="do not match"):
        T.translation_loss(logits, tgt[:, :3])


# ------------------------------------------------------------------ RNG states and checkpoints


def test_rng_state_roundtrip_through_weights_only_load(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    state = T.get_rng_state()
    T.save_checkpoint(tmp_path / "rng.pt", {"rng": state})
    expected = (random.random(), np.random.rand(), torch.rand(1).item(), np.random.randn())
    T.set_rng_state(T.load_checkpoint(tmp_path / "rng.pt")["rng"])
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
    assert torch.equal(T.load_checkpoint(path)["x"], torch.arange(3))  # the old one is intact
    assert [p.name for p in tmp_path.iterdir()] == ["ck.pt"]  # no temporary file left behind


def test_load_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m tmlib.train"):
        T.load_checkpoint(tmp_path / "none.pt")
    (tmp_path / "bad.pt").write_bytes(b"garbage")
    with pytest.raises(RuntimeError, match="delete it and train again"):
        T.load_checkpoint(tmp_path / "bad.pt")


# ------------------------------------------------------------------ the loop and exact resume


def _toy_examples(n=120, seed=0):
    """Reverse-a-sequence task over ids 4..19: short, varied lengths so that batches differ."""
    rng = np.random.default_rng(seed)
    ex = []
    for _ in range(n):
        s = rng.integers(4, 20, rng.integers(2, 9)).tolist()
        ex.append((s, s[::-1]))
    return ex


def _trainer(tmp_path, name, **cfg):
    torch.manual_seed(0)
    model = make_model("tiny", 20, dropout=0.1)  # dropout on: resume must restore torch's RNG
    config = T.TrainConfig(warmup_steps=5, lr_factor=2.0, max_tokens=96, seed=0, device="cpu", progress=False,
                           checkpoint_every=None, grad_clip=1.0, threads=1, **cfg)
    train = BatchIterator(_toy_examples(), max_tokens=96, seed=0)
    val = BatchIterator(_toy_examples(30, seed=1), max_tokens=96, shuffle=False)
    return T.Trainer(model, train, val, config, checkpoint_path=tmp_path / name / "checkpoint.pt")


def test_resume_is_exact(tmp_path):
    n_total, k = 40, 13
    full = _trainer(tmp_path, "full", max_steps=n_total)
    n_per_epoch = len(full.train_batches)
    assert n_per_epoch < k < n_total - n_per_epoch  # crosses epoch boundaries before and after the cut
    full.fit()

    first = _trainer(tmp_path, "cut", max_steps=k)
    first.fit()  # "interrupted" after k steps: the checkpoint is all that survives
    assert first.step == k
    torch.manual_seed(123), random.seed(5), np.random.seed(7)  # a new process would have other RNG states
    second = _trainer(tmp_path, "cut", max_steps=n_total)
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
    cut = _trainer(tmp_path, "cut", max_steps=20)
    cut.config.checkpoint_every = 7
    assert len(cut.train_batches) > 8  # step 7 is mid-epoch

    class Interrupt(Exception):
        pass

    real = cut.train_step
    calls = []

    def train_step(batch):  # a crash in the middle of step 9: only the step-7 checkpoint survives
        calls.append(1)
        if len(calls) == 9:
            raise Interrupt
        return real(batch)

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
    config = T.TrainConfig(preset="tiny", vocab_size=500, max_tokens=512, max_steps=3, warmup_steps=2,
                           device="cpu", progress=False, threads=1, model_overrides={"max_len": 128})
    out = tmp_path / "run"
    trainer = T.run_training(config, out, data_dir=SHARED)
    assert trainer.step == 3 and len(trainer.history["loss"]) == 3
    assert {"checkpoint.pt", "history.json", "tokenizer.json", "config.json"} <= {p.name for p in out.iterdir()}
    with pytest.raises(FileExistsError, match="resume"):
        T.run_training(config, out, data_dir=SHARED)
    model, tok, history, state = T.load_or_train(out, config, data_dir=SHARED, device="cpu")
    assert state["loaded"] and state["step"] == 3 and tok.vocab_size == 500
    for a, b in zip(trainer.model.state_dict().values(), model.state_dict().values()):
        assert torch.equal(a, b)
    # the CLI extends the same run by two steps (resume), keeping the stored config
    from tmlib.train import main

    main(["--out", str(out), "--resume", "--max-steps", "5", "--data-dir", str(SHARED), "--device", "cpu", "--threads", "1",
          "--no-progress"])
    state = T.load_checkpoint(out / "checkpoint.pt")
    assert state["step"] == 5 and state["config"]["preset"] == "tiny" and len(state["history"]["loss"]) == 5


@pytest.mark.parametrize("native", [True, False])
def test_cpu_amp_only_where_bf16_is_native(tmp_path, monkeypatch, native):
    monkeypatch.setattr(T, "cpu_has_native_bf16", lambda: native)
    on = _trainer(tmp_path, f"amp{native}", cpu_amp=True)
    off = _trainer(tmp_path, f"noamp{native}", cpu_amp=False)
    with on._autocast():
        assert torch.is_autocast_enabled("cpu") is native
    with off._autocast():
        assert torch.is_autocast_enabled("cpu") is False
    assert T.TrainConfig.from_dict(on.config.to_dict()).cpu_amp is True
