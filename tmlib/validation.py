"""Argument checks shared by the library, written once so that the modules that implement the paper's
equations stay about the equations.

Every check returns the cleaned value or raises an error whose message names the argument and the value
it got. Conventions (kept from the course's first modules, and relied on by the tests):

* a number of the wrong kind (``1.5`` or ``True`` where an integer is needed) or out of range raises
  :class:`ValueError`;
* an object of the wrong type altogether (a list where a tensor is needed, a float tensor where ids are
  needed) raises :class:`TypeError`.

torch is imported lazily: the NumPy-only parts of the course can use the number checks without it.
"""
from __future__ import annotations

import dataclasses
import math
from numbers import Integral, Real

__all__ = ["check_int", "check_float", "check_token_id", "check_token_ids", "check_sequence", "parse_optional",
           "parse_optional_bool", "optional_field"]


def check_int(value, name: str, *, minimum: int | None = None, maximum: int | None = None,
              allow_none: bool = False) -> int | None:
    """``value`` as an ``int``, checked to be an integer (not a bool) within ``[minimum, maximum]``.

    Args:
        value: the argument to check.
        name: its name, for the message (e.g. ``"beam_size"``).
        minimum, maximum: inclusive bounds, or ``None`` for none.
        allow_none: accept ``None`` (returned as is), e.g. for an optional budget.

    Returns:
        ``int(value)`` (or ``None``).

    Raises:
        ValueError: not an integer, or outside the bounds; the message names ``name`` and the value.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_float(value, name: str, *, minimum: float | None = None, maximum: float | None = None,
                min_inclusive: bool = True, max_inclusive: bool = True, allow_none: bool = False) -> float | None:
    """``value`` as a finite ``float`` within the given bounds.

    Args:
        value: the argument to check (an int is accepted, a bool is not).
        name: its name, for the message.
        minimum, maximum: bounds, or ``None``; ``min_inclusive``/``max_inclusive`` say whether the bound
            itself is allowed (e.g. ``minimum=0, min_inclusive=False`` for "positive").
        allow_none: accept ``None`` (returned as is).

    Returns:
        ``float(value)`` (or ``None``).

    Raises:
        ValueError: not a real number, not finite, or outside the bounds.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and (value < minimum or (value == minimum and not min_inclusive)):
        raise ValueError(f"{name} must be {'>=' if min_inclusive else '>'} {minimum}, got {value}")
    if maximum is not None and (value > maximum or (value == maximum and not max_inclusive)):
        raise ValueError(f"{name} must be {'<=' if max_inclusive else '<'} {maximum}, got {value}")
    return value


def check_token_id(value, name: str, vocab_size: int | None = None) -> int:
    """A single token id (``bos_id``, ``eos_id``, ``pad_id``): a non-negative integer, below ``vocab_size``
    when that is given.

    Raises:
        ValueError: not an integer token id, negative, or ``>= vocab_size`` (the message names the id).
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer token id, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative token id, got {value}")
    if vocab_size is not None and value >= vocab_size:
        raise ValueError(f"{name} {value} is outside the vocabulary [0, {vocab_size})")
    return int(value)


def check_token_ids(ids, vocab_size: int, name: str = "token ids") -> None:
    """Raise a clear error unless ``ids`` is an integer tensor with values in ``[0, vocab_size)``.

    The range check reads the values, which on a GPU would force the host to wait for the device at every
    call. It is therefore done only for tensors on the CPU, where it is free, and not inside ``torch.compile``
    (where reading a value splits the compiled graph); on a GPU, ids come from the data pipeline, which built
    them on the CPU (and an id out of range still stops the embedding lookup).

    Args:
        ids: integer tensor of any shape, e.g. ``(batch, seq_len)``.
        vocab_size: the number of ids, V.
        name: what to call ``ids`` in the message.

    Raises:
        TypeError: ``ids`` is not a torch tensor, or its dtype is not an integer type (bool is refused).
        ValueError: an id is negative or >= ``vocab_size``; the message names the id and the size.
    """
    import torch

    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of integer ids, got {type(ids).__name__}")
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"{name} must have an integer dtype (e.g. torch.long), got {ids.dtype}")
    if ids.numel() == 0 or ids.device.type != "cpu" or torch.compiler.is_compiling():
        return  # reading values would stall a GPU, or break a torch.compile graph
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise ValueError(f"{name} contain id {bad}, outside the vocabulary [0, {vocab_size}) of size {vocab_size}")


def check_sequence(ids, name: str, max_len: int) -> None:
    """Check a batch of token ids before a model reads it.

    Args:
        ids: ``(batch, seq_len)`` integer tensor.
        name: what to call it in the message (``"src"``, ``"tgt"``, ...).
        max_len: the longest sequence the model accepts (its positional table).

    Raises:
        TypeError: not a tensor, or not an integer dtype.
        ValueError: not 2-D (a 1-D input gets the hint to add a batch dimension), or longer than ``max_len``.
    """
    import torch

    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of integer ids (batch, seq_len), got {type(ids).__name__}")
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"{name} must have an integer dtype (e.g. torch.long), got {ids.dtype}")
    if ids.dim() != 2:
        raise ValueError(
            f"{name} must be 2-D (batch, seq_len), got shape {tuple(ids.shape)}"
            + ("; add a batch dimension with .unsqueeze(0)" if ids.dim() == 1 else "")
        )
    if ids.shape[1] > max_len:
        raise ValueError(f"{name} has length {ids.shape[1]}, more than max_len={max_len}")


# --------------------------------------------------------------------------------------------------
# Optional values on the command line
# --------------------------------------------------------------------------------------------------

def parse_optional(kind):
    """A command-line parser for an optional number: ``"none"`` (or ``"off"``) gives ``None``, anything else
    ``kind(text)`` (which raises ValueError for bad text, turned by argparse into a clear error)."""
    def parse(text: str):
        if text.strip().lower() in ("none", "off"):
            return None
        return kind(text)

    parse.__name__ = kind.__name__  # argparse names the type in its messages: "invalid int value: 'x'"
    return parse


def parse_optional_bool(text: str) -> bool | None:
    """``"true"/"yes"/"1"`` → True, ``"false"/"no"/"0"`` → False, ``"none"`` → None.

    Raises:
        ValueError: any other text.
    """
    value = text.strip().lower()
    if value in ("none", "auto"):
        return None
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    raise ValueError(f"expected true, false or none, got {text!r}")


parse_optional_bool.__name__ = "bool"


def optional_field(default, kind):
    """A dataclass field whose command-line option (``python -m tmlib.train``, which derives its options from
    the configuration dataclasses with ``simple_parsing``) also accepts ``none``. ``kind`` is ``int``,
    ``float`` or ``bool``."""
    parser = parse_optional_bool if kind is bool else parse_optional(kind)
    return dataclasses.field(default=default, metadata={"custom_args": {"type": parser}})
