"""Sparse matrices whose values are traced: products, direct solves, SciPy's operators.

A sparse matrix here is its values ``data`` (an operand: traced, batched, staged like any
array) on a fixed ``Pattern`` (CSR: ``indptr``, ``indices``, ``shape``; a static
parameter, plain index arrays).  Derivatives with respect to the values live on the
pattern: the cotangent of ``data`` in ``y = A x`` is ``ct[row] * x[col]``, the sparse
outer product, never a dense matrix.

- ``sparse_matvec_p(data, x, *, pattern, transpose)``: ``A @ x`` or ``Aᵀ @ x`` (``x`` a
  vector or a matrix of columns), bilinear; its sparsity rule is the pattern's.
- ``spsolve_p(data, b, *, pattern, transpose, lu_options)``: ``A⁻¹ b`` or ``A⁻ᵀ b`` by
  SuperLU (``lu_options``: SciPy's ``splu`` arguments, as ``(name, value)`` pairs).  The
  factorisation is kept (``factorization``, by the values' content and those options)
  and reused by every solve with the same values: the adjoint solve of a gradient, the
  tangent solve of a ``jvp``, the right-hand sides of a ``vmap``, ``splu(A).solve``.
- ``linear_operator_p(x, *, op, transpose)``: a constant ``scipy.sparse.linalg.
  LinearOperator`` applied to a traced ``x`` (``rmatvec`` is its transpose).

Imported by ``autodiff.scipy.sparse`` (SciPy is optional).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import scipy.sparse as _sparse
import scipy.sparse.linalg as _spla

from autodiff.core.arrays import dtype_of, shape_of
from autodiff.core.graph import ShapedArray
from autodiff.core.index_sets import ALL, Edges, Gather, Groups, Sparsity
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor, linear_taylor, multilinear_taylor
from autodiff.rules import compositions as _comp
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import move_to_front
from autodiff.rules._scipy import scipy_impl

__all__ = ["Pattern", "linear_operator_p", "sparse_matvec", "sparse_matvec_p", "spsolve_p"]


class Pattern:
    """A sparse matrix's structure in CSR form, and what the rules derive from it (each
    entry's row, the pattern of the transpose): a static parameter, equal by identity."""

    __slots__ = ("__weakref__", "_key", "_rows", "_sum_rows", "_transposed", "indices", "indptr",
                 "shape")  # fmt: skip

    def __init__(self, indptr: Any, indices: Any, shape: tuple[int, int]) -> None:
        self.indptr = np.asarray(indptr, np.int64)
        self.indices = np.asarray(indices, np.int64)
        self.shape = (int(shape[0]), int(shape[1]))
        for a in (self.indptr, self.indices):
            a.flags.writeable = False
        self._rows: np.ndarray | None = None
        self._key: tuple | None = None
        self._transposed: tuple[Pattern, np.ndarray] | None = None
        self._sum_rows: Pattern | None = None

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    @property
    def key(self) -> tuple:
        """The pattern's content, hashed (two patterns built alike share factorisations)."""
        if self._key is None:
            self._key = (self.shape, hash(self.indptr.tobytes()), hash(self.indices.tobytes()))
        return self._key

    def same(self, other: Pattern) -> bool:
        return other is self or (other.shape == self.shape and np.array_equal(
            other.indptr, self.indptr) and np.array_equal(other.indices, self.indices))  # fmt: skip

    @property
    def rows(self) -> np.ndarray:
        """The row of each stored entry."""
        if self._rows is None:
            rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
            rows.flags.writeable = False
            self._rows = rows
        return self._rows

    def matrix(self, data: Any) -> Any:
        """The SciPy ``csr_array`` of plain ``data`` on this pattern (no copy)."""
        return _sparse.csr_array((data, self.indices, self.indptr), shape=self.shape)

    def transposed(self) -> tuple[Pattern, np.ndarray]:
        """The pattern of ``Aᵀ`` and the permutation taking ``A``'s values to its."""
        if self._transposed is None:
            t = self.matrix(np.arange(self.nnz, dtype=np.float64)).T.tocsr()
            t.sort_indices()
            pattern = Pattern(t.indptr, t.indices, t.shape)
            self._transposed = (pattern, t.data.astype(np.int64))
        return self._transposed

    def sum_rows(self) -> Pattern:
        """The pattern of the ``m x nnz`` matrix summing each row's entries (its values
        ones): ``A @ x`` of values batched is that matrix times the products."""
        if self._sum_rows is None:
            self._sum_rows = Pattern(self.indptr, np.arange(self.nnz), (self.shape[0], self.nnz))
        return self._sum_rows

    def __repr__(self) -> str:
        return f"Pattern({self.shape[0]}x{self.shape[1]}, nnz={self.nnz})"


def _out_shape(pattern: Pattern, transpose: bool, x_shape: tuple) -> tuple:
    return ((pattern.shape[1] if transpose else pattern.shape[0]), *x_shape[1:])


def _entries(pattern: Pattern, transpose: bool) -> tuple[np.ndarray, np.ndarray]:
    """(output index, input index) of each stored entry of ``A`` (or ``Aᵀ``)."""
    return (pattern.indices, pattern.rows) if transpose else (pattern.rows, pattern.indices)


def outer_on_pattern(u: Any, v: Any, pattern: Pattern, transpose: bool) -> Any:
    """``u vᵀ`` (summed over trailing columns) read at the stored entries: the cotangent
    of the values of ``A`` in ``A x`` (``u`` the output's cotangent, ``v`` = ``x``)."""
    out_idx, in_idx = _entries(pattern, transpose)
    prod = _comp.take(u, out_idx, axis=0) * _comp.take(v, in_idx, axis=0)
    return (
        _red.sum(prod, axis=tuple(range(1, len(shape_of(prod)))))
        if len(shape_of(prod)) > 1
        else prod
    )


# --- sparse_matvec ------------------------------------------------------------------------------


def _matvec_impl(data, x, *, pattern, transpose):
    a = pattern.matrix(data)
    return np.asarray((a.T if transpose else a) @ x)


def _matvec_batch(args, dims, *, pattern, transpose):
    (data, x), (dd, xd) = args, dims
    if dd is None:  # the matrix shared: the examples are more columns
        x = move_to_front(x, xd)
        size, rest = shape_of(x)[0], shape_of(x)[1:]
        cols = _shp.reshape(_comp.moveaxis(x, 0, -1), (rest[0], math.prod(rest[1:]) * size))
        y = sparse_matvec_p.bind(data, cols, pattern=pattern, transpose=transpose)
        y = _shp.reshape(y, (shape_of(y)[0], *rest[1:], size))
        return y, len(shape_of(y)) - 1
    data = move_to_front(data, dd)
    size = shape_of(data)[0]
    x = _shp.broadcast_to(x[None], (size, *shape_of(x))) if xd is None else move_to_front(x, xd)
    out_idx, in_idx = _entries(pattern, transpose)
    prod = _shp.reshape(data, (size, pattern.nnz) + (1,) * (len(shape_of(x)) - 2)) * _comp.take(
        x, in_idx, axis=1)  # fmt: skip
    # sum each output's products: a sparse product with the pattern of ones that does so
    rows = pattern.transposed()[0] if transpose else pattern
    summing = rows.sum_rows()
    order = np.argsort(out_idx, kind="stable")
    products = _comp.moveaxis(_comp.take(prod, order, axis=1), 0, -1)  # (nnz, ..., size)
    flat = _shp.reshape(products, (pattern.nnz, math.prod(shape_of(products)[1:])))
    ones = np.ones(pattern.nnz, dtype_of(flat))
    y = sparse_matvec_p.bind(ones, flat, pattern=summing, transpose=False)
    y = _shp.reshape(y, (summing.shape[0], *shape_of(products)[1:]))
    return y, len(shape_of(y)) - 1


def _matvec_shape(data, x, *, pattern, transpose):
    return ShapedArray(_out_shape(pattern, transpose, x.shape), np.result_type(data.dtype, x.dtype))


def _matvec_sparsity(data, x, *, pattern, transpose):
    """Output ``i`` reads the values of its row and the elements of ``x`` they multiply;
    each term is one value times one element (for Hessians)."""
    if len(x.shape if isinstance(x, ShapedArray) else np.shape(x)) != 1:
        return Sparsity([ALL, ALL], [(0, 1)])
    out_idx, in_idx = _entries(pattern, transpose)
    m = _out_shape(pattern, transpose, (0,))[0]
    reads = [Groups(out_idx, np.arange(m), n_groups=m), Edges(out_idx, in_idx)]
    terms = [Gather(np.arange(pattern.nnz)), Gather(in_idx)]
    return Sparsity(reads, [(0, 1)], terms=terms, n_terms=pattern.nnz)


def _matvec_jvp_data(t, ans, data, x, *, pattern, transpose):
    return sparse_matvec_p.bind(t, x, pattern=pattern, transpose=transpose)


def _matvec_jvp_x(t, ans, data, x, *, pattern, transpose):
    return sparse_matvec_p.bind(data, t, pattern=pattern, transpose=transpose)


def _matvec_vjp_data(ct, ans, data, x, *, pattern, transpose):
    return outer_on_pattern(ct, x, pattern, transpose)


def _matvec_vjp_x(ct, ans, data, x, *, pattern, transpose):
    return sparse_matvec_p.bind(data, ct, pattern=pattern, transpose=not transpose)


_MATMUL = "scipy.sparse.csr_array.__matmul__"
sparse_matvec_p = Primitive(
    "sparse_matvec",
    scipy_impl(_sparse.csr_array.__matmul__, _matvec_impl, name=_MATMUL),
    jvp=[_matvec_jvp_data, _matvec_jvp_x],
    vjp=[_matvec_vjp_data, _matvec_vjp_x],
    vjp_reads=[(1,), (0,)],
    batch=_matvec_batch,
    shape=_matvec_shape,
    sparsity=_matvec_sparsity,
)
sparse_matvec_p.def_taylor(multilinear_taylor(sparse_matvec_p))  # bilinear: Leibniz's rule


def sparse_matvec(data: Any, x: Any, pattern: Pattern, transpose: bool = False) -> Any:
    """``A @ x`` (``Aᵀ @ x`` with ``transpose``) for ``A`` of values ``data`` on ``pattern``."""
    return sparse_matvec_p.bind(data, x, pattern=pattern, transpose=transpose)


# --- spsolve --------------------------------------------------------------------------------------


class _Factorizations:
    """SuperLU factorisations by the content of the values and the pattern: a solve with
    the same matrix reuses one (the forward and the adjoint solve of a gradient, every
    example of a vmap over right-hand sides, a matrix assembled again alike).  Bounded."""

    def __init__(self, maxsize: int = 8) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[tuple, tuple] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, data: np.ndarray, pattern: Pattern, lu_options: tuple) -> Any:
        data = np.ascontiguousarray(data)
        key = (pattern.key, data.dtype.str, lu_options, hash(data.tobytes()))
        with self._lock:
            found = self._entries.get(key)
            if found is not None and found[0].same(pattern) and np.array_equal(found[1], data):
                self._entries.move_to_end(key)
                return found[2]
        try:
            lu = _spla.splu(pattern.matrix(data).tocsc(), **lu_kwargs(lu_options))
        except RuntimeError as e:  # "Factor is exactly singular"
            raise np.linalg.LinAlgError(f"spsolve: the matrix is singular ({e})") from None
        with self._lock:
            self._entries[key] = (pattern, data.copy(), lu)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return lu


factorization = _Factorizations()


def lu_options_of(**kwargs: Any) -> tuple:
    """SciPy's ``splu`` arguments given (not None) as a primitive's hashable parameter
    (its ``options`` dict as pairs too)."""
    pairs = []
    for name, value in sorted(kwargs.items()):
        if value is not None:
            pairs.append((name, tuple(sorted(value.items())) if name == "options" else value))
    return tuple(pairs)


def lu_kwargs(lu_options: tuple) -> dict:
    return {k: dict(v) if k == "options" else v for k, v in lu_options}


def _spsolve_impl(data, b, *, pattern, transpose, lu_options):
    lu = factorization.get(data, pattern, lu_options)
    dtype = np.result_type(data, b, np.float32)
    return np.asarray(lu.solve(np.asarray(b, dtype), trans="T" if transpose else "N"))


def _spsolve_jvp(tangents, ans, data, b, *, pattern, transpose, lu_options):
    """``A dx = db - dA x``: the same factorisation."""
    t_data, t_b = tangents
    rhs = t_b - sparse_matvec_p.bind(t_data, ans, pattern=pattern, transpose=transpose)
    return spsolve_p.bind(data, rhs, pattern=pattern, transpose=transpose, lu_options=lu_options)


def _spsolve_vjp(ct, ans, data, b, *, pattern, transpose, lu_options):
    """``w = A⁻ᵀ ct`` (the same factorisation, transposed): ``ct_b = w``, and the values'
    cotangent the sparse outer product ``-w xᵀ`` on the pattern."""
    w = spsolve_p.bind(data, ct, pattern=pattern, transpose=not transpose, lu_options=lu_options)
    return [-outer_on_pattern(w, ans, pattern, transpose), w]


def _spsolve_batch(args, dims, *, pattern, transpose, lu_options):
    (data, b), (dd, bd) = args, dims
    params = dict(pattern=pattern, transpose=transpose, lu_options=lu_options)
    if dd is None:  # one factorisation, the examples more right-hand sides
        b = move_to_front(b, bd)
        size, rest = shape_of(b)[0], shape_of(b)[1:]
        cols = _shp.reshape(_comp.moveaxis(b, 0, -1), (rest[0], math.prod(rest[1:]) * size))
        x = spsolve_p.bind(data, cols, **params)
        x = _shp.reshape(x, (rest[0], *rest[1:], size))
        return x, len(shape_of(x)) - 1
    data = move_to_front(data, dd)
    b = None if bd is None else move_to_front(b, bd)
    size = shape_of(data)[0]
    if size == 0:
        one = shape_of(args[1]) if b is None else shape_of(b)[1:]
        return np.zeros((0, *one), np.result_type(dtype_of(data), dtype_of(args[1]), np.float32)), 0
    outs = [spsolve_p.bind(data[i], args[1] if b is None else b[i], **params)
            for i in range(size)]  # fmt: skip
    return _shp.stack(outs), 0


def _spsolve_sparsity(data, b, *, pattern, transpose, lu_options):
    """Every element of ``x`` reads every value (``A⁻¹`` is dense but for a reducible
    pattern); column ``j`` of ``x`` reads column ``j`` of ``b`` alone.  Non-linear in
    the values, bilinear in values and ``b``."""
    shape = b.shape if isinstance(b, ShapedArray) else np.shape(b)
    if len(shape) != 2:
        return Sparsity([ALL, ALL], [(0, 0), (0, 1)])
    column = np.tile(np.arange(shape[1]), shape[0])  # (element (i, j), row-major: j)
    return Sparsity([ALL, Groups(column, column, n_groups=shape[1])], [(0, 0), (0, 1)])


def _spsolve_shape(data, b, **params):
    return ShapedArray(b.shape, np.result_type(data.dtype, b.dtype, np.float32))


spsolve_p = Primitive(
    "spsolve",
    scipy_impl(_spla.spsolve, _spsolve_impl),
    jvp=_spsolve_jvp,
    vjp=_spsolve_vjp,
    batch=_spsolve_batch,
    shape=_spsolve_shape,
    sparsity=_spsolve_sparsity,
)
spsolve_p.def_taylor(jvp_taylor(spsolve_p))  # from its JVP rule (exact; one factorisation)


# --- SciPy's LinearOperator -----------------------------------------------------------------------


def _operator_impl(x, *, op, transpose):
    if np.ndim(x) == 1:
        return np.asarray(op.rmatvec(x) if transpose else op.matvec(x))
    return np.asarray(op.rmatmat(x) if transpose else op.matmat(x))


def _operator_batch(args, dims, *, op, transpose):
    x = move_to_front(args[0], dims[0])
    size, rest = shape_of(x)[0], shape_of(x)[1:]
    cols = _shp.reshape(_comp.moveaxis(x, 0, -1), (rest[0], math.prod(rest[1:]) * size))
    y = linear_operator_p.bind(cols, op=op, transpose=transpose)
    y = _shp.reshape(y, (shape_of(y)[0], *rest[1:], size))
    return y, len(shape_of(y)) - 1


def _operator_shape(x, *, op, transpose):
    rows = op.shape[1] if transpose else op.shape[0]
    return ShapedArray((rows, *x.shape[1:]), np.result_type(op.dtype, x.dtype))


def _operator_linear(t, ans, x, *, op, transpose):
    return linear_operator_p.bind(t, op=op, transpose=transpose)


def _operator_vjp(ct, ans, x, *, op, transpose):
    return linear_operator_p.bind(ct, op=op, transpose=not transpose)


linear_operator_p = Primitive(
    "linear_operator",
    scipy_impl(_spla.LinearOperator.matvec, _operator_impl, name="LinearOperator.matvec"),
    jvp=[_operator_linear],
    vjp=[_operator_vjp],
    vjp_reads=[()],
    batch=_operator_batch,
    shape=_operator_shape,
)
linear_operator_p.def_taylor(linear_taylor(linear_operator_p))  # linear
