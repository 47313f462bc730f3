"""Decoding the values a sandbox sends back: strict, bounded, data only.

The message comes from the student's process (see ``driver.py`` for its format), so it is treated as hostile input:
its size is capped, the JSON's nesting and size are capped, every tag is checked, arrays are read from their
``.npy`` records with ``numpy.lib.format.read_array(..., allow_pickle=False)`` and their dtypes checked, dicts and
sets are capped in size (integer keys can be forged to share one hash, which makes building a dict quadratic),
and anything unexpected raises :class:`BadValues`. A decoded value is a plain Python or NumPy object (or a torch tensor rebuilt from an array), so
judging it runs no code of the student's.
"""
from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field

try:
    from .driver import ARRAY_KINDS, MAGIC, MAX_BLOB_BYTES, MAX_DEPTH, MAX_HASHED, MAX_HASHED_TOTAL, TENSOR_DTYPES
except ImportError:  # in the sandbox, beside driver.py (which decodes the grader's function inputs with it)
    from driver import ARRAY_KINDS, MAGIC, MAX_BLOB_BYTES, MAX_DEPTH, MAX_HASHED, MAX_HASHED_TOTAL, TENSOR_DTYPES

MAX_JSON_BYTES = 16 * 2**20
MAX_MESSAGE_BYTES = len(MAGIC) + 16 + MAX_JSON_BYTES + MAX_BLOB_BYTES
MAX_NODES = 1_000_000
MAX_STR = 2**20


class BadValues(ValueError):
    """The sandbox's message is not a well-formed values message (truncated, oversized, or a bad tag)."""


@dataclass
class Values:
    """What a sandbox returned: decoded values by name, and why the others are absent."""
    values: dict = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)          # names the notebook never defined
    unsupported: dict[str, str] = field(default_factory=dict)  # name -> why it could not be sent as data
    errors: list[str] = field(default_factory=list)            # cells that raised, one line each
    calls: dict[str, list] = field(default_factory=dict)       # function name -> result nodes (or "raised")
    references: dict[str, list] = field(default_factory=dict)  # function name -> forbidden references it names


def parse_message(data: bytes) -> tuple[dict, bytes]:
    """Split a framed message into its JSON document and its blob.

    Raises:
        BadValues: wrong magic, lengths that do not add up to the message's size, over-size parts, invalid JSON.
    """
    if len(data) > MAX_MESSAGE_BYTES:
        raise BadValues(f"the values message is larger than {MAX_MESSAGE_BYTES} bytes")
    if not data.startswith(MAGIC):
        raise BadValues("no values message (the notebook's process ended before sending it, or wrote over it)")
    pos = len(MAGIC)
    n_json = int.from_bytes(data[pos:pos + 8], "big")
    if n_json > MAX_JSON_BYTES or pos + 8 + n_json + 8 > len(data):
        raise BadValues("truncated or oversized values message")
    raw = data[pos + 8:pos + 8 + n_json]
    pos += 8 + n_json
    n_blob = int.from_bytes(data[pos:pos + 8], "big")
    blob = data[pos + 8:]
    if n_blob > MAX_BLOB_BYTES or len(blob) != n_blob:
        raise BadValues("truncated or oversized array data")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise BadValues(f"invalid JSON in the values message ({type(err).__name__})") from None
    if not isinstance(doc, dict):
        raise BadValues("the values message is not a JSON object")
    return doc, blob


class Decoder:
    """Rebuilds values from tagged JSON and the blob; every call of :meth:`decode` gives fresh objects."""

    def __init__(self, blob: bytes):
        self.blob, self.nodes, self.hashed = blob, 0, 0

    def _str(self, x) -> str:
        if not isinstance(x, str) or len(x) > MAX_STR:
            raise BadValues("expected a string")
        return x

    def _float(self, x) -> float:
        try:
            return float(self._str(x))
        except ValueError:
            raise BadValues(f"not a number: {x[:40]!r}") from None

    def _count(self, n: int) -> None:
        self.hashed += n
        if n > MAX_HASHED or self.hashed > MAX_HASHED_TOTAL:
            raise BadValues(f"a dict or set larger than {MAX_HASHED} entries ({MAX_HASHED_TOTAL} in all)")

    def array(self, node: dict):
        """An array from its ``.npy`` record (``offset``, ``nbytes`` into the blob), without pickle."""
        import numpy as np
        offset, nbytes = node.get("offset"), node.get("nbytes")
        if type(offset) is not int or type(nbytes) is not int or offset < 0 or nbytes < 0 \
                or offset + nbytes > len(self.blob):
            raise BadValues("bad array header")
        record = io.BytesIO(memoryview(self.blob)[offset:offset + nbytes])
        try:  # the .npy header, read by NumPy's own reader (a dict literal, never pickle)
            version = np.lib.format.read_magic(record)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}[version]
            shape, fortran, dtype = read_header(record, max_header_size=1000)
        except Exception as err:  # noqa: BLE001 - a malformed record: ValueError, KeyError, SyntaxError...
            raise BadValues(f"bad array record ({type(err).__name__})") from None
        if dtype.kind not in ARRAY_KINDS or dtype.hasobject or dtype.fields is not None or len(shape) > 32:
            raise BadValues(f"dtype {dtype} is not allowed")
        count = math.prod(shape)
        if count * dtype.itemsize != nbytes - record.tell():
            raise BadValues("array header does not match its data")
        a = np.frombuffer(self.blob, dtype=dtype, count=count, offset=offset + record.tell())
        a = a.reshape(shape, order="F" if fortran else "C")
        return a.astype(dtype.newbyteorder("="), copy=True)

    def decode(self, node, depth: int = 0):
        """A value from its tagged JSON form. Raises :class:`BadValues` on anything not produced by the driver."""
        self.nodes += 1
        if depth > MAX_DEPTH + 2 or self.nodes > MAX_NODES:
            raise BadValues("value too deep or too large")
        if not isinstance(node, dict):
            raise BadValues("expected a tagged value")
        t = node.get("t")
        if t == "none":
            return None
        if t == "bool" and type(node.get("v")) is bool:
            return node["v"]
        if t == "int":
            s = self._str(node.get("v"))
            if len(s) > 4000 or not s.lstrip("-").isdigit():
                raise BadValues("bad integer")
            return int(s)
        if t == "float":
            return self._float(node.get("v"))
        if t == "complex":
            return complex(self._float(node.get("re")), self._float(node.get("im")))
        if t == "str":
            return self._str(node.get("v"))
        items = node.get("v")
        if t in ("list", "tuple", "set") and isinstance(items, list):
            if t == "set":
                self._count(len(items))
            out = [self.decode(x, depth + 1) for x in items]
            return out if t == "list" else tuple(out) if t == "tuple" else set(out)
        if t == "dict" and isinstance(items, list):
            self._count(len(items))
            if not all(isinstance(p, list) and len(p) == 2 for p in items):
                raise BadValues("bad dict entry")
            return {self.decode(k, depth + 1): self.decode(v, depth + 1) for k, v in items}
        if t == "scalar":
            import numpy as np
            dtype = np.dtype(self._str(node.get("dtype")))
            if dtype.kind not in "biufc":
                raise BadValues(f"scalar dtype {dtype} is not allowed")
            value = self.decode(node.get("v"), depth + 1)
            if type(value) not in (bool, int, float, complex):
                raise BadValues("bad scalar")
            return dtype.type(value)
        if t == "ndarray":
            return self.array(node)
        if t == "tensor":
            import torch
            dtype = node.get("dtype")
            if dtype not in TENSOR_DTYPES or not isinstance(node.get("array"), dict):
                raise BadValues(f"tensor dtype {dtype!r} is not allowed")
            return torch.from_numpy(self.array(node["array"])).to(getattr(torch, dtype))
        raise BadValues(f"unknown value tag {str(t)[:40]!r}")


def decode_message(data: bytes) -> tuple[Values, dict, bytes]:
    """Validate a whole message: (its summary with every value decoded once, the raw tagged values, the blob).

    The raw tagged values are kept so that the judge can decode a fresh copy for each check
    (:func:`fresh_value`); decoding everything once here rejects a malformed message up front.

    Raises:
        BadValues: see :func:`parse_message` and :meth:`Decoder.decode`; also names that are not strings.
    """
    doc, blob = parse_message(data)
    raw, missing, unsupported, errors = (doc.get(k) for k in ("values", "missing", "unsupported", "errors"))
    if not (isinstance(raw, dict) and isinstance(missing, list) and isinstance(unsupported, dict)
            and isinstance(errors, list)):
        raise BadValues("the values message lacks its parts")
    if not all(isinstance(x, str) for x in [*raw, *missing, *unsupported, *unsupported.values(), *errors]):
        raise BadValues("names and reasons must be strings")
    calls, refs = doc.get("calls", {}), doc.get("references", {})
    if not (isinstance(calls, dict) and all(isinstance(k, str) and isinstance(v, list) for k, v in calls.items())):
        raise BadValues("the function results are malformed")
    if not (isinstance(refs, dict) and all(isinstance(k, str) and isinstance(v, list)
                                           and all(isinstance(x, str) for x in v) for k, v in refs.items())):
        raise BadValues("the function references are malformed")
    decoder = Decoder(blob)
    try:
        decoded = {name: decoder.decode(node) for name, node in raw.items()}
        for node in (n for results in calls.values() for n in results):
            if isinstance(node, dict) and node.get("t") == "raised":
                decoder._str(node.get("v"))
            else:
                decoder.decode(node)
    except BadValues:
        raise
    except Exception as err:  # noqa: BLE001 - e.g. an unhashable dict key or set item in a forged message
        raise BadValues(f"malformed value ({type(err).__name__})") from None
    out = Values(decoded, missing, {k: v[:200] for k, v in unsupported.items()}, [e[:300] for e in errors[:50]],
                 calls, {k: [x[:200] for x in v[:20]] for k, v in refs.items()})
    return out, raw, blob


def fresh_value(raw: dict, blob: bytes, name: str):
    """A newly decoded copy of one value (so a check that mutates its input cannot affect the next check).

    Only for names that :func:`decode_message` already decoded without error.
    """
    return Decoder(blob).decode(raw[name])
