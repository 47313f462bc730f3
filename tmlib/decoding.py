"""Decoding: greedy search and beam search for an encoder-decoder Transformer (paper §6.1).

Both functions are written to be read. They take any ``model`` with the interface of
:class:`tmlib.transformer.Transformer`:

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
(:func:`tmlib.batching.length_batches`), decode, detokenize, restore the original order.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import torch
from torch import Tensor

from .validation import check_float, check_int, check_token_id

__all__ = ["greedy_decode", "beam_search", "length_penalty_gnmt", "default_max_lengths", "translate_corpus"]


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
    batch = src.shape[0]
    with _EvalMode(model):
        memory = model.encode(src)  # (batch, src_len, d_model)
        cache = model.new_cache() if use_cache else None
        tokens = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)  # (batch, 1)
        outputs: list[list[int]] = [[] for _ in range(batch)]
        finished = [False] * batch
        for step in range(max(limits)):
            log_probs = _next_log_probs(model, tokens, memory, src, cache)  # (batch, vocab)
            next_tokens = log_probs.argmax(dim=-1)  # (batch,)
            for b, token in enumerate(next_tokens.tolist()):
                if finished[b]:
                    continue
                if token == eos_id:
                    finished[b] = True
                else:
                    outputs[b].append(token)
                    finished[b] = len(outputs[b]) >= limits[b]
            if all(finished):
                break
            # finished rows keep being fed <eos>; rows are independent, so this changes nothing else
            next_tokens = next_tokens.masked_fill(torch.tensor(finished, device=src.device), eos_id)
            tokens = torch.cat([tokens, next_tokens[:, None]], dim=1)  # (batch, step + 2)
    return outputs


# --------------------------------------------------------------------------- beam search
@torch.no_grad()
def beam_search(model, src: Tensor, bos_id: int, eos_id: int, beam_size: int = 4, length_penalty: float = 0.6,
                max_len: int | None = None, use_cache: bool = True) -> list[list[int]]:
    """Beam search with GNMT's length penalty, the paper's decoder (§6.1: beam 4, α = 0.6).

    All ``batch × beam_size`` hypotheses are decoded together as one flattened batch (row
    ``b * beam_size + k`` is hypothesis k of sentence b). At each step every hypothesis is
    extended by every token, and per sentence the ``2 × beam_size`` best extensions (by total
    log-probability) are examined in order:

    * an extension ending in ``<eos>`` that ranks among the best ``beam_size`` is a *finished*
      hypothesis, scored ``log P / lp(length)`` and kept in that sentence's list;
    * the first ``beam_size`` extensions not ending in ``<eos>`` stay *alive*; the cache follows
      them with ``cache.reorder(rows)``.

    (Taking ``2 × beam_size`` candidates guarantees ``beam_size`` alive ones, since at most one
    extension per hypothesis is ``<eos>``.) A sentence is done when no alive hypothesis can still
    beat its best finished one: an alive log-probability only decreases with more tokens and the
    penalty is at most ``lp(limit)``, so ``best_alive / lp(limit) <= best_finished`` is a safe
    test (the "terminate early when possible" of §6.1; tensor2tensor's rule). At the length
    limit the alive hypotheses are finished as they are. With ``beam_size=1`` and
    ``length_penalty=0`` this is exactly greedy decoding.

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

    with _EvalMode(model):
        memory = model.encode(src)  # (batch, src_len, d_model)
        memory = memory.repeat_interleave(beam, dim=0)  # (batch * beam, src_len, d_model)
        src_rows = src.repeat_interleave(beam, dim=0)  # (batch * beam, src_len)
        cache = model.new_cache() if use_cache else None
        tokens = torch.full((batch * beam, 1), bos_id, dtype=torch.long, device=device)  # (batch*beam, 1)
        # total log-probability of each alive hypothesis; at the start only hypothesis 0 exists
        scores = torch.full((batch, beam), neg_inf, device=device)  # (batch, beam)
        scores[:, 0] = 0.0
        finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]  # (score, tokens)
        done = [False] * batch

        for step in range(max(limits)):
            length = step + 1  # generated tokens after this step
            log_probs = _next_log_probs(model, tokens, memory, src_rows, cache)  # (batch*beam, vocab)
            vocab = log_probs.shape[-1]
            if vocab < 2:
                raise ValueError(f"beam search needs a vocabulary of at least 2 tokens, got {vocab}")
            candidates = scores[:, :, None] + log_probs.view(batch, beam, vocab)  # (batch, beam, vocab)
            top_scores, top_index = candidates.view(batch, beam * vocab).topk(2 * beam, dim=1)  # (batch, 2*beam)
            top_beam = (top_index // vocab).tolist()  # which hypothesis each candidate extends
            top_token = (top_index % vocab).tolist()  # by which token
            top_scores_list = top_scores.tolist()

            rows, new_tokens = [], []  # for each new hypothesis: the row it extends, its new token
            new_scores = torch.full((batch, beam), neg_inf, device=device)  # (batch, beam)
            for b in range(batch):
                if done[b]:  # keep the rows in place, fed <eos>, never selected again
                    rows += [b * beam + k for k in range(beam)]
                    new_tokens += [eos_id] * beam
                    continue
                alive: list[tuple[float, int, int]] = []  # (score, row, token)
                for rank in range(2 * beam):
                    score, k, token = top_scores_list[b][rank], top_beam[b][rank], top_token[b][rank]
                    if token == eos_id:
                        if rank < beam and score > neg_inf:
                            prefix = tokens[b * beam + k, 1:].tolist()
                            finished[b].append((score / length_penalty_gnmt(length, alpha), prefix))
                    elif len(alive) < beam:
                        alive.append((score, b * beam + k, token))
                rows += [row for _, row, _ in alive]
                new_tokens += [token for _, _, token in alive]
                new_scores[b] = torch.tensor([score for score, _, _ in alive], device=device)

                best_alive = alive[0][0]
                if length >= limits[b]:  # the limit: alive hypotheses are finished as they are
                    for score, row, token in alive:
                        if score > neg_inf:
                            prefix = tokens[row, 1:].tolist() + [token]
                            finished[b].append((score / length_penalty_gnmt(length, alpha), prefix))
                    done[b] = True
                elif finished[b] and max(s for s, _ in finished[b]) >= \
                        best_alive / length_penalty_gnmt(limits[b], alpha):
                    done[b] = True  # no alive hypothesis can overtake the best finished one

            if all(done):
                break
            index = torch.tensor(rows, dtype=torch.long, device=device)  # (batch*beam,)
            if cache is not None:
                cache.reorder(index)  # the kept hypotheses' keys/values follow them
            step_tokens = torch.tensor(new_tokens, dtype=torch.long, device=device)  # (batch*beam,)
            tokens = torch.cat([tokens.index_select(0, index), step_tokens[:, None]], dim=1)  # (batch*beam, t+1)
            scores = new_scores

    return [max(hyps, key=lambda h: h[0])[1] if hyps else [] for hyps in finished]


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
    tokens (:func:`tmlib.batching.length_batches`, the same packing as evaluation batches), so that a
    batch wastes little on padding; each batch is decoded with :func:`greedy_decode` or
    :func:`beam_search`, and the outputs are put back in the order of ``sentences``.

    Input the model cannot translate is not sent to it:

    * an empty or whitespace-only sentence (no token ids) gives ``""``;
    * a sentence whose pieces are all ``<unk>`` (another script than the training data) gives ``""`` and a
      :class:`UserWarning` saying how many there were and which (0-based indices);
    * a sentence longer than ``model.max_len`` tokens is truncated, with a :class:`UserWarning`.

    Args:
        model: a :class:`tmlib.transformer.Transformer` (or anything with its ``encode``/``decode``/
            ``new_cache`` interface and ``pad_id``, ``max_len`` attributes).
        tokenizer: a :class:`tmlib.tokenizer.BPETokenizer` (``encode_batch``, ``decode``, ``pad_id``,
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
    from tqdm.auto import tqdm

    from .batching import length_batches, pad_ids
    from .utils import get_device

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
