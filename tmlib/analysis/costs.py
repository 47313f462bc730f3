"""Cost arithmetic of the Transformer: parameter counts, memory, and the paper's Table 1.

Plain Python (no torch), so Part I can use it.  Sources: the paper's §3.2-3.3 (the shapes of the weights), Table 1
(complexity per layer) and Table 3 (model sizes), and the slides' practice problems.  FLOP counts live in
:mod:`tmlib.analysis.flops`, counted there once.
"""
from __future__ import annotations

from tmlib.validation import check_int

__all__ = ["mha_parameter_count", "ffn_parameter_count", "attention_matrix_bytes", "ffn_activation_bytes",
           "training_state_bytes", "LAYER_TYPES", "PAPER_TABLE_1", "complexity_per_layer", "sequential_operations",
           "maximum_path_length", "complexity_table"]


def mha_parameter_count(d_model: int, n_heads: int, bias: bool = True, d_k: int | None = None,
                        d_v: int | None = None) -> int:
    """Parameters of one multi-head attention block (§3.2.2): W^Q, W^K ``(d_model, h·d_k)``, W^V ``(d_model, h·d_v)``,
    W^O ``(h·d_v, d_model)``, plus four biases with ``bias``; 4·d_model² (+ 4·d_model) with d_k = d_v = d_model / h,
    whatever h.

    Raises:
        TypeError: a size not an integer. ValueError: a size < 1, or d_model not divisible by n_heads (default d_k).
    """
    d_model = check_int(d_model, "d_model", minimum=1)
    n_heads = check_int(n_heads, "n_heads", minimum=1)
    if d_k is None or d_v is None:
        if d_model % n_heads:
            raise ValueError(
                f"d_model {d_model} is not divisible by n_heads {n_heads}: pass d_k and d_v explicitly"
            )
    d_k = d_model // n_heads if d_k is None else check_int(d_k, "d_k", minimum=1)
    d_v = d_model // n_heads if d_v is None else check_int(d_v, "d_v", minimum=1)
    weights = 2 * d_model * n_heads * d_k + d_model * n_heads * d_v + n_heads * d_v * d_model
    biases = (2 * n_heads * d_k + n_heads * d_v + d_model) if bias else 0
    return weights + biases


def ffn_parameter_count(d_model: int, d_ff: int, bias: bool = True) -> int:
    """Number of trainable parameters of one position-wise feed-forward block (paper §3.3).

    W₁ ``(d_model, d_ff)``, b₁ ``(d_ff,)``, W₂ ``(d_ff, d_model)``, b₂ ``(d_model,)``:
    2·d_model·d_ff (+ d_ff + d_model biases).  The base model (512, 2048) has 2,099,712.

    Raises:
        TypeError: a size is not an integer.  ValueError: a size is < 1.
    """
    d_model = check_int(d_model, "d_model", minimum=1)
    d_ff = check_int(d_ff, "d_ff", minimum=1)
    return 2 * d_model * d_ff + ((d_ff + d_model) if bias else 0)


def attention_matrix_bytes(batch: int, n_heads: int, seq_len: int, bytes_per_element: int = 4,
                           n_layers: int = 1, seq_len_k: int | None = None) -> int:
    """Bytes of the stored attention weights, batch · n_heads · seq_len · seq_len_k · bytes · n_layers (Table 1's O(n²)
    term, one copy; the slides' memory problem). Raises TypeError (not integers) or ValueError (an argument < 1)."""
    batch = check_int(batch, "batch", minimum=1)
    n_heads = check_int(n_heads, "n_heads", minimum=1)
    seq_len = check_int(seq_len, "seq_len", minimum=1)
    bytes_per_element = check_int(bytes_per_element, "bytes_per_element", minimum=1)
    n_layers = check_int(n_layers, "n_layers", minimum=1)
    seq_len_k = seq_len if seq_len_k is None else check_int(seq_len_k, "seq_len_k", minimum=1)
    return batch * n_heads * seq_len * seq_len_k * bytes_per_element * n_layers


def ffn_activation_bytes(batch: int, seq_len: int, d_ff: int, bytes_per_element: int = 4,
                         n_layers: int = 1) -> int:
    """Bytes of the feed-forward hidden activations, batch · seq_len · d_ff · bytes · n_layers (§3.3; one copy, as the
    slides count). Raises TypeError (not integers) or ValueError (an argument < 1)."""
    batch = check_int(batch, "batch", minimum=1)
    seq_len = check_int(seq_len, "seq_len", minimum=1)
    d_ff = check_int(d_ff, "d_ff", minimum=1)
    bytes_per_element = check_int(bytes_per_element, "bytes_per_element", minimum=1)
    n_layers = check_int(n_layers, "n_layers", minimum=1)
    return batch * seq_len * d_ff * bytes_per_element * n_layers


def training_state_bytes(n_params: int, bytes_per_element: int = 4) -> dict[str, int]:
    """Bytes of the parameters, their gradients and Adam's two moments (Kingma & Ba 2015): ``{"parameters",
    "gradients", "adam_states", "total"}``. Raises TypeError (not integers) or ValueError (an argument < 1)."""
    n_params = check_int(n_params, "n_params", minimum=1)
    bytes_per_element = check_int(bytes_per_element, "bytes_per_element", minimum=1)
    p = n_params * bytes_per_element
    return {"parameters": p, "gradients": p, "adam_states": 2 * p, "total": 4 * p}


#: The four layer types of the paper's Table 1, in the paper's order.
LAYER_TYPES = ("self_attention", "recurrent", "convolutional", "restricted_self_attention")

#: The paper's Table 1 as printed (big-O strings): complexity per layer, sequential operations,
#: maximum path length.  n = sequence length, d = representation width, k = kernel width,
#: r = neighbourhood size of restricted self-attention.
PAPER_TABLE_1 = {
    "self_attention": ("O(n^2 * d)", "O(1)", "O(1)"),
    "recurrent": ("O(n * d^2)", "O(n)", "O(n)"),
    "convolutional": ("O(k * n * d^2)", "O(1)", "O(log_k(n))"),
    "restricted_self_attention": ("O(r * n * d)", "O(1)", "O(n/r)"),
}


def _layer_type(layer_type) -> str:
    """``layer_type`` if it is one of :data:`LAYER_TYPES`; TypeError for a non-string, ValueError otherwise."""
    if not isinstance(layer_type, str):
        raise TypeError(f"layer_type must be a string, got {layer_type!r}")
    if layer_type not in LAYER_TYPES:
        raise ValueError(f"layer_type must be one of {LAYER_TYPES}, got {layer_type!r}")
    return layer_type


def complexity_per_layer(layer_type: str, n: int, d: int, k: int | None = None, r: int | None = None) -> int:
    """Table 1's "Complexity per Layer" (§4), constants dropped: self-attention n²·d, recurrent n·d², convolutional
    k·n·d², restricted self-attention r·n·d.

    Raises:
        TypeError: ``layer_type`` not a string, a size not an integer.
        ValueError: an unknown ``layer_type``, a size < 1, a missing ``k`` or ``r``.
    """
    layer_type = _layer_type(layer_type)
    n = check_int(n, "n", minimum=1)
    d = check_int(d, "d", minimum=1)
    if layer_type == "self_attention":
        return n * n * d
    if layer_type == "recurrent":
        return n * d * d
    if layer_type == "convolutional":
        if k is None:
            raise ValueError("layer_type 'convolutional' needs the kernel width k")
        return check_int(k, "k", minimum=1) * n * d * d
    if r is None:
        raise ValueError("layer_type 'restricted_self_attention' needs the neighbourhood size r")
    return check_int(r, "r", minimum=1) * n * d


def sequential_operations(layer_type: str, n: int) -> int:
    """Table 1's minimum sequential operations: ``n`` for a recurrent layer, 1 for the others. Errors as
    :func:`complexity_per_layer`."""
    layer_type = _layer_type(layer_type)
    n = check_int(n, "n", minimum=1)
    return n if layer_type == "recurrent" else 1


def maximum_path_length(layer_type: str, n: int, k: int | None = None, r: int | None = None,
                        dilated: bool = True) -> int:
    """Table 1's maximum path length between two positions, in layers: self-attention 1; recurrent n − 1;
    convolutional ⌈log_k n⌉ (dilated) or ⌈(n − 1)/(k − 1)⌉ (contiguous, §4); restricted self-attention
    ⌈(n − 1)/⌊r/2⌋⌉. Errors as :func:`complexity_per_layer`, and k or r < 2."""
    layer_type = _layer_type(layer_type)
    n = check_int(n, "n", minimum=1)
    if layer_type == "self_attention":
        return 1
    if layer_type == "recurrent":
        return max(n - 1, 1)
    if layer_type == "convolutional":
        if k is None:
            raise ValueError("layer_type 'convolutional' needs the kernel width k")
        k = check_int(k, "k")
        if k < 2:
            raise ValueError(f"kernel width k must be at least 2 to connect positions, got {k}")
        if dilated:
            layers, field = 0, 1
            while field < n:  # integer version of ceil(log_k n), free of float rounding
                field *= k
                layers += 1
            return max(layers, 1)
        return max(-(-(n - 1) // (k - 1)), 1)
    if r is None:
        raise ValueError("layer_type 'restricted_self_attention' needs the neighbourhood size r")
    r = check_int(r, "r")
    if r < 2:
        raise ValueError(f"neighbourhood size r must be at least 2 to connect positions, got {r}")
    return max(-(-(n - 1) // (r // 2)), 1)


def complexity_table(n: int, d: int, k: int, r: int) -> list[dict]:
    """Table 1 at concrete sizes: one dict per layer type (``layer_type``, ``complexity``, ``operations``,
    ``sequential_operations``, ``maximum_path_length``). Errors as the functions it calls."""
    rows = []
    for lt in LAYER_TYPES:
        rows.append({
            "layer_type": lt,
            "complexity": PAPER_TABLE_1[lt][0],
            "operations": complexity_per_layer(lt, n, d, k=k, r=r),
            "sequential_operations": sequential_operations(lt, n),
            "maximum_path_length": maximum_path_length(lt, n, k=k, r=r),
        })
    return rows
