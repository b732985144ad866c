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
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.errors import RuleError

__all__ = [
    "check_arity",
    "check_batch",
    "check_packed",
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
