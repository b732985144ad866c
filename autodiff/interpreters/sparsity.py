"""Sparsity detection: index sets propagated through a staged graph.

Each input element starts with the set holding its own number; each equation's
sparsity rule (``Primitive.sparsity``, declared in the primitive's block; vocabulary in
``core/index_sets.py``) says which operand elements each output element reads, so the
output's sets are unions of the operands' (``propagate``).  The sets at the outputs are
the Jacobian's pattern: row ``k`` holds the inputs output element ``k`` depends on.

For Hessians the same walk also collects the pairs of inputs that meet in a non-linear
operation (``collecting_pairs``): where a rule says operands ``i`` and ``j`` interact,
every input in the sets of ``i``'s elements pairs with every input in ``j``'s, term by
term.  Pairs are collected for the whole graph, not per value: an over-approximation
(a pair made in a value the output does not use is kept; dead code is not walked),
never a miss.

A primitive without a rule is dense: every output element depends on every input any
operand depends on, and for Hessians all of those interact.  A primitive that is not
differentiable passes nothing on.  Control flow and calls declare rules that propagate
through their graphs (``control/``: the union over branches; a loop's fixed point).
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from autodiff.core.graph import Eqn, Graph, Literal, ShapedArray, aval_of
from autodiff.core.index_sets import IndexSets, apply_read, cross_pairs, propagating
from autodiff.core.primitive import Primitive
from autodiff.interpreters.staging import traced_impl

__all__ = [
    "PairLimit",
    "Pairs",
    "collecting_pairs",
    "dense_sets",
    "fixed_point",
    "interact",
    "propagate",
    "stacked_sets",
    "through_impl",
    "union",
]

# A loop whose carries still gain dependencies after this many passes through its body
# is given up on: every carry element then depends on everything the loop can reach.
MAX_PASSES = 64


class PairLimit(Exception):
    """More pairs than ``collecting_pairs(limit=...)`` allows: the Hessian is too dense
    to be worth detecting (a caller choosing a method by cost gives up early)."""


class Pairs:
    """The input pairs found so far (rows and columns, merged now and then)."""

    def __init__(self, limit: int | None = None) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []
        self.count = 0
        self.seen = 0  # pairs added, repeats included
        self.limit = limit

    def expect(self, count: int) -> None:
        """Count ``count`` more pairs before they are made (``PairLimit`` past the limit)."""
        self.seen += count
        if self.limit is not None and self.seen > self.limit:
            raise PairLimit(f"more than {self.limit} pairs")

    def add(self, rows: np.ndarray, cols: np.ndarray) -> None:
        if not len(rows):
            return
        self.parts.append((rows, cols))
        self.count += len(rows)
        if self.count > 1 << 22 and len(self.parts) > 1:  # bound the memory: merge
            self.parts = [self.merged()]
            self.count = len(self.parts[0][0])

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct pairs, both orders, sorted by row then column."""
        if not self.parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows = np.concatenate([p[0] for p in self.parts])
        cols = np.concatenate([p[1] for p in self.parts])
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
        width = int(max(rows.max(), cols.max())) + 1
        keys = np.unique(rows * width + cols)
        return keys // width, keys % width


_pairs: contextvars.ContextVar[Pairs | None] = contextvars.ContextVar("sparsity_pairs",
                                                                      default=None)  # fmt: skip


@contextlib.contextmanager
def collecting_pairs(limit: int | None = None) -> Iterator[Pairs]:
    """Inside, ``propagate`` also collects the Hessian's pairs into the ``Pairs`` yielded;
    past ``limit`` pairs (repeats included) it raises ``PairLimit``."""
    pairs = Pairs(limit)
    token = _pairs.set(pairs)
    try:
        yield pairs
    finally:
        _pairs.reset(token)


def union(*sets: IndexSets | None) -> IndexSets | None:
    """The element-wise union of sets of one size (None: no dependence)."""
    present = [s for s in sets if s is not None and s.nnz]
    if not present:
        return None
    return present[0] if len(present) == 1 else present[0].union(*present[1:])


def dense_sets(sets: Sequence[IndexSets | None], sizes: Sequence[int],
               nonlinear: bool = True) -> list[IndexSets | None]:  # fmt: skip
    """Every element of outputs of ``sizes`` depends on every input any of ``sets``
    holds (and, for Hessians, all of those interact when ``nonlinear``)."""
    present = [s.indices for s in sets if s is not None and s.nnz]
    if not present:
        return [None] * len(sizes)
    every = np.unique(np.concatenate(present))
    if nonlinear:
        _interacting(every, every)
    n = len(every)
    return [IndexSets(np.arange(size + 1, dtype=np.int64) * n, np.tile(every, size))
            for size in sizes]  # fmt: skip


def interact(a: IndexSets | None, b: IndexSets | None) -> None:
    """For Hessians (where pairs are being collected): every input any of ``a``'s sets
    holds interacts with every input any of ``b``'s holds (a rule that propagates its
    own sets says so for what its graph does not show)."""
    if a is not None and b is not None and a.nnz and b.nnz:
        _interacting(a.everything(), b.everything())


def _interacting(left: np.ndarray, right: np.ndarray) -> None:
    """Every input of ``left`` pairs with every input of ``right`` (when collecting)."""
    pairs = _pairs.get()
    if pairs is not None:
        pairs.expect(len(left) * len(right))
        pairs.add(np.repeat(left, len(right)), np.tile(right, len(left)))


def _operand(v: Any, consts: dict) -> Any:
    """What a rule is told of an operand: its value if known, else its abstract value."""
    if type(v) is Literal:
        return v.value
    found = consts.get(v, consts)
    return v.aval if found is consts else found


def _apply(eqn: Eqn, sets: list, consts: dict) -> list:
    prim = eqn.prim
    sizes = [v.aval.size for v in eqn.outvars]
    rule = prim.sparsity
    if rule is None:
        return dense_sets(sets, sizes)
    operands = [_operand(v, consts) for v in eqn.invars]
    if getattr(rule, "propagates", False):
        return list(rule(sets, operands, **eqn.params))
    specs = rule(*operands, **eqn.params)
    if not prim.multiple_results:
        specs = (specs,)
    pairs = _pairs.get()
    outs = []
    for spec, size in zip(specs, sizes):
        outs.append(union(*(apply_read(r, s, size) for r, s in zip(spec.reads, sets))))
        if pairs is None or not spec.pairs:
            continue
        term_reads = spec.reads if spec.terms is None else spec.terms
        n_terms = size if spec.n_terms is None else spec.n_terms
        cache: dict[int, Any] = {}
        for i, j in spec.pairs:
            for k in (i, j):
                if k not in cache:
                    cache[k] = apply_read(term_reads[k], sets[k], n_terms)
            if cache[i] is not None and cache[j] is not None:
                pairs.expect(int(np.dot(cache[i].lengths, cache[j].lengths)))
                pairs.add(*cross_pairs(cache[i], cache[j]))
    return outs


def propagate(graph: Graph, in_sets: Sequence[IndexSets | None]) -> list[IndexSets | None]:
    """The index sets of ``graph``'s outputs from those of its inputs (None: an input
    that depends on nothing differentiated).  Constants depend on nothing."""
    env: dict[Any, IndexSets | None] = dict(zip(graph.invars, in_sets))
    consts = dict(zip(graph.constvars, graph.consts))
    for eqn in graph.eqns:
        sets = [None if type(v) is Literal else env.get(v) for v in eqn.invars]
        if not eqn.prim.differentiable or all(s is None or s.nnz == 0 for s in sets):
            outs: list = [None] * len(eqn.outvars)
        else:
            outs = _apply(eqn, sets, consts)
        env.update(zip(eqn.outvars, outs))
    return [None if type(v) is Literal else env.get(v) for v in graph.outvars]


def through_impl(prim: Primitive) -> Callable:
    """The sparsity rule of a primitive whose implementation is written with autodiff
    functions and whose derivative is its implementation's (``checkpoint``): the
    implementation staged and propagated through."""
    ref = weakref.ref(prim)  # (no cycle through the primitive: it is freed with its call)

    @propagating
    def rule(sets, operands, **params):
        avals = [x if isinstance(x, ShapedArray) else aval_of(x) for x in operands]
        return propagate(traced_impl(ref(), avals, params).graph, sets)

    return rule


def _nnz(s: IndexSets | None) -> int:
    return 0 if s is None else s.nnz


def fixed_point(body: Graph, carry: Sequence[IndexSets | None], rest: Sequence[IndexSets | None],
                ) -> tuple[list, list]:  # fmt: skip
    """The carries' sets after any number of passes through ``body`` (``(*carry, *rest)
    -> (*carry, *more)``), each pass's union with the ones before (a loop may stop after
    any pass), and ``body``'s outputs at that point."""
    carry = list(carry)
    sizes = [v.aval.size for v in body.invars[: len(carry)]]
    for _ in range(MAX_PASSES):
        outs = propagate(body, [*carry, *rest])
        new = [union(c, o) for c, o in zip(carry, outs)]
        if all(_nnz(a) == _nnz(b) for a, b in zip(new, carry)):
            return carry, outs
        carry = new
    carry = dense_sets([*carry, *rest], sizes)
    return carry, propagate(body, [*carry, *rest])


def stacked_sets(steps: Sequence[IndexSets | None], size: int) -> IndexSets | None:
    """The sets of ``len(steps)`` values of ``size`` elements stacked along a new first axis."""
    if all(s is None for s in steps):
        return None
    lengths = np.concatenate([np.zeros(size, np.int64) if s is None else s.lengths for s in steps])
    indptr = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = [s.indices for s in steps if s is not None]
    return IndexSets(indptr, np.concatenate(indices))
