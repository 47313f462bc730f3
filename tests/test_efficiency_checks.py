"""Chapter 12's check functions (the whole check of Exercises 12.1, 12.2, 12.4 and 12.5, moved out of the check
cells): the reference answers pass with the lines the notebook printed, and typical slips fail with a message that
names the slip and never the value."""
import numpy as np
import pytest

from tmlib import ref
from tmlib.analysis import flops as FL
from tmlib.course import (check_big_model_cache, check_big_model_flops, check_causal_online_attention, check_crossovers,
                          check_flops_per_token, check_kv_cache_function, check_training_flops)


def _kv(n_layers, d_model, n_tokens, src_len, batch, bytes_per_element):
    return batch * (n_tokens + src_len) * 2 * n_layers * d_model * bytes_per_element


def test_kv_cache_bytes_passes_the_reference_and_keeps_the_arguments_to_itself():
    lines = check_kv_cache_function(_kv).splitlines()
    assert len(lines) == 6 and all(line.startswith("correct: ") for line in lines), lines
    assert lines[0] == ("correct: the cache without a source (src_len 0), 3 layers, d_model 48, 1 generated token, "
                        "batch 3, 4 bytes per number matches the expected value (exact equality)")
    assert check_big_model_cache(_kv, _kv(6, 1024, 1, 0, 1, 2), _kv(6, 1024, 1024, 1024, 32, 2)) == \
        "correct: bytes_per_token and bytes_batch are your function applied to the big model"
    with pytest.raises(AssertionError) as err:  # bytes_per_token with one source token: the argument stays unsaid
        check_big_model_cache(_kv, _kv(6, 1024, 1, 1, 1, 2), _kv(6, 1024, 1024, 1024, 32, 2))
    assert "one generated token adds to the cache of one sentence" in str(err.value)
    assert "(1, 0, 1)" not in str(err.value) and "src_len" not in str(err.value)
    with pytest.raises(AssertionError, match="too small"):  # keys only
        check_kv_cache_function(lambda *a: _kv(*a) // 2)


def test_kv_cache_check_names_the_element_size_when_a_fixed_size_is_off_by_a_ratio_of_sizes():
    """A fixed 4 bytes a number is right in float32 and twice too large in bfloat16; a fixed 2 bytes is half too
    small in float32 (a reader of r64 got "which term is missing or counted twice?" for the first)."""
    for fixed, side in ((4, "too large"), (2, "too small")):
        with pytest.raises(AssertionError) as err:
            check_kv_cache_function(lambda *a, fixed=fixed: _kv(*a[:5], fixed))
        text = str(err.value)
        assert side in text and "count the bytes of one number of the cache's dtype" in text, text
        assert "missing" not in text and "twice" not in text, text


def test_kv_cache_check_keeps_the_missing_term_hint_for_a_count_off_by_two_that_scales_with_the_size():
    """Keys only (no factor 2 for keys and values) is off by the same factor as 2 bytes for 4, but it scales with
    bytes_per_element: the hint stays on the terms."""
    with pytest.raises(AssertionError) as err:
        check_kv_cache_function(lambda *a: _kv(*a) // 2)
    text = str(err.value)
    assert "too small" in text and "which term is missing or counted twice?" in text, text
    assert "bytes of one number" not in text, text


def test_the_function_checks_call_it_on_the_big_model_before_the_numbers_are_read():
    """The autograder records the calls that a check makes before it reads the student's numbers."""
    seen = []
    check_kv_cache_function(lambda *a: seen.append(a) or _kv(*a))
    assert (6, 1024, 1, 0, 1, 2) in seen and (6, 1024, 1024, 1024, 32, 2) in seen
    seen.clear()
    check_flops_per_token(lambda *a: seen.append(a) or _fpt(*a))
    assert (1024, 6, 4096, 37000, 25, 25) in seen


def _causal(q, k, v, block_size, off_by_one=False):
    n = q.shape[0]
    out, skipped = np.zeros((n, v.shape[1])), 0
    for q0 in range(0, n, block_size):
        rows = np.arange(q0, min(q0 + block_size, n))
        m, l, acc = np.full((len(rows), 1), -np.inf), np.zeros((len(rows), 1)), np.zeros((len(rows), v.shape[1]))
        for k0 in range(0, n, block_size):
            if k0 > rows[-1] or (off_by_one and k0 == rows[-1]):  # off by one: k0 >= rows[-1]
                skipped += 1
                continue
            s = q[rows] @ k[k0:k0 + block_size].T / np.sqrt(q.shape[1])
            s = np.where(np.arange(k0, k0 + s.shape[1])[None, :] > rows[:, None], -np.inf, s)
            m_new = np.maximum(m, s.max(axis=1, keepdims=True))
            p = np.exp(s - m_new)
            rescale = np.exp(m - m_new)
            l, acc, m = l * rescale + p.sum(1, keepdims=True), acc * rescale + p @ v[k0:k0 + block_size], m_new
        out[rows] = acc / l
    return out, skipped


def test_causal_online_attention_check_prints_four_lines_and_names_the_slips():
    text = check_causal_online_attention(_causal)
    assert text.splitlines() == [
        "correct: the block pairs skipped (n = 23, blocks of 4)",
        "correct: _causal is causal: no output changes when a later input changes (tolerance 1e-09)",
        "correct: every block of rows matches causal attention (to 1e-10), also with n = 21 and blocks of 4, and "
        "with blocks of 1",
        "correct: _causal reads its keys and values one block at a time (n = 23, blocks of 4)"]

    def skips_nothing(q, k, v, b):
        return ref.scaled_dot_product_attention(q, k, v, mask=ref.causal_mask(q.shape[0]))[0], 0

    with pytest.raises(AssertionError, match="too few"):
        check_causal_online_attention(skips_nothing)
    with pytest.raises(AssertionError, match="return a pair"):
        check_causal_online_attention(lambda q, k, v, b: _causal(q, k, v, b)[0])
    # the skip test off by one (k0 >= the block's last query) passes n = 23 with blocks of 4, where no key block
    # starts at a query block's last row (a reader of r64 found it); the cases n = 21 and blocks of 1 catch it
    with pytest.raises(AssertionError, match=r"\(n = 21, blocks of 4\): too many"):
        check_causal_online_attention(lambda q, k, v, b: _causal(q, k, v, b, off_by_one=True))

    def counts_right_reads_wrong(q, k, v, b):  # the right count, but the off-by-one skip in the attention itself
        return _causal(q, k, v, b, off_by_one=True)[0], _causal(q, k, v, b)[1]

    with pytest.raises(AssertionError, match="must be read"):
        check_causal_online_attention(counts_right_reads_wrong)


def _fpt(d_model, n_layers, d_ff, vocab, src_len, tgt_len, per=None):
    d, f, S, T = d_model, d_ff, src_len, tgt_len
    encoder = n_layers * (8 * S * d * d + 4 * S * S * d + 4 * S * d * f)
    cross = 4 * T * d * d + 4 * S * d * d + 4 * T * S * d
    decoder = n_layers * (8 * T * d * d + 4 * T * T * d + cross + 4 * T * d * f)
    return 3 * (encoder + decoder + 2 * T * d * vocab) / (per or T)


def test_flops_per_token_check_passes_the_reference_and_names_a_division_by_every_token():
    big = _fpt(1024, 6, 4096, 37000, 25, 25)
    mfu = FL.mfu(25_000 / 1.0, big, 8 * 9.5e12)
    lines = check_flops_per_token(_fpt).splitlines() + check_big_model_flops(_fpt, big, mfu).splitlines()
    assert len(lines) == 5 and all(line.startswith("correct: ") for line in lines), lines
    assert lines[0].startswith("correct: FLOPs per target token, d_model 16, 2 + 2 layers, d_ff 40, vocabulary 44, "
                               "2 + 4 tokens matches")
    with pytest.raises(AssertionError, match="divided by the wrong number of tokens"):
        check_flops_per_token(lambda *a: _fpt(*a, per=a[4] + a[5]))
    with pytest.raises(AssertionError, match="percentage"):
        check_big_model_flops(_fpt, big, 100 * mfu)
    with pytest.raises(AssertionError, match="all 8 GPUs together"):  # one GPU's peak (a reader of r68)
        check_big_model_flops(_fpt, big, 8 * mfu)


def test_big_model_numbers_built_on_a_wrong_function_are_rejected_with_its_slip():
    """A reader of r68 got "correct: bytes_per_token and bytes_batch are your function applied to the big model"
    from a function without cross-attention, and "correct: flops_big ... mfu_big" from a forward-only count."""
    def no_cross(n_layers, d_model, n_tokens, src_len, batch, size):
        return _kv(n_layers, d_model, n_tokens, 0, batch, size)

    with pytest.raises(AssertionError) as err:
        check_big_model_cache(no_cross, no_cross(6, 1024, 1, 0, 1, 2), no_cross(6, 1024, 1024, 1024, 32, 2))
    text = str(err.value)
    assert "built on no_cross, which is not right yet" in text and "too small" in text, text
    assert "correct" not in text and str(_kv(6, 1024, 1024, 1024, 32, 2)) not in text, text

    def forward_only(*a):
        return _fpt(*a) / 3

    big = forward_only(1024, 6, 4096, 37000, 25, 25)
    with pytest.raises(AssertionError) as err:
        check_big_model_flops(forward_only, big, FL.mfu(25_000 / 1.0, big, 8 * 9.5e12))
    text = str(err.value)
    assert "built on forward_only, which is not right yet" in text and "too small" in text, text
    assert "correct" not in text, text


def test_training_flops_names_the_division_by_src_plus_tgt_only_when_told_the_source_length():
    forward, t, s = 1.0e6, 4, 6
    wrong = 3 * forward / (s + t)
    with pytest.raises(AssertionError, match="wrong number of tokens"):
        check_training_flops(wrong, forward, d_model=16, n_layers=1, tgt_len=t, src_len=s)
    with pytest.raises(AssertionError) as err:
        check_training_flops(wrong, forward, d_model=16, n_layers=1, tgt_len=t)
    assert "wrong number of tokens" not in str(err.value)


def test_crossovers_check_prints_the_notebook_lines_and_gives_no_direction():
    assert check_crossovers(2048, 3072).splitlines() == [
        "correct: at n = 2048 the two attention products cost as much as feed_forward",
        "correct: at n = 3072 the two attention products cost as much as qkv_projections + output_projection + "
        "feed_forward"]
    with pytest.raises(AssertionError, match="n is not the crossover") as err:
        check_crossovers(1024, 3072)
    assert "too" not in str(err.value)
    with pytest.raises(AssertionError, match="whole number"):
        check_crossovers(2048.5, 3072)
    with pytest.raises(TypeError):
        check_crossovers(..., 3072)
