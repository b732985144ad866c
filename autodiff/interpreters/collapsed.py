"""Collapsed Taylor mode (Dangel et al. 2025), the forward Laplacian (Li et al. 2024) with
it: ``push_collapsed`` and ``Collapse``, a mode of ``JetInterpreter``.

For a sum over directions ``v_r`` of K-th directional derivatives (a Laplacian: K = 2,
``v_r`` the unit vectors), coefficients 1..K-1 differ per direction, but the K-th enters
each primitive's K-th coefficient linearly, through the JVP at the primal point:
``y_K = f'(x0) x_K + g(x0, x_1..x_(K-1))``.  So only the weighted sum over directions of
``y_K`` is carried.  A ``vmap`` over the directions batches the lower coefficients; each
primitive's rule runs on them with ``x_K = 0``, and the ``g`` it gives is summed over
the directions at once, by unwrapping that ``vmap``'s tracers; the JVP maps the carried
sum.  Elementwise functions of one moving argument go by composition with their own
Taylor coefficients (``_elementwise``): for a Laplacian, two batched operations per
function; a product with one factor moving (``h @ W``) maps every coefficient through
itself (``_linear``).

The directions' ``vmap`` is the interpreter right below this one, so its batched
coefficients are plain values of the levels below it (NumPy arrays, or the tracers of
an outer ``grad``, ``vmap`` or ``jit``) with the directions on an axis.  Those two cases,
and elementwise functions of several moving arguments at order 2, work on those values
directly (``_plain``), the directions first: a product by the primitive's own batching
rule, a Laplacian's ``sum_r (x_1^(r))^2`` by one ``einsum`` on NumPy arrays (a product
and a sum otherwise), a function's derivatives from closed forms where its rule has
them (``rules/_taylor.py``).  The arithmetic of the interpreters' path, without the
``vmap``'s dispatch per operation, and in a staged graph (``jit``) the fewer operations
it records (``benchmarks/laplacian.py``).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.core.arrays import shape_of
from autodiff.core.primitive import Primitive, current_interpreters, new_interpreter, owned
from autodiff.core.tracer import Tracer
from autodiff.debug.nans import checking_nans
from autodiff.debug.rule_checks import checking
from autodiff.errors import TransformValueError
from autodiff.interpreters.batching import BatchedTensor, vmap
from autodiff.interpreters.taylor import JetInterpreter, JetTensor, is_zero, taylor_rule, wrap
from autodiff.rules._helpers import move_to_front
from autodiff.rules.creation import ones_like as _ones_like
from autodiff.rules.products import einsum as _einsum
from autodiff.rules.reductions import sum as _sum
from autodiff.rules.shape import reshape as _reshape

__all__ = ["Collapse", "push_collapsed"]


class Collapse:
    """What makes a ``JetInterpreter`` collapsed: the ``vmap`` over the directions
    (``directions``, its interpreter) and their weights (None: 1)."""

    __slots__ = ("directions", "weights")

    def __init__(self, directions: Any, weights: Any = None) -> None:
        self.directions, self.weights = directions, weights

    def push(self, interp: JetInterpreter, prim: Primitive, primals: tuple, series: tuple,
             params: dict) -> Any:  # fmt: skip
        """``prim`` on jets whose lower coefficients are batched by the directions."""
        lower = tuple((*s[:-1], None) for s in series)
        tops = tuple(s[-1] for s in series)
        if all(is_zero(s) for s in lower):
            ans, out = prim.bind(*primals, **params), None
        else:
            rule = taylor_rule(prim)
            moving = [i for i, s in enumerate(series) if not is_zero(s)]
            if len(moving) == 1 and not prim.multiple_results:
                i = moving[0]  # a function of one argument (the others constants)
                if getattr(rule, "elementwise", False):
                    return self._elementwise(interp, rule, primals, i, series, params)
                if getattr(rule, "form", None) == "multilinear" and i in (
                        getattr(rule, "linear_in", None) or range(len(primals))):  # fmt: skip
                    return self._linear(interp, prim, primals, i, series[i], params)
            elif (interp.order == 2 and not prim.multiple_results and (
                    getattr(rule, "elementwise", False) or hasattr(rule, "partials"))):  # fmt: skip
                plain = [self._plain(primals, series[i]) for i in moving]
                if all(p is not None for p in plain):
                    done = self._plain_several(interp, rule, primals, moving, plain, params)
                    if done is not None:
                        return done
            ans, out = rule(primals, lower, **params)
        outs = ans if prim.multiple_results else (ans,)
        if out is None:
            out = tuple([None] * interp.order for _ in outs)
        elif not prim.multiple_results:
            out = (out,)
        moved = None
        if any(t is not None for t in tops):
            moved = prim.jvp_rule()(tops, ans, primals, params)
            moved = moved if prim.multiple_results else (moved,)
        wrapped = []
        for j, (a, coefficients) in enumerate(zip(outs, out)):
            coefficients = list(coefficients or [None] * interp.order)
            top = self.summed(coefficients[-1])
            if moved is not None and moved[j] is not None:
                top = moved[j] if top is None else top + moved[j]
            coefficients[-1] = top
            wrapped.append(wrap(interp, a, coefficients))
        return tuple(wrapped) if prim.multiple_results else wrapped[0]

    def _linear(self, interp: JetInterpreter, prim: Primitive, primals: tuple, i: int,
                series: tuple, params: dict) -> Any:  # fmt: skip
        """A product with one factor moving (``h @ W``): linear in it, so every
        coefficient, the batched lower ones and the summed top, is the product itself."""
        args = list(primals)
        plain = self._plain(primals, series)
        batch = prim.batch
        if plain is not None and batch is not None:
            dims: list[int | None] = [None] * len(args)
            dims[i] = 0

            def batched(c: Any) -> Any:  # a batched coefficient by the batching rule itself
                args[i] = c
                out, out_dim = batch(args, dims, **params)
                return out if out_dim is None else BatchedTensor(self.directions, out, out_dim)

            out = [None if c is None else batched(c) for c in plain[:-1]]
            args[i] = series[-1]
            top = None if series[-1] is None else prim.bind(*args, **params)
            return wrap(interp, prim.bind(*primals, **params), [*out, top])

        def at(c: Any) -> Any:
            args[i] = c
            return None if c is None else prim.bind(*args, **params)

        return wrap(interp, prim.bind(*primals, **params), [at(c) for c in series])

    def _elementwise(self, interp: JetInterpreter, rule: Callable, primals: tuple, i: int,
                     series: tuple, params: dict) -> Any:  # fmt: skip
        """An elementwise function of argument ``i`` alone (the others constants), by
        composition:
        ``f(x0 + d(t)) = sum_j c_j d(t)^j`` with ``c_j = f^(j)(x0) / j!`` from the rule
        along ``x0 + t`` (unbatched: no direction in it).  The powers of ``d`` need only
        the batched lower coefficients, and each one's top coefficient is summed over the
        directions before its ``c_j`` multiplies it: for a Laplacian (K = 2) the top is
        ``c_1 x_2 + c_2 sum_r (x_1^(r))^2``, two batched operations instead of the rule's
        half dozen."""
        order = interp.order
        c = _closed_forms(rule, primals, i, params) if order == 2 else None
        if c is not None:
            ans = c[0]
        else:
            along = [(None,) * order] * len(primals)
            along[i] = (_ones_like(primals[i]), *(None,) * (order - 1))
            ans, c = rule(primals, tuple(along), **params)
            c = [ans, *c]
        series = series[i]
        plain = self._plain(primals, series)
        if plain is not None and shape_of(ans) == shape_of(primals[i]):
            return self._plain_elementwise(interp, ans, c, plain, series[-1])
        delta = [None, *series[:-1], None]  # d's coefficients 0..K (the top joins linearly)
        out = [_times(c[1], d) for d in delta[1:-1]]
        top = _times(c[1], series[-1])
        power = delta
        for j in range(2, order + 1):
            power = [_convolved(power, delta, k) for k in range(order + 1)]
            for k in range(j, order):
                out[k - 1] = _plus(out[k - 1], _times(c[j], power[k]))
            top = _plus(top, _times(c[j], self.summed(power[order])))
        return wrap(interp, ans, [*out, top])

    def _plain(self, primals: tuple, series: tuple) -> list | None:
        """``series`` unwrapped from the directions' ``vmap``: each batched coefficient's
        value with the directions first, the top as it is; None where a value is not of
        the levels below that ``vmap`` (a primal batched by the directions), or where a
        debugging check would look at each operation under it."""
        if checking.get() or checking_nans():
            return None
        level = self.directions.level
        if (not all(_below(x, level) for x in primals) or not _below(series[-1], level)
                or not _below(self.weights, level)):  # fmt: skip
            return None
        out: list = []
        for c in series[:-1]:
            if c is None:
                out.append(None)
                continue
            if type(c) is not BatchedTensor or c._interp is not self.directions:
                return None
            value, bdim = c.value, c.bdim
            if bdim is None:
                return None
            if bdim != 0:
                value = np.moveaxis(value, bdim, 0) if _numpy(value) else move_to_front(value, bdim)
            out.append(value)
        return [*out, series[-1]]

    def _plain_elementwise(self, interp: JetInterpreter, ans: Any, c: list, plain: list,
                           top: Any) -> Any:  # fmt: skip
        """``_elementwise`` on the unwrapped values (``_plain``): the same sums, with each
        batched coefficient's directions on axis 0 (the function's coefficients ``c_j``, shaped
        like the argument, broadcast against the rest)."""
        order = interp.order
        delta = [None, *plain[:-1], None]
        out = [_times(c[1], d) for d in delta[1:-1]]
        top = _times(c[1], top)
        power = delta
        for j in range(2, order + 1):
            if j == 2 and order == 2:  # a Laplacian's: sum_r w_r (x_1^(r))^2, one pass
                if c[2] is not None:
                    top = _plus(top, _times(c[2], self._sum_of_squares(delta[1])))
                break
            power = [_convolved(power, delta, k) for k in range(order + 1)]
            for k in range(j, order):
                out[k - 1] = _plus(out[k - 1], _times(c[j], power[k]))
            top = _plus(top, _times(c[j], self._plain_summed(power[order])))
        batched = [None if x is None else BatchedTensor(self.directions, x, 0) for x in out]
        return wrap(interp, ans, [*batched, top])

    def _plain_several(self, interp: JetInterpreter, rule: Callable, primals: tuple,
                       moving: list, plain: list, params: dict) -> Any:  # fmt: skip
        """A Laplacian's step (order 2) through an elementwise function of several moving
        arguments, on the unwrapped values (``_plain``), from its derivatives at ``x0``:
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
            square = self._sum_of_products(plain[0][0], plain[0][0])
            y1 = _times(_plus(first[i], first[j]), plain[0][0])
            top = _plus(_times(first[i], plain[0][-1]), _times(first[j], plain[1][-1]))
            if not closed:
                mixed = _minus(_minus(along(i, j)[1][1], half[i]), half[j])
            top = _plus(top, _times(_plus(_plus(half[i], half[j]), mixed), square))
            batched = None if y1 is None else BatchedTensor(self.directions, y1, 0)
            return wrap(interp, ans, [batched, top])
        y1, top = None, None
        for i, (*lower, t) in zip(moving, plain):
            y1 = _plus(y1, _times(first[i], lower[0]))
            top = _plus(top, _times(first[i], t))
            if half[i] is not None:
                top = _plus(top, _times(half[i], self._sum_of_products(lower[0], lower[0])))
        for a, i in enumerate(moving):
            for b in range(a + 1, len(moving)):
                j = moving[b]
                if not closed:  # f_ij by polarisation
                    mixed = _minus(_minus(along(i, j)[1][1], half[i]), half[j])
                if mixed is not None:
                    top = _plus(top, _times(mixed, self._sum_of_products(plain[a][0], plain[b][0])))
        batched = None if y1 is None else BatchedTensor(self.directions, y1, 0)
        return wrap(interp, ans, [batched, top])

    def _sum_of_squares(self, x: Any) -> Any:
        """``sum_r w_r x[r]^2`` of a batched NumPy coefficient (None: zero)."""
        return self._sum_of_products(x, x)

    def _sum_of_products(self, x: Any, y: Any) -> Any:
        """``sum_r w_r x[r] y[r]`` of two batched NumPy coefficients (None: zero)."""
        if x is None or y is None:
            return None
        w = self.weights
        einsum = np.einsum if _numpy(x) and _numpy(y) and (w is None or _numpy(w)) else _einsum
        if w is None:  # one pass, no temporary (staged: one operation)
            return einsum("r...,r...->...", x, y)
        return einsum("r,r...,r...->...", w, x, y)

    def _plain_summed(self, x: Any) -> Any:
        """``sum_r w_r x[r]`` of a batched NumPy coefficient (None: zero)."""
        if x is None:
            return None
        w = self.weights
        if w is None:
            return _sum(x, axis=0)
        return _sum(x * _reshape(w, [-1, *[1] * (len(shape_of(x)) - 1)]), axis=0)

    def summed(self, value: Any) -> Any:
        """The (weighted) sum over the directions of a coefficient batched by them."""
        if value is None:
            return None
        if isinstance(value, Tracer) and value._interp is self.directions:
            v, axis = value._inner, value.bdim  # type: ignore[attr-defined]
            if self.weights is None:
                return _sum(v, axis=axis)
            w = _reshape(self.weights, [-1 if i == axis else 1 for i in range(len(shape_of(v)))])
            return _sum(v * w, axis=axis)
        # the same in every direction
        return value * (self.directions.size if self.weights is None else _sum(self.weights))


def _closed_forms(rule: Callable, primals: tuple, i: int, params: dict) -> list | None:
    """``[f(x0), f'(x0), f''(x0) / 2]`` along argument ``i`` from the rule's closed forms
    (``rules/_taylor.py``): its ``second`` (of argument 0, the others constants; None
    where it has none for these arguments) or a binary function's ``partials``."""
    if params:
        return None
    second, partials = getattr(rule, "second", None), getattr(rule, "partials", None)
    if second is not None and i == 0:
        got = second(*primals)
        return None if got is None else list(got)
    if partials is not None and len(primals) == 2:
        ans, first, (half_0, _, half_1) = partials(*primals)
        return [ans, first[i], (half_0, half_1)[i]]
    return None


def _below(x: Any, level: int) -> bool:
    """Whether ``x`` is a value of the levels below ``level`` (a constant, or a tracer of
    an outer transform): the directions' ``vmap`` would batch it as it is."""
    return not isinstance(x, Tracer) or x._interp.level < level


def _numpy(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def _convolved(a: list, b: list, k: int) -> Any:
    """Coefficient ``k`` of the product of two series (None: zero)."""
    terms = [a[i] * b[k - i] for i in range(k + 1) if a[i] is not None and b[k - i] is not None]
    return None if not terms else functools.reduce(operator.add, terms)


def _times(c: Any, x: Any) -> Any:
    return None if c is None or x is None else c * x


def _plus(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def _minus(a: Any, b: Any) -> Any:
    return a if b is None else (-b if a is None else a - b)


def push_collapsed(fn: Callable, primals: Sequence, directions: Sequence, order: int,
                   weights: Any = None) -> tuple:  # fmt: skip
    """``fn(*primals)`` (a tuple of leaves) and, per output leaf, ``sum_r w_r y_K^(r)``: the
    weighted sum over the directions ``v_r`` of the normalised coefficient ``K = order``
    of ``fn(x + v_r t)`` (``D^K fn[v_r, ..., v_r] / K!``), by collapsed Taylor mode.
    ``directions`` holds one array per primal with the directions along a leading axis
    (None: the primal does not move).  A zero is returned where an output does not
    depend on the directions."""
    if order < 2:
        raise TransformValueError(f"collapsed Taylor mode needs order >= 2, got {order}")
    moving = [i for i, v in enumerate(directions) if v is not None]

    def per_direction(*vs):
        interp = JetInterpreter(order, Collapse(current_interpreters()[-1], weights))
        ins = list(primals)
        with new_interpreter(interp):
            for i, v in zip(moving, vs):
                ins[i] = JetTensor(interp, primals[i], (v, *(None,) * (order - 1)))
            primals_out, tops = [], []
            for leaf in fn(*ins):
                mine = owned(interp, leaf)
                primal = leaf if mine is None else mine.primal
                top = None if mine is None else mine.series[-1]
                primals_out.append(primal)
                tops.append(np.zeros_like(primal) if top is None else top)
        return tuple(primals_out), tuple(tops)

    # The directions are not examples: a draw inside fn is one draw of the function
    # whose derivatives are summed, the same in every direction ("same"; under "error"
    # vmap would also search this fresh closure for generators at every call).
    return vmap(per_direction, out_dims=None, randomness="same")(*(directions[i] for i in moving))
