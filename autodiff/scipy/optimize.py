"""``autodiff.scipy.optimize``: SciPy's own optimisers and root-finders, differentiable.

Each function has SciPy's signature, calls SciPy for the solve, and returns SciPy's
result (``OptimizeResult``, ``RootResults``, an array).  The solution is differentiated
by the implicit function theorem, never through SciPy's iterations: it is the root of
an optimality condition ``F(x, θ) = 0`` (``∇f = 0`` for ``minimize``, with bounds the
projected gradient, with constraints the KKT system: ``_optimality.py``; the residual
for ``root``; ``x - func(x)`` for ``fixed_point``), and ``custom_root`` defines its
tangent, ``∂F/∂x dx = -∂F/∂θ dθ``, which reverse mode transposes.  So ``grad``, ``jvp``,
``hessian`` (second order through the solve), ``vmap`` (one solve per example) and
``jit`` (SciPy runs at replay) all work, in every parameter: the arrays in ``args``, the
traced values the functions close over, bounds and constraints' parameters.  None flows
to ``x0``.

The functions must be written with ``autodiff.numpy`` (or NumPy functions that reach
it): autodiff supplies SciPy their exact gradients and Hessian products where SciPy
would otherwise difference them (``jac=None``), and differentiates them for the implicit
system.  ``implicit_solve=`` chooses how that linear system is solved (``_implicit.py``:
dense, sparse, Krylov, or a function).  A solution SciPy reports unconverged is not
differentiated: under a differentiating transform it raises ``ConvergenceError`` unless
``on_failure="warn"`` or ``"ignore"``.

Under a transform the result holds ``x``, ``fun`` and ``jac`` (recomputed at ``x``, so
they are differentiable), ``success``, ``status``, the evaluation counts SciPy reports,
and ``message``; the method-specific extras (``hess_inv``, ``final_simplex``, ...) are
SciPy's, returned only where no transform runs.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.optimize")

import numpy as np  # noqa: E402
import optree  # noqa: E402
import scipy.optimize as _so  # noqa: E402

import autodiff.numpy as anp  # noqa: E402
from autodiff.core.args import check_callable  # noqa: E402
from autodiff.core.stack import current_interpreters  # noqa: E402
from autodiff.core.tracer import Tracer, stood_in  # noqa: E402
from autodiff.errors import ConcretizationError, TransformValueError  # noqa: E402
from autodiff.interpreters.forward import jvp  # noqa: E402
from autodiff.interpreters.reverse import grad, value_and_grad  # noqa: E402
from autodiff.interpreters.staging import captured_value  # noqa: E402
from autodiff.scipy import _optimality as opt  # noqa: E402
from autodiff.scipy._implicit import (  # noqa: E402
    check_converged,
    check_options,
    differentiating,
    tangent_solver,
)
from autodiff.transforms.closures import closure_of  # noqa: E402
from autodiff.transforms.jacobians import jacfwd, jacobian  # noqa: E402
from autodiff.transforms.solvers import root as _root  # noqa: E402

__all__ = ["bisect", "brenth", "brentq", "fixed_point", "least_squares", "minimize", "newton",
           "ridder", "root", "root_scalar", "toms748"]  # fmt: skip

_GRADIENT = {"cg", "bfgs", "newton-cg", "l-bfgs-b", "tnc", "slsqp", "dogleg", "trust-ncg",
             "trust-krylov", "trust-exact", "trust-constr"}  # fmt: skip
_HESSIAN = {"dogleg": "hess", "trust-exact": "hess", "newton-cg": "hessp", "trust-ncg": "hessp",
            "trust-krylov": "hessp", "trust-constr": "hessp"}  # fmt: skip
_REPORTS_JAC = _GRADIENT - {"trust-constr"}
# the counts each method reports, besides nfev
_COUNTS = {
    "nelder-mead": ("nit",), "powell": ("nit",), "cobyla": ("maxcv",), "cobyqa": ("nit", "maxcv"),
    "tnc": ("nit",), "cg": ("nit", "njev"), "bfgs": ("nit", "njev"), "l-bfgs-b": ("nit", "njev"),
    "slsqp": ("nit", "njev"), "trust-constr": ("nit", "njev", "nhev"),
    "newton-cg": ("nit", "njev", "nhev"), "dogleg": ("nit", "njev", "nhev"),
    "trust-ncg": ("nit", "njev", "nhev"), "trust-exact": ("nit", "njev", "nhev"),
    "trust-krylov": ("nit", "njev", "nhev"),
}  # fmt: skip
_ROOT_COUNTS = {"hybr": (), "lm": ()}  # the others report nit


# --- shared ---------------------------------------------------------------------------------------


def _plain(tree: Any) -> Any:
    """``tree`` with each traced leaf replaced by the value it stands for (in a solver's
    implementation: a plain array)."""
    return optree.tree_map(lambda x: stood_in(x) if isinstance(x, Tracer) else x, tree)


def _scalar(f: Any) -> Any:
    """An objective's value as a scalar (SciPy takes a one-element array for one)."""
    return anp.reshape(f, ()) if anp.ndim(f) and anp.size(f) == 1 else f


def _as_args(args: Any) -> tuple:
    """``args`` as a tuple, its plain arrays read-only copies: under ``jit`` the solve runs
    at replay, and a later write into the caller's arrays must not reach it (``jit``
    captures closed-over arrays by value)."""
    args = args if isinstance(args, tuple) else (args,)
    return optree.tree_map(lambda x: captured_value(x) if isinstance(x, np.ndarray) else x,
                           args)  # fmt: skip


def _vector(x0: Any, who: str) -> Any:
    """``x0`` as SciPy takes it: a 1-d array of floats (a number: one element)."""
    x = anp.asarray(x0)
    if anp.ndim(x) > 1:
        raise TransformValueError(
            f"{who}: x0 must be a number or a 1-d array (as in SciPy), got shape {anp.shape(x)}."
        )
    x = anp.reshape(x, (-1,))
    return x if anp.result_type(x).kind == "f" else anp.astype(x, np.float64)


def _aux(result: Any, fields: tuple, fun_field: str | None = "fun") -> dict:
    """The numeric fields of SciPy's result that a transform carries along (as arrays)."""
    out = {"success": np.asarray(bool(result.success))}
    out["status"] = np.asarray(int(result.get("status", 0) if hasattr(result, "get") else 0))
    if fun_field is not None:
        out[fun_field] = np.asarray(float(np.asarray(result[fun_field]).sum()))
    for name in ("nfev", *fields):
        value = result.get(name, -1)
        out[name] = np.asarray(float(value) if name == "maxcv" else int(value))
    return out


def _solve(who: str, residual: Callable, guess: Any, run: Callable, aux_like: dict,
           closure_over: tuple, implicit_solve: Any, on_failure: str) -> tuple:  # fmt: skip
    """``run(z0) -> (z, aux, result)``, SciPy's solve on plain values, differentiated as the
    root of ``residual``; returns ``(z, aux, result)``, ``result`` SciPy's own (of the
    last solve run, None under ``jit``'s staging)."""
    differentiated = differentiating()
    cell: dict = {}

    def solve(_: Any, z0: Any) -> tuple:
        z, aux, result = run(np.asarray(z0))
        cell["result"] = result
        check_converged(bool(np.all(aux["success"])), getattr(result, "message", result), who,
                        on_failure, differentiated)  # fmt: skip
        return z, aux

    if not current_interpreters():  # no transform: nothing to differentiate or trace
        z, aux = solve(None, guess)
        return z, aux, cell["result"]
    closure = closure_of(residual, *closure_over)
    z, aux = _root(residual, guess, solve, tangent_solver(implicit_solve, who), has_aux=True,
                   aux_like=aux_like, closure=closure, check=False)  # fmt: skip
    return z, aux, cell.get("result")


def _recomputed(fn: Callable, fallback: Any, x: Any) -> Any:
    """``fn(x)`` at the traced solution (differentiable); where ``fn`` cannot be staged
    (``jit`` of a function with Python control flow on values) and nothing is
    differentiated, SciPy's value."""
    try:
        return fn(x)
    except ConcretizationError:
        if differentiating():
            raise
        return fallback


# --- minimize ------------------------------------------------------------------------------------


def minimize(fun: Callable, x0: Any, args: Any = (), method: Any = None, jac: Any = None,
             hess: Any = None, hessp: Any = None, bounds: Any = None, constraints: Any = (),
             tol: Any = None, callback: Any = None, options: Any = None, *,
             implicit_solve: Any = "auto", on_failure: str = "raise") -> Any:  # fmt: skip
    """Like ``scipy.optimize.minimize``, its solution differentiable in ``args``, the values
    ``fun`` (and the constraints) close over, and the bounds.

    Every method works.  Unconstrained, the solution is differentiated as a root of
    ``∇f``; with bounds (``L-BFGS-B``, ``TNC``, ``SLSQP``, ``Powell``, ``Nelder-Mead``,
    ``trust-constr``, ``COBYLA``, ``COBYQA``) as a fixed point of the projected gradient,
    so an active bound moves the solution; with ``constraints`` (``SLSQP``,
    ``trust-constr``, ``COBYLA``, ``COBYQA``) through the KKT conditions, the multipliers
    estimated at the solution.  With ``jac=None`` a gradient-based method gets autodiff's
    exact gradient (SciPy would difference ``fun``), and ``Newton-CG``, ``dogleg``,
    ``trust-*`` exact Hessians or Hessian products.  ``implicit_solve`` and
    ``on_failure``: see the module's docstring.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> from autodiff.scipy.optimize import minimize
    >>> A, y = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]]), np.array([1.0, 0.0, 2.0])
    >>> def ridge(lam):  # argmin |A w - y|^2 + lam |w|^2
    ...     loss = lambda w: anp.sum((A @ w - y) ** 2) + lam * anp.sum(w**2)
    ...     return minimize(loss, np.zeros(2), method="BFGS", tol=1e-12).x
    >>> w, K = ridge(0.5), A.T @ A + 0.5 * np.eye(2)
    >>> bool(np.allclose(w, np.linalg.solve(K, A.T @ y)))
    True
    >>> dw = autodiff.jacfwd(ridge)(0.5)  # by the implicit function theorem: -K^-1 w
    >>> bool(np.allclose(dw, -np.linalg.solve(K, w)))
    True
    """
    who = "minimize"
    check_callable(fun, who)
    check_options(who, implicit_solve, on_failure)
    args = _as_args(args)
    x0 = _vector(x0, who)
    n = anp.shape(x0)[0]
    constraints = [constraints] if isinstance(constraints, dict) or hasattr(
        constraints, "lb") else list(constraints)  # fmt: skip
    name = _method_name(method, bounds, constraints)
    value = (lambda x: _scalar(fun(x, *args)[0])) if jac is True else (
        lambda x: _scalar(fun(x, *args)))  # fmt: skip
    lo = hi = None
    if bounds is not None:
        lo, hi = opt.bounds_arrays(bounds, n, who)
    cons = opt.constraints_of(constraints, x0, who)
    if cons and lo is not None:
        cons += opt.bounds_as_constraints(lo, hi)
    m = sum(c.size for c in cons)

    def run(z0: np.ndarray) -> tuple:
        result = _so.minimize(**_scipy_minimize(fun, z0[:n], args, name, method, jac, hess,
                                                hessp, lo, hi, constraints, tol, callback,
                                                options))  # fmt: skip
        x = np.asarray(result.x, dtype=z0.dtype).reshape(n)
        aux = _aux(result, _counts(name))
        if not cons:
            return x, aux, result
        lam, stationarity = opt.multipliers(value, cons, x, _active_tol(result, tol))
        if stationarity > KKT_TOL and bool(aux["success"]):
            aux["success"] = np.asarray(False)
            result = _so.OptimizeResult(result)
            result["message"] = (f"{result.message}; but the solution is not a KKT point "
                                 f"(relative stationarity {stationarity:.1e})")  # fmt: skip
        return np.concatenate([x, lam]), aux, result

    if cons:
        residual, guess = opt.kkt_residual(value, cons, n), anp.concatenate([x0, np.zeros(m)])
    elif lo is not None:
        residual, guess = opt.projected_residual(value, lo, hi), x0
    else:
        residual, guess = grad(value), x0
    aux_like = _aux(_so.OptimizeResult(success=True, fun=0.0), _counts(name))
    z, aux, result = _solve(who, residual, guess, run, aux_like,
                            (fun, args, jac, hess, hessp, constraints, bounds, lo, hi, callback),
                            implicit_solve, on_failure)  # fmt: skip
    if not current_interpreters():
        return result
    x = z[:n]
    out = _so.OptimizeResult(x=x, fun=_recomputed(value, aux["fun"], x), **_counted(aux))
    out["message"] = getattr(result, "message", "(staged: read success and status)")
    if name in _REPORTS_JAC:
        out["jac"] = _recomputed(grad(value), None, x)
    return out


KKT_TOL = 1e-4  # relative stationarity residual above which a constrained solution is refused


def _counted(aux: dict) -> dict:
    return {k: v for k, v in aux.items() if k != "fun"}


def _counts(name: str) -> tuple:
    return _COUNTS.get(name, ("nit",))


def _active_tol(result: Any, tol: Any) -> float:
    return max(1e-6, 10.0 * (tol or 0.0))


def _method_name(method: Any, bounds: Any, constraints: list) -> str:
    if callable(method):
        return "custom"
    if method is None:
        return "slsqp" if constraints else ("l-bfgs-b" if bounds is not None else "bfgs")
    return str(method).lower()


def _scipy_minimize(fun, x0, args, name, method, jac, hess, hessp, lo, hi, constraints, tol,
                    callback, options) -> dict:  # fmt: skip
    """``scipy.optimize.minimize``'s arguments on plain values, with autodiff's exact
    derivatives where the method uses them and the user gave none."""
    a = _plain(args)

    def value(x):
        return _scalar(fun(x, *a)) if jac is not True else fun(x, *a)

    kwargs: dict[str, Any] = dict(fun=value, x0=x0, method=method or name, tol=tol,
                                  options=options)  # fmt: skip
    if callback is not None:
        kwargs["callback"] = callback
    if jac is None and name in _GRADIENT:
        value_grad = value_and_grad(value)

        def with_gradient(x):
            f, g = value_grad(x)
            return float(f), np.asarray(g, dtype=float)

        kwargs.update(fun=with_gradient, jac=True)
    elif callable(jac) and jac is not True:
        kwargs["jac"] = lambda x: jac(x, *a)
    elif jac is not None:
        kwargs["jac"] = jac
    gradient = grad(lambda x: _scalar(value(x)[0]) if jac is True else value(x))
    if hess is not None:
        kwargs["hess"] = (lambda x: hess(x, *a)) if callable(hess) else hess
    elif hessp is not None:
        kwargs["hessp"] = lambda x, p: hessp(x, p, *a)
    elif _HESSIAN.get(name) == "hess":
        kwargs["hess"] = lambda x: np.asarray(jacfwd(gradient)(x))
    elif _HESSIAN.get(name) == "hessp":  # (trust-constr hands p as integers at first)
        product = lambda x, p: jvp(gradient, (x,), (np.asarray(p, float),))[1]
        kwargs["hessp"] = lambda x, p: np.asarray(product(x, p))
    if lo is not None:
        kwargs["bounds"] = _so.Bounds(np.asarray(_plain(lo)), np.asarray(_plain(hi)))
    if constraints:
        kwargs["constraints"] = [_with_jacobian(c) for c in constraints]
    return kwargs


def _with_jacobian(con: Any) -> Any:
    """A dict constraint with autodiff's Jacobian where it has none (SciPy would
    difference its function)."""
    if not isinstance(con, dict) or "jac" in con:
        return con
    extra = _as_args(con.get("args", ()))
    fn = con["fun"]
    return {**con, "jac": lambda x, *a: np.asarray(jacfwd(lambda y: fn(y, *a))(x)),
            "args": extra}  # fmt: skip


# --- least_squares -------------------------------------------------------------------------------

_LOSSES = ("linear", "soft_l1", "huber", "cauchy", "arctan")


def _rho(loss: str, z: Any) -> Any:
    """SciPy's robust losses ``rho(z)`` of ``z = (f / f_scale)²``."""
    if loss == "linear":
        return z
    if loss == "soft_l1":
        return 2.0 * (anp.sqrt(1.0 + z) - 1.0)
    if loss == "huber":
        return anp.where(z <= 1.0, z, 2.0 * anp.sqrt(anp.maximum(z, 1.0)) - 1.0)
    if loss == "cauchy":
        return anp.log1p(z)
    return anp.arctan(z)


def least_squares(fun: Callable, x0: Any, jac: Any = None, bounds: Any = (-np.inf, np.inf),
                  method: str = "trf", ftol: Any = 1e-8, xtol: Any = 1e-8, gtol: Any = 1e-8,
                  x_scale: Any = None, loss: Any = "linear", f_scale: Any = 1.0,
                  diff_step: Any = None, tr_solver: Any = None, tr_options: Any = None,
                  jac_sparsity: Any = None, max_nfev: Any = None, verbose: int = 0,
                  args: Any = (), kwargs: Any = None, *, implicit_solve: Any = "auto",
                  on_failure: str = "raise") -> Any:  # fmt: skip
    """Like ``scipy.optimize.least_squares``, its solution differentiable in ``args``,
    ``kwargs``, the values ``fun`` closes over, ``f_scale`` and the bounds.

    The solution minimises ``½ f_scale² Σ rho((f_i / f_scale)²)``; it is differentiated as
    a root of that cost's gradient (projected onto the bounds), with the exact Hessian
    (not Gauss-Newton's).  ``jac=None`` (the default here) gives SciPy autodiff's exact
    Jacobian; SciPy's ``'2-point'`` and the rest are passed on.  ``loss`` is one of
    SciPy's named losses.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> from autodiff.scipy.optimize import least_squares
    >>> t, y = np.linspace(0, 1, 5), np.exp(-1.3 * np.linspace(0, 1, 5))
    >>> rate = lambda y: least_squares(lambda k: anp.exp(-k * t) - y, 1.0).x[0]
    >>> round(float(rate(y)), 6)
    1.3
    """
    who = "least_squares"
    check_callable(fun, who)
    check_options(who, implicit_solve, on_failure)
    if loss not in _LOSSES:
        raise TransformValueError(
            f"{who}: loss={loss!r}; the differentiable least_squares takes SciPy's named "
            f"losses {_LOSSES} (a callable loss's derivatives are not autodiff's to take)."
        )
    args, kwargs = _as_args(args), dict(kwargs or {})
    x0 = _vector(x0, who)
    n = anp.shape(x0)[0]

    def residuals(x):
        return anp.ravel(anp.asarray(fun(x, *args, **kwargs)))

    def cost(x):
        z = (residuals(x) / f_scale) ** 2
        return 0.5 * f_scale**2 * anp.sum(_rho(loss, z))

    lo, hi = (anp.broadcast_to(anp.asarray(b, dtype=float), (n,)) for b in bounds)
    bounded = any(isinstance(b, Tracer) or np.any(np.isfinite(b)) for b in (lo, hi))
    options = dict(method=method, ftol=ftol, xtol=xtol, gtol=gtol, loss=loss,
                   diff_step=diff_step, tr_solver=tr_solver, tr_options=tr_options or {},
                   jac_sparsity=jac_sparsity, max_nfev=max_nfev, verbose=verbose)  # fmt: skip
    if x_scale is not None:
        options["x_scale"] = x_scale

    def run(z0: np.ndarray) -> tuple:
        a, kw, scale = _plain(args), _plain(kwargs), float(_plain(f_scale))
        vector = lambda x: anp.ravel(anp.asarray(fun(x, *a, **kw), dtype=float))
        plain_fun = lambda x: np.asarray(vector(x))
        jac_arg: Any = jac
        if jac is None:
            jac_arg = lambda x: np.asarray(jacobian(vector)(x)).reshape(-1, n)
        elif callable(jac):
            jac_arg = lambda x: jac(x, *a, **kw)
        result = _so.least_squares(plain_fun, z0, jac=jac_arg,
                                   bounds=(np.asarray(_plain(lo)), np.asarray(_plain(hi))),
                                   f_scale=scale, **options)  # fmt: skip
        aux = _aux(result, ("njev",), fun_field="cost")
        aux["optimality"] = np.asarray(float(result.optimality))
        aux["active_mask"] = np.asarray(result.active_mask, dtype=np.int64)
        return np.asarray(result.x, dtype=z0.dtype), aux, result

    residual = opt.projected_residual(cost, lo, hi) if bounded else grad(cost)
    aux_like = _aux(_so.OptimizeResult(success=True, cost=0.0), ("njev",), fun_field="cost")
    aux_like.update(optimality=np.asarray(0.0), active_mask=np.zeros(n, np.int64))
    x, aux, result = _solve(who, residual, x0, run, aux_like,
                            (fun, args, kwargs, jac, lo, hi, f_scale), implicit_solve,
                            on_failure)  # fmt: skip
    if not current_interpreters():
        return result
    out = _so.OptimizeResult(x=x, cost=_recomputed(cost, aux["cost"], x),
                             fun=_recomputed(residuals, None, x),
                             jac=_recomputed(jacobian(residuals), None, x),
                             grad=_recomputed(grad(cost), None, x),
                             **{k: v for k, v in aux.items() if k != "cost"})  # fmt: skip
    out["message"] = getattr(result, "message", "(staged: read success and status)")
    return out


# --- root -----------------------------------------------------------------------------------------


def root(fun: Callable, x0: Any, args: Any = (), method: str = "hybr", jac: Any = None,
         tol: Any = None, callback: Any = None, options: Any = None, *,
         implicit_solve: Any = "auto", on_failure: str = "raise") -> Any:  # fmt: skip
    """Like ``scipy.optimize.root``, its solution differentiable in ``args`` and the values
    ``fun`` closes over (``∂F/∂x dx = -∂F/∂θ dθ``).  ``jac=None`` gives ``hybr`` and
    ``lm`` autodiff's exact Jacobian.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> from autodiff.scipy.optimize import root
    >>> x_of = lambda a: root(lambda x: anp.stack([x[0] + x[1] - a, x[0] - x[1]]),
    ...                       np.zeros(2)).x
    >>> x_of(2.0).round(12).tolist(), autodiff.jacfwd(x_of)(2.0).round(12).tolist()
    ([1.0, 1.0], [0.5, 0.5])
    """
    who = "root"
    check_callable(fun, who)
    check_options(who, implicit_solve, on_failure)
    args = _as_args(args)
    x0 = _vector(x0, who)
    name = str(method).lower() if not callable(method) else "custom"

    def residual(x):
        out = fun(x, *args)
        return anp.ravel(anp.asarray(out[0] if jac is True else out))

    def run(z0: np.ndarray) -> tuple:
        a = _plain(args)
        kwargs: dict[str, Any] = dict(method=method, tol=tol, callback=callback,
                                      options=options)  # fmt: skip
        plain = lambda x: fun(x, *a)
        if jac is None and name in ("hybr", "lm"):
            kwargs["jac"] = lambda x: np.asarray(jacfwd(plain)(x)).reshape(x.size, x.size)
        elif callable(jac) and jac is not True:
            kwargs["jac"] = lambda x: jac(x, *a)
        elif jac is not None:
            kwargs["jac"] = jac
        result = _so.root(plain, z0, **kwargs)
        aux = _aux(result, _ROOT_COUNTS.get(name, ("nit",)), fun_field=None)
        return np.asarray(result.x, dtype=z0.dtype).reshape(z0.shape), aux, result

    aux_like = _aux(_so.OptimizeResult(success=True), _ROOT_COUNTS.get(name, ("nit",)),
                    fun_field=None)  # fmt: skip
    x, aux, result = _solve(who, residual, x0, run, aux_like, (fun, args, jac, callback),
                            implicit_solve, on_failure)  # fmt: skip
    if not current_interpreters():
        return result
    out = _so.OptimizeResult(x=x, fun=_recomputed(residual, None, x), **aux)
    out["message"] = getattr(result, "message", "(staged: read success and status)")
    return out


# --- scalar roots ---------------------------------------------------------------------------------


def _scalar_root(who: str, f: Callable, args: tuple, x0: Any, run: Callable, on_failure: str,
                 starts: tuple = ()) -> tuple:  # fmt: skip
    """A root of ``f(x, *args)`` (elementwise, for an array ``x0``) found by ``run(x0)``,
    differentiated as ``dx = -(∂f/∂θ dθ) / (∂f/∂x)``; ``starts``: the other values
    ``run`` reads (a bracket, a second point), which carry no derivative."""
    guess = anp.asarray(x0)
    guess = guess if anp.result_type(guess).kind == "f" else anp.astype(guess, np.float64)
    aux_like = {"success": np.zeros(anp.shape(guess), bool),
                "iterations": np.zeros(anp.shape(guess), np.int64),
                "function_calls": np.zeros(anp.shape(guess), np.int64)}  # fmt: skip
    diagonal = lambda g, y: y / g(np.ones_like(y))  # f acts elementwise: ∂f/∂x is diagonal
    return _solve(who, lambda x: f(x, *args), guess, run, aux_like, (f, args, *starts),
                  diagonal, on_failure)  # fmt: skip


def _root_results(x: Any, aux: dict, result: Any, method: str) -> Any:
    """SciPy's ``RootResults`` with the traced root."""
    flag = getattr(result, "flag", "(staged: read converged)")  # (the last solve's)
    out = _so.RootResults(root=x, iterations=aux["iterations"], flag=flag, method=method,
                          function_calls=aux["function_calls"])  # fmt: skip
    out.converged = aux["success"]
    return out


def root_scalar(f: Callable, args: Any = (), method: Any = None, bracket: Any = None,
                fprime: Any = None, fprime2: Any = None, x0: Any = None, x1: Any = None,
                xtol: Any = None, rtol: Any = None, maxiter: Any = None, options: Any = None,
                *, on_failure: str = "raise") -> Any:  # fmt: skip
    """Like ``scipy.optimize.root_scalar``: a ``RootResults`` whose ``root`` is
    differentiable in ``args`` and the values ``f`` closes over (none flows to the bracket
    or the starting points).  ``method="newton"``/``"halley"`` without ``fprime`` get
    autodiff's derivatives.

    >>> import autodiff
    >>> from autodiff.scipy.optimize import root_scalar
    >>> cbrt = lambda a: root_scalar(lambda x: x**3 - a, bracket=(0.0, 5.0)).root
    >>> round(float(cbrt(8.0)), 12), round(float(autodiff.grad(cbrt)(8.0)), 12)
    (2.0, 0.083333333333)
    """
    who = "root_scalar"
    check_callable(f, who)
    check_options(who, "auto", on_failure)
    args = _as_args(args)
    start = x0 if x0 is not None else (bracket[0] if bracket is not None else None)
    if start is None:
        raise TransformValueError(f"{who}: give x0 or a bracket (as SciPy needs one).")

    def value(x, *a):
        out = f(x, *a)
        return out[0] if fprime is True else out

    def run(z0: np.ndarray) -> tuple:
        a = _plain(args)
        kwargs = dict(method=method, bracket=_plain(bracket), fprime=fprime, fprime2=fprime2,
                      x0=_plain(x0), x1=_plain(x1), xtol=xtol, rtol=rtol, maxiter=maxiter,
                      options=options)  # fmt: skip
        scalar = lambda x: float(value(x, *a))
        if str(method).lower() in ("newton", "halley") and fprime is None:
            kwargs["fprime"] = lambda x: float(grad(lambda y: value(y, *a))(float(x)))
            if str(method).lower() == "halley" and fprime2 is None:
                kwargs["fprime2"] = lambda x: float(grad(grad(lambda y: value(y, *a)))(float(x)))
        result = _so.root_scalar(scalar if fprime is not True else (lambda x: f(x, *a)),
                                 **kwargs)  # fmt: skip
        aux = {"success": np.asarray(bool(result.converged)),
               "iterations": np.asarray(int(result.iterations)),
               "function_calls": np.asarray(int(result.function_calls))}  # fmt: skip
        return np.asarray(result.root, dtype=z0.dtype), aux, result

    x, aux, result = _scalar_root(who, value, args, start, run, on_failure,
                                  (bracket, x0, x1, fprime, fprime2))  # fmt: skip
    if not current_interpreters():
        return result
    return _root_results(x, aux, result, getattr(result, "method", str(method)))


def _bracketing(name: str) -> Callable:
    scipy_fn = getattr(_so, name)

    def solver(f: Callable, a: Any, b: Any, args: Any = (), xtol: Any = 2e-12,
               rtol: Any = 4 * np.finfo(float).eps, maxiter: int = 100,
               full_output: bool = False, disp: bool = True, *,
               on_failure: str = "raise") -> Any:  # fmt: skip
        check_callable(f, name)
        check_options(name, "auto", on_failure)
        args = _as_args(args)
        options = dict(xtol=xtol, rtol=rtol, maxiter=maxiter, disp=disp)
        if name == "toms748":
            options["k"] = 1

        def run(z0: np.ndarray) -> tuple:
            p = _plain(args)
            x, result = scipy_fn(lambda x: float(f(x, *p)), float(_plain(a)), float(_plain(b)),
                                 full_output=True, **options)  # fmt: skip
            aux = {"success": np.asarray(bool(result.converged)),
                   "iterations": np.asarray(int(result.iterations)),
                   "function_calls": np.asarray(int(result.function_calls))}  # fmt: skip
            return np.asarray(x, dtype=z0.dtype), aux, result

        x, aux, result = _scalar_root(name, f, args, a, run, on_failure, (a, b))
        if not current_interpreters():
            return (x, result) if full_output else x
        return (x, _root_results(x, aux, result, name)) if full_output else x

    solver.__name__ = solver.__qualname__ = name
    solver.__doc__ = f"""Like ``scipy.optimize.{name}``: the root of ``f`` in ``[a, b]``,
        differentiable in ``args`` and the values ``f`` closes over (not in ``a`` and ``b``:
        the root does not move with the bracket).

        >>> import autodiff
        >>> from autodiff.scipy.optimize import {name}
        >>> cbrt = lambda c: {name}(lambda x: x**3 - c, 0.0, 5.0)
        >>> round(float(autodiff.grad(cbrt)(8.0)), 8)
        0.08333333
        """
    return solver


brentq = _bracketing("brentq")
brenth = _bracketing("brenth")
ridder = _bracketing("ridder")
bisect = _bracketing("bisect")
toms748 = _bracketing("toms748")


def newton(func: Callable, x0: Any, fprime: Any = None, args: Any = (), tol: Any = 1.48e-8,
           maxiter: int = 50, fprime2: Any = None, x1: Any = None, rtol: Any = 0.0,
           full_output: bool = False, disp: bool = True, *,
           on_failure: str = "raise") -> Any:  # fmt: skip
    """Like ``scipy.optimize.newton`` (Newton's method with ``fprime``, the secant method
    without, Halley's with ``fprime2``; elementwise for an array ``x0``): the root,
    differentiable in ``args`` and the values ``func`` closes over.

    >>> import numpy as np, autodiff
    >>> from autodiff.scipy.optimize import newton
    >>> sqrt = lambda a: newton(lambda x: x**2 - a, np.ones(2))
    >>> autodiff.jacfwd(sqrt)(np.array([4.0, 9.0])).round(8).tolist()
    [[0.25, 0.0], [0.0, 0.16666667]]
    """
    who = "newton"
    check_callable(func, who)
    check_options(who, "auto", on_failure)
    args = _as_args(args)
    array = anp.ndim(anp.asarray(x0)) > 0

    def run(z0: np.ndarray) -> tuple:
        p = _plain(args)
        plain = lambda fn: None if fn is None else (lambda x: fn(x, *p))
        out = _so.newton(lambda x: func(x, *p), z0 if array else float(z0), fprime=plain(fprime),
                         tol=tol, maxiter=maxiter, fprime2=plain(fprime2), x1=_plain(x1),
                         rtol=rtol, full_output=True, disp=disp)  # fmt: skip
        if array:
            x, converged, _ = out
            aux = {"success": np.asarray(converged, bool), "iterations": np.full(z0.shape, -1),
                   "function_calls": np.full(z0.shape, -1)}  # fmt: skip
            return np.asarray(x, dtype=z0.dtype), aux, out
        x, result = out
        aux = {"success": np.asarray(bool(result.converged)),
               "iterations": np.asarray(int(result.iterations)),
               "function_calls": np.asarray(int(result.function_calls))}  # fmt: skip
        return np.asarray(x, dtype=z0.dtype), aux, result

    x, aux, result = _scalar_root(who, func, args, x0, run, on_failure, (x1, fprime, fprime2))
    if not full_output:
        return x
    if not current_interpreters():
        return result if array else (x, result)
    if array:  # SciPy's namedtuple (root, converged, zero_der), with the traced root
        return _NewtonResults(x, aux["success"], np.zeros(anp.shape(x), bool))
    return x, _root_results(x, aux, result, "newton")


_NewtonResults = collections.namedtuple("_NewtonResults", ["root", "converged", "zero_der"])


def fixed_point(func: Callable, x0: Any, args: Any = (), xtol: Any = 1e-8, maxiter: int = 500,
                method: str = "del2", *, implicit_solve: Any = "auto",
                on_failure: str = "raise") -> Any:  # fmt: skip
    """Like ``scipy.optimize.fixed_point``: ``x = func(x, *args)``, differentiable in
    ``args`` and the values ``func`` closes over (``(I - ∂func/∂x) dx = ∂func/∂θ dθ``).

    >>> import autodiff, autodiff.numpy as anp
    >>> from autodiff.scipy.optimize import fixed_point
    >>> x_of = lambda a: fixed_point(lambda x: anp.cos(a * x), 0.5)
    >>> x = float(x_of(1.0)); dx = float(autodiff.grad(x_of)(1.0))
    >>> bool(abs(dx - (-x * anp.sin(x)) / (1 + anp.sin(x))) < 1e-7)
    True
    """
    who = "fixed_point"
    check_callable(func, who)
    check_options(who, implicit_solve, on_failure)
    args = _as_args(args)
    start = anp.asarray(x0)
    start = start if anp.result_type(start).kind == "f" else anp.astype(start, np.float64)
    shape = anp.shape(start)

    def residual(x):  # on x flattened
        return x - anp.ravel(func(anp.reshape(x, shape), *args))

    def run(z0: np.ndarray) -> tuple:
        p = _plain(args)
        x = _so.fixed_point(lambda y: func(y, *p), z0.reshape(shape), xtol=xtol,
                            maxiter=maxiter, method=method)  # fmt: skip
        return np.asarray(x, dtype=z0.dtype).ravel(), {"success": np.asarray(True)}, x

    x, _, result = _solve(who, residual, anp.ravel(start), run, {"success": np.asarray(True)},
                          (func, args), implicit_solve, on_failure)  # fmt: skip
    if not current_interpreters():
        return result
    return anp.reshape(x, shape)
