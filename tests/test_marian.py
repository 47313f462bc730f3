"""Tests of tmlib.export.marian: the course's Transformer as a transformers MarianMTModel.

A tiny tied model is trained for a few dozen steps on the toy reversal task (so that it ends sentences with
``<eos>`` at varied lengths and beam search differs from greedy search), converted, and compared with tmlib:
logits, greedy and beam outputs, cross-attention weights, a save/load round trip; unsupported options raise.
Tolerance: float32, the chain of the model's forward pass (tests/tolerances.py) on logits and attention weights.
"""
import dataclasses

import pytest
import torch

pytest.importorskip("transformers")

from toy_data import toy_examples  # noqa: E402

from tmlib.data.tokenizer import train_tokenizer  # noqa: E402
from tmlib.decoding import beam_search, greedy_decode  # noqa: E402
from tmlib.export import marian_config, marian_permutation, to_marian  # noqa: E402
from tmlib.export import marian as marian_module  # noqa: E402
from tmlib.model import make_model  # noqa: E402
from tmlib.model.positional import sinusoid_table  # noqa: E402
from tolerances import assert_close, transformer_reduction_length  # noqa: E402

PAD, BOS, EOS = 0, 1, 2
LIMIT = 15  # generated tokens at most, for both libraries
PAIRS = [("Ein Mann fährt Fahrrad.", "A man rides a bike."), ("Zwei Hunde spielen im Schnee.", "Two dogs play in the snow."),
         ("Eine Frau liest ein Buch.", "A woman reads a book.")]


def _pad(rows):
    n = max(map(len, rows))
    return torch.tensor([r + [PAD] * (n - len(r)) for r in rows])


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(PAIRS * 3, vocab_size=60, min_frequency=1)


@pytest.fixture(scope="module")
def trained(tokenizer):
    """A tiny tied model after 30 Adam steps on reversing ids 4..19: it stops at varied lengths, imperfectly."""
    torch.manual_seed(0)
    model = make_model("tiny", src_vocab_size=tokenizer.vocab_size, d_model=32, n_heads=4, d_ff=64, max_len=64,
                       dropout=0.0)
    ex = toy_examples(60, seed=0)
    src, tgt_in, tgt_out = _pad([s for s, _ in ex]), _pad([[BOS] + t for _, t in ex]), _pad([t + [EOS] for _, t in ex])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(30):
        loss = torch.nn.functional.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    hf, hf_tok = to_marian(model, tokenizer)
    return model, hf, hf_tok


@pytest.fixture(scope="module")
def sources():
    return _pad([s for s, _ in toy_examples(16, seed=5)])  # (16, src_len), right-padded


def _rows(out):
    """HF generate output ``<bos> y … <eos> <pad> …`` → tmlib's convention: the tokens before the first <eos>."""
    rows = [r[1:] for r in out.tolist()]
    return [r[:r.index(EOS)] if EOS in r else r for r in rows]


def test_permutation_maps_the_paper_table_to_marians():
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    table = MarianSinusoidalPositionalEmbedding(50, 16)
    marian_table = table.create_weight()  # (50, 16): sines, then cosines
    paper = sinusoid_table(50, 16).float()  # (50, 16): interleaved
    # both tables computed in float64 (angles up to 49) and rounded to float32 once
    assert_close(marian_table, paper[:, marian_permutation(16)], n=1, magnitude=1.0)
    assert not torch.allclose(marian_table, paper)  # the two layouts do differ


def test_logits_equal(trained, sources):
    model, hf, _ = trained
    tgt = _pad([[BOS] + t for _, t in toy_examples(16, seed=5)])
    with torch.no_grad():
        ours = model(sources, tgt)
        theirs = hf(input_ids=sources, attention_mask=sources != PAD, decoder_input_ids=tgt).logits
    assert_close(theirs, ours, n=transformer_reduction_length(model.config, sources.shape[1], tgt.shape[1]))


def test_a_wrong_permutation_is_caught(trained, sources, tokenizer, monkeypatch):
    """The equality tests can fail: without the permutation (identity) the logits differ."""
    model, _, _ = trained
    monkeypatch.setattr(marian_module, "marian_permutation", lambda d: torch.arange(d))
    hf, _ = to_marian(model, tokenizer)
    tgt = torch.full((sources.shape[0], 1), BOS)
    with torch.no_grad():
        ours = model(sources, tgt)
        theirs = hf(input_ids=sources, attention_mask=sources != PAD, decoder_input_ids=tgt).logits
    assert (theirs - ours).abs().max() > 1e-2


def test_greedy_generate_equals_greedy_decode(trained, sources):
    model, hf, _ = trained
    ours = greedy_decode(model, sources, BOS, EOS, max_len=LIMIT)
    out = hf.generate(input_ids=sources, attention_mask=sources != PAD, num_beams=1, do_sample=False,
                      max_new_tokens=LIMIT)
    assert _rows(out) == ours
    assert len({len(r) for r in ours}) > 2  # the outputs end at varied lengths: <eos> is really compared


def test_beam_at_alpha_zero_equals_beam_search(trained, sources):
    """α = 0 ranks finished hypotheses by log-probability in both; HF's ``early_stopping="never"`` runs until no
    running beam can beat the worst finished one, which can only run longer than tmlib's test and never changes the
    best hypothesis."""
    model, hf, _ = trained
    ours = beam_search(model, sources, BOS, EOS, beam_size=4, length_penalty=0.0, max_len=LIMIT)
    out = hf.generate(input_ids=sources, attention_mask=sources != PAD, num_beams=4, do_sample=False,
                      max_new_tokens=LIMIT, length_penalty=0.0, early_stopping="never")
    assert _rows(out) == ours
    greedy = greedy_decode(model, sources, BOS, EOS, max_len=LIMIT)
    assert sum(a != b for a, b in zip(ours, greedy)) >= 4  # beam search really searched


def test_beam_at_alpha_06_may_differ(trained, sources):
    """HF divides log P by n**α, tmlib by GNMT's ((5 + n) / 6)**α: at α = 0.6 some outputs differ (here: at least
    one of 16); both are valid hypotheses of the same model."""
    model, hf, _ = trained
    ours = beam_search(model, sources, BOS, EOS, beam_size=4, length_penalty=0.6, max_len=LIMIT)
    out = hf.generate(input_ids=sources, attention_mask=sources != PAD, num_beams=4, do_sample=False,
                      max_new_tokens=LIMIT, length_penalty=0.6, early_stopping="never")
    theirs = _rows(out)
    assert len(theirs) == len(ours) and any(a != b for a, b in zip(theirs, ours))


def test_cross_attention_equals_recorded_attention(trained, sources):
    from tmlib.analysis import capture_attention

    model, hf, _ = trained
    tgt = _pad([[BOS] + t for _, t in toy_examples(16, seed=5)])
    captured = capture_attention(model, sources, tgt)
    with torch.no_grad():
        out = hf(input_ids=sources, attention_mask=sources != PAD, decoder_input_ids=tgt, output_attentions=True)
    assert len(out.cross_attentions) == len(model.decoder.layers)
    n = transformer_reduction_length(model.config, sources.shape[1], tgt.shape[1])  # probabilities: magnitude 1
    for layer, weights in enumerate(out.cross_attentions):  # (batch, n_heads, tgt_len, src_len)
        assert_close(weights, captured.weights["cross"][layer], n=n, magnitude=1.0)


def test_save_pretrained_round_trip(trained, sources, tmp_path):
    from transformers import AutoTokenizer, MarianMTModel

    _, hf, hf_tok = trained
    hf.save_pretrained(tmp_path)
    hf_tok.save_pretrained(tmp_path)
    again = MarianMTModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    tok_again = AutoTokenizer.from_pretrained(tmp_path)
    tgt = torch.full((sources.shape[0], 3), BOS)
    with torch.no_grad():
        a = hf(input_ids=sources, attention_mask=sources != PAD, decoder_input_ids=tgt).logits
        b = again(input_ids=sources, attention_mask=sources != PAD, decoder_input_ids=tgt).logits
    torch.testing.assert_close(b, a, atol=0, rtol=0)
    assert tok_again(["Ein Mann"])["input_ids"] == hf_tok(["Ein Mann"])["input_ids"]


def test_tokenizer_gives_tmlibs_source_ids_and_text(trained, tokenizer):
    _, _, hf_tok = trained
    sentences = [de for de, _ in PAIRS] + ["Ein Hund."]
    enc = hf_tok(sentences, padding=True)
    expected = tokenizer.encode_batch(sentences)
    n = max(map(len, expected))
    assert enc["input_ids"] == [e + [PAD] * (n - len(e)) for e in expected]  # no <bos>/<eos>, right padding
    generated = [[BOS] + e + [EOS] + [PAD] * (n - len(e)) for e in expected]
    assert hf_tok.batch_decode(generated, skip_special_tokens=True) == tokenizer.decode_batch(generated)


@pytest.mark.parametrize("option, value", [("norm_first", True), ("norm", "rms"), ("ffn", "swiglu"),
                                           ("positions", "rope"), ("positions", "alibi"), ("positions", "none"),
                                           ("n_kv_heads", 2), ("bias", False), ("tie_embeddings", False),
                                           ("tgt_vocab_size", 50), ("pad_id", None)])
def test_unsupported_options_raise(option, value):
    config = dataclasses.replace(make_model("tiny", src_vocab_size=60).config, n_heads=4, **{option: value})
    with pytest.raises(ValueError, match=option):
        marian_config(config, BOS, EOS)


def test_save_marian_writes_a_folder_every_allowed_transformers_loads(trained, tokenizer, sources, tmp_path):
    """`save_marian`: the tokenizer class is one that transformers 4 and 5 both know (5's save_pretrained writes
    "TokenizersBackend", unknown to 4.x), AutoTokenizer and MarianMTModel load it back to the same ids and logits,
    and a model card README.md gives the data, the BLEU with its signature, the limits and the licence."""
    import json

    from transformers import AutoTokenizer, MarianMTModel

    from tmlib.export import save_marian

    model, hf, hf_tok = trained
    bleu = {"bleu": 12.345, "bleu_lowercase": 13.0, "chrf": 40.0,
            "signatures": {"bleu": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.5.1"}}
    folder = save_marian(model, tokenizer, tmp_path / "hf", {"bleu": bleu, "beam_size": 4, "train_steps": 30,
                                                            "train_minutes": 0.1})
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert tok_config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert "TokenizersBackend" not in "".join(p.read_text(errors="replace") for p in folder.glob("*.json"))
    loaded = AutoTokenizer.from_pretrained(folder)
    assert loaded(["Ein Mann"])["input_ids"] == hf_tok(["Ein Mann"])["input_ids"]
    again = MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval()
    tgt = torch.full((sources.shape[0], 3), BOS)
    with torch.no_grad():
        a = hf(input_ids=sources, attention_mask=sources != PAD, decoder_input_ids=tgt).logits
        b = again(input_ids=sources, attention_mask=sources != PAD, decoder_input_ids=tgt).logits
    torch.testing.assert_close(b, a, atol=0, rtol=0)
    card = (folder / "README.md").read_text()
    for part in ("license: mit", "## Data", "Multi30k", "BLEU **12.3**", "nrefs:1|case:mixed|eff:no|tok:13a",
                 "beam search of width 4", "## Limits", "## Licence", "Flickr30k", "MarianMTModel.from_pretrained"):
        assert part in card, part


def test_export_command_line(trained, tokenizer, tmp_path, capsys):
    """`python -m tmlib.export`: a run folder → hf/ (with the card) and onnx/; a non-empty --out and a missing
    checkpoint are one error line, exit status 2."""
    pytest.importorskip("onnxruntime")
    from tmlib.data.batching import BatchIterator
    from tmlib.export.__main__ import main
    from tmlib.training import TrainConfig, Trainer

    model, _, _ = trained
    run = tmp_path / "run"
    examples = [(tokenizer.encode(de), tokenizer.encode(en)) for de, en in PAIRS]
    Trainer(model, BatchIterator(examples, 64), None, TrainConfig(model=model.config, max_steps=1, device="cpu",
                                                                   progress=False), tokenizer,
            run / "checkpoint.pt").save()
    out = tmp_path / "out"
    assert main(["--checkpoint", str(run), "--out", str(out), "--no-bleu"]) == 0
    assert {p.name for p in (out / "hf").iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json",
                                                         "tokenizer_config.json", "README.md"}
    assert {p.name for p in (out / "onnx").iterdir()} == {"encoder.onnx", "decoder.onnx", "tokenizer.json"}
    capsys.readouterr()
    assert main(["--checkpoint", str(run), "--out", str(out)]) == 2
    assert main(["--checkpoint", str(tmp_path / "none"), "--out", str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("error: ") and "is not an empty folder" in err[0]
    assert err[1].startswith("error: no checkpoint at")


def test_the_folder_loads_on_another_transformers(trained, tokenizer, sources, tmp_path):
    """The folder written here loads, with AutoTokenizer and MarianMTModel, in another transformers installation
    (the oldest the hf extra allows, 4.46): ``TM_OTHER_TRANSFORMERS`` names a folder put first on the path, e.g.
    ``pip install --no-deps --target DIR transformers==4.46.3 tokenizers==0.20.3 huggingface_hub==0.36.0``;
    skipped without it."""
    import json
    import os
    import subprocess
    import sys

    other = os.environ.get("TM_OTHER_TRANSFORMERS")
    if not other:
        pytest.skip("set TM_OTHER_TRANSFORMERS to a folder holding another transformers version")
    from tmlib.export import save_marian

    model, hf, _ = trained
    folder = save_marian(model, tokenizer, tmp_path / "hf")
    tgt = torch.full((sources.shape[0], 3), BOS)
    with torch.no_grad():
        expected = hf(input_ids=sources, attention_mask=sources != PAD, decoder_input_ids=tgt).logits
    torch.save({"sources": sources, "tgt": tgt}, tmp_path / "inputs.pt")
    code = f"""
import json, torch, transformers
from transformers import AutoTokenizer, MarianMTModel
tok = AutoTokenizer.from_pretrained({str(folder)!r})
model = MarianMTModel.from_pretrained({str(folder)!r}).eval()
x = torch.load({str(tmp_path / 'inputs.pt')!r})
with torch.no_grad():
    logits = model(input_ids=x["sources"], attention_mask=x["sources"] != {PAD}, decoder_input_ids=x["tgt"]).logits
torch.save(logits, {str(tmp_path / 'logits.pt')!r})
print(json.dumps({{"version": transformers.__version__, "class": type(tok).__name__,
                  "ids": tok(["Ein Mann"])["input_ids"]}}))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([other, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    import transformers

    assert got["version"] != transformers.__version__, "TM_OTHER_TRANSFORMERS holds this same version"
    assert got["ids"] == [tokenizer.encode("Ein Mann")]
    torch.testing.assert_close(torch.load(tmp_path / "logits.pt"), expected, atol=1e-5, rtol=1e-5)
