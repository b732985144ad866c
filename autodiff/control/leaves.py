"""The leaves control flow takes and returns, and their types: the pytrees passed in
flattened with each leaf named (``init_val['h']``), and the checks that what a user's
function returned matches what it must (``check_like``), that a predicate is a boolean
or integer scalar (``check_predicate``), and that a length is an int.

Type errors are caught where they can be seen: branches that ran disagreeing in
structure, shape or dtype, a loop body that changes its carry, a predicate that is not
a scalar of its kind, each naming the offending leaf and saying what to do instead.
Every control-flow module (``cond.py``, ``while_loop.py``, ``scan.py`` and their staged
routes) checks through these; they sit below all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff.core.args import a_type, is_array
from autodiff.core.arrays import dtype_of, shape_of
from autodiff.errors import TransformTypeError

__all__ = [
    "CARRY_HINT",
    "check_like",
    "check_predicate",
    "is_static_int",
    "leaves_of",
    "names_of",
    "output_types",
]


def leaves_of(tree: Any, root: str, what: str) -> tuple[list, Any, list[str]]:
    """The leaves of ``tree``, its structure and each leaf's name (``init_val['h']``);
    every leaf must be an array or a Python number."""
    leaves, treedef = optree.tree_flatten(tree)
    names = names_of(treedef, root)
    for leaf, name in zip(leaves, names):
        if not (is_array(leaf) or isinstance(leaf, (bool, int, float, complex))):
            raise TransformTypeError(
                f"{what}: {name} is {a_type(leaf)}, not an array; the values passed to "
                f"control flow must be arrays or numbers (pytrees of them). Pass other "
                f"values to the functions through a closure."
            )
    return leaves, treedef, names


def names_of(tree: Any, root: str) -> list[str]:
    """Each leaf's name in the structure ``tree``: ``root['h'][0]``."""
    return [root + "".join(f"[{p!r}]" for p in path) for path in tree.paths()]


def _describe(x: Any) -> str:
    return f"shape {shape_of(x)} and dtype {dtype_of(x)}"


_KINDS = {"b": "b", "i": "i", "u": "i", "f": "f", "c": "c"}

_NUMBERS = (bool, int, float, complex)


def _same_type(ref: Any, got: Any) -> bool:
    """Same shape and dtype; a Python number (weakly typed, as in JAX) matches any
    dtype of its kind (``0.0`` a float32 value, ``0`` an int32 one)."""
    weak = type(ref) in _NUMBERS or type(got) in _NUMBERS
    if not weak:  # arrays and tracers: checked on every iteration, so first and quickly
        return ref.shape == got.shape and ref.dtype == got.dtype
    if type(ref) is type(got):
        return True
    if shape_of(ref) != shape_of(got):
        return False
    return _KINDS.get(dtype_of(ref).kind) == _KINDS.get(dtype_of(got).kind)


def check_like(
    got_leaves: Sequence, got_tree: Any, ref_leaves: Sequence, ref_tree: Any,
    names: Sequence[str], who: str, ref_what: str, hint: str,
) -> None:  # fmt: skip
    """Raise ``TransformTypeError`` unless ``who`` (what a function returned) matches
    ``ref_what`` in structure and in each leaf's shape and dtype, naming the leaf."""
    if got_tree != ref_tree:
        raise TransformTypeError(
            f"{who} is structured as {got_tree}, where {ref_what} is structured as "
            f"{ref_tree}; {hint}"
        )
    for got, ref, name in zip(got_leaves, ref_leaves, names):
        if not _same_type(ref, got):
            raise TransformTypeError(
                f"{who} has {_describe(got)} at {name}, where {ref_what} has "
                f"{_describe(ref)}; {hint}"
            )


def output_types(fn: Callable, leaves: Sequence) -> tuple[Any, list] | None:
    """The output structure of the branch ``fn`` on ``leaves`` and, per output leaf, a
    value with its ``shape`` and ``dtype``, without running it; None where that
    needs running it.

    Eagerly a branch runs or it does not, nothing more (so None); under ``jit`` every
    branch is staged and checked when the ``cond`` is (``cond_staged.stage_branches``).
    A hook for transforms that know the types of a function without running it.
    """
    return None


_SCALARS = {"bool": (bool, np.bool_), "int": (int, np.int64, np.int32)}


def check_predicate(pred: Any, what: str, kind: str) -> None:
    """``kind`` "bool": a boolean scalar (cond, while_loop); "int": an integer
    scalar (switch)."""
    if type(pred) in _SCALARS[kind]:  # checked once per iteration: fast
        return
    if not (is_array(pred) or isinstance(pred, (bool, int, float, complex))):
        raise TransformTypeError(f"{what} must be a scalar array, got {a_type(pred)}.")
    shape, dtype = shape_of(pred), dtype_of(pred)
    if shape != ():
        raise TransformTypeError(
            f"{what} must be a scalar (shape ()), got shape {shape}. Reduce it first "
            f"(x.all(), x.any(), x.sum() > 0); to choose elementwise use anp.where; "
            f"under vmap the examples' scalars may differ, which is allowed."
        )
    if kind == "bool" and dtype.kind != "b":
        raise TransformTypeError(
            f"{what} must be boolean, got dtype {dtype}; compare it (n != 0, x > 0) to "
            f"make a boolean, or use switch to choose by an integer."
        )
    if kind == "int" and dtype.kind not in "iu":
        raise TransformTypeError(
            f"{what} must be an integer, got dtype {dtype}; convert it with "
            f".astype(int) (a boolean chooses between two branches with cond)."
        )


def is_static_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


CARRY_HINT = "a loop's carry keeps its structure, shapes and dtypes (cast with .astype)."
