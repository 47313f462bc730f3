"""Tests of tmlib.model.attention against the NumPy references, the lecture's numbers and torch.nn.MultiheadAttention."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from tmlib.course import examples as E
from tmlib import ref as R
from tmlib.model import KVCache, MultiHeadAttention, causal_mask, scaled_dot_product_attention
from tmlib.model import attend, attend_fused, repeat_kv, with_causal_mask

from tolerances import assert_close, attention_length

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]
numerics = pytest.mark.numerics


def mha_length(d_model: int, d_k: int, n_k: int) -> int:
    """The roundings of multi-head attention: the projection (d_model), one head (score, softmax, weighted
    sum), the output projection (d_model)."""
    return 2 * d_model + attention_length(d_k, n_k)


def t64(a) -> torch.Tensor:
    return torch.tensor(np.array(a), dtype=torch.float64)


def max_diff(a, b) -> float:
    return (a.detach().double().cpu() - b.detach().double().cpu()).abs().max().item()


def make_pair(d_model, n_heads, dtype, device, bias=True, seed=0):
    """Our module and nn.MultiheadAttention holding the same weights."""
    torch.manual_seed(seed)
    ours = MultiHeadAttention(d_model, n_heads, bias=bias, dtype=dtype, device=device).eval()
    ref = nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True, dtype=dtype, device=device).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        ref.out_proj.weight.copy_(ours.w_o.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
            ref.out_proj.bias.copy_(ours.w_o.bias)
    return ours, ref


def padding(lengths, n, device) -> torch.Tensor:
    """(batch, n) bool, True = real token (our convention)."""
    return torch.arange(n, device=device)[None, :] < torch.tensor(lengths, device=device)[:, None]


# --- the lecture's numbers ------------------------------------------------------------------

def example_length(ex) -> int:
    return attention_length(ex.q.shape[-1], ex.k.shape[0])


@numerics
@pytest.mark.parametrize("ex", E.ATTENTION_EXAMPLES, ids=lambda e: e.name[:9])
@pytest.mark.parametrize("need_weights", [False, True])
def test_function_reproduces_numpy_ref(ex, need_weights):
    out, w = scaled_dot_product_attention(t64(ex.q), t64(ex.k), t64(ex.v), need_weights=need_weights)
    ref_out, ref_w = R.scaled_dot_product_attention(ex.q, ex.k, ex.v)
    assert_close(out, ref_out, n=example_length(ex))
    if need_weights:
        assert_close(w, ref_w, n=example_length(ex))
    else:
        assert w is None


@numerics
def test_function_closed_forms():
    # Example 2: equal scores, so the output is the mean of V's rows; example 3 likewise.
    ex2, ex3 = E.ATTENTION_EXAMPLE_2, E.ATTENTION_EXAMPLE_3
    out2, _ = scaled_dot_product_attention(t64(ex2.q), t64(ex2.k), t64(ex2.v))
    assert_close(out2, [[3.0, 2.0]], n=example_length(ex2))
    out3, w3 = scaled_dot_product_attention(t64(ex3.q), t64(ex3.k), t64(ex3.v), need_weights=True)
    assert_close(out3, [[5.0]], n=example_length(ex3))
    assert_close(w3, [[0.25] * 4], n=example_length(ex3))
    # Example 1, query 1: weights e^{a}/(2e^{a}+1) with a = 1/sqrt(2) on keys 1 and 3.
    ex = E.ATTENTION_EXAMPLE_1
    _, w1 = scaled_dot_product_attention(t64(ex.q), t64(ex.k), t64(ex.v), need_weights=True)
    a = np.exp(1 / np.sqrt(2))
    assert_close(w1[0], [a / (2 * a + 1), 1 / (2 * a + 1), a / (2 * a + 1)], n=example_length(ex))


@numerics
@pytest.mark.parametrize("need_weights", [False, True])
def test_module_reproduces_lecture_two_head_example(need_weights):
    ex = E.MHA_EXAMPLE_2
    mha = MultiHeadAttention.from_per_head_weights(ex.w_q, ex.w_k, ex.w_v, ex.w_o)
    assert mha.w_q.weight.dtype == torch.float64 and mha.w_q.bias is None
    out, w = mha(t64(ex.q)[None], t64(ex.k)[None], t64(ex.v)[None], need_weights=need_weights)
    ref_out, ref_w = R.multi_head_attention(ex.q, ex.k, ex.v, ex.w_q, ex.w_k, ex.w_v, ex.w_o)
    assert out.shape == (1, 3, 4)
    n = mha_length(4, 2, 3)
    assert_close(out[0], ref_out, n=n)
    if need_weights:
        assert w.shape == (1, 2, 3, 3)
        assert_close(w[0], ref_w, n=n)
    # The lecture's hand-computed projections of head 1 appear as the first d_k output features: products of
    # small integers, exact in floating point.
    q_proj = mha.w_q(t64(ex.q)).detach().numpy()
    np.testing.assert_array_equal(q_proj[:, :2], E.LECTURE_PRINTED["mha_2"]["q_1"])
    np.testing.assert_array_equal(q_proj[:, 2:], E.LECTURE_PRINTED["mha_2"]["q_2"])


def test_from_per_head_weights_rejects_uneven_heads():
    ex = E.MHA_EXAMPLE_3  # 3 heads of width 2 on d_model 4
    with pytest.raises(ValueError, match=r"h \* d_k = 3 \* 2 = 6 must equal d_model = 4"):
        MultiHeadAttention.from_per_head_weights(ex.w_q, ex.w_k, ex.w_v, ex.w_o)
    with pytest.raises(ValueError, match="w_o must have shape"):
        MultiHeadAttention.from_per_head_weights(E.MHA_EXAMPLE_2.w_q, E.MHA_EXAMPLE_2.w_k, E.MHA_EXAMPLE_2.w_v,
                                                 np.eye(3))


# --- equality with nn.MultiheadAttention -------------------------------------------------------

MASK_CASES = ["none", "causal", "padding", "causal+padding"]


@numerics
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
@pytest.mark.parametrize("masks", MASK_CASES)
@pytest.mark.parametrize("need_weights", [False, True])
def test_matches_nn_multiheadattention(device, dtype, cross, masks, need_weights):
    batch, n_q, d_model, n_heads = 3, 5, 16, 4
    n_k = 7 if cross else n_q
    ours, ref = make_pair(d_model, n_heads, dtype, device)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, n_q, d_model, generator=g, dtype=dtype).to(device)
    mem = torch.randn(batch, n_k, d_model, generator=g, dtype=dtype).to(device) if cross else x
    attn_mask = causal_mask(n_q, n_k, device=device) if "causal" in masks else None  # True = may attend
    kpm = padding([n_k, n_k - 2, 3], n_k, device) if "padding" in masks else None  # True = real token
    out, w = ours(x, mem, mem, attn_mask=attn_mask, real_keys=kpm, need_weights=need_weights)
    # nn.MultiheadAttention: True = *blocked* for both masks, so pass the complements.
    ref_out, ref_w = ref(x, mem, mem,
                         attn_mask=None if attn_mask is None else ~attn_mask,
                         key_padding_mask=None if kpm is None else ~kpm,
                         need_weights=need_weights, average_attn_weights=False)
    n = mha_length(d_model, d_model // n_heads, n_k)
    assert out.shape == (batch, n_q, d_model)
    assert_close(out, ref_out, n=n)
    if need_weights:
        assert w.shape == (batch, n_heads, n_q, n_k)
        assert_close(w, ref_w, n=n, magnitude=1.0)  # probabilities
    else:
        assert w is None


@numerics
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_per_batch_and_per_head_masks_match_nn(dtype):
    batch, n, d_model, n_heads = 2, 4, 8, 2
    ours, ref = make_pair(d_model, n_heads, dtype, "cpu")
    x = torch.randn(batch, n, d_model, dtype=dtype, generator=torch.Generator().manual_seed(2))
    m4 = torch.rand(batch, n_heads, n, n, generator=torch.Generator().manual_seed(3)) > 0.4
    m4[..., 0] = True  # every row keeps one key
    out4, w4 = ours(x, x, x, attn_mask=m4, need_weights=True)
    # nn.MultiheadAttention's 3-D mask is (batch * n_heads, n_q, n_k), True = blocked.
    ref_out, ref_w = ref(x, x, x, attn_mask=~m4.reshape(batch * n_heads, n, n), average_attn_weights=False)
    n_chain = mha_length(d_model, d_model // n_heads, n)
    assert_close(out4, ref_out, n=n_chain)
    assert_close(w4, ref_w, n=n_chain, magnitude=1.0)
    # A (batch, n_q, n_k) mask is the 4-D mask repeated over heads.
    m3 = m4[:, 0]
    out3, _ = ours(x, x, x, attn_mask=m3)
    out3b, _ = ours(x, x, x, attn_mask=m3[:, None].expand(batch, n_heads, n, n).contiguous())
    assert_close(out3, out3b, n=n_chain)


# --- fused vs explicit ------------------------------------------------------------------------

@numerics
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "random", "padding"])
def test_fused_and_explicit_paths_agree(device, dtype, mask_kind):
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 3, 6, 8, generator=g, dtype=dtype).to(device)  # (batch, n_heads, n_q, d_k)
    k = torch.randn(2, 3, 6, 8, generator=g, dtype=dtype).to(device)
    v = torch.randn(2, 3, 6, 5, generator=g, dtype=dtype).to(device)
    mask = {
        "none": None,
        "causal": causal_mask(6, device=device),
        "random": (torch.rand(2, 3, 6, 6, generator=g) > 0.5).to(device) | torch.eye(6, dtype=torch.bool, device=device),
        "padding": padding([6, 2], 6, device)[:, None, None, :],
    }[mask_kind]
    fused, none = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    explicit, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, need_weights=True)
    assert none is None and fused.shape == explicit.shape == (2, 3, 6, 5)
    n = attention_length(8, 6)
    assert_close(fused, explicit, n=n)
    # and both equal an independent float64 NumPy computation (on the same inputs: a float32 comparison)
    ref_out, _ = R.scaled_dot_product_attention(q.double().cpu().numpy(), k.double().cpu().numpy(),
                                                v.double().cpu().numpy(),
                                                None if mask is None else mask.cpu().numpy())
    assert_close(explicit, ref_out, n=n)
    assert_close(fused, ref_out, n=n)


# --- the named units: equation 1, the fused kernel, the steps of multi-head attention -------------------

@numerics
@pytest.mark.parametrize("ex", E.ATTENTION_EXAMPLES, ids=lambda e: e.name[:9])
def test_readable_and_fused_units_reproduce_numpy_ref(ex):
    out, w = attend(t64(ex.q), t64(ex.k), t64(ex.v))  # equation 1 as written
    ref_out, ref_w = R.scaled_dot_product_attention(ex.q, ex.k, ex.v)
    n = example_length(ex)
    assert_close(out, ref_out, n=n)
    assert_close(w, ref_w, n=n)
    assert_close(attend_fused(t64(ex.q), t64(ex.k), t64(ex.v)), ref_out, n=n)


@numerics
def test_units_fully_masked_row_bias_and_causal():
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64) for _ in range(3))
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[2] = False  # query 2 may see nothing
    bias = torch.randn(3, 4, 4, generator=g, dtype=torch.float64)
    out, w = attend(q, k, v, mask, bias)
    assert torch.all(w[..., 2, :] == 0) and torch.all(out[..., 2, :] == 0) and not torch.isnan(out).any()
    n = attention_length(5, 4) + 1  # the bias is one more addition
    assert_close(attend_fused(q, k, v, mask, bias), out, n=n)
    causal_out, _ = attend(q, k, v, with_causal_mask(None, 4, 4))
    assert_close(attend_fused(q, k, v, is_causal=True), causal_out, n=n)
    assert with_causal_mask(None, 1, 4) is None and with_causal_mask(mask, 1, 4) is mask  # one query sees all keys
    assert torch.equal(with_causal_mask(mask, 4, 4), mask & causal_mask(4))


def test_repeat_kv_and_head_split_merge():
    kv = torch.arange(2 * 2 * 3 * 4.0).view(2, 2, 3, 4)  # (batch, n_kv_heads, n_k, d)
    rep = repeat_kv(kv, 3)  # (batch, 6, n_k, d): head h is kv head h // 3
    assert rep.shape == (2, 6, 3, 4) and all(torch.equal(rep[:, h], kv[:, h // 3]) for h in range(6))
    assert repeat_kv(kv, 1) is kv
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(3, 5, 8)
    heads = mha.split_heads(x, 2)  # (batch, n_heads, n, d_k)
    assert heads.shape == (3, 2, 5, 4) and torch.equal(heads[:, 1], x[..., 4:])
    assert torch.equal(mha.merge_heads(heads), x)


# --- masks, rows, dropout ---------------------------------------------------------------------

@numerics
def test_masked_weights_are_exactly_zero_and_rows_sum_to_one():
    mha = MultiHeadAttention(8, 2).double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    kpm = padding([5, 3], 5, "cpu")
    _, w = mha(x, x, x, attn_mask=causal_mask(5), real_keys=kpm, need_weights=True)
    allowed = causal_mask(5)[None, None] & kpm[:, None, None, :]  # (batch, 1, n_q, n_k)
    assert torch.all(w.masked_select(~allowed.expand_as(w)) == 0.0)
    assert torch.all(w.masked_select(allowed.expand_as(w)) > 0.0)
    assert_close(w.sum(-1), torch.ones(2, 2, 5, dtype=torch.float64), n=attention_length(4, 5) + 5)


@numerics
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_row_gives_zeros_not_nan(device, need_weights):
    q = torch.randn(1, 3, 4, dtype=torch.float64)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    out, w = scaled_dot_product_attention(q.to(device), q.to(device), q.to(device), attn_mask=mask.to(device),
                                          need_weights=need_weights)
    out, w = out.cpu(), (None if w is None else w.cpu())
    assert not torch.isnan(out).any()
    assert torch.all(out[0, 1] == 0.0)
    ref_out, ref_w = R.scaled_dot_product_attention(q.numpy()[0][[0, 2]], q.numpy()[0], q.numpy()[0], mask.numpy()[[0, 2]])
    assert_close(out[0, [0, 2]], ref_out, n=attention_length(4, 3))
    if need_weights:
        assert torch.all(w[0, 1] == 0.0)
        assert_close(w[0, [0, 2]], ref_w, n=attention_length(4, 3))
    # In the module the heads give zeros, so the output row is w_o's bias (zero plus the bias: exact).
    mha = MultiHeadAttention(4, 2).double().eval()
    x = torch.randn(1, 3, 4, dtype=torch.float64)
    out_m, _ = mha(x, x, x, attn_mask=mask, need_weights=need_weights)
    torch.testing.assert_close(out_m[0, 1], mha.w_o.bias.detach(), rtol=0, atol=0)


def test_dropout_only_in_training():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, dropout=0.5).double()
    plain = MultiHeadAttention(16, 4, dropout=0.0).double()
    plain.load_state_dict(mha.state_dict())
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    mha.eval()
    plain.eval()
    for need_weights in (False, True):
        a, _ = mha(x, x, x, need_weights=need_weights)
        b, _ = mha(x, x, x, need_weights=need_weights)
        c, _ = plain(x, x, x, need_weights=need_weights)
        assert torch.equal(a, b)  # eval: deterministic
        assert_close(a, c, n=mha_length(16, 4, 6))  # eval: dropout inactive
    mha.train()
    for need_weights in (False, True):
        a, _ = mha(x, x, x, need_weights=need_weights)
        b, _ = mha(x, x, x, need_weights=need_weights)
        assert max_diff(a, c) > 1e-3 and max_diff(a, b) > 1e-3
    # explicit path in training: the returned weights are 0 or 2x the eval weights
    _, w_eval = plain(x, x, x, need_weights=True)
    _, w_train = mha(x, x, x, need_weights=True)
    dropped = w_train == 0
    assert 0.3 < dropped.double().mean().item() < 0.7
    assert_close(w_train[~dropped], 2 * w_eval[~dropped], n=mha_length(16, 4, 6) + 1)  # scaled by 1/(1 - p)


def test_function_dropout_ignored_when_not_training():
    q = torch.randn(2, 4, 8)
    a, _ = scaled_dot_product_attention(q, q, q, dropout_p=0.9, training=False)
    b, _ = scaled_dot_product_attention(q, q, q)
    assert torch.equal(a, b)


# --- KV cache ---------------------------------------------------------------------------------

@numerics
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("need_weights", [False, True])
def test_kv_cache_incremental_equals_full_causal(device, dtype, need_weights):
    torch.manual_seed(5)
    mha = MultiHeadAttention(16, 4, dtype=dtype, device=device).eval()
    x = torch.randn(2, 7, 16, dtype=dtype, device=device)
    full, _ = mha(x, x, x, attn_mask=causal_mask(7, device=device))
    cache = KVCache()
    steps = []
    for t in range(7):
        step = x[:, t:t + 1]  # (batch, 1, d_model): only the new position
        out, w = mha(step, step, step, cache=cache, need_weights=need_weights)
        assert len(cache) == t + 1
        assert cache.k.shape == (2, 4, t + 1, 4)
        if need_weights:
            assert w.shape == (2, 4, 1, t + 1)
        steps.append(out)
    assert_close(torch.cat(steps, dim=1), full, n=mha_length(16, 4, 7))


@numerics
def test_kv_cache_chunked_prefill_then_step():
    torch.manual_seed(6)
    mha = MultiHeadAttention(8, 2).double().eval()
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    full, _ = mha(x, x, x, attn_mask=causal_mask(6))
    cache = KVCache()
    first, _ = mha(x[:, :4], x[:, :4], x[:, :4], attn_mask=causal_mask(4), cache=cache)  # prompt of 4
    rest, _ = mha(x[:, 4:], x[:, 4:], x[:, 4:], attn_mask=causal_mask(2, 6), cache=cache)  # 2 more
    assert_close(torch.cat([first, rest], 1), full, n=mha_length(8, 4, 6))


@numerics
def test_static_kv_projects_memory_once_and_ignores_later_keys():
    torch.manual_seed(7)
    mha = MultiHeadAttention(8, 2).double().eval()
    y = torch.randn(2, 4, 8, dtype=torch.float64)  # decoder queries
    mem = torch.randn(2, 5, 8, dtype=torch.float64)  # encoder memory
    kpm = padding([5, 3], 5, "cpu")
    full, _ = mha(y, mem, mem, real_keys=kpm)
    calls = {"k": 0, "v": 0}
    hooks = [mha.w_k.register_forward_hook(lambda *a: calls.__setitem__("k", calls["k"] + 1)),
             mha.w_v.register_forward_hook(lambda *a: calls.__setitem__("v", calls["v"] + 1))]
    cache = KVCache()
    outs = []
    for t in range(4):
        wrong = torch.full_like(mem, 100.0)  # would change everything if it were used
        key = mem if t == 0 else (wrong if t % 2 else None)
        out, _ = mha(y[:, t:t + 1], key, key, real_keys=kpm, cache=cache, static_kv=True)
        outs.append(out)
        assert len(cache) == 5
    for h in hooks:
        h.remove()
    assert calls == {"k": 1, "v": 1}
    assert_close(torch.cat(outs, 1), full, n=mha_length(8, 4, 5))


def test_kv_cache_reorder_and_validation():
    cache = KVCache()
    assert len(cache) == 0 and cache.k is None
    k = torch.arange(3.0)[:, None, None, None].expand(3, 2, 1, 4)  # batch row i holds value i
    cache.append(k, k.clone())
    cache.append(k + 10, k + 10)
    assert len(cache) == 2
    cache.reorder(torch.tensor([2, 0, 0]))
    assert cache.k.shape == (3, 2, 2, 4)
    assert cache.k[:, 0, 0, 0].tolist() == [2.0, 0.0, 0.0]
    assert cache.v[:, 0, 1, 0].tolist() == [12.0, 10.0, 10.0]
    with pytest.raises(ValueError, match=r"do not match the cache"):
        cache.append(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 4))
    with pytest.raises(ValueError, match=r"\(batch, n_heads, t_new, d\)"):
        cache.append(torch.zeros(3, 1, 4), torch.zeros(3, 1, 4))
    with pytest.raises(ValueError, match="index must be 1-D"):
        cache.reorder(torch.zeros(2, 2, dtype=torch.long))


def test_causal_mask_helper():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    np.testing.assert_array_equal(causal_mask(5).numpy(), R.causal_mask(5))
    with pytest.raises(ValueError, match="n_q <= n_k"):
        causal_mask(3, 2)


# --- bad inputs -------------------------------------------------------------------------------

def test_bad_inputs_raise_with_named_shapes():
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by n_heads=4"):
        MultiHeadAttention(10, 4)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"attn_mask has shape \(3, 4\); expected \(n_q, n_k\) = \(3, 3\)"):
        mha(x, x, x, attn_mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(1, 3, 3\)"):
        mha(x, x, x, attn_mask=torch.ones(1, 3, 3, dtype=torch.bool))  # batch 1 is not broadcast silently
    with pytest.raises(TypeError, match=r"attn_mask must be a boolean tensor.*torch.float32"):
        mha(x, x, x, attn_mask=torch.zeros(3, 3))
    with pytest.raises(TypeError, match=r"real_keys must be a boolean tensor.*torch.int64"):
        mha(x, x, x, real_keys=torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"real_keys has shape \(2, 4\), expected \(batch, n_k\) = \(2, 3\)"):
        mha(x, x, x, real_keys=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key has batch size 1 \(shape \(1, 3, 8\)\) but query has batch 2"):
        mha(x, x[:1], x[:1])
    with pytest.raises(ValueError, match=r"query has shape \(2, 3, 6\): its last size must be d_model=8"):
        mha(torch.randn(2, 3, 6), x, x)
    with pytest.raises(ValueError, match=r"key \(2, 3, 8\) and value \(2, 4, 8\) must have the same number"):
        mha(x, x, torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=r"query must be \(batch, seq_len, d_model\), got shape \(3, 8\)"):
        mha(x[0], x, x)
    with pytest.raises(TypeError, match="query must be a torch.Tensor"):
        mha(x.numpy(), x, x)
    with pytest.raises(ValueError, match="key and value are required"):
        mha(x, None, None, cache=KVCache(), static_kv=True)


def test_function_bad_inputs():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"query and key must share d_k: query has shape \(2, 3, 4\), key has shape \(2, 3, 5\)"):
        scaled_dot_product_attention(q, torch.randn(2, 3, 5), torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match=r"key and value must have the same number of positions"):
        scaled_dot_product_attention(q, q, torch.randn(2, 4, 4))
    with pytest.raises(ValueError, match=r"leading \(batch\) dimensions exactly"):
        scaled_dot_product_attention(q, torch.randn(1, 3, 4), torch.randn(1, 3, 4))
    with pytest.raises(ValueError, match=r"attn_mask of shape \(4, 3\) does not broadcast .* \(2, 3, 3\)"):
        scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"attn_mask of shape \(1, 2, 3, 3\) does not broadcast"):
        scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(1, 2, 3, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="attn_mask must be a boolean tensor"):
        scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(3, 3))
    with pytest.raises(TypeError, match="must share a dtype"):
        scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\)"):
        scaled_dot_product_attention(q, q, q, dropout_p=1.0)


# --- GPU --------------------------------------------------------------------------------------

@CUDA
def test_cuda_float32_and_bf16_autocast():
    """float32 on CUDA equals the float64 CPU result (TF32 off), bf16 autocast too, each to its dtype's
    tolerance: float32 rounds along the whole chain; under autocast the products accumulate in float32 and the
    bf16 roundings are those of the inputs and outputs of the four products (8 on the chain)."""
    torch.manual_seed(8)
    cpu = MultiHeadAttention(64, 8).double().eval()
    gpu = MultiHeadAttention(64, 8).to("cuda", torch.float32).eval()
    gpu.load_state_dict({k: v.float() for k, v in cpu.state_dict().items()})
    x = torch.randn(4, 32, 64, dtype=torch.float64)
    kpm = padding([32, 20, 9, 1], 32, "cpu")
    ref, _ = cpu(x, x, x, attn_mask=causal_mask(32), real_keys=kpm)
    xg, kpmg = x.float().cuda(), kpm.cuda()
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for need_weights in (False, True):
            out, _ = gpu(xg, xg, xg, attn_mask=causal_mask(32, device="cuda"), real_keys=kpmg,
                         need_weights=need_weights)
            assert out.device.type == "cuda" and out.dtype == torch.float32
            assert_close(out, ref, n=mha_length(64, 8, 32))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    with torch.autocast("cuda", dtype=torch.bfloat16):
        for need_weights in (False, True):
            out, _ = gpu(xg, xg, xg, attn_mask=causal_mask(32, device="cuda"), real_keys=kpmg,
                         need_weights=need_weights)
            assert out.dtype == torch.bfloat16
            assert not torch.isnan(out).any()
            assert_close(out, ref, n=8)


# --- GPU-minded paths (issue 8): is_causal, no materialised masks -------------------------------------------

@numerics
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_is_causal_equals_explicit_causal_mask(dtype, need_weights, padded):
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 4, dtype=dtype).eval()
    x = torch.randn(3, 7, 16, dtype=dtype)
    kpm = padding([7, 5, 2], 7, "cpu") if padded else None
    flag, w_flag = mha(x, x, x, is_causal=True, real_keys=kpm, need_weights=need_weights)
    mask, w_mask = mha(x, x, x, attn_mask=causal_mask(7), real_keys=kpm, need_weights=need_weights)
    n = mha_length(16, 4, 7)
    assert_close(flag, mask, n=n)
    if need_weights:
        assert_close(w_flag, w_mask, n=n, magnitude=1.0)
        assert torch.triu(w_flag, diagonal=1).abs().max() == 0
    # is_causal and a mask combine by "and"
    both, _ = mha(x, x, x, attn_mask=causal_mask(7), is_causal=True, real_keys=kpm)
    assert_close(both, mask, n=n)


@numerics
def test_function_is_causal_is_aligned_to_the_last_queries():
    """Unlike torch's flag (top-left), is_causal here treats the queries as the last n_q positions, as
    causal_mask(n_q, n_k) and a KV cache need."""
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 3, 3, 4, generator=g, dtype=torch.float64)  # 3 new queries
    k = torch.randn(2, 3, 8, 4, generator=g, dtype=torch.float64)  # after 5 cached keys
    v = torch.randn(2, 3, 8, 4, generator=g, dtype=torch.float64)
    for need_weights in (False, True):
        ours, _ = scaled_dot_product_attention(q, k, v, is_causal=True, need_weights=need_weights)
        ref, _ = scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(3, 8), need_weights=need_weights)
        assert_close(ours, ref, n=attention_length(4, 8))
    top_left = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert max_diff(ours, top_left) > 1e-3  # torch's flag would mean something else here
    with pytest.raises(ValueError, match="is_causal needs at least as many keys as queries"):
        scaled_dot_product_attention(k, q, q, is_causal=True)


def test_torch_causal_flag_and_no_mask_are_what_reaches_the_kernel(monkeypatch):
    """The decoder's full pass reaches F.scaled_dot_product_attention with is_causal=True and no mask tensor;
    a cached single-token step with no mask at all; padding only where there is some."""
    import tmlib.model.attention as A

    calls = []
    real = A.F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, enable_gqa=False):
        calls.append((attn_mask is None, is_causal, q.shape[-2], k.shape[-2]))
        return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, enable_gqa=enable_gqa)

    monkeypatch.setattr(A.F, "scaled_dot_product_attention", spy)
    torch.manual_seed(3)
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 5, 8)
    mha(x, x, x, is_causal=True)
    assert calls[-1] == (True, True, 5, 5)  # flash-eligible: no mask tensor
    cache = KVCache()
    mha(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=cache)
    mha(x[:, 4:], x[:, 4:], x[:, 4:], is_causal=True, cache=cache)
    assert calls[-2] == (True, True, 4, 4) and calls[-1] == (True, False, 1, 5)  # one query: no mask at all
    mha(x, x, x, is_causal=True, real_keys=padding([5, 3], 5, "cpu"))
    assert calls[-1][:2] == (False, False)  # padding: an explicit mask is needed
