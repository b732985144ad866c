"""Flattening a transform's arguments and results, with optree imported only for trees.

optree flattens pytrees. But most calls of ``grad(f)(x)`` have no tree to speak of: the
arguments are a tuple of arrays or numbers, and so is the result. Importing optree for
them costs a short program about 10 ms, a fifth of the package's import (autograd's
example programs finish in well under a second). So such plain values, alone or in
tuples and lists (nested too), are flattened here, with a structure, ``Flat``, that
stands for the treespec optree would give; so is any other object that is none of
optree's own nodes while optree is not imported (no registration can have made it one:
registering imports optree). Anything else goes to optree, imported then.

``Flat`` is a stand-in, not a second tree library: it compares equal to optree's
treespec of the same structure, and every other use (printing it, ``flatten_up_to``,
...) is answered by that treespec, made on demand.

>>> import numpy as np
>>> leaves, tree = flatten((np.ones(2), 3.0))
>>> len(leaves), tree.num_leaves, unflatten(tree, leaves)[1]
(2, 2, 3.0)
"""

from __future__ import annotations

import collections
import sys
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
    """The structure of plain values in tuples and lists: ``shape`` is None for one value,
    else ``(tuple or list, the items' shapes)`` (``none_is_leaf``: as optree's option, for
    the treespec this stands for)."""

    __slots__ = ("_spec", "none_is_leaf", "num_leaves", "shape")

    def __init__(self, shape: Any, num_leaves: int, none_is_leaf: bool = False) -> None:
        self.shape, self.num_leaves, self.none_is_leaf = shape, num_leaves, none_is_leaf
        self._spec = None

    def unflatten(self, leaves: Any) -> Any:
        return _built(self.shape, iter(leaves))

    def treespec(self) -> Any:
        """optree's treespec of this structure (optree imported here, on first need)."""
        if self._spec is None:
            import optree

            zeros = _built(self.shape, iter([0] * self.num_leaves))
            self._spec = optree.tree_structure(zeros, none_is_leaf=self.none_is_leaf)
        return self._spec

    def flatten_up_to(self, tree: Any) -> list:
        """``treespec.flatten_up_to``: the subtrees of ``tree`` at this structure's leaves."""
        if self.shape is None:
            return [tree]
        kind, items = self.shape
        if type(tree) is kind and len(tree) == len(items) and not any(items):
            return list(tree)
        return self.treespec().flatten_up_to(tree)  # (nested, or optree's error)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Flat):
            return (self.shape, self.none_is_leaf) == (other.shape, other.none_is_leaf)
        return self.treespec() == other

    def __hash__(self) -> int:
        return hash(self.treespec())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # (copy and pickle ask for __setstate__ before _spec is set)
            raise AttributeError(name)
        return getattr(self.treespec(), name)

    def __repr__(self) -> str:
        return repr(self.treespec())


_NOT_PLAIN = object()
# The structure of one leaf, shared (by none_is_leaf): flatten's commonest answer.
_ONE_LEAF = (Flat(None, 1), Flat(None, 1, none_is_leaf=True))
# What optree makes nodes of without a registration (namedtuples and structseqs are tuples).
_BUILT_IN_NODES = (tuple, list, dict, collections.deque)


def _opaque(x: Any) -> bool:
    """Whether ``x`` is a leaf to optree because nothing can have registered its type as a
    node: optree is not imported yet (a registration imports it) and ``x`` is none of
    optree's own nodes (a user's object passed to ``custom_vjp`` as a non-differentiable
    argument, a solver's settings)."""
    return x is not None and "optree" not in sys.modules and not isinstance(x, _BUILT_IN_NODES)


def _shape(tree: Any, leaves: list, none_is_leaf: bool) -> Any:
    """``tree``'s shape (see ``Flat``), its leaves appended to ``leaves``; _NOT_PLAIN where
    it holds anything but plain values, tuples and lists (and None, a leaf where
    ``none_is_leaf``: vmap's ``in_dims=(0, None)``)."""
    if is_plain(tree) or (tree is None and none_is_leaf) or _opaque(tree):
        leaves.append(tree)
        return None
    if type(tree) not in (tuple, list):
        return _NOT_PLAIN
    items = []
    for item in tree:
        shape = _shape(item, leaves, none_is_leaf)
        if shape is _NOT_PLAIN:
            return _NOT_PLAIN
        items.append(shape)
    return type(tree), tuple(items)


def _built(shape: Any, leaves: Any) -> Any:
    if shape is None:
        return next(leaves)
    kind, items = shape
    return kind([_built(item, leaves) for item in items])


def flatten(tree: Any, *, none_is_leaf: bool = False) -> tuple[list, Any]:
    """``optree.tree_flatten(tree)``: the leaves and the structure (a ``Flat`` where
    ``tree`` is plain values in tuples and lists)."""
    if type(tree) in _PLAIN:  # (one array or number: the commonest tree of all)
        return [tree], _ONE_LEAF[none_is_leaf]
    leaves: list = []
    shape = _shape(tree, leaves, none_is_leaf)
    if shape is not _NOT_PLAIN:
        return leaves, Flat(shape, len(leaves), none_is_leaf)
    import optree

    return optree.tree_flatten(tree, none_is_leaf=none_is_leaf)


def unflatten(tree: Any, leaves: Any) -> Any:
    """``optree.tree_unflatten``, for a structure :func:`flatten` gave."""
    if isinstance(tree, Flat):
        if tree.shape is None:
            return next(iter(leaves))
        return tree.unflatten(list(leaves))
    import optree

    return optree.tree_unflatten(tree, leaves)


def leaves(tree: Any, *, none_is_leaf: bool = False) -> list:
    """``optree.tree_leaves(tree)``."""
    return flatten(tree, none_is_leaf=none_is_leaf)[0]


def tree_map(func: Any, tree: Any, *rest: Any, none_is_leaf: bool = False) -> Any:
    """``optree.tree_map(func, tree, *rest)``."""
    flat, structure = flatten(tree, none_is_leaf=none_is_leaf)
    others = [flatten(other, none_is_leaf=none_is_leaf) for other in rest]
    if any(not isinstance(s, Flat) or s != structure for _, s in others):
        import optree  # (structures that differ: optree says how, or maps a prefix)

        return optree.tree_map(func, tree, *rest, none_is_leaf=none_is_leaf)
    return unflatten(structure, [func(*leaves) for leaves in zip(flat, *(o for o, _ in others))])
