"""Training that loses nothing and says the truth (issue 19): a diverged run saves nothing diverged and is never
finished or best; SIGTERM saves like Ctrl-C (exit 143), and a signal before training says that nothing was saved;
a run folder is never a user's folder and holds one run at a time; a full disk names the file system and keeps
the previous checkpoint; every bad argument is one ``error:`` line and exit status 2 before any work."""
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from tmlib import training as T  # noqa: E402
from tmlib.training import rundir  # noqa: E402
from test_training import SHARED, _trainer, needs_data  # noqa: E402

#: The smoke model of the command-line tests: a few seconds per run.
FAST = ["--preset", "tiny", "--vocab-size", "500", "--max-len", "128", "--max-tokens", "512", "--warmup-steps", "2",
        "--threads", "1", "--device", "cpu", "--amp", "off", "--noprogress", "--data-dir", str(SHARED)]
TORCH_DISK_FULL = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 292608 vs 292502")


@pytest.fixture(autouse=True)
def _one_tokenizer_per_size(monkeypatch):
    """Train each BPE vocabulary once for the whole module (the command-line tests would train it every time)."""
    from tmlib.data import tokenizer

    real = tokenizer.train_tokenizer
    cache = _one_tokenizer_per_size.cache

    def cached(pairs, vocab_size=8000, min_frequency=2):
        key = (len(pairs), vocab_size, min_frequency)
        if key not in cache:
            cache[key] = real(pairs, vocab_size, min_frequency).to_json()
        return tokenizer.BPETokenizer.from_json(cache[key])

    monkeypatch.setattr(tokenizer, "train_tokenizer", cached)


_one_tokenizer_per_size.cache = {}


def _main(capsys, argv) -> tuple[int, list[str]]:
    from tmlib.train import main

    code = main(argv)
    return code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def _one_error(capsys, argv, code=2) -> str:
    got, err = _main(capsys, argv)
    assert got == code and len(err) == 1 and err[0].startswith("error: "), (got, err)
    return err[0]


# ------------------------------------------------------------------ divergence


def _poison_after(trainer, step):
    """From optimizer step ``step`` on, a weight is NaN after the update (an overflow in the update) while the
    step's own loss, computed before it, is still finite."""
    real = trainer.train_step

    def train_step(*args):
        loss = real(*args)
        if trainer.step + 1 >= step:
            with torch.no_grad():
                next(trainer.model.parameters())[0] = float("nan")
        return loss

    trainer.train_step = train_step


def test_diverged_weights_never_overwrite_the_last_good_checkpoint(tmp_path):
    t = _trainer(tmp_path, "run", max_steps=20, checkpoint_every=3, log_every=100)
    _poison_after(t, 6)  # the losses of steps 1-6 are finite, the weights after step 6 are not
    with pytest.raises(T.Diverged, match=r"^model\.\S+ became NaN or infinite at step 6") as info:
        t.fit()
    assert isinstance(info.value, FloatingPointError) and info.value.step == 6 and not t.finished
    state = T.load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert state["step"] == 3 and not state["finished"]  # the checkpoint of step 3 is kept
    assert T.find_nonfinite(state) is None
    assert T.describe_checkpoint(tmp_path / "run") == f"the checkpoint of step 3 in {tmp_path / 'run'}"


def test_a_nan_validation_is_neither_finished_nor_best(tmp_path):
    t = _trainer(tmp_path, "run", max_steps=3, keep_best=True)
    t.evaluate = lambda batches=None: (float("nan"), float("nan"))
    with pytest.raises(T.Diverged, match="the validation loss became nan at step 3"):
        t.fit()
    assert t.best is None and not t.finished and t.history["val_loss"] == []
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_a_nan_loss_is_found_when_the_losses_are_read_back(tmp_path):
    """The loss stays on the device; it is checked every ``log_every`` steps (no synchronisation per step)."""
    t = _trainer(tmp_path, "run", max_steps=20, log_every=4, checkpoint_every=100)
    real, steps = t.train_step, []

    def train_step(*args):
        steps.append(1)
        loss = real(*args)
        return loss * float("nan") if len(steps) == 2 else loss

    t.train_step = train_step
    with pytest.raises(T.Diverged, match="the loss became nan at step 2"):
        t.fit()
    assert len(steps) == 4 and len(t.history["loss"]) == 1  # found when step 4 read the losses back


def test_find_nonfinite_names_the_tensor():
    state = {"model": {"w": torch.ones(2), "b": torch.tensor([1.0, float("inf")])}, "rng": torch.arange(3), "x": 1}
    assert T.find_nonfinite(state) == "model.b"
    assert T.find_nonfinite({"m": [torch.zeros(1)], "ids": torch.tensor([1, 2])}) is None


@needs_data
def test_cli_divergence_exits_1_and_saves_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    line = _one_error(capsys, FAST + ["--out", str(out), "--lr-factor", "1e30", "--max-steps", "1"], code=1)
    assert "the training diverged (the validation loss became nan at step 1)" in line
    assert "nothing was saved" in line and "lower --lr-factor (this run: 1e+30)" in line
    assert not (out / "checkpoint.pt").exists()


# ------------------------------------------------------------------ SIGTERM and Ctrl-C


def test_sigterm_finishes_the_step_saves_and_resumes_exactly(tmp_path):
    full = _trainer(tmp_path, "full", max_steps=12)
    full.fit()
    cut = _trainer(tmp_path, "cut", max_steps=12)
    real, calls = cut.train_step, []

    def train_step(*args):  # `kill` arrives in the middle of step 5
        calls.append(1)
        if len(calls) == 5:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args)

    cut.train_step = train_step
    with pytest.raises(T.Interrupted) as info:
        cut.fit()
    assert (info.value.signum, info.value.saved_step) == (signal.SIGTERM, 5)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is given back
    again = _trainer(tmp_path, "cut", max_steps=12)
    assert again.resume() and again.step == 5
    again.fit()
    assert again.history["loss"] == full.history["loss"]


def test_sigterm_outside_training_interrupts_like_ctrl_c():
    with pytest.raises(T.Interrupted) as info:
        with T.sigterm_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):  # (the handler runs between bytecodes)
                pass
    assert info.value.signum == signal.SIGTERM and info.value.saved_step is None


@needs_data
def test_cli_sigterm_saves_and_exits_143(tmp_path, capsys, monkeypatch):
    real, calls = T.Trainer.train_step, []

    def train_step(self, *args):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, *args)

    monkeypatch.setattr(T.Trainer, "train_step", train_step)
    out = tmp_path / "run"
    code, err = _main(capsys, FAST + ["--out", str(out), "--max-steps", "10"])
    assert code == 143 and err[-1] == (f"interrupted (SIGTERM) at step 2: the checkpoint in {out} is saved; continue "
                                       f"with `python -m tmlib.train --out {out} --resume`")
    assert T.load_checkpoint(out / "checkpoint.pt")["step"] == 2


@needs_data
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_cli_signal_while_preparing_data_says_nothing_was_saved(tmp_path, capsys, monkeypatch, signum, code):
    def prepare(*args, **kwargs):  # the signal arrives while the data is prepared; Python raises it at its next check
        signal.pthread_kill(threading.get_ident(), signum)  # to this (the main) thread, not to a helper thread
        for _ in range(500):  # up to 5 s: a loaded machine may be slow to run the handler
            time.sleep(0.01)
        raise AssertionError("the signal was not handled within 5 s")

    real = T.TranslationData.__dict__["prepare"]
    monkeypatch.setattr(T.TranslationData, "prepare", prepare)
    out = tmp_path / "run"
    # Python's own Ctrl-C handler, as in a fresh process, for every call below: an earlier test in the same run may
    # have left another, and a process started in the background (nohup, `&`) inherits SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        got, err = _main(capsys, FAST + ["--out", str(out), "--max-steps", "10"])
        how = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        assert got == code and err[-1] == (f"interrupted ({how}) before the first checkpoint: nothing was saved; "
                                           "run the same command again to start")
        assert not (out / "checkpoint.pt").exists()
        # in a run that has a checkpoint, a signal before training says that the old one is intact
        monkeypatch.setattr(T.TranslationData, "prepare", real)
        assert _main(capsys, FAST + ["--out", str(out), "--max-steps", "1"])[0] == 0
        monkeypatch.setattr(T.TranslationData, "prepare", prepare)
        got, err = _main(capsys, ["--out", str(out), "--max-steps", "2", "--resume", "--threads", "1",
                                  "--noprogress", "--data-dir", str(SHARED)])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert got == code and f"nothing new was saved, the checkpoint of step 1 in {out} is intact" in err[-1]


def test_help_gives_the_exit_statuses():
    from tmlib.train import build_parser

    text = " ".join(build_parser().format_help().split())
    assert "130 Ctrl-C, 143 SIGTERM (128 + the signal" in text


# ------------------------------------------------------------------ the run folder


def test_a_folder_of_other_files_and_the_current_folder_are_refused(tmp_path, capsys, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("my settings")
    line = _one_error(capsys, ["--out", str(mine), "--max-steps", "1"])
    assert "holds other files and is not a training run folder" in line
    assert (mine / "config.json").read_text() == "my settings" and sorted(os.listdir(mine)) == ["config.json"]
    monkeypatch.chdir(tmp_path)
    assert "is the current folder, which is not a training run folder" in _one_error(capsys, ["--out", ".",
                                                                                              "--max-steps", "1"])
    (tmp_path / rundir.RUN_MARKER).write_text("")  # a run folder may be continued from inside it
    assert T.check_run_folder(".") == Path(".")
    assert T.check_run_folder(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    T.check_run_folder(tmp_path / "empty")


def test_a_run_folder_holds_one_run_at_a_time(tmp_path, capsys):
    out = tmp_path / "run"
    with T.hold_run_folder(out):
        assert (out / rundir.RUN_MARKER).read_text().startswith(f"pid {os.getpid()} on ")
        line = _one_error(capsys, ["--out", str(out), "--max-steps", "1", "--data-dir", str(SHARED)])
        assert line.startswith(f"error: {out} is in use by another training run (pid {os.getpid()} on ")
        with pytest.raises(T.RunFolderError, match="in use by another training run"):
            T.run_training(T.SMOKE, out)
    with T.hold_run_folder(out):  # released: it can be held again
        pass
    assert T.is_run_folder(out)


def test_the_lock_of_a_killed_run_is_released(tmp_path):
    out = tmp_path / "run"
    code = (f"import os\nfrom tmlib.training import hold_run_folder\nwith hold_run_folder({str(out)!r}):\n"
            "    os._exit(9)")
    env = {**os.environ, "PYTHONPATH": str(Path(T.__file__).parents[2])}
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 9
    with T.hold_run_folder(out):
        pass


# ------------------------------------------------------------------ a full disk


def _full_disk(monkeypatch, free=1000):
    """``shutil.disk_usage`` says that ``free`` bytes are left."""
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: SimpleNamespace(total=10**9, used=10**9 - free, free=free))


def test_torch_runtime_error_on_a_full_disk_names_the_file_system(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    T.save_checkpoint(path, {"format": T.CHECKPOINT_FORMAT, "step": 1})

    def full(obj, f, *a, **k):
        Path(f).write_bytes(b"PK" * 100)  # torch had written part of it
        raise TORCH_DISK_FULL

    monkeypatch.setattr(torch, "save", full)
    _full_disk(monkeypatch)
    with pytest.raises(T.CheckpointError) as info:
        T.save_checkpoint(path, {"format": T.CHECKPOINT_FORMAT, "step": 2, "w": torch.zeros(1000)})
    from tmlib.utils import mount_point

    assert str(info.value).startswith(f"no space left on the device ({mount_point(tmp_path)}) while saving {path} "
                                      "(the checkpoint needs about 4 KB); the previous checkpoint is intact")
    monkeypatch.undo()
    assert T.load_checkpoint(path)["step"] == 1 and os.listdir(tmp_path) == ["checkpoint.pt"]


def test_torch_runtime_error_with_space_left_is_a_plain_write_error(tmp_path, monkeypatch):
    monkeypatch.setattr(torch, "save", lambda *a, **k: (_ for _ in ()).throw(TORCH_DISK_FULL))
    with pytest.raises(T.CheckpointError, match=r"cannot write .*checkpoint.pt \(\[enforce fail.*no checkpoint was "
                                                r"written"):
        T.save_checkpoint(tmp_path / "checkpoint.pt", {"w": torch.zeros(10)})


@pytest.mark.parametrize("where", ["write", "fsync"])
def test_enospc_from_the_file_write_keeps_the_previous_file(tmp_path, monkeypatch, where):
    from tmlib.utils import DiskFullError, atomic_write, mount_point

    target = tmp_path / "history.json"
    target.write_text("old")
    if where == "fsync":
        monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")))
    with pytest.raises(DiskFullError) as info:
        with atomic_write(target) as tmp:
            tmp.write_text("new")
            if where == "write":
                raise OSError(errno.ENOSPC, "No space left on device")
    assert info.value.errno == errno.ENOSPC
    assert str(info.value) == (f"no space left on the device ({mount_point(tmp_path)}) while saving {target}; the "
                               "previous history.json is intact")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["history.json"]


@needs_data
def test_cli_full_disk_is_one_line_exit_1(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch, "save", lambda *a, **k: (_ for _ in ()).throw(TORCH_DISK_FULL))
    _full_disk(monkeypatch)
    out = tmp_path / "run"
    line = _one_error(capsys, FAST + ["--out", str(out), "--max-steps", "1"], code=1)
    assert line.startswith("error: no space left on the device (") and "no checkpoint was written" in line


# ------------------------------------------------------------------ every argument checked before any work


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the data is prepared or a model built: the error must come before any work."""
    def work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(T.TranslationData, "prepare", work)
    monkeypatch.setattr(T.Trainer, "__init__", work)


def _bad_checkpoint(tmp_path, content: bytes) -> Path:
    run = tmp_path / "bad"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(content)
    return run


@pytest.mark.parametrize("argv, message", [
    (["--seed", "4294967296"], "--seed must be <= 4294967295, got 4294967296"),
    (["--seed", "-1"], "--seed must be >= 0, got -1"),
    (["--max-len", "8"], "--max-len must be >= 37, got 8: the longest Multi30k validation sentence has 37 words"),
    (["--max-len", "1000000000"], "--max-len must be <= 65536"),
    (["--vocab-size", "5"], "--vocab-size must be >= 105, got 5"),
    (["--max-sentence-len", "1"], "--max-sentence-len must be >= 5, got 1"),
    (["--accumulate", "100000"], "--accumulate 100000 × 1 process(es) asks for more batches"),
    (["--threads", "100000"], "--threads must be <= "),
    (["--num-workers", "100000"], "--num-workers must be <= "),
    (["--lr", "0.001"], "unrecognized arguments: --lr 0.001"),
    (["--lr-factor", "1e44"], "--lr-factor must keep the peak learning rate"),
    (["--max-tokens", "0"], "--max-tokens must be >= 1, got 0"),
    (["--warmup-steps", "0"], "--warmup-steps must be >= 1, got 0"),
    (["--label-smoothing", "1.5"], "--label-smoothing must be < 1.0, got 1.5"),
])
def test_bad_arguments_are_one_line_before_any_work(tmp_path, capsys, no_work, argv, message):
    out = tmp_path / "run"
    assert message in _one_error(capsys, argv + ["--out", str(out), "--max-steps", "1", "--data-dir", str(SHARED)])
    assert not out.exists()


def test_device_mps_is_one_line(tmp_path, capsys, no_work):
    if torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    assert "device 'mps' was requested" in _one_error(capsys, ["--device", "mps", "--out", str(tmp_path / "r"),
                                                               "--data-dir", str(SHARED)])


def test_an_out_name_too_long_is_one_line(tmp_path, capsys, no_work):
    line = _one_error(capsys, ["--out", str(tmp_path / ("a" * 300)), "--max-steps", "1"])
    assert "as the run folder: File name too long" in line and len(line) < 200


@pytest.mark.parametrize("content", [b"", b"\x00\xff" * 500, "zip"])
def test_resume_from_an_unreadable_checkpoint_is_one_line(tmp_path, capsys, no_work, content):
    if content == "zip":  # a real checkpoint cut short
        T.save_checkpoint(tmp_path / "good.pt", {"format": T.CHECKPOINT_FORMAT, "w": torch.zeros(10000)})
        content = (tmp_path / "good.pt").read_bytes()[:20000]
    run = _bad_checkpoint(tmp_path, content)
    line = _one_error(capsys, ["--out", str(run), "--resume", "--max-steps", "1"])
    assert str(run / "checkpoint.pt") in line and ("not a PyTorch checkpoint" in line or "truncated" in line)
    torch.save({"format": T.CHECKPOINT_FORMAT, "config": {"bogus": 1}}, run / "checkpoint.pt")
    assert "holds no training configuration" in _one_error(capsys, ["--out", str(run), "--resume"])


@needs_data
@pytest.mark.parametrize("argv, message", [
    (["--max-len", "64"], "a training pair has 98 tokens, more than the model's --max-len 64: lower "
                          "--max-sentence-len to 64 or raise --max-len to 98"),
    (["--max-len", "70", "--max-sentence-len", "70"], "a validation pair has 78 tokens, more than the model's "
                                                      "--max-len 70: raise --max-len to 78"),
    (["--accumulate", "10000"], "fewer than the 10000 one optimizer step needs (--accumulate 10000 × 1 "
                                "process(es)): lower --accumulate or --max-tokens"),
])
def test_what_only_the_prepared_data_tells_stops_before_training(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.setattr(T.Trainer, "fit", lambda self: pytest.fail("trained"))
    out = tmp_path / "run"
    assert message in _one_error(capsys, FAST + argv + ["--out", str(out), "--max-steps", "1"])
    assert os.listdir(out) == [rundir.RUN_MARKER]  # nothing written but the marker


@needs_data
def test_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    def oom(self, *args):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(T.Trainer, "train_step", oom)
    line = _one_error(capsys, FAST + ["--out", str(tmp_path / "run"), "--max-steps", "1"], code=1)
    assert line.startswith("error: out of memory (") and "lower --max-tokens (this run: 512)" in line


# ------------------------------------------------------------------ issue 26: resuming, the command line's words


@needs_data
def test_resume_never_overwrites_a_users_files_beside_a_copied_checkpoint(tmp_path, capsys):
    """A course checkpoint copied into a folder of one's own, beside one's config.json and history.json: resuming
    there is refused and the files are untouched; the run's own folder resumes (its files are the checkpoint's)."""
    run = tmp_path / "run"
    code, _ = _main(capsys, FAST + ["--out", str(run), "--max-steps", "1"])
    assert code == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy2(run / "checkpoint.pt", mine / "checkpoint.pt")
    (mine / "config.json").write_text('{"my": "settings"}')
    (mine / "history.json").write_text("my notes")
    line = _one_error(capsys, ["--out", str(mine), "--resume", "--max-steps", "2", "--data-dir", str(SHARED)])
    assert "holds a config.json and history.json that are not its checkpoint's own" in line
    assert "--out NEW --resume" in line
    assert (mine / "config.json").read_text() == '{"my": "settings"}' and (mine / "history.json").read_text() == "my notes"
    assert sorted(os.listdir(mine)) == ["checkpoint.pt", "config.json", "history.json"]  # no marker written either
    (mine / "history.json").unlink()
    assert "holds a config.json that is not" in _one_error(capsys, ["--out", str(mine), "--resume"])
    with pytest.raises(T.RunFolderError, match="config.json that is not"):  # the library refuses too
        T.run_training(T.SMOKE, mine, resume=True)
    assert (mine / "config.json").read_text() == '{"my": "settings"}'
    code, _ = _main(capsys, ["--out", str(run), "--resume", "--max-steps", "2", "--max-minutes", "5",
                             "--data-dir", str(SHARED)])
    assert code == 0 and T.load_checkpoint(run / "checkpoint.pt")["step"] == 2


@needs_data
@pytest.mark.parametrize("argv, field", [(["--vocab-size", "400"], "--vocab-size"), (["--dropout", "0.3"], "--dropout"),
                                         (["--max-len", "100"], "--max-len")])
def test_resume_names_the_model_field_that_differs(tmp_path, capsys, argv, field):
    run = tmp_path / "run"
    assert _main(capsys, FAST + ["--out", str(run), "--max-steps", "1"])[0] == 0
    line = _one_error(capsys, ["--out", str(run), "--resume", "--data-dir", str(SHARED)] + argv)
    assert f"cannot change {field} (the run has " in line and f"the command line gives {argv[1]}" in line
    assert "ModelConfig" not in line and len(line) < 200, line


def test_help_has_no_doubled_defaults_headers_or_markup(capsys):
    from tmlib.train import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])  # (simple_parsing adds the dataclasses' options when parsing)
    text = capsys.readouterr().out
    flat = " ".join(text.split())
    assert "(default: $TMLIB_DATA_DIR, else the user cache)" in flat
    for bad in ("['config']", "['model']", "``", ":class:", ":data:", ":func:", ":mod:", "(default: None)"):
        assert bad not in text, bad
    for option_help in re.split(r"\n  -", text):
        assert option_help.count("(default") <= 1, option_help
    assert "--max-minutes" in text and "--d-model" in text


@needs_data
def test_the_first_line_comes_before_the_data_is_prepared(tmp_path, capsys, monkeypatch):
    """The command says at once what it does (before the seconds of loading and the tokenizer)."""
    seen = []

    def prepare(*args, **kwargs):
        seen.append(capsys.readouterr().out)
        raise KeyboardInterrupt

    monkeypatch.setattr(T.TranslationData, "prepare", prepare)
    _main(capsys, FAST + ["--out", str(tmp_path / "run"), "--max-minutes", "2"])
    assert seen and seen[0].startswith(f"tmlib.train: a new run in {tmp_path / 'run'}, training for 2 minutes"), seen


def test_budgets_read_one_epoch_not_one_epochs():
    from tmlib.train import _budget

    assert _budget(T.TrainConfig(max_minutes=1.0, max_steps=1, max_epochs=1)) == (
        "1 minute or 1 step or 1 epoch, whichever comes first")
    assert _budget(T.TrainConfig(max_minutes=0.5, max_steps=30, max_epochs=2)) == (
        "0.5 minutes or 30 steps or 2 epochs, whichever comes first")


@needs_data
def test_the_last_line_counts_in_the_singular_for_one(tmp_path, capsys):
    from tmlib.train import main

    assert main(FAST + ["--out", str(tmp_path / "run"), "--max-steps", "1"]) == 0
    out = capsys.readouterr().out
    assert " or 1 step, whichever" in out and "done: 1 step, 0 epochs, " in out, out


def test_a_budget_in_minutes_shows_minutes_done_of_minutes_planned(tmp_path, capsys):
    from test_training import _trainer

    import dataclasses

    trainer = _trainer(tmp_path, "run", max_minutes=0.05)
    trainer.config = dataclasses.replace(trainer.config, progress=True, progress_interval=0.0)
    trainer.fit()
    err = capsys.readouterr().err
    shown = re.findall(r"(\d+\.\d)/(\d+\.\d) min", err)
    assert shown and all(total == "0.1" for _, total in shown), err[-500:]  # 0.05 minutes, shown as 0.1
    assert "step=" in err and "step/s" not in err
    trainer = _trainer(tmp_path, "steps", max_steps=3)
    trainer.config = dataclasses.replace(trainer.config, progress=True, progress_interval=0.0)
    trainer.fit()
    assert "3/3" in capsys.readouterr().err
