"""A call's signature: what a staged program depends on, read off the arguments.

The signature of a call is the pytree structure of the arguments, each array's shape
and dtype (and its library, when it is not NumPy), which arguments are Python scalars
(weakly typed), the values of the static arguments, and the type of each
``numpy.random.Generator`` argument.  ``Arguments`` splits a call into static and traced
arguments (``static_argnums``, ``static_argnames``, checked against the function's
parameters); ``leaf_key`` is one traced leaf's part of the key, ``leaf_aval`` its abstract
value for staging, ``describe`` the signature as ``cache_info()`` and errors print it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.core.args import a_type
from autodiff.core.graph import OpaqueAval, ShapedArray, aval_of
from autodiff.core.stack import check_live
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.staging import StagedTensor

__all__ = ["Arguments", "describe", "leaf_aval", "leaf_key"]


def _positions(static: Any, what: str) -> tuple:
    items = (static,) if isinstance(static, (int, str)) else tuple(static)
    kind = str if what == "static_argnames" else int
    for item in items:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise TransformTypeError(
                f"jit(fun, {what}=...): {what} must be "
                f"{'a str or a tuple of strs' if kind is str else 'an int or a tuple of ints'}, "
                f"got {static!r:.60}."
            )
    return items


class Arguments:
    """How a function's arguments split into static and traced ones."""

    def __init__(self, fun: Callable, static_argnums: Any, static_argnames: Any) -> None:
        self.argnums = set(_positions(static_argnums, "static_argnums"))
        self.argnames = set(_positions(static_argnames, "static_argnames"))
        try:  # a static position is static when passed by name too, and vice versa
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            params = None
        if params is not None:
            check_static(params, self.argnums, self.argnames)
        params = params or []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                           p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
        for i in list(self.argnums):
            if -len(positional) <= i < len(positional):
                self.argnames.add(positional[i])
        for name in list(self.argnames):
            if name in positional:
                self.argnums.add(positional.index(name))
        self.any = bool(self.argnums or self.argnames)

    def split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple]:
        """(traced positional args, traced keyword args, static key)."""
        if not self.any:
            return args, kwargs, ()
        n = len(args)
        static_pos = {i % n for i in self.argnums if -n <= i < n}
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.argnames}
        statics = tuple((i, args[i]) for i in sorted(static_pos)) + tuple(
            sorted((k, v) for k, v in kwargs.items() if k in self.argnames)
        )
        key = []
        for where, value in statics:
            try:
                hash(value)
            except TypeError:
                what = f"argument {where}" if isinstance(where, int) else f"argument {where!r}"
                raise TransformTypeError(
                    f"jit: the static {what} is {a_type(value)}, which is not hashable; "
                    f"static arguments are part of the cache key, so they must be hashable "
                    f"(a tuple instead of a list, a frozen dataclass, ...). Pass arrays as "
                    f"traced (non-static) arguments."
                ) from None
            key.append((where, type(value), value))
        return dyn_args, dyn_kwargs, tuple(key)

    def merge(self, args: tuple, dyn_args: Sequence, dyn_kwargs: dict, kwargs: dict):
        if not self.any:
            return tuple(dyn_args), dyn_kwargs
        n = len(args)
        static_pos = {i % n for i in self.argnums if -n <= i < n}
        it = iter(dyn_args)
        full = tuple(args[i] if i in static_pos else next(it) for i in range(n))
        full_kwargs = {k: (v if k in self.argnames else dyn_kwargs[k]) for k, v in kwargs.items()}
        return full, full_kwargs


def check_static(params: list, argnums: set, argnames: set) -> None:
    """Static positions and names the function's signature cannot take raise, as JAX's
    do: silently ignored, they would leave the argument traced, and the error that
    follows would ask to mark static an argument the user did mark."""
    kinds = {p.kind for p in params}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        wrong = sorted(i for i in argnums if not -len(positional) <= i < len(positional))
        if wrong:
            raise TransformValueError(
                f"jit: static_argnums={tuple(sorted(argnums))} names position(s) {wrong}, but "
                f"the function takes {len(positional)} positional argument(s) "
                f"({', '.join(p.name for p in positional) or 'none'}); count from 0, or name "
                f"the argument in static_argnames."
            )
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        names = {p.name for p in params if p.kind != inspect.Parameter.POSITIONAL_ONLY}
        wrong = sorted(argnames - names)
        if wrong:
            raise TransformValueError(
                f"jit: static_argnames names {wrong}, which the function has no parameter "
                f"for (it takes {', '.join(p.name for p in params) or 'none'}); check the "
                f"spelling."
            )


_SCALARS = (bool, int, float, complex)


def leaf_key(leaf: Any, path: str) -> tuple[Any, bool]:
    """The part of the signature one argument leaf contributes, and whether it is a tracer."""
    cls = type(leaf)
    if cls is np.ndarray:
        return (leaf.shape, leaf.dtype), False
    if isinstance(leaf, Tracer):
        check_live(leaf)
        if isinstance(leaf, StagedTensor) and isinstance(leaf.aval, OpaqueAval):
            return leaf.aval.type, True
        return (tuple(leaf.shape), leaf.dtype), True
    if cls in _SCALARS:
        return cls, False
    if isinstance(leaf, np.generic):
        return (leaf.dtype, np.generic), False
    if isinstance(leaf, np.random.Generator):
        return cls, False
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype") and hasattr(cls, "__array_function__"):
        return (cls, tuple(leaf.shape), leaf.dtype), False
    raise TransformTypeError(
        f"jit: {path} is {a_type(leaf)}, which is neither an array nor a Python or NumPy "
        f"scalar, so it cannot be traced. Mark the argument static (jit(fun, "
        f"static_argnums=...) or static_argnames=...) if the program depends on its value, "
        f"or pass it through a closure."
    )


def describe(avals: Sequence[Any], statics: tuple, kind: str) -> str:
    """A signature as text: ``(f64[3], i64[] (Python scalar), 1=2 (static))``."""
    parts = []
    for a in avals:
        text = a.str_short()
        parts.append(text + (" (Python scalar)" if getattr(a, "weak_type", False) else ""))
    for where, _, value in statics:
        parts.append(f"{where}={value!r:.40} (static)")
    library = "" if kind == "numpy" else f" on {kind} arrays"
    return f"({', '.join(parts)}){library}"


def leaf_aval(leaf: Any) -> Any:
    """The abstract value a traced argument leaf is staged as."""
    if isinstance(leaf, StagedTensor):
        return leaf.aval  # a Generator argument staged by an outer jit stays opaque
    if isinstance(leaf, Tracer):
        return ShapedArray(leaf.shape, leaf.dtype)
    if isinstance(leaf, np.random.Generator):
        return OpaqueAval(type(leaf))
    return aval_of(leaf)
