"""Cost arithmetic of the Transformer: parameter counts, attention memory, complexity.

Plain Python/NumPy (no torch), so Part I can use it.  Sources: the paper's Table 1
(complexity per layer) and Table 3 (model sizes), and the slides' practice problems.
"""
from __future__ import annotations


def _positive_int(value, name: str) -> int:
    """Return ``value`` if it is a positive integer; raise TypeError/ValueError naming it otherwise."""
    import operator

    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        value = operator.index(value)  # accepts int and NumPy integers, rejects floats and strings
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


def mha_parameter_count(d_model: int, n_heads: int, bias: bool = True, d_k: int | None = None,
                        d_v: int | None = None) -> int:
    """Number of trainable parameters of one multi-head attention block (paper §3.2.2).

    The block has W^Q, W^K of shape ``(d_model, n_heads * d_k)``, W^V of shape
    ``(d_model, n_heads * d_v)`` and W^O of shape ``(n_heads * d_v, d_model)``; with
    ``bias=True`` each projection also has a bias vector (as ``torch.nn.MultiheadAttention``
    and the slides' ``nn.Linear`` layers).  With the paper's choice d_k = d_v = d_model / h
    the count is 4·d_model² (+ 4·d_model biases), independent of the number of heads.

    Args:
        d_model: model width (int ≥ 1).
        n_heads: number of heads h (int ≥ 1).
        bias: count the four bias vectors.
        d_k, d_v: per-head widths; default ``d_model // n_heads`` (then ``d_model`` must be
            divisible by ``n_heads``).

    Returns:
        int, the parameter count.

    Raises:
        TypeError: a size is not an integer.
        ValueError: a size is < 1, or d_k/d_v are defaulted and d_model is not divisible by n_heads.

    Source: paper §3.2.2 (projection shapes); slides (seed 003) practice problem 1.
    """
    d_model = _positive_int(d_model, "d_model")
    n_heads = _positive_int(n_heads, "n_heads")
    if d_k is None or d_v is None:
        if d_model % n_heads:
            raise ValueError(
                f"d_model {d_model} is not divisible by n_heads {n_heads}: pass d_k and d_v explicitly"
            )
    d_k = d_model // n_heads if d_k is None else _positive_int(d_k, "d_k")
    d_v = d_model // n_heads if d_v is None else _positive_int(d_v, "d_v")
    weights = 2 * d_model * n_heads * d_k + d_model * n_heads * d_v + n_heads * d_v * d_model
    biases = (2 * n_heads * d_k + n_heads * d_v + d_model) if bias else 0
    return weights + biases


def attention_matrix_bytes(batch: int, n_heads: int, seq_len: int, bytes_per_element: int = 4,
                           n_layers: int = 1, seq_len_k: int | None = None) -> int:
    """Memory of the attention-weight matrices softmax(QKᵀ/√d_k), in bytes.

    One matrix ``(seq_len, seq_len_k)`` per sequence, head and layer:
    ``batch · n_heads · seq_len · seq_len_k · bytes_per_element · n_layers``.  This is the
    O(n²) term of the paper's Table 1; it counts one stored copy of the weights only (a
    training framework may keep more, e.g. the scores before the softmax and a dropout mask).

    Args:
        batch: number of sequences (int ≥ 1).
        n_heads: heads per layer (int ≥ 1).
        seq_len: number of queries n (int ≥ 1).
        bytes_per_element: 4 for float32, 2 for float16/bfloat16 (int ≥ 1).
        n_layers: number of attention layers (int ≥ 1).
        seq_len_k: number of keys; default ``seq_len`` (self-attention).

    Returns:
        int, bytes.

    Raises:
        TypeError: an argument is not an integer.  ValueError: an argument is < 1.

    Source: slides (seed 003) "Memory Requirements in Practice" and practice problem 1.
    """
    batch = _positive_int(batch, "batch")
    n_heads = _positive_int(n_heads, "n_heads")
    seq_len = _positive_int(seq_len, "seq_len")
    bytes_per_element = _positive_int(bytes_per_element, "bytes_per_element")
    n_layers = _positive_int(n_layers, "n_layers")
    seq_len_k = seq_len if seq_len_k is None else _positive_int(seq_len_k, "seq_len_k")
    return batch * n_heads * seq_len * seq_len_k * bytes_per_element * n_layers


def ffn_activation_bytes(batch: int, seq_len: int, d_ff: int, bytes_per_element: int = 4,
                         n_layers: int = 1) -> int:
    """Memory of the feed-forward hidden activations ``(batch, seq_len, d_ff)``, in bytes.

    Counts one stored copy of the inner layer max(0, xW₁ + b₁) per layer (paper §3.3), as
    the slides do; the pre-activation, if also kept, doubles it.

    Args:
        batch, seq_len, d_ff, bytes_per_element, n_layers: positive integers.

    Returns:
        int, ``batch · seq_len · d_ff · bytes_per_element · n_layers``.

    Raises:
        TypeError: an argument is not an integer.  ValueError: an argument is < 1.

    Source: slides (seed 003) "Memory Requirements in Practice" (BERT-base, d_ff 3072).
    """
    batch = _positive_int(batch, "batch")
    seq_len = _positive_int(seq_len, "seq_len")
    d_ff = _positive_int(d_ff, "d_ff")
    bytes_per_element = _positive_int(bytes_per_element, "bytes_per_element")
    n_layers = _positive_int(n_layers, "n_layers")
    return batch * seq_len * d_ff * bytes_per_element * n_layers


def training_state_bytes(n_params: int, bytes_per_element: int = 4) -> dict[str, int]:
    """Memory of parameters, gradients and Adam's two moment estimates, in bytes.

    Adam keeps a first and a second moment per parameter, so its state is twice the
    parameters; the gradients are as large as the parameters.

    Args:
        n_params: number of parameters (int ≥ 1).
        bytes_per_element: 4 for float32 (int ≥ 1).

    Returns:
        dict with keys ``"parameters"``, ``"gradients"``, ``"adam_states"``, ``"total"`` (bytes).

    Raises:
        TypeError: an argument is not an integer.  ValueError: an argument is < 1.

    Source: slides (seed 003) "Memory Requirements in Practice" (BERT-base, 110M parameters);
    Adam: Kingma and Ba (2015).
    """
    n_params = _positive_int(n_params, "n_params")
    bytes_per_element = _positive_int(bytes_per_element, "bytes_per_element")
    p = n_params * bytes_per_element
    return {"parameters": p, "gradients": p, "adam_states": 2 * p, "total": 4 * p}
