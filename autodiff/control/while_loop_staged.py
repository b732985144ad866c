"""``while_loop`` where a ``jit`` stages it under a transform: one loop a level down of
the transformed ``cond_fun`` and ``body_fun``, whatever the number of iterations.

``while_loop.py`` holds the primitive, its public function and every transform's
entry; vmap's, jvp's and Taylor mode's take the route here where a ``jit`` stages the
loop below them (inside a ``jit``, or a transform of a jitted function):

- every route stages ``cond_fun`` and ``body_fun`` on one example's carry, with the
  values each closes over (``function_graphs``), and binds one ``while_loop`` of
  functions of its own a level down (``bind_while``);
- vmap (``batched_loop``): both functions batched as a jitted graph is, the carry
  batched on axis 0; the loop runs while any example runs, finished examples frozen
  by ``where`` and their derivative cut (``derivative_where``);
- jvp (``pushed_loop``): the body's JVP graph, the tangents as more carry; a carry
  leaf gains a tangent wherever the body gives it one, found by a fixed point before
  the loop (``subgraphs.carry_tangents``);
- Taylor mode (``jet_loop``): every floating carry's K coefficients as more carry,
  the body pushed through Taylor mode at each step.

grad has no route here: a staged loop whose carry it does not differentiate is bound
one level down as it is, and one whose carry it does raises, the trip count not known
while staging (``while_loop.py``'s ``while_loop_grad`` and ``_decided``).  The routes
bind the primitive they are given, ``while_loop_p``: this module sits below
``while_loop.py``, which imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optree

from autodiff.compiler.graph_transforms import batch_graph
from autodiff.control.common import FlatFn, derivative_where
from autodiff.control.leaves import CARRY_HINT, check_like
from autodiff.control.subgraphs import (
    batch_axis_at,
    batched_parts,
    carry_tangents,
    dual_parts,
    reaching,
    unzip,
)
from autodiff.core.arrays import is_float, library_of, shape_of
from autodiff.core.graph import Graph, aval_of
from autodiff.core.primitive import Primitive
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter
from autodiff.interpreters.staging import eval_graph, stage
from autodiff.interpreters.taylor import JetInterpreter, JetTensor, jet_parts, push_series
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp

__all__ = ["batched_loop", "bind_while", "function_graphs", "jet_loop", "pushed_loop"]


def function_graphs(params: dict, args: tuple, like: Any) -> tuple[Graph, Graph, list, list]:
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
                   CARRY_HINT)  # fmt: skip
    return cond.graph, body.graph, cond.captured, body.captured


def bind_while(prim: Primitive, who: str, cond: Callable, body: Callable, carry: list) -> tuple:
    """``while_loop`` of flat ``carry`` one level down, reaching the staging even where
    the carry holds constants only."""
    carry = reaching(carry)
    in_tree = optree.tree_structure(tuple(carry))
    return prim.bind(*carry, cond_fun=FlatFn(cond, in_tree),
                             body_fun=FlatFn(body, in_tree), tree=in_tree, names=None,
                             who=who)  # fmt: skip


def batched_loop(interp: BatchInterpreter, prim: Primitive, args: tuple, params: dict) -> tuple:
    """One loop a level down of the batched functions, the carry batched on axis 0."""
    size, who = interp.size, params["who"]
    carry = [batch_axis_at(*batched_parts(interp, a), size) for a in args]
    like = library_of(carry)
    # staged on one example: a BatchedTensor's shape is one example's
    cond_graph, body_graph, cond_c, body_c = function_graphs(params, args, like)

    def batched(graph: Graph, captured: list) -> tuple:
        consts, cdims = unzip(batched_parts(interp, c) for c in captured)
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
        if dim is not None:  # some examples are done: they keep their carry
            pred = batch_axis_at(pred, dim, size)
            masks = [_shp.reshape(pred, (size,) + (1,) * (len(shape_of(v)) - 1)) for v in vals]
            # the body runs on theirs too: its derivative cut there (derivative_where)
            ins = [derivative_where(m, (v,))[0] for m, v in zip(masks, vals, strict=True)]
        outs = eval_graph(bbody.graph, *(vals if dim is None else ins), *body_consts)
        new = [batch_axis_at(o, d, size) for o, d in zip(outs, bbody.out_dims, strict=True)]
        if dim is None:  # every example goes on
            return tuple(new)
        return tuple(_elt.where(m, n, v) for m, n, v in zip(masks, new, vals, strict=True))

    outs = bind_while(prim, who, cond, body, carry)
    return tuple(BatchedTensor(interp, o, 0) for o in outs)


def pushed_loop(interp: JvpInterpreter, prim: Primitive, args: tuple, params: dict) -> tuple:
    """One loop a level down of the body's JVP graph, the tangents as more carry."""
    who, n = params["who"], len(args)
    primals, tangents = unzip(dual_parts(interp, a) for a in args)
    like = library_of(primals)
    cond_graph, body_graph, cond_c, body_c = function_graphs(params, tuple(primals), like)
    cond_consts = [dual_parts(interp, c)[0] for c in cond_c]
    body_pairs = [dual_parts(interp, c) for c in body_c]
    const_tangents = [t for _, t in body_pairs if t is not None]
    has, jg = carry_tangents(body_graph, primals, tangents,
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

    outs = bind_while(prim, who, cond, body, [*primals, *carry_t])
    moving = iter(outs[n:])
    assert len(outs) == n + k
    return tuple(DualTensor(interp, o, next(moving)) if h else o
                 for o, h in zip(outs[:n], has, strict=True))  # fmt: skip


def jet_loop(interp: JetInterpreter, prim: Primitive, args: tuple, params: dict) -> tuple:
    """One loop a level down, the coefficients as more carry."""
    who, n, order = params["who"], len(args), interp.order
    primals, series = unzip(jet_parts(interp, a) for a in args)
    cond_graph, body_graph, cond_c, body_c = function_graphs(params, tuple(primals),
                                                              library_of(primals))  # fmt: skip
    cond_consts = [jet_parts(interp, c)[0] for c in cond_c]
    body_pairs = [jet_parts(interp, c) for c in body_c]
    moving = [i for i, p in enumerate(primals) if is_float(p)]
    none = (None,) * order

    def filled(values: Any, coefficients: Any) -> list:
        return [c if c is not None else _cre.zeros_like(values)
                for c in (coefficients or none)]  # fmt: skip

    def cond(*vals: Any) -> Any:
        return eval_graph(cond_graph, *vals[:n], *cond_consts)[0]

    def body(*vals: Any) -> tuple:
        carried = [none] * n
        for j, i in enumerate(moving):
            carried[i] = tuple(vals[n + j * order : n + (j + 1) * order])
        outs, out_series = push_series(
            lambda *xs: tuple(eval_graph(body_graph, *xs)),
            [*vals[:n], *(p for p, _ in body_pairs)],
            [*carried, *(s or none for _, s in body_pairs)],
            order,
        )
        return (*outs, *(c for i in moving for c in filled(outs[i], out_series[i])))

    carry = [*primals, *(c for i in moving for c in filled(primals[i], series[i]))]
    outs = bind_while(prim, who, cond, body, carry)
    result = list(outs[:n])
    for j, i in enumerate(moving):
        result[i] = JetTensor(interp, outs[i], tuple(outs[n + j * order : n + (j + 1) * order]))
    return tuple(result)
