"""`python -m tmlib.translate`: translations of a tiny checkpoint, and a clear one-line error for every user error."""
import io
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from tmlib.data import BatchIterator, train_tokenizer  # noqa: E402
from tmlib.decoding import greedy_decode  # noqa: E402
from tmlib.model import PRESETS, make_model  # noqa: E402
from tmlib.training import TrainConfig, Trainer  # noqa: E402
from tmlib.translate import main  # noqa: E402

SENTENCES = ["ein mann fährt fahrrad .", "zwei hunde spielen im schnee .", "eine frau liest ein buch ."]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run folder with an (untrained) tiny model, written by the Trainer as a real run would be."""
    pairs = [(s, s.upper()) for s in SENTENCES] * 3
    tokenizer = train_tokenizer(pairs, vocab_size=120)
    torch.manual_seed(0)
    model = make_model(PRESETS["tiny"], tokenizer.vocab_size)
    examples = [(tokenizer.encode(de), tokenizer.encode(en)) for de, en in pairs]
    config = TrainConfig(model=model.config, max_steps=1, device="cpu", progress=False)
    folder = tmp_path_factory.mktemp("run")
    Trainer(model, BatchIterator(examples, 64), None, config, tokenizer, folder / "checkpoint.pt").save()
    return folder, model.eval(), tokenizer


def _greedy(model, tokenizer, sentence, max_len=6):
    ids = greedy_decode(model, torch.tensor([tokenizer.encode(sentence)]), tokenizer.bos_id, tokenizer.eos_id,
                        max_len=max_len)
    return tokenizer.decode(ids[0])


def _main(argv, capsys, stdin: bytes | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_translates_a_file_like_greedy_decoding_by_hand(run, tmp_path):
    folder, model, tokenizer = run
    (tmp_path / "in.de").write_text("\n".join(SENTENCES[:2]) + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "tmlib.translate", "--checkpoint", str(folder), "--beam-size", "1",
                           "--max-len", "6", "--input", str(tmp_path / "in.de"), "--device", "cpu", "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    assert lines[-1] == "" and len(lines) == 3  # one output line per input line
    assert lines[:2] == [_greedy(model, tokenizer, s) for s in SENTENCES[:2]]


def test_blank_unknown_and_bom_lines(run, capsys, monkeypatch):
    folder, model, tokenizer = run
    text = "\ufeff" + SENTENCES[0] + "\n   \n" + "\u4e2d\u6587\u5b57\n" + SENTENCES[1] + "\n"
    code, out, err = _main(["--checkpoint", str(folder), "--beam-size", "1", "--max-len", "6", "--device", "cpu"],
                           capsys, text.encode("utf-8"), monkeypatch)
    assert code == 0
    lines = out.split("\n")[:-1]
    assert lines == [_greedy(model, tokenizer, SENTENCES[0]), "", "", _greedy(model, tokenizer, SENTENCES[1])]
    assert "warning: line 3 is made only of characters unknown" in err
    assert tokenizer.unk_id not in tokenizer.encode(SENTENCES[0])  # the BOM did not turn the first word into <unk>


@pytest.mark.parametrize("argv, message", [
    (["--beam-size", "0"], "--beam-size must be >= 1, got 0"),
    (["--max-len", "0"], "--max-len must be >= 1, got 0"),
    (["--batch-tokens", "x"], "invalid int value: 'x'"),
    (["--input", "/nonexistent/in.de"], "--input /nonexistent/in.de does not exist"),
    (["--input", "/"], "--input / is a folder"),
])
def test_argument_errors(run, capsys, argv, message):
    code, out, err = _main(["--checkpoint", str(run[0])] + argv, capsys)
    assert code == 2 and out == "" and err.startswith("error: ") and message in err and err.count("\n") == 1


def test_checkpoint_errors(tmp_path, capsys):
    code, _, err = _main(["--checkpoint", str(tmp_path / "none.pt")], capsys)
    assert code == 2 and "no checkpoint at" in err and err.count("\n") == 1
    torch.save({"weights": torch.zeros(3)}, tmp_path / "other.pt")
    code, _, err = _main(["--checkpoint", str(tmp_path / "other.pt"), "--device", "cpu"], capsys)
    assert code == 2 and "not a tmlib checkpoint" in err and "weights_only" not in err and err.count("\n") == 1
    (tmp_path / "text.pt").write_text("hello")
    code, _, err = _main(["--checkpoint", str(tmp_path / "text.pt"), "--device", "cpu"], capsys)
    assert code == 2 and "not a PyTorch checkpoint file" in err


def test_invalid_utf8_on_stdin_and_in_a_file(run, tmp_path, capsys, monkeypatch):
    bad = SENTENCES[0].encode() + b"\n" + "Stra\u00dfe".encode("latin-1") + b"\n"
    code, out, err = _main(["--checkpoint", str(run[0]), "--device", "cpu"], capsys, bad, monkeypatch)
    assert code == 2 and out == "" and "stdin is not valid UTF-8 (line 2" in err and err.count("\n") == 1
    (tmp_path / "bad.de").write_bytes(bad)
    code, out, err = _main(["--checkpoint", str(run[0]), "--device", "cpu", "--input", str(tmp_path / "bad.de")],
                           capsys)
    assert code == 2 and "bad.de is not valid UTF-8 (line 2" in err
