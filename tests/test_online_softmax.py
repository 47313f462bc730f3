"""tmlib.ref.online_softmax_attention: block-wise attention equals the direct formula."""
import numpy as np
import pytest

from tmlib.course import examples as E
from tmlib import ref as R
from tolerances import assert_close, attention_length

pytestmark = pytest.mark.numerics


@pytest.mark.parametrize("block_size", [1, 2, 3, 7, 16, 100])
def test_online_softmax_equals_direct_attention(block_size):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 3, 5, 8)), rng.normal(size=(2, 3, 16, 8)), rng.normal(size=(2, 3, 16, 4))
    expected, _ = R.scaled_dot_product_attention(q, k, v)
    # the running maximum rescales the partial sums once per block: up to 16 more roundings
    assert_close(R.online_softmax_attention(q, k, v, block_size), expected, n=attention_length(8, 16) + 16)


def test_online_softmax_on_the_lecture_example_1():
    ex = E.ATTENTION_EXAMPLE_1
    expected, _ = R.scaled_dot_product_attention(ex.q, ex.k, ex.v)
    assert_close(R.online_softmax_attention(ex.q, ex.k, ex.v, 2), expected, n=attention_length(2, 3) + 2)


def test_online_softmax_is_stable_for_huge_scores():
    # scores of order 1e4: a naive exp would overflow; the running maximum keeps every exp <= 1
    q = np.array([[100.0, 0.0]])
    k = np.array([[1.0, 0.0], [200.0, 0.0], [150.0, 0.0]])
    v = np.array([[1.0], [2.0], [3.0]])
    out = R.online_softmax_attention(q, k, v, block_size=1)
    assert np.isfinite(out).all()
    # the other keys' weights are e^-3535 and e^-3536: 0 in float64, so the output is exactly v[1]
    np.testing.assert_array_equal(out, R.scaled_dot_product_attention(q, k, v)[0])
    np.testing.assert_array_equal(out, [[2.0]])


@pytest.mark.parametrize("kwargs, err, msg", [
    (dict(q=np.ones((2, 3)), k=np.ones((4, 2)), v=np.ones((4, 1)), block_size=2), ValueError, "d_k"),
    (dict(q=np.ones((2, 3)), k=np.ones((4, 3)), v=np.ones((5, 1)), block_size=2), ValueError, "positions"),
    (dict(q=np.ones((1, 2, 3)), k=np.ones((2, 4, 3)), v=np.ones((2, 4, 1)), block_size=2), ValueError, "leading"),
    (dict(q=np.ones(3), k=np.ones((4, 3)), v=np.ones((4, 1)), block_size=2), ValueError, "2 dimensions"),
    (dict(q=np.ones((2, 3)), k=np.ones((4, 3)), v=np.ones((4, 1)), block_size=0), ValueError, "at least 1"),
    (dict(q=np.ones((2, 3)), k=np.ones((4, 3)), v=np.ones((4, 1)), block_size=2.0), TypeError, "integer"),
])
def test_online_softmax_rejects_bad_input(kwargs, err, msg):
    with pytest.raises(err, match=msg):
        R.online_softmax_attention(**kwargs)
