"""A decoder-only language model on the English captions of Multi30k (chapter 13): data and evaluation.

The translation batches of :mod:`tmlib.data.batching` pair a source with a target, and a source may not be empty.
A language model has only one sequence per example, so :class:`SentenceBatches` batches single sentences the
same way (token-count batches bucketed by length, :func:`tmlib.data.batching.token_batches`, deterministic per seed
and epoch) and returns the same :class:`tmlib.data.batch.Batch` with an empty ``src``: the
:class:`tmlib.training.trainer.Trainer` trains on it with ``forward_fn=lambda m, b: m(b.tgt_in)``.

Each sentence becomes ``<bos> y_1 … y_m <eos>``; the model reads ``<bos> y_1 … y_m`` (``tgt_in``) and predicts
``y_1 … y_m <eos>`` (``tgt_out``). With ``max_positions=L`` a sentence is cut to its first ``L`` predictions
(``tgt_in`` and ``tgt_out`` of length at most L): chapter 13 trains on short windows and evaluates on whole
captions to measure how each position scheme extrapolates (:func:`loss_by_position`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from tmlib.data.batch import Batch
from tmlib.data.batching import TokenBudgetBatches
from tmlib.validation import check_indices, check_int

__all__ = ["SentenceBatches", "caption_corpus", "loss_by_position", "lm_forward"]


def lm_forward(model, batch: Batch) -> torch.Tensor:
    """The ``forward_fn`` of :class:`tmlib.training.trainer.Trainer` for a decoder-only model: logits
    ``(batch, len, V)`` of ``model(batch.tgt_in)``, aligned with ``batch.tgt_out``."""
    return model(batch.tgt_in)


class SentenceBatches(TokenBudgetBatches):
    """Padded batches of single sentences for a language model, bucketed by length (:class:`~tmlib.data.batching.
    TokenBudgetBatches`): ``src`` empty ``(batch, 0)``, ``tgt_in`` = ``<bos> y_1 …``, ``tgt_out`` = ``y_1 … <eos>``
    (a sentence cut to ``max_positions`` predictions ends without ``<eos>``), right-padded; ``lengths``: predictions
    per sentence. Ids checked once against ``vocab_size``.

    Raises:
        TypeError: a setting not an integer. ValueError: no sentences, an id out of range, bad sizes.
    """

    def __init__(self, sentences: Sequence[Sequence[int]], max_tokens: int = 4000, *, shuffle: bool = True,
                 seed: int = 0, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2, max_positions: int | None = None,
                 vocab_size: int | None = None):
        sentences = self._non_empty(sentences, "sentence")
        super().__init__(max_tokens, shuffle=shuffle, seed=seed, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id,
                         vocab_size=vocab_size)
        self.max_positions = check_int(max_positions, "max_positions", minimum=1, allow_none=True)
        # each sentence as one stream <bos> y_1 … y_m <eos>, cut to max_positions + 1 ids
        streams = [[self.bos_id, *s, self.eos_id] for s in sentences]
        if self.max_positions is not None:
            streams = [s[: self.max_positions + 1] for s in streams]
        self.lengths = np.array([len(s) - 1 for s in streams], dtype=np.int64)  # predictions per sentence
        self.flat = np.fromiter((i for s in streams for i in s), dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths + 1)])
        if self.flat.min() < 0 or (self.vocab_size is not None and self.flat.max() >= self.vocab_size):
            raise ValueError(f"token ids must be in [0, {self.vocab_size}), got {self.flat.min()}..{self.flat.max()}")

    @property
    def num_sentences(self) -> int:
        return len(self.lengths)

    def n_tokens(self) -> int:
        """Labels (predicted tokens) per epoch."""
        return int(self.lengths.sum())

    def size_pairs(self) -> np.ndarray:
        """``(0, predictions - 1)`` per sentence, so that :func:`tmlib.data.batching.token_batches` sizes a
        sentence by its ``len(tgt_in)``."""
        return np.stack([np.zeros_like(self.lengths), self.lengths - 1], axis=1)

    def collate_indices(self, idx: Sequence[int]) -> Batch:
        """The padded :class:`~tmlib.data.batch.Batch` of sentences ``idx`` (vectorised NumPy, one copy per tensor).

        Raises:
            TypeError: the indices are not integers.
            ValueError: ``idx`` is empty, or an index is out of range.
        """
        idx = check_indices(idx, self.num_sentences, "collate_indices", "sentence")
        lengths = self.lengths[idx]  # (batch,)
        width = int(lengths.max())
        cols = np.arange(width)[None, :]  # (1, width)
        real = cols < lengths[:, None]  # (batch, width)
        pos = np.minimum(self.offsets[idx][:, None] + cols, len(self.flat) - 2)  # (batch, width), clipped
        tgt_in = np.where(real, self.flat[pos], self.pad_id)  # <bos> y_1 …
        tgt_out = np.where(real, self.flat[pos + 1], self.pad_id)  # y_1 … <eos>
        src = np.zeros((len(idx), 0), dtype=np.int64)
        return Batch(torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out), int(lengths.sum()))


def caption_corpus(vocab_size: int = 2000, data_dir=None):
    """The English captions of Multi30k, tokenized with an English-only BPE vocabulary.

    Args:
        vocab_size: BPE vocabulary size, learned on the English training captions only.
        data_dir: where Multi30k is (see :func:`tmlib.data.multi30k.load_multi30k`).

    Returns:
        ``(tokenizer, train_ids, val_ids)``: a :class:`tmlib.data.tokenizer.BPETokenizer` and the captions of the
        training (29,000) and validation (1,014) splits as id lists.

    Raises:
        tmlib.data.multi30k.DataError (via load_multi30k): the data is missing or corrupt.
    """
    from tmlib.data.multi30k import load_multi30k
    from tmlib.data.tokenizer import train_tokenizer

    train = [en for _, en in load_multi30k("train", data_dir)]
    val = [en for _, en in load_multi30k("val", data_dir)]
    tokenizer = train_tokenizer([("", en) for en in train], vocab_size)  # the German side left empty
    return tokenizer, tokenizer.encode_batch(train), tokenizer.encode_batch(val)


@torch.no_grad()
def loss_by_position(model, batches: SentenceBatches, split: int, device=None) -> dict[str, float]:
    """A language model's cross-entropy on ``batches`` over all labels, before and from position ``split`` (t = 0
    predicts y_1): ``{"all", "before", "from", "n_before", "n_from"}`` (NaN where empty), for extrapolation past
    the lengths it was trained on. ValueError: ``split`` < 1."""
    check_int(split, "split", minimum=1)
    device = next(model.parameters()).device if device is None else torch.device(device)
    was_training = model.training
    model.eval()
    sums = torch.zeros(2, dtype=torch.float64, device=device)
    counts = torch.zeros(2, dtype=torch.float64, device=device)
    for batch in batches.epoch(0):
        batch = batch.to(device)
        logits = model(batch.tgt_in)  # (batch, len, V)
        if logits.dtype in (torch.float16, torch.bfloat16):
            logits = logits.float()  # the softmax of half-precision logits in float32
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch.tgt_out, reduction="none")  # (batch, len)
        real = batch.tgt_out != batches.pad_id  # (batch, len)
        late = torch.arange(nll.shape[1], device=device)[None, :] >= split  # (1, len)
        for g, where in enumerate((real & ~late, real & late)):
            sums[g] += nll[where].double().sum()
            counts[g] += where.sum()
    model.train(was_training)
    (s0, s1), (c0, c1) = sums.tolist(), counts.tolist()
    nan = float("nan")
    return {"all": (s0 + s1) / max(c0 + c1, 1), "before": s0 / c0 if c0 else nan, "from": s1 / c1 if c1 else nan,
            "n_before": int(c0), "n_from": int(c1)}
