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

import ast
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
    """The mistake "calls the library's own version": the stub's first function calling ``forbidden`` (a dotted
    name), the rest of the stub cell kept as handed out (its decorators, and the given code after it, such as a
    wrapper that calls the student's function)."""
    m = re.search(r"^def (\w+)\(", stub, re.M)
    if m is None:
        return None
    module, _, name = forbidden.rpartition(".")
    tree = ast.parse(stub)
    fn = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == m[1])
    lines = stub.split("\n")
    lines[fn.lineno - 1:fn.end_lineno] = [f"def {m[1]}(*args, **kwargs):",
                                          f"    return {module}.{name}(*args, **kwargs)"]
    return Mistake(f"calls {forbidden}", code=f"import {module}\n\n\n" + "\n".join(lines))


MISTAKES: dict[str, list[Mistake]] = {
    "ex-01-example3": [Mistake("a slip in the second decimal", code="my_answer = np.array([[2.26]])")],
    "ex-01-sqrt": [Mistake("the spread with the paper's √d_k", code="std_dk = 1.0"),
                   Mistake("the variance instead of the standard deviation", code="std_dk = 1 / 64"),
                   Mistake("left as the stub", unanswered=True)],
    "ex-01-shift": [Mistake("the key-dependent shift not applied", code=(
        "u = np.array([3.0, -1.0])\n_, w_shifted = R.scaled_dot_product_attention(Q, K + u, V)\nw_other = w_shifted")),
        Mistake("any row-stochastic matrix", code=(
            "u = np.array([3.0, -1.0])\n_, w_shifted = R.scaled_dot_product_attention(Q, K + u, V)\nw_other = np.eye(3)")),
        Mistake("key 2 shifted instead of key 1", replace=(
            ("np.array([[3.0, -1.0], [0, 0], [0, 0]])", "np.array([[0, 0], [3.0, -1.0], [0, 0]])"),)),
        Mistake("w_other from scores not divided by sqrt(d_k)", replace=(
            ("_, w_other = R.scaled_dot_product_attention(Q, K + np.array([[3.0, -1.0], [0, 0], [0, 0]]), V)",
             "w_other = R.softmax(Q @ (K + np.array([[3.0, -1.0], [0, 0], [0, 0]])).T)"),))],
    "ex-01-temperature": [Mistake("left as the stub", unanswered=True),
                          Mistake("the scores multiplied by the temperature", replace=(("scores[2] / t", "scores[2] * t"),)),
                          Mistake("the already-scaled scores divided by the temperature", replace=(
                              ("scores[2] / t", "scores[2] / np.sqrt(2) / t"),))],
    "ex-01-softmax": [Mistake("no maximum subtracted: overflows", code=(
        "def stable_softmax(x):\n    return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)")),
        Mistake("the maximum of the whole array, not of each row", replace=(
            ("x.max(axis=-1, keepdims=True)", "x.max()"),)),
        Mistake("the sum over the wrong axis", replace=(("e.sum(axis=-1, keepdims=True)", "e.sum(axis=0, keepdims=True)"),)),
        Mistake("the maximum without keepdims", replace=(("x.max(axis=-1, keepdims=True)", "x.max(axis=-1)"),))],
    "ex-01-masked": [Mistake("scores not divided by sqrt(d_k)", replace=((" / np.sqrt(q.shape[-1])  #", "  #"),)),
                     Mistake("the mask applied to the weights after the softmax", replace=(
                         ("scores = np.where(mask, scores, -np.inf)", "scores = scores"),
                         ("weights = R.softmax(scores)", "weights = np.where(mask, R.softmax(scores), 0.0)"))),
                     Mistake("k.T reverses the batch axes too", replace=(("np.swapaxes(k, -1, -2)", "k.T"),)),
                     Mistake("a transpose for exactly one batch axis: fails on one sequence", replace=(
                         ("np.swapaxes(k, -1, -2)", "k.transpose(0, 2, 1)"),)),
                     Mistake("the mask's polarity inverted", replace=(
                         ("np.where(mask, scores, -np.inf)", "np.where(mask, -np.inf, scores)"),)),
                     Mistake("scores divided by the square root of the values' width d_v", replace=(
                         (" / np.sqrt(q.shape[-1])  #", " / np.sqrt(v.shape[-1])  #"),))],
    "ex-02-mha": [Mistake("scores not divided by sqrt(d_k)", replace=(("q @ k.T / np.sqrt(q.shape[-1])", "q @ k.T"),)),
                  Mistake("scores divided by sqrt(d_v)", replace=(
                      ("q @ k.T / np.sqrt(q.shape[-1])", "q @ k.T / np.sqrt(v.shape[-1])"),)),
                  Mistake("the softmax over the queries", replace=(
                      ("R.softmax(q @ k.T / np.sqrt(q.shape[-1]))", "R.softmax(q @ k.T / np.sqrt(q.shape[-1]), axis=0)"),)),
                  Mistake("the heads concatenated in the reverse order", replace=(
                      ("np.concatenate(heads, axis=-1) @ w_o", "np.concatenate(heads[::-1], axis=-1) @ w_o"),)),
                  Mistake("W^O left out", replace=(("np.concatenate(heads, axis=-1) @ w_o", "np.concatenate(heads, axis=-1)"),))],
    "ex-02-split-merge": [Mistake("heads cut without transposing", replace=(
        ("x = x.reshape(*lead, n, n_heads, d_model // n_heads)", "x = x.reshape(*lead, n_heads, n, d_model // n_heads)"),
        ("return np.swapaxes(x, -2, -3)  #", "return x  #"))),
        Mistake("merge without moving the heads back behind the positions", replace=(
            ("x = np.swapaxes(np.asarray(x, dtype=float), -2, -3)", "x = np.asarray(x, dtype=float)"),)),
        Mistake("the batch axes dropped (one sequence only)", replace=(
            ("*lead, n, d_model = x.shape", "lead, (n, d_model) = [], x.shape[-2:]"),))],
    "ex-02-memory": [Mistake("the layers left out", code="attention_bytes = 8 * 32 * 4096**2 * 2")],
    "ex-02-permute": [Mistake("the columns of W^O swapped instead of its rows", code=(
        "swap = [1, 0]\nw_o_swapped = m.w_o[:, [2, 3, 0, 1]]"))],
    "ex-02-one-head": [Mistake("the two-head output", code="out_one = output.copy()")],
    "ex-03-ffn": [Mistake("the ReLU left out", replace=(
        ("np.maximum(0.0, np.asarray(x, dtype=float) @ w1 + b1)", "np.asarray(x, dtype=float) @ w1 + b1"),)),
        Mistake("b1 and b2 exchanged", replace=(("@ w1 + b1)", "@ w1 + b2)"), ("hidden @ w2 + b2", "hidden @ w2 + b1"))),
        Mistake("the ReLU after the second linear map", code=(
            "def my_feed_forward(x, w1, b1, w2, b2):\n    return np.maximum(0.0, (np.asarray(x, dtype=float) @ w1 + b1) @ w2 + b2)")),
        Mistake("W1 transposed", replace=(("@ w1 + b1", "@ w1.T + b1"),))],
    "ex-03-relu": [Mistake("sign slip in the new bias", code=(
        "b1_new = np.array([2.0, 0.0])\nout_new = R.feed_forward(x, w1, b1_new, w2, b2)"))],
    "ex-03-layernorm": [Mistake("unbiased variance", code=(
        "def my_layer_norm(x, gamma, beta, eps=1e-5):\n    return gamma * (x - x.mean(-1, keepdims=True)) / "
        "np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps) + beta")),
        Mistake("epsilon outside the square root", replace=(("np.sqrt(var + eps)", "(np.sqrt(var) + eps)"),)),
        Mistake("the statistics over the wrong axis", replace=(
            ("mu = x.mean(axis=-1, keepdims=True)", "mu = x.mean(axis=0, keepdims=True)"),
            ("var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)", "var = ((x - mu) ** 2).mean(axis=0, keepdims=True)")))],
    "ex-03-encoder-layer": [Mistake("the pair returned as (out, z)", replace=(("    return z, out", "    return out, z"),)),
        Mistake("the residual left out of the self-attention sub-layer", replace=(
        ("R.layer_norm(x + R.multi_head_attention(", "R.layer_norm(R.multi_head_attention("),)),
        Mistake("pre-LN instead of the paper's post-LN", code=(
            "def my_encoder_layer(x, self_attn, ffn):\n    w_q, w_k, w_v, w_o = self_attn\n    n = R.layer_norm(x)\n"
            "    z = x + R.multi_head_attention(n, n, n, w_q, w_k, w_v, w_o)[0]\n"
            "    return z, z + R.feed_forward(R.layer_norm(z), *ffn)")),
        Mistake("the feed-forward network fed the layer's input", replace=(("R.feed_forward(z, *ffn)", "R.feed_forward(x, *ffn)"),))],
    "ex-03-ln-invariance": [
        Mistake("LN(x) whatever the sign of a", replace=(("return np.sign(a) * np.asarray", "return np.asarray"),)),
        Mistake("a x + b applied to LN(x)", replace=(
            ("return np.sign(a) * np.asarray(ln_x, dtype=float)", "return a * np.asarray(ln_x, dtype=float) + b"),)),
        Mistake("LN(a x + b) normalised again with R.layer_norm", replace=(
            ("return np.sign(a) * np.asarray(ln_x, dtype=float)",
             "return R.layer_norm(a * np.asarray(ln_x, dtype=float) + b, eps=0.0)"),))],
    # chapter 4 (each mistake is caught by the public check; the hidden test agrees)
    "ex-04-build-pe": [
        Mistake("the pair index i read as 2i (exponent halved)", replace=(
            ("10000.0 ** (-np.arange(0, d_model, 2) / d_model)", "10000.0 ** (-np.arange(0, d_model // 2) / d_model)"),)),
        Mistake("the factor 2 applied twice (exponent doubled)", replace=(
            ("10000.0 ** (-np.arange(0, d_model, 2) / d_model)", "10000.0 ** (-2 * np.arange(0, d_model, 2) / d_model)"),)),
        Mistake("sin and cos swapped", replace=(("pe_[:, 0::2] = np.sin(", "pe_[:, 0::2] = np.cos("),
                                                ("pe_[:, 1::2] = np.cos(", "pe_[:, 1::2] = np.sin("))),
        Mistake("positions counted from 1", replace=(("np.arange(seq_len)[:, None]", "np.arange(1, seq_len + 1)[:, None]"),)),
        Mistake("sines in the first half, cosines in the second", replace=(
            ("pe_[:, 0::2] = np.sin(", "pe_[:, :d_model // 2] = np.sin("),
            ("pe_[:, 1::2] = np.cos(", "pe_[:, d_model // 2:] = np.cos("))),
    ],
    "ex-04-pe3": [
        Mistake("rounded to 3 decimals", code="answer = [0.141, -0.99, 0.03, 0.9996]"),
        Mistake("degrees instead of radians", code=(
            "answer = [np.sin(np.radians(3)), np.cos(np.radians(3)), np.sin(np.radians(0.03)), np.cos(np.radians(0.03))]")),
        Mistake("the doubled exponent: pair 1 at 3/10000", code=(
            "answer = [np.sin(3), np.cos(3), np.sin(3 / 10000), np.cos(3 / 10000)]")),
        Mistake("positions counted from 1 (PE of the third token, pos = 2)", code=(
            "answer = [np.sin(2), np.cos(2), np.sin(2 / 100), np.cos(2 / 100)]")),
        Mistake("the angles converted to degrees and given to the radian sin", code=(
            "answer = [np.sin(np.degrees(3)), np.cos(np.degrees(3)),"
            " np.sin(np.degrees(0.03)), np.cos(np.degrees(0.03))]")),
        Mistake("the fourth position counted from 0 (pos = 4)", code=(
            "answer = [np.sin(4), np.cos(4), np.sin(4 / 100), np.cos(4 / 100)]")),
    ],
    "ex-04-wavelength": [
        Mistake("the dimension 2i instead of the pair i", code="i_best = 20"),
        Mistake("the neighbouring pair", code="i_best = 9"),
        Mistake("left as the stub", unanswered=True),
    ],
    "ex-04-rope": [
        Mistake("the public check's inputs set to zero", code=(
            "rng_rope = np.random.default_rng(3)\nq_vec = k_vec = np.zeros(8)\nscores = [0.0, 0.0, 0.0]")),
        Mistake("no rotation: q · k three times", code=(
            "rng_rope = np.random.default_rng(3)\nq_vec, k_vec = rng_rope.normal(size=8), rng_rope.normal(size=8)\n"
            "scores = [float(q_vec @ k_vec)] * 3")),
        Mistake("the key rotated by the transpose", replace=(
            ("(k_vec @ R.relative_position_matrix(n, 8))", "(k_vec @ R.relative_position_matrix(n, 8).T)"),)),
        Mistake("both rotated by the query's position", replace=(
            ("(k_vec @ R.relative_position_matrix(n, 8))", "(k_vec @ R.relative_position_matrix(m, 8))"),)),
    ],
    # chapter 5
    "ex-05-cross": [
        Mistake("scores not scaled by sqrt(d_k)", replace=(("a = np.exp(1 / np.sqrt(2))", "a = np.exp(1.0)"),)),
        Mistake("the old query (1, 1)", code="my_weights = np.array([np.exp(1 / np.sqrt(2))] * 2 + [np.exp(np.sqrt(2))]) / "
                                            "(2 * np.exp(1 / np.sqrt(2)) + np.exp(np.sqrt(2)))"),
        Mistake("weights not normalised", replace=(("/ (1 + a + a * a)", ""),)),
        Mistake("the query read as (2, 1)", replace=(("np.array([1.0, a, a * a])", "np.array([a * a, a, a * a * a])"),)),
        Mistake("right weights, the scores not scaled by sqrt(d_k)", replace=(
            ("my_scores = np.array([1.0, 2.0, 3.0]) / np.sqrt(2)", "my_scores = np.array([1.0, 2.0, 3.0])"),)),
        Mistake("right weights, the scores shifted by their maximum", replace=(
            ("my_scores = np.array([1.0, 2.0, 3.0]) / np.sqrt(2)", "my_scores = (np.array([1.0, 2.0, 3.0]) - 3) / np.sqrt(2)"),)),
    ],
    "ex-05-prefix": [
        Mistake("the unchanged causal mask", code="n_seq, p = 5, 2\nprefix_mask = R.causal_mask(n_seq)"),
        Mistake("the prompt vector broadcast along the queries", replace=(("prefix_keys[None, :]", "prefix_keys[:, None]"),)),
        Mistake("AND instead of OR", replace=(("R.causal_mask(n_seq) | prefix_keys", "R.causal_mask(n_seq) & prefix_keys"),)),
        Mistake("an integer mask", replace=(("prefix_keys[None, :]  #", "prefix_keys[None, :].astype(int)  #"),)),
    ],
    "ex-05-decoder-layer": [
        Mistake("self-attention without the causal mask", replace=((", mask=R.causal_mask(n_tgt))", ")"),)),
        Mistake("cross-attention over the decoder itself", replace=(
            ("R.multi_head_attention(a, memory, memory, *cross_attn)", "R.multi_head_attention(a, a, a, *cross_attn)"),)),
        Mistake("pre-LN instead of the paper's post-LN", code=(
            "def my_decoder_layer(y, memory, self_attn, cross_attn, ffn):\n    n = y.shape[0]\n"
            "    a = y + R.multi_head_attention(R.layer_norm(y), R.layer_norm(y), R.layer_norm(y), *self_attn, "
            "mask=R.causal_mask(n))[0]\n"
            "    c = a + R.multi_head_attention(R.layer_norm(a), memory, memory, *cross_attn)[0]\n"
            "    return c + R.feed_forward(R.layer_norm(c), *ffn)")),
        Mistake("the feed-forward sub-layer without its residual", replace=(
            ("R.layer_norm(c + R.feed_forward(c, *ffn))", "R.layer_norm(R.feed_forward(c, *ffn))"),)),
        Mistake("the cross-attention's queries and memory swapped", replace=(
            ("R.multi_head_attention(a, memory, memory, *cross_attn)", "R.multi_head_attention(memory, a, a, *cross_attn)"),)),
        Mistake("the cross-attention with the self-attention's weights", replace=(
            ("R.multi_head_attention(a, memory, memory, *cross_attn)", "R.multi_head_attention(a, memory, memory, *self_attn)"),)),
        Mistake("the cross-attention's queries from the layer's input y", replace=(
            ("R.multi_head_attention(a, memory, memory, *cross_attn)", "R.multi_head_attention(y, memory, memory, *cross_attn)"),)),
    ],
    # chapter 6
    "ex-06-peak": [
        Mistake("left as the stub", unanswered=True),
        Mistake("half the peak on the way up (the warm-up branch)", replace=(
            ("half_step = 2**2 * 4000", "half_step = 4000 // 2"),)),
        Mistake("a 1/s decay: doubling the step", replace=(
            ("half_step = 2**2 * 4000", "half_step = 2 * 4000"),)),
        Mistake("the steps counted from the peak", replace=(
            ("half_step = 2**2 * 4000", "half_step = 2**2 * 4000 - 4000"),)),
        Mistake("the square root the wrong way: sqrt(2) times the peak's step", replace=(
            ("half_step = 2**2 * 4000", "half_step = round(math.sqrt(2) * 4000)"),)),
        Mistake("solved from the printed, rounded peak 6.988e-4", replace=(
            ("half_step = 2**2 * 4000", "half_step = round(1 / (512 * (6.988e-4 / 2) ** 2))"),)),
        Mistake("calls R.noam_lr, which the statement rules out (issue 24)", code=(
            "half_step = next(s for s in range(4001, 40_001)\n"
            "                 if R.noam_lr(s, 512, 4000) <= R.noam_lr(4000, 512, 4000) / 2 * (1 + 1e-12))")),
        Mistake("calls the library's schedule, which the statement rules out", code=(
            "from tmlib.training import NoamSchedule\n"
            "base = NoamSchedule(512, 4000)\n"
            "half_step = next(s for s in range(4001, 40_001) if base(s - 1) <= base(3999) / 2 * (1 + 1e-12))")),
    ],
    "ex-06-gap": [
        Mistake("nothing minimised (issue 24)", code="closed_form = 0\n\ndef descend(lr, steps):\n    return np.zeros(10)\n\n"
                                                      "z_opt = descend(1.0, 5000)"),
        Mistake("the closed form's logits, no descent (issue 24)", code=(
            "closed_form = math.log(0.91 / 0.01)\n\ndef descend(lr, steps):\n"
            "    return np.log(R.label_smoothing_targets([0], 10, 0.1, 'uniform')[0])\n\nz_opt = descend(1.0, 5000)")),
        Mistake("gradient ascent: the step's sign flipped", replace=(
            ("z = z - lr * (R.softmax(z) - t10)", "z = z + lr * (R.softmax(z) - t10)"),)),
        Mistake("the gradient of the unsmoothed loss (a one-hot target)", replace=(
            ("z = z - lr * (R.softmax(z) - t10)", "z = z - lr * (R.softmax(z) - np.eye(10)[0])"),)),
        Mistake("the gradient taken once, at the start", replace=(
            ("z = z - lr * (R.softmax(z) - t10)", "z = z - lr * (R.softmax(np.zeros(10)) - t10)"),)),
        Mistake("the exclusive convention's gap", replace=(("closed_form = math.log(0.91 / 0.01)",
                                                            "closed_form = math.log(0.9 / (0.1 / 9))"),)),
        Mistake("too few gradient steps", replace=(("z_opt = descend(1.0, 5000)", "z_opt = descend(1.0, 20)"),)),
        Mistake("z_opt written down from the closed form, not taken from the run", replace=(
            ("z_opt = descend(1.0, 5000)", "z_opt = np.log(t10)"),)),
    ],
    "ex-06-lrate": [
        Mistake("the warm-up exponent -0.5 instead of -1.5: the peak moves", replace=(
            ("step * warmup_steps ** -1.5", "step * warmup_steps ** -0.5"),)),
        Mistake("d_model^-0.5 left out", replace=(("return d_model ** -0.5 * min(", "return min("),)),
        Mistake("max instead of min", replace=(("* min(step", "* max(step"),)),
        Mistake("the paper's warm-up hard-coded: the warmup_steps argument ignored", replace=(
            ("step * warmup_steps ** -1.5", "step * 4000 ** -1.5"),)),
    ],
    "ex-06-smoothed-loss": [
        Mistake("the smoothing mass spread over V - 1 classes (the exclusive target)", replace=(
            ("np.full((n, V), label_smoothing / V)", "np.full((n, V), label_smoothing / (V - 1))"),
            ("t[np.arange(n), targets] += 1.0 - label_smoothing", "t[np.arange(n), targets] = 1.0 - label_smoothing"))),
        Mistake("padding not excluded", replace=(("per_position[real].mean()", "per_position.mean()"),)),
        Mistake("log of a softmax that underflows: log 0", replace=(
            ("log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))",
             "log_p = np.log(np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True))"),)),
        Mistake("a mean over positions and classes instead of a sum over the classes", replace=(
            ("return float(per_position[real].mean())", "return float(-(t * log_p)[real].mean())"),)),
        Mistake("the target row not normalised: 1 - eps + eps on the true class", replace=(
            ("t[np.arange(n), targets] += 1.0 - label_smoothing", "t[np.arange(n), targets] += 1.0"),)),
        Mistake("padded rows zeroed, then a mean over all n positions", replace=(
            ("return float(per_position[real].mean())", "return float((per_position * real).sum() / n)"),)),
        Mistake("a sum over the real positions, not their mean", replace=(
            ("return float(per_position[real].mean())", "return float(per_position[real].sum())"),)),
    ],
    "ex-06-smoothing-mass": [
        Mistake("left as the stub", unanswered=True),
        Mistake("per_wrong of the uniform convention", replace=(
            ("per_wrong = eps / (V_paper - 1)", "per_wrong = eps / V_paper"),)),
        Mistake("times_larger as 1 / per_wrong", replace=(
            ("times_larger = (1 - eps) / per_wrong", "times_larger = 1 / per_wrong"),)),
        Mistake("uniform_change without its sign", replace=(
            ("uniform_change = (eps / V_paper - per_wrong) / per_wrong",
             "uniform_change = (per_wrong - eps / V_paper) / per_wrong"),)),
    ],
    "ex-07-wrong-view": [
        Mistake("left as the stub", unanswered=True),
        Mistake("rows_from of the true split: one token a row", replace=(
            ("rows_from = [1, 1, 2]", "rows_from = [1, 2, 3]"),)),
        Mistake("rows_from counted from 0", replace=(("rows_from = [1, 1, 2]", "rows_from = [0, 0, 1]"),)),
        Mistake("the true split instead of the shortcut", replace=(
            ("wrong = q.view(1, 2, 3, 2)", "wrong = q.view(1, 3, 2, 2).transpose(1, 2)"),)),
    ],
    "ex-07-merge": [
        Mistake("left as the stub", unanswered=True),
        Mistake("merged without the transpose: each head's positions glued in turn", replace=(
            ("merged = heads.transpose(1, 2).contiguous().view(1, 3, 4)",
             "merged = heads.contiguous().view(1, 3, 4)"),)),
        Mistake("stride_t: the stride of heads itself, before the transpose", replace=(
            ("stride_t = (12, 2, 6, 1)", "stride_t = (12, 6, 2, 1)"),)),
        Mistake("stride_t: the stride of the contiguous copy", replace=(
            ("stride_t = (12, 2, 6, 1)", "stride_t = (12, 4, 2, 1)"),)),
        Mistake("view on the transposed tensor without contiguous(): RuntimeError", replace=(
            ("merged = heads.transpose(1, 2).contiguous().view(1, 3, 4)",
             "merged = heads.transpose(1, 2).view(1, 3, 4)"),)),
        Mistake("the head and d_v axes exchanged: the heads' columns interleaved", replace=(
            ("merged = heads.transpose(1, 2).contiguous().view(1, 3, 4)",
             "merged = heads.permute(0, 2, 3, 1).contiguous().view(1, 3, 4)"),)),
        Mistake("the heads in reverse order", replace=(
            ("merged = heads.transpose(1, 2)", "merged = heads.flip(1).transpose(1, 2)"),)),
    ],
    "ex-07-masks": [
        Mistake("left as the stub", unanswered=True),
        Mistake("a finite -1e9 instead of -inf", replace=(
            ('masked_fill(padding, float("-inf"))', "masked_fill(padding, -1e9)"),)),
        Mistake("a boolean mask instead of an additive one", replace=(
            ('additive = torch.zeros(2, 1, 1, 3, dtype=torch.float64).masked_fill(padding, float("-inf"))',
             "additive = ~padding"),)),
        Mistake("a 0/1 additive mask: adds 1 at the padding, blocks nothing", replace=(
            ('masked_fill(padding, float("-inf"))', "masked_fill(padding, 1.0)"),)),
        Mistake("the additive mask's polarity inverted: -inf at the real tokens", replace=(
            ("padding = ~real_keys[:, None, None, :]", "padding = real_keys[:, None, None, :]"),)),
        Mistake("the additive mask without the broadcast axes (batch, n_k)", replace=(
            ("additive = torch.zeros(2, 1, 1, 3, dtype=torch.float64).masked_fill(padding, float(\"-inf\"))",
             "additive = torch.zeros(2, 3, dtype=torch.float64).masked_fill(~real_keys, float(\"-inf\"))"),)),
    ],
    "ex-07-mha-module": [
        Mistake("scores not scaled by sqrt(d_k)", replace=(("/ self.d_k ** 0.5", ""),)),
        Mistake("the mask not applied", replace=((
            'scores = scores.masked_fill(~attn_mask, float("-inf"))', "scores = scores"),)),
        Mistake("mask polarity inverted: True read as blocked", replace=(("masked_fill(~attn_mask,", "masked_fill(attn_mask,"),)),
        Mistake("heads split without transposing", replace=((
            "x.view(x.shape[0], x.shape[1], self.n_heads, self.d_k).transpose(1, 2)",
            "x.view(x.shape[0], self.n_heads, x.shape[1], self.d_k)"),)),
        Mistake("softmax over the queries instead of the keys", replace=(
            ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),)),
        Mistake("heads merged without the transpose", replace=(
            ("concat = heads.transpose(1, 2).reshape(batch, n_q, -1)", "concat = heads.reshape(batch, n_q, -1)"),)),
        Mistake("scores divided by sqrt(d_model)", replace=(("/ self.d_k ** 0.5", "/ (self.n_heads * self.d_k) ** 0.5"),)),
        Mistake("the attention handed to F.scaled_dot_product_attention inside forward", replace=(
            ("heads = torch.softmax(scores, dim=-1) @ v",
             "heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)"),)),
        Mistake("a subclass of the library's MultiHeadAttention that runs its forward", replace=(
            ("class MyMultiHeadAttention(nn.Module):",
             "from tmlib.model import MultiHeadAttention\n\n\nclass MyMultiHeadAttention(MultiHeadAttention):"),
            ("        super().__init__()\n", "        super().__init__(d_model, n_heads)\n"),
            ("        q = self.split(self.w_q(query))",
             "        return super().forward(query, key, value, attn_mask=attn_mask)\n"
             "        q = self.split(self.w_q(query))"),)),
    ],
    "ex-07-cache-cost": [
        Mistake("n set so that any count passes", code=(
            "n = 10**9\nwithout_cache = 5 * 10**8\nwith_cache = 1\ncache_numbers = 1")),
        Mistake("the cache's values forgotten: keys only", replace=(
            ("cache_numbers = 2 * n * d ", "cache_numbers = n * d "),)),
        Mistake("the cache added up over the steps", replace=(
            ("cache_numbers = 2 * n * d ", "cache_numbers = 2 * d * without_cache "),)),
    ],
    "ex-08-count": [
        Mistake("the learned position table forgotten", replace=(
            ("gpt2_small = vocab * d + n_positions * d + layers + ln", "gpt2_small = vocab * d + layers + ln"),)),
        Mistake("the LayerNorms forgotten", replace=(("ln = 2 * d", "ln = 0"),)),
        Mistake("cross-attention counted, as in the encoder-decoder's decoder", replace=(
            ("layers = n_layers * (attn + ffn + 2 * ln)", "layers = n_layers * (2 * attn + ffn + 3 * ln)"),)),
        Mistake("the attention biases forgotten", replace=(("attn = 4 * (d * d + d)", "attn = 4 * d * d"),)),
        Mistake("three LayerNorms per layer, as in the encoder-decoder's decoder", replace=(
            ("layers = n_layers * (attn + ffn + 2 * ln)", "layers = n_layers * (attn + ffn + 3 * ln)"),)),
    ],
    "ex-08-train-step": [
        Mistake("padding counted in the loss", replace=(("ignore_index=pad_id, ", ""),)),
        Mistake("no label smoothing", replace=(("label_smoothing=label_smoothing)", "label_smoothing=0.0)"),)),
        Mistake("label smoothing by hand in the exclusive convention, ε/(V - 1) on each other class", replace=((
            "    loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),\n"
            "                                       ignore_index=pad_id, label_smoothing=label_smoothing)",
            "    log_p = logits.log_softmax(dim=-1)\n"
            "    target = torch.full_like(log_p, label_smoothing / (log_p.shape[-1] - 1))\n"
            "    target.scatter_(-1, tgt_out[..., None], 1 - label_smoothing)\n"
            "    loss = -(target * log_p).sum(-1)[tgt_out != pad_id].mean()"),)),
        Mistake("the schedule stepped before the optimizer", replace=((
            "    optimizer.step()                                                    # Adam (§5.3)\n"
            "    scheduler.step()                                                    # the next step's learning rate\n",
            "    scheduler.step()\n    optimizer.step()\n"),)),
        Mistake("gradients zeroed between backward and the step", replace=((
            "optimizer.zero_grad()\n    loss.backward()", "loss.backward()\n    optimizer.zero_grad()"),)),
        Mistake("no clipping", replace=((
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)        # global gradient norm <= max_norm\n",
            ""),)),
        Mistake("the schedule never stepped", replace=((
            "    scheduler.step()                                                    # the next step's learning rate\n",
            ""),)),
        Mistake("gradients never cleared", replace=(("    optimizer.zero_grad()\n", ""),)),
        Mistake("each gradient entry clipped (clip_grad_value_), not the global norm", replace=((
            "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)",
            "torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)"),)),
    ],
    "ex-08-preln": [
        Mistake("only the first encoder layer run", replace=(
            ("enumerate(pre.encoder.layers)", "enumerate(pre.encoder.layers[:1])"),)),
        Mistake("each layer fed the embedded input, not the previous layer's output", replace=(
            ("last_layer = layer(last_layer, real_keys",
             "last_layer = layer(pre.positional(pre.src_embed(src)), real_keys"),)),
        Mistake("the padding mask not passed", replace=(("real_keys=pre.real_tokens(src)", "real_keys=None"),)),
    ],
    "ex-08-greedy": [
        Mistake("the first position's logits", replace=(
            ("logits[:, -1].argmax(dim=-1)", "logits[:, 0].argmax(dim=-1)"),)),
        Mistake("every sentence stops at the first EOS of the batch", replace=(("if ended.all():", "if ended.any():"),)),
        Mistake("a finished sentence keeps growing", replace=(("if not ended[i]:", "if next_token[i] != eos_id:"),)),
        Mistake("one step short of max_len", replace=(("for _ in range(max_len):", "for _ in range(max_len - 1):"),)),
    ],
    "ex-12-kv-big": [
        Mistake("keys counted, values forgotten", replace=(
            ("per_position = 2 * n_layers * d_model * bytes_per_element", "per_position = n_layers * d_model * bytes_per_element"),)),
        Mistake("the cross-attention keys and values of the source left out", replace=(
            ("batch * (n_tokens + src_len) * per_position", "batch * n_tokens * per_position"),)),
        Mistake("four bytes per number whatever the dtype", replace=(
            ("2 * n_layers * d_model * bytes_per_element", "2 * n_layers * d_model * 4"),)),
    ],
    "ex-12-causal": [
        Mistake("a new running maximum does not rescale the old sum", replace=(
            ("l * rescale + p.sum(axis=1, keepdims=True)", "l + p.sum(axis=1, keepdims=True)"),)),
        Mistake("causal mask off by one: a query sees the next key", replace=(
            ("[None, :] > rows[:, None]\n", "[None, :] > rows[:, None] + 1\n"),)),
        Mistake("scores not scaled by 1/sqrt(d_k)", replace=(
            ("v.shape[1], 1.0 / np.sqrt(q.shape[1])", "v.shape[1], 1.0"),)),
        Mistake("no block pair skipped: the future blocks masked instead", replace=(
            ("if k0 > rows[-1]:", "if False:"),)),
        Mistake("the skipped queries counted, not the skipped block pairs", replace=(
            ("                skipped += 1\n", "                skipped += len(rows)\n"),)),
    ],
    "ex-12-mfu-big": [
        Mistake("one forward pass, not a training step", replace=(("return 3 * (encoder", "return (encoder"),)),
        Mistake("the decoder's feed-forward counted as one matrix", replace=(
            ("+ 4 * T * d * f)", "+ 2 * T * d * f)"),)),
        Mistake("the output projection left out", replace=(("(encoder + decoder + 2 * T * d * vocab)", "(encoder + decoder)"),)),
        Mistake("the masked self-attention's scores halved", replace=(("4 * T * T * d", "2 * T * T * d"),)),
    ],
    "ex-12-layer-crossover": [
        Mistake("the projections' crossover for both", code="d = 512\nn_a = 2 * d\nn_b = 2 * d"),
        Mistake("d_ff left out of (b)", code="d = 512\nn_a = 4 * d\nn_b = 4 * d"),
        Mistake("n = d, the recurrent crossover", code="d = 512\nn_a = d\nn_b = 6 * d"),
        Mistake("(a) answered with Exercise 12.3's length, the projections'", code="d = 512\nn_a = 2 * d\nn_b = 6 * d"),
        Mistake("(a) with a feed-forward network of d_ff = d", code="d = 512\nn_a = 1 * d\nn_b = 6 * d"),
    ],
    "ex-13-kv": [
        Mistake("keys counted, values forgotten", replace=(("return 2 * n_layers", "return n_layers"),)),
        Mistake("one layer's cache", replace=(("2 * n_layers * n_kv_heads", "2 * n_kv_heads"),)),
        Mistake("four bytes per number whatever the dtype", replace=(("* d_head * bytes_per_number", "* d_head * 4"),)),
        Mistake("Llama 2 70B counted with multi-head attention's 64 key/value heads", replace=(
            ("kv_bytes_per_token(80, 8, 128, 2)", "kv_bytes_per_token(80, 64, 128, 2)"),)),
        Mistake("the tokens rounded to the nearest, not counted whole", replace=(
            ("int(16e9 // gqa_70b), int(16e9 // mha_70b)", "round(16e9 / gqa_70b), round(16e9 / mha_70b)"),)),
    ],
    "ex-13-rmsnorm": [
        Mistake("epsilon added outside the root", replace=(("torch.sqrt(mean_square + eps)", "(torch.sqrt(mean_square) + eps)"),)),
        Mistake("the square of the mean instead of the mean of the squares", replace=(
            ("(x * x).mean(dim=-1, keepdim=True)", "x.mean(dim=-1, keepdim=True) ** 2"),)),
        Mistake("the gain left out", replace=(("torch.sqrt(mean_square + eps) * g", "torch.sqrt(mean_square + eps)"),)),
        Mistake("the argument eps ignored, 1e-5 always (a reader's slip of r49)", replace=(
            ("torch.sqrt(mean_square + eps) * g", "torch.sqrt(mean_square + 1e-5) * g"),)),
        Mistake("the mean subtracted as in LayerNorm", replace=(
            ("return x / torch.sqrt(mean_square + eps)", "return (x - x.mean(dim=-1, keepdim=True)) / torch.sqrt(mean_square + eps)"),)),
        Mistake("computed in float32 for a float64 input (a reader's slip of r59a)", replace=(
            ("    mean_square = (x * x).mean(dim=-1, keepdim=True)", "    x = x.float()\n    mean_square = (x * x).mean(dim=-1, keepdim=True)"),)),
    ],
    "ex-13-swiglu": [
        Mistake("left as the stub", unanswered=True),
        Mistake("SwiGLU's third bias forgotten", replace=(("+ 1365 + 1365 + 512", "+ 1365 + 512"),)),
        Mistake("SwiGLU counted with two matrices", replace=(("3 * 512 * 1365", "2 * 512 * 1365"),)),
        Mistake("the ReLU FFN without its biases", replace=(("2 * 512 * 2048 + 2048 + 512", "2 * 512 * 2048"),)),
        Mistake("the SwiGLU FFN without any bias", replace=(("3 * 512 * 1365 + 1365 + 1365 + 512", "3 * 512 * 1365"),)),
        Mistake("the counts taken from count_parameters, not written as arithmetic (a reader's slip of r59a)", code=(
            "relu_by_hand = count_parameters(PositionwiseFeedForward(512, 2048))\n"
            "glu_by_hand = count_parameters(SwiGLUFeedForward(512, 1365, bias=True))")),
    ],
    "ex-13-alibi": [
        Mistake("alibi_slopes called, which the exercise rules out (a reader's slip of r59a)",
                code="slopes_6 = alibi_slopes(6).tolist()"),
        Mistake("the power-of-two formula applied to 6 heads", code="slopes_6 = [2.0 ** (-8 * h / 6) for h in range(1, 7)]"),
        Mistake("the right slopes sorted, not in head order",
                code="slopes_6 = [2.0 ** -1, 2.0 ** -2, 2.0 ** -3, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8]"),
    ],
    "ex-13-gqa": [
        Mistake("the key/value heads shared in the order 0, 1, 0, 1 (repeat, not repeat_interleave)", replace=(
            ("k = k.repeat_interleave(group, dim=1)", "k = k.repeat(1, group, 1, 1)"),
            ("v = v.repeat_interleave(group, dim=1)", "v = v.repeat(1, group, 1, 1)"))),
        Mistake("no causal mask", replace=(
            ('weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)', "weights = scores.softmax(dim=-1)"),)),
        Mistake("the scores divided by d_k, not its square root", replace=(
            ("/ math.sqrt(q.shape[-1])", "/ q.shape[-1]"),)),
        Mistake("the keys shared, the values not", replace=(("    v = v.repeat_interleave(group, dim=1)\n", ""),)),
        Mistake("each key/value head repeated n_heads times, not n_heads // n_kv_heads", replace=(
            ("group = q.shape[1] // k.shape[1]", "group = q.shape[1]"),)),
    ],
    "ex-14-names": [
        Mistake("the encoder's second LayerNorm named as the decoder's", replace=(
            ('"encoder": {"norm1": "self_attn_layer_norm", "norm2": "final_layer_norm"}',
             '"encoder": {"norm1": "self_attn_layer_norm", "norm2": "encoder_attn_layer_norm"}'),)),
        Mistake("the decoder's second and third LayerNorms swapped", replace=(
            ('"norm2": "encoder_attn_layer_norm",\n                         "norm3": "final_layer_norm"',
             '"norm2": "final_layer_norm",\n                         "norm3": "encoder_attn_layer_norm"'),)),
        Mistake("keys and values swapped", replace=(('"w_k": "k_proj", "w_v": "v_proj"', '"w_k": "v_proj", "w_v": "k_proj"'),)),
        Mistake("cross-attention mapped onto self-attention", replace=(('"cross_attn": "encoder_attn"', '"cross_attn": "self_attn"'),)),
    ],
    # chapter 11: reading attention
    "ex-11-merge": [
        Mistake("the query pieces summed, not averaged", replace=(
            ("[(0.1 + 0.0) / 2, (0.9 + 0.9) / 2, (0.0 + 0.1) / 2]", "[0.1 + 0.0, 0.9 + 0.9, 0.0 + 0.1]"),)),
        Mistake("the key pieces averaged, not summed", replace=(
            ("np.array([[0.8, 0.2, 0.0],", "np.array([[0.8, 0.1, 0.0],"),
            ("[(0.1 + 0.0) / 2, (0.9 + 0.9) / 2, (0.0 + 0.1) / 2]",
             "[(0.1 + 0.0) / 2, (0.45 + 0.45) / 2, (0.0 + 0.1) / 2]"),
            ("[0.1, 0.1, 0.8]])", "[0.1, 0.05, 0.8]])"))),
    ],
    "ex-11-diagonal": [
        Mistake("reads copied from the model's attention in Figure 11.1 (a → Tanz, in → auf)", stub=1, replace=(
            ('"einen", "Tanz", "vor", "vor", "vor",', '"Tanz", "Tanz", "auf", "vor", "vor",'),)),
        Mistake("reads shifted by one: the German word of each query's own input", stub=1, replace=(
            ('reads = ["Mehrere", "Frauen", "führen", "führen",',
             'reads = ["Mehrere", "Mehrere", "Frauen", "führen", "führen",'),
            ('"einem", "Gebäude", ".", "."]', '"einem", "Gebäude", "."]'))),
    ],
    # the chapter on finding bugs: each exercise's stub is the planted bug ("left as the stub" = the bug left in)
    "ex-10-diagonal": [
        Mistake("the bug left in: the diagonal blocked too", unanswered=True),
        Mistake("the NaN row set to 0 instead", replace=(
            ("np.triu(np.ones((n, n), dtype=bool), k=1)", "np.triu(np.ones((n, n), dtype=bool))"),
            ("return weights @ x", "return np.nan_to_num(weights) @ x"))),
        Mistake("the mask flipped", replace=(
            ("np.triu(np.ones((n, n), dtype=bool), k=1)", "np.tril(np.ones((n, n), dtype=bool), k=-1)"),)),
        Mistake("the mask of the check's 6 positions", replace=(
            ("np.triu(np.ones((n, n), dtype=bool), k=1)", "np.triu(np.ones((6, 6), dtype=bool), k=1)"),)),
    ],
    "ex-10-cross": [
        Mistake("the bug left in: the mask multiplied into the scores", unanswered=True),
        Mistake("the mask on the queries' axis", replace=(
            ("np.where(real[:, None, :], scores, -np.inf)", "np.where(real[:, :, None], scores, -np.inf)"),)),
        Mistake("padded keys zeroed after the softmax, rows not renormalised", replace=(
            ("    scores = np.where(real[:, None, :], scores, -np.inf)                # a padded key: weight 0\n", ""),
            ("weights = weights / weights.sum(axis=-1, keepdims=True)",
             "weights = weights / weights.sum(axis=-1, keepdims=True) * real[:, None, :]"))),
        Mistake("the lengths counted from 1: the last real token masked", replace=(
            ("np.arange(n_src)[None, :] < np.asarray(src_lengths)",
             "np.arange(1, n_src + 1)[None, :] < np.asarray(src_lengths)"),)),
        Mistake("self-attention's mask: a query past the source's length reads the padding too", replace=(
            ("np.where(real[:, None, :], scores, -np.inf)",
             "np.where(real[:, None, :] | ~real[:, :y.shape[1], None], scores, -np.inf)"),)),
    ],
    "ex-10-heads": [
        Mistake("the bug left in: the heads cut by a reshape alone", unanswered=True),
        Mistake("the heads merged without the transpose", replace=(
            ("return out.transpose(1, 0, 2).reshape(n, d_model)", "return out.reshape(n, d_model)"),)),
        Mistake("the scores divided by the square root of d_model", replace=(
            ("/ np.sqrt(d_k)", "/ np.sqrt(d_model)"),)),
        Mistake("the causal mask left out", replace=(
            ("    scores = np.where(R.causal_mask(n), scores, -np.inf)            # True = may attend\n", ""),)),
    ],
    "ex-10-pad-loss": [
        Mistake("the bug left in: divided by every position", unanswered=True),
        Mistake("the padding not masked at all", replace=(
            ("return float((nll * real).sum() / real.sum())", "return float(nll.mean())"),)),
        Mistake("divided by the number of sentences", replace=(
            ("(nll * real).sum() / real.sum()", "(nll * real).sum() / len(targets)"),)),
        Mistake("the sum, not the mean", replace=(("(nll * real).sum() / real.sum()", "(nll * real).sum()"),)),
    ],
    "ex-10-layernorm": [
        Mistake("the bug left in: the statistics over the positions", unanswered=True),
        Mistake("no epsilon under the square root", replace=(("np.sqrt(var + eps)", "np.sqrt(var)"),)),
        Mistake("epsilon outside the square root", replace=(("np.sqrt(var + eps)", "(np.sqrt(var) + eps)"),)),
        Mistake("the statistics over the whole batch", replace=(("features = -1 ", "features = None "),)),
        Mistake("gain and bias swapped", replace=(
            ("gain * (x - mean) / np.sqrt(var + eps) + bias", "bias * (x - mean) / np.sqrt(var + eps) + gain"),)),
        Mistake("the bias inside the gain", replace=(
            ("gain * (x - mean) / np.sqrt(var + eps) + bias", "gain * ((x - mean) / np.sqrt(var + eps) + bias)"),)),
    ],
    "ex-10-scale": [
        Mistake("the bug left in: divided by the square root of n_q", unanswered=True),
        Mistake("divided by d_k, not its square root", replace=(("/ math.sqrt(q.shape[-1])", "/ q.shape[-1]"),)),
        Mistake("divided by a constant 8 (the square root of 64)", replace=(("/ math.sqrt(q.shape[-1])", "/ 8.0"),)),
        Mistake("divided by the square root of the values' width d_v", replace=(
            ("/ math.sqrt(q.shape[-1])", "/ math.sqrt(v.shape[-1])"),)),
        Mistake("the weights divided after the softmax", replace=(
            ("/ math.sqrt(q.shape[-1])", ""),
            ("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=-1) / math.sqrt(q.shape[-1])"))),
    ],
    "ex-10-shift": [
        Mistake("the bug left in: the decoder reads the target unshifted", unanswered=True),
        Mistake("the tokens to predict shifted too", replace=(("tgt_out = tgt ", "tgt_out = with_bos[:, :-1] "),)),
        Mistake("BOS hard-coded as 1", replace=(("np.full((tgt.shape[0], 1), bos_id,", "np.full((tgt.shape[0], 1), 1,"),)),
        Mistake("the last token dropped instead of a BOS prepended", code=(
            "def teacher_forcing(tgt, bos_id):\n    return tgt[:, :-1], tgt[:, 1:]")),
    ],
    "ex-10-embed": [
        Mistake("the bug left in: scaled by the square root of the vocabulary size", unanswered=True),
        Mistake("scaled by d_model, not its square root", replace=(
            ("scale = math.sqrt(table.shape[1])", "scale = table.shape[1]"),)),
        Mistake("not scaled at all", replace=(("table[ids] * scale", "table[ids]"),)),
        Mistake("scaled by 8, the square root of 64", replace=(
            ("scale = math.sqrt(table.shape[1])", "scale = 8.0"),)),
        Mistake("the positional encodings scaled down instead", replace=(
            ("table[ids] * scale + R.positional_encoding(len(ids), table.shape[1])",
             "table[ids] + R.positional_encoding(len(ids), table.shape[1]) / scale"),)),
        Mistake("the positional encodings scaled too (reader r68)", replace=(
            ("table[ids] * scale + R.positional_encoding(len(ids), table.shape[1])",
             "(table[ids] + R.positional_encoding(len(ids), table.shape[1])) * scale"),)),
    ],
    "ex-10-polarity": [
        Mistake("the bug left in: the course's mask handed to nn unchanged", unanswered=True),
        Mistake("a float mask of the same polarity (added, not blocking)", replace=(
            ("attn_mask=~allowed)", "attn_mask=allowed.double())"),)),
        Mistake("the mask negated and transposed", replace=(("attn_mask=~allowed)", "attn_mask=~allowed.T)"),)),
        Mistake("a causal mask built instead of the one given", replace=(
            ("attn_mask=~allowed)", "attn_mask=~causal_mask(x.shape[1]))"),)),
    ],
}
