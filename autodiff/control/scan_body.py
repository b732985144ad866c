"""``scan``'s body: ``f`` called on flat leaves and checked, the order of the steps, and
the steps' ``y`` stacked.

Every route of ``scan.py`` runs steps through these: the loop in Python (``scan_p``'s
implementation), the checkpointed grad's recomputation (``scan_checkpoint.py``) and the
staged routes, which bind a scan of a step function of their own
(``scan_staged.bind_scan``).  They sit here, below all three, so that none imports
another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff.control.leaves import CARRY_HINT, check_like, names_of
from autodiff.core.args import a_type
from autodiff.core.arrays import array_like, dtype_of, shape_of
from autodiff.errors import TransformTypeError
from autodiff.rules.shape import stack

__all__ = ["ScanBody", "stacked", "steps"]


class ScanBody:
    """``f`` on flat leaves, ``(*carry, *x) -> (*carry, *y)``, checking what it returns:
    a pair, a carry like the one it was given (unless ``carry_names`` is None: the
    caller checks it), and ``y`` like the last step's."""

    __slots__ = ("carry_names", "carry_tree", "f", "n_carry", "xs_tree", "y_names", "y_tree",
                 "y_types")  # fmt: skip

    def __init__(self, f: Callable, carry_tree: Any, carry_names: list | None,
                 xs_tree: Any) -> None:  # fmt: skip
        self.f, self.xs_tree = f, xs_tree
        self.carry_tree, self.carry_names = carry_tree, carry_names
        self.n_carry = carry_tree.num_leaves
        self.y_tree: Any = None
        self.y_types: list = []
        self.y_names: list = []

    def __call__(self, *leaves: Any) -> tuple:
        carry, x = leaves[: self.n_carry], leaves[self.n_carry :]
        out = self.f(optree.tree_unflatten(self.carry_tree, list(carry)),
                     optree.tree_unflatten(self.xs_tree, list(x)))  # fmt: skip
        if not (isinstance(out, tuple) and len(out) == 2):
            got = f"a tuple of length {len(out)}" if isinstance(out, tuple) else a_type(out)
            raise TransformTypeError(
                f"scan: f must return a pair (carry, y), got {got}. Return (carry, None) "
                f"when there is nothing to stack."
            )
        new, c_tree = optree.tree_flatten(out[0])
        if self.carry_names is not None:
            check_like(new, c_tree, carry, self.carry_tree, self.carry_names,
                       "scan: the carry f returned", "the carry it was given",
                       CARRY_HINT)  # fmt: skip
        y, y_tree = optree.tree_flatten(out[1])
        if self.y_tree is None:
            self.y_tree, self.y_names = y_tree, names_of(y_tree, "y")
        else:
            check_like(y, y_tree, self.y_types, self.y_tree, self.y_names,
                       "scan: the y f returned", "the y of the step before",
                       "every step's y must have the same structure, shapes and dtypes, "
                       "to be stacked.")  # fmt: skip
        self.y_types = y
        return (*new, *y)


def steps(length: int, reverse: bool) -> range:
    """The steps' indices in the order they run."""
    return range(length - 1, -1, -1) if reverse else range(length)


def stacked(ys: list, body: ScanBody, carry: Sequence, xs: Sequence) -> tuple:
    """The steps' ``y`` leaves, each stacked along a new first axis."""
    if not ys:  # no step ran: run f once on stand-ins to learn the shapes of y
        x = [np.zeros(shape_of(v)[1:], dtype_of(v), like=array_like(v)) for v in xs]
        out = body(*carry, *x)[len(carry) :]
        return tuple(np.zeros((0, *shape_of(v)), dtype_of(v), like=array_like(v)) for v in out)
    return tuple(map(_stack, zip(*ys)))


def _stack(column: tuple) -> Any:
    """One y leaf of every step, stacked; Python numbers take the others' dtype."""
    if any(isinstance(y, (bool, int, float, complex)) for y in column):
        dtype = np.result_type(*(y if isinstance(y, (bool, int, float, complex)) else dtype_of(y)
                                 for y in column))  # fmt: skip
        return stack(list(column), dtype=dtype)
    return stack(list(column))
