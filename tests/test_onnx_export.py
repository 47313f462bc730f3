"""The ONNX export of the Transformer (tmlib.export.onnx) against PyTorch, with onnxruntime, on a small model.

The translator page runs these graphs; `tests/test_translator_browser.py` checks the page against PyTorch in a
real browser. Here: the next-token logits and the cross-attention agree within float32's tolerance for the model's
forward chain (tests/tolerances.py), greedy decoding gives the same tokens, for sources of many lengths (the
lengths are dynamic), and on a padded batch of several sentences (the batch is dynamic, padding masked); and the
comparison can fail (another model's graphs are caught).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from tmlib.export import (DECODER_FILE, ENCODER_FILE, OnnxTranslator, compare_with_torch, export_onnx,  # noqa: E402
                          torch_greedy_with_attention)
from tmlib.model import make_model  # noqa: E402
from tolerances import assert_close, tolerance, transformer_reduction_length  # noqa: E402

BOS, EOS = 1, 2


def _model(seed: int):
    torch.manual_seed(seed)
    model = make_model("tiny", src_vocab_size=60, max_len=128, dropout=0.0).eval()
    with torch.no_grad():  # a little bias towards <eos>, so that some outputs end before the length limit
        model.generator.proj.bias[EOS] += 4.0
    return model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx")
    model = _model(0)
    paths = export_onnx(model, folder)
    return model, folder, paths


def _sources(n: int, seed: int = 1) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(4, 60, size=int(rng.integers(1, 25))).tolist() for _ in range(n)]


def test_files_and_shapes(exported):
    model, folder, paths = exported
    assert paths == {"encoder": folder / ENCODER_FILE, "decoder": folder / DECODER_FILE}
    tr = OnnxTranslator(folder)
    memory = tr.encode([5, 6, 7])
    assert memory.shape == (1, 3, model.d_model) and memory.dtype == np.float32
    logits, cross = tr.step([BOS, 9, 10, 11], memory, [5, 6, 7])
    n_layers = len(model.decoder.layers)
    assert logits.shape == (model.tgt_vocab_size,)
    assert cross.shape == (n_layers, model.n_heads, 3)
    assert_close(cross.sum(-1), 1.0, n=2 * 3)  # each head's weights over the 3 source tokens sum to 1


def test_onnx_equals_pytorch(exported):
    """Greedy decoding of 12 random sources (1 to 24 tokens): identical tokens, logits and attention close."""
    model, folder, _ = exported
    report = compare_with_torch(model, OnnxTranslator(folder), _sources(12), BOS, EOS)
    assert report["sentences"] == 12
    assert report["identical"] == 12, report
    # float32: the forward chain at up to 24 source tokens and 24 + 50 output steps
    n = transformer_reduction_length(model.config, 24, 24 + 50)
    assert report["max_logit_diff"] <= tolerance(torch.float32, n, report["max_abs_logit"]), report
    assert report["max_attention_diff"] <= tolerance(torch.float32, n, 1.0), report


def test_step_by_step_against_the_model(exported):
    """One decoder step of the graph equals `model.decode` on the same prefix (last position)."""
    model, folder, _ = exported
    tr = OnnxTranslator(folder)
    src, prefix = [7, 8, 9, 10, 11, 12, 13], [BOS, 20, 21, 22, 23, 24]
    with torch.no_grad():
        s = torch.tensor([src])
        expected = model.decode(torch.tensor([prefix]), model.encode(s), s)[0, -1].numpy()
    logits, _ = tr.step(prefix, tr.encode(src), src)
    assert_close(logits, expected, n=transformer_reduction_length(model.config, len(src), len(prefix)))


def test_greedy_matches_tmlib_greedy_decode(exported):
    from tmlib.decoding import greedy_decode

    model, folder, _ = exported
    tr = OnnxTranslator(folder)
    for ids in _sources(10, seed=2):
        assert tr.greedy(ids, BOS, EOS)["tokens"] == greedy_decode(model, torch.tensor([ids]), BOS, EOS)[0]


def test_comparison_catches_another_model(exported):
    """The check can fail: the graphs of one model compared with another model's PyTorch decoding."""
    _, folder, _ = exported
    report = compare_with_torch(_model(1), OnnxTranslator(folder), _sources(10), BOS, EOS)
    assert report["identical"] < 10 or report["max_logit_diff"] > 1.0, report


def test_reference_attention_rows(exported):
    """torch_greedy_with_attention: one attention row per decoder step, each a distribution over the source."""
    model, _, _ = exported
    ref = torch_greedy_with_attention(model, [5, 6, 7, 8], BOS, EOS)
    steps = len(ref["tokens"]) + (1 if len(ref["tokens"]) < 4 + 50 else 0)
    assert ref["attention"].shape == (steps, len(model.decoder.layers), model.n_heads, 4)
    assert ref["logits"].shape == (steps, model.tgt_vocab_size)
    assert_close(ref["attention"].sum(-1), 1.0, n=2 * 4)  # a softmax over 4 source tokens, then the sum


def test_export_refuses_other_models(tmp_path):
    with pytest.raises(TypeError, match="Transformer"):
        export_onnx(torch.nn.Linear(2, 2), tmp_path)
    with pytest.raises(ValueError, match="sinusoidal"):
        export_onnx(make_model("tiny", src_vocab_size=30, positions="rope"), tmp_path)


def test_missing_graph_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="encoder.onnx"):
        OnnxTranslator(tmp_path)


def test_site_ships_model_or_says_how_to_build_it(exported, tmp_path):
    """_ext/translator_model.py copies a complete export into _static/translator/, else writes a model.json message;
    beside each file, its script copy for file:// pages."""
    import json

    from translator_model import MISSING_MODEL_MESSAGE, WEB_MODEL_FILES, ship_web_model
    _, folder, _ = exported
    assert not ship_web_model(folder, tmp_path / "a")  # no model.json / tokenizer.json in the bare export
    assert json.loads((tmp_path / "a/translator/model.json").read_text()) == {"missing": True,
                                                                              "message": MISSING_MODEL_MESSAGE}
    assert "make web-model" in MISSING_MODEL_MESSAGE
    (folder / "model.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    assert ship_web_model(folder, tmp_path / "b")
    shipped = tmp_path / "b/translator"
    assert sorted(p.name for p in shipped.iterdir()) == sorted(WEB_MODEL_FILES + tuple(f + ".js" for f in WEB_MODEL_FILES))
    # the script copies that a page opened from the disk (file://) loads: the file's bytes, base64, under the
    # script's own address
    import base64
    import re

    for name in WEB_MODEL_FILES:
        text = (shipped / (name + ".js")).read_text()
        m = re.fullmatch(r'\(window\.tmAssets = window\.tmAssets \|\| \{\}\)\[document\.currentScript\.src\] = "([A-Za-z0-9+/=]*)";\n', text)
        assert m and base64.b64decode(m.group(1)) == (shipped / name).read_bytes(), name
    assert (tmp_path / "a/translator/model.json.js").is_file()


def test_a_padded_batch_equals_each_sentence_alone(exported):
    """Three sources of 3, 7 and 12 tokens padded to one (3, 12) batch: each row's next-token logits and
    cross-attention equal those of the sentence run alone, and of `model.decode` on the padded batch; the
    attention on the padding is zero."""
    model, folder, _ = exported
    pad = model.pad_id
    assert pad is not None
    tr = OnnxTranslator(folder)
    sources = [[7, 8, 9], [10, 11, 12, 13, 14, 15, 16], list(range(20, 32))]
    width = max(map(len, sources))
    src = np.full((3, width), pad, dtype=np.int64)  # (3, 12)
    for i, ids in enumerate(sources):
        src[i, :len(ids)] = ids
    tgt = np.array([[BOS, 40, 41, 42]] * 3, dtype=np.int64)  # (3, 4)
    logits, cross = tr.run_batch(src, tgt)  # (3, vocab), (3, n_layers, n_heads, 12)
    assert logits.shape == (3, model.tgt_vocab_size)
    assert cross.shape == (3, len(model.decoder.layers), model.n_heads, width)
    n = transformer_reduction_length(model.config, width, tgt.shape[1])
    with torch.no_grad():
        s = torch.from_numpy(src)
        expected = model.decode(torch.from_numpy(tgt), model.encode(s), s)[:, -1].numpy()  # (3, vocab)
    assert_close(logits, expected, n=n)
    for i, ids in enumerate(sources):
        alone, alone_cross = tr.step(tgt[i].tolist(), tr.encode(ids), ids)
        assert_close(logits[i], alone, n=n)
        assert_close(cross[i, ..., :len(ids)], alone_cross, n=n)
        assert np.all(cross[i, ..., len(ids):] == 0.0), "attention on padding"


@pytest.mark.parametrize("missing", ["onnx", "onnxruntime"])
def test_missing_onnx_package_names_the_install_command(monkeypatch, tmp_path, missing):
    """Without onnx (export) or onnxruntime (running the graphs), the error says what to install, not a bare import
    failure deep inside torch.onnx (chapter 14 on an environment without the export extra)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a))
    model = make_model("tiny", 20, 20)
    with pytest.raises(ModuleNotFoundError, match=r"attention-executable\[export\]"):
        if missing == "onnx":
            export_onnx(model, tmp_path)
        else:
            OnnxTranslator(tmp_path)
