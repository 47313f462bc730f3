"""tmlib.analysis.flops: FLOP formulas checked by hand and against torch.utils.flop_counter; peaks; MFU."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from tmlib.analysis import flops as FL
from tmlib.model import make_model


def test_transformer_flops_by_hand():
    # d=4, S=3, T=2, f=8, V=10, one layer each: every term written out
    got = FL.transformer_flops(4, 1, 1, 8, 10, src_len=3, tgt_len=2)
    enc = 4 * (2 * 3 * 4 * 4) + 2 * (2 * 3 * 3 * 4) + 2 * (2 * 3 * 4 * 8)  # 4 projections, QK^T and AV, FFN
    dec_self = 4 * (2 * 2 * 4 * 4) + 2 * (2 * 2 * 2 * 4)
    cross = 2 * (2 * 2 * 4 * 4) + 2 * (2 * 3 * 4 * 4) + 2 * (2 * 2 * 3 * 4)  # Q, O on T; K, V on S; T x S
    dec_ffn = 2 * (2 * 2 * 4 * 8)
    out = 2 * 2 * 4 * 10
    assert got == {"encoder": enc, "decoder_self_attention": dec_self, "cross_attention": cross,
                   "decoder_ffn": dec_ffn, "output_projection": out,
                   "total": enc + dec_self + cross + dec_ffn + out}
    assert FL.transformer_flops(4, 1, 1, 8, 10, 3, 2, batch=5)["total"] == 5 * got["total"]


def test_attention_and_feed_forward_units_by_hand():
    # 3 queries over 5 keys, d = 4: Q and O on the queries, K and V on the keys, 3 x 5 scores and sums
    assert FL.attention_flops(3, 5, 4) == {
        "query_projection": 2 * 3 * 4 * 4, "key_value_projections": 2 * (2 * 5 * 4 * 4),
        "attention_scores": 2 * 3 * 5 * 4, "attention_weighted_sum": 2 * 3 * 5 * 4,
        "output_projection": 2 * 3 * 4 * 4, "total": 96 + 320 + 120 + 120 + 96}
    assert FL.feed_forward_flops(3, 4, 8) == 2 * (2 * 3 * 4 * 8)
    with pytest.raises(ValueError):
        FL.attention_flops(0, 5, 4)


def test_every_count_is_built_from_the_same_units():
    # chapter 6's encoder layer and chapter 12's whole model count the same products
    layer = FL.layer_flops(seq_len=7, d_model=16, d_ff=40)
    assert layer["total"] == FL.attention_flops(7, 7, 16)["total"] + FL.feed_forward_flops(7, 16, 40)
    model = FL.transformer_flops(16, 3, 2, 40, 100, src_len=7, tgt_len=5)
    assert model["encoder"] == 3 * layer["total"]
    assert model["cross_attention"] == 2 * FL.attention_flops(5, 7, 16)["total"]
    assert model["decoder_self_attention"] == 2 * FL.attention_flops(5, 5, 16)["total"]
    assert model["decoder_ffn"] == 2 * FL.feed_forward_flops(5, 16, 40)


def test_transformer_flops_decoder_only_has_no_cross_attention():
    got = FL.transformer_flops(8, 0, 2, 16, 10, src_len=1, tgt_len=4)
    assert got["encoder"] == 0 and got["cross_attention"] == 0


@pytest.mark.parametrize("training", [False, True])
def test_flop_counter_agrees_exactly_on_the_explicit_path(training):
    torch.manual_seed(0)
    model = make_model("tiny", 50, pad_id=0, dropout=0.0)
    model.keep_attention(True)  # explicit attention: the counter sees every matrix product (bmm)
    model.train(training)
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    with FlopCounterMode(display=False) as counter:
        logits = model(src, tgt)
        if training:
            logits.sum().backward()
    expected = FL.model_flops(model, 7, 5, batch=3)["total"]
    assert counter.get_total_flops() == (3 if training else 1) * expected


def test_flops_per_token():
    total = FL.transformer_flops(256, 2, 2, 512, 8000, 20, 16)["total"]
    assert FL.flops_per_token(256, 2, 2, 512, 8000, 20, 16) == 3 * total / 16
    assert FL.flops_per_token(256, 2, 2, 512, 8000, 20, 16, training=False, tokens=8) == total / 8
    with pytest.raises(ValueError):
        FL.flops_per_token(256, 2, 2, 512, 8000, 20, 16, tokens=0)


def test_model_flops_rejects_other_objects():
    with pytest.raises(TypeError, match="tmlib Transformer"):
        FL.model_flops(torch.nn.Linear(2, 2), 3, 3)


@pytest.mark.parametrize("bad", [0, -1])
def test_transformer_flops_rejects_bad_sizes(bad):
    with pytest.raises(ValueError):
        FL.transformer_flops(bad, 1, 1, 8, 10, 3, 2)
    with pytest.raises(TypeError):
        FL.transformer_flops(4.0, 1, 1, 8, 10, 3, 2)


def test_peaks_and_gpu_names():
    assert FL.peak_flops("H100 SXM") == 989.5e12 == FL.peak_flops("H200")
    assert FL.peak_flops("A100", "bf16") == 312e12
    assert FL.gpu_peak_flops("NVIDIA H100 80GB HBM3") == ("H100 SXM", 989.5e12)
    assert FL.gpu_peak_flops("NVIDIA H100 PCIe") == ("H100 PCIe", 756.5e12)
    assert FL.gpu_peak_flops("NVIDIA H200") == ("H200", 989.5e12)
    assert FL.gpu_peak_flops("NVIDIA A100-SXM4-80GB") == ("A100", 312e12)
    assert FL.gpu_peak_flops("NVIDIA A10") == ("A10", 125e12)
    assert FL.gpu_peak_flops("NVIDIA L4") == ("L4", 121e12)
    assert FL.gpu_peak_flops("Tesla T4") is None  # no bf16 on a T4
    assert FL.gpu_peak_flops("Tesla T4", "fp16") == ("T4", 65e12)
    assert FL.gpu_peak_flops("AMD EPYC 9654") is None
    with pytest.raises(ValueError, match="unknown device"):
        FL.peak_flops("H300")
    with pytest.raises(ValueError, match="no 'bf16' peak"):
        FL.peak_flops("T4")


def test_mfu():
    assert FL.mfu(1000.0, 1e9, 1e13) == pytest.approx(0.1)
    # the paper's base model: 25,000 target tokens per step, 0.4 s per step, 8 P100 at 9.5 TFLOPS
    assert 0 < FL.mfu(25_000 / 0.4, 1e8, 8 * FL.peak_flops("P100", "fp32")) < 1
    for bad in (0, -1.0, float("nan"), True):
        with pytest.raises(ValueError):
            FL.mfu(bad, 1e9, 1e13)
