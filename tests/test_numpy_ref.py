"""Unit tests of tmlib.ref (the NumPy references): the feed-forward and learning-rate examples, properties, and bad
input (the attention examples are checked once, in tests/test_part1_attention.py).

Expected values are closed forms written independently of the code under test (e.g.
softmax of [1/√2, 0, 1/√2] is e^{1/√2}/(2e^{1/√2}+1) ...), plus the rounded decimals the
notebooks print.
"""
import subprocess
import sys

import numpy as np
import pytest

from tmlib.course import examples as E
from tmlib import ref as R
from tolerances import assert_close, attention_length

pytestmark = pytest.mark.numerics
def test_multi_head_accepts_list_of_heads():
    m = E.MHA_EXAMPLE_2
    a, wa = R.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o)
    b, wb = R.multi_head_attention(m.q, m.k, m.v, list(m.w_q), list(m.w_k), list(m.w_v), m.w_o)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(wa, wb)


def test_feed_forward_example():
    f = E.FFN_EXAMPLE
    out = R.feed_forward(f.x, f.w1, f.b1, f.w2, f.b2)
    # hidden = relu(x W1 + b1) = [[1,2],[0,2],[1,3]]; out = hidden W2 + b2
    np.testing.assert_array_equal(out, [[6, 1], [5, 1], [8, 2]])


def test_feed_forward_relu_clips_negatives():
    out = R.feed_forward([[-1.0]], [[1.0]], [0.0], [[1.0]], [0.0])
    assert out[0, 0] == 0.0


@pytest.mark.parametrize(
    "step, expected",
    [
        (1, 512**-0.5 * 4000**-1.5),
        (1000, 512**-0.5 * 1000 * 4000**-1.5),
        (4000, 512**-0.5 * 4000**-0.5),
        (100000, 512**-0.5 * 100000**-0.5),
    ],
)
def test_noam_lr_worked_values(step, expected):
    assert_close(R.noam_lr(step, 512, 4000), expected, n=4)  # two powers, two products


def test_noam_lr_rounded_table_and_peak():
    assert round(R.noam_lr(1, 512, 4000), 10) == pytest.approx(1.747e-07, rel=1e-3)  # the table's 4 digits
    assert round(R.noam_lr(4000, 512, 4000), 6) == 0.000699
    assert round(R.noam_lr(100000, 512, 4000), 6) == 0.00014
    steps = np.arange(1, 20001)
    lr = R.noam_lr(steps, 512, 4000)
    assert int(steps[np.argmax(lr)]) == 4000
    assert_close(R.noam_lr(2, 512, 4000, factor=2.0), 2 * R.noam_lr(2, 512, 4000), n=5)


# ---------------------------------------------------------------- properties
def test_weights_rows_sum_to_one_and_are_nonnegative():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 7, 8)), rng.normal(size=(2, 7, 3))
    out, w = R.scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 5, 3) and w.shape == (2, 5, 7)
    assert_close(w.sum(-1), 1.0, n=attention_length(8, 7) + 7)  # the weights, then their sum
    assert (w >= 0).all()


def test_masked_weights_are_exactly_zero():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(4, 6)), rng.normal(size=(4, 6)), rng.normal(size=(4, 2))
    mask = R.causal_mask(4)
    out, w = R.scaled_dot_product_attention(q, k, v, mask=mask)
    assert (w[~mask] == 0.0).all()
    assert_close(w.sum(-1), 1.0, n=attention_length(6, 4) + 4)
    # First query sees only the first key: its weight is e^0 / e^0 = 1 and its output exactly v[0].
    np.testing.assert_array_equal(out[0], v[0])


def test_padding_mask_equals_truncation():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    mask = R.padding_mask([5, 3])
    assert mask.shape == (2, 1, 5)
    out, _ = R.scaled_dot_product_attention(q, k, v, mask=mask)
    ref, _ = R.scaled_dot_product_attention(q[1], k[1, :3], v[1, :3])
    assert_close(out[1], ref, n=attention_length(4, 5))


def test_permutation_equivariance_without_positions():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 4))
    perm = rng.permutation(5)
    out, w = R.scaled_dot_product_attention(x, x, x)
    out_p, w_p = R.scaled_dot_product_attention(x[perm], x[perm], x[perm])
    assert_close(out_p, out[perm], n=attention_length(4, 5))
    assert_close(w_p, w[perm][:, perm], n=attention_length(4, 5))


def test_softmax_is_stable_for_large_inputs():
    p = R.softmax([1000.0, 1001.0, 1002.0])
    expected = np.exp([-2.0, -1.0, 0.0]) / np.exp([-2.0, -1.0, 0.0]).sum()
    assert_close(p, expected, n=2 + 3)  # the (exact) shift, exp, a sum of 3, a division
    assert np.isfinite(R.softmax([-1e300, 1e300])).all()
    assert_close(R.softmax([[1.0, 2.0], [3.0, 3.0]], axis=0).sum(axis=0), 1.0, n=2 + 2 * 2)


def test_softmax_shift_invariance_and_neg_inf():
    x = np.array([0.3, -1.2, 2.0])
    # x + 50 is rounded at the scale of 52: the exponents move by up to eps * 52
    assert_close(R.softmax(x), R.softmax(x + 50.0), n=2 + 3, magnitude=52.0)
    assert R.softmax([0.0, -np.inf])[1] == 0.0


def test_layer_norm_against_formula_and_properties():
    rng = np.random.default_rng(4)
    x = rng.normal(3.0, 2.0, size=(3, 6))
    y = R.layer_norm(x)
    # x - mean cancels: the roundings of the mean (at the scale of max |x|) count in units of the std
    scale = np.abs(x).max() / x.std(-1).min()
    n = 3 * 6 + 3  # the mean, the variance, the normalised row's mean or variance; a square root, a division
    assert_close(y.mean(-1), 0.0, n=n, magnitude=scale)
    assert_close(y.var(-1), x.var(-1) / (x.var(-1) + 1e-5), n=n, magnitude=scale)
    g, b = rng.normal(size=6), rng.normal(size=6)
    manual = g * (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) + b
    assert_close(R.layer_norm(x, g, b), manual, n=n, magnitude=scale * np.abs(g).max() + np.abs(b).max())
    # A hand-checkable row: [1, 2, 3] has mean 2 and biased variance 2/3.
    assert_close(R.layer_norm([[1.0, 2.0, 3.0]], eps=0.0), [[-np.sqrt(1.5), 0.0, np.sqrt(1.5)]], n=3 * 3 + 2)


def test_positional_encoding_values():
    pe = R.positional_encoding(50, 16)
    assert pe.shape == (50, 16)
    np.testing.assert_array_equal(pe[0, 0::2], 0.0)
    np.testing.assert_array_equal(pe[0, 1::2], 1.0)
    assert_close(pe[1, 0], np.sin(1.0), n=4)
    assert_close(pe[3, 5], np.cos(3 / 10000 ** (4 / 16)), n=4, magnitude=3.0)  # an angle of up to 3
    assert np.abs(pe).max() <= 1.0


def test_positional_encoding_relative_offset_is_linear():
    d, k = 8, 3
    pe = R.positional_encoding(40, d)
    omega = 1 / 10000 ** (np.arange(0, d, 2) / d)
    m = np.zeros((d, d))
    for i, w in enumerate(omega):
        c, s = np.cos(k * w), np.sin(k * w)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, s], [-s, c]]  # acts on (sin, cos) pairs
    # PE[pos + k] = M_k PE[pos] for every pos, with M_k independent of pos: sines of angles up to 39 (their
    # rounding is eps * 39), then a product of length 2
    assert_close(pe[k:], pe[:-k] @ m.T, n=4 + 2, magnitude=39.0)


def test_causal_mask():
    m = R.causal_mask(3)
    np.testing.assert_array_equal(m, [[True, False, False], [True, True, False], [True, True, True]])
    assert m.dtype == bool


def test_numpy_ref_does_not_import_torch():
    code = "import sys, tmlib.ref, tmlib.course.examples; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_examples_are_read_only():
    with pytest.raises(ValueError):
        E.ATTENTION_EXAMPLE_1.q[0, 0] = 5.0


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "q, k, v, match",
    [
        (np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 2)), r"share d_k.*\(2, 3\).*\(2, 4\)"),
        (np.ones((2, 3)), np.ones((4, 3)), np.ones((5, 2)), r"same number of positions.*\(4, 3\).*\(5, 2\)"),
        (np.ones(3), np.ones((2, 3)), np.ones((2, 2)), r"at least 2 dimensions.*\(3,\)"),
        (np.ones((2, 2, 3)), np.ones((3, 2, 3)), np.ones((3, 2, 1)), r"leading"),
    ],
)
def test_attention_shape_errors(q, k, v, match):
    with pytest.raises(ValueError, match=match):
        R.scaled_dot_product_attention(q, k, v)


def test_attention_mask_errors():
    q = k = v = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 2\).*\(3, 3\)"):
        R.scaled_dot_product_attention(q, k, v, mask=np.ones((2, 2), dtype=bool))
    with pytest.raises(TypeError, match="boolean"):
        R.scaled_dot_product_attention(q, k, v, mask=np.ones((3, 3)))
    with pytest.raises(ValueError, match="fully masked"):
        R.scaled_dot_product_attention(q, k, v, mask=np.zeros((3, 3), dtype=bool))
    with pytest.raises(TypeError):
        R.scaled_dot_product_attention("abc", k, v)


def test_multi_head_errors():
    m = E.MHA_EXAMPLE_2
    with pytest.raises(ValueError, match="number of heads"):
        R.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k[:1], m.w_v, m.w_o)
    with pytest.raises(ValueError, match=r"w_o of shape \(3, 4\)"):
        R.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o[:3])
    with pytest.raises(ValueError, match="cannot be projected"):
        R.multi_head_attention(m.q[:, :3], m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o)
    with pytest.raises(ValueError, match="same shape"):
        R.multi_head_attention(m.q, m.k, m.v, [m.w_q[0], m.w_q[1][:, :1]], m.w_k, m.w_v, m.w_o)


def test_feed_forward_errors():
    f = E.FFN_EXAMPLE
    with pytest.raises(ValueError, match=r"x of shape \(3, 3\)"):
        R.feed_forward(np.ones((3, 3)), f.w1, f.b1, f.w2, f.b2)
    with pytest.raises(ValueError, match="b1"):
        R.feed_forward(f.x, f.w1, np.ones(3), f.w2, f.b2)
    with pytest.raises(ValueError, match="w2"):
        R.feed_forward(f.x, f.w1, f.b1, np.ones((3, 2)), f.b2)
    with pytest.raises(ValueError, match="b2"):
        R.feed_forward(f.x, f.w1, f.b1, f.w2, np.ones(3))


def test_other_errors():
    with pytest.raises(ValueError, match="NaN"):
        R.softmax([1.0, np.nan])
    with pytest.raises(ValueError, match="entirely -inf"):
        R.softmax([-np.inf, -np.inf])
    with pytest.raises(ValueError, match=r"\(4,\)"):
        R.layer_norm(np.ones((2, 3)), gamma=np.ones(4))
    with pytest.raises(ValueError, match="even"):
        R.positional_encoding(4, 7)
    with pytest.raises(ValueError, match="at least 1"):
        R.positional_encoding(0, 8)
    with pytest.raises(TypeError):
        R.positional_encoding(4.0, 8)
    with pytest.raises(ValueError):
        R.causal_mask(0)
    with pytest.raises(ValueError, match="count from 1"):
        R.noam_lr(0, 512, 4000)
    with pytest.raises(ValueError, match="positive"):
        R.noam_lr(1, 0, 4000)
    with pytest.raises(ValueError, match="1..3"):
        R.padding_mask([2, 4], max_len=3)
