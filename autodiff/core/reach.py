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
    if isinstance(obj, types.FunctionType):
        cells = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
        scope = obj.__globals__
        named = [scope[n] for n in global_names(obj.__code__) if n in scope]
        return (*cells, *(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values(),
                *(v for v in named if not isinstance(v, types.ModuleType)))  # fmt: skip
    if hasattr(obj, "__dict__"):
        return tuple(vars(obj).values())
    return ()


@functools.lru_cache(maxsize=4096)
def global_names(code: types.CodeType) -> tuple[str, ...]:
    """The global and attribute names ``code`` reads, and the functions defined in it
    (kept per code object: a function made afresh at each call, a lambda, shares its
    code, and the search reads it at each call)."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += global_names(const)
    return tuple(names)


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018  (an empty cell raises)
    except ValueError:
        return False
    return True
