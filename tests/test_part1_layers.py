"""Tests for Part I notebooks 3 and 4: feed-forward, residuals, LayerNorm, positional encoding.

Expected values are hard-coded from the lecture (seed 001, feed-forward example, which is
exact in integers), written as closed forms (sin/cos of known angles, ±√2 from a hand
LayerNorm), or computed by an independent route (explicit loops, angle-addition formulas),
never by calling the function under test a second time.
"""
import numpy as np
import pytest

from tmlib.course import examples as E
from tmlib import ref as R
from tolerances import assert_close, attention_length, layer_norm_length, layer_norm_magnitude

pytestmark = pytest.mark.numerics


# ---------------------------------------------------------------- feed-forward (notebook 3)
def test_ffn_lecture_example_every_intermediate():
    ex = E.FFN_EXAMPLE
    x_w1 = ex.x @ ex.w1
    np.testing.assert_array_equal(x_w1, [[1, 1], [0, 1], [1, 2]])
    pre = x_w1 + ex.b1
    np.testing.assert_array_equal(pre, [[1, 2], [0, 2], [1, 3]])  # the lecture's X_1
    hidden = np.maximum(0.0, pre)
    np.testing.assert_array_equal(hidden, pre)  # ReLU changes nothing: all entries ≥ 0
    x2 = hidden @ ex.w2
    np.testing.assert_array_equal(x2, [[5, 2], [4, 2], [7, 3]])  # the lecture's X_2
    np.testing.assert_array_equal(x2 + ex.b2, [[6, 1], [5, 1], [8, 2]])
    np.testing.assert_array_equal(R.feed_forward(ex.x, ex.w1, ex.b1, ex.w2, ex.b2),
                                  [[6, 1], [5, 1], [8, 2]])


def test_ffn_is_position_wise():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 8))
    w1, b1 = rng.normal(size=(8, 32)), rng.normal(size=32)
    w2, b2 = rng.normal(size=(32, 8)), rng.normal(size=8)
    full = R.feed_forward(x, w1, b1, w2, b2)
    for b in range(2):
        for t in range(5):
            row = np.maximum(0, x[b, t] @ w1 + b1) @ w2 + b2  # one position, by hand
            assert_close(full[b, t], row, n=8 + 32 + 2)
    # ReLU really clips something here, so this is not a purely linear check
    assert (x @ w1 + b1 < 0).any()


# ---------------------------------------------------------------- layer norm (notebook 3)
def test_layer_norm_worked_example_closed_form():
    x = E.MHA_EXAMPLE_2.q  # rows [1,2,1,0], [0,1,1,1], [1,0,2,1]
    # means 1, 3/4, 1; biased variances 1/2, 3/16, 1/2 (computed by hand)
    eps = 1e-5
    expected = np.array([
        [0, 1, 0, -1] / np.sqrt(0.5 + eps),
        [-0.75, 0.25, 0.25, 0.25] / np.sqrt(3 / 16 + eps),
        [0, -1, 1, 0] / np.sqrt(0.5 + eps),
    ])
    n, scale = layer_norm_length(4), layer_norm_magnitude(x)
    assert_close(R.layer_norm(x), expected, n=n, magnitude=scale)
    # with eps = 0 the first row is exactly (0, √2, 0, -√2)
    assert_close(R.layer_norm(x, eps=0.0)[0], [0, np.sqrt(2), 0, -np.sqrt(2)], n=n, magnitude=scale)
    gamma, beta = np.array([1.0, 2.0, 0.5, 1.0]), np.array([0.0, 1.0, 0.0, -1.0])
    assert_close(R.layer_norm(x, gamma, beta), gamma * expected + beta, n=n, magnitude=2 * scale + 1)


def test_layer_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 5, 6))
    gamma, beta = rng.normal(size=6), rng.normal(size=6)
    ln = torch.nn.LayerNorm(6, dtype=torch.float64)
    with torch.no_grad():
        ln.weight.copy_(torch.from_numpy(gamma))
        ln.bias.copy_(torch.from_numpy(beta))
        ref = ln(torch.from_numpy(x)).numpy()
    assert_close(R.layer_norm(x, gamma, beta), ref, n=layer_norm_length(6),
                 magnitude=layer_norm_magnitude(x) * np.abs(gamma).max() + np.abs(beta).max())


# ---------------------------------------------------------------- sublayer (notebook 3)
def _ln_explicit(z, eps=1e-5):
    """LayerNorm written out with loops over rows (independent of tmlib.ref.layer_norm)."""
    out = np.empty_like(z)
    for i, row in enumerate(z.reshape(-1, z.shape[-1])):
        mu = sum(row) / len(row)
        var = sum((v - mu) ** 2 for v in row) / len(row)
        out.reshape(-1, z.shape[-1])[i] = [(v - mu) / np.sqrt(var + eps) for v in row]
    return out


@pytest.mark.parametrize("norm_first", [False, True])
def test_sublayer_against_explicit_formulas(norm_first):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 6)) * 3 + 1
    w = rng.normal(size=(6, 6))

    def fn(z):
        return np.tanh(z @ w)

    got = R.sublayer(x, fn, norm_first=norm_first)
    if norm_first:
        expected = x + fn(_ln_explicit(x))  # pre-LN: x + F(LN(x))
        scale = max(np.abs(x).max(), layer_norm_magnitude(x))
    else:
        expected = _ln_explicit(x + fn(x))  # post-LN: LN(x + F(x)), the paper
        scale = layer_norm_magnitude(x + fn(x))
    assert_close(got, expected, n=layer_norm_length(6) + 6 + 2, magnitude=scale)  # LN, F (product, tanh), +


def test_sublayer_post_ln_output_is_normalized_and_pre_ln_keeps_identity_path():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 8)) * 10
    post = R.sublayer(x, lambda z: 0.5 * z)
    n, scale = layer_norm_length(8) + 2, layer_norm_magnitude(1.5 * x)
    assert_close(post.mean(-1), 0, n=n + 8, magnitude=scale)
    v = (1.5 * x).var(-1)
    assert_close(post.var(-1), v / (v + 1e-5), n=2 * n, magnitude=scale)  # below 1 by LayerNorm's eps only
    # a zero sub-layer: pre-LN is the identity (x + 0, exact), post-LN still normalizes
    np.testing.assert_allclose(R.sublayer(x, np.zeros_like, norm_first=True), x, atol=0)
    assert_close(R.sublayer(x, np.zeros_like), _ln_explicit(x), n=n, magnitude=layer_norm_magnitude(x))


def test_sublayer_bad_inputs():
    x = np.ones((3, 4))
    with pytest.raises(TypeError, match="callable"):
        R.sublayer(x, "not a function")
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(3, 2\)"):
        R.sublayer(x, lambda z: z[:, :2])
    with pytest.raises(ValueError, match=r"\(5,\)"):
        R.sublayer(x, lambda z: z, gamma=np.ones(5))


# ---------------------------------------------------------------- positional encoding (notebook 4)
def test_positional_encoding_worked_values_d4():
    pe = R.positional_encoding(3, 4)
    # d_model 4: frequencies 1 and 1/100, so PE[pos] = (sin pos, cos pos, sin pos/100, cos pos/100)
    expected = np.array([[np.sin(p), np.cos(p), np.sin(p / 100), np.cos(p / 100)] for p in range(3)])
    assert_close(pe, expected, n=4, magnitude=2.0)  # angles up to 2, from a power and a division
    np.testing.assert_array_equal(pe[0], [0, 1, 0, 1])
    np.testing.assert_allclose(pe.round(4), [[0, 1, 0, 1],
                                             [0.8415, 0.5403, 0.01, 1.0],
                                             [0.9093, -0.4161, 0.02, 0.9998]], atol=0)


def test_positional_encoding_explicit_loop():
    seq_len, d_model = 7, 10
    expected = np.zeros((seq_len, d_model))
    for pos in range(seq_len):
        for j in range(0, d_model, 2):  # j = 2i already: the exponent is j / d_model
            expected[pos, j] = np.sin(pos / 10000 ** (j / d_model))
            expected[pos, j + 1] = np.cos(pos / 10000 ** (j / d_model))
    assert_close(R.positional_encoding(seq_len, d_model), expected, n=4, magnitude=6.0)  # angles up to 6


@pytest.mark.parametrize("d_model", [2, 4, 64])
@pytest.mark.parametrize("k", [0, 1, 5, 17, -3])
def test_relative_position_matrix_shifts_every_position(d_model, k):
    n = 40
    pe = R.positional_encoding(n, d_model)
    m = R.relative_position_matrix(k, d_model)
    for pos in range(max(0, -k), min(n, n - k)):  # sines of angles up to 56, then a product of length 2
        assert_close(pe[pos] @ m, pe[pos + k], n=4 + 2, magnitude=n + abs(k))  # rows times M_k
    if k:  # the column-vector form M_k^T = M_{-k} shifts the other way: the test tells the two apart
        assert not np.allclose(pe[max(0, -k):n - max(k, 0)] @ m.T, pe[max(k, 0):n + min(k, 0)], atol=1e-6)


def test_relative_position_matrix_structure():
    d = 8
    m3 = R.relative_position_matrix(3, d)
    # cosines and sines of angles up to 3 (7 for the product), then products of length 2
    assert_close(m3 @ m3.T, np.eye(d), n=4 + 2, magnitude=3.0)  # orthogonal
    np.testing.assert_allclose(R.relative_position_matrix(0, d), np.eye(d), atol=0)  # cos 0 = 1, sin 0 = 0
    assert_close(R.relative_position_matrix(-3, d), m3.T, n=4, magnitude=3.0)
    assert_close(R.relative_position_matrix(2, d) @ R.relative_position_matrix(5, d),
                 R.relative_position_matrix(7, d), n=4 + 2, magnitude=7.0)
    # first block, for a row (sin a, cos a) on the left: rotation by angle 3 (frequency 1), written out
    assert_close(m3[:2, :2], [[np.cos(3), -np.sin(3)], [np.sin(3), np.cos(3)]], n=4, magnitude=3.0)
    assert_close(np.array([np.sin(1.0), np.cos(1.0)]) @ m3[:2, :2], [np.sin(4.0), np.cos(4.0)], n=4 + 2, magnitude=4.0)
    assert np.count_nonzero(m3[:2, 2:]) == 0 and np.count_nonzero(m3[2:, :2]) == 0


def test_relative_position_matrix_bad_inputs():
    with pytest.raises(ValueError, match="even"):
        R.relative_position_matrix(1, 5)
    with pytest.raises(TypeError, match="d_model"):
        R.relative_position_matrix(1, 4.0)
    with pytest.raises(TypeError, match="offset"):
        R.relative_position_matrix("1", 4)
    with pytest.raises(ValueError, match="finite"):
        R.relative_position_matrix(np.inf, 4)


def test_pe_dot_products_depend_only_on_distance():
    pe = R.positional_encoding(60, 32)
    gram = pe @ pe.T  # (60, 60)
    omega = 10000.0 ** (-np.arange(0, 32, 2) / 32)
    for i in range(0, 60, 7):
        for j in range(0, 60, 5):
            # sin a sin b + cos a cos b = cos(a - b), summed over the 16 frequencies: sines of angles up to
            # 59, then a product of length 32
            assert_close(gram[i, j], np.cos(omega * (i - j)).sum(), n=4 + 32, magnitude=59.0)
    assert_close(np.diag(gram), 16.0, n=4 + 32, magnitude=59.0)


# ---------------------------------------------------------------- permutation (notebook 4)
def _self_attention(x, w_q, w_k, w_v):
    return R.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)[0]


@pytest.mark.parametrize("seed", range(5))
def test_self_attention_is_permutation_equivariant_without_positions(seed):
    rng = np.random.default_rng(seed)
    n, d = 6, 8
    x = rng.normal(size=(n, d))
    w_q, w_k, w_v = (rng.normal(size=(d, d)) for _ in range(3))
    perm = rng.permutation(n)
    out = _self_attention(x, w_q, w_k, w_v)
    out_perm = _self_attention(x[perm], w_q, w_k, w_v)
    assert_close(out_perm, out[perm], n=d + attention_length(d, n))  # rows move, nothing else
    # adding positional encodings breaks the symmetry
    pe = R.positional_encoding(n, d)
    out_pe = _self_attention(x + pe, w_q, w_k, w_v)
    out_pe_perm = _self_attention(x[perm] + pe, w_q, w_k, w_v)
    if not np.array_equal(perm, np.arange(n)):
        assert not np.allclose(out_pe_perm, out_pe[perm], atol=1e-6)


def test_cat_chased_mouse_sentences_indistinguishable_without_pe():
    rng = np.random.default_rng(0)
    vocab = {"the": 0, "cat": 1, "chased": 2, "mouse": 3}
    emb = rng.normal(size=(4, 8))
    a = [vocab[w] for w in "the cat chased the mouse".split()]
    b = [vocab[w] for w in "the mouse chased the cat".split()]
    w_q, w_k, w_v = (rng.normal(size=(8, 8)) / np.sqrt(8) for _ in range(3))
    out_a = _self_attention(emb[a], w_q, w_k, w_v)
    out_b = _self_attention(emb[b], w_q, w_k, w_v)
    perm = [0, 4, 2, 3, 1]  # b = a[perm]
    assert [a[p] for p in perm] == b
    n = 8 + attention_length(8, 5)
    assert_close(out_b, out_a[perm], n=n)
    # per-word vectors ("cat" in a and "cat" in b) are identical without positions
    assert_close(out_a[1], out_b[4], n=n)
    pe = R.positional_encoding(5, 8)
    out_a_pe = _self_attention(emb[a] + pe, w_q, w_k, w_v)
    out_b_pe = _self_attention(emb[b] + pe, w_q, w_k, w_v)
    assert np.abs(out_a_pe[1] - out_b_pe[4]).max() > 1e-3


def test_ffn_parameter_count():
    from tmlib.analysis import costs

    assert costs.ffn_parameter_count(512, 2048) == 512 * 2048 + 2048 + 2048 * 512 + 512 == 2_099_712
    assert costs.ffn_parameter_count(1024, 4096) == 8_393_728
    assert costs.ffn_parameter_count(2, 2, bias=False) == 8
    with pytest.raises(ValueError, match="d_ff"):
        costs.ffn_parameter_count(512, 0)


# ------------------------------------------------------------------ chapter 3: checks moved out of the notebook
def test_chapter_3_lecture_ffn_box_and_worked_layer_norm():
    ex = E.FFN_EXAMPLE
    pre = ex.x @ ex.w1 + ex.b1
    np.testing.assert_array_equal(pre, [[1, 2], [0, 2], [1, 3]])
    np.testing.assert_array_equal(np.maximum(0, pre) @ ex.w2, [[5, 2], [4, 2], [7, 3]])
    np.testing.assert_array_equal(R.feed_forward(ex.x, ex.w1, ex.b1, ex.w2, ex.b2), [[6, 1], [5, 1], [8, 2]])
    for key, value in {"x_w1_plus_b1": pre, "relu": pre, "output": [[6, 1], [5, 1], [8, 2]]}.items():
        np.testing.assert_array_equal(E.LECTURE_PRINTED["ffn"][key], value)
    x = E.MHA_EXAMPLE_2.q
    # small integers: every partial sum, deviation and square is a short binary fraction, exact
    np.testing.assert_array_equal(x.mean(-1), [1, 0.75, 1])
    np.testing.assert_array_equal(x.var(-1), [0.5, 3 / 16, 0.5])
    assert_close(R.layer_norm(x)[0], np.array([0, 1, 0, -1]) / np.sqrt(0.5 + 1e-5), n=layer_norm_length(4),
                 magnitude=layer_norm_magnitude(x))


def test_chapter_3_stack_numbers_quoted_in_the_text():
    """Replays the chapter's seeded residual demonstrations and checks the numbers its text quotes."""
    d, rng = 64, np.random.default_rng(1)
    jac_plain, jac_res = np.eye(d), np.eye(d)
    for _ in range(50):
        w = rng.normal(scale=0.2 / np.sqrt(d), size=(d, d))
        jac_plain, jac_res = jac_plain @ w, jac_res @ (np.eye(d) + w)
    plain, res = np.linalg.norm(jac_plain) / np.sqrt(d), np.linalg.norm(jac_res) / np.sqrt(d)
    # the text: the plain gain reaches 1.1e-35 (0.2^50 as built in); the residual one, 2.56, against (1 + 0.04)^25
    assert f"{plain:.1e}" == "1.1e-35" and round(res, 2) == 2.56 and round(1.04 ** 25, 2) == 2.67
    # post-LN of the lecture's FFN: rows (1, -1) up to the epsilon factor; pre-LN: the raw stream
    ex, eps = E.FFN_EXAMPLE, 1e-5
    ffn = lambda z: R.feed_forward(z, ex.w1, ex.b1, ex.w2, ex.b2)  # noqa: E731
    half = np.array([3.0, 1.5, 3.0])
    n = layer_norm_length(2) + 2 + 2 + 1  # LN, the FFN's two products of length 2, the residual
    assert_close(R.sublayer(ex.x, ffn), np.outer(half / np.sqrt(half**2 + eps), [1, -1]), n=n,
                 magnitude=layer_norm_magnitude(ex.x + ffn(ex.x)))
    a = 0.5 / np.sqrt(0.25 + eps)
    # LN's roundings at max |x| / std = 2 (the constant row normalises to exactly 0), through the FFN, whose
    # matrices multiply by at most 2 and 3 (largest absolute row sums)
    assert_close(R.sublayer(ex.x, ffn, norm_first=True), [[4 + a, 0], [3, 1], [4, 1]], n=n, magnitude=2 * 2 * 3)


def test_chapter_3_eps_placement_table():
    z = np.random.default_rng(4).standard_normal(64)
    z = (z - z.mean()) / z.std()
    eps = 1e-5
    rel = {}
    for sigma in (1.0, 0.01, np.sqrt(eps), 1e-4):
        row = sigma * z
        inside, outside = R.layer_norm(row, eps=eps), (row - row.mean()) / (row.std() + eps)
        rel[sigma] = np.abs(inside - outside).max() / np.abs(outside).max()
    assert rel[1.0] < 1e-5 and 0.04 < rel[0.01] < 0.05 and 0.28 < rel[np.sqrt(eps)] < 0.30 and rel[1e-4] > 0.95
