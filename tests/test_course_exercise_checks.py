"""tmlib.course.exercise_checks: Part I's checks accept the right answer, reject each typical mistake with a message
that names it, and never print the expected value."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tmlib import ref as R
from tmlib.course import examples as E
from tmlib.course import (
    check_learning_rate, check_merged_alignment, check_peak_learning_rate,
    check_attention_bytes, check_attention_result, check_feed_forward, check_feed_forward_result,
    check_layer_norm_result, check_multi_head_attention, check_multi_head_result
)


def _mha(scale=True, axis=-1, order=1, w_o_used=True, scale_by_d_model=False, scale_by_d_v=False):
    """Multi-head attention written out, with one of the typical mistakes switched on."""
    def fn(x_q, x_k, x_v, w_q, w_k, w_v, w_o):
        heads, weights = [], []
        for i in range(len(w_q)):
            q, k, v = x_q @ w_q[i], x_k @ w_k[i], x_v @ w_v[i]
            width = x_q.shape[-1] if scale_by_d_model else v.shape[-1] if scale_by_d_v else q.shape[-1]
            scores = q @ k.T / (np.sqrt(width) if scale else 1.0)
            a = np.exp(scores - scores.max(axis=axis, keepdims=True))
            a = a / a.sum(axis=axis, keepdims=True)
            heads.append(a @ v)
            weights.append(a)
        concat = np.concatenate(heads[::order], axis=-1)
        return (concat @ w_o if w_o_used else concat), np.stack(weights)
    return fn


def test_multi_head_build_it_accepts_the_right_answer_and_names_each_mistake():
    assert check_multi_head_attention(_mha()).startswith("correct:")
    assert check_multi_head_attention(lambda *a: R.multi_head_attention(*a)).startswith("correct:")
    for fn, symptom in [(_mha(scale=False), "head 1 .*not divided by √d_k.*√d_k of a head, not √d_model"),
                        (_mha(scale_by_d_model=True), "head 1 .*divided by √d_model.*√d_k of a head, not √d_model"),
                        # a reader's slip of r68: the check's d_k = d_v let √d_v pass; now d_k = 2, d_v = 3
                        (_mha(scale_by_d_v=True), "head 1 .*divided by √d_v.*the scale is √d_k"),
                        (_mha(axis=-2), "head 1 .*over the queries"),
                        (_mha(order=-1), "every head are right.*reverse order"),
                        (_mha(w_o_used=False), "without the product with W\\^O")]:
        with pytest.raises(AssertionError, match=symptom):
            check_multi_head_attention(fn)
    with pytest.raises(AssertionError, match="pair"):
        check_multi_head_attention(lambda *a: R.multi_head_attention(*a)[0])
    with pytest.raises(ValueError, match="shape"):
        check_multi_head_attention(lambda *a: (R.multi_head_attention(*a)[0].T, R.multi_head_attention(*a)[1]))


def test_feed_forward_build_it_names_each_mistake():
    assert check_feed_forward(R.feed_forward).startswith("correct:")
    relu = lambda v: np.maximum(0.0, v)  # noqa: E731
    for fn, symptom in [(lambda x, w1, b1, w2, b2: (x @ w1 + b1) @ w2 + b2, "ReLU between the two linear maps is missing"),
                        (lambda x, w1, b1, w2, b2: relu((x @ w1 + b1) @ w2 + b2), "after the second linear map"),
                        (lambda x, w1, b1, w2, b2: relu(x @ w1 + b1) @ w2 + 2 * b2, "differs from the right output")]:
        with pytest.raises(AssertionError, match=symptom):
            check_feed_forward(fn)
    with pytest.raises(ValueError):  # b1 and b2 exchanged cannot even broadcast when d_ff != d_model
        check_feed_forward(lambda x, w1, b1, w2, b2: relu(x @ w1 + b2) @ w2 + b1)
    # written for one sequence only (a reader's slip of r49): named, instead of einsum's own error
    two_d = lambda x, w1, b1, w2, b2: np.einsum("ij,jk->ik", relu(np.einsum("ij,jk->ik", x, w1) + b1), w2) + b2  # noqa
    with pytest.raises(AssertionError, match=r"(?s)works on one sequence .* but fails on a batch .*leading axes"):
        check_feed_forward(two_d)


def test_results_compared_inside_the_check_with_hints_never_the_value():
    ex = E.ATTENTION_EXAMPLE_1
    out, w = R.scaled_dot_product_attention(ex.q, ex.k, ex.v)
    assert check_attention_result(out, ex.q, ex.k, ex.v).startswith("correct:")
    assert check_attention_result(w, ex.q, ex.k, ex.v, part="weights").startswith("correct:")
    unscaled = R.softmax(ex.q @ ex.k.T)
    with pytest.raises(AssertionError, match="without dividing the scores by √d_k") as err:
        check_attention_result(unscaled, ex.q, ex.k, ex.v, part="weights")
    assert "0.4011" not in str(err.value) and "0.401" not in str(err.value)
    with pytest.raises(AssertionError, match="correct to 4 decimals"):
        check_attention_result([[2.26]], [[2, 0, 0, 0]], E.ATTENTION_EXAMPLE_3.k, [[4], [0], [0], [2]], decimals=4)
    f = E.FFN_EXAMPLE
    b1 = np.array([-2.0, 0.0])
    right = np.maximum(0.0, f.x @ f.w1 + b1) @ f.w2 + f.b2
    assert check_feed_forward_result(right, f.x, f.w1, b1, f.w2, f.b2).startswith("correct:")
    with pytest.raises(AssertionError, match="without the ReLU"):
        check_feed_forward_result((f.x @ f.w1 + b1) @ f.w2 + f.b2, f.x, f.w1, b1, f.w2, f.b2)
    x = E.MHA_EXAMPLE_2.q
    assert check_layer_norm_result(-R.layer_norm(x, eps=0.0), -2.0 * x + 1.0, eps=0.0).startswith("correct:")
    with pytest.raises(AssertionError, match="not right yet") as err:  # exercise 3.5 asks the sign: no hint at all
        check_layer_norm_result(R.layer_norm(x, eps=0.0), -2.0 * x + 1.0, eps=0.0)
    assert "sign" not in str(err.value) and "R.layer_norm" not in str(err.value) and "LN(x)" not in str(err.value)


def test_multi_head_result_with_big_matrices_rejects_the_other_head_count_silently():
    m = E.MHA_EXAMPLE_2
    big = [np.concatenate(list(w), axis=1) for w in (m.w_q, m.w_k, m.w_v)]
    one, _ = R.multi_head_attention(m.q, m.k, m.v, big[0][None], big[1][None], big[2][None], m.w_o)
    two, _ = R.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o)
    assert check_multi_head_result(one, m.q, m.k, m.v, *big, m.w_o, n_heads=1).startswith("correct:")
    assert check_multi_head_result(two, m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o).startswith("correct:")
    with pytest.raises(AssertionError, match="not right yet") as err:  # rejected, without saying why: exercise 2.5
        check_multi_head_result(two, m.q, m.k, m.v, *big, m.w_o, n_heads=1)  # asks in words whether they are equal
    assert "head" not in str(err.value)


def test_attention_bytes_names_the_factor():
    kw = dict(batch=8, n_heads=32, seq_len=4096, bytes_per_element=2, n_layers=32)
    right = 8 * 32 * 4096 * 4096 * 2 * 32
    assert right == 274_877_906_944
    assert check_attention_bytes(right, **kw).startswith("correct:")
    assert check_attention_bytes(float(right), **kw).startswith("correct:")
    with pytest.raises(AssertionError, match="bytes per element is missing"):
        check_attention_bytes(right // 2, **kw)
    with pytest.raises(AssertionError, match="number of heads is missing or the number of layers is missing"):
        check_attention_bytes(right // 32, **kw)
    with pytest.raises(AssertionError, match="batch is counted twice"):
        check_attention_bytes(right * 8, **kw)
    with pytest.raises(AssertionError, match=re.escape("4 bytes (float32) per element instead of 2 (bfloat16)?")):
        check_attention_bytes(right * 2, **kw)  # float32 instead of bfloat16
    with pytest.raises(AssertionError, match=re.escape("8 bytes (float64) per element instead of 2 (bfloat16)?")):
        check_attention_bytes(right * 4, **kw)
    with pytest.raises(AssertionError, match="sequence length") as err:
        check_attention_bytes(right // 4096, **kw)
    assert str(right) not in str(err.value) and f"{right:,}" not in str(err.value)
    with pytest.raises(AssertionError, match="positive whole number"):
        check_attention_bytes(274_877_906_944.5, **kw)
    with pytest.raises(AssertionError, match="within 1%: give the exact whole number") as err:
        check_attention_bytes(275e9, **kw)  # rounded to the GB figure
    assert str(right) not in str(err.value) and f"{right:,}" not in str(err.value)


def test_encoder_layer_build_it_names_the_sub_layer():
    from tmlib.course.exercise_checks import check_encoder_layer

    def layer(residual=True, pre_ln=False, ffn_on_x=False):
        def fn(x, self_attn, ffn):
            attn = lambda s: R.multi_head_attention(s, s, s, *self_attn)[0]  # noqa: E731
            if pre_ln:
                z = x + attn(R.layer_norm(x))
                return z, z + R.feed_forward(R.layer_norm(z), *ffn)
            z = R.layer_norm((x if residual else 0) + attn(x))
            return z, R.layer_norm(z + R.feed_forward(x if ffn_on_x else z, *ffn))
        return fn

    assert check_encoder_layer(layer()).startswith("correct:")
    assert check_encoder_layer(lambda x, a, f: (R.sublayer(x, lambda s: R.multi_head_attention(s, s, s, *a)[0]),
                                                R.encoder_layer(x, a, f))).startswith("correct:")
    for fn, symptom in [(layer(residual=False), "self-attention sub-layer: the residual connection is missing"),
                        (layer(pre_ln=True), "self-attention sub-layer: your layer normalises the sub-layer's input"),
                        (layer(ffn_on_x=True), "feed-forward sub-layer .*matches.*gets the layer's input x")]:
        with pytest.raises(AssertionError, match=symptom):
            check_encoder_layer(fn)
    # the pre-LN slip (a reader of r54 read "the normalisation comes before the sub-layer" as advice): the message
    # says what the student's layer does, and that the paper's is post-LN, as a statement, not a question
    with pytest.raises(AssertionError) as err:
        check_encoder_layer(layer(pre_ln=True))
    text = str(err.value)
    assert "x + Sublayer(LN(x)): that is pre-LN" in text and "post-LN, LN(x + Sublayer(x))" in text, text
    assert "comes before" not in text and not text.endswith("?"), text

    def pre_ln_ffn_only(x, a, f):  # the first sub-layer right, the second pre-LN
        z = R.sublayer(x, lambda s: R.multi_head_attention(s, s, s, *a)[0])
        return z, z + R.feed_forward(R.layer_norm(z), *f)
    with pytest.raises(AssertionError, match=r"feed-forward sub-layer.*z \+ FFN\(LN\(z\)\): that is pre-LN") as err:
        check_encoder_layer(pre_ln_ffn_only)
    assert not str(err.value).endswith("?")


    def swapped(x, a, f):  # the pair returned as (out, z)
        z = R.sublayer(x, lambda s: R.multi_head_attention(s, s, s, *a)[0])
        return R.encoder_layer(x, a, f), z
    with pytest.raises(AssertionError, match=r"wrong order: the pair must be \(z, out\)") as err:
        check_encoder_layer(swapped)
    assert "follow x + Sublayer" not in str(err.value)

    def pair_added(x, a, f):  # R.multi_head_attention's pair added to x, its [0] forgotten (a reader's slip of r49)
        z = R.layer_norm(x + R.multi_head_attention(x, x, x, *a))
        return z, R.layer_norm(z + R.feed_forward(z, *f))
    with pytest.raises(AssertionError, match=r"(?s)returns the pair \(output, weights\).*\[0\]"):
        check_encoder_layer(pair_added)

def test_peak_learning_rate_names_each_mistake_and_never_the_value():
    right = R.noam_lr(4000, 1024, 4000)
    assert check_peak_learning_rate(right, 4000, d_model=1024, warmup_steps=4000).startswith("correct")
    cases = {(R.noam_lr(4000, 512, 4000), 4000): "base model",
             (4000 ** -0.5, 4000): "without d_model^-0.5",
             (right, 3999): "still rising", (right, 4001): "already falling",
             (right, 4000.0): "whole step number"}
    for (peak, step), symptom in cases.items():
        with pytest.raises(AssertionError, match=re.escape(symptom)) as err:
            check_peak_learning_rate(peak, step, d_model=1024, warmup_steps=4000)
        assert f"{right:.4g}" not in str(err.value) and f"{right:.3e}" not in str(err.value)


def test_learning_rate_names_each_mistake():
    kw = dict(d_model=256, warmup_steps=200, factor=0.3)
    assert check_learning_rate(R.noam_lr(800, 256, 200, 0.3), 800, **kw).startswith("correct")
    cases = {R.noam_lr(800, 256, 200): "without the factor", R.noam_lr(800, 512, 200, 0.3): "base model",
             0.3 * 800 ** -0.5: "without d_model^-0.5", 0.3 * 256 ** -0.5 * 800 * 200 ** -1.5: "other phase"}
    for value, symptom in cases.items():
        with pytest.raises(AssertionError, match=re.escape(symptom)) as err:
            check_learning_rate(value, 800, **kw)
        assert f"{R.noam_lr(800, 256, 200, 0.3):.4g}" not in str(err.value)


def test_merged_alignment_names_the_rule_broken():
    from tmlib.analysis import alignment as A

    pq, pk = ["▁A", "▁ham", "ster", "."], ["▁Ein", "▁Ham", "ster", "."]
    w = np.array([[0.8, 0.1, 0.1, 0.0], [0.1, 0.6, 0.3, 0.0], [0.0, 0.2, 0.7, 0.1], [0.1, 0.0, 0.1, 0.8]])
    right = A.merge_attention(w, A.word_spans(pq), A.word_spans(pk))
    assert check_merged_alignment(right, w, pq, pk).startswith("correct")
    qs, ks = A.word_spans(pq), A.word_spans(pk)
    by_key = np.stack([w[:, a:b].sum(1) for a, b in ks], 1)
    summed = np.stack([by_key[a:b].sum(0) for a, b in qs])
    with pytest.raises(AssertionError, match="summing over the query pieces") as err:
        check_merged_alignment(summed, w, pq, pk)
    # the exercise asks what goes wrong when the query pieces are summed: the message must not say it (r54)
    assert "number of pieces" not in str(err.value) and "adds up" not in str(err.value), str(err.value)
    with pytest.raises((AssertionError, ValueError), match="shape"):
        check_merged_alignment(right[:2], w, pq, pk)
    slipped = right.copy()
    slipped[1, 1] += 0.3  # a slip of the sum by hand: "hamster"'s row adds up to 1.3
    with pytest.raises(AssertionError, match=r"row 1 adds up to 1\.3: a merged row must still be a distribution"):
        check_merged_alignment(slipped, w, pq, pk)
    with pytest.raises(AssertionError) as err:  # rows that add up to 1 get no word on the sums
        check_merged_alignment(right[:, [1, 0, 2]], w, pq, pk)
    assert "adds up to" not in str(err.value)


def test_smoothing_floor_accepts_the_entropy_and_names_each_mistake():
    from tmlib.course import check_smoothing_floor
    v, eps = 8000, 0.1
    p_true, p_other = 1 - eps + eps / v, eps / v
    own, others = -p_true * np.log(p_true), -(v - 1) * p_other * np.log(p_other)
    assert check_smoothing_floor(own + others, v, eps).startswith("correct")
    for wrong, words in ((own, "correct token's term alone"),
                         (others, "other tokens' terms alone"), ((own + others) / np.log(2), "in bits"),
                         (round(others, 3), "other tokens' terms alone"),  # a slip rounded as the answer
                         (own + others + 0.01, None)):
        with pytest.raises(AssertionError) as err:
            check_smoothing_floor(wrong, v, eps)
        assert (words in str(err.value)) if words else "Your answer is what" not in str(err.value)
        assert f"{own + others:.3f}" not in str(err.value)  # the value is never printed
    with pytest.raises(ValueError, match="label_smoothing"):
        check_smoothing_floor(1.0, v, 1.5)


def test_smoothing_floor_unrounded_rejects_a_rounded_value_and_the_exclusive_target():
    """Exercise 9.2 asks for the floor unrounded: the check itself compares to within rounding, so the page's check
    cell needs no reference computation of its own."""
    from tmlib.course import check_smoothing_floor
    v, eps = 8000, 0.1
    p_true, p_other = 1 - eps + eps / v, eps / v
    floor = -(p_true * np.log(p_true) + (v - 1) * p_other * np.log(p_other))
    assert check_smoothing_floor(floor, v, eps, unrounded=True).startswith("correct")
    assert check_smoothing_floor(np.float32(floor), v, eps, unrounded=True).startswith("correct")
    exclusive = -((1 - eps) * np.log(1 - eps) + eps * np.log(eps / (v - 1)))  # eps over the V - 1 others
    for wrong in (round(floor, 3), exclusive):
        assert check_smoothing_floor(wrong, v, eps).startswith("correct")  # 3 decimals alone let them through
        with pytest.raises(AssertionError, match="not to within rounding") as err:
            check_smoothing_floor(wrong, v, eps, unrounded=True)
        assert f"{floor:.6f}" not in str(err.value) and f"{floor:.3f}" not in str(err.value).replace(
            f"{float(wrong)!r}", "")  # only the student's own number is named


def test_padding_fractions_compares_every_chunk_size_without_printing_them():
    from tmlib.course import check_padding_fractions
    from tmlib.data import token_batches
    rng = np.random.default_rng(0)
    lengths = [(int(a), int(b)) for a, b in rng.integers(3, 40, size=(3000, 2))]
    src, tgt_in = np.array(lengths)[:, 0], np.array(lengths)[:, 1] + 1
    size = np.maximum(src, tgt_in)
    right, longer_side = {}, {}
    for chunk in (1, 10, 100, 10_000):
        b = token_batches(lengths, 2000, seed=0, epoch=0, chunk_size=chunk)
        right[chunk] = 1 - sum(src[i].sum() + tgt_in[i].sum() for i in b) / sum(
            len(i) * (src[i].max() + tgt_in[i].max()) for i in b)  # the pads of src and tgt_in
        longer_side[chunk] = 1 - sum(size[i].sum() for i in b) / sum(len(i) * size[i].max() for i in b)
    assert check_padding_fractions(right, lengths, 2000).startswith("correct")
    with pytest.raises(AssertionError, match="only the padding beyond each pair's longer side") as err:
        check_padding_fractions(longer_side, lengths, 2000)  # the shorter side's pads left out
    assert all(f"{v:.3f}" not in str(err.value) for v in right.values())
    with pytest.raises(AssertionError, match="the keys 1, 10, 100, 10000"):
        check_padding_fractions({1: 0.1}, lengths, 2000)
    ordered_but_wrong = {1: 3, 10: 2, 100: 1, 10_000: 0}  # falls with the chunk size, yet is no fraction
    with pytest.raises(AssertionError, match="chunk_size 1, chunk_size 10, chunk_size 100, chunk_size 10000"):
        check_padding_fractions(ordered_but_wrong, lengths, 2000)
    percent = {k: 100 * v for k, v in right.items()}
    with pytest.raises(AssertionError) as err:  # said once, and nothing else (a reader of r55 had it four times)
        check_padding_fractions(percent, lengths, 2000)
    assert str(err.value) == "padding is given in percent: give a fraction between 0 and 1"
    some_percent = {**right, 10: 100 * right[10], 100: right[100] + 0.01}
    with pytest.raises(AssertionError) as err:
        check_padding_fractions(some_percent, lengths, 2000)
    assert str(err.value).count("percent") == 1 and "not right yet at chunk_size 100:" in str(err.value)
    assert "padding at chunk_size 10 is given in percent" in str(err.value)
    off = {**right, 100: right[100] + 0.01}
    with pytest.raises(AssertionError) as err:
        check_padding_fractions(off, lengths, 2000)
    assert "chunk_size 100" in str(err.value) and "chunk_size 10," not in str(err.value)
    assert all(f"{v:.3f}" not in str(err.value) for v in right.values())
    from tmlib.data import padding_fraction  # the right counting on another shuffle: the seed is named
    seed_1 = {c: padding_fraction(token_batches(lengths, 2000, seed=1, epoch=0, chunk_size=c), lengths)
              for c in right}
    assert any(abs(seed_1[c] - right[c]) > 5e-4 for c in right)  # else the shuffle would not matter
    with pytest.raises(AssertionError, match=r"counted right, but on another shuffle \(seed=1, epoch=0\)"):
        check_padding_fractions(seed_1, lengths, 2000)


def test_kv_cache_bytes_names_the_factor_and_never_the_value():
    from tmlib.course import check_kv_cache_bytes
    sizes = dict(n_layers=80, n_kv_heads=8, d_head=128, bytes_per_number=2)
    right = 2 * 80 * 8 * 128 * 2
    assert check_kv_cache_bytes(right, **sizes).startswith("correct")
    for wrong, words in ((right // 2, "factor 2 for a key and a value is missing or the bytes per number is missing"),
                         (right // 80, "number of layers is missing"), (right * 8, "key/value heads is counted twice"),
                         (right + 1, "check each factor")):
        with pytest.raises(AssertionError) as err:
            check_kv_cache_bytes(wrong, **sizes)
        assert words in str(err.value) and f"{right:,}" not in str(err.value) and str(right) not in str(err.value)
    with pytest.raises(AssertionError, match="bits are counted instead of bytes"):
        check_kv_cache_bytes(right * 8, **sizes)
    with pytest.raises(AssertionError, match="positive whole number"):
        check_kv_cache_bytes(1.5, **sizes)
    # a grouped-query model counted with multi-head attention's key/value heads: named, never the head count due
    mha = 2 * 80 * 64 * 128 * 2
    with pytest.raises(AssertionError) as err:
        check_kv_cache_bytes(mha, n_query_heads=64, what="gqa_70b", **sizes)
    message = str(err.value)
    assert "key/value heads of multi-head attention (one per query head) instead of GQA's" in message
    assert "counted twice" not in message
    # 64 / 8 is also the factor of bits for bytes: both causes are named, neither as the only one
    assert "or bits counted instead of bytes" in message
    assert not any(str(v) in message for v in (right, f"{right:,}", 8))
    assert check_kv_cache_bytes(right, n_query_heads=64, **sizes).startswith("correct")


def test_tokens_in_memory_names_the_slip_and_never_the_counts():
    from tmlib.course import check_tokens_in_memory
    sizes = [327_680, 2_621_440]                      # Llama 2 70B's bytes per token, GQA and MHA
    right = {"tokens_gqa": 48_828, "tokens_mha": 6_103}
    assert check_tokens_in_memory(right, sizes, 16e9).startswith("correct: tokens_gqa, tokens_mha")
    assert check_tokens_in_memory({k: float(v) for k, v in right.items()}, sizes, 16e9).startswith("correct")
    with pytest.raises(TypeError, match="still"):
        check_tokens_in_memory({"tokens_gqa": ..., "tokens_mha": 6_103}, sizes, 16e9)
    cases = [({"tokens_gqa": 16e9 / 327_680, "tokens_mha": 6_103}, "tokens_gqa should be a whole number of tokens"),
             ({"tokens_gqa": 48_828, "tokens_mha": 6_104}, "tokens_mha is not right yet (too large): one token too many"),
             ({"tokens_gqa": 16 * 2 ** 30 // 327_680, "tokens_mha": 6_103}, "a gigabyte read as 2^30 bytes"),
             ({"tokens_gqa": 48_828, "tokens_mha": int(8 * 16e9 // 2_621_440)}, "bits and bytes mixed up"),
             ({"tokens_gqa": 48_000, "tokens_mha": 6_103}, "tokens_gqa is not right yet (too small)"),
             ({"tokens_gqa": 6_103, "tokens_mha": 48_828}, "the two counts swapped?")]
    for answers, words in cases:
        with pytest.raises(AssertionError) as err:
            check_tokens_in_memory(answers, sizes, 16e9)
        message = str(err.value)
        assert words in message, message
        assert "//" not in message and "round down" not in message and "16e9" not in message
        message = message.replace(repr(16e9 / 327_680), "")  # the student's own number may be shown
        assert not any(str(v) in message or f"{v:,}" in message for v in right.values()), message


def test_ffn_parameters_names_the_missing_biases_and_never_the_count():
    from tmlib.course import check_ffn_parameters
    from tmlib.model import PositionwiseFeedForward, SwiGLUFeedForward, count_parameters
    relu = count_parameters(PositionwiseFeedForward(512, 2048))
    glu = count_parameters(SwiGLUFeedForward(512, 1365, bias=True))
    assert check_ffn_parameters(relu, d_model=512, d_ff=2048, swiglu=False).startswith("correct")
    assert check_ffn_parameters(float(glu), d_model=512, d_ff=1365, swiglu=True).startswith("correct")
    with pytest.raises(TypeError, match="still"):
        check_ffn_parameters(..., d_model=512, d_ff=1365, swiglu=True)
    d, f = 512, 1365
    cases = [(3 * d * f, "the weight matrices alone"), (3 * d * f + f + d, "one bias vector is missing"),
             (glu + d, "one bias vector too many"), (2 * d * f + 2 * f + d, "one weight matrix is missing"),
             (3 * d * f + 2 * d + f, "a bias vector of the wrong length"),
             (2 * d * f + f + d, "counted like the ReLU FFN"), (glu + 7, "not off by the biases")]
    for wrong, words in cases:
        with pytest.raises(AssertionError) as err:
            check_ffn_parameters(wrong, d_model=d, d_ff=f, swiglu=True, what="glu_by_hand")
        message = str(err.value)
        assert words in message and message.startswith("glu_by_hand is not right yet"), message
        assert str(glu) not in message and f"{glu:,}" not in message
    with pytest.raises(AssertionError, match="the weight matrices alone"):
        check_ffn_parameters(2 * 512 * 2048, d_model=512, d_ff=2048, swiglu=False, what="relu_by_hand")
    with pytest.raises(AssertionError, match="positive whole number"):
        check_ffn_parameters(relu + 0.5, d_model=512, d_ff=2048, swiglu=False)


def test_cache_projections_rejects_off_by_one_counts_without_printing_the_values():
    from tmlib.course import check_cache_projections
    assert check_cache_projections(5050, 100, n_steps=100).startswith("correct")
    assert check_cache_projections(5050.0, 100.0, n_steps=100).startswith("correct")
    for without, with_, words in ((4950, 100, "one position left out at every step"),
                                  (10_000, 100, "as if every step projected all 100"), (10_100, 200, "keys and values"),
                                  (5050, 99, "the first step projects its token too"),
                                  (5050, 1, "every step still projects its own new token"),
                                  (5000, 100, "add up the positions")):
        with pytest.raises(AssertionError) as err:
            check_cache_projections(without, with_, n_steps=100)
        assert words in str(err.value) and "5050" not in str(err.value) and "5,050" not in str(err.value)
    with pytest.raises(AssertionError, match="positive whole number"):
        check_cache_projections(5050.5, 100, n_steps=100)
    with pytest.raises(AssertionError):  # the grader's n, not one the student sets
        check_cache_projections(5 * 10**8, 1, n_steps=100)


def test_view_shortcut_rejects_zeros_and_the_true_split_without_printing_the_tensor():
    import torch
    from tmlib.course import check_view_shortcut
    q = torch.arange(1.0, 13.0, dtype=torch.float64).reshape(1, 3, 4) * 7   # (batch, seq_len, d_model)
    assert check_view_shortcut(q.view(1, 2, 3, 2), q, 2).startswith("correct")
    with pytest.raises(AssertionError) as err:
        check_view_shortcut(torch.zeros(1, 2, 3, 2, dtype=torch.float64), q, 2)
    assert "Your answer is what" not in str(err.value)
    with pytest.raises(AssertionError, match="the true split") as err:
        check_view_shortcut(q.view(1, 3, 2, 2).transpose(1, 2), q, 2)
    assert all(f"{v:g}" not in str(err.value) for v in (14.0, 21.0, 28.0, 35.0))  # no entry of the tensor
    with pytest.raises(ValueError, match="shape"):
        check_view_shortcut(q, q, 2)


def test_view_rows_names_the_true_split_and_a_count_from_0_and_no_row():
    """Exercise 7.2: the token each row of the shortcut's "head 1" comes from. Wrong answers are told apart only by
    the two typical slips, never row by row."""
    import torch
    from tmlib.course import check_view_rows
    q = torch.arange(12.0, dtype=torch.float64).reshape(1, 3, 4)    # (batch, seq_len, d_model), 2 heads of d_k = 2
    assert check_view_rows([1, 1, 2], q, 2).startswith("correct")
    assert check_view_rows([1, 1, 2, 2], torch.zeros(1, 4, 8), 2).startswith("correct")  # d_k = 4: two rows a token
    for wrong, words in (([1, 2, 3], "true split"), ([0, 0, 1], "from 1"), ([1, 2, 2], "match each row")):
        with pytest.raises(AssertionError, match=words) as err:
            check_view_rows(wrong, q, 2)
        assert "index" not in str(err.value) and "[1, 1, 2]" not in str(err.value)
    with pytest.raises(ValueError, match="shape"):
        check_view_rows([1, 1], q, 2)


def test_merged_heads_names_each_slip_without_printing_the_tensor():
    """Exercise 7.1: the heads merged back with transpose and view; the merge without the transpose, the head and
    d_k axes exchanged and the heads in reverse order are named; no entry of the tensor is printed."""
    import torch
    from tmlib.course.module_checks import check_merged_heads
    q = torch.arange(1.0, 13.0, dtype=torch.float64).reshape(1, 3, 4) * 7   # (batch, seq_len, d_model)
    qh = q.view(1, 3, 2, 2).transpose(1, 2)                                 # (batch, n_heads, seq_len, d_k)
    assert check_merged_heads(qh.transpose(1, 2).contiguous().view(1, 3, 4), qh).startswith("correct")
    assert check_merged_heads(q.numpy(), qh).startswith("correct")
    for wrong, words in ((qh.contiguous().view(1, 3, 4), "without the transpose"),
                         (qh.permute(0, 2, 3, 1).reshape(1, 3, 4), "interleaved"),
                         (qh.flip(1).transpose(1, 2).reshape(1, 3, 4), "reverse order")):
        with pytest.raises(AssertionError, match=words) as err:
            check_merged_heads(wrong, qh)
        assert all(f"{v:g}" not in str(err.value) for v in (14.0, 21.0, 28.0, 35.0)), str(err.value)
    with pytest.raises(AssertionError) as err:
        check_merged_heads(torch.zeros(1, 3, 4), qh)
    assert "Your answer is what" not in str(err.value)
    with pytest.raises(ValueError, match="shape"):
        check_merged_heads(qh, qh)
    with pytest.raises(TypeError, match="still `...`"):
        check_merged_heads(..., qh)


def test_transposed_stride_names_heads_own_and_the_copys_stride():
    """Exercise 7.1: the stride of heads.transpose(1, 2) for heads (1, 2, 3, 2) laid out head by head is
    (12, 2, 6, 1); the stride of heads itself and that of the contiguous copy are named, nothing shows the answer."""
    import torch
    from tmlib.course.module_checks import check_transposed_stride
    heads = torch.arange(12.0).reshape(1, 2, 3, 2)
    assert check_transposed_stride(heads.transpose(1, 2).stride(), heads).startswith("correct")
    assert check_transposed_stride([12, 2, 6, 1], heads.numpy()).startswith("correct")
    for wrong, words in (((12, 6, 2, 1), "stride of heads itself"), ((12, 4, 2, 1), "contiguous"),
                         ((1, 2, 6, 12), "not the stride"), ((12, 2, 6), "4 whole numbers")):
        with pytest.raises(AssertionError, match=words) as err:
            check_transposed_stride(wrong, heads)
        assert "(12, 2, 6, 1)" not in str(err.value)
        assert wrong != (12, 6, 2, 1) or "swap" not in str(err.value)  # asks what a transpose does, no answer
    with pytest.raises(TypeError, match="still `...`"):
        check_transposed_stride(..., heads)


def test_padding_masks_accept_both_conventions_and_name_each_slip():
    """Exercise 7.4: nn.MultiheadAttention's key_padding_mask (boolean, True = padding) and the additive mask
    (0 and -inf, (batch, 1, 1, n_k)); each typical slip is named, and a message never spells out a mask."""
    import torch
    from tmlib.course.module_checks import check_padding_masks
    real = torch.tensor([[True, True, True], [True, True, False]])
    pad4 = ~real[:, None, None, :]
    additive = torch.zeros(2, 1, 1, 3, dtype=torch.float64).masked_fill(pad4, float("-inf"))
    assert check_padding_masks(~real, additive, (3, 2)).startswith("correct")
    assert check_padding_masks(~real, additive.float(), [3, 2]).startswith("correct")
    cases = [((real, additive), "our mask as it is"),
             (((~real).double(), additive), "dtype torch.float64|dtype float64"),
             ((torch.tensor([[False, True, False], [False, False, True]]), additive), "1 of 6 entries"),
             ((~real, torch.zeros(2, 1, 1, 3).masked_fill(pad4, 1.0)), "0 and 1"),
             ((~real, torch.zeros(2, 1, 1, 3).masked_fill(~pad4, float("-inf"))), "polarity"),
             ((~real, torch.zeros(2, 1, 1, 3).masked_fill(pad4, -1e9)), "finite negative"),
             ((~real, torch.zeros(2, 1, 1, 3).masked_fill(pad4, float("nan"))), "NaN"),
             ((~real, pad4), "dtype")]
    for (kpm, add), words in cases:
        with pytest.raises(AssertionError, match=words) as err:
            check_padding_masks(kpm, add, (3, 2))
        assert "[[" not in str(err.value) and "True, True" not in str(err.value), str(err.value)
    with pytest.raises(ValueError, match="shape"):
        check_padding_masks(~real, additive[:, 0, 0], (3, 2))
    with pytest.raises(TypeError):
        check_padding_masks(..., additive, (3, 2))


def test_layer_norm_build_it_names_each_slip_without_the_expected_value():
    """Exercise 3.2: the unbiased variance, eps outside the square root, both, no gamma and beta, the wrong axis
    and an ignored eps are each named; a message never holds the expected numbers."""
    from tmlib.course import check_layer_norm

    def ln(var_ddof=0, eps_inside=True, affine=True, axis=-1, use_eps=True, no_eps=False):
        def fn(x, gamma, beta, eps=1e-5):
            eps = 0.0 if no_eps else eps if use_eps else 1e-5
            x = np.asarray(x, dtype=float)
            centred = x - x.mean(axis=axis, keepdims=True)
            var = x.var(axis=axis, ddof=var_ddof, keepdims=True)
            normed = centred / (np.sqrt(var + eps) if eps_inside else np.sqrt(var) + eps)
            return gamma * normed + beta if affine else normed
        return fn

    assert check_layer_norm(ln()).startswith("correct:")
    assert check_layer_norm(lambda x, g, b, eps=1e-5: R.layer_norm(x, g, b, eps=eps)).startswith("correct:")
    for fn, symptom in [(ln(var_ddof=1), "unbiased variance"), (ln(eps_inside=False), "eps outside the square root"),
                        (ln(var_ddof=1, eps_inside=False), "unbiased standard deviation and eps outside"),
                        (ln(affine=False), "gamma and beta"), (ln(axis=0), "first axis"),
                        (ln(use_eps=False), "use the eps argument"),
                        # a reader's slip of r68 (reported as "36 of 36 far off" with no hint): now named
                        (ln(no_eps=True), "leaves eps out.*inside the square root"),
                        (ln(axis=1), "right on one sequence .* but not on the batch.*axis=-1")]:
        with pytest.raises(AssertionError, match=symptom) as err:
            check_layer_norm(fn)
        assert not re.search(r"\d\.\d{3}", str(err.value)), str(err.value)
    # written for one sequence only, failing on a batch (a reader's slip of r50): named, not numpy's broadcast error
    def transposed(x, gamma, beta, eps=1e-5):
        return gamma * ((x.T - x.mean(1)) / np.sqrt(x.var(1) + eps)).T + beta
    with pytest.raises(AssertionError, match=r"(?s)works on one sequence \(3, 6\) but fails on a batch \(2, 3, 6\)"
                                             r".*axis=-1"):
        check_layer_norm(transposed)
    with pytest.raises(TypeError, match="still"):
        check_layer_norm(lambda x, g, b, eps=1e-5: ...)


def test_decoder_layer_properties_name_each_slip_with_positions_from_1():
    """Exercise 5.5's properties: the cross-attention's queries and memory swapped (which raises no error only when
    the memory is as long as the target), a missing causal mask (position 1 counted as the chapter does), a layer
    that ignores the memory and one without the final LayerNorm."""
    from tmlib.course import check_decoder_layer_properties
    rng = np.random.default_rng(0)
    sa, ca = [tuple(rng.normal(size=(2, 4, 2)) for _ in range(3)) + (rng.normal(size=(4, 4)),) for _ in range(2)]
    ffn = (rng.normal(size=(4, 8)), rng.normal(size=8), rng.normal(size=(8, 4)), rng.normal(size=4))

    def layer(swap=False, mask=True, memory_used=True, last_norm=True, queries_from_y=False):
        def fn(y, memory, self_attn, cross_attn, ffn):
            causal = R.causal_mask(y.shape[0]) if mask else None
            a = R.layer_norm(y + R.multi_head_attention(y, y, y, *self_attn, mask=causal)[0])
            q, kv = (memory, a) if swap else (y if queries_from_y else a, memory)
            c = R.layer_norm(a + R.multi_head_attention(q, kv, kv, *cross_attn)[0]) if memory_used else a
            out = c + R.feed_forward(c, *ffn)
            return R.layer_norm(out) if last_norm else out
        return fn

    assert check_decoder_layer_properties(layer(), sa, ca, ffn).startswith("correct:")
    assert check_decoder_layer_properties(lambda *a: R.decoder_layer(*a), sa, ca, ffn).startswith("correct:")
    for fn, symptom in [(layer(swap=True), "swapped"), (layer(mask=False), r"position 1 \(row 0\)"),
                        (layer(memory_used=False), "does not change when the memory changes"),
                        (layer(last_norm=False), "not normalised"), (lambda *a: None, "returned None"),
                        (layer(queries_from_y=True), "queries are the layer's input y")]:  # a reader's slip of r48
        with pytest.raises(AssertionError, match=symptom):
            check_decoder_layer_properties(fn, sa, ca, ffn)
    # the two weight sets swapped, given the same set twice as in the chapter's worked example (a reader's wrong
    # answer that passed before)
    wrong_weights = lambda y, memory, self_attn, cross_attn, ffn: layer()(y, memory, cross_attn, self_attn, ffn)  # noqa: E731
    with pytest.raises(AssertionError, match="uses them the other way round"):
        check_decoder_layer_properties(wrong_weights, sa, sa, ffn)
    assert check_decoder_layer_properties(layer(), sa, sa, ffn).startswith("correct:")
    # one set used by both attentions (a reader's wrong answer of round r44, which passed)
    both_self = lambda y, memory, self_attn, cross_attn, ffn: layer()(y, memory, self_attn, self_attn, ffn)  # noqa: E731
    both_cross = lambda y, memory, self_attn, cross_attn, ffn: layer()(y, memory, cross_attn, cross_attn, ffn)  # noqa: E731
    for fn, sub_layer in ((both_self, "the cross-attention takes"), (both_cross, "the masked self-attention takes")):
        with pytest.raises(AssertionError, match=f"both attentions use the same set: {sub_layer}"):
            check_decoder_layer_properties(fn, sa, sa, ffn)
    # any other difference from the paper's layer that keeps the three properties (here W^O of the cross-attention
    # doubled) is caught by the last comparison
    doubled = lambda y, memory, self_attn, cross_attn, ffn: layer()(y, memory, self_attn,  # noqa: E731
                                                                     cross_attn[:3] + (2 * cross_attn[3],), ffn)
    with pytest.raises(AssertionError, match="differs from the paper's layer"):
        check_decoder_layer_properties(doubled, sa, ca, ffn)
    # a residual that adds the wrong stream is named where it is (r69: the feed-forward's residual adding a was
    # blamed on the attention weights)
    def residuals(r_cross, r_ffn):
        def fn(y, memory, self_attn, cross_attn, ffn):
            a = R.layer_norm(y + R.multi_head_attention(y, y, y, *self_attn, mask=R.causal_mask(len(y)))[0])
            c = R.layer_norm({"a": a, "y": y}[r_cross] + R.multi_head_attention(a, memory, memory, *cross_attn)[0])
            return R.layer_norm({"a": a, "c": c}[r_ffn] + R.feed_forward(c, *ffn))
        return fn

    for fn, words in ((residuals("a", "a"), "residual of the feed-forward sub-layer adds a: .* own input, c"),
                      (residuals("y", "c"), "residual of the cross-attention adds y: .* own input, a")):
        with pytest.raises(AssertionError, match=words) as err:
            check_decoder_layer_properties(fn, sa, ca, ffn)
        assert "attention weights" not in str(err.value)


def test_blocked_weights_checks_every_blocked_position():
    """Chapter 7's masked weights (causal + padding, two heads): every blocked position must be exactly 0; a mask that
    blocks one position too few (query 2 of sentence 1 sees key 3), which the page's former check of the padding key
    and query 1 alone let through, fails."""
    import torch
    from tmlib.course import check_blocked_weights
    from tmlib.model import causal_mask
    real = torch.tensor([[True, True, True], [True, True, False]])
    allowed = (causal_mask(3) & real[:, None, :])[:, None]                   # (2, 1, 3, 3)
    scores = torch.randn(2, 2, 3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    right = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1)
    assert check_blocked_weights(right, allowed).startswith("correct: all 14 blocked")
    too_few = allowed.clone()
    too_few[0, 0, 1, 2] = True                                                 # query 2 -> key 3 not blocked
    wrong = torch.softmax(scores.masked_fill(~too_few, float("-inf")), -1)
    assert (wrong[1, :, :, 2] == 0).all() and (wrong[:, :, 0, 1:] == 0).all()  # the former partial check passes
    with pytest.raises(AssertionError, match=r"2 of the 14 blocked positions .* index \(0, 0, 1, 2\)"):
        check_blocked_weights(wrong, allowed)
    with pytest.raises(ValueError, match="boolean"):
        check_blocked_weights(right, allowed.double())
    with pytest.raises(ValueError, match="3 axes"):  # would broadcast (batch) against (heads)
        check_blocked_weights(right, allowed[:, 0])
    with pytest.raises(ValueError, match="broadcast"):
        check_blocked_weights(right, allowed[:1, :, :2])


def test_additive_mask_names_each_slip_without_printing_the_mask():
    """Exercise 7.4: the additive mask alone (0 and -inf, (batch, 1, 1, n_k)); each typical slip is named."""
    import torch
    from tmlib.course import check_additive_mask
    real = torch.tensor([[True, True, True], [True, True, False]])
    pad4 = ~real[:, None, None, :]
    additive = torch.zeros(2, 1, 1, 3, dtype=torch.float64).masked_fill(pad4, float("-inf"))
    assert check_additive_mask(additive, (3, 2)).startswith("correct")
    assert check_additive_mask(additive.float(), [3, 2]).startswith("correct")
    assert check_additive_mask(additive, (3, 2), dtype="float64").startswith("correct")
    with pytest.raises(AssertionError, match="asks for float64"):
        check_additive_mask(additive.float(), (3, 2), dtype="float64")
    for add, words in ((torch.zeros(2, 1, 1, 3).masked_fill(pad4, 1.0), "0 and 1"),
                       (torch.zeros(2, 1, 1, 3).masked_fill(~pad4, float("-inf")), "polarity"),
                       (torch.zeros(2, 1, 1, 3).masked_fill(pad4, -1e9), "finite negative"),
                       (torch.zeros(2, 1, 1, 3).masked_fill(pad4, float("nan")), "NaN"),
                       (pad4, "dtype")):
        with pytest.raises(AssertionError, match=words) as err:
            check_additive_mask(add, (3, 2))
        assert "[[" not in str(err.value) and "True, True" not in str(err.value), str(err.value)
    with pytest.raises(ValueError, match="shape"):
        check_additive_mask(additive[:, 0, 0], (3, 2))
    with pytest.raises(TypeError):
        check_additive_mask(..., (3, 2))


def test_cache_numbers_is_two_vectors_per_position_and_names_each_slip():
    """Exercise 7.5: one layer's KV cache after n steps holds 2 · n · d_model numbers; never printed."""
    from tmlib.course import check_cache_numbers
    assert check_cache_numbers(102_400, n_steps=100, d_model=512).startswith("correct")
    assert check_cache_numbers(102_400.0, n_steps=100, d_model=512).startswith("correct")
    for answer, words in ((51_200, "keys only"), (512 * 100 * 101, "added up over the steps"),
                          (200, "one number per key"), (409_600, "4 bytes"), (204_800, "2 bytes"),
                          (100_000, "which factor is missing"), (1_600, "which factor is missing")):
        with pytest.raises(AssertionError, match=words) as err:
            check_cache_numbers(answer, n_steps=100, d_model=512)
        assert "102400" not in str(err.value) and "102,400" not in str(err.value)
        assert "times" not in str(err.value)  # no ratio to the right count: it would give the count away
    with pytest.raises(AssertionError, match="positive whole number"):
        check_cache_numbers(1.5, n_steps=100, d_model=512)
    with pytest.raises(TypeError):
        check_cache_numbers(..., n_steps=100, d_model=512)


def test_decoder_only_count_is_gpt2_small_and_names_each_part():
    import dataclasses

    import torch
    from tmlib.course import check_decoder_only_count
    from tmlib.model import PRESETS, DecoderOnly, count_parameters
    sizes = dict(d_model=768, n_layers=12, d_ff=3072, vocab=50_257, n_positions=1_024)
    gpt2 = 124_439_808  # GPT-2 small's parameters as loaded by Hugging Face's GPT2Model (tied, no output bias)
    config = dataclasses.replace(PRESETS["base"], d_model=768, n_heads=12, d_ff=3072, n_decoder_layers=12,
                                 vocab_size=50_257, norm_first=True, max_len=1_024)
    with torch.device("meta"):  # the library's decoder-only model: sinusoidal positions, an output bias
        built = count_parameters(DecoderOnly(config))
    assert built - 50_257 + 1_024 * 768 == gpt2
    assert check_decoder_only_count(gpt2, **sizes).startswith("correct")
    assert check_decoder_only_count(np.int64(gpt2), **sizes).startswith("correct")
    # the exercise asks for an integer (a reader of r68 had float(124439808) accepted): a float is rejected,
    # even the right value, and the message names the type, never the value
    for as_float in (float(gpt2), np.float64(gpt2)):
        with pytest.raises(AssertionError, match="should be an integer, got a float") as err:
            check_decoder_only_count(as_float, **sizes)
        assert "124,439,808" not in str(err.value) and "124439808" not in str(err.value)
    for wrong, words in ((gpt2 - 1_024 * 768, "position table"), (gpt2 - 2 * 768, "final LayerNorm"),
                         (gpt2 + 50_257 * 768, "separate output matrix"), (gpt2 + 50_257, "bias in the output"),
                         (gpt2 + 12 * (4 * (768 * 768 + 768) + 2 * 768), "cross-attention"),
                         (gpt2 + 12 * 2 * 768, "a LayerNorm per sub-layer"),
                         (gpt2 - 12 * 4 * 768, "attention projections' biases"), (gpt2 + 7, None)):
        with pytest.raises(AssertionError) as err:
            check_decoder_only_count(wrong, **sizes)
        assert (words is None and "Your answer is what" not in str(err.value)) or words in str(err.value)
        assert "124,439,808" not in str(err.value) and "124439808" not in str(err.value)
        assert "not the exact value (the answer must be exact)" in str(err.value)
        assert "allows no difference" not in str(err.value) and "exact equality" not in str(err.value)
    with pytest.raises(AssertionError, match="should be an integer"):
        check_decoder_only_count(1.5, **sizes)


def test_schedule_crossing_matches_the_curves_and_names_the_exponent():
    from tmlib.course import check_schedule_crossing
    steps = np.arange(201, 4000)
    ours, paper = R.noam_lr(steps, 256, 200, 0.3), R.noam_lr(steps, 256, 4000)
    first = int(steps[np.argmax(ours <= paper)])  # the first whole step where ours is not above the paper's
    assert first == 1793
    for answer in (first, first - 1, float(first), np.int64(first)):
        assert check_schedule_crossing(answer, warmup_steps=200, factor=0.3).startswith("correct")
    # the exact crossing point is not a step (a reader of r55 had 1792.6 accepted): the message says so, and only so
    with pytest.raises(AssertionError, match=r"within one step of the crossing, but it is not a step number") as err:
        check_schedule_crossing(1792.6, warmup_steps=200, factor=0.3)
    assert "1793" not in str(err.value) and "1792," not in str(err.value) and "1,79" not in str(err.value)
    with pytest.raises(AssertionError, match=r"not right yet(.|\n)*A step is a whole number"):  # off, and not whole
        check_schedule_crossing(1500.5, warmup_steps=200, factor=0.3)
    for wrong, words in ((4000, "factor left out"), (657, "exponent 3/2"), (2191, "square root"),
                         (2259, "d_model 512"), (first + 2, None)):
        with pytest.raises(AssertionError) as err:
            check_schedule_crossing(wrong, warmup_steps=200, factor=0.3)
        assert (words is None and "Your answer is what" not in str(err.value)) or words in str(err.value)
        assert "1792" not in str(err.value) and "1793" not in str(err.value)
    with pytest.raises(ValueError):
        check_schedule_crossing(100, warmup_steps=200, factor=2.0)


def test_lengths_per_batch_counts_distinct_padded_lengths():
    from tmlib.course import check_lengths_per_batch
    from tmlib.data import token_batches
    rng = np.random.default_rng(0)
    lengths = [(int(s), int(t)) for s, t in rng.integers(3, 30, size=(2_000, 2))]

    def per_batch(key):
        out = {}
        for chunk in (1, 10, 100, 10_000):
            batches = token_batches(lengths, 400, seed=0, epoch=0, chunk_size=chunk)
            out[chunk] = sum(len({key(*lengths[i]) for i in b}) for b in batches) / len(batches)
        return out

    right = per_batch(lambda s, t: max(s, t + 1))
    assert right[1] > right[10_000] >= 1
    assert check_lengths_per_batch(right, lengths, 400).startswith("correct")
    with pytest.raises(AssertionError, match="source lengths alone"):
        check_lengths_per_batch(per_batch(lambda s, t: s), lengths, 400)
    wrong = {**right, 100: right[100] + 0.5}
    with pytest.raises(AssertionError, match="at chunk_size 100:") as err:
        check_lengths_per_batch(wrong, lengths, 400)
    assert f"{right[100]:.2f}" not in str(err.value)
    with pytest.raises(AssertionError, match="keys"):
        check_lengths_per_batch({1: 1.0}, lengths, 400)


def test_case_sensitive_sentences_finds_case_errors_only():
    from tmlib.course import check_case_sensitive_sentences
    hyps = ["A man in a Blue shirt.", "a dog runs in the park.", "Two men play.", "A Girl sings."]
    refs = ["A man in a blue shirt.", "A dog runs in the park.", "Two men play.", "A girl sings a song."]
    assert check_case_sensitive_sentences([0, 1, 3], hyps, refs).startswith("correct")
    assert check_case_sensitive_sentences(np.array([3, 1, 0]), hyps, refs).startswith("correct")
    for wrong, words in (([1, 2, 4], "count from 1"), ([0, 1], "missing"), ([0, 1, 2, 3], "score the same"),
                         (3, "not their number")):
        with pytest.raises(AssertionError, match=words):
            check_case_sensitive_sentences(wrong, hyps, refs)


def test_layer_norm_result_names_another_epsilon_without_the_expected_value():
    """Exercise 3.5 asks for no epsilon: an answer that kept the default 1e-5 (or used another) is named as such,
    without the misleading "far off" entries and without the expected value; other mistakes are not."""
    x = E.MHA_EXAMPLE_2.q
    y = -2.0 * x + 1.0
    expected = R.layer_norm(y, eps=0.0)
    for kept, shown in ((1e-5, "eps = 1e-05"), (1e-6, "eps = 1e-06")):
        with pytest.raises(AssertionError, match="Computed with a different epsilon") as err:
            check_layer_norm_result(R.layer_norm(y, eps=kept), y, "LN(-2 x + 1)", eps=0.0)
        text = str(err.value)
        assert shown in text and "asks for eps = 0" in text and "far off" not in text, text
        assert not any(f"{v:.4f}" in text for v in expected.ravel() if abs(v) > 1e-3), text
    with pytest.raises(AssertionError, match="eps = 0,"):  # the other way round: no epsilon where 1e-5 is asked
        check_layer_norm_result(R.layer_norm(x, eps=0.0).astype(np.float32), x)
    g, b = np.array([1.0, 2.0, 0.0, 1.0]), np.array([0.0, 1.0, 3.0, -1.0])
    with pytest.raises(AssertionError, match="different epsilon"):
        check_layer_norm_result(R.layer_norm(x, g, b, eps=0.0), x, gamma=g, beta=b)
    centred = x - x.mean(axis=-1, keepdims=True)
    unbiased = centred / x.std(axis=-1, ddof=1, keepdims=True)
    for wrong, of in ((unbiased, x), (R.layer_norm(x, eps=0.0), y)):  # the sign of a < 0 forgotten
        with pytest.raises(AssertionError) as err:
            check_layer_norm_result(wrong, of, eps=0.0)
        assert "epsilon" not in str(err.value)


def _given_run_train_step(train_step):
    """Exercise 8.4's given run_train_step around ``train_step``: once per (src, tgt_in, tgt_out) in batches, on a
    fresh tiny model, with Adam or plain SGD; the losses, the weights after the last step, the schedule's steps."""
    import torch

    from tmlib.model import make_model
    from tmlib.training import make_optimizer, make_scheduler
    from tmlib.utils import seed_everything

    def run_train_step(seed, batches, plain_sgd=False):
        seed_everything(seed)
        model = make_model("tiny", 13, dropout=0.0)
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0) if plain_sgd else make_optimizer(model)
        scheduler = make_scheduler(optimizer, model.d_model, warmup_steps=10)
        losses = [train_step(model, optimizer, scheduler, *batch) for batch in batches]
        return losses, {n: p.detach().clone() for n, p in model.named_parameters()}, scheduler.last_epoch

    return run_train_step


def _run_train_step(pad=True, smoothing=True, clip=True, schedule_first=False, clear="before", schedule_steps=1,
                    clip_first=False):
    """Exercise 8.4's given run_train_step around a train_step written out, with one of the usual slips."""
    import torch

    def train_step(model, optimizer, scheduler, src, tgt_in, tgt_out, pad_id=0, label_smoothing=0.1, max_norm=1.0):
        logits = model(src, tgt_in)
        log_p = torch.log_softmax(logits, dim=-1)  # the smoothed loss by hand, not through translation_loss
        per_token = -(1 - label_smoothing) * log_p.gather(-1, tgt_out[..., None])[..., 0] - \
            label_smoothing * log_p.mean(-1)
        if not smoothing:
            per_token = -log_p.gather(-1, tgt_out[..., None])[..., 0]
        if smoothing in ("exclusive", "annotated kl"):  # by hand, in another convention (chapter 6's table)
            spread = label_smoothing / (log_p.shape[-1] - (1 if smoothing == "exclusive" else 2))
            target = torch.full_like(log_p, spread).scatter_(-1, tgt_out[..., None], 1 - label_smoothing)
            if smoothing == "annotated kl":  # the Annotated Transformer's LabelSmoothing: no mass on pad, KLDivLoss
                target[..., pad_id] = 0.0
                per_token = (torch.xlogy(target, target) - target * log_p).sum(-1)
            else:
                per_token = -(target * log_p).sum(-1)
        real = tgt_out != pad_id if pad else torch.ones_like(tgt_out, dtype=torch.bool)
        loss = per_token[real].mean()
        if clear == "before":
            optimizer.zero_grad()
        if clip_first:  # the slip of a reader of r54: clipping before backward clips nothing
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        loss.backward()
        if clear == "between":
            optimizer.zero_grad()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        for _ in range(schedule_steps if schedule_first else 0):
            scheduler.step()
        optimizer.step()
        for _ in range(0 if schedule_first else schedule_steps):
            scheduler.step()
        if clear == "after":
            optimizer.zero_grad()
        return loss.item()

    return _given_run_train_step(train_step)


def test_train_step_compares_with_a_reference_step_and_names_each_slip():
    import warnings

    from tmlib.course import check_train_step
    from tmlib.course.training_checks import _sgd_steps, _train_step_batches

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyTorch's warning about a schedule stepped first
        for right in (_run_train_step(), _run_train_step(clear="after")):  # zero_grad after the step is right too
            assert check_train_step(right).startswith("correct")
        ref_loss = _sgd_steps(13, 0, _train_step_batches(13, 5)[:1])[0][0]
        for slips, words in ((dict(pad=False), "padded positions"), (dict(smoothing=False), "no label smoothing"),
                             (dict(smoothing="exclusive"), r"exclusive convention \(the authors' code\): "
                                                           r"ε_ls/\(V - 1\).*ε_ls/V each"),
                             (dict(smoothing="annotated kl"), r"KL divergence.*Annotated Transformer's convention"),
                             (dict(clip=False), "not clipped"), (dict(schedule_first=True), "next step's learning"),
                             (dict(schedule_steps=0), "took 0 steps"), (dict(schedule_steps=2), "took 4 steps"),
                             (dict(clear="none"), "first step's gradients were added"),
                             (dict(clear="between"), "did not move")):
            with pytest.raises(AssertionError, match=words) as err:
                check_train_step(_run_train_step(**slips))
            assert f"{ref_loss:.3f}" not in str(err.value) and f"{ref_loss:.2f}" not in str(err.value)
        # clipped before backward: the same weights as no clipping, so one message names both slips
        with pytest.raises(AssertionError, match=r"not clipped: is clip_grad_norm_ missing, or called before "
                                                 r"loss\.backward\(\)(.|\n)*clipped by value \(clip_grad_value_\)"):
            check_train_step(_run_train_step(clip=False, clip_first=True))
        # each value clipped (a reader's slip in r56): the same weights as no clipping here, told apart by the
        # function that train_step calls
        with pytest.raises(AssertionError, match=r"clip the global norm \(clip_grad_norm_\), not each value"):
            check_train_step(_value_clipping_run_train_step())


def _value_clipping_run_train_step():
    """Exercise 8.4's given run_train_step around a train_step that clips each gradient entry (clip_grad_value_)."""
    import torch

    from tmlib.training import translation_loss

    def train_step(model, optimizer, scheduler, src, tgt_in, tgt_out, pad_id=0, label_smoothing=0.1, max_norm=1.0):
        loss = translation_loss(model(src, tgt_in), tgt_out, pad_id=pad_id, label_smoothing=label_smoothing)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)
        optimizer.step()
        scheduler.step()
        return loss.item()

    return _given_run_train_step(train_step)


def _my_mha_runner(mistake=None):
    """Exercise 7.3's ``run_my_mha`` around a module written out, with one typical mistake switched on; "stub" is the
    module as handed out (``__init__`` and ``forward`` still ``...``)."""
    import torch
    from torch import nn

    class Module(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            if mistake == "stub":
                return
            self.n_heads, self.d_k = n_heads, d_model // n_heads
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=mistake != "no bias")
                                                      for _ in range(4))

        def forward(self, query, key, value, attn_mask=None):
            if mistake == "stub":
                return None
            def split(x):  # noqa: E306
                if mistake in ("split view", "view both ways"):
                    return x.view(x.shape[0], self.n_heads, x.shape[1], self.d_k)
                return x.view(x.shape[0], x.shape[1], self.n_heads, self.d_k).transpose(1, 2)
            q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
            divisor = {"no scale": 1.0, "sqrt d_model": query.shape[-1] ** 0.5}.get(mistake, self.d_k ** 0.5)
            scores = q @ k.transpose(-2, -1) / divisor
            if attn_mask is not None:
                if mistake not in ("no mask", "zero after"):
                    scores = scores.masked_fill(attn_mask if mistake == "mask" else ~attn_mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            if mistake == "zero after" and attn_mask is not None:  # chapter 5's wrong way to mask
                weights = weights.masked_fill(~attn_mask, 0.0)
            heads = weights @ v
            if mistake in ("merge view", "view both ways"):
                return self.w_o(heads.reshape(query.shape[0], query.shape[1], -1))
            return self.w_o(heads.transpose(1, 2).reshape(query.shape[0], query.shape[1], -1))

    def run_my_mha(n_heads, state, query, key, value, attn_mask=None):
        module = Module(query.shape[-1], n_heads).to(query.dtype)
        module.load_state_dict(state)
        with torch.no_grad():
            return module(query, key, value, attn_mask=attn_mask)
    return run_my_mha


def test_my_mha_says_not_written_for_the_stub_and_names_mistakes_without_the_expected_value():
    """Exercise 7.3: the stub is "not written yet" (never "correct" followed by load_state_dict's RuntimeError);
    the typical mistakes are named; no message holds a number of the expected outputs."""
    from tmlib.course import check_my_mha
    assert check_my_mha(_my_mha_runner()).startswith("correct")
    with pytest.raises(TypeError, match="not written yet") as err:
        check_my_mha(_my_mha_runner("stub"))
    assert "correct" not in str(err.value) and "RuntimeError" not in str(err.value)
    expected = R.multi_head_attention(E.MHA_EXAMPLE_2.q, E.MHA_EXAMPLE_2.k, E.MHA_EXAMPLE_2.v, E.MHA_EXAMPLE_2.w_q,
                                      E.MHA_EXAMPLE_2.w_k, E.MHA_EXAMPLE_2.w_v, E.MHA_EXAMPLE_2.w_o)[0]
    for mistake, words in (("no scale", "√d_k"), ("mask", "wrong way round"), ("no bias", "with biases"),
                           ("no mask", "the mask was not applied"), ("sqrt d_model", "√d_model instead"),
                           ("split view", "splits the heads with view alone, without the transpose"),
                           ("merge view", "merges the heads without the transpose"),
                           ("view both ways", "without either transpose"),  # the last three: a reader of r48
                           ("zero after", "to 0 after the softmax: the weights of a query then no longer add up")):
        with pytest.raises(AssertionError, match=words) as err:
            check_my_mha(_my_mha_runner(mistake))
        text = str(err.value)
        assert not any(f"{v:.4f}" in text for v in expected.ravel()), text
        assert not re.search(r"-?\d+\.\d{3,}", text), text


# chapters 1, 4, 5 and 6 (round 36): answers given to the decimals the exercise asks, stubs, sub-layers named
def test_score_spread_accepts_three_decimals_and_names_each_mistake():
    from tmlib.course import check_score_spread

    for ok in (0.125, 0.1254, 1 / 8):
        assert check_score_spread(ok, 64, "std_dk").startswith("correct:")
    for wrong, symptom in [(8.0, "unscaled"), (1.0, "√d_k"), (1 / 64, "variance"), (0.13, "just outside")]:
        with pytest.raises(AssertionError, match=symptom) as err:
            check_score_spread(wrong, 64, "std_dk")
        assert "0.125" not in str(err.value)
    with pytest.raises(TypeError, match="still `...`"):
        check_score_spread(..., 64, "std_dk")


def test_encoding_row_accepts_pe3_to_four_decimals_and_names_each_mistake():
    from tmlib.course import check_encoding_row

    exact = [np.sin(3), np.cos(3), np.sin(0.03), np.cos(0.03)]
    for ok in (exact, [0.1411, -0.99, 0.03, 0.9996], [0.1411, -0.9900, 0.0300, 0.9996]):
        assert check_encoding_row(ok, 3, 4, "answer").startswith("correct:")
    for wrong, symptom in [
            ([np.sin(np.radians(3)), np.cos(np.radians(3)), np.sin(np.radians(0.03)), np.cos(np.radians(0.03))],
             "degrees"),
            ([np.sin(3), np.cos(3), np.sin(3e-4), np.cos(3e-4)], "exponent doubled"),
            ([np.sin(2), np.cos(2), np.sin(0.02), np.cos(0.02)], "positions one lower give: positions count from 0"),
            ([np.cos(3), np.sin(3), np.cos(0.03), np.sin(0.03)], "sin and cos swapped")]:
        with pytest.raises(AssertionError, match=symptom):
            check_encoding_row(wrong, 3, 4, "answer")
    with pytest.raises(AssertionError, match="1 of 4 entries is off") as err:  # one entry off: no shared factor
        check_encoding_row([0.1411, -0.99, 0.03, 0.9990], 3, 4, "answer")
    assert "same factor" not in str(err.value) and "0.9995" not in str(err.value)
    for stub in (..., [..., 0.0, 0.0, 1.0]):
        with pytest.raises(TypeError, match="still `...`"):
            check_encoding_row(stub, 3, 4, "answer")


def test_rope_scores_recomputed_inside_the_check_and_each_mistake_named():
    from tmlib.course import check_rope_scores

    rng = np.random.default_rng(3)
    q, k = rng.normal(size=8), rng.normal(size=8)
    pairs = [(0, 3), (10, 13), (50, 53)]
    rot = lambda pos: R.relative_position_matrix(pos, 8)  # noqa: E731
    right = [(q @ rot(m)) @ (k @ rot(n)) for m, n in pairs]  # rows: q M_m and κ M_n
    assert all(line.startswith("correct:") for line in check_rope_scores(right, pairs=pairs).splitlines())
    for wrong, symptom in [([float(q @ k)] * 3, "no rotation"),
                           ([(q @ rot(m)) @ (k @ rot(m)) for m, n in pairs], "both rotated by the same"),
                           ([(q @ rot(m)) @ (k @ rot(n).T) for m, n in pairs], "transpose"),
                           ([(q @ rot(n)) @ (k @ rot(m)) for m, n in pairs], "two positions swapped"),
                           # the column-vector convention, M_m q and M_n κ, is both rotations transposed
                           ([(rot(m) @ q) @ (rot(n) @ k) for m, n in pairs], "both rotations transposed"),
                           ([q @ (k @ rot(n)) for m, n in pairs], "only the key rotated"),
                           ([(q @ rot(m)) @ k for m, n in pairs], "only the query rotated"),
                           ([0.0, 0.0, 0.0], "not right yet")]:
        with pytest.raises(AssertionError, match=symptom) as err:
            check_rope_scores(wrong, pairs=pairs)
        assert f"{right[0]:.4f}" not in str(err.value)
    with pytest.raises(TypeError, match="still `...`"):
        check_rope_scores(..., pairs=pairs)


def test_wavelength_pair_names_a_dimension_index_and_never_gives_the_pair():
    """Exercise 4.3: the pair index i is recomputed inside the check; a dimension's index (2i or 2i + 1, a reader's
    slip of r50), a neighbouring pair and a value out of range are each named; the right pair is not printed."""
    from tmlib.course import check_wavelength_pair

    wavelength = 2 * np.pi * 10000.0 ** (2 * np.arange(32) / 64)
    best = int(np.argmin(np.abs(wavelength - 100)))
    assert check_wavelength_pair(best).startswith("correct:")
    assert check_wavelength_pair(np.int64(best)).startswith("correct:")
    for wrong, symptom in [(2 * best, "dimension's index"), (2 * best + 1, "dimension's index"),
                           (best - 1, "another pair's is closer"), (best + 1, "another pair's is closer"),
                           (32, "runs from 0 to 31")]:
        with pytest.raises(AssertionError, match=symptom) as err:
            check_wavelength_pair(wrong)
        assert f"pair {best}" not in str(err.value) and f"{wavelength[best]:.1f}" not in str(err.value)
    for wrong in (..., None, float(best), True):
        with pytest.raises(TypeError):
            check_wavelength_pair(wrong)


def test_one_entry_off_is_never_every_entry_off_by_a_factor():
    from tmlib.course import check_close

    expected = np.array([0.14112, -0.98999, 0.029996, 0.99955])
    with pytest.raises(AssertionError) as err:
        check_close(expected + np.array([0, 0, 0, 6e-5]), expected, "v", atol=5e-5)
    assert "same factor" not in str(err.value) and "same amount" not in str(err.value)
    with pytest.raises(AssertionError, match="same factor"):
        check_close(2 * expected, expected, "v")


def test_decoder_layer_build_it_names_the_sub_layer():
    from tmlib.course import check_decoder_layer

    mha, ln, ff = R.multi_head_attention, R.layer_norm, R.feed_forward
    rng = np.random.default_rng(5)
    y, memory = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    sa, ca = [tuple(rng.normal(size=(2, 4, 2)) for _ in range(3)) + (rng.normal(size=(4, 4)),) for _ in range(2)]
    ffn = (rng.normal(size=(4, 8)), rng.normal(size=8), rng.normal(size=(8, 4)), rng.normal(size=4))

    def layer(mistake=None):
        def fn(y, memory, self_attn, cross_attn, ffn):
            n = y.shape[0]
            s = mha(y, y, y, *self_attn, mask=None if mistake == "no mask" else R.causal_mask(n))[0]
            a = ln(s) if mistake == "sa residual" else ln(y + s)
            c_out = mha(y if mistake == "queries y" else a, memory, memory, *cross_attn)[0]
            c = ln(c_out) if mistake == "ca residual" else ln(a + (2 * c_out if mistake == "ca twice" else c_out))
            f = ff(a if mistake == "ffn on a" else c, *ffn)
            return ln(f) if mistake == "ffn residual" else ln(c + f)
        return fn

    assert check_decoder_layer(layer(), y, memory, sa, ca, ffn).startswith("correct:")
    assert check_decoder_layer(R.decoder_layer, y, memory, sa, ca, ffn).startswith("correct:")
    for mistake, symptom in [("sa residual", "masked self-attention sub-layer: the residual"),
                             ("no mask", "masked self-attention sub-layer \\(found with the later"),
                             ("queries y", "cross-attention sub-layer: its queries come from y"),
                             ("ca residual", "cross-attention sub-layer: the residual connection is missing"),
                             ("ca twice", "cross-attention sub-layer \\(found .*before it match"),
                             ("ffn on a", "feed-forward sub-layer: the network is fed a"),
                             ("ffn residual", "feed-forward sub-layer: the residual connection is missing")]:
        with pytest.raises(AssertionError, match=symptom):
            check_decoder_layer(layer(mistake), y, memory, sa, ca, ffn)
    with pytest.raises(TypeError, match="is None"):
        check_decoder_layer(lambda *args: None, y, memory, sa, ca, ffn)


def test_chapter_8_checks_answer_a_stub_and_name_each_slip():
    """Exercises 8.2, 8.3 and 8.5: the checks answer a `...` stub with "still `...`" (or "not written yet"), call the
    student's function on every input before any assertion, and name the likely slip, never the expected value."""
    import torch

    from tmlib.course import check_greedy_decode, check_preln_stages, check_vocab_ranges
    from tmlib.decoding import greedy_decode
    from tmlib.model import make_model
    from tmlib.utils import seed_everything

    ranges = {"base": (39_692, 41_640), "big": (35_262, 36_236)}
    assert check_vocab_ranges(ranges).startswith("correct")
    with pytest.raises(TypeError, match="still `...`"):
        check_vocab_ranges(...)
    for wrong, symptom in [({"base": (39_692, 41_640)}, "keys"), ({**ranges, "big": (35_262, 36_237)}, "largest"),
                           ({**ranges, "base": (39_693, 41_640)}, "one entry below")]:
        with pytest.raises(AssertionError, match=symptom) as err:
            check_vocab_ranges(wrong)
        assert "39,692" not in str(err.value) and "36,236" not in str(err.value)

    src = torch.tensor([[5, 6, 7, 8, 9, 10], [5, 11, 12, 0, 0, 0]])
    seed_everything(0)
    pre = make_model("tiny", 13, norm_first=True).eval()
    with torch.no_grad():
        def run(real):
            x = pre.positional(pre.src_embed(src))
            for layer in pre.encoder.layers:
                x = layer(x, real_keys=real)
            return x
        last, unmasked = run(pre.real_tokens(src)), run(None)
        after = pre.encoder.norm(last)
    assert check_preln_stages(last, after, src).startswith("correct")
    with pytest.raises(TypeError, match="still `...`"):
        check_preln_stages(..., after, src)
    with pytest.raises(AssertionError, match="padding mask"):
        check_preln_stages(unmasked, pre.encoder.norm(unmasked), src)
    with pytest.raises(AssertionError, match="already normalised"):
        check_preln_stages(after, after, src)
    with torch.no_grad():
        x0 = pre.positional(pre.src_embed(src))
        first_only = pre.encoder.layers[0](x0, real_keys=pre.real_tokens(src))
        last_on_input = pre.encoder.layers[-1](x0, real_keys=pre.real_tokens(src))
    for wrong, words in ((first_only, "first layer only"), (last_on_input, "previous layer's output")):
        with pytest.raises(AssertionError, match=words):
            check_preln_stages(wrong, pre.encoder.norm(wrong), src)
    with pytest.raises(AssertionError, match="equals last_layer"):
        check_preln_stages(last, last, src)
    fresh = {"_ih": ["", "after_norm = torch.nn.functional.layer_norm(last_layer, (32,))", "x = 1"]}
    with pytest.raises(AssertionError, match="not from pre.encoder.norm") as err:
        check_preln_stages(last, after, src, namespace=fresh)
    assert "tensor" not in str(err.value)
    own = {"_ih": ["", "with torch.no_grad():\n    after_norm = pre.encoder.norm(last_layer)"]}
    assert check_preln_stages(last, after, src, namespace=own).startswith("correct")

    models = {"copier": make_model("tiny", 13).eval(), "early": make_model("tiny", 13).eval()}
    calls = []

    def decode_with(which, src, max_len, first=False):
        calls.append(which)
        out = greedy_decode(models[which], src, bos_id=1, eos_id=2, max_len=max_len)
        return [s[:1] * len(s) for s in out] if first else out

    assert check_greedy_decode(decode_with, models).startswith("correct")
    calls.clear()
    with pytest.raises(AssertionError, match="differs from greedy decoding"):
        check_greedy_decode(lambda w, s, m: decode_with(w, s, m, first=True) if w == "early" else
                            [[-1] * len(x) for x in decode_with(w, s, m)], models)
    assert len(calls) == 4  # every case called before the first assertion
    # a wrong token that also ends the sentence early is named as a wrong token, not as a length (reader r42)
    with pytest.raises(AssertionError, match="differs from greedy decoding at 1 of its first 1 tokens"):
        check_greedy_decode(lambda w, s, m: [[(x[0] + 1) % 13] if x else x for x in decode_with(w, s, m)], models)
    with pytest.raises(AssertionError, match="sentence lengths .* are not right: sentence 1 starts with BOS"):
        check_greedy_decode(lambda w, s, m: [[1] + x for x in decode_with(w, s, m)], models)  # BOS kept, named
    namespace = {}
    exec("def my_greedy_decode(model, src, bos_id, eos_id, max_len):\n    ...\n\n\n"
         "def decode_with(which, src, max_len):\n    return my_greedy_decode(None, src, 1, 2, max_len)\n", namespace)
    with pytest.raises(TypeError, match="my_greedy_decode is not written yet"):
        check_greedy_decode(namespace["decode_with"], models)


def test_chapter_11_entropy_checks_name_the_variable_and_the_slip():
    """Exercise 11.1: one check per answer, each naming its variable; a `...` stub gets "still `...`"."""
    from tmlib.course import check_ln2_row, check_max_entropy, check_row_entropy
    row = [0.7, 0.1, 0.1, 0.1]
    h = -(0.7 * np.log(0.7) + 0.3 * np.log(0.1))
    assert check_row_entropy(round(h, 4), row).startswith("correct")
    assert check_max_entropy(np.log(4), 4).startswith("correct")
    for ok in ([0.5, 0.5, 0.0, 0.0], np.array([0, 0.5, 0, 0.5])):
        assert check_ln2_row(ok).startswith("correct")
    for check, args, name in ((check_row_entropy, (row,), "entropy"), (check_max_entropy, (4,), "max_entropy"),
                              (check_ln2_row, (), "ln2_row")):
        with pytest.raises(TypeError, match=re.escape(f"{name}: still `...`")):
            check(..., *args)
    for wrong, words in ((h / np.log(2), "in bits"), (-h, "minus sign"), (1.0, r"^entropy is not right")):
        with pytest.raises(AssertionError, match=words) as err:
            check_row_entropy(wrong, row)
        assert f"{h:.4f}" not in str(err.value)
    for wrong, words in ((2.0, "in bits"), (4, "number of keys")):
        with pytest.raises(AssertionError, match=words):
            check_max_entropy(wrong, 4)
    for wrong, words in (([0.25] * 4, "entropy of ln2_row"), ([0.5, 0.5, 0.5, 0.0], "sum of ln2_row"),
                         ([0.75, 0.75, -0.5, 0.0], "never negative")):
        with pytest.raises(AssertionError, match=words):
            check_ln2_row(wrong)
    with pytest.raises(ValueError, match="4 weights"):
        check_ln2_row([0.5, 0.5])


def test_chapter_11_greedy_pruning_check_runs_the_algorithm_itself():
    """Exercise 11.3: the check sorts the heads, switches them off and compares n_ok and curve; a failure says
    too many, too few or which entry of curve is off."""
    import pandas as pd
    import torch

    from tmlib import analysis as I
    from tmlib.course import check_greedy_pruning
    from tmlib.data.batch import Batch
    from tmlib.model import make_model
    from tmlib.utils import seed_everything

    seed_everything(0)
    model = make_model("tiny", 13, dropout=0.0).eval()
    g = torch.Generator().manual_seed(1)
    src, tgt = torch.randint(3, 13, (4, 6), generator=g), torch.randint(3, 13, (4, 5), generator=g)
    batch = Batch(src=src, tgt_in=torch.cat([torch.ones(4, 1, dtype=torch.long), tgt], 1),
                  tgt_out=torch.cat([tgt, torch.full((4, 1), 2)], 1), n_tokens=24)
    heads = I.all_heads(model)
    single = pd.DataFrame([dict(kind=h.kind, layer=h.layer, head=h.head, delta_nll=float(-i))
                           for i, h in enumerate(heads)])  # the cheapest first: the last head listed
    order = heads[::-1]
    start = I.nll_per_token(model, [batch])
    curve = [start]
    for k in range(1, len(order) + 1):
        with I.ablate_heads(model, order[:k]):
            curve.append(I.nll_per_token(model, [batch]))
    rises = np.array(curve) - start
    limit = float(np.sort(rises)[len(rises) // 2]) + 1e-6  # some rises above, some below
    n_ok = int(np.argmax(rises > limit)) - 1
    assert 0 <= n_ok < len(order)
    right = curve[:n_ok + 2]
    assert check_greedy_pruning(n_ok, right, model, [batch], single, max_rise=limit).startswith("correct")
    with pytest.raises(TypeError, match=re.escape("n_ok: still `...`")):
        check_greedy_pruning(..., right, model, [batch], single, max_rise=limit)
    with pytest.raises(TypeError, match=re.escape("curve: still `...`")):
        check_greedy_pruning(n_ok, ..., model, [batch], single, max_rise=limit)
    with pytest.raises(AssertionError, match="too large"):
        check_greedy_pruning(n_ok + 1, curve[:n_ok + 3], model, [batch], single, max_rise=limit)
    with pytest.raises(AssertionError, match=r"curve\[1\]"):
        check_greedy_pruning(n_ok, [start, start + 1.0] + right[2:], model, [batch], single, max_rise=limit)
    with pytest.raises(AssertionError, match="curve has"):
        check_greedy_pruning(n_ok, right[:-1], model, [batch], single, max_rise=limit)
    costliest = [start]  # the heads switched off costliest first (a reader's slip of r51): the order is named
    for k in range(1, 3):
        with I.ablate_heads(model, heads[:k]):
            costliest.append(I.nll_per_token(model, [batch]))
    with pytest.raises(AssertionError, match="cheapest .* first"):
        check_greedy_pruning(0, costliest[:2], model, [batch], single, max_rise=limit)
    if n_ok > 0 and rises[n_ok] <= limit and rises[n_ok - 1] <= limit:
        with pytest.raises(AssertionError, match="too small"):
            check_greedy_pruning(n_ok - 1, right, model, [batch], single, max_rise=limit)


def test_chapter_9_checks_answer_a_stub_with_still():
    """Exercises 9.3 and 9.4: the stub's `...` gets the course's "still `...`" message, as 9.1 and 9.2 do."""
    from tmlib.course import check_case_sensitive_sentences, check_lengths_per_batch, check_padding_fractions
    lengths = [(3, 4), (5, 2), (7, 7)]
    for check, args in ((check_padding_fractions, (lengths, 2000)), (check_lengths_per_batch, (lengths, 2000)),
                        (check_case_sensitive_sentences, (["A b."], ["a b."]))):
        with pytest.raises(TypeError, match=re.escape("still `...`")):
            check(..., *args)


def _sentence_882():
    """Exercise 11.4's test sentence 882: the German keys, the decoder's queries, the reference alignment (the
    German word of each token produced) and the hard aligner's matrix built from it."""
    german = "Mehrere Frauen führen vor einem Gebäude einen Tanz auf .".split()
    queries = ["<bos>", *"Several women are performing a dance in front of a building .".split()]
    reads = ["Mehrere", "Frauen", "führen", "führen", "einen", "Tanz", "vor", "vor", "vor", "einem", "Gebäude", ".",
             "."]
    perfect = np.zeros((13, 10))
    for i, word in enumerate(reads):
        perfect[i, german.index(word)] = 1.0
    return german, queries, reads, perfect


def test_chapter_11_perfect_alignment_check_names_the_row_never_the_answer():
    """Exercise 11.4: a hard aligner on test sentence 882; the check rebuilds the matrix from the given alignment,
    names the first wrong row (a missing shift by one too, without naming the shift: that is the exercise's point,
    a reader of r51 found), and compares the diagonal share to 4 decimals."""
    from tmlib.course import check_perfect_alignment
    german, queries, reads, perfect = _sentence_882()
    assert check_perfect_alignment(perfect, 6 / 13, german, queries).startswith("correct")
    with pytest.raises(TypeError, match=re.escape("perfect: still `...`")):
        check_perfect_alignment(..., ..., german, queries)
    late = np.zeros_like(perfect)
    late[1:], late[0, 0] = perfect[:-1], 1.0
    with pytest.raises(AssertionError, match="row 1, the query at 'Several'") as err:  # named by its first wrong row
        check_perfect_alignment(late, 6 / 13, german, queries)
    assert "late" not in str(err.value) and "shift" not in str(err.value)
    swapped = perfect.copy()
    swapped[[4, 5]] = swapped[[5, 4]]
    with pytest.raises(AssertionError, match="row 4, the query at 'performing'") as err:
        check_perfect_alignment(swapped, 6 / 13, german, queries)
    assert "1 more rows differ" in str(err.value)
    for wrong in (0.5, 1.0, 7 / 13):
        with pytest.raises(AssertionError, match="diagonal") as err:
            check_perfect_alignment(perfect, wrong, german, queries)
        assert "0.4615" not in str(err.value) and "6/13" not in str(err.value)
    with pytest.raises(ValueError, match="knows no reference"):  # a sentence without a reference cannot be checked
        check_perfect_alignment(perfect[:, :9], 6 / 13, german[:9], queries)


def test_chapter_11_perfect_alignment_check_takes_a_one_element_diagonal():
    """Exercise 11.4: ``attention_statistics(...)["diagonal"]`` of one head is a shape-(1,) tensor; the check takes
    it, a 0-d tensor and one-element arrays by their value (a reader of r61 was refused the right value), and still
    refuses a wrong one or a diagonal of several elements."""
    import torch

    from tmlib.course import check_perfect_alignment
    german, queries, reads, perfect = _sentence_882()
    for right in (torch.tensor([6 / 13], dtype=torch.float64), torch.tensor(6 / 13), np.array([6 / 13]),
                  np.array(6 / 13), [6 / 13]):
        assert check_perfect_alignment(perfect, right, german, queries).startswith("correct")
    with pytest.raises(AssertionError, match="diagonal") as err:
        check_perfect_alignment(perfect, torch.tensor([7 / 13]), german, queries)
    assert "0.4615" not in str(err.value)
    with pytest.raises((AssertionError, ValueError)):
        check_perfect_alignment(perfect, np.array([6 / 13, 6 / 13]), german, queries)
    # a wrong reads, and the matrix and diagonal built from it, fail against the sentence's reference (a reader of
    # r62 saw "correct" for the diagonal 7/13 of a matrix built from a wrong reads)
    wrong_reads = ["Mehrere", "Frauen", "führen", "führen", "einen", "Tanz", "vor", "vor", "einem", "einem",
                   "Gebäude", ".", "."]
    own = np.zeros((13, 10))
    for i, word in enumerate(wrong_reads):
        own[i, german.index(word)] = 1.0
    with pytest.raises(AssertionError, match="row 8"):
        check_perfect_alignment(own, 7 / 13, german, queries)


def test_alibi_slopes_check_hints_at_head_order_and_never_prints_the_slopes():
    """Exercise 13.3: the right slopes are accepted; the same numbers sorted or with the extra heads first get the
    head-order hint; `...` gets "still `...`"; wrong slopes fail; no message holds a slope."""
    from tmlib.course import check_alibi_slopes

    right = [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    assert check_alibi_slopes(right, 6).startswith("correct")
    with pytest.raises(TypeError, match="still `...`"):
        check_alibi_slopes(..., 6)
    for wrong in (sorted(right), right[4:] + right[:4]):
        with pytest.raises(AssertionError, match="4-head slopes first") as err:
            check_alibi_slopes(wrong, 6)
        assert "0.25" not in str(err.value) and "0.125" not in str(err.value)
    with pytest.raises(AssertionError) as err:
        check_alibi_slopes([2.0 ** -k for k in range(1, 7)], 6)
    assert "another order" not in str(err.value)
    # the power-of-two formula 2^(-8h/n) applied directly to n = 6 is named, without a slope
    with pytest.raises(AssertionError, match="formula for a power of two") as err:
        check_alibi_slopes([2.0 ** (-8 * h / 6) for h in range(1, 7)], 6)
    assert "0.25" not in str(err.value) and "0.39" not in str(err.value)


def test_efficiency_checks_say_which_way_without_the_answer():
    """Exercises 12.1, 12.2 and 12.4: too few or too many pairs skipped; too small or too large against the measured
    value, never by what factor; a hint given per side shows only on its side."""
    from tmlib.course import check_against_measured, check_skipped_pairs
    assert check_skipped_pairs(15, 23, 4).startswith("correct")  # 6 blocks: 6 * 5 / 2 pairs above the diagonal
    for answer, words in ((14, "too few"), (16, "too many"), (15.5, "whole number"), ("15", "whole number")):
        with pytest.raises(AssertionError, match=words) as err:
            check_skipped_pairs(answer, 23, 4)
        assert "15" not in str(err.value).replace(repr(answer), ""), str(err.value)
    with pytest.raises(TypeError):
        check_skipped_pairs(..., 23, 4)
    assert check_against_measured(96, 96, "bytes").startswith("correct")
    for answer, side in ((48, "too small"), (192, "too large")):
        with pytest.raises(AssertionError, match=side) as err:
            check_against_measured(answer, 96, "bytes")
        assert "times" not in str(err.value) and "0.5" not in str(err.value) and "96" not in str(err.value)
    with pytest.raises(AssertionError, match="too small.*\n  count every score$"):
        check_against_measured(48, 96, "FLOPs", hint="count every score")
    per_side = {"too small": "(the causal mask removes no products)", "too large": "counted over which tokens?"}
    with pytest.raises(AssertionError, match=r"too small.*\n  \(the causal mask removes no products\)$"):
        check_against_measured(95, 96, "FLOPs", hint=per_side)
    with pytest.raises(AssertionError, match="too large") as err:
        check_against_measured(101, 96, "FLOPs", hint=per_side)
    assert "causal mask" not in str(err.value) and "counted over which tokens?" in str(err.value)


def test_training_flops_names_a_forward_pass_alone_and_half_the_masked_scores():
    """Exercise 12.4 against PyTorch's FLOP counter: the course's count passes; a forward pass alone is told the
    backward pass, and only the masked self-attention counted for half its scores is told the causal mask removes
    no products (a reader of r55 got that remark for a forward pass alone); other slips get the side's question."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from tmlib.course import check_training_flops
    from tmlib.model import make_model

    def by_hand(d, n_layers, f, vocab, S, T, *, passes=3, scores=4, output=2):  # the solution, or a slip
        encoder = n_layers * (8 * S * d * d + 4 * S * S * d + 4 * S * d * f)
        cross = 4 * T * d * d + 4 * S * d * d + 4 * T * S * d
        decoder = n_layers * (8 * T * d * d + scores * T * T * d + cross + 4 * T * d * f)
        return passes * (encoder + decoder + output * T * d * vocab) / T

    sizes = dict(d=32, n_layers=2, f=48, vocab=40, S=7, T=5)
    model = make_model("tiny", 40, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=48,
                       pad_id=0, dropout=0.0).eval()
    model.keep_attention(True)
    g = torch.Generator().manual_seed(0)
    with FlopCounterMode(display=False) as counted, torch.no_grad():
        model(torch.randint(4, 40, (1, 7), generator=g), torch.randint(4, 40, (1, 5), generator=g))
    forward = counted.get_total_flops()
    check = lambda answer: check_training_flops(answer, forward, d_model=32, n_layers=2, tgt_len=5)  # noqa: E731
    assert check(by_hand(*sizes.values())).startswith("correct")
    expected = 3 * forward / 5
    for slip, words, unwanted in (
            (dict(passes=1), "too small(.|\n)*forward pass plus the backward pass: count both$", "causal mask"),
            (dict(scores=2), "too small(.|\n)*the causal mask removes no products", "backward"),
            (dict(scores=3), "too small(.|\n)*the causal mask removes no products", "backward"),
            (dict(output=0), "too small(.|\n)*which term is missing\\?$", "causal mask"),
            (dict(output=4), "too large(.|\n)*counted twice", "causal mask")):
        with pytest.raises(AssertionError, match=words) as err:
            check(by_hand(*sizes.values(), **slip))
        message = str(err.value)
        assert unwanted not in message and f"{expected:g}" not in message and str(int(expected)) not in message


def _raises(check, *args) -> str:
    with pytest.raises(AssertionError) as err:
        check(*args)
    return str(err.value)


def test_key_shifts_keep_q_dot_u_inside_and_name_each_slip():
    """Exercise 1.5: the check takes only the two answers; no message shows how far a score moves (q_i·u)."""
    from tmlib.course import check_key_shifts
    ex = E.ATTENTION_EXAMPLE_1
    u, one = np.array([3.0, -1.0]), np.array([[3.0, -1.0], [0, 0], [0, 0]])
    same = R.scaled_dot_product_attention(ex.q, ex.k + u, ex.v)[1]
    other = R.scaled_dot_product_attention(ex.q, ex.k + one, ex.v)[1]
    assert check_key_shifts(same, other).count("correct:") == 2
    due = ex.q @ u / np.sqrt(2)  # how far key 1's score moves, row by row: never shown
    cases = [(same, "a shift shared by all keys gives"),
             (R.scaled_dot_product_attention(ex.q, ex.k + one[[1, 0, 2]], ex.v)[1], "keys 2 and 3 should keep"),
             (R.scaled_dot_product_attention(ex.q + one, ex.k, ex.v)[1], "keys 2 and 3 should keep"),
             (R.scaled_dot_product_attention(ex.q, ex.k + 1.5 * one, ex.v)[1], "not right yet"),
             (R.softmax(ex.q @ (ex.k + one).T), "without the division by √d_k")]  # unscaled: not "another key"
    for answer, words in cases:
        message = _raises(check_key_shifts, same, answer)
        assert words in message, message
        assert "Q @" not in message and "q_i" not in message and "·u" not in message
        assert not any(f"{v:.4f}" in message or f"{v:.3g}" in message for v in np.r_[due, other.ravel()]), message
    with pytest.raises(TypeError, match="still"):
        check_key_shifts(same, ...)
    message = _raises(check_key_shifts, R.softmax(ex.q @ ex.k.T), other)  # w_shifted unscaled
    assert "without the division by √d_k" in message, message


def test_one_head_takes_only_the_answer_and_names_the_slips_without_the_reason():
    """Exercise 2.5: the big matrices stay inside the check; the two-head output is named but not why it differs
    (the exercise asks that in words); the scale of a small head and a missing W^O are named."""
    from tmlib.course import check_one_head
    m = E.MHA_EXAMPLE_2
    big = [np.concatenate(list(w), axis=1)[None] for w in (m.w_q, m.w_k, m.w_v)]
    one = R.multi_head_attention(m.q, m.k, m.v, *big, m.w_o)[0]
    two = R.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o)[0]
    assert check_one_head(one).startswith("correct:")
    message = _raises(check_one_head, two)
    assert "not right yet" in message and "the two heads give" in message
    assert "softmax" not in message and "add" not in message
    assert not any(f"{v:.4f}" in message for v in one.ravel())
    root2 = R.multi_head_attention(m.q, m.k, m.v, big[0] * np.sqrt(2.0), big[1], big[2], m.w_o)[0]
    assert "√2" in _raises(check_one_head, root2)
    no_wo = R.multi_head_attention(m.q, m.k, m.v, *big, np.eye(4))[0]
    assert "without the product with W^O" in _raises(check_one_head, no_wo)
    with pytest.raises(ValueError, match="shape"):
        check_one_head(one[:, :2])


def test_relu_bias_takes_only_the_answer_and_names_each_slip():
    """Exercise 3.4: the new bias and the recipe stay inside the check."""
    from tmlib.course import check_relu_bias
    f = E.FFN_EXAMPLE
    b1 = np.array([-2.0, 0.0])
    assert check_relu_bias(R.feed_forward(f.x, f.w1, b1, f.w2, f.b2)).startswith("correct:")
    for answer, words in [((f.x @ f.w1 + b1) @ f.w2 + f.b2, "no ReLU between the two linear maps"),
                          (np.maximum(0.0, (f.x @ f.w1 + b1) @ f.w2 + f.b2), "one after the second layer"),  # r69
                          (R.feed_forward(f.x, f.w1, f.b1, f.w2, f.b2), "old bias b1 = (0, 1)"),
                          (R.feed_forward(f.x, f.w1, -b1, f.w2, f.b2), "not right yet")]:
        message = _raises(check_relu_bias, answer)
        assert words in message and "[[3" not in message, message


def test_ln_of_affine_rejects_the_wrong_sign_and_an_unnormalised_answer_without_the_rule():
    """Exercise 3.5: the student's function gets LN(x) only, on an x it did not choose, for both signs of a."""
    from tmlib.course import check_ln_of_affine
    assert check_ln_of_affine(lambda ln_x, a, b: np.sign(a) * ln_x).startswith("correct:")
    message = _raises(check_ln_of_affine, lambda ln_x, a, b: ln_x)  # the sign of a forgotten
    assert "(a < 0)" in message and "sign" not in message and "-LN" not in message, message
    message = _raises(check_ln_of_affine, lambda ln_x, a, b: a * ln_x + b)
    assert "mean 0 and variance 1" in message and "means up to 7" in message, message
    fixed = R.layer_norm(E.MHA_EXAMPLE_2.q, eps=0.0)  # reads a notebook variable instead of its argument
    assert "compute from the argument ln_x" in _raises(check_ln_of_affine, lambda ln_x, a, b: -fixed)
    # normalising a ln_x + b again gives the right rows on normalised input (a reader's loophole of r51): named
    message = _raises(check_ln_of_affine, lambda ln_x, a, b: R.layer_norm(a * np.asarray(ln_x) + b, eps=0.0))
    assert "normalises again" in message and "sign" not in message, message


def test_smoothed_loss_check_names_a_sum_over_the_positions():
    """Exercise 6.5: a loss summed over the real positions is named as such (it once read as a target row that
    does not sum to 1); the mean passes."""
    from tmlib import ref as R
    from tmlib.course.recipe_checks import check_smoothed_loss

    def smoothed(logits, targets, label_smoothing, pad_id, reduce=np.mean):
        z, y = np.asarray(logits, dtype=float), np.asarray(targets)
        t = R.label_smoothing_targets(y, z.shape[-1], label_smoothing, "uniform")
        per_position = -(t * (z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))
                              - z.max(-1, keepdims=True))).sum(-1)
        return float(reduce(per_position[y != pad_id]))

    assert check_smoothed_loss(smoothed).startswith("correct")
    with pytest.raises(AssertionError, match="a sum over the real positions, not their mean"):
        check_smoothed_loss(lambda *a: smoothed(*a, reduce=np.sum))


def test_smoothed_loss_check_rejects_a_clipped_log_probability():
    """Exercise 6.5: a max-shifted softmax followed by log(clip(p, 1e-12)) is right on ordinary logits but caps
    every log-probability at about -27.6 (a reader's answer of r68: 5.44 against PyTorch's 9.87 on logits 200
    apart); it is now rejected and the slip named, without the loss; the log-softmax answer still passes."""
    from tmlib import ref as R
    from tmlib.course.recipe_checks import _smoothed, check_smoothed_loss

    def clipped(logits, targets, label_smoothing, pad_id):
        z, y = np.asarray(logits, dtype=float), np.asarray(targets)
        t = R.label_smoothing_targets(y, z.shape[-1], label_smoothing, "uniform")
        e = np.exp(z - z.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
        return float((-(t * np.log(np.clip(p, 1e-12, None))).sum(-1))[y != pad_id].mean())

    assert abs(clipped([[0.0, -200.0, 5.0, 1.0]], [0], 0.1, -1) - 5.44) < 0.01  # the reader's numbers
    assert abs(_smoothed([[0.0, -200.0, 5.0, 1.0]], [0], 0.1, -1, "uniform") - 9.87) < 0.01
    with pytest.raises(AssertionError, match="log of a clipped .*log-softmax") as err:
        check_smoothed_loss(clipped)
    assert not any(ch.isdigit() for ch in str(err.value).split("\n")[0].replace("log-softmax", ""))

    def log_softmax(logits, targets, label_smoothing, pad_id):
        z, y = np.asarray(logits, dtype=float), np.asarray(targets)
        t = R.label_smoothing_targets(y, z.shape[-1], label_smoothing, "uniform")
        m = z.max(-1, keepdims=True)
        lp = z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))
        return float((-(t * lp).sum(-1))[y != pad_id].mean())

    assert check_smoothed_loss(log_softmax).startswith("correct")


def test_lrate_check_asks_for_one_number():
    """Exercise 6.4: a rate returned as a one-element array gets "one number, a float", not NumPy's TypeError."""
    from tmlib import ref as R
    from tmlib.course.recipe_checks import check_lrate

    assert check_lrate(lambda s, d, w: float(R.noam_lr(s, d, w))).startswith("correct")
    with pytest.raises(AssertionError, match="must return one number, a float"):
        check_lrate(lambda s, d, w: np.array([R.noam_lr(s, d, w)]))
    with pytest.raises(AssertionError, match="still rising at step 150, the last step checked"):
        check_lrate(lambda s, d, w: float(R.noam_lr(s, d, 4000)))  # the paper's warm-up hard-coded
    with pytest.raises(AssertionError, match="peaks at step 51"):
        check_lrate(lambda s, d, w: float(R.noam_lr(s - 1, d, w)) if s > 1 else 1e-9)  # one step late
    with pytest.raises(AssertionError, match="right only to float32 precision"):
        check_lrate(lambda s, d, w: float(np.float32(R.noam_lr(s, d, w))))  # computed in float32


def test_half_step_check_says_too_early_or_too_late():
    """Exercise 6.1: the first step after the peak at which the base model's rate has fallen to half its peak:
    4 x 4000 = 16000, exactly; a step before it is too early, one after it too late, each slip is named (half the
    peak on the way up, a 1/s decay, the steps counted from the peak, sqrt 2 times the peak's step, a rounded peak),
    a float or a bool is refused, and no message shows the answer."""
    from tmlib.course import check_half_step
    assert check_half_step(16000).startswith("correct")
    assert check_half_step(np.int64(16000)).startswith("correct")
    assert check_half_step(8000, warmup=2000).startswith("correct")
    for wrong, words in ((2000, "on the way up"), (4000, "the peak itself"), (8000, "falls as 1/s"),
                         (12000, "counted from the start"), (5657, "sqrt\\(2\\)"), (15999, "too early: .*rounded peak"),
                         (16001, "too late: .*rounded peak"), (3000, "too early"), (15000, "too early"),
                         (64000, "too late")):
        with pytest.raises(AssertionError, match=words) as err:
            check_half_step(wrong)
        assert "16000" not in str(err.value) and "16,000" not in str(err.value)
    for wrong in (16000.0, True, 0):
        with pytest.raises(AssertionError, match="whole step number"):
            check_half_step(wrong)
    with pytest.raises(TypeError, match="still `...`"):
        check_half_step(...)


def test_descend_check_names_each_slip():
    """Exercise 6.2: gradient descent on the smoothed loss; the one-hot target, an ascent, too few steps, z_opt not
    from the run and the exclusive convention's gap are named; the right answer gets the two "correct" lines."""
    import math

    from tmlib import ref as R
    from tmlib.course import check_descend, check_descend_steps
    t10 = R.label_smoothing_targets([0], 10, 0.1, "uniform")[0]

    def make(target, sign=-1.0):
        def descend(lr, steps):
            z = np.zeros(10)
            for _ in range(steps):
                z = z + sign * lr * (R.softmax(z) - target)
            return z
        return descend

    right, gap = make(t10), math.log(0.91 / 0.01)
    assert check_descend(right, right(1.0, 5000), gap).splitlines()[1] == \
        "correct: descend descends and z_opt is at the minimum"
    for args, words in (((make(np.eye(10)[0]), np.zeros(10), gap), "one-hot target"),
                        ((make(t10, +1.0), np.zeros(10), gap), "climbs"),
                        ((make(R.label_smoothing_targets([0], 10, 0.1, "exclusive")[0]), np.zeros(10), gap),
                         "exclusive smoothed target"),
                        ((right, right(1.0, 20), gap), "not what your descend"),
                        ((right, np.log(t10), gap), "not what your descend"),
                        ((right, right(1.0, 5000), math.log(0.9 / (0.1 / 9))), "too small")):
        with pytest.raises(AssertionError, match=words) as err:
            check_descend(*args)
        assert "4.51" not in str(err.value)
    with pytest.raises(TypeError, match="still `...`"):
        check_descend(right, ..., gap)
    assert check_descend_steps(right) is None
    with pytest.raises(AssertionError, match="climbs"):
        check_descend_steps(make(t10, +1.0))


def test_smoothing_mass_names_each_slip_and_shows_no_value():
    """Exercise 6.3: the exclusive target of a wrong token, the true class's multiple of it, and the uniform
    convention's change as a fraction of it; each typical slip named, no expected value printed."""
    from tmlib.course import check_smoothing_mass
    pw, uniform = 0.1 / 36_999, 0.1 / 37_000
    right = (pw, 0.9 / pw, uniform / pw - 1)
    assert check_smoothing_mass(*right).count("correct:") == 3
    cases = [((uniform, *right[1:]), "uniform convention gives"), ((0.1, *right[1:]), "together"),
             ((pw, 1 / pw, right[2]), "1 - ε_ls, not 1"), ((pw, pw / 0.9, right[2]), "upside down"),
             ((*right[:2], -right[2]), "without its sign"), ((*right[:2], uniform - pw), "not as a fraction"),
             ((*right[:2], -1 / 36_999), "not right yet")]
    for answer, words in cases:
        with pytest.raises(AssertionError, match=words) as err:
            check_smoothing_mass(*answer)
        assert not any(f"{v:.3g}" in str(err.value) for v in right), str(err.value)
    with pytest.raises(TypeError, match="still"):
        check_smoothing_mass(pw, ..., right[2])


def test_positional_encoding_build_it_names_each_slip_and_no_entry():
    """Exercise 4.1: my_positional_encoding(n, d_model) on two sizes; each typical slip (a reader of r49 got only
    "entries are off" for three of them) is named, and no entry of the encoding is printed."""
    from tmlib.course import check_positional_encoding

    def encoding(even, odd=None, halves=False, shift=0, base=10000.0, power=-1.0):
        def fn(n, d):
            pos, j = np.arange(n)[:, None] + shift, np.arange(0, d, 2)
            a = pos * base ** (power * even(j) / d)
            b = a if odd is None else pos * base ** (power * odd(j) / d)
            if halves:
                return np.concatenate([np.sin(a), np.cos(b)], axis=1)
            out = np.empty((n, d))
            out[:, 0::2], out[:, 1::2] = np.sin(a), np.cos(b)
            return out
        return fn

    same = lambda j: j  # noqa: E731
    assert check_positional_encoding(encoding(same)).count("correct") == 2
    assert check_positional_encoding(R.positional_encoding).count("correct") == 2
    cases = [(encoding(same, halves=True), "two halves"), (encoding(same, shift=1), "counted from 1"),
             (encoding(lambda j: 2 * j), "exponent doubled"), (encoding(lambda j: j / 2), "exponent halved"),
             (encoding(same, power=1.0), "positive exponent"), (encoding(same, base=1000.0), "another base"),
             (encoding(same, odd=lambda j: j + 1), "frequency per dimension"),
             (lambda n, d: R.positional_encoding(n, d)[:, np.r_[1:d:2, 0:d:2]].reshape(n, 2, d // 2)
              .transpose(0, 2, 1).reshape(n, d), "swapped"),
             (lambda n, d: None, "returned None")]
    expected = R.positional_encoding(3, 4)
    for fn, words in cases:
        with pytest.raises(AssertionError, match=words) as err:
            check_positional_encoding(fn)
        assert not any(f"{v:.4f}" in str(err.value) for v in expected.ravel() if abs(v) not in (0.0, 1.0))


def test_tiled_reads_accept_block_reads_and_name_the_whole_matrix_and_a_prefix():
    """Exercise 12.2: a reader of r49 passed the check with one full softmax per query over its prefix of keys;
    the keys and values must be read one block at a time (at most block_size rows a read)."""
    from tmlib.course import check_tiled_reads

    def tiled(q, k, v, b):  # reads k and v block by block (the skipping and the online softmax do not matter here)
        n = q.shape[0]
        out = np.zeros((n, v.shape[1]))
        for q0 in range(0, n, b):
            for k0 in range(0, q0 + b, b):
                out[q0:q0 + b] += (q[q0:q0 + b] @ k[k0:k0 + b].T) @ v[k0:k0 + b]
        return out, 0

    def prefix(q, k, v, b):
        return np.stack([v[:i + 1].sum(0) + 0 * (q[i] @ k[:i + 1].T).sum() for i in range(q.shape[0])]), 0

    assert check_tiled_reads(tiled).startswith("correct")
    assert check_tiled_reads(tiled, n=31, block_size=8, seed=18).startswith("correct")
    with pytest.raises(AssertionError, match="reads 23 rows of `k` at once"):
        check_tiled_reads(prefix)
    with pytest.raises(AssertionError, match="never reads rows of `k`"):
        check_tiled_reads(lambda q, k, v, b: ((q @ k.T) @ v, 0))
    with pytest.raises(AssertionError, match="never reads rows of `v`"):
        check_tiled_reads(lambda q, k, v, b: (sum(q @ k[i:i + 1].T for i in range(len(q))) * np.asarray(v), 0))

    def no_skip(q, k, v, b):  # counts the future pairs as skipped but computes them (a reader's loophole of r51)
        n = q.shape[0]
        out = np.zeros((n, v.shape[1]))
        for q0 in range(0, n, b):
            for k0 in range(0, n, b):
                out[q0:q0 + b] += (q[q0:q0 + b] @ k[k0:k0 + b].T) @ v[k0:k0 + b]
        return out, 15
    with pytest.raises(AssertionError, match="reads 36 blocks of `k` for 6 blocks of queries .* only 21 pairs"):
        check_tiled_reads(no_skip)

    def stand_in(q, k, v, b):  # the autograder's replay of a sandboxed function: it sees plain arrays only
        return (q @ k.T) @ v, 0
    stand_in.__tm_references__ = []
    assert "not by the autograder" in check_tiled_reads(stand_in)


def test_rope_scores_with_only_the_key_rotated_pass_m_0_and_name_the_slip_after():
    """Exercise 4.4 (a reader of r54): the key rotated, the query not, is right at m = 0 (M_0 = I) only; the later
    pairs say that the score depends on n alone, and no line shows a right score."""
    from tmlib.course import check_rope_scores

    rng = np.random.default_rng(3)
    q, k = rng.normal(size=8), rng.normal(size=8)
    pairs = [(0, 3), (10, 13), (50, 53)]
    rot = lambda pos: R.relative_position_matrix(pos, 8)  # noqa: E731
    with pytest.raises(AssertionError) as err:
        check_rope_scores([q @ (k @ rot(n)) for m, n in pairs], pairs=pairs)
    text = str(err.value)
    assert "(10, 13)" in text and "depends on n alone" in text and "rotate the query by its own M_m" in text, text
    assert not any(f"{(q @ rot(m)) @ (k @ rot(n)):.3f}" in text for m, n in pairs), text


def _check_cell(notebook: str, exercise: str) -> str:
    """The source of the public check cell of ``exercise`` in ``notebooks/<notebook>.ipynb``."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / f"{notebook}.ipynb").read_text())
    return next("".join(c["source"]) for c in nb["cells"]
                if c["metadata"].get("assignment", {}).get("exercise") == exercise
                and c["metadata"]["assignment"].get("check") == "public")


def _run_check_cell(notebook: str, exercise: str, **names) -> str:
    """Run that check cell with the student's ``names``: its printout, or ``AssertionError: message``."""
    import contextlib
    import io

    from tmlib.analysis import flops as FL
    from tmlib.course import check_close, check_rows_sum_to_one, check_shape
    from tmlib.course.checks import require_answered
    from tmlib.course.exercise_checks import check_swapped_heads, check_temperature

    namespace = dict(np=np, R=R, FL=FL, check_close=check_close, check_shape=check_shape,
                     check_rows_sum_to_one=check_rows_sum_to_one, require_answered=require_answered,
                     check_temperature=check_temperature, check_swapped_heads=check_swapped_heads, **names)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(_check_cell(notebook, exercise), namespace)  # noqa: S102: the course's own check cell
    except AssertionError as err:
        return f"{out.getvalue()}AssertionError: {err}"
    return out.getvalue()


def test_temperature_check_cell_names_the_scores_multiplied_by_tau():
    """Exercise 1.6 (a reader of r54): w_q3 from scores * τ is named, as the scores divided twice already were; the
    right answer still passes with its three lines. The cell calls the library check (a reader of r66: the check
    written out in the cell showed the expression due)."""
    scores = E.ATTENTION_EXAMPLE_1.q @ E.ATTENTION_EXAMPLE_1.k.T  # (3, 3): example 1's scores
    taus = np.geomspace(0.05, 20, 60)
    assert "scores[2]" not in _check_cell("01_attention_by_hand", "ex-01-temperature")
    right = _run_check_cell("01_attention_by_hand", "ex-01-temperature", scores=scores,
                            w_q3=np.array([R.softmax(scores[2] / t) for t in taus]))
    assert "AssertionError" not in right and right.count("correct:") == 3, right
    times = _run_check_cell("01_attention_by_hand", "ex-01-temperature", scores=scores,
                            w_q3=np.array([R.softmax(scores[2] * t) for t in taus]))
    assert "AssertionError: w_q3 is what the scores multiplied by τ give" in times, times
    twice = _run_check_cell("01_attention_by_hand", "ex-01-temperature", scores=scores,
                            w_q3=np.array([R.softmax(scores[2] / np.sqrt(2) / t) for t in taus]))
    assert "did you divide the already-scaled scores?" in twice and "multiplied" not in twice, twice


def test_permute_check_cell_names_the_blocks_in_the_wrong_order():
    """Exercise 2.3 (readers of r54 and r67): W^O's column blocks exchanged (the same matrix as its rows 1 and 2
    exchanged) is named as the heads' W^O blocks in the wrong order, never as a column swap or with which rows;
    the right W^O still passes both tests."""
    m = E.MHA_EXAMPLE_2
    output = R.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o)[0]
    assert "w_o[:, [2, 3, 0, 1]]" not in _check_cell("02_multi_head_attention", "ex-02-permute")
    right = _run_check_cell("02_multi_head_attention", "ex-02-permute", m=m, output=output,
                            w_o_swapped=np.concatenate([m.w_o[2:], m.w_o[:2]]))
    assert "AssertionError" not in right and right.count("correct:") == 2, right
    columns = _run_check_cell("02_multi_head_attention", "ex-02-permute", m=m, output=output,
                              w_o_swapped=np.concatenate([m.w_o[:, 2:], m.w_o[:, :2]], axis=1))
    assert "AssertionError: w_o_swapped is not right yet: this W^O gives the output of the heads' W^O blocks in the " \
           "wrong order" in columns and "columns" not in columns, columns
    assert "rows 3 and 4" not in columns and "m.w_o[2:]" not in columns, columns
    unchanged = _run_check_cell("02_multi_head_attention", "ex-02-permute", m=m, output=output, w_o_swapped=m.w_o)
    assert "AssertionError" in unchanged and "columns" not in unchanged, unchanged


def test_layer_crossover_check_cell_gives_no_direction():
    """Exercise 12.5 (a reader of r54): a wrong length is "not the crossover", never too small or too large, so that
    the lengths cannot be found by trial; the right ones (4d and 6d at d = 512) pass."""
    right = _run_check_cell("12_efficiency", "ex-12-layer-crossover", n_a=4 * 512, n_b=6 * 512)
    assert "AssertionError" not in right and right.count("correct:") == 2, right
    for n_a, n_b in ((2 * 512, 6 * 512), (8 * 512, 6 * 512), (4 * 512, 2 * 512), (4 * 512, 12 * 512)):
        text = _run_check_cell("12_efficiency", "ex-12-layer-crossover", n_a=n_a, n_b=n_b)
        assert "n is not the crossover" in text, text
        assert not re.search(r"too (small|large)|\b(less|more) than\b", text), text


def test_scaling_out_checks_accept_the_right_answers_and_name_each_slip():
    """The scaling-out page's exercises D.1 to D.3: the tokens of a step with accumulation, the first step that a
    missing factor N_p shows through clipping, and the bytes of a naive and a ring all-reduce; never the values."""
    from tmlib.course import check_accumulate, check_all_reduce_bytes, check_first_unclipped_step

    d1 = dict(n_gpus=3, max_tokens=4000, target=25000)
    assert check_accumulate(2, 24_000, **d1).startswith("correct")
    for (a, t), slip in [((6, 24_000), "one GPU's batches"), ((3, 36_000), "more tokens than the target"),
                         ((1, 12_000), "a larger accumulate"), ((2, 25_000), "that is the target"),
                         ((2, 8_000), "the GPUs are left out"), ((2, 12_000), "the accumulation is left out")]:
        with pytest.raises(AssertionError, match=slip) as err:
            check_accumulate(a, t, **d1)
        assert "24000" not in str(err.value) and "24,000" not in str(err.value)
    with pytest.raises(TypeError, match="still `...`"):
        check_accumulate(..., 24_000, **d1)

    norms = [2.995, 2.446, 1.756, 2.202, 1.637, 0.606]  # the page's table: g/2 is first below 1 at step 3
    assert check_first_unclipped_step(3, norms).startswith("correct")
    for step, slip in [(2, "count the steps from 1"), (6, "the full gradient"), (4, "an earlier step"),
                       (1, "still clipped")]:
        with pytest.raises(AssertionError, match=slip) as err:
            check_first_unclipped_step(step, norms)
        assert "3" not in str(err.value)
    with pytest.raises(AssertionError, match="whole number"):
        check_first_unclipped_step(2.5, norms)

    s = 214_282_376
    d3 = dict(n_params=s, n_gpus=8)
    assert check_all_reduce_bytes(7 * s * 4, 2 * 7 / 8 * s * 4, 4, **d3).startswith("correct")
    assert check_all_reduce_bytes(6.00e9, 1.50e9, 4.0, **d3).startswith("correct")  # three significant figures
    for answers, slips in [((8 * s * 4, 2 * s * 4, 7), ("own gradients", "limit of many GPUs", "not one copy")),
                           ((6.0, 1.5, 0.25), ("in GB", "in GB", "divide the naive bytes")),
                           ((7 * s, 7 / 4 * s, 4), ("numbers counted", "numbers counted")),
                           ((14 * s * 4, 7 / 8 * s * 4, 4), ("both directions", "one phase only")),
                           # a ratio that follows from the student's own wrong bytes blames those bytes
                           ((14 * s * 4, 2 * 7 / 8 * s * 4, 8), ("both directions", "follows from your to_rank0:")),
                           ((7 * s * 4, 2 * s * 4, 3.5), ("limit of many GPUs", "follows from your ring:")),
                           ((14 * s * 4, 2 * s * 4, 7), ("both directions", "follows from your to_rank0 and ring")),
                           # with 8 GPUs the ring's missing 1/N_p is a factor of 8, as bits for bytes: both named
                           ((7 * s * 4, 2 * 7 * s * 4, 0.5), ("whole gradients at every step", "or bits counted"))]:
        with pytest.raises(AssertionError) as err:
            check_all_reduce_bytes(*answers, **d3)
        for slip in slips:
            assert slip in str(err.value), (answers, str(err.value))
        if "follows from your" in " ".join(slips):
            assert "not one copy" not in str(err.value), (answers, str(err.value))
        assert not re.search(r"5999|1499|6\.00|1\.50", str(err.value))


def test_chapter_13_rms_norm_check_cell_names_a_float32_computation():
    """Exercise 13.2 (a reader of r59a): an answer computed in float32 for a float64 input, returned as float32 or
    converted back, is told to compute in the input's dtype, not to divide the sum of squares by d; the right answer
    passes with its three lines."""
    import torch
    import torch.nn.functional as F

    from tmlib.course import check_own_work

    def right(x, g, eps=1e-5):
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * g

    def in_float32(x, g, eps=1e-5):
        y = x.float()
        return y / torch.sqrt((y * y).mean(dim=-1, keepdim=True) + eps) * g.float()

    def converted_back(x, g, eps=1e-5):
        return in_float32(x, g, eps).to(x.dtype)

    names = dict(torch=torch, F=F, check_own_work=check_own_work)
    text = _run_check_cell("13_modern_transformer", "ex-13-rmsnorm", my_rms_norm=right, **names)
    assert "AssertionError" not in text and text.count("correct") == 3, text
    for fn in (in_float32, converted_back):
        text = _run_check_cell("13_modern_transformer", "ex-13-rmsnorm", my_rms_norm=fn, **names)
        assert "AssertionError" in text and "compute in the input's dtype (float64 here)" in text, text
        assert "sum of squares" not in text, text


def test_chapter_13_value_check_cells_reject_a_cell_that_calls_the_library():
    """Exercises 13.3 and 13.5 (a reader of r59a): slopes_6 from alibi_slopes(6), and parameter counts from
    count_parameters, are rejected by reading the notebook's input history (IPython's _ih); the answers written by
    hand pass; without a history (a script, the grader) the check cannot tell and lets the values through."""
    from tmlib.course import check_own_answer
    from tmlib.model import PositionwiseFeedForward, SwiGLUFeedForward, alibi_slopes, count_parameters

    by_hand = "slopes_6 = [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]"
    called = "import tmlib.model as M\n\nslopes_6 = M.alibi_slopes(6).tolist()"
    slopes = alibi_slopes(6).tolist()
    text = _run_check_cell("13_modern_transformer", "ex-13-alibi", slopes_6=slopes, _ih=["", by_hand])
    assert "AssertionError" not in text and text.startswith("correct"), text
    import tmlib.model as M

    for history in (["", called], ["", by_hand, called, "x = 1"], ["", "slopes_6 = alibi_slopes(6).tolist()"]):
        text = _run_check_cell("13_modern_transformer", "ex-13-alibi", slopes_6=slopes, _ih=history, M=M,
                               alibi_slopes=alibi_slopes)
        assert "AssertionError: the cell that computes slopes_6 calls tmlib.model.alibi_slopes" in text, text
        assert "0.25" not in text and "0.125" not in text, text
    # a function of the notebook that calls the library is followed
    namespace = {"__name__": "__main__", "alibi_slopes": alibi_slopes}
    exec("def f():\n    return alibi_slopes(6).tolist()", namespace)  # noqa: S102
    namespace["_ih"] = ["", "def f():\n    return alibi_slopes(6).tolist()", "slopes_6 = f()"]
    with pytest.raises(AssertionError, match="calls tmlib.model.alibi_slopes"):
        check_own_answer("slopes_6", ["tmlib.model.alibi_slopes"], namespace)
    assert check_own_answer("slopes_6", ["tmlib.model.alibi_slopes"], {}).startswith("cannot tell")

    relu, glu = count_parameters(PositionwiseFeedForward(512, 2048)), count_parameters(SwiGLUFeedForward(512, 1365, bias=True))
    arithmetic = "relu_by_hand = 2 * 512 * 2048 + 2048 + 512\nglu_by_hand = 3 * 512 * 1365 + 1365 + 1365 + 512"
    library = ("relu_by_hand = count_parameters(PositionwiseFeedForward(512, 2048))\n"
               "glu_by_hand = count_parameters(SwiGLUFeedForward(512, 1365, bias=True))")
    names = dict(relu_by_hand=relu, glu_by_hand=glu, count_parameters=count_parameters,
                 PositionwiseFeedForward=PositionwiseFeedForward, SwiGLUFeedForward=SwiGLUFeedForward)
    text = _run_check_cell("13_modern_transformer", "ex-13-swiglu", _ih=["", arithmetic], **names)
    assert "AssertionError" not in text and text.count("correct") == 2, text
    text = _run_check_cell("13_modern_transformer", "ex-13-swiglu", _ih=["", library], **names)
    assert "AssertionError: the cell that computes relu_by_hand calls" in text and "count_parameters" in text, text
    assert "2099712" not in text and "2,099,712" not in text, text
    text = _run_check_cell("13_modern_transformer", "ex-13-swiglu", **names)  # no history: cannot tell
    assert "AssertionError" not in text and text.count("correct") == 2, text


def test_chapter_11_alignment_reads_check_names_the_entry_never_the_word():
    """Exercise 11.4's first step: the student writes `reads` from the sentence pair; the check names the first wrong
    entry by its English token and query, never the German word it should be; a list shifted by one gets the
    indexing hint; the model's own reading of Figure 11.1 (in → auf, a → Tanz) is wrong."""
    from tmlib.course import check_alignment_reads
    german = "Mehrere Frauen führen vor einem Gebäude einen Tanz auf .".split()
    queries = ["<bos>", *"Several women are performing a dance in front of a building .".split()]
    right = ["Mehrere", "Frauen", "führen", "führen", "einen", "Tanz", "vor", "vor", "vor", "einem", "Gebäude", ".",
             "."]
    assert check_alignment_reads(right, german, queries).startswith("correct")
    with pytest.raises(TypeError, match=re.escape("reads: still `...`")):
        check_alignment_reads(..., german, queries)
    model_reading = right[:4] + ["Tanz", "Tanz", "auf"] + right[7:]
    with pytest.raises(AssertionError, match=r"reads\[4\]: the token 'a' \(predicted by the query at 'performing'\)"
                       ) as err:
        check_alignment_reads(model_reading, german, queries)
    assert "1 more entries differ" in str(err.value) and "einen" not in str(err.value)
    with pytest.raises(AssertionError, match="shifted by one"):
        check_alignment_reads(["Mehrere"] + right[:-1], german, queries)  # reads[k] for queries[k]
    with pytest.raises(AssertionError, match="one per token the decoder produces"):
        check_alignment_reads(right[:-1], german, queries)
    with pytest.raises(AssertionError, match="not one of the German words"):
        check_alignment_reads(right[:6] + ["vor einem"] + right[7:], german, queries)
    with pytest.raises(ValueError, match="no reference"):
        check_alignment_reads(right, german[::-1], queries)


def _masked_attention(q, k, v, mask, *, invert=False, transpose=None):
    scores = q @ (np.swapaxes(k, -1, -2) if transpose is None else transpose(k)) / np.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores) if invert else np.where(mask, scores, -np.inf)
    weights = R.softmax(scores)
    return weights @ v, weights


def test_masked_attention_runs_one_sequence_too_and_names_an_inverted_mask():
    from tmlib.course import check_masked_attention

    assert check_masked_attention(_masked_attention).count("correct") == 4  # the batch of two, then one sequence alone
    with pytest.raises(AssertionError, match="True where the query may attend"):
        check_masked_attention(lambda q, k, v, m: _masked_attention(q, k, v, m, invert=True))
    with pytest.raises(AssertionError, match="fails on one sequence .* swap only the last two axes"):
        check_masked_attention(lambda q, k, v, m: _masked_attention(q, k, v, m, transpose=lambda k: k.transpose(0, 2, 1)))
    with pytest.raises(AssertionError, match="k.T reverses every axis"):
        check_masked_attention(lambda q, k, v, m: _masked_attention(q, k, v, m, transpose=lambda k: k.T))

    def own_softmax_inverted(q, k, v, mask):  # a softmax of the student's own: NaN rows instead of an error
        s = np.where(mask, -np.inf, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
        with np.errstate(invalid="ignore"):
            e = np.exp(s - s.max(-1, keepdims=True))
            w = e / e.sum(-1, keepdims=True)
        return w @ v, w

    with pytest.raises(AssertionError, match="all NaN.*did you invert it"):
        check_masked_attention(own_softmax_inverted)
    with pytest.raises(AssertionError, match="returns \\(weights, output\\)"):  # the pair in the wrong order
        check_masked_attention(lambda q, k, v, m: _masked_attention(q, k, v, m)[::-1])


def test_masked_attention_names_one_sequence_that_differs_from_its_place_in_the_batch():
    """The one-sequence part is Exercise 10.8's check (tmlib.analysis.bugcheck.check_without_batch): an answer
    right on a batch but silently different without one is rejected with the exercise's hint."""
    from tmlib.course import check_masked_attention

    def first_axis_softmax_alone(q, k, v, mask):  # right on a batch, but a 2-D call normalises the wrong axis
        out, w = _masked_attention(q, k, v, mask)
        if q.ndim == 2:
            w = w / w.sum(axis=0, keepdims=True)
        return w @ v, w

    with pytest.raises(AssertionError, match="masked_attention gives one sequence of shape \\(3, 2\\), without a "
                       "batch axis, another output than inside a batch: .*swap only the last two axes"):
        check_masked_attention(first_axis_softmax_alone)


def test_split_merge_names_the_plain_reshape_and_a_wrong_axis_order_never_the_heads():
    from tmlib.course import check_split_merge

    def split(x, h):
        *lead, n, d = x.shape
        return np.swapaxes(x.reshape(*lead, n, h, d // h), -2, -3)

    def merge(x):
        x = np.swapaxes(x, -2, -3)
        return x.reshape(*x.shape[:-2], -1)

    assert check_split_merge(split, merge).count("correct") == 4
    plain = lambda x, h: x.reshape(*x.shape[:-2], h, x.shape[-2], x.shape[-1] // h)  # noqa: E731
    with pytest.raises(AssertionError, match="plain reshape") as err:
        check_split_merge(plain, merge)
    assert "swapaxes" in str(err.value) and not re.search(r"\d\.\d", str(err.value))  # no entry of the heads
    with pytest.raises(AssertionError, match="expected \\(h, n, d_k\\).*swapaxes.*a reshape alone") as err:
        check_split_merge(lambda x, h: x.reshape(x.shape[0], h, -1).transpose(), merge)  # (d_k, h, n)
    assert "np.reshape(answer" not in str(err.value)
    with pytest.raises(AssertionError, match="columns of head i of every token.*a reshape alone"):
        check_split_merge(lambda x, h: np.swapaxes(split(x, h), -1, -3), merge)  # (d_k, n, h): 2, 3, 2
    with pytest.raises(AssertionError, match="plain reshape heads.reshape"):
        check_split_merge(split, lambda x: x.reshape(*x.shape[:-3], x.shape[-2], -1))
    with pytest.raises(AssertionError, match="fails on a batch"):
        check_split_merge(lambda x, h: np.swapaxes(x.reshape(x.shape[-2], h, x.shape[-1] // h), 0, 1), merge)


def test_check_temperature_accepts_the_curve_and_names_each_slip():
    """Exercise 1.6 (a reader of r66): the check takes only w_q3; no message shows the weights due or the expression
    that gives them."""
    from tmlib.course.exercise_checks import check_temperature

    s = (E.ATTENTION_EXAMPLE_1.q @ E.ATTENTION_EXAMPLE_1.k.T)[2]  # (3,): query 3's scores
    s0 = (E.ATTENTION_EXAMPLE_1.q @ E.ATTENTION_EXAMPLE_1.k.T)[0]  # query 1's: the right recipe on the wrong row
    taus = np.geomspace(0.05, 20, 60)
    right = np.array([R.softmax(s / t) for t in taus])
    assert check_temperature(right).count("correct:") == 3
    wrong = {"multiplied by τ": np.array([R.softmax(s * t) for t in taus]),
             "already-scaled": np.array([R.softmax(s / np.sqrt(2) / t) for t in taus]),
             "is not right yet": np.array([R.softmax(s / np.sqrt(t)) for t in taus]),
             "key 3": np.array([R.softmax(np.array([2.0, 1.0, 0.0]) / t) for t in taus]),
             "has a weight of 0": np.tile([1.0, 0.0, 0.0], (60, 1)),
             "weights of query 1": np.array([R.softmax(s0 / t) for t in taus])}
    for hint, answer in wrong.items():
        message = _raises(check_temperature, answer)
        assert hint in message, (hint, message)
        assert "scores[2] / t" not in message and "/ τ)" not in message, message
    with pytest.raises(ValueError, match="shape"):
        check_temperature(right[:, :2])


def test_check_swapped_heads_accepts_the_row_blocks_and_names_the_wrong_order():
    """Exercise 2.3 (readers of r66 and r67): the check takes only w_o_swapped; a wrong answer never learns which
    rows. W^O's column blocks exchanged equals W^O's rows 1 and 2 exchanged here, so its message claims no column
    swap."""
    from tmlib.course.exercise_checks import check_swapped_heads

    w_o = E.MHA_EXAMPLE_2.w_o
    assert check_swapped_heads(np.concatenate([w_o[2:], w_o[:2]])).count("correct:") == 2
    for answer in (w_o[:, [2, 3, 0, 1]], w_o[[1, 0, 2, 3]]):
        order = _raises(check_swapped_heads, answer)
        assert "W^O blocks in the wrong order" in order and "column" not in order, order
        assert "rows 3 and 4" not in order and "rows 1 and 2" not in order, order
    for answer in (w_o, w_o.T, np.concatenate([w_o[1:], w_o[:1]])):
        message = _raises(check_swapped_heads, answer)
        assert "is not right yet" in message and "columns" not in message, message
    with pytest.raises(ValueError, match="shape"):
        check_swapped_heads(w_o[:2])
