"""Collapsed Taylor mode on the directions' values: the steps ``Collapse`` takes without
the directions' ``vmap`` dispatching each operation, and the arithmetic of series both
paths share.

The directions' ``vmap`` is the interpreter right below collapsed Taylor mode, so its
batched coefficients are plain values of the levels below it (NumPy arrays, or the
tracers of an outer ``grad``, ``vmap`` or ``jit``) with the directions on an axis.
``unwrapped`` unwraps them, the directions first; on those values a product with one
factor moving goes by the primitive's own batching rule (``collapsed.py``), an
elementwise function of one moving argument by composition (``plain_elementwise``),
and one of several moving arguments at order 2 from its derivatives at the primal
point (``plain_several``): a Laplacian's ``sum_r (x_1^(r))^2`` is one ``einsum`` on
NumPy arrays (a product and a sum otherwise), a function's derivatives come from closed
forms where its rule has them (``rules/_taylor.py``).  The arithmetic of the
interpreters' path, without the ``vmap``'s dispatch per operation, and in a staged graph
(``jit``) the fewer operations it records (``benchmarks/laplacian.py``).

Each function takes the directions' ``vmap`` (``directions``, its interpreter) and
their weights (None: 1), ``Collapse``'s two fields.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core.arrays import shape_of
from autodiff.core.tracer import Tracer
from autodiff.debug import checking_nans
from autodiff.debug import rules_switch as checking
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.taylor import JetInterpreter, wrap
from autodiff.rules._helpers import move_to_front
from autodiff.rules.creation import ones_like as _ones_like
from autodiff.rules.products import einsum as _einsum
from autodiff.rules.reductions import sum as _sum
from autodiff.rules.shape import reshape as _reshape

__all__ = [
    "convolved",
    "minus",
    "plain_elementwise",
    "plain_several",
    "plus",
    "times",
    "unwrapped",
]


def unwrapped(directions: BatchInterpreter, weights: Any, primals: tuple,
              series: tuple) -> list | None:  # fmt: skip
    """``series`` unwrapped from the directions' ``vmap``: each batched coefficient's
    value with the directions first, the top as it is; None where a value is not of
    the levels below that ``vmap`` (a primal batched by the directions), or where a
    debugging check would look at each operation under it."""
    if checking.get() or checking_nans():
        return None
    level = directions.level
    if (not all(_below(x, level) for x in primals) or not _below(series[-1], level)
            or not _below(weights, level)):  # fmt: skip
        return None
    out: list = []
    for c in series[:-1]:
        if c is None:
            out.append(None)
            continue
        if type(c) is not BatchedTensor or c._interp is not directions:
            return None
        value, bdim = c.value, c.bdim
        if bdim is None:
            return None
        if bdim != 0:
            value = np.moveaxis(value, bdim, 0) if _numpy(value) else move_to_front(value, bdim)
        out.append(value)
    return [*out, series[-1]]


def plain_elementwise(interp: JetInterpreter, directions: BatchInterpreter, weights: Any,
                      ans: Any, c: list, plain: list, top: Any) -> Any:  # fmt: skip
    """``Collapse._elementwise`` on the unwrapped values (``unwrapped``): the same sums, with
    each batched coefficient's directions on axis 0 (the function's coefficients ``c_j``,
    shaped like the argument, broadcast against the rest)."""
    order = interp.order
    delta = [None, *plain[:-1], None]
    out = [times(c[1], d) for d in delta[1:-1]]
    top = times(c[1], top)
    power = delta
    for j in range(2, order + 1):
        if j == 2 and order == 2:  # a Laplacian's: sum_r w_r (x_1^(r))^2, one pass
            if c[2] is not None:
                top = plus(top, times(c[2], _sum_of_products(weights, delta[1], delta[1])))
            break
        power = [convolved(power, delta, k) for k in range(order + 1)]
        for k in range(j, order):
            out[k - 1] = plus(out[k - 1], times(c[j], power[k]))
        top = plus(top, times(c[j], _summed(weights, power[order])))
    batched = [None if x is None else BatchedTensor(directions, x, 0) for x in out]
    return wrap(interp, ans, [*batched, top])


def plain_several(interp: JetInterpreter, directions: BatchInterpreter, weights: Any,
                  rule: Callable, primals: tuple, moving: list, plain: list,
                  params: dict) -> Any:  # fmt: skip
    """A Laplacian's step (order 2) through an elementwise function of several moving
    arguments, on the unwrapped values (``unwrapped``), from its derivatives at ``x0``:
    ``y_1 = sum_i f_i a_i`` and the top ``sum_i f_i t_i + sum_r sum_ij f_ij a_i a_j / 2``
    (``a_i`` argument i's batched coefficient, ``t_i`` its top).  The derivatives:
    the rule's ``partials`` (closed forms of a binary function), or the rule itself
    along ``x0 + t e_i`` (``f_i``, ``f_ii / 2``) and ``x0 + t (e_i + e_j)`` (the mixed
    ``f_ij`` by polarisation).  None where an argument is broadcast (its shape not
    the result's): the general path takes it."""

    def along(*ones_at: int) -> tuple:
        series = [(None, None)] * len(primals)
        for i in ones_at:
            series[i] = (_ones_like(primals[i]), None)
        return rule(primals, tuple(series), **params)

    def sum_of_products(x: Any, y: Any) -> Any:
        return _sum_of_products(weights, x, y)

    partials = getattr(rule, "partials", None)
    closed = partials is not None and len(primals) == 2 and not params
    first: dict = {}
    half: dict = {}
    mixed = None
    if partials is not None and closed:  # the rule's closed forms (rules/_taylor.py)
        ans, (first[0], first[1]), (half[0], mixed, half[1]) = partials(*primals)
    else:
        for i in moving:
            ans, (first[i], half[i]) = along(i)
    shape = shape_of(ans)
    if any(shape_of(primals[i]) != shape for i in moving):
        return None
    if len(moving) == 2 and plain[0][0] is plain[1][0]:  # f(x, x) (x * x): one sum
        i, j = moving
        square = sum_of_products(plain[0][0], plain[0][0])
        y1 = times(plus(first[i], first[j]), plain[0][0])
        top = plus(times(first[i], plain[0][-1]), times(first[j], plain[1][-1]))
        if not closed:
            mixed = minus(minus(along(i, j)[1][1], half[i]), half[j])
        top = plus(top, times(plus(plus(half[i], half[j]), mixed), square))
        batched = None if y1 is None else BatchedTensor(directions, y1, 0)
        return wrap(interp, ans, [batched, top])
    y1, top = None, None
    for i, (*lower, t) in zip(moving, plain):
        y1 = plus(y1, times(first[i], lower[0]))
        top = plus(top, times(first[i], t))
        if half[i] is not None:
            top = plus(top, times(half[i], sum_of_products(lower[0], lower[0])))
    for a, i in enumerate(moving):
        for b in range(a + 1, len(moving)):
            j = moving[b]
            if not closed:  # f_ij by polarisation
                mixed = minus(minus(along(i, j)[1][1], half[i]), half[j])
            if mixed is not None:
                top = plus(top, times(mixed, sum_of_products(plain[a][0], plain[b][0])))
    batched = None if y1 is None else BatchedTensor(directions, y1, 0)
    return wrap(interp, ans, [batched, top])


def _sum_of_products(weights: Any, x: Any, y: Any) -> Any:
    """``sum_r w_r x[r] y[r]`` of two batched NumPy coefficients (None: zero)."""
    if x is None or y is None:
        return None
    w = weights
    einsum = np.einsum if _numpy(x) and _numpy(y) and (w is None or _numpy(w)) else _einsum
    if w is None:  # one pass, no temporary (staged: one operation)
        return einsum("r...,r...->...", x, y)
    return einsum("r,r...,r...->...", w, x, y)


def _summed(weights: Any, x: Any) -> Any:
    """``sum_r w_r x[r]`` of a batched NumPy coefficient (None: zero)."""
    if x is None:
        return None
    if weights is None:
        return _sum(x, axis=0)
    return _sum(x * _reshape(weights, [-1, *[1] * (len(shape_of(x)) - 1)]), axis=0)


def _below(x: Any, level: int) -> bool:
    """Whether ``x`` is a value of the levels below ``level`` (a constant, or a tracer of
    an outer transform): the directions' ``vmap`` would batch it as it is."""
    return not isinstance(x, Tracer) or x._interp.level < level


def _numpy(x: Any) -> bool:
    return isinstance(x, np.ndarray)


# --- the arithmetic of series, None a zero (both paths) -----------------------------------------


def convolved(a: list, b: list, k: int) -> Any:
    """Coefficient ``k`` of the product of two series (None: zero)."""
    terms = [a[i] * b[k - i] for i in range(k + 1) if a[i] is not None and b[k - i] is not None]
    return None if not terms else functools.reduce(operator.add, terms)


def times(c: Any, x: Any) -> Any:
    return None if c is None or x is None else c * x


def plus(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def minus(a: Any, b: Any) -> Any:
    return a if b is None else (-b if a is None else a - b)
