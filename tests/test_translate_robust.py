"""`python -m tmlib.translate` as a careless user meets it: out-of-bounds options, abbreviated options, FIFOs
and /dev/stdin, a device the machine lacks, a diverged checkpoint, a forged configuration, over-long and
unknown lines, a closed output pipe. Every case ends in exit status 0 with output, 141 in silence, or 2 with
one ``error:`` line."""
import io
import os
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")

from test_translate_cli import SENTENCES, _main, run  # noqa: E402,F401 - `run` is the shared tiny-run fixture
from tmlib.training.checkpoint import load_checkpoint  # noqa: E402
from tmlib.translate import EXIT_BROKEN_PIPE, build_parser, main  # noqa: E402

LONG = " ".join([SENTENCES[0]] * 20)  # about 100 tokens: more than the tiny model's 64 positions
UNKNOWN = "\u4e2d\u6587\u5b57"
FAST = ["--device", "cpu", "--beam-size", "1", "--max-len", "4"]


def _one_error(code, out, err, *parts):
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1, (code, err)
    for part in parts:
        assert part in err, err


def _forged(folder, tmp_path, **sizes):
    """A copy of the run's checkpoint whose stored model configuration says ``sizes``."""
    state = load_checkpoint(folder / "checkpoint.pt")
    state["model_config"].update(sizes)
    state["config"]["model"].update(sizes)
    torch.save(state, tmp_path / "forged.pt")
    return tmp_path / "forged.pt"


# -------------------------------------------------------------------------------- bounds
@pytest.mark.parametrize("argv, message", [
    (["--beam-size", "100000"], "--beam-size must be <= 1000, got 100000"),
    (["--batch-tokens", "100001"], "--batch-tokens must be <= 100000, got 100001"),
    (["--max-len", "65537"], "--max-len must be <= 65536, got 65537"),
    (["--length-penalty", "5.5"], "--length-penalty must be <= 5.0, got 5.5"),
    (["--length-penalty", "inf"], "--length-penalty must be finite"),
    (["--length-penalty", "nan"], "--length-penalty must be finite"),
    (["--length-penalty", "-1"], "--length-penalty must be >= 0.0"),
    (["--max-len", "65"], "--max-len 65 is more than the model's 64 positions (its max_len); use at most 64"),
    (["--beam", "4"], "unrecognized arguments: --beam 4"),  # no abbreviations: --beam is not --beam-size
    (["--quie"], "unrecognized arguments: --quie"),
])
def test_options_out_of_bounds(run, capsys, argv, message):
    code, out, err = _main(["--checkpoint", str(run[0]), "--device", "cpu", "--input", os.devnull] + argv, capsys)
    _one_error(code, out, err, message)


def test_the_bounds_are_inclusive_and_stated_in_help(run, capsys):
    code, out, err = _main(["--checkpoint", str(run[0]), "--input", os.devnull, "--device", "cpu", "--max-len", "64",
                            "--length-penalty", "5", "--batch-tokens", "100000", "--beam-size", "1000"], capsys)
    assert (code, out, err) == (0, "", "")
    text = " ".join(build_parser().format_help().split())
    for bound in ("1 to 1,000", "1 to 100,000", "0 to 5", "1 to the model's max_len (at most 65,536)", "141"):
        assert bound in text


# -------------------------------------------------------------------------------- inputs that are not regular files
def test_a_named_pipe_is_read(run, tmp_path, capsys):
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "w", encoding="utf-8") as f:
            f.write(SENTENCES[0] + "\n\n")

    writer = threading.Thread(target=write)
    writer.start()
    code, out, err = _main(["--checkpoint", str(run[0]), "--input", str(fifo), "--quiet"] + FAST, capsys)
    writer.join(timeout=60)
    assert code == 0 and err == "" and len(out.split("\n")) == 3 and out.split("\n")[1] == ""


def test_dev_stdin_is_read(run):
    proc = subprocess.run([sys.executable, "-m", "tmlib.translate", "--checkpoint", str(run[0]), "--input",
                           "/dev/stdin", "--quiet"] + FAST, input=SENTENCES[0] + "\n", capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout.count("\n") == 1


@pytest.mark.parametrize("path, message", [("missing.de", "does not exist"), (".", "is a folder, not a text file")])
def test_a_missing_file_and_a_folder(run, tmp_path, capsys, path, message):
    code, out, err = _main(["--checkpoint", str(run[0]), "--input", str(tmp_path / path)], capsys)
    _one_error(code, out, err, message)


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has an Apple GPU")
def test_a_device_this_machine_lacks(run, capsys):
    if torch.backends.mps.is_available():
        pytest.skip("this machine has Apple's MPS device, so --device mps is not missing here")
    code, out, err = _main(["--checkpoint", str(run[0]), "--device", "mps", "--input", os.devnull], capsys)
    _one_error(code, out, err, "device 'mps' was requested")


# -------------------------------------------------------------------------------- a non-finite model
def test_a_model_with_non_finite_weights_is_refused(run, tmp_path, capsys):
    folder = run[0]
    state = load_checkpoint(folder / "checkpoint.pt")
    for weights in (state["model"], (state.get("best") or {}).get("model")):
        if weights is not None:
            name = sorted(k for k, v in weights.items() if v.is_floating_point())[0]
            weights[name].view(-1)[:2] = torch.tensor([float("nan"), float("inf")])
    torch.save(state, tmp_path / "diverged.pt")
    code, out, err = _main(["--checkpoint", str(tmp_path / "diverged.pt"), "--input", os.devnull] + FAST, capsys)
    _one_error(code, out, err, "has 2 non-finite weights (NaN or inf) in 1 tensor(s)", f"the first in {name}",
               "probably diverged")


# -------------------------------------------------------------------------------- a forged configuration
@pytest.mark.parametrize("sizes, message", [
    (dict(max_len=10**9), "max_len=1000000000, more than the 65,536 this command accepts"),
    (dict(n_encoder_layers=10**6), "n_encoder_layers=1000000, more than the 1,024"),
    (dict(vocab_size=10**7), "vocab_size=10000000, more than the 1,048,576"),
    (dict(d_model=16_384, vocab_size=1_000_000), "numbers, more than the 2,147,483,648"),
])
def test_a_forged_configuration_is_refused_before_the_model_is_built(run, tmp_path, capsys, monkeypatch, sizes,
                                                                     message):
    def load_trained(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr("tmlib.training.experiment.load_trained", load_trained)
    code, out, err = _main(["--checkpoint", str(_forged(run[0], tmp_path, **sizes)), "--device", "cpu"], capsys)
    _one_error(code, out, err, message, "damaged or was not written by tmlib")


# -------------------------------------------------------------------------------- warnings
def test_warnings_are_one_plain_line_numbered_from_1_and_quiet_silences_them(run, capsys, monkeypatch):
    text = "\n".join([SENTENCES[0], LONG, UNKNOWN, SENTENCES[1], LONG]) + "\n"
    argv = ["--checkpoint", str(run[0])] + FAST
    code, out, err = _main(argv, capsys, text.encode(), monkeypatch)
    assert code == 0 and len(out.split("\n")) == 6
    warnings = [line for line in err.splitlines() if line and "translating" not in line]  # not the progress bar
    assert warnings == [
        "warning: line 3 is made only of characters unknown to the vocabulary and was not translated "
        "(is the input German?)",
        "warning: 2 lines (2, 5) have more tokens than the model's 64 positions; only their first 64 tokens were "
        "translated"]
    code, out, err = _main(argv + ["--quiet"], capsys, text.encode(), monkeypatch)
    assert code == 0 and err == "" and len(out.split("\n")) == 6


class _Terminal(io.TextIOWrapper):
    def isatty(self):
        return True


def test_interactive_lines_are_numbered_as_typed(run, capsys, monkeypatch):
    typed = "\n".join([SENTENCES[0], UNKNOWN, LONG]) + "\n"
    monkeypatch.setattr(sys, "stdin", _Terminal(io.BytesIO(typed.encode()), encoding="utf-8"))
    code = main(["--checkpoint", str(run[0])] + FAST)
    out, err = capsys.readouterr()
    assert code == 0 and len(out.split("\n")) == 4
    assert err.splitlines() == [
        "warning: line 2 is made only of characters unknown to the vocabulary and was not translated "
        "(is the input German?)",
        "warning: line 3 has more tokens than the model's 64 positions; only its first 64 tokens were translated"]


# -------------------------------------------------------------------------------- a closed output pipe
class _ClosedPipe(io.RawIOBase):
    """An output whose reader went away: the first write fails with EPIPE (later ones are dropped)."""

    def __init__(self):
        self.failed = False

    def writable(self):
        return True

    def write(self, data):
        if not self.failed:
            self.failed = True
            raise BrokenPipeError(32, "Broken pipe")
        return len(data)


def test_a_closed_output_pipe_exits_141_in_silence(run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(_ClosedPipe(), encoding="utf-8"))
    code, _, err = _main(["--checkpoint", str(run[0]), "--quiet"] + FAST, capsys, b"ein mann .\n", monkeypatch)
    assert code == EXIT_BROKEN_PIPE == 141 and err == ""


def test_a_closed_output_pipe_in_a_real_process(run, tmp_path):
    (tmp_path / "in.de").write_text("\n".join(SENTENCES * 50) + "\n", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "tmlib.translate", "--checkpoint", str(run[0]), "--input",
                             str(tmp_path / "in.de"), "--quiet"] + FAST, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line is written (like `| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == ""


# -------------------------------------------------------------------------------- unbounded input, odd files
def test_dev_zero_is_one_error_line_in_bounded_memory(run):
    """/dev/zero has no line end: the first megabyte is read, not all of it (a MemoryError before)."""
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    proc = subprocess.run([sys.executable, "-m", "tmlib.translate", "--checkpoint", str(run[0]), "--input", "/dev/zero",
                           "--quiet"] + FAST, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr == "error: line 1 of /dev/zero is longer than 1,048,576 bytes (is it text, with one sentence " \
                          "per line?)\n"


def test_input_is_read_and_translated_in_pieces(run, capsys, monkeypatch):
    """Many lines are read in pieces of about PIECE_BYTES: the output is the same, in order, line for line, and a
    warning and a decoding error still name the line of the whole input."""
    import tmlib.translate as tr

    monkeypatch.setattr(tr, "PIECE_BYTES", 64)
    lines = [SENTENCES[i % len(SENTENCES)] for i in range(12)] + ["", UNKNOWN]
    pieces = list(tr.read_pieces(io.BytesIO(("\n".join(lines) + "\n").encode()), "x", piece_bytes=64))
    assert len(pieces) > 3 and [p[0] for p in pieces] == [1] + [1 + sum(len(p[1]) for p in pieces[:i])
                                                              for i in range(1, len(pieces))]
    assert [line for _, p in pieces for line in p] == lines
    code, out, err = _main(["--checkpoint", str(run[0])] + FAST, capsys, ("\n".join(lines) + "\n").encode(),
                           monkeypatch)
    monkeypatch.setattr(tr, "PIECE_BYTES", 1 << 20)
    whole = _main(["--checkpoint", str(run[0])] + FAST, capsys, ("\n".join(lines) + "\n").encode(), monkeypatch)
    assert code == 0 and out == whole[1] and out.count("\n") == len(lines)
    assert err.count("translating (greedy): 100%") > whole[2].count("translating (greedy): 100%")  # pieces
    assert f"warning: line {len(lines)} is made only of characters unknown" in err
    bad = "\n".join(lines[:8]).encode() + b"\n\xff\n"
    with pytest.raises(ValueError, match=r"line 9, byte %d" % (len(bad) - 2)):
        list(tr.read_pieces(io.BytesIO(bad), "x", piece_bytes=16))


def test_a_symbolic_link_loop_is_named(run, tmp_path, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    code, out, err = _main(["--checkpoint", str(run[0]), "--input", str(loop)] + FAST, capsys)
    _one_error(code, out, err, f"--input {loop} is a symbolic link that loops back on itself")
    code, out, err = _main(["--checkpoint", str(loop), "--input", os.devnull] + FAST, capsys)
    _one_error(code, out, err, f"--checkpoint {loop} is a symbolic link that loops back on itself")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    code, out, err = _main(["--checkpoint", str(run[0]), "--input", str(dangling)] + FAST, capsys)
    _one_error(code, out, err, "is a symbolic link to a missing file")


def test_a_pickle_with_code_is_refused_as_code(run, tmp_path, capsys):
    import pickle

    class Exploit:
        def __reduce__(self):
            return (os.system, ("echo owned > " + str(tmp_path / "owned"),))

    for name, write in (("zip.pt", lambda p: torch.save({"format": 1, "x": Exploit()}, p)),
                        ("raw.pt", lambda p: p.write_bytes(pickle.dumps(Exploit())))):
        write(tmp_path / name)
        code, out, err = _main(["--checkpoint", str(tmp_path / name), "--input", os.devnull] + FAST, capsys)
        _one_error(code, out, err, "holds Python objects that could run code when loaded; it was refused")
    assert not (tmp_path / "owned").exists()


def test_a_run_before_its_first_save_is_training(run, tmp_path, capsys):
    from tmlib.training import hold_run_folder

    folder = tmp_path / "training"
    with hold_run_folder(folder):  # a run that has started and not saved yet
        code, out, err = _main(["--checkpoint", str(folder), "--input", os.devnull] + FAST, capsys)
        _one_error(code, out, err, f"a training run (pid {os.getpid()} on ", "has not saved its first checkpoint")
    code, out, err = _main(["--checkpoint", str(folder), "--input", os.devnull] + FAST, capsys)  # it died
    _one_error(code, out, err, "stopped before its first save")
