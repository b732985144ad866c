"""``autodiff.scipy.linalg``: like ``scipy.linalg``, differentiable and batchable.

The primitives (``solve_triangular``, ``lu_factor``, ``expm``, ...) are declared, with
their rules, in ``autodiff/rules/scipy_linalg.py``; their compositions (``solve`` with
SciPy's ``assume_a``, ``cholesky``, ``cho_factor``, ``cho_solve``, ``lu_solve``,
``block_diag``) are here.  The rest of ``scipy.linalg`` has no rules here: ``anp.linalg``
has ``inv``, ``det``, ``eigh``, ``svd``, ``qr``, ``pinv`` with NumPy's signatures.
"""

from __future__ import annotations

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.linalg")


import numpy as np  # noqa: E402
import scipy.linalg as _reference  # noqa: E402

from autodiff.core.arrays import is_complex, ndim_of, shape_of  # noqa: E402
from autodiff.core.numpy_args import wrap_namespace as _wrap_namespace  # noqa: E402
from autodiff.numpy import _shape  # noqa: E402
from autodiff.rules import compositions as _comp  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import linalg as _lin  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
from autodiff.rules import sorting as _srt  # noqa: E402
from autodiff.rules.linalg import _T, _check_square  # noqa: E402
from autodiff.rules.scipy_linalg import *  # noqa: E402, F403
from autodiff.rules.scipy_linalg import __all__ as _primitives  # noqa: E402
from autodiff.rules.scipy_linalg import (  # noqa: E402
    _check_rhs,
    _matrix_rhs,
    _rows,
    _trans,
    pivots_to_permutation_p,
    solve_triangular,
)

_compositions = ["solve", "cholesky", "cho_factor", "cho_solve", "lu_solve", "block_diag"]


# --- solve: the general solver, and the structures SciPy's assume_a names -------------------

_STRUCTURES = {None: "gen", "gen": "gen", "general": "gen", "sym": "sym", "symmetric": "sym",
               "her": "her", "hermitian": "her", "pos": "pos", "positive definite": "pos",
               "diagonal": "diagonal", "tridiagonal": "tridiagonal", "banded": "gen",
               "upper triangular": "upper", "lower triangular": "lower"}  # fmt: skip


def _from_triangle(a, lower: bool, conjugate: bool):
    """The symmetric (Hermitian) matrix whose ``lower`` (else upper) triangle ``a`` holds:
    the other triangle's entries are not read."""
    part = _comp.tril(a) if lower else _comp.triu(a)
    strict = _comp.tril(a, -1) if lower else _comp.triu(a, 1)
    mirror = _T(strict)
    if conjugate and is_complex(a):
        mirror = _elt.conj(mirror)
        part = part - 1j * _comp.tril(_comp.triu(_elt.imag(part)))  # its diagonal real, as ?HESV
    return part + mirror


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False):  # fmt: skip
    """Like scipy.linalg.solve: ``x`` with ``a @ x == b`` (``a.T @ x == b`` if
    ``transposed``), stacks of matrices included; ``b`` is a vector when 1-D.

    ``assume_a`` says which entries of ``a`` are read, and the derivatives say so (zero in
    the others): ``'sym'``/``'symmetric'``, ``'her'``/``'hermitian'`` and
    ``'pos'``/``'positive definite'`` read the ``lower`` (default: upper) triangle;
    ``'upper triangular'``/``'lower triangular'`` that
    triangle; ``'diagonal'`` the diagonal; ``'tridiagonal'`` three diagonals;
    ``'gen'``/``'general'``, ``'banded'`` and None (SciPy then detects the structure from
    the values) the whole matrix.  ``overwrite_a``, ``overwrite_b`` and ``check_finite``
    are accepted and ignored.

    >>> import numpy as np, autodiff, autodiff.scipy.linalg as sla
    >>> a = np.array([[4.0, 1.0], [9.0, 3.0]])  # read as symmetric from its upper triangle
    >>> sla.solve(a, np.array([1.0, 2.0]), assume_a="sym").tolist()
    [0.09090909090909091, 0.6363636363636364]
    >>> autodiff.grad(lambda a: sla.solve(a, np.ones(2), assume_a="sym").sum())(a)[1, 0]
    np.float64(0.0)
    """
    if assume_a not in _STRUCTURES:
        raise ValueError(f"solve: assume_a must be one of {sorted(k for k in _STRUCTURES if k)} "
                         f"or None, not {assume_a!r}")  # fmt: skip
    kind = _STRUCTURES[assume_a]
    _check_square(a, "solve")
    _check_rhs(a, b, "solve")
    if transposed:
        if is_complex(a):
            raise NotImplementedError("solve: scipy.linalg.solve(..., transposed=True) is not "
                                      "implemented for complex a (as in SciPy)")  # fmt: skip
        a = _T(a)
        lower = not lower  # the triangle read is transposed too
        kind = {"upper": "lower", "lower": "upper"}.get(kind, kind)
    if kind in ("upper", "lower"):  # (an LU solve of the triangle read: any library)
        a = _comp.triu(a) if kind == "upper" else _comp.tril(a)
    elif kind == "diagonal":
        d = _shape.diagonal(a, axis1=-2, axis2=-1)
        return b / d if ndim_of(b) == 1 else b / _shp.expand_dims(d, -1)
    elif kind == "tridiagonal":
        a = _comp.triu(_comp.tril(a, 1), -1)
    elif kind in ("sym", "her", "pos"):  # (an LU solve of the matrix read: any library)
        a = _from_triangle(a, bool(lower), conjugate=kind != "sym")
    return _lin.solve(a, b)


# --- Cholesky ------------------------------------------------------------------------------


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """Like scipy.linalg.cholesky: upper ``U`` with ``a == U^H @ U`` (``lower=True``:
    lower ``L`` with ``a == L @ L^H``); only that triangle of ``a`` is read.

    >>> import numpy as np, autodiff.scipy.linalg as sla
    >>> sla.cholesky(np.array([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 1.0], [0.0, 2.0]]
    """
    return _lin.cholesky(a, upper=not lower)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """Like scipy.linalg.cho_factor: ``(c, lower)`` for ``cho_solve``.

    ``c`` is ``cholesky(a, lower)``: zeros in the other triangle, as in JAX
    (SciPy leaves whatever ``a`` had there, which ``cho_solve`` never reads).

    >>> import numpy as np, autodiff.scipy.linalg as sla
    >>> c, lower = sla.cho_factor(np.array([[4.0, 2.0], [2.0, 5.0]]), lower=True)
    >>> c.tolist(), lower
    ([[2.0, 0.0], [1.0, 2.0]], True)
    """
    return cholesky(a, lower=lower), bool(lower)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Like scipy.linalg.cho_solve: ``x`` with ``a @ x == b``, from ``cho_factor(a)``.

    Reads only the factor's triangle.  Differentiable in ``c`` and ``b``.

    >>> import numpy as np, autodiff.scipy.linalg as sla
    >>> a = np.array([[4.0, 2.0], [2.0, 5.0]])
    >>> x = sla.cho_solve(sla.cho_factor(a), np.array([1.0, 2.0]))
    >>> bool(np.allclose(a @ x, [1.0, 2.0]))
    True
    """
    c, lower = c_and_lower
    _check_square(c, "cho_solve")
    _check_rhs(c, b, "cho_solve")
    b, vec = _matrix_rhs(b)
    if lower:  # a = L L^H
        y = solve_triangular(c, b, lower=True)
        x = solve_triangular(c, y, trans=2, lower=True)
    else:  # a = U^H U
        y = solve_triangular(c, b, trans=2, lower=False)
        x = solve_triangular(c, y, lower=False)
    return _shp.squeeze(x, -1) if vec else x


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Like scipy.linalg.lu_solve: ``x`` with ``op(a) @ x == b`` from ``lu_factor(a)``.

    Differentiable in ``lu`` and ``b``.

    >>> import numpy as np, autodiff.scipy.linalg as sla
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> x = sla.lu_solve(sla.lu_factor(a), np.array([5.0, 6.0]))
    >>> bool(np.allclose(a @ x, [5.0, 6.0]))
    True
    """
    lu, piv = lu_and_piv
    trans = _trans(trans, "lu_solve")
    _check_square(lu, "lu_solve")
    _check_rhs(lu, b, "lu_solve")
    b, vec = _matrix_rhs(b)
    perm = pivots_to_permutation_p.bind(piv)
    upper = {"lower": False, "unit_diagonal": False}
    unit_lower = {"lower": True, "unit_diagonal": True}
    if trans == 0:  # a = P L U
        y = solve_triangular(lu, _rows(b, perm), **unit_lower)
        x = solve_triangular(lu, y, **upper)
    else:  # op(a) = op(U) op(L) P^T
        y = solve_triangular(lu, b, trans=trans, **upper)
        z = solve_triangular(lu, y, trans=trans, **unit_lower)
        x = _rows(z, _srt.argsort(perm, axis=-1))
    return _shp.squeeze(x, -1) if vec else x


def block_diag(*arrs):
    """Like scipy.linalg.block_diag: the arrays (0-d, 1-d as one row, or 2-d) along the
    diagonal of a matrix, zeros elsewhere.

    >>> import numpy as np, autodiff.scipy.linalg as sla
    >>> sla.block_diag(np.array([[1.0, 2.0]]), np.array(3.0)).tolist()
    [[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]]
    """
    if not arrs:
        return np.empty((1, 0))
    blocks = [_shape.atleast_2d(x) for x in arrs]
    bad = [i for i, x in enumerate(blocks) if ndim_of(x) > 2]
    if bad:
        raise ValueError(f"block_diag: arguments {bad} have more than 2 dimensions")
    widths = [shape_of(x)[1] for x in blocks]
    total = sum(widths)
    rows, left = [], 0
    for x, width in zip(blocks, widths):
        rows.append(_shp.pad(x, ((0, 0), (left, total - left - width))))
        left += width
    return _shp.concatenate(rows, axis=0)


__all__ = [*_primitives, *_compositions]
_wrap_namespace(globals(), _reference)  # lists and tuples as SciPy takes them
