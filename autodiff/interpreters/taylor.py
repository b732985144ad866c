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
Collapsed Taylor mode, a mode of this interpreter that carries only the sum over many
directions of the highest coefficient, is in ``collapsed.py``.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.args import (
    a_type,
    as_input_array,
    check_callable,
    check_no_none,
    is_array,
    leaf_paths,
    number_as_array,
)
from autodiff.core.arrays import shape_of
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.rule_forms import by_output, derivations
from autodiff.core.stack import Interpreter, current_interpreters, new_interpreter, owned
from autodiff.core.tracer import Tracer
from autodiff.errors import AutodiffWarning, TransformTypeError, TransformValueError
from autodiff.rules.creation import as_output

__all__ = [
    "JetInterpreter",
    "JetTensor",
    "jet",
    "jet_parts",
    "wrap",
    "push_series",
    "taylor_rule",
]


class JetInterpreter(Interpreter):
    """Taylor mode of ``order``.  ``collapse``: None, or collapsed Taylor mode's
    ``Collapse`` (``collapsed.py``), which then pushes each primitive."""

    __slots__ = ("collapse", "order")
    transform = "jet"

    def __init__(self, order: int, collapse: Any = None) -> None:
        super().__init__()
        self.order = order
        self.collapse = collapse


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
    if interp.collapse is not None:  # collapsed Taylor mode (collapsed.py)
        return interp.collapse.push(interp, prim, primals, series, params)
    ans, out = taylor_rule(prim)(primals, series, **params)
    if prim.multiple_results:
        return tuple(wrap(interp, a, s) for a, s in zip(ans, out))
    return wrap(interp, ans, out)


def wrap(interp: JetInterpreter, ans: Any, series: Any) -> Any:
    """``ans`` with its coefficients (a constant where they are all zero)."""
    if series is None or is_zero(series):
        return ans
    if len(series) != interp.order:
        raise TransformValueError(
            f"jet: a Taylor rule returned {len(series)} coefficients where {interp.describe()} "
            f"carries {interp.order}"
        )
    return JetTensor(interp, ans, tuple(series))


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
        return tuple(wrap(interp, a, c) for a, c in zip(ans, out))
    return wrap(interp, ans, out)


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
        out = fun(*trees.unflatten(tree_p, ins))
        out_flat, out_tree = trees.flatten(out)
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
    return trees.unflatten(out_tree, primals_out), trees.unflatten(out_tree, series_out)


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
    flat_p, tree_p = trees.flatten(tuple(primals))
    paths = leaf_paths(tuple(primals))
    flat_p = [as_input_array(p, f"the primal for {path}", "jet", differentiable=True)
              for p, path in zip(flat_p, paths)]  # fmt: skip
    columns = []
    for k in range(order):
        column, tree = trees.flatten(tuple(s[k] for s in series))
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
