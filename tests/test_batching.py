"""Tests of tmlib.data.batch and tmlib.data.batching: padded batches against a plain reference, token budgets, the pinned batch order
that exact resume relies on, host-side id checks, and the DataLoader path (workers, pinned memory)."""
import hashlib
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from collate import loop_collate as reference_collate  # noqa: E402  (benchmarks/collate.py's baseline)
from tmlib import data as B  # noqa: E402


def reference_length_batches(lengths, batch_tokens):
    """tmlib.decoding.metrics._length_batches before it was merged into tmlib.data.batching.length_batches."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches, current, longest = [], [], 0
    for i in order:
        new_longest = max(longest, lengths[i])
        if current and new_longest * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, new_longest = [], lengths[i]
        current.append(i)
        longest = new_longest
    if current:
        batches.append(current)
    return batches


def assert_same_batch(x, y):
    for name in ("src", "tgt_in", "tgt_out"):
        a, b = getattr(x, name), getattr(y, name)
        assert a.dtype == b.dtype == torch.int64 and a.shape == b.shape and torch.equal(a, b), name
    assert x.n_tokens == y.n_tokens and isinstance(x.n_tokens, int)


def synthetic(n=300, seed=0, tgt_low=1):
    """Random examples: source lengths in [1, 30], target lengths in [tgt_low, 30], ids in [4, 50)."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(4, 50, int(a)).tolist(), rng.integers(4, 50, int(b)).tolist())
            for a, b in zip(rng.integers(1, 31, n), rng.integers(tgt_low, 31, n))]


def _digest(batches):
    return hashlib.sha256(json.dumps(batches).encode()).hexdigest()


# ------------------------------------------------------------------ collate
def test_collate_shapes_padding_and_shift():
    ex = [([5, 6, 7], [10, 11]), ([8], [12, 13, 14, 15])]
    b = B.collate(ex, pad_id=0, bos_id=1, eos_id=2)
    assert b.src.shape == (2, 3) and b.tgt_in.shape == (2, 5) and b.tgt_out.shape == (2, 5)
    assert b.src.dtype == b.tgt_in.dtype == b.tgt_out.dtype == torch.int64
    assert b.src.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert b.tgt_in.tolist() == [[1, 10, 11, 0, 0], [1, 12, 13, 14, 15]]
    assert b.tgt_out.tolist() == [[10, 11, 2, 0, 0], [12, 13, 14, 15, 2]]
    assert b.n_tokens == 3 + 5 == int((b.tgt_out != 0).sum())
    assert len(b) == 2
    # the shift: labels are the decoder inputs moved one place left
    for i in range(2):
        n = int((b.tgt_out[i] != 0).sum())
        assert b.tgt_in[i, 1:n].tolist() == b.tgt_out[i, : n - 1].tolist()
    with pytest.raises(ValueError, match="at least one example"):
        B.collate([])


@pytest.mark.parametrize("seed", range(5))
def test_collate_equals_reference(seed):
    ex = synthetic(n=int(np.random.default_rng(seed).integers(1, 60)), seed=seed, tgt_low=0)  # some targets empty
    assert_same_batch(B.collate(ex), reference_collate(ex))
    assert_same_batch(B.collate(ex, pad_id=7, bos_id=5, eos_id=9), reference_collate(ex, 7, 5, 9))
    assert_same_batch(B.collate(ex[:1]), reference_collate(ex[:1]))  # a single example: no padding


def test_collate_from_numpy_and_tuples():
    ex = [(np.array([5, 6], dtype=np.int32), (7,)), ((8,), np.array([], dtype=np.int64))]
    assert_same_batch(B.collate(ex), reference_collate([([5, 6], [7]), ([8], [])]))


def test_collate_checks_ids_on_the_host():
    with pytest.raises(ValueError, match=r"1 example\(s\) have an empty source .*indices 1\).*filter_by_length"):
        B.collate([([5], [6]), ([], [7])])
    with pytest.raises(ValueError, match=r"target ids contain 50, outside the vocabulary \[0, 50\)"):
        B.collate([([5], [50])], vocab_size=50)
    with pytest.raises(ValueError, match="source ids contain -1"):
        B.collate([([5, -1], [6])])
    with pytest.raises(ValueError, match=r"eos_id 9 is outside the vocabulary \[0, 8\)"):
        B.collate([([5], [6])], eos_id=9, vocab_size=8)
    assert B.collate([([5], [49])], vocab_size=50).n_tokens == 2


def test_pad_ids():
    assert B.pad_ids([[3, 4, 5], [6], [7, 8]], pad_id=0).tolist() == [[3, 4, 5], [6, 0, 0], [7, 8, 0]]
    assert B.pad_ids([[3], []], pad_id=9).dtype == torch.int64
    with pytest.raises(ValueError, match="at least one"):
        B.pad_ids([])


# ------------------------------------------------------------------ token budgets
def _random_lengths(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    return [(int(a), int(b)) for a, b in zip(rng.integers(1, 40, n), rng.integers(1, 40, n))]


def test_token_batches_cover_each_example_once_and_respect_budget():
    lengths = _random_lengths()
    lengths.append((500, 3))  # longer than the budget: a batch of its own
    batches = B.token_batches(lengths, max_tokens=600, seed=1, epoch=0)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    for b in batches:
        longest = max(max(lengths[i][0], lengths[i][1] + 1) for i in b)
        assert len(b) * longest <= 600 or len(b) == 1
    assert [3000] in batches
    assert B.token_batches(np.array(lengths), max_tokens=600, seed=1, epoch=0) == batches  # an (n, 2) array too


def test_token_batches_deterministic_and_bucketed():
    lengths = _random_lengths()
    a = B.token_batches(lengths, 800, seed=3, epoch=2)
    assert a == B.token_batches(lengths, 800, seed=3, epoch=2)
    assert a != B.token_batches(lengths, 800, seed=3, epoch=3)
    assert a != B.token_batches(lengths, 800, seed=4, epoch=2)
    size = np.array([max(s, t + 1) for s, t in lengths])

    def pad_fraction(bs):
        return 1 - sum(size[b].sum() for b in bs) / sum(len(b) * size[b].max() for b in bs)

    random_batches = [list(range(i, i + 40)) for i in range(0, len(lengths), 40)]
    assert pad_fraction(a) < 0.1 < pad_fraction(random_batches)
    ordered = B.token_batches(lengths, 800, shuffle=False)
    assert [size[b].max() for b in ordered] == sorted(size[b].max() for b in ordered)
    assert ordered == B.length_batches(size, 800)


def test_token_batches_bad_arguments():
    with pytest.raises(ValueError, match="max_tokens must be >= 1, got 0"):
        B.token_batches([(1, 1)], 0)
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        B.token_batches([1, 2, 3], 10)
    with pytest.raises(ValueError, match="epoch must be >= 0"):
        B.token_batches([(1, 1)], 10, epoch=-1)
    assert B.token_batches([], 10) == [] and B.length_batches([], 10) == []


def test_length_batches_for_translation_match_the_old_helper():
    """translate_corpus's batches (sizes = source lengths) are those of the helper it used before."""
    lengths = [5, 1, 9, 3, 3, 7, 2, 8]
    batches = B.length_batches(lengths, 12)
    assert batches == reference_length_batches(lengths, 12) == [[1, 6, 3, 4], [0], [5], [7], [2]]
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert max(lengths[i] for i in b) * len(b) <= 12 or len(b) == 1
    rng = np.random.default_rng(0)
    for budget in (1, 7, 50, 1000):
        sizes = rng.integers(1, 60, 500).tolist()
        assert B.length_batches(sizes, budget) == reference_length_batches(sizes, budget)
    with pytest.raises(ValueError, match="1-D"):
        B.length_batches([[1, 2]], 10)


# ------------------------------------------------------------------ BatchIterator
def test_batch_order_is_pinned():
    """The batches of a fixed example set, pinned: any change of the order breaks exact resume (and this)."""
    it = B.BatchIterator(synthetic(), max_tokens=150, seed=7)
    b0, b1 = it.batches(0), it.batches(1)
    assert len(b0) == len(b1) == 48
    assert b0[:3] == [[257, 259, 43, 62], [225, 260, 221, 95, 33], [278, 181, 130, 207, 224]]
    assert b1[:2] == [[276, 72, 116, 226, 88, 247], [228, 268, 159, 255, 23, 289, 92, 38, 163, 146]]
    assert _digest(b0) == "af8d245f69cef971ff8de361a8b5736cc9999d882eff3643689afb1b19c32ea4"
    assert _digest(b1) == "0079aae41c2365ed84cfffcfe10e1769aeda896493a49155f81f65e6f0388f1b"
    first = next(iter(it.epoch(0)))
    assert first.src.shape == (4, 22) and first.tgt_in.shape == (4, 31) and first.n_tokens == 124
    assert first.src[0].tolist()[:5] == [41, 9, 43, 8, 0]
    ordered = B.BatchIterator(synthetic(), max_tokens=150, shuffle=False).batches(0)
    assert ordered[0] == [125, 239, 5, 235, 293, 65, 93, 107, 200, 252, 254, 266, 103, 148, 168, 227]
    assert _digest(ordered) == "607c96048d66a24bc64273e6c509863bded491d205948d02740c311494dbc094"


def test_batch_iterator_batches_equal_reference_collate():
    ex = synthetic(n=400, seed=3, tgt_low=0)
    it = B.BatchIterator(ex, max_tokens=200, seed=1, vocab_size=50)
    batches = list(it.epoch(2))
    assert len(batches) == len(it.batches(2))
    for idx, batch in zip(it.batches(2), batches):
        assert_same_batch(batch, reference_collate([ex[i] for i in idx]))
        assert len(batch) * max(batch.src.shape[1], batch.tgt_in.shape[1]) <= 200 or len(batch) == 1
    assert sum(b.n_tokens for b in batches) == it.n_target_tokens() == sum(len(t) + 1 for _, t in ex)
    assert it.examples == ex and it.num_examples == 400
    assert it.lengths.tolist() == [[len(s), len(t)] for s, t in ex]
    assert it.src_flat.dtype == np.int32
    assert B.BatchIterator(iter(ex), max_tokens=200, seed=1).batches(2) == it.batches(2)  # any iterable


def test_batch_iterator_epoch_and_resume():
    ex = [([5, 6, 7], [8, 9]), ([10, 11], [12]), ([13, 14, 15, 16], [17, 18, 19])] * 20
    it = B.BatchIterator(ex, max_tokens=64, seed=0)
    full = list(it.epoch(1))
    tail = list(it.epoch(1, start=2))
    assert len(full) == len(it.batches(1)) and len(tail) == len(full) - 2
    for x, y in zip(full[2:], tail):
        assert_same_batch(x, y)
    assert sum(b.n_tokens for b in full) == it.n_target_tokens()
    assert all(b.src.shape[0] * max(b.src.shape[1], b.tgt_in.shape[1]) <= 64 for b in full)
    assert list(it.epoch(1, start=len(full))) == []
    with pytest.raises(ValueError, match=r"start=\d+ is past the end of epoch 1"):
        list(it.epoch(1, start=len(full) + 1))


def test_batch_iterator_checks_ids_once():
    with pytest.raises(ValueError, match=r"empty source in BatchIterator's examples \(indices 1, 3\)"):
        B.BatchIterator([([4], [5]), ([], [5]), ([4], []), ([], [])])
    with pytest.raises(ValueError, match=r"source ids in BatchIterator's examples contain 8000"):
        B.BatchIterator([([4, 8000], [5])], vocab_size=8000)
    with pytest.raises(ValueError, match="at least one example"):
        B.BatchIterator([])
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        B.BatchIterator([([4], [5])], max_tokens=0)
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        B.BatchIterator([([4], [5])]).collate_indices([1])


def test_filter_by_length():
    ex = [([1] * 5, [1] * 4), ([1] * 6, [1]), ([], [1]), ([1], [1] * 5)]
    assert B.filter_by_length(ex, 5) == [([1] * 5, [1] * 4)]  # too long, empty source, target too long
    with pytest.raises(ValueError, match="max_len"):
        B.filter_by_length(ex, 0)


# ------------------------------------------------------------------ the DataLoader path
@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_yields_the_batches_of_epoch(num_workers):
    it = B.BatchIterator(synthetic(n=300, seed=5), max_tokens=150, seed=2)
    expected = list(it.epoch(3, start=4))
    kwargs = {"prefetch_factor": 3} if num_workers else {}
    loader = it.loader(3, start=4, num_workers=num_workers, **kwargs)
    assert len(loader) == len(expected) == len(it.batches(3)) - 4
    got = list(loader)
    assert len(got) == len(expected)
    for x, y in zip(got, expected):
        assert isinstance(x, B.Batch)
        assert_same_batch(x, y)
    it.batches(0)  # asking for another epoch afterwards does not change a loader already made
    assert all(torch.equal(x.src, y.src) for x, y in zip(loader, expected))


def test_loader_bad_arguments():
    it = B.BatchIterator(synthetic(n=20), max_tokens=150)
    with pytest.raises(ValueError, match="prefetch_factor=2 needs num_workers >= 1"):
        it.loader(0, prefetch_factor=2)
    with pytest.raises(ValueError, match="num_workers must be >= 0"):
        it.loader(0, num_workers=-1)
    with pytest.raises(ValueError, match="past the end"):
        it.loader(0, start=10**6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs a CUDA device")
def test_pinned_batches_copy_to_the_gpu():
    it = B.BatchIterator(synthetic(n=100), max_tokens=150)
    expected = list(it.epoch(0))
    for x, y in zip(it.loader(0, num_workers=2, pin_memory=True), expected):
        assert x.src.is_pinned() and x.tgt_in.is_pinned() and x.tgt_out.is_pinned()
        g = x.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        assert_same_batch(B.Batch(g.src.cpu(), g.tgt_in.cpu(), g.tgt_out.cpu(), g.n_tokens), y)
    assert expected[0].pin_memory().src.is_pinned()


# ------------------------------------------------------------------ padding_fraction
def test_padding_fraction_counts_the_pads_of_src_and_tgt_in():
    """padding_fraction is the share of <pad> in the src and tgt_in tensors the batches become, both sides counted;
    by hand: lengths (3, 1) and (1, 3) in one batch give src (2, 3) with 2 pads and tgt_in (2, 4) with 2 pads."""
    assert B.padding_fraction([[0, 1]], [(3, 1), (1, 3)]) == pytest.approx(4 / 14)
    assert B.padding_fraction([[0], [1]], [(3, 1), (1, 3)]) == 0.0  # one example a batch: nothing padded
    ex = synthetic(400, seed=3)
    lengths = [(len(s), len(t)) for s, t in ex]
    it = B.BatchIterator(ex, max_tokens=300, seed=0, pad_id=0, bos_id=1, eos_id=2)
    pads = total = 0
    for batch in it.epoch(0):  # ids are >= 4, so every 0 is padding
        for x in (batch.src, batch.tgt_in):
            pads, total = pads + int((x == 0).sum()), total + x.numel()
    assert B.padding_fraction(it.batches(0), lengths) == pytest.approx(pads / total, abs=1e-12)
    with pytest.raises(ValueError, match="at least one non-empty batch"):
        B.padding_fraction([], lengths)
    with pytest.raises(ValueError, match=r"\(src_len, tgt_len\) pairs"):
        B.padding_fraction([[0]], [(1, 2, 3)])
