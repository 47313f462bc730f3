"""Checks of chapter 7's exercises, on the PyTorch side: the heads merged back with ``view``
(:func:`check_merged_heads`), the head split without a transpose (:func:`check_view_shortcut`,
:func:`check_view_rows`), a student's multi-head attention module against ``nn.MultiheadAttention``
(:func:`check_my_mha`), the masks of a padded batch in the conventions of other code (:func:`check_padding_masks`,
:func:`check_additive_mask`) and the size of a KV cache (:func:`check_cache_numbers`). Like
:mod:`tmlib.course.exercise_checks`, they compute the expected values inside, never print them, and name the likely
slip.
"""
from __future__ import annotations

import numpy as np

from tmlib import ref
from tmlib.course.checks import as_float_array, check_shape, require_answered
from tmlib.course.count_checks import _whole_number
from tmlib.course.exercise_checks import _compare

__all__ = ["check_additive_mask", "check_cache_numbers", "check_merged_heads", "check_my_mha", "check_padding_masks",
           "check_transposed_stride",
           "check_view_rows", "check_view_shortcut"]


def check_merged_heads(answer, heads, what: str = "the merged tensor") -> str:
    """Check heads ``(batch, n_heads, seq_len, d_k)`` merged back into ``(batch, seq_len, n_heads * d_k)`` (the
    inverse of the split: transpose, then view), exactly, naming the merge without the transpose, the head and d_k
    axes exchanged, and the heads in reverse order; never the tensor."""
    x = as_float_array(heads, "heads", what)
    batch, n_heads, seq_len, d_k = x.shape

    def merged(h):  # (batch, seq_len, n_heads, d_k) -> (batch, seq_len, d_model)
        return h.reshape(batch, seq_len, n_heads * d_k)

    expected = merged(x.transpose(0, 2, 1, 3))
    check_shape(answer, expected.shape, what)
    variants = [("merging without the transpose gives: each head's positions glued in turn",
                 x.reshape(batch, seq_len, n_heads * d_k)),
                ("exchanging the head and d_k axes gives: the heads' columns interleaved",
                 merged(x.transpose(0, 2, 3, 1))),
                ("the heads in reverse order give: Concat(head_h, ..., head_1)",
                 merged(x[:, ::-1].transpose(0, 2, 1, 3)))]
    return _compare(answer, expected, what, variants, atol=0)


def check_transposed_stride(stride_t, heads, what: str = "stride_t") -> str:
    """Check ``stride_t``, the stride of ``heads.transpose(1, 2)`` for head outputs ``heads`` ``(batch, n_heads,
    seq_len, d_k)`` laid out head by head (row-major): a tuple of 4 whole numbers, exact. Names the stride of
    ``heads`` itself (before the transpose) and that of the row-major copy ``.contiguous()`` makes; never the
    answer. Raises AssertionError."""
    require_answered(stride_t, what)
    batch, n_heads, seq_len, d_k = (int(n) for n in np.shape(heads))
    own = (n_heads * seq_len * d_k, seq_len * d_k, d_k, 1)                  # heads, row-major
    if isinstance(stride_t, (str, bytes)) or np.ndim(stride_t) != 1 or len(stride_t) != 4:
        raise AssertionError(f"{what} must be 4 whole numbers, one per axis (what Tensor.stride() returns), "
                             f"got {stride_t!r}")
    got = tuple(int(n) for n in stride_t)
    if got == (own[0], own[2], own[1], own[3]):
        return f"correct: {what} (exact)"
    if got == own:
        raise AssertionError(f"{what} is the stride of heads itself, before the transpose: what does transpose(1, "
                             f"2) do to the memory, and so to the strides?")
    if got == (seq_len * n_heads * d_k, n_heads * d_k, d_k, 1):
        raise AssertionError(f"{what} is the stride of the row-major copy that .contiguous() makes, not of the "
                             f"transposed tensor, which still reads the memory of heads")
    raise AssertionError(f"{what} is not the stride of heads.transpose(1, 2): the transpose moves no number in "
                         f"memory, it only swaps how far a step along axes 1 and 2 goes")


def check_view_shortcut(answer, q, n_heads: int, what: str = "the shortcut's view") -> str:
    """Check the head split without a transpose, ``q.view(batch, n_heads, seq_len, d_k)``, of projected queries
    ``q`` of shape ``(batch, seq_len, d_model)``, exactly, naming the true split (view, then transpose); never the
    tensor."""
    x = as_float_array(q, "queries", what)
    batch, seq_len, d_model = x.shape
    d_k = d_model // n_heads
    expected = x.reshape(batch, n_heads, seq_len, d_k)  # the same memory re-read in row-major order
    check_shape(answer, expected.shape, what)
    split = x.reshape(batch, seq_len, n_heads, d_k).transpose(0, 2, 1, 3)
    variants = [("the true split gives (view, then transpose); the shortcut leaves the transpose out", split)]
    return _compare(answer, expected, what, variants, atol=0)


def check_view_rows(rows_from, q, n_heads: int, what: str = "rows_from") -> str:
    """Check, for each row of the shortcut's "head 1" (``q.view(batch, n_heads, seq_len, d_k)[0, 0]``), the token
    (counted from 1) whose vector its numbers come from, for projected queries ``q`` ``(batch, seq_len, d_model)``;
    names the true split's rows (one token each) and a count from 0. Never the answer."""
    batch, seq_len, d_model = np.shape(as_float_array(q, "queries", what))
    d_k = d_model // n_heads
    expected = [r * d_k // d_model + 1 for r in range(seq_len)]  # row r holds numbers r·d_k ... of the flat memory
    answer = as_float_array(rows_from, "answer", what)
    check_shape(answer, (seq_len,), what)
    if answer.tolist() == expected:
        return f"correct: {what}, the token of each row of the shortcut's head 1"
    hints = {tuple(range(1, seq_len + 1)): "that is the true split's head 1, where every row is its own token",
             tuple(e - 1 for e in expected): "count the tokens from 1"}
    hint = hints.get(tuple(answer.tolist()), "print the shortcut's head 1 beside q and match each row's numbers")
    raise AssertionError(f"{what} is not right yet: {hint}")


_MHA_LAYERS = ("w_q", "w_k", "w_v", "w_o")


def _mha_state_error(err: Exception, module: str) -> Exception | None:
    """What a failed ``load_state_dict`` of the four layers ``w_q``, ``w_k``, ``w_v``, ``w_o`` says about the
    student's module (None: another error)."""
    import re

    text = str(err)
    if "state_dict" not in text:
        return None
    section = lambda name: re.findall(r'"([^"]+)"', text.split(f"{name} key(s) in state_dict:")[1].split("\n")[0]
                                      ) if f"{name} key(s) in state_dict:" in text else []  # noqa: E731
    missing, unexpected = section("Missing"), section("Unexpected")
    ours = {f"{n}.{k}" for n in _MHA_LAYERS for k in ("weight", "bias")}
    if set(unexpected) == ours and not missing:
        return TypeError(f"{module} is not written yet: its `__init__` holds none of {', '.join(_MHA_LAYERS)}.\n"
                         "  Add the four nn.Linear(d_model, d_model), write `forward`, and run that cell again")
    if unexpected:  # weights the module has no parameter for
        biases = all(u.endswith(".bias") for u in unexpected) and not missing
        rule = "with biases (bias=True, the default)" if biases else "named w_q, w_k, w_v and w_o"
        extra = f" (it has {', '.join(missing)} instead)" if missing else ""
        return AssertionError(f"{module} has no {', '.join(unexpected)}{extra}:\n  its layers must be four "
                              f"nn.Linear(d_model, d_model) {rule},\n  since load_state_dict copies weights by name")
    if missing:  # parameters that the four layers do not have
        return AssertionError(f"{module} has parameters besides the four layers w_q, w_k, w_v and w_o "
                              f"({', '.join(missing)}):\n  multi-head attention needs only these four nn.Linear")
    sizes = re.findall(r"size mismatch for ([\w.]+)", text)
    if sizes:
        return AssertionError(f"{module}: {', '.join(sizes)} has the wrong shape;\n  each layer is "
                              "nn.Linear(d_model, d_model)")
    return None


def _mha_torch(state, n_heads: int, query, key, value, mask=None, *, scale: bool = True, softmax_dim: int = -1,
               transpose: bool = True, merge_transpose: bool = True, project: bool = True, by_d_model: bool = False,
               zero_after: bool = False):
    """Multi-head attention with the weights ``state`` of four nn.Linear layers, and typical mistakes: no √d_k
    (or √d_model instead), the softmax over the queries, the heads split or merged without the transpose, no W^O,
    the blocked weights set to 0 after the softmax (``zero_after``) instead of the scores to -inf before it."""
    import torch

    def linear(name, x):
        return x @ state[f"{name}.weight"].T + state[f"{name}.bias"]

    batch, n_q, d_model = query.shape
    d_k = d_model // n_heads

    def split(x):
        n = x.shape[1]
        if transpose:
            return x.reshape(batch, n, n_heads, d_k).transpose(1, 2)
        return x.reshape(batch, n_heads, n, d_k)

    q, k, v = split(linear("w_q", query)), split(linear("w_k", key)), split(linear("w_v", value))
    divisor = (d_model if by_d_model else d_k) ** 0.5 if scale else 1.0
    scores = q @ k.transpose(-2, -1) / divisor  # (batch, h, n_q, n_k)
    if mask is not None and not zero_after:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and zero_after:
        weights = weights.masked_fill(~mask, 0.0)
    heads = weights @ v  # (batch, h, n_q, d_k)
    concat = (heads.transpose(1, 2) if merge_transpose else heads).reshape(batch, n_q, d_model)
    return linear("w_o", concat) if project else concat


def check_my_mha(run, what: str = "your module", *, module: str = "MyMultiHeadAttention", seed: int = 7) -> str:
    """Check a multi-head attention module written in PyTorch through ``run(n_heads, state, query, key, value,
    attn_mask=None)``, which builds the module, loads the state dict ``state`` (four ``nn.Linear(d_model,
    d_model)`` with biases, ``w_q``, ``w_k``, ``w_v``, ``w_o``) and runs it without gradients.

    In float64, on seeded random weights and a batch of 2 sequences of 5 tokens (4 heads, d_model = 16), the outputs
    must equal those of ``torch.nn.MultiheadAttention`` holding the same weights to 1e-10, without a mask and with
    the causal mask (True = may attend); on chapter 2's two-head example with zero biases they must equal
    multi-head attention as Part I computes it, to 1e-12. A failure names the first case that differs and, where
    the output is that of a typical mistake, the mistake (no scale or √d_model, the softmax's axis, the split or the
    merge without a transpose, no W^O, the mask not applied, read the wrong way round or applied to the weights
    after the softmax); an unwritten module is reported as not written yet. Never prints an expected value.
    """
    import torch
    from torch import nn

    from tmlib.course.examples import MHA_EXAMPLE_2
    from tmlib.model import causal_mask

    def call(n_heads, state, query, key, value, **mask):
        try:
            out = run(n_heads, state, query, key, value, **mask)
        except RuntimeError as err:
            better = _mha_state_error(err, module)
            if better is None:
                raise
            raise better from None
        if out is None:
            raise TypeError(f"{module}.forward is not written yet: it returned None.\n  Is its body still `...`, "
                            "or is a `return` missing? Finish it and run that cell again")
        return out

    g = torch.Generator().manual_seed(seed)
    d_model, n_heads, n = 16, 4, 5
    state = {f"{name}.{kind}": 0.3 * torch.randn(*((d_model, d_model) if kind == "weight" else (d_model,)),
                                                 generator=g, dtype=torch.float64)
             for name in _MHA_LAYERS for kind in ("weight", "bias")}
    reference = nn.MultiheadAttention(d_model, n_heads, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([state[f"{c}.weight"] for c in _MHA_LAYERS[:3]]))
        reference.in_proj_bias.copy_(torch.cat([state[f"{c}.bias"] for c in _MHA_LAYERS[:3]]))
        reference.out_proj.weight.copy_(state["w_o.weight"])
        reference.out_proj.bias.copy_(state["w_o.bias"])
    x = torch.randn(2, n, d_model, generator=g, dtype=torch.float64)  # (batch, seq_len, d_model)
    causal = causal_mask(n)
    for mask, case in ((None, "self-attention without a mask"),
                       (causal, "self-attention with the causal mask (True = may attend)")):
        got = as_float_array(call(n_heads, state, x, x, x, attn_mask=mask), "answer", f"{what}: {case}")
        check_shape(got, (2, n, d_model), f"{what}: the output (batch, n_q, d_model) of {case}")
        with torch.no_grad():
            want = reference(x, x, x, attn_mask=None if mask is None else ~mask, need_weights=False)[0]
            mistakes = [("a module gives without dividing the scores by √d_k", dict(scale=False)),
                        ("a module gives with the softmax over the queries (dim=-2) instead of the keys",
                         dict(softmax_dim=-2)),
                        ("a module gives that divides the scores by √d_model instead of √d_k", dict(by_d_model=True)),
                        ("a module gives that splits the heads with view alone, without the transpose",
                         dict(transpose=False)),
                        ("a module gives that splits the heads with view alone and merges them back the same way, "
                         "without either transpose", dict(transpose=False, merge_transpose=False)),
                        ("a module gives that merges the heads without the transpose (split right)",
                         dict(merge_transpose=False)),
                        ("a module gives that returns the concatenated heads without applying w_o",
                         dict(project=False))]
            variants = [(hint, _mha_torch(state, n_heads, x, x, x, mask, **kw).numpy()) for hint, kw in mistakes]
            if mask is not None:
                variants.append(("a module gives that ignores attn_mask: the mask was not applied, so every query "
                                 "attends to every key", _mha_torch(state, n_heads, x, x, x, None).numpy()))
                variants.append(("a module gives that sets the blocked weights to 0 after the softmax: the "
                                 "weights of a query then no longer add up to 1 (chapter 5 compares the two ways "
                                 "of masking)", _mha_torch(state, n_heads, x, x, x, mask, zero_after=True).numpy()))
                flipped = _mha_torch(state, n_heads, x, x, x, ~mask).numpy()
                if np.allclose(got, flipped, rtol=0, atol=1e-10, equal_nan=True):
                    raise AssertionError(f"{what}: {case}\n  reads the mask the wrong way round: each query "
                                         "attends to exactly\n  the keys it must not see")
        _compare(got, want.numpy(), f"{what}: {case}", variants, atol=1e-10)
    m = MHA_EXAMPLE_2
    d, h = np.asarray(m.q).shape[-1], np.asarray(m.w_q).shape[0]
    zero = torch.zeros(d, dtype=torch.float64)
    weights = {"w_q": m.w_q, "w_k": m.w_k, "w_v": m.w_v}
    example = {f"{name}.weight": torch.tensor(np.concatenate(list(np.asarray(w, dtype=float)), axis=1).T)
               for name, w in weights.items()}  # nn.Linear stores (W^Q_1 | ... | W^Q_h) transposed
    example["w_o.weight"] = torch.tensor(np.asarray(m.w_o, dtype=float).T)
    example.update({f"{name}.bias": zero for name in _MHA_LAYERS})
    x_q, x_k, x_v = (torch.tensor(np.asarray(a, dtype=float))[None] for a in (m.q, m.k, m.v))
    got = call(h, example, x_q, x_k, x_v)
    want = ref.multi_head_attention(m.q, m.k, m.v, m.w_q, m.w_k, m.w_v, m.w_o)[0][None]  # (1, n, d_model)
    _compare(got, want, f"{what}: chapter 2's two-head example with zero biases", atol=1e-12)
    return (f"correct: {what} gives nn.MultiheadAttention's outputs with the same weights, without a mask\n"
            "  and with the causal mask (tolerance 1e-10), and chapter 2's two-head example (tolerance 1e-12)")


def _mask_values(x, role: str) -> np.ndarray:
    """A mask as a NumPy array keeping its dtype (bool stays bool), from a list, an array or a torch tensor."""
    require_answered(x, role)
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{role} must be a tensor, got {type(x).__name__} ({err})") from None


def check_additive_mask(additive, lengths, what: str = "the additive mask", *, dtype: str | None = None) -> str:
    """Check an additive float mask ``(batch, 1, 1, n_k)`` for a batch of sentences with real ``lengths`` (padded
    to the longest): 0 where a query may attend and -inf at the padding, exactly, and, where ``dtype`` is given
    (``"float64"``), of that dtype. A failure names the likely slip (a boolean or 0/1 mask, the polarity inverted,
    a finite value instead of -inf, NaN, another dtype); never prints a mask."""
    lengths = [int(n) for n in lengths]
    batch, n_k = len(lengths), max(lengths)
    real = np.arange(n_k)[None, :] < np.asarray(lengths)[:, None]  # (batch, n_k), True = real token
    add = _mask_values(additive, "additive")
    check_shape(add, (batch, 1, 1, n_k), f"{what} (batch, 1, 1, n_k)")
    if not np.issubdtype(add.dtype, np.floating):
        raise AssertionError(f"{what} has dtype {add.dtype}: an additive mask holds floats, added to the scores")
    if dtype is not None and str(add.dtype) != dtype:
        raise AssertionError(f"{what} has dtype {add.dtype}; the exercise asks for {dtype}, the dtype of the "
                             "scores it is added to")
    add = add[:, 0, 0, :].astype(np.float64)
    want = np.where(real, 0.0, -np.inf)
    if np.array_equal(add, want):
        return f"correct: {what} (0 and -inf) is right"
    if np.isnan(add).any():
        raise AssertionError(f"{what} holds NaN: added to a score, NaN makes the whole softmax row NaN")
    if np.array_equal(add, np.where(real, -np.inf, 0.0)):
        hint = "-inf at the real tokens and 0 at the padding:\n  the polarity is inverted"
    elif set(np.unique(add)) <= {0.0, 1.0}:
        hint = ("it holds 0 and 1;\n  added to the scores, 1 shifts a score by one and blocks nothing:\n  "
                "a blocked key needs -inf, a key that may be attended to 0")
    elif (add[real] == 0).all() and np.isfinite(add[~real]).all() and (add[~real] < 0).all():
        hint = "a finite negative value at the padding,\n  where -inf is asked for"
    else:
        wrong = int((add != want).sum())  # -inf == -inf holds
        hint = f"{wrong} of {add.size} entries are wrong;\n  0 where a query may attend, -inf at the padding"
    raise AssertionError(f"{what} is not right: {hint}")


def check_padding_masks(key_padding_mask, additive, lengths, what: str = "the masks") -> str:
    """Check the two other conventions of a padding mask for a batch of sentences with real ``lengths`` (padded
    to the longest): ``nn.MultiheadAttention``'s ``key_padding_mask`` ``(batch, n_k)``, boolean, True = padding,
    exactly; and an additive float mask ``(batch, 1, 1, n_k)`` (:func:`check_additive_mask`). A failure names the
    likely slip (our mask as it is, a 0/1 or float key_padding_mask, and those of the additive mask); never prints
    a mask."""
    lengths = [int(n) for n in lengths]
    batch, n_k = len(lengths), max(lengths)
    real = np.arange(n_k)[None, :] < np.asarray(lengths)[:, None]  # (batch, n_k), True = real token
    kpm = _mask_values(key_padding_mask, "key_padding_mask")
    check_shape(kpm, (batch, n_k), "key_padding_mask (batch, n_k)")
    if kpm.dtype != np.bool_:
        right = np.array_equal(kpm.astype(float), (~real).astype(float))
        raise AssertionError(f"key_padding_mask has dtype {kpm.dtype}{', with the right values' if right else ''}: "
                             "nn.MultiheadAttention\n  wants a boolean mask (True = padding); a float mask would be "
                             "added to the scores")
    if not np.array_equal(kpm, ~real):
        if np.array_equal(kpm, real):
            raise AssertionError("key_padding_mask is our mask as it is (True = real token):\n  "
                                 "nn.MultiheadAttention's key_padding_mask is True at the padding")
        raise AssertionError(f"key_padding_mask: {int((kpm != ~real).sum())} of {kpm.size} entries are wrong;\n  "
                             "True must mark the padding positions, and only them")
    check_additive_mask(additive, lengths)
    return f"correct: {what}: key_padding_mask (exact) and the additive mask (0 and -inf) are right"


def check_cache_numbers(answer, *, n_steps: int, d_model: int, what: str = "the cache size") -> str:
    """Check how many numbers one attention layer's KV cache holds for one sequence after ``n_steps`` decoding
    steps, 2 · n_steps · d_model (a key and a value of width d_model, all heads together, per position), exactly,
    naming the values forgotten, the per-step contents added up, the width left out and bytes counted instead of
    numbers; never the value."""
    n, d = int(n_steps), int(d_model)
    answer = _whole_number(answer, what)
    expected = 2 * n * d
    if answer == expected:
        return f"correct: {what} after {n} steps is right (exact)"
    hint = {n * d: "keys only? the cache holds a value beside every key",
            d * n * (n + 1): "added up over the steps? the cache holds each position once, however many steps "
                             "read it",
            2 * n: "one number per key? each key and each value is a vector of d_model numbers (all heads together)",
            4 * expected: "bytes? count numbers, not the 4 bytes of a float32",
            2 * expected: "bytes? count numbers, not the 2 bytes of a float16"}.get(
        answer, "which factor is missing or counted twice? write the count as a product of n_steps, d_model and "
                "small numbers, and say what each factor counts")
    raise AssertionError(f"{what} is {'too small' if answer < expected else 'too large'}: {hint}")
