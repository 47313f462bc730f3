"""The Transformer in PyTorch, one paper section per module: attention (§3.2), the feed-forward network
(§3.3), embeddings (§3.4), positional encoding (§3.5), the encoder-decoder (§3.1), its configuration and
presets (Table 3), the two other families, and the modern options of chapter 12.
"""

from tmlib.model.alibi import ALiBi, alibi_slopes
from tmlib.model.attention import (
    MultiHeadAttention, attend, attend_fused, repeat_kv, scaled_dot_product_attention
)
from tmlib.model.attention_checks import check_attention_args, check_multi_head_args, check_multi_head_config
from tmlib.model.embeddings import Generator, TokenEmbedding, check_token_ids
from tmlib.model.feed_forward import (
    FEED_FORWARDS, PositionwiseFeedForward, SwiGLUFeedForward, make_feed_forward, swiglu_hidden_size
)
from tmlib.model.kv_cache import KVCache, causal_mask, with_causal_mask
from tmlib.model.llama import halves_layout_rows, llama_config, llama_rotary, to_llama_decoder_layer
from tmlib.model.norms import NORMS, RMSNorm, make_norm
from tmlib.model.positional import (
    NoPositionalEncoding, POSITIONS, PositionalEncoding, make_positional, sinusoid_table
)
from tmlib.model.presets import ModelConfig, PRESETS, copy_task_batch, count_parameters, get_preset, make_model
from tmlib.model.rotary import RotaryEmbedding, apply_rotary, interleaved_to_halves, rope_frequencies
from tmlib.model.transformer import (
    AUTO, Decoder, DecoderCache, DecoderLayer, Encoder, EncoderLayer, Transformer, check_sequence,
    nn_transformer_logits, to_nn_transformer, xavier_init_
)
from tmlib.model.variants import DecoderOnly, EncoderOnly

__all__ = [
    "ALiBi", "AUTO", "Decoder", "DecoderCache", "DecoderLayer", "DecoderOnly", "Encoder", "EncoderLayer",
    "EncoderOnly", "FEED_FORWARDS", "Generator", "KVCache", "ModelConfig", "MultiHeadAttention", "NORMS",
    "NoPositionalEncoding", "POSITIONS", "PRESETS", "PositionalEncoding", "PositionwiseFeedForward", "RMSNorm",
    "RotaryEmbedding", "SwiGLUFeedForward", "TokenEmbedding", "Transformer", "alibi_slopes", "apply_rotary",
    "causal_mask", "check_sequence", "check_token_ids", "copy_task_batch", "count_parameters", "get_preset",
    "halves_layout_rows", "interleaved_to_halves", "llama_config", "llama_rotary", "make_feed_forward",
    "make_model", "make_norm", "make_positional", "nn_transformer_logits", "rope_frequencies",
    "scaled_dot_product_attention", "sinusoid_table", "swiglu_hidden_size", "to_llama_decoder_layer",
    "to_nn_transformer", "xavier_init_",
    "attend", "attend_fused", "check_attention_args", "check_multi_head_args", "check_multi_head_config",
    "repeat_kv", "with_causal_mask"
]
