"""What a function refers to: the values a transform may find through it.

``checkpoint`` looks through a function for closed-over traced values; ``vmap`` for the
random generators it draws from without taking them as arguments.  Both walk the same
references, one level at a time (:func:`refers_to`), each with its own bound.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import numpy as np

__all__ = ["global_names", "refers_to"]

_LEAVES = (str, bytes, int, float, complex, np.ndarray, type, types.ModuleType)


def refers_to(obj: Any) -> tuple:
    """What ``obj`` refers to, one level down: a function's closure cells, defaults and the
    globals its code names (modules aside), a ``functools.partial``'s function and
    arguments, a bound method's function and object, a container's items, a plain
    object's attributes; nothing for numbers, strings, arrays, classes and modules.

    >>> import numpy as np
    >>> scale = 2.0
    >>> def f(x, shift=1.0):
    ...     return np.sin(x) * scale + shift
    >>> refers_to(f)
    (1.0, 2.0)
    """
    if type(obj) is types.FunctionType:  # the commonest case first: the search is per call
        parts = _cells(obj.__closure__) if obj.__closure__ else []
        if obj.__defaults__:
            parts += obj.__defaults__
        if obj.__kwdefaults__:
            parts += obj.__kwdefaults__.values()
        scope = obj.__globals__
        for name in global_names(obj.__code__):
            if name in scope and not isinstance(value := scope[name], types.ModuleType):
                parts.append(value)
        return tuple(parts)
    if isinstance(obj, _LEAVES):
        return ()
    if isinstance(obj, (list, tuple, set, frozenset)):
        return tuple(obj)
    if isinstance(obj, dict):
        return tuple(obj.values())
    if isinstance(obj, functools.partial):
        return (obj.func, *obj.args, *obj.keywords.values())
    if isinstance(obj, types.MethodType):
        return (obj.__func__, obj.__self__)
    if hasattr(obj, "__dict__"):
        return tuple(vars(obj).values())
    return ()


# code object -> (it, its names): keyed by identity, since hashing a code object hashes
# its byte code and constants (~0.7 us, a third of a search step); the code is kept alive
# by its entry, so an identity is never reused while it stands.
_NAMES: dict[int, tuple[types.CodeType, tuple[str, ...]]] = {}


def global_names(code: types.CodeType) -> tuple[str, ...]:
    """The global and attribute names ``code`` reads, and the functions defined in it
    (kept per code object: a function made afresh at each call, a lambda, shares its
    code, and the search reads it at each call)."""
    entry = _NAMES.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += global_names(const)
    if len(_NAMES) >= 4096:  # code made at run time (exec, eval) without end: start again
        _NAMES.clear()
    found = _NAMES[id(code)] = (code, tuple(names))
    return found[1]


def _cells(closure: tuple) -> list:
    return [c.cell_contents for c in closure if _filled(c)]


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018  (an empty cell raises)
    except ValueError:
        return False
    return True
