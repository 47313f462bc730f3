"""A Llama-style block of tmlib as Hugging Face's ``LlamaDecoderLayer``: the independent reference of chapter 12.

The Llama block (Touvron et al. 2023) is the paper's decoder block with five options switched: pre-norm, RMSNorm,
SwiGLU, rotary positions, grouped-query attention, and no biases. :func:`llama_config` and
:func:`to_llama_decoder_layer` build ``transformers``' own layer (constructed from a small ``LlamaConfig``, nothing
downloaded) holding the weights of a :class:`tmlib.model.transformer.DecoderLayer`, so that both can be run on the same
input and compared.

One mapping is not a plain copy: tmlib rotates *interleaved* feature pairs (RoFormer's and Meta's layout), Hugging
Face rotates the two *halves* of each head (``rotate_half``). The rows of each head of W^Q and W^K are permuted
with :func:`tmlib.model.rotary.interleaved_to_halves`, as Hugging Face's own conversion script does for Meta's
checkpoints; the scores, and so the outputs, are then the same.

``transformers`` is optional: it is imported only here, and :class:`ImportError` says how to install it.
"""
from __future__ import annotations

import torch

from tmlib.model.rotary import interleaved_to_halves

__all__ = ["llama_config", "to_llama_decoder_layer", "llama_rotary", "halves_layout_rows"]


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
    :class:`~tmlib.model.transformer.DecoderLayer`), scaled dot-product attention and rope base 10000.

    Raises:
        ImportError: transformers is not installed.
        ValueError: ``layer`` is not a bias-free pre-norm block with RMSNorm, SwiGLU and RoPE.
    """
    transformers = _transformers()
    attn, ffn = layer.self_attn, layer.feed_forward
    if not (layer.norm_first and attn.rotary is not None and attn.w_q.bias is None and hasattr(ffn, "w3")
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
