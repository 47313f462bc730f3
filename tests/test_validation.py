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
