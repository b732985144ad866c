"""Sparsity detection: ``jacobian_sparsity`` and ``hessian_sparsity``.

The function is staged once per input signature (as ``jit`` stages it: shapes, dtypes
and structure, not values, so the pattern holds for every value), and index sets are
propagated through its graph (``interpreters/sparsity.py``, with each primitive's rule).
The pattern is a :class:`SparsityPattern`: the non-zero positions of a matrix whose rows
are the outputs' elements and whose columns the differentiated inputs' elements, each
raveled and concatenated in pytree order.  It never misses a non-zero; where a rule is
missing or a value is unknown, it errs dense.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import optree

from autodiff.compiler.passes import dce
from autodiff.core.args import check_argnums_type, check_callable, normalize_argnums, split_aux
from autodiff.core.graph import ShapedArray, aval_of
from autodiff.core.index_sets import IndexSets
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.sparsity import collecting_pairs, propagate
from autodiff.interpreters.staging import stage

__all__ = [
    "Detection",
    "SparseMatrix",
    "SparsityPattern",
    "detector",
    "hessian_sparsity",
    "jacobian_sparsity",
]


class SparsityPattern:
    """Where a matrix may be non-zero: row ``k``'s columns are
    ``indices[indptr[k]:indptr[k + 1]]`` (compressed rows, sorted).

    >>> p = SparsityPattern((2, 3), [0, 2, 3], [0, 2, 1])
    >>> p.toarray().astype(int).tolist()
    [[1, 0, 1], [0, 1, 0]]
    >>> p.nnz, p.rows.tolist(), p.cols.tolist()
    (3, [0, 0, 1], [0, 2, 1])
    """

    __slots__ = ("indices", "indptr", "shape")

    def __init__(self, shape: tuple[int, int], indptr: Any, indices: Any) -> None:
        self.shape = (int(shape[0]), int(shape[1]))
        self.indptr = np.asarray(indptr, np.int64)
        self.indices = np.asarray(indices, np.int64)

    @staticmethod
    def from_sets(sets: IndexSets, n_cols: int) -> SparsityPattern:
        return SparsityPattern((sets.size, n_cols), sets.indptr, sets.indices)

    @staticmethod
    def of(pattern: Any, shape: tuple[int, int] | None = None) -> SparsityPattern:
        """A pattern from a ``SparsityPattern``, a SciPy sparse array or matrix, or a
        dense array (its non-zeros)."""
        if isinstance(pattern, SparsityPattern):
            found = pattern
        elif hasattr(pattern, "tocsr") and hasattr(pattern, "nnz"):  # SciPy sparse
            csr = pattern.tocsr()
            csr.sum_duplicates()
            csr.sort_indices()
            found = SparsityPattern(csr.shape, csr.indptr, csr.indices)
        else:
            dense = np.asarray(pattern)
            if dense.ndim != 2:
                raise TransformValueError(
                    f"a sparsity pattern must be a 2-D array, a SciPy sparse array or a "
                    f"SparsityPattern, got an array of shape {dense.shape}."
                )
            rows, cols = np.nonzero(dense)
            sets = IndexSets.from_pairs(rows, cols, dense.shape[0])
            found = SparsityPattern(dense.shape, sets.indptr, sets.indices)
        if shape is not None and found.shape != tuple(shape):
            raise TransformValueError(
                f"the sparsity pattern has shape {found.shape}, but the Jacobian has shape "
                f"{tuple(shape)} (outputs' elements x differentiated inputs' elements)."
            )
        return found

    @property
    def nnz(self) -> int:
        return len(self.indices)

    @property
    def rows(self) -> np.ndarray:
        return np.repeat(np.arange(self.shape[0], dtype=np.int64), np.diff(self.indptr))

    @property
    def cols(self) -> np.ndarray:
        return self.indices

    def sets(self) -> IndexSets:
        return IndexSets(self.indptr, self.indices)

    def toarray(self) -> np.ndarray:
        """The pattern as a dense boolean array."""
        out = np.zeros(self.shape, bool)
        out[self.rows, self.cols] = True
        return out

    def to_scipy(self) -> Any:
        """The pattern as a boolean ``scipy.sparse.csr_array``."""
        import scipy.sparse  # SciPy is optional and slow to import: on first use only

        data = np.ones(self.nnz, bool)
        return scipy.sparse.csr_array((data, self.indices, self.indptr), shape=self.shape)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SparsityPattern) and self.shape == other.shape
                and np.array_equal(self.indptr, other.indptr)
                and np.array_equal(self.indices, other.indices))  # fmt: skip

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SparsityPattern(shape={self.shape}, nnz={self.nnz})"


class SparseMatrix(NamedTuple):
    """A sparse matrix as index arrays: ``matrix[row[k], col[k]] = data[k]``.  What the
    sparse Jacobians and Hessians return where SciPy is not installed or the values are
    traced (inside ``jit``, ``vmap``, ``grad``); a pytree, so a jitted function returns it.

    >>> m = SparseMatrix(np.array([2.0, 3.0]), np.array([0, 1]), np.array([1, 0]), (2, 2))
    >>> m.toarray()
    array([[0., 2.],
           [3., 0.]])
    """

    data: Any
    row: np.ndarray
    col: np.ndarray
    shape: tuple[int, int]

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape, np.result_type(self.data))
        out[self.row, self.col] = self.data
        return out


# The fields' own documentation (a NamedTuple's would read "Alias for field number 0").
SparseMatrix.data.__doc__ = "The stored values, one per (row, col) pair (an array, maybe traced)."
SparseMatrix.row.__doc__ = "The row of each stored value (an integer array)."
SparseMatrix.col.__doc__ = "The column of each stored value (an integer array)."
SparseMatrix.shape.__doc__ = "The matrix's shape, ``(rows, columns)``."


class Detection(NamedTuple):
    """What detection found for one input signature: the pattern, how the differentiated
    inputs and the outputs are laid out (leaf shapes, pytree structures)."""

    pattern: SparsityPattern
    in_shapes: list
    out_shapes: list
    out_tree: Any


def _aval(leaf: Any) -> Any:
    if isinstance(leaf, Tracer):
        return ShapedArray(tuple(leaf.shape), leaf.dtype)
    return aval_of(leaf)


class _Detector:
    """Detection for ``func`` at ``argnums``, cached per input signature (LRU)."""

    def __init__(self, func: Callable, argnums: Any, hessian: bool, who: str,
                 has_aux: bool = False) -> None:  # fmt: skip
        self.func, self.argnums, self.hessian, self.who = func, argnums, hessian, who
        self.has_aux = has_aux
        self.cache: OrderedDict[Any, Detection] = OrderedDict()
        self.lock = threading.RLock()
        self.maxsize = 32

    def __call__(self, args: tuple, kwargs: dict) -> Detection:
        positions = normalize_argnums(self.argnums, len(args), self.who)
        leaves, treedef = optree.tree_flatten((args, kwargs))
        avals = [_aval(leaf) for leaf in leaves]
        key = (treedef, positions, tuple(avals))
        with self.lock:
            found = self.cache.get(key)
            if found is not None:
                self.cache.move_to_end(key)
                return found
        found = self._detect(positions, leaves, treedef, avals)
        with self.lock:
            self.cache[key] = found
            while len(self.cache) > self.maxsize:
                self.cache.popitem(last=False)
        return found

    def _detect(self, positions, leaves, treedef, avals) -> Detection:
        # which leaves are differentiated: those of the arguments at ``positions``
        marks = optree.tree_unflatten(treedef, list(range(len(leaves))))[0]
        chosen = sorted(i for p in positions for i in optree.tree_leaves(marks[p]))
        for i in chosen:
            if avals[i].dtype.kind not in "fc" or avals[i].dtype.kind == "c":
                raise TransformTypeError(
                    f"{self.who}: argument leaf {i} has dtype {avals[i].dtype}; the "
                    f"differentiated arguments must be real floating-point arrays."
                )
        cell: list = []

        def flat(*xs):
            a, k = optree.tree_unflatten(treedef, list(xs))
            out = self.func(*a, **k)
            if self.has_aux:
                out = split_aux(out, self.who)[0]
            out_leaves, out_tree = optree.tree_flatten(out)
            cell[:] = [out_tree]
            return out_leaves

        graph = dce(stage(flat, avals, transform=self.who, name=self.who).graph)
        in_sets: list = [None] * len(graph.invars)
        offset = 0
        for i in chosen:
            in_sets[i] = IndexSets.identity(avals[i].size, offset)
            offset += avals[i].size
        in_shapes = [avals[i].shape for i in chosen]
        out_avals = [v.aval for v in graph.outvars]
        if self.hessian:
            if len(out_avals) != 1 or out_avals[0].size != 1:
                raise TransformValueError(
                    f"{self.who}: the function must return one scalar, got outputs of "
                    f"shapes {[a.shape for a in out_avals]}."
                )
            with collecting_pairs() as pairs:
                propagate(graph, in_sets)
            rows, cols = pairs.merged()
            sets = IndexSets.from_pairs(rows, cols, offset)
            pattern = SparsityPattern.from_sets(sets, offset)
        else:
            outs = propagate(graph, in_sets)
            sizes = [a.size for a in out_avals]
            parts = [IndexSets(np.zeros(n + 1, np.int64), np.zeros(0, np.int64)) if s is None
                     else s for s, n in zip(outs, sizes)]  # fmt: skip
            pattern = SparsityPattern.from_sets(_concatenated(parts), offset)
        return Detection(pattern, in_shapes, [a.shape for a in out_avals], cell[0])


def _concatenated(parts: list[IndexSets]) -> IndexSets:
    """The rows of several sets, one after the other."""
    if not parts:
        return IndexSets(np.zeros(1, np.int64), np.zeros(0, np.int64))
    lengths = np.concatenate([p.lengths for p in parts])
    indptr = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return IndexSets(indptr, np.concatenate([p.indices for p in parts]))


def detector(func: Callable, argnums: Any, hessian: bool, who: str,
             has_aux: bool = False) -> Callable:  # fmt: skip
    """``detect(args, kwargs) -> Detection``, cached per input signature (``has_aux``:
    ``func`` returns ``(output, aux)``, and the output's pattern is found)."""
    return _Detector(func, argnums, hessian, who, has_aux)


def jacobian_sparsity(func: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """``jacobian_sparsity(func)(*args)``: which outputs depend on which inputs, read
    from the program, without evaluating it.

    Returns a :class:`SparsityPattern` whose rows are the outputs' elements and whose
    columns are the elements of the arguments at ``argnums`` (each pytree's leaves
    raveled and concatenated).  Found by staging ``func`` (as ``jit`` does: every value
    of these shapes and dtypes) and propagating index sets through each primitive's
    sparsity rule; it never misses a non-zero, and where it cannot tell (a primitive
    without a rule, an index known only at run time) it errs dense.  Loops and branches
    take the union of what any iteration or branch touches.  Cached per signature.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> f = lambda x: x[1:] * x[:-1] + anp.sin(x[1:])
    >>> autodiff.jacobian_sparsity(f)(np.zeros(4)).toarray().astype(int)
    array([[1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    check_callable(func, "jacobian_sparsity")
    check_argnums_type(argnums, "jacobian_sparsity")
    detect = _Detector(func, argnums, False, "jacobian_sparsity")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return detect(args, kwargs).pattern

    return wrapper


def hessian_sparsity(func: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """``hessian_sparsity(func)(*args)``: which pairs of inputs interact non-linearly in
    the scalar ``func``, read from the program: the Hessian's pattern (symmetric).

    Each primitive's rule says which of its operands interact (``x * y``: x with y;
    ``sin(x)``: x with itself; ``x + y``: none); the pairs of inputs behind them are
    collected over the whole program.  Never misses a non-zero.  Cached per signature.

    >>> import numpy as np, autodiff
    >>> f = lambda x: ((x[1:] - x[:-1] ** 2) ** 2).sum()  # chained Rosenbrock's core
    >>> autodiff.hessian_sparsity(f)(np.zeros(4)).toarray().astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0],
           [0, 1, 1, 1],
           [0, 0, 1, 1]])
    """
    check_callable(func, "hessian_sparsity")
    check_argnums_type(argnums, "hessian_sparsity")
    detect = _Detector(func, argnums, True, "hessian_sparsity")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return detect(args, kwargs).pattern

    return wrapper


def total_size(shapes: list) -> int:
    return sum(math.prod(s) for s in shapes)
