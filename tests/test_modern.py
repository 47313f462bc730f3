"""Tests of the modern options (chapter 13): RMSNorm, SwiGLU, RoPE, ALiBi, grouped-query attention, and the
Llama-style block, each against an independent reference:

* RMSNorm: ``torch.nn.RMSNorm`` (and Hugging Face's ``LlamaRMSNorm`` through the Llama block);
* SwiGLU: the formula ``(silu(x W1) * (x W3)) W2`` written in NumPy;
* RoPE: complex multiplication ``z · e^{i m θ}`` (RoFormer eq. 12-13) in NumPy, and the relative-position
  property (q_m · k_n depends only on m − n);
* ALiBi: the paper's slopes written out, and a bias matrix built by hand in NumPy;
* GQA: multi-head attention whose K/V projections are the grouped ones repeated;
* KV cache: cached incremental decoding equals full decoding, and holds n_kv_heads heads only;
* Llama: ``transformers``' ``LlamaDecoderLayer``/``LlamaAttention``/``LlamaMLP`` with our weights copied in
  (skipped when transformers is not installed).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tmlib.model import ALiBi, alibi_slopes
from tmlib.model import KVCache, ModernAttention, MultiHeadAttention, scaled_dot_product_attention
from tmlib.model import PositionwiseFeedForward, SwiGLUFeedForward, make_feed_forward, swiglu_hidden_size
from tmlib.model import RMSNorm, make_norm
from tmlib.model import NoPositionalEncoding, make_positional
from tmlib.model import PRESETS, ModelConfig, count_parameters, make_model
from tmlib.model import RotaryEmbedding, interleaved_to_halves, rope_frequencies
from tmlib.model import DecoderLayer, to_nn_transformer
from tmlib.model import DecoderOnly, EncoderOnly
from tolerances import assert_close, attention_length, transformer_reduction_length

V = 13
numerics = pytest.mark.numerics


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def max_diff(a, b) -> float:
    return (torch.as_tensor(a).detach().double() - torch.as_tensor(b).detach().double()).abs().max().item()


# --------------------------------------------------------------------------- RMSNorm

@numerics
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_rmsnorm_equals_torch_rmsnorm(dtype):
    torch.manual_seed(0)
    ours = RMSNorm(10, eps=1e-5).to(dtype)
    ref = nn.RMSNorm(10, eps=1e-5).to(dtype)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        ref.weight.copy_(ours.weight)
    x = torch.randn(3, 4, 10, dtype=dtype) * 3 + 1
    assert ours(x).dtype == dtype
    n = 10 + 4  # the mean of 10 squares, the square root, the division, the gain
    assert_close(ours(x), ref(x), n=n)
    # and the formula by hand in NumPy: x / sqrt(mean(x²) + eps) · g
    xn = x.double().numpy()
    by_hand = xn / np.sqrt((xn ** 2).mean(-1, keepdims=True) + 1e-5) * ours.weight.detach().double().numpy()
    assert_close(ours(x), by_hand, n=n)
    # it is not LayerNorm: the mean is not removed (the check can fail)
    assert max_diff(ours(x), F.layer_norm(x, (10,), ours.weight)) > 1e-2


def test_rmsnorm_half_precision_and_errors():
    norm = RMSNorm(8)
    x = torch.randn(2, 8) * 100
    out = norm(x.bfloat16())
    assert out.dtype == torch.bfloat16
    assert_close(out, norm(x), n=2)  # the input and the output rounded to bfloat16 (float32 inside)
    with pytest.raises(ValueError, match="eps must be > 0"):
        RMSNorm(8, eps=0.0)
    assert isinstance(make_norm("layer", 8), nn.LayerNorm) and isinstance(make_norm("rms", 8), RMSNorm)
    with pytest.raises(ValueError, match=r"unknown norm 'batch'; choose one of \['layer', 'rms'\]"):
        make_norm("batch", 8)


# --------------------------------------------------------------------------- SwiGLU

@numerics
def test_swiglu_equals_hand_formula():
    torch.manual_seed(0)
    ffn = SwiGLUFeedForward(6, 10, dropout=0.0, bias=False).double()
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    w1, w2, w3 = (getattr(ffn, n).weight.detach().numpy().T for n in ("w1", "w2", "w3"))  # x @ W convention
    xn = x.numpy()
    gate = xn @ w1
    silu = gate / (1 + np.exp(-gate))  # Swish_1(z) = z · sigmoid(z)
    expected = (silu * (xn @ w3)) @ w2  # (2, 5, 6)
    assert_close(ffn(x), expected, n=6 + 2 + 10)  # x W1 and x W3 (6), silu and the product, W2 (10)
    assert ffn.w1.bias is None  # Shazeer's formula and Llama: no biases
    # the check can fail: swapping gate and up changes the result
    swapped = ((xn @ w3) / (1 + np.exp(-(xn @ w3))) * gate) @ w2
    assert max_diff(ffn(x), swapped) > 1e-3


def test_swiglu_parameter_matching():
    # 2/3 of d_ff keeps the weight count of the ReLU FFN (no biases): 3·d·(2/3)d_ff = 2·d·d_ff
    assert swiglu_hidden_size(96) == 64 and swiglu_hidden_size(1024, multiple_of=256) == 768
    relu = PositionwiseFeedForward(32, 96, bias=False)
    glu = SwiGLUFeedForward(32, swiglu_hidden_size(96), bias=False)
    assert count_parameters(relu) == count_parameters(glu) == 2 * 32 * 96
    assert isinstance(make_feed_forward("swiglu", 8, 4), SwiGLUFeedForward)
    assert make_feed_forward("relu", 8, 4, bias=False).linear1.bias is None
    with pytest.raises(ValueError, match="unknown feed-forward 'gelu'"):
        make_feed_forward("gelu", 8, 4)


# --------------------------------------------------------------------------- RoPE

def complex_rope_reference(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """RoFormer eq. 12-13 in complex numbers: pair (x_{2i}, x_{2i+1}) is z_i = x_{2i} + i x_{2i+1}, multiplied
    by e^{i m θ_i} with θ_i = base^{-2i/d}. x: (..., n, d); positions: (n,)."""
    d = x.shape[-1]
    theta = base ** (-np.arange(0, d, 2) / d)  # (d/2,)
    z = x[..., 0::2] + 1j * x[..., 1::2]  # (..., n, d/2)
    z = z * np.exp(1j * positions[:, None] * theta[None, :])
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


@numerics
@pytest.mark.parametrize("offset", [0, 5])
def test_rope_equals_complex_reference(offset):
    rope = RotaryEmbedding(8, max_len=32)
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64)  # (batch, heads, n, d_head)
    expected = complex_rope_reference(x.numpy(), np.arange(offset, offset + 6))
    # cos and sin of angles up to 10 (their rounding: eps * 10), then a 2-term rotation of x
    n, scale = 4 + 2, 10 * np.abs(x.numpy()).max()
    assert_close(rope(x, offset), expected, n=n, magnitude=scale)
    # a rotation keeps lengths, and position 0 is the identity (cos 0 = 1, sin 0 = 0: exact)
    assert_close(rope(x, offset).norm(dim=-1), x.norm(dim=-1), n=n + 8, magnitude=scale)
    if offset == 0:
        torch.testing.assert_close(rope(x)[..., 0, :], x[..., 0, :], atol=0, rtol=0)
    # float32 input: float32 output, same values (one more rounding: x to float32)
    assert_close(rope(x.float(), offset), expected, n=n + 1, magnitude=scale)
    assert rope(x.float()).dtype == torch.float32
    assert_close(rope_frequencies(8), [1, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75], n=3, dtype=torch.float64)


@numerics
def test_rope_scores_depend_only_on_relative_position():
    """RoFormer eq. 16: <rope(q, m), rope(k, n)> is a function of m − n."""
    rope = RotaryEmbedding(16, max_len=64)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=g, dtype=torch.float64), torch.randn(16, generator=g, dtype=torch.float64)

    def score(m, n):
        qm = rope(q.expand(1, 1, m + 1, 16).contiguous(), 0)[0, 0, m]  # q placed at position m
        kn = rope(k.expand(1, 1, n + 1, 16).contiguous(), 0)[0, 0, n]
        return float(qm @ kn)

    # angles up to 40 (rounded at eps * 40) in a rotation, then a dot product of length 16
    length, scale = 4 + 2 + 16, 40 * float(q.abs().max() * k.abs().max())
    for m, n in [(3, 1), (10, 8), (40, 38)]:  # the same distance 2 everywhere
        assert_close(score(m, n), score(2, 0), n=length, magnitude=scale, dtype=torch.float64)
    assert_close(score(5, 5), float(q @ k), n=length, magnitude=scale, dtype=torch.float64)  # distance 0
    assert abs(score(7, 2) - score(2, 0)) > 1e-3  # another distance, another score (the check can fail)


def test_rope_layout_permutation_and_errors():
    perm = interleaved_to_halves(6)
    assert perm.tolist() == [0, 2, 4, 1, 3, 5]
    # the halves layout (Hugging Face's rotate_half) on permuted features equals ours, permuted
    x = torch.randn(1, 1, 5, 6, dtype=torch.float64)
    theta = 10000.0 ** (-torch.arange(0, 6, 2, dtype=torch.float64) / 6)
    ang = torch.arange(5, dtype=torch.float64)[:, None] * theta  # (5, 3)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)  # (5, 6) as HF
    xp = x[..., perm]
    rotate_half = torch.cat([-xp[..., 3:], xp[..., :3]], -1)
    halves = xp * cos + rotate_half * sin
    assert_close(halves, RotaryEmbedding(6, 8)(x)[..., perm], n=4 + 2, magnitude=4 * x.abs().max().item())
    with pytest.raises(ValueError, match="d_head must be even"):
        RotaryEmbedding(5)
    with pytest.raises(ValueError, match=r"4 positions at offset 6 need 10 rotary positions, more than max_len=8"):
        RotaryEmbedding(4, 8)(torch.zeros(1, 1, 4, 4), 6)


# --------------------------------------------------------------------------- ALiBi

def test_alibi_slopes_are_the_papers():
    # 8 heads: 1/2, 1/4, ..., 1/256 (ALiBi §3)
    np.testing.assert_allclose(alibi_slopes(8).numpy(), [2.0 ** -k for k in range(1, 9)], rtol=0, atol=0)
    # 16 heads: 2^-0.5, 2^-1, ..., 2^-8
    # (relative to each slope: a power of 2 of a rounded exponent, 2 roundings)
    expected = np.array([2.0 ** (-k / 2) for k in range(1, 17)])
    assert_close(alibi_slopes(16) / expected, 1.0, n=2)
    # 12 heads (not a power of two): the 8-head slopes, then every other 16-head slope (the paper's code)
    expected = np.array([2.0 ** -k for k in range(1, 9)] + [2.0 ** -0.5, 2.0 ** -1.5, 2.0 ** -2.5, 2.0 ** -3.5])
    assert_close(alibi_slopes(12) / expected, 1.0, n=2)
    assert alibi_slopes(1).tolist() == [2.0 ** -8]


def test_alibi_bias_matrix_by_hand():
    alibi = ALiBi(2)  # slopes 1/16 and 1/256
    bias = alibi(4, 4).numpy()  # (2, 4, 4)
    m = 2.0 ** -4
    lower = np.array([[0, 0, 0, 0], [-1, 0, 0, 0], [-2, -1, 0, 0], [-3, -2, -1, 0]]) * m  # paper's Figure 3
    # powers of two times small integers: exact
    np.testing.assert_array_equal(np.tril(bias[0]), lower)
    np.testing.assert_array_equal(bias[0], bias[0].T)  # symmetric for bidirectional use
    # with a cache: 2 new queries at positions 5, 6 over keys 0..6
    np.testing.assert_array_equal(alibi(2, 7, offset=5).numpy()[1],
                                  -(2.0 ** -8) * np.abs(np.arange(5, 7)[:, None] - np.arange(7)))


@numerics
def test_alibi_attention_equals_hand_built_scores():
    torch.manual_seed(0)
    mha = ModernAttention(8, 2, bias=False, positions="alibi").double().eval()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    out, w = mha(x, x, x, is_causal=True, need_weights=True)
    fused, _ = mha(x, x, x, is_causal=True)
    # by hand in NumPy: per head, scores = q kᵀ / √d_k − m_h (i − j), causal, softmax, then W^O
    xn = x[0].numpy()
    wq, wk, wv, wo = (getattr(mha, n).weight.detach().numpy() for n in ("w_q", "w_k", "w_v", "w_o"))
    heads = []
    for h, m in enumerate([2.0 ** -4, 2.0 ** -8]):
        cols = slice(4 * h, 4 * h + 4)
        q, k, v = xn @ wq[cols].T, xn @ wk[cols].T, xn @ wv[cols].T
        i, j = np.arange(5)[:, None], np.arange(5)[None, :]
        scores = q @ k.T / 2.0 - m * (i - j)
        scores[j > i] = -np.inf
        p = np.exp(scores - scores.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        assert_close(w[0, h], p, n=8 + attention_length(4, 5))
        heads.append(p @ v)
    expected = np.concatenate(heads, 1) @ wo.T
    n = 2 * 8 + attention_length(4, 5) + 1  # the projections, a head with its bias, W^O
    assert_close(out[0], expected, n=n)
    assert_close(fused[0], expected, n=n)
    plain = MultiHeadAttention(8, 2, bias=False).double().eval()
    plain.load_state_dict(mha.state_dict())  # no ALiBi parameters: the same state dict
    assert max_diff(plain(x, x, x, is_causal=True)[0], out) > 1e-4  # the bias matters


# --------------------------------------------------------------------------- grouped-query attention

@numerics
@pytest.mark.parametrize("n_kv_heads", [1, 2])
@pytest.mark.parametrize("need_weights", [False, True])
def test_gqa_equals_mha_with_repeated_kv_heads(n_kv_heads, need_weights):
    torch.manual_seed(0)
    d, h = 16, 4
    gqa = ModernAttention(d, h, n_kv_heads=n_kv_heads).double().eval()
    mha = MultiHeadAttention(d, h).double().eval()
    group, d_k = h // n_kv_heads, d // h
    with torch.no_grad():
        for name in ("w_q", "w_o"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("w_k", "w_v"):  # tie: query head i uses key/value head i // group
            w = getattr(gqa, name).weight.view(n_kv_heads, d_k, d).repeat_interleave(group, 0).reshape(d, d)
            b = getattr(gqa, name).bias.view(n_kv_heads, d_k).repeat_interleave(group, 0).reshape(d)
            getattr(mha, name).weight.copy_(w)
            getattr(mha, name).bias.copy_(b)
    assert gqa.w_k.weight.shape == (n_kv_heads * d_k, d)
    x = torch.randn(2, 6, d, dtype=torch.float64)
    kpm = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    a, wa = gqa(x, x, x, real_keys=kpm, is_causal=True, need_weights=need_weights)
    b, wb = mha(x, x, x, real_keys=kpm, is_causal=True, need_weights=need_weights)
    n = 2 * d + attention_length(d_k, 6)
    assert_close(a, b, n=n)
    if need_weights:
        assert wa.shape == (2, h, 6, 6)
        assert_close(wa, wb, n=n)
    # the fewer K/V parameters: 2 · (d·d_k·n_kv + d_k·n_kv) instead of 2 · (d·d + d)
    assert count_parameters(mha) - count_parameters(gqa) == 2 * (d + 1) * d_k * (h - n_kv_heads)


def test_gqa_errors():
    with pytest.raises(ValueError, match="n_kv_heads=3 must be a positive divisor of n_heads=4"):
        ModernAttention(16, 4, n_kv_heads=3)
    q = torch.randn(1, 4, 3, 2)
    with pytest.raises(ValueError, match="n_kv_heads must divide n_heads"):
        scaled_dot_product_attention(q, torch.randn(1, 3, 3, 2), torch.randn(1, 3, 3, 2), enable_gqa=True)


# --------------------------------------------------------------------------- KV cache with the new options

def lm(positions="rope", n_kv_heads=2, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    args = dict(d_model=16, n_heads=4, n_decoder_layers=2, d_ff=24, dropout=0.0, max_len=40, norm_first=True,
                norm="rms", ffn="swiglu", positions=positions, n_kv_heads=n_kv_heads, bias=False)
    args.update(kw)
    return DecoderOnly(ModelConfig(vocab_size=V, **args)).to(dtype).eval()


@numerics
@pytest.mark.parametrize("positions", ["sinusoidal", "rope", "alibi", "none"])
@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_cached_decoding_equals_full_and_stores_kv_heads(positions, n_kv_heads):
    model = lm(positions, n_kv_heads)
    ids = torch.randint(3, V, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(ids)  # (2, 9, V)
        cache = model.new_cache()
        steps = [model(ids[:, :4], cache=cache)] + [model(ids[:, t:t + 1], cache=cache) for t in range(4, 9)]
        changed = ids.clone()
        changed[:, 6:] = 3
        causal = model(changed)[:, :6]
    n = transformer_reduction_length(model.config, None, 9)
    assert_close(torch.cat(steps, 1), full, n=n)
    assert_close(causal, full[:, :6], n=n)
    kv = 4 if n_kv_heads is None else n_kv_heads
    assert cache.self_attn[0].k.shape == (2, kv, 9, 4)  # (batch, n_kv_heads, t, d_k)
    # bytes: 2 (K and V) · layers · n_kv_heads · d_k · 8 (float64) per token and sequence
    assert cache.nbytes() == 2 * 2 * kv * 4 * 8 * 2 * 9
    assert KVCache().nbytes() == 0


@pytest.mark.parametrize("positions", ["rope", "alibi"])
def test_positions_make_the_model_order_aware(positions):
    """Without positions a causal model is still order-aware through the mask; in a bidirectional encoder
    only the position scheme tells the order: swapping two tokens changes the other outputs with RoPE/ALiBi,
    not without."""
    torch.manual_seed(0)
    ids = torch.tensor([[3, 4, 5, 6, 7]])
    swapped = torch.tensor([[4, 3, 5, 6, 7]])
    for pos, should_change in ((positions, True), ("none", False)):
        torch.manual_seed(0)
        enc = EncoderOnly(ModelConfig(vocab_size=V, d_model=16, n_heads=2, n_encoder_layers=1, d_ff=8, dropout=0.0,
                                      pad_id=None, positions=pos)).double().eval()
        with torch.no_grad():
            d = max_diff(enc(ids)[0, 2:], enc(swapped)[0, 2:])
        assert (d > 1e-6) == should_change, (pos, d)


def test_generate_with_modern_options_cached_equals_uncached():
    model = lm("alibi", 1)
    prompt = torch.tensor([[3, 4, 5], [6, 7, 8]])
    a = model.generate(prompt, 10, greedy=True)
    b = model.generate(prompt, 10, greedy=True, use_cache=False)
    assert torch.equal(a, b)


@numerics
def test_encoder_decoder_with_modern_options_cache_equals_full():
    torch.manual_seed(0)
    model = make_model("tiny", V, dropout=0.0, norm_first=True, norm="rms", ffn="swiglu", positions="rope",
                       n_kv_heads=1, bias=False).double().eval()
    layer = model.decoder.layers[0]  # GQA and RoPE only in self-attention: the cross-attention is the paper's
    assert type(layer.cross_attn) is MultiHeadAttention and layer.cross_attn.w_k.weight.shape == (32, 32)
    assert layer.self_attn.rotary is not None and layer.self_attn.n_kv_heads == 1
    src = torch.tensor([[5, 6, 7, 8, 9], [5, 11, 12, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 7], [1, 5, 11, 12]])
    with torch.no_grad():
        full = model(src, tgt)
        memory = model.encode(src)
        cache = model.new_cache()
        steps = torch.cat([model.decode(tgt[:, t:t + 1], memory, src, cache=cache) for t in range(4)], 1)
    assert_close(steps, full, n=transformer_reduction_length(model.config, 5, 4))
    with pytest.raises(ValueError, match="nn.Transformer has only the paper's layers"):
        to_nn_transformer(model)


# --------------------------------------------------------------------------- configuration

def test_defaults_keep_the_paper_model():
    """New fields default to the paper: the same state-dict keys and shapes as the paper's layers, no extra
    modules with parameters, and a configuration dict without the new fields still loads."""
    model = make_model("tiny", V)
    keys = set(model.state_dict())
    assert {k for k in keys if any(s in k for s in ("rotary", "alibi", "w1", "w3", "qkv"))} == set()
    layer = model.encoder.layers[0]
    assert isinstance(layer.norm1, nn.LayerNorm) and isinstance(layer.feed_forward, PositionwiseFeedForward)
    assert layer.self_attn.w_k.weight.shape == (32, 32) and layer.self_attn.w_q.bias is not None
    assert "encoder.layers.0.self_attn.w_q.weight" in keys and "encoder.layers.0.norm1.bias" in keys
    old = {k: v for k, v in PRESETS["tiny"].to_dict().items()
           if k not in ("norm", "ffn", "positions", "n_kv_heads", "bias")}
    assert ModelConfig.from_dict(old) == PRESETS["tiny"]
    assert model.config.norm == "layer" and model.config.positions == "sinusoidal"


def test_llama_style_parameter_count():
    """Closed form for a pre-RMSNorm, SwiGLU, RoPE, GQA, bias-free decoder-only model (tied output layer with
    the Generator's bias)."""
    d, h, kv, L, d_ff, vocab = 64, 8, 2, 3, 96, 100
    model = DecoderOnly(ModelConfig(vocab_size=vocab, d_model=d, n_heads=h, n_decoder_layers=L, d_ff=d_ff, dropout=0.0,
                                    max_len=64, norm_first=True, norm="rms", ffn="swiglu", positions="rope",
                                    n_kv_heads=kv, bias=False))
    d_k = d // h
    attn = d * d + 2 * d * kv * d_k + d * d  # W^Q, W^K, W^V (grouped), W^O
    per_layer = attn + 3 * d * d_ff + 2 * d  # + SwiGLU + two RMSNorm gains
    assert count_parameters(model) == vocab * d + vocab + L * per_layer + d  # + final norm
    cfg = dataclasses.replace(PRESETS["tiny"], vocab_size=vocab, d_model=d, n_heads=h, n_decoder_layers=L, d_ff=d_ff,
                              max_len=64, norm_first=True, norm="rms", ffn="swiglu", positions="rope", n_kv_heads=kv,
                              bias=False)
    assert count_parameters(DecoderOnly(cfg)) == count_parameters(model)


def test_config_errors():
    base = PRESETS["tiny"]
    with pytest.raises(ValueError, match=r"unknown norm 'batch'"):
        dataclasses.replace(base, norm="batch")
    with pytest.raises(ValueError, match=r"unknown positions 'learned'"):
        dataclasses.replace(base, positions="learned")
    with pytest.raises(ValueError, match="n_kv_heads=3 must divide n_heads=2"):
        dataclasses.replace(base, n_kv_heads=3)
    with pytest.raises(ValueError, match="d_model / n_heads = 3 must be even"):
        ModelConfig(d_model=6, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=4, dropout=0.0,
                    positions="rope")
    # odd d_model is fine without sinusoids
    ModelConfig(d_model=9, n_heads=3, n_encoder_layers=1, n_decoder_layers=1, d_ff=4, dropout=0.0, positions="alibi")
    with pytest.raises(ValueError, match="unknown ffn 'gelu'"):
        dataclasses.replace(base, ffn="gelu")
    with pytest.raises(TypeError, match="config must be a tmlib.model.config.ModelConfig, got dict"):
        DecoderOnly(base.to_dict())
    with pytest.raises(ValueError, match="positions must be None, 'rope' or 'alibi'"):
        ModernAttention(8, 2, positions="sinusoidal")
    with pytest.raises(ValueError, match="cross-attention"):
        ModernAttention(8, 2, positions="rope")(torch.zeros(1, 2, 8), torch.zeros(1, 3, 8), torch.zeros(1, 3, 8),
                                                   cache=KVCache(), static_kv=True)
    assert isinstance(make_positional("alibi", 8, 10, 0.0), NoPositionalEncoding)
    with pytest.raises(ValueError, match=r"offset 8 needs 11 positions, more than max_len=10"):
        NoPositionalEncoding(10, 0.0)(torch.zeros(1, 3, 8), offset=8)


# --------------------------------------------------------------------------- Llama (transformers)

def _llama_pair(dtype, d=32, h=4, kv=2, d_ff=48, seed=0):
    """Our pre-RMSNorm/SwiGLU/RoPE/GQA/bias-free block and transformers' LlamaDecoderLayer with the same
    weights (tmlib.model.bridges.to_llama_decoder_layer: W^Q and W^K rows permuted from our interleaved RoPE layout to
    Llama's rotate_half layout, what HF's conversion script does)."""
    pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")
    from tmlib.model import to_llama_decoder_layer

    torch.manual_seed(seed)
    config = ModelConfig(d_model=d, n_heads=h, d_ff=d_ff, dropout=0.0, norm_first=True, norm="rms", ffn="swiglu",
                         positions="rope", n_kv_heads=kv, bias=False, max_len=64)
    ours = DecoderLayer(config, cross_attention=False).to(dtype).eval()
    with torch.no_grad():
        for norm in (ours.norm1, ours.norm3):
            norm.weight.uniform_(0.5, 1.5)
    ref, cfg = to_llama_decoder_layer(ours, max_len=64)
    return ours, ref, cfg


def _hf_rope(d_k, n, dtype):
    """Hugging Face's default RoPE (LlamaRotaryEmbedding: inv_freq = 1 / base^(arange(0, d, 2) / d), the angles
    repeated for the two halves), evaluated in ``dtype`` (HF itself computes it in float32)."""
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d_k, 2, dtype=dtype) / d_k))
    freqs = torch.arange(n, dtype=dtype)[None, :, None] * inv_freq  # (1, n, d_k/2)
    emb = torch.cat([freqs, freqs], dim=-1)  # (1, n, d_k)
    return emb.cos(), emb.sin()


@numerics
def test_attention_equals_llama_attention_float64():
    """RoPE + GQA attention against LlamaAttention in float64 (with HF's RoPE formula in float64)."""
    ours, ref, _ = _llama_pair(torch.float64)
    x = torch.randn(2, 10, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs, _ = ref.self_attn(x, position_embeddings=_hf_rope(8, 10, torch.float64), attention_mask=None)
        mine, _ = ours.self_attn(x, x, x, is_causal=True)
    # projections (32), one head (d_k 8, 10 keys), W^O (32), and the rotations of angles up to 9: their 4
    # roundings reach the output multiplied by 9, so they count 4 * 9² (errors add in quadrature)
    assert_close(mine, theirs, n=2 * 32 + attention_length(8, 10) + 4 * 9 ** 2)
    # the layout matters: without the row permutation the results differ
    with torch.no_grad():
        ref.self_attn.q_proj.weight.copy_(ours.self_attn.w_q.weight)
        ref.self_attn.k_proj.weight.copy_(ours.self_attn.w_k.weight)
        wrong, _ = ref.self_attn(x, position_embeddings=_hf_rope(8, 10, torch.float64), attention_mask=None)
    assert max_diff(mine, wrong) > 1e-3


@numerics
def test_swiglu_equals_llama_mlp_float64():
    ours, ref, _ = _llama_pair(torch.float64)
    x = torch.randn(2, 10, 32, dtype=torch.float64)
    with torch.no_grad():
        assert_close(ours.feed_forward(x), ref.mlp(x), n=32 + 2 + 48)


@numerics
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_block_equals_llama_decoder_layer(dtype):
    """The whole block (pre-RMSNorm, SwiGLU, RoPE, GQA, no biases) against LlamaDecoderLayer with HF's own
    rotary module. A float32 comparison in both dtypes: HF's LlamaRMSNorm normalizes in float32 whatever the
    input dtype (its RoPE too), so float64 agreement stops at float32's precision."""
    from tmlib.model import llama_rotary

    ours, ref, cfg = _llama_pair(dtype)
    x = torch.randn(2, 10, 32, dtype=dtype, generator=torch.Generator().manual_seed(2))
    position_ids = torch.arange(10)[None].expand(2, 10)
    with torch.no_grad():
        cos_sin = llama_rotary(cfg)(x, position_ids)
        theirs = ref(x, attention_mask=None, position_ids=position_ids, position_embeddings=cos_sin)
        mine = ours(x, is_causal=True)
    assert mine.shape == theirs.shape == (2, 10, 32)
    # two RMSNorms (32), attention as above (rotations of angles up to 9 counted 4 * 9²), SwiGLU (32 and 48),
    # two residuals
    n = 2 * (32 + 4) + 2 * 32 + attention_length(8, 10) + 4 * 9 ** 2 + 32 + 2 + 48 + 2
    assert_close(mine, theirs, n=n, dtype=torch.float32)
    # and with a KV cache, token by token (positions offset by the cache length)
    cache = (KVCache(), None)
    with torch.no_grad():
        steps = torch.cat([ours(x[:, t:t + 1], cache=cache, is_causal=True) for t in range(10)], 1)
    assert_close(steps, theirs, n=n, dtype=torch.float32)


def test_llama_mapping_refuses_other_blocks():
    pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")
    from tmlib.model import halves_layout_rows, to_llama_decoder_layer

    with pytest.raises(ValueError, match="not a Llama-style block"):
        to_llama_decoder_layer(DecoderLayer(ModelConfig(d_model=16, n_heads=2, d_ff=8), cross_attention=False))
    assert halves_layout_rows(torch.arange(8.0)[:, None], 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


@pytest.mark.parametrize("positions", ["rope", "alibi"])
def test_compiles_without_graph_breaks(positions):
    """torch.compile(fullgraph=True) captures the whole modern model in one graph (no host reads, no Python
    branches on values), in training and in inference.
    The quick "aot_eager" backend checks the capture; speed is not measured here."""
    model = lm(positions, 2, dtype=torch.float32)
    ids = torch.randint(3, V, (2, 9), generator=torch.Generator().manual_seed(0))
    compiled = torch.compile(model, dynamic=True, fullgraph=True, backend="aot_eager")
    n = transformer_reduction_length(model.config, None, 9)  # the traced graph may fuse and reorder
    model.train()
    assert_close(compiled(ids), model(ids), n=n)
    model.eval()
    with torch.no_grad():
        assert_close(compiled(ids), model(ids), n=n)
