"""The extraction driver: runs a submission's code and sends back the values the grader asks for, as data.

This file is the only grading code that runs next to a student's code. The grader copies it into the sandbox
(read-only) with a job file and runs ``python driver.py JOB.json``. It

1. executes the notebook's code cells in order in one namespace, as Jupyter would (IPython magics become no-ops;
   an exception in a cell is reported and the next cell runs, as Otter did);
2. encodes the requested global variables as data: JSON for the structure (None, bool, int, float, complex, str,
   list, tuple, set, dict, NumPy scalars) plus one raw byte blob for the contents of NumPy arrays and torch
   tensors (numeric, boolean or fixed-width unicode dtypes only). Never pickle: anything else (a function, a
   module, an object with its own ``__eq__``) is reported as unsupported and does not reach the grader;
3. calls the functions the grader asks for on the grader's inputs (sent as data in the same format) and
   encodes their results (or the error they raised) the same way;
4. writes one message to the file descriptor named in the job (a pipe to the grader):
   ``MAGIC``, the JSON's length (8 bytes, big-endian), the JSON, the blob's length, the blob.

Nothing here is trusted: the student's code runs in this process and may patch this module, NumPy or anything
else. The grader therefore trusts nothing but the *format* of the message (``grading/values.py`` decodes it
strictly) and judges the values in its own process. Only the standard library is needed; NumPy and torch are
used when the student's values are arrays or tensors.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

MAGIC = b"TM-GRADING-VALUES/1\n"
MAX_DEPTH = 32                 # nesting of lists/dicts in one value
MAX_BLOB_BYTES = 64 * 2**20    # all arrays of one submission together
ARRAY_KINDS = "biufcU"         # bool, int, uint, float, complex, unicode
TENSOR_DTYPES = ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
                 "complex64", "complex128")


class Unsupported(Exception):
    """A value that cannot be sent as data (its type, its dtype, its size or its depth)."""


def _num(x: float) -> str:
    """A float as a string (``repr`` round-trips; 'nan' and 'inf' too)."""
    return repr(float(x))


class Encoder:
    """Turns Python values into JSON-able tagged dicts, appending array bytes to ``self.blob``."""

    def __init__(self):
        self.blob = bytearray()

    def array(self, a) -> dict:
        import numpy as np
        a = np.asarray(a)  # a plain ndarray (no subclass); tobytes() below is in C order whatever the strides
        if a.dtype.kind not in ARRAY_KINDS or a.dtype.hasobject:
            raise Unsupported(f"array of dtype {a.dtype}")
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        if len(self.blob) + a.nbytes > MAX_BLOB_BYTES:
            raise Unsupported(f"arrays larger than {MAX_BLOB_BYTES} bytes in all")
        offset = len(self.blob)
        self.blob += a.tobytes()
        return {"t": "ndarray", "dtype": a.dtype.str, "shape": list(a.shape), "offset": offset, "nbytes": a.nbytes}

    def encode(self, v, depth: int = 0) -> dict:
        if depth > MAX_DEPTH:
            raise Unsupported(f"nested deeper than {MAX_DEPTH}")
        t = type(v)
        if v is None:
            return {"t": "none"}
        if t is bool:
            return {"t": "bool", "v": v}
        if t is int:
            return {"t": "int", "v": str(v)}
        if t is float:
            return {"t": "float", "v": _num(v)}
        if t is complex:
            return {"t": "complex", "re": _num(v.real), "im": _num(v.imag)}
        if t is str:
            return {"t": "str", "v": v}
        if t in (list, tuple, set, frozenset):
            items = sorted(v, key=repr) if t in (set, frozenset) else v
            return {"t": {list: "list", tuple: "tuple"}.get(t, "set"),
                    "v": [self.encode(x, depth + 1) for x in items]}
        if t is dict:
            return {"t": "dict", "v": [[self.encode(k, depth + 1), self.encode(x, depth + 1)] for k, x in v.items()]}
        np = sys.modules.get("numpy")
        if np is not None and isinstance(v, np.ndarray):
            return self.array(v)
        if np is not None and isinstance(v, np.generic) and v.dtype.kind in "biufc":
            item = v.item()
            return {"t": "scalar", "dtype": v.dtype.str, "v": self.encode(type(item)(item), depth + 1)}
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(v, torch.Tensor):
            dtype = str(v.dtype).replace("torch.", "")
            if dtype not in TENSOR_DTYPES:
                raise Unsupported(f"tensor of dtype {dtype}")
            data = v.detach().to("cpu")
            data = data.float() if dtype == "bfloat16" else data
            return {"t": "tensor", "dtype": dtype, "array": self.array(data.numpy())}
        raise Unsupported(f"type {t.__module__}.{t.__qualname__}")


class _Shell:
    """Stands in for ``get_ipython()``: magics and shell escapes do nothing (no installs, no shell)."""

    def run_line_magic(self, *args, **kwargs):
        return None

    def run_cell_magic(self, *args, **kwargs):
        return None

    def system(self, *args, **kwargs):
        return None

    getoutput = system


def python_source(cell: str) -> str:
    """A cell's code with IPython syntax (``%magic``, ``!cmd``) turned into calls of ``get_ipython()``."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(cell)
    except Exception:  # no IPython, or a cell it cannot parse: comment the magic lines out
        return "\n".join("# " + line if line.lstrip().startswith(("%", "!")) else line for line in cell.splitlines())


def run_cells(cells: list[str], namespace: dict) -> list[str]:
    """Execute ``cells`` in ``namespace``; return one line per cell that raised (the run goes on, as Otter's)."""
    errors = []
    for i, cell in enumerate(cells):
        try:
            exec(compile(python_source(cell), f"<code cell {i}>", "exec"), namespace)
        except BaseException as err:  # noqa: BLE001 - SystemExit and KeyboardInterrupt in a cell too
            errors.append(f"code cell {i}: {type(err).__name__}: {err}"[:300])
            traceback.print_exc(limit=3)
    return errors


class Raised:
    """The outcome of a call that raised (or returned something that cannot be sent)."""

    def __init__(self, text: str):
        self.text = text[:200]


def call_results(namespace: dict, calls: dict[str, list], blob: bytes) -> dict[str, list]:
    """Call each requested function of ``namespace`` on the grader's inputs, in order.

    ``calls`` maps a name to encoded ``[args, kwargs]`` (arrays in ``blob``), decoded afresh for every call. Returns
    ``{name: [result or Raised]}``; a call never stops the others.
    """
    try:
        from .values import Decoder
    except ImportError:  # in the sandbox: values.py is copied beside this file
        from values import Decoder
    out = {}
    for name, nodes in calls.items():
        results = []
        for node in nodes:
            try:
                if not callable(namespace.get(name)):
                    raise NameError(f"{name} is not defined as a function")
                args, kwargs = Decoder(blob).decode(node)
                results.append(namespace[name](*args, **kwargs))
            except BaseException as err:  # noqa: BLE001 - whatever the student's function does
                results.append(Raised(f"{type(err).__name__}: {err}"))
        out[name] = results
    return out


def message(namespace: dict, names: list[str], errors: list[str], calls: dict[str, list] | None = None) -> bytes:
    """The bytes sent to the grader, framed: the requested names' values (or why they are missing) and the results
    of the function calls (from :func:`call_results`)."""
    enc, values, missing, unsupported = Encoder(), {}, [], {}
    for name in names:
        if name not in namespace:
            missing.append(name)
            continue
        mark = len(enc.blob)
        try:
            values[name] = enc.encode(namespace[name])
        except Unsupported as err:
            del enc.blob[mark:]
            unsupported[name] = str(err)
        except Exception as err:  # noqa: BLE001 - a value whose conversion fails (a broken tensor subclass...)
            del enc.blob[mark:]
            unsupported[name] = f"could not be read ({type(err).__name__})"
    results = {}
    for name, outcomes in (calls or {}).items():
        results[name] = []
        for outcome in outcomes:
            mark = len(enc.blob)
            try:
                node = {"t": "raised", "v": outcome.text} if isinstance(outcome, Raised) else enc.encode(outcome)
            except Exception as err:  # noqa: BLE001 - Unsupported, or a value whose conversion fails
                del enc.blob[mark:]
                node = {"t": "raised", "v": f"returned something that is not data ({err})"[:200]}
            results[name].append(node)
    body = json.dumps({"values": values, "missing": missing, "unsupported": unsupported, "errors": errors[:50],
                       "calls": results})
    data = body.encode()
    return MAGIC + len(data).to_bytes(8, "big") + data + len(enc.blob).to_bytes(8, "big") + bytes(enc.blob)


def main(argv: list[str]) -> int:
    """``driver.py JOB.json``: the job names the cells, the variables to send back, the functions to call (their
    inputs in ``calls.bin`` beside the job) and the pipe's descriptor."""
    with open(argv[1]) as f:
        job = json.load(f)
    out = os.fdopen(job["fd"], "wb")
    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "get_ipython": _Shell}
    errors = run_cells(job["cells"], namespace)
    calls = {}
    if job.get("calls"):
        with open(os.path.join(os.path.dirname(argv[1]), "calls.bin"), "rb") as f:
            calls = call_results(namespace, job["calls"], f.read())
    out.write(message(namespace, job["names"], errors, calls))
    out.close()
    sys.stdout.flush()
    os._exit(0)  # no atexit handlers or finalizers of the submission's objects after the values are sent


if __name__ == "__main__":
    sys.exit(main(sys.argv))
