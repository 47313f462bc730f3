"""The two other families built from the same layers (paper §3.1 components; Figure 1 cut in half).

* :class:`EncoderOnly` (BERT-style): embeddings + encoder stack, bidirectional self-attention; a
  classification head on the first token and a masked-language-model head tied to the embedding.
* :class:`DecoderOnly` (GPT-style): embeddings + decoder layers *without* cross-attention
  (``DecoderLayer(config, cross_attention=False)``), causal mask, tied output layer, KV-cached ``generate``.

Both are built from a :class:`~tmlib.model.config.ModelConfig`, as :class:`~tmlib.model.transformer.Transformer`
is, and reuse its :class:`~tmlib.model.layers.Encoder` / :class:`~tmlib.model.layers.Decoder`, the sinusoidal
:class:`~tmlib.model.positional.PositionalEncoding` (BERT and GPT learn positions instead; the course keeps the
paper's table) and the paper's post-LN layout unless ``norm_first=True``.
"""
from __future__ import annotations

import torch
from torch import nn

from tmlib.model.checks import check_model_config
from tmlib.model.config import ModelConfig
from tmlib.model.embeddings import Generator, TokenEmbedding
from tmlib.model.kv_cache import DecoderCache
from tmlib.model.layers import Decoder, Encoder
from tmlib.model.masks import real_tokens
from tmlib.model.positional import make_positional
from tmlib.model.transformer import xavier_init_
from tmlib.validation import check_sequence

__all__ = ["EncoderOnly", "DecoderOnly"]


class EncoderOnly(nn.Module):
    """Encoder-only Transformer (BERT-style): every position sees every non-pad position.

    Args:
        config: a :class:`~tmlib.model.config.ModelConfig`: ``n_encoder_layers`` layers over ``vocab_size``
            tokens, its widths, P_drop, ``max_len``, layout and modern options; ``pad_id`` is masked as keys
            (``None``: no padding mask). ``n_decoder_layers``, ``tgt_vocab_size`` and ``tie_embeddings`` do not
            apply (the masked-LM head is always tied).
        n_classes: size of the classification head, or ``None`` for no such head.

    Heads:
        * :meth:`classify`: logits ``(batch, n_classes)`` from the first token's final vector (BERT puts a
          ``[CLS]`` token there; BERT's extra dense+tanh "pooler" is left out).
        * :meth:`mlm_logits`: logits ``(batch, seq_len, vocab_size)`` through a :class:`Generator` whose weight
          *is* the embedding matrix (tied, as BERT; BERT's extra dense+LayerNorm transform is left out).

    Shapes:
        forward ``ids`` long ``(batch, seq_len)`` → hidden states ``(batch, seq_len, d_model)``.

    Raises:
        TypeError: ``config`` is not a ``ModelConfig``; ids not an integer tensor.
        ValueError: ids not 2-D, too long or outside the vocabulary; :meth:`classify` without ``n_classes``.
    """

    def __init__(self, config: ModelConfig, n_classes: int | None = None):
        super().__init__()
        check_model_config(config)
        self.config = config
        self.vocab_size, self.d_model, self.max_len, self.pad_id = (config.vocab_size, config.d_model, config.max_len,
                                                                    config.pad_id)
        self.embed = TokenEmbedding(config.vocab_size, config.d_model, config.pad_id)
        self.positional = make_positional(config.positions, config.d_model, config.max_len, config.dropout)
        self.encoder = Encoder(config)
        self.mlm_head = Generator(config.d_model, config.vocab_size)
        self.mlm_head.proj.weight = self.embed.embedding.weight  # tied (§3.4)
        self.classifier = nn.Linear(config.d_model, n_classes) if n_classes is not None else None
        xavier_init_(self, (self.embed,))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_sequence(ids, "ids", self.max_len, self.vocab_size)
        x = self.positional(self.embed(ids))  # (batch, seq_len, d_model)
        return self.encoder(x, real_tokens(ids, self.pad_id))  # (batch, seq_len, d_model)

    def classify(self, ids: torch.Tensor) -> torch.Tensor:
        """Sequence-level logits ``(batch, n_classes)`` from the first position."""
        if self.classifier is None:
            raise ValueError("this EncoderOnly has no classification head: construct it with n_classes=...")
        return self.classifier(self(ids)[:, 0])  # (batch, d_model) -> (batch, n_classes)

    def mlm_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """Masked-LM logits ``(batch, seq_len, vocab_size)`` at every position."""
        return self.mlm_head(self(ids))  # (batch, seq_len, vocab_size)


class DecoderOnly(nn.Module):
    """Decoder-only Transformer (GPT-style language model): causal self-attention, no encoder.

    Args:
        config: a :class:`~tmlib.model.config.ModelConfig`: ``n_decoder_layers`` layers over ``vocab_size``
            tokens, its widths, P_drop, ``max_len``, layout and modern options. With ``positions="rope"`` or
            ``"alibi"`` positions act in every self-attention and continue across a KV cache (the new tokens sit
            at ``len(cache)`` onwards). ``n_encoder_layers``, ``pad_id``, ``tgt_vocab_size`` and
            ``tie_embeddings`` do not apply: there is no padding mask (prompts in one batch must have the same
            length; left-padding would need per-row positions), and the output layer's weight is the embedding
            matrix (tied).

    Shapes:
        forward ``ids`` long ``(batch, n_new)`` (with ``cache``: only the new tokens, at positions
        ``len(cache)`` onwards) → logits ``(batch, n_new, vocab_size)``; position t predicts token t + 1.

    Raises:
        TypeError: ``config`` is not a ``ModelConfig``; ids not an integer tensor.
        ValueError: ids not 2-D, outside the vocabulary, or beyond ``max_len`` positions; bad ``generate``
            arguments.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        check_model_config(config)
        self.config = config
        self.vocab_size, self.d_model, self.max_len = config.vocab_size, config.d_model, config.max_len
        self.embed = TokenEmbedding(config.vocab_size, config.d_model)
        self.positional = make_positional(config.positions, config.d_model, config.max_len, config.dropout)
        self.decoder = Decoder(config, cross_attention=False)
        self.generator = Generator(config.d_model, config.vocab_size)
        self.generator.proj.weight = self.embed.embedding.weight  # tied (§3.4)
        xavier_init_(self)

    def new_cache(self) -> DecoderCache:
        """An empty cache (self-attention only) for incremental decoding."""
        return self.decoder.new_cache()

    def forward(self, ids: torch.Tensor, cache: DecoderCache | None = None) -> torch.Tensor:
        check_sequence(ids, "ids", self.max_len, self.vocab_size)
        offset = len(cache) if cache is not None else 0
        x = self.positional(self.embed(ids), offset=offset)  # (batch, n_new, d_model)
        x = self.decoder(x, cache=cache)  # (batch, n_new, d_model), causal
        return self.generator(x)  # (batch, n_new, vocab_size)

    @torch.no_grad()
    def generate(self, prompt_ids: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, greedy: bool = False, use_cache: bool = True,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Continue ``prompt_ids`` ``(batch, prompt_len)`` by ``max_new_tokens`` tokens.

        Each step takes the logits of the last position, divides by ``temperature``, keeps the ``top_k`` largest
        (if given) and samples (``torch.multinomial`` with ``generator``), or takes the arg-max when ``greedy``.
        With ``use_cache`` the prompt is encoded once and each new token costs one position through the
        :class:`DecoderCache`; without it the whole prefix is re-run every step (same result, more work).
        Call ``model.eval()`` first, or dropout makes the steps random.

        Returns:
            long ``(batch, prompt_len + max_new_tokens)``: the prompt followed by the new tokens.

        Raises:
            ValueError: ``max_new_tokens`` < 0, ``temperature`` ≤ 0 when sampling, ``top_k`` < 1, or
                ``prompt_len + max_new_tokens`` > ``max_len``.
        """
        check_sequence(prompt_ids, "prompt_ids", self.max_len, self.vocab_size)
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        if not greedy and temperature <= 0:
            raise ValueError(f"temperature must be > 0 when sampling, got {temperature}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        total = prompt_ids.shape[1] + max_new_tokens
        if total > self.max_len:
            raise ValueError(f"prompt length {prompt_ids.shape[1]} + max_new_tokens {max_new_tokens} = {total} "
                             f"exceeds max_len={self.max_len}")
        out = prompt_ids  # (batch, t)
        cache = self.new_cache() if use_cache else None
        step_input = prompt_ids  # with a cache: only the tokens the cache has not seen
        for _ in range(max_new_tokens):
            logits = self(step_input if use_cache else out, cache=cache)[:, -1]  # (batch, vocab_size)
            if greedy:
                next_id = logits.argmax(dim=-1, keepdim=True)  # (batch, 1)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # (batch, 1)
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                probs = torch.softmax(logits, dim=-1)  # (batch, vocab_size)
                next_id = torch.multinomial(probs, 1, generator=generator)  # (batch, 1)
            out = torch.cat([out, next_id], dim=1)  # (batch, t + 1)
            step_input = next_id
        return out
