"""What the differentiable SciPy solvers share: the implicit function theorem's linear
solve, and what to do with a solution that did not converge.

A solver's solution ``x(θ)`` of ``F(x, θ) = 0`` (a gradient, a residual, a KKT system)
is differentiated by ``custom_root`` (``transforms/solvers.py``): its tangent solves
``∂F/∂x · dx = -∂F/∂θ · dθ``, and reverse mode the transposed system.  How that linear
system is solved is the user's choice, ``implicit_solve=``:

- ``"dense"``: ``∂F/∂x`` materialised (one ``vmap`` of JVPs) and LU-factored;
- ``"sparse"``: its pattern read from the program (``jacobian_sparsity``), coloured, the
  matrix assembled from one JVP per colour into ``scipy.sparse`` and factored by
  SuperLU: for large problems whose Hessian or Jacobian is sparse (a PDE, a chain);
- ``"cg"``, ``"minres"`` (symmetric systems: a Hessian), ``"gmres"``, ``"bicgstab"``:
  SciPy's Krylov method on the same sparse matrix, or matrix-free (one JVP per product)
  with ``"cg-matfree"`` and the like, where even the pattern is too large to detect;
- ``"auto"`` (the default): dense up to ``DENSE_AT_MOST`` unknowns, sparse above;
- a callable ``solve(matvec, b)``, like ``custom_root``'s ``tangent_solve``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as _sparse
import scipy.sparse.linalg as _spla

from autodiff.core.stack import current_interpreters
from autodiff.errors import AutodiffWarning, ConvergenceError, TransformValueError
from autodiff.interpreters.batching import BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.staging import StagingInterpreter
from autodiff.transforms.jacobians import jacfwd, jacobian

__all__ = ["check_converged", "differentiating", "tangent_solver"]

DENSE_AT_MOST = 1000  # unknowns; above, "auto" assembles the sparse matrix
KRYLOV = {"cg": _spla.cg, "minres": _spla.minres, "gmres": _spla.gmres,
          "bicgstab": _spla.bicgstab}  # fmt: skip
KINDS = ("auto", "dense", "sparse", *KRYLOV, *(f"{k}-matfree" for k in KRYLOV))
KRYLOV_RTOL = 1e-12  # the implicit solve's tolerance: derivatives as exact as the solution
ON_FAILURE = ("raise", "warn", "ignore")


def check_options(who: str, implicit_solve: Any, on_failure: Any) -> None:
    if not (callable(implicit_solve) or implicit_solve in KINDS):
        raise TransformValueError(
            f"{who}(..., implicit_solve={implicit_solve!r}): the implicit system's solver is "
            f"one of {', '.join(map(repr, KINDS))}, or a function solve(matvec, b)."
        )
    if on_failure not in ON_FAILURE:
        raise TransformValueError(
            f"{who}(..., on_failure={on_failure!r}): one of 'raise' (the default: a solution "
            f"that did not converge is not differentiated), 'warn' or 'ignore'."
        )


def differentiating() -> bool:
    """Whether a transform that differentiates runs (``grad``, ``jvp``, a user's
    transform): a solution found now will have its derivative taken."""
    return any(i.active and not isinstance(i, _NOT_DIFFERENTIATING) for i in current_interpreters())


_NOT_DIFFERENTIATING = (BatchInterpreter, StagingInterpreter, ExplainInterpreter)


def check_converged(success: bool, message: Any, who: str, on_failure: str,
                    differentiated: bool) -> None:  # fmt: skip
    """Refuse to differentiate a solution the solver reports unconverged (``success`` is
    False), as ``on_failure`` says; without a differentiating transform the result is
    returned as SciPy's is, ``success`` and all."""
    if success or not differentiated or on_failure == "ignore":
        return
    text = (
        f"{who} did not converge ({message}), and the implicit derivative of its result holds "
        f"at a solution only: tighten the solver (raise maxiter, loosen tol, a better x0)"
    )
    if on_failure == "warn":
        warnings.warn(f"{text}; differentiating it anyway (on_failure='warn').",
                      AutodiffWarning, stacklevel=2)  # fmt: skip
        return
    raise ConvergenceError(
        f"{text}, or pass on_failure='warn' or 'ignore' to differentiate it anyway."
    )


def tangent_solver(kind: Any, who: str) -> Callable:
    """``solve(g, y)``: ``x`` with ``g(x) = y`` for a linear ``g`` of 1-d vectors (the
    linearised optimality condition, or its transpose), by ``kind`` (see the module)."""
    if callable(kind):
        return kind

    def solve(g: Callable, y: Any) -> Any:
        y = np.asarray(y)
        chosen = kind if kind != "auto" else ("dense" if y.size <= DENSE_AT_MOST else "sparse")
        if chosen == "dense":
            matrix = np.reshape(np.asarray(jacfwd(g)(y)), (y.size, y.size))
            try:
                return np.linalg.solve(matrix, y.ravel()).reshape(y.shape)
            except np.linalg.LinAlgError as e:
                raise _singular(who, e) from None
        name, _, matfree = chosen.partition("-")
        operator: Any
        if matfree:
            matvec = lambda v: np.ravel(g(v.reshape(y.shape)))
            operator = _spla.LinearOperator((y.size, y.size), dtype=y.dtype, matvec=matvec)
        else:
            operator = _sparse.csc_array(jacobian(g, sparsity="auto")(y))
        if name == "sparse":
            with warnings.catch_warnings():
                warnings.simplefilter("error", _spla.MatrixRankWarning)
                try:
                    return np.asarray(_spla.spsolve(operator, y.ravel())).reshape(y.shape)
                except _spla.MatrixRankWarning as e:
                    raise _singular(who, e) from None
        tolerances = {"rtol": KRYLOV_RTOL} if name == "minres" else {"rtol": KRYLOV_RTOL,
                                                                        "atol": 0.0}  # fmt: skip
        x, info = KRYLOV[name](operator, y.ravel(), maxiter=10 * y.size, **tolerances)
        if info != 0:
            raise ConvergenceError(
                f"{who}: the implicit system's {name} did not converge (info={info}); pass "
                f"implicit_solve='sparse' or 'dense' (a direct solve), or a preconditioned "
                f"solve(matvec, b) of your own."
            )
        return x.reshape(y.shape)

    return solve


def _singular(who: str, error: Exception) -> ConvergenceError:
    return ConvergenceError(
        f"{who}: the implicit system is singular ({error}): the solution is not an isolated "
        f"one (a flat direction of the objective, degenerate or redundant active "
        f"constraints), so it has no derivative."
    )
