"""Which attention a trained encoder-decoder has, and capturing its weights in one forward pass (chapter 11).

An encoder-decoder Transformer has three kinds of attention (paper §3.2.3): the encoder's self-attention, the
decoder's masked self-attention and the decoder's attention over the encoder output (cross-attention).  A *head*
is named by its kind, its layer and its index, all counted from 0 as in bertviz's menus.

* :func:`attention_module`, :func:`all_heads`: where the heads live in a :class:`tmlib.model.transformer.Transformer`;
* :func:`capture_attention`: one teacher-forced forward pass with the model's own recording switch
  (:meth:`tmlib.model.transformer.Transformer.keep_attention`), returning every layer's weights of the three kinds
  with the masks that say which positions are real (:class:`AttentionCapture`);
* :func:`translate_and_capture`: the same for one sentence pair, with the BPE pieces that label the weights.

Conventions: masks are boolean, True = real token (may be attended to); batches are right-padded.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import NamedTuple, Sequence

import torch
from torch import Tensor

__all__ = ["ATTENTION_KINDS", "KIND_LABELS", "Head", "attention_module", "all_heads", "AttentionCapture", "pad_batch",
           "capture_attention", "translate_and_capture"]

#: The three kinds of attention of an encoder-decoder Transformer (paper §3.2.3).
ATTENTION_KINDS = ("encoder self", "decoder self", "cross")

#: The short names of the kinds in labels and printed findings (``"cross L1 H2"``: cross-attention, layer 1, head 2).
KIND_LABELS = {"encoder self": "enc-self", "decoder self": "dec-self", "cross": "cross"}


class Head(NamedTuple):
    """One attention head: ``kind`` (a member of :data:`ATTENTION_KINDS`), ``layer`` and ``head`` (from 0)."""

    kind: str
    layer: int
    head: int


# --------------------------------------------------------------------------------------------------
# Locating heads
# --------------------------------------------------------------------------------------------------

def check_kind(kind) -> str:
    """``kind`` if it is one of :data:`ATTENTION_KINDS`, else ValueError."""
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
    check_kind(kind)
    layers = model.encoder.layers if kind == "encoder self" else model.decoder.layers
    if isinstance(layer, bool) or not isinstance(layer, Integral) or not 0 <= layer < len(layers):
        raise ValueError(f"layer must be an integer in [0, {len(layers)}) for {kind!r} attention, got {layer!r}")
    module = layers[layer].cross_attn if kind == "cross" else layers[layer].self_attn
    if module is None:
        raise ValueError(f"decoder layer {layer} has no cross-attention")
    return module


def all_heads(model, kinds: Sequence[str] = ATTENTION_KINDS) -> list[Head]:
    """Every :class:`Head` of ``model`` of the given kinds, ordered by kind, layer, head.

    Args:
        model: a :class:`tmlib.model.transformer.Transformer` (``n_heads`` heads in every layer).
        kinds: members of :data:`ATTENTION_KINDS`.

    Returns:
        list of :class:`Head`, ``n_layers · n_heads`` per kind.

    Raises:
        ValueError: an unknown kind.
    """
    heads = []
    for kind in kinds:
        n_layers = len(model.encoder.layers if check_kind(kind) == "encoder self" else model.decoder.layers)
        heads += [Head(kind, layer, h) for layer in range(n_layers) for h in range(model.n_heads)]
    return heads


def check_head(model, head) -> Head:
    """``head`` as a :class:`Head` of ``model``; TypeError unless a 3-tuple, ValueError for an index out of range."""
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
        check_kind(kind)
        if kind == "encoder self":
            return self.src_mask, self.src_mask, False
        if kind == "decoder self":
            return self.tgt_mask, self.tgt_mask, True
        return self.tgt_mask, self.src_mask, False


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int = 0) -> Tensor:
    """Right-pad integer id lists into a long tensor ``(batch, longest)`` (the layout every mask here assumes).

    Args:
        rows: ``batch`` lists of token ids, each at least one long.
        pad_id: the id written after the end of each row.

    Returns:
        long tensor ``(batch, longest)``.

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
    """Every attention weight of ``model(src, tgt_in)`` in eval mode (right-padded with ``model.pad_id``), through the
    layers' recording switch (the explicit softmax: the fused kernel's result up to rounding); flags and mode restored
    afterwards. → :class:`AttentionCapture`, detached, on the model's device.

    Raises:
        ValueError: ``model.pad_id`` is None, or what ``model.forward`` raises.
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


def as_pair(batch) -> tuple[Tensor, Tensor]:
    """``(src, tgt_in)`` of a :class:`tmlib.data.Batch` or of a ``(src, tgt_in)`` pair."""
    if hasattr(batch, "src") and hasattr(batch, "tgt_in"):
        return batch.src, batch.tgt_in
    src, tgt_in = batch[0], batch[1]
    return src, tgt_in


def translate_and_capture(model, tokenizer, source: str, target: str | None = None) -> dict:
    """One sentence pair's attention: ``source`` encoded as in training, the decoder fed ``<bos> y_1 … y_m`` with y the
    ``target`` or, when None, the greedy translation. → dict of ``src``, ``tgt_in``, ``capture``, ``src_pieces``,
    ``tgt_in_pieces``, ``produced_pieces`` (what each decoder position predicts) and ``translation``. ValueError: an
    empty source."""
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
