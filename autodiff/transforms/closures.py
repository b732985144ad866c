"""Closed-over traced values of the functions a transform takes, made operands.

A solver or a custom rule runs the user's functions on values of its own: ``solve``
on the right-hand side a rule computed, a root-finder's ``f`` on the root, a
``custom_vjp``'s ``bwd`` during the backward pass, each under whatever transforms
run then.  A function that closes over a traced value (a matrix, a parameter of the
equation) must see, at each of those runs, that value as the transforms there see it:
its primal one level down, one example of it under ``vmap``, a staged value under
``jit``, a concrete array at the bottom.  So the traced values a function closes over
become operands of the primitive (every transform unwraps, slices or stages them like
any operand), and the primitive runs the function with each closed-over tracer
*standing in* for its operand's value there (``core.stack.standing_in``): closure
conversion without rewriting the function, so Python control flow and SciPy calls on
the values keep working.

``closed_over(*functions)`` finds the traced values: by searching what the functions
reach (closure cells, defaults, the globals their code names, bound objects,
``functools.partial`` arguments, containers and plain objects, a few levels deep) and,
for a function that can be staged, by staging it (exact: every traced value it uses).
A value the search misses raises ``LeakedTracerError`` where it is used, never mixes
levels silently.  ``Closure`` runs functions with stand-ins.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.reach import global_names, refers_to
from autodiff.core.stack import current_interpreters, standing_in
from autodiff.core.tracer import Tracer, stood_in

__all__ = ["Closure", "closed_over", "closure_of", "environment", "reaches_tracer"]

# How deep the search follows references from a function: a closure cell holding an
# object whose attribute is a dict of lists of arrays is four levels down.
DEPTH = 6


def closed_over(*objs: Any, depth: int = DEPTH) -> list[Tracer]:
    """The traced values reachable from ``objs`` (functions, objects, containers) that a
    transform could still compute with: live ones, and ones standing in for a value
    (``standing_in``); in the order found, each once."""
    found: dict[int, Tracer] = {}
    seen: set[int] = set()
    for obj in objs:
        kind = type(obj)
        if kind in _ATOM_TYPES:  # (numbers, arrays, None: no call for them)
            continue
        if kind is types.FunctionType and _reaches_atoms_only(obj):
            continue
        _search(obj, depth, found, seen)
    return list(found.values())


def _reaches_atoms_only(function: types.FunctionType) -> bool:
    """Whether ``function`` closes over nothing and its defaults and the globals its code
    names are all numbers, strings, arrays, modules or unbound: then the search would
    find nothing.  (A module-level function's common case, answered without the search's
    Python loop: it runs at each call of autograd's ``@primitive``.)"""
    if function.__closure__ is not None or function.__kwdefaults__:
        return False
    scope = function.__globals__
    kinds = set(map(type, map(scope.get, global_names(function.__code__))))
    if function.__defaults__:
        kinds.update(map(type, function.__defaults__))
    return kinds <= _ATOM_TYPES


def closure_of(*fns: Any) -> Closure:
    """The traced values ``fns`` close over, as a ``Closure`` (none where no transform
    runs: then there is none to find)."""
    return Closure(closed_over(*fns) if current_interpreters() else ())


def reaches_tracer(obj: Any, depth: int = 4) -> bool:
    """Whether ``obj`` reaches a traced value (see ``closed_over``)."""
    return bool(closed_over(obj, depth=depth))


def _search(obj: Any, depth: int, found: dict, seen: set) -> None:
    kind = type(obj)
    if kind in _ATOM_TYPES:  # (by exact type first: the search runs at every call)
        return
    if isinstance(obj, Tracer):
        if obj._interp.active or stood_in(obj) is not obj:
            found.setdefault(id(obj), obj)
        return
    if depth == 0 or id(obj) in seen or (kind not in _SEARCHED and isinstance(obj, _ATOMS)):
        return
    seen.add(id(obj))
    if kind is types.FunctionType:
        if _is_packages_own(obj):
            return
        parts = refers_to(obj)
    elif kind is list or kind is tuple:
        parts = obj
    else:
        parts = _parts(obj)
    for part in parts:
        if type(part) not in _ATOM_TYPES:
            _search(part, depth - 1, found, seen)


_ATOMS = (str, bytes, bool, int, float, complex, np.ndarray, np.generic, np.dtype, type,
          types.ModuleType, types.BuiltinFunctionType)  # fmt: skip
_ATOM_TYPES = frozenset({type(None), str, bytes, bool, int, float, complex, np.ndarray, type,
                         types.ModuleType, types.BuiltinFunctionType,
                         *np.sctypeDict.values()})  # fmt: skip


_SEARCHED = frozenset({types.FunctionType, list, tuple, dict})  # (no atom is one of these)


def _is_packages_own(function: types.FunctionType) -> bool:
    """Whether ``function`` is one of the package's own modules' and closes over nothing:
    it reaches only their globals and its defaults, which hold no traced value of a
    user's.  (The helpers autograd's ``@primitive`` wrapper names as globals were
    searched at every call: ~15 us of a ~340 us gradient.)  A closure made by the
    package (the wrapper itself) holds the user's functions, and is searched."""
    return function.__closure__ is None and function.__globals__.get("__name__", "").startswith(
        "autodiff."
    )


def _parts(obj: Any) -> tuple:
    """What ``obj`` refers to that a call of it may compute with (``core.reach``), and
    the slots of an object without a ``__dict__``."""
    if type(obj) is types.FunctionType:
        return refers_to(obj)
    slots = () if hasattr(obj, "__dict__") else getattr(type(obj), "__slots__", ())
    slots = (slots,) if isinstance(slots, str) else slots
    return refers_to(obj) + tuple(getattr(obj, s) for s in slots if hasattr(obj, s))


def environment(*objs: Any, depth: int = DEPTH) -> tuple[tuple, list]:
    """A hashable fingerprint of what ``objs`` (functions) compute with, as
    ``closed_over`` searches it: the code of each function, the values of numbers and
    strings, each plain array's content, each traced value's shape; and the objects the
    fingerprint names by identity (code, classes), to keep them alive.  Equal fingerprints
    mean a staged copy of the functions still computes what they do now (the arrays they
    read are captured by value when staged), though the functions were made afresh (a
    lambda per call); a rebound closure variable, a changed default, an array written in
    place change it."""
    found: list = []
    kept: list = []
    seen: set[int] = set()

    def visit(obj: Any, level: int) -> None:
        if isinstance(obj, np.ndarray):
            data = obj.tobytes() if obj.nbytes <= 1 << 20 else (id(obj), obj.ctypes.data)
            found.append(("array", obj.shape, obj.dtype.str, hash(data)))
            if obj.nbytes > 1 << 20:
                kept.append(obj)
            return
        if isinstance(obj, Tracer):
            found.append(("traced", tuple(obj.shape), str(obj.dtype)))
            return
        if obj is None or isinstance(obj, (str, bytes, bool, int, float, complex, np.generic)):
            found.append((type(obj).__name__, obj))
            return
        if isinstance(obj, (type, types.BuiltinFunctionType, types.CodeType)):
            kept.append(obj)
            found.append(("object", id(obj)))
            return
        if isinstance(obj, (types.ModuleType, np.dtype)):
            found.append(("module", str(getattr(obj, "__name__", obj))))
            return
        if level == 0 or id(obj) in seen:
            found.append(("deep", type(obj).__qualname__))
            return
        seen.add(id(obj))
        if isinstance(obj, types.FunctionType):
            kept.append(obj.__code__)
            found.append(("function", id(obj.__code__)))
        else:
            kept.append(type(obj))
            found.append(("of", id(type(obj))))
        parts = [x for kv in obj.items() for x in kv] if isinstance(obj, dict) else _parts(obj)
        for part in parts:
            visit(part, level - 1)
        found.append(("end",))

    for obj in objs:
        visit(obj, depth)
    return tuple(found), kept


class Closure:
    """The traced values some user functions close over (``tracers``: the primitive's
    last operands), and how to run those functions on other values of them."""

    __slots__ = ("tracers",)

    def __init__(self, tracers: Sequence[Tracer] = ()) -> None:
        self.tracers = list(tracers)

    def __len__(self) -> int:
        return len(self.tracers)

    def run(self, values: Sequence[Any], fn: Callable, *args: Any, isolated: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """``fn(*args, **kwargs)`` with the closed-over tracers standing for ``values``;
        where it returns one of them, it returns its value.  ``isolated``: ``fn`` computes
        on plain values (see ``standing_in``)."""
        if not self.tracers and not isolated:
            return fn(*args, **kwargs)
        with standing_in(self.tracers, values, isolated):
            out = fn(*args, **kwargs)
            return trees.tree_map(stood_in, out, none_is_leaf=True)

    def along(self, values: Sequence[Any], positions: Sequence[int], fn: Callable,
              *args: Any) -> Callable:  # fmt: skip
        """``fn(*args)`` as a function of the closed-over values at ``positions`` (the
        others held at ``values``), returning its output's leaves: what the rules
        differentiate to reach the closed-over values."""

        def selected(*chosen):
            full = list(values)
            for i, c in zip(positions, chosen):
                full[i] = c
            return tuple(trees.leaves(self.run(full, fn, *args)))

        return selected

    def bound(self, values: Sequence[Any], fn: Callable) -> Callable:
        """``fn`` with the closed-over tracers standing for ``values`` at each call."""
        if not self.tracers:
            return fn
        return functools.wraps(fn)(lambda *args, **kwargs: self.run(values, fn, *args, **kwargs))
