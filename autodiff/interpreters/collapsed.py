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
coefficients are plain values of the levels below it with the directions on an axis.
Those two cases, and elementwise functions of several moving arguments at order 2, work
on those values directly where they can (``collapsed_values.py``): the same arithmetic
without the ``vmap``'s dispatch per operation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.core.arrays import shape_of
from autodiff.core.primitive import Primitive
from autodiff.core.stack import current_interpreters, new_interpreter, owned
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformValueError
from autodiff.interpreters.batching import BatchedTensor, vmap
from autodiff.interpreters.collapsed_values import (
    convolved,
    plain_elementwise,
    plain_several,
    plus,
    times,
    unwrapped,
)
from autodiff.interpreters.taylor import JetInterpreter, JetTensor, is_zero, taylor_rule, wrap
from autodiff.rules.creation import ones_like as _ones_like
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
                plain = [
                    unwrapped(self.directions, self.weights, primals, series[i]) for i in moving
                ]
                if all(p is not None for p in plain):
                    done = plain_several(interp, self.directions, self.weights, rule, primals,
                                         moving, plain, params)  # fmt: skip
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
        plain = unwrapped(self.directions, self.weights, primals, series)
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
        plain = unwrapped(self.directions, self.weights, primals, series)
        if plain is not None and shape_of(ans) == shape_of(primals[i]):
            return plain_elementwise(interp, self.directions, self.weights, ans, c, plain,
                                     series[-1])  # fmt: skip
        delta = [None, *series[:-1], None]  # d's coefficients 0..K (the top joins linearly)
        out = [times(c[1], d) for d in delta[1:-1]]
        top = times(c[1], series[-1])
        power = delta
        for j in range(2, order + 1):
            power = [convolved(power, delta, k) for k in range(order + 1)]
            for k in range(j, order):
                out[k - 1] = plus(out[k - 1], times(c[j], power[k]))
            top = plus(top, times(c[j], self.summed(power[order])))
        return wrap(interp, ans, [*out, top])

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
