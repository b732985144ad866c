"""Primitives, interpreters, the level stack, and ``bind``.

A primitive call flows like this (see ``docs/architecture.md``)::

    prim.bind(*args, **params)
      -> find_top(args)            the highest-level live interpreter among the
                                   tracers in ``args`` (None: evaluate NumPy)
      -> lift(top, arg)            every other argument becomes a constant
                                   tracer of ``top`` (plum-dispatched)
      -> process(top, prim, ...)   the interpreter applies the primitive's rule
                                   for its transform (plum-dispatched); the rule
                                   calls primitives again on lower-level values,
                                   so each call peels exactly one interpreter.

``find_top`` is the only place levels are compared.  This module knows no
primitive and no transform: those register themselves through ``Primitive``,
``lift`` and ``process``.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from plum import Dispatcher

from autodiff._tracer import Tracer, leaked_error
from autodiff._validate import check_arity
from autodiff.errors import MissingRuleError

__all__ = [
    "Interpreter",
    "Primitive",
    "current_interpreters",
    "dispatch",
    "find_top",
    "lift",
    "new_interpreter",
    "process",
]

# One dispatcher for the whole package: plum merges same-named functions
# registered from different modules (``process`` in _reverse, _forward, ...).
dispatch = Dispatcher()

# Level tokens: unique per transform *call*, increasing with time.  Within one
# thread's stack a later (inner) interpreter therefore has a larger level, and
# two sibling calls at the same depth never share one.
_level_counter = itertools.count(1)

# The stack of live interpreters, innermost last.  A tuple (immutable) in a
# ContextVar, so threads and asyncio tasks each see their own stack.
_stack: contextvars.ContextVar[tuple[Interpreter, ...]] = contextvars.ContextVar(
    "autodiff_interpreters", default=()
)


class Interpreter:
    """One running transform: a level on the stack and the tracers it owns.

    Subclasses set ``transform`` (the user-facing name, for messages) and
    ``tracer_class``, and register ``lift`` and ``process`` methods for
    themselves with ``@dispatch``.  This is the extension point for new
    transforms.
    """

    __slots__ = ("__weakref__", "active", "level")
    transform = "transform"
    tracer_class: type[Tracer] = Tracer
    # False: ``process`` receives other arguments unlifted and treats them as
    # constants itself (reverse mode does, to save a dispatch per constant).
    lifts = True

    def __init__(self) -> None:
        self.level = next(_level_counter)
        self.active = False

    def describe(self) -> str:
        return f"{self.transform} (level {self.level})"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} level={self.level} active={self.active}>"


def current_interpreters() -> tuple[Interpreter, ...]:
    """The live interpreters of this thread/task, outermost first."""
    return _stack.get()


@contextlib.contextmanager
def new_interpreter(interp: Interpreter) -> Iterator[Interpreter]:
    """Push ``interp`` for the duration of one transform call.

    The interpreter is marked inactive on exit, also on exceptions: any of its
    tracers that escaped are then detected as leaked on their next use.
    """
    previous = _stack.get()
    _stack.set((*previous, interp))
    interp.active = True
    try:
        yield interp
    finally:
        interp.active = False
        _stack.set(previous)


def find_top(args: Sequence[Any]) -> Interpreter | None:
    """The highest-level interpreter owning a tracer in ``args``, or None.

    Raises ``LeakedTracerError`` for a tracer whose transform has ended.
    """
    top = None
    for arg in args:
        if isinstance(arg, Tracer):
            interp = arg._interp
            if not interp.active:
                raise leaked_error(arg)
            if top is None or interp.level > top.level:
                top = interp
    return top


# --- rules ------------------------------------------------------------------
#
# Internally every primitive carries its rules in one normalised form:
#   vjp(ct, ans, primals, params, argnums) -> list of cotangents, one per argnum
#   jvp(tangents, ans, primals, params)    -> output tangent (tangents: None = 0)
#   batch(args, dims, **params)            -> (out, out_dim)
# Primitive() accepts the friendlier per-argument forms and converts them.


def _per_argument_vjp(rules: Sequence[Callable | None]) -> Callable:
    def vjp(ct, ans, primals, params, argnums):
        if len(argnums) == 1:  # the common case, without the list comprehension
            rule = rules[argnums[0]]
            return [None if rule is None else rule(ct, ans, *primals, **params)]
        return [
            None if rules[i] is None else rules[i](ct, ans, *primals, **params) for i in argnums
        ]

    vjp.rules = tuple(rules)  # type: ignore[attr-defined]  # backward calls them directly
    return vjp


def _whole_vjp(rule: Callable) -> Callable:
    def vjp(ct, ans, primals, params, argnums):
        cts = rule(ct, ans, *primals, **params)
        return [cts[i] for i in argnums]

    return vjp


def _per_argument_jvp(rules: Sequence[Callable | None]) -> Callable:
    def jvp(tangents, ans, primals, params):
        out = None
        for rule, t in zip(rules, tangents):
            if t is not None and rule is not None:
                term = rule(t, ans, *primals, **params)
                out = term if out is None else out + term
        return out

    return jvp


def _whole_jvp(rule: Callable) -> Callable:
    def jvp(tangents, ans, primals, params):
        # np.zeros_like dispatches on the primal's type (tracer, CuPy, Dask...).
        tangents = [np.zeros_like(p) if t is None else t for t, p in zip(tangents, primals)]
        return rule(tangents, ans, *primals, **params)

    return jvp


def _normalize_reads(name: str, reads: Any) -> tuple[frozenset, ...] | None:
    if reads is None:
        return None
    out = tuple(frozenset(r) for r in reads)
    for r in out:
        if not all(x == "ans" or isinstance(x, int) for x in r):
            raise TypeError(
                f"primitive '{name}': vjp_reads takes, per argument, the positions of the "
                f"primals its VJP rule reads and/or 'ans', e.g. [(1,), (0,)] for multiply; "
                f"got {reads!r}"
            )
    return out


class Primitive:
    """A named operation with a NumPy implementation and one rule per transform.

    Rules are written with primitives, so they are themselves differentiable
    and batchable.  Positional arguments are arrays; static parameters are
    keyword-only and reach ``impl`` and every rule as keywords.

    vjp
        Either one function ``vjp(ct, ans, *primals, **params)`` returning one
        cotangent per positional argument (None for zero), or a sequence with
        one function ``vjp_i(ct, ans, *primals, **params)`` per argument (None
        for an argument that is not differentiable); per-argument rules only
        run for arguments that need a cotangent.
    jvp
        Either ``jvp(tangents, ans, *primals, **params)`` with zero tangents
        filled in, or a sequence of ``jvp_i(t_i, ans, *primals, **params)``
        whose results are summed over the non-zero tangents.
    batch
        ``batch(args, dims, **params) -> (out, out_dim)``: ``args`` are the
        unwrapped values, ``dims`` their batch axes (None: not batched).
    differentiable
        False for primitives whose outputs carry no derivative (comparisons,
        ``argmax``, ``stop_gradient``): transforms then skip vjp/jvp.
    vjp_reads
        Optional, for memory: per argument, what its VJP rule reads besides
        the cotangent and shapes/dtypes: primal positions and/or ``"ans"``
        (``[(1,), (0,)]`` for ``multiply``, ``[("ans",)]`` for ``tanh``,
        ``[(), ()]`` for ``add``).  The tape then keeps only those residuals.
        None (the default) keeps everything.
    multiple_results
        True if ``impl`` returns a tuple of arrays.  Cotangents and tangents are
        then tuples too (zeros filled in), the JVP rule is one function, and
        the batching rule returns a tuple of batch axes.

    >>> import numpy as np
    >>> from autodiff._core import Primitive
    >>> cube_p = Primitive("cube", lambda x: x**3, vjp=[lambda ct, ans, x: ct * 3 * x**2])
    >>> float(cube_p.bind(2.0))
    8.0
    """

    __slots__ = (
        "__weakref__",
        "batch",
        "differentiable",
        "impl",
        "jvp",
        "multiple_results",
        "name",
        "vjp",
        "vjp_reads",
    )

    def __init__(
        self,
        name: str,
        impl: Callable,
        *,
        vjp: Callable | Sequence[Callable | None] | None = None,
        jvp: Callable | Sequence[Callable | None] | None = None,
        batch: Callable | None = None,
        differentiable: bool = True,
        multiple_results: bool = False,
        vjp_reads: Sequence[Sequence[int | str]] | None = None,
    ) -> None:
        self.name = name
        self.vjp_reads = _normalize_reads(name, vjp_reads)
        self.impl = impl
        self.differentiable = differentiable
        self.multiple_results = multiple_results
        self.vjp: Callable | None = None
        self.jvp: Callable | None = None
        self.batch: Callable | None = None
        if vjp is not None:
            self.def_vjp(vjp)
        if jvp is not None:
            self.def_jvp(jvp)
        if batch is not None:
            self.def_batch(batch)

    def def_vjp(self, rule: Callable | Sequence[Callable | None]) -> Any:
        check_arity(self, "VJP", rule)
        if isinstance(rule, (list, tuple)):
            self.vjp = _per_argument_vjp(rule)
        else:
            self.vjp = _whole_vjp(rule)  # type: ignore[arg-type]
        return rule

    def def_jvp(self, rule: Callable | Sequence[Callable | None]) -> Any:
        check_arity(self, "JVP", rule)
        if isinstance(rule, (list, tuple)):
            if self.multiple_results:
                raise TypeError(
                    f"primitive '{self.name}' has multiple results: give its JVP as one "
                    f"function jvp(tangents, ans, *primals) returning a tuple"
                )
            self.jvp = _per_argument_jvp(rule)
        else:
            self.jvp = _whole_jvp(rule)  # type: ignore[arg-type]
        return rule

    def def_batch(self, rule: Callable) -> Callable:
        self.batch = rule
        return rule

    def bind(self, *args: Any, **params: Any) -> Any:
        # The hot path of the library, so find_top is inlined: with no tracer
        # among the arguments this is a type check per argument and a call.
        top = None
        for arg in args:
            if isinstance(arg, Tracer):
                interp = arg._interp
                if interp is not top:
                    if not interp.active:
                        raise leaked_error(arg)
                    if top is None or interp.level > top.level:
                        top = interp
        if top is None:
            return self.impl(*args, **params)
        if not top.lifts:
            return _process(top, self, args, params)
        for arg in args:
            if not isinstance(arg, Tracer) or arg._interp is not top:
                args = tuple(
                    [
                        a if isinstance(a, Tracer) and a._interp is top else _lift(top, a)
                        for a in args
                    ]
                )
                break
        return _process(top, self, args, params)

    def missing(self, rule: str, interp: Interpreter) -> MissingRuleError:
        """The error for a missing derivative rule (``"VJP"`` or ``"JVP"``): either
        one would do, since each is derived from the other when absent."""
        other = "JVP" if rule == "VJP" else "VJP"
        return MissingRuleError(
            f"primitive '{self.name}' has no {rule} rule (nor a {other} rule to transpose "
            f"into one), which {interp.describe()} needs. Add one with "
            f"{self.name}_p.def_{rule.lower()}(...) (see autodiff/rules/README.md), or "
            f"declare it with differentiable=False if it has no derivative."
        )

    def __repr__(self) -> str:
        return f"Primitive({self.name!r})"


# --- the two dispatch points -------------------------------------------------
# Each transform registers methods for its own interpreter class; special kinds
# of primitive (custom rules, randomness) register more specific ones.


@dispatch
def lift(interp: Interpreter, x: object):
    """Wrap ``x`` (a constant or a lower-level tracer) as a tracer of ``interp``."""
    raise NotImplementedError(f"{type(interp).__name__} registers no lift method")


@dispatch
def process(interp: Interpreter, prim: Primitive, args: tuple, params: dict):
    """Apply ``prim`` to ``args`` (tracers of ``interp``) under its transform."""
    raise NotImplementedError(f"{type(interp).__name__} registers no process method")


# plum's ``__call__`` costs about 0.45 µs; looking the resolved method up in
# plum's own cache costs about 0.1 µs, and ``bind`` makes one or two such calls
# per primitive.  plum clears that cache itself whenever a method is registered,
# so new methods are seen at once; anything unexpected (a pending registration,
# a cache miss, a return-type conversion, a plum version without these
# attributes) takes the ordinary call.
_plum_lift: Any = lift
_plum_process: Any = process
_lift_cache = getattr(lift, "_cache", None)
_process_cache = getattr(process, "_cache", None)


def _cached_lift(interp: Interpreter, x: Any) -> Any:
    if not _plum_lift._pending:
        entry = _lift_cache.get((type(interp), type(x)))  # type: ignore[union-attr]
        if entry is not None and entry[1] is Any:
            return entry[0](interp, x)
    return lift(interp, x)


def _cached_process(interp: Interpreter, prim: Primitive, args: tuple, params: dict) -> Any:
    if not _plum_process._pending:
        entry = _process_cache.get((type(interp), type(prim), tuple, dict))  # type: ignore[union-attr]
        if entry is not None and entry[1] is Any:
            return entry[0](interp, prim, args, params)
    return process(interp, prim, args, params)


_plum_cache_readable = all(
    isinstance(getattr(f, "_cache", None), dict) and hasattr(f, "_pending") for f in (lift, process)
)
_lift = _cached_lift if _plum_cache_readable else lift
_process = _cached_process if _plum_cache_readable else process
