"""Tests of tmlib.decoding.greedy and tmlib.decoding.beam: greedy search and beam search (paper §6.1).

Independent references: a hand-made toy "model" with fixed next-token tables (the best sequence is
known by hand), teacher-forced log-probabilities from ``model(src, tgt)``, and decoding each
sentence alone.
"""
import math

import pytest
import torch
from torch import nn

from tmlib.decoding import TableModel, beam_search, default_max_lengths, greedy_decode, length_penalty_gnmt
from tolerances import assert_close

transformer = pytest.importorskip("tmlib.model.transformer", reason="tmlib.model.transformer (the model) is not available")

PAD, BOS, EOS = 0, 1, 2
VOCAB = 12


def tiny_model(seed: int = 0, vocab: int = VOCAB) -> nn.Module:
    torch.manual_seed(seed)
    model = transformer.make_model("tiny", vocab, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=2,
                                   d_ff=32, dropout=0.1, max_len=64, pad_id=PAD, tie_embeddings=False)
    # untied: with the generator tied to the target embedding a random model mostly repeats its input token
    return model.eval()


def random_src(batch: int, src_len: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (batch, src_len), generator=g)  # (batch, src_len), no specials


def sequence_log_prob(model, src_row: torch.Tensor, tokens: list[int], limit: int) -> float:
    """log P(tokens [+ <eos>] | src) by teacher forcing: <eos> is scored when the output ended before the limit."""
    target = tokens + ([EOS] if len(tokens) < limit else [])
    tgt_in = torch.tensor([[BOS] + target[:-1]])  # (1, m)
    with torch.no_grad():
        logp = torch.log_softmax(model(src_row[None], tgt_in).float(), dim=-1)[0]  # (m, vocab)
    return float(logp[torch.arange(len(target)), torch.tensor(target)].sum())


# ----------------------------------------------------------------------------- a toy model with known answers
# The toy model is tmlib.decoding.table.TableModel on this table (chapter 9 uses the same class).
#  Vocabulary: 0 <pad>, 1 <bos>, 2 <eos>, 3 "A", 4 "B", 5 "C", 6 "D".  Sequence probabilities:
#  greedy picks A (0.6), then A (0.4), then <eos> (1.0): P(A A) = 0.24;
#  the best sequence is B <eos>: 0.4 * 0.9 = 0.36, which greedy misses.
TOY_TABLE = {(): {3: 0.6, 4: 0.4}, (3,): {3: 0.4, 4: 0.3, EOS: 0.3}, (4,): {EOS: 0.9, 3: 0.1}, (3, 3): {EOS: 1.0}}


def toy_model() -> TableModel:
    """A fresh toy model; tests may replace its ``table`` or ``max_len``."""
    return TableModel(TOY_TABLE, vocab_size=7, eos_id=EOS, pad_id=PAD)


@pytest.mark.parametrize("use_cache", [True, False])
def test_toy_beam_finds_the_best_sequence_greedy_misses(use_cache):
    toy, src = toy_model(), torch.tensor([[3, 4, 3]])
    assert greedy_decode(toy, src, BOS, EOS, use_cache=use_cache) == [[3, 3]]
    for beam in (2, 3, 4):
        assert beam_search(toy, src, BOS, EOS, beam_size=beam, length_penalty=0.0, use_cache=use_cache) == [[4]]
    assert beam_search(toy, src, BOS, EOS, beam_size=1, length_penalty=0.0, use_cache=use_cache) == [[3, 3]]


@pytest.mark.parametrize("use_cache", [True, False])
def test_toy_beam_cache_follows_the_surviving_hypotheses(use_cache):
    # Both survivors of step 2 extend hypothesis "B" (row 1), so the cache must be reordered to rows [1, 1]:
    # a cache still holding "A" in row 0 would continue "A A" -> "C" instead of "B A" -> <eos>.
    toy = toy_model()
    toy.table = {(): {3: 0.51, 4: 0.49}, (3,): {EOS: 0.2, 3: 0.2, 4: 0.2, 5: 0.2, 6: 0.2},
                 (4,): {3: 0.5, 4: 0.5}, (4, 3): {EOS: 1.0}, (4, 4): {EOS: 0.5, 3: 0.5}, (3, 3): {5: 1.0}}
    out = beam_search(toy, torch.tensor([[3]]), BOS, EOS, beam_size=2, length_penalty=0.0, use_cache=use_cache)
    assert out == [[4, 3]]


def test_toy_length_penalty_prefers_longer_when_strong():
    # log 0.24 / lp(3) vs log 0.36 / lp(2): with alpha = 0 "B" wins, with a large alpha "A A" wins
    toy, src = toy_model(), torch.tensor([[3]])
    a = 3.0  # (8/7)**a must exceed log(0.24)/log(0.36) = 1.40, i.e. a > 2.5
    assert math.log(0.24) / length_penalty_gnmt(3, a) > math.log(0.36) / length_penalty_gnmt(2, a)
    assert beam_search(toy, src, BOS, EOS, beam_size=2, length_penalty=a) == [[3, 3]]
    assert beam_search(toy, src, BOS, EOS, beam_size=2, length_penalty=0.6) == [[4]]


def test_length_penalty_closed_form():
    assert length_penalty_gnmt(1, 0.6) == 1.0  # (6 / 6) ** 0.6: exact
    assert_close(length_penalty_gnmt(7, 0.6), 2.0 ** 0.6, n=3)  # a sum, a division, a power
    assert length_penalty_gnmt(10, 0.0) == 1.0


def test_toy_eos_first_gives_empty_output_and_max_len_truncates():
    toy = toy_model()
    toy.table = {(): {EOS: 0.7, 3: 0.3}}
    src = torch.tensor([[3, 3]])
    assert greedy_decode(toy, src, BOS, EOS) == [[]]
    assert beam_search(toy, src, BOS, EOS, beam_size=3, length_penalty=0.0) == [[]]
    toy.table = {(): {3: 1.0}, (3,): {3: 1.0}, (3, 3): {3: 1.0}, (3, 3, 3): {3: 1.0}}
    assert greedy_decode(toy, src, BOS, EOS, max_len=2) == [[3, 3]]
    assert beam_search(toy, src, BOS, EOS, beam_size=2, max_len=2) == [[3, 3]]
    assert greedy_decode(toy, src, BOS, EOS, max_len=3) == [[3, 3, 3]]


def test_default_max_length_is_input_plus_50_capped():
    toy = toy_model()
    src = torch.tensor([[5, 6, 7, PAD], [5, PAD, PAD, PAD]])
    toy.max_len = 1000
    assert default_max_lengths(toy, src) == [53, 51]
    toy.max_len = 52
    assert default_max_lengths(toy, src) == [52, 51]
    assert default_max_lengths(toy, src, 7) == [7, 7]


# ----------------------------------------------------------------------------- the real (tiny) Transformer
def test_greedy_with_cache_equals_without_cache():
    model, src = tiny_model(), random_src(4, 7)
    with_cache = greedy_decode(model, src, BOS, EOS, max_len=12, use_cache=True)
    without = greedy_decode(model, src, BOS, EOS, max_len=12, use_cache=False)
    assert with_cache == without
    assert any(len(s) > 1 for s in with_cache)  # the test decodes real sequences, not only <eos>


def test_greedy_equals_stepwise_argmax_of_full_forward():
    # independent check: recompute each step with model(src, prefix) and take the argmax
    model, src = tiny_model(), random_src(2, 6)
    for b, out in enumerate(greedy_decode(model, src, BOS, EOS, max_len=10)):
        prefix = [BOS]
        while len(prefix) - 1 < 10:
            with torch.no_grad():
                nxt = int(model(src[b:b + 1], torch.tensor([prefix]))[0, -1].argmax())
            if nxt == EOS:
                break
            prefix.append(nxt)
        assert out == prefix[1:]


def test_beam_with_cache_equals_without_cache():
    model, src = tiny_model(), random_src(3, 6)
    a = beam_search(model, src, BOS, EOS, beam_size=3, max_len=10, use_cache=True)
    b = beam_search(model, src, BOS, EOS, beam_size=3, max_len=10, use_cache=False)
    assert a == b


def test_beam_size_one_equals_greedy():
    model, src = tiny_model(), random_src(5, 6)
    greedy = greedy_decode(model, src, BOS, EOS, max_len=12)
    assert beam_search(model, src, BOS, EOS, beam_size=1, length_penalty=0.0, max_len=12) == greedy


def test_beam_log_prob_at_least_greedy():
    model, src, limit = tiny_model(seed=3), random_src(6, 6, seed=4), 8
    greedy = greedy_decode(model, src, BOS, EOS, max_len=limit)
    beam = beam_search(model, src, BOS, EOS, beam_size=4, length_penalty=0.0, max_len=limit)
    gains = []
    for b in range(src.shape[0]):
        lp_greedy = sequence_log_prob(model, src[b], greedy[b], limit)
        lp_beam = sequence_log_prob(model, src[b], beam[b], limit)
        assert lp_beam >= lp_greedy - 1e-4, (b, greedy[b], beam[b], lp_greedy, lp_beam)
        gains.append(lp_beam - lp_greedy)
    assert max(gains) > 1e-3  # beam search found a strictly better sequence somewhere


@pytest.mark.parametrize("decode", ["greedy", "beam"])
def test_batch_equals_each_sentence_alone_and_padding_does_not_matter(decode):
    model = tiny_model(seed=7)
    lengths = [7, 3, 5]
    sentences = [random_src(1, n, seed=10 + n)[0] for n in lengths]
    src = torch.full((len(lengths), max(lengths)), PAD)  # (batch, src_len), right-padded
    for i, s in enumerate(sentences):
        src[i, :len(s)] = s

    def run(x):
        if decode == "greedy":
            return greedy_decode(model, x, BOS, EOS, max_len=10)
        return beam_search(model, x, BOS, EOS, beam_size=3, max_len=10)

    batched = run(src)
    alone = [run(s[None])[0] for s in sentences]
    assert batched == alone
    assert len({tuple(o) for o in batched}) > 1  # different sentences, different outputs


def test_decoding_restores_training_mode():
    model = tiny_model().train()
    greedy_decode(model, random_src(1, 4), BOS, EOS, max_len=3)
    assert model.training


@pytest.mark.parametrize("beam_size, error", [(0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError)])
def test_bad_beam_size(beam_size, error):
    with pytest.raises(error, match="beam_size"):
        beam_search(toy_model(), torch.tensor([[3]]), BOS, EOS, beam_size=beam_size)


def test_bad_inputs():
    toy = toy_model()
    with pytest.raises(TypeError, match="float32"):
        greedy_decode(toy, torch.tensor([[3.0, 4.0]]), BOS, EOS)
    with pytest.raises(TypeError, match="float32"):
        beam_search(toy, torch.tensor([[3.0, 4.0]]), BOS, EOS)
    with pytest.raises(TypeError, match="bos_id.*1.5"):
        greedy_decode(toy, torch.tensor([[3]]), 1.5, EOS)
    with pytest.raises(TypeError, match="eos_id.*'2'"):
        beam_search(toy, torch.tensor([[3]]), BOS, "2")
    with pytest.raises(ValueError, match=r"\(batch, seq_len\).*\(3,\)"):
        greedy_decode(toy, torch.tensor([3, 4, 5]), BOS, EOS)
    with pytest.raises(TypeError, match="list"):
        greedy_decode(toy, [[3, 4]], BOS, EOS)
    with pytest.raises(ValueError, match="max_len.*0"):
        greedy_decode(toy, torch.tensor([[3]]), BOS, EOS, max_len=0)
    with pytest.raises(ValueError, match="length_penalty.*-0.5"):
        beam_search(toy, torch.tensor([[3]]), BOS, EOS, length_penalty=-0.5)


def test_table_model_worked_example_of_chapter_9():
    """tmlib.decoding.table.TableModel: greedy takes "the dog" (P = 0.12), beam search (k = 2) finds "a dog runs"
    (P = 0.288), as chapter 9 computes by hand."""
    THE, A, DOG, CAT, RUNS = 3, 4, 5, 6, 7
    table = {(): {THE: 0.5, A: 0.4, CAT: 0.1}, (THE,): {DOG: 0.4, CAT: 0.3, RUNS: 0.3}, (A,): {DOG: 0.9, CAT: 0.1},
             (THE, DOG): {EOS: 0.6, RUNS: 0.4}, (THE, CAT): {EOS: 0.5, RUNS: 0.5}, (A, DOG): {RUNS: 0.8, EOS: 0.2},
             (A, DOG, RUNS): {EOS: 1.0}}
    toy, src = TableModel(table, vocab_size=8, eos_id=EOS), torch.tensor([[3]])
    assert greedy_decode(toy, src, BOS, EOS) == [[THE, DOG]]
    for use_cache in (True, False):
        assert beam_search(toy, src, BOS, EOS, beam_size=2, length_penalty=0.0, use_cache=use_cache) == [[A, DOG, RUNS]]
    with pytest.raises(ValueError, match="probability of token 5 after \\(\\) must be in \\(0, 1\\]"):
        TableModel({(): {5: 1.5}}, vocab_size=8)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        TableModel({(): {9: 1.0}}, vocab_size=8)
