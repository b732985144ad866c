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
branch and select (``_control._taken``) and a ``scan`` is unrolled (``grad`` stages
both: ``_staged_grad.py``).  A ``while_loop``, whose trip count is unknown there, is
staged as one loop by ``vmap`` and ``jvp`` (below) and refused by ``grad``.  Where a
transform runs outside the ``jit``
(``grad(jit(f))``), it evaluates the staged program at its level, with values
(``_call.py``), so everything differentiates as it does eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff._batching import BatchedTensor, BatchInterpreter
from autodiff._call import batch_graph, jvp_graph, library_of
from autodiff._control import (
    ControlFlowPrimitive,
    WhileLoopPrimitive,
    _Branch,
    _check_predicate,
    _run_here,
    check_like,
    cond_p,
    names_of,
    while_loop_p,
)
from autodiff._core import process
from autodiff._forward import DualTensor, JvpInterpreter
from autodiff._graph import Eqn, Graph, ShapedArray, Var, aval_of
from autodiff._scan import _CARRY_HINT, ScanPrimitive, _Body, scan_p
from autodiff._staging import (
    StagedTensor,
    StagingInterpreter,
    eval_graph,
    innermost_staging,
    stage,
    staging_below,
)
from autodiff._subgraphs import GraphFn, closed
from autodiff._tracer import Tracer
from autodiff.errors import TransformTypeError
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
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


# --- vmap and jvp of a while_loop inside a jit ----------------------------------------------
#
# Between the staging and the loop a vmap or a jvp cannot run the loop at its own level:
# the condition has no values.  Instead each stages the user's functions on one example
# (or on the primals), transforms those graphs as it would a jitted function's
# (``batch_graph``, ``jvp_graph``), and binds one while_loop on its own values, one level
# down: a batched loop runs while any example runs, finished examples frozen by
# ``where``; a jvp loop carries the tangents with the primals.


def _unclosed(args: tuple, params: dict) -> tuple[tuple, dict]:
    n = params.get("n_consts", 0)
    return closed(args, n, params) if n else (args, params)


def _function_graphs(params: dict, args: tuple, like: Any) -> tuple[Graph, Graph, list, list]:
    """The loop's cond_fun and body_fun staged on ``args`` (one example's values), with
    the values each closes over; the body's carry checked as the staging does."""
    who, tree, names = params["who"], params["tree"], params["names"]
    avals = [aval_of(a) for a in args]
    cond = stage(params["cond_fun"], avals, transform="jit", name=f"{who}.cond_fun", like=like)
    body = stage(params["body_fun"], avals, transform="jit", name=f"{who}.body_fun", like=like)
    body_fn = params["body_fun"]
    if names is not None:
        check_like(body.outs, body_fn.out_tree, args, tree, names,
                   f"{who}: the value body_fun returned", "the value it was given",
                   _CARRY_HINT)  # fmt: skip
    return cond.graph, body.graph, cond.captured, body.captured


def _lowered(who: str, cond: Callable, body: Callable, carry: list) -> tuple:
    """``while_loop`` of flat ``carry`` one level down, reaching the staging even where
    the carry holds constants only."""
    if not any(isinstance(c, Tracer) for c in carry):
        staging = innermost_staging()
        assert staging is not None
        carry = [staging.staged(carry[0]), *carry[1:]]
    in_tree = optree.tree_structure(tuple(carry))
    return while_loop_p.bind(*carry, cond_fun=_Branch(cond, in_tree),
                             body_fun=_Branch(body, in_tree), tree=in_tree, names=None,
                             who=who)  # fmt: skip


def _at(x: Any, dim: int | None, size: int, where_to: int = 0) -> Any:
    """``x`` with its batch axis at ``where_to`` (broadcast if it has none)."""
    if dim is None:
        x = np.asarray(x) if isinstance(x, (bool, int, float, complex)) else x
        return _shp.broadcast_to(_shp.expand_dims(x, 0), (size, *shape_of(x)))
    return x if dim == where_to else _shp.moveaxis(x, dim, where_to)


@process.register(BatchInterpreter, WhileLoopPrimitive)
def _batch_of_while(interp: BatchInterpreter, prim: WhileLoopPrimitive, args: tuple,
                    params: dict):  # fmt: skip
    if not staging_below(interp):
        return _run_here(interp, prim, args, params)
    args, params = _unclosed(args, params)
    size, who = interp.size, params["who"]
    example = [a for a in args]  # per-example shapes: a BatchedTensor's shape is one example's
    values = [a.value if isinstance(a, BatchedTensor) and a._interp is interp else a
              for a in args]  # fmt: skip
    dims = [a.bdim if isinstance(a, BatchedTensor) and a._interp is interp else None
            for a in args]  # fmt: skip
    carry = [_at(v, d, size) for v, d in zip(values, dims, strict=True)]
    like = library_of(carry)
    cond_graph, body_graph, cond_c, body_c = _function_graphs(params, tuple(example), like)

    def batched(graph: Graph, captured: list) -> tuple:
        own = [isinstance(c, BatchedTensor) and c._interp is interp for c in captured]
        consts = [c.value if o else c for c, o in zip(captured, own, strict=True)]
        cdims = tuple(c.bdim if o else None for c, o in zip(captured, own, strict=True))
        avals = tuple(aval_of(x) for x in (*carry, *consts))
        bg = batch_graph(graph, (0,) * len(carry) + cdims, avals, size, interp.randomness,
                         like)  # fmt: skip
        return bg, consts

    bcond, cond_consts = batched(cond_graph, cond_c)
    bbody, body_consts = batched(body_graph, body_c)

    def running(vals: tuple) -> Any:
        (pred,) = eval_graph(bcond.graph, *vals, *cond_consts)
        return pred, bcond.out_dims[0]

    def cond(*vals: Any) -> Any:
        pred, dim = running(vals)
        return pred if dim is None else _red.any(pred)

    def body(*vals: Any) -> tuple:
        pred, dim = running(vals)
        outs = eval_graph(bbody.graph, *vals, *body_consts)
        new = [_at(o, d, size) for o, d in zip(outs, bbody.out_dims, strict=True)]
        if dim is None:  # every example goes on
            return tuple(new)
        pred = _at(pred, dim, size)
        return tuple(_elt.where(_shp.reshape(pred, (size,) + (1,) * (len(shape_of(n)) - 1)), n, v)
                     for n, v in zip(new, vals, strict=True))  # fmt: skip

    outs = _lowered(who, cond, body, carry)
    return tuple(BatchedTensor(interp, o, 0) for o in outs)


def _carry_tangents(
    graph: Graph, carry: list, tangents: list, rest_has: list, rest_avals: list, like: Any
) -> tuple[list, Any]:
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


def _dual_parts(interp: JvpInterpreter, x: Any) -> tuple[Any, Any]:
    if isinstance(x, DualTensor) and x._interp is interp:
        return x.primal, x.tangent
    return x, None


@process.register(JvpInterpreter, WhileLoopPrimitive)
def _jvp_of_while(interp: JvpInterpreter, prim: WhileLoopPrimitive, args: tuple,
                  params: dict):  # fmt: skip
    if not staging_below(interp):
        return _run_here(interp, prim, args, params)
    args, params = _unclosed(args, params)
    who, n = params["who"], len(args)

    def split(x: Any) -> tuple[Any, Any]:
        return _dual_parts(interp, x)

    primals, tangents = map(list, zip(*map(split, args), strict=True)) if args else ([], [])
    like = library_of(primals)
    cond_graph, body_graph, cond_c, body_c = _function_graphs(params, tuple(primals), like)
    cond_consts = [split(c)[0] for c in cond_c]
    body_pairs = [split(c) for c in body_c]
    const_tangents = [t for _, t in body_pairs if t is not None]
    has, jg = _carry_tangents(body_graph, primals, tangents,
                              [t is not None for _, t in body_pairs],
                              [aval_of(t) for t in const_tangents], like)  # fmt: skip
    carry_t = [t if t is not None else _cre.zeros_like(p)
               for p, t, h in zip(primals, tangents, has) if h]  # fmt: skip
    k = len(carry_t)

    def cond(*vals: Any) -> Any:
        return eval_graph(cond_graph, *vals[:n], *cond_consts)[0]

    def body(*vals: Any) -> tuple:
        ps, ts = vals[:n], vals[n:]
        outs = eval_graph(jg.graph, *ps, *(p for p, _ in body_pairs), *ts,
                          *(t for _, t in body_pairs if t is not None))  # fmt: skip
        new_p, moving = outs[:n], iter(outs[len(jg.out_has_tangent) :])
        new_t = [next(moving) if o else None for o in jg.out_has_tangent]
        return (*new_p, *(new_t[i] if new_t[i] is not None else _cre.zeros_like(new_p[i])
                          for i in range(n) if has[i]))  # fmt: skip

    outs = _lowered(who, cond, body, [*primals, *carry_t])
    moving = iter(outs[n:])
    assert len(outs) == n + k
    return tuple(DualTensor(interp, o, next(moving)) if h else o
                 for o, h in zip(outs[:n], has, strict=True))  # fmt: skip


# --- vmap of a scan inside a jit ----------------------------------------------------------


def bind_scan(step: Callable, carry: list, xs: list, length: int, reverse: bool,
              checkpoint: bool = False) -> tuple:  # fmt: skip
    """``scan(step, carry, xs)`` on flat lists one level down (``step(c, x) -> (c, y)``
    with tuples), reaching the staging even where every operand is a constant; the
    final carry and the stacked ``y`` leaves."""
    operands = [*carry, *xs]
    if operands and not any(isinstance(o, Tracer) for o in operands):
        staging = innermost_staging()
        assert staging is not None
        operands = [staging.staged(operands[0]), *operands[1:]]
    body = _Body(step, optree.tree_structure(tuple(carry)), None,
                 optree.tree_structure(tuple(xs)))  # fmt: skip
    outs = scan_p.bind(*operands, body=body, length=length, reverse=reverse,
                       checkpoint=checkpoint, unroll=False)  # fmt: skip
    return outs[: len(carry)], outs[len(carry) :]


@process.register(BatchInterpreter, ScanPrimitive)
def _batch_of_scan(interp: BatchInterpreter, prim: ScanPrimitive, args: tuple, params: dict):
    """A scan under a vmap inside a jit: its body staged on one example and batched as
    a jitted graph is, then one scan a level down (carry batched on axis 0, ``xs`` on
    axis 1), instead of every step unrolled into the graph."""
    if not staging_below(interp) or params.get("unroll"):
        return _run_here(interp, prim, args, params)
    args, params = _unclosed(args, params)
    fn, length, size = params["body"], params["length"], interp.size
    n = fn.n_carry
    own = [isinstance(a, BatchedTensor) and a._interp is interp for a in args]
    values = [a.value if o else a for a, o in zip(args, own, strict=True)]
    dims = [a.bdim if o else None for a, o in zip(args, own, strict=True)]
    avals = [*map(aval_of, args[:n]),
             *(ShapedArray(shape_of(a)[1:], dtype_of(a)) for a in args[n:])]  # fmt: skip
    like = library_of(values)
    staged = stage(fn, avals, transform="jit", name="scan.body", like=like)
    captured = staged.captured
    if any(isinstance(c, Tracer) and c._interp.level > interp.level for c in captured):
        return _run_here(interp, prim, args, params)  # closes over a transform inside the vmap
    c_own = [isinstance(c, BatchedTensor) and c._interp is interp for c in captured]
    consts = [c.value if o else c for c, o in zip(captured, c_own, strict=True)]
    c_dims = tuple(c.bdim if o else None for c, o in zip(captured, c_own, strict=True))
    carry = [_at(v, d, size) for v, d in zip(values[:n], dims[:n], strict=True)]
    xs = [v if d is None else _at(v, d, size, where_to=1)
          for v, d in zip(values[n:], dims[n:], strict=True)]  # fmt: skip
    x_dims = tuple(None if d is None else 0 for d in dims[n:])
    step_avals = (*map(aval_of, carry), *(ShapedArray(shape_of(x)[1:], dtype_of(x)) for x in xs),
                  *map(aval_of, consts))  # fmt: skip
    bg = batch_graph(staged.graph, (0,) * n + x_dims + c_dims, step_avals, size,
                     interp.randomness, like)  # fmt: skip

    def step(c: tuple, x: tuple) -> tuple:
        outs = eval_graph(bg.graph, *c, *x, *consts)
        moved = [_at(o, d, size) for o, d in zip(outs, bg.out_dims, strict=True)]
        return tuple(moved[:n]), tuple(moved[n:])

    final, ys = bind_scan(step, carry, xs, length, params["reverse"], params["checkpoint"])
    return (*(BatchedTensor(interp, c, 0) for c in final),
            *(BatchedTensor(interp, y, 1) for y in ys))  # fmt: skip


@process.register(JvpInterpreter, ScanPrimitive)
def _jvp_of_scan(interp: JvpInterpreter, prim: ScanPrimitive, args: tuple, params: dict):
    """A scan under a jvp inside a jit: one scan a level down carrying the tangents
    with the primals (``xs``' tangents as more ``xs``, the ys' tangents as more ys)."""
    if not staging_below(interp) or params.get("unroll"):
        return _run_here(interp, prim, args, params)
    args, params = _unclosed(args, params)
    fn, length = params["body"], params["length"]
    n, m = fn.n_carry, len(args) - fn.n_carry
    primals, tangents = (list(t) for t in zip(*(_dual_parts(interp, a) for a in args)))
    like = library_of(primals)
    avals = [*map(aval_of, primals[:n]),
             *(ShapedArray(shape_of(x)[1:], dtype_of(x)) for x in primals[n:])]  # fmt: skip
    staged = stage(fn, avals, transform="jit", name="scan.body", like=like)
    if any(isinstance(c, Tracer) and c._interp.level > interp.level for c in staged.captured):
        return _run_here(interp, prim, args, params)  # closes over a transform inside the jvp
    pairs = [_dual_parts(interp, c) for c in staged.captured]
    x_tangents = [t for t in tangents[n:] if t is not None]
    rest_has = [*(t is not None for t in tangents[n:]), *(t is not None for _, t in pairs)]
    rest_avals = [*(ShapedArray(shape_of(t)[1:], dtype_of(t)) for t in x_tangents),
                  *(aval_of(t) for _, t in pairs if t is not None)]  # fmt: skip
    has, jg = _carry_tangents(staged.graph, primals[:n], tangents[:n], rest_has, rest_avals,
                              like)  # fmt: skip
    carry_t = [t if t is not None else _cre.zeros_like(p)
               for p, t, h in zip(primals[:n], tangents[:n], has) if h]  # fmt: skip
    n_out, k = len(jg.out_has_tangent), len(carry_t)

    def step(c: tuple, x: tuple) -> tuple:
        outs = eval_graph(jg.graph, *c[:n], *x[:m], *(p for p, _ in pairs), *c[n:], *x[m:],
                          *(t for _, t in pairs if t is not None))  # fmt: skip
        moving = iter(outs[n_out:])
        out_t = [next(moving) if o else None for o in jg.out_has_tangent]
        new_t = [out_t[i] if out_t[i] is not None else _cre.zeros_like(outs[i])
                 for i in range(n) if has[i]]  # fmt: skip
        return (*outs[:n], *new_t), (*outs[n:n_out], *(t for t in out_t[n:] if t is not None))

    final, ys = bind_scan(step, [*primals[:n], *carry_t], [*primals[n:], *x_tangents], length,
                          params["reverse"], params["checkpoint"])  # fmt: skip
    carry_moving, y_moving = iter(final[n:]), iter(ys[n_out - n :])
    assert len(final) == n + k
    carry = [DualTensor(interp, o, next(carry_moving)) if h else o
             for o, h in zip(final[:n], has, strict=True)]  # fmt: skip
    y_out = [DualTensor(interp, o, next(y_moving)) if h else o
             for o, h in zip(ys[: n_out - n], jg.out_has_tangent[n:], strict=True)]  # fmt: skip
    return (*carry, *y_out)
