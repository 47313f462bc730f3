"""Tests of Part I, notebooks 1 and 2: every intermediate of the lecture's attention examples,
the two- and three-head examples, head splitting, and the cost arithmetic of tmlib.analysis.costs.

Expected values are written independently of the code under test: integer matrices typed
from the hand computation, softmax rows as explicit exponentials with ``math.exp``, matrix
products as Python loops, byte counts as hand multiplications. This file is where the lecture's attention examples
are checked (tmlib.ref's weights and outputs, every intermediate, the four-decimal values the notebooks print, and
the lecture's printed numbers: which are correct roundings and which are not, see book/errata/01.md), and
tmlib.analysis.costs.
"""
import math

import numpy as np
import pytest

from tmlib.analysis import costs as C
from tmlib.course import examples as E
from tmlib import ref as R
from tolerances import assert_close, attention_length

numerics = pytest.mark.numerics

L = E.LECTURE_PRINTED
R2 = math.sqrt(2.0)


# ------------------------------------------------------------------ independent helpers
def softmax_by_hand(row):
    """Softmax of a Python list with math.exp (no NumPy, no tmlib.ref)."""
    e = [math.exp(x) for x in row]
    s = sum(e)
    return [x / s for x in e]


def matmul_by_hand(a, b):
    """Matrix product as explicit loops over Python lists."""
    a, b = np.asarray(a).tolist(), np.asarray(b).tolist()
    return [[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def transpose(a):
    return [list(r) for r in zip(*np.asarray(a).tolist())]


def attention_by_hand(q, k, v):
    """(scores, scaled, weights, output) of one head, by loops."""
    d_k = len(np.asarray(q).tolist()[0])
    scores = matmul_by_hand(q, transpose(k))
    scaled = [[x / math.sqrt(d_k) for x in row] for row in scores]
    weights = [softmax_by_hand(row) for row in scaled]
    return scores, scaled, weights, matmul_by_hand(weights, v)


def is_correct_rounding(printed, exact, decimals):
    """True where the printed number is the exact value rounded to ``decimals`` places."""
    return np.abs(np.asarray(printed) - np.asarray(exact)) <= 0.5 * 10.0**-decimals + 1e-12


# ------------------------------------------------------------------ example 1
@numerics
def test_example_1_intermediates_closed_form():
    ex = E.ATTENTION_EXAMPLE_1
    a, b = math.exp(1 / R2), math.exp(R2)
    scores = np.array([[1, 0, 1], [1, 1, 0], [2, 1, 1]])
    np.testing.assert_array_equal(ex.q @ ex.k.T, scores)
    assert_close(scores / R2, [[1 / R2, 0, 1 / R2], [1 / R2, 1 / R2, 0], [R2, 1 / R2, 1 / R2]], n=2)
    expected_w = [[a / (2 * a + 1), 1 / (2 * a + 1), a / (2 * a + 1)],
                  [a / (2 * a + 1), a / (2 * a + 1), 1 / (2 * a + 1)],
                  [b / (b + 2 * a), a / (b + 2 * a), a / (b + 2 * a)]]
    expected_out = [[1.0, 1.0],
                    [(a + 2) / (2 * a + 1), 3 * a / (2 * a + 1)],
                    [3 * a / (b + 2 * a), (2 * b + a) / (b + 2 * a)]]
    out, w = R.scaled_dot_product_attention(ex.q, ex.k, ex.v)
    n = attention_length(2, 3)
    assert_close(w, expected_w, n=n)
    assert_close(out, expected_out, n=n)
    # the loop version agrees too
    _, _, w_loop, out_loop = attention_by_hand(ex.q, ex.k, ex.v)
    assert_close(out, out_loop, n=n)
    # the four decimals chapter 1 prints
    np.testing.assert_allclose(out.round(4), [[1.0, 1.0], [0.7967, 1.2033], [0.7448, 1.2552]], atol=0)
    np.testing.assert_allclose(w.round(4), [[0.4011, 0.1978, 0.4011], [0.4011, 0.4011, 0.1978],
                                            [0.5035, 0.2483, 0.2483]], atol=0)


def test_example_1_lecture_exponentials_are_of_rounded_scores():
    p = L["attention_1"]
    # the lecture's e^0.71 and e^1.41 are right for the rounded exponents ...
    assert round(math.exp(0.71), 3) == p["exp_0.71"]
    assert round(math.exp(1.41), 3) == p["exp_1.41"]
    # ... but the exact exponents 1/√2 and √2 give 2.028 and 4.113
    assert round(math.exp(1 / R2), 3) == 2.028
    assert round(math.exp(R2), 3) == 4.113
    assert_close(p["row_sums"], [2 * 2.034 + 1, 2 * 2.034 + 1, 4.096 + 2 * 2.034], n=3)


def test_example_1_lecture_weights_three_decimals():
    exact = np.array(attention_by_hand(E.ATTENTION_EXAMPLE_1.q, E.ATTENTION_EXAMPLE_1.k,
                                       E.ATTENTION_EXAMPLE_1.v)[2])
    ok = is_correct_rounding(L["attention_1"]["weights_3dp"], exact, 3)
    # 0.401 is right, 0.197 should be 0.198, row 3 [0.501, 0.249, 0.249] should be [0.503, 0.248, 0.248]
    np.testing.assert_array_equal(ok, [[True, False, True], [True, True, False], [False, False, False]])
    np.testing.assert_allclose(exact.round(3), [[0.401, 0.198, 0.401], [0.401, 0.401, 0.198],
                                                [0.503, 0.248, 0.248]], atol=0)
    # the two-decimal matrix is a correct rounding everywhere
    assert is_correct_rounding(L["attention_1"]["weights"], exact, 2).all()


def test_example_1_output_row_3_is_not_a_rounding():
    ex = E.ATTENTION_EXAMPLE_1
    exact = np.array(attention_by_hand(ex.q, ex.k, ex.v)[3])
    printed = L["attention_1"]["output"]
    np.testing.assert_array_equal(is_correct_rounding(printed, exact, 2),
                                  [[True, True], [True, True], [False, False]])
    np.testing.assert_allclose(exact.round(2), [[1.00, 1.00], [0.80, 1.20], [0.74, 1.26]], atol=0)
    # cause: the lecture multiplies its rounded weights by V
    assert_close(matmul_by_hand(L["attention_1"]["weights"], ex.v), printed, n=3)


# ------------------------------------------------------------------ examples 2 and 3
@numerics
@pytest.mark.parametrize("ex, key, scale, weight, output", [
    (E.ATTENTION_EXAMPLE_2, "attention_2", 1 / R2, 0.5, [[3.0, 2.0]]),
    (E.ATTENTION_EXAMPLE_3, "attention_3", 0.5, 0.25, [[5.0]]),
])
def test_examples_2_and_3_intermediates(ex, key, scale, weight, output):
    scores, scaled, weights, out = attention_by_hand(ex.q, ex.k, ex.v)
    n = ex.k.shape[0]
    np.testing.assert_array_equal(scores, [[1.0] * n])
    chain = attention_length(ex.q.shape[-1], n)
    assert_close(scaled, [[scale] * n], n=2)
    assert_close(weights, [[weight] * n], n=chain)
    assert_close(out, output, n=chain)
    p = L[key]
    assert is_correct_rounding(p["scaled_scores"], scaled, 2).all()
    assert_close(p["weights"], weights, n=chain)
    assert_close(p["output"], out, n=chain)
    r_out, r_w = R.scaled_dot_product_attention(ex.q, ex.k, ex.v)
    assert_close(r_out, output, n=chain)
    assert_close(r_w, [[weight] * n], n=chain)


# ------------------------------------------------------------------ two-head example
M = E.MHA_EXAMPLE_2


def head_by_hand(i, m=M):
    q = matmul_by_hand(m.q, m.w_q[i])
    k = matmul_by_hand(m.k, m.w_k[i])
    v = matmul_by_hand(m.v, m.w_v[i])
    return (q, k, v, *attention_by_hand(q, k, v))


def test_mha_projections_and_scores_match_lecture_exactly():
    for i in (0, 1):
        q, k, v, scores, scaled, _, _ = head_by_hand(i)
        n = i + 1
        np.testing.assert_array_equal(q, L["mha_2"][f"q_{n}"])
        np.testing.assert_array_equal(k, L["mha_2"][f"k_{n}"])
        np.testing.assert_array_equal(v, L["mha_2"][f"v_{n}"])
        np.testing.assert_array_equal(scores, L["mha_2"][f"scores_{n}"])
        assert is_correct_rounding(L["mha_2"][f"scaled_scores_{n}"], scaled, 2).all()


@numerics
def test_mha_weights_closed_form():
    # head 1, row 1: scores [8, 8, 6]/√2 -> [1, 1, e^{-√2}] / (2 + e^{-√2})
    c = math.exp(-R2)
    _, w = R.multi_head_attention(M.q, M.k, M.v, M.w_q, M.w_k, M.w_v, M.w_o)
    # projections of small integers are exact; scores up to 9/√2 = 6.4 set the scale of the exponentials
    n, scale = attention_length(2, 3), 9 / R2
    assert_close(w[0, 0], [1 / (2 + c), 1 / (2 + c), c / (2 + c)], n=n, magnitude=scale)
    # head 2, row 2: scores [9, 6, 7]/√2 -> [1, e^{-3/√2}, e^{-2/√2}] / sum
    e3, e2 = math.exp(-3 / R2), math.exp(-2 / R2)
    assert_close(w[1, 1], np.array([1, e3, e2]) / (1 + e3 + e2), n=n, magnitude=scale)
    for i in (0, 1):
        assert_close(w[i], head_by_hand(i)[5], n=n, magnitude=scale)
        # every two-decimal weight the lecture prints is a correct rounding
        assert is_correct_rounding(L["mha_2"][f"weights_{i + 1}"], w[i], 2).all()


def test_mha_head_outputs_vs_lecture():
    h1, h2 = np.array(head_by_hand(0)[6]), np.array(head_by_hand(1)[6])
    np.testing.assert_allclose(h1.round(4), [[1.2168, 2.1084], [1.4965, 2.5035], [1.0458, 1.4280]], atol=0)
    np.testing.assert_allclose(h2.round(4), [[1.1622, 2.1354], [1.5326, 2.4447], [1.0834, 2.0555]], atol=0)
    np.testing.assert_array_equal(is_correct_rounding(L["mha_2"]["head_1"], h1, 2),
                                  [[False, False], [True, True], [False, False]])
    np.testing.assert_array_equal(is_correct_rounding(L["mha_2"]["head_2"], h2, 2),
                                  [[True, False], [True, False], [False, True]])
    # head 1's printed values are the lecture's rounded weights times V_1
    assert_close(matmul_by_hand(L["mha_2"]["weights_1"], L["mha_2"]["v_1"]), L["mha_2"]["head_1"], n=3)


@numerics
def test_mha_final_output_by_loops():
    concat = [r1 + r2 for r1, r2 in zip(head_by_hand(0)[6], head_by_hand(1)[6])]
    final = np.array(matmul_by_hand(concat, M.w_o))
    out, w = R.multi_head_attention(M.q, M.k, M.v, M.w_q, M.w_k, M.w_v, M.w_o)
    assert out.shape == (3, 4) and w.shape == (2, 3, 3)
    n = attention_length(2, 3) + 4  # one head (scores up to 6.4), then W^O (length 4)
    assert_close(out, final, n=n, magnitude=9 / R2 * np.abs(final).max())
    np.testing.assert_allclose(out.round(4), [[2.3790, 4.2438, 3.2706, 3.3522], [3.0291, 4.9482, 4.0361, 3.9412],
                                              [2.1292, 3.4835, 2.5114, 3.1013]], atol=0)  # chapter 2's four decimals
    # W^O's columns add up concat columns: out[:, 0] = c0 + c2, out[:, 1] = c1 + c3, ...
    c = np.array(concat)
    assert_close(final, np.stack([c[:, 0] + c[:, 2], c[:, 1] + c[:, 3], c[:, 1] + c[:, 2], c[:, 0] + c[:, 3]],
                                 axis=1), n=4)
    # from the lecture's rounded concatenation the output would be off by up to 0.0194
    lecture_concat = np.hstack([L["mha_2"]["head_1"], L["mha_2"]["head_2"]])
    assert round(float(np.abs(lecture_concat @ M.w_o - final).max()), 4) == 0.0194


def test_split_heads_equals_per_head_projection():
    w_big = np.concatenate(list(M.w_q), axis=1)  # (d_model, n_heads * d_k) = (4, 4)
    np.testing.assert_array_equal(w_big, [[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 1], [0, 1, 0, 0]])
    heads = R.split_heads(M.q @ w_big, 2)  # (2, 3, 2)
    assert heads.shape == (2, 3, 2)
    np.testing.assert_array_equal(heads[0], L["mha_2"]["q_1"])
    np.testing.assert_array_equal(heads[1], L["mha_2"]["q_2"])
    np.testing.assert_array_equal(R.merge_heads(heads), M.q @ w_big)
    batched = R.split_heads(np.stack([M.q, 2 * M.q]) @ w_big, 2)  # (batch, n_heads, seq_len, d_k)
    assert batched.shape == (2, 2, 3, 2)
    np.testing.assert_array_equal(batched[1, 1], 2 * np.array(L["mha_2"]["q_2"]))


@pytest.mark.parametrize("n_heads", [3, 5])
def test_split_heads_rejects_non_divisible(n_heads):
    with pytest.raises(ValueError, match=f"d_model 4 is not divisible by n_heads {n_heads}"):
        R.split_heads(M.q, n_heads)


def test_split_heads_bad_types():
    with pytest.raises(TypeError):
        R.split_heads(M.q, 2.0)
    with pytest.raises(ValueError):
        R.split_heads(np.ones(4), 2)
    with pytest.raises(ValueError):
        R.split_heads(M.q, 0)
    with pytest.raises(ValueError):
        R.merge_heads(np.ones((3, 4)))


def test_three_head_example():
    m = E.MHA_EXAMPLE_3
    assert m.w_q.shape == (3, 4, 2) and m.w_o.shape == (6, 4)
    heads = [head_by_hand(i, m)[6] for i in range(3)]
    np.testing.assert_allclose(heads[0], head_by_hand(0)[6], atol=0)  # heads 1, 2 as in example 2 (same code)
    # head 3 by hand: Q3 = [[1,2],[1,1],[2,3]], K3 = [[1,3],[2,1],[2,2]], V3 = [[1,0],[1,2],[3,4]]
    q3, k3, v3 = head_by_hand(2, m)[:3]
    np.testing.assert_array_equal(q3, [[1, 2], [1, 1], [2, 3]])
    np.testing.assert_array_equal(k3, [[1, 3], [2, 1], [2, 2]])
    np.testing.assert_array_equal(v3, [[1, 0], [1, 2], [3, 4]])
    concat = [sum(rows, []) for rows in zip(*heads)]  # (3, 6)
    final = matmul_by_hand(concat, m.w_o)
    out, w = R.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o)
    assert out.shape == (3, 4) and w.shape == (3, 3, 3)
    assert_close(out, final, n=attention_length(2, 3) + 6, magnitude=9 / R2 * np.abs(final).max())
    # the reshape form cannot produce three heads from d_model 4
    with pytest.raises(ValueError, match="not divisible"):
        R.split_heads(m.q @ np.ones((4, 4)), 3)


# ------------------------------------------------------------------ costs
def test_practice_problem_1():
    d_model, n_heads, n = 512, 8, 100
    assert d_model // n_heads == 64
    # 4 weight matrices 512 x 512 = 4 * 262144, plus biases 4 * 512
    assert C.mha_parameter_count(d_model, n_heads, bias=False) == 1_048_576
    assert C.mha_parameter_count(d_model, n_heads) == 1_048_576 + 2_048 == 1_050_624
    # one sequence, 8 heads, 100 x 100 float32 weights = 80,000 numbers = 320,000 bytes
    assert C.attention_matrix_bytes(1, n_heads, n) == 320_000
    assert C.attention_matrix_bytes(1, n_heads, n, bytes_per_element=2) == 160_000


def test_mha_parameter_count_other_cases():
    assert C.mha_parameter_count(512, 1) == C.mha_parameter_count(512, 8)  # independent of h
    assert C.mha_parameter_count(1024, 16) == 4 * 1024 * 1024 + 4 * 1024 == 4_198_400  # Transformer big
    assert C.mha_parameter_count(768, 12) == 2_362_368  # BERT-base, one layer
    # MHA_EXAMPLE_2: 4 weights 4x4 = 64, biases 16
    assert C.mha_parameter_count(4, 2, bias=False) == 64
    # three heads of 2 on d_model 4: W^Q, W^K, W^V 4x6 and W^O 6x4 = 96, biases 6+6+6+4 = 22
    assert C.mha_parameter_count(4, 3, d_k=2, d_v=2) == 118
    assert C.mha_parameter_count(4, 3, bias=False, d_k=2, d_v=2) == 96


def test_bert_base_memory_arithmetic():
    attn = C.attention_matrix_bytes(32, 12, 512)
    ffn = C.ffn_activation_bytes(32, 512, 3072)
    assert attn == 32 * 12 * 512 * 512 * 4 == 402_653_184  # 402.7 MB (384 MiB)
    assert ffn == 32 * 512 * 3072 * 4 == 201_326_592  # 201.3 MB (192 MiB)
    assert attn + ffn == 603_979_776  # "per layer: 600 MB"
    assert C.attention_matrix_bytes(32, 12, 512, n_layers=12) + C.ffn_activation_bytes(
        32, 512, 3072, n_layers=12) == 7_247_757_312  # "12 layers: 7.2 GB"
    state = C.training_state_bytes(110_000_000)
    assert state == {"parameters": 440_000_000, "gradients": 440_000_000,
                     "adam_states": 880_000_000, "total": 1_760_000_000}
    assert C.attention_matrix_bytes(2, 1, 3, seq_len_k=5) == 2 * 3 * 5 * 4


@pytest.mark.parametrize("call, exc", [
    (lambda: C.mha_parameter_count(4, 3), ValueError),
    (lambda: C.mha_parameter_count(0, 1), ValueError),
    (lambda: C.mha_parameter_count(512, -8), ValueError),
    (lambda: C.mha_parameter_count(512.0, 8), TypeError),
    (lambda: C.mha_parameter_count(512, True), TypeError),
    (lambda: C.mha_parameter_count(512, 8, d_k="64", d_v=64), TypeError),
    (lambda: C.attention_matrix_bytes(0, 8, 100), ValueError),
    (lambda: C.attention_matrix_bytes(1, 8, 100.5), TypeError),
    (lambda: C.attention_matrix_bytes(1, 8, 100, bytes_per_element=0), ValueError),
    (lambda: C.attention_matrix_bytes(1, 8, 100, n_layers=-1), ValueError),
    (lambda: C.ffn_activation_bytes(1, 2, "3072"), TypeError),
    (lambda: C.ffn_activation_bytes(1, 0, 3072), ValueError),
    (lambda: C.training_state_bytes(0), ValueError),
    (lambda: C.training_state_bytes(1e8), TypeError),
])
def test_cost_bad_inputs(call, exc):
    with pytest.raises(exc):
        call()


def test_cost_error_messages_name_values():
    with pytest.raises(ValueError, match="d_model 4 is not divisible by n_heads 3"):
        C.mha_parameter_count(4, 3)
    with pytest.raises(ValueError, match="seq_len must be >= 1, got 0"):
        C.attention_matrix_bytes(1, 1, 0)
    assert C.attention_matrix_bytes(np.int64(2), 1, 3) == 72  # NumPy integers are accepted


# ------------------------------------------------------------------ chapter 1: checks moved out of the notebook
@numerics
def test_self_attention_is_attention_of_three_projections():
    x, w_q, w_k, w_v = M.q, M.w_q[0], M.w_k[0], M.w_v[0]
    q, k, v = matmul_by_hand(x, w_q), matmul_by_hand(x, w_k), matmul_by_hand(x, w_v)
    np.testing.assert_array_equal(q, [[2, 2], [1, 2], [3, 1]])
    np.testing.assert_array_equal(k, [[1, 3], [1, 2], [2, 2]])
    _, _, w_loop, out_loop = attention_by_hand(q, k, v)
    out, w = R.self_attention(x, w_q, w_k, w_v)
    n, scale = attention_length(2, 3), 9 / R2  # integer projections (exact), scores up to 9/√2
    assert_close(w, w_loop, n=n, magnitude=scale)
    assert_close(out, out_loop, n=n, magnitude=scale * np.abs(out_loop).max())
    assert round(float(w[2, 2]), 2) == 0.73
    assert_close(w[0, 0], w[0, 2], n=n, magnitude=scale)  # the chapter's text: equal scores, equal weights
    mask = np.tril(np.ones((3, 3), dtype=bool))
    assert_close(R.self_attention(x, w_q, w_k, w_v, mask=mask)[1],
                 R.scaled_dot_product_attention(q, k, v, mask=mask)[1], n=n, magnitude=scale)
    batch = np.stack([x, x[::-1]])  # (2, 3, 4)
    assert R.self_attention(batch, w_q, w_k, w_v)[0].shape == (2, 3, 2)


@pytest.mark.parametrize("args, match", [
    ((np.ones(4), np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 2))), "shape"),
    ((np.ones((3, 4)), np.ones((5, 2)), np.ones((4, 2)), np.ones((4, 2))), "w_q"),
    ((np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 3)), np.ones((4, 2))), "same d_k"),
])
def test_self_attention_rejects_bad_shapes(args, match):
    with pytest.raises(ValueError, match=match):
        R.self_attention(*args)


@numerics
def test_chapter_1_softmax_overflow_and_masked_example():
    big = np.array([1000.0, 1001.0, 1002.0])
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isinf(np.exp(1000.0)) and np.isnan(np.exp(big) / np.exp(big).sum()).all()
    assert_close(R.softmax(big), softmax_by_hand([0.0, 1.0, 2.0]), n=2 + 3)  # shift (exact), exp, sum, divide
    ex = E.ATTENTION_EXAMPLE_1
    out, w = R.scaled_dot_product_attention(ex.q, ex.k, ex.v, mask=np.tril(np.ones((3, 3), dtype=bool)))
    np.testing.assert_array_equal(out[0], ex.v[0])  # query 1 reads key 1 only: weight e^0 / e^0 = 1, exact
    assert_close(w[1], [0.5, 0.5, 0.0], n=attention_length(2, 3))


def test_chapter_1_tutorial_numbers_in_the_box():
    scores = [0.85, 0.12, 0.31, 0.03, 0.45, 0.18]
    np.testing.assert_allclose(np.round(softmax_by_hand(scores), 4), [0.2712, 0.1307, 0.1580, 0.1195, 0.1818, 0.1388],
                               atol=0)
    printed = [0.62, 0.05, 0.18, 0.01, 0.11, 0.03]
    assert scores[2] < scores[4] and printed[2] > printed[4]  # not monotone: no softmax, at any temperature
    s = 2 * math.log(0.5763 / 0.2719)
    assert round(s, 4) == 1.5024
    np.testing.assert_allclose(np.round(softmax_by_hand([s, s / 2, 0.3 * s]), 4), [0.5491, 0.2591, 0.1918], atol=0)


def test_chapter_1_saturation_numbers_quoted_in_the_text():
    """Replays the chapter's seeded draws (variance table, then saturation) and checks the numbers its text quotes."""
    rng = np.random.default_rng(0)
    d_ks = [4, 16, 64, 256, 1024]
    ratios = []
    for d in d_ks:
        q, k = rng.standard_normal((4000, d)), rng.standard_normal((4000, d))
        ratios.append(np.einsum("nd,nd->n", q, k).var() / d)
    assert all(0.95 < r < 1.05 for r in ratios)
    top, jac, top_s, jac_s = [], [], [], []
    for d in d_ks:
        q, k = rng.standard_normal((500, 1, d)), rng.standard_normal((500, 16, d))
        s = (q @ k.transpose(0, 2, 1))[:, 0, :]
        for z, store in ((s, True), (s / np.sqrt(d), False)):
            p = R.softmax(z, axis=-1)
            j = np.einsum("ni,ij->nij", p, np.eye(16)) - p[:, :, None] * p[:, None, :]
            if store:
                top.append(p.max(-1).mean())
                jac.append(np.linalg.norm(j, axis=(1, 2)).mean())
            else:
                top_s.append(p.max(-1).mean())
                jac_s.append(np.linalg.norm(j, axis=(1, 2)).mean())
    assert round(top[0], 2) == 0.41 and round(top[2], 2) == 0.84 and round(top[-1], 2) == 0.97
    assert 7.0 < jac[0] / jac[-1] < 8.0
    assert all(0.22 < t < 0.26 for t in top_s)
    # "at d_k = 64 ... 0.1773 against 0.3052 ..., at d_k = 1024 ... 0.0437 against 0.3054, seven times smaller"
    assert [round(x, 4) for x in (jac[2], jac_s[2], jac[-1], jac_s[-1])] == [0.1773, 0.3052, 0.0437, 0.3054]
    assert round(jac_s[-1] / jac[-1]) == 7


def test_chapter_1_jacobian_norm_of_uniform_and_two_key_softmax():
    """The crossing dropdown: ||diag(p) - p pᵀ||_F is √(n-1)/n for a uniform p (≈ 0.24 for 16 keys) and 0.5, the
    largest value, for p split equally between two keys."""
    def norm(p):
        return np.linalg.norm(np.diag(p) - np.outer(p, p))

    assert np.isclose(norm(np.full(16, 1 / 16)), np.sqrt(15) / 16) and round(np.sqrt(15) / 16, 2) == 0.24
    assert np.isclose(norm(np.r_[0.5, 0.5, np.zeros(14)]), 0.5)
    rng = np.random.default_rng(0)
    assert all(norm(R.softmax(rng.normal(scale=3.0, size=16))) <= 0.5 + 1e-12 for _ in range(2000))
