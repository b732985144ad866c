"""The rule-writing kit for sparsity rules: one call per family.

A sparsity rule gets each operand as its value (a constant of the staged graph: an
index array, a Python scalar) or its abstract value (``aval.shape``), and returns a
``core.index_sets.Sparsity``: which operand elements each output element reads, and
which operands interact non-linearly (for Hessians).  The makers here build the rules
of whole families from one line in the primitive's block:

- ``elementwise(...)`` (the elementwise helpers declare it for every function they make):
  output element ``k`` reads the element of each operand broadcast to ``k``;
- ``moves(impl)``: functions that move, copy or drop elements without arithmetic
  (reshape, transpose, slices, pads, concatenation, rolls): the rule runs ``impl`` on
  the element numbers of each operand, so the function itself says where each goes;
- ``reduction(linear)``: sums, products, maxima over axes;
- ``stacked(core)``: linear algebra, dense within each matrix of a stack;
- ``along_axes(axes_of, out_shape_of)``: dense along some axes (FFTs);
- ``contraction(terms, out, shapes)``: ``einsum`` and ``matmul``, whose Hessian terms
  pair the elements multiplied together (so ``x @ x`` couples each ``x[k]`` with itself);
- ``problem_groups`` and ``problem_edges``: one operand's reads in a stack of problems
  (matrices, vectors, signals) whose stacks broadcast, by group keys within a problem
  (``solve``: column ``j`` of the solution reads column ``j`` of ``b``; ``eigh``: one
  triangle) or by edges within a problem (a triangular solve, a convolution's band);
- ``triangle_key(n, lower)``: the key of one triangle of ``n``-by-``n`` matrices;
- ``sliding(shapes, core, window)``: convolutions and correlations, banded.

A rule that cannot tell (an index array known only at run time) reads ``ALL``: every
output element may depend on every element of that operand, which is never wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.core.arrays import broadcast_shapes
from autodiff.core.graph import ShapedArray
from autodiff.core.index_sets import ALL, Edges, Gather, Groups, Sparsity

__all__ = [
    "along_axes",
    "contraction",
    "elementwise",
    "is_complex_operand",
    "is_known",
    "moves",
    "numbered",
    "problem_edges",
    "problem_groups",
    "reduction",
    "running",
    "shape_of_operand",
    "sliding",
    "stacked",
    "triangle_key",
]


def is_known(x: Any) -> bool:
    """Whether an operand's value is known (a constant of the graph), not only its shape."""
    return not isinstance(x, ShapedArray)


def is_complex_operand(x: Any) -> bool:
    """Whether an operand, given as its value or its abstract value, is complex.

    >>> is_complex_operand(ShapedArray((2,), np.complex64)), is_complex_operand(1.0)
    (True, False)
    """
    return np.dtype(x.dtype if isinstance(x, ShapedArray) else np.result_type(x)).kind == "c"


def shape_of_operand(x: Any) -> tuple[int, ...]:
    """The shape of a sparsity rule's operand, given as its value or its abstract value.

    >>> shape_of_operand(ShapedArray((2, 3), np.float64)), shape_of_operand(np.arange(4))
    ((2, 3), (4,))
    """
    return x.shape if isinstance(x, ShapedArray) else tuple(np.shape(x))


def numbered(shape: Sequence[int]) -> np.ndarray:
    """Each element's flat number: ``arange(size).reshape(shape)``.

    >>> numbered((2, 3))[:, 1:].ravel().tolist()  # the elements a slice keeps
    [1, 2, 4, 5]
    """
    return np.arange(math.prod(shape), dtype=np.int64).reshape(tuple(shape))


def _all_pairs(diff: Sequence[int]) -> list[tuple[int, int]]:
    return [(i, j) for i in diff for j in diff if i <= j]


def elementwise(differentiable: Sequence[bool], pairs: Sequence[tuple[int, int]] | None = None,
                ) -> Callable:  # fmt: skip
    """The rule of an elementwise function with broadcasting: each output element reads
    the element of each differentiable operand broadcast to it.  ``pairs``: the operands
    that interact non-linearly (None: every pair of differentiable operands, the safe
    choice; ``()``: linear)."""
    diff = [i for i, d in enumerate(differentiable) if d]
    chosen = _all_pairs(diff) if pairs is None else list(pairs)

    def rule(*operands, **params):
        shapes = [shape_of_operand(x) for x in operands]
        out = broadcast_shapes(*shapes)
        reads = [Gather(np.broadcast_to(numbered(s), out)) if i in diff else None
                 for i, s in enumerate(shapes)]  # fmt: skip
        return Sparsity(reads, chosen)

    return rule


def moves(impl: Callable, data: Sequence[int] | None = (0,), *, multiple_results: bool = False,
          params: Callable | None = None) -> Callable:  # fmt: skip
    """The rule of a function that only moves, copies or drops elements (``impl``).

    Each operand at a position in ``data`` is replaced in turn by its element numbers
    plus one (the others in ``data`` by zeros, so a zero or a fill value means "none"),
    and what ``impl`` returns says which element each output element is.  Operands not
    in ``data`` (None: all of them; the others are index arrays) are passed as they are;
    where one is not known, every
    output element reads every element of the data operands.  ``params(**params)``
    adjusts the parameters for the integer run (a pad's fill value).

    >>> rule = moves(lambda x: x[::-1])  # a flip: output k is input n - 1 - k
    >>> rule(ShapedArray((4,), np.float64)).reads[0].src.tolist()
    [3, 2, 1, 0]
    """

    def rule(*operands, **kwargs):
        moved = range(len(operands)) if data is None else data
        rest = [i for i in range(len(operands)) if i not in moved]
        if not all(is_known(operands[i]) for i in rest):
            reads = [ALL if i in moved else None for i in range(len(operands))]
            return (Sparsity(reads),) * _count(impl, operands, kwargs) if multiple_results \
                else Sparsity(reads)  # fmt: skip
        if params is not None:
            kwargs = params(**kwargs)
        shapes = [shape_of_operand(x) for x in operands]
        runs = []
        for i in moved:
            args = list(operands)
            for j in moved:
                args[j] = numbered(shapes[i]) + 1 if j == i else np.zeros(shapes[j], np.int64)
            out = impl(*args, **kwargs)
            runs.append(tuple(out) if multiple_results else (out,))
        specs = []
        for k in range(len(runs[0])):
            reads: list = [None] * len(operands)
            for run, i in zip(runs, moved):
                reads[i] = Gather(np.asarray(run[k]) - 1)
            specs.append(Sparsity(reads))
        return tuple(specs) if multiple_results else specs[0]

    return rule


def _count(impl: Callable, operands: Sequence[Any], kwargs: dict) -> int:
    """How many results ``impl`` gives, from a run on zeros."""
    zeros = [np.zeros(shape_of_operand(x), np.int64) if not is_known(x) else x for x in operands]
    return len(impl(*zeros, **kwargs))


def _groups(shape: Sequence[int], keep: Sequence[int]) -> np.ndarray:
    """Each element's position along the axes ``keep``, as one number."""
    if not keep:
        return np.zeros(tuple(shape), np.int64)
    index = np.indices(tuple(shape), sparse=True)
    flat = np.zeros(tuple(shape), np.int64)
    stride = 1
    for axis in reversed(keep):
        flat = flat + index[axis] * stride
        stride *= shape[axis]
    return flat


def reduction(linear: bool) -> Callable:
    """The rule of a reduction over the axes ``axis`` (a tuple, or None: all): each
    output element reads its slice; ``linear=False``: the slice's elements interact."""

    def rule(x, *, axis, keepdims=False, **params):
        shape = shape_of_operand(x)
        nd = len(shape)
        axes = set(range(nd)) if axis is None else {a % nd for a in np.atleast_1d(axis).tolist()}
        keep = [a for a in range(nd) if a not in axes]
        groups = Groups(_groups(shape, keep), n_groups=math.prod(shape[a] for a in keep))
        return Sparsity([groups], () if linear else [(0, 0)])

    return rule


def stacked(core: Sequence[int], pairs: Sequence[tuple[int, int]] | None = None, *,
            outputs: int = 0, triangle: Callable | None = None) -> Callable:  # fmt: skip
    """The rule of a function of matrices (or vectors) stacked along leading axes:
    ``core[i]`` is how many trailing axes of operand ``i`` one problem takes (0: no
    derivative flows through it); each output element reads the whole problem of its
    stack position in every operand (stacks that broadcast: all of them).  ``pairs``
    default to all (the function is non-linear); ``outputs``: how many results, for a
    primitive with multiple results (0: one).  ``triangle(**params)``: of the first
    operand's matrices only one triangle is read, the lower (True), the upper (False),
    or both (None): ``eigh``'s ``UPLO``."""
    diff = [i for i, k in enumerate(core) if k]
    chosen = _all_pairs(diff) if pairs is None else list(pairs)

    def rule(*operands, **params):
        shapes = [shape_of_operand(x) for x in operands]
        stacks = [s[: len(s) - k] for s, k in zip(shapes, core) if k]
        if any(s != stacks[0] for s in stacks):
            spec = Sparsity([ALL if k else None for k in core], chosen)
        else:
            stack = stacks[0]
            n = math.prod(stack)
            reads = [Groups(np.broadcast_to(numbered(stack).reshape(stack + (1,) * k), s),
                            n_groups=n) if k else None
                     for s, k in zip(shapes, core)]  # fmt: skip
            lower = None if triangle is None else triangle(**params)
            if lower is not None:
                key = triangle_key(shapes[0][-1], lower)
                reads[0] = Groups(np.where(key < 0, -1, reads[0].in_group.reshape(shapes[0])),
                                  n_groups=n)  # fmt: skip
            spec = Sparsity(reads, chosen)
        return (spec,) * outputs if outputs else spec

    return rule


def along_axes(axes_of: Callable, out_shape_of: Callable | None = None,
               pairs: Sequence[tuple[int, int]] = ((0, 0),)) -> Callable:  # fmt: skip
    """The rule of a one-operand function dense along some axes and separate along the
    others (an FFT): ``axes_of(shape, **params)`` gives the axes, ``out_shape_of(shape,
    **params)`` the output's shape (by default the operand's).  ``pairs=()``: linear."""

    def rule(x, **params):
        shape = shape_of_operand(x)
        axes = {a % len(shape) for a in axes_of(shape, **params)}
        keep = [a for a in range(len(shape)) if a not in axes]
        out_shape = shape if out_shape_of is None else tuple(out_shape_of(shape, **params))
        return Sparsity([Groups(_groups(shape, keep), _groups(out_shape, keep))], pairs)

    return rule


def contraction(terms: Sequence[str], out: str, shapes: Sequence[Sequence[int]],
                extra: dict[str, int] | None = None) -> Sparsity:  # fmt: skip
    """The rule of ``einsum('<terms>-><out>', *operands)`` (letters only, explicit output;
    a label of size 1 in an operand broadcasts).  Output element ``k`` reads the operand
    elements whose labels agree with ``k``'s; an element whose repeated labels differ
    (``'ii'``) is read by none.  For Hessians two operands interact within a term, one
    per value of the labels they share; with three or more, within an output element.
    ``extra``: the sizes of output labels that no operand has."""
    sizes: dict[str, int] = dict(extra or {})
    for term, shape in zip(terms, shapes):
        for label, n in zip(term, shape):
            sizes[label] = max(sizes.get(label, 1), n)
    out_shape = tuple(sizes[c] for c in out)
    out_index = np.indices(out_shape, sparse=True) if out_shape else []

    def grouped(term: str, shape: Sequence[int], labels: list[str]) -> np.ndarray:
        """Each element's number among the assignments of ``labels``; -1 where its
        repeated labels disagree."""
        index = np.indices(tuple(shape), sparse=True)
        first = {label: term.index(label) for label in term}
        group = np.zeros(tuple(shape), np.int64)
        for label in labels:
            group = group * sizes[label] + index[first[label]]
        for axis, label in enumerate(term):
            if axis != first[label]:
                group = np.where(index[axis] == index[first[label]], group, -1)
        return np.broadcast_to(group, tuple(shape))

    reads = []
    for term, shape in zip(terms, shapes):
        key = [c for c in dict.fromkeys(term) if c in out and shape[term.index(c)] == sizes[c]]
        out_group = np.zeros(out_shape, np.int64)
        for label in key:
            out_group = out_group * sizes[label] + out_index[out.index(label)]
        reads.append(Groups(grouped(term, shape, key), np.broadcast_to(out_group, out_shape),
                            n_groups=math.prod(sizes[c] for c in key)))  # fmt: skip
    if len(terms) == 1:
        return Sparsity(reads)
    if len(terms) > 2:
        return Sparsity(
            reads, [(i, j) for i in range(len(terms)) for j in range(i + 1, len(terms))]
        )
    (a, b), (sa, sb) = terms, shapes
    shared = [c for c in dict.fromkeys(a) if c in b and sa[a.index(c)] == sb[b.index(c)]]
    n_terms = math.prod(sizes[c] for c in shared)
    term_reads = [
        Groups(grouped(a, sa, shared), n_groups=n_terms, out_group=np.arange(n_terms)),
        Groups(grouped(b, sb, shared), n_groups=n_terms, out_group=np.arange(n_terms)),
    ]
    return Sparsity(reads, [(0, 1)], terms=term_reads, n_terms=n_terms)


def running(x: Any, *, axis: int, **params: Any) -> Sparsity:
    """The rule of a running reduction along ``axis`` (``cumsum``): output element ``k``
    along the axis reads elements ``0..k`` (the whole axis where that would take more
    than ten million pairs)."""
    shape = shape_of_operand(x)
    n = shape[axis] if shape else 1
    if math.prod(shape) * (n + 1) // 2 > 10**7:
        keep = [a for a in range(len(shape)) if a != axis]
        return Sparsity([Groups(_groups(shape, keep), _groups(shape, keep))])
    ids = numbered(shape)
    out_idx, in_idx = [], []
    for k in range(n):  # output position k reads positions 0..k
        out_k = np.take(ids, [k], axis=axis)
        for j in range(k + 1):
            out_idx.append(out_k.ravel())
            in_idx.append(np.take(ids, [j], axis=axis).ravel())
    if not out_idx:
        return Sparsity([None])
    return Sparsity([Edges(np.concatenate(out_idx), np.concatenate(in_idx))])


def _own_problems(shape: Sequence[int], core: int, stack: Sequence[int]) -> np.ndarray:
    """For each problem of a stack of shape ``stack``, the number of the operand's own
    problem (of its ``shape[:-core]`` stack) that broadcasts to it."""
    own = tuple(shape[: len(shape) - core])
    ids = numbered(own).reshape((1,) * (len(stack) - len(own)) + own)
    return np.broadcast_to(ids, tuple(stack))


def problem_groups(shape: Sequence[int], core: int, out_shape: Sequence[int], out_core: int,
                   in_key: Any = None, out_key: Any = None, n_keys: int = 1) -> Groups:  # fmt: skip
    """What an output of ``out_shape`` reads of an operand of ``shape``, both problems of
    ``core`` (``out_core``) trailing axes stacked along leading axes that broadcast: an
    output element reads the operand elements of its problem whose ``in_key`` (an array
    of the problem's shape, values ``0..n_keys - 1``; -1: read by none) equals its own
    ``out_key`` (of the output problem's shape; -1: reads none).  No keys: the whole
    problem.

    >>> g = problem_groups((3, 2), 2, (3, 2), 2, [0, 1], [0, 1], n_keys=2)  # by column
    >>> g.in_group.tolist(), g.out_group.tolist()
    ([0, 1, 0, 1, 0, 1], [0, 1, 0, 1, 0, 1])
    """
    shape, out_shape = tuple(shape), tuple(out_shape)
    stack = out_shape[: len(out_shape) - out_core]
    own = numbered(shape[: len(shape) - core])

    def keyed(ids: np.ndarray, key: Any, full: tuple, k: int) -> np.ndarray:
        group = ids.reshape(ids.shape + (1,) * k) * n_keys
        if key is not None:
            key = np.asarray(key)
            group = np.where(key < 0, -1, group + key)
        return np.broadcast_to(group, full)

    return Groups(keyed(own, in_key, shape, core),
                  keyed(_own_problems(shape, core, stack), out_key, out_shape, out_core),
                  n_groups=own.size * n_keys)  # fmt: skip


def problem_edges(shape: Sequence[int], core: int, out_shape: Sequence[int], out_core: int,
                  out_idx: Any, in_idx: Any) -> Edges:  # fmt: skip
    """As ``problem_groups``, by edges: within each problem, output element
    ``out_idx[m]`` reads operand element ``in_idx[m]`` (flat positions in a problem).

    >>> e = problem_edges((2, 3), 1, (2, 3), 1, [0, 1, 2], [1, 2, 0])  # a rotation
    >>> e.in_idx.tolist()
    [1, 2, 0, 4, 5, 3]
    """
    shape, out_shape = tuple(shape), tuple(out_shape)
    stack = out_shape[: len(out_shape) - out_core]
    own = _own_problems(shape, core, stack).ravel()
    n_in = math.prod(shape[len(shape) - core :])
    n_out = math.prod(out_shape[len(stack) :])
    out_idx, in_idx = np.asarray(out_idx, np.int64), np.asarray(in_idx, np.int64)
    return Edges(np.arange(own.size)[:, None] * n_out + out_idx, own[:, None] * n_in + in_idx)


def triangle_key(n: int, lower: bool, *, diagonal: bool = True) -> np.ndarray:
    """The key of the lower (upper) triangle of ``n``-by-``n`` matrices for
    ``problem_groups``: 0 in it, -1 elsewhere (``diagonal=False``: on the diagonal too).

    >>> triangle_key(2, lower=True).tolist()
    [[0, -1], [0, 0]]
    """
    tri = np.tri(n, k=0 if diagonal else -1, dtype=bool)
    return np.where(tri if lower else tri.T, 0, -1)


def sliding(shapes: Sequence[Sequence[int]], core: int, window: Sequence[tuple[int, int]], *,
            correlate: bool = False) -> Sparsity:  # fmt: skip
    """The rule of the convolution of two operands (of ``shapes``) over their trailing
    ``core`` axes, stacked along leading axes that broadcast: along each axis ``window``
    gives where the output starts in the full convolution and its length, and output
    element ``o`` reads ``a[i]`` and ``b[j]`` with ``i + j == o + start`` (a
    correlation, ``correlate=True``: ``i - j == o + start``): a band.  Where that takes
    more than ten million pairs, every element.

    >>> rule = sliding([(4,), (2,)], 1, [(1, 3)])  # np.convolve(a, b, 'valid')
    >>> rule.reads[1].out_idx.tolist(), rule.reads[1].in_idx.tolist()
    ([0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1])
    """
    sa, sb = (tuple(s) for s in shapes)
    cores = [s[len(s) - core :] for s in (sa, sb)]
    stack = broadcast_shapes(sa[: len(sa) - core], sb[: len(sb) - core])
    lengths = tuple(n for _, n in window)
    if math.prod(lengths) * (math.prod(cores[0]) + math.prod(cores[1])) > 10**7:
        return Sparsity([ALL, ALL], [(0, 1)])
    reads = []
    for which in (0, 1):
        mask = np.ones((1, 1), bool)  # (output, operand) elements, axis after axis
        for (start, n), own, other in zip(window, cores[which], cores[1 - which]):
            o, i = np.arange(n)[:, None] + start, np.arange(own)[None, :]
            j = (i - o if which == 0 else i + o) if correlate else o - i
            near = (j >= 0) & (j < other)
            mask = (mask[:, None, :, None] & near[None, :, None, :]).reshape(
                mask.shape[0] * n, mask.shape[1] * own
            )
        out_idx, in_idx = np.nonzero(mask)
        reads.append(problem_edges((sa, sb)[which], core, stack + lengths, core, out_idx, in_idx))
    return Sparsity(reads, [(0, 1)])
