"""Control flow meets staging: a control-flow primitive's functions staged once, as
sub-graphs, and the helpers of the methods that lower a loop or a branch into staged
primitives.

A control-flow primitive that reaches the staging interpreter (its operands staged,
no transform in between) stages each of its functions on the operands' abstract
values (``StagedFunction``: every branch of ``cond``/``switch``, ``while_loop``'s
``cond_fun`` and ``body_fun``, ``scan``'s body on one slice of ``xs``) and records one
equation (``stage_control``) whose parameters hold the staged functions (``GraphFn``,
``common.py``) and whose operands are the primitive's, then the values the functions
close over.  So the type errors of every branch are caught there, taken or not, and
at replay the primitive's implementation runs as it does eagerly, calling compiled
graphs: a scan of 1000 steps is one staged body run 1000 times.  Each primitive's
module registers the staging's method with its own ``stager``.

Where a transform runs between the staging and the control flow (``jit(vmap(f))``),
the primitive's module decides: it stages the user's functions on one example (or the
primals), transforms those graphs as it would a jitted function's
(``compiler/graph_transforms.py``) and binds the primitive again one level down,
with the helpers below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.compiler.graph_transforms import JvpGraph, jvp_graph
from autodiff.control.common import ControlFlowPrimitive, GraphFn, closed
from autodiff.core.arrays import dtype_of, shape_of
from autodiff.core.graph import Eqn, Graph, ShapedArray, Var, aval_of
from autodiff.core.tracer import Tracer
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter
from autodiff.interpreters.staging import (
    StagedTensor,
    StagingInterpreter,
    innermost_staging,
    stage,
)
from autodiff.rules import compositions as _comp
from autodiff.rules import shape as _shp

__all__ = [
    "StagedFunction",
    "batch_axis_at",
    "batched_parts",
    "carry_tangents",
    "closes_over_above",
    "dual_parts",
    "joined",
    "reaching",
    "sliced",
    "stage_control",
    "unclosed",
    "unzip",
]


class StagedFunction:
    """One function of the primitive, staged: its graph, what it returned, and the
    values it closed over."""

    def __init__(self, interp: StagingInterpreter, fn: Callable, avals: list, name: str) -> None:
        self.fn: Any = fn  # a FlatFn or ScanBody: out_tree is known once it ran
        staged = stage(fn, avals, transform=interp.transform, name=name, like=interp.like)
        self.graph, self.captured, self.outs = staged.graph, staged.captured, list(staged.outs)

    def avals(self) -> list:
        return [v.aval for v in self.graph.outvars]


def joined(ref: list, other: list) -> list:
    """Per leaf, the aval that is not weakly typed (a Python number in one branch takes
    the dtype of the other's array)."""
    return [o if getattr(r, "weak_type", False) and not getattr(o, "weak_type", False) else r
            for r, o in zip(ref, other, strict=True)]  # fmt: skip


Stager = Callable[[StagingInterpreter, tuple, list, dict], tuple[dict, list, list]]


def stage_control(interp: StagingInterpreter, prim: ControlFlowPrimitive, args: tuple,
                  params: dict, stager: Stager) -> tuple:  # fmt: skip
    """The staging interpreter's method for a control-flow primitive whose ``stager``
    stages its functions: ``stager(interp, args, avals, params)`` returns the new
    parameters (``StagedFunction``s where functions were), the staged functions and
    the output avals.  Records one equation whose operands are the primitive's, then
    the values its functions close over (``n_consts``)."""
    if params.get("n_consts"):  # staged before (a staged graph run again under a staging):
        args, params = closed(args, params["n_consts"], params)  # its functions' values back
    avals = [interp.read(a).aval for a in args]
    fns, staged, out_avals = stager(interp, args, avals, params)
    consts: dict[int, Any] = {}  # by id: what the functions close over, in order
    for s in staged:
        for c in s.captured:
            consts.setdefault(id(c), c)
    const_list = list(consts.values())
    position = {id(c): i for i, c in enumerate(const_list)}
    new = dict(params)
    for key, value in fns.items():
        if not isinstance(value, (list, StagedFunction)):  # a parameter the staging settles
            new[key] = value
            continue
        graphs = [graph_fn(s, position) for s in (value if isinstance(value, list) else [value])]
        new[key] = tuple(graphs) if isinstance(value, list) else graphs[0]
    if const_list:
        new["n_consts"] = len(const_list)
    if closes_over_above(const_list, interp):  # that transform's level runs it
        return prim.bind(*args, *const_list, **new)
    invars = [interp.read(a) for a in (*args, *const_list)]
    outvars = [Var(a) for a in out_avals]
    interp.eqns.append(Eqn(prim, invars, outvars, new, interp.errstate()))
    return tuple(StagedTensor(interp, v) for v in outvars)


def graph_fn(s: StagedFunction, position: dict) -> GraphFn:
    return GraphFn(s.graph, getattr(s.fn, "out_tree", None), [position[id(c)] for c in s.captured],
                   getattr(s.fn, "n_carry", None))  # fmt: skip


# --- helpers of the methods that bind a loop or a branch one level down -------------------------


def unclosed(args: tuple, params: dict) -> tuple[tuple, dict]:
    n = params.get("n_consts", 0)
    return closed(args, n, params) if n else (args, params)


def reaching(operands: list) -> list:
    """``operands`` of a primitive bound one level down, the first made a staged
    constant where none is a tracer (the functions still close over staged values, so
    the primitive must reach the staging)."""
    if operands and not any(isinstance(o, Tracer) for o in operands):
        staging = innermost_staging()
        assert staging is not None
        return [staging.staged(operands[0]), *operands[1:]]
    return operands


def closes_over_above(captured: list, interp: Any) -> bool:
    """Whether a staged function closed over a value of a transform running inside
    ``interp``'s: then that transform's level runs the primitive."""
    return any(isinstance(c, Tracer) and c._interp.level > interp.level for c in captured)


def sliced(x: Any) -> ShapedArray:
    """The abstract value of one step's slice of a scanned leaf."""
    return ShapedArray(shape_of(x)[1:], dtype_of(x))


def batched_parts(interp: BatchInterpreter, x: Any) -> tuple[Any, int | None]:
    if isinstance(x, BatchedTensor) and x._interp is interp:
        return x.value, x.bdim
    return x, None


def dual_parts(interp: JvpInterpreter, x: Any) -> tuple[Any, Any]:
    if isinstance(x, DualTensor) and x._interp is interp:
        return x.primal, x.tangent
    return x, None


def unzip(pairs: Any) -> tuple[list, list]:
    firsts, seconds = [], []
    for a, b in pairs:
        firsts.append(a)
        seconds.append(b)
    return firsts, seconds


def batch_axis_at(x: Any, dim: int | None, size: int, where_to: int = 0) -> Any:
    """``x`` with its batch axis at ``where_to`` (broadcast if it has none)."""
    if dim is None:
        x = np.asarray(x) if isinstance(x, (bool, int, float, complex)) else x
        return _shp.broadcast_to(_shp.expand_dims(x, 0), (size, *shape_of(x)))
    return x if dim == where_to else _comp.moveaxis(x, dim, where_to)


def carry_tangents(
    graph: Graph, carry: list, tangents: list, rest_has: list, rest_avals: list, like: Any
) -> tuple[list, JvpGraph]:
    """Which carry leaves of a loop body ``graph`` (carry, then the rest of its inputs)
    carry a tangent: those given one and those the body gives one (a fixed point), and
    the body's ``jvp_graph`` for them."""
    n = len(carry)
    has = [t is not None and dtype_of(p).kind in "fc" for p, t in zip(carry, tangents)]
    while True:
        avals = (*(aval_of(p) for p, h in zip(carry, has) if h), *rest_avals)
        jg = jvp_graph(graph, (*has, *rest_has), avals, like)
        grown = [h or bool(o) for h, o in zip(has, jg.out_has_tangent[:n], strict=True)]
        if grown == has:
            return has, jg
        has = grown
