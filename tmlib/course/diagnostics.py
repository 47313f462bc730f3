"""Checks that say *what* is wrong with a build-it, not what the right answer is.

Each returns a one-line confirmation that starts with ``"correct:"`` (``check_own_work``: ``"correct so far:"``, as
the values are checked after it) or raises ``AssertionError`` with a message that names the symptom: a row that
does not sum to 1, a position that sees the future, an output that changes with the padding, the first sub-layer
that differs from the reference, a call of the library's own version of what the exercise asks the student to
write. None prints an expected value. The perturbations are seeded, so a check calls
the student's function on the same inputs every time (the grader replays a function's outputs on recorded inputs).
"""
from __future__ import annotations

import ast
import dis
import importlib
import inspect
import types

import numpy as np

from tmlib.course.checks import as_float_array, check_close

__all__ = ["check_rows_sum_to_one", "check_causal", "check_padding_invariance", "check_stages", "module_stages",
           "forbidden_references", "check_own_work", "check_own_answer", "resolve_dotted"]


def check_rows_sum_to_one(weights, what: str = "the attention weights", atol: float = 1e-6) -> str:
    """Assert that ``weights`` (..., n) is a probability distribution along its last axis: entries in [0, 1], each
    row summing to 1 within ``atol``.

    Raises:
        AssertionError: a negative entry, or rows whose sum differs from 1 (the message names the first rows and
            their sums: they are the student's own numbers).
    """
    w = as_float_array(weights, "answer", what)
    if w.ndim == 0:
        raise AssertionError(f"{what} must have at least one axis, got a scalar")
    if not np.isfinite(w).all():
        raise AssertionError(f"{what} contains NaN or infinity: a row of scores that is all -inf, an overflow, or a "
                             "row whose exponentials all round to 0 (0/0: is each row's own maximum subtracted?)")
    if (w < -atol).any():
        first = tuple(int(i) for i in np.argwhere(w < -atol)[0])
        raise AssertionError(f"{what} has a negative entry at index {first}: weights are probabilities (>= 0)")
    sums = w.sum(axis=-1)
    off = np.abs(sums - 1) > atol
    if off.any():
        rows = [tuple(int(i) for i in ix) for ix in np.argwhere(off)[:3]]
        shown = ", ".join(f"row {r[0] if len(r) == 1 else r} sums to {_off_one(float(sums[r]))}" for r in rows)
        raise AssertionError(f"{what}: {int(off.sum())} of {sums.size} rows do not sum to 1 ({shown}; tolerance "
                             f"{atol:g}): is the softmax taken over the last axis (the keys)?")
    return f"correct: every row of {what} sums to 1 (tolerance {atol:g})"


def _off_one(total: float) -> str:
    """``total`` with 4 decimals, or as many more as it takes to show that it is not 1 (1.0000003 at 7)."""
    digits = 4
    while round(total, digits) == 1 and digits < 12:
        digits += 1
    return f"{total:.{digits}f}"


def _perturbed(x, where, seed: int):
    """A copy of ``x`` (array or tensor) whose entries at the boolean index ``where`` get seeded noise added."""
    noise = np.random.default_rng(seed).normal(size=np.shape(x)) * 3.0 + 1.0
    if hasattr(x, "detach"):
        import torch
        mask = torch.as_tensor(np.array(where, dtype=bool), device=x.device)
        return torch.where(mask, x + torch.as_tensor(noise, dtype=x.dtype, device=x.device), x)
    x = np.asarray(x, dtype=float)
    return np.where(where, x + noise, x)


def _time_mask(shape, axis: int, keep) -> np.ndarray:
    """A boolean array of ``shape`` that is True at the positions along ``axis`` where ``keep(t)`` holds."""
    t = np.arange(shape[axis])
    picked = np.array([keep(i) for i in t], dtype=bool)
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return np.broadcast_to(picked.reshape(view), shape)


def check_causal(fn, x, what: str = "your function", *, axis: int = -2, atol: float = 1e-9, seed: int = 0) -> str:
    """Assert that ``fn`` is causal along ``axis``: its output at position t does not change when the inputs at
    positions after t change (perturbation of the future, one position at a time).

    ``x`` is an array or tensor whose ``axis`` is time; ``fn(x)`` returns an array or tensor with the same time
    axis (``axis`` counts from the end in both, as ``(..., n, d)``).

    Raises:
        AssertionError: a position whose output changes when a later input changes ("it can see the future").
    """
    base = as_float_array(fn(x), "answer", what)
    n = np.shape(x)[axis]
    for t in range(n - 1):
        changed = as_float_array(fn(_perturbed(x, _time_mask(np.shape(x), axis, lambda i: i > t), seed + t)),
                                 "answer", what)
        past = _time_mask(base.shape, axis, lambda i: i <= t)
        if base.shape != changed.shape:
            raise AssertionError(f"{what} returns shape {changed.shape} for a perturbed input of the same shape "
                                 f"(it returned {base.shape} before)")
        moved = np.abs(changed - base) > atol
        if (moved & past).any():
            first = int(np.argwhere(moved & past)[0][axis])
            raise AssertionError(f"{what}: position {first} changes when the inputs after position {t} change: it "
                                 "can see the future (is the causal mask missing, flipped, off by one, or of the "
                                 "opposite convention, True = blocked?)")
    return f"correct: {what} is causal: no output changes when a later input changes (tolerance {atol:g})"


def check_padding_invariance(fn, x, real, what: str = "your function", *, axis: int = -2, atol: float = 1e-9,
                             seed: int = 0, out_real=None) -> str:
    """Assert that the outputs of ``fn`` at real positions do not change when the padding positions' inputs do.

    ``real`` is a boolean array over ``x``'s leading axes up to ``axis`` (e.g. ``(batch, n)``), True for a real
    token (the course's convention: True = may attend). ``fn(x)`` returns outputs with the same leading axes, whose
    positions are ``x``'s own (self-attention, an encoder) unless ``out_real`` says which outputs to compare: a
    boolean array over the output's leading axes, e.g. all True for cross-attention, whose outputs are the
    queries' positions (every target position must ignore the source's padding).

    Raises:
        AssertionError: an output that moves with the padding (the message names its sentence and position,
            counted from 0).
    """
    real = np.asarray(real, dtype=bool)
    shape = np.shape(x)
    lead = len(shape) + axis + 1  # axes up to and including time
    where = np.broadcast_to(real.reshape(real.shape + (1,) * (len(shape) - lead)), shape)
    base = as_float_array(fn(x), "answer", what)
    changed = as_float_array(fn(_perturbed(x, ~where, seed)), "answer", what)
    if base.shape != changed.shape:
        raise AssertionError(f"{what} returns shape {changed.shape} for an input of the same shape (it returned "
                             f"{base.shape} before)")
    compared = real if out_real is None else np.asarray(out_real, dtype=bool)
    try:
        keep = np.broadcast_to(compared.reshape(compared.shape + (1,) * (base.ndim - compared.ndim)), base.shape)
    except ValueError:
        raise AssertionError(f"{what} returns shape {base.shape}, whose leading axes do not match the mask of the "
                             f"positions compared, {compared.shape}") from None
    moved = (np.abs(changed - base) > atol) & keep
    if moved.any():
        first = tuple(int(i) for i in np.argwhere(moved)[0][:compared.ndim])
        kind = "real position" if out_real is None else "position"
        at = f"{kind} {first[1]} of sentence {first[0]}" if len(first) == 2 else f"{kind} {first}"
        raise AssertionError(f"{what}: the output at {at} changes when the padding changes: the padding still "
                             "reaches it (is the padding mask missing, inverted or broadcast along the wrong axis, "
                             "queries instead of keys? Does every padded key get a weight of exactly 0?)")
    which = "at a real position " if out_real is None else "" if compared.all() else "at a position compared "
    return f"correct: {what} ignores the padding: no output {which}changes with it (tolerance {atol:g})"


def check_stages(stages, what: str = "your layer", atol: float = 1e-6, rtol: float = 0.0) -> str:
    """Compare a computation stage by stage and name the first sub-layer that differs from the reference.

    ``stages`` is a list of ``(name, answer, expected)`` in the order of the computation (or a dict ``name ->
    (answer, expected)``); :func:`module_stages` records them from a torch module.

    Raises:
        AssertionError: "differs from the reference in sub-layer X" with how far off (never the values), and
            which sub-layers before it match.
        ValueError: a stage's shapes differ (from :func:`tmlib.course.checks.check_close`).
    """
    items = [(name, *pair) for name, pair in stages.items()] if isinstance(stages, dict) else list(stages)
    matched = []
    for name, answer, expected in items:
        try:
            check_close(answer, expected, f"{what}, sub-layer '{name}'", atol=atol, rtol=rtol)
        except AssertionError as err:
            before = f"; the sub-layers before it match ({', '.join(repr(m) for m in matched)})" if matched else \
                " (the first one)"
            detail = str(err).split(": ", 1)[-1]
            raise AssertionError(f"{what} differs from the reference in sub-layer '{name}'{before}: {detail}") from None
        matched.append(name)
    return f"correct: every sub-layer of {what} matches the reference ({', '.join(repr(m) for m in matched)})"


def module_stages(module, names, *inputs, **kwargs) -> dict:
    """Run a torch ``module`` on ``inputs`` and return ``{name: output}`` of its named submodules (forward hooks),
    plus ``"output"``: the stages for :func:`check_stages`, as data (a dict of tensors)."""
    import torch

    outputs, hooks = {}, []
    parts = dict(module.named_modules())
    missing = [n for n in names if n not in parts]
    if missing:
        raise ValueError(f"module_stages: no submodule named {missing} (has {sorted(n for n in parts if n)})")
    for name in names:
        hooks.append(parts[name].register_forward_hook(
            lambda _m, _i, out, name=name: outputs.__setitem__(name, (out[0] if isinstance(out, tuple) else out)
                                                                .detach().clone())))
    try:
        with torch.no_grad():
            result = module(*inputs, **kwargs)
    finally:
        for h in hooks:
            h.remove()
    outputs["output"] = (result[0] if isinstance(result, tuple) else result).detach().clone()
    return {n: outputs[n] for n in [*names, "output"] if n in outputs}


# --------------------------------------------------------------------------------------------- own work
def resolve_dotted(dotted: str):
    """The object a dotted name names: a module (``"tmlib"``), a function or class (``"tmlib.ref.softmax"``,
    ``"torch.nn.functional.softmax"``) or an attribute of one (``"tmlib.training.NoamSchedule.peak"``); the longest
    importable prefix is imported and the rest looked up as attributes.

    Raises:
        LookupError: the name names nothing importable.
    """
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except Exception:  # noqa: BLE001 - not a module at this length: try a shorter prefix
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            return obj
        except AttributeError:
            break
    raise LookupError(f"{dotted} names nothing importable")


def _matches(obj, targets: dict) -> str | None:
    """The forbidden name ``obj`` is, or lies in (a module's own function or class), else None."""
    for name, target in targets.items():
        if obj is target:
            return name
        if isinstance(target, types.ModuleType):
            module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
            if isinstance(module, str) and (module == target.__name__ or module.startswith(target.__name__ + ".")):
                return name
        func = getattr(obj, "__func__", None)
        if func is not None and func is target:
            return name
    return None


def _module(name: str):
    """The module ``name`` (dotted), imported if it is not loaded yet; None where it cannot be imported."""
    import sys

    module = sys.modules.get(name)
    if module is None:
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that does not import names nothing the check can match
            return None
    return module


def _import_from(base, attr: str):
    """What ``from base import attr`` binds: an attribute of the module ``base``, or its submodule ``attr``."""
    if base is None:
        return None
    found = getattr(base, attr, None)
    if found is None and isinstance(base, types.ModuleType):
        found = _module(f"{base.__name__}.{attr}")
    return found


def _code_references(code, namespace: dict) -> list:
    """The objects a code object (and the code nested in it) reaches by global names and attribute chains, and by
    the imports in its body (``from tmlib.ref import softmax`` inside the function: the module and the names it
    imports, and the attribute chains of the local names they are bound to)."""
    found, chain = [], None
    stack, local = [], {}  # what the body's imports push, and the local names they bind
    instructions = list(dis.get_instructions(code))
    for k, ins in enumerate(instructions):
        op = ins.opname
        if op == "IMPORT_NAME":  # preceded by LOAD_CONST level, LOAD_CONST fromlist
            before = [i.argval if i.opname == "LOAD_CONST" else "?" for i in instructions[max(k - 2, 0):k]]
            level, fromlist = before if len(before) == 2 else (0, ())
            module = _module(ins.argval) if level == 0 else None  # a relative import: no package to resolve
            if module is not None:
                found.append(module)
            top = _module(ins.argval.split(".")[0]) if module is not None and fromlist is None else module
            stack.append(top)  # ``import a.b`` binds ``a``; ``from a.b import c`` and ``import a.b as m`` use a.b
            chain = None
        elif op == "IMPORT_FROM":
            obj = _import_from(stack[-1] if stack else None, ins.argval)
            if obj is not None:
                found.append(obj)
            stack.append(obj)
            chain = None
        elif op in ("SWAP", "ROT_TWO") and stack and (op == "ROT_TWO" or ins.argval == 2) and len(stack) >= 2:
            stack[-1], stack[-2] = stack[-2], stack[-1]
        elif op == "POP_TOP" and stack:
            stack.pop()
        elif op in ("STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"):
            value = stack.pop() if stack else None
            if value is None:
                local.pop(ins.argval, None)  # rebound to something else
            else:
                local[ins.argval] = value
            chain = None
        elif op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE") or (op in ("LOAD_NAME", "LOAD_GLOBAL")
                                                                     and ins.argval in local):
            stack.clear()
            chain = local.get(ins.argval)
            if chain is not None:
                found.append(chain)
        elif op in ("LOAD_GLOBAL", "LOAD_NAME"):
            stack.clear()
            name = ins.argval if isinstance(ins.argval, str) else str(ins.argval)
            obj = namespace.get(name, getattr(__builtins__, name, None) if not isinstance(__builtins__, dict)
                                else __builtins__.get(name))
            chain = obj
            if obj is not None:
                found.append(obj)
        elif op in ("LOAD_ATTR", "LOAD_METHOD") and chain is not None:
            stack.clear()
            chain = getattr(chain, ins.argval, None)
            if chain is not None:
                found.append(chain)
        else:
            if op not in ("LOAD_CONST", "NOP", "CACHE", "EXTENDED_ARG"):
                stack.clear()
            chain = None
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _code_references(const, namespace)
    return found


def forbidden_references(fn, forbid) -> list[str]:
    """Which of the dotted names ``forbid`` (``"tmlib.ref.softmax"``, or a module such as ``"tmlib"``) the function
    or class ``fn`` refers to, directly or through the functions and classes of the student's own namespace that
    it calls (by global name, attribute chain, default argument, closure, or an import inside its body such as
    ``from tmlib.ref import softmax``) or inherits from (a class's bases). A
    static inspection: it cannot see a name built at run time (``getattr(R, "soft" + "max")``), which the grader's
    run stops instead."""
    targets = {}
    for name in forbid:
        try:
            targets[name] = resolve_dotted(name)
        except LookupError:  # a name that names nothing cannot be called either
            continue
    found, seen, todo = set(), set(), [fn]
    while todo:
        item = todo.pop()
        item = _unwrapped(getattr(item, "__func__", item))  # a decorated function: the student's code inside
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, type):
            todo += [v for v in vars(item).values() if callable(v) or isinstance(v, (staticmethod, classmethod))]
            for base in item.__mro__[1:]:  # a subclass of the library's class runs the library's methods
                hit = _matches(base, targets)
                if hit:
                    found.add(hit)
                elif base.__module__ == item.__module__:  # the student's own base: its methods are read too
                    todo.append(base)
            continue
        code = getattr(item, "__code__", None)
        if code is None:
            continue
        namespace = getattr(item, "__globals__", {})
        reached = _code_references(code, namespace)
        reached += [c.cell_contents for c in (item.__closure__ or ()) if _filled(c)]
        reached += list(item.__defaults__ or ()) + list((item.__kwdefaults__ or {}).values())
        for obj in reached:
            inner = _unwrapped(obj)  # ``@torch.no_grad()`` and other decorators wrap the function they call
            hit = _matches(obj, targets) or (_matches(inner, targets) if inner is not obj else None)
            if hit:
                found.add(hit)
            elif _own(obj, namespace) or (inner is not obj and _own(inner, namespace)):
                todo.append(inner)
    return sorted(found)


def _unwrapped(obj):
    """``obj`` without its decorators' wrappers (``functools.wraps`` keeps the wrapped function in
    ``__wrapped__``); ``obj`` itself if it wraps nothing or cannot be unwrapped."""
    try:
        return inspect.unwrap(obj) if callable(obj) else obj
    except (ValueError, TypeError, AttributeError):  # a cycle of __wrapped__, or an object that resists lookup
        return obj


def _filled(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _own(obj, namespace: dict) -> bool:
    """Whether ``obj`` is a function or class of the student's namespace (defined in the notebook)."""
    func = getattr(obj, "__func__", obj)
    if isinstance(func, types.FunctionType):
        return func.__globals__ is namespace
    return isinstance(obj, type) and getattr(obj, "__module__", None) == namespace.get("__name__", "__main__")


def _only_ellipsis(fn) -> bool:
    """Whether ``fn`` is a function whose body is only a docstring and ``...`` (or ``pass``): a stub as it was
    handed out. Such a body compiles to nothing but ``return None``."""
    func = getattr(fn, "__func__", fn)
    if not isinstance(func, types.FunctionType) or func.__name__ == "<lambda>":
        return False
    ops = [(ins.opname, ins.argval) for ins in dis.get_instructions(func.__code__)
           if ins.opname not in ("RESUME", "NOP", "CACHE")]
    return ops in ([("LOAD_CONST", None), ("RETURN_VALUE", None)], [("RETURN_CONST", None)])


def _unwritten(fn, name: str) -> str | None:
    """What of ``fn`` is still its stub's ``...``: ``name`` itself, or a method of a class (``name.forward``)."""
    if isinstance(fn, type):
        methods = [k for k, v in vars(fn).items() if _only_ellipsis(v)]
        return f"{name}.{methods[0]}" if methods else None
    return name if _only_ellipsis(fn) else None


def _unwritten_inside(fn, names) -> str | None:
    """The first of ``names`` that ``fn`` (a wrapper the notebook gives) calls and whose body is still the stub's
    ``...``."""
    import inspect

    found = getattr(fn, "__globals__", {})
    return next((n for n in names if callable(found.get(n)) and _only_ellipsis(inspect.unwrap(found[n]))), None)


def _not_written(name: str) -> TypeError:
    """The course's message for a stub that is still ``...``."""
    return TypeError(f"{name} is not written yet: its body is still `...`; replace the `...` with your code and run "
                     "that cell again")


def grader_references(fn) -> list[str] | None:
    """What the sandbox found in a student's function when ``fn`` is the autograder's stand-in for it
    (``tools/grading/judge.py``: it replays results computed in the sandbox from plain arrays); None for any other
    function, whose code can be inspected and called here."""
    return getattr(fn, "__tm_references__", None)


def check_own_work(fn, forbid, what: str | None = None) -> str:
    """Assert that the student's ``fn`` does not delegate to the library's version of what the exercise asks for.

    ``forbid``: the dotted names the exercise rules out (the same list as its ``"forbid"`` markup). When grading,
    ``fn`` is the grader's stand-in, which carries what the sandbox found (``__tm_references__``).

    Raises:
        AssertionError: "``fn`` calls tmlib.ref.softmax: this exercise asks you to write it yourself".
        TypeError: ``fn``'s body is still only ``...`` (the stub): "not written yet", never "correct".
    """
    name = what or getattr(fn, "__name__", "your function")
    found = grader_references(fn)
    if found is None:
        stub = _unwritten(fn, name)
        if stub:
            raise _not_written(stub)
        found = forbidden_references(fn, forbid)
    if found:
        raise AssertionError(f"{name} calls {', '.join(found)}: this exercise asks you to write it yourself, "
                             "without it")
    return f"correct so far: {name} is your own work (it calls none of {', '.join(forbid)})"


def _assigns(tree, name: str) -> bool:
    """Whether the parsed cell ``tree`` binds ``name`` (``name = ...``, ``name += ...``, a ``for`` target, an import
    ``as name``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return True
    return False


def answer_cell_source(name: str, namespace: dict) -> str | None:
    """The source of the last cell run in the notebook of ``namespace`` that assigns ``name`` (from IPython's input
    history, ``_ih``), or None where there is no such history (a script, the grader) or no such cell."""
    history = namespace.get("_ih", namespace.get("In"))
    if not isinstance(history, list):
        return None
    for source in reversed(history):
        if not isinstance(source, str):
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        if _assigns(tree, name):
            return source
    return None


def check_own_answer(name: str, forbid, namespace: dict | None = None) -> str:
    """Assert that the notebook cell that computes the value ``name`` (a plain value, such as a list of numbers) does
    not call the library references ``forbid`` (dotted names, the exercise's ``"forbid"`` markup). A value keeps no
    trace of how it was computed, so this reads the source of the last cell run that assigns ``name`` (IPython's
    input history) and the student's functions it calls, as :func:`forbidden_references` reads a function.
    ``namespace``: the notebook's globals (default: the caller's). Where there is no input history (a script, the
    grader, whose run makes the references raise instead), it cannot tell and says so.

    Raises:
        AssertionError: "the cell that computes ``name`` calls tmlib.model.alibi_slopes: this exercise asks you to
            compute it without it".
    """
    import sys

    if namespace is None:
        namespace = sys._getframe(1).f_globals
    source = answer_cell_source(name, namespace)
    if source is None:
        return f"cannot tell here how {name} was computed (no cell of this notebook that assigns it was found)"
    try:
        code = compile(source, f"<the cell that computes {name}>", "exec")
    except SyntaxError:  # IPython syntax the history did not translate: nothing to read
        return f"cannot tell here how {name} was computed"
    found = forbidden_references(types.FunctionType(code, namespace), forbid)
    if found:
        raise AssertionError(f"the cell that computes {name} calls {', '.join(found)}: this exercise asks you to "
                             f"compute {name} without {'it' if len(found) == 1 else 'them'}")
    return f"correct so far: {name} is your own work (its cell calls none of {', '.join(forbid)})"
