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

plum (with beartype, which it imports) takes longer to import than the rest of the
package: it is imported at the first resolution, not at ``import autodiff``.  Until
then a dispatch point keeps its registrations, and hands them to plum then, in order.
"""

from __future__ import annotations

import abc
import functools
import threading
from collections.abc import Callable
from typing import Any

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

    __slots__ = ("_function", "_lock", "_registered", "default", "name", "on", "rest", "table")

    def __init__(
        self, name: str, default: Callable, bases: tuple[type, ...], rest: tuple[type, ...] = ()
    ) -> None:
        self.default = default
        self.name = name
        self.on = len(bases)
        self.rest = rest
        # (dispatched types) -> method; read by bind without a lock (a dict read is
        # atomic), written under the lock so a registration never races a fill.
        self.table: dict[tuple[type, ...], Callable] = {}
        self._lock = threading.Lock()
        # (method, all argument types, or a method whose annotations give them; precedence)
        self._registered: list[tuple[Callable, tuple | None, int]] = []
        self._function: Any = None  # plum's Function, made at the first resolution
        self._add(default, (*bases, *rest))

    def register(self, *types: type) -> Callable[[Callable], Callable]:
        """Decorator: the method for arguments of these types (and subclasses)."""
        if len(types) != self.on:
            raise TypeError(
                f"{self.name}.register takes {self.on} types (one per dispatched "
                f"argument), got {len(types)}: {types}"
            )
        signature = (*types, *self.rest)
        _check(signature, f"{self.name}.register{types}")

        def decorate(method: Callable) -> Callable:
            self._add(method, signature)
            return method

        return decorate

    def _add(self, method: Callable, types: tuple | None, precedence: int = 0) -> None:
        with self._lock:
            self._registered.append((method, types, precedence))
            if self._function is not None:
                _register(self._function, method, types, precedence)
            self.table.clear()

    @property
    def function(self) -> Any:
        """plum's ``Function`` holding the methods (made, with plum imported, on first use)."""
        if self._function is None:
            with self._lock:
                if self._function is None:
                    import plum

                    function = plum.Function(self.default)
                    for method, types, precedence in self._registered:
                        _register(function, method, types, precedence)
                    self._function = function
        return self._function

    def resolve(self, *types: type) -> Callable:
        """The method for arguments of ``types`` (the dispatched ones), cached."""
        function = self.function
        with self._lock:
            method = self.table.get(types)
            if method is None:
                import plum

                impl, returns = function.resolve_method(plum.Signature(*types, *self.rest))
                # A method with a return annotation converts its result: plum's invoke
                # does that (slowly); without one the implementation is called as is.
                method = impl if returns is Any else function.invoke(*types, *self.rest)
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
        return f"<dispatch point {self.name}: {len(self._registered)} method(s)>"


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
        import plum  # (the annotations are read with plum: this spelling imports it)

        signature = plum.Signature.from_callable(method, precedence=precedence)
        _check(signature.types, f"{point.name} method {method.__qualname__!r}")
        point._add(method, None, precedence)
        return point


def _check(types: tuple, what: str) -> None:
    """Concrete classes only, whose instance checks are the type's (plum's *faithful*:
    ``isinstance(x, t) == issubclass(type(x), t)``), or ``Any``."""
    if not all(t is Any or _faithful(t) for t in types):
        raise TypeError(
            f"{what}: dispatch only on concrete classes (got {types}); "
            f"parametric types, generic aliases and unions cannot be decided by the "
            f"type of a value, which is what the dispatch tables are keyed by."
        )


def _faithful(t: Any) -> bool:
    if not isinstance(t, type):
        return False
    if hasattr(t, "__faithful__"):
        return bool(t.__faithful__)
    return type(t).__instancecheck__ in (type.__instancecheck__, abc.ABCMeta.__instancecheck__)


def _register(function: Any, method: Callable, types: tuple | None, precedence: int) -> None:
    import plum

    if types is None:  # the method's annotations give its types
        signature = plum.Signature.from_callable(method, precedence=precedence)
    else:
        signature = plum.Signature(*types, precedence=precedence)
    function.register(method, signature=signature)


dispatch = _Dispatcher()
