"""Making library references unavailable while a student's code for a build-it runs (the ``"forbid"`` markup).

Copied into the sandbox beside ``driver.py``. ``forbidden(["tmlib.ref.softmax"])`` replaces the code of that function
(so every alias raises, however the student bound it), of a class's own methods, or of every function and class of
a package, with code that raises ``NotImplementedError("... write it yourself")``; a built-in function is replaced
where it is bound. Everything is restored when the block ends. It stops delegation, not copying: a student who
copies the library's source has written it out, and no grader can tell.
"""
from __future__ import annotations

import contextlib
import sys
import types


def _raising_code(n_free: int, message: str):
    """A code object that raises ``NotImplementedError(message)``, with ``n_free`` free variables (so that it can
    replace the ``__code__`` of any Python function, closures and ``super()`` methods included)."""
    names = [f"_free{i}" for i in range(n_free)]
    src = ["def _outer():", *(f"    {n} = None" for n in names), "    def _forbidden(*args, **kwargs):",
           f"        raise NotImplementedError({message!r})"]
    if names:
        src += ["        if False:", "            " + ", ".join(names)]
    src.append("    return _forbidden")
    scope: dict = {}
    exec("\n".join(src), scope)
    return scope["_outer"]().__code__


def _functions_of(obj) -> list:
    """The Python functions to disable for ``obj``: itself, a class's own methods, or every function and class
    defined in a package (a module given by name: ``"tmlib"``)."""
    if isinstance(obj, types.ModuleType):
        prefix, out = obj.__name__, []
        for name, module in list(sys.modules.items()):
            if module is None or not (name == prefix or name.startswith(prefix + ".")):
                continue
            for value in list(vars(module).values()):
                if getattr(value, "__module__", None) == name and (isinstance(value, type) or hasattr(value, "__code__")):
                    out += _functions_of(value)
        return out
    if isinstance(obj, type):
        return [f for f in vars(obj).values() if hasattr(f, "__code__")] + \
               [f.__func__ for f in vars(obj).values() if isinstance(f, (staticmethod, classmethod))]
    func = getattr(obj, "__func__", obj)  # a bound method: its function
    return [func] if hasattr(func, "__code__") else []


@contextlib.contextmanager
def forbidden(names, namespace: dict | None = None, exercise: str = "this exercise"):
    """Make the library references ``names`` (dotted) unavailable while the block runs: calling one raises
    ``NotImplementedError("... write it yourself")``.

    A Python function has its code replaced (so every alias raises: ``R.softmax``, ``from tmlib.ref import
    softmax``, a default argument); a class has its own methods' code replaced; a built-in (C) function is replaced
    in every loaded module and in ``namespace`` where it is bound. Everything is restored afterwards. A name that
    resolves to nothing is skipped (the exercise's markup is checked at build time). Names are resolved with
    ``tmlib.course.diagnostics.resolve_dotted``, as ``check_own_work`` resolves them.
    """
    saved_code, saved_attrs, targets = [], [], []
    if names:  # all resolved before any code is replaced (forbidding "tmlib" replaces resolve_dotted's too)
        from tmlib.course.diagnostics import resolve_dotted
        for dotted in names:
            try:
                targets.append((dotted, resolve_dotted(dotted)))
            except LookupError:
                continue
    try:
        for dotted, obj in targets:
            message = f"{dotted} is not available in {exercise}: write it yourself"
            funcs = _functions_of(obj)
            for func in funcs:
                if any(func is f for f, _ in saved_code):
                    continue
                saved_code.append((func, func.__code__))
                func.__code__ = _raising_code(len(func.__code__.co_freevars), message)
            if funcs:
                continue
            stand_in = _raising_function(message)
            holders = [m for m in list(sys.modules.values()) if m is not None]
            for holder in holders:
                for attr, value in list(getattr(holder, "__dict__", {}).items()):
                    if value is obj:
                        saved_attrs.append((holder.__dict__, attr, value))
                        holder.__dict__[attr] = stand_in
            for attr, value in list((namespace or {}).items()):
                if value is obj:
                    saved_attrs.append((namespace, attr, value))
                    namespace[attr] = stand_in
        yield
    finally:
        for func, code in reversed(saved_code):
            func.__code__ = code
        for holder, attr, value in reversed(saved_attrs):
            holder[attr] = value


def _raising_function(message: str):
    def forbidden_reference(*args, **kwargs):
        raise NotImplementedError(message)
    return forbidden_reference


def references(fn, names) -> list[str] | None:
    """Which of ``names`` the student's function ``fn`` refers to (``tmlib.course.diagnostics.forbidden_references``),
    or None when that cannot be told here."""
    try:
        from tmlib.course.diagnostics import forbidden_references
        return forbidden_references(fn, names)
    except Exception:  # noqa: BLE001 - no tmlib, or a function it cannot inspect
        return None
