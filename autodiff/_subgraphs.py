"""A control-flow primitive's function, staged: ``GraphFn``.

When ``jit`` stages ``cond``, ``switch``, ``while_loop`` or ``scan``
(``_staged_control.py``), each function the primitive holds in its parameters (a
branch, a loop's ``cond_fun`` and ``body_fun``, a scan's body) becomes a ``GraphFn``:
the function's graph, taking the leaves the primitive hands it and then the values
the function closed over.  Those values are operands of the staged equation, after
the primitive's own (``n_consts`` of them), so that a transform of the graph sees
them as it sees every other operand; ``closed`` hands each function its share
before the primitive's implementation runs.

A ``GraphFn`` called on concrete arrays runs its graph's compiled replay (the same
code generation as ``jit``: a loop of 1000 steps runs one compiled body 1000
times); called on tracers (a transform evaluating the staged program at its own
level), it binds the graph's primitives one by one, so the transform sees them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autodiff._call import array_kind, compiled
from autodiff._graph import Graph
from autodiff._staging import eval_graph
from autodiff._tracer import Tracer

__all__ = ["GraphFn", "closed"]


class GraphFn:
    """``graph`` as a function of flat leaves returning a tuple of leaves.

    ``out_tree`` is the structure of what the user's function returned, ``picks``
    which of the equation's closed-over values (``closed``) are the graph's last
    inputs, ``n_carry`` the number of carry leaves of a scan's body (None otherwise).
    """

    __slots__ = ("consts", "graph", "n_carry", "out_tree", "picks")

    def __init__(self, graph: Graph, out_tree: Any, picks: Sequence[int],
                 n_carry: int | None = None, consts: tuple = ()) -> None:  # fmt: skip
        self.graph, self.out_tree, self.picks = graph, out_tree, tuple(picks)
        self.n_carry, self.consts = n_carry, consts

    def bound(self, consts: Sequence[Any]) -> GraphFn:
        """This function with its closed-over values taken from ``consts``."""
        return GraphFn(self.graph, self.out_tree, self.picks, self.n_carry,
                       tuple(consts[i] for i in self.picks))  # fmt: skip

    def __call__(self, *leaves: Any) -> tuple:
        args = (*leaves, *self.consts)
        for a in args:
            if isinstance(a, Tracer):
                return tuple(eval_graph(self.graph, *args))
        return compiled(self.graph, *array_kind(args))(*args)

    def __repr__(self) -> str:
        return f"<{self.graph.name}: {len(self.graph.eqns)} eqns>"


def _bind(value: Any, consts: Sequence[Any]) -> Any:
    if type(value) is GraphFn:
        return value.bound(consts)
    if type(value) is tuple and value and type(value[0]) is GraphFn:
        return tuple(v.bound(consts) for v in value)
    return value


def closed(args: tuple, n_consts: int, params: dict) -> tuple[tuple, dict]:
    """The primitive's own operands, and its parameters with each ``GraphFn`` given
    its closed-over values (the last ``n_consts`` operands)."""
    split = len(args) - n_consts
    consts = args[split:]
    return args[:split], {k: _bind(v, consts) for k, v in params.items() if k != "n_consts"}
