"""``vmap`` and ``jvp`` of a loop inside a ``jit``: one staged loop, not an error or an
unrolled program.

Between the staging and a ``while_loop`` a vmap or a jvp cannot run the loop at its own
level: the condition has no values.  Nor should they unroll a ``scan`` into the graph.
Instead each stages the user's functions on one example (or on the primals), transforms
those graphs as it would a jitted function's (``batch_graph``, ``jvp_graph``), and binds
one loop on its own values, one level down: a batched ``while_loop`` runs while any
example runs, finished examples frozen by ``where``; a batched ``scan`` carries the
batch on axis 0 and takes ``xs`` with it on axis 1; under ``jvp`` the loop carries the
tangents with the primals (a carry leaf gains a tangent wherever the body gives it one:
a fixed point before the loop).  Without a staging below, these methods are
``_run_here``, as eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff._batching import BatchedTensor, BatchInterpreter
from autodiff._call import batch_graph, jvp_graph, library_of
from autodiff._control import WhileLoopPrimitive, _Branch, _run_here, check_like, while_loop_p
from autodiff._core import process
from autodiff._forward import DualTensor, JvpInterpreter
from autodiff._graph import Graph, aval_of
from autodiff._scan import _CARRY_HINT, ScanPrimitive
from autodiff._staged_control import (
    _unclosed,
    bind_scan,
    closes_over_above,
    reaching,
    sliced,
)
from autodiff._staging import eval_graph, stage, staging_below
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import dtype_of, shape_of

__all__: list[str] = []


def _batched_parts(interp: BatchInterpreter, x: Any) -> tuple[Any, int | None]:
    if isinstance(x, BatchedTensor) and x._interp is interp:
        return x.value, x.bdim
    return x, None


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
    carry = reaching(carry)
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
    carry = [_at(*_batched_parts(interp, a), size) for a in args]
    like = library_of(carry)
    # staged on one example: a BatchedTensor's shape is one example's
    cond_graph, body_graph, cond_c, body_c = _function_graphs(params, args, like)

    def batched(graph: Graph, captured: list) -> tuple:
        consts, cdims = _unzip(_batched_parts(interp, c) for c in captured)
        avals = tuple(aval_of(x) for x in (*carry, *consts))
        bg = batch_graph(graph, (0,) * len(carry) + tuple(cdims), avals, size,
                         interp.randomness, like)  # fmt: skip
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


def _unzip(pairs: Any) -> tuple[list, list]:
    firsts, seconds = [], []
    for a, b in pairs:
        firsts.append(a)
        seconds.append(b)
    return firsts, seconds


@process.register(JvpInterpreter, WhileLoopPrimitive)
def _jvp_of_while(interp: JvpInterpreter, prim: WhileLoopPrimitive, args: tuple,
                  params: dict):  # fmt: skip
    if not staging_below(interp):
        return _run_here(interp, prim, args, params)
    args, params = _unclosed(args, params)
    who, n = params["who"], len(args)
    primals, tangents = _unzip(_dual_parts(interp, a) for a in args)
    like = library_of(primals)
    cond_graph, body_graph, cond_c, body_c = _function_graphs(params, tuple(primals), like)
    cond_consts = [_dual_parts(interp, c)[0] for c in cond_c]
    body_pairs = [_dual_parts(interp, c) for c in body_c]
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
    values, dims = _unzip(_batched_parts(interp, a) for a in args)
    like = library_of(values)
    avals = [*map(aval_of, args[:n]), *map(sliced, args[n:])]  # one example's
    staged = stage(fn, avals, transform="jit", name="scan.body", like=like)
    if closes_over_above(staged.captured, interp):
        return _run_here(interp, prim, args, params)
    consts, c_dims = _unzip(_batched_parts(interp, c) for c in staged.captured)
    carry = [_at(v, d, size) for v, d in zip(values[:n], dims[:n], strict=True)]
    xs = [v if d is None else _at(v, d, size, where_to=1)
          for v, d in zip(values[n:], dims[n:], strict=True)]  # fmt: skip
    x_dims = tuple(None if d is None else 0 for d in dims[n:])
    step_avals = (*map(aval_of, carry), *map(sliced, xs), *map(aval_of, consts))
    bg = batch_graph(staged.graph, (0,) * n + x_dims + tuple(c_dims), step_avals, size,
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
    primals, tangents = _unzip(_dual_parts(interp, a) for a in args)
    like = library_of(primals)
    avals = [*map(aval_of, primals[:n]), *map(sliced, primals[n:])]
    staged = stage(fn, avals, transform="jit", name="scan.body", like=like)
    if closes_over_above(staged.captured, interp):
        return _run_here(interp, prim, args, params)
    pairs = [_dual_parts(interp, c) for c in staged.captured]
    x_tangents = [t for t in tangents[n:] if t is not None]
    rest_has = [*(t is not None for t in tangents[n:]), *(t is not None for _, t in pairs)]
    rest_avals = [*map(sliced, x_tangents),
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
