"""Beam search with GNMT's length penalty, the decoder of the paper (§6.1).

The paper (§6.1): "we used beam search with a beam size of 4 and length penalty α = 0.6 … We set the maximum
output length during inference to input length + 50, but terminate early when possible." The length penalty is
the one of GNMT (Wu et al. 2016, "Google's Neural Machine Translation System", eq. 14):
``lp(Y) = ((5 + |Y|) / 6) ** α``; a hypothesis is scored by ``log P(Y | X) / lp(Y)``.

The model interface and the conventions (what counts as a generated token, the default length limit) are those
of greedy decoding, :mod:`tmlib.decoding.greedy`, whose decoding step beam search reuses.
"""
from __future__ import annotations

import torch
from torch import Tensor

from tmlib.decoding.greedy import check_decoding_args, eval_mode, next_log_probs
from tmlib.validation import check_float, check_int

__all__ = ["beam_search", "length_penalty_gnmt"]


def length_penalty_gnmt(length: int, alpha: float) -> float:
    """GNMT's length penalty ``((5 + length) / 6) ** alpha`` (Wu et al. 2016, eq. 14): ``length`` generated tokens
    (``<eos>`` included; an int or a tensor), α = 0.6 in the paper, 0 for none."""
    return ((5.0 + length) / 6.0) ** alpha



def _gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """``x`` ``(batch, k, ...)`` → ``(batch, len(index[b]), ...)``: for each sentence the rows ``index[b]``."""
    shape = index.shape + x.shape[2:]
    return x.gather(1, index.reshape(*index.shape, *([1] * (x.dim() - 2))).expand(shape))


@torch.no_grad()
def beam_search(model, src: Tensor, bos_id: int, eos_id: int, beam_size: int = 4, length_penalty: float = 0.6,
                max_len: int | None = None, use_cache: bool = True) -> list[list[int]]:
    """Beam search with GNMT's length penalty, the paper's decoder (§6.1: beam 4, α = 0.6).

    Each sentence keeps ``beam_size`` alive hypotheses and its ``beam_size`` best finished ones, all decoded as one
    batch (row ``b * beam_size + k``). A finished hypothesis scores ``log P / lp(length)``; a sentence stops when
    no alive one can beat its best (``best_alive / lp(limit) <= best_finished``, tensor2tensor's "terminate early
    when possible") or at its limit. ``beam_size=1, length_penalty=0`` is greedy decoding. The arguments and the
    result are :func:`~tmlib.decoding.greedy.greedy_decode`'s.

    Raises:
        TypeError, ValueError: as greedy decoding, and ``beam_size`` < 1, ``length_penalty`` negative or not
            finite, a vocabulary of fewer than 2 tokens.
    """
    check_int(beam_size, "beam_size", minimum=1)
    check_float(length_penalty, "length_penalty (alpha)", minimum=0.0)
    src, limits = check_decoding_args(model, src, bos_id, eos_id, max_len)
    batch, beam, alpha = src.shape[0], int(beam_size), float(length_penalty)
    device = src.device
    neg_inf = float("-inf")
    limit = torch.tensor(limits, device=device)  # (batch,)
    lp_limit = length_penalty_gnmt(limit.double(), alpha)  # (batch,) the largest penalty a hypothesis can get
    first_row = torch.arange(batch, device=device)[:, None] * beam  # (batch, 1)

    with eval_mode(model):
        memory = model.encode(src).repeat_interleave(beam, dim=0)  # (batch * beam, src_len, d_model)
        src_rows = src.repeat_interleave(beam, dim=0)  # (batch * beam, src_len)
        cache = model.new_cache() if use_cache else None
        alive = torch.full((batch, beam, 1), bos_id, dtype=torch.long, device=device)  # (batch, beam, t)
        alive_logp = torch.full((batch, beam), neg_inf, device=device)  # total log-probability
        alive_logp[:, 0] = 0.0  # at the start only hypothesis 0 exists
        finished = torch.full((batch, beam, 1), eos_id, dtype=torch.long, device=device)  # (batch, beam, t)
        finished_score = torch.full((batch, beam), neg_inf, device=device)  # log P / lp(length)
        done = torch.zeros(batch, dtype=torch.bool, device=device)  # (batch,)

        for step in range(max(limits)):
            length = step + 1  # generated tokens after this step
            log_probs = next_log_probs(model, alive.view(batch * beam, -1), memory, src_rows, cache)
            vocab = log_probs.shape[-1]
            if vocab < 2:
                raise ValueError(f"beam search needs a vocabulary of at least 2 tokens, got {vocab}")
            # 1. extend every alive hypothesis by every token; keep the 2·beam best per sentence
            candidates = alive_logp[:, :, None] + log_probs.view(batch, beam, vocab)  # (batch, beam, vocab)
            top_logp, top_index = candidates.view(batch, beam * vocab).topk(2 * beam, dim=1)  # (batch, 2·beam)
            top_from, top_token = top_index // vocab, top_index % vocab  # which hypothesis, which token
            top_seq = torch.cat([_gather_rows(alive, top_from), top_token[:, :, None]], dim=2)  # (batch, 2·beam, t+1)
            ends = top_token == eos_id  # (batch, 2·beam)

            # 2. the new alive hypotheses: the best beam that do not end in <eos>
            alive_logp, keep = top_logp.masked_fill(ends, neg_inf).topk(beam, dim=1)  # (batch, beam)
            alive = _gather_rows(top_seq, keep)  # (batch, beam, t+1)
            alive_from = _gather_rows(top_from, keep)  # (batch, beam): the hypotheses they extend

            # 3. finished candidates: <eos> among the best beam, or every alive one at the length limit
            penalty = length_penalty_gnmt(length, alpha)
            in_top = torch.arange(2 * beam, device=device) < beam
            new_score = torch.where(ends & in_top, top_logp / penalty, neg_inf)  # (batch, 2·beam)
            new_seq = top_seq
            at_limit = (length >= limit) & ~done  # (batch,)
            new_score = torch.cat([new_score, torch.where(at_limit[:, None], alive_logp / penalty, neg_inf)], dim=1)
            new_seq = torch.cat([new_seq, alive], dim=1)  # (batch, 3·beam, t+1)
            new_score = new_score.masked_fill(done[:, None], neg_inf)  # a done sentence takes nothing new
            pool_score = torch.cat([finished_score, new_score], dim=1)  # (batch, 4·beam)
            pool_seq = torch.cat([torch.cat([finished, torch.full_like(finished[:, :, :1], eos_id)], dim=2),
                                  new_seq], dim=1)  # (batch, 4·beam, t+1): older ones padded with <eos>
            finished_score, best = pool_score.topk(beam, dim=1)
            finished = _gather_rows(pool_seq, best)  # (batch, beam, t+1)

            # 4. which sentences are done
            can_improve = alive_logp[:, 0].double() / lp_limit > finished_score[:, 0].double()
            done = done | at_limit | ~can_improve
            alive_logp = alive_logp.masked_fill(done[:, None], neg_inf)
            if bool(done.all()):  # the one value read back per step
                break
            if cache is not None:
                cache.reorder((first_row + alive_from).view(-1))  # the kept hypotheses' keys/values follow them

    best_rows = finished[:, 0, 1:].tolist()  # the best finished hypothesis of each sentence, after <bos>
    found = (finished_score[:, 0] > neg_inf).tolist()
    return [row[:row.index(eos_id)] if eos_id in row else row if ok else [] for row, ok in zip(best_rows, found)]
