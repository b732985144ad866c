"""Taylor mode: JetInterpreter, JetTensor, jet.

A JetTensor carries a primal value and a truncated Taylor series through it: the K
coefficients of ``x(t) = x0 + x1 t + x2 t^2 + ... + xK t^K``, *normalised* (``xk`` is
the k-th derivative along the path divided by k!), with ``None`` for a zero
coefficient.  Each primitive maps the series of its arguments to its result's with its
Taylor rule (``Primitive.taylor``: recurrences for elementwise functions, Leibniz's
rule for bilinear ones, the JVP rule term by term for linear ones; ``core/rule_forms.py``).

A primitive without one still works: its coefficients are derived from its JVP rule
(``taylor_from_jvp``).  ``y(t) = f(x(t))`` has ``y'(t) = jvp(f)(x(t); x'(t))``, so the
first K coefficients of ``y`` are those of the JVP rule pushed through Taylor mode of
order K-1 (``y_(k+1) = z_k / (k+1)``), which recurses down to the JVP rule itself at
order 1: exact, and polynomial in K, but slower than a rule; it warns once per
primitive.  ``custom_jvp`` functions and ``odeint`` use it on purpose (their JVP rule
is the one to respect), without a warning (``rule_forms.jvp_taylor``).

``jet`` is JAX's ``jax.experimental.jet`` (derivative-scaled coefficients by default).
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff.core.args import (
    a_type,
    as_input_array,
    as_output,
    check_callable,
    check_no_none,
    is_array,
    leaf_paths,
    number_as_array,
)
from autodiff.core.arrays import shape_of
from autodiff.core.primitive import (
    Interpreter,
    Primitive,
    current_interpreters,
    lift,
    new_interpreter,
    owned,
    process,
)
from autodiff.core.rule_forms import by_output, derivations
from autodiff.core.tracer import Tracer
from autodiff.errors import AutodiffWarning, TransformTypeError, TransformValueError
from autodiff.interpreters.batching import vmap
from autodiff.rules.creation import ones_like as _ones_like
from autodiff.rules.reductions import sum as _sum
from autodiff.rules.shape import reshape as _reshape

__all__ = [
    "JetInterpreter",
    "JetTensor",
    "jet",
    "jet_parts",
    "push_collapsed",
    "push_series",
    "taylor_rule",
]


class JetInterpreter(Interpreter):
    """Taylor mode of ``order``.  ``collapse`` (collapsed Taylor mode, Dangel et al.
    2025): the ``vmap`` over directions that batches coefficients 1..K-1, whose
    sum of the K-th coefficients (weighted by ``weights``, None: 1) is what is carried,
    unbatched; see ``_push_collapsed``."""

    __slots__ = ("collapse", "order", "weights")
    transform = "jet"

    def __init__(self, order: int, collapse: Any = None, weights: Any = None) -> None:
        super().__init__()
        self.order = order
        self.collapse = collapse
        self.weights = weights


class JetTensor(Tracer):
    """A value under Taylor mode: the primal and its K normalised coefficients."""

    __slots__ = ("primal", "series")

    def __init__(self, interp, primal, series) -> None:
        self._interp = interp
        self.primal = primal
        self.series = series  # a tuple of K coefficients, None where zero

    @property
    def _inner(self):
        return self.primal


@lift.register(JetInterpreter, object)
def _lift_jet(interp: JetInterpreter, x: Any):
    return JetTensor(interp, x, (None,) * interp.order)  # a constant: a zero series


def is_zero(series: Sequence) -> bool:
    return all(c is None for c in series)


def jet_parts(interp: JetInterpreter, x: Any) -> tuple[Any, Any]:
    """``x``'s primal and series under ``interp`` (None: a constant there)."""
    if isinstance(x, JetTensor) and x._interp is interp:
        return x.primal, x.series
    return x, None


@process.register(JetInterpreter, Primitive)
def _push(interp: JetInterpreter, prim: Primitive, args: tuple, params: dict):
    primals = tuple(a.primal for a in args)
    series = tuple(a.series for a in args)
    if not prim.differentiable or all(is_zero(s) for s in series):
        return prim.bind(*primals, **params)  # constants (or no derivative): a constant
    if prim.jvp is None and prim.vjp is None and prim.taylor is None:
        raise prim.missing("JVP", interp)
    if interp.collapse is not None:
        return _push_collapsed(interp, prim, primals, series, params)
    ans, out = taylor_rule(prim)(primals, series, **params)
    if prim.multiple_results:
        return tuple(_wrap(interp, a, s) for a, s in zip(ans, out))
    return _wrap(interp, ans, out)


def _wrap(interp: JetInterpreter, ans: Any, series: Any) -> Any:
    if series is None or is_zero(series):
        return ans
    if len(series) != interp.order:
        raise TransformValueError(
            f"jet: a Taylor rule returned {len(series)} coefficients where {interp.describe()} "
            f"carries {interp.order}"
        )
    return JetTensor(interp, ans, tuple(series))


# --- collapsed Taylor mode ----------------------------------------------------------------------
# For a sum over directions v_r of K-th directional derivatives (a Laplacian: K = 2, v_r
# the unit vectors), coefficients 1..K-1 differ per direction (they are batched by the
# vmap ``interp.collapse``), but the K-th enters each primitive's K-th coefficient
# linearly, through the JVP at the primal point: ``y_K = f'(x0) x_K + g(x0, x1..x_(K-1))``.
# So only the sum over directions of ``y_K`` is carried: the rule runs with ``x_K = 0``
# for ``g`` on the batched lower coefficients, whose sum over directions is taken at once,
# and the JVP maps the carried sum.  The forward Laplacian (Li et al. 2024) is this with
# K = 2.


def _push_collapsed(interp: JetInterpreter, prim: Primitive, primals: tuple, series: tuple,
                    params: dict):  # fmt: skip
    lower = tuple((*s[:-1], None) for s in series)
    tops = tuple(s[-1] for s in series)
    if all(is_zero(s) for s in lower):
        ans, out = prim.bind(*primals, **params), None
    else:
        rule = taylor_rule(prim)
        if getattr(rule, "elementwise", False) and len(primals) == 1:
            return _collapsed_elementwise(interp, rule, primals[0], series[0], params)
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
        top = _summed(interp, coefficients[-1])
        if moved is not None and moved[j] is not None:
            top = moved[j] if top is None else top + moved[j]
        coefficients[-1] = top
        wrapped.append(_wrap(interp, a, coefficients))
    return tuple(wrapped) if prim.multiple_results else wrapped[0]


def _collapsed_elementwise(interp: JetInterpreter, rule: Callable, x0: Any, series: tuple,
                           params: dict) -> Any:  # fmt: skip
    """An elementwise function of one argument in collapsed mode, by composition:
    ``f(x0 + d(t)) = sum_j c_j d(t)^j`` with ``c_j = f^(j)(x0) / j!`` from the rule along
    ``x0 + t`` (unbatched: no direction in it).  The powers of ``d`` need only the batched
    lower coefficients, and each one's top coefficient is summed over the directions
    before its ``c_j`` multiplies it: for a Laplacian (K = 2) the top is
    ``c_1 x_2 + c_2 sum_r (x_1^(r))^2``, two batched operations instead of the rule's
    half dozen."""
    order = interp.order
    ans, c = rule((x0,), ((_ones_like(x0), *(None,) * (order - 1)),), **params)
    c = [ans, *c]
    delta = [None, *series[:-1], None]  # d's coefficients 0..K (the top joins linearly)
    out = [_times(c[1], d) for d in delta[1:-1]]
    top = _times(c[1], series[-1])
    power = delta
    for j in range(2, order + 1):
        power = [_convolved(power, delta, k) for k in range(order + 1)]
        for k in range(j, order):
            out[k - 1] = _plus(out[k - 1], _times(c[j], power[k]))
        top = _plus(top, _times(c[j], _summed(interp, power[order])))
    return _wrap(interp, ans, [*out, top])


def _convolved(a: list, b: list, k: int) -> Any:
    """Coefficient ``k`` of the product of two series (None: zero)."""
    terms = [a[i] * b[k - i] for i in range(k + 1) if a[i] is not None and b[k - i] is not None]
    return None if not terms else functools.reduce(operator.add, terms)


def _times(c: Any, x: Any) -> Any:
    return None if c is None or x is None else c * x


def _plus(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def _summed(interp: JetInterpreter, value: Any) -> Any:
    """The (weighted) sum over the directions of a coefficient batched by them."""
    if value is None:
        return None
    directions = interp.collapse
    if isinstance(value, Tracer) and value._interp is directions:
        v, axis = value._inner, value.bdim  # type: ignore[attr-defined]
        if interp.weights is None:
            return _sum(v, axis=axis)
        w = _reshape(interp.weights, [-1 if i == axis else 1 for i in range(len(shape_of(v)))])
        return _sum(v * w, axis=axis)
    # the same in every direction
    return value * (directions.size if interp.weights is None else _sum(interp.weights))


# --- a primitive without a Taylor rule ----------------------------------------------------------

_warned: weakref.WeakSet[Primitive] = weakref.WeakSet()


def taylor_rule(prim: Primitive) -> Callable:
    """The primitive's Taylor rule, or (with a warning, once) the one derived from its
    JVP rule."""
    if prim.taylor is not None:
        return prim.taylor
    if prim not in _warned:
        _warned.add(prim)
        warnings.warn(
            f"primitive '{prim.name}' has no Taylor rule, so Taylor mode derives its "
            f"coefficients from its JVP rule (exact, but slower: order K pushes the JVP "
            f"rule through order K-1). Add one with the primitive's def_taylor(rule) (see "
            f"autodiff/rules/README.md).",
            AutodiffWarning,
            stacklevel=3,
        )
    return lambda primals, series, **params: taylor_from_jvp(prim, primals, series, params)


def taylor_from_jvp(prim: Primitive, primals: tuple, series: tuple, params: dict) -> tuple:
    """``prim``'s Taylor rule derived from its JVP rule (the module docstring says how)."""
    order = len(series[0])
    jvp = prim.jvp_rule()
    ans = prim.bind(*primals, **params)
    if order == 1:
        return ans, by_output(prim, [jvp(tuple(s[0] for s in series), ans, primals, params)])
    n = len(primals)
    moving = [i for i, s in enumerate(series) if not is_zero(s)]

    def derivative(*flat):  # z = f'(x) x', as a function of x and x'
        xs, tangents = flat[:n], [None] * n
        for i, t in zip(moving, flat[n:]):
            tangents[i] = t
        out = jvp(tuple(tangents), _derived_bind(prim, xs, params), xs, params)
        return out if prim.multiple_results else (out,)

    # x'(t) = x1 + 2 x2 t + 3 x3 t^2 + ...: order K-1
    velocity = [series[i][0] if series[i][0] is not None else np.zeros_like(primals[i])
                for i in moving]  # fmt: skip
    accelerations = [_derivative_series(series[i]) for i in moving]
    lower = [s[: order - 1] for s in series]
    z0, zs = push_series(derivative, [*primals, *velocity], [*lower, *accelerations], order - 1)
    out = []
    for first, rest in zip(z0, zs):  # y_(k+1) = z_k / (k+1)
        z = [first, *(rest or [None] * (order - 1))]
        out.append([None if c is None else c / (k + 1) for k, c in enumerate(z)])
    return ans, tuple(out) if prim.multiple_results else out[0]


def _derived_bind(prim: Primitive, xs: tuple, params: dict) -> Any:
    """``prim.bind(*xs)`` under the innermost Taylor mode, with coefficients derived from
    the JVP rule all the way down (never the primitive's own Taylor rule: what
    ``check_primitive`` compares that rule with must not use it)."""
    interp: Any = current_interpreters()[-1]
    if not any(isinstance(x, JetTensor) and x._interp is interp for x in xs):
        return prim.bind(*xs, **params)
    primals = tuple(x.primal if isinstance(x, JetTensor) and x._interp is interp else x
                    for x in xs)  # fmt: skip
    series = tuple(x.series if isinstance(x, JetTensor) and x._interp is interp
                   else (None,) * interp.order for x in xs)  # fmt: skip
    ans, out = taylor_from_jvp(prim, primals, series, params)
    if prim.multiple_results:
        return tuple(_wrap(interp, a, c) for a, c in zip(ans, out))
    return _wrap(interp, ans, out)


def _derivative_series(series: Sequence) -> tuple:
    """Coefficients 1..K-1 of ``x'(t)`` from ``x``'s 1..K: ``(k+1) x_(k+1)``."""
    return tuple(None if c is None else c * (k + 1) for k, c in enumerate(series[1:], start=1))


derivations["taylor_from_jvp"] = taylor_from_jvp


def push_series(fn: Callable, primals: Sequence, series: Sequence, order: int) -> tuple:
    """``fn(*primals)`` (a tuple of leaves, None for a zero) under Taylor mode of
    ``order``: (its outputs, their lists of normalised coefficients, None for a
    constant).  The primals may be tracers of other transforms; ``series`` holds a
    tuple of ``order`` coefficients per primal (None: zero)."""
    if order == 0:
        outs = fn(*primals)
        return list(outs), [None] * len(outs)
    interp = JetInterpreter(order)
    with new_interpreter(interp):
        ins = [p if is_zero(s) else JetTensor(interp, p, tuple(s)) for p, s in zip(primals, series)]
        outs = fn(*ins)
        primals_out, series_out = [], []
        for leaf in outs:
            mine = owned(interp, leaf)
            primals_out.append(leaf if mine is None else mine.primal)
            series_out.append(None if mine is None else list(mine.series))
    return primals_out, series_out


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
        interp = JetInterpreter(order, collapse=current_interpreters()[-1], weights=weights)
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

    return vmap(per_direction, out_dims=None)(*(directions[i] for i in moving))


# --- jet ----------------------------------------------------------------------------------------


def jet(fun: Callable, primals: Any, series: Any, factorial_scaled: bool = True):
    """Push a truncated Taylor series through ``fun`` (JAX's ``jax.experimental.jet``).

    ``primals`` has one entry per positional argument of ``fun``; ``series`` one list
    per primal of its K Taylor coefficients (each structured and shaped like the
    primal), K the same for all.  With ``factorial_scaled=True`` (the default, as in
    JAX) the path is ``x(t) = x0 + x1 t + x2 t^2/2! + ... + xK t^K/K!``: the k-th
    coefficient is the k-th derivative along it.  Returns ``(primal_out, series_out)``:
    ``fun(*primals)`` and, for each output leaf, the list of K coefficients of
    ``fun(x(t))`` (scaled alike), so ``series_out[k-1]`` is the k-th derivative of ``fun``
    along the path.  ``factorial_scaled=False`` takes and returns the plain Taylor
    coefficients (JAX's ``jet2``).

    Every primitive pushes the series with its Taylor rule (or one derived from its
    JVP rule); ``custom_jvp`` rules are respected; control flow and ``odeint`` pass
    series through; it composes with ``grad``, ``vmap`` and ``jit``.

    >>> import numpy as np
    >>> from autodiff import jet
    >>> y, (dy, ddy, dddy) = jet(np.sin, (0.5,), ((1.0, 0.0, 0.0),))
    >>> np.allclose([y, dy, ddy, dddy], [np.sin(.5), np.cos(.5), -np.sin(.5), -np.cos(.5)])
    True
    """
    check_callable(fun, "jet")
    if not isinstance(factorial_scaled, bool):
        raise TransformTypeError(
            f"jet: factorial_scaled must be True or False, got {factorial_scaled!r}"
        )
    flat_p, tree_p, terms, order = _checked(primals, series, factorial_scaled)
    interp = JetInterpreter(order)
    with new_interpreter(interp):
        ins = [JetTensor(interp, p, s) for p, s in zip(flat_p, terms)]
        out = fun(*optree.tree_unflatten(tree_p, ins))
        out_flat, out_tree = optree.tree_flatten(out)
        primals_out, series_out = [], []
        for i, leaf in enumerate(out_flat):
            mine = owned(interp, leaf)
            primal, coefficients = (leaf, None) if mine is None else (mine.primal, mine.series)
            primal = number_as_array(primal)
            if not is_array(primal):
                raise TransformTypeError(
                    f"jet: output {i} of fun is {a_type(primal)}, not an array."
                )
            primals_out.append(as_output(primal))
            coefficients = coefficients or (None,) * order
            series_out.append([
                as_output(np.zeros_like(primal) if c is None
                          else c * math.factorial(k) if factorial_scaled and k > 1 else c)
                for k, c in enumerate(coefficients, start=1)
            ])  # fmt: skip
    return optree.tree_unflatten(out_tree, primals_out), optree.tree_unflatten(out_tree, series_out)


def _checked(primals: Any, series: Any, factorial_scaled: bool) -> tuple:
    """The flat primals, their structure, each one's normalised coefficients, K."""
    for name, value in (("primals", primals), ("series", series)):
        if not isinstance(value, (tuple, list)):
            raise TransformTypeError(
                f"jet(fun, primals, series): {name} must be a tuple (or list) with one entry "
                f"per positional argument of fun, got {type(value).__name__}."
                + (
                    " For one argument write (x,)."
                    if name == "primals"
                    else " For one argument write ([x1, x2, ...],)."
                )
            )
    if len(series) != len(primals):
        raise TransformValueError(
            f"jet: series has {len(series)} entries but primals has {len(primals)}; give one "
            f"list of Taylor coefficients per primal."
        )
    for i, s in enumerate(series):
        if not isinstance(s, (tuple, list)):
            raise TransformTypeError(
                f"jet: series[{i}] is {a_type(s)}; each entry of series is a list of the "
                f"primal's Taylor coefficients, e.g. [x1, x2] for order 2."
            )
    orders = {len(s) for s in series}
    if len(orders) > 1:
        raise TransformValueError(
            f"jet: the series have different orders {sorted(orders)} (lengths of the lists in "
            f"series); give every primal the same number of coefficients, zeros where needed."
        )
    order = orders.pop() if orders else 0
    if order < 1:
        raise TransformValueError(
            "jet: the series hold no coefficients (order 0): give each primal a list of at "
            "least one Taylor coefficient."
        )
    check_no_none(primals, "jet", what="the primal for ")
    flat_p, tree_p = optree.tree_flatten(tuple(primals))
    paths = leaf_paths(tuple(primals))
    flat_p = [as_input_array(p, f"the primal for {path}", "jet", differentiable=True)
              for p, path in zip(flat_p, paths)]  # fmt: skip
    columns = []
    for k in range(order):
        column, tree = optree.tree_flatten(tuple(s[k] for s in series))
        if tree != tree_p:
            raise TransformValueError(
                f"jet: Taylor coefficient {k + 1} of the series is structured as {tree}, but "
                f"the primals as {tree_p}; each coefficient must match its primal."
            )
        columns.append(column)
    terms = []
    for j, (p, path) in enumerate(zip(flat_p, paths)):
        coefficients = []
        for k in range(order):
            c = as_input_array(columns[k][j], f"coefficient {k + 1} for {path}", "jet",
                               differentiable=True)  # fmt: skip
            if shape_of(c) != shape_of(p):
                raise TransformValueError(
                    f"jet: coefficient {k + 1} for {path} has shape {shape_of(c)} but its "
                    f"primal has shape {shape_of(p)}; each coefficient must match its primal."
                )
            if c.dtype != p.dtype:
                if c.dtype.kind == "c" and p.dtype.kind != "c":
                    raise TransformTypeError(
                        f"jet: coefficient {k + 1} for {path} is complex but its primal is real."
                    )
                c = c.astype(p.dtype)
            if type(c) is np.ndarray and not c.any():
                c = None  # a known zero: no work for it
            elif k > 0 and factorial_scaled:
                c = c / math.factorial(k + 1)
            coefficients.append(c)
        terms.append(tuple(coefficients))
    return flat_p, tree_p, terms, order
