"""``autodiff.scipy.sparse``: sparse matrices whose values are traced.

``csr_array((data, indices, indptr), shape=...)`` and ``coo_array((data, (row, col)),
shape=...)`` take SciPy's constructor arguments, and a SciPy sparse array; ``data`` may
be a traced array (the values of an assembled stiffness matrix, a graph's weights),
while the pattern (``indices``, ``indptr``, ``row``, ``col``) is plain.  The result
multiplies (``A @ x``, ``x @ A``, ``A.T``), scales and adds with derivatives in both
the values and the vector, whose sparsity rules are the pattern's, and is what
``autodiff.scipy.sparse.linalg``'s solvers take.  The values' derivatives live on the
pattern: a gradient with respect to ``data`` is an array like ``data``.

It is not a pytree: build it inside the function that is transformed, from the traced
values (``vmap`` then batches the values; the pattern is shared).

>>> import numpy as np, autodiff, autodiff.numpy as anp
>>> import autodiff.scipy.sparse as asp
>>> indptr, indices = np.array([0, 2, 3]), np.array([0, 1, 1])  # [[a, b], [0, c]]
>>> def y(values):
...     return asp.csr_array((values, indices, indptr), shape=(2, 2)) @ np.array([1.0, 2.0])
>>> y(np.array([1.0, 2.0, 3.0])).tolist()
[5.0, 6.0]
>>> autodiff.jacrev(y)(np.array([1.0, 2.0, 3.0])).tolist()  # dy_i/dvalue_k
[[1.0, 2.0, 0.0], [0.0, 0.0, 2.0]]
"""

from __future__ import annotations

from typing import Any

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.sparse")

import numpy as np  # noqa: E402
import scipy.sparse as _sparse  # noqa: E402

import autodiff.numpy as anp  # noqa: E402
from autodiff.core.arrays import array_library, array_like, backend_error  # noqa: E402
from autodiff.core.tracer import Tracer  # noqa: E402
from autodiff.errors import TransformTypeError, TransformValueError  # noqa: E402
from autodiff.interpreters.staging import captured_value  # noqa: E402
from autodiff.rules.sparse import Pattern, sparse_matvec  # noqa: E402

__all__ = ["coo_array", "csr_array", "issparse", "linalg"]


class csr_array:
    """A CSR sparse array whose values ``data`` may be traced (see the module).

    ``csr_array((data, indices, indptr), shape=(m, n))``, ``csr_array(scipy_sparse)`` (its
    values plain), or ``csr_array(traced_values, pattern=other.pattern)`` (new values on
    another array's pattern, as ``other.with_data(values)``)."""

    __array_ufunc__ = None  # x @ A, for an array or a traced x, is A.__rmatmul__
    __slots__ = ("data", "pattern")

    def __init__(self, arg1: Any, shape: Any = None, dtype: Any = None, copy: bool = False, *,
                 pattern: Pattern | None = None) -> None:  # fmt: skip
        del copy  # (the values are always copied, read-only, unless traced)
        if pattern is not None:
            data = arg1
        elif _sparse.issparse(arg1) or (isinstance(arg1, np.ndarray) and arg1.ndim == 2):
            m = _sparse.csr_array(arg1)
            m.sum_duplicates()
            m.sort_indices()
            data, pattern = m.data, Pattern(m.indptr, m.indices, m.shape)
        elif isinstance(arg1, tuple) and len(arg1) == 3:
            data, indices, indptr = arg1
            if shape is None:
                raise TransformValueError(
                    "csr_array((data, indices, indptr)): give shape=(rows, columns)."
                )
            pattern = _checked_pattern(indptr, indices, shape)
        else:
            raise TransformTypeError(
                f"csr_array: takes (data, indices, indptr) with shape=, a SciPy sparse array or "
                f"a plain dense matrix, or values with pattern=; got a {type(arg1).__name__}. "
                f"For (data, (row, col)) use coo_array; traced values go in data."
            )
        if not isinstance(data, Tracer) and array_library(data) is not None:
            raise backend_error("scipy.sparse.csr_array", data)  # (SciPy's: NumPy's arrays)
        data = anp.asarray(data) if isinstance(data, Tracer) else np.asarray(data)
        if dtype is not None:
            data = anp.astype(data, dtype)
        if anp.shape(data) != (pattern.nnz,):
            raise TransformValueError(
                f"csr_array: data has shape {anp.shape(data)}, but the pattern stores "
                f"{pattern.nnz} values (one per index)."
            )
        if not isinstance(data, Tracer):  # read-only: a later write must not change it
            data = captured_value(data)
        self.data, self.pattern = data, pattern

    # --- SciPy's attributes ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return self.pattern.shape

    @property
    def indices(self) -> np.ndarray:
        return self.pattern.indices

    @property
    def indptr(self) -> np.ndarray:
        return self.pattern.indptr

    @property
    def nnz(self) -> int:
        return self.pattern.nnz

    @property
    def ndim(self) -> int:
        return 2

    @property
    def dtype(self) -> np.dtype:
        return anp.result_type(self.data)

    @property
    def format(self) -> str:
        return "csr"

    def with_data(self, data: Any) -> csr_array:
        """These values on this pattern."""
        return csr_array(data, pattern=self.pattern)

    def toarray(self) -> Any:
        """The dense matrix (differentiable in the values)."""
        m, n = self.shape
        flat = _zeros(m * n, self.dtype, self.data)
        where = self.pattern.rows * n + self.pattern.indices
        return anp.reshape(anp.at(flat)[where].add(self.data), (m, n))

    todense = toarray

    def toscipy(self) -> Any:
        """SciPy's ``csr_array`` of the values (plain values only)."""
        if isinstance(self.data, Tracer):
            raise TransformTypeError(
                "csr_array.toscipy(): the values are traced; SciPy's arrays hold plain ones "
                "(use autodiff.stop_gradient(A.data) for a constant copy)."
            )
        return self.pattern.matrix(np.asarray(self.data))

    @property
    def T(self) -> csr_array:
        pattern, order = self.pattern.transposed()
        return csr_array(anp.take(self.data, order), pattern=pattern)

    def transpose(self) -> csr_array:
        return self.T

    # --- arithmetic ------------------------------------------------------------------------------
    def __matmul__(self, other: Any) -> Any:
        if isinstance(other, csr_array) or _sparse.issparse(other):
            raise TransformTypeError(
                "csr_array @ sparse: the product of two sparse arrays is not supported here; "
                "multiply vectors (A @ (B @ x)) or densify one (B.toarray())."
            )
        x = anp.asarray(other)
        if anp.ndim(x) not in (1, 2) or anp.shape(x)[0] != self.shape[1]:
            raise TransformValueError(
                f"csr_array @ x: x of shape {anp.shape(x)} does not fit a {self.shape} "
                f"matrix (x must be ({self.shape[1]},) or ({self.shape[1]}, k))."
            )
        return sparse_matvec(self.data, x, self.pattern)

    dot = __matmul__

    def __rmatmul__(self, other: Any) -> Any:
        x = anp.asarray(other)
        if anp.ndim(x) == 1:
            return sparse_matvec(self.data, x, self.pattern, transpose=True)
        return anp.swapaxes(sparse_matvec(self.data, anp.swapaxes(x, 0, 1), self.pattern,
                                          transpose=True), 0, 1)  # fmt: skip

    def __mul__(self, other: Any) -> csr_array:
        if anp.ndim(other) != 0:
            raise TransformTypeError(
                "csr_array * x: scales by a number only (for a product use A @ x, for an "
                "elementwise one A.multiply(...) on a dense array)."
            )
        return self.with_data(self.data * other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> csr_array:
        return self * (1.0 / other)

    def __neg__(self) -> csr_array:
        return self.with_data(-self.data)

    def __add__(self, other: Any) -> csr_array:
        if isinstance(other, csr_array) and other.pattern is self.pattern:
            return self.with_data(self.data + other.data)
        if isinstance(other, csr_array) or _sparse.issparse(other):
            return _summed(self, other if isinstance(other, csr_array) else csr_array(other))
        raise TransformTypeError(
            f"csr_array + {type(other).__name__}: adds sparse arrays only (to add a dense "
            f"array, A.toarray() + x)."
        )

    __radd__ = __add__

    def __sub__(self, other: Any) -> csr_array:
        return self + (-other)

    def __repr__(self) -> str:
        kind = type(self.data).__name__
        return f"<autodiff csr_array {self.shape[0]}x{self.shape[1]}, nnz={self.nnz}, {kind}>"


def _zeros(n: int, dtype: Any, like: Any) -> Any:
    """Zeros of the array library of ``like`` (the values': NumPy's, CuPy's, ...)."""
    return np.zeros(n, dtype, like=array_like(like))


def _checked_pattern(indptr: Any, indices: Any, shape: Any) -> Pattern:
    for name, a in (("indices", indices), ("indptr", indptr)):
        if isinstance(a, Tracer):
            raise TransformTypeError(
                f"csr_array: {name} is traced; the pattern of a sparse array is plain integers "
                f"(only data may be traced)."
            )
    m, n = (int(d) for d in shape)
    indptr, indices = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
    bad_rows = indptr.shape != (m + 1,) or indptr[0] != 0 or indptr[-1] != indices.size
    if bad_rows or np.any(np.diff(indptr) < 0) or (
        indices.size and (indices.min() < 0 or indices.max() >= n)):  # fmt: skip
        raise TransformValueError(
            f"csr_array: (indices, indptr) is not a CSR pattern of a {m}x{n} array (indptr "
            f"must rise from 0 to len(indices) in {m + 1} entries, indices lie in [0, {n}))."
        )
    check = _sparse.csr_array((np.arange(indices.size, dtype=float), indices, indptr),
                              shape=(m, n))  # fmt: skip
    if not check.has_canonical_format:
        raise TransformValueError(
            "csr_array: the indices of a row must be sorted and unique (use coo_array, which "
            "sums duplicates, or sort them first)."
        )
    return Pattern(indptr, indices, (m, n))


def _summed(a: csr_array, b: csr_array) -> csr_array:
    """``a + b`` on the union of their patterns (values scattered into it)."""
    union = (a.pattern.matrix(np.ones(a.nnz)) + b.pattern.matrix(np.ones(b.nnz))).tocsr()
    union.sort_indices()
    pattern = Pattern(union.indptr, union.indices, union.shape)
    key = lambda p: p.rows * p.shape[1] + p.indices
    where = np.searchsorted(key(pattern), np.concatenate([key(a.pattern), key(b.pattern)]))
    data = _zeros(pattern.nnz, anp.result_type(a.data, b.data), a.data)
    return csr_array(anp.at(data)[where].add(anp.concatenate([a.data, b.data])), pattern=pattern)


def coo_array(arg1: Any, shape: Any = None, dtype: Any = None, copy: bool = False) -> csr_array:
    """SciPy's ``coo_array((data, (row, col)), shape=...)``, held as a ``csr_array``:
    entries sorted by row and column, duplicates summed (differentiably in ``data``).

    >>> import numpy as np, autodiff.scipy.sparse as asp
    >>> a = asp.coo_array((np.array([1.0, 2.0, 3.0]), (np.array([1, 0, 1]), np.array([0, 1, 0]))),
    ...                   shape=(2, 2))
    >>> a.toarray().tolist()
    [[0.0, 2.0], [4.0, 0.0]]
    """
    if _sparse.issparse(arg1):
        return csr_array(arg1)
    if not (isinstance(arg1, tuple) and len(arg1) == 2 and isinstance(arg1[1], tuple)):
        raise TransformTypeError("coo_array: takes (data, (row, col)) with shape=.")
    data, (row, col) = arg1
    row, col = np.asarray(row, np.int64), np.asarray(col, np.int64)
    if shape is None:
        shape = (int(row.max(initial=-1)) + 1, int(col.max(initial=-1)) + 1)
    m, n = (int(d) for d in shape)
    keys, where = np.unique(row * n + col, return_inverse=True)
    pattern = _checked_pattern(np.searchsorted(keys // n, np.arange(m + 1)), keys % n, (m, n))
    values = anp.asarray(data) if dtype is None else anp.astype(anp.asarray(data), dtype)
    summed = anp.at(_zeros(keys.size, anp.result_type(values), values))[where.ravel()].add(values)
    return csr_array(summed, pattern=pattern)


def issparse(x: Any) -> bool:
    """Whether ``x`` is a sparse array: autodiff's or SciPy's."""
    return isinstance(x, csr_array) or _sparse.issparse(x)
