"""``linearize``: a function's output and its JVP at a point, the function run once.

``linearize`` records ``func`` on the tape once (keeping every residual) and pushes
tangents forward along it, replaying each node's JVP rule, so ``func`` itself runs
once however often ``jvp_fn`` is called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff.core.args import (
    as_tangent,
    check_callable,
    leaf_paths,
    numbers_for_array,
)
from autodiff.errors import TransformValueError
from autodiff.interpreters.reverse import _vjp
from autodiff.interpreters.tape import Node, reachable
from autodiff.rules.creation import as_output

__all__ = ["linearize"]


def linearize(func: Callable, *primals: Any) -> tuple[Any, Callable]:
    """Evaluate ``func(*primals)`` once and return ``(output, jvp_fn)``.

    ``jvp_fn(*tangents)`` (one tangent per primal, structured like it) gives
    the output tangent, like ``jvp(func, primals, tangents)[1]`` but without
    running ``func`` again: tangents are pushed along the recorded tape.  It
    can be called many times and under ``vmap``.

    >>> import numpy as np
    >>> from autodiff import linearize
    >>> out, jvp_fn = linearize(np.sin, 0.0)
    >>> float(jvp_fn(2.0))
    2.0
    """
    check_callable(func, "linearize")
    out, vjp_fn, _ = _vjp(func, primals, False, "linearize", keep_all_residuals=True)
    in_tree, in_nodes = vjp_fn._in_tree, vjp_fn._in_nodes
    out_meta, out_tree = vjp_fn._out_meta, vjp_fn._out_tree
    order = reachable([node for node, _, _, _ in out_meta if node is not None])
    out_leaves = optree.tree_leaves(out)  # zero tangents are made like them
    paths = leaf_paths(primals)

    def jvp_fn(*tangents: Any) -> Any:
        flat, tree = optree.tree_flatten(tangents)
        if tree != in_tree:
            listed = numbers_for_array(tangents, in_tree, "linearize's jvp_fn: tangent")
            raise TransformValueError(
                (f"{listed} " if listed else "")
                + f"linearize's jvp_fn: tangents must be structured like the primals "
                f"({in_tree}), got {tree}; pass one tangent per primal."
            )
        for i, (t, primal, path) in enumerate(zip(flat, vjp_fn._in_values, paths)):
            t = as_tangent(t, primal.dtype, f"the tangent for {path}", "linearize's jvp_fn")
            if np.shape(t) != np.shape(primal):
                raise TransformValueError(
                    f"linearize's jvp_fn: the tangent for {path} has shape {np.shape(t)} but "
                    f"its primal has shape {np.shape(primal)}; each tangent must match its "
                    f"primal's shape."
                )
            flat[i] = t if t.dtype == primal.dtype else t.astype(primal.dtype)
        known: dict[Node, Any] = dict(zip(in_nodes, flat))
        for node in order:  # parents before children
            if node.prim is None:
                continue
            ts: list = [None] * len(node.primals)
            for argnum, parent, index in node.parents:
                t = known.get(parent)
                ts[argnum] = t if index is None or t is None else t[index]
            if all(t is None for t in ts):
                continue
            known[node] = node.prim.jvp_rule()(tuple(ts), node.ans, node.primals, node.params)
        outs = []
        for (node, index, _, _), value in zip(out_meta, out_leaves):
            t = known.get(node) if node is not None else None
            t = t[index] if index is not None and t is not None else t
            outs.append(as_output(np.zeros_like(value) if t is None else t))
        return optree.tree_unflatten(out_tree, outs)

    return optree.tree_map(as_output, out), jvp_fn
