"""The public pieces of tmlib.training.ddp_check that the page on scaling out shows: the tiny runs' batches, model
and trainer, the single process it compares with, and the two-process check built from them.

tests/test_distributed.py checks the data-parallel trainer against its own reference; here the listing's functions
are checked: the same batches and weights in every call, the factor ``loss_scale`` seen in the norm before clipping,
and two ranks of :func:`same_update_rank` against :func:`one_process` (a short run, a few seconds).
"""
import pytest

torch = pytest.importorskip("torch")

from tmlib.training import ddp_check  # noqa: E402


def test_reversing_batches_give_the_same_order_in_every_call():
    (train_a, val_a), (train_b, val_b) = ddp_check.reversing_batches(), ddp_check.reversing_batches()
    assert train_a.batches(0) == train_b.batches(0) and train_a.batches(1) == train_b.batches(1)
    assert train_a.batches(0) != train_a.batches(1)  # reshuffled every epoch
    assert val_a.batches(0) == val_b.batches(0)
    assert sum(len(b) for b in train_a.batches(0)) == 120 and sum(len(b) for b in val_a.batches(0)) == 30


def test_tiny_model_has_the_same_weights_in_every_call():
    a, b = ddp_check.tiny_model(), ddp_check.tiny_model(float64=True, dropout=0.0)
    assert a.d_model == 32 and all(p.dtype == torch.float64 for p in b.parameters())
    assert all(torch.equal(p.double(), q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_tiny_trainer_settings_and_overrides():
    trainer = ddp_check.tiny_trainer(max_steps=2, accumulate=2)
    cfg = trainer.config
    assert (cfg.warmup_steps, cfg.lr_factor, cfg.grad_clip, cfg.max_steps, cfg.accumulate) == (5, 2.0, 1.0, 2, 2)
    assert trainer.world_size == 1 and trainer.batches_per_step == 2  # outside a process group: one process


def test_one_process_scaled_loss_halves_the_norm_and_skips_incomplete_groups():
    grads, losses, params, norms = ddp_check.one_process(3, 4)
    halved, _, _, half_norms = ddp_check.one_process(3, 4, loss_scale=0.5)
    assert len(grads) == len(losses) == len(norms) == 3 and len(params) == len(grads[0])
    assert half_norms[0] == pytest.approx(norms[0] / 2, rel=1e-12)  # the same weights: exactly half
    # later steps start from weights that clip_grad_norm_'s 1e-6 moved very slightly
    assert half_norms == pytest.approx([n / 2 for n in norms], rel=1e-6)
    # steps 1 and 2 are clipped to norm 1 in both runs: the same gradient up to clip_grad_norm_'s 1e-6
    assert ddp_check.max_abs_difference(grads[0], halved[0]) < 1e-6
    n_batches = len(ddp_check.reversing_batches()[0].batches(0))
    assert n_batches % 4 and n_batches // 4 == 2  # step 3 starts the next epoch, as the trainer does


def test_max_abs_difference():
    a = [torch.zeros(2, 3), torch.ones(4)]
    b = [torch.zeros(2, 3), torch.tensor([1.0, 1.5, 0.0, 1.0])]
    assert ddp_check.max_abs_difference(a, b) == 1.0
    with pytest.raises(ValueError):
        ddp_check.max_abs_difference(a, b[:1])


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="this torch build has no torch.distributed with gloo")
def test_two_ranks_of_same_update_rank_equal_one_process():
    same = ddp_check.check_same_update(steps=2, accumulate=2)
    assert [n for n, _, _ in same["shares"]] == [4, 4]
    assert max(same["grad_diff"]) < 1e-12 and same["param_diff"] < 1e-9 and same["ranks_equal"]
    assert len(same["grad_norm"]) == len(same["lr"]) == len(same["loss_two"]) == 2
    assert "grad_diff_halved" not in same  # the run without the factor N_p is the answer of an exercise
