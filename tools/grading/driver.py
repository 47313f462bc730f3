"""The extraction driver: runs a submission's code and sends back the values the grader asks for, as data.

This file is the only grading code that runs next to a student's code. The grader copies it into the sandbox
(read-only) with a job file and runs ``python driver.py JOB.json``. It

1. executes the notebook's code cells in order in one namespace, as Jupyter would: in an IPython shell where
   IPython is installed (``%%time``, ``%%capture``, ``%time``, ``display(x)`` work as in a kernel; installs, shell
   commands and other magics that reach outside the notebook do nothing), else with IPython syntax commented out;
   an exception in a cell is reported and the next cell runs, as in a kernel's "run all";
2. encodes the requested global variables as data: JSON for the structure (None, bool, int, float, complex, str,
   list, tuple, set, dict, NumPy scalars) and NumPy's ``.npy`` format for the contents of arrays and torch tensors
   (numeric, boolean or fixed-width unicode dtypes only; decoded with ``allow_pickle=False``). Never pickle:
   anything else (a function, a module, an object with its own ``__eq__``) is reported as unsupported and does
   not reach the grader;
3. calls the functions the grader asks for on the grader's inputs (sent as data in the same format), with the
   library references the exercise forbids made unavailable (:func:`forbidden`), and encodes their results (or
   the error they raised) the same way;
4. writes one message to the file descriptor named in the job (a pipe to the grader):
   ``MAGIC``, the JSON's length (8 bytes, big-endian), the JSON, the blob's length, the blob (the ``.npy``
   records, one after the other).

Nothing here is trusted: the student's code runs in this process and may patch this module, NumPy or anything
else. The grader therefore trusts nothing but the *format* of the message (``grading/values.py`` decodes it
strictly and within limits) and judges the values in its own process. Only the standard library is needed; NumPy,
torch and IPython are used when present.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback

try:
    from .forbid import forbidden, references
except ImportError:  # in the sandbox: forbid.py is copied beside this file
    from forbid import forbidden, references

MAGIC = b"TM-GRADING-VALUES/2\n"
MAX_DEPTH = 32                 # nesting of lists/dicts in one value
MAX_BLOB_BYTES = 64 * 2**20    # all arrays of one submission together
MAX_HASHED = 2_000             # entries of one dict or set (their keys are hashed when decoded)
MAX_HASHED_TOTAL = 20_000      # dict and set entries of one message in all
ARRAY_KINDS = "biufcU"         # bool, int, uint, float, complex, unicode
TENSOR_DTYPES = ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
                 "complex64", "complex128")
# Magics that would reach outside the notebook (installs, shell, other files, the network): they do nothing here,
# as the old driver did with every magic. The others (time, capture, timeit, env...) run as IPython runs them.
NOOP_LINE_MAGICS = ("pip", "conda", "mamba", "micromamba", "uv", "system", "sx", "sc", "matplotlib", "run", "load",
                    "loadpy", "bookmark", "cd", "pushd", "popd", "store", "logstart", "notebook", "gui", "edit")
NOOP_CELL_MAGICS = ("bash", "sh", "script", "system", "sx", "perl", "ruby", "python", "python2", "python3", "pypy",
                    "writefile", "file", "html", "javascript", "js", "svg", "latex", "markdown")


class Unsupported(Exception):
    """A value that cannot be sent as data (its type, its dtype, its size or its depth)."""


def _num(x: float) -> str:
    """A float as a string (``repr`` round-trips; 'nan' and 'inf' too)."""
    return repr(float(x))


class Encoder:
    """Turns Python values into JSON-able tagged dicts, appending ``.npy`` records of arrays to ``self.blob``."""

    def __init__(self):
        self.blob, self.hashed = bytearray(), 0

    def array(self, a) -> dict:
        import numpy as np
        a = np.asarray(a)  # a plain ndarray (no subclass)
        if a.dtype.kind not in ARRAY_KINDS or a.dtype.hasobject or a.dtype.fields is not None:
            raise Unsupported(f"array of dtype {a.dtype}")
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        if len(self.blob) + a.nbytes > MAX_BLOB_BYTES:
            raise Unsupported(f"arrays larger than {MAX_BLOB_BYTES} bytes in all")
        record = io.BytesIO()
        np.lib.format.write_array(record, a, allow_pickle=False)
        offset = len(self.blob)
        self.blob += record.getbuffer()
        return {"t": "ndarray", "offset": offset, "nbytes": len(self.blob) - offset}

    def _count(self, n: int, kind: str) -> None:
        self.hashed += n
        if n > MAX_HASHED or self.hashed > MAX_HASHED_TOTAL:
            raise Unsupported(f"a {kind} of {n} entries (at most {MAX_HASHED} per dict or set, {MAX_HASHED_TOTAL} in "
                              "all: send larger tables as lists or arrays)")

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
        if t in (list, tuple):
            return {"t": "list" if t is list else "tuple", "v": [self.encode(x, depth + 1) for x in v]}
        if t in (set, frozenset):
            self._count(len(v), "set")
            return {"t": "set", "v": [self.encode(x, depth + 1) for x in sorted(v, key=repr)]}
        if t is dict:
            self._count(len(v), "dict")
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
            return {"t": "tensor", "dtype": dtype, "array": self.array(data.resolve_conj().resolve_neg().numpy())}
        raise Unsupported(f"type {t.__module__}.{t.__qualname__}")


# --------------------------------------------------------------------------------------------- running the cells
class _Shell:
    """Stands in for ``get_ipython()`` where IPython is not used: ``%time``/``%%time``, ``%%capture`` and
    ``%%prun``-like magics run their code in the namespace, as IPython would; every other magic and shell escape
    does nothing (no installs, no shell)."""
    RUN = ("time", "capture", "prun")

    def __init__(self, namespace: dict | None = None):
        self.namespace = namespace if namespace is not None else {}

    def run_line_magic(self, name, line, *args, **kwargs):
        if name not in self.RUN or not line.strip():
            return None
        try:
            code = compile(line, "<magic>", "eval", optimize=0)
        except SyntaxError:
            exec(compile(line, "<magic>", "exec", optimize=0), self.namespace)
            return None
        return eval(code, self.namespace)

    def run_cell_magic(self, name, line, cell, *args, **kwargs):
        if name in self.RUN:
            sink = io.StringIO()
            quiet = contextlib.redirect_stdout(sink) if name == "capture" else contextlib.nullcontext()
            with quiet:
                exec(compile(python_source(cell), "<cell magic>", "exec", optimize=0), self.namespace)
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


def _noop(*args, **kwargs):
    return None


def ipython_shell(namespace: dict):
    """An IPython shell whose user namespace is ``namespace`` (no history, no shell, no installs), or None."""
    try:
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config
    except Exception:  # noqa: BLE001 - no IPython here: the plain runner below
        return None
    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "nocolor"
    config.InteractiveShell.xmode = "plain"
    shell = InteractiveShell(config=config, user_ns=namespace)
    for name in NOOP_LINE_MAGICS:
        shell.register_magic_function(_noop, "line", name)
    for name in NOOP_CELL_MAGICS:
        shell.register_magic_function(_noop, "cell", name)
    shell.system = shell.system_raw = shell.system_piped = shell.getoutput = _noop
    return shell


def run_cells(cells: list[str], namespace: dict, *, shell="auto", around=None) -> list[str]:
    """Execute ``cells`` in ``namespace``; return one line per cell that raised (the run goes on, as in Jupyter).

    ``shell="auto"`` runs them in an IPython shell when IPython is installed (as a kernel would), ``None`` with the
    plain runner. ``around(i)``, when given, returns a context manager that each cell ``i`` runs inside.
    """
    ipy = ipython_shell(namespace) if shell == "auto" else None
    if ipy is None:
        shell_ = _Shell(namespace)
        namespace.setdefault("get_ipython", lambda: shell_)
        namespace.setdefault("display", lambda *args, **kwargs: None)
    errors = []
    for i, cell in enumerate(cells):
        context = around(i) if around else contextlib.nullcontext()
        try:
            with context:
                if ipy is not None:
                    result = ipy.run_cell(cell, store_history=False)
                    err = result.error_before_exec or result.error_in_exec
                    if err is not None:
                        raise err
                else:
                    exec(compile(python_source(cell), f"<code cell {i}>", "exec", optimize=0), namespace)
        except BaseException as err:  # noqa: BLE001 - SystemExit and KeyboardInterrupt in a cell too
            errors.append(f"code cell {i}: {type(err).__name__}: {err}"[:300])
            if ipy is None:
                traceback.print_exc(limit=3)
    return errors


# --------------------------------------------------------------------------------------------- calls and message
class Raised:
    """The outcome of a call that raised (or returned something that cannot be sent)."""

    def __init__(self, text: str):
        self.text = text[:300]


def call_results(namespace: dict, calls: dict[str, list], blob: bytes,
                 forbid: dict[str, list[str]] | None = None) -> dict[str, list]:
    """Call each requested function of ``namespace`` on the grader's inputs, in order.

    ``calls`` maps a name to encoded ``[args, kwargs]`` (arrays in ``blob``), decoded afresh for every call;
    ``forbid`` maps a name to the library references its exercise forbids (unavailable during its calls). Returns
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
                with forbidden((forbid or {}).get(name, ()), namespace, f"the exercise of {name}"):
                    results.append(namespace[name](*args, **kwargs))
            except BaseException as err:  # noqa: BLE001 - whatever the student's function does
                results.append(Raised(f"{type(err).__name__}: {err}"))
        out[name] = results
    return out


def message(namespace: dict, names: list[str], errors: list[str], calls: dict[str, list] | None = None,
            refs: dict[str, list[str] | None] | None = None) -> bytes:
    """The bytes sent to the grader, framed: the requested names' values (or why they are missing), the results
    of the function calls (from :func:`call_results`) and which forbidden references each function names."""
    enc, values, missing, unsupported = Encoder(), {}, [], {}
    for name in names:
        if name not in namespace:
            missing.append(name)
            continue
        mark, hashed = len(enc.blob), enc.hashed
        try:
            values[name] = enc.encode(namespace[name])
        except Unsupported as err:
            del enc.blob[mark:]
            enc.hashed = hashed
            unsupported[name] = str(err)
        except Exception as err:  # noqa: BLE001 - a value whose conversion fails (a broken tensor subclass...)
            del enc.blob[mark:]
            enc.hashed = hashed
            unsupported[name] = f"could not be read ({type(err).__name__})"
    results = {}
    for name, outcomes in (calls or {}).items():
        results[name] = []
        for outcome in outcomes:
            mark, hashed = len(enc.blob), enc.hashed
            try:
                node = {"t": "raised", "v": outcome.text} if isinstance(outcome, Raised) else enc.encode(outcome)
            except Exception as err:  # noqa: BLE001 - Unsupported, or a value whose conversion fails
                del enc.blob[mark:]
                enc.hashed = hashed
                node = {"t": "raised", "v": f"returned something that is not data ({err})"[:300]}
            results[name].append(node)
    body = json.dumps({"values": values, "missing": missing, "unsupported": unsupported, "errors": errors[:50],
                       "calls": results, "references": {k: v for k, v in (refs or {}).items() if v is not None}})
    data = body.encode()
    return MAGIC + len(data).to_bytes(8, "big") + data + len(enc.blob).to_bytes(8, "big") + bytes(enc.blob)


def main(argv: list[str]) -> int:
    """``driver.py JOB.json``: the job names the cells, the variables to send back, the functions to call (their
    inputs in ``calls.bin`` beside the job), the references each exercise forbids and the pipe's descriptor."""
    with open(argv[1]) as f:
        job = json.load(f)
    out = os.fdopen(job["fd"], "wb")
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    cell_forbid = {int(k): v for k, v in job.get("cell_forbid", {}).items()}
    errors = run_cells(job["cells"], namespace,
                       around=lambda i: forbidden(cell_forbid.get(i, ()), namespace, "this exercise"))
    calls, forbid, refs = {}, job.get("forbid", {}), {}
    if job.get("calls"):
        with open(os.path.join(os.path.dirname(argv[1]), "calls.bin"), "rb") as f:
            calls = call_results(namespace, job["calls"], f.read(), forbid)
    for name, names in forbid.items():
        if callable(namespace.get(name)):
            refs[name] = references(namespace[name], names)
    out.write(message(namespace, job["names"], errors, calls, refs))
    out.close()
    sys.stdout.flush()
    os._exit(0)  # no atexit handlers or finalizers of the submission's objects after the values are sent


if __name__ == "__main__":
    sys.exit(main(sys.argv))
