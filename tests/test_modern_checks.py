"""Chapter 13's check of Exercise 13.6 (causal grouped-query attention written by hand): it accepts the course's
solution and rejects each typical slip with a message that names it, never a value of the expected output."""
from __future__ import annotations

import math
import re

import pytest
import torch

from tmlib.course.modern_checks import check_alibi_slopes, check_grouped_query_attention


def _gqa(q, k, v, *, tiled=False, causal=True, scale=None, share_v=True):
    group = q.shape[1] // k.shape[1]
    k = k.repeat(1, group, 1, 1) if tiled else k.repeat_interleave(group, dim=1)
    if share_v:
        v = v.repeat(1, group, 1, 1) if tiled else v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(dim=-1) @ v


def test_grouped_query_attention_check_accepts_the_solution():
    assert check_grouped_query_attention(_gqa).startswith("correct")
    with pytest.raises(TypeError, match="still `...`"):
        check_grouped_query_attention(lambda q, k, v: ...)


@pytest.mark.parametrize("wrong, words", [
    (lambda q, k, v: _gqa(q, k, v, tiled=True), "order 0, 1, 0, 1"),
    (lambda q, k, v: _gqa(q, k, v, causal=False), "causal mask missing"),
    (lambda q, k, v: _gqa(q, k, v, scale=1.0), "not divided by sqrt"),
    (lambda q, k, v: _gqa(q, k, v, scale=1 / q.shape[-1]), "divided by d_k, not by sqrt"),
    (lambda q, k, v: _gqa(q, k.repeat_interleave(q.shape[1] // k.shape[1], dim=1).mean(1, keepdim=True).expand_as(k),
                          v), "not right yet"),  # the key heads averaged
    (lambda q, k, v: _gqa(q, k, v, share_v=False), "raises"),  # the values not shared: the shapes do not match
    (lambda q, k, v: _gqa(q[:, ::q.shape[1] // k.shape[1]], k, v), "one head per key/value head"),
    (lambda q, k, v: _gqa(q, k, v) * float("nan"), "not finite"),
])
def test_grouped_query_attention_check_names_each_slip_without_a_value(wrong, words):
    with pytest.raises(AssertionError, match=words) as err:
        check_grouped_query_attention(wrong)
    assert not re.search(r"\d\.\d", str(err.value)), str(err.value)  # no value of the output, only shapes


def test_grouped_query_attention_check_names_the_tiling_by_its_symptom_not_its_remedy():
    """The order 0, 1, 0, 1 is named; which torch function repeats in place is left to the student (reader r68)."""
    with pytest.raises(AssertionError, match="share one key/value head: the key/value heads are shared in the order "
                                             "0, 1, 0, 1$") as err:
        check_grouped_query_attention(lambda q, k, v: _gqa(q, k, v, tiled=True))
    assert "repeat" not in str(err.value) and "in place" not in str(err.value)


def test_grouped_query_attention_check_rejects_inputs_changed_in_place():
    def in_place(q, k, v):
        out = _gqa(q, k, v)
        q.zero_()
        return out
    with pytest.raises(AssertionError, match="in place"):
        check_grouped_query_attention(in_place)


def test_alibi_slopes_order_hint_says_largest_first():
    right = [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    with pytest.raises(AssertionError, match="extra ones, largest first"):
        check_alibi_slopes(right[:4] + [2.0 ** -3, 2.0 ** -1], 6)
