"""The GPU path: a training step with backward, exact resume, mixed precision and decoding on CUDA.

Every test here needs a CUDA device and skips without one (the course's CI has none); they run wherever a GPU
is present, e.g. `pytest tests/test_cuda.py` on a GPU machine. The CPU equivalents of each behaviour are tested
in test_training.py and test_decoding.py; exact resume is test_training.py's ``test_resume_is_exact``, run on each
device.
"""
import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tmlib.data import BatchIterator  # noqa: E402
from tmlib.training import load_checkpoint  # noqa: E402
from tmlib.decoding import beam_search, greedy_decode  # noqa: E402
from tmlib.model import make_model  # noqa: E402
from tmlib.training import TrainConfig, Trainer, resolve_precision  # noqa: E402
from tmlib.tolerance import tolerance  # noqa: E402
from toy_data import toy_examples  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")


def _trainer(tmp_path, name, device="cuda", dropout=0.1, float64=False, **cfg):
    torch.manual_seed(0)
    model = make_model("tiny", 20, dropout=dropout)
    if float64:
        model = model.double()
    config = TrainConfig(model=model.config, warmup_steps=5, lr_factor=2.0, max_tokens=96, device=device,
                         progress=False, checkpoint_minutes=None, grad_clip=1.0, log_every=2,
                         **{"amp": "off", **cfg})
    train = BatchIterator(toy_examples(), max_tokens=96, seed=0)
    val = BatchIterator(toy_examples(30, seed=1), max_tokens=96, shuffle=False)
    return Trainer(model, train, val, config, checkpoint_path=tmp_path / name / "checkpoint.pt")


def test_training_step_with_backward_on_cuda_matches_cpu(tmp_path):
    # float64 and no dropout (whose masks come from different generators on the two devices): six steps of forward,
    # backward, clipping, the fused Adam of CUDA and the schedule give the CPU's losses. float64's eps is 2.2e-16; a
    # loss passes through about 1,000 roundings (tolerance.transformer_reduction_length), so 1e-12 relative is
    # SAFETY * eps * sqrt(1,000) with a margin of 40 for six steps (the H100 in Nov 2026 gave all 16 digits equal).
    gpu = _trainer(tmp_path, "gpu", dropout=0.0, max_steps=6, float64=True)
    gpu.fit()
    assert all(p.device.type == "cuda" and p.dtype == torch.float64 for p in gpu.model.parameters())
    cpu = _trainer(tmp_path, "cpu", device="cpu", dropout=0.0, max_steps=6, float64=True)
    cpu.fit()
    np.testing.assert_allclose(gpu.history["loss"], cpu.history["loss"], rtol=1e-12)


def test_float32_training_on_cuda_uses_tf32_only_inside_fit(tmp_path):
    # In float32 the trainer lets CUDA's tensor cores multiply in TF32 (10-bit significand, eps 2^-10) and restores
    # the global setting afterwards. Its losses then differ from the CPU's float32 ones by TF32's rounding (the H100:
    # first loss 3.10118 against 3.10127, 2.9e-5 relative), and Adam's first steps, which move every weight by about
    # the learning rate whatever its gradient's size, carry the difference on (1.2 % by step 4): so the first loss is
    # compared, within SAFETY * eps(tf32) relative, and the others only for being finite. The float64 test above
    # checks the steps themselves.
    before = torch.get_float32_matmul_precision()
    gpu = _trainer(tmp_path, "gpu", dropout=0.0, max_steps=6)
    gpu.fit()
    assert torch.get_float32_matmul_precision() == before
    cpu = _trainer(tmp_path, "cpu", device="cpu", dropout=0.0, max_steps=1)
    cpu.fit()
    assert gpu.history["loss"][0] == pytest.approx(cpu.history["loss"][0], rel=tolerance("tf32"))
    assert np.isfinite(gpu.history["loss"]).all()


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_mixed_precision_on_cuda(tmp_path, amp):
    if amp == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    t = _trainer(tmp_path, amp, amp=amp, max_steps=8)
    assert t.amp.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[amp]
    assert t.amp.scaler.is_enabled() == (amp == "fp16")  # fp16 needs loss scaling, bf16 does not
    t.fit()
    assert np.isfinite(t.history["loss"]).all()
    assert resolve_precision("auto", torch.device("cuda")) in (torch.bfloat16, torch.float16)


def test_a_gpu_checkpoint_continues_on_the_cpu(tmp_path):
    gpu = _trainer(tmp_path, "run", max_steps=4)
    gpu.fit()
    state = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert all(t.device.type == "cpu" for t in state["model"].values())
    cpu = _trainer(tmp_path, "run", device="cpu", max_steps=6)
    assert cpu.resume() and cpu.step == 4
    cpu.fit()
    assert cpu.step == 6


def test_decoding_on_cuda_equals_cpu():
    torch.manual_seed(0)
    model = make_model("tiny", 20, dropout=0.0).double().eval()
    src = torch.tensor([[5, 6, 7, 8, 0], [9, 10, 11, 12, 13]])
    expected_greedy = greedy_decode(model, src, 1, 2, max_len=8)
    expected_beam = beam_search(model, src, 1, 2, beam_size=3, max_len=8)
    model = model.cuda()
    assert greedy_decode(model, src.cuda(), 1, 2, max_len=8) == expected_greedy
    assert beam_search(model, src.cuda(), 1, 2, beam_size=3, max_len=8) == expected_beam
    assert beam_search(model, src.cuda(), 1, 2, beam_size=3, max_len=8, use_cache=False) == expected_beam


def test_compile_on_cuda(tmp_path):
    t = _trainer(tmp_path, "compiled", max_steps=3, compile=True)
    t.fit()
    assert np.isfinite(t.history["loss"]).all()
    assert dataclasses.replace(t.config, compile=False).compile is False
