"""Tests of tmlib.utils and tmlib.course.checks."""
import numpy as np
import pytest

from tmlib.course import check_close, check_shape
from tmlib.utils import seed_everything


def test_seed_everything_reproducible():
    seed_everything(123)
    a = np.random.rand(3)
    seed_everything(123)
    np.testing.assert_array_equal(a, np.random.rand(3))
    with pytest.raises(ValueError):
        seed_everything(-1)
    with pytest.raises(TypeError):
        seed_everything(1.5)


def test_check_close_and_shape():
    assert check_close([1.0, 2.0], np.array([1.0, 2.0]), "x").startswith("correct")
    with pytest.raises(AssertionError, match="largest difference 0.5"):
        check_close([1.0, 2.5], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"shape \(2,\), expected shape \(3,\)"):
        check_close([1.0, 2.0], [1.0, 2.0, 3.0])
    check_shape(np.ones((2, 3)), (2, None))
    with pytest.raises(ValueError, match=r"\(2, 3\), expected \(2, 4\)"):
        check_shape(np.ones((2, 3)), (2, 4), "x")


def test_atomic_write_keeps_old_content_on_failure(tmp_path):
    from tmlib.utils import atomic_write

    target = tmp_path / "sub" / "f.txt"
    with atomic_write(target) as tmp:
        tmp.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]  # no temporary file left
