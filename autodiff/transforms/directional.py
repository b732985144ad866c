"""Sums of directional derivatives: the terms every differential operator is made of.

A differential operator (``differential.py``) is a sum over directions ``v_r`` of the
input: second directional derivatives (``laplacian``: ``sum_r w_r D^2 f[v_r]``),
Hessian- or Jacobian-vector products read along the directions (``hessian_diag``:
``sum_r v_r * (H v_r)``, ``divergence``: ``sum_r v_r . (J v_r)``).  This module computes
such terms for a ``Problem`` (one call's differentiated argument as flat leaves, the
directions as rows of an ``(R, n)`` matrix):

- ``collapsed``: the weighted sum of K-th directional derivatives in one pass of collapsed
  Taylor mode (``interpreters/taylor.py``); with unit vectors and K = 2 the forward
  Laplacian (Li et al. 2024; Dangel et al. 2025);
- ``per_direction``: each direction's K-th derivative, Taylor mode under ``vmap``;
- ``hvps``, ``jvps``: a Hessian-vector product (forward over reverse) or a JVP per
  direction, under ``vmap``;

and the directions of the sparse methods: the program's Hessian pattern (or its
Jacobian's, symmetrised) detected once per input signature (``Detections``, with the
index sets of ``interpreters/sparsity.py``) and coloured so that no two indices of one
colour interact (``coloring.diagonal_coloring``): one direction per colour then gives
the same trace or diagonal as every unit vector.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import optree

from autodiff.core.args import check_callable
from autodiff.core.arrays import shape_of
from autodiff.core.graph import ShapedArray, aval_of
from autodiff.core.index_sets import IndexSets
from autodiff.core.tracer import Tracer
from autodiff.errors import AutodiffError, TransformTypeError, TransformValueError
from autodiff.interpreters.batching import vmap
from autodiff.interpreters.collapsed import push_collapsed
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import grad
from autodiff.interpreters.sparsity import PairLimit, collecting_pairs, propagate
from autodiff.interpreters.staging import stage
from autodiff.interpreters.taylor import push_series
from autodiff.rules import creation as _cre
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.transforms.coloring import diagonal_coloring
from autodiff.transforms.sparse_jacobians import _differentiated, _flat, _split

__all__ = [
    "Detections",
    "Problem",
    "UnitRows",
    "collapsed",
    "colour_directions",
    "hvps",
    "identity",
    "jvps",
    "operator_wrapper",
    "per_direction",
    "sparse_directions",
    "weighted_sum",
]

# auto: a Hessian pattern whose detection meets more pairs than this is dense enough
# that colouring cannot pay (the detection then stops early and is not repeated).
AUTO_PAIR_LIMIT = 1 << 20
# auto: below this many input elements the plain (dense) method is used at once.
AUTO_SPARSE_FROM = 32


class Problem(NamedTuple):
    """One call's differentiated argument as flat leaves, and ``func`` of them."""

    fn: Callable  # fn(*leaves) -> tuple of output leaves
    leaves: list
    in_tree: Any  # of the tuple holding the differentiated argument
    n: int  # input elements in all
    out_tree: list  # filled in by the first call of fn: [treedef]
    who: str

    def unflatten(self, outs: Any) -> Any:
        """Values per output leaf, structured like ``func``'s output."""
        return optree.tree_unflatten(self.out_tree[0], list(outs))

    def as_argument(self, flat: Any) -> Any:
        """A flat vector over the argument's ``n`` elements, shaped like the argument."""
        return optree.tree_unflatten(self.in_tree, _split(flat, self.leaves))[0]

    def directions(self, V: Any) -> list:
        """Flat directions ``(R, n)`` as one ``(R, *shape)`` array per leaf."""
        out, start = [], 0
        R = shape_of(V)[0]
        for leaf in self.leaves:
            size = math.prod(np.shape(leaf))
            out.append(_shp.reshape(V[:, start : start + size], (R, *np.shape(leaf))))
            start += size
        return out


def problem(func: Callable, argnums: Any, args: tuple, kwargs: dict, who: str) -> Problem:
    _, selected, _, leaves, in_tree, n = _differentiated(func, argnums, args, kwargs, who)
    for leaf in leaves:
        dtype = getattr(leaf, "dtype", None)
        if dtype is None or np.dtype(dtype).kind != "f":
            raise TransformTypeError(
                f"{who}: the differentiated argument must hold real floating-point arrays, "
                f"got a leaf of dtype {dtype}; convert it with x.astype(float)."
            )
    cell: list = [None]

    def fn(*xs):
        out = selected(*optree.tree_unflatten(in_tree, list(xs)))
        out_leaves, cell[0] = optree.tree_flatten(out)
        for leaf in out_leaves:
            if not hasattr(leaf, "shape") and not isinstance(leaf, (int, float)):
                raise TransformTypeError(
                    f"{who}: func returned {type(leaf).__name__}, not an array."
                )
        return tuple(out_leaves)

    return Problem(fn, leaves, in_tree, n, cell, who)


def check_argnums(argnums: Any, who: str) -> None:
    if isinstance(argnums, bool) or not isinstance(argnums, int):
        raise TransformTypeError(
            f"{who}: argnums must be one int (the argument the operator differentiates, "
            f"which may be a pytree of arrays), got {argnums!r}."
        )


# --- the terms, per method --------------------------------------------------------------------


def collapsed(p: Problem, V: Any, order: int, weights: Any = None) -> list:
    """``sum_r w_r D^K f[v_r]`` per output leaf (collapsed Taylor mode)."""
    one_vector = len(p.leaves) == 1 and len(np.shape(p.leaves[0])) == 1
    if one_vector and isinstance(V, UnitRows) and V.picks is not None:
        directions = [V]  # (p.directions would slice it: a view, which forgets its picks)
    else:
        directions = p.directions(V.view(np.ndarray) if isinstance(V, UnitRows) else V)
        if one_vector:
            directions = [UnitRows.of(directions[0])]
    _, tops = push_collapsed(p.fn, p.leaves, directions, order, weights)
    return [t * math.factorial(order) for t in tops]


class UnitRows(np.ndarray):
    """Directions that are unit vectors, row ``r`` being ``e_(picks[r])`` (the identity
    of a dense Laplacian, STDE's sampled coordinates): a product with a matrix is then a
    gather of its rows, not a matrix product (a network's first layer, ``I @ W``, is
    ``W``: at d = 1,024 inputs the product would cost more than the rest of the
    Laplacian).  Only the array made by ``of`` knows its picks; whatever NumPy derives
    from it (a view, a reshape, a transpose) is computed as from a plain array."""

    picks: Any = None

    @staticmethod
    def eye(n: int, dtype: Any) -> UnitRows:
        """The identity as ``UnitRows``, read-only; made once per size up to 2^21
        elements (16 MB in float64), for each call above (not to hold it after)."""
        return _shared_eye(n, dtype) if n * n <= 1 << 21 else _unit_eye(n, dtype)

    @staticmethod
    def of(V: Any) -> Any:
        """``V`` as ``UnitRows`` where it is a plain 2-D array of unit rows, else ``V``."""
        if type(V) is not np.ndarray or V.ndim != 2 or V.dtype.kind != "f" or not V.size:
            return V
        picks = np.argmax(V, axis=1)
        rows = np.arange(V.shape[0])
        if not (np.all(V[rows, picks] == 1) and np.count_nonzero(V) == V.shape[0]):
            return V
        out = V.view(UnitRows)
        out.picks = picks
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self.picks = None

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if (ufunc is np.matmul and method == "__call__" and not kwargs and len(inputs) == 2
                and inputs[0] is self and self.picks is not None
                and type(inputs[1]) is np.ndarray and inputs[1].ndim == 2
                and inputs[1].shape[0] == self.shape[1]):  # fmt: skip
            return inputs[1][self.picks]
        plain = tuple(x.view(np.ndarray) if isinstance(x, UnitRows) else x for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, UnitRows) else x
                                  for x in kwargs["out"])  # fmt: skip
        return getattr(ufunc, method)(*plain, **kwargs)


def _unit_eye(n: int, dtype: Any) -> UnitRows:
    out = np.eye(n, dtype=dtype).view(UnitRows)
    out.picks = np.arange(n)
    out.setflags(write=False)
    return out


_shared_eye = functools.lru_cache(maxsize=8)(_unit_eye)


def per_direction(p: Problem, V: Any, order: int) -> list:
    """``D^K f[v_r]`` for each direction: one ``(R, *out)`` array per output leaf."""

    def one(*vs):
        series = [(v, *(None,) * (order - 1)) for v in vs]
        outs, coefficients = push_series(p.fn, p.leaves, series, order)
        scale = math.factorial(order)
        return tuple(_cre.zeros_like(o) if c is None or c[-1] is None else c[-1] * scale
                     for o, c in zip(outs, coefficients))  # fmt: skip

    return list(vmap(one)(*p.directions(V)))


def _scalar(p: Problem, method: str) -> Callable:
    def fn(*xs):
        (out,) = _one_output(p, p.fn(*xs), method)
        return out

    return fn


def _one_output(p: Problem, outs: tuple, method: str) -> tuple:
    if len(outs) != 1 or math.prod(shape_of(outs[0])) != 1:
        raise TransformValueError(
            f"{p.who}: method={method!r} needs func to return one scalar, got outputs of "
            f"shapes {[shape_of(o) for o in outs]}."
        )
    return (_shp.reshape(outs[0], ()),)


def hvps(p: Problem, V: Any, method: str) -> Any:
    """``H v_r`` for each direction (forward over reverse), flat: ``(R, n)``."""
    gradient = grad(_scalar(p, method), argnums=tuple(range(len(p.leaves))))

    def one(*vs):
        return _flat(list(jvp(gradient, tuple(p.leaves), tuple(vs))[1]))

    return vmap(one)(*p.directions(V))


def jvps(p: Problem, V: Any) -> Any:
    """``J v_r`` for each direction, flat: ``(R, m)``."""

    def one(*vs):
        return _flat(list(jvp(p.fn, tuple(p.leaves), tuple(vs))[1]))

    return vmap(one)(*p.directions(V))


def weighted_sum(values: Any, weights: Any) -> Any:
    """``sum_r w_r values[r]`` (None: plain sum) over the leading axis."""
    if weights is None:
        return _red.sum(values, axis=0)
    w = _shp.reshape(weights, (-1, *(1,) * (len(shape_of(values)) - 1)))
    return _red.sum(values * w, axis=0)


# --- sparsity: one direction per colour, detected once per signature ------------------------------


def colour_directions(colors: np.ndarray, n: int, dtype: Any) -> np.ndarray:
    """One direction per colour: the sum of that colour's unit vectors, ``(c, n)``."""
    out = np.zeros((int(colors.max(initial=-1)) + 1, n), dtype)
    out[colors, np.arange(n)] = 1
    return out


def _signature(args: tuple, kwargs: dict) -> Any:
    leaves, treedef = optree.tree_flatten((args, kwargs))
    return treedef, tuple(ShapedArray(tuple(x.shape), x.dtype) if isinstance(x, Tracer)
                          else aval_of(x) for x in leaves)  # fmt: skip


class Detections:
    """Colourings per input signature for one operator: the Hessian's (``hessian=True``)
    or the symmetrised Jacobian's, or None where the pattern is too dense to pay."""

    def __init__(self, func: Callable, argnums: int, hessian: bool) -> None:
        self.func, self.argnums, self.hessian = func, argnums, hessian
        self.found: dict[Any, np.ndarray | None] = {}
        self.lock = threading.Lock()

    def colors(self, args: tuple, kwargs: dict, who: str, limit: int | None) -> Any:
        key = (_signature(args, kwargs), limit is None)
        if key in self.found:
            return self.found[key]
        with self.lock:
            found = self.found[key] = self._detect(args, kwargs, who, limit)
            if len(self.found) > 32:
                self.found.pop(next(iter(self.found)))
        return found

    def _detect(self, args: tuple, kwargs: dict, who: str, limit: int | None) -> Any:
        leaves, treedef = optree.tree_flatten((args, kwargs))
        avals = list(_signature(args, kwargs)[1])
        marks = optree.tree_unflatten(treedef, list(range(len(leaves))))[0][self.argnums]
        chosen = sorted(optree.tree_leaves(marks))

        def flat(*xs):
            a, k = optree.tree_unflatten(treedef, list(xs))
            return optree.tree_leaves(self.func(*a, **k))

        graph = stage(flat, avals, transform=who, name=who).graph
        in_sets: list = [None] * len(graph.invars)
        offset = 0
        for i in chosen:
            in_sets[i] = IndexSets.identity(avals[i].size, offset)
            offset += avals[i].size
        if self.hessian:
            try:
                with collecting_pairs(limit) as pairs:
                    propagate(graph, in_sets)
            except PairLimit:
                return None
            rows, cols = pairs.merged()
        else:  # i and j interact if output i reads input j or output j reads input i
            outs = [s for s in propagate(graph, in_sets) if s is not None]
            rows = np.concatenate([s.row_of_each() for s in outs]) if outs else np.zeros(0, int)
            cols = np.concatenate([s.indices for s in outs]) if outs else np.zeros(0, int)
            rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
        return diagonal_coloring(IndexSets.from_pairs(rows, cols, offset))


def sparse_directions(detections: Detections, p: Problem, args: tuple, kwargs: dict,
                      auto: bool) -> Any:  # fmt: skip
    """The colour directions for ``method="sparse"`` (None under ``auto`` where they
    would not pay: a dense pattern, or one the program cannot be staged for)."""
    if auto and p.n < AUTO_SPARSE_FROM:
        return None
    try:
        colors = detections.colors(args, kwargs, p.who, AUTO_PAIR_LIMIT if auto else None)
    except AutodiffError:
        if auto:  # a program that cannot be staged (value-dependent Python control flow)
            return None
        raise
    if colors is None or (auto and 2 * (int(colors.max(initial=-1)) + 1) > p.n):
        return None
    return colour_directions(colors, p.n, p.leaves[0].dtype)


# --- the wrapper every operator shares ------------------------------------------------------


def operator_wrapper(func: Callable, argnums: int, who: str, compute: Callable) -> Callable:
    """``func``'s operator: ``compute(p, args, kwargs)`` on each call's ``Problem``."""
    check_callable(func, who)
    check_argnums(argnums, who)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return compute(problem(func, argnums, args, kwargs, who), args, kwargs)

    return wrapper


def identity(p: Problem) -> np.ndarray:
    return np.eye(p.n, dtype=p.leaves[0].dtype)
