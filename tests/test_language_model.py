"""Tests of tmlib.data.captions: sentence batches for a decoder-only LM, loss by position, and one Trainer run."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tmlib.data import SentenceBatches, lm_forward, loss_by_position
from tmlib.training import TrainConfig, Trainer
from tmlib.model import PRESETS, ModelConfig
from tmlib.model import DecoderOnly
from tolerances import assert_close, transformer_reduction_length

SENTENCES = [[5, 6, 7], [8], [], [9, 10, 11, 12, 13], [5, 5]]


def test_batches_shift_pad_and_count():
    b = SentenceBatches(SENTENCES, max_tokens=100, shuffle=False)
    batch = b.collate_indices([0, 1, 2, 3])
    assert batch.src.shape == (4, 0)
    assert batch.tgt_in.tolist() == [[1, 5, 6, 7, 0, 0], [1, 8, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0], [1, 9, 10, 11, 12, 13]]
    assert batch.tgt_out.tolist() == [[5, 6, 7, 2, 0, 0], [8, 2, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0], [9, 10, 11, 12, 13, 2]]
    assert batch.n_tokens == 4 + 2 + 1 + 6 == int((batch.tgt_out != 0).sum())
    assert b.n_tokens() == 4 + 2 + 1 + 6 + 3


def test_crop_keeps_the_first_predictions_without_eos():
    b = SentenceBatches(SENTENCES, max_tokens=100, shuffle=False, max_positions=3)
    batch = b.collate_indices([3, 1])
    assert batch.tgt_in.tolist() == [[1, 9, 10], [1, 8, 0]]
    assert batch.tgt_out.tolist() == [[9, 10, 11], [8, 2, 0]]  # cut: no <eos>; short sentence: unchanged


def test_epochs_cover_every_sentence_once_and_are_reproducible():
    sents = [[3] * (i % 7) for i in range(200)]
    b = SentenceBatches(sents, max_tokens=40, seed=3)
    for epoch in (0, 1):
        flat = sorted(i for batch in b.batches(epoch) for i in batch)
        assert flat == list(range(200))
        assert all(len(idx) * int(b.lengths[idx].max()) <= 40 for idx in map(np.array, b.batches(epoch)))
    assert b.batches(0) == SentenceBatches(sents, max_tokens=40, seed=3).batches(0)
    assert b.batches(0) != b.batches(1)
    assert sum(batch.n_tokens for batch in b.epoch(0)) == b.n_tokens()


def test_bad_input():
    with pytest.raises(ValueError, match="at least one sentence"):
        SentenceBatches([])
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 10\)"):
        SentenceBatches([[3, 12]], vocab_size=10)
    with pytest.raises(ValueError, match="max_positions must be >= 1"):
        SentenceBatches([[3]], max_positions=0)
    with pytest.raises(ValueError, match=r"sentence indices must be in \[0, 5\)"):
        SentenceBatches(SENTENCES).collate_indices([5])


def test_loss_by_position_equals_a_direct_computation():
    torch.manual_seed(0)
    model = DecoderOnly(ModelConfig(vocab_size=14, d_model=16, n_heads=2, n_decoder_layers=1, d_ff=8, dropout=0.0,
                                    max_len=20)).double()
    b = SentenceBatches(SENTENCES, max_tokens=100, shuffle=False)
    out = loss_by_position(model, b, split=2)
    nll = {0: [], 1: []}
    with torch.no_grad():
        for s in SENTENCES:  # one sentence at a time, no padding: an independent computation
            stream = torch.tensor([[1, *s, 2]])
            logp = torch.log_softmax(model(stream[:, :-1]), -1)[0]  # (len, V)
            for t, y in enumerate(stream[0, 1:].tolist()):
                nll[int(t >= 2)].append(-logp[t, y].item())
    assert (out["n_before"], out["n_from"]) == (len(nll[0]), len(nll[1])) == (9, 7)
    # float64: the model's chain over up to 10 positions, a log-softmax over 14, means over up to 16 tokens; the
    # batch pads, the reference does not
    n = transformer_reduction_length(model.config, None, 10) + 14 + 16
    assert_close(out["before"], np.mean(nll[0]), n=n)
    assert_close(out["from"], np.mean(nll[1]), n=n)
    assert_close(out["all"], np.mean(nll[0] + nll[1]), n=n)


def test_trainer_trains_a_language_model():
    torch.manual_seed(0)
    sents = [[3 + (i + j) % 5 for j in range(6)] for i in range(50)]  # five cyclic patterns
    train = SentenceBatches(sents, max_tokens=70, seed=0)
    config = TrainConfig(model=PRESETS["tiny"], max_tokens=70, warmup_steps=10, lr_factor=1.0, label_smoothing=0.0,
                         max_steps=40, device="cpu", threads=1, amp="off", progress=False, checkpoint_minutes=None,
                         log_every=5)
    model = DecoderOnly(ModelConfig(vocab_size=10, d_model=32, n_heads=2, n_decoder_layers=1, d_ff=32, dropout=0.0,
                                    max_len=16, norm_first=True, positions="rope"))
    history = Trainer(model, train, SentenceBatches(sents[:10], shuffle=False), config, forward_fn=lm_forward).fit()
    assert history["loss"][0] > 1.8 and history["val_nll"][-1] < 1.0, (history["loss"][0], history["val_nll"])
