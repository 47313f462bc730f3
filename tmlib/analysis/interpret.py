"""Looking inside a trained encoder-decoder: attention capture, head statistics, head ablation (chapter 10).

What a trained translator attends to, measured rather than anecdotal:

* :func:`capture_attention` runs a teacher-forced forward pass with the model's own recording hook
  (:meth:`tmlib.model.transformer.Transformer.keep_attention`) and returns every layer's weights of the three kinds of
  attention (encoder self-attention, decoder self-attention, cross-attention) with the masks that say which
  positions are real.
* :func:`attention_statistics` / :func:`head_statistics`: per head, the entropy of its weights and the share of
  its mass on the previous token, the same position, the first token, the last token, and (cross-attention) near
  the proportional diagonal.  The statistics follow the analyses of Voita et al. (2019, "Analyzing Multi-Head
  Self-Attention", §4: positional heads attending to the previous/next token) and Clark et al. (2019, "What Does
  BERT Look At?", §3: attention to special tokens and punctuation, per-head entropy).
* :func:`word_spans` / :func:`merge_attention` / :func:`word_alignment`: BPE pieces merged into words, so that
  cross-attention reads as a soft word alignment (:func:`translate_and_capture` gets one sentence's weights).
* :func:`ablate_heads`: a context manager that switches heads off (Michel et al. 2019, "Are Sixteen Heads Really
  Better than One?", §2: head mask ξ_h = 0), and :func:`ablation_table` which measures what that costs in
  validation cross-entropy and greedy BLEU.
* :func:`override_head_attention`, :func:`permute_rows`, :func:`total_variation`, :func:`js_distance`: replace one
  head's attention distribution by another one and measure how much the output moves (Jain & Wallace 2019,
  "Attention is not Explanation", §4.2 permuted attention weights).
* :func:`bertviz_inputs`, :func:`bertviz_view`: the tensors and token strings that bertviz's ``head_view`` and
  ``model_view`` draw in encoder-decoder mode (Vig 2019, "A Multiscale Visualization of Attention in the
  Transformer Model").

Conventions: masks are boolean, True = real token (may be attended to); layers and heads are counted from 0, as in
bertviz's menus; an attention kind is one of :data:`ATTENTION_KINDS`.  Nothing here changes the model's weights or
:mod:`tmlib.model.attention`: heads are removed with hooks on the output projection ``w_o``, which are always removed
again.
"""
from __future__ import annotations

import contextlib
import unicodedata
from dataclasses import dataclass
from numbers import Integral
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "ATTENTION_KINDS", "STATISTICS", "Head", "AttentionCapture", "capture_attention", "all_heads",
    "attention_module", "attention_statistics", "head_statistics", "word_spans", "word_labels", "merge_attention",
    "ablate_heads", "nll_per_token", "greedy_bleu", "ablation_experiments", "ablation_table", "total_variation",
    "js_distance", "permute_rows", "override_head_attention", "permutation_effects", "pad_batch",
    "translate_and_capture", "word_alignment", "bertviz_inputs", "bertviz_view",
]

#: The three kinds of attention of an encoder-decoder Transformer (paper §3.2.3).
ATTENTION_KINDS = ("encoder self", "decoder self", "cross")

#: The per-head statistics of :func:`attention_statistics`, in table order.
STATISTICS = ("entropy", "max_entropy", "previous", "same", "first", "last", "diagonal")


class Head(NamedTuple):
    """One attention head: ``kind`` (a member of :data:`ATTENTION_KINDS`), ``layer`` and ``head`` (from 0)."""

    kind: str
    layer: int
    head: int


# --------------------------------------------------------------------------------------------------
# Locating heads
# --------------------------------------------------------------------------------------------------

def _check_kind(kind) -> str:
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind must be one of {ATTENTION_KINDS}, got {kind!r}")
    return kind


def attention_module(model, kind: str, layer: int):
    """The :class:`~tmlib.model.attention.MultiHeadAttention` of ``kind`` in layer ``layer`` of ``model``.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer` (``encoder.layers``, ``decoder.layers``).
        kind: ``"encoder self"``, ``"decoder self"`` or ``"cross"``.
        layer: layer index from 0.

    Raises:
        ValueError: unknown kind, or a layer index outside the stack.
    """
    _check_kind(kind)
    layers = model.encoder.layers if kind == "encoder self" else model.decoder.layers
    if isinstance(layer, bool) or not isinstance(layer, Integral) or not 0 <= layer < len(layers):
        raise ValueError(f"layer must be an integer in [0, {len(layers)}) for {kind!r} attention, got {layer!r}")
    module = layers[layer].cross_attn if kind == "cross" else layers[layer].self_attn
    if module is None:
        raise ValueError(f"decoder layer {layer} has no cross-attention")
    return module


def all_heads(model, kinds: Sequence[str] = ATTENTION_KINDS) -> list[Head]:
    """Every :class:`Head` of ``model`` of the given kinds, ordered by kind, layer, head."""
    heads = []
    for kind in kinds:
        n_layers = len(model.encoder.layers if _check_kind(kind) == "encoder self" else model.decoder.layers)
        heads += [Head(kind, layer, h) for layer in range(n_layers) for h in range(model.n_heads)]
    return heads


def _check_head(model, head) -> Head:
    if not (isinstance(head, tuple) and len(head) == 3):
        raise TypeError(f"a head is a (kind, layer, head) tuple such as Head('cross', 1, 0), got {head!r}")
    head = Head(*head)
    module = attention_module(model, head.kind, head.layer)
    if isinstance(head.head, bool) or not isinstance(head.head, Integral) or not 0 <= head.head < module.n_heads:
        raise ValueError(f"head index must be an integer in [0, {module.n_heads}), got {head.head!r} in {head}")
    return head


# --------------------------------------------------------------------------------------------------
# Capturing attention
# --------------------------------------------------------------------------------------------------

@dataclass
class AttentionCapture:
    """The attention weights of one teacher-forced forward pass.

    Attributes:
        weights: ``{kind: [per layer]}`` for each kind of :data:`ATTENTION_KINDS`; each entry is a float tensor
            ``(batch, n_heads, n_q, n_k)`` whose rows over the allowed keys sum to 1 (masked keys hold exactly 0):
            encoder self ``(batch, n_heads, src_len, src_len)``, decoder self ``(batch, n_heads, tgt_len,
            tgt_len)`` (causal: zero above the diagonal), cross ``(batch, n_heads, tgt_len, src_len)``.
        src_mask: bool ``(batch, src_len)``, True = real source token.
        tgt_mask: bool ``(batch, tgt_len)``, True = real decoder input (``<bos> y_1 … y_m``).
        logits: ``(batch, tgt_len, vocab)``: position t predicts token t + 1.
    """

    weights: dict
    src_mask: Tensor
    tgt_mask: Tensor
    logits: Tensor

    def masks(self, kind: str) -> tuple[Tensor, Tensor, bool]:
        """``(query_mask, key_mask, causal)`` of ``kind``: bool ``(batch, n_q)``, bool ``(batch, n_k)``, bool."""
        _check_kind(kind)
        if kind == "encoder self":
            return self.src_mask, self.src_mask, False
        if kind == "decoder self":
            return self.tgt_mask, self.tgt_mask, True
        return self.tgt_mask, self.src_mask, False


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int = 0) -> Tensor:
    """Right-pad integer id lists into a long tensor ``(batch, longest)`` (the layout every mask here assumes).

    Raises:
        ValueError: no rows, or an empty row.
    """
    if len(rows) == 0 or any(len(r) == 0 for r in rows):
        raise ValueError("pad_batch needs at least one row and no empty row")
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    return out


@torch.no_grad()
def capture_attention(model, src: Tensor, tgt_in: Tensor) -> AttentionCapture:
    """Run ``model(src, tgt_in)`` in evaluation mode and record every attention weight.

    Uses the model's own recording switch (:meth:`~tmlib.model.transformer.Transformer.keep_attention`): each layer then
    computes attention with the explicit softmax instead of PyTorch's fused kernel, which gives the same result up
    to floating-point rounding (``tests/test_interpret.py`` compares the logits).  The layers' recording flags and
    the model's train/eval mode are restored afterwards, also when the forward pass raises.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer` with ``pad_id`` set.
        src: long ``(batch, src_len)`` source ids, right-padded with ``model.pad_id``.
        tgt_in: long ``(batch, tgt_len)`` decoder inputs ``<bos> y_1 … y_m`` right-padded with ``model.pad_id``.

    Returns:
        :class:`AttentionCapture` (tensors on the model's device, detached).

    Raises:
        ValueError: ``model.pad_id`` is None (the masks need it), or what ``model.forward`` raises for bad inputs.
    """
    if getattr(model, "pad_id", None) is None:
        raise ValueError("capture_attention needs model.pad_id to tell real tokens from padding")
    layers = list(model.encoder.layers) + list(model.decoder.layers)
    flags = [layer.keep_attention for layer in layers]
    was_training = model.training
    model.eval()
    try:
        model.keep_attention(True)
        logits = model(src, tgt_in)  # (batch, tgt_len, vocab)
        weights = {
            "encoder self": [layer.attention_weights["self"] for layer in model.encoder.layers],
            "decoder self": [layer.attention_weights["self"] for layer in model.decoder.layers],
            "cross": [layer.attention_weights["cross"] for layer in model.decoder.layers],
        }
    finally:
        model.keep_attention(False)  # also empties every layer's attention_weights
        for layer, flag in zip(layers, flags):
            layer.keep_attention = flag
        model.train(was_training)
    return AttentionCapture(weights, src != model.pad_id, tgt_in != model.pad_id, logits)


# --------------------------------------------------------------------------------------------------
# Per-head statistics
# --------------------------------------------------------------------------------------------------

def _check_contiguous(mask: Tensor, name: str) -> Tensor:
    """Lengths ``(batch,)`` of a right-padded bool mask; ValueError unless each row is True…True False…False."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.dim() != 2:
        raise TypeError(f"{name} must be a bool tensor (batch, seq_len), True = real token; got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)} of shape {tuple(getattr(mask, 'shape', ()))}")
    lengths = mask.sum(dim=1)  # (batch,)
    expected = torch.arange(mask.shape[1], device=mask.device)[None, :] < lengths[:, None]
    if not torch.equal(mask, expected):
        raise ValueError(f"{name} must be right-padded (each row True…True then False…False)")
    return lengths


def _statistic_sums(weights: Tensor, query_mask: Tensor, key_mask: Tensor, kind: str) -> tuple[Tensor, Tensor]:
    """Sums over real queries and their counts: ``(len(STATISTICS), n_heads)`` float64 and ``(len(STATISTICS),)``."""
    _check_kind(kind)
    if not isinstance(weights, Tensor) or not weights.is_floating_point() or weights.dim() != 4:
        raise ValueError(f"weights must be a float tensor (batch, n_heads, n_q, n_k), got "
                         f"{getattr(weights, 'dtype', type(weights).__name__)} of shape "
                         f"{tuple(getattr(weights, 'shape', ()))}")
    batch, n_heads, n_q, n_k = weights.shape
    n_q_real = _check_contiguous(query_mask, "query_mask")
    n_k_real = _check_contiguous(key_mask, "key_mask")
    if tuple(query_mask.shape) != (batch, n_q) or tuple(key_mask.shape) != (batch, n_k):
        raise ValueError(f"masks {tuple(query_mask.shape)} and {tuple(key_mask.shape)} do not match weights "
                         f"{tuple(weights.shape)}: expected (batch, n_q) = {(batch, n_q)} and (batch, n_k) = "
                         f"{(batch, n_k)}")
    is_self = kind != "cross"
    causal = kind == "decoder self"
    if is_self and n_q != n_k:
        raise ValueError(f"{kind} attention needs n_q == n_k, got weights of shape {tuple(weights.shape)}")
    if bool((n_k_real[n_q_real > 0] == 0).any()):
        raise ValueError("a sentence with real queries has no real key")
    device = weights.device
    w = weights.detach().to(torch.float64)  # (batch, h, n_q, n_k)
    i = torch.arange(n_q, device=device)  # query positions
    j = torch.arange(n_k, device=device)  # key positions
    allowed = key_mask[:, None, :].expand(batch, n_q, n_k)  # (batch, n_q, n_k)
    if causal:
        allowed = allowed & (j[None, :] <= i[:, None])[None]
    n_allowed = allowed.sum(dim=-1)  # (batch, n_q)
    qm = query_mask.to(torch.float64)  # (batch, n_q)

    def masked_mean_terms(values: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
        # values (batch, h, n_q'), valid (batch, n_q') -> sum per head (h,), count
        valid = valid.to(torch.float64)
        return (values * valid[:, None, :]).sum(dim=(0, 2)), valid.sum()

    nan = torch.full((n_heads,), float("nan"), dtype=torch.float64, device=device)
    sums, counts = [], []

    # entropy in nats, 0 log 0 = 0
    plogp = torch.where(w > 0, w * torch.log(w.clamp_min(1e-300)), torch.zeros_like(w))
    s, c = masked_mean_terms(-plogp.sum(dim=-1), qm)
    sums.append(s), counts.append(c)
    # entropy of the uniform distribution over the allowed keys
    max_ent = torch.log(n_allowed.clamp_min(1).to(torch.float64))  # (batch, n_q)
    s, c = masked_mean_terms(max_ent[:, None, :].expand(batch, n_heads, n_q), qm)
    sums.append(s), counts.append(c)
    if is_self:
        # previous token: weight of key i-1 for queries i >= 1
        prev = torch.diagonal(w, offset=-1, dim1=-2, dim2=-1)  # (batch, h, n_q - 1): w[..., i, i-1] for i >= 1
        s, c = masked_mean_terms(prev, query_mask[:, 1:])
        sums.append(s), counts.append(c)
        same = torch.diagonal(w, dim1=-2, dim2=-1)  # (batch, h, n_q)
        s, c = masked_mean_terms(same, query_mask)
        sums.append(s), counts.append(c)
    else:
        sums += [nan, nan]
        counts += [torch.tensor(0.0, dtype=torch.float64, device=device)] * 2
    s, c = masked_mean_terms(w[..., 0], query_mask)  # first key
    sums.append(s), counts.append(c)
    if causal:
        # the last real key is visible only to the last query: the statistic is not defined for causal attention
        sums += [nan, nan]
        counts += [torch.tensor(0.0, dtype=torch.float64, device=device)] * 2
    else:
        last_index = (n_k_real - 1).clamp_min(0)[:, None, None, None].expand(batch, n_heads, n_q, 1)
        last = w.gather(-1, last_index)[..., 0]  # (batch, h, n_q)
        s, c = masked_mean_terms(last, query_mask)
        sums.append(s), counts.append(c)
        if is_self:
            sums.append(nan), counts.append(torch.tensor(0.0, dtype=torch.float64, device=device))
        else:
            # the proportional diagonal: query i of n_q_real sits at key position (i + 1/2) n_k / n_q - 1/2
            ratio = n_k_real.to(torch.float64) / n_q_real.clamp_min(1).to(torch.float64)  # (batch,)
            centre = (i[None, :].to(torch.float64) + 0.5) * ratio[:, None] - 0.5  # (batch, n_q)
            near = (j[None, None, :] - centre[:, :, None]).abs() <= 1.0  # (batch, n_q, n_k): within ±1 key
            near = near & key_mask[:, None, :]
            diag = (w * near[:, None].to(torch.float64)).sum(dim=-1)  # (batch, h, n_q)
            s, c = masked_mean_terms(diag, query_mask)
            sums.append(s), counts.append(c)
    return torch.stack(sums), torch.stack(counts)


def attention_statistics(weights: Tensor, query_mask: Tensor, key_mask: Tensor, kind: str) -> dict:
    """Per-head summaries of attention weights, averaged over every real query position of every sentence.

    For each head (statistics in :data:`STATISTICS`):

    * ``entropy``: ``-Σ_k w_k ln w_k`` in nats (0 ln 0 = 0): 0 when a head looks at one token;
    * ``max_entropy``: the same average for the uniform distribution over the keys each query may see,
      ``ln(number of allowed keys)``, the upper bound of ``entropy`` (for causal attention query i sees i + 1 keys);
    * ``previous``: weight on key ``i - 1`` (queries ``i ≥ 1``); ``same``: weight on key ``i`` (self-attention
      only; NaN for cross-attention, where query and key positions belong to different sentences);
    * ``first``: weight on key 0 (``<bos>`` in the decoder, the first word in the encoder);
    * ``last``: weight on the last real key.  In this course sources carry no ``<eos>`` (``tmlib.data.collate``),
      so this is the final token, a full stop in 95% of Multi30k sentences: the "sink" that heads of BERT find in
      ``[SEP]`` and punctuation (Clark et al. 2019, §3).  NaN for causal (decoder self-) attention, where only the
      last query sees that key;
    * ``diagonal`` (cross-attention only, NaN otherwise): weight within ±1 key position of the proportional
      diagonal: query i of ``n_q`` real queries (``<bos>`` counted) is centred at key ``(i + ½)·n_k/n_q − ½``.
      A monotone word-by-word alignment scores close to 1.

    Averages pool all real query positions of all sentences (long sentences weigh more); padded queries and keys
    are excluded through the masks.

    Args:
        weights: float ``(batch, n_heads, n_q, n_k)``, each real row a distribution over the allowed keys.
        query_mask: bool ``(batch, n_q)``, True = real query, right-padded.
        key_mask: bool ``(batch, n_k)``, True = real key, right-padded.
        kind: ``"encoder self"``, ``"decoder self"`` (causal) or ``"cross"``.

    Returns:
        ``{statistic: float64 NumPy array (n_heads,)}`` for each name in :data:`STATISTICS`.

    Raises:
        ValueError: an unknown kind; weights not 4-D float; masks of the wrong shape, not right-padded, or a
            sentence with queries but no key; self-attention with ``n_q != n_k``.
        TypeError: a mask that is not a 2-D bool tensor.
    """
    sums, counts = _statistic_sums(weights, query_mask, key_mask, kind)
    means = sums / counts[:, None]  # NaN where nothing was counted
    return {name: means[k].cpu().numpy() for k, name in enumerate(STATISTICS)}


def _as_pair(batch) -> tuple[Tensor, Tensor]:
    if hasattr(batch, "src") and hasattr(batch, "tgt_in"):
        return batch.src, batch.tgt_in
    src, tgt_in = batch[0], batch[1]
    return src, tgt_in


def head_statistics(model, batches: Iterable) -> "pd.DataFrame":
    """:func:`attention_statistics` of every head of ``model`` over teacher-forced batches, as one table.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        batches: an iterable of :class:`tmlib.data.Batch` or ``(src, tgt_in)`` pairs of long tensors
            ``(batch, src_len)``, ``(batch, tgt_len)``, right-padded (on the model's device).

    Returns:
        ``pandas.DataFrame`` with one row per head (columns ``kind``, ``layer``, ``head``, then :data:`STATISTICS`),
        averaged over all real query positions of all batches.
    """
    import pandas as pd

    totals: dict = {}
    for batch in batches:
        src, tgt_in = _as_pair(batch)
        cap = capture_attention(model, src, tgt_in)
        for kind in ATTENTION_KINDS:
            qm, km, _ = cap.masks(kind)
            for layer, w in enumerate(cap.weights[kind]):
                s, c = _statistic_sums(w, qm, km, kind)
                if (kind, layer) in totals:
                    s0, c0 = totals[(kind, layer)]
                    s, c = s0 + s, c0 + c
                totals[(kind, layer)] = (s, c)
    if not totals:
        raise ValueError("head_statistics needs at least one batch")
    rows = []
    for (kind, layer), (s, c) in totals.items():
        means = (s / c[:, None]).cpu().numpy()  # (n_stats, n_heads)
        for h in range(means.shape[1]):
            rows.append({"kind": kind, "layer": layer, "head": h,
                         **{name: float(means[k, h]) for k, name in enumerate(STATISTICS)}})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# BPE pieces → words
# --------------------------------------------------------------------------------------------------

def _is_special(piece: str) -> bool:
    return len(piece) > 2 and piece.startswith("<") and piece.endswith(">")


def _is_punctuation(piece: str) -> bool:
    text = piece.replace("▁", "")
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def word_spans(pieces: Sequence[str]) -> list[tuple[int, int]]:
    """Group BPE pieces into words: ``[(start, end), …]`` half-open index ranges covering all pieces in order.

    The course's tokenizer (``tmlib.data.train_tokenizer``: Metaspace, punctuation split off) writes ``▁`` at the
    start of every word.  A piece starts a new word when it begins with ``▁``, when it is a special token
    (``<bos>``, ``<eos>``, …) or punctuation, or when the piece before it was one of those; otherwise it continues
    the current word (``▁lä`` + ``dt`` = *lädt*).  A bare ``▁`` piece joins the piece after it.

    Args:
        pieces: token strings, e.g. from ``tokenizer.tokens(text)``.

    Returns:
        list of ``(start, end)`` with ``pieces[start:end]`` one word.

    Raises:
        TypeError: ``pieces`` is a string or holds non-strings.
    """
    if isinstance(pieces, str) or not all(isinstance(p, str) for p in pieces):
        raise TypeError("pieces must be a sequence of token strings, e.g. tokenizer.tokens(text)")
    spans: list[tuple[int, int]] = []
    start = 0
    for k in range(1, len(pieces) + 1):
        if k == len(pieces):
            break
        prev, piece = pieces[k - 1], pieces[k]
        if prev == "▁":
            continue
        if (piece.startswith("▁") or _is_special(piece) or _is_special(prev) or _is_punctuation(piece)
                or _is_punctuation(prev)):
            spans.append((start, k))
            start = k
    if pieces:
        spans.append((start, len(pieces)))
    return spans


def word_labels(pieces: Sequence[str], spans: Sequence[tuple[int, int]] | None = None) -> list[str]:
    """The words of :func:`word_spans`: the pieces of each span joined, without ``▁``."""
    spans = word_spans(pieces) if spans is None else spans
    return ["".join(pieces[a:b]).replace("▁", "") or "▁" for a, b in spans]


def _check_spans(spans, n: int, name: str) -> list[tuple[int, int]]:
    spans = [tuple(int(x) for x in s) for s in spans]
    position = 0
    for a, b in spans:
        if a != position or b <= a:
            raise ValueError(f"{name} must be consecutive non-empty (start, end) ranges from 0, got {spans}")
        position = b
    if position != n:
        raise ValueError(f"{name} cover {position} positions, but the weights have {n}: {spans}")
    return spans


def merge_attention(weights, query_spans: Sequence[tuple[int, int]], key_spans: Sequence[tuple[int, int]]
                    ) -> np.ndarray:
    """Attention between BPE pieces → attention between words.

    Rule: **sum over the key pieces** of a word, **average over the query pieces** of a word.  A query's weights
    are a probability distribution over keys, so the mass a query puts on a word is the sum of the masses on its
    pieces (rows keep summing to 1); a word made of several query pieces has several such distributions, and
    their mean is again a distribution (summing would make rows add up to the number of pieces).  The same rule
    as Clark et al. (2019, §2 "word-level attention maps") and bertviz's word-level views.

    Args:
        weights: ``(n_q, n_k)`` array or tensor over pieces.
        query_spans: word spans of the query pieces (:func:`word_spans`), covering ``0 … n_q``.
        key_spans: word spans of the key pieces, covering ``0 … n_k``.

    Returns:
        float64 array ``(len(query_spans), len(key_spans))``.

    Raises:
        ValueError: weights not 2-D, or spans that are not consecutive ranges covering the axis exactly.
    """
    w = weights.detach().cpu().to(torch.float64).numpy() if isinstance(weights, Tensor) else np.asarray(
        weights, dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (n_q, n_k), got shape {w.shape}")
    qs = _check_spans(query_spans, w.shape[0], "query_spans")
    ks = _check_spans(key_spans, w.shape[1], "key_spans")
    by_key = np.stack([w[:, a:b].sum(axis=1) for a, b in ks], axis=1)  # (n_q, n_key_words): sum over key pieces
    return np.stack([by_key[a:b].mean(axis=0) for a, b in qs], axis=0)  # (n_query_words, n_key_words)


# --------------------------------------------------------------------------------------------------
# Head ablation
# --------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def ablate_heads(model, heads: Iterable):
    """Switch heads off inside a ``with`` block: their output is replaced by zeros before ``W^O``.

    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O (paper §3.2.2): head i occupies the input features
    ``i·d_k … (i+1)·d_k − 1`` of the output projection ``w_o``.  A forward pre-hook on ``w_o`` zeroes those features,
    which is Michel et al.'s (2019) mask ξ_i = 0: the head contributes nothing, ``w_o``'s bias stays.  Works for
    every forward path (teacher forcing, greedy and beam search with a key/value cache).  The hooks are removed when
    the block ends, also on an exception; the model's parameters are never modified.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        heads: :class:`Head` or ``(kind, layer, head)`` tuples; repeats are allowed; empty = no change.

    Yields:
        the list of :class:`Head` switched off.

    Raises:
        TypeError: an entry is not a ``(kind, layer, head)`` tuple.
        ValueError: an unknown kind, or a layer or head index out of range.
    """
    chosen = [_check_head(model, h) for h in heads]
    per_module: dict = {}
    for h in chosen:
        module = attention_module(model, h.kind, h.layer)
        per_module.setdefault(id(module), (module, set()))[1].add(h.head)
    handles = []
    try:
        for module, idx in per_module.values():
            keep = torch.ones(module.d_model, dtype=torch.bool)
            for i in idx:
                keep[i * module.d_k:(i + 1) * module.d_k] = False

            def hook(_lin, args, keep=keep):
                x = args[0]  # (batch, n_q, d_model): Concat(head_1, …, head_h)
                return (x.masked_fill(~keep.to(x.device), 0.0),) + tuple(args[1:])

            handles.append(module.w_o.register_forward_pre_hook(hook))
        yield chosen
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def nll_per_token(model, batches: Iterable) -> float:
    """Plain cross-entropy (no label smoothing) in nats per target token, over teacher-forced batches.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer` (evaluated in eval mode; its mode is restored).
        batches: :class:`tmlib.data.Batch` objects (``src``, ``tgt_in``, ``tgt_out``), on the model's device.

    Returns:
        the loss summed over all non-pad labels divided by their number (``translation_loss`` with
        ``label_smoothing=0``, weighted by tokens).

    Raises:
        ValueError: no batch or no target token.
    """
    from tmlib.training.recipe import translation_loss

    was_training = model.training
    model.eval()
    total, n = 0.0, 0
    try:
        for batch in batches:
            logits = model(batch.src, batch.tgt_in)  # (batch, tgt_len, vocab)
            total += float(translation_loss(logits, batch.tgt_out, model.pad_id, label_smoothing=0.0,
                                            reduction="sum"))
            n += int((batch.tgt_out != model.pad_id).sum())
    finally:
        model.train(was_training)
    if n == 0:
        raise ValueError("nll_per_token needs at least one batch with target tokens")
    return total / n


def greedy_bleu(model, tokenizer, sources: Sequence[str], references: Sequence[str]) -> float:
    """Cased corpus BLEU (sacreBLEU, 13a tokenization) of the greedy translations of ``sources``.

    Decodes with :func:`tmlib.decoding.corpus.translate_corpus` (beam size 1, maximum length source + 50, paper §6.1) on the
    model's device and scores with :func:`tmlib.decoding.metrics.bleu_scores`.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        tokenizer: its :class:`tmlib.data.BPETokenizer`.
        sources: n German sentences; references: their n English references.

    Returns:
        BLEU in [0, 100].

    Raises:
        TypeError / ValueError: from ``tmlib.decoding.metrics`` for non-text input or lists of different lengths.
    """
    from tmlib.decoding.corpus import translate_corpus
    from tmlib.decoding.metrics import bleu_scores

    hyps = translate_corpus(model, tokenizer, list(sources), beam_size=1, progress=False)
    return float(bleu_scores(hyps, list(references))["bleu"])


def ablation_experiments(model, single: bool = True, all_but_one: bool = True, whole: bool = True
                         ) -> list[tuple[str, Head | None, list[Head]]]:
    """Named sets of heads to switch off, for :func:`ablation_table`.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        single: one experiment per head (that head off).
        all_but_one: per (kind, layer) and head h, every head of that layer off except h (Michel et al. 2019, §3:
            "some layers can even be reduced to a single head").
        whole: per (kind, layer) all its heads off, and finally every head of every layer off.

    Returns:
        list of ``(experiment, head, heads_off)``: ``experiment`` in ``{"none", "one head", "all but one", "whole
        layer", "all heads"}``, ``head`` the head concerned (``layer``/``kind`` for whole layers: ``head`` = -1) or
        ``None``, ``heads_off`` the :class:`Head` list.  The first entry is always ``("none", None, [])``.
    """
    heads = all_heads(model)
    out: list = [("none", None, [])]
    layers = sorted({(h.kind, h.layer) for h in heads}, key=lambda kl: (ATTENTION_KINDS.index(kl[0]), kl[1]))
    if single:
        out += [("one head", h, [h]) for h in heads]
    if all_but_one:
        for kind, layer in layers:
            same = [h for h in heads if (h.kind, h.layer) == (kind, layer)]
            out += [("all but one", keep, [h for h in same if h != keep]) for keep in same]
    if whole:
        for kind, layer in layers:
            out.append(("whole layer", Head(kind, layer, -1), [h for h in heads if (h.kind, h.layer) == (kind, layer)]))
        out.append(("all heads", None, heads))
    return out


def ablation_table(model, tokenizer, batches, sources: Sequence[str] | None = None,
                   references: Sequence[str] | None = None, experiments=None, bleu_for=("none", "one head"),
                   progress: bool = False) -> "pd.DataFrame":
    """Validation cross-entropy (and greedy BLEU) with sets of heads switched off.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        tokenizer: its :class:`tmlib.data.BPETokenizer` (for BLEU).
        batches: a list of :class:`tmlib.data.Batch` (teacher forcing) for the loss, on the model's device.
        sources, references: texts for greedy BLEU (``None``: no BLEU).
        experiments: from :func:`ablation_experiments` (default: all of them).
        bleu_for: the experiment names for which BLEU is computed (BLEU decodes, which costs far more than the loss).
        progress: print one line per experiment.

    Returns:
        ``pandas.DataFrame``: ``experiment``, ``kind``, ``layer``, ``head`` (the head concerned, -1 for a whole
        layer, NaN for none/all), ``n_off``, ``nll`` (nats per token), ``delta_nll`` (vs no ablation), ``bleu``
        and ``delta_bleu`` (NaN where not computed).

    Raises:
        ValueError: sources and references of different lengths.
    """
    import pandas as pd

    if (sources is None) != (references is None) or (sources is not None and len(sources) != len(references)):
        raise ValueError("give both sources and references, of the same length, or neither")
    batches = list(batches)
    experiments = ablation_experiments(model) if experiments is None else experiments
    rows = []
    for name, head, off in experiments:
        with ablate_heads(model, off):
            nll = nll_per_token(model, batches)
            bleu = (greedy_bleu(model, tokenizer, sources, references)
                    if sources is not None and name in bleu_for else float("nan"))
        rows.append({"experiment": name, "kind": head.kind if head else None,
                     "layer": head.layer if head else np.nan, "head": head.head if head else np.nan,
                     "n_off": len(off), "nll": nll, "bleu": bleu})
        if progress:
            print(f"{name:12s} {head}: nll {nll:.3f} bleu {bleu:.1f}")
    table = pd.DataFrame(rows)
    base = table[table.experiment == "none"]
    if len(base):
        table["delta_nll"] = table["nll"] - float(base["nll"].iloc[0])
        table["delta_bleu"] = table["bleu"] - float(base["bleu"].iloc[0])
    return table


# --------------------------------------------------------------------------------------------------
# Changing one head's attention distribution
# --------------------------------------------------------------------------------------------------

def _check_distributions(p: Tensor, q: Tensor) -> None:
    if not isinstance(p, Tensor) or not isinstance(q, Tensor):
        raise TypeError("p and q must be torch tensors")
    if p.shape != q.shape or p.dim() == 0:
        raise ValueError(f"p and q must have the same shape with a last axis of outcomes, got "
                         f"{tuple(p.shape)} and {tuple(q.shape)}")


def total_variation(p: Tensor, q: Tensor) -> Tensor:
    """Total variation distance ½ Σ |p − q| over the last axis, in [0, 1].

    Args:
        p, q: probability distributions over the last axis, same shape ``(..., n)``.

    Returns:
        float tensor ``(...)``.

    Raises:
        TypeError / ValueError: not tensors, or shapes that differ.
    """
    _check_distributions(p, q)
    return 0.5 * (p - q).abs().sum(dim=-1)


def js_distance(p: Tensor, q: Tensor) -> Tensor:
    """Jensen–Shannon distance √JSD(p, q) with natural logarithms, in [0, √ln 2] (a metric).

    JSD(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m), m = ½ (p + q), as ``scipy.spatial.distance.jensenshannon`` (base e);
    Jain & Wallace (2019) report JSD between attention distributions.

    Args:
        p, q: probability distributions over the last axis, same shape ``(..., n)``.

    Returns:
        float tensor ``(...)``.
    """
    _check_distributions(p, q)
    p64, q64 = p.to(torch.float64), q.to(torch.float64)
    m = 0.5 * (p64 + q64)

    def kl(a: Tensor) -> Tensor:
        return torch.where(a > 0, a * (torch.log(a.clamp_min(1e-300)) - torch.log(m.clamp_min(1e-300))),
                           torch.zeros_like(a)).sum(dim=-1)

    return (0.5 * kl(p64) + 0.5 * kl(q64)).clamp_min(0).sqrt().to(p.dtype if p.is_floating_point() else torch.float64)


def permute_rows(weights: Tensor, allowed: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Shuffle each row's weights among its allowed positions (Jain & Wallace 2019, §4.2).

    Args:
        weights: float ``(..., n_k)``; entries at disallowed positions should be 0.
        allowed: bool, same shape, True where a key may be attended to.
        generator: a ``torch.Generator`` for reproducible permutations.

    Returns:
        a tensor of the same shape: in every row the values at allowed positions are a random permutation of that
        row's values at allowed positions; disallowed positions are 0.  Row sums are preserved.

    Raises:
        ValueError: shapes differ.  TypeError: ``allowed`` is not boolean.
    """
    if not isinstance(allowed, Tensor) or allowed.dtype != torch.bool:
        raise TypeError("allowed must be a bool tensor (True = may attend)")
    if weights.shape != allowed.shape:
        raise ValueError(f"weights {tuple(weights.shape)} and allowed {tuple(allowed.shape)} must have the same shape")
    n_k = weights.shape[-1]
    index = torch.arange(n_k, device=weights.device, dtype=torch.float64).expand(weights.shape)
    big = float(n_k + 1)
    # allowed positions in increasing order, then the others
    targets = torch.where(allowed, index, index + big).argsort(dim=-1)
    # allowed positions in random order, then the others (in increasing order)
    noise = torch.rand(weights.shape, generator=generator, dtype=torch.float64).to(weights.device)
    sources = torch.where(allowed, noise, 2.0 + index).argsort(dim=-1)
    out = torch.zeros_like(weights)
    out.scatter_(-1, targets, weights.masked_fill(~allowed, 0.0).gather(-1, sources))
    return out


@torch.no_grad()
def override_head_attention(model, src: Tensor, tgt_in: Tensor, head, new_weights: Callable,
                            capture: AttentionCapture | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Logits of a teacher-forced pass in which one head uses attention weights of our choosing.

    Two passes.  The first records the head's weights ``W`` ``(batch, n_q, n_k)``
    (:func:`capture_attention`).  In the second, the head's projected values ``V`` are kept (a forward hook on the
    module's ``w_v``) and a forward pre-hook on its ``w_o`` replaces the head's slice of Concat(head_1, …, head_h) by
    ``new_weights(W, allowed) @ V_head`` (paper §3.2.1: head output = weights × values).  Everything upstream of the
    head is identical in both passes, so ``W`` is the weight the head would have used.  The hooks are removed
    afterwards.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        src, tgt_in: long ``(batch, src_len)``, ``(batch, tgt_len)``, right-padded.
        head: a :class:`Head` / ``(kind, layer, head)``.
        new_weights: ``f(W, allowed) -> W'``: ``W`` float ``(batch, n_q, n_k)``, ``allowed`` bool of the same shape
            (real keys, and causal for decoder self-attention); ``W'`` must have the same shape.
        capture: the :func:`capture_attention` of this very ``(src, tgt_in)``, to skip the first pass when many
            heads are tested on one batch.

    Returns:
        ``(logits, W, W')``: logits ``(batch, tgt_len, vocab)``, the original and the substituted weights.

    Raises:
        ValueError: ``W'`` has another shape; bad head (see :func:`ablate_heads`).
    """
    head = _check_head(model, head)
    cap = capture_attention(model, src, tgt_in) if capture is None else capture
    if cap.src_mask.shape != src.shape or cap.tgt_mask.shape != tgt_in.shape:
        raise ValueError(f"capture was recorded on src {tuple(cap.src_mask.shape)} / tgt_in "
                         f"{tuple(cap.tgt_mask.shape)}, not on {tuple(src.shape)} / {tuple(tgt_in.shape)}")
    original = cap.weights[head.kind][head.layer][:, head.head]  # (batch, n_q, n_k)
    qm, km, causal = cap.masks(head.kind)
    allowed = km[:, None, :].expand_as(original)
    if causal:
        n = original.shape[-1]
        allowed = allowed & torch.ones(n, n, dtype=torch.bool, device=original.device).tril()
    replaced = new_weights(original, allowed)
    if not isinstance(replaced, Tensor) or replaced.shape != original.shape:
        raise ValueError(f"new_weights must return a tensor of shape {tuple(original.shape)}, got "
                         f"{tuple(getattr(replaced, 'shape', ()))}")
    module = attention_module(model, head.kind, head.layer)
    cols = slice(head.head * module.d_k, (head.head + 1) * module.d_k)  # the head's slice of Concat(head_1, …)
    kv = head.head // (module.n_heads // module.n_kv_heads)  # its value head (differs only with grouped queries)
    store: dict = {}

    def keep_values(_lin, _args, output):  # w_v projects the values of all heads
        store["v"] = output[..., kv * module.d_k:(kv + 1) * module.d_k]  # (batch, n_k, d_k)

    def substitute(_lin, args):
        x = args[0].clone()  # (batch, n_q, d_model)
        v = store["v"]  # (batch, n_k, d_k)
        x[..., cols] = replaced.to(v.dtype) @ v  # (batch, n_q, d_k)
        return (x,) + tuple(args[1:])

    handles = [module.w_v.register_forward_hook(keep_values), module.w_o.register_forward_pre_hook(substitute)]
    was_training = model.training
    model.eval()
    try:
        logits = model(src, tgt_in)  # (batch, tgt_len, vocab)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return logits, original, replaced


def permutation_effects(model, batches: Iterable, heads=None, seed: int = 0) -> "pd.DataFrame":
    """For each head: permute its weights (:func:`permute_rows`) and measure how far attention and output move.

    The test of Jain & Wallace (2019, §4.2) on one head at a time: every row of the head's attention is shuffled
    among the keys it may see, everything else is left as it is, and the next-token distributions are compared
    with those of the unchanged model (teacher forcing).

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        batches: :class:`tmlib.data.Batch` objects or ``(src, tgt_in)`` pairs, right-padded.
        heads: the heads to test (default: all).
        seed: seed of the permutations (per head and batch, a ``torch.Generator`` seeded ``seed``).

    Returns:
        ``pandas.DataFrame`` per head: ``attention_tvd`` and ``attention_jsd`` (mean over real query positions of
        the total variation / Jensen–Shannon distance between the original and permuted weights), ``output_tvd``
        (mean total variation between the next-token distributions, over real target positions) and
        ``argmax_changed`` (share of real target positions whose most probable next token changed).  Means pool
        the positions of all batches.

    Raises:
        ValueError: no batch.
    """
    import pandas as pd

    heads = all_heads(model) if heads is None else [_check_head(model, h) for h in heads]
    sums = {h: np.zeros(4) for h in heads}
    n_q = {h: 0 for h in heads}
    n_t = 0
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            src, tgt_in = _as_pair(batch)
            base = capture_attention(model, src, tgt_in)
            with torch.no_grad():
                p_base = torch.softmax(model(src, tgt_in).float(), dim=-1)  # (batch, tgt_len, vocab): normal forward
            real = base.tgt_mask  # (batch, tgt_len)
            n_t += int(real.sum())
            for h in heads:
                gen = torch.Generator().manual_seed(seed)
                logits, w, w_new = override_head_attention(
                    model, src, tgt_in, h, lambda w_, a_: permute_rows(w_, a_, gen), capture=base)
                qm = base.masks(h.kind)[0]  # (batch, n_q)
                p_new = torch.softmax(logits.float(), dim=-1)
                sums[h] += [float(total_variation(w, w_new)[qm].sum()), float(js_distance(w, w_new)[qm].sum()),
                            float(total_variation(p_base, p_new)[real].sum()),
                            float((p_base.argmax(-1) != p_new.argmax(-1))[real].sum())]
                n_q[h] += int(qm.sum())
    finally:
        model.train(was_training)
    if n_t == 0:
        raise ValueError("permutation_effects needs at least one batch with target positions")
    return pd.DataFrame([{"kind": h.kind, "layer": h.layer, "head": h.head,
                          "attention_tvd": sums[h][0] / n_q[h], "attention_jsd": sums[h][1] / n_q[h],
                          "output_tvd": sums[h][2] / n_t, "argmax_changed": sums[h][3] / n_t} for h in heads])


# --------------------------------------------------------------------------------------------------
# bertviz
# --------------------------------------------------------------------------------------------------

_REQUIRE_CDN = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"


def translate_and_capture(model, tokenizer, source: str, target: str | None = None) -> dict:
    """Encode one sentence pair (or translate greedily) and capture every attention weight of it.

    The source is encoded as in training (no ``<bos>``/``<eos>``); the decoder is fed ``<bos> y_1 … y_m`` where y
    is ``target`` or, when ``target`` is None, the model's own greedy translation (``tmlib.decoding.greedy``), so each
    decoder query is the position that predicts the next token.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer`.
        tokenizer: its :class:`tmlib.data.BPETokenizer`.
        source: a German sentence.
        target: an English sentence, or None for the greedy translation.

    Returns:
        dict: ``src`` long ``(1, src_len)``, ``tgt_in`` long ``(1, tgt_len)`` (on the model's device), ``capture``
        (:class:`AttentionCapture`), ``src_pieces`` (``src_len`` strings), ``tgt_in_pieces`` (``<bos> y_1 … y_m``),
        ``produced_pieces`` (``y_1 … y_m <eos>``: what each decoder position predicts), ``translation`` (text).

    Raises:
        ValueError: the source is empty after tokenization.
    """
    from tmlib.decoding.greedy import greedy_decode

    src_ids = tokenizer.encode(source)
    if not src_ids:
        raise ValueError("source is empty after tokenization")
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], dtype=torch.long, device=device)  # (1, src_len)
    tgt_ids = list(greedy_decode(model, src, tokenizer.bos_id, tokenizer.eos_id)[0] if target is None
                   else tokenizer.encode(target))
    tgt_in = torch.tensor([[tokenizer.bos_id] + tgt_ids], dtype=torch.long, device=device)  # (1, tgt_len)
    name = tokenizer.tokenizer.id_to_token
    return {
        "src": src, "tgt_in": tgt_in, "capture": capture_attention(model, src, tgt_in),
        "src_pieces": [name(i) for i in src_ids],
        "tgt_in_pieces": [name(i) for i in tgt_in[0].tolist()],
        "produced_pieces": [name(i) for i in tgt_ids] + [name(tokenizer.eos_id)],
        "translation": tokenizer.decode(tgt_ids),
    }


def word_alignment(pair: dict, layer: int = -1, heads: Sequence[int] | None = None
                   ) -> tuple[np.ndarray, list[str], list[str]]:
    """Cross-attention of one sentence as a word-level soft alignment.

    Args:
        pair: the dict of :func:`translate_and_capture`.
        layer: decoder layer (negative counts from the end).
        heads: heads to average (default: all heads of the layer).

    Returns:
        ``(weights, source_words, target_words)``: float64 ``(n_target_words, n_source_words)``, rows = the words
        the decoder produces (``y_1 … <eos>``), columns = source words; pieces merged with :func:`merge_attention`.
    """
    w = pair["capture"].weights["cross"][layer][0]  # (n_heads, tgt_len, src_len)
    w = w.mean(dim=0) if heads is None else w[list(heads)].mean(dim=0)  # (tgt_len, src_len)
    q_spans, k_spans = word_spans(pair["produced_pieces"]), word_spans(pair["src_pieces"])
    return (merge_attention(w, q_spans, k_spans), word_labels(pair["src_pieces"], k_spans),
            word_labels(pair["produced_pieces"], q_spans))


def bertviz_inputs(pair: dict, decimals: int = 3) -> dict:
    """The arguments of bertviz's ``head_view``/``model_view`` in encoder-decoder mode, from our own model.

    Weights are rounded to ``decimals`` places in float64 so that the JSON bertviz writes into the page stays small
    (3 decimals: about 5 characters per weight instead of 20).  Decoder tokens are the decoder *inputs*
    ``<bos> y_1 … y_m`` (the query at ``<bos>`` predicts ``y_1``), because bertviz labels queries and keys of the
    decoder's self-attention with one list.

    Args:
        pair: the dict of :func:`translate_and_capture`.
        decimals: rounding of the weights (≥ 1).

    Returns:
        dict with ``encoder_attention``, ``decoder_attention``, ``cross_attention`` (lists, one float64 CPU tensor
        ``(1, n_heads, n_q, n_k)`` per layer), ``encoder_tokens``, ``decoder_tokens`` (BPE strings; bertviz shows
        ``▁`` as a space).

    Raises:
        ValueError: ``decimals`` < 1 or a capture of more than one sentence.
    """
    if isinstance(decimals, bool) or not isinstance(decimals, Integral) or decimals < 1:
        raise ValueError(f"decimals must be an integer >= 1, got {decimals!r}")
    cap = pair["capture"]
    if cap.src_mask.shape[0] != 1:
        raise ValueError(f"bertviz draws one sentence; the capture holds {cap.src_mask.shape[0]}")
    scale = 10.0 ** decimals

    def rounded(ws):
        return [torch.round(w.detach().cpu().to(torch.float64) * scale) / scale for w in ws]

    return {
        "encoder_attention": rounded(cap.weights["encoder self"]),
        "decoder_attention": rounded(cap.weights["decoder self"]),
        "cross_attention": rounded(cap.weights["cross"]),
        "encoder_tokens": list(pair["src_pieces"]),
        "decoder_tokens": list(pair["tgt_in_pieces"]),
    }


def bertviz_view(inputs: dict, view: str = "head", **kwargs):
    """bertviz's ``head_view`` or ``model_view`` of :func:`bertviz_inputs`, as an ``IPython.display.HTML`` object.

    bertviz (Vig 2019) renders with ``html_action="return"``: a ``<div id="bertviz-…">`` and a script that draws the
    view with d3 and jQuery, which it obtains through RequireJS.  bertviz puts a ``<script src=…require.js>`` tag from
    a CDN in front; here that tag is replaced by a guard inside the view's own script: if a ``requirejs`` function
    already exists (classic Jupyter; the course site, whose ``assets/js/require-shim.js`` answers from the vendored
    d3 and jQuery) the view draws at once, otherwise (JupyterLab, Colab) require.js is loaded from the same CDN
    first.  So the built page loads no script from a CDN and draws offline.  The markup and the drawing code are
    otherwise bertviz's own, except that the data, which bertviz 1.4.1 also pastes into a code comment, appears
    once.  Nothing is downloaded from a model hub: bertviz only receives tensors and strings.

    Args:
        inputs: the dict of :func:`bertviz_inputs`.
        view: ``"head"`` or ``"model"``.
        kwargs: passed to bertviz (e.g. ``layer=1``, ``heads=[0]`` for ``head_view``; ``display_mode="light"`` is
            the default here for ``model_view``).

    Returns:
        ``IPython.display.HTML``.

    Raises:
        ValueError: unknown ``view``, or bertviz's output has an unexpected form (a bertviz version change).
    """
    from IPython.display import HTML

    if view not in ("head", "model"):
        raise ValueError(f"view must be 'head' or 'model', got {view!r}")
    import bertviz

    args = dict(inputs)
    if view == "model":
        kwargs.setdefault("display_mode", "light")
        html = bertviz.model_view(**args, html_action="return", **kwargs).data
    else:
        html = bertviz.head_view(**args, html_action="return", **kwargs).data
    loader = f'<script src="{_REQUIRE_CDN}"></script>'
    opening = '<script type="text/javascript">\n'
    if not html.startswith(loader) or html.count(opening) != 1 or not html.rstrip().endswith("</script>"):
        raise ValueError("unexpected bertviz output: expected a require.js tag, the view's <div> and one script")
    body = html[len(loader):]
    markup, script = body.split(opening)
    script = script.rstrip()[: -len("</script>")]
    # bertviz 1.4.1 substitutes its PYTHON_PARAMS marker everywhere, so the data also lands in a comment after the
    # real `const params = ...;`: put the marker back into the comment (halves the size of the page's data)
    start = script.find("const params = ")
    end = script.find("; // HACK: ", start)
    if start >= 0 and end > start:
        params = script[start + len("const params = "):end]
        script = script.replace("; // HACK: " + params, "; // HACK: PYTHON_PARAMS", 1)
    guarded = (
        "(function () {\n"
        "  function draw() {\n" + script + "\n  }\n"
        "  if (typeof window.requirejs === 'function') { draw(); return; }\n"
        "  var loader = document.createElement('script');\n"
        f"  loader.src = '{_REQUIRE_CDN}';\n"
        "  loader.onload = draw;\n"
        "  document.head.appendChild(loader);\n"
        "})();"
    )
    return HTML(markup + opening + guarded + "\n</script>\n")
