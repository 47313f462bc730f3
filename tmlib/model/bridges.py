"""Bridges to two independent implementations, so that tmlib's model can be checked against them.

* ``torch.nn.Transformer`` (chapter 8): :func:`to_nn_transformer` copies the weights of a
  :class:`~tmlib.model.transformer.Transformer` with the paper's layers into PyTorch's own encoder-decoder, and
  :func:`nn_transformer_logits` runs it with tmlib's embeddings, positional encoding and generator.
* Hugging Face's ``LlamaDecoderLayer`` (chapter 13): the Llama block (Touvron et al. 2023) is the paper's decoder
  block with five options switched (pre-norm, RMSNorm, SwiGLU, rotary positions, grouped-query attention, no
  biases). :func:`llama_config` and :func:`to_llama_decoder_layer` build ``transformers``' own layer (from a small
  ``LlamaConfig``, nothing downloaded) holding the weights of a :class:`~tmlib.model.layers.DecoderLayer`.

One Llama mapping is not a plain copy: tmlib rotates *interleaved* feature pairs (RoFormer's and Meta's layout),
Hugging Face rotates the two *halves* of each head (``rotate_half``). The rows of each head of W^Q and W^K are
permuted with :func:`tmlib.model.rotary.interleaved_to_halves`, as Hugging Face's own conversion script does for
Meta's checkpoints; the scores, and so the outputs, are then the same.

``transformers`` is optional: it is imported only by the Llama functions, and :class:`ImportError` says how to
install it.
"""
from __future__ import annotations

import torch
from torch import nn

from tmlib.model.attention import MultiHeadAttention
from tmlib.model.config import ModelConfig
from tmlib.model.rotary import interleaved_to_halves
from tmlib.model.transformer import Transformer

__all__ = ["to_nn_transformer", "nn_transformer_logits", "llama_config", "to_llama_decoder_layer", "llama_rotary",
           "halves_layout_rows"]


# --------------------------------------------------------------------------- torch.nn.Transformer (chapter 8)


def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """Copy W^Q, W^K, W^V (stacked into ``in_proj``) and W^O into an ``nn.MultiheadAttention``."""
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))  # (3 d_model, d_model)
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))  # (3 d_model,)
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)


def to_nn_transformer(model: Transformer) -> nn.Transformer:
    """A ``torch.nn.Transformer`` (batch_first, dropout 0) holding copies of ``model``'s encoder and decoder weights.

    ``nn.Transformer`` has no embeddings, positional encoding or generator: feed it ``model``'s.  It always adds a
    final LayerNorm to each stack; for a post-LN ``model`` (the paper) those norms are removed
    (``encoder.norm = decoder.norm = None``), for a pre-LN one they receive ``model``'s final norms.
    Use :func:`nn_transformer_logits` to run it with the same masks.

    Raises:
        ValueError: ``model`` uses an option ``nn.Transformer`` lacks (RMSNorm, SwiGLU, RoPE/ALiBi/no
            positions, grouped key/value heads, no biases).
    """
    c = model.config
    paper = ModelConfig()
    modern = {k: getattr(c, k) for k in ("norm", "ffn", "positions", "bias") if getattr(c, k) != getattr(paper, k)}
    if c.n_kv_heads not in (None, c.n_heads):
        modern["n_kv_heads"] = c.n_kv_heads
    if modern:
        raise ValueError(f"nn.Transformer has only the paper's layers; this model uses {modern}")
    enc0 = model.encoder.layers[0]
    p = next(model.parameters())
    ref = nn.Transformer(
        d_model=model.d_model, nhead=model.n_heads, num_encoder_layers=len(model.encoder.layers),
        num_decoder_layers=len(model.decoder.layers), dim_feedforward=enc0.feed_forward.d_ff, dropout=0.0,
        batch_first=True, norm_first=model.norm_first, device=p.device, dtype=p.dtype,
    )
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, ref.encoder.layers):
            _copy_attention(ours.self_attn, theirs.self_attn)
            for name in ("linear1", "linear2"):
                getattr(theirs, name).load_state_dict(getattr(ours.feed_forward, name).state_dict())
            for name in ("norm1", "norm2"):
                getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())
        for ours, theirs in zip(model.decoder.layers, ref.decoder.layers):
            _copy_attention(ours.self_attn, theirs.self_attn)
            _copy_attention(ours.cross_attn, theirs.multihead_attn)
            for name in ("linear1", "linear2"):
                getattr(theirs, name).load_state_dict(getattr(ours.feed_forward, name).state_dict())
            for name in ("norm1", "norm2", "norm3"):
                getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())
        if model.norm_first:
            ref.encoder.norm.load_state_dict(model.encoder.norm.state_dict())
            ref.decoder.norm.load_state_dict(model.decoder.norm.state_dict())
        else:
            ref.encoder.norm = None
            ref.decoder.norm = None
    return ref.train(model.training)


def nn_transformer_logits(model: Transformer, ref: nn.Transformer, src: torch.Tensor,
                          tgt: torch.Tensor) -> torch.Tensor:
    """Logits ``(batch, tgt_len, tgt_vocab_size)`` of ``ref`` (from :func:`to_nn_transformer`) wrapped in ``model``'s
    embeddings, positional encoding and generator, with the same masks in ``nn``'s convention
    (``True`` = *blocked*: the causal mask ``~tril`` and ``src == pad_id`` as the key-padding masks).
    """
    n = tgt.shape[1]
    pad = None if model.pad_id is None else src == model.pad_id  # (batch, src_len), True = pad
    blocked = ~torch.ones(n, n, dtype=torch.bool, device=tgt.device).tril()  # (tgt_len, tgt_len), True = future
    out = ref(model.positional(model.src_embed(src)), model.positional(model.tgt_embed(tgt)), tgt_mask=blocked,
              src_key_padding_mask=pad, memory_key_padding_mask=pad)  # (batch, tgt_len, d_model)
    return model.generator(out)  # (batch, tgt_len, tgt_vocab_size)


# --------------------------------------------------------------------------- Hugging Face's Llama block (chapter 13)


def _transformers():
    try:
        import transformers
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("this comparison needs Hugging Face transformers: pip install transformers") from err
    return transformers


def halves_layout_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The rows of a Q or K projection ``(n_heads * d_head, d_model)`` with each head's features permuted from
    the interleaved layout to the halves layout (:func:`tmlib.model.rotary.interleaved_to_halves`).

    Raises:
        ValueError: the rows are not ``n_heads`` blocks of an even size.
    """
    rows, d_model = weight.shape
    if rows % n_heads or (rows // n_heads) % 2:
        raise ValueError(f"weight of shape {tuple(weight.shape)} is not {n_heads} heads of an even width")
    d_head = rows // n_heads
    perm = interleaved_to_halves(d_head).to(weight.device)
    return weight.reshape(n_heads, d_head, d_model)[:, perm].reshape(rows, d_model)


def llama_config(layer, max_len: int = 512, eps: float = 1e-5):
    """A ``transformers.LlamaConfig`` with the sizes of ``layer`` (a Llama-style
    :class:`~tmlib.model.layers.DecoderLayer`), scaled dot-product attention and rope base 10000.

    Raises:
        ImportError: transformers is not installed.
        ValueError: ``layer`` is not a bias-free pre-norm block with RMSNorm, SwiGLU and RoPE.
    """
    transformers = _transformers()
    attn, ffn = layer.self_attn, layer.feed_forward
    rope = getattr(attn, "rotary", None) is not None  # a ModernAttention with RoPE
    if not (layer.norm_first and rope and attn.w_q.bias is None and hasattr(ffn, "w3")
            and layer.cross_attn is None and not isinstance(layer.norm1, torch.nn.LayerNorm)):
        raise ValueError("not a Llama-style block: needs norm_first=True, norm='rms', ffn='swiglu', positions='rope', "
                         "bias=False and no cross-attention")
    config = transformers.LlamaConfig(
        hidden_size=attn.d_model, intermediate_size=ffn.d_ff, num_attention_heads=attn.n_heads,
        num_key_value_heads=attn.n_kv_heads, rms_norm_eps=eps, max_position_embeddings=max_len,
        attention_bias=False, mlp_bias=False, num_hidden_layers=1, vocab_size=16)  # no embedding is built
    config._attn_implementation = "sdpa"  # computes in the input's dtype (the eager path softmaxes in float32)
    return config


def to_llama_decoder_layer(layer, max_len: int = 512):
    """``transformers``' ``LlamaDecoderLayer`` holding copies of ``layer``'s weights (W^Q and W^K rows permuted to
    the halves layout), in ``layer``'s dtype and device and training mode.

    Run it as ``ref(x, attention_mask=None, position_ids=pos, position_embeddings=llama_rotary(ref_config)(x, pos))``:
    with no mask Hugging Face's attention is causal.

    Returns:
        ``(ref, config)``.

    Raises:
        ImportError: transformers is not installed. ValueError: ``layer`` is not Llama-style.
    """
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    config = llama_config(layer, max_len, eps=layer.norm1.eps)
    p = next(layer.parameters())
    ref = LlamaDecoderLayer(config, layer_idx=0).to(device=p.device, dtype=p.dtype)
    a, r = layer.self_attn, ref.self_attn
    with torch.no_grad():
        r.q_proj.weight.copy_(halves_layout_rows(a.w_q.weight, a.n_heads))
        r.k_proj.weight.copy_(halves_layout_rows(a.w_k.weight, a.n_kv_heads))
        r.v_proj.weight.copy_(a.w_v.weight)
        r.o_proj.weight.copy_(a.w_o.weight)
        ref.mlp.gate_proj.weight.copy_(layer.feed_forward.w1.weight)
        ref.mlp.up_proj.weight.copy_(layer.feed_forward.w3.weight)
        ref.mlp.down_proj.weight.copy_(layer.feed_forward.w2.weight)
        ref.input_layernorm.weight.copy_(layer.norm1.weight)
        ref.post_attention_layernorm.weight.copy_(layer.norm3.weight)
    return ref.train(layer.training), config


def llama_rotary(config):
    """Hugging Face's ``LlamaRotaryEmbedding`` for ``config``: called as ``rotary(x, position_ids)`` it returns the
    ``(cos, sin)`` pair a ``LlamaDecoderLayer`` takes (computed in float32, as Hugging Face does)."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    return LlamaRotaryEmbedding(config)
