"""Tests of tmlib.analysis's chapter-10 modules (capture, heads, alignment, ablation, permutation, views):
attention capture, per-head statistics on hand-made matrices with known answers, BPE-to-word merging, head
ablation against weights zeroed by hand, attention substitution, distances, bertviz output.  Models are tiny and
random: what is tested is the machinery, not a trained model."""
from __future__ import annotations

import copy
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tmlib import analysis as I
from tmlib.model import make_model
from tolerances import assert_close, tolerance, transformer_reduction_length

LN = math.log


def chain(model, src_len=5, tgt_len=4) -> int:
    """The roundings on the longest chain of the tiny model's forward pass on ``batch``."""
    return transformer_reduction_length(model.config, src_len, tgt_len)


@pytest.fixture()
def model():
    torch.manual_seed(0)
    return make_model("tiny", 40, pad_id=0, dropout=0.0).eval()  # 2 + 2 layers, 2 heads, d_model 32


@pytest.fixture()
def batch():
    src = I.pad_batch([[5, 6, 7, 8, 9], [10, 11, 12]])  # (2, 5), second row padded
    tgt_in = I.pad_batch([[1, 20, 21, 22], [1, 23]])  # (2, 4), <bos> = 1
    return src, tgt_in


# ------------------------------------------------------------------------------------------------ capture

def test_capture_does_not_change_the_logits_float64(model, batch):
    # The recording path computes softmax(QK^T/sqrt(d_k)) explicitly; the normal path uses PyTorch's fused kernel.
    # In float64 both agree to rounding; the model must come out of capture exactly as it went in.
    m = model.double()
    plain = m(*batch)
    cap = I.capture_attention(m, *batch)
    assert_close(cap.logits, plain, n=chain(m))
    torch.testing.assert_close(m(*batch), plain, atol=0, rtol=0)  # nothing left switched on: the same path


def test_capture_does_not_change_the_logits_float32(model, batch):
    plain = model(*batch)
    cap = I.capture_attention(model, *batch)
    assert_close(cap.logits, plain, n=chain(model))
    assert torch.equal(cap.logits.argmax(-1), plain.argmax(-1))


def test_capture_restores_flags_and_mode(model, batch):
    model.train()
    model.encoder.layers[1].keep_attention = True
    I.capture_attention(model, *batch)
    assert model.training
    assert [l.keep_attention for l in model.encoder.layers] == [False, True]
    assert all(not l.keep_attention and l.attention_weights == {} for l in model.decoder.layers)


def test_captured_shapes_masks_and_rows(model, batch):
    src, tgt_in = batch
    cap = I.capture_attention(model, src, tgt_in)
    assert [tuple(w.shape) for w in cap.weights["encoder self"]] == [(2, 2, 5, 5)] * 2
    assert [tuple(w.shape) for w in cap.weights["decoder self"]] == [(2, 2, 4, 4)] * 2
    assert [tuple(w.shape) for w in cap.weights["cross"]] == [(2, 2, 4, 5)] * 2
    assert cap.src_mask.tolist() == [[True] * 5, [True] * 3 + [False] * 2]
    assert cap.tgt_mask.tolist() == [[True] * 4, [True] * 2 + [False] * 2]
    for kind in I.ATTENTION_KINDS:
        qm, km, causal = cap.masks(kind)
        for w in cap.weights[kind]:
            rows = w.sum(-1)[qm[:, None, :].expand(-1, 2, -1)]
            assert_close(rows, torch.ones_like(rows), n=2 * 5)  # the softmax's normaliser, then the sum
            assert float(w[1, :, :, 3:].abs().max()) == 0.0 if kind != "decoder self" else True  # padded keys
            if causal:
                assert float(torch.triu(w, diagonal=1).abs().max()) == 0.0


def test_captured_encoder_weights_match_a_recomputation(model, batch):
    # layer 0 of the encoder sees the embedded source; recompute softmax(Q K^T / sqrt(d_k)) with the padding mask
    src, tgt_in = batch
    cap = I.capture_attention(model, src, tgt_in)
    with torch.no_grad():
        x = model.positional(model.src_embed(src))  # (2, 5, 32)
        mha = model.encoder.layers[0].self_attn
        q = mha.w_q(x).view(2, 5, 2, 16).transpose(1, 2)  # (2, 2, 5, 16)
        k = mha.w_k(x).view(2, 5, 2, 16).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / 4.0  # sqrt(16)
        scores = scores.masked_fill((src == 0)[:, None, None, :], float("-inf"))
        expected = scores.softmax(-1)
    # embedding (2), projection (32), score (16), softmax (5): a weight's error is its scores' error, eps at the
    # scale of the largest score
    real = torch.isfinite(scores)
    assert_close(cap.weights["encoder self"][0], expected, n=2 + 32 + 16 + 5,
                 magnitude=max(1.0, scores[real].abs().max().item()))


def test_capture_needs_a_pad_id(model, batch):
    model.pad_id = None
    with pytest.raises(ValueError, match="pad_id"):
        I.capture_attention(model, *batch)


# ------------------------------------------------------------------------------------------------ statistics

def _full(n, batch=1):
    return torch.ones(batch, n, dtype=torch.bool)


def test_statistics_of_the_identity():
    w = torch.eye(4, dtype=torch.float64)[None, None]  # (1, 1, 4, 4): each token attends to itself
    s = I.attention_statistics(w, _full(4), _full(4), "encoder self")
    assert s["entropy"][0] == 0.0  # weights 0 and 1: w log w is exactly 0
    assert_close(s["max_entropy"][0], LN(4), n=2 + 4)  # a logarithm, a mean over 4 queries
    assert s["same"][0] == 1.0 and s["previous"][0] == 0.0
    assert_close(s["first"][0], 0.25, n=4)  # only query 0: a mean over 4 queries
    assert_close(s["last"][0], 0.25, n=4)  # only query 3
    assert np.isnan(s["diagonal"][0])


def test_statistics_of_a_previous_token_head():
    w = torch.zeros(1, 1, 4, 4, dtype=torch.float64)
    w[0, 0, 0, 0] = 1.0  # query 0 has no previous token
    for i in range(1, 4):
        w[0, 0, i, i - 1] = 1.0
    s = I.attention_statistics(w, _full(4), _full(4), "encoder self")
    assert s["previous"][0] == 1.0  # averaged over queries 1..3
    assert_close(s["same"][0], 0.25, n=4)  # query 0 only
    assert_close(s["first"][0], 0.5, n=4)  # queries 0 and 1
    assert s["entropy"][0] == 0.0


def test_statistics_of_uniform_heads_reach_the_maximum_entropy():
    w = torch.full((1, 2, 5, 5), 0.2, dtype=torch.float64)
    s = I.attention_statistics(w, _full(5), _full(5), "encoder self")
    n = 2 + 5 + 5  # w log w, the sum over 5 keys, the mean over 5 queries
    assert_close(s["entropy"], [LN(5)] * 2, n=n)
    assert_close(s["max_entropy"], [LN(5)] * 2, n=n)
    assert_close(s["first"], [0.2, 0.2], n=n)


def test_causal_statistics_exclude_padding():
    # sentence 0: 3 real positions; sentence 1: 2 real positions, then padding whose rows hold garbage
    w = torch.zeros(2, 1, 3, 3, dtype=torch.float64)
    for b, n in ((0, 3), (1, 2)):
        for i in range(n):
            w[b, 0, i, : i + 1] = 1.0 / (i + 1)  # uniform over the allowed (causal) keys
    w[1, 0, 2] = torch.tensor([0.7, 0.2, 0.1])  # a padded query: must not count
    mask = torch.tensor([[True, True, True], [True, True, False]])
    s = I.attention_statistics(w, mask, mask, "decoder self")
    n_queries = 5  # 3 + 2 real queries
    expected_entropy = (LN(1) + LN(2) + LN(3) + LN(1) + LN(2)) / n_queries
    n = 2 + 3 + 5  # w log w, the sum over at most 3 keys, the mean over 5 queries
    assert_close(s["entropy"][0], expected_entropy, n=n)
    assert_close(s["max_entropy"][0], expected_entropy, n=n)  # uniform = maximum
    assert_close(s["previous"][0], (1 / 2 + 1 / 3 + 1 / 2) / 3, n=n)  # queries with i >= 1: 3 of them
    # query 0 sees only key 0 (no choice): left out of the shares, so 3 queries count
    assert_close(s["first"][0], (1 / 2 + 1 / 3 + 1 / 2) / 3, n=n)
    assert_close(s["same"][0], (1 / 2 + 1 / 3 + 1 / 2) / 3, n=n)
    assert np.isnan(s["last"][0]) and np.isnan(s["diagonal"][0])


def test_cross_attention_diagonal():
    eye = torch.eye(4, dtype=torch.float64)[None, None]
    assert I.attention_statistics(eye, _full(4), _full(4), "cross")["diagonal"][0] == 1.0
    anti = torch.eye(5, dtype=torch.float64).flip(-1)[None, None]  # only the middle query is on the diagonal
    assert_close(I.attention_statistics(anti, _full(5), _full(5), "cross")["diagonal"][0], 0.2, n=5 + 5)
    # 2 queries over 4 keys: centres at keys 0.5 and 2.5, windows {0, 1} and {2, 3}
    w = torch.tensor([[[[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]]]], dtype=torch.float64)
    assert I.attention_statistics(w, _full(2), _full(4), "cross")["diagonal"][0] == 1.0
    w = torch.tensor([[[[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.5, 0.5]]]], dtype=torch.float64)
    s = I.attention_statistics(w, _full(2), _full(4), "cross")
    assert_close(s["diagonal"][0], 0.5, n=4 + 2)
    assert_close(s["last"][0], 0.75, n=4 + 2)
    assert s["first"][0] == 0.0
    assert np.isnan(s["previous"][0]) and np.isnan(s["same"][0])
    # 2 queries over 6 keys: centres at keys 1 and 4 (not 0 and 3), windows {0, 1, 2} and {3, 4, 5}
    w = torch.zeros(1, 1, 2, 6, dtype=torch.float64)
    w[0, 0, 0, 2] = w[0, 0, 1, 5] = 1.0
    assert I.attention_statistics(w, _full(2), _full(6), "cross")["diagonal"][0] == 1.0
    w = torch.zeros(1, 1, 2, 6, dtype=torch.float64)
    w[0, 0, 0, 3] = w[0, 0, 1, 2] = 1.0  # both just outside their windows
    assert I.attention_statistics(w, _full(2), _full(6), "cross")["diagonal"][0] == 0.0


def test_diagonal_centre_is_the_middle_of_each_queries_slice_of_the_keys():
    # 2 queries over 6 keys: slices {0, 1, 2} and {3, 4, 5}, centres 1 and 4; as many queries as keys: the identity
    assert I.diagonal_centre(np.arange(2.0), 2, 6).tolist() == [1.0, 4.0]
    assert I.diagonal_centre(np.arange(5.0), 5, 5).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    # broadcast over a batch of real lengths, as attention_statistics calls it: one row per sentence
    rows = I.diagonal_centre(torch.arange(3.0)[None, :], torch.tensor([[3.0], [1.0]]), torch.tensor([[6.0], [2.0]]))
    assert rows.tolist() == [[0.5, 2.5, 4.5], [0.5, 2.5, 4.5]]


def test_cross_diagonal_uses_real_lengths_only():
    # the same 2x4 alignment, padded to 3 queries and 6 keys: padding must not move the diagonal
    w = torch.zeros(1, 1, 3, 6, dtype=torch.float64)
    w[0, 0, 0, :2] = 0.5
    w[0, 0, 1, 2:4] = 0.5
    w[0, 0, 2, 5] = 1.0  # padded query
    qm = torch.tensor([[True, True, False]])
    km = torch.tensor([[True] * 4 + [False] * 2])
    assert I.attention_statistics(w, qm, km, "cross")["diagonal"][0] == 1.0


@pytest.mark.parametrize("bad, error", [
    (dict(kind="sideways"), ValueError),
    (dict(query_mask=torch.tensor([[True, False, True, True]])), ValueError),  # not right-padded
    (dict(query_mask=torch.ones(1, 4)), TypeError),  # not bool
    (dict(key_mask=_full(3)), ValueError),  # wrong length
    (dict(weights=torch.ones(4, 4)), ValueError),  # not 4-D
])
def test_statistics_reject_bad_input(bad, error):
    args = dict(weights=torch.full((1, 1, 4, 4), 0.25), query_mask=_full(4), key_mask=_full(4), kind="encoder self")
    args.update(bad)
    with pytest.raises(error):
        I.attention_statistics(**args)


def test_head_statistics_table_matches_per_batch_statistics(model, batch):
    table = I.head_statistics(model, [batch])
    assert len(table) == 12 and list(table.columns[:3]) == ["kind", "layer", "head"]
    cap = I.capture_attention(model, *batch)
    qm, km, _ = cap.masks("cross")
    direct = I.attention_statistics(cap.weights["cross"][1], qm, km, "cross")
    rows = table[(table.kind == "cross") & (table.layer == 1)].sort_values("head")
    # the same weights (float64 statistics of them: w log w, sums over 5 keys, means over 8 queries); NaN where
    # a statistic does not apply
    for name in I.STATISTICS:
        got, want = rows[name].to_numpy(), np.asarray(direct[name], dtype=float)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        if not np.isnan(want).all():
            assert_close(got[~np.isnan(got)], want[~np.isnan(want)], n=2 + 5 + 8, magnitude=LN(5))
    # two batches pool their query positions: splitting the batch gives the same table (the float32 model runs on
    # other shapes: its roundings, which move a weight by eps at the scale of its scores, O(1) here)
    src, tgt = batch
    split = I.head_statistics(model, [(src[:1], tgt[:1]), (src[1:, :3], tgt[1:, :2])])
    got = split[list(I.STATISTICS)].to_numpy(dtype=float)
    want = table[list(I.STATISTICS)].to_numpy(dtype=float)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert_close(got[~np.isnan(got)], want[~np.isnan(want)], n=chain(model) + 2 + 5 + 8, magnitude=LN(5),
                 dtype=torch.float32)


# ------------------------------------------------------------------------------------------------ words

def test_word_spans_hand_example():
    pieces = ["▁Ein", "▁Hund", ",", "▁der", "▁lä", "dt", "."]
    assert I.word_spans(pieces) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 6), (6, 7)]
    assert I.word_labels(pieces) == ["Ein", "Hund", ",", "der", "lädt", "."]
    assert I.word_spans(["<bos>", "▁A", "▁c", "ott", "on"]) == [(0, 1), (1, 2), (2, 5)]
    assert I.word_spans(["▁", '"', "spr", "ingt", '"']) == [(0, 2), (2, 4), (4, 5)]
    assert I.word_spans(["▁woman", "'", "s"]) == [(0, 1), (1, 2), (2, 3)]
    assert I.word_spans([]) == []
    with pytest.raises(TypeError):
        I.word_spans("▁Ein ▁Hund")


def test_merge_attention_hand_example():
    # 3 query pieces (words: pieces 0-1, piece 2) x 4 key pieces (words: piece 0, pieces 1-3)
    w = np.array([[0.1, 0.2, 0.3, 0.4],
                  [0.5, 0.5, 0.0, 0.0],
                  [1.0, 0.0, 0.0, 0.0]])
    merged = I.merge_attention(w, [(0, 2), (2, 3)], [(0, 1), (1, 4)])
    expected = np.array([[(0.1 + 0.5) / 2, (0.9 + 0.5) / 2],  # sum over key pieces, mean over query pieces
                         [1.0, 0.0]])
    assert_close(merged, expected, n=3 + 2)  # sums of up to 3 key pieces, means of 2 query pieces
    assert_close(merged.sum(1), [1.0, 1.0], n=3 + 2 + 2)  # rows stay distributions
    # one piece per word: sums and means of one number, exact
    np.testing.assert_array_equal(I.merge_attention(torch.tensor(w), [(0, 1), (1, 2), (2, 3)],
                                                    [(0, 1), (1, 2), (2, 3), (3, 4)]), w)


@pytest.mark.parametrize("q_spans, k_spans", [
    ([(0, 2)], [(0, 1), (1, 4)]),  # queries not covered
    ([(0, 2), (2, 3)], [(0, 1), (2, 4)]),  # gap
    ([(0, 2), (2, 3)], [(0, 1), (1, 5)]),  # too long
])
def test_merge_attention_rejects_bad_spans(q_spans, k_spans):
    with pytest.raises(ValueError):
        I.merge_attention(np.full((3, 4), 0.25), q_spans, k_spans)


# ------------------------------------------------------------------------------------------------ ablation

def _zeroed_copy(model, head):
    """Independent reference: a copy whose W^O columns of ``head`` are zero, so the head adds nothing."""
    ref = copy.deepcopy(model)
    module = I.attention_module(ref, head.kind, head.layer)
    with torch.no_grad():
        module.w_o.weight[:, head.head * module.d_k:(head.head + 1) * module.d_k] = 0.0
    return ref


@pytest.mark.parametrize("head", [I.Head("encoder self", 0, 1), I.Head("decoder self", 1, 0), I.Head("cross", 1, 1)])
def test_ablation_equals_zeroing_the_output_columns(model, batch, head):
    plain = model(*batch)
    with I.ablate_heads(model, [head]) as off:
        assert off == [head]
        ablated = model(*batch)
    expected = _zeroed_copy(model, head)(*batch)
    assert_close(ablated, expected, n=chain(model))
    assert float((ablated - plain).detach().abs().max()) > 1e-3  # the head mattered at all
    torch.testing.assert_close(model(*batch), plain, atol=0, rtol=0)  # hooks gone


def test_ablating_nothing_changes_nothing(model, batch):
    plain = model(*batch)
    with I.ablate_heads(model, []):
        torch.testing.assert_close(model(*batch), plain, atol=0, rtol=0)


def test_ablation_of_two_heads_in_one_module_and_greedy_decoding(model, batch):
    from tmlib.decoding import greedy_decode

    heads = [I.Head("cross", 0, 0), I.Head("cross", 0, 1)]
    ref = _zeroed_copy(_zeroed_copy(model, heads[0]), heads[1])
    with I.ablate_heads(model, heads):
        ablated = model(*batch)
        hyp = greedy_decode(model, batch[0], 1, 2, max_len=6)  # the KV-cache path goes through the same hook
    assert_close(ablated, ref(*batch), n=chain(model))
    assert hyp == greedy_decode(ref, batch[0], 1, 2, max_len=6)


def test_ablation_hooks_are_removed_on_error(model):
    with pytest.raises(RuntimeError, match="boom"):
        with I.ablate_heads(model, all_heads := I.all_heads(model)):
            assert len(all_heads) == 12
            raise RuntimeError("boom")
    for h in I.all_heads(model):
        assert not I.attention_module(model, h.kind, h.layer).w_o._forward_pre_hooks


@pytest.mark.parametrize("head, error", [
    (("cross", 2, 0), ValueError), (("cross", 0, 2), ValueError), (("keys", 0, 0), ValueError),
    ("cross", TypeError), (("cross", 0, True), ValueError),
])
def test_ablation_rejects_bad_heads(model, head, error):
    with pytest.raises(error):
        with I.ablate_heads(model, [head]):
            pass


def test_nll_per_token_matches_cross_entropy(model):
    from tmlib.data import collate

    batches = [collate([([5, 6, 7], [20, 21]), ([8], [22, 23, 24])]), collate([([9, 10], [25])])]
    got = I.nll_per_token(model, batches)
    total, n, scale = 0.0, 0, 0.0
    with torch.no_grad():
        for b in batches:
            logits = model(b.src, b.tgt_in)
            keep = b.tgt_out != 0
            total += float(F.cross_entropy(logits[keep], b.tgt_out[keep], reduction="sum"))
            n += int(keep.sum())
            scale = max(scale, logits.abs().max().item())
    assert n == 9
    # float32: the model's chain (other batch shapes), a log-sum-exp over 40 logits, the sum over 9 tokens
    assert_close(got, total / n, n=chain(model, 3, 4) + 40 + 9, magnitude=max(scale, total / n),
                 dtype=torch.float32)


def test_ablation_experiments_and_table(model):
    from tmlib.data import collate

    experiments = I.ablation_experiments(model)
    names = [e[0] for e in experiments]
    # 12 heads: 1 baseline + 12 single + 12 all-but-one (6 layers x 2 heads) + 6 whole layers + 1 all heads
    assert names.count("one head") == 12 and names.count("all but one") == 12
    assert names.count("whole layer") == 6 and names[0] == "none" and names[-1] == "all heads"
    assert len(experiments[-1][2]) == 12
    batches = [collate([([5, 6, 7], [20, 21]), ([8], [22, 23, 24])])]
    table = I.ablation_table(model, None, batches, experiments=experiments[:3] + experiments[-1:])
    assert table.loc[0, "delta_nll"] == 0.0
    assert_close(table.loc[1, "nll"], I.nll_per_token(_zeroed_copy(model, experiments[1][1]), batches),
                 n=chain(model, 3, 4) + 40 + 9, magnitude=10.0, dtype=torch.float32)  # logits of the tiny model < 10
    assert table["bleu"].isna().all()
    with pytest.raises(ValueError):
        I.ablation_table(model, None, batches, sources=["a"], references=None)


# ------------------------------------------------------------------------------------------------ distances

def test_total_variation_and_js_distance_closed_forms():
    p = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.2, 0.8]], dtype=torch.float64)
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.2, 0.8]], dtype=torch.float64)
    assert_close(I.total_variation(p, q), [0.5, 1.0, 0.0], n=2 + 1)  # differences, a sum of 2, a half
    # row 0: m = (0.75, 0.25); KL(p||m) = 0.5 ln(2/3) + 0.5 ln 2, KL(q||m) = ln(4/3)
    jsd0 = 0.5 * (0.5 * LN(2 / 3) + 0.5 * LN(2)) + 0.5 * LN(4 / 3)
    # two KL divergences (a log, a product, a sum of 2 each), their mean; a square root halves the relative
    # error but divides the absolute one by 2 √jsd: at jsd = 0 only the square root of the rounding remains
    got = I.js_distance(p, q)
    assert_close(got[:2], [math.sqrt(jsd0), math.sqrt(LN(2))], n=3 * 2 + 2 + 1)
    assert got[2] ** 2 <= tolerance(torch.float64, 3 * 2 + 2, 1.0)
    with pytest.raises(ValueError):
        I.total_variation(p, q[:, :1])


def test_permute_rows_keeps_values_and_masks():
    gen = torch.Generator().manual_seed(0)
    w = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0], [0.6, 0.4, 0.0, 0.0, 0.0]], dtype=torch.float64)
    allowed = torch.tensor([[True] * 4 + [False], [True, True, False, False, False]])
    seen = set()
    for _ in range(20):
        out = I.permute_rows(w, allowed, gen)
        for r in range(2):
            assert sorted(out[r][allowed[r]].tolist()) == sorted(w[r][allowed[r]].tolist())
            assert float(out[r][~allowed[r]].abs().sum()) == 0.0
        seen.add(tuple(out[0].tolist()))
    assert len(seen) > 5  # it does permute
    again = I.permute_rows(w, allowed, torch.Generator().manual_seed(0))
    assert torch.equal(again, I.permute_rows(w, allowed, torch.Generator().manual_seed(0)))
    with pytest.raises(TypeError):
        I.permute_rows(w, allowed.double())


@pytest.mark.parametrize("head, shape", [(I.Head("cross", 1, 0), (2, 4, 5)),
                                         (I.Head("encoder self", 0, 1), (2, 5, 5)),  # fused Q|K|V projection
                                         (I.Head("decoder self", 1, 0), (2, 4, 4))])
def test_override_identity_zero_and_shape(model, batch, head, shape):
    plain = model(*batch)
    same, w, w2 = I.override_head_attention(model, *batch, head, lambda w_, allowed: w_)
    assert_close(same, plain, n=chain(model))
    assert w.shape == shape and torch.equal(w, w2)
    zero, _, _ = I.override_head_attention(model, *batch, head, lambda w_, allowed: torch.zeros_like(w_))
    with I.ablate_heads(model, [head]):
        ablated = model(*batch)
    assert_close(zero, ablated, n=chain(model))  # zero weights = no head
    # a different substitution changes the logits: the hooks do act on this head
    uniform, _, _ = I.override_head_attention(model, *batch, head,
                                              lambda w_, allowed: allowed / allowed.sum(-1, keepdim=True))
    assert (uniform - plain).abs().max() > 1e-4
    assert "project_qkv" not in vars(I.attention_module(model, head.kind, head.layer))  # the wrapper is gone


def test_override_errors_and_hooks_removed(model, batch):
    head = I.Head("cross", 1, 0)
    with pytest.raises(ValueError, match="shape"):
        I.override_head_attention(model, *batch, head, lambda w_, allowed: w_[:, :1])
    with pytest.raises(ValueError, match="recorded"):
        I.override_head_attention(model, batch[0][:1], batch[1][:1], head, lambda w_, a: w_,
                                  capture=I.capture_attention(model, *batch))
    assert not I.attention_module(model, "cross", 1).w_o._forward_pre_hooks
    assert not I.attention_module(model, "cross", 1).w_v._forward_hooks


def test_override_causal_allowed_mask(model, batch):
    seen = {}

    def spy(w, allowed):
        seen["allowed"] = allowed
        return w

    I.override_head_attention(model, *batch, ("decoder self", 0, 1), spy)
    allowed = seen["allowed"]  # (2, 4, 4)
    assert torch.equal(allowed[0], torch.ones(4, 4, dtype=torch.bool).tril())
    assert allowed[1, 1].tolist() == [True, True, False, False]


def test_permutation_effects_table(model, batch):
    table = I.permutation_effects(model, [batch], heads=[("encoder self", 0, 0), ("cross", 1, 1)])
    assert list(table.columns) == ["kind", "layer", "head", "attention_tvd", "attention_jsd", "output_tvd",
                                   "argmax_changed"]
    assert ((table.attention_tvd > 0) & (table.attention_tvd <= 1)).all()
    assert ((table.argmax_changed >= 0) & (table.argmax_changed <= 1)).all()
    # two batches pool their positions: the result is the position-weighted mean of the per-batch results
    src, tgt = batch
    b1, b2 = (src[:1], tgt[:1]), (src[1:, :3], tgt[1:, :2])  # 4 and 2 target positions, 4 and 2 cross queries
    heads = [("cross", 1, 1)]
    t1, t2 = I.permutation_effects(model, [b1], heads=heads), I.permutation_effects(model, [b2], heads=heads)
    both = I.permutation_effects(model, [b1, b2], heads=heads)
    for col in ("attention_tvd", "attention_jsd", "output_tvd", "argmax_changed"):  # the same runs, other means
        assert_close(both[col].iloc[0], (4 * t1[col].iloc[0] + 2 * t2[col].iloc[0]) / 6, n=6 + 3, magnitude=1.0)
    assert both.output_tvd.iloc[0] > 0
    with pytest.raises(ValueError):
        I.permutation_effects(model, [])


# ------------------------------------------------------------------------------------------------ bertviz

@pytest.fixture(scope="module")
def tokenizer():
    from tmlib.data import train_tokenizer

    pairs = [("Ein Hund läuft.", "A dog runs."), ("Zwei Männer sitzen auf einer Bank.", "Two men sit on a bench."),
             ("Ein Kind spielt im Schnee.", "A child plays in the snow.")] * 5
    return train_tokenizer(pairs, vocab_size=60, min_frequency=1)


@pytest.fixture(scope="module")
def small_model(tokenizer):
    torch.manual_seed(0)
    return make_model("tiny", tokenizer.vocab_size, pad_id=0, dropout=0.0).eval()


def test_translate_and_capture_and_word_alignment(tokenizer, small_model):
    pair = I.translate_and_capture(small_model, tokenizer, "Zwei Männer sitzen auf einer Bank.", "Two men sit.")
    assert pair["translation"] == "Two men sit."
    assert pair["tgt_in_pieces"][0] == "<bos>" and pair["produced_pieces"][-1] == "<eos>"
    assert pair["tgt_in_pieces"][1:] == pair["produced_pieces"][:-1]  # position t predicts token t + 1
    n_src, n_tgt = len(pair["src_pieces"]), len(pair["tgt_in_pieces"])
    assert tuple(pair["capture"].weights["cross"][1].shape) == (1, 2, n_tgt, n_src)
    w, src_words, tgt_words = I.word_alignment(pair, layer=-1)
    assert src_words == ["Zwei", "Männer", "sitzen", "auf", "einer", "Bank", "."]
    assert tgt_words == ["Two", "men", "sit", ".", "<eos>"]
    expected = I.merge_attention(pair["capture"].weights["cross"][1][0].mean(0), I.word_spans(pair["produced_pieces"]),
                                 I.word_spans(pair["src_pieces"]))
    np.testing.assert_array_equal(w, expected)  # the same function on the same weights
    # float32 weights: each row a softmax over the source pieces (normaliser, sum), merged into words
    assert_close(w.sum(1), np.ones(len(tgt_words)), n=3 * n_src, dtype=torch.float32)
    one_head, _, _ = I.word_alignment(pair, layer=0, heads=[1])
    expected = I.merge_attention(pair["capture"].weights["cross"][0][0, 1], I.word_spans(pair["produced_pieces"]),
                                 I.word_spans(pair["src_pieces"]))
    np.testing.assert_array_equal(one_head, expected)  # the same function on the same weights
    greedy = I.translate_and_capture(small_model, tokenizer, "Ein Hund läuft.")  # the model's own translation
    assert greedy["tgt_in_pieces"][0] == "<bos>"
    with pytest.raises(ValueError, match="empty"):
        I.translate_and_capture(small_model, tokenizer, "")


def test_greedy_bleu_scores_the_greedy_translations(tokenizer, small_model):
    from tmlib.decoding import bleu_scores, translate_corpus

    sources, references = ["Ein Hund läuft.", "Zwei Männer sitzen auf einer Bank."], ["A dog runs.", "Two men sit."]
    hypotheses = translate_corpus(small_model, tokenizer, sources, beam_size=1, progress=False)
    assert I.greedy_bleu(small_model, tokenizer, sources, references) == bleu_scores(hypotheses, references)["bleu"]
    from tmlib.data import collate

    batches = [collate([(tokenizer.encode(s), tokenizer.encode(r)) for s, r in zip(sources, references)])]
    table = I.ablation_table(small_model, tokenizer, batches, sources, references,
                             experiments=I.ablation_experiments(small_model)[:2], bleu_for=("none",))
    assert table.loc[0, "bleu"] == I.greedy_bleu(small_model, tokenizer, sources, references)
    assert math.isnan(table.loc[1, "bleu"])


def test_bertviz_inputs_shapes(tokenizer, small_model):
    pair = I.translate_and_capture(small_model, tokenizer, "Ein Hund läuft.", "A dog runs.")
    data = I.bertviz_inputs(pair)
    n_src, n_tgt = len(data["encoder_tokens"]), len(data["decoder_tokens"])
    assert data["decoder_tokens"][0] == "<bos>" and data["encoder_tokens"] == pair["src_pieces"]
    assert [tuple(w.shape) for w in data["encoder_attention"]] == [(1, 2, n_src, n_src)] * 2
    assert [tuple(w.shape) for w in data["decoder_attention"]] == [(1, 2, n_tgt, n_tgt)] * 2
    assert [tuple(w.shape) for w in data["cross_attention"]] == [(1, 2, n_tgt, n_src)] * 2
    w = data["cross_attention"][0]
    assert w.dtype == torch.float64 and torch.equal(w, torch.round(w * 1000) / 1000)
    # rounded to 3 decimals for the page: at most half a unit of the third decimal (not a rounding error)
    torch.testing.assert_close(w, pair["capture"].weights["cross"][0].double(), atol=5e-4, rtol=0)
    with pytest.raises(ValueError):
        I.bertviz_inputs(pair, decimals=0)


@pytest.mark.parametrize("view", ["head", "model"])
def test_bertviz_view_markup(tokenizer, small_model, view):
    pytest.importorskip("bertviz", reason="bertviz is in the locks of requirements/ (the `viz` extra); not installed here")
    pair = I.translate_and_capture(small_model, tokenizer, "Ein Hund läuft.", "A dog runs.")
    html = I.bertviz_view(I.bertviz_inputs(pair), view=view).data
    assert html.count('<div id="bertviz-') == 1
    assert "<script src=" not in html  # no script tag that loads from a CDN
    assert html.count("<script") == 1 and "requirejs(['jquery', 'd3']" in html
    assert "typeof window.requirejs === 'function'" in html
    assert '"left_text": ["<bos>"' in html or '"left_text": [" Ein"' in html
    assert html.count('"attention": [{"name": "Encoder"') == 1  # the data once (bertviz also pastes it in a comment)
    with pytest.raises(ValueError):
        I.bertviz_view({}, view="neuron")


def test_bertviz_needs_no_network_and_no_hub():
    pytest.importorskip("bertviz", reason="bertviz is in the locks of requirements/ (the `viz` extra); not installed here")
    # In a fresh interpreter with every socket connection refused: import bertviz, draw both views.
    code = r"""
import socket, sys, torch
def refuse(*args, **kwargs):
    raise OSError("network access attempted")
socket.socket.connect = refuse
socket.create_connection = refuse
import bertviz
assert "transformers" not in sys.modules and "huggingface_hub" not in sys.modules, "bertviz imported a hub client"
att = [torch.full((1, 2, 3, 3), 1 / 3)]
tok = ["a", "b", "c"]
for view in (bertviz.head_view, bertviz.model_view):
    html = view(encoder_attention=att, decoder_attention=att, cross_attention=att, encoder_tokens=tok,
                decoder_tokens=tok, html_action="return").data
    assert "bertviz-" in html
assert "transformers" not in sys.modules and "huggingface_hub" not in sys.modules
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# ------------------------------------------------------------------------------------------------ plots

def test_head_grid_and_alignment_panels(model, batch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from tmlib.course import alignment_panels, head_grid

    table = I.head_statistics(model, [batch])
    ax = head_grid(table, "entropy", title="Entropy")
    assert ax.get_title() == "Entropy" and ax.get_xlabel() == "head"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["enc-self L0", "enc-self L1", "dec-self L0", "dec-self L1",
                                                            "cross L0", "cross L1"]
    with pytest.raises(ValueError, match="lacks"):
        head_grid(table, "no such column")
    with pytest.raises(ValueError, match="several rows"):
        head_grid(table.iloc[[0, 0]], "entropy")
    fig = alignment_panels([(np.eye(3), ["a", "b", "c"], ["x", "y", "z"]), (np.eye(2), ["d", "e"], ["u", "v"])],
                           titles=["one", "two"])
    assert [a.get_title() for a in fig.axes if a.get_title()] == ["one", "two"]
    with pytest.raises(ValueError):
        alignment_panels([])
    with pytest.raises(ValueError, match="do not match"):
        alignment_panels([(np.eye(3), ["a", "b"], ["x", "y", "z"])])
    ax = head_grid(table, "entropy", annot=False, cbar=False)
    assert not ax.texts and len(ax.figure.axes) == 1  # no numbers, no colour bar
    plt.close("all")
