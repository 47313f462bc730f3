"""Tests behind notebooks 5 (masks and the decoder) and 6 (the training recipe).

Expected values are closed forms or hand-computed numbers, written independently of the
code under test.  Basic mask and learning-rate properties already tested in
tests/test_numpy_ref.py are not repeated here.
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest

from tmlib import analysis as C
from tmlib.course import examples as E
from tmlib import ref as R
from tolerances import assert_close, attention_length, transformer_reduction_length

numerics = pytest.mark.numerics

A = math.exp(1 / math.sqrt(2))  # e^{1/√2}
B = math.exp(math.sqrt(2))      # e^{√2}


# ---------------------------------------------------------------- notebook 5: cross-attention
@numerics
def test_cross_attention_example_closed_form():
    cx = E.CROSS_ATTENTION_EXAMPLE
    out, w = R.scaled_dot_product_attention(cx.q, cx.k, cx.v)
    assert w.shape == (2, 3)  # (n_tgt, n_src)
    assert out.shape == (2, 2)
    # scaled scores: row 0 (√2, 0, √2), row 1 (1/√2, 1/√2, √2)
    w_expected = np.array([
        [B / (2 * B + 1), 1 / (2 * B + 1), B / (2 * B + 1)],
        [A / (2 * A + B), A / (2 * A + B), B / (2 * A + B)],
    ])
    n = attention_length(2, 3)
    assert_close(w, w_expected, n=n)
    # outputs by hand: row 0 = ((B + 3), (2B + B)) / (2B + 1); row 1 = (4A, 2A + B) / (2A + B)
    assert_close(out[0], [(B + 3) / (2 * B + 1), 3 * B / (2 * B + 1)], n=n)
    assert_close(out[1], [4 * A / (2 * A + B), 1.0], n=n)
    # the notebook's printed numbers
    np.testing.assert_array_equal(np.round(w, 4), [[0.4458, 0.1084, 0.4458], [0.2483, 0.2483, 0.5035]])
    np.testing.assert_array_equal(np.round(out, 4), [[0.771, 1.3374], [0.993, 1.0]])


@numerics
def test_cross_attention_needs_source_padding_mask():
    cx = E.CROSS_ATTENTION_EXAMPLE
    ref, _ = R.scaled_dot_product_attention(cx.q, cx.k, cx.v)
    k_pad = np.vstack([cx.k, [[5.0, 5.0]]])
    v_pad = np.vstack([cx.v, [[9.0, 9.0]]])
    unmasked, _ = R.scaled_dot_product_attention(cx.q, k_pad, v_pad)
    masked, w = R.scaled_dot_product_attention(cx.q, k_pad, v_pad, mask=R.padding_mask([3], max_len=4)[0])
    assert_close(masked, ref, n=attention_length(2, 4))
    assert (w[:, 3] == 0).all()
    assert np.abs(unmasked - ref).max() > 1.0


# ---------------------------------------------------------------- notebook 5: masks
@numerics
def test_causal_mask_on_example_1_closed_form():
    ex = E.ATTENTION_EXAMPLE_1
    out, w = R.scaled_dot_product_attention(ex.q, ex.k, ex.v, mask=R.causal_mask(3))
    expected = np.array([[1, 0, 0], [0.5, 0.5, 0], [B / (B + 2 * A), A / (B + 2 * A), A / (B + 2 * A)]])
    assert_close(w, expected, n=attention_length(2, 3))
    assert_close(out[1], [0.5, 1.5], n=attention_length(2, 3))  # average of v0 = (0, 2) and v1 = (1, 1)


@numerics
def test_zeroing_after_softmax_breaks_normalisation():
    ex = E.ATTENTION_EXAMPLE_1
    _, w = R.scaled_dot_product_attention(ex.q, ex.k, ex.v)
    wrong = np.where(R.causal_mask(3), w, 0.0)
    assert_close(wrong.sum(-1), [A / (2 * A + 1), 2 * A / (2 * A + 1), 1.0], n=attention_length(2, 3) + 3)
    assert round(wrong.sum(-1)[0], 4) == 0.4011


@numerics
def test_causal_and_padding_combined_equals_truncated_causal():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 5, 3))
    x[1, 3:] = 1e3  # junk in padding
    pad = R.padding_mask([5, 3])
    mask = R.causal_mask(5)[None] & pad
    assert mask.shape == (2, 5, 5) and mask.dtype == bool
    # a key is visible iff it is not in the future and not padding
    for b, length in enumerate([5, 3]):
        for i in range(5):
            for j in range(5):
                assert mask[b, i, j] == (j <= i and j < length)
    out, _ = R.scaled_dot_product_attention(x, x, x, mask=mask)
    ref, _ = R.scaled_dot_product_attention(x[1, :3], x[1, :3], x[1, :3], mask=R.causal_mask(3))
    assert_close(out[1, :3], ref, n=attention_length(3, 5))


def test_strictly_before_mask_leaves_first_row_empty():
    ex = E.ATTENTION_EXAMPLE_1
    strict = np.tril(np.ones((3, 3), dtype=bool), k=-1)
    with pytest.raises(ValueError, match="fully masked"):
        R.scaled_dot_product_attention(ex.q, ex.k, ex.v, mask=strict)


def test_causal_mask_counts():
    for n in (1, 2, 7, 64):
        assert R.causal_mask(n).sum() == n * (n + 1) // 2


def test_shift_right():
    tgt = np.array([3, 4, 5, 2])
    np.testing.assert_array_equal(R.shift_right(tgt, bos_id=1), [1, 3, 4, 5])
    batch = np.array([[7, 8, 9], [4, 0, 0]])
    np.testing.assert_array_equal(R.shift_right(batch, 1), [[1, 7, 8], [1, 4, 0]])
    assert R.shift_right(np.array([6]), 1).tolist() == [1]
    with pytest.raises(TypeError, match="integer ids"):
        R.shift_right(np.array([1.0, 2.0]), 1)
    with pytest.raises(TypeError, match="bos_id"):
        R.shift_right(tgt, 1.5)
    with pytest.raises(ValueError, match=r"seq_len >= 1, got \(0,\)"):
        R.shift_right(np.array([], dtype=int), 1)


# ---------------------------------------------------------------- notebook 6: label smoothing
def test_label_smoothing_targets_v4_hand_values():
    excl = R.label_smoothing_targets([0], 4, 0.1, convention="exclusive")
    unif = R.label_smoothing_targets([0], 4, 0.1, convention="uniform")
    assert_close(excl, [[0.9, 0.1 / 3, 0.1 / 3, 0.1 / 3]], n=2)
    assert_close(unif, [[0.925, 0.025, 0.025, 0.025]], n=3)
    np.testing.assert_array_equal(np.round(excl, 4), [[0.9, 0.0333, 0.0333, 0.0333]])


def test_label_smoothing_targets_shapes_and_sums():
    y = np.array([[0, 2], [1, 3]])
    for conv in ("exclusive", "uniform"):
        t = R.label_smoothing_targets(y, 5, 0.2, conv)
        assert t.shape == (2, 2, 5)
        assert_close(t.sum(-1), 1.0, n=3 + 5)  # each entry (up to 3 roundings), a sum of 5
        assert (np.argmax(t, -1) == y).all()
    # ε = 0 gives one-hot targets in both conventions
    np.testing.assert_array_equal(R.label_smoothing_targets([1], 3, 0.0, "exclusive"), [[0, 1, 0]])
    np.testing.assert_array_equal(R.label_smoothing_targets([1], 3, 0.0, "uniform"), [[0, 1, 0]])


def test_label_smoothing_paper_vocabulary():
    # the in-class question: true-class probability with ε = 0.1 and a ~37000-token vocabulary
    assert_close(R.label_smoothing_targets([0], 37000, 0.1, "exclusive")[0, 0], 0.9, n=2)
    assert_close(R.label_smoothing_targets([0], 37000, 0.1, "uniform")[0, 0], 0.9 + 0.1 / 37000, n=3)


@numerics
def test_pytorch_label_smoothing_equals_uniform_target():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 9)) * 3
    y = rng.integers(0, 9, size=6)
    loss_t = F.cross_entropy(torch.tensor(logits), torch.tensor(y), label_smoothing=0.1).item()
    # independent computation with explicit log-softmax
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    q = np.full((6, 9), 0.1 / 9)
    q[np.arange(6), y] += 0.9
    # float64 throughout: log-sum-exp over 9 logits (up to |z| ~ 10), the sum over 9 classes, the mean of 6
    n, scale = 9 + 9 + 6, np.abs(logits).max()
    assert_close(loss_t, float(-(q * logp).sum(-1).mean()), n=n, magnitude=scale)
    assert_close(loss_t, float(R.cross_entropy(logits, R.label_smoothing_targets(y, 9, 0.1)).mean()), n=n,
                 magnitude=scale)
    excl = float(R.cross_entropy(logits, R.label_smoothing_targets(y, 9, 0.1, "exclusive")).mean())
    assert abs(loss_t - excl) > 1e-4


@numerics
def test_cross_entropy_hand_values_and_optimum():
    # uniform logits over V classes: loss = ln V for any target distribution
    assert_close(R.cross_entropy(np.zeros(4), [0.9, 0.1 / 3, 0.1 / 3, 0.1 / 3]), math.log(4), n=2 * 4 + 2)
    # logits (ln 2, 0) -> p = (2/3, 1/3); one-hot target on class 0 -> ln 1.5
    assert_close(R.cross_entropy([math.log(2), 0.0], [1.0, 0.0]), math.log(1.5), n=2 * 2 + 2)
    # the optimal gap under smoothing is ln(t_true / t_other): ln 27 (exclusive), ln 37 (uniform) for V = 4
    for conv, gap in (("exclusive", math.log(27)), ("uniform", math.log(37))):
        t = R.label_smoothing_targets([0], 4, 0.1, conv)[0]
        z = np.array([gap, 0, 0, 0])
        # exponents up to ln 37 = 3.6: softmax, then a log-sum-exp and a sum over 4 classes
        assert_close(R.softmax(z), t, n=2 + 4, magnitude=gap)
        entropy = -(t * np.log(t)).sum()
        assert_close(R.cross_entropy(z, t), entropy, n=2 * 4 + 2, magnitude=gap)
        assert R.cross_entropy(z + [0.01, 0, 0, 0], t) > R.cross_entropy(z, t)
        assert R.cross_entropy(z - [0.01, 0, 0, 0], t) > R.cross_entropy(z, t)
    # stable for large logits
    assert np.isfinite(R.cross_entropy([1000.0, 0.0], [0.5, 0.5]))


def test_label_smoothing_and_cross_entropy_errors():
    with pytest.raises(ValueError, match="convention must be 'uniform' or 'exclusive', got 'paper'"):
        R.label_smoothing_targets([0], 4, 0.1, convention="paper")
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\), got 1.0"):
        R.label_smoothing_targets([0], 4, 1.0)
    with pytest.raises(ValueError, match="vocab_size must be at least 2, got 1"):
        R.label_smoothing_targets([0], 1, 0.1)
    with pytest.raises(TypeError, match="vocab_size must be an integer"):
        R.label_smoothing_targets([0], 4.0, 0.1)
    with pytest.raises(ValueError, match=r"targets must lie in 0..3, got values \[0, 4\]"):
        R.label_smoothing_targets([0, 4], 4, 0.1)
    with pytest.raises(TypeError, match="targets must be integer"):
        R.label_smoothing_targets([0.0], 4, 0.1)
    with pytest.raises(ValueError, match=r"logits \(2, 3\) and target_dist \(2, 4\)"):
        R.cross_entropy(np.zeros((2, 3)), np.full((2, 4), 0.25))
    with pytest.raises(ValueError, match="sum to 1"):
        R.cross_entropy(np.zeros(3), [0.5, 0.5, 0.5])


# ---------------------------------------------------------------- notebook 6: dropout
def test_dropout_inverted_scaling():
    rng = np.random.default_rng(0)
    y = R.dropout(np.ones(20000), 0.1, rng)
    assert set(np.unique(y)) == {0.0, 1 / 0.9}
    assert abs((y == 0).mean() - 0.1) < 0.01   # ~10% dropped (binomial sd 0.002)
    assert abs(y.mean() - 1.0) < 0.01           # expectation preserved
    x = np.arange(6.0)
    np.testing.assert_array_equal(R.dropout(x, 0.5, rng, training=False), x)
    np.testing.assert_array_equal(R.dropout(x, 0.0, rng), x)
    # same seed, same mask
    np.testing.assert_array_equal(R.dropout(x, 0.3, np.random.default_rng(5)), R.dropout(x, 0.3, np.random.default_rng(5)))


def test_dropout_errors():
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\), got 1.0"):
        R.dropout(np.ones(3), 1.0, np.random.default_rng(0))
    with pytest.raises(TypeError, match="numpy.random.Generator, got int"):
        R.dropout(np.ones(3), 0.1, 0)


# ---------------------------------------------------------------- notebook 6: learning rate
def test_lr_example_values_printed_in_notebook():
    ex = E.LR_EXAMPLE
    printed = {1: "1.747e-07", 1000: "0.0001747", 4000: "0.0006988", 10000: "0.0004419", 100000: "0.0001398"}
    for s in ex["steps"]:
        lr = R.noam_lr(s, ex["d_model"], ex["warmup_steps"])
        assert f"{lr:.4g}" == printed[s]
    # after the peak: lr = 1/sqrt(d_model * step)
    assert_close(R.noam_lr(10000, 512, 4000), 1 / math.sqrt(512 * 10000), n=4)


# ---------------------------------------------------------------- notebook 6: costs
def test_complexity_per_layer_hand_values():
    assert C.complexity_per_layer("self_attention", 10, 4) == 400
    assert C.complexity_per_layer("recurrent", 10, 4) == 160
    assert C.complexity_per_layer("convolutional", 10, 4, k=3) == 480
    assert C.complexity_per_layer("restricted_self_attention", 10, 4, r=2) == 80
    # the paper's n < d argument: self-attention cheaper than recurrence iff n < d
    assert C.complexity_per_layer("self_attention", 50, 512) < C.complexity_per_layer("recurrent", 50, 512)
    assert C.complexity_per_layer("self_attention", 1024, 512) > C.complexity_per_layer("recurrent", 1024, 512)


def test_table_1_sequential_ops_and_paths():
    assert [C.sequential_operations(t, 100) for t in C.LAYER_TYPES] == [1, 100, 1, 1]
    assert C.maximum_path_length("self_attention", 1000) == 1
    assert C.maximum_path_length("recurrent", 1000) == 999
    # dilated convolutions: receptive field k^L must reach n
    assert C.maximum_path_length("convolutional", 9, k=3) == 2
    assert C.maximum_path_length("convolutional", 10, k=3) == 3
    assert C.maximum_path_length("convolutional", 1024, k=2) == 10
    # contiguous kernels: each layer extends the reach by k - 1
    assert C.maximum_path_length("convolutional", 9, k=3, dilated=False) == 4
    # restricted: a centred neighbourhood of size r reaches r // 2 per layer
    assert C.maximum_path_length("restricted_self_attention", 100, r=10) == 20
    assert C.maximum_path_length("restricted_self_attention", 1, r=10) == 1
    assert set(C.PAPER_TABLE_1) == set(C.LAYER_TYPES)
    assert C.PAPER_TABLE_1["convolutional"] == ("O(k * n * d^2)", "O(1)", "O(log_k(n))")
    assert C.PAPER_TABLE_1["restricted_self_attention"][2] == "O(n/r)"


def test_complexity_table_rows():
    rows = C.complexity_table(n=50, d=512, k=3, r=10)
    assert [r["layer_type"] for r in rows] == list(C.LAYER_TYPES)
    assert [r["operations"] for r in rows] == [1_280_000, 13_107_200, 39_321_600, 256_000]
    assert [r["maximum_path_length"] for r in rows] == [1, 49, 4, 10]


def test_layer_flops_hand_values():
    f = C.layer_flops(seq_len=2, d_model=3, d_ff=5)
    assert f == {
        "qkv_projections": 3 * 2 * 2 * 9,      # 108
        "attention_scores": 2 * 4 * 3,         # 24
        "attention_weighted_sum": 24,
        "output_projection": 2 * 2 * 9,        # 36
        "feed_forward": 2 * 2 * 2 * 3 * 5,     # 120
        "total": 108 + 24 + 24 + 36 + 120,
    }
    assert C.layer_flops(10, 8)["feed_forward"] == 2 * 2 * 10 * 8 * 32  # default d_ff = 4 d
    # crossover of exercise ex-06-crossover: attention products = projections at n = 2d
    f = C.layer_flops(2 * 64, 64)
    assert f["attention_scores"] + f["attention_weighted_sum"] == f["qkv_projections"] + f["output_projection"]


def test_training_flops_paper_table_2():
    assert_close(C.training_flops_from_hardware(12, 8, 9.5), 3.2832e18, n=4)  # 12 h × 8 GPUs × 9.5 TFLOP/s × 3600
    assert f"{C.training_flops_from_hardware(12, 8, 9.5):.1e}" == "3.3e+18"
    assert f"{C.training_flops_from_hardware(84, 8, 9.5):.1e}" == "2.3e+19"


def test_slides_memory_arithmetic():
    # recomputed in notebook 6: 32 x 12 x 512 x 512 x 4 bytes and 32 x 512 x 3072 x 4 bytes
    attn = C.attention_matrix_bytes(32, 12, 512)
    ffn = C.ffn_activation_bytes(32, 512, 3072)
    assert attn == 402_653_184 and ffn == 201_326_592
    assert round(12 * (attn + ffn) / 1e9, 2) == 7.25
    # the slides' "Space O(1)" for the FFN: its activations grow linearly with seq_len
    assert C.ffn_activation_bytes(1, 200, 2048) == 2 * C.ffn_activation_bytes(1, 100, 2048)


def test_cost_function_errors():
    with pytest.raises(ValueError, match="layer_type must be one of"):
        C.complexity_per_layer("lstm", 10, 4)
    with pytest.raises(TypeError, match="layer_type must be a string"):
        C.sequential_operations(3, 10)
    with pytest.raises(ValueError, match="needs the kernel width k"):
        C.complexity_per_layer("convolutional", 10, 4)
    with pytest.raises(ValueError, match="needs the neighbourhood size r"):
        C.maximum_path_length("restricted_self_attention", 10)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        C.complexity_per_layer("self_attention", 0, 4)
    with pytest.raises(TypeError, match="d must be .*integer, got 4.5"):
        C.complexity_per_layer("self_attention", 3, 4.5)
    with pytest.raises(ValueError, match="kernel width k must be at least 2 .*got 1"):
        C.maximum_path_length("convolutional", 10, k=1)
    with pytest.raises(ValueError, match="r must be at least 2 .*got 1"):
        C.maximum_path_length("restricted_self_attention", 10, r=1)
    with pytest.raises(ValueError, match="d_ff must be >= 1, got 0"):
        C.layer_flops(10, 8, d_ff=0)
    with pytest.raises(ValueError, match="hours must be > 0, got -1"):
        C.training_flops_from_hardware(-1, 8, 9.5)
    with pytest.raises(TypeError, match="n_gpus must be .*integer"):
        C.training_flops_from_hardware(12, 8.0, 9.5)
    with pytest.raises(TypeError, match="tflops_per_gpu must be a number"):
        C.training_flops_from_hardware(12, 8, "fast")


# ---------------------------------------------------------------- checks the chapters' prose relies on (moved out)
@numerics
def test_chapter_4_positional_values_and_the_doubled_exponent():
    pe4 = R.positional_encoding(3, 4)
    assert_close(pe4, [[math.sin(p), math.cos(p), math.sin(p / 100), math.cos(p / 100)] for p in range(3)], n=4,
                 magnitude=2.0)  # angles up to 2
    wavelengths = 2 * np.pi * 10000 ** (np.arange(0, 64, 2) / 64)
    assert int(np.argmin(np.abs(wavelengths - 100))) == 10
    exps_paper, exps_loop = 2 * np.arange(256) / 512, 4 * np.arange(256) / 512
    assert int((exps_loop > exps_paper.max()).sum()) == 128
    pe = R.positional_encoding(100, 64)
    gram = pe @ pe.T
    # sines of angles up to 99 (rounded at eps * 99), then products of length 64
    assert_close(gram[1:, 1:], gram[:-1, :-1], n=4 + 64, magnitude=99.0)
    assert_close(np.diag(gram), 32, n=4 + 64, magnitude=99.0)
    for k in (1, 5, 37):
        assert_close(pe[:-k] @ R.relative_position_matrix(k, 64), pe[k:], n=4 + 2, magnitude=99.0)


def test_chapter_6_lr_branches_and_adam_half_life():
    for s in (1, 1000):  # a few powers, products and a minimum: 4 roundings
        assert_close(R.noam_lr(s, 512, 4000), s / (math.sqrt(512) * 4000 ** 1.5), n=4)
    for s in (4000, 10000, 100000):
        assert_close(R.noam_lr(s, 512, 4000), 1 / math.sqrt(512 * s), n=4)
    steps = np.arange(1, 20001)
    assert steps[np.argmax(R.noam_lr(steps, 512, 4000))] == 4000
    assert round(math.log(0.5) / math.log(0.999), 4) == 692.8005  # the chapter's four decimals


@numerics
def test_chapter_5_decoder_example_is_post_ln_and_causal():
    m = E.MHA_EXAMPLE_2
    attn = (m.w_q, m.w_k, m.w_v, m.w_o)
    rng = np.random.default_rng(5)
    ffn = (np.round(rng.normal(size=(4, 8)), 1), np.round(rng.normal(size=8), 1),
           np.round(rng.normal(size=(8, 4)), 1), np.round(rng.normal(size=4), 1))
    memory = R.encoder_layer(np.asarray(m.q, dtype=float), attn, ffn)
    y = np.array([[1.0, 0, 1, 0], [0, 1, 0, 1]])
    out = R.decoder_layer(y, memory, attn, attn, ffn)
    config = SimpleNamespace(d_model=4, n_heads=2, d_ff=8, n_encoder_layers=1, n_decoder_layers=1)  # + the memory
    n = transformer_reduction_length(config, 3, 2)
    assert_close(out.mean(axis=-1), 0, n=n, magnitude=np.abs(out).max())
    # 1 - var = eps / (var + eps) of the last layer norm's input, at most 1e-5 / 0.1: a modelling difference
    np.testing.assert_allclose(out.var(axis=-1), 1, atol=1e-4)  # LayerNorm's eps
    y2 = y.copy()
    y2[1] = [3.0, -1.0, 0.0, 2.0]
    assert_close(R.decoder_layer(y2, memory, attn, attn, ffn)[0], out[0], n=n)
    # without positions, reversing the source changes nothing in the decoder's output
    rev = R.encoder_layer(np.asarray(m.q, dtype=float)[::-1], attn, ffn)
    assert_close(R.decoder_layer(y, rev, attn, attn, ffn), out, n=n)
