"""Tests of tmlib.course.checks.check_close: tolerances, messages a student can act on, the old signature."""
import numpy as np
import pytest
import torch

from tmlib.course import check_close, tolerance_text


def test_old_signature_still_works():
    # positional `what`, keyword atol (as notebooks 1-9 call it), atol=0 for integer counts
    assert check_close([[2.2512]], np.array([[2.2512]]), "attention output").startswith("correct: attention output")
    assert check_close(8_099_600, 8_099_600, what="count", atol=0).startswith("correct")
    assert check_close(0.1, 0.1 + 1e-13, "x", atol=1e-12).startswith("correct")
    with pytest.raises(AssertionError):
        check_close(8_099_601, 8_099_600, atol=0)


def test_default_tolerance_is_stated_and_rejects_four_decimals():
    exact = (4 * np.e + 2) / (np.e + 3)  # 2.25122..., the exercise of notebook 1
    with pytest.raises(AssertionError, match=r"tolerance: \|answer - expected\| <= 1e-06"):
        check_close(2.2512, exact)
    assert "1e-06" in check_close(exact, exact)


def test_decimals_accepts_a_correct_hand_rounding_and_names_it():
    exact = (4 * np.e + 2) / (np.e + 3)
    msg = check_close(2.2512, exact, "output", decimals=4)
    assert msg.startswith("correct: output") and "correct to 4 decimals" in msg
    # the course's old slip, 2.2513, is not a correct rounding of 2.25122: off by 7.7e-05 against 5e-05 allowed
    with pytest.raises(AssertionError, match=r"just outside the tolerance \(less than 10 times it\).*4 decimals"):
        check_close(2.2513, exact, "output", decimals=4)
    # boundary: exactly half a unit in the last place is accepted despite binary rounding
    assert check_close(0.1235, 0.12345, decimals=4).startswith("correct")
    assert check_close(1.0, 1.4, decimals=0).startswith("correct")


def test_decimals_and_atol_are_exclusive_and_validated():
    with pytest.raises(TypeError, match="either atol or decimals"):
        check_close(1.0, 1.0, atol=1e-3, decimals=3)
    with pytest.raises(TypeError, match="non-negative integer"):
        check_close(1.0, 1.0, decimals=2.5)
    with pytest.raises(ValueError, match="non-negative"):
        check_close(1.0, 1.0, rtol=-1.0)


def test_rtol_message():
    assert "0.01 * |expected|" in check_close(101.0, 100.0, rtol=0.01, atol=0)
    with pytest.raises(AssertionError, match=r"0 \+ 0.01 \* \|expected\|"):
        check_close(102.0, 100.0, rtol=0.01, atol=0)


def test_value_message_lists_the_wrong_entries_worst_first():
    expected = np.arange(12.0).reshape(3, 4)
    answer = expected.copy()
    answer[0, 1] += 5e-5  # 50 times the tolerance
    answer[2, 3] -= 2.0    # two million times
    with pytest.raises(AssertionError) as info:
        check_close(answer, expected, "weights")
    msg = str(info.value)
    assert "2 of 12 entries are off (shape (3, 4); tolerance: |answer - expected| <= 1e-06)" in msg
    assert msg.index("index (2, 3): far off (more than 1,000 times") < msg.index(
        "index (0, 1): off by 10 to 100 times the tolerance")  # worst first


def test_many_wrong_entries_are_summarised():
    with pytest.raises(AssertionError, match=r"10 of 10 entries are off[\s\S]*and 5 more"):
        check_close(np.full(10, 2.0), np.linspace(0, 1, 10) ** 2)


@pytest.mark.parametrize("answer, expected, kwargs", [
    (2.2513, (4 * np.e + 2) / (np.e + 3), {"decimals": 4}),
    (np.array([[0.3, 0.7], [0.6, 0.4]]), np.array([[0.26894142, 0.73105858], [0.5621765, 0.4378235]]), {}),
    (np.arange(6.0).reshape(2, 3) * 3.7, np.arange(6.0).reshape(2, 3) + 0.123456, {"rtol": 1e-3, "atol": 0}),
    (torch.tensor([1.5, -2.25]), [1.4142135, -2.7182818], {"atol": 1e-3}),
])
def test_a_failure_never_prints_the_expected_value(answer, expected, kwargs):
    """Issue 24: a failing check says what is wrong, not what is right (exercises 1.3, 2.3, ... gave it away)."""
    with pytest.raises(AssertionError) as info:
        check_close(answer, expected, "answer", **kwargs)
    msg = str(info.value)
    for value in np.ravel(np.asarray(expected, dtype=float)):
        for digits in (3, 4, 6, 8, 10):
            assert f"{value:.{digits}g}" not in msg, (value, msg)
        assert f"{abs(float(np.ravel(np.asarray(answer, dtype=float))[0]) - value):.3g}" not in msg  # nor |diff|


def test_failure_hints_name_the_pattern_not_the_values():
    e = np.arange(1.0, 10.0).reshape(3, 3)
    hints = {"transposed": e.T, "opposite sign": -e, "same factor": e / np.sqrt(8), "same amount": e + 0.25}
    for hint, answer in hints.items():
        with pytest.raises(AssertionError, match=hint):
            check_close(answer, e, "scores")
    for answer, expected in ((e + np.eye(3), e), (np.zeros(3), np.full(3, 13.6))):  # no pattern; a constant answer
        with pytest.raises(AssertionError) as info:
            check_close(answer, expected, "scores")
        assert "same" not in str(info.value) and "transposed" not in str(info.value)


def test_shape_messages_with_hints():
    with pytest.raises(ValueError, match=r"shape \(2,\), expected shape \(3,\)$"):
        check_close([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"\(1, 3\), expected shape \(3, 1\).*transpose"):
        check_close([[1, 2, 3]], [[1], [2], [3]])
    with pytest.raises(ValueError, match=r"\(3,\), expected shape \(1, 3\).*reshape"):
        check_close([1, 2, 3], [[1, 2, 3]])


def test_nan_none_and_non_numeric():
    with pytest.raises(AssertionError, match=r"NaN or infinity in 1 entry \(first at index \(1,\)\)"):
        check_close([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(TypeError, match="is None"):
        check_close(None, 1.0)
    with pytest.raises(TypeError, match="must be a number"):
        check_close("two", 2.0)
    assert check_close([np.inf], [np.inf]).startswith("correct")  # equal infinities are equal


def test_torch_tensors_with_grad():
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    assert check_close(t * 1, [1.0, 2.0]).startswith("correct")
    assert check_close(np.array([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64)).startswith("correct")


def test_default_tolerance_follows_a_low_precision_dtype():
    # float32 holds 100 no closer than its spacing 7.6e-6: a correctly rounded float32 answer passes by default,
    # the same offset in float64 does not; the message names the relative part
    third = torch.tensor([100 / 3], dtype=torch.float32)  # rounded once: off by 1.3e-6 from 100/3
    assert abs(float(third) - 100 / 3) > 1e-6
    assert "4.76837e-07 * |expected|" in check_close(third, [100 / 3])
    with pytest.raises(AssertionError, match=r"<= 1e-06\)"):
        check_close(third.double(), [100 / 3])
    assert check_close(np.float32(100 / 3), 100 / 3).startswith("correct")  # NumPy float32 too
    assert check_close(torch.tensor([1.0]).bfloat16(), [1.0]).startswith("correct")  # bfloat16 is converted
    # a float32 answer that is wrong in the 5th digit still fails, and explicit tolerances are kept as given
    with pytest.raises(AssertionError):
        check_close(third + 1e-3, [100 / 3])
    with pytest.raises(AssertionError, match=r"<= 1e-06\)"):
        check_close(third, [100 / 3], atol=1e-6)


def test_tolerance_text():
    assert tolerance_text(0.0) == "exact equality"
    assert tolerance_text(1e-6) == "|answer - expected| <= 1e-06"
    assert tolerance_text(5e-5, decimals=4).endswith("correct to 4 decimals")


def test_an_unanswered_exercise_gets_a_message_not_a_traceback():
    import numpy as np
    import pytest

    from tmlib.course import check_close, check_shape

    for answer in (..., [1.0, ...], (np.zeros(2), ...)):
        with pytest.raises(TypeError, match=r"still `\.\.\.`"):
            check_close(answer, [1.0, 2.0], "my_peak")
    with pytest.raises(TypeError, match="is None"):
        check_close(None, 1.0, "my_peak")
    with pytest.raises(TypeError, match=r"still `\.\.\.`"):
        check_shape(..., (2, 3), "pe")
    with pytest.raises(TypeError, match="is None"):
        check_shape(None, (2, 3), "pe")
    with pytest.raises(TypeError, match="with a shape"):
        check_shape([1, 2], (2,), "pe")
    check_shape(np.zeros((2, 3)), (2, None), "pe")  # still passes
