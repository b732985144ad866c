"""Control flow under ``jit`` and ``make_graph``: each function staged once.

A control-flow primitive that reaches the staging interpreter (its operands staged,
no transform in between) stages each of its functions on the operands' abstract
values: every branch of ``cond``/``switch``, ``while_loop``'s ``cond_fun`` and
``body_fun``, ``scan``'s body (on one slice of ``xs``).  It records one equation whose
parameters hold the staged functions (``GraphFn``, ``_subgraphs.py``) and whose
operands are the primitive's, then the values the functions close over.  So the
type errors of every branch are caught here, taken or not, and at replay the
primitive's implementation runs as it does eagerly, calling compiled graphs: a scan
of 1000 steps is one staged body run 1000 times.

Where a transform runs between the staging and the control flow (``jit(grad(f))``,
``jit(vmap(f))``), the transform runs the primitive at its own level (``_run_here``)
on staged values: under ``vmap`` and ``jvp`` ``cond`` and ``switch`` compute every
branch and select (``_control._taken``); loops are staged as one loop by ``vmap`` and
``jvp`` (``_staged_loops.py``) and ``cond`` and ``scan`` by ``grad``
(``_staged_grad.py``), which refuses a ``while_loop``.  Where a transform runs outside
the ``jit`` (``grad(jit(f))``), it evaluates the staged program at its level, with
values (``_call.py``), so everything differentiates as it does eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optree

from autodiff._control import (
    ControlFlowPrimitive,
    _check_predicate,
    check_like,
    cond_p,
    names_of,
    while_loop_p,
)
from autodiff._core import process
from autodiff._graph import Eqn, ShapedArray, Var
from autodiff._scan import _CARRY_HINT, _Body, scan_p
from autodiff._staging import (
    StagedTensor,
    StagingInterpreter,
    innermost_staging,
    stage,
)
from autodiff._subgraphs import GraphFn, closed
from autodiff._tracer import Tracer
from autodiff.errors import TransformTypeError
from autodiff.rules._helpers import dtype_of, shape_of

__all__: list[str] = []


class _Staged:
    """One function of the primitive, staged: its graph, what it returned, and the
    values it closed over."""

    def __init__(self, interp: StagingInterpreter, fn: Callable, avals: list, name: str) -> None:
        self.fn: Any = fn  # a _Branch or _Body: out_tree is known once it ran
        staged = stage(fn, avals, transform=interp.transform, name=name, like=interp.like)
        self.graph, self.captured, self.outs = staged.graph, staged.captured, list(staged.outs)

    def avals(self) -> list:
        return [v.aval for v in self.graph.outvars]


def _joined(ref: list, other: list) -> list:
    """Per leaf, the aval that is not weakly typed (a Python number in one branch takes
    the dtype of the other's array)."""
    return [o if getattr(r, "weak_type", False) and not getattr(o, "weak_type", False) else r
            for r, o in zip(ref, other, strict=True)]  # fmt: skip


def _cond(interp, args, avals, params) -> tuple[dict, list, list]:
    who, names = params["who"], params["names"]
    staged = [
        _Staged(interp, b, avals[1:], f"{who}.{n}") for b, n in zip(params["branches"], names)
    ]
    ref = staged[0]
    ref_names = names_of(ref.fn.out_tree, "output")
    out_avals = ref.avals()
    for b, s in enumerate(staged[1:], 1):
        check_like(s.outs, s.fn.out_tree, ref.outs, ref.fn.out_tree, ref_names,
                   f"{who}: the output of {names[b]}", f"the output of {names[0]}",
                   "every branch must return the same structure, shapes and dtypes.")  # fmt: skip
        out_avals = _joined(out_avals, s.avals())
    return {"branches": staged}, staged, out_avals


def _while(interp, args, avals, params) -> tuple[dict, list, list]:
    who, tree, names = params["who"], params["tree"], params["names"]
    cond = _Staged(interp, params["cond_fun"], avals, f"{who}.cond_fun")
    if not cond.fn.out_tree.is_leaf():
        raise TransformTypeError(f"{who}: cond_fun must return a boolean scalar, got a "
                                 f"value structured as {cond.fn.out_tree}.")  # fmt: skip
    _check_predicate(cond.outs[0], f"{who}: the value cond_fun returns", "bool")
    body = _Staged(interp, params["body_fun"], avals, f"{who}.body_fun")
    if names is not None:
        check_like(body.outs, body.fn.out_tree, args, tree, names,
                   f"{who}: the value body_fun returned", "the value it was given",
                   _CARRY_HINT)  # fmt: skip
    return (
        {"cond_fun": cond, "body_fun": body, "names": None},
        [cond, body],
        _joined(list(avals), body.avals()),
    )


def _scan(interp, args, avals, params) -> tuple[dict, list, list]:
    fn, length = params["body"], params["length"]
    n = fn.n_carry
    x_avals = [ShapedArray(a.shape[1:], a.dtype) for a in avals[n:]]
    body = _Staged(interp, fn, [*avals[:n], *x_avals], "scan.body")
    outs = body.avals()
    ys = [ShapedArray((length, *a.shape), a.dtype) for a in outs[n:]]
    return {"body": body}, [body], [*_joined(list(avals[:n]), outs[:n]), *ys]


_STAGERS = {cond_p: _cond, while_loop_p: _while, scan_p: _scan}


@process.register(StagingInterpreter, ControlFlowPrimitive)
def _stage_control(interp: StagingInterpreter, prim: ControlFlowPrimitive, args: tuple,
                   params: dict):  # fmt: skip
    stager = _STAGERS.get(prim)
    if stager is None or params.get("unroll"):  # run at this level: every step recorded
        return prim.impl(*args, **params)
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
        if not isinstance(value, (list, _Staged)):  # a parameter the staging settles
            new[key] = value
            continue
        graphs = [_graph_fn(s, position) for s in (value if isinstance(value, list) else [value])]
        new[key] = tuple(graphs) if isinstance(value, list) else graphs[0]
    if const_list:
        new["n_consts"] = len(const_list)
    if closes_over_above(const_list, interp):  # that transform's level runs it
        return prim.bind(*args, *const_list, **new)
    invars = [interp.read(a) for a in (*args, *const_list)]
    outvars = [Var(a) for a in out_avals]
    interp.eqns.append(Eqn(prim, invars, outvars, new))
    return tuple(StagedTensor(interp, v) for v in outvars)


def _graph_fn(s: _Staged, position: dict) -> GraphFn:
    return GraphFn(s.graph, getattr(s.fn, "out_tree", None), [position[id(c)] for c in s.captured],
                   getattr(s.fn, "n_carry", None))  # fmt: skip


# --- helpers of the methods that bind control flow one level down (_staged_loops.py,
# _staged_grad.py) ------------------------------------------------------------------


def _unclosed(args: tuple, params: dict) -> tuple[tuple, dict]:
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


def bind_scan(step: Callable, carry: list, xs: list, length: int, reverse: bool,
              checkpoint: bool = False) -> tuple:  # fmt: skip
    """``scan(step, carry, xs)`` on flat lists one level down (``step(c, x) -> (c, y)``
    with tuples), reaching the staging even where every operand is a constant; the
    final carry and the stacked ``y`` leaves."""
    operands = reaching([*carry, *xs])
    body = _Body(step, optree.tree_structure(tuple(carry)), None,
                 optree.tree_structure(tuple(xs)))  # fmt: skip
    outs = scan_p.bind(*operands, body=body, length=length, reverse=reverse,
                       checkpoint=checkpoint, unroll=False)  # fmt: skip
    return outs[: len(carry)], outs[len(carry) :]
