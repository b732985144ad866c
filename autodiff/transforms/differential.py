"""Differential operators as transforms: ``laplacian``, ``hessian_diag``, ``divergence``,
``differential_operator``, ``biharmonic`` and ``hvp``.

Each takes ``func`` and returns a function of the same arguments computing the operator
with respect to the argument at ``argnums`` (one argument, which may be a pytree of
arrays).  Each is a sum over directions (``directional.py``); ``method=`` says which
directions and how each term is computed, ``"auto"`` the cheapest exact way:

=================  =========================================================================
method             what it computes
=================  =========================================================================
``"collapsed"``    collapsed Taylor mode over every unit vector (the forward Laplacian)
``"sparse"``       the same over one direction per colour of the program's pattern
``"taylor"``       Taylor mode per direction (``vmap`` of ``jet``)
``"hvp"``          a Hessian-vector product per unit vector (forward over reverse)
``"jvp"``          a Jacobian-vector product per unit vector (``divergence``)
``"hutchinson"``   ``samples`` random probes (``probes="rademacher"`` or ``"gaussian"``)
``"hutch++"``      Hutch++: a sketch of the range, then Hutchinson on the rest
``"stde"``         STDE's sparse random jets: ``samples`` of the operator's directions
=================  =========================================================================

The random ones are unbiased estimates; ``seed`` chooses their randomness
(``estimators.py``).  Every operator composes: ``grad`` of a Laplacian (the loss of a
physics-informed network), ``vmap`` over collocation points, ``jit``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core.args import at_positions, check_argnums_type, normalize_argnums
from autodiff.core.arrays import shape_of
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import grad
from autodiff.rules import compositions as _comp
from autodiff.rules import products as _prod
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules.elementwise import stop_gradient
from autodiff.rules.linalg import qr
from autodiff.transforms import estimators as _est
from autodiff.transforms.directional import (
    Detections,
    Problem,
    UnitRows,
    collapsed,
    hvps,
    identity,
    jvps,
    operator_wrapper,
    per_direction,
    sparse_directions,
    weighted_sum,
)

__all__ = [
    "biharmonic",
    "differential_operator",
    "divergence",
    "hessian_diag",
    "hvp",
    "laplacian",
]

_RANDOM = ("hutchinson", "hutch++", "stde")


def _check_method(method: Any, who: str, allowed: dict[str, str | None]) -> None:
    """``allowed``: each method this operator knows -> None, or why it does not apply."""
    if isinstance(method, str) and allowed.get(method, "") is None:
        return
    if isinstance(method, str) and method in allowed:
        raise TransformValueError(f"{who}: method={method!r} {allowed[method]}")
    ok = ", ".join(repr(m) for m, why in allowed.items() if why is None)
    raise TransformValueError(f"{who}: method must be one of {ok}; got {method!r:.40}.")


def _check_random(method: str, samples: Any, seed: Any, probes: str, who: str) -> int:
    """The number of probes of a random method (0 for the others)."""
    _est.check_seed(seed, who)
    if probes not in _est.PROBES:
        raise TransformValueError(
            f"{who}: probes must be 'rademacher' or 'gaussian', got {probes!r:.40}."
        )
    if method in _RANDOM:
        return _est.check_samples(samples, who, method, 3 if method == "hutch++" else 1)
    return 0


def _weights(count: int, value: float, dtype: Any) -> np.ndarray:
    return np.full(count, value, dtype)


def _sketch(p: Problem, samples: int, seed: Any, kind: str, k: int, who: str, matvec: Callable,
            lift: Callable = lambda V: V) -> tuple:  # fmt: skip
    """Hutch++'s directions and weights (in the ``k``-dimensional space whose matrix
    ``matvec`` applies to rows): the sketch's orthonormal basis (weight 1) and the probes
    with it projected out (weight ``1/g``)."""
    s = samples // 3
    g = samples - 2 * s
    Z = _est.probes(kind, seed, (s + g, k), p.leaves[0].dtype, who, "hutch++")
    S, G = Z[:s], Z[s:]
    Q, _ = qr(stop_gradient(_comp.swapaxes(matvec(lift(S)), 0, 1)))  # (k, s): A's range
    Qt = stop_gradient(_comp.swapaxes(Q, 0, 1))
    G = G - _prod.matmul(_prod.matmul(G, Q), Qt)
    weights = np.concatenate([_weights(s, 1.0, p.leaves[0].dtype),
                              _weights(g, 1.0 / g, p.leaves[0].dtype)])  # fmt: skip
    return _shp.concatenate([Qt, G], axis=0), weights


# --- laplacian ----------------------------------------------------------------------------------


def laplacian(func: Callable, argnums: int = 0, *, method: str = "auto", sigma: Any = None,
              samples: int | None = None, seed: Any = None,
              probes: str = "rademacher") -> Callable:  # fmt: skip
    """The Laplacian of ``func`` with respect to argument ``argnums``: ``sum_i d^2 f/dx_i^2``
    for each element of ``func``'s output (which may be any pytree of arrays), or with
    ``sigma`` (an ``(n, k)`` matrix) the weighted Laplacian ``tr(sigma sigma^T H)``.

    Exact methods: ``"collapsed"`` (collapsed Taylor mode, the forward Laplacian: one pass
    carrying the value, its derivative along every unit vector and the summed second
    coefficients), ``"sparse"`` (the same with one direction per colour of the program's
    Hessian pattern, detected once per input signature: for programs of independent
    parts, such as per-particle terms, a few directions instead of ``n``), ``"taylor"``
    (a jet per direction), ``"hvp"`` (a Hessian-vector product per direction; scalar
    ``func``).  ``"auto"`` takes ``"sparse"`` where the detected pattern halves the
    directions and ``"collapsed"`` otherwise.  Estimates: ``"hutchinson"`` and ``"stde"``
    (random coordinates), any output; ``"hutch++"``, scalar ``func``; ``samples`` and
    ``seed`` as in ``autodiff.transforms.estimators``.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> f = lambda x: anp.sum(x**3) + anp.sin(x[0])
    >>> x = np.array([1.0, 2.0])
    >>> bool(np.isclose(autodiff.laplacian(f)(x), 6 * x.sum() - np.sin(1.0)))
    True
    """
    who = "laplacian"
    _check_method(method, who, {m: None for m in (
        "auto", "collapsed", "sparse", "taylor", "hvp", *_RANDOM)})  # fmt: skip
    m = _check_random(method, samples, seed, probes, who)
    if sigma is not None and method == "sparse":
        raise TransformValueError(
            "laplacian: method='sparse' colours unit vectors; with sigma the directions are "
            "sigma's columns: use method='collapsed' (or 'auto')."
        )
    detections = Detections(func, argnums, hessian=True)

    def compute(p: Problem, args: tuple, kwargs: dict) -> Any:
        S = None if sigma is None else _sigma(sigma, p)
        k = p.n if S is None else shape_of(S)[1]

        def lift(V):  # directions in sigma's space (k) to the input's (n)
            return V if S is None else _prod.matmul(V, _comp.swapaxes(S, 0, 1))

        chosen, V = method, None
        if method in ("auto", "sparse"):
            V = None if S is not None else sparse_directions(
                detections, p, args, kwargs, auto=method == "auto")  # fmt: skip
            chosen = "collapsed" if V is None else "sparse"
        dtype = p.leaves[0].dtype
        if chosen in ("collapsed", "sparse"):
            if V is None:  # every unit vector
                V = (
                    UnitRows.eye(p.n, np.dtype(dtype))
                    if S is None
                    else lift(np.eye(k, dtype=dtype))
                )
            outs = collapsed(p, V, 2)
        elif chosen == "taylor":
            V = lift(np.eye(k, dtype=dtype))
            outs = [_red.sum(d, axis=0) for d in per_direction(p, V, 2)]
        elif chosen == "hvp":
            V = lift(np.eye(k, dtype=dtype))
            outs = [_red.sum(V * hvps(p, V, chosen))]
        elif chosen == "hutchinson":
            Z = _est.probes(probes, seed, (m, k), dtype, who, chosen)
            outs = collapsed(p, lift(Z), 2, _weights(m, 1.0 / m, dtype))
        elif chosen == "stde":
            C = _est.coordinates(seed, m, k, dtype, who, chosen)
            outs = collapsed(p, lift(C), 2, _weights(m, k / m, dtype))
        else:  # hutch++
            V, w = _sketch(p, m, seed, probes, k, who,
                           lambda V: _lower(hvps(p, V, chosen), S), lift)  # fmt: skip
            outs = collapsed(p, lift(V), 2, w)
        return p.unflatten(outs)

    return operator_wrapper(func, argnums, who, compute)


def _sigma(sigma: Any, p: Problem) -> Any:
    if shape_of(sigma)[:1] != (p.n,) or len(shape_of(sigma)) != 2:
        raise TransformValueError(
            f"laplacian: sigma must be an (n, k) matrix with n = {p.n}, the number of "
            f"elements of the differentiated argument; got shape {shape_of(sigma)}."
        )
    return sigma


def _lower(rows: Any, S: Any) -> Any:
    """Rows of the input's space (n) taken to sigma's (k): ``rows @ S``."""
    return rows if S is None else _prod.matmul(rows, S)


# --- hessian_diag --------------------------------------------------------------------------------


def hessian_diag(func: Callable, argnums: int = 0, *, method: str = "auto",
                 samples: int | None = None, seed: Any = None,
                 probes: str = "rademacher") -> Callable:  # fmt: skip
    """The diagonal of the Hessian of the scalar ``func`` with respect to argument
    ``argnums``, shaped like that argument.

    Exact: ``"taylor"`` (a second-order jet per unit vector), ``"hvp"`` (a
    Hessian-vector product per unit vector), ``"sparse"`` (one Hessian-vector product per
    colour of the detected Hessian pattern: each colour's entries come back unmixed);
    ``"auto"`` takes ``"sparse"`` where it halves the work, else ``"taylor"``.  Estimates:
    ``"hutchinson"`` (``E[v * (H v)]``) and ``"stde"`` (random coordinates).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> autodiff.hessian_diag(lambda x: anp.sum(x**3) + x[0] * x[1])(np.array([1.0, 2.0]))
    array([ 6., 12.])
    """
    who = "hessian_diag"
    not_a_sum = ("sums directional derivatives over the directions, which gives the "
                 "diagonal's sum (the Laplacian), not its entries; use 'taylor', 'hvp', "
                 "'sparse', 'hutchinson' or 'stde'.")  # fmt: skip
    _check_method(method, who, {"auto": None, "taylor": None, "hvp": None, "sparse": None,
                                "hutchinson": None, "stde": None, "collapsed": not_a_sum,
                                "hutch++": "estimates traces only; use 'hutchinson'."})  # fmt: skip
    m = _check_random(method, samples, seed, probes, who)
    detections = Detections(func, argnums, hessian=True)

    def compute(p: Problem, args: tuple, kwargs: dict) -> Any:
        dtype = p.leaves[0].dtype
        chosen, V = method, None
        if method in ("auto", "sparse"):
            V = sparse_directions(detections, p, args, kwargs, auto=method == "auto")
            chosen = "taylor" if V is None else "sparse"
        if chosen == "taylor":
            (d,) = _scalar_outputs(p, per_direction(p, identity(p), 2), chosen)
            diagonal = _shp.reshape(d, (p.n,))
        elif chosen in ("hvp", "sparse"):
            V = identity(p) if V is None else V
            diagonal = _red.sum(V * hvps(p, V, chosen), axis=0)
        elif chosen == "hutchinson":
            Z = _est.probes(probes, seed, (m, p.n), dtype, who, chosen)
            diagonal = _red.sum(Z * hvps(p, Z, chosen), axis=0) / m
        else:  # stde: the sampled coordinates' second derivatives
            C = _est.coordinates(seed, m, p.n, dtype, who, chosen)
            (d,) = _scalar_outputs(p, per_direction(p, C, 2), chosen)
            diagonal = _red.sum(C * _shp.reshape(d, (m, 1)), axis=0) * (p.n / m)
        return p.as_argument(diagonal)

    return operator_wrapper(func, argnums, who, compute)


def _scalar_outputs(p: Problem, outs: list, method: str) -> list:
    if len(outs) != 1 or math.prod(shape_of(outs[0])[1:]) != 1:
        raise TransformValueError(
            f"{p.who}: method={method!r} needs func to return one scalar, got outputs of "
            f"shapes {[shape_of(o)[1:] for o in outs]}."
        )
    return outs


# --- divergence ----------------------------------------------------------------------------------


def divergence(func: Callable, argnums: int = 0, *, method: str = "auto",
               samples: int | None = None, seed: Any = None,
               probes: str = "rademacher") -> Callable:  # fmt: skip
    """The divergence ``sum_i df_i/dx_i`` of ``func``, whose output has as many elements as
    argument ``argnums`` (a vector field; both raveled in pytree order).

    Exact: ``"jvp"`` (one JVP per unit vector), ``"sparse"`` (one JVP per colour of the
    detected Jacobian pattern, symmetrised); ``"auto"`` takes ``"sparse"`` where it halves
    the work.  Estimates: ``"hutchinson"`` (``E[v . (J v)]``), ``"hutch++"``, ``"stde"``.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> field = lambda x: anp.stack([x[0] * x[1], anp.sin(x[1])])
    >>> float(autodiff.divergence(field)(np.array([1.0, 0.0])))
    1.0
    """
    who = "divergence"
    first = ("is for sums of higher derivatives of one output; a divergence pairs "
             "output i with input i (a first-order trace): use 'jvp', 'sparse' or an "
             "estimator.")  # fmt: skip
    _check_method(method, who, {"auto": None, "jvp": None, "sparse": None, "hutchinson": None,
                                "hutch++": None, "stde": None, "collapsed": first,
                                "taylor": first, "hvp": first})  # fmt: skip
    m = _check_random(method, samples, seed, probes, who)
    detections = Detections(func, argnums, hessian=False)

    def compute(p: Problem, args: tuple, kwargs: dict) -> Any:
        dtype = p.leaves[0].dtype

        def quadratic(V, w=None):  # sum_r w_r v_r . (J v_r)
            JV = jvps(p, V)
            if shape_of(JV)[1] != p.n:
                raise TransformValueError(
                    f"divergence: func returns {shape_of(JV)[1]} elements for an argument of "
                    f"{p.n}; a divergence needs as many outputs as inputs."
                )
            return weighted_sum(_red.sum(V * JV, axis=1), w)

        chosen, V = method, None
        if method in ("auto", "sparse"):
            V = sparse_directions(detections, p, args, kwargs, auto=method == "auto")
            chosen = "jvp" if V is None else "sparse"
        if chosen in ("jvp", "sparse"):
            return quadratic(identity(p) if V is None else V)
        if chosen == "hutchinson":
            Z = _est.probes(probes, seed, (m, p.n), dtype, who, chosen)
            return quadratic(Z, _weights(m, 1.0 / m, dtype))
        if chosen == "stde":
            C = _est.coordinates(seed, m, p.n, dtype, who, chosen)
            return quadratic(C, _weights(m, p.n / m, dtype))
        V, w = _sketch(p, m, seed, probes, p.n, who, lambda V: jvps(p, V))
        return quadratic(V, w)

    return operator_wrapper(func, argnums, who, compute)


# --- linear operators given by directions --------------------------------------------------------


def differential_operator(func: Callable, directions: Any, *, order: int, weights: Any = None,
                          argnums: int = 0, method: str = "auto", samples: int | None = None,
                          seed: Any = None) -> Callable:  # fmt: skip
    """The linear differential operator ``sum_r w_r D^K f[v_r, ..., v_r]`` of ``func``:
    the weighted sum over ``directions`` (an ``(R, n)`` array, or ``(R, *shape)`` for one
    array argument) of the ``order``-th directional derivatives along them, for each
    element of ``func``'s output.  Any constant-coefficient linear operator of order K
    is one: the weighted Laplacian ``tr(sigma sigma^T H)`` (K = 2, ``sigma``'s columns),
    the biharmonic operator (``biharmonic``), a mixed ``d^2 f/dx dy`` (directions ``e_x +
    e_y``, ``e_x``, ``e_y`` with weights ``1/2, -1/2, -1/2``).

    Exact: ``"collapsed"`` (collapsed Taylor mode: one pass, the K-th coefficients summed
    as they go; also ``"auto"``), ``"taylor"`` (a jet per direction).  Estimate:
    ``"stde"`` (``samples`` of the directions drawn uniformly, weighted ``R / samples``).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> f = lambda x: x[0] ** 2 * x[1] ** 2
    >>> mixed = autodiff.differential_operator(   # d^2 f / dx0 dx1 = 4 x0 x1
    ...     f, np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]), order=2, weights=[0.5, -0.5, -0.5])
    >>> float(mixed(np.array([1.0, 2.0])))
    8.0
    """
    who = "differential_operator"
    if callable(directions):
        raise TransformTypeError(
            "differential_operator: directions is a function; this transform computes linear "
            "operators, sum_r w_r D^K f[v_r], given by their directions (an (R, n) array) "
            "and weights. For a nonlinear operator (a function of the derivatives, such as "
            "|grad f|^2 or det(hessian f)), compute the derivatives with grad, hessian or "
            "laplacian and combine them."
        )
    _check_order(order, who)
    _check_method(method, who, {"auto": None, "collapsed": None, "taylor": None, "stde": None})
    m = _check_random(method, samples, seed, "rademacher", who)
    D = _comp.asarray(directions)
    if len(shape_of(D)) < 2:
        raise TransformValueError(
            f"differential_operator: directions must be an (R, n) array, one direction per "
            f"row, got shape {shape_of(D)}."
        )
    R = shape_of(D)[0]
    W = None if weights is None else _comp.asarray(weights)
    if W is not None and shape_of(W) != (R,):
        raise TransformValueError(
            f"differential_operator: weights must have one entry per direction, shape "
            f"({R},), got {shape_of(W)}."
        )

    def compute(p: Problem, args: tuple, kwargs: dict) -> Any:
        return p.unflatten(_directional_sum(p, D, W, order, method, m, seed, who))

    return operator_wrapper(func, argnums, who, compute)


def _check_order(order: Any, who: str) -> None:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)):
        raise TransformTypeError(f"{who}: order must be an int >= 1, got {order!r:.40}.")
    if order < 1:
        raise TransformValueError(
            f"{who}: order must be >= 1 (the order of the derivatives), got {order}."
        )


def _directional_sum(p: Problem, D: Any, W: Any, order: int, method: str, samples: int,
                     seed: Any, who: str) -> list:  # fmt: skip
    R = shape_of(D)[0]
    V = _shp.reshape(D, (R, -1))
    if shape_of(V)[1] != p.n:
        raise TransformValueError(
            f"{who}: the directions have {shape_of(V)[1]} elements each, but the "
            f"differentiated argument has {p.n}."
        )
    dtype = p.leaves[0].dtype
    V = V.astype(dtype) if V.dtype != dtype else V
    if method == "stde":
        pick = _est.coordinates(seed, samples, R, dtype, who, method)  # (samples, R)
        V = _prod.matmul(pick, V)
        W = _prod.matmul(pick, np.ones(R, dtype) if W is None else W) * (R / samples)
    if order == 1:  # sum_r w_r J v_r = J (sum_r w_r v_r)
        direction = weighted_sum(V, W)
        tangents = [d[0] for d in p.directions(_shp.expand_dims(direction, 0))]
        return list(jvp(p.fn, tuple(p.leaves), tuple(tangents))[1])
    if method == "taylor":
        return [weighted_sum(d, W) for d in per_direction(p, V, order)]
    return collapsed(p, V, order, W)


@functools.cache
def biharmonic_directions(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Directions and weights with ``sum_r w_r D^4 f[v_r] = sum_ij d^4 f/dx_i^2 dx_j^2``:
    ``e_i`` with weight ``1 - (n-1)/3`` and ``e_i +- e_j`` (``i < j``) with weight ``1/6``
    (polarisation: ``D^4 f[e_i + e_j] + D^4 f[e_i - e_j] = 2 f_iiii + 12 f_iijj + 2 f_jjjj``)."""
    eye = np.eye(n)
    i, j = np.triu_indices(n, 1)
    directions = np.concatenate([eye, eye[i] + eye[j], eye[i] - eye[j]])
    weights = np.concatenate([np.full(n, 1 - (n - 1) / 3), np.full(2 * len(i), 1 / 6)])
    return directions, weights


def biharmonic(func: Callable, argnums: int = 0, *, method: str = "auto",
               samples: int | None = None, seed: Any = None) -> Callable:  # fmt: skip
    """The biharmonic operator ``Delta^2 f = sum_ij d^4 f / dx_i^2 dx_j^2`` of ``func``
    (each output element), as ``differential_operator`` of order 4 over the ``n^2``
    directions of ``biharmonic_directions`` (methods as there).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> r4 = lambda x: anp.sum(x**2) ** 2       # Delta^2 |x|^4 = 8 n (n + 2)
    >>> round(float(autodiff.biharmonic(r4)(np.array([0.3, -1.0, 2.0]))), 8)
    120.0
    """
    who = "biharmonic"
    _check_method(method, who, {"auto": None, "collapsed": None, "taylor": None, "stde": None})
    m = _check_random(method, samples, seed, "rademacher", who)

    def compute(p: Problem, args: tuple, kwargs: dict) -> Any:
        D, W = biharmonic_directions(p.n)
        dtype = p.leaves[0].dtype
        return p.unflatten(_directional_sum(p, D.astype(dtype), W.astype(dtype), 4, method,
                                            m, seed, who))  # fmt: skip

    return operator_wrapper(func, argnums, who, compute)


# --- hvp ---------------------------------------------------------------------------------------


def hvp(func: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """Hessian-vector products of the scalar ``func``: ``hvp(func)(*args, v)`` is ``H v``,
    the Hessian with respect to argument ``argnums`` applied to ``v`` (structured like
    that argument; a tuple of them for a tuple ``argnums``), by forward over reverse mode.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> autodiff.hvp(lambda x: anp.sum(x**3))(np.array([1.0, 2.0]), np.array([1.0, 0.0]))
    array([6., 0.])
    """
    check_argnums_type(argnums, "hvp")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not args:
            raise TransformTypeError("hvp(func)(*args, v): give the arguments, then v.")
        *args, v = args
        positions = normalize_argnums(argnums, len(args), "hvp")
        selected = at_positions(func, args, positions, kwargs)
        gradient = grad(selected, argnums=tuple(range(len(positions))))
        tangents = tuple(v) if isinstance(argnums, tuple) else (v,)
        if len(tangents) != len(positions):
            raise TransformValueError(
                f"hvp: v must hold one tangent per differentiated argument ({len(positions)}), "
                f"got {len(tangents)}."
            )
        _, out = jvp(gradient, tuple(args[i] for i in positions), tangents)
        return out if isinstance(argnums, tuple) else out[0]

    return wrapper
