"""Flattening a transform's arguments and results, with optree imported only for trees.

optree flattens pytrees. But most calls of ``grad(f)(x)`` have no tree to speak of: the
arguments are a tuple of arrays or numbers, and so is the result. Importing optree for
them costs a short program about 10 ms, a fifth of the package's import (autograd's
example programs finish in well under a second). So a tuple (or list) of such plain
values, or one plain value, is flattened here, with a structure, ``Flat``, that stands
for the treespec optree would give; anything else goes to optree, imported then.

``Flat`` is a stand-in, not a second tree library: it compares equal to optree's
treespec of the same structure, and every other use (printing it, ``flatten_up_to``,
...) is answered by that treespec, made on demand.

>>> import numpy as np
>>> leaves, tree = flatten((np.ones(2), 3.0))
>>> len(leaves), tree.num_leaves, unflatten(tree, leaves)[1]
(2, 2, 3.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autodiff.core.tracer import Tracer

__all__ = ["Flat", "flatten", "is_plain", "leaves", "tree_map", "unflatten"]

# Values optree takes for leaves (no pytree registration exists for them), by exact type:
# a subclass might be registered as a node, so it goes to optree.
_PLAIN = frozenset({np.ndarray, float, int, complex, bool, *np.sctypeDict.values()})


def is_plain(x: Any) -> bool:
    """Whether ``x`` is a leaf to optree without asking it: an array, a number, a
    traced value."""
    return type(x) in _PLAIN or isinstance(x, Tracer)


class Flat:
    """The structure of one plain value (``kind`` None) or of a tuple or list of them."""

    __slots__ = ("_spec", "kind", "num_leaves")

    def __init__(self, kind: type | None, num_leaves: int) -> None:
        self.kind, self.num_leaves, self._spec = kind, num_leaves, None

    def unflatten(self, leaves: Any) -> Any:
        return leaves[0] if self.kind is None else self.kind(leaves)

    def treespec(self) -> Any:
        """optree's treespec of this structure (optree imported here, on first need)."""
        if self._spec is None:
            import optree

            shape = 0 if self.kind is None else self.kind([0] * self.num_leaves)
            self._spec = optree.tree_structure(shape)
        return self._spec

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Flat):
            return (self.kind, self.num_leaves) == (other.kind, other.num_leaves)
        return self.treespec() == other

    def __hash__(self) -> int:
        return hash(self.treespec())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.treespec(), name)

    def __repr__(self) -> str:
        return repr(self.treespec())


def flatten(tree: Any) -> tuple[list, Any]:
    """``optree.tree_flatten(tree)``: the leaves and the structure (a ``Flat`` where
    ``tree`` is plain values)."""
    if is_plain(tree):
        return [tree], Flat(None, 1)
    if type(tree) in (tuple, list) and all(map(is_plain, tree)):
        return list(tree), Flat(type(tree), len(tree))
    import optree

    return optree.tree_flatten(tree)


def unflatten(tree: Any, leaves: Any) -> Any:
    """``optree.tree_unflatten``, for a structure :func:`flatten` gave."""
    if isinstance(tree, Flat):
        return tree.unflatten(list(leaves))
    import optree

    return optree.tree_unflatten(tree, leaves)


def leaves(tree: Any) -> list:
    """``optree.tree_leaves(tree)``."""
    return flatten(tree)[0]


def tree_map(func: Any, tree: Any, *rest: Any) -> Any:
    """``optree.tree_map(func, tree, *rest)``."""
    flat, structure = flatten(tree)
    others = [flatten(other) for other in rest]
    if any(not isinstance(s, Flat) or s != structure for _, s in others):
        import optree  # (structures that differ: optree says how, or maps a prefix)

        return optree.tree_map(func, tree, *rest)
    return unflatten(structure, [func(*leaves) for leaves in zip(flat, *(o for o, _ in others))])
