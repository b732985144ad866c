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
on staged values: ``cond`` and ``switch`` then compute every branch and select
(``_control._taken``), a ``scan`` is unrolled, and a ``while_loop``, whose trip
count is unknown, raises.  Where a transform runs outside the ``jit``
(``grad(jit(f))``), it evaluates the staged program at its level, with values
(``_call.py``), so everything differentiates as it does eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from autodiff._scan import _CARRY_HINT, scan_p
from autodiff._staging import StagedTensor, StagingInterpreter, stage
from autodiff._subgraphs import GraphFn
from autodiff._tracer import Tracer
from autodiff.errors import TransformTypeError

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
    if stager is None:  # a control-flow primitive of the user's: run at this level
        return prim.impl(*args, **params)
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
    above = [c for c in const_list if isinstance(c, Tracer) and c._interp.level > interp.level]
    if above:  # a function closes over a value of a transform inside the jit: its level runs it
        return prim.bind(*args, *const_list, **new)
    invars = [interp.read(a) for a in (*args, *const_list)]
    outvars = [Var(a) for a in out_avals]
    interp.eqns.append(Eqn(prim, invars, outvars, new))
    return tuple(StagedTensor(interp, v) for v in outvars)


def _graph_fn(s: _Staged, position: dict) -> GraphFn:
    return GraphFn(s.graph, getattr(s.fn, "out_tree", None), [position[id(c)] for c in s.captured],
                   getattr(s.fn, "n_carry", None))  # fmt: skip
