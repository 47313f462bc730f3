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
    with pytest.raises(AssertionError, match=r"1 of 2 entries is off .*\n  index \(1,\): far off"):
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


def test_get_device_picks_cuda_then_mps_then_cpu(monkeypatch):
    torch = pytest.importorskip("torch")
    from tmlib.utils import get_device

    monkeypatch.delenv("TMLIB_DEVICE", raising=False)
    for cuda, mps, expected in [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")]:
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda mps=mps: mps)
        assert get_device() == torch.device(expected)
    with pytest.raises(ValueError, match="'mps' was requested but torch.backends.mps.is_available"):
        get_device("mps")
    with pytest.raises(ValueError, match="'cuda' was requested"):
        get_device("cuda")
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        get_device("gpu")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert get_device("mps") == torch.device("mps")
    monkeypatch.setenv("TMLIB_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")
