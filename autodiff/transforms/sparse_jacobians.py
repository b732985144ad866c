"""Compressed sparse Jacobians and Hessians: ``jacobian(f, sparsity=...)`` and
``hessian(f, sparsity=...)``.

With the pattern known (detected from the program with ``sparsity="auto"``, or given),
the columns are coloured so that no row holds two of one colour (``coloring.py``); one
JVP per colour, all of them in one ``vmap`` over the colours' seed vectors, gives the
compressed Jacobian ``B = J @ S``, and each non-zero ``J[i, j]`` is read off
``B[i, colour(j)]``.  Rows coloured likewise give reverse mode (``B = W.T @ J``, one
VJP per colour); the mode with fewer colours is chosen.  A Hessian's pattern is star
coloured and evaluated with Hessian-vector products (forward over reverse); every
entry is still read off directly (``star_recovery``).

The result is a ``scipy.sparse.csr_array`` (a ``SparseMatrix`` of index arrays where
SciPy is missing or the values are traced): rows are the outputs' elements, columns the
differentiated inputs' elements, each raveled and concatenated in pytree order.
Patterns and colourings are cached per input signature.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import optree

from autodiff.core.args import at_positions, check_flag, normalize_argnums, split_aux
from autodiff.core.graph import ShapedArray, aval_of
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformValueError
from autodiff.interpreters.batching import vmap
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import _vjp, grad
from autodiff.rules import compositions as _comp
from autodiff.rules import shape as _shp
from autodiff.transforms.coloring import column_coloring, row_coloring, star_coloring, star_recovery
from autodiff.transforms.sparsity import SparseMatrix, SparsityPattern, detector

__all__ = ["Plan", "sparse_hessian", "sparse_jacobian"]


class Plan(NamedTuple):
    """How one signature's matrix is computed: ``mode`` (``"forward"``, ``"reverse"``
    or ``"hessian"``), one colour per column (or row), the seed vectors (one row per
    colour) and where each non-zero is in the compressed matrix (flat positions)."""

    pattern: SparsityPattern
    mode: str
    colors: np.ndarray
    seeds: np.ndarray
    where: np.ndarray

    @property
    def n_colors(self) -> int:
        return len(self.seeds)


def _seeds(colors: np.ndarray, size: int) -> np.ndarray:
    n = int(colors.max(initial=-1)) + 1
    seeds = np.zeros((n, size))
    seeds[colors, np.arange(size)] = 1.0
    return seeds


def plan_jacobian(pattern: SparsityPattern, mode: str) -> Plan:
    """Colour ``pattern``'s columns (forward), rows (reverse), or both, keeping the
    fewer colours (``mode="auto"``; forward on a tie: no tape)."""
    m, n = pattern.shape
    sets = pattern.sets()
    plans = []
    if mode in ("auto", "forward"):
        colors = column_coloring(sets, n)
        n_colors = int(colors.max(initial=-1)) + 1
        where = pattern.rows * n_colors + colors[pattern.cols] if n_colors else pattern.rows
        plans.append(Plan(pattern, "forward", colors, _seeds(colors, n), where))
    if mode == "auto" and plans[0].n_colors <= int(np.bincount(pattern.cols, minlength=1).max()):
        return plans[0]  # rows need at least as many colours as a column has rows
    if mode in ("auto", "reverse"):
        colors = row_coloring(sets, n)
        n_colors = int(colors.max(initial=-1)) + 1
        where = colors[pattern.rows] * n + pattern.cols
        plans.append(Plan(pattern, "reverse", colors, _seeds(colors, m), where))
    return min(plans, key=lambda p: p.n_colors)


def plan_hessian(pattern: SparsityPattern) -> Plan:
    """A star colouring of the symmetric ``pattern``, and where each entry is."""
    colors = star_coloring(pattern.sets())
    where = star_recovery(pattern.sets(), colors)
    assert where is not None  # star_coloring guarantees it
    return Plan(pattern, "hessian", colors, _seeds(colors, pattern.shape[0]), where)


def _signature(args: tuple, kwargs: dict) -> Any:
    leaves, treedef = optree.tree_flatten((args, kwargs))
    return treedef, tuple(ShapedArray(tuple(x.shape), x.dtype) if isinstance(x, Tracer)
                          else aval_of(x) for x in leaves)  # fmt: skip


class _Plans:
    """Plans per input signature (from the detected pattern), or the one plan of a
    given pattern."""

    def __init__(self, func: Callable, argnums: Any, sparsity: Any, hessian: bool,
                 mode: str, who: str, has_aux: bool = False) -> None:  # fmt: skip
        self.auto = isinstance(sparsity, str)
        if self.auto and sparsity != "auto":
            raise TransformValueError(
                f"{who}: sparsity must be 'auto' (detected from the program), a pattern "
                f"(a SparsityPattern, a SciPy sparse array or a dense boolean array), or "
                f"None, got {sparsity!r:.40}."
            )
        self.given = None if self.auto else SparsityPattern.of(sparsity)
        self.detect = detector(func, argnums, hessian, who, has_aux) if self.auto else None
        self.hessian, self.mode, self.who = hessian, mode, who
        self.plans: dict[Any, Plan] = {}
        self.lock = threading.RLock()

    def get(self, args: tuple, kwargs: dict, n: int) -> Plan:
        """The plan for these arguments (``n``: how many input elements)."""
        key = _signature(args, kwargs) if self.auto else None
        plan = self.plans.get(key)
        if plan is None:
            with self.lock:
                if self.detect is not None:
                    pattern = self.detect(args, kwargs).pattern
                else:
                    pattern = SparsityPattern.of(self.given)
                plan = plan_hessian(pattern) if self.hessian else plan_jacobian(pattern, self.mode)
                if len(self.plans) > 32:
                    self.plans.clear()
                self.plans[key] = plan
        self.check(plan, n, 1)
        return plan

    def check(self, plan: Plan, size: int, axis: int) -> None:
        if plan.pattern.shape[axis] != size:
            what = "inputs" if axis else "outputs"
            raise TransformValueError(
                f"{self.who}: the sparsity pattern has shape {plan.pattern.shape}, but the "
                f"differentiated {what} have {size} elements in all (a {self.who}'s rows are "
                f"the outputs' elements, its columns the differentiated inputs' elements)."
            )


def _flat(leaves: list) -> Any:
    """The leaves raveled and concatenated (one vector)."""
    parts = [_shp.reshape(x, (math.prod(np.shape(x)),)) for x in leaves]
    return parts[0] if len(parts) == 1 else _shp.concatenate(parts, axis=0)


def _split(vector: Any, like: list) -> list:
    """``vector`` cut into arrays shaped and typed like ``like``'s leaves."""
    out, start = [], 0
    for leaf in like:
        size = math.prod(np.shape(leaf))
        part = _shp.reshape(vector[start : start + size], np.shape(leaf))
        out.append(part.astype(leaf.dtype) if part.dtype != leaf.dtype else part)
        start += size
    return out


def _assemble(data: Any, plan: Plan) -> Any:
    """The non-zeros as a SciPy CSR array, or as a ``SparseMatrix`` without SciPy or
    when they are traced."""
    pattern = plan.pattern
    if not isinstance(data, Tracer):
        try:
            import scipy.sparse  # optional and slow to import: on first use only
        except ImportError:
            pass
        else:
            return scipy.sparse.csr_array(
                (np.asarray(data), pattern.indices, pattern.indptr), shape=pattern.shape
            )
    return SparseMatrix(data, pattern.rows, pattern.cols, pattern.shape)


def _read(compressed: Any, where: np.ndarray) -> Any:
    """``compressed.ravel()[where]``, for arrays and tracers."""
    return _shp.reshape(compressed, (-1,))[where]


def _differentiated(func: Callable, argnums: Any, args: tuple, kwargs: dict, who: str) -> tuple:
    """The differentiated arguments' positions, ``func`` of them alone, the arguments
    (Python numbers made arrays), their leaves and structure, and their total size."""
    positions = normalize_argnums(argnums, len(args), who)
    selected = at_positions(func, args, positions, kwargs)
    in_leaves, in_tree = optree.tree_flatten(tuple(args[i] for i in positions))
    in_leaves = [np.asarray(x) if isinstance(x, (int, float)) else x for x in in_leaves]
    chosen = tuple(optree.tree_unflatten(in_tree, in_leaves))
    n = sum(math.prod(np.shape(x)) for x in in_leaves)
    return positions, selected, chosen, in_leaves, in_tree, n


def sparse_jacobian(func: Callable, argnums: Any, has_aux: bool, sparsity: Any,
                    mode: str) -> Callable:  # fmt: skip
    """``jacobian(func, argnums, has_aux, sparsity=sparsity, mode=mode)``."""
    check_flag(has_aux, "has_aux", "jacobian")
    plans = _Plans(func, argnums, sparsity, False, mode, "jacobian", has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        positions, selected, chosen, in_leaves, in_tree, n = _differentiated(
            func, argnums, args, kwargs, "jacobian"
        )
        plan = plans.get(args, kwargs, n)
        if plan.mode == "forward":
            compressed, aux = _forward(selected, chosen, in_leaves, in_tree, plan, has_aux)
            plans.check(plan, np.shape(compressed)[0], 0)
        else:
            out, vjp_fn, aux = _vjp(selected, chosen, has_aux, "jacobian", positions)
            plans.check(plan, sum(math.prod(np.shape(x)) for x in optree.tree_leaves(out)), 0)
            compressed = _reverse(vjp_fn, out, plan)
        result = _assemble(_read(compressed, plan.where), plan)
        return (result, aux) if has_aux else result

    return wrapper


def _forward(selected, chosen, in_leaves, in_tree, plan: Plan, has_aux: bool) -> tuple:
    """``B[c] = J @ seed[c]`` for every colour, by ``vmap`` of ``jvp``: ``(n_colors, m)``."""

    def checked(*chosen_args):
        return split_aux(selected(*chosen_args), "jacobian")

    def push(seed):
        tangents = optree.tree_unflatten(in_tree, _split(seed, in_leaves))
        if has_aux:
            _, t, aux = jvp(checked, chosen, tangents, has_aux=True)
            return _flat(optree.tree_leaves(t)), aux
        _, t = jvp(selected, chosen, tangents)
        return _flat(optree.tree_leaves(t)), None

    compressed, aux = vmap(push, out_dims=(0, None))(plan.seeds)
    # B[c, i] is J[i, j] for the column j of colour c in row i: transposed, (m, n_colors)
    return _comp.swapaxes(compressed, 0, 1), aux


def _reverse(vjp_fn: Callable, out: Any, plan: Plan) -> Any:
    """``B[c] = seed[c] @ J`` for every colour, by ``vmap`` of the VJP: ``(n_colors, n)``."""
    out_leaves, out_tree = optree.tree_flatten(out)

    def pull(seed):
        cts = vjp_fn(optree.tree_unflatten(out_tree, _split(seed, out_leaves)))
        return _flat(optree.tree_leaves(cts))

    return vmap(pull)(plan.seeds)


def sparse_hessian(func: Callable, argnums: Any, sparsity: Any) -> Callable:
    """``hessian(func, argnums, sparsity=sparsity)``."""
    plans = _Plans(func, argnums, sparsity, True, "auto", "hessian")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        _, selected, chosen, in_leaves, in_tree, n = _differentiated(
            func, argnums, args, kwargs, "hessian"
        )
        plan = plans.get(args, kwargs, n)
        gradient = grad(selected, argnums=tuple(range(len(chosen))))

        def flat_gradient(*xs):
            return _flat(optree.tree_leaves(gradient(*xs)))

        def push(seed):
            tangents = optree.tree_unflatten(in_tree, _split(seed, in_leaves))
            return jvp(flat_gradient, chosen, tuple(tangents))[1]

        compressed = _comp.swapaxes(vmap(push)(plan.seeds), 0, 1)  # (n, n_colors)
        return _assemble(_read(compressed, plan.where), plan)

    return wrapper
