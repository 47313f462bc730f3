"""Tests behind chapter 5's assembly of one encoder layer and one decoder layer (paper §3.1).

``tmlib.ref.encoder_layer`` and ``tmlib.ref.decoder_layer`` are checked two ways: against a composition of the
reference pieces written out here step by step, and against PyTorch's ``nn.TransformerEncoderLayer`` and
``nn.TransformerDecoderLayer`` (post-LN, ReLU, dropout 0) with the same weights copied in, in float64 and float32.
"""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from tmlib import ref as R
from tolerances import assert_close, transformer_reduction_length

pytestmark = pytest.mark.numerics
D_MODEL, N_HEADS, D_FF = 8, 2, 16
D_K = D_MODEL // N_HEADS
ENCODER = SimpleNamespace(d_model=D_MODEL, n_heads=N_HEADS, d_ff=D_FF, n_encoder_layers=1, n_decoder_layers=0)
DECODER = SimpleNamespace(d_model=D_MODEL, n_heads=N_HEADS, d_ff=D_FF, n_encoder_layers=0, n_decoder_layers=1)
ENCODER_LAYER = transformer_reduction_length(ENCODER, 5, None)  # x has 5 positions
DECODER_LAYER = transformer_reduction_length(DECODER, 5, 4)  # y has 4, over a memory of 5


def _attn_params(rng):
    """Per-head (h, d_model, d_k) projections and W^O (d_model, d_model)."""
    return tuple(rng.normal(size=(N_HEADS, D_MODEL, D_K)) / np.sqrt(D_MODEL) for _ in range(3)) + (
        rng.normal(size=(D_MODEL, D_MODEL)) / np.sqrt(D_MODEL),)


def _ffn_params(rng):
    return (rng.normal(size=(D_MODEL, D_FF)) / np.sqrt(D_MODEL), rng.normal(size=D_FF) * 0.1,
            rng.normal(size=(D_FF, D_MODEL)) / np.sqrt(D_FF), rng.normal(size=D_MODEL) * 0.1)


def _norm_params(rng, count):
    return [(1 + 0.1 * rng.normal(size=D_MODEL), 0.1 * rng.normal(size=D_MODEL)) for _ in range(count)]


@pytest.fixture
def params():
    rng = np.random.default_rng(5)
    return {"x": rng.normal(size=(5, D_MODEL)), "y": rng.normal(size=(4, D_MODEL)),
            "enc_attn": _attn_params(rng), "enc_ffn": _ffn_params(rng), "enc_norms": _norm_params(rng, 2),
            "self_attn": _attn_params(rng), "cross_attn": _attn_params(rng), "dec_ffn": _ffn_params(rng),
            "dec_norms": _norm_params(rng, 3)}


# ------------------------------------------------------------------ the layers equal their pieces, composed by hand
def test_encoder_layer_is_its_pieces(params):
    p = params
    x = p["x"]
    (g1, b1), (g2, b2) = p["enc_norms"]
    attn, _ = R.multi_head_attention(x, x, x, *p["enc_attn"])
    z = R.layer_norm(x + attn, g1, b1)
    expected = R.layer_norm(z + R.feed_forward(z, *p["enc_ffn"]), g2, b2)
    out = R.encoder_layer(x, p["enc_attn"], p["enc_ffn"], p["enc_norms"])
    assert out.shape == (5, D_MODEL) and out.dtype == np.float64
    assert_close(out, expected, n=ENCODER_LAYER)


def test_decoder_layer_is_its_pieces(params):
    p = params
    y, memory = p["y"], p["x"]
    (g1, b1), (g2, b2), (g3, b3) = p["dec_norms"]
    a = R.layer_norm(y + R.multi_head_attention(y, y, y, *p["self_attn"], mask=R.causal_mask(4))[0], g1, b1)
    c = R.layer_norm(a + R.multi_head_attention(a, memory, memory, *p["cross_attn"])[0], g2, b2)
    expected = R.layer_norm(c + R.feed_forward(c, *p["dec_ffn"]), g3, b3)
    out = R.decoder_layer(y, memory, p["self_attn"], p["cross_attn"], p["dec_ffn"], p["dec_norms"])
    assert out.shape == (4, D_MODEL)
    assert_close(out, expected, n=DECODER_LAYER)


def test_decoder_layer_is_causal(params):
    """Changing a later target position leaves the outputs of earlier positions unchanged."""
    p = params
    args = (p["self_attn"], p["cross_attn"], p["dec_ffn"], p["dec_norms"])
    y2 = p["y"].copy()
    y2[3] += 10.0
    a = R.decoder_layer(p["y"], p["x"], *args)
    b = R.decoder_layer(y2, p["x"], *args)
    assert_close(a[:3], b[:3], n=DECODER_LAYER)
    assert np.abs(a[3] - b[3]).max() > 1e-3


def test_memory_mask_ignores_padded_source(params):
    p = params
    args = (p["self_attn"], p["cross_attn"], p["dec_ffn"], p["dec_norms"])
    padded = np.vstack([p["x"], np.full((2, D_MODEL), 50.0)])  # (7, d_model): two junk source positions
    mask = R.padding_mask([5], max_len=7)[0]  # (1, 7)
    assert_close(R.decoder_layer(p["y"], padded, *args, memory_mask=mask), R.decoder_layer(p["y"], p["x"], *args),
                 n=transformer_reduction_length(DECODER, 7, 4))


def test_bad_arguments_name_the_problem(params):
    p = params
    with pytest.raises(TypeError, match=r"self_attn must be a tuple \(w_q, w_k, w_v, w_o\)"):
        R.encoder_layer(p["x"], p["enc_attn"][:3], p["enc_ffn"])
    with pytest.raises(TypeError, match="norms must be a sequence of 3"):
        R.decoder_layer(p["y"], p["x"], p["self_attn"], p["cross_attn"], p["dec_ffn"], p["enc_norms"])
    with pytest.raises(ValueError, match=r"cannot be projected by w_q of shape \(2, 8, 4\)"):
        R.encoder_layer(p["x"][:, :4], p["enc_attn"], p["enc_ffn"])


# ------------------------------------------------------------------ against PyTorch's layers, weights copied
def _copy_attention(mha: nn.MultiheadAttention, attn, dtype):
    """Per-head (h, d_model, d_k) matrices -> in_proj_weight (3 d_model, d_model); biases zero."""
    w_q, w_k, w_v, w_o = attn
    def full(w):  # (h, d_model, d_k) -> (d_model, h * d_k): head i owns columns i*d_k:(i+1)*d_k
        return np.concatenate(list(w), axis=1)
    mha.in_proj_weight.copy_(torch.tensor(np.concatenate([full(w_q).T, full(w_k).T, full(w_v).T]), dtype=dtype))
    mha.in_proj_bias.zero_()
    mha.out_proj.weight.copy_(torch.tensor(w_o.T, dtype=dtype))
    mha.out_proj.bias.zero_()


def _copy_ffn_norms(layer, ffn, norms, dtype):
    w1, b1, w2, b2 = ffn
    layer.linear1.weight.copy_(torch.tensor(w1.T, dtype=dtype))
    layer.linear1.bias.copy_(torch.tensor(b1, dtype=dtype))
    layer.linear2.weight.copy_(torch.tensor(w2.T, dtype=dtype))
    layer.linear2.bias.copy_(torch.tensor(b2, dtype=dtype))
    for ln, (g, b) in zip((layer.norm1, layer.norm2, getattr(layer, "norm3", None)), norms):
        ln.weight.copy_(torch.tensor(g, dtype=dtype))
        ln.bias.copy_(torch.tensor(b, dtype=dtype))


def _torch_layer(cls, dtype):
    """PyTorch's post-LN layer of the paper (ReLU, no dropout) at Part I's sizes, in evaluation mode."""
    return cls(D_MODEL, N_HEADS, D_FF, dropout=0.0, activation="relu", batch_first=True,
               norm_first=False).to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_encoder_layer_matches_pytorch(params, dtype):
    p = params
    layer = _torch_layer(nn.TransformerEncoderLayer, dtype)
    with torch.no_grad():
        _copy_attention(layer.self_attn, p["enc_attn"], dtype)
        _copy_ffn_norms(layer, p["enc_ffn"], p["enc_norms"], dtype)
        got = layer(torch.tensor(p["x"][None], dtype=dtype))[0].double().numpy()
    # PyTorch's layer in ``dtype`` (weights and inputs rounded to it: one more rounding) against float64
    assert_close(got, R.encoder_layer(p["x"], p["enc_attn"], p["enc_ffn"], p["enc_norms"]), n=ENCODER_LAYER + 1,
                 dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_decoder_layer_matches_pytorch(params, dtype):
    p = params
    layer = _torch_layer(nn.TransformerDecoderLayer, dtype)
    with torch.no_grad():
        _copy_attention(layer.self_attn, p["self_attn"], dtype)
        _copy_attention(layer.multihead_attn, p["cross_attn"], dtype)
        _copy_ffn_norms(layer, p["dec_ffn"], p["dec_norms"], dtype)
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=dtype)  # 0 / -inf, additive
        got = layer(torch.tensor(p["y"][None], dtype=dtype), torch.tensor(p["x"][None], dtype=dtype),
                    tgt_mask=tgt_mask)[0].double().numpy()
    expected = R.decoder_layer(p["y"], p["x"], p["self_attn"], p["cross_attn"], p["dec_ffn"], p["dec_norms"])
    assert_close(got, expected, n=DECODER_LAYER + 1, dtype=dtype)
