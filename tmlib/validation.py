"""Argument checks shared by the library, written once so that the modules that implement the paper's
equations stay about the equations.

Every check returns the cleaned value or raises an error whose message names the argument and the value
it got. One contract for every check, in every subpackage:

* a value of the wrong kind raises :class:`TypeError`: ``1.5``, ``"3"``, ``None`` or ``True`` where an integer
  is needed (a bool is not an integer; NumPy integers are), a string where a number is needed, a list where a
  tensor is needed, float ids where integer ids are needed;
* a value of the right kind outside its range raises :class:`ValueError`: ``0`` where at least 1 is needed,
  a NaN or an infinity where a finite number is needed, an id outside the vocabulary, an index past the end.

NumPy is the only import; torch is imported inside the tensor checks, so that the NumPy-only parts of the
course (Part I) can use the number checks without it.
"""
from __future__ import annotations

import dataclasses
import math
from numbers import Integral, Real
from typing import Sequence

import numpy as np

__all__ = ["check_int", "check_float", "check_float_array", "check_int_array", "check_token_id", "check_token_ids",
           "check_sequence", "check_indices", "check_texts", "parse_optional", "parse_optional_bool", "optional_field"]


def _integer_kind(minimum: int | None, maximum: int | None) -> str:
    """What an integer argument must be, in words, for the message of a TypeError."""
    if maximum is None and minimum == 0:
        return "a non-negative integer"
    if maximum is None and minimum == 1:
        return "a positive integer"
    return "an integer"


def check_int(value, name: str, *, minimum: int | None = None, maximum: int | None = None,
              allow_none: bool = False) -> int | None:
    """``value`` as an ``int``, checked to be an integer (not a bool) within ``[minimum, maximum]``.

    Args:
        value: the argument to check: a Python or NumPy integer.
        name: its name, for the message (e.g. ``"beam_size"``).
        minimum, maximum: inclusive bounds, or ``None`` for none.
        allow_none: accept ``None`` (returned as is), e.g. for an optional budget.

    Returns:
        ``int(value)`` (or ``None``).

    Raises:
        TypeError: not an integer (a float, a string, a bool, ``None`` without ``allow_none``).
        ValueError: an integer outside the bounds. Both messages name ``name`` and the value.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be {_integer_kind(minimum, maximum)}, got {value!r}")
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
        TypeError: not a real number (a string, a bool, ``None`` without ``allow_none``).
        ValueError: not finite (NaN, infinity), or outside the bounds.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and (value < minimum or (value == minimum and not min_inclusive)):
        raise ValueError(f"{name} must be {'>=' if min_inclusive else '>'} {minimum}, got {value}")
    if maximum is not None and (value > maximum or (value == maximum and not max_inclusive)):
        raise ValueError(f"{name} must be {'<=' if max_inclusive else '<'} {maximum}, got {value}")
    return value


def check_float_array(x, name: str, ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """``x`` (a number, a nested list or an array of numbers) as a float64 NumPy array.

    Args:
        x: the argument to check.
        name: its name, for the message.
        ndim: the number of dimensions ``x`` must have (or a tuple of the allowed numbers); ``None``: any.

    Returns:
        a float64 array (a copy of ``x`` when it had another dtype).

    Raises:
        TypeError: ``x`` is not made of numbers (a string, ``None``, booleans, objects).
        ValueError: ``x`` does not have ``ndim`` dimensions; the message gives its shape.
    """
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}")
    arr = np.asarray(x)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if arr.ndim not in allowed:
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {arr.shape}")
    return arr


def check_int_array(values, name: str, what: str = "integers") -> np.ndarray:
    """``values`` (a sequence or an array) as a NumPy array of integers, its integer dtype kept.

    Args:
        values: the argument to check, e.g. token ids or lengths.
        name: its name, for the message.
        what: what the values must be, for the message (``"integer ids"``, ``"integer class indices"``).

    Raises:
        TypeError: the values are not integers (floats, booleans, strings; an empty list is float); the message
            gives the dtype found.
    """
    arr = np.asarray(values)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be {what}, got dtype {arr.dtype}")
    return arr


def check_token_id(value, name: str, vocab_size: int | None = None) -> int:
    """A single token id (``bos_id``, ``eos_id``, ``pad_id``): a non-negative integer, below ``vocab_size``
    when that is given.

    Raises:
        TypeError: not an integer.
        ValueError: negative, or ``>= vocab_size`` (the message names the id).
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer token id, got {value!r}")
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


def check_sequence(ids, name: str, max_len: int, vocab_size: int | None = None) -> None:
    """A batch of token ids before a model reads it: an integer tensor ``(batch, seq_len)`` of at most ``max_len``
    positions, with ids in ``[0, vocab_size)`` when that is given (:func:`check_token_ids`: on the CPU only).

    Raises:
        TypeError: not a tensor, or not an integer dtype.
        ValueError: not 2-D (a 1-D input gets the hint to add a batch dimension), longer than ``max_len``, or an id
            outside the vocabulary.
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
    if vocab_size is not None:
        check_token_ids(ids, vocab_size, f"{name} ids")


def check_indices(idx, n: int, caller: str, what: str = "example") -> np.ndarray:
    """``idx`` as a flat int64 array of indices into ``n`` items, for a batch that ``caller`` builds.

    Args:
        idx: a sequence or array of integer indices, at least one.
        n: the number of items; an index must lie in ``[0, n)``.
        caller: the method that needs them, for the message (e.g. ``"collate_indices"``).
        what: what the items are, for the message (``"example"``, ``"sentence"``).

    Raises:
        TypeError: the indices are not integers (floats or bools).
        ValueError: no index, or an index outside ``[0, n)``.
    """
    idx = np.asarray(idx).reshape(-1)
    if not idx.size:
        raise ValueError(f"{caller} needs at least one index")
    idx = check_int_array(idx, f"{what} indices").astype(np.int64)
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"{what} indices must be in [0, {n}), got {idx.min()}..{idx.max()}")
    return idx


def check_texts(texts, name: str) -> list[str]:
    """``texts`` as a list of ``str`` (one sentence each).

    Raises:
        TypeError: ``texts`` is a single string or not a sequence, or an element is not a ``str``; the message
            names ``name`` (and the position of the first bad element).
    """
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"{name} must be a list of strings (one per sentence), got {type(texts).__name__}")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"{name}[{bad[0]}] is {type(texts[bad[0]]).__name__}, expected str")
    return list(texts)


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


def missing_path_reason(path) -> str | None:
    """Why ``path`` cannot be opened, in words for an error message (``"does not exist"``, ``"is a symbolic link
    that loops back on itself"``, ``"is a symbolic link to a missing file"``, ``"cannot be reached (...)"``), or
    ``None`` when it can be. ``Path.exists()`` says False for all of these alike."""
    import errno
    import os

    try:
        os.stat(path)
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symbolic link that loops back on itself (or a chain of links too long to follow)"
        if err.errno == errno.ENOENT:
            return "is a symbolic link to a missing file" if os.path.islink(path) else "does not exist"
        if err.errno == errno.ENAMETOOLONG:
            return "is a name too long for the file system"
        return f"cannot be reached ({err.strerror or err})"
