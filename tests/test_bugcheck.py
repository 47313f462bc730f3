"""tmlib.analysis.bugcheck: each planted bug is caught by its check, each correct version passes, by numbers."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tmlib import ref as R
from tmlib.analysis import bugcheck as B
from tmlib.course import check_causal, check_padding_invariance, check_rows_sum_to_one
from tmlib.model import make_model


def _qkv(n=5, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(n, d)), rng.normal(size=(n, d))


def test_attention_without_bug_is_the_reference():
    q, k, v = _qkv()
    mask = R.causal_mask(5)
    out, w = B.attention_with_bug(q, k, v, mask)
    ref_out, ref_w = R.scaled_dot_product_attention(q, k, v, mask)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)


def test_planted_masks_by_hand():
    q, k, v = _qkv(n=4)
    causal = R.causal_mask(4)
    _, flipped = B.attention_with_bug(q, k, v, causal, "mask flipped")
    assert (flipped[np.tril_indices(4, -1)] == 0).all() and (flipped[np.triu_indices(4)] > 0).all()
    _, late = B.attention_with_bug(q, k, v, causal, "mask one key late")
    assert ((late > 0) == np.tril(np.ones((4, 4), bool), 1)).all()
    _, inverted = B.attention_with_bug(q, k, v, causal, "mask polarity inverted")
    assert np.isnan(inverted[-1]).all() and ((inverted[:-1] > 0) == np.triu(np.ones((3, 4), bool), 1)).all()
    _, cols = B.attention_with_bug(q, k, v, None, "softmax over the queries")
    np.testing.assert_allclose(cols.sum(axis=0), 1.0, atol=1e-12)
    _, zeroed = B.attention_with_bug(q, k, v, causal, "mask after the softmax")
    assert zeroed[0, 0] < 1 and (zeroed[np.triu_indices(4, 1)] == 0).all()
    _, unscaled = B.attention_with_bug(q, k, v, None, "no 1/sqrt(d_k)")
    np.testing.assert_allclose(unscaled, R.softmax(q @ k.T), atol=1e-12)
    with pytest.raises(ValueError, match="unknown bug"):
        B.attention_with_bug(q, k, v, causal, "typo")
    with pytest.raises(ValueError, match="square mask"):
        B.attention_with_bug(q, k[:3], v[:3], np.ones((4, 3), bool), "mask flipped")


@pytest.mark.parametrize("bug", ["mask flipped", "mask one key late", "mask polarity inverted",
                                 "softmax over the queries"])
def test_causality_check_catches_mask_bugs(bug):
    x = np.random.default_rng(1).normal(size=(6, 4))
    fine = lambda z: B.attention_with_bug(z, z, z, R.causal_mask(6))[0]  # noqa: E731
    assert check_causal(fine, x).startswith("correct")
    # the hint names every mask bug the check is shown catching, the inverted convention included
    with pytest.raises(AssertionError, match=r"can see the future \(is the causal mask missing, flipped, off by one, "
                                             r"or of the opposite convention, True = blocked\?\)"):
        check_causal(lambda z: B.attention_with_bug(z, z, z, R.causal_mask(6), bug)[0], x)


def test_dependency_matrix_shows_the_leak():
    x = np.random.default_rng(2).normal(size=(5, 3))
    d = B.dependency_matrix(lambda z: B.attention_with_bug(z, z, z, R.causal_mask(5))[0], x)
    assert d.shape == (5, 5) and (d[np.triu_indices(5, 1)] == 0).all() and (np.diag(d) > 0).all()
    late = B.dependency_matrix(lambda z: B.attention_with_bug(z, z, z, R.causal_mask(5), "mask one key late")[0], x)
    assert (np.diag(late, 1) > 0.01).all() and (late[np.triu_indices(5, 2)] == 0).all()
    t = B.dependency_matrix(lambda z: z.cumsum(dim=1), torch.from_numpy(x[None]), axis=1)  # tensors, another axis
    assert (t[np.triu_indices(5, 1)] == 0).all() and (t[np.tril_indices(5)] > 0).all()


def test_padding_check_catches_the_padding_mask_on_the_queries():
    x = np.random.default_rng(3).normal(size=(2, 5, 4))
    real = np.array([[True] * 5, [True] * 3 + [False] * 2])
    keys = real[:, None, :] & np.ones((5, 1), bool)  # (batch, n_q, n_k): the padding mask on the keys
    assert check_padding_invariance(lambda z: B.attention_with_bug(z, z, z, keys)[0], x, real).startswith("correct")
    with pytest.raises(AssertionError, match="padding"):
        check_padding_invariance(lambda z: B.attention_with_bug(z, z, z, keys, "mask flipped")[0], x, real)


def test_rows_check_catches_softmax_over_the_queries_and_zeroing_after():
    q, k, v = _qkv()
    for bug in ("softmax over the queries", "mask after the softmax"):
        with pytest.raises(AssertionError, match="do not sum to 1"):
            check_rows_sum_to_one(B.attention_with_bug(q, k, v, R.causal_mask(5), bug)[1])


def test_no_leak():
    def shifted(tgt, bos_id=1):
        return np.concatenate([np.full((len(tgt), 1), bos_id), tgt[:, :-1]], axis=1), tgt

    tgt = np.random.default_rng(4).integers(3, 20, (3, 6))
    assert B.check_no_leak(shifted, tgt).startswith("correct")
    with pytest.raises(AssertionError, match="position 0 of the decoder input changes when target token 0 changes"):
        B.check_no_leak(lambda t: (t, t), tgt)
    with pytest.raises(AssertionError, match="what position 0 must predict does not change when target token 0 changes"):
        B.check_no_leak(lambda t: (shifted(t)[0], shifted(t)[0]), tgt)
    with pytest.raises(AssertionError, match="should both have the target's shape"):
        B.check_no_leak(lambda t: (t[:, :-1], t[:, 1:]), tgt)
    # a decoder input of BOS only leaks nothing but hides the target (a reader's wrong answer passed before)
    with pytest.raises(AssertionError, match="position 1 of the decoder input does not change when target token 0"):
        B.check_no_leak(lambda t: (np.full_like(t, 1), t), tgt)
    with pytest.raises(AssertionError, match="position 1 of the decoder input does not change when target token 0"):
        B.check_no_leak(lambda t: (np.concatenate([np.full((len(t), 2), 1), t[:, :-2]], axis=1), t), tgt)  # 2 late


def test_score_scale():
    def weights(scale):
        return lambda q, k: R.softmax(q @ k.T * scale(q.shape[-1]))

    assert abs(B.score_spread(weights(lambda d: d ** -0.5), 64) - 1) < 0.15
    assert abs(B.score_spread(weights(lambda d: 1.0), 64) - 8) < 1.2  # √64 times the spread
    assert B.check_score_scale(weights(lambda d: d ** -0.5)).startswith("correct")
    with pytest.raises(AssertionError, match="grows with d_k"):
        B.check_score_scale(weights(lambda d: 1.0))
    with pytest.raises(AssertionError, match="shrinks with d_k"):
        B.check_score_scale(weights(lambda d: 1.0 / d))
    with pytest.raises(AssertionError, match="grows with d_k"):
        B.check_score_scale(weights(lambda d: 1 / 8))  # a constant: right for one d_k only
    t = B.check_score_scale(lambda q, k: torch.softmax(q @ k.T / q.shape[-1] ** 0.5, -1), tensor=True)
    assert t.startswith("correct")
    with pytest.raises(AssertionError, match=r"shape \(64, 128\).*expected \(64, 128\)|expected \(64, 128\)"):
        B.score_spread(lambda q, k: R.softmax(k @ q.T), 16)


def test_token_signal():
    def embed(scale_tokens, scale_pe=1.0):
        return lambda ids, table: table[ids] * scale_tokens(table.shape[1]) + \
            scale_pe * R.positional_encoding(len(ids), table.shape[1])

    right = B.token_scale(embed(math.sqrt), 64)
    assert abs(right - 1) < 0.15
    assert B.token_scale(embed(lambda d: 1.0), 64) == pytest.approx(right / 8, rel=1e-9)  # unscaled: 1/sqrt(64)
    assert B.check_token_signal(embed(math.sqrt)).startswith("correct")
    with pytest.raises(AssertionError, match="words weigh less than 1.2 times their positions"):
        B.check_token_signal(embed(lambda d: 1.0))
    with pytest.raises(AssertionError, match="words weigh more than twice their positions"):
        B.check_token_signal(embed(lambda d: d))
    with pytest.raises(AssertionError, match="words weigh less than 1.2 times their positions at d_model = 256; "
                                             "the words weigh more than twice their positions at d_model = 16$"):
        B.check_token_signal(embed(lambda d: 8.0))  # right for d_model = 64 only
    with pytest.raises(AssertionError, match="words weigh less than 1.2 times their positions at every d_model "
                                             "checked, worst at d_model = 256$"):
        B.check_token_signal(embed(lambda d: 1.0), (16, 64, 256))  # the worse, the wider the model
    with pytest.raises(AssertionError, match="words weigh less than 1.2 times their positions at d_model = 64 and 256, "
                                             "worst at d_model = 256$"):
        B.check_token_signal(embed(lambda d: 4.0), (16, 64, 256))  # right for d_model = 16 only
    with pytest.raises(AssertionError, match="words weigh less"):
        B.check_token_signal(embed(lambda d: 1.0, scale_pe=0.1))  # the positions shrunk instead
    # √(d_model/2) gives the positions' own 0.71, which the old lower edge 0.7 let through at two widths of three
    assert all(abs(B.token_scale(embed(lambda d: math.sqrt(d / 2)), d) - 0.71) < 0.05 for d in (16, 64, 256))
    with pytest.raises(AssertionError, match="less than 1.2 times their positions at every d_model checked"):
        B.check_token_signal(embed(lambda d: math.sqrt(d / 2)), (16, 64, 256))
    # the right factor stays clear of the lower edge at every width the chapter's exercise tries
    assert min(B.token_scale(embed(math.sqrt), d) for d in (16, 64, 256)) > 0.85 + 0.1


def _smoothed(logits, targets, eps, log_p=None):
    n, vocab = logits.shape
    t = np.full((n, vocab), eps / vocab)
    t[np.arange(n), targets] += 1 - eps
    z = logits - logits.max(axis=-1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True)) if log_p is None else log_p(logits)
    return float(-(t * lp).sum(axis=-1).mean())


def test_confident_loss():
    assert B.check_confident_loss(_smoothed).startswith("correct")
    with np.errstate(divide="ignore", over="ignore"):
        with pytest.raises(AssertionError, match="not finite"):
            B.check_confident_loss(lambda z, t, e: _smoothed(z, t, e, lambda z: np.log(R.softmax(z))))
        with pytest.raises(AssertionError, match="should double"):
            B.check_confident_loss(lambda z, t, e: _smoothed(z, t, e, lambda z: np.log(R.softmax(z) + 1e-12)))
    with pytest.raises(AssertionError, match="should cost something"):
        B.check_confident_loss(lambda z, t, e: _smoothed(z, t, 0.0))


def test_queries_independent():
    q, k = np.random.default_rng(5).normal(size=(2, 4, 3))
    assert B.check_queries_independent(lambda q, k: R.softmax(q @ k.T), q, k).startswith("correct")
    with pytest.raises(AssertionError, match="query 1 change"):
        B.check_queries_independent(lambda q, k: R.softmax(q @ k.T - (q @ k.T).max(axis=0)), q, k)


def test_finite_and_repeatable():
    assert B.check_finite(np.array([1.0, 2.0])).startswith("correct")
    with pytest.raises(AssertionError, match=r"1 infinite, 1 NaN.*every score is masked"):
        B.check_finite(np.array([np.inf, np.nan, 0.0]))
    assert B.check_repeatable(lambda s: np.ones(3)).startswith("correct")
    with pytest.raises(AssertionError, match="changes with the random state"):
        B.check_repeatable(lambda s: np.random.default_rng(s).normal(size=3))


def test_first_loss_and_overfitting_one_batch():
    torch.manual_seed(0)
    vocab = 100
    model = make_model("tiny", vocab, dropout=0.0)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, vocab, (8, 5), generator=g)
    tgt_in = torch.cat([torch.ones(8, 1, dtype=torch.long), src], 1)
    tgt_out = torch.cat([src, torch.full((8, 1), 2)], 1)
    curve = B.overfit_batch(model, src, tgt_in, tgt_out, steps=60, accuracy=True)
    assert curve.shape == (60, 2)
    assert B.check_first_loss(curve[0, 0], vocab).startswith("correct")
    assert curve[-1, 0] < 0.1 * curve[0, 0] and curve[-1, 1] == 1.0
    with pytest.raises(AssertionError, match="below log .V. = 4.605, more than the 10% allowed"):
        B.check_first_loss(0.1, vocab)
    with pytest.raises(AssertionError, match="far above"):
        B.check_first_loss(30.0, vocab)
    with pytest.raises(AssertionError, match="log of 0"):
        B.check_first_loss(math.inf, vocab)


def test_first_loss_reports_how_far_from_log_v():
    """The band is lopsided: chapter 10's correct run starts 18% above log |V| (a fresh model with tied embeddings
    favours its input token), its leaking run 26% below."""
    assert B.check_first_loss(3.021, 13) == ("correct: the first loss 3.021 is 18% above log |V| = 2.565 "
                                             "(allowed: 10% below to 30% above)")
    assert B.check_first_loss(math.log(100) * 0.95, 100).startswith("correct: the first loss 4.375 is 5% below")
    with pytest.raises(AssertionError, match="1.887 is 26% below"):
        B.check_first_loss(1.887, 13)
    with pytest.raises(AssertionError, match="far above"):
        B.check_first_loss(2.565 * 1.35, 13)


def _layer_norm(x, axis=-1):
    return (x - x.mean(axis=axis, keepdims=True)) / np.sqrt(x.var(axis=axis, keepdims=True) + 1e-5)


def _heads(x, n_heads, split):
    """Causal attention of n_heads heads, Q = K = V = x (n, d) without projections; `split` cuts the heads."""
    n, d = x.shape
    h = split(x, n_heads, d // n_heads)  # (h, n, d_k)
    w = R.softmax(np.where(R.causal_mask(n), h @ h.transpose(0, 2, 1) / np.sqrt(d // n_heads), -np.inf))
    return (w @ h).transpose(1, 0, 2).reshape(n, d)


def test_independent_positions_and_heads():
    x = np.random.default_rng(6).normal(size=(2, 5, 8)) * 3.0 + 1.0  # (batch, n, d)
    assert B.check_independent(_layer_norm, x, 1, "layer norm").startswith("correct: layer norm computes each")
    with pytest.raises(AssertionError, match="output of position 1 changes when only the input of position 0"):
        B.check_independent(lambda z: _layer_norm(z, axis=1), x, 1, "layer norm")
    x2 = torch.from_numpy(x[0])  # (n, d) as a tensor: 2 heads of 4 features
    right = lambda z, h, d_k: z.reshape(len(z), h, d_k).transpose(1, 0, 2)  # noqa: E731
    wrong = lambda z, h, d_k: z.reshape(h, len(z), d_k)  # noqa: E731
    to_np = lambda f: lambda z: torch.from_numpy(f(np.asarray(z), 2))  # noqa: E731
    assert B.check_independent(to_np(lambda z, h: _heads(z, h, right)), x2, 4, unit="head", axis=-1).startswith(
        "correct")
    with pytest.raises(AssertionError, match="output of head 1 changes when only the input of head 0.*own features"):
        B.check_independent(to_np(lambda z, h: _heads(z, h, wrong)), x2, 4, unit="head", axis=-1,
                            hint="each head reads its own features")
    assert B.check_independent(lambda z: z * 2.0, x, 1, axis=-1, unit="feature").startswith("correct")


def _token_loss(logits, targets, pad_id, divide_by="real"):
    z = logits - logits.max(axis=-1, keepdims=True)
    nll = -np.take_along_axis(z - np.log(np.exp(z).sum(axis=-1, keepdims=True)), targets[..., None], -1)[..., 0]
    real = targets != pad_id
    count = {"real": real.sum(), "all": real.size, "sentences": len(targets)}[divide_by]
    return float((nll * real).sum() / count)


def test_loss_ignores_padding():
    for pad_id in (0, 3):
        assert B.check_loss_ignores_padding(_token_loss, pad_id).startswith("correct")
    with pytest.raises(AssertionError, match="padded with 4 more positions each give the loss"):
        B.check_loss_ignores_padding(lambda z, t, p: _token_loss(z, t, p, "all"))
    with pytest.raises(AssertionError, match="every logit equal each real token costs log"):
        B.check_loss_ignores_padding(lambda z, t, p: _token_loss(z, t, p, "sentences"))
    with pytest.raises(AssertionError, match="not finite"):
        B.check_loss_ignores_padding(lambda z, t, p: math.inf)

    def per_sentence_mean(logits, targets, pad_id):  # a reader's wrong answer to exercise 10.5 that passed before
        return float(np.mean([_token_loss(logits[b:b + 1], targets[b:b + 1], pad_id) for b in range(len(targets))]))

    with pytest.raises(AssertionError, match="sentences of 5, 3, 1 real tokens is not the mean over all its real"):
        B.check_loss_ignores_padding(per_sentence_mean)


def _without_own_work(code: str) -> str:
    """A public check without its ``check_own_work(...)`` statement, which the page does not show (it is about the
    student's notebook) and which prints nothing: it only raises."""
    import ast
    lines = code.split("\n")
    for s in ast.parse(code).body:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                getattr(s.value.func, "id", "") == "check_own_work":
            del lines[s.lineno - 1:s.end_lineno]
            break
    return "\n".join(lines)


def test_chapter_10_shows_each_exercise_with_what_its_check_says():
    """On the page, each exercise of chapter 10 is followed, before its solution, by a folded block (``site-only``
    Markdown) that shows the function as given (the stub) and the exercise's public check exactly as the student
    notebook has them, then by a cell whose code the page leaves out (``site-only``, ``remove-input``) that runs the
    check on the stub and prints what a notebook shows: what the check prints, then the last line of the error it
    raises (reader r52: the page showed a page-only wrapper around the check). The student notebook leaves both out,
    so it holds each stub and each public check once, and no solution. ``check_own_work`` prints nothing there (it
    only raises), so a student never reads "correct:" above a failing check."""
    import textwrap
    from pathlib import Path

    import nbformat
    import student_notebooks as sn

    path = Path(__file__).resolve().parent.parent / "notebooks" / "10_finding_bugs.ipynb"
    cells = nbformat.read(path, as_version=4).cells
    marks = [(c.metadata["assignment"], c.source) for c in cells if "assignment" in c.metadata]
    stubs = {m["exercise"]: m["stub"] for m, _ in marks if "stub" in m}
    public = {m["exercise"]: s for m, s in marks if m.get("check") == "public"}
    solutions = [s for m, s in marks if "stub" in m]
    assert len(stubs) == len(public) == 9
    code = "\n".join(c.source for c in sn.make(path).cells if c.cell_type == "code")
    for i, cell in enumerate(cells):
        label = next((lab for lab in stubs if f":label: {lab}" in cell.source), None)
        if cell.cell_type != "markdown" or label is None:
            continue
        folded, run = cells[i + 1], cells[i + 2]
        assert folded.cell_type == "markdown" and folded.metadata.get("tags") == ["site-only"], label
        assert folded.source == ("````{admonition} The function as given, and its check\n:class: dropdown\n```python\n"
                                 + stubs[label].rstrip("\n") + "\n```\n\n```python\n" + public[label].rstrip("\n")
                                 + "\n```\n````"), label
        assert run.cell_type == "code" and {"site-only", "remove-input"} <= set(run.metadata.get("tags", [])), label
        assert run.source == (stubs[label] + "\n\n\nwith what_the_check_says():  # the check, run on the function "
                              "as given\n" + textwrap.indent(_without_own_work(public[label]), "    ")), label
        said = "".join(o.get("text", "") for o in run.get("outputs", []))
        assert "\nAssertionError: " in "\n" + said and "Traceback" not in said and "FAILS" not in said, (label, said)
        assert f"{{solution-start}} {label}" in cells[i + 3].source, label
        assert code.count(stubs[label]) == 1 and code.count(public[label]) == 1, label
        assert "print(check_own_work(" not in public[label], label
    helper = next(c for c in cells if "def what_the_check_says" in c.source)
    assert set(helper.metadata["tags"]) == {"site-only", "remove-cell"}  # the page shows no tooling
    assert not any(s.strip() in code for s in solutions) and "what_the_check_says" not in code


def test_embedding_factor():
    def embed(scale_tokens, dtype=np.float64):
        return lambda ids, table: (table[ids] * scale_tokens(table.shape[1])
                                   + R.positional_encoding(len(ids), table.shape[1])).astype(dtype)

    assert B.token_factor(embed(math.sqrt), 64) == pytest.approx(8.0, rel=1e-12)
    assert B.check_embedding_factor(embed(math.sqrt), (16, 64, 256)).startswith("correct")
    assert B.check_embedding_factor(embed(math.sqrt, np.float32), (16, 64, 256)).startswith("correct")
    # 1.3 sqrt(d_model) keeps the tokens and positions in balance (a reader's wrong answer passed that check)
    assert B.check_token_signal(embed(lambda d: 1.3 * math.sqrt(d)), (16, 64, 256)).startswith("correct")
    with pytest.raises(AssertionError, match=r"multiplied by 5.2 at d_model = 16, 10.4 at d_model = 64, 20.8 at "
                                             r"d_model = 256: not the factor of §3.4 at d_model = 16, 64, 256$"):
        B.check_embedding_factor(embed(lambda d: 1.3 * math.sqrt(d)), (16, 64, 256))
    with pytest.raises(AssertionError, match="not the factor of §3.4 at d_model = 16, 256$"):
        B.check_embedding_factor(embed(lambda d: 8.0), (16, 64, 256))  # right for d_model = 64 only
    with pytest.raises(AssertionError, match="at d_model = 256$"):
        B.check_embedding_factor(embed(lambda d: math.sqrt(d) * (1 + 1e-3)), (256,))
    # the positions scaled too (a reader's wrong answer passed both checks): rejected, naming the slip, not a value
    both = lambda ids, table: (table[ids] + R.positional_encoding(len(ids), table.shape[1])) * math.sqrt(table.shape[1])
    assert B.check_token_signal(both, (16, 64, 256)).startswith("correct")
    with pytest.raises(AssertionError, match="positional encodings come out multiplied as well, at d_model = 16, 64, "
                                             "256 .*§3.4 multiplies only the token embeddings$") as e:
        B.check_embedding_factor(both, (16, 64, 256))
    assert "4.0" not in str(e.value) and "0.84" not in str(e.value)
    half = lambda ids, table: table[ids] * math.sqrt(table.shape[1]) + 0.5 * R.positional_encoding(len(ids), 16)
    with pytest.raises(AssertionError, match="multiplied as well, at d_model = 16 "):
        B.check_embedding_factor(half, (16,))
    other = lambda ids, table: table[ids] * math.sqrt(table.shape[1]) + R.positional_encoding(len(ids) + 1, 16)[1:]
    with pytest.raises(AssertionError, match="is not §3.5's positional encoding at d_model = 16: what is added"):
        B.check_embedding_factor(other, (16,))


def test_check_without_batch():
    x = np.random.default_rng(0).normal(size=(2, 5, 8))

    def norm(axis):
        return lambda x: (x - x.mean(axis=axis, keepdims=True)) / x.std(axis=axis, keepdims=True)

    assert B.check_without_batch(norm(-1), x, "norm").startswith("correct")
    with pytest.raises(AssertionError, match="fails on one sentence of shape \\(5, 8\\), without a batch axis"):
        B.check_without_batch(norm(2), x, "norm")  # right for (batch, n, d) only: axis 2 does not exist in 2-D
    with pytest.raises(AssertionError, match="another output than inside a batch"):
        B.check_without_batch(norm(1), x, "norm")  # axis 1: the positions in a batch, the features alone
    with pytest.raises(ValueError, match="shape \\(batch, n, d\\)"):
        B.check_without_batch(norm(-1), x[0])


def test_check_eps_inside_root_names_eps_outside_the_root_or_left_out():
    def norm(place):
        def fn(x, eps=1e-5):
            centred, var = x - x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
            return centred / {"inside": np.sqrt(var + eps), "outside": np.sqrt(var) + eps, "none": np.sqrt(var)}[place]
        return fn

    message = B.check_eps_inside_root(norm("inside"), what="ln")
    assert message.startswith("correct: ln of features of order 0.001")
    with pytest.raises(AssertionError, match="eps outside the square root") as err:
        B.check_eps_inside_root(norm("outside"), what="ln")
    assert "[" not in str(err.value)  # no array, no expected value
    with pytest.raises(AssertionError, match="without eps"):
        B.check_eps_inside_root(norm("none"), what="ln")
    with pytest.raises(AssertionError, match="is eps where the formula puts it"):
        B.check_eps_inside_root(lambda x: 2.0 * norm("inside")(x), what="ln")
    with pytest.raises(ValueError, match="positive"):
        B.check_eps_inside_root(norm("inside"), eps=0.0)


def test_check_without_batch_takes_several_inputs_and_a_pair_of_outputs():
    """Exercise 1.2's check calls it with queries, keys and values, and an attention that returns (output, weights)."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 3, 4)) for _ in range(3))

    def attention(q, k, v, transpose=lambda k: np.swapaxes(k, -1, -2)):
        w = R.softmax(q @ transpose(k) / 2.0)
        return w @ v, w

    assert B.check_without_batch(attention, (q, k, v), "attention", unit="sequence").startswith("correct")
    with pytest.raises(AssertionError, match="fails on one sequence of shape \\(3, 4\\).*swap the last two"):
        B.check_without_batch(lambda q, k, v: attention(q, k, v, lambda k: k.transpose(0, 2, 1)), (q, k, v),
                              "attention", unit="sequence", hint="swap the last two axes")
    with pytest.raises(AssertionError, match="another output than inside a batch"):  # the weights right, not the output
        B.check_without_batch(lambda q, k, v: (attention(q, k, v)[0] * q.ndim, attention(q, k, v)[1]), (q, k, v))
    with pytest.raises(ValueError, match="shape \\(batch, n, d\\)"):
        B.check_without_batch(attention, (q, k[0], v))


def test_call_with_mask():
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    allowed = torch.ones(4, 4).tril().bool()
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64).eval()

    def attend(x, mask):
        with torch.no_grad():
            return mha(x, x, x, attn_mask=mask)[0]

    assert B.call_with_mask(attend, x, ~allowed).shape == (2, 4, 8)
    with pytest.raises(AssertionError, match="added to the scores, so it must hold 0 .* and -inf"):
        B.call_with_mask(attend, x, allowed.float(), "attend")  # float32 ones and zeros on float64 scores
    with pytest.raises(ZeroDivisionError):
        B.call_with_mask(lambda x, m: 1 / 0, x, allowed)  # other errors pass through
