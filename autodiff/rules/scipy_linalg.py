"""scipy.linalg: triangular solves, Cholesky and LU factorisations, matrix functions
(``autodiff.scipy.linalg``).  Needs SciPy.

Every function accepts stacks of matrices (leading batch dimensions), as SciPy
does; ``b`` is a vector only when it is 1-D, otherwise a (stack of) matrices.
Primitives: ``solve_triangular``, ``lu_factor``, ``expm``, ``sqrtm``.  The
compositions (``cholesky``, ``cho_factor``, ``cho_solve``, ``lu_solve``,
``block_diag``) are in ``autodiff/scipy/linalg.py``.

Derivatives (``X^T`` transposes the last two axes; ``op`` is the ``trans`` option):

* solve_triangular reads one triangle of ``a`` (without the diagonal if
  ``unit_diagonal``), as LAPACK does: ``dx = op(T)^-1 (db - op(dT) x)`` where ``T``
  is that triangle, and the derivative in the other entries is zero.
* lu_factor (``P^T a = L U``, packed as ``L - I + U``; square matrices):
  ``F = L^-1 P^T da U^-1``, ``dL = L tril(F, -1)``, ``dU = triu(F) U``; the pivots
  are integers (no derivative).  They are fixed by the point: derivatives hold
  where the pivoting does not change, i.e. almost everywhere.
* expm and sqrtm, primary matrix functions, by the block-triangular identity
  ``f([[A, E], [0, A]]) = [[f(A), L_f(A, E)], [0, f(A)]]``: the JVP is ``L_f(A, dA)``
  and the VJP ``L_f(A^T, ct)``, with ``f`` itself, so every order is there.  sqrtm
  needs a matrix with a square root that is a smooth function of it (no
  eigenvalues on the closed negative real axis).

Complex numbers follow JAX: each VJP is the non-conjugating transpose of its JVP.
The implementations are SciPy's, on NumPy arrays only (``rules/_scipy.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.linalg as _sl

from autodiff.core.arrays import (
    array_like,
    broadcast_shapes,
    dtype_of,
    eye_like,
    is_complex,
    ndim_of,
    shape_of,
)
from autodiff.core.index_sets import Sparsity
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor
from autodiff.rules import compositions as _comp
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import products as _prod
from autodiff.rules import shape as _shp
from autodiff.rules import sorting as _srt
from autodiff.rules._helpers import implements, move_to_front, to_front_padded, unbroadcast
from autodiff.rules._scipy import empty_result, scipy_impl
from autodiff.rules._sparsity import (
    problem_edges,
    problem_groups,
    shape_of_operand,
    stacked,
    triangle_key,
)
from autodiff.rules.linalg import _T, _check_square, _stack_batch

__all__ = ["solve_triangular", "lu_factor", "expm", "sqrtm"]

_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


def _trans(trans: Any, name: str) -> int:
    if trans not in _TRANS:
        raise ValueError(f"{name}: trans must be 0, 1, 2, 'N', 'T' or 'C', not {trans!r}")
    return _TRANS[trans]


def _mm(a, b):
    return _prod.matmul(a, b)


def _op(m, trans: int):
    """``m``, ``m^T`` or ``m^H`` for ``trans`` 0, 1, 2."""
    if trans == 0:
        return m
    return _elt.conj(_T(m)) if trans == 2 and is_complex(m) else _T(m)


def _triangle(a, lower: bool, unit_diagonal: bool) -> np.ndarray:
    """The mask of the entries of ``a`` a triangular solve reads (a constant)."""
    n = shape_of(a)[-1]
    dtype = np.finfo(dtype_of(a)).dtype if dtype_of(a).kind in "fc" else np.float64
    mask = np.tri(n, k=-1 if unit_diagonal else 0, dtype=dtype, like=array_like(a))
    return mask if lower else mask.T


def _matrix_rhs(b):
    """``b`` as a (stack of) matrices, and whether it was a vector."""
    vec = ndim_of(b) == 1
    return (_shp.expand_dims(b, -1) if vec else b), vec


def _check_rhs(a, b, name: str):
    if ndim_of(b) == 0 or shape_of(b)[-1 if ndim_of(b) == 1 else -2] != shape_of(a)[-1]:
        raise ValueError(f"{name}: shapes of a {shape_of(a)} and b {shape_of(b)} are incompatible")


def _stacked_pair_batch(prim: Primitive):
    """Batch rule for ``f(a, b)`` of a (stack of) square matrices ``a`` and a (stack of)
    matrices ``b``, whose stacks broadcast: batch axes go first, padded to one rank."""

    def batch(args, dims, **params):
        (a, b), (ad, bd) = args, dims
        a_stack = ndim_of(a) - (ad is not None) - 2
        b_stack = ndim_of(b) - (bd is not None) - 2
        stack = max(a_stack, b_stack)
        a = a if ad is None else to_front_padded(a, ad, stack - a_stack)
        b = b if bd is None else to_front_padded(b, bd, stack - b_stack)
        return prim.bind(a, b, **params), 0

    return batch


# --- solve_triangular ------------------------------------------------------------------


def _solve_transposed(a, ct, *, trans, lower, unit_diagonal):
    """``op(T)^-T ct``: the cotangent of ``b`` before summing broadcast axes away."""
    params = {"lower": lower, "unit_diagonal": unit_diagonal}
    if trans == 0:
        return solve_triangular_p.bind(a, ct, trans=1, **params)
    if trans == 1:
        return solve_triangular_p.bind(a, ct, trans=0, **params)
    # op(T)^T = conj(T): solve with T on conjugated values
    return _elt.conj(solve_triangular_p.bind(a, _elt.conj(ct), trans=0, **params))


def _solve_triangular_jvp_a(t, ans, a, b, **params):
    d = t * _triangle(a, params["lower"], params["unit_diagonal"])
    return -solve_triangular_p.bind(a, _mm(_op(d, params["trans"]), ans), **params)


def _solve_triangular_vjp_a(ct, ans, a, b, **params):
    m = -_mm(_solve_transposed(a, ct, **params), _T(ans))  # the cotangent of op(T)
    trans = params["trans"]
    ct_t = m if trans == 0 else (_T(m) if trans == 1 else _elt.conj(_T(m)))
    ct_t = ct_t * _triangle(a, params["lower"], params["unit_diagonal"])
    return unbroadcast(ct_t, shape_of(a))


def _solve_triangular_impl(a, b, *, trans, lower, unit_diagonal):
    stack = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if 0 in stack:  # SciPy refuses empty stacks
        return empty_result((*stack, *b.shape[-2:]), a, b)
    return _sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


solve_triangular_p = Primitive(
    "solve_triangular",
    scipy_impl(_sl.solve_triangular, _solve_triangular_impl),
    vjp=[
        _solve_triangular_vjp_a,
        lambda ct, ans, a, b, **p: unbroadcast(_solve_transposed(a, ct, **p), shape_of(b)),
    ],
    jvp=[_solve_triangular_jvp_a, lambda t, ans, a, b, **p: solve_triangular_p.bind(a, t, **p)],
)


@solve_triangular_p.def_sparsity
def _solve_triangular_sparsity(a, b, *, trans, lower, unit_diagonal):
    # Substitution: solving with a lower triangular matrix (a, or a's transpose when a is
    # upper), row i of the solution reads rows 0..i of b's column and the triangle of a
    # those rows span (its diagonal unless unit); with an upper one, rows i..n-1.
    sa, sb = shape_of_operand(a), shape_of_operand(b)
    n, vector = sa[-1], len(sb) == 1
    cols = 1 if vector else sb[-1]
    out = sa[:-2] + sb if vector else broadcast_shapes(sa[:-2], sb[:-2]) + sb[-2:]
    bk = 1 if vector else 2
    forward = lower != (trans != 0)
    if cols * n**3 * math.prod(out[: len(out) - bk]) > 6 * 10**7:  # too many pairs: by column
        col = np.zeros(n, np.int64) if vector else np.arange(cols)
        reads = [
            problem_groups(sa, 2, out, bk, triangle_key(n, lower, diagonal=not unit_diagonal)),
            problem_groups(sb, bk, out, bk, col, col, cols),
        ]
        return Sparsity(reads, [(0, 0), (0, 1)])
    tri = triangle_key(n, lower, diagonal=not unit_diagonal) == 0
    a_out, a_in, b_out, b_in = [], [], [], []
    for i in range(n):
        rows = np.arange(i + 1) if forward else np.arange(i, n)
        p, q = np.nonzero(tri[np.ix_(rows, rows)])
        flat_a = rows[p] * n + rows[q]
        for j in range(cols):
            a_out.append(np.full(len(flat_a), i * cols + j))
            a_in.append(flat_a)
            b_out.append(np.full(len(rows), i * cols + j))
            b_in.append(rows * cols + j)
    cat = np.concatenate
    reads = [
        problem_edges(sa, 2, out, bk, cat(a_out), cat(a_in)),
        problem_edges(sb, bk, out, bk, cat(b_out), cat(b_in)),
    ]
    return Sparsity(reads, [(0, 0), (0, 1)])


solve_triangular_p.def_batch(_stacked_pair_batch(solve_triangular_p))
solve_triangular_p.def_taylor(jvp_taylor(solve_triangular_p))  # from its JVP rule (exact)


@implements(solve_triangular_p)
def solve_triangular(
    a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True
):
    """Like scipy.linalg.solve_triangular: ``x`` with ``op(a) @ x == b`` for a
    triangular ``a`` (``op``: ``trans`` 0/'N', 1/'T' transposes, 2/'C' conjugate-transposes).

    Only the ``lower`` (default: upper) triangle of ``a`` is read, without its
    diagonal if ``unit_diagonal``; derivatives say so (zero in the other
    entries).  ``overwrite_b`` and ``check_finite`` are accepted and ignored.

    >>> import numpy as np, autodiff, autodiff.scipy.linalg as sla
    >>> a = np.array([[2.0, 0.0], [1.0, 4.0]])
    >>> sla.solve_triangular(a, np.array([2.0, 9.0]), lower=True).tolist()
    [1.0, 2.0]
    >>> autodiff.grad(lambda b: sla.solve_triangular(a, b, lower=True).sum())(np.ones(2)).tolist()
    [0.375, 0.25]
    """
    trans = _trans(trans, "solve_triangular")
    if trans == 2 and not is_complex(a):
        trans = 1  # the conjugate transpose of a real matrix is its transpose
    _check_square(a, "solve_triangular")
    _check_rhs(a, b, "solve_triangular")
    b, vec = _matrix_rhs(b)
    flags = {"lower": bool(lower), "unit_diagonal": bool(unit_diagonal)}
    x = solve_triangular_p.bind(a, b, trans=trans, **flags)
    return _shp.squeeze(x, -1) if vec else x


# --- LU ----------------------------------------------------------------------------------


def _pivots_to_permutation_impl(piv):
    """LAPACK's row interchanges (row ``i`` swapped with row ``piv[i]``, in turn) as
    the permutation ``perm`` with ``(P^T a)[i] == a[perm[i]]``."""
    n = piv.shape[-1]
    perm = np.broadcast_to(np.arange(n), piv.shape).copy()
    for i in range(n):  # over rows, each step vectorised over the stack
        j = piv[..., i : i + 1].astype(np.intp)
        here = perm[..., i : i + 1].copy()
        perm[..., i : i + 1] = np.take_along_axis(perm, j, -1)
        np.put_along_axis(perm, j, here, -1)
    return perm


def _last_axis_batch(prim: Primitive):
    """Batch rule for a function of the last axis, mapped over the others."""

    def batch(args, dims, **params):
        x, d = args[0], dims[0]
        if d == ndim_of(x) - 1:
            x, d = move_to_front(x, d), 0
        return prim.bind(x, **params), d

    return batch


pivots_to_permutation_p = Primitive(
    "lu_pivots_to_permutation",
    scipy_impl(_pivots_to_permutation_impl, name="scipy.linalg.lu_solve"),
    differentiable=False,
)
pivots_to_permutation_p.def_batch(_last_axis_batch(pivots_to_permutation_p))


def _rows(x, perm):
    """``x[..., perm, :]``: the rows of (a stack of) matrices ``x`` in the order ``perm``."""
    stack = np.broadcast_shapes(shape_of(x)[:-2], shape_of(perm)[:-1])
    x = _shp.broadcast_to(x, (*stack, *shape_of(x)[-2:]))
    index = _shp.broadcast_to(_shp.expand_dims(perm, -1), (*stack, shape_of(perm)[-1], 1))
    return _comp.take_along_axis(x, index, axis=-2)


def _unit_lower(lu):
    return _comp.tril(lu, -1) + eye_like(shape_of(lu)[-1], dtype_of(lu), lu)


def _lu_jvp(tangents, ans, a):
    lu, piv = ans
    pt = _rows(tangents[0], pivots_to_permutation_p.bind(piv))  # P^T da
    x = solve_triangular_p.bind(lu, pt, trans=0, lower=True, unit_diagonal=True)  # L^-1 P^T da
    f = _T(solve_triangular_p.bind(lu, _T(x), trans=1, lower=False, unit_diagonal=False))
    d_lu = _mm(_unit_lower(lu), _comp.tril(f, -1)) + _mm(_comp.triu(f), _comp.triu(lu))
    return d_lu, None


def _lu_vjp(cts, ans, a):
    ct, _ = cts
    lu, piv = ans
    ct_f = _comp.tril(_mm(_T(_unit_lower(lu)), _comp.tril(ct, -1)), -1) + _comp.triu(
        _mm(_comp.triu(ct), _T(_comp.triu(lu)))
    )
    y = solve_triangular_p.bind(lu, ct_f, trans=1, lower=True, unit_diagonal=True)  # L^-T ct_f
    ct_pt = _T(solve_triangular_p.bind(lu, _T(y), trans=0, lower=False, unit_diagonal=False))
    inverse = _srt.argsort(pivots_to_permutation_p.bind(piv), axis=-1)
    return [_rows(ct_pt, inverse)]  # P ct_pt


def _lu_impl(a):
    if 0 in a.shape[:-2]:  # SciPy refuses empty stacks
        return empty_result(a.shape, a), np.empty(a.shape[:-1], np.int32)
    lu, piv = _sl.lu_factor(a)
    return lu, piv


lu_factor_p = Primitive(
    "lu_factor",
    scipy_impl(_sl.lu_factor, _lu_impl),
    vjp=_lu_vjp,
    jvp=_lu_jvp,
    multiple_results=True,
)
lu_factor_p.def_batch(_stack_batch(lu_factor_p))
lu_factor_p.def_sparsity(stacked([2], outputs=2))
lu_factor_p.def_taylor(jvp_taylor(lu_factor_p))  # from its JVP rule (exact)


@implements(lu_factor_p)
def lu_factor(a, overwrite_a=False, check_finite=True):
    """Like scipy.linalg.lu_factor for (stacks of) square matrices: ``(lu, piv)`` with
    ``L - I + U`` packed in ``lu`` and LAPACK's 0-based row interchanges in ``piv``.

    Differentiable in ``a`` where the pivoting is locally constant (almost
    everywhere); ``piv`` carries no derivative.

    >>> import numpy as np, autodiff.scipy.linalg as sla
    >>> lu, piv = sla.lu_factor(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> lu.round(4).tolist(), piv.tolist()
    ([[3.0, 4.0], [0.3333, 0.6667]], [1, 1])
    """
    _check_square(a, "lu_factor")
    lu, piv = lu_factor_p.bind(a)
    return lu, piv


# --- matrix functions ---------------------------------------------------------------------


def _frechet(f, a, e):
    """``L_f(a, e)``, the derivative of the matrix function ``f`` at ``a`` along ``e``:
    the upper-right block of ``f([[a, e], [0, a]])``."""
    n = shape_of(a)[-1]
    top = _shp.concatenate([a, e], axis=-1)
    bottom = _shp.concatenate([_cre.zeros_like(e), a], axis=-1)
    return f(_shp.concatenate([top, bottom], axis=-2))[..., :n, n:]


def _matrix_function_impl(f):
    def impl(a):
        return empty_result(a.shape, a) if 0 in a.shape[:-2] else f(a)

    return impl


expm_p = Primitive(
    "expm",
    scipy_impl(_sl.expm, _matrix_function_impl(_sl.expm)),
    vjp=[lambda ct, ans, a: _frechet(expm, _T(a), ct)],
    jvp=[lambda t, ans, a: _frechet(expm, a, t)],
)
expm_p.def_sparsity(stacked([2]))
expm_p.def_batch(_stack_batch(expm_p))
expm_p.def_taylor(jvp_taylor(expm_p))  # from its JVP rule (exact)
sqrtm_p = Primitive(
    "sqrtm",
    scipy_impl(_sl.sqrtm, _matrix_function_impl(_sl.sqrtm)),
    vjp=[lambda ct, ans, a: _frechet(sqrtm, _T(a), ct)],
    jvp=[lambda t, ans, a: _frechet(sqrtm, a, t)],
)
sqrtm_p.def_sparsity(stacked([2]))
sqrtm_p.def_batch(_stack_batch(sqrtm_p))
sqrtm_p.def_taylor(jvp_taylor(sqrtm_p))  # from its JVP rule (exact)


@implements(expm_p)
def expm(A):
    """Like scipy.linalg.expm: the matrix exponential of each matrix of a stack.

    >>> import numpy as np, autodiff, autodiff.scipy.linalg as sla
    >>> sla.expm(np.zeros((2, 2))).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    >>> autodiff.grad(lambda a: sla.expm(a).trace())(np.zeros((2, 2))).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    _check_square(A, "expm")
    return expm_p.bind(A)


@implements(sqrtm_p)
def sqrtm(A, disp=True, blocksize=64):
    """Like scipy.linalg.sqrtm: the principal square root of each matrix of a stack.

    Differentiable where the root is a smooth function of ``A`` (no eigenvalue
    on the closed negative real axis).  ``disp`` and ``blocksize`` are accepted
    and ignored (SciPy deprecates them).

    >>> import numpy as np, autodiff.scipy.linalg as sla
    >>> sla.sqrtm(np.array([[4.0, 0.0], [0.0, 9.0]])).round(12).tolist()
    [[2.0, 0.0], [0.0, 3.0]]
    """
    _check_square(A, "sqrtm")
    return sqrtm_p.bind(A)
