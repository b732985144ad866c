"""``autodiff.numpy.linalg``: like ``numpy.linalg``, differentiable and batchable.

Every public name of ``numpy.linalg`` exists; those without rules are NumPy's own.

The primitives (``solve``, ``inv``, ``det``, ``eigh``, ``svd``, ``qr``, ``pinv``, ...)
are declared, with their rules, in ``autodiff/rules/linalg.py``; their compositions
(``norm``, ``lstsq``, ``matrix_power``, ``multi_dot``, ``cond``, the array API's
functions, ...) are here.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from autodiff.core.arrays import (
    array_like,
    dtype_of,
    eye_like,
    is_complex,
    ndim_of,
    normalize_axes,
    shape_of,
)
from autodiff.core.loading import load
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer
from autodiff.numpy._borrow import borrow as _borrow
from autodiff.rules import compositions as _comp
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import products as _prod
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules.linalg import *  # noqa: F403
from autodiff.rules.linalg import __all__ as _primitives
from autodiff.rules.linalg import (
    _check_matrix,
    _check_square,
    _mm,
    _real_dtype,
    inv,
    lstsq_residuals_p,
    norm_root_p,
    pinv,
    solve,
    svd,
    svdvals_p,
)

_compositions = [
    "matrix_power", "norm", "lstsq", "matrix_rank", "cond", "tensorsolve", "tensorinv",
    "multi_dot", "vector_norm", "matrix_norm", "matmul", "tensordot", "outer", "trace",
    "diagonal", "matrix_transpose", "vecdot", "cross",
]  # fmt: skip


# anp's products and shape functions a few of these call (not at import: a program that
# inverts a matrix need not load them, ~1 ms)
def _products() -> Any:
    return load("autodiff.numpy._products")


def _shape() -> Any:
    return load("autodiff.numpy._shape")


# --- lstsq, matrix_rank, cond --------------------------------------------------------------


@register_numpy(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """Like numpy.linalg.lstsq: ``(x, residuals, rank, s)`` of the least-squares problem
    ``a @ x ~ b`` (``a`` 2-D, ``b`` 1-D or 2-D); ``x`` has the smallest norm.

    ``x``, ``residuals`` and ``s`` are differentiable in ``a`` and ``b`` where the rank
    is locally constant (for instance full rank); ``rank`` is an integer.  Residuals
    are given, as in NumPy, only for full column rank and more rows than columns;
    under ``vmap`` that is decided for the whole batch (an empty array for every
    example unless every example has full rank).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> a = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> x, residuals, rank, s = anp.linalg.lstsq(a, np.array([1.0, 2.0, 3.0]))
    >>> x.tolist(), residuals.tolist(), int(rank), s.tolist()
    ([1.0, 2.0], [9.0], 2, [1.0, 1.0])
    >>> autodiff.grad(lambda b: anp.linalg.lstsq(a, b)[0].sum())(np.ones(3)).tolist()
    [1.0, 1.0, 0.0]
    """
    for name, x in (("a", a), ("b", b)):
        nd = ndim_of(x) + (x is b and ndim_of(x) == 1)
        if nd != 2:
            raise np.linalg.LinAlgError(
                f"lstsq: {nd}-dimensional array given for {name}. Array must be two-dimensional"
            )
    m, n = shape_of(a)
    if shape_of(b)[0] != m:
        raise np.linalg.LinAlgError("Incompatible dimensions")
    dtype = np.result_type(dtype_of(a), dtype_of(b), np.float16)  # NumPy's common type
    if dtype == np.float16:
        dtype = np.dtype(np.float32)
    a, b = (x if dtype_of(x) == dtype else _elt.astype(x, dtype) for x in (a, b))
    if rcond is None:  # NumPy's default, in the double precision NumPy computes in
        rcond = np.finfo(np.float64).eps * max(m, n)
    elif rcond < 0:  # LAPACK's convention: machine precision
        rcond = np.finfo(np.float64).eps
    x = _mm(pinv(a, rcond=float(rcond)), b)
    s = svdvals_p.bind(a, hermitian=False)
    rank = _elt.astype(
        _red.sum(_elt.astype(_elt.greater(s, float(rcond) * s[..., :1]), np.int32), axis=-1),
        np.int32,
    )
    real = _real_dtype(a)
    if m <= n:
        residuals = np.zeros(0, dtype=real, like=array_like(a))
    else:
        r = _red.sum(_abs2(b - _mm(a, x)), axis=0)
        r = _shp.reshape(r, (1,)) if ndim_of(b) == 1 else r
        residuals = lstsq_residuals_p.bind(r, rank, n=n)
    return x, residuals, rank, s


@register_numpy(np.linalg.matrix_rank)
def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """Like numpy.linalg.matrix_rank: the number of singular values above ``tol``
    (default ``rtol * max(s)``, ``rtol`` default ``max(M, N) * eps``).  Not
    differentiable (an integer); batchable.

    >>> import numpy as np, autodiff.numpy as anp
    >>> int(anp.linalg.matrix_rank(np.array([[1.0, 2.0], [2.0, 4.0]])))
    1
    """
    if ndim_of(A) < 2:  # NumPy: 1 unless every entry is 0 (of NumPy's, a Python int)
        rank = _elt.astype(_red.any(_elt.not_equal(A, 0)), np.intp)
        return int(rank) if isinstance(rank, (np.ndarray, np.generic)) else rank
    s = svd(A, compute_uv=False, hermitian=hermitian)
    if tol is None:
        if rtol is None:
            rtol = max(shape_of(A)[-2:]) * float(np.finfo(dtype_of(s)).eps)
        tol = _red.max(s, axis=-1, keepdims=True) * _last_axis(rtol)
    else:
        tol = _last_axis(tol)
    return _red.sum(_elt.astype(_elt.greater(s, tol), np.intp), axis=-1)


def _last_axis(x):
    """A tolerance per matrix of a stack, against its singular values (on the last axis)."""
    return _shp.expand_dims(x, -1) if ndim_of(x) else x


@register_numpy(np.linalg.cond)
def cond(x, p=None):
    """Like numpy.linalg.cond: the condition number in the norm ``p`` (None, 2, -2:
    ratios of singular values; 'fro', 'nuc', 1, -1, inf, -inf: ``norm(x, p) *
    norm(inv(x), p)``).  As in NumPy, a NaN that is not from ``x`` becomes inf; a
    singular matrix with ``p`` other than None/2/-2 raises LinAlgError (NumPy: inf).

    Derivatives follow those of ``svd(x, compute_uv=False)`` and ``norm``.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> float(anp.linalg.cond(np.diag([4.0, 2.0])))
    2.0
    >>> autodiff.grad(anp.linalg.cond)(np.diag([4.0, 2.0])).tolist()
    [[0.5, 0.0], [0.0, -1.0]]
    """
    rows, cols = _check_matrix(x, "cond")
    if rows == 0 or cols == 0:
        raise np.linalg.LinAlgError("cond is not defined on empty arrays")
    with np.errstate(all="ignore"):
        if p is None or p in (2, -2):
            s = svd(x, compute_uv=False)
            first, last = s[..., 0], s[..., -1]
            r = last / first if p == -2 else first / last
        else:
            _check_square(x, "cond")
            r = norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))
    from_nan = _elt.logical_and(
        _elt.isnan(r), _elt.logical_not(_red.any(_elt.isnan(x), axis=(-2, -1)))
    )
    return _comp.scalar_if_0d(_elt.where(from_nan, np.inf, r))


# --- matrix_power ----------------------------------------------------------------------------


@register_numpy(np.linalg.matrix_power)
def matrix_power(a, n):
    """Like numpy.linalg.matrix_power: ``a`` to the integer power ``n`` by repeated
    squaring (``n < 0``: of ``inv(a)``; ``n == 0``: the identity, a constant).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.linalg.matrix_power(np.array([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
    [[1.0, 3.0], [0.0, 1.0]]
    """
    size = _check_square(a, "matrix_power")
    try:
        n = operator.index(n)
    except TypeError as e:
        raise TypeError("exponent must be an integer") from e
    if n == 0:
        return _cre.zeros_like(a) + eye_like(size, dtype_of(a), a)
    if n < 0:
        a, n = inv(a), -n
    if n <= 3:  # NumPy's short cuts, for identical rounding
        return a if n == 1 else _mm(a, a) if n == 2 else _mm(_mm(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else _mm(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else _mm(result, z)
    return result


# --- tensorsolve, tensorinv, multi_dot -------------------------------------------------


@register_numpy(np.linalg.tensorsolve)
def tensorsolve(a, b, axes=None):
    """Like numpy.linalg.tensorsolve: ``x`` with ``tensordot(a, x, x.ndim) == b``
    (``axes``: axes of ``a`` moved to the end first), through ``solve``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> a = np.eye(6).reshape(6, 2, 3) * 2.0
    >>> anp.linalg.tensorsolve(a, np.ones(6)).tolist()
    [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]
    """
    nd = ndim_of(a)
    if axes is not None:
        order = list(range(nd))
        for k in axes:  # NumPy's order: each named axis moved to the end in turn
            order.remove(k)
            order.insert(nd, k)
        a = _shp.transpose(a, tuple(order))
    shape = shape_of(a)[-(nd - ndim_of(b)) :]
    size = math.prod(shape)
    if math.prod(shape_of(a)) != size**2:
        raise np.linalg.LinAlgError(
            "Input arrays must satisfy the requirement "
            "prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])"
        )
    x = solve(_shp.reshape(a, (size, size)), _comp.ravel(b))
    return _shp.reshape(x, shape)


@register_numpy(np.linalg.tensorinv)
def tensorinv(a, ind=2):
    """Like numpy.linalg.tensorinv: the inverse of ``a`` as a map from its last axes
    (after the first ``ind``) to its first ``ind``, through ``inv``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.linalg.tensorinv(np.eye(4).reshape(4, 2, 2) * 2.0, ind=1).shape
    (2, 2, 4)
    """
    shape = shape_of(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    size = math.prod(shape[ind:])
    inverse = inv(_shp.reshape(a, (size, -1)))
    return _shp.reshape(inverse, shape[ind:] + shape[:ind])


def _chain_order(shapes: list[tuple[int, int]]) -> list[list[int]]:
    """The cheapest parenthesisation of a matrix chain (NumPy's dynamic programme,
    ties to the first split): ``split[i][j]`` is where ``A_i ... A_j`` splits."""
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    n = len(shapes)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = -1
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] < 0 or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(arrays: list, split: list[list[int]], i: int, j: int) -> Any:
    if i == j:
        return arrays[i]
    k = split[i][j]
    return _mm(_chain(arrays, split, i, k), _chain(arrays, split, k + 1, j))


@register_numpy(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    """Like numpy.linalg.multi_dot: the product of a chain of matrices in the cheapest
    order (the first and last may be vectors), through ``matmul``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.linalg.multi_dot([np.ones(2), np.ones((2, 3)), np.ones((3, 4)), np.ones(4)]))
    24.0
    """
    if out is not None:
        raise NotImplementedError("multi_dot(..., out=...) is not supported; use the result")
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    if len(arrays) == 2:
        return _products().dot(arrays[0], arrays[1])
    first, last = ndim_of(arrays[0]), ndim_of(arrays[-1])
    if first == 1:
        arrays[0] = _shp.expand_dims(arrays[0], 0)
    if last == 1:
        arrays[-1] = _shp.expand_dims(arrays[-1], 1)
    for x in arrays:
        if ndim_of(x) != 2:
            raise np.linalg.LinAlgError(
                f"multi_dot: {ndim_of(x)}-dimensional array given. Array must be two-dimensional"
            )
    shapes = [shape_of(x) for x in arrays]
    if len(arrays) == 3:  # NumPy's closed form for three
        (a0, a1), (_, b1), (_, c1) = shapes
        left_first = a0 * a1 * b1 + a0 * b1 * c1 < a1 * b1 * c1 + a0 * a1 * c1
        a, b, c = arrays
        result = _mm(_mm(a, b), c) if left_first else _mm(a, _mm(b, c))
    else:
        result = _chain(arrays, _chain_order(shapes), 0, len(arrays) - 1)
    if first == 1 and last == 1:
        return result[0, 0]
    if first == 1 or last == 1:
        return _comp.ravel(result)
    return result


# --- norm ------------------------------------------------------------------------------------


def _abs2(x):
    """``|x|**2``, smooth everywhere (also for complex ``x``)."""
    return _elt.real(_elt.conj(x) * x) if is_complex(x) else x * x


def _root(u, p):
    """``u ** (1/p)`` of a sum ``u >= 0``, with derivative 0 where ``u == 0``."""
    if not isinstance(u, Tracer):  # no transform: NumPy's call alone
        return norm_root_p.impl(u, p=float(p))
    return norm_root_p.bind(u, p=float(p))


def _abs_power(x, p):
    """``|x| ** p``; for ``0 < p < 1`` with derivative 0 at zero entries (torch's)."""
    a = _elt.abs(x)
    if p >= 1:
        return a**p
    zero = _elt.equal(a, 0)
    return _elt.where(zero, 0.0, _elt.where(zero, 1.0, a) ** p)


def _vector_norm(x, ord, axis, keepdims):
    if ord == np.inf:
        return _red.max(_elt.abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return _red.min(_elt.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:  # the number of nonzero entries: no derivative
        nonzero = _elt.astype(_elt.not_equal(x, 0), _real_dtype(x))
        return _red.sum(nonzero, axis=axis, keepdims=keepdims)
    if ord == 1:
        return _red.sum(_elt.abs(x), axis=axis, keepdims=keepdims)
    if ord is None or ord == 2:
        return _root(_red.sum(_abs2(x), axis=axis, keepdims=keepdims), 2)
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    ord = float(ord)
    if ord > 0:
        return _root(_red.sum(_abs_power(x, ord), axis=axis, keepdims=keepdims), ord)
    # ord < 0: a zero entry makes the norm 0 (NumPy: sum = inf, inf ** (1/ord) = 0)
    a = _elt.abs(x)
    zero = _elt.equal(a, 0)
    total = _red.sum(_elt.where(zero, 1.0, a) ** ord, axis=axis, keepdims=keepdims)
    return _elt.where(_red.any(zero, axis=axis, keepdims=keepdims), 0.0, total ** (1.0 / ord))


def _distinct_diagonal(m):
    """A matrix like ``m`` (the last two axes) with singular values 1, 2, 3, ...: a stand-in
    for a zero matrix whose singular values are smooth to every order."""
    rows, cols = shape_of(m)[-2:]
    like = array_like(m)
    i = np.arange(rows, like=like)[:, None]
    return _elt.astype((i == np.arange(cols, like=like)) * (i + 1), _real_dtype(m))


def _matrix_norm(x, ord, row, col):
    if ord in (2, -2, "nuc"):
        m = _comp.moveaxis(x, (row, col), (-2, -1))
        zero = _red.all(_elt.equal(m, 0), axis=(-2, -1), keepdims=True)
        s = svd(_elt.where(zero, _distinct_diagonal(m), m), compute_uv=False)
        pick = _red.sum if ord == "nuc" else _red.max if ord == 2 else _red.min
        return _elt.where(_shp.squeeze(zero, (-2, -1)), 0.0, pick(s, axis=-1))
    if ord in (1, -1):
        pick = _red.max if ord == 1 else _red.min
        return pick(_red.sum(_elt.abs(x), axis=row), axis=col - (col > row))
    if ord in (np.inf, -np.inf):
        pick = _red.max if ord == np.inf else _red.min
        return pick(_red.sum(_elt.abs(x), axis=col), axis=row - (row > col))
    if ord in (None, "fro", "f"):
        return _root(_red.sum(_abs2(x), axis=(row, col)), 2)
    raise ValueError("Invalid norm order for matrices.")


@register_numpy(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """Like numpy.linalg.norm: vector norms (``ord`` None/2, 1, -1, inf, -inf, 0 (the
    count of nonzeros, not differentiable), any other p) over one axis, matrix
    norms (None/'fro', 'nuc', 1, -1, 2, -2, inf, -inf) over two.

    Derivatives follow those of the pieces: ``abs`` has derivative 0 at 0, ties
    in max/min share it; ord=2/-2 need a simple largest/smallest singular value.  At a
    zero vector or matrix every norm has derivative 0 (torch's and HIPS autograd's
    convention), and so do zero entries for ``0 < ord < 1`` and, for ``ord < 0``, every
    entry of a vector with a zero entry (whose norm is 0).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> float(anp.linalg.norm(np.array([3.0, 4.0])))
    5.0
    >>> autodiff.grad(anp.linalg.norm)(np.array([3.0, 4.0])).round(6).tolist()
    [0.6, 0.8]
    >>> float(anp.linalg.norm(np.ones((2, 3)), ord=1, axis=(0, 1)))
    2.0
    """
    if dtype_of(x).kind not in "fc":
        x = _elt.astype(x, np.float64)
    nd = ndim_of(x)
    if axis is None:
        if ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1):
            out = _root(_red.sum(_abs2(x)), 2)
            return _shp.reshape(out, (1,) * nd) if keepdims else _comp.scalar_if_0d(out)
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        try:
            axis = (operator.index(axis),)
        except TypeError as e:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from e
    if len(axis) == 1:
        return _comp.scalar_if_0d(_vector_norm(x, ord, normalize_axes(axis, nd), bool(keepdims)))
    if len(axis) != 2:
        raise ValueError("Improper number of dimensions to norm.")
    row, col = (normalize_axes(ax, nd)[0] for ax in axis)
    if row == col:
        raise ValueError("Duplicate axes given.")
    out = _matrix_norm(x, ord, row, col)
    if keepdims:
        shape = list(shape_of(x))
        shape[row] = shape[col] = 1
        out = _shp.reshape(out, tuple(shape))
    return _comp.scalar_if_0d(out)


# --- the array API's linalg functions ---------------------------------------------------


@register_numpy(np.linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """Like numpy.linalg.vector_norm: the vector norm over ``axis`` (None: all axes; a
    tuple: those axes taken as one vector).

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.linalg.vector_norm(np.full((2, 2), 2.0)))
    4.0
    """
    nd = ndim_of(x)
    axes = normalize_axes(axis, nd)
    rest = tuple(i for i in range(nd) if i not in axes)
    shape = shape_of(x)
    flat = _shp.reshape(_shp.transpose(x, rest + axes), (*(shape[i] for i in rest), -1))
    out = norm(flat, ord=ord, axis=-1)
    if keepdims:
        out = _shp.reshape(out, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return out


@register_numpy(np.linalg.matrix_norm)
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Like numpy.linalg.matrix_norm: the norm of each matrix over the last two axes.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.linalg.matrix_norm(np.eye(3) * 2.0, ord=2))
    2.0
    """
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


@register_numpy(np.linalg.matmul)
def matmul(x1, x2, /):
    """Like numpy.linalg.matmul (``anp.matmul``)."""
    return _prod.matmul(x1, x2)


@register_numpy(np.linalg.tensordot)
def tensordot(x1, x2, /, *, axes=2):
    """Like numpy.linalg.tensordot (``anp.tensordot``)."""
    return _products().tensordot(x1, x2, axes)


@register_numpy(np.linalg.outer)
def outer(x1, x2, /):
    """Like numpy.linalg.outer: the outer product of two vectors (1-d only).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.linalg.outer(np.ones(2), np.ones(3)).shape
    (2, 3)
    """
    if ndim_of(x1) != 1 or ndim_of(x2) != 1:
        raise ValueError(
            f"Input arrays must be one-dimensional, but they are {ndim_of(x1)=} and {ndim_of(x2)=}."
        )
    return _products().outer(x1, x2)


@register_numpy(np.linalg.trace)
def trace(x, /, *, offset=0, dtype=None):
    """Like numpy.linalg.trace: the sum of each matrix's diagonal (the last two axes)."""
    return _shape().trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


@register_numpy(np.linalg.diagonal)
def diagonal(x, /, *, offset=0):
    """Like numpy.linalg.diagonal: the diagonal of each matrix (the last two axes)."""
    return _shape().diagonal(x, offset=offset, axis1=-2, axis2=-1)


@register_numpy(np.linalg.matrix_transpose)
def matrix_transpose(x, /):
    """Like numpy.linalg.matrix_transpose (``anp.matrix_transpose``)."""
    return _shape().matrix_transpose(x)


@register_numpy(np.linalg.vecdot)
def vecdot(x1, x2, /, *, axis=-1):
    """Like numpy.linalg.vecdot (``anp.vecdot``)."""
    return _products().vecdot(x1, x2, axis=axis)


@register_numpy(np.linalg.cross)
def cross(x1, x2, /, *, axis=-1):
    """Like numpy.linalg.cross: the cross product of 3-vectors along ``axis``
    (``anp.cross`` without NumPy's deprecated 2-vectors).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.linalg.cross(np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])).tolist()
    [1.0, 0.0, 0.0]
    """
    n1, n2 = shape_of(x1)[axis], shape_of(x2)[axis]
    if n1 != 3 or n2 != 3:
        raise ValueError(
            "Both input arrays must be (arrays of) 3-dimensional vectors, "
            f"but they are {n1} and {n2} dimensional instead."
        )
    return _prod.cross(x1, x2, axis=axis)


# The rest of numpy.linalg, as NumPy's own objects (see autodiff/numpy/_borrow.py).
_borrowed, __getattr__ = _borrow(globals(), np.linalg)
_own = frozenset([*_primitives, *_compositions])
__all__ = sorted(_own | set(_borrowed))
