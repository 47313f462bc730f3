"""The Transformer in PyTorch, one paper section per module.

* ``config``: the model's configuration and the presets of Table 3 (``ModelConfig``, ``PRESETS``);
* ``attention`` (§3.2), ``feed_forward`` (§3.3), ``embeddings`` (§3.4), ``positional`` (§3.5), ``norms``;
* ``masks``: the causal and key masks (§3.2.3); ``kv_cache``: the keys and values of incremental decoding;
* ``layers``: the residual sub-layer, the encoder and decoder layers and stacks (§3.1);
* ``transformer``: the encoder-decoder of Figure 1 and its factory ``make_model``;
* ``variants``: the encoder-only and decoder-only families;
* ``modern_attention``, ``rotary``, ``alibi``: chapter 13's attention, positions and grouped heads;
* ``checks``: the argument checks, made once at the public boundary;
* ``bridges``: the same weights in ``torch.nn.Transformer`` and in Hugging Face's Llama block, for checking.
"""

from tmlib.model.alibi import ALiBi, alibi_slopes
from tmlib.model.attention import MultiHeadAttention, attend, attend_fused, repeat_kv, scaled_dot_product_attention
from tmlib.model.bridges import (
    halves_layout_rows, llama_config, llama_rotary, nn_transformer_logits, to_llama_decoder_layer, to_nn_transformer
)
from tmlib.model.config import MAX_POSITIONS, FEED_FORWARDS, NORMS, POSITIONS, PRESETS, ModelConfig, get_preset
from tmlib.model.embeddings import Generator, TokenEmbedding
from tmlib.model.feed_forward import (
    PositionwiseFeedForward, SwiGLUFeedForward, make_feed_forward, swiglu_hidden_size
)
from tmlib.model.kv_cache import DecoderCache, KVCache
from tmlib.model.layers import AttentionRecording, Decoder, DecoderLayer, Encoder, EncoderLayer, residual
from tmlib.model.masks import causal_mask, merge_masks, real_tokens, with_causal_mask
from tmlib.model.modern_attention import ModernAttention
from tmlib.model.norms import RMSNorm, make_norm
from tmlib.model.positional import NoPositionalEncoding, PositionalEncoding, make_positional, sinusoid_table
from tmlib.model.rotary import RotaryEmbedding, apply_rotary, interleaved_to_halves, rope_frequencies
from tmlib.model.transformer import Transformer, count_parameters, make_model, set_dropout, xavier_init_
from tmlib.model.variants import DecoderOnly, EncoderOnly

__all__ = [
    # configuration (Table 3)
    "ModelConfig", "PRESETS", "get_preset", "NORMS", "FEED_FORWARDS", "POSITIONS", "MAX_POSITIONS",
    # the paper's parts (§3.2-§3.5)
    "MultiHeadAttention", "scaled_dot_product_attention", "attend", "attend_fused", "repeat_kv",
    "causal_mask", "with_causal_mask", "merge_masks", "real_tokens", "KVCache", "DecoderCache",
    "PositionwiseFeedForward", "TokenEmbedding", "Generator", "PositionalEncoding", "sinusoid_table",
    # the encoder-decoder (§3.1, Figure 1)
    "residual", "AttentionRecording", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder",
    "Transformer", "make_model", "count_parameters", "set_dropout", "xavier_init_",
    # the other families
    "EncoderOnly", "DecoderOnly",
    # the modern options (chapter 13)
    "ModernAttention", "RMSNorm", "make_norm", "SwiGLUFeedForward", "swiglu_hidden_size", "make_feed_forward",
    "NoPositionalEncoding", "make_positional", "RotaryEmbedding", "apply_rotary", "rope_frequencies",
    "interleaved_to_halves", "ALiBi", "alibi_slopes",
    # checking against other implementations
    "to_nn_transformer", "nn_transformer_logits", "to_llama_decoder_layer", "llama_config", "llama_rotary",
    "halves_layout_rows",
]
