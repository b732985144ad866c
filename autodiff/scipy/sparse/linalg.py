"""``autodiff.scipy.sparse.linalg``: SciPy's sparse solvers, differentiable.

Each takes SciPy's arguments and calls SciPy for the solve.  The matrix may be an
``autodiff.scipy.sparse.csr_array`` whose values are traced (derivatives reach them, as
arrays like its ``data``: the sparse outer product on the pattern, never a dense
matrix), a SciPy sparse array or ``LinearOperator`` (constant), or a dense array (traced
or not); the right-hand side may be traced.  ``grad``, ``jvp``, ``hessian``, ``vmap`` and
``jit`` all work:

- ``spsolve``, ``splu``, ``factorized``: SuperLU, through ``spsolve_p``
  (``rules/sparse.py``): the tangent solve of ``jvp``, the adjoint solve of ``grad`` and
  the right-hand sides of a ``vmap`` reuse the forward solve's factorisation;
- ``cg``, ``minres`` (symmetric), ``gmres``, ``bicgstab``: ``custom_linear_solve``, the
  derivatives' solves by the same method and tolerances (``gmres`` and ``bicgstab``
  transpose the matrix and the preconditioner), ``info`` returned as SciPy does; a
  solve that did not converge (``info != 0``) raises ``ConvergenceError`` under a
  differentiating transform unless ``on_failure="warn"`` or ``"ignore"``, except a
  breakdown (``info < 0``, BiCGSTAB's on a right-hand side of round-off), which GMRES
  finishes there;
- ``lsqr``: the least-squares solution (with ``damp``) as the root of the normal
  equations ``Aᵀ(A x - b) + damp² x = 0``, differentiated through them (conjugate
  gradients on ``AᵀA + damp² I``, matrix-free, by default).
"""

from __future__ import annotations

from typing import Any

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.sparse.linalg")

import numpy as np  # noqa: E402
import scipy.sparse as _sparse  # noqa: E402
import scipy.sparse.linalg as _spla  # noqa: E402

import autodiff.numpy as anp  # noqa: E402
from autodiff.core.arrays import array_library, backend_error  # noqa: E402
from autodiff.core.stack import current_interpreters  # noqa: E402
from autodiff.core.tracer import Tracer, stood_in  # noqa: E402
from autodiff.errors import TransformTypeError, TransformValueError  # noqa: E402
from autodiff.interpreters.staging import captured_value  # noqa: E402
from autodiff.rules.sparse import (  # noqa: E402
    factorization,
    linear_operator_p,
    lu_options_of,
    spsolve_p,
)
from autodiff.scipy._implicit import (  # noqa: E402
    check_converged,
    check_options,
    differentiating,
    tangent_solver,
)
from autodiff.scipy.sparse import csr_array  # noqa: E402
from autodiff.transforms.closures import closure_of  # noqa: E402
from autodiff.transforms.solvers import linear_solve  # noqa: E402
from autodiff.transforms.solvers import root as _root  # noqa: E402

__all__ = ["bicgstab", "cg", "factorized", "gmres", "lsqr", "minres", "spsolve", "splu"]


class _Operator:
    """A matrix of any kind the solvers take: its product with a (traced) vector and with
    its transpose, and its plain form for SciPy (where the closed-over values stand in)."""

    def __init__(self, a: Any, who: str) -> None:
        if _sparse.issparse(a):
            a = csr_array(a)
        if isinstance(a, _spla.LinearOperator):
            self.kind = "operator"
        elif isinstance(a, csr_array):
            self.kind = "sparse"
        elif isinstance(a, Tracer) or hasattr(a, "shape"):
            self.kind = "dense"
            a = _kept(anp.asarray(a))
            if anp.ndim(a) != 2:
                raise TransformValueError(f"{who}: A must be a matrix, got shape {anp.shape(a)}.")
        else:
            raise TransformTypeError(
                f"{who}: A must be a csr_array, a SciPy sparse array or LinearOperator, or a "
                f"dense matrix; got a {type(a).__name__}."
            )
        self.a = a
        self.shape = tuple(a.shape)

    def matvec(self, v: Any) -> Any:
        if self.kind == "operator":
            return linear_operator_p.bind(v, op=self.a, transpose=False)
        return self.a @ v

    def rmatvec(self, v: Any) -> Any:
        if self.kind == "operator":
            return linear_operator_p.bind(v, op=self.a, transpose=True)
        return v @ self.a if self.kind == "sparse" else anp.swapaxes(self.a, 0, 1) @ v

    def plain(self, transpose: bool = False) -> Any:
        """What SciPy computes with (inside a solver's implementation)."""
        if self.kind == "operator":
            return self.a.T if transpose else self.a
        if self.kind == "sparse":
            m = self.a.pattern.matrix(np.asarray(stood_in(self.a.data)))
            return m.T.tocsr() if transpose else m
        m = np.asarray(stood_in(self.a))
        return m.T if transpose else m


def _rhs(b: Any, n: int, who: str) -> Any:
    if _sparse.issparse(b):
        raise TransformTypeError(
            f"{who}: b must be dense (a sparse right-hand side is not supported)."
        )
    b = _kept(anp.asarray(b))
    if anp.ndim(b) not in (1, 2) or anp.shape(b)[0] != n:
        raise TransformValueError(
            f"{who}: b of shape {anp.shape(b)} does not fit a matrix of {n} rows."
        )
    return b if anp.result_type(b).kind in "fc" else anp.astype(b, np.float64)


def _plain(x: Any) -> Any:
    return stood_in(x) if isinstance(x, Tracer) else x


def _kept(x: Any) -> Any:
    """A plain array as the solve will read it: a read-only copy (under ``jit`` the solve
    runs at replay, and a later write into the caller's array must not reach it, as
    ``jit`` captures closed-over arrays by value)."""
    return captured_value(x) if isinstance(x, np.ndarray) else x


def _numpy_only(who: str, *xs: Any) -> None:
    """SciPy's solvers take NumPy's arrays: another library's raises, naming ``who``."""
    for x in xs:
        while isinstance(x, Tracer):
            x = x._inner
        if array_library(x) is not None:
            raise backend_error(f"scipy.sparse.linalg.{who}", x)


# --- direct solves ------------------------------------------------------------------------------


def _sparse_of(a: Any, who: str) -> csr_array:
    """``a`` as a ``csr_array`` (a dense matrix too: its pattern is full)."""
    if isinstance(a, csr_array):
        return a
    if _sparse.issparse(a):
        return csr_array(a)
    if isinstance(a, Tracer) or hasattr(a, "shape"):
        dense = anp.asarray(a)
        if anp.ndim(dense) != 2:
            raise TransformValueError(f"{who}: A must be a matrix, got shape {anp.shape(dense)}.")
        m, n = anp.shape(dense)
        full = csr_array(_sparse.csr_array(np.ones((m, n))))
        return full.with_data(anp.ravel(dense))
    raise TransformTypeError(
        f"{who}: A must be a csr_array, a SciPy sparse array or a dense matrix, got a "
        f"{type(a).__name__}."
    )


def spsolve(A: Any, b: Any, permc_spec: Any = None, use_umfpack: bool = True) -> Any:
    """Like ``scipy.sparse.linalg.spsolve``: ``x`` with ``A x = b`` (``b`` a vector or a
    matrix of columns), differentiable in ``A``'s values and ``b``.

    >>> import numpy as np, autodiff, autodiff.scipy.sparse as asp
    >>> from autodiff.scipy.sparse.linalg import spsolve
    >>> indptr, indices = np.array([0, 2, 4]), np.array([0, 1, 0, 1])
    >>> x_of = lambda v: spsolve(asp.csr_array((v, indices, indptr), shape=(2, 2)),
    ...                          np.array([1.0, 2.0]))
    >>> v = np.array([4.0, 1.0, 1.0, 3.0])  # [[4, 1], [1, 3]]
    >>> x_of(v).round(6).tolist()
    [0.090909, 0.636364]
    >>> autodiff.grad(lambda v: x_of(v)[0])(v).round(6).tolist()  # -(A^-T e0) x^T on the pattern
    [-0.024793, -0.173554, 0.008264, 0.057851]
    """
    _numpy_only("spsolve", A, b)
    a = _sparse_of(A, "spsolve")
    if a.shape[0] != a.shape[1]:
        raise TransformValueError(f"spsolve: A must be square, got shape {a.shape}.")
    b = _rhs(b, a.shape[0], "spsolve")
    return spsolve_p.bind(a.data, b, pattern=a.pattern, transpose=False,
                          lu_options=lu_options_of(permc_spec=permc_spec))  # fmt: skip


class SuperLU:
    """``splu(A)``: ``solve(rhs, trans='N')`` differentiable in ``A``'s values and ``rhs``,
    every solve reusing one factorisation (the factors ``L``, ``U``, ``perm_r``,
    ``perm_c`` are SciPy's, for plain values)."""

    def __init__(self, a: csr_array, lu_options: tuple) -> None:
        self.a, self.lu_options = a, lu_options
        self.shape, self.nnz = a.shape, a.nnz
        if not isinstance(a.data, Tracer):
            self._lu = factorization.get(np.asarray(a.data), a.pattern, lu_options)

    def solve(self, rhs: Any, trans: str = "N") -> Any:
        _numpy_only("splu", rhs)
        if trans not in ("N", "T", "H"):
            raise TransformValueError(f"SuperLU.solve: trans is 'N', 'T' or 'H', got {trans!r}.")
        if trans == "H" and anp.result_type(self.a.data).kind == "c":
            raise TransformValueError(
                "SuperLU.solve(trans='H') of complex values is not supported."
            )
        b = _rhs(rhs, self.shape[0], "SuperLU.solve")
        return spsolve_p.bind(self.a.data, b, pattern=self.a.pattern, transpose=trans != "N",
                              lu_options=self.lu_options)  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        if name in ("L", "U", "perm_r", "perm_c"):
            if isinstance(self.a.data, Tracer):
                raise TransformTypeError(
                    f"SuperLU.{name}: the matrix's values are traced; the factors carry no "
                    f"derivatives (solve with them instead)."
                )
            return getattr(self._lu, name)
        raise AttributeError(name)


def splu(A: Any, permc_spec: Any = None, diag_pivot_thresh: Any = None, relax: Any = None,
         panel_size: Any = None, options: Any = None) -> SuperLU:  # fmt: skip
    """Like ``scipy.sparse.linalg.splu``: a factorisation whose ``solve`` is
    differentiable in ``A``'s values and the right-hand side (the other arguments are
    SciPy's, given to its factorisation, kept with it).

    >>> import numpy as np, autodiff.scipy.sparse as asp
    >>> from autodiff.scipy.sparse.linalg import splu
    >>> lu = splu(asp.csr_array(np.array([[4.0, 1.0], [1.0, 3.0]])))
    >>> lu.solve(np.array([1.0, 2.0])).round(6).tolist()
    [0.090909, 0.636364]
    """
    _numpy_only("splu", A)
    a = _sparse_of(A, "splu")
    if a.shape[0] != a.shape[1]:
        raise TransformValueError(f"splu: A must be square, got shape {a.shape}.")
    return SuperLU(
        a,
        lu_options_of(
            permc_spec=permc_spec,
            diag_pivot_thresh=diag_pivot_thresh,
            relax=relax,
            panel_size=panel_size,
            options=options,
        ),
    )


def factorized(A: Any) -> Any:
    """Like ``scipy.sparse.linalg.factorized``: ``solve(b)`` for ``A``, factored once."""
    return splu(A).solve


# --- Krylov methods -------------------------------------------------------------------------------


def _transposed_preconditioner(m: Any) -> Any:
    if m is None:
        return None
    if isinstance(m, _spla.LinearOperator):
        return m.T
    return m.T if hasattr(m, "T") else m


def _krylov(name: str) -> Any:
    method = getattr(_spla, name)
    symmetric = name in ("cg", "minres")

    def solver(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
               maxiter: Any = None, M: Any = None, callback: Any = None,
               on_failure: str = "raise", **options: Any) -> tuple:  # fmt: skip
        check_options(name, "auto", on_failure)
        _numpy_only(name, A, b)
        op = _Operator(A, name)
        if op.shape[0] != op.shape[1]:
            raise TransformValueError(f"{name}: A must be square, got shape {op.shape}.")
        b = _rhs(b, op.shape[0], name)
        if anp.ndim(b) != 1:
            raise TransformValueError(f"{name}: b must be a vector, got shape {anp.shape(b)}.")
        tolerances = {"rtol": rtol} if name == "minres" else {"rtol": rtol, "atol": atol}
        start = _kept(x0)
        differentiated = differentiating()

        def run(rhs: Any, transpose: bool) -> tuple:
            m = _transposed_preconditioner(M) if transpose else M
            x, info = method(op.plain(transpose), np.asarray(rhs), x0=_plain(start), M=m,
                             maxiter=maxiter, callback=callback, **tolerances,
                             **options)  # fmt: skip
            rhs = np.asarray(rhs)
            if info < 0 and differentiated:  # a breakdown (of bicgstab): where the solution
                # is differentiated, GMRES (which cannot break down) finishes the solve
                x, info = _spla.gmres(op.plain(transpose), rhs, x0=x, M=m, maxiter=maxiter,
                                      rtol=rtol, atol=atol or 0.0)  # fmt: skip
            check_converged(info == 0, f"info={info}", name, on_failure, differentiated)
            return np.asarray(x, dtype=np.result_type(rhs, np.float32)), np.asarray(int(info))

        if not current_interpreters():
            x, info = run(b, False)
            return x, int(info)
        x, info = linear_solve(op.matvec, b, lambda mv, rhs: run(rhs, False),
                               lambda mv, rhs: run(rhs, True), symmetric, True, name,
                               ("A @ x", name, f"{name} (transposed)"), np.asarray(0))  # fmt: skip
        return x, info

    solver.__name__ = solver.__qualname__ = name
    kind = "symmetric A" if symmetric else "A (the transposed solves use Aᵀ and Mᵀ)"
    solver.__doc__ = f"""Like ``scipy.sparse.linalg.{name}``: ``(x, info)`` for ``A x = b``,
        ``x`` differentiable in ``A`` (a ``csr_array``'s values, a dense matrix) and ``b``,
        for {kind}; the derivatives' solves use the same method and tolerances, so they are
        as accurate as ``rtol``.  ``info != 0`` under a differentiating transform raises
        ``ConvergenceError`` unless ``on_failure="warn"`` or ``"ignore"``.

        >>> import numpy as np, autodiff
        >>> from autodiff.scipy.sparse.linalg import {name}
        >>> a = np.array([[4.0, 1.0], [1.0, 3.0]])
        >>> x_of = lambda b: {name}(a, b, rtol=1e-12)[0]
        >>> autodiff.jacfwd(x_of)(np.array([1.0, 2.0])).round(6).tolist()  # A^-1
        [[0.272727, -0.090909], [-0.090909, 0.363636]]
        """
    return solver


cg = _krylov("cg")
minres = _krylov("minres")
gmres = _krylov("gmres")
bicgstab = _krylov("bicgstab")


# --- lsqr ---------------------------------------------------------------------------------------

_LSQR_SUCCESS = (0, 1, 2, 4, 5)  # istop: solved, a least-squares solution, to machine precision


def lsqr(A: Any, b: Any, damp: Any = 0.0, atol: float = 1e-6, btol: float = 1e-6,
         conlim: float = 1e8, iter_lim: Any = None, show: bool = False, calc_var: bool = False,
         x0: Any = None, *, implicit_solve: Any = "cg-matfree",
         on_failure: str = "raise") -> tuple:  # fmt: skip
    """Like ``scipy.sparse.linalg.lsqr``: ``(x, istop, itn, r1norm, r2norm, anorm, acond,
    arnorm, xnorm, var)`` for ``min |A x - b|² + damp² |x|²`` (``A`` of any shape), ``x``
    and the norms of ``x`` and the residual differentiable in ``A``, ``b`` and ``damp``,
    through the normal equations.  ``istop`` 3, 6 or 7 (ill-conditioned, out of
    iterations) under a differentiating transform raises unless ``on_failure`` says.

    >>> import numpy as np, autodiff
    >>> from autodiff.scipy.sparse.linalg import lsqr
    >>> a = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])  # a line through 3 points
    >>> fit = lambda y: lsqr(a, y, atol=1e-12, btol=1e-12)[0]
    >>> fit(np.array([1.0, 2.0, 4.0])).round(6).tolist()
    [0.833333, 1.5]
    >>> autodiff.jacfwd(fit)(np.array([1.0, 2.0, 4.0])).round(6).tolist()  # pinv(a)
    [[0.833333, 0.333333, -0.166667], [-0.5, 0.0, 0.5]]
    """
    who = "lsqr"
    check_options(who, implicit_solve, on_failure)
    _numpy_only(who, A, b)
    op = _Operator(A, who)
    m, n = op.shape
    b = _rhs(b, m, who)
    if anp.ndim(b) != 1:
        raise TransformValueError(f"{who}: b must be a vector, got shape {anp.shape(b)}.")
    options = dict(atol=atol, btol=btol, conlim=conlim, iter_lim=iter_lim, show=show,
                   calc_var=calc_var)  # fmt: skip
    differentiated, start = differentiating(), _kept(x0)
    aux_like = {"istop": np.asarray(1), "itn": np.asarray(0), "anorm": np.asarray(0.0),
                "acond": np.asarray(0.0), "arnorm": np.asarray(0.0),
                "var": np.zeros(n)}  # fmt: skip

    def run(_: Any, guess: Any) -> tuple:
        out = _spla.lsqr(op.plain(), np.asarray(_plain(b)), damp=float(_plain(damp)),
                         x0=_plain(start), **options)  # fmt: skip
        istop = int(out[1])
        check_converged(istop in _LSQR_SUCCESS, f"istop={istop}", who, on_failure, differentiated)
        aux = {"istop": np.asarray(istop), "itn": np.asarray(int(out[2])),
               "anorm": np.asarray(float(out[5])), "acond": np.asarray(float(out[6])),
               "arnorm": np.asarray(float(out[7])), "var": np.asarray(out[9], float)}  # fmt: skip
        return np.asarray(out[0], dtype=guess.dtype), aux

    if not current_interpreters():  # SciPy's own result
        return _spla.lsqr(op.plain(), np.asarray(b), damp=damp, x0=x0, **options)

    def normal(x):
        return op.rmatvec(op.matvec(x) - b) + damp**2 * x

    guess = anp.zeros(n, anp.result_type(b))
    closure = closure_of(normal, A, b, damp, x0)
    x, aux = _root(normal, guess, run, tangent_solver(implicit_solve, who), has_aux=True,
                   aux_like=aux_like, closure=closure, check=False)  # fmt: skip
    r1 = anp.linalg.norm(b - op.matvec(x))
    return _lsqr_tuple(x, aux, r1, anp.sqrt(r1**2 + damp**2 * anp.sum(x**2)), anp.linalg.norm(x))


def _lsqr_tuple(x: Any, aux: dict, r1: Any, r2: Any, xnorm: Any) -> tuple:
    return (x, aux["istop"], aux["itn"], r1, r2, aux["anorm"], aux["acond"], aux["arnorm"], xnorm,
            aux["var"])  # fmt: skip
