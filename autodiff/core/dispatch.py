"""Dispatch points: plum's multiple dispatch, resolved once per tuple of types.

A :class:`DispatchPoint` is a plum ``Function`` plus a table that we own:
the types of the dispatched arguments -> the method plum resolves for them.
``bind`` reads the table with one ``dict.get`` per call (plum's own call
costs several times that and its cache is private); a miss fills the table with the
method plum would choose, found here where the choice is plain (one most specific
method, or one of highest precedence, no return annotation) and otherwise asked of
plum, through its public ``resolve_method``, which also raises for an ambiguity or a
missing method.  Registering a method
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
package: it is imported when first needed (a resolution that is not plain, the
``@dispatch`` spelling, ``methods``), which the package's own methods never need.
Until then a dispatch point keeps its registrations, and hands them to plum then, in
order.
"""

from __future__ import annotations

import abc
import functools
import inspect
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
        with self._lock:
            return self._plum_function()

    def _plum_function(self) -> Any:
        if self._function is None:  # (called with the lock held)
            import plum

            function = plum.Function(self.default)
            for method, types, precedence in self._registered:
                _register(function, method, types, precedence)
            self._function = function
        return self._function

    def resolve(self, *types: type) -> Callable:
        """The method for arguments of ``types`` (the dispatched ones), cached."""
        with self._lock:
            method = self.table.get(types)
            if method is None:
                method = self._most_specific(types) or self._resolve_with_plum(types)
                self.table[types] = method
            return method

    def _most_specific(self, types: tuple[type, ...]) -> Callable | None:
        """The method plum would choose, found without plum where that is plain: every
        method registered with its classes spelled out, exactly one most specific match
        (or one of highest precedence), and no return annotation.  Anything else (no
        match, an ambiguity, ``@dispatch``'s annotations) is plum's to decide or refuse.
        """
        methods: dict[tuple, tuple[Callable, int]] = {}
        for method, signature, precedence in self._registered:
            if signature is None or Any in signature:
                return None
            methods[signature] = (method, precedence)  # a later equal signature replaces
        target = (*types, *self.rest)
        matches = [s for s in methods if all(map(issubclass, target, s))]
        best = [s for s in matches if not any(_below(t, s) for t in matches)]
        if len(best) > 1:
            top = max(methods[s][1] for s in best)
            best = [s for s in best if methods[s][1] == top]
        if len(best) != 1:
            return None
        method = methods[best[0]][0]
        try:
            returns = inspect.signature(method).return_annotation
        except (TypeError, ValueError):  # (a callable inspect cannot read: plum's to judge)
            return None
        return method if returns is inspect.Parameter.empty else None

    def _resolve_with_plum(self, types: tuple[type, ...]) -> Callable:
        import plum

        function = self._plum_function()
        impl, returns = function.resolve_method(plum.Signature(*types, *self.rest))
        # A method with a return annotation converts its result: plum's invoke
        # does that (slowly); without one the implementation is called as is.
        return impl if returns is Any else function.invoke(*types, *self.rest)

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


def _below(a: tuple[type, ...], b: tuple[type, ...]) -> bool:
    """Signature ``a`` strictly more specific than ``b`` (plum's ``a < b`` on classes)."""
    return a != b and all(map(issubclass, a, b))


dispatch = _Dispatcher()
