"""The diagnostic checks for build-its (tmlib.course.diagnostics): each catches its bug, names the symptom, passes the
right computation, and never prints an expected value."""
import numpy as np
import pytest
import torch
from torch import nn

from tmlib import ref as R
from tmlib.model import MultiHeadAttention as R_MHA
from tmlib.course import (check_causal, check_own_work, check_padding_invariance, check_rows_sum_to_one, check_stages,
                          forbidden_references, module_stages)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 5, 4))  # (batch, n, d)


def attention(x, mask=None):
    """Self-attention with identity projections; ``mask`` (n, n) or (batch, 1, n), True = may attend."""
    scores = x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e30)  # a fully masked row (the bugs below) gives uniform weights
    return R.softmax(scores) @ x


def test_rows_sum_to_one():
    w = R.softmax(RNG.normal(size=(2, 3, 4)))
    assert check_rows_sum_to_one(w).startswith("correct")
    with pytest.raises(AssertionError, match=r"rows do not sum to 1 .*softmax taken over the last axis"):
        check_rows_sum_to_one(R.softmax(RNG.normal(size=(3, 4)), axis=0))  # over the queries
    with pytest.raises(AssertionError, match=r"negative entry at index \(0, 1\)"):
        check_rows_sum_to_one([[1.5, -0.5], [0.5, 0.5]])
    with pytest.raises(AssertionError, match="NaN or infinity"):
        check_rows_sum_to_one([[np.nan, 1.0]])


@pytest.mark.parametrize("mask, bug", [
    (None, "no mask"),
    (~R.causal_mask(5), "mask flipped"),
    (np.tril(np.ones((5, 5), dtype=bool), k=1), "off by one"),
])
def test_causality_by_perturbing_the_future(mask, bug):
    assert check_causal(lambda x: attention(x, R.causal_mask(5)), X).startswith("correct")
    with pytest.raises(AssertionError, match="it can see the future"):
        check_causal(lambda x: attention(x, mask), X)


def test_causality_of_a_torch_function():
    x = torch.tensor(X)
    causal = torch.tensor(R.causal_mask(5))
    good = lambda t: torch.softmax((t @ t.transpose(-1, -2)).masked_fill(~causal, float("-inf")), -1) @ t  # noqa
    assert check_causal(good, x).startswith("correct")
    with pytest.raises(AssertionError, match="position 0 changes"):
        check_causal(lambda t: torch.softmax(t @ t.transpose(-1, -2), -1) @ t, x)


def test_padding_invariance_catches_the_wrong_axis():
    real = np.array([[True, True, True, False, False], [True, True, True, True, True]])  # (batch, n)
    keys = real[:, None, :]          # (batch, 1, n): blocks padded keys
    queries = real[:, :, None]       # (batch, n, 1): the bug, padding masked along the queries
    assert check_padding_invariance(lambda x: attention(x, keys), X, real).startswith("correct")
    with pytest.raises(AssertionError, match=r"output at real position 0 of sentence 0 changes when the padding changes"):
        check_padding_invariance(lambda x: attention(x, queries), X, real)
    # the message names the symptom and asks about the weights; it does not name a cause it has not seen, such as
    # exercise 10.2's mask multiplied into the scores (reader r52: the message gave that exercise's answer away)
    with pytest.raises(AssertionError) as failure:
        check_padding_invariance(lambda x: attention(x, None), X, real)
    said = str(failure.value)
    assert "weight of exactly 0" in said and "multipl" not in said and "-inf" not in said, said


def test_padding_invariance_of_cross_attention_compares_every_query():
    """Cross-attention's outputs are the queries' positions: ``out_real`` (all True) compares each of them, where the
    source's mask would compare only the queries whose index is a real source position."""
    rng = np.random.default_rng(5)
    y, memory = rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 6, 4))  # (batch, n_tgt, d), (batch, n_src, d)
    real = np.arange(6)[None, :] < np.array([[6], [2]])  # (batch, n_src): sentence 1 has 2 real source tokens

    def cross(memory, late=False):  # late: the queries from position 2 on also read the source's padding
        allowed = real[:, None, :] | (late & (np.arange(6)[None, :, None] >= 2))  # (batch, n_tgt, n_src)
        scores = np.where(allowed, y @ np.swapaxes(memory, -1, -2), -np.inf)
        return R.softmax(scores) @ memory

    every = np.ones((2, 6), bool)  # (batch, n_tgt): every query position compared
    assert check_padding_invariance(cross, memory, real, out_real=every).startswith("correct")
    assert check_padding_invariance(lambda m: cross(m, late=True), memory, real).startswith("correct")  # missed
    with pytest.raises(AssertionError, match=r"output at position 2 of sentence 1 changes when the padding"):
        check_padding_invariance(lambda m: cross(m, late=True), memory, real, out_real=every)


class Layer(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.attn, self.ffn, self.scale = nn.Linear(4, 4), nn.Linear(4, 4), scale

    def forward(self, x):
        return self.ffn(self.attn(x) * self.scale)


def test_stages_name_the_first_sub_layer_that_differs():
    torch.manual_seed(0)
    ref, mine = Layer(), Layer(scale=2.0)
    mine.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, 4, dtype=torch.float32)
    want, got = module_stages(ref, ["attn", "ffn"], x), module_stages(mine, ["attn", "ffn"], x)
    assert list(got) == ["attn", "ffn", "output"]
    stages = [(name, got[name], want[name]) for name in want]
    with pytest.raises(AssertionError) as info:
        check_stages(stages, "your layer", atol=1e-6)
    msg = str(info.value)
    assert "differs from the reference in sub-layer 'ffn'; the sub-layers before it match ('attn')" in msg
    assert f"{want['ffn'][0, 0, 0].item():.4g}" not in msg
    assert check_stages({n: (want[n], want[n]) for n in want}).startswith("correct: every sub-layer")
    with pytest.raises(ValueError, match="no submodule named"):
        module_stages(ref, ["nope"], x)


SOFTMAX = ["tmlib.ref.softmax"]


def direct(x):
    return R.softmax(x)


def helper(x):
    return direct(x)


def default_arg(x, f=R.softmax):
    return f(x)


def made(f):
    def inner(x):
        return f(x)
    return inner


def own(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class Mine(nn.Module):
    def forward(self, q, k, v):
        return nn.functional.scaled_dot_product_attention(q, k, v)


def test_forbidden_references_are_found_through_aliases():
    assert forbidden_references(direct, SOFTMAX) == SOFTMAX
    assert forbidden_references(helper, SOFTMAX) == SOFTMAX  # through the student's own helper
    assert forbidden_references(default_arg, SOFTMAX) == SOFTMAX
    assert forbidden_references(made(R.softmax), SOFTMAX) == SOFTMAX  # a closure
    assert forbidden_references(own, SOFTMAX) == []
    assert forbidden_references(direct, ["tmlib"]) == ["tmlib"]  # a whole package
    assert forbidden_references(own, ["tmlib"]) == []
    assert forbidden_references(Mine, ["torch.nn.functional.scaled_dot_product_attention"]) == [
        "torch.nn.functional.scaled_dot_product_attention"]


@torch.no_grad()
def decorated_delegate(x):  # a decorator wraps the student's function: its body is still read
    return R.softmax(x)


def calls_decorated(x):  # the given wrapper of an exercise, calling the student's decorated function
    return decorated_delegate(x)


@torch.no_grad()
def decorated_own(x):
    return own(x)


def test_forbidden_references_are_found_through_decorators():
    assert forbidden_references(decorated_delegate, SOFTMAX) == SOFTMAX
    assert forbidden_references(calls_decorated, SOFTMAX) == SOFTMAX
    assert forbidden_references(decorated_own, SOFTMAX) == []
    from tmlib.decoding import greedy_decode  # decorated itself (no_grad): still recognised as the library's
    assert forbidden_references(lambda *a: greedy_decode(*a), ["tmlib.decoding.greedy_decode"]) == [
        "tmlib.decoding.greedy_decode"]


class Inherits(R_MHA):
    """A subclass that runs the library's methods: its own body names nothing forbidden."""


class InheritsMine(Mine):
    pass


def run_inherits(query):
    return Inherits(4, 2)(query, query, query)


def test_forbidden_references_follow_a_class_to_its_bases():
    mha = ["tmlib.model.MultiHeadAttention"]
    assert forbidden_references(Inherits, mha) == mha
    assert forbidden_references(run_inherits, mha) == mha  # through the function that builds it
    sdpa = ["torch.nn.functional.scaled_dot_product_attention"]
    assert forbidden_references(InheritsMine, sdpa) == sdpa  # through the student's own base class
    assert forbidden_references(Mine, mha) == []


def test_check_own_work_tells_the_student_to_write_it():
    with pytest.raises(AssertionError, match="direct calls tmlib.ref.softmax: this exercise asks you to write it"):
        check_own_work(direct, SOFTMAX)
    assert check_own_work(own, SOFTMAX) == "correct so far: own is your own work (it calls none of tmlib.ref.softmax)"

    def stand_in(x):  # the grader's replay of a student function carries what the sandbox found
        return x
    stand_in.__tm_references__ = SOFTMAX
    with pytest.raises(AssertionError, match="calls tmlib.ref.softmax"):
        check_own_work(stand_in, SOFTMAX)


def test_check_own_work_says_a_stub_is_not_written_yet():
    """A stub as handed out (a body of only a docstring and ``...``) is not "correct: your own work"."""
    def my_softmax(x):
        """Softmax of x along its last axis."""
        ...  # your code

    class MyModule:
        def __init__(self):
            super().__init__()
            ...  # your code

        def forward(self, x):
            ...  # your code

    for stub, name in ((my_softmax, "my_softmax"), (MyModule, "MyModule.forward")):
        with pytest.raises(TypeError, match=rf"^{name} is not written yet: its body is still `\.\.\.`"):
            check_own_work(stub, SOFTMAX)
    assert check_own_work(own, SOFTMAX).startswith("correct so far: own is your own work")


KV = ["tmlib.analysis.benchmarking.kv_cache_bytes"]


def imports_inside(n_layers, d_model, n_tokens, src_len, batch, bytes_per_element):  # the loophole of Exercise 12.1
    from tmlib.analysis.benchmarking import kv_cache_bytes
    return kv_cache_bytes(n_layers, d_model, n_tokens, src_len, batch, bytes_per_element)


def imports_module_inside(n_layers, d_model, n_tokens, src_len, batch, bytes_per_element):
    import tmlib.analysis.benchmarking as bench
    return bench.kv_cache_bytes(n_layers, d_model, n_tokens, src_len, batch, bytes_per_element)


def imports_package_inside(n_layers, d_model, n_tokens, src_len, batch, bytes_per_element):
    import tmlib.analysis.benchmarking
    return tmlib.analysis.benchmarking.kv_cache_bytes(n_layers, d_model, n_tokens, src_len, batch, bytes_per_element)


def own_kv_bytes(n_layers, d_model, n_tokens, src_len, batch, bytes_per_element):
    import numpy as np  # an import inside the body that names nothing forbidden
    from tmlib.analysis import flops  # noqa: F401 - a module of the library, not the forbidden function
    return int(np.prod([2, n_layers, d_model, n_tokens + src_len, batch, bytes_per_element]))


def test_check_own_work_reads_the_imports_inside_a_function():
    """``from tmlib.analysis.benchmarking import kv_cache_bytes`` inside the body is refused like ``B.kv_cache_bytes``;
    so are ``import ... as`` and an attribute chain from the imported package; a function that imports only what
    the exercise allows is the student's own work."""
    for fn in (imports_inside, imports_module_inside, imports_package_inside):
        assert forbidden_references(fn, KV) == KV, fn.__name__
        with pytest.raises(AssertionError, match=f"{fn.__name__} calls {KV[0]}: this exercise asks you to write it"):
            check_own_work(fn, KV)
    assert forbidden_references(imports_inside, ["tmlib.analysis.benchmarking"]) == ["tmlib.analysis.benchmarking"]
    assert forbidden_references(own_kv_bytes, KV) == []
    assert check_own_work(own_kv_bytes, KV) == (
        f"correct so far: own_kv_bytes is your own work (it calls none of {KV[0]})")
