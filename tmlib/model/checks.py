"""The argument checks of :mod:`tmlib.model`, made once at its public boundary (a function's or a model's
``forward``, ``encode``, ``decode``, a constructor), so that the code of the paper's equations holds only them.

One contract (:mod:`tmlib.validation`): an argument of the wrong kind (not a tensor, a float mask, float ids) raises
:class:`TypeError`; a wrong shape or value raises :class:`ValueError`, with a message naming the shapes.
"""
from __future__ import annotations

import torch
from torch import Tensor

from tmlib.model.config import ModelConfig
from tmlib.validation import check_int, check_sequence

__all__ = ["check_attention_config", "check_attention_args", "check_multi_head_args", "check_per_head_weights",
           "check_model_config", "check_model_inputs", "check_positions"]


def check_attention_config(d_model: int, n_heads: int, dropout: float, n_kv_heads: int | None = None,
                           positions: str | None = None) -> None:
    """The settings of :class:`~tmlib.model.attention.MultiHeadAttention` (and of its modern subclass).

    Raises:
        TypeError: a size is not an integer.
        ValueError: a size is not positive, ``n_heads`` does not divide ``d_model`` or ``n_kv_heads`` ``n_heads``,
            ``dropout`` is outside [0, 1), or ``positions`` is not None, "rope" or "alibi".
    """
    check_int(d_model, "d_model", minimum=1)
    check_int(n_heads, "n_heads", minimum=1)
    if d_model % n_heads != 0:
        raise ValueError(
            f"d_model={d_model} is not divisible by n_heads={n_heads}: each head needs d_model / n_heads columns"
        )
    if n_kv_heads is not None and (check_int(n_kv_heads, "n_kv_heads") < 1 or n_heads % n_kv_heads):
        raise ValueError(f"n_kv_heads={n_kv_heads} must be a positive divisor of n_heads={n_heads} "
                         f"(each key/value head serves n_heads / n_kv_heads query heads)")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    if positions not in (None, "rope", "alibi"):
        raise ValueError(f"positions must be None, 'rope' or 'alibi' inside attention, got {positions!r}")


def check_attention_args(query, key, value, attn_mask, attn_bias, dropout_p, is_causal: bool,
                         enable_gqa: bool) -> tuple[Tensor | None, Tensor | None]:
    """The arguments of :func:`~tmlib.model.attention.scaled_dot_product_attention` (see its Raises).

    Returns:
        ``(attn_mask, attn_bias)`` on the device of ``query`` (the bias also in its dtype), or ``None``.
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        _check_tensor(x, name)
        if x.dim() < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (..., seq_len, dim), got shape {tuple(x.shape)}")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"query, key and value must share a dtype, got {query.dtype}, {key.dtype}, {value.dtype}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must share d_k: query has shape {tuple(query.shape)}, key has shape {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value must have the same number of positions n_k: "
                         f"key has shape {tuple(key.shape)}, value has shape {tuple(value.shape)}")
    if key.shape[:-2] != value.shape[:-2]:
        raise ValueError(
            f"key and value must share their leading dimensions: got {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if enable_gqa and (query.dim() < 3 or key.dim() != query.dim() or query.shape[:-3] != key.shape[:-3]
                       or query.shape[-3] % key.shape[-3]):
        raise ValueError(
            f"with enable_gqa, query (..., n_heads, n_q, d_k) and key/value (..., n_kv_heads, n_k, d) must share "
            f"their batch dimensions and n_kv_heads must divide n_heads: got {tuple(query.shape)}, {tuple(key.shape)}"
        )
    if not enable_gqa and query.shape[:-2] != key.shape[:-2]:
        raise ValueError(f"query, key and value must share their leading (batch) dimensions exactly: got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    n_q, n_k = query.shape[-2], key.shape[-2]
    _check_causal(is_causal, n_q, n_k)
    scores_shape = (*query.shape[:-2], n_q, n_k)
    if attn_bias is not None:
        _check_tensor(attn_bias, "attn_bias")
        if not attn_bias.is_floating_point():
            raise TypeError(f"attn_bias must be a floating-point tensor (added to the scores), got {attn_bias.dtype}")
        _check_broadcasts(attn_bias, "attn_bias", scores_shape)
        attn_bias = attn_bias.to(device=query.device, dtype=query.dtype)
    if attn_mask is not None:
        _check_bool_mask(attn_mask, "attn_mask")
        _check_broadcasts(attn_mask, "attn_mask", scores_shape)
        attn_mask = attn_mask.to(query.device)
    return attn_mask, attn_bias


def check_multi_head_args(mha, query, key, value, attn_mask, real_keys, cache, static_kv: bool,
                          is_causal: bool) -> tuple[Tensor | None, Tensor | None]:
    """The arguments of :meth:`MultiHeadAttention.forward <tmlib.model.attention.MultiHeadAttention.forward>`
    (see its Raises).

    Returns:
        ``(attn_mask, real_keys)`` on the device of ``query``, or ``None``.
    """
    _check_input(mha, query, "query", None)
    batch, n_q, _ = query.shape
    if static_kv and not mha.cross_attention:  # ModernAttention: self-attention only
        raise ValueError(f"positions={mha.positions!r} and n_kv_heads={mha.n_kv_heads} are options of self-attention; "
                         "cross-attention (static_kv) relates two sequences: use MultiHeadAttention")
    cached = 0 if cache is None else len(cache)
    if cached and cache.k.shape[0] != batch:
        raise ValueError(f"cache holds batch {cache.k.shape[0]} (cached keys {tuple(cache.k.shape)}), "
                         f"query has batch {batch}")
    if static_kv and cached:  # cross-attention after the first step: the memory's keys are in the cache
        n_k = cached
    else:
        if key is None or value is None:
            raise ValueError("key and value are required unless static_kv=True and the cache is filled")
        _check_input(mha, key, "key", batch)
        _check_input(mha, value, "value", batch)
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                f"key {tuple(key.shape)} and value {tuple(value.shape)} must have the same number of positions"
            )
        n_k = cached + key.shape[1]  # the keys attended over: cached, then new
    _check_causal(is_causal, n_q, n_k)
    if attn_mask is not None:
        _check_bool_mask(attn_mask, "attn_mask")
        shapes = {2: (n_q, n_k), 3: (batch, n_q, n_k), 4: (batch, mha.n_heads, n_q, n_k)}
        if shapes.get(attn_mask.dim()) != tuple(attn_mask.shape):
            raise ValueError(
                f"attn_mask has shape {tuple(attn_mask.shape)}; expected (n_q, n_k) = {(n_q, n_k)}, "
                f"(batch, n_q, n_k) = {(batch, n_q, n_k)} or (batch, n_heads, n_q, n_k) = "
                f"{(batch, mha.n_heads, n_q, n_k)}"
            )
        attn_mask = attn_mask.to(query.device)
    if real_keys is not None:
        _check_bool_mask(real_keys, "real_keys")
        if tuple(real_keys.shape) != (batch, n_k):
            raise ValueError(f"real_keys has shape {tuple(real_keys.shape)}, expected (batch, n_k) = {(batch, n_k)}")
        real_keys = real_keys.to(query.device)
    return attn_mask, real_keys


def check_per_head_weights(wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor) -> None:
    """The matrices of :meth:`MultiHeadAttention.from_per_head_weights
    <tmlib.model.attention.MultiHeadAttention.from_per_head_weights>`.

    Raises:
        ValueError: ``w_q``, ``w_k``, ``w_v`` not all ``(h, d_model, d_k)``, ``h * d_k != d_model``, or ``w_o`` not
            ``(h * d_k, d_model)``.
    """
    if wq.dim() != 3 or wk.shape != wq.shape or wv.shape != wq.shape:
        raise ValueError(f"w_q, w_k, w_v must all have shape (h, d_model, d_k), got "
                         f"{tuple(wq.shape)}, {tuple(wk.shape)}, {tuple(wv.shape)}")
    h, d_model, d_k = wq.shape
    if h * d_k != d_model:
        raise ValueError(f"h * d_k = {h} * {d_k} = {h * d_k} must equal d_model = {d_model} for this module")
    if tuple(wo.shape) != (h * d_k, d_model):
        raise ValueError(f"w_o must have shape (h * d_k, d_model) = {(h * d_k, d_model)}, got {tuple(wo.shape)}")


def check_model_config(config) -> None:
    """Raise TypeError unless ``config`` is a :class:`~tmlib.model.config.ModelConfig`."""
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a tmlib.model.config.ModelConfig, got {type(config).__name__}")


def check_model_inputs(model, src: Tensor, tgt: Tensor | None = None, memory: Tensor | None = None,
                       padding_rows: bool = False) -> None:
    """The token ids (and memory) given to a :class:`~tmlib.model.transformer.Transformer`.

    Args:
        model: provides ``max_len``, ``src_vocab_size``, ``tgt_vocab_size``, ``d_model``, ``pad_id``.
        src, tgt: ``(batch, len)`` integer ids; memory: ``(batch, src_len, d_model)``.
        padding_rows: accept a source row made only of padding (decoding); otherwise, on the CPU (where reading
            values is free), such a row raises.

    Raises:
        TypeError: ids that are not an integer tensor.
        ValueError: ids not 2-D, longer than ``max_len`` or outside the vocabulary; batch sizes that differ; a
            memory of the wrong shape; a source row made only of padding.
    """
    check_sequence(src, "src", model.max_len, model.src_vocab_size)
    if tgt is not None:
        check_sequence(tgt, "tgt", model.max_len, model.tgt_vocab_size)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src batch size {src.shape[0]} differs from tgt batch size {tgt.shape[0]}")
    expected = (src.shape[0], src.shape[1], model.d_model)
    if memory is not None and tuple(memory.shape) != expected:
        raise ValueError(f"memory has shape {tuple(memory.shape)}, expected (batch, src_len, d_model) = {expected}")
    if padding_rows or model.pad_id is None or src.device.type != "cpu" or torch.compiler.is_compiling():
        return  # reading values would make a GPU wait, or split a torch.compile graph
    empty = ~(src != model.pad_id).any(dim=1)  # (batch,)
    if bool(empty.any()):
        raise ValueError(f"src row {int(empty.nonzero()[0, 0])} consists only of padding (pad_id={model.pad_id}): "
                         "nothing to attend to")


def check_positions(x: Tensor, offset: int, max_len: int) -> None:
    """Raise ValueError unless ``x`` is ``(batch, seq_len, d)`` and positions ``offset … offset + seq_len - 1`` fit
    in a table of ``max_len`` rows."""
    if x.dim() != 3:
        raise ValueError(f"x must have shape (batch, seq_len, d_model), got {tuple(x.shape)}")
    if offset < 0:
        raise ValueError(f"offset must be non-negative, got {offset}")
    if offset + x.shape[1] > max_len:
        raise ValueError(f"sequence of length {x.shape[1]} at offset {offset} needs {offset + x.shape[1]} positions, "
                         f"more than max_len={max_len}")


def _check_tensor(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _check_bool_mask(mask, name: str) -> None:
    _check_tensor(mask, name)
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must be a boolean tensor (True = may attend), got dtype {mask.dtype}; "
                        f"float (additive) masks are not accepted")


def _check_broadcasts(x: Tensor, name: str, scores_shape: tuple) -> None:
    try:
        ok = x.dim() <= len(scores_shape) and torch.broadcast_shapes(x.shape, scores_shape) == scores_shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} of shape {tuple(x.shape)} does not broadcast to the scores' shape "
                         f"(..., n_q, n_k) = {scores_shape}")


def _check_causal(is_causal: bool, n_q: int, n_k: int) -> None:
    if is_causal and n_q > n_k:
        raise ValueError(f"is_causal needs at least as many keys as queries (queries are the last positions), "
                         f"got n_q={n_q}, n_k={n_k}")


def _check_input(mha, x, name: str, batch: int | None) -> None:
    _check_tensor(x, name)
    if x.dim() != 3:
        raise ValueError(f"{name} must be (batch, seq_len, d_model), got shape {tuple(x.shape)}")
    if x.shape[-1] != mha.d_model:
        raise ValueError(f"{name} has shape {tuple(x.shape)}: its last size must be d_model={mha.d_model}")
    if batch is not None and x.shape[0] != batch:
        raise ValueError(f"{name} has batch size {x.shape[0]} (shape {tuple(x.shape)}) but query has batch {batch}")
