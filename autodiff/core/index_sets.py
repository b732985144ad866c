"""Index sets, and the vocabulary of sparsity rules.

Sparsity detection (``interpreters/sparsity.py``) gives every element of every value
of a staged graph the set of input elements it depends on: an :class:`IndexSets`, one
sorted set per element, stored as NumPy's compressed rows (``indptr``, ``indices``), so
that propagating through an equation is a few vectorised NumPy calls whatever the size.

A primitive's sparsity rule says, from its operands' shapes (and the values of those
that are constants), which operand elements each output element reads, with one of:

- :class:`Gather`: output element ``k`` reads operand element ``src[k]`` (``-1``: none);
  elementwise functions with broadcasting, reshapes, transposes, slices, pads;
- :class:`Groups`: output element ``k`` reads every operand element ``e`` with
  ``in_group[e] == out_group[k]``; reductions, matrix products, a matrix function
  batched over leading axes;
- :class:`Edges`: ``(out_idx[m], in_idx[m])`` pairs, for anything else (a scatter-add);
- :data:`ALL`: every output element reads every operand element (the safe default);
- ``None``: none (an index or a condition: no derivative flows through it).

For Hessians a :class:`Sparsity` also lists the operand pairs ``(i, j)`` that interact
non-linearly (``x * y``: ``(0, 1)``; ``sin(x)``: ``(0, 0)``; ``x + y``: none) inside one
*term*: by default a term is an output element, and the reads say which elements it
combines; a product of sums sets its own terms (``x @ y``: one term per contracted index,
so ``x @ x`` couples each ``x[k]`` only with itself).  A rule that must look at the
operands' index sets themselves (a loop's fixed point) is marked :func:`propagating`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "ALL",
    "Edges",
    "Gather",
    "Groups",
    "IndexSets",
    "Sparsity",
    "apply_read",
    "cross_pairs",
    "propagating",
    "ranges",
]


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])``, vectorised."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    offsets = np.repeat(np.asarray(starts, np.int64) - (ends - lengths), lengths)
    return offsets + np.arange(total, dtype=np.int64)


class IndexSets:
    """One sorted set of input indices per element of a value (compressed rows:
    element ``k``'s set is ``indices[indptr[k]:indptr[k + 1]]``).

    >>> s = IndexSets.from_pairs(np.array([0, 0, 2]), np.array([5, 1, 1]), 3)
    >>> s.rows()
    [[1, 5], [], [1]]
    """

    __slots__ = ("indices", "indptr")

    def __init__(self, indptr: np.ndarray, indices: np.ndarray) -> None:
        self.indptr = indptr
        self.indices = indices

    @property
    def size(self) -> int:
        return len(self.indptr) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.indptr)

    @property
    def nnz(self) -> int:
        return len(self.indices)

    @staticmethod
    def from_pairs(rows: np.ndarray, cols: np.ndarray, size: int) -> IndexSets:
        """The sets holding ``cols[m]`` in element ``rows[m]`` (duplicates merged)."""
        rows = np.asarray(rows, np.int64)
        cols = np.asarray(cols, np.int64)
        if len(rows):
            width = int(cols.max()) + 1
            keys = np.unique(rows * width + cols)
            rows, cols = keys // width, keys % width
        indptr = np.zeros(size + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=size), out=indptr[1:])
        return IndexSets(indptr, cols)

    @staticmethod
    def identity(size: int, offset: int = 0) -> IndexSets:
        """Element ``k`` depends on input index ``offset + k``: an input's own sets."""
        return IndexSets(np.arange(size + 1, dtype=np.int64), np.arange(size) + offset)

    def row_of_each(self) -> np.ndarray:
        """The element each stored index belongs to."""
        return np.repeat(np.arange(self.size, dtype=np.int64), self.lengths)

    def everything(self) -> np.ndarray:
        """The union of all the sets, sorted."""
        return np.unique(self.indices)

    def gather(self, src: np.ndarray) -> IndexSets:
        """Element ``k`` of the result is element ``src[k]`` of this (``-1``: empty)."""
        src = np.asarray(src, np.int64).ravel()
        valid = src >= 0
        safe = np.where(valid, src, 0)
        lengths = np.where(valid, self.lengths[safe], 0)
        indptr = np.zeros(len(src) + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        return IndexSets(indptr, self.indices[ranges(self.indptr[safe], lengths)])

    def union(self, *others: IndexSets) -> IndexSets:
        """Element-wise union with sets of the same size."""
        parts = [self, *others]
        rows = np.concatenate([p.row_of_each() for p in parts])
        cols = np.concatenate([p.indices for p in parts])
        return IndexSets.from_pairs(rows, cols, self.size)

    def rows(self) -> list[list[int]]:
        """The sets as lists (small values: tests and examples)."""
        return [self.indices[a:b].tolist() for a, b in zip(self.indptr[:-1], self.indptr[1:])]

    def __repr__(self) -> str:
        return f"IndexSets({self.size} elements, {self.nnz} indices)"


# --- what a rule returns ---------------------------------------------------------------------


class Gather:
    """Output element ``k`` reads operand element ``src[k]`` (``-1``: none)."""

    __slots__ = ("src",)

    def __init__(self, src: Any) -> None:
        self.src = np.asarray(src, np.int64).ravel()


class Groups:
    """Output element ``k`` reads every operand element ``e`` with ``in_group[e] ==
    out_group[k]`` (``-1`` in either: none).  Without ``out_group`` the output is a
    stack of ``n_groups`` equal blocks along its leading axes, block ``g`` reading group
    ``g`` (a function of the matrices of a stack)."""

    __slots__ = ("in_group", "n_groups", "out_group")

    def __init__(self, in_group: Any, out_group: Any = None, n_groups: int | None = None) -> None:
        self.in_group = np.asarray(in_group, np.int64).ravel()
        self.out_group = None if out_group is None else np.asarray(out_group, np.int64).ravel()
        if n_groups is None:
            found = self.in_group.max(initial=-1)
            if self.out_group is not None:
                found = max(found, self.out_group.max(initial=-1))
            n_groups = int(found) + 1
        self.n_groups = n_groups


class Edges:
    """Output element ``out_idx[m]`` reads operand element ``in_idx[m]``."""

    __slots__ = ("in_idx", "out_idx")

    def __init__(self, out_idx: Any, in_idx: Any) -> None:
        self.out_idx = np.asarray(out_idx, np.int64).ravel()
        self.in_idx = np.asarray(in_idx, np.int64).ravel()


class _All:
    """Every output element reads every operand element."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ALL"


ALL = _All()
Read = Gather | Groups | Edges | _All | None


class Sparsity:
    """What a sparsity rule returns for one output: per operand, what each output
    element reads of it (``reads``), and for Hessians the operand pairs ``(i, j)`` whose
    elements interact non-linearly within a term (``pairs``).  Terms are the output
    elements unless ``terms`` gives, per operand, what each of ``n_terms`` terms reads.

    The rule of ``x[1:] * y[:-1]`` (``x``, ``y`` of 4 elements): output ``k`` reads
    ``x[k + 1]`` and ``y[k]``, which interact::

        Sparsity([Gather([1, 2, 3]), Gather([0, 1, 2])], pairs=[(0, 1)])

    >>> import numpy as np, autodiff
    >>> from autodiff.extend import Gather, Primitive
    >>> shifted_p = Primitive("shifted_product", lambda x, y: x[1:] * y[:-1],
    ...     sparsity=lambda x, y: Sparsity([Gather(np.arange(1, x.shape[0])),
    ...                                     Gather(np.arange(y.shape[0] - 1))], pairs=[(0, 1)]))
    >>> pattern = autodiff.jacobian_sparsity(shifted_p.bind, argnums=(0, 1))(np.ones(4), np.ones(4))
    >>> pattern.toarray().astype(int)  # columns: x's 4 elements, then y's
    array([[0, 1, 0, 0, 1, 0, 0, 0],
           [0, 0, 1, 0, 0, 1, 0, 0],
           [0, 0, 0, 1, 0, 0, 1, 0]])
    """

    __slots__ = ("n_terms", "pairs", "reads", "terms")

    def __init__(
        self,
        reads: Sequence[Read],
        pairs: Sequence[tuple[int, int]] = (),
        terms: Sequence[Read] | None = None,
        n_terms: int | None = None,
    ) -> None:
        self.reads = tuple(reads)
        self.pairs = tuple(pairs)
        self.terms = None if terms is None else tuple(terms)
        self.n_terms = n_terms


def propagating(rule: Callable) -> Callable:
    """Mark a sparsity rule that computes its outputs' sets itself:
    ``rule(sets, operands, **params)`` gets each operand's :class:`IndexSets` (None: no
    dependence) and its value or abstract value, and returns one per output (a loop's
    fixed point, a call's graph propagated)."""
    rule.propagates = True  # type: ignore[attr-defined]
    return rule


# --- applying a read ------------------------------------------------------------------------


def apply_read(read: Read, sets: IndexSets | None, n_out: int) -> IndexSets | None:
    """The sets of ``n_out`` output elements that read ``sets`` as ``read`` says."""
    if read is None or sets is None or sets.nnz == 0:
        return None
    if type(read) is Gather:
        return sets.gather(read.src)
    if type(read) is Groups:
        group = read.in_group[sets.row_of_each()]
        keep = group >= 0
        grouped = IndexSets.from_pairs(group[keep], sets.indices[keep], read.n_groups)
        out_group = read.out_group
        if out_group is None:  # blocks along the leading axes
            out_group = np.arange(n_out, dtype=np.int64) // max(n_out // max(read.n_groups, 1), 1)
        return grouped.gather(out_group)
    if type(read) is Edges:
        lengths = sets.lengths[read.in_idx]
        rows = np.repeat(read.out_idx, lengths)
        return IndexSets.from_pairs(rows, sets.indices[ranges(sets.indptr[read.in_idx], lengths)],
                                    n_out)  # fmt: skip
    if read is ALL:
        every = sets.everything()
        return IndexSets(np.arange(n_out + 1, dtype=np.int64) * len(every), np.tile(every, n_out))
    raise TypeError(f"a sparsity rule returned {read!r}, not a Gather, Groups, Edges, ALL or None")


def cross_pairs(a: IndexSets, b: IndexSets) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(i, j)`` with ``i`` in ``a``'s set and ``j`` in ``b``'s set of one element."""
    la, lb = a.lengths, b.lengths
    left = np.repeat(a.indices, np.repeat(lb, la))
    right = b.indices[ranges(np.repeat(b.indptr[:-1], la), np.repeat(lb, la))]
    return left, right
