"""Typical mistakes, per exercise, as code: each must score 0 on its exercise; the course's solution, full marks.

`tests/test_assignments.py` grades, per chapter, the course's solution and one submission per round of mistakes (the
k-th mistake of every exercise of the chapter in round k, the other exercises keeping the course's solution) and
asserts exactly that. To add a mistake, append a `Mistake` under the exercise's label:

* `Mistake("what the student got wrong", replace=[(text of the course's solution, what the student wrote)])`: the
  course's solution of the stub cell with those replacements (each text must occur in the solution, so that a
  mistake that no longer applies fails the test instead of passing it silently);
* `Mistake("...", code="the whole cell as the student wrote it")`;
* `Mistake("left as the stub", unanswered=True)`: the stub as handed out;
* `stub=k` for an exercise with more than one stub cell (default: its first).

A build-it whose stub carries `"forbid"` markup also gets, automatically, the mistake "calls the library's own
version" (`delegating`): the stub's function returning the forbidden reference's result.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Mistake:
    """One typical mistake of an exercise (see the module docstring)."""
    what: str
    replace: tuple = ()
    code: str | None = None
    stub: int = 0
    unanswered: bool = False

    def apply(self, solution: str) -> str | None:
        """The cell the student submits (None: the stub left as it is)."""
        if self.unanswered:
            return None
        if self.code is not None:
            return self.code
        for old, new in self.replace:
            if old not in solution:
                raise AssertionError(f"{self.what}: the solution no longer contains {old!r}; update the mistake")
            solution = solution.replace(old, new)
        return solution


def delegating(stub: str, forbidden: str) -> Mistake | None:
    """The mistake "calls the library's own version": the stub's function calling ``forbidden`` (a dotted name)."""
    m = re.search(r"^def (\w+)\(", stub, re.M)
    if m is None:
        return None
    module, _, name = forbidden.rpartition(".")
    return Mistake(f"calls {forbidden}", code=f"import {module}\n\n\ndef {m[1]}(*args, **kwargs):\n"
                                              f"    return {module}.{name}(*args, **kwargs)")


MISTAKES: dict[str, list[Mistake]] = {
    "ex-01-example3": [Mistake("a slip in the second decimal", code="my_answer = np.array([[2.26]])")],
    "ex-01-shift": [Mistake("the key-dependent shift not applied", code=(
        "u = np.array([3.0, -1.0])\n_, w_shifted = R.scaled_dot_product_attention(Q, K + u, V)\nw_other = w_shifted"))],
    "ex-01-temperature": [Mistake("left as the stub", unanswered=True)],
    "ex-01-softmax": [Mistake("no maximum subtracted: overflows", code=(
        "def stable_softmax(x):\n    return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)"))],
    "ex-01-masked": [Mistake("left as the stub", unanswered=True)],
    "ex-02-split-merge": [Mistake("heads cut without transposing", replace=(
        ("x = x.reshape(*lead, n, n_heads, d_model // n_heads)", "x = x.reshape(*lead, n_heads, n, d_model // n_heads)"),
        ("return np.swapaxes(x, -2, -3)  #", "return x  #")))],
    "ex-03-relu": [Mistake("sign slip in the new bias", code=(
        "b1_new = np.array([2.0, 0.0])\nout_new = R.feed_forward(x, w1, b1_new, w2, b2)"))],
    "ex-03-layernorm": [Mistake("unbiased variance", code=(
        "def my_layer_norm(x, gamma, beta, eps=1e-5):\n    return gamma * (x - x.mean(-1, keepdims=True)) / "
        "np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps) + beta"))],
    "ex-04-build-pe": [Mistake("the pair index i read as 2i", replace=(
        ("10000.0 ** (-np.arange(0, d_model, 2) / d_model)", "10000.0 ** (-np.arange(0, d_model // 2) / d_model)"),))],
    "ex-04-rope": [Mistake("the public check's inputs set to zero", code=(
        "rng_rope = np.random.default_rng(3)\nq_vec = k_vec = np.zeros(8)\nscores = [0.0, 0.0, 0.0]"))],
    "ex-05-decoder-layer": [Mistake("self-attention without the causal mask", replace=(
        (", mask=R.causal_mask(n_tgt))", ")"),))],
    "ex-06-gap": [Mistake("the public check's inputs chosen to agree", code=(
        "V10 = 2\nclosed_form = 0.0\nz = np.zeros(V10)"))],
    "ex-07-mha-module": [Mistake("scores not scaled by sqrt(d_k)", replace=(("/ self.d_k ** 0.5", ""),))],
    "ex-07-cache-cost": [Mistake("n set so that any count passes", code=(
        "n = 10**9\nwithout_cache = 5 * 10**8\nwith_cache = 1"))],
    "ex-08-train-step": [Mistake("padding counted in the loss", replace=(("ignore_index=pad_id, ", ""),))],
    "ex-08-greedy": [Mistake("the first position's logits", replace=(
        ("logits[:, -1].argmax(dim=-1)", "logits[:, 0].argmax(dim=-1)"),))],
    # the chapter on finding bugs: each exercise's stub is the planted bug ("left as the stub" = the bug left in)
    "ex-bugs-causal": [
        Mistake("the bug left in: the mask one key late", unanswered=True),
        Mistake("the mask flipped", replace=(("np.arange(n)[:, None] >= np.arange(n)[None, :]",
                                              "np.arange(n)[:, None] <= np.arange(n)[None, :]"),)),
        Mistake("the diagonal blocked too: position 1 sees nothing", replace=(
            ("np.arange(n)[:, None] >= np.arange(n)[None, :]", "np.arange(n)[:, None] > np.arange(n)[None, :]"),)),
        Mistake("the mask of the check's 6 positions", replace=(
            ("np.arange(n)[:, None] >= np.arange(n)[None, :]", "R.causal_mask(6)"),)),
    ],
    "ex-bugs-padding": [
        Mistake("the bug left in: the mask on the queries", unanswered=True),
        Mistake("the mask inverted", replace=(("allowed = real[:, None, :]", "allowed = ~real[:, None, :]"),)),
        Mistake("the mask on both axes: padded queries see nothing", replace=(
            ("allowed = real[:, None, :]", "allowed = real[:, None, :] & real[:, :, None]"),)),
        Mistake("padded keys zeroed after the softmax, rows not renormalised", replace=(
            ("    scores = np.where(allowed, scores, -np.inf)\n", ""),
            ("weights = weights / weights.sum(axis=-1, keepdims=True)",
             "weights = weights / weights.sum(axis=-1, keepdims=True) * allowed"))),
    ],
    "ex-bugs-softmax-axis": [
        Mistake("the bug left in: the softmax over the queries", unanswered=True),
        Mistake("the sum fixed, the maximum still per column", replace=(
            ("scores.max(axis=-1, keepdims=True)", "scores.max(axis=0, keepdims=True)"),)),
        Mistake("the result transposed instead", code=(
            "def attention_weights(q, k):\n    scores = q @ k.T / np.sqrt(q.shape[-1])\n"
            "    e = np.exp(scores - scores.max(axis=0, keepdims=True))\n"
            "    return (e / e.sum(axis=0, keepdims=True)).T")),
        Mistake("no maximum subtracted: overflows on large scores", replace=(
            ("np.exp(scores - scores.max(axis=-1, keepdims=True))", "np.exp(scores)"),)),
    ],
    "ex-bugs-scale": [
        Mistake("the bug left in: divided by the square root of n_q", unanswered=True),
        Mistake("divided by d_k, not its square root", replace=(("/ math.sqrt(q.shape[-1])", "/ q.shape[-1]"),)),
        Mistake("divided by a constant 8 (the square root of 64)", replace=(("/ math.sqrt(q.shape[-1])", "/ 8.0"),)),
        Mistake("the weights divided after the softmax", replace=(
            ("/ math.sqrt(q.shape[-1])", ""),
            ("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=-1) / math.sqrt(q.shape[-1])"))),
    ],
    "ex-bugs-log0": [
        Mistake("the bug left in: log of an underflowed probability", unanswered=True),
        Mistake("a small constant inside the log", code=(
            "def smoothed_loss(logits, targets, label_smoothing=0.1):\n    n, vocab = logits.shape\n"
            "    t = np.full((n, vocab), label_smoothing / vocab)\n    t[np.arange(n), targets] += 1 - label_smoothing\n"
            "    p = np.exp(logits - logits.max(axis=-1, keepdims=True))\n    p = p / p.sum(axis=-1, keepdims=True)\n"
            "    return float(-(t * np.log(p + 1e-12)).sum(axis=-1).mean())")),
        Mistake("the infinity replaced by a large number", code=(
            "def smoothed_loss(logits, targets, label_smoothing=0.1):\n    n, vocab = logits.shape\n"
            "    t = np.full((n, vocab), label_smoothing / vocab)\n    t[np.arange(n), targets] += 1 - label_smoothing\n"
            "    p = np.exp(logits - logits.max(axis=-1, keepdims=True))\n    p = p / p.sum(axis=-1, keepdims=True)\n"
            "    with np.errstate(divide='ignore'):\n"
            "        return float(np.nan_to_num(-(t * np.log(p)).sum(axis=-1).mean()))")),
        Mistake("the smoothing dropped: only the right token's log-probability", replace=(
            ("return float(-(t * log_p).sum(axis=-1).mean())", "return float(-log_p[np.arange(n), targets].mean())"),)),
    ],
    "ex-bugs-shift": [
        Mistake("the bug left in: the decoder reads the target unshifted", unanswered=True),
        Mistake("the tokens to predict shifted too", replace=(("tgt_out = tgt ", "tgt_out = with_bos[:, :-1] "),)),
        Mistake("BOS hard-coded as 1", replace=(("np.full((tgt.shape[0], 1), bos_id,", "np.full((tgt.shape[0], 1), 1,"),)),
        Mistake("the last token dropped instead of a BOS prepended", code=(
            "def teacher_forcing(tgt, bos_id):\n    return tgt[:, :-1], tgt[:, 1:]")),
    ],
    "ex-bugs-embed": [
        Mistake("the bug left in: no scale", unanswered=True),
        Mistake("scaled by d_model, not its square root", replace=(("* math.sqrt(d_model)", "* d_model"),)),
        Mistake("scaled by 8, the square root of the check's d_model", replace=(("* math.sqrt(d_model)", "* 8.0"),)),
        Mistake("the positional encodings scaled down instead", replace=(
            ("table[ids] * math.sqrt(d_model) + R.positional_encoding(n, d_model)",
             "table[ids] + R.positional_encoding(n, d_model) / math.sqrt(d_model)"),)),
    ],
    "ex-bugs-polarity": [
        Mistake("the bug left in: the course's mask handed to nn unchanged", unanswered=True),
        Mistake("a float mask of the same polarity (added, not blocking)", replace=(
            ("attn_mask=~allowed)", "attn_mask=allowed.double())"),)),
        Mistake("the mask negated and transposed", replace=(("attn_mask=~allowed)", "attn_mask=~allowed.T)"),)),
        Mistake("a causal mask built instead of the one given", replace=(
            ("attn_mask=~allowed)", "attn_mask=~causal_mask(x.shape[1]))"),)),
    ],
    "ex-bugs-dropout": [
        Mistake("the bug left in: dropout on during evaluation", unanswered=True),
        Mistake("the random state fixed instead of dropout turned off", replace=(
            ("    model.eval()                                                    # dropout off (no_grad does not do that)\n",
             "    torch.manual_seed(0)\n"),)),
        Mistake("model.eval() after the forward pass", replace=(
            ("    model.eval()                                                    # dropout off (no_grad does not do that)\n", ""),
            ("        return translation_loss(", "        model.eval()\n        return translation_loss("))),
    ],
}
