"""The course's Transformer as a Hugging Face ``transformers`` ``MarianMTModel`` (chapter 14).

MarianMT, the model behind the opus-mt translators, is the paper's architecture (§3): a post-LN encoder-decoder,
"LayerNorm(x + Sublayer(x))" (§3.1), the ReLU feed-forward network (§3.3), embeddings multiplied by √d_model and
shared with the pre-softmax layer (§3.4), and sinusoidal positions added to them (§3.5). A
:class:`tmlib.model.transformer.Transformer` with the paper's options is therefore one, once three things are
mapped:

* **Names.** ``w_q, w_k, w_v, w_o`` → ``q_proj, k_proj, v_proj, out_proj``; ``linear1, linear2`` → ``fc1, fc2``;
  ``norm1, norm2, norm3`` → ``self_attn_layer_norm, encoder_attn_layer_norm, final_layer_norm``; the tied
  embedding → ``model.shared``; the generator's bias → ``final_logits_bias`` (Marian's output layer has no bias
  of its own; that buffer, zero in the opus-mt models, is added to the logits and plays its part).
* **The order of the d_model coordinates.** The paper writes PE(pos, 2i) = sin, PE(pos, 2i+1) = cos: sines and
  cosines interleaved. Marian's table (``MarianSinusoidalPositionalEmbedding``) puts the same d_model/2 sines in
  coordinates 0 … d_model/2 − 1 and the cosines after them. The two tables differ by a permutation π of the
  coordinates, ``marian[:, m] = paper[:, π[m]]`` with ``π = [0, 2, 4, …, 1, 3, 5, …]``
  (:func:`marian_permutation`). A Transformer computes the same function when one permutation is applied to the
  d_model axis everywhere: the columns of the embedding matrix, the input side of every linear layer that reads
  the residual stream, the output side (and bias) of every layer that writes to it, and the LayerNorm γ and β
  (mean and variance do not depend on the order of the coordinates). Attention heads, d_k and d_ff are untouched.
  So the weights are permuted, not the table: the converted model computes the same logits up to rounding.
* **Positions.** Marian numbers positions from 0 (``torch.arange(past_key_values_length, …)``, no padding
  offset as in fairseq's or BART's learned positions), like tmlib; its table is not stored in the checkpoint
  (it is recomputed on loading), so only ``max_position_embeddings`` = tmlib's ``max_len`` is written.

The configuration: ``pad_token_id`` = tmlib's ``pad_id``, ``eos_token_id`` = ``<eos>``, ``bos_token_id`` and
``decoder_start_token_id`` = ``<bos>`` (tmlib's decoder starts from ``<bos>``; the opus-mt models start from the pad
token), ``forced_eos_token_id=None`` (Marian's default 0 would force a token at the length limit; tmlib forces
none), dropout, attention dropout and activation dropout = tmlib's P_drop (tmlib applies it in those three places).

What Marian cannot express raises ``ValueError`` in :func:`marian_config`: pre-LN, RMSNorm, SwiGLU, RoPE, ALiBi or
no positions, grouped key/value heads, linear layers without biases, untied embeddings or two vocabularies, no
padding id.
"""
from __future__ import annotations

import torch
from torch import nn

from tmlib.model.config import ModelConfig

__all__ = ["marian_permutation", "marian_config", "marian_tokenizer", "to_marian", "save_marian", "model_card",
           "TOKENIZER_CLASS"]

#: The tokenizer class written into the folder's tokenizer_config.json: the name every transformers version that
#: the ``hf`` extra allows knows (4.x and 5.x). transformers 5 writes "TokenizersBackend", which 4.x cannot load.
TOKENIZER_CLASS = "PreTrainedTokenizerFast"


def marian_permutation(d_model: int) -> torch.Tensor:
    """The permutation π with ``marian_table[:, m] = paper_table[:, π[m]]``: the paper's even coordinates (sines),
    then its odd ones (cosines), long ``(d_model,)``.

    Raises:
        ValueError: ``d_model`` not a positive even integer.
    """
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even integer, got {d_model!r}")
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])  # (d_model,)


def _check_expressible(c: ModelConfig) -> None:
    """Raise ValueError naming the first option of ``c`` that a MarianMTModel cannot express."""
    problems = [
        (c.norm_first, "norm_first=True (pre-LN): Marian is post-LN, LayerNorm(x + Sublayer(x))"),
        (c.norm != "layer", f"norm={c.norm!r}: Marian uses LayerNorm"),
        (c.ffn != "relu", f"ffn={c.ffn!r}: Marian's feed-forward network is fc2(act(fc1(x))), no gate"),
        (c.positions != "sinusoidal", f"positions={c.positions!r}: Marian adds sinusoids to the embeddings"),
        (c.n_kv_heads not in (None, c.n_heads), f"n_kv_heads={c.n_kv_heads}: Marian has no grouped key/value heads"),
        (not c.bias, "bias=False: Marian's linear layers have biases"),
        ((c.tgt_vocab_size or c.vocab_size) != c.vocab_size,
         f"tgt_vocab_size={c.tgt_vocab_size}: this conversion needs one shared vocabulary"),
        (c.tie_embeddings is False,
         "tie_embeddings=False: this conversion needs one matrix for both embeddings and the pre-softmax layer"),
        (c.pad_id is None, "pad_id=None: Marian needs a padding id"),
    ]
    for bad, message in problems:
        if bad:
            raise ValueError(f"MarianMTModel cannot express {message}")


def marian_config(config: ModelConfig, bos_id: int, eos_id: int):
    """The ``transformers.MarianConfig`` of a ``ModelConfig`` with the paper's options (heads, layers, ``*_ffn_dim`` =
    d_ff, ReLU, ``scale_embedding``, ``max_position_embeddings`` = max_len, one tied vocabulary, the special ids).

    Raises:
        TypeError: not a ``ModelConfig``. ValueError: an option Marian cannot express (named).
    """
    from transformers import MarianConfig

    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a tmlib ModelConfig, got {type(config).__name__}")
    _check_expressible(config)
    c = config
    return MarianConfig(
        vocab_size=c.vocab_size, decoder_vocab_size=c.vocab_size, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True, d_model=c.d_model, encoder_layers=c.n_encoder_layers,
        decoder_layers=c.n_decoder_layers, encoder_attention_heads=c.n_heads, decoder_attention_heads=c.n_heads,
        encoder_ffn_dim=c.d_ff, decoder_ffn_dim=c.d_ff, activation_function="relu", dropout=c.dropout,
        attention_dropout=c.dropout, activation_dropout=c.dropout, max_position_embeddings=c.max_len,
        scale_embedding=True, pad_token_id=c.pad_id, bos_token_id=int(bos_id), eos_token_id=int(eos_id),
        decoder_start_token_id=int(bos_id), forced_eos_token_id=None)


def _state_dict(model, perm: torch.Tensor) -> dict[str, torch.Tensor]:
    """tmlib's weights under Marian's names, the d_model axis permuted by ``perm`` (module docstring)."""
    def rows(t):  # a weight or bias whose first axis is d_model (writes to the residual stream)
        return t[perm]

    def cols(t):  # a weight whose second axis is d_model (reads the residual stream)
        return t[:, perm]

    out = {}

    def linear(prefix, lin, reads, writes):
        w = lin.weight.detach()
        w = cols(w) if reads else w
        out[f"{prefix}.weight"] = rows(w) if writes else w
        b = lin.bias.detach()
        out[f"{prefix}.bias"] = rows(b) if writes else b

    def attention(prefix, mha):
        for ours, theirs in (("w_q", "q_proj"), ("w_k", "k_proj"), ("w_v", "v_proj")):
            linear(f"{prefix}.{theirs}", getattr(mha, ours), reads=True, writes=False)
        linear(f"{prefix}.out_proj", mha.w_o, reads=False, writes=True)

    def norm(prefix, ln):
        out[f"{prefix}.weight"], out[f"{prefix}.bias"] = rows(ln.weight.detach()), rows(ln.bias.detach())

    def feed_forward(prefix, ff):
        linear(f"{prefix}.fc1", ff.linear1, reads=True, writes=False)
        linear(f"{prefix}.fc2", ff.linear2, reads=False, writes=True)

    embedding = cols(model.src_embed.embedding.weight.detach())  # (V, d_model)
    for key in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                "lm_head.weight"):
        out[key] = embedding
    for i, layer in enumerate(model.encoder.layers):
        p = f"model.encoder.layers.{i}"
        attention(f"{p}.self_attn", layer.self_attn)
        norm(f"{p}.self_attn_layer_norm", layer.norm1)
        feed_forward(p, layer.feed_forward)
        norm(f"{p}.final_layer_norm", layer.norm2)
    for i, layer in enumerate(model.decoder.layers):
        p = f"model.decoder.layers.{i}"
        attention(f"{p}.self_attn", layer.self_attn)
        norm(f"{p}.self_attn_layer_norm", layer.norm1)
        attention(f"{p}.encoder_attn", layer.cross_attn)
        norm(f"{p}.encoder_attn_layer_norm", layer.norm2)
        feed_forward(p, layer.feed_forward)
        norm(f"{p}.final_layer_norm", layer.norm3)
    out["final_logits_bias"] = model.generator.proj.bias.detach()[None]  # (1, V)
    return {k: v.clone().float().contiguous() for k, v in out.items()}


def marian_tokenizer(tokenizer):
    """The course's BPE tokenizer as a ``transformers.PreTrainedTokenizerFast`` (the same JSON, special tokens declared,
    no post-processor, right padding): its ``input_ids`` are ``BPETokenizer.encode_batch``'s, and ``batch_decode(...,
    skip_special_tokens=True)`` its decode, except that ``<unk>`` is dropped and neither a byte-order mark nor blank
    text is cleaned. TypeError: not a ``BPETokenizer``."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from tmlib.data.tokenizer import BOS, EOS, PAD, UNK

    if not hasattr(tokenizer, "to_json"):
        raise TypeError(f"tokenizer must be a tmlib BPETokenizer, got {type(tokenizer).__name__}")
    backend = Tokenizer.from_str(tokenizer.to_json())
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token=PAD, bos_token=BOS, eos_token=EOS,
                                   unk_token=UNK, padding_side="right", clean_up_tokenization_spaces=False,
                                   model_max_length=10**6)


@torch.no_grad()
def to_marian(model, tokenizer):
    """``(MarianMTModel, PreTrainedTokenizerFast)`` of a trained translator: weights copied (float32, d_model axis
    permuted as the module explains), eval mode, eager attention (so ``output_attentions`` returns weights); logits,
    greedy and beam outputs and attention equal tmlib's up to rounding (chapter 14).

    Raises:
        TypeError: no tmlib ``ModelConfig``, or not a ``BPETokenizer``.
        ValueError: an option Marian cannot express, a vocabulary or pad id other than the model's.
    """
    from transformers import MarianMTModel

    config = getattr(model, "config", None)
    if not isinstance(config, ModelConfig) or not isinstance(model, nn.Module):
        raise TypeError(f"model must be a tmlib Transformer, got {type(model).__name__}")
    hf_config = marian_config(config, tokenizer.bos_id, tokenizer.eos_id)
    if tokenizer.vocab_size != config.vocab_size or tokenizer.pad_id != config.pad_id:
        raise ValueError(f"the tokenizer (vocabulary {tokenizer.vocab_size}, pad id {tokenizer.pad_id}) does not "
                         f"match the model (vocabulary {config.vocab_size}, pad id {config.pad_id})")
    hf_config._attn_implementation = "eager"
    marian = MarianMTModel(hf_config)
    weights = _state_dict(model, marian_permutation(config.d_model))
    missing, unexpected = marian.load_state_dict(weights, strict=False)
    missing = [k for k in missing if "embed_positions" not in k]  # the tables are computed, not loaded
    if missing or unexpected:  # a mapping that forgot a weight: a bug here, not the caller's
        raise RuntimeError(f"weight mapping incomplete: missing {missing}, unexpected {unexpected}")
    marian.tie_weights()
    return marian.eval(), marian_tokenizer(tokenizer)


def model_card(info: dict) -> str:
    """The folder's ``README.md``: what the model is, its data, its BLEU with sacreBLEU's signature, how to load
    it, its limits and licences. ``info``: ``config`` (a ``ModelConfig``), ``parameters``, ``train_steps``,
    ``train_minutes``, and optionally ``bleu`` (:func:`tmlib.decoding.bleu_scores`' dict) with ``beam_size``."""
    c = info["config"]
    bleu = info.get("bleu")
    if bleu is not None:
        score = (f"BLEU **{bleu['bleu']:.1f}** (lowercased {bleu['bleu_lowercase']:.1f}, chrF {bleu['chrf']:.1f}) on "
                 f"Multi30k test 2016 (1,000 sentences), {'greedy decoding' if info.get('beam_size', 1) == 1 else 'beam search of width ' + str(info['beam_size'])}"
                 f", sacreBLEU signature `{bleu['signatures']['bleu']}`.")
    else:
        score = "Not scored at export (`python -m tmlib.export` without `--no-bleu` adds the score)."
    return f"""---
language:
- de
- en
license: mit
library_name: transformers
pipeline_tag: translation
tags:
- translation
- marian
---

# A German→English caption translator (the course "Attention, executable")

A Transformer (Vaswani et al. 2017) with the paper's architecture, trained from scratch for
{info.get('train_minutes', '?')} minutes ({info.get('train_steps', '?')} steps) on Multi30k and converted to a
`transformers` MarianMT model: {c.n_encoder_layers} + {c.n_decoder_layers} layers, d_model {c.d_model},
{c.n_heads} heads, d_ff {c.d_ff}, a shared BPE vocabulary of {c.vocab_size:,} tokens, {info['parameters']:,}
parameters, at most {c.max_len} tokens per sentence.

## Use

```python
from transformers import AutoTokenizer, MarianMTModel

tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")
model = MarianMTModel.from_pretrained("path/to/this/folder")
batch = tokenizer(["Ein Mann fährt Fahrrad."], return_tensors="pt", padding=True)
print(tokenizer.batch_decode(model.generate(**batch, num_beams=4), skip_special_tokens=True))
```

## Data

Multi30k (Elliott et al. 2016), task 1: 29,000 German descriptions of Flickr30k photographs with their English
translations for training, 1,014 for validation; scored on test 2016 (1,000 pairs).

## Score

{score}

## Limits

- It translates image captions: short, literal descriptions of people, animals and places. On news, dialogue,
  technical or any other text it writes a fluent-looking caption that need not mean the source, and it does not
  signal that it is unsure.
- It reads German only; text in other scripts becomes unknown tokens `<unk>`.
- A source longer than {c.max_len} tokens is beyond its positions: cut it first.
- A model trained for minutes on 29,000 sentences: for real translation use a model trained on far more data
  (e.g. Helsinki-NLP/opus-mt-de-en).

## Licence

The weights, like the course's code, are under the MIT licence. They are learned from Multi30k, whose captions
describe Flickr30k images: check the terms of Multi30k and Flickr30k before any use beyond research and teaching.
"""


def save_marian(model, tokenizer, folder, info: dict | None = None):
    """Write the model as a Hugging Face folder: ``save_pretrained`` of :func:`to_marian`'s model and tokenizer,
    the tokenizer class named :data:`TOKENIZER_CLASS` (loadable by ``AutoTokenizer`` on transformers 4 and 5), and
    a model card ``README.md`` (:func:`model_card`; ``info`` as there, ``config`` and ``parameters`` filled in
    from the model when missing). Returns the folder as a ``Path``.

    Raises:
        TypeError, ValueError: as :func:`to_marian`.
    """
    import json
    from pathlib import Path

    from tmlib.model import count_parameters

    folder = Path(folder)
    hf_model, hf_tokenizer = to_marian(model, tokenizer)
    folder.mkdir(parents=True, exist_ok=True)
    hf_model.save_pretrained(folder)
    hf_tokenizer.save_pretrained(folder)
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = TOKENIZER_CLASS
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    info = {"config": model.config, "parameters": count_parameters(model), **(info or {})}
    (folder / "README.md").write_text(model_card(info), encoding="utf-8")
    return folder
