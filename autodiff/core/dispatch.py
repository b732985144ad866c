"""Dispatch points: plum's multiple dispatch, resolved once per tuple of types.

A :class:`DispatchPoint` is a plum ``Function`` plus a table that we own:
the types of the dispatched arguments -> the method plum resolves for them.
``bind`` reads the table with one ``dict.get`` per call (plum's own call
costs several times that and its cache is private); a miss asks plum, through
its public ``resolve_method``, and fills the table.  Registering a method
clears the table, so a method added at any time (a user's transform, a new
kind of primitive) is seen by the next call.

Methods are registered next to what they are about, with the types spelled
out where they are registered::

    @process.register(GradInterpreter, CustomVJPPrimitive)
    def _grad_of_custom_vjp(interp, prim, args, params): ...

``dispatch`` (re-exported by ``autodiff.extend``) keeps the older spelling,
``@dispatch def process(interp: MyInterpreter, prim: Primitive, ...)``: it
registers by the function's name and reads the types from its annotations.

Only concrete classes are dispatched on, so that the type of a value decides
its method (plum calls such types *faithful*); anything else is refused at
registration.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import plum

__all__ = ["DispatchPoint", "dispatch"]


class DispatchPoint:
    """A function dispatched on the types of its first ``len(bases)`` arguments.

    ``default`` is its method for ``bases``, the most general types; ``rest``
    are the types of the remaining arguments, the same for every method
    (``process``'s ``args`` is a tuple and its ``params`` a dict).

    >>> describe = DispatchPoint("describe", lambda x: "something", (object,))
    >>> @describe.register(int)
    ... def _(x):
    ...     return "an int"
    >>> describe(3), describe(3.0), describe.resolve(bool) is _  # bool is an int
    ('an int', 'something', True)
    """

    __slots__ = ("_lock", "function", "name", "on", "rest", "table")

    def __init__(
        self, name: str, default: Callable, bases: tuple[type, ...], rest: tuple[type, ...] = ()
    ) -> None:
        self.function = plum.Function(default)
        self.name = name
        self.on = len(bases)
        self.rest = rest
        # (dispatched types) -> method; read by bind without a lock (a dict read is
        # atomic), written under the lock so a registration never races a fill.
        self.table: dict[tuple[type, ...], Callable] = {}
        self._lock = threading.Lock()
        self._add(default, plum.Signature(*bases, *rest))

    def register(self, *types: type) -> Callable[[Callable], Callable]:
        """Decorator: the method for arguments of these types (and subclasses)."""
        if len(types) != self.on:
            raise TypeError(
                f"{self.name}.register takes {self.on} types (one per dispatched "
                f"argument), got {len(types)}: {types}"
            )
        signature = plum.Signature(*types, *self.rest)
        self._check(signature, f"{self.name}.register{types}")

        def decorate(method: Callable) -> Callable:
            self._add(method, signature)
            return method

        return decorate

    def _check(self, signature: plum.Signature, what: str) -> None:
        concrete = all(t is Any or isinstance(t, type) for t in signature.types)
        if not concrete or not signature.is_faithful:
            raise TypeError(
                f"{what}: dispatch only on concrete classes (got {signature.types}); "
                f"parametric types, generic aliases and unions cannot be decided by the "
                f"type of a value, which is what the dispatch tables are keyed by."
            )

    def _add(self, method: Callable, signature: plum.Signature) -> None:
        with self._lock:
            self.function.register(method, signature=signature)
            self.table.clear()

    def resolve(self, *types: type) -> Callable:
        """The method for arguments of ``types`` (the dispatched ones), cached."""
        with self._lock:
            method = self.table.get(types)
            if method is None:
                impl, returns = self.function.resolve_method(plum.Signature(*types, *self.rest))
                # A method with a return annotation converts its result: plum's invoke
                # does that (slowly); without one the implementation is called as is.
                method = impl if returns is Any else self.function.invoke(*types, *self.rest)
                self.table[types] = method
            return method

    @property
    def methods(self) -> list:
        """The registered methods (plum's ``Method`` objects)."""
        return list(self.function.methods)

    def __call__(self, *args: Any) -> Any:
        key = tuple(type(a) for a in args[: self.on])
        method = self.table.get(key) or self.resolve(*key)
        return method(*args)

    def __repr__(self) -> str:
        return f"<dispatch point {self.name}: {len(self.methods)} method(s)>"


class _Dispatcher:
    """``@dispatch def lift(...)`` / ``def process(...)``: the spelling of
    ``autodiff.extend`` before dispatch points, kept for user transforms.  The
    function's name picks the dispatch point and its annotations the types."""

    def __init__(self) -> None:
        self.points: dict[str, DispatchPoint] = {}

    def __call__(self, method: Callable | None = None, *, precedence: int = 0) -> Any:
        if method is None:
            return functools.partial(self, precedence=precedence)
        point = self.points.get(method.__name__)
        if point is None:
            raise TypeError(
                f"@dispatch registers methods of {sorted(self.points)}, not "
                f"{method.__name__!r}; name the function after the dispatch point."
            )
        signature = plum.Signature.from_callable(method, precedence=precedence)
        point._check(signature, f"{point.name} method {method.__qualname__!r}")
        point._add(method, signature)
        return point


dispatch = _Dispatcher()
