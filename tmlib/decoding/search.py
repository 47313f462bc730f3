"""Decoding: greedy search and beam search for an encoder-decoder Transformer (paper §6.1).

Both functions are written to be read. They take any ``model`` with the interface of
:class:`tmlib.model.transformer.Transformer`:

* ``model.encode(src) -> memory`` with ``src`` ``(batch, src_len)`` int64 and ``memory``
  ``(batch, src_len, d_model)``;
* ``model.decode(tgt, memory, src, cache=None) -> logits`` ``(batch, tgt_len, vocab)``; with a
  cache, ``tgt`` holds only the new position(s);
* ``model.new_cache()``: an empty key/value cache; ``cache.reorder(index)`` keeps batch rows
  ``index`` (beam search), ``len(cache)`` is the number of positions decoded so far;
* ``model.pad_id`` and (optionally) ``model.max_len``.

The paper (§6.1): "we used beam search with a beam size of 4 and length penalty α = 0.6 …
We set the maximum output length during inference to input length + 50, but terminate early
when possible." The length penalty is the one of GNMT (Wu et al. 2016, "Google's Neural Machine
Translation System", eq. 14): ``lp(Y) = ((5 + |Y|) / 6) ** α``; a hypothesis is scored by
``log P(Y | X) / lp(Y)``.

Conventions shared by both functions:

* A generated sequence starts after ``<bos>``; ``<eos>`` counts as a generated token (it is
  predicted like any other), but is not returned. The returned token ids contain neither.
* ``max_len`` is the largest number of generated tokens (``<eos>`` included). ``None`` means
  the paper's rule, per sentence: (number of non-pad source tokens) + 50, capped so that
  ``<bos>`` plus the output fits in ``model.max_len`` positions.
* Sentences are independent: decoding a padded batch gives what decoding each sentence alone
  gives (the padding mask hides the padding; the length limit uses the unpadded length).

:func:`translate_corpus` applies them to a whole corpus of text: tokenize, batch by source length
(:func:`tmlib.data.batching.length_batches`), decode, detokenize, restore the original order.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import torch
from torch import Tensor

from tmlib.validation import check_float, check_int, check_token_id

__all__ = ["greedy_decode", "beam_search", "length_penalty_gnmt", "default_max_lengths", "TableModel", "translate_corpus"]


# --------------------------------------------------------------------------- checks and helpers
def _check_src(src) -> Tensor:
    if not isinstance(src, Tensor):
        raise TypeError(f"src must be a torch.Tensor of token ids, got {type(src).__name__}")
    if src.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise ValueError(f"src must hold integer token ids, got dtype {src.dtype}")
    if src.dim() != 2 or src.shape[0] == 0 or src.shape[1] == 0:
        raise ValueError(f"src must have shape (batch, src_len) with batch, src_len >= 1, got {tuple(src.shape)}")
    return src.long()


def length_penalty_gnmt(length: int, alpha: float) -> float:
    """GNMT's length penalty ``((5 + length) / 6) ** alpha`` (Wu et al. 2016, eq. 14).

    Args:
        length: number of generated tokens (``<eos>`` included), >= 1.
        alpha: the exponent α (the paper uses 0.6; 0 disables the penalty).

    Returns:
        float >= 1 for length >= 1 and alpha >= 0.
    """
    return ((5.0 + length) / 6.0) ** alpha


def default_max_lengths(model, src: Tensor, max_len: int | None = None) -> list[int]:
    """Per-sentence limits on the number of generated tokens.

    Args:
        model: provides ``pad_id`` and optionally ``max_len`` (positions of the positional encoding).
        src: ``(batch, src_len)`` int64 source ids padded with ``model.pad_id``.
        max_len: ``None`` for the paper's "input length + 50", or a positive int for all sentences.

    Returns:
        list of ``batch`` ints, each >= 1.

    Raises:
        ValueError: ``max_len`` is not a positive integer.
    """
    if max_len is None:
        pad_id = getattr(model, "pad_id", 0)
        limits = [int(n) + 50 for n in (src != pad_id).sum(dim=1).tolist()]
    else:
        max_len = check_int(max_len, "max_len", minimum=1)
        limits = [int(max_len)] * src.shape[0]
    positions = getattr(model, "max_len", None)
    if positions is not None:  # <bos> takes position 0; the last generated token needs no position
        limits = [max(1, min(n, int(positions))) for n in limits]
    return limits


class _EvalMode:
    """Put a module in eval mode (no dropout) inside a ``with``; restore its mode afterwards."""

    def __init__(self, model):
        self.model = model

    def __enter__(self):
        self.was_training = getattr(self.model, "training", False)
        if hasattr(self.model, "eval"):
            self.model.eval()

    def __exit__(self, *exc):
        if self.was_training:
            self.model.train()


def _next_log_probs(model, tokens: Tensor, memory: Tensor, src: Tensor, cache) -> Tensor:
    """Log-probabilities of the next token after each prefix in ``tokens`` ``(rows, t)``.

    With a cache only the last position is fed (the cache holds the earlier ones); without one
    the whole prefix is recomputed. Returns ``(rows, vocab)`` float32.
    """
    step_input = tokens[:, -1:] if cache is not None else tokens  # (rows, 1) or (rows, t)
    logits = model.decode(step_input, memory, src, cache=cache)  # (rows, t_in, vocab)
    return torch.log_softmax(logits[:, -1].float(), dim=-1)  # (rows, vocab)


# --------------------------------------------------------------------------- greedy
@torch.no_grad()
def greedy_decode(model, src: Tensor, bos_id: int, eos_id: int, max_len: int | None = None,
                  use_cache: bool = True) -> list[list[int]]:
    """Greedy decoding: at each step append the most probable next token.

    The loop keeps its state in tensors on the model's device and reads one value back per step (whether
    every sentence has finished), so a GPU is not made to wait more than that.

    Args:
        model: an encoder-decoder with ``encode``/``decode``/``new_cache`` (module docstring).
        src: ``(batch, src_len)`` integer source ids, padded with ``model.pad_id``.
        bos_id: id of ``<bos>``, the first decoder input.
        eos_id: id of ``<eos>``; a sentence stops when it is generated.
        max_len: largest number of generated tokens (``<eos>`` included); ``None``: source
            length + 50 per sentence (paper §6.1), capped by ``model.max_len``.
        use_cache: feed one new position per step and reuse the cached keys/values
            (``model.new_cache()``); ``False`` recomputes the whole prefix every step (same result,
            O(t²) work per sentence instead of O(t)).

    Returns:
        ``batch`` lists of token ids, without ``<bos>`` and ``<eos>``.

    Raises:
        TypeError: ``src`` is not a tensor.
        ValueError: ``src`` is not 2-D integer ids; ``bos_id``/``eos_id``/``max_len`` not valid integers.
    """
    src = _check_src(src)
    bos_id, eos_id = check_token_id(bos_id, "bos_id"), check_token_id(eos_id, "eos_id")
    limits = default_max_lengths(model, src, max_len)
    batch, device = src.shape[0], src.device
    limit = torch.tensor(limits, device=device)  # (batch,)
    with _EvalMode(model):
        memory = model.encode(src)  # (batch, src_len, d_model)
        cache = model.new_cache() if use_cache else None
        tokens = torch.full((batch, 1), bos_id, dtype=torch.long, device=device)  # (batch, 1)
        finished = torch.zeros(batch, dtype=torch.bool, device=device)  # (batch,)
        length = torch.zeros(batch, dtype=torch.long, device=device)  # generated tokens, <eos> excluded
        for _ in range(max(limits)):
            log_probs = _next_log_probs(model, tokens, memory, src, cache)  # (batch, vocab)
            next_tokens = log_probs.argmax(dim=-1).masked_fill(finished, eos_id)  # finished rows are fed <eos>
            length += ~finished & (next_tokens != eos_id)
            finished = finished | (next_tokens == eos_id) | (length >= limit)
            tokens = torch.cat([tokens, next_tokens[:, None]], dim=1)  # (batch, step + 2)
            if bool(finished.all()):  # the one value read back per step
                break
    rows, lengths = tokens[:, 1:].tolist(), length.tolist()
    return [row[:n] for row, n in zip(rows, lengths)]


# --------------------------------------------------------------------------- beam search
def _gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """``x`` ``(batch, k, ...)`` → ``(batch, len(index[b]), ...)``: for each sentence the rows ``index[b]``."""
    shape = index.shape + x.shape[2:]
    return x.gather(1, index.reshape(*index.shape, *([1] * (x.dim() - 2))).expand(shape))


@torch.no_grad()
def beam_search(model, src: Tensor, bos_id: int, eos_id: int, beam_size: int = 4, length_penalty: float = 0.6,
                max_len: int | None = None, use_cache: bool = True) -> list[list[int]]:
    """Beam search with GNMT's length penalty, the paper's decoder (§6.1: beam 4, α = 0.6).

    Every sentence keeps ``beam_size`` *alive* hypotheses (not ended) and the ``beam_size`` best *finished*
    ones (ended by ``<eos>``). All ``batch × beam_size`` alive hypotheses are decoded together as one
    flattened batch (row ``b * beam_size + k`` is hypothesis k of sentence b). At each step:

    1. every alive hypothesis is extended by every token; per sentence the ``2 × beam_size`` best
       extensions by total log-probability are kept (at most one extension per hypothesis is ``<eos>``, so
       at least ``beam_size`` of them are not);
    2. the ``beam_size`` best of those that do not end in ``<eos>`` become the new alive hypotheses (the
       cache follows them with ``cache.reorder(rows)``);
    3. those that end in ``<eos>`` and rank among the best ``beam_size`` are finished, scored
       ``log P / lp(length)`` with ``lp(n) = ((5 + n) / 6) ** α``, and merged into the finished list;
    4. a sentence is done when no alive hypothesis can still beat its best finished one (an alive
       log-probability only decreases with more tokens and the penalty is at most ``lp(limit)``, so
       ``best_alive / lp(limit) <= best_finished`` is a safe test: the "terminate early when possible" of
       §6.1, tensor2tensor's rule), or at its length limit, where the alive hypotheses are finished as
       they are.

    The state lives in tensors on the model's device; one value is read back per step (whether every sentence
    is done). With ``beam_size=1`` and ``length_penalty=0`` this is exactly greedy decoding.

    Args:
        model: an encoder-decoder with ``encode``/``decode``/``new_cache`` (module docstring).
        src: ``(batch, src_len)`` integer source ids, padded with ``model.pad_id``.
        bos_id: id of ``<bos>``.
        eos_id: id of ``<eos>``.
        beam_size: hypotheses kept per sentence, >= 1 (paper: 4).
        length_penalty: GNMT's α >= 0 (paper: 0.6; 0 ranks by plain log-probability).
        max_len: largest number of generated tokens (``<eos>`` included); ``None``: source
            length + 50 per sentence, capped by ``model.max_len``.
        use_cache: reuse cached keys/values (one new position per step) or recompute the prefix.

    Returns:
        ``batch`` lists of token ids (the best hypothesis per sentence), without ``<bos>``/``<eos>``.

    Raises:
        TypeError: ``src`` is not a tensor.
        ValueError: ``beam_size`` < 1 or not an integer; ``length_penalty`` negative or not a
            number; ``src`` not 2-D integer ids; ``bos_id``/``eos_id``/``max_len`` not valid integers;
            a vocabulary of fewer than 2 tokens.
    """
    check_int(beam_size, "beam_size", minimum=1)
    check_float(length_penalty, "length_penalty (alpha)", minimum=0.0)
    src = _check_src(src)
    bos_id, eos_id = check_token_id(bos_id, "bos_id"), check_token_id(eos_id, "eos_id")
    limits = default_max_lengths(model, src, max_len)
    batch, beam, alpha = src.shape[0], int(beam_size), float(length_penalty)
    device = src.device
    neg_inf = float("-inf")
    limit = torch.tensor(limits, device=device)  # (batch,)
    lp_limit = ((5.0 + limit.double()) / 6.0) ** alpha  # (batch,) the largest penalty a hypothesis can get
    first_row = torch.arange(batch, device=device)[:, None] * beam  # (batch, 1)

    with _EvalMode(model):
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
            log_probs = _next_log_probs(model, alive.view(batch * beam, -1), memory, src_rows, cache)
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
            penalty = ((5.0 + length) / 6.0) ** alpha
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


class TableModel(torch.nn.Module):
    """A toy "model" that reads its next-token probabilities from a table, for worked examples of decoding.

    ``table`` maps a prefix (the tuple of token ids generated so far, after ``<bos>``) to a dict
    ``{token id: probability}``; a prefix missing from the table gives ``<eos>`` with probability 1. The
    source is ignored. It offers the interface of :class:`tmlib.model.transformer.Transformer` that
    :func:`greedy_decode` and :func:`beam_search` use (``encode``, ``decode``, ``new_cache``, ``pad_id``,
    ``max_len``), so the real decoders can be run on a table small enough to check by hand (chapter 9).

    Args:
        table: ``{prefix tuple: {token: probability}}``; probabilities of a prefix should sum to 1.
        vocab_size: number of token ids.
        eos_id: id of ``<eos>``.
        pad_id: id of padding.

    Raises:
        ValueError: a token id outside ``[0, vocab_size)`` or a probability outside ``(0, 1]``.
    """

    max_len = 64

    class _PrefixCache:
        def __init__(self):
            self.tokens = None

        def __len__(self):
            return 0 if self.tokens is None else self.tokens.shape[1]

        def reorder(self, index):
            if self.tokens is not None:
                self.tokens = self.tokens.index_select(0, index.to(self.tokens.device))

    def __init__(self, table: dict, vocab_size: int, eos_id: int = 2, pad_id: int = 0):
        super().__init__()
        for prefix, dist in table.items():
            for token, p in dist.items():
                check_token_id(token, f"token of prefix {prefix}", vocab_size)
                if not 0.0 < p <= 1.0:
                    raise ValueError(f"probability of token {token} after {prefix} must be in (0, 1], got {p}")
        self.table, self.vocab_size, self.eos_id, self.pad_id = dict(table), vocab_size, eos_id, pad_id

    def new_cache(self):
        return self._PrefixCache()

    def encode(self, src: Tensor) -> Tensor:
        return torch.zeros(src.shape[0], src.shape[1], 1)  # (batch, src_len, 1): the source plays no role

    def decode(self, tgt: Tensor, memory: Tensor, src: Tensor, cache=None) -> Tensor:
        if cache is not None:
            cache.tokens = tgt if cache.tokens is None else torch.cat([cache.tokens, tgt], dim=1)
            tgt = cache.tokens
        probs = torch.full((tgt.shape[0], self.vocab_size), 1e-30)  # (rows, vocab)
        for row, prefix in enumerate(tgt[:, 1:].tolist()):
            for token, p in self.table.get(tuple(prefix), {self.eos_id: 1.0}).items():
                probs[row, token] = p
        return probs.log()[:, None, :]  # (rows, 1, vocab): the next-token log-probabilities


# --------------------------------------------------------------------------- a whole corpus
def _check_texts(texts, name: str) -> list[str]:
    """``texts`` as a list of ``str``; raises TypeError naming ``name`` otherwise (a bare string included)."""
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"{name} must be a list of strings (one per sentence), got {type(texts).__name__}")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"{name}[{bad[0]}] is {type(texts[bad[0]]).__name__}, expected str")
    return list(texts)


def _all_unknown(tokenizer, ids: list[int]) -> bool:
    """True when ``ids`` is non-empty and (apart from bare word-start markers) only ``<unk>``."""
    if not ids:
        return False
    if hasattr(tokenizer, "unknown_fraction"):
        return tokenizer.unknown_fraction(ids) == 1.0
    unk_id = getattr(tokenizer, "unk_id", None)
    return unk_id is not None and all(i == unk_id for i in ids)


def _indices(ix: list[int], shown: int = 5) -> str:
    return ", ".join(map(str, ix[:shown])) + (", ..." if len(ix) > shown else "")


def translate_corpus(model, tokenizer, sentences: Sequence[str], beam_size: int = 1, batch_tokens: int = 4000,
                     device=None, length_penalty: float = 0.6, max_len: int | None = None,
                     progress: bool = True) -> list[str]:
    """Translate many sentences: tokenize, batch by length, decode, detokenize, restore the order.

    Sentences are sorted by source length and cut into batches of at most ``batch_tokens`` padded source
    tokens (:func:`tmlib.data.batching.length_batches`, the same packing as evaluation batches), so that a
    batch wastes little on padding; each batch is decoded with :func:`greedy_decode` or
    :func:`beam_search`, and the outputs are put back in the order of ``sentences``.

    Input the model cannot translate is not sent to it:

    * an empty or whitespace-only sentence (no token ids) gives ``""``;
    * a sentence whose pieces are all ``<unk>`` (another script than the training data) gives ``""`` and a
      :class:`UserWarning` saying how many there were and which (0-based indices);
    * a sentence longer than ``model.max_len`` tokens is truncated, with a :class:`UserWarning`.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer` (or anything with its ``encode``/``decode``/
            ``new_cache`` interface and ``pad_id``, ``max_len`` attributes).
        tokenizer: a :class:`tmlib.data.tokenizer.BPETokenizer` (``encode_batch``, ``decode``, ``pad_id``,
            ``bos_id``, ``eos_id``, ``unk_id``); source ids carry no ``<bos>``/``<eos>``, as in training.
        sentences: n source sentences (plain text).
        beam_size: 1 for greedy decoding, >1 for beam search (the paper: 4).
        batch_tokens: at most this many source tokens per batch, padding and beams included
            (``beam_size × batch × longest source``).
        device: where to decode; ``None`` keeps the model's device, ``"auto"`` uses
            :func:`tmlib.utils.get_device`, otherwise a ``torch.device`` or name. The model is moved there.
        length_penalty: GNMT's α for beam search (paper: 0.6).
        max_len: largest number of generated tokens; ``None``: source length + 50 (paper §6.1).
        progress: show a tqdm progress bar (in sentences).

    Returns:
        n translations (detokenized text), in the order of ``sentences``.

    Raises:
        TypeError: ``sentences`` is not a list of strings.
        ValueError: ``beam_size`` < 1 or ``batch_tokens`` < 1; the tokenizer's pad id differs from
            ``model.pad_id``.
    """
    from tqdm import tqdm  # the text bar on stderr (a widget bar could not be drawn by the offline site)

    from tmlib.data.batching import length_batches, pad_ids
    from tmlib.utils import get_device

    sentences = _check_texts(sentences, "sentences")
    check_int(beam_size, "beam_size", minimum=1)
    check_int(batch_tokens, "batch_tokens", minimum=1)
    pad_id = getattr(model, "pad_id", tokenizer.pad_id)
    if pad_id != tokenizer.pad_id:
        raise ValueError(f"tokenizer pad id {tokenizer.pad_id} differs from model.pad_id {pad_id}")
    if device is None:
        param = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
        device = param.device if param is not None else torch.device("cpu")
    elif device == "auto":
        device = get_device()
    device = torch.device(device)
    if hasattr(model, "to"):
        model.to(device)

    ids = tokenizer.encode_batch(sentences) if sentences else []
    blank = [not s.strip() or not row for s, row in zip(sentences, ids)]  # translate to ""
    unknown = [i for i, row in enumerate(ids) if not blank[i] and _all_unknown(tokenizer, row)]
    if unknown:
        warnings.warn(f"{len(unknown)} source sentence(s) consist only of unknown tokens (<unk>), e.g. text in "
                      f"another script than the training data; they were given empty translations "
                      f"(sentences {_indices(unknown)}, counting from 0)", stacklevel=2)
    skip = set(unknown)
    todo = [i for i in range(len(ids)) if not blank[i] and i not in skip]
    limit = getattr(model, "max_len", None)
    if limit is not None:
        long = [i for i in todo if len(ids[i]) > limit]
        if long:
            warnings.warn(f"{len(long)} source sentence(s) longer than model.max_len={limit} tokens were "
                          f"truncated (sentences {_indices(long)}, counting from 0)", stacklevel=2)
            for i in long:
                ids[i] = ids[i][:limit]

    outputs: list[str] = [""] * len(sentences)
    batches = length_batches([len(ids[i]) for i in todo], max(1, batch_tokens // beam_size))
    with tqdm(total=len(todo), desc=f"translating ({'greedy' if beam_size == 1 else f'beam {beam_size}'})",
              unit="sent", disable=not progress) as bar:
        for batch in batches:
            src = pad_ids([ids[todo[j]] for j in batch], pad_id).to(device)  # (batch, src_len)
            if beam_size == 1:
                hyps = greedy_decode(model, src, tokenizer.bos_id, tokenizer.eos_id, max_len=max_len)
            else:
                hyps = beam_search(model, src, tokenizer.bos_id, tokenizer.eos_id, beam_size=beam_size,
                                   length_penalty=length_penalty, max_len=max_len)
            for j, hyp in zip(batch, hyps):
                outputs[todo[j]] = tokenizer.decode(hyp)
            bar.update(len(batch))
    return outputs
