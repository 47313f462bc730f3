"""tmlib.validation: the argument checks written once for the whole library."""
import pytest
import torch

from tmlib import validation as V


@pytest.mark.parametrize("value, error, match", [
    (1.5, TypeError, "must be an integer, got 1.5"), (True, TypeError, "got True"), ("3", TypeError, "got '3'"),
    (0, ValueError, "must be >= 1, got 0"), (11, ValueError, "<= 10, got 11")])
def test_check_int_refuses(value, error, match):
    with pytest.raises(error, match=f"n_heads {match}" if "must" in match else match):
        V.check_int(value, "n_heads", minimum=1, maximum=10)


def test_check_int_accepts_and_none():
    assert V.check_int(torch.tensor(3).item(), "x") == 3
    assert V.check_int(None, "max_steps", minimum=1, allow_none=True) is None
    with pytest.raises(TypeError, match="max_steps must be an integer, got None"):
        V.check_int(None, "max_steps")


@pytest.mark.parametrize("value, kw, error, match", [
    (float("nan"), {}, ValueError, "finite"), (-1.0, {"minimum": 0.0}, ValueError, ">= 0.0, got -1.0"),
    (0.0, {"minimum": 0.0, "min_inclusive": False}, ValueError, "> 0.0, got 0.0"),
    (1.0, {"maximum": 1.0, "max_inclusive": False}, ValueError, "< 1.0, got 1.0"),
    (True, {}, TypeError, "a number, got True")])
def test_check_float_refuses(value, kw, error, match):
    with pytest.raises(error, match=match):
        V.check_float(value, "dropout", **kw)


def test_check_token_id():
    assert V.check_token_id(2, "eos_id", vocab_size=3) == 2
    with pytest.raises(ValueError, match=r"eos_id 3 is outside the vocabulary \[0, 3\)"):
        V.check_token_id(3, "eos_id", vocab_size=3)
    with pytest.raises(ValueError, match="bos_id must be a non-negative token id, got -1"):
        V.check_token_id(-1, "bos_id")


def test_check_token_ids_range_and_dtype():
    V.check_token_ids(torch.tensor([[0, 4]]), 5)
    with pytest.raises(ValueError, match=r"id 5, outside the vocabulary \[0, 5\)"):
        V.check_token_ids(torch.tensor([[0, 5]]), 5)
    with pytest.raises(TypeError, match="integer dtype"):
        V.check_token_ids(torch.tensor([[0.0]]), 5)
    with pytest.raises(TypeError, match="torch.Tensor"):
        V.check_token_ids([[0]], 5)


def test_check_sequence_messages():
    with pytest.raises(ValueError, match=r"src must be 2-D .*unsqueeze"):
        V.check_sequence(torch.tensor([1, 2]), "src", 10)
    with pytest.raises(ValueError, match="tgt has length 4, more than max_len=3"):
        V.check_sequence(torch.zeros(1, 4, dtype=torch.long), "tgt", 3)


def test_integer_contract_numpy_integers_and_messages():
    """One contract: NumPy integers are integers, a bool or a float is not (TypeError), a range error is ValueError."""
    import numpy as np

    assert V.check_int(np.int64(3), "n", minimum=1) == 3 and type(V.check_int(np.int32(3), "n")) is int
    with pytest.raises(TypeError, match="n must be a positive integer, got 2.0"):
        V.check_int(2.0, "n", minimum=1)
    with pytest.raises(TypeError, match="seed must be a non-negative integer, got"):
        V.check_int(np.bool_(True), "seed", minimum=0)
    with pytest.raises(TypeError, match="pad_id must be an integer token id, got 1.5"):
        V.check_token_id(1.5, "pad_id")
    with pytest.raises(TypeError, match="a number, got '0.1'"):
        V.check_float("0.1", "dropout")
    assert V.check_float(np.float32(0.5), "p") == 0.5


def test_array_index_and_text_checks():
    import numpy as np

    assert V.check_int_array([1, 2], "lengths").dtype.kind == "i"
    with pytest.raises(TypeError, match="tokens must be integer ids, got dtype float64"):
        V.check_int_array([1.0, 2.0], "tokens", "integer ids")
    assert V.check_indices([2, 0], 3, "collate_indices").tolist() == [2, 0]
    with pytest.raises(ValueError, match="collate_indices needs at least one index"):
        V.check_indices([], 3, "collate_indices")
    with pytest.raises(TypeError, match="example indices must be integers, got dtype float64"):
        V.check_indices([0.5], 3, "collate_indices")
    with pytest.raises(ValueError, match=r"sentence indices must be in \[0, 3\), got 0..3"):
        V.check_indices([0, 3], 3, "collate_indices", "sentence")
    assert V.check_float_array([[1, 2]], "x", ndim=2).dtype == np.float64
    with pytest.raises(TypeError, match="x must hold numbers, got dtype bool"):
        V.check_float_array([True], "x")
    with pytest.raises(ValueError, match=r"x must have 2 dimensions, got shape \(2,\)"):
        V.check_float_array([1, 2], "x", ndim=2)
    assert V.check_texts(("a", "b"), "sentences") == ["a", "b"]
    with pytest.raises(TypeError, match=r"sentences\[1\] is int, expected str"):
        V.check_texts(["a", 1], "sentences")
