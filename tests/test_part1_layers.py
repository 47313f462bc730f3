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
            np.testing.assert_allclose(full[b, t], row, atol=1e-12)
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
    np.testing.assert_allclose(R.layer_norm(x), expected, atol=1e-12)
    # with eps = 0 the first row is exactly (0, √2, 0, -√2)
    np.testing.assert_allclose(R.layer_norm(x, eps=0.0)[0], [0, np.sqrt(2), 0, -np.sqrt(2)], atol=1e-12)
    gamma, beta = np.array([1.0, 2.0, 0.5, 1.0]), np.array([0.0, 1.0, 0.0, -1.0])
    np.testing.assert_allclose(R.layer_norm(x, gamma, beta), gamma * expected + beta, atol=1e-12)


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
    np.testing.assert_allclose(R.layer_norm(x, gamma, beta), ref, atol=1e-12)


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
    else:
        expected = _ln_explicit(x + fn(x))  # post-LN: LN(x + F(x)), the paper
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_sublayer_post_ln_output_is_normalized_and_pre_ln_keeps_identity_path():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 8)) * 10
    post = R.sublayer(x, lambda z: 0.5 * z)
    np.testing.assert_allclose(post.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(post.var(-1), 1, atol=1e-5)
    # a zero sub-layer: pre-LN is the identity, post-LN still normalizes
    np.testing.assert_allclose(R.sublayer(x, np.zeros_like, norm_first=True), x, atol=0)
    np.testing.assert_allclose(R.sublayer(x, np.zeros_like), _ln_explicit(x), atol=1e-12)


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
    np.testing.assert_allclose(pe, expected, atol=1e-15)
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
    np.testing.assert_allclose(R.positional_encoding(seq_len, d_model), expected, atol=1e-14)


@pytest.mark.parametrize("d_model", [2, 4, 64])
@pytest.mark.parametrize("k", [0, 1, 5, 17, -3])
def test_relative_position_matrix_shifts_every_position(d_model, k):
    n = 40
    pe = R.positional_encoding(n, d_model)
    m = R.relative_position_matrix(k, d_model)
    for pos in range(max(0, -k), min(n, n - k)):
        np.testing.assert_allclose(m @ pe[pos], pe[pos + k], atol=1e-12)


def test_relative_position_matrix_structure():
    d = 8
    m3 = R.relative_position_matrix(3, d)
    np.testing.assert_allclose(m3 @ m3.T, np.eye(d), atol=1e-14)  # orthogonal
    np.testing.assert_allclose(R.relative_position_matrix(0, d), np.eye(d), atol=0)
    np.testing.assert_allclose(R.relative_position_matrix(-3, d), m3.T, atol=1e-14)
    np.testing.assert_allclose(R.relative_position_matrix(2, d) @ R.relative_position_matrix(5, d),
                               R.relative_position_matrix(7, d), atol=1e-13)
    # first block: rotation by angle 3 (frequency 1), written out
    np.testing.assert_allclose(m3[:2, :2], [[np.cos(3), np.sin(3)], [-np.sin(3), np.cos(3)]], atol=1e-15)
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
            # sin a sin b + cos a cos b = cos(a - b), summed over the 16 frequencies
            np.testing.assert_allclose(gram[i, j], np.cos(omega * (i - j)).sum(), atol=1e-12)
    np.testing.assert_allclose(np.diag(gram), 16.0, atol=1e-12)


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
    np.testing.assert_allclose(out_perm, out[perm], atol=1e-12)  # rows move, nothing else
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
    np.testing.assert_allclose(out_b, out_a[perm], atol=1e-12)
    # per-word vectors ("cat" in a and "cat" in b) are identical without positions
    np.testing.assert_allclose(out_a[1], out_b[4], atol=1e-12)
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
    np.testing.assert_allclose(x.mean(-1), [1, 0.75, 1], atol=1e-15)
    np.testing.assert_allclose(x.var(-1), [0.5, 3 / 16, 0.5], atol=1e-15)
    np.testing.assert_allclose(R.layer_norm(x)[0], np.array([0, 1, 0, -1]) / np.sqrt(0.5 + 1e-5), atol=1e-12)


def test_chapter_3_stack_numbers_quoted_in_the_text():
    """Replays the chapter's seeded residual demonstrations and checks the numbers its text quotes."""
    d, rng = 64, np.random.default_rng(1)
    jac_plain, jac_res = np.eye(d), np.eye(d)
    for _ in range(50):
        w = rng.normal(scale=0.1 / np.sqrt(d), size=(d, d))
        jac_plain, jac_res = jac_plain @ w, jac_res @ (np.eye(d) + w)
    assert np.linalg.norm(jac_plain) / np.sqrt(d) < 1e-40 and 0.5 < np.linalg.norm(jac_res) / np.sqrt(d) < 2.0
    # post-LN of the lecture's FFN: rows (1, -1) up to the epsilon factor; pre-LN: the raw stream
    ex, eps = E.FFN_EXAMPLE, 1e-5
    ffn = lambda z: R.feed_forward(z, ex.w1, ex.b1, ex.w2, ex.b2)  # noqa: E731
    half = np.array([3.0, 1.5, 3.0])
    np.testing.assert_allclose(R.sublayer(ex.x, ffn), np.outer(half / np.sqrt(half**2 + eps), [1, -1]), atol=1e-12)
    a = 0.5 / np.sqrt(0.25 + eps)
    np.testing.assert_allclose(R.sublayer(ex.x, ffn, norm_first=True), [[4 + a, 0], [3, 1], [4, 1]], atol=1e-12)


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
