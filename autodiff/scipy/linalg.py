"""``autodiff.scipy.linalg``: like ``scipy.linalg``, differentiable and batchable.

The primitives (``solve_triangular``, ``lu_factor``, ``expm``, ...) are declared, with
their rules, in ``autodiff/rules/scipy_linalg.py``; their compositions (``cholesky``,
``cho_factor``, ``cho_solve``, ``lu_solve``, ``block_diag``) are here.
The rest of ``scipy.linalg`` has no rules here: ``anp.linalg`` has ``solve``,
``inv``, ``det``, ``eigh``, ``svd``, ``qr``, ``pinv`` with NumPy's signatures.
"""

from __future__ import annotations

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.linalg")


import numpy as np  # noqa: E402
import scipy.linalg as _reference  # noqa: E402

from autodiff.core.arrays import ndim_of, shape_of  # noqa: E402
from autodiff.core.numpy_args import wrap_namespace as _wrap_namespace  # noqa: E402
from autodiff.numpy import _shape  # noqa: E402
from autodiff.rules import linalg as _lin  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
from autodiff.rules import sorting as _srt  # noqa: E402
from autodiff.rules.linalg import _check_square  # noqa: E402
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

_compositions = ["cholesky", "cho_factor", "cho_solve", "lu_solve", "block_diag"]


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
