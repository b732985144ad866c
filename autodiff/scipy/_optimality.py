"""The optimality conditions ``minimize``'s solution is differentiated through.

Each is ``F(z) = 0`` at the solution, written with autodiff functions of the traced
parameters (``args``, closed-over values, bounds, a constraint's matrix), so the
implicit function theorem gives the solution's derivative in all of them:

- no constraints: ``∇f(x) = 0``;
- bounds only: ``x - clip(x - ∇f(x), lo, hi) = 0``, the projected gradient's fixed
  point (at an active bound the row is ``x_i = lo_i``: the solution moves with the
  bound; inside, ``∂f/∂x_i = 0``);
- constraints (``c_eq(x) = 0``, ``c_in(x) ≥ 0``, SciPy's conventions; bounds join the
  inequalities): the KKT system in ``z = (x, μ, λ)``,
  ``∇f - J_eqᵀ μ - J_inᵀ λ = 0``, ``c_eq = 0``, ``λ ∘ c_in = 0``, whose Jacobian is
  regular under strict complementarity (an active constraint keeps ``∇c_i dx = 0``, an
  inactive one ``dλ_i = 0``).  The multipliers are estimated at the solution by least
  squares over the equalities and the active inequalities (``multipliers``), for every
  method alike, derivative-free ones included.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import autodiff.numpy as anp
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.reverse import grad
from autodiff.transforms.jacobians import jacfwd

__all__ = ["Constraint", "bounds_arrays", "constraints_of", "kkt_residual", "multipliers"]


class Constraint(NamedTuple):
    """One constraint of SciPy's, as ``fn(x) = 0`` (``eq``) or ``fn(x) ≥ 0``."""

    kind: str  # "eq" or "ineq"
    fn: Callable  # x -> 1-d array
    size: int


def bounds_arrays(bounds: Any, n: int, who: str) -> tuple[Any, Any]:
    """``(lo, hi)``: arrays of ``n`` bounds (±inf where there is none), from SciPy's
    spellings: a ``Bounds``, or a sequence of ``(min, max)`` pairs (``None`` for none)."""
    if hasattr(bounds, "lb") and hasattr(bounds, "ub"):
        lo, hi = bounds.lb, bounds.ub
        return (anp.broadcast_to(anp.asarray(lo, dtype=float), (n,)),
                anp.broadcast_to(anp.asarray(hi, dtype=float), (n,)))  # fmt: skip
    pairs = list(bounds)
    if len(pairs) != n or any(len(p) != 2 for p in pairs):
        raise TransformValueError(
            f"{who}: bounds must be a Bounds or {n} (min, max) pairs (one per element of "
            f"x0), got {len(pairs)} entries."
        )
    lo = [-np.inf if p[0] is None else p[0] for p in pairs]
    hi = [np.inf if p[1] is None else p[1] for p in pairs]
    return anp.asarray(lo, dtype=float), anp.asarray(hi, dtype=float)


def _plain_mask(values: Any, what: str, who: str) -> np.ndarray:
    """``values`` (a constraint's or bounds' limits) as plain numbers: which of them are
    finite, and which pairs equal, is the problem's structure."""
    leaves = values if isinstance(values, (list, tuple)) else [values]
    if any(isinstance(v, Tracer) for v in leaves):
        raise TransformTypeError(
            f"{who}: the {what} of a LinearConstraint or NonlinearConstraint are traced; "
            f"which constraints are equalities must be known before the solve. Move the "
            f"traced value into the constraint's function (a dict constraint {{'type': "
            f"'ineq', 'fun': lambda x: ... - limit}}), where it is differentiated."
        )
    return np.asarray(values, dtype=float)


def constraints_of(constraints: list, x0: Any, who: str) -> list[Constraint]:
    """SciPy's constraints (dicts, ``LinearConstraint``, ``NonlinearConstraint``) as
    equalities and inequalities ``≥ 0`` of autodiff functions of ``x``."""
    out = []
    for con in constraints:
        if isinstance(con, dict):
            kind, fn, extra = con.get("type"), con.get("fun"), con.get("args", ())
            if kind not in ("eq", "ineq") or not callable(fn):
                raise TransformValueError(
                    f"{who}: a dict constraint needs 'type' ('eq' or 'ineq') and a callable "
                    f"'fun', got {sorted(con)}."
                )
            extra = extra if isinstance(extra, tuple) else (extra,)
            one = _vector_fn(lambda x, fn=fn, extra=extra: fn(x, *extra))
            out.append(Constraint(kind, one, int(np.prod(anp.shape(one(x0))))))
            continue
        if hasattr(con, "A"):  # LinearConstraint
            fn = _vector_fn(lambda x, a=con.A: anp.atleast_2d(a) @ x)
        elif hasattr(con, "fun"):  # NonlinearConstraint
            fn = _vector_fn(con.fun)
        else:
            raise TransformTypeError(
                f"{who}: constraints are dicts, LinearConstraint or NonlinearConstraint, got "
                f"a {type(con).__name__}."
            )
        size = int(np.prod(anp.shape(fn(x0))))
        lb = np.broadcast_to(_plain_mask(con.lb, "lower limits", who), (size,))
        ub = np.broadcast_to(_plain_mask(con.ub, "upper limits", who), (size,))
        out.extend(_limited(fn, lb, ub))
    return out


def _vector_fn(fn: Callable) -> Callable:
    return lambda x: anp.ravel(anp.asarray(fn(x), dtype=float))


def _limited(fn: Callable, lb: np.ndarray, ub: np.ndarray) -> list[Constraint]:
    """``lb ≤ fn(x) ≤ ub`` as equalities (``lb = ub``) and inequalities ``≥ 0``."""
    eq = np.flatnonzero(lb == ub)
    low = np.flatnonzero((lb != ub) & np.isfinite(lb))
    high = np.flatnonzero((lb != ub) & np.isfinite(ub))
    out = []
    for kind, rows, sign, limit in (("eq", eq, 1.0, lb), ("ineq", low, 1.0, lb),
                                    ("ineq", high, -1.0, ub)):  # fmt: skip
        if rows.size:
            out.append(Constraint(kind, lambda x, rows=rows, sign=sign, limit=limit:
                                  sign * (fn(x)[rows] - limit[rows]), int(rows.size)))  # fmt: skip
    return out


def bounds_as_constraints(lo: Any, hi: Any) -> list[Constraint]:
    """The finite bounds as inequalities ``x - lo ≥ 0``, ``hi - x ≥ 0`` (a traced bound
    is finite)."""
    out = []
    for sign, limit in ((1.0, lo), (-1.0, hi)):
        finite = np.ones(anp.shape(limit)[0], bool)
        if not isinstance(limit, Tracer):
            finite = np.isfinite(np.asarray(limit))
        rows = np.flatnonzero(finite)
        if rows.size:
            out.append(Constraint("ineq", lambda x, rows=rows, sign=sign, limit=limit:
                                  sign * (x[rows] - limit[rows]), int(rows.size)))  # fmt: skip
    return out


def projected_residual(value: Callable, lo: Any, hi: Any) -> Callable:
    """``x - clip(x - ∇f(x), lo, hi)``: zero at a minimiser of ``f`` in the box."""
    gradient = grad(value)
    return lambda x: x - anp.clip(x - gradient(x), lo, hi)


def kkt_residual(value: Callable, constraints: list[Constraint], n: int) -> Callable:
    """The KKT system's residual in ``z = (x, multipliers)`` (see the module)."""

    def residual(z):
        x, lams = z[:n], _split(z[n:], constraints)

        def lagrangian(x):
            out = value(x)
            for con, lam in zip(constraints, lams):
                out = out - anp.sum(lam * con.fn(x))
            return out

        rows = [grad(lagrangian)(x)]
        for con, lam in zip(constraints, lams):
            c = con.fn(x)
            rows.append(c if con.kind == "eq" else lam * c)
        return anp.concatenate(rows)

    return residual


def _split(lams: Any, constraints: list[Constraint]) -> list:
    bounds = np.cumsum([0, *(c.size for c in constraints)])
    return [lams[a:b] for a, b in itertools.pairwise(bounds)]


def multipliers(value: Callable, constraints: list[Constraint], x: np.ndarray,
                active_tol: float) -> tuple[np.ndarray, float]:  # fmt: skip
    """The multipliers at ``x`` (plain values), by least squares on ``∇f = Σ λ_i ∇c_i``
    over the equalities and the inequalities within ``active_tol`` of zero (those with
    a negative multiplier dropped, once); and the stationarity residual left, relative
    to ``∇f``'s size."""
    g = np.asarray(grad(value)(x))
    values = [np.asarray(c.fn(x)) for c in constraints]
    jacs = [np.asarray(jacfwd(c.fn)(x)).reshape(c.size, x.size) for c in constraints]
    jac = np.concatenate(jacs) if jacs else np.zeros((0, x.size))
    kinds = np.concatenate([np.full(c.size, c.kind == "eq") for c in constraints])
    c_all = np.concatenate(values) if values else np.zeros(0)
    active = kinds | (c_all <= active_tol)
    lam = np.zeros(c_all.size)
    for _ in range(2):
        if active.any():
            lam[active] = np.linalg.lstsq(jac[active].T, g, rcond=None)[0]
        negative = ~kinds & active & (lam < 0)
        if not negative.any():
            break
        active &= ~negative
        lam[~active] = 0.0
    lam[~kinds & (lam < 0)] = 0.0
    stationarity = float(np.linalg.norm(g - jac.T @ lam)) / (1.0 + float(np.linalg.norm(g)))
    return lam, stationarity
