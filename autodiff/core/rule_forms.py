"""The one form of each rule that the transforms call.

Rule blocks declare VJP and JVP rules per argument or whole (see
``Primitive``); inside, every primitive carries them normalised to::

    vjp(ct, ans, primals, params, argnums) -> list of cotangents, one per argnum
    jvp(tangents, ans, primals, params)    -> output tangent (tangents: None = 0)

and ``vjp_reads`` to one frozenset of positions (and/or ``"ans"``) per argument.
A rule may be given in that form itself (``def_vjp(rule, packed=True)``): control
flow's, ``custom_vjp``'s and the solvers' rules read parameters recorded with the
call, and the positions that need a cotangent.  At registration each rule's arity is
checked against the implementation's (a packed rule's against its form).

A Taylor rule has one form, ``taylor(primals, series, **params) -> (ans, series_out)``
(``Primitive``'s docstring), and three makers here serve whole families:
``linear_taylor`` (each coefficient through the JVP rule: a linear function maps the
series term by term), ``multilinear_taylor`` (Leibniz's rule through the primitive
itself: a product's coefficients are the convolutions of its factors') and
``jvp_taylor`` (the JVP rule pushed through Taylor mode).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.errors import RuleError

__all__ = [
    "by_output",
    "check_arity",
    "check_batch",
    "check_packed",
    "check_taylor_arity",
    "derivations",
    "jvp_taylor",
    "linear_taylor",
    "multilinear_taylor",
    "normalize_reads",
    "normalized_jvp",
    "normalized_vjp",
]


def normalized_vjp(rule: Callable | Sequence[Callable | None]) -> Callable:
    if isinstance(rule, (list, tuple)):
        return _per_argument_vjp(rule)
    return _whole_vjp(rule)  # type: ignore[arg-type]


def normalized_jvp(prim: Any, rule: Callable | Sequence[Callable | None]) -> Callable:
    if not isinstance(rule, (list, tuple)):
        return _whole_jvp(rule)  # type: ignore[arg-type]
    if prim.multiple_results:
        raise TypeError(
            f"primitive '{prim.name}' has multiple results: give its JVP as one "
            f"function jvp(tangents, ans, *primals) returning a tuple"
        )
    return _per_argument_jvp(rule)


def _per_argument_vjp(rules: Sequence[Callable | None]) -> Callable:
    return _PerArgumentVJP(tuple(rules))


class _PerArgumentVJP:
    """Per-argument VJP rules as one packed rule.  The backward pass calls ``rules``
    directly; this object serves the checked and observed paths.  (An object, not a
    closure with the rules as an attribute: six objects per primitive at import, which
    the collector walks and a program's shutdown frees.)"""

    __slots__ = ("rules",)

    def __init__(self, rules: tuple) -> None:
        self.rules = rules

    def __call__(self, ct, ans, primals, params, argnums):
        rules = self.rules
        if len(argnums) == 1:  # the common case, without the list comprehension
            rule = rules[argnums[0]]
            return [None if rule is None else rule(ct, ans, *primals, **params)]
        return [
            None if rules[i] is None else rules[i](ct, ans, *primals, **params) for i in argnums
        ]


def _whole_vjp(rule: Callable) -> Callable:
    def vjp(ct, ans, primals, params, argnums):
        cts = rule(ct, ans, *primals, **params)
        return [cts[i] for i in argnums]

    return vjp


def _per_argument_jvp(rules: Sequence[Callable | None]) -> Callable:
    return _PerArgumentJVP(tuple(rules))


class _PerArgumentJVP:
    """Per-argument JVP rules as one packed rule: the sum of each rule's term for the
    non-zero tangents.  The forward interpreter calls ``rules`` directly, as the backward
    pass calls ``_PerArgumentVJP``'s; this object serves the checked and observed paths.
    (An object, not a closure over the rules: one object per primitive instead of three,
    which the collector walks and a program's shutdown frees.)"""

    __slots__ = ("rules",)

    def __init__(self, rules: tuple) -> None:
        self.rules = rules

    def __call__(self, tangents, ans, primals, params):
        rules = self.rules
        out = None
        for rule, t in zip(rules, tangents):
            if t is not None and rule is not None:
                term = rule(t, ans, *primals, **params)
                out = term if out is None else out + term
        return out


def _whole_jvp(rule: Callable) -> Callable:
    def jvp(tangents, ans, primals, params):
        # np.zeros_like dispatches on the primal's type (tracer, CuPy, Dask...).
        tangents = [np.zeros_like(p) if t is None else t for t, p in zip(tangents, primals)]
        return rule(tangents, ans, *primals, **params)

    return jvp


def normalize_reads(name: str, reads: Any) -> tuple[frozenset, ...] | None:
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


# Attributes that make a function's signature other than its code's (functools.wraps).
_SIGNED = {"__wrapped__", "__signature__"}


def _arity(fn: Callable) -> tuple[int, int] | None:
    """How many positional arguments ``fn`` takes: (required, at most), or None
    if that varies (``*args``) or cannot be read."""
    nin = getattr(fn, "nin", None)  # NumPy ufuncs
    if isinstance(nin, int):
        return nin, nin
    code = getattr(fn, "__code__", None)
    plain = type(fn) is types.FunctionType and not _SIGNED & vars(fn).keys()
    if plain and code is not None:
        # from the code object: a rule made per call (custom_vjp's) is checked in a
        # microsecond, where inspect.signature takes tens
        if code.co_flags & inspect.CO_VARARGS:
            return None
        return code.co_argcount - len(fn.__defaults__ or ()), code.co_argcount
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in parameters if p.kind in kinds]
    return sum(p.default is p.empty for p in positional), len(positional)


def check_arity(prim: Any, rule: str, rules: Any) -> None:
    """At registration: per-argument rules match the implementation's arguments,
    and every rule takes (cotangent or tangent, ans, *primals)."""
    arity = _arity(prim.impl)
    per_argument = isinstance(rules, (list, tuple))
    for fn in rules if per_argument else [rules]:
        if fn is not None and not callable(fn):
            raise _arity_error(prim, rule, f"is {type(fn).__name__}, not a function")
    if per_argument and arity is not None and not arity[0] <= len(rules) <= arity[1]:
        raise _arity_error(
            prim,
            rule,
            f"is given for {len(rules)} arguments, but the implementation takes {arity[0]}",
        )
    if not per_argument and arity is None:
        return
    nargs = len(rules) if per_argument else arity[0]  # type: ignore[index]
    for fn in rules if per_argument else [rules]:
        takes = None if fn is None else _arity(fn)
        if takes is not None and not takes[0] <= 2 + nargs <= takes[1]:
            first = "ct" if rule == "VJP" else ("t" if per_argument else "tangents")
            raise _arity_error(
                prim,
                rule,
                f"takes {takes[0]} positional arguments; it should take "
                f"({first}, ans, *primals): {2 + nargs}",
            )


# The packed forms (the module docstring): what each takes, positionally.
_PACKED = {"VJP": "(ct, ans, primals, params, argnums)", "JVP": "(tangents, ans, primals, params)"}


def check_packed(prim: Any, rule: str, fn: Any) -> None:
    """At registration: a rule given in the packed form is one function taking that
    form's arguments."""
    form = _PACKED[rule]
    if isinstance(fn, (list, tuple)) or not callable(fn):
        raise _arity_error(prim, rule, f"is packed, so one function {form}; got {fn!r:.60}")
    takes = _arity(fn)
    count = form.count(",") + 1
    if takes is not None and not takes[0] <= count <= takes[1]:
        raise _arity_error(prim, rule, f"is packed and takes {takes[0]} positional arguments; "
                                       f"it should take {form}: {count}")  # fmt: skip


def check_batch(prim: Any, fn: Any) -> None:
    """At registration: a batching rule is a function taking ``(args, dims)``."""
    takes = _arity(fn) if callable(fn) else (0, -1)
    if takes is not None and not takes[0] <= 2 <= takes[1]:
        got = "takes a different number of arguments" if callable(fn) else f"is {fn!r:.60}"
        raise RuleError(f"the batching rule of primitive '{prim.name}' {got}; it should be a "
                        f"function batch(args, dims, **params) -> (out, out_dims)")  # fmt: skip


def _arity_error(prim: Any, rule: str, message: str) -> RuleError:
    return RuleError(f"the {rule} rule of primitive '{prim.name}' {message}")


def check_taylor_arity(prim: Any, rule: Any) -> None:
    """At registration: a Taylor rule is callable as ``rule(primals, series, **params)``."""
    if not callable(rule):
        raise RuleError(f"the Taylor rule of primitive '{prim.name}' is {rule!r:.60}, not callable")
    takes = _arity(rule)
    if takes is not None and not takes[0] <= 2 <= takes[1]:
        raise _arity_error(
            prim,
            "Taylor",
            f"takes {takes[0]} positional arguments; it should take (primals, series): 2",
        )


# --- Taylor rules of whole families ------------------------------------------------------------


def by_output(prim: Any, coefficients: list) -> Any:
    """Coefficients per order (a tuple per output for ``multiple_results``) as a list
    per output."""
    if not prim.multiple_results:
        return coefficients
    n = next(len(c) for c in coefficients if c is not None)
    return tuple([None if c is None else c[j] for c in coefficients] for j in range(n))


# Taylor mode is an interpreter, a layer above the core: ``interpreters/taylor.py``
# installs here how a Taylor rule is derived from a JVP rule when it is imported.
derivations: dict[str, Callable] = {}


class _TaylorRule:
    """What the Taylor rules of whole families share: ``prim``, and the attributes
    collapsed Taylor mode reads from a rule besides calling it (``interpreters/
    collapsed.py``), set on it after it is made: ``elementwise`` (``rules/_helpers.py``),
    the closed forms ``partials`` (``rules/elementwise.py``) and ``second`` (``rules/
    README.md``).  Each is absent until set, as on a function, so ``getattr(rule,
    "partials", None)`` and ``hasattr`` read them as before.  ``form`` names the family.

    (Objects, not closures with attributes: one object per primitive instead of a
    function, its closure, cells and attribute dict, which the collector walks and a
    program's shutdown frees.)"""

    __slots__ = ("elementwise", "partials", "prim", "second")
    form: str

    def __init__(self, prim: Any) -> None:
        self.prim = prim


def jvp_taylor(prim: Any) -> Callable:
    """The Taylor rule derived from the primitive's JVP rule (``interpreters/taylor.py``
    says how): exact, slower than a rule of its own; for primitives whose JVP rule is the
    one to respect (``custom_jvp`` functions, ``odeint``) or whose derivative is itself
    a composition of primitives (an elementwise function with no recurrence).

    >>> import numpy as np, autodiff.numpy as anp
    >>> rule = jvp_taylor(anp.arctan.primitive)
    >>> ans, (d1, d2) = rule((0.0,), ((1.0, 0.0),))   # arctan(t) = t - t^3/3 + ...
    >>> float(ans), float(d1), float(d2)
    (0.0, 1.0, 0.0)
    """
    return _JVPTaylor(prim)


class _JVPTaylor(_TaylorRule):
    """``jvp_taylor``'s rule: the derivation Taylor mode installs, for ``prim``."""

    __slots__ = ()
    form = "jvp"

    def __call__(self, primals, series, **params):
        return derivations["taylor_from_jvp"](self.prim, primals, series, params)


def linear_taylor(prim: Any) -> Callable:
    """The Taylor rule of a primitive that is linear in its arguments jointly (``add``,
    ``reshape``, ``sum``, an FFT), or piecewise linear (``abs``, ``maximum``, ``where``,
    ``sort``): each coefficient is mapped by the JVP rule at the primal point, so
    ``f(x0 + x1 t + ...) = f(x0) + J x1 t + ...``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> rule = linear_taylor(anp.cumsum.primitive)
    >>> ans, out = rule((np.ones(3),), ((np.ones(3), None),), axis=0)
    >>> out[0], out[1]
    (array([1., 2., 3.]), None)
    """
    return _LinearTaylor(prim)


class _LinearTaylor(_TaylorRule):
    """``linear_taylor``'s rule: each coefficient through ``prim``'s JVP rule."""

    __slots__ = ()
    form = "linear"

    def __call__(self, primals, series, **params):
        prim = self.prim
        ans = prim.bind(*primals, **params)
        jvp = prim.jvp_rule()
        out: list = []
        for k in range(len(series[0]) if series else 0):
            terms = tuple(s[k] for s in series)
            out.append(None if all(t is None for t in terms) else jvp(terms, ans, primals, params))
        return ans, by_output(prim, out)


def multilinear_taylor(prim: Any, positions: Sequence[int] | None = None) -> Callable:
    """The Taylor rule of a primitive linear in each of the arguments at ``positions``
    separately (``multiply``, ``matmul``, ``einsum``, a convolution; by default every
    argument), by Leibniz's rule through the primitive itself: coefficient ``k`` of
    ``f(a, b)`` is ``sum_j f(a_j, b_(k-j))``.  Arguments elsewhere must be constants.

    >>> import numpy as np, autodiff.numpy as anp
    >>> rule = multilinear_taylor(anp.multiply.primitive)
    >>> ans, out = rule((2.0, 3.0), ((1.0, 0.0), (1.0, 0.0)))
    >>> float(ans), [float(c) for c in out]   # (2 + t)(3 + t) = 6 + 5t + t^2
    (6.0, [5.0, 1.0])
    """
    return _MultilinearTaylor(prim, positions)


class _MultilinearTaylor(_TaylorRule):
    """``multilinear_taylor``'s rule: Leibniz's rule through ``prim``, multilinear in
    the arguments at ``linear_in`` (None: every argument)."""

    __slots__ = ("linear_in",)
    form = "multilinear"

    def __init__(self, prim: Any, linear_in: Sequence[int] | None) -> None:
        self.prim = prim
        self.linear_in = linear_in

    def __call__(self, primals, series, **params):
        prim, positions = self.prim, self.linear_in
        where = range(len(primals)) if positions is None else positions
        for i, s in enumerate(series):
            if i not in where and any(c is not None for c in s):
                raise RuleError(
                    f"primitive '{prim.name}' is multilinear in its arguments at {tuple(where)}, "
                    f"but argument {i} carries a Taylor series; declare its Taylor rule "
                    f"another way (Primitive.def_taylor)"
                )
        ans = prim.bind(*primals, **params)
        # the coefficients of each multilinear argument, order 0 first (None: zero)
        coefficients = {i: (primals[i], *series[i]) for i in where}
        out: list = []
        for k in range(1, len(series[0]) + 1 if series else 1):
            term = None
            for degrees in _compositions(k, len(coefficients)):
                args = list(primals)
                for i, d in zip(coefficients, degrees):
                    args[i] = coefficients[i][d]
                if any(args[i] is None for i in coefficients):
                    continue
                value = prim.bind(*args, **params)
                term = value if term is None else term + value
            out.append(term)
        return ans, out


@functools.cache
def _compositions(k: int, n: int) -> list[tuple[int, ...]]:
    """Every way of writing ``k`` as an ordered sum of ``n`` non-negative integers."""
    return [c for c in itertools.product(range(k + 1), repeat=n) if sum(c) == k]
