"""``cond`` where it is staged: every branch staged once, and the staged routes of grad,
jvp and vmap, each a ``cond`` of the branches' transformed graphs bound one level down.

``cond.py`` holds the primitive, its public functions and every transform's entry; an
entry takes the route here where a ``jit`` stages the cond (inside a ``jit``, or a
transform of a jitted function) and its index has no values, so no branch can be
chosen now:

- every route starts from the branches staged on the operands' avals and type-checked
  against the first (``stage_branches``, which staging itself records as one equation);
- grad (``two_conds``): a forward cond returning the outputs and, for every branch, a
  slot for its residuals (zeros in the branches not taken), and one tape node whose
  VJP is a backward cond of the branches' VJP graphs (``backward_cond``), so only the
  taken branch runs (why grad must not select: ``cond.py``'s docstring);
- jvp (``pushed_cond``): a cond of the branches' JVP graphs;
- vmap with an unbatched index (``batched_cond``): a cond of the branches' batched
  graphs.

Each route returns None where a branch closes over a value of a transform inside the
one at hand: that transform's level then runs the cond (``common.run_here``).  The
routes bind the primitive they are given, ``cond_p``: this module sits below
``cond.py``, which imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff.compiler.graph_transforms import batch_graph, jvp_graph, vjp_graphs
from autodiff.control.common import FlatFn, bottom
from autodiff.control.leaves import check_like, names_of
from autodiff.control.subgraphs import (
    StagedFunction,
    batch_axis_at,
    batched_parts,
    closes_over_above,
    dual_parts,
    joined,
    reaching,
    unzip,
)
from autodiff.core.arrays import dtype_of, library_of, shape_of
from autodiff.core.graph import aval_of
from autodiff.core.primitive import Primitive
from autodiff.core.tracer import Tracer
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter
from autodiff.interpreters.reverse import GradInterpreter, GradTensor, unpack
from autodiff.interpreters.staging import eval_graph, innermost_staging
from autodiff.interpreters.tape import Node
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp

__all__ = [
    "backward_cond",
    "batched_cond",
    "pushed_cond",
    "stage_branches",
    "staged_index",
    "two_conds",
]


def stage_branches(interp, args, avals, params) -> tuple[dict, list, list]:
    """Every branch staged on the operands' avals and checked against the first."""
    who, names = params["who"], params["names"]
    staged = [
        StagedFunction(interp, b, avals[1:], f"{who}.{n}")
        for b, n in zip(params["branches"], names)
    ]
    ref = staged[0]
    ref_names = names_of(ref.fn.out_tree, "output")
    out_avals = ref.avals()
    for b, s in enumerate(staged[1:], 1):
        check_like(s.outs, s.fn.out_tree, ref.outs, ref.fn.out_tree, ref_names,
                   f"{who}: the output of {names[b]}", f"the output of {names[0]}",
                   "every branch must return the same structure, shapes and dtypes.")  # fmt: skip
        out_avals = joined(out_avals, s.avals())
    return {"branches": staged}, staged, out_avals


def staged_index(index: Any) -> bool:
    """Whether no branch can be chosen now: the index is staged (it has no values)."""
    return isinstance(index, Tracer) and bottom(index) is None


def _branches_and_consts(interp: Any, args: Sequence, params: dict) -> tuple | None:
    """Every branch staged on ``args``' avals (type-checked), the values any of them
    closes over (in order), and per branch which of those it reads; None where one
    closes over a value of a transform inside ``interp`` (that level runs the cond)."""
    staging = innermost_staging()
    assert staging is not None
    _, staged, out_avals = stage_branches(staging, args, [aval_of(a) for a in args], params)
    consts: dict[int, Any] = {}
    for s in staged:
        if closes_over_above(s.captured, interp):
            return None
        for c in s.captured:
            consts.setdefault(id(c), c)
    const_list = list(consts.values())
    position = {id(c): k for k, c in enumerate(const_list)}
    picks = [[position[id(c)] for c in s.captured] for s in staged]
    return staged, const_list, picks, out_avals


def _fitted(x: Any, aval: Any) -> Any:
    """``x`` with the shape and dtype of ``aval`` (a branch's zero cotangent may come
    out as a Python 0.0 where the other branches give arrays): an array where ``x`` is a
    Python number (the cond's outputs are arrays, as its type says)."""
    if isinstance(x, (bool, int, float, complex)):
        return np.full(aval.shape, x, aval.dtype)
    if shape_of(x) == aval.shape and dtype_of(x) == aval.dtype:
        return x
    return _shp.broadcast_to(_elt.astype(_elt.add(np.zeros(aval.shape, aval.dtype), x),
                                         aval.dtype), aval.shape)  # fmt: skip


# --- grad and vjp: a forward and a backward cond ------------------------------------------------


def two_conds(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict) -> tuple | None:
    """The forward cond now, each branch returning its outputs and a slot for every
    branch's residuals; None where the taken branch must run at grad's level."""
    values, parents, _ = unpack(interp, args)
    index, operands = values[0], values[1:]
    found = _branches_and_consts(interp, values, params)  # type-checked
    if found is None:
        return None  # a transform inside the grad: its level runs the branch
    staged, const_list, picks, _ = found
    const_values, const_parents, _ = unpack(interp, tuple(const_list))  # as the operands are
    const_diff = [k for k, _, _ in const_parents]
    op_diff = [i - 1 for i, _, _ in parents if i >= 1]
    if not op_diff and not const_diff:
        return None  # nothing here is differentiated
    like = library_of(values)
    n_ops = len(operands)
    vgs = []
    for s, pick in zip(staged, picks, strict=True):
        argnums = (*op_diff, *(n_ops + j for j, k in enumerate(pick) if k in const_diff))
        vgs.append(vjp_graphs(s.graph, argnums, like))
    slots = [[v.aval for v in vg.forward.outvars[vg.n_out :]] for vg in vgs]

    def forward(b: int) -> Callable:
        def run(*ops: Any) -> tuple:
            outs = eval_graph(vgs[b].forward, *ops, *(const_values[k] for k in picks[b]))
            res = []
            for other, avals in enumerate(slots):
                res += (list(outs[vgs[b].n_out :]) if other == b
                        else [np.zeros(a.shape, a.dtype) for a in avals])  # fmt: skip
            return (*outs[: vgs[b].n_out], *res)

        return run

    in_tree = optree.tree_structure(tuple(operands))
    fwd = tuple(FlatFn(forward(b), in_tree) for b in range(len(staged)))
    index, *ops = reaching([index, *operands])
    out = prim.bind(index, *ops, branches=fwd, names=params["names"], who=params["who"])
    n_out = vgs[0].n_out
    outs, residuals = out[:n_out], out[n_out:]
    node_params = {"route": "two conds", "index": index, "vgs": vgs, "picks": picks, "slots": slots,
                   "residuals": residuals, "op_diff": op_diff, "const_diff": const_diff,
                   "const_values": const_values, "n_ops": n_ops, "names": params["names"],
                   "who": params["who"]}  # fmt: skip
    all_parents = [*parents, *((len(values) + k, c.node, c.index)
                               for k, c in enumerate(const_list) if k in const_diff)]  # fmt: skip
    node = Node(prim, node_params, [*values, *const_values], outs, all_parents)
    floats = set(vgs[0].float_outputs)
    return tuple(GradTensor(interp, o, node, i) if i in floats else o for i, o in enumerate(outs))


def backward_cond(prim: Primitive, cts: tuple, primals: list, params: dict, argnums: list) -> list:
    """The backward cond of ``two_conds``' tape node: the taken branch's VJP graph on
    its residuals, chosen by the index the forward cond took."""
    vgs, picks, slots = params["vgs"], params["picks"], params["slots"]
    op_diff, const_diff = params["op_diff"], params["const_diff"]
    const_values = params["const_values"]
    float_cts = [cts[j] for j in vgs[0].float_outputs]
    want = [aval_of(primals[1 + i]) for i in op_diff] + [aval_of(const_values[k])
                                                          for k in const_diff]  # fmt: skip
    starts = [sum(len(s) for s in slots[:b]) for b in range(len(slots))]

    def backward(b: int) -> Callable:
        def run(*xs: Any) -> tuple:
            res = xs[starts[b] : starts[b] + len(slots[b])]
            got = list(eval_graph(vgs[b].backward, *res, *xs[sum(map(len, slots)) :]))
            by_op = dict(zip(op_diff, got[: len(op_diff)], strict=True))
            mine = [k for j, k in enumerate(picks[b]) if k in const_diff]
            by_const = dict(zip(mine, got[len(op_diff) :], strict=True))
            out = [by_op[i] for i in op_diff] + [by_const.get(k, 0.0) for k in const_diff]
            return tuple(_fitted(o, a) for o, a in zip(out, want, strict=True))

        return run

    operands = [*params["residuals"], *float_cts]
    in_tree = optree.tree_structure(tuple(operands))
    bwd = tuple(FlatFn(backward(b), in_tree) for b in range(len(vgs)))
    got = prim.bind(params["index"], *operands, branches=bwd, names=params["names"],
                    who=params["who"])  # fmt: skip
    by_position = dict(zip([1 + i for i in op_diff], got[: len(op_diff)], strict=True))
    base = len(primals) - len(const_values)
    by_position.update((base + k, c) for k, c in zip(const_diff, got[len(op_diff) :],
                                                      strict=True))  # fmt: skip
    return [by_position.get(i) for i in argnums]


# --- jvp and vmap: one cond of the branches' transformed graphs ---------------------------------


def pushed_cond(interp: JvpInterpreter, prim: Primitive, args: tuple, params: dict) -> tuple | None:
    """A cond a level down whose branches return their outputs and the tangents of the
    outputs some branch gives one (zeros in the others)."""
    index = dual_parts(interp, args[0])[0]
    primals, tangents = unzip(dual_parts(interp, a) for a in args[1:])
    found = _branches_and_consts(interp, (index, *primals), params)
    if found is None:
        return None
    staged, const_list, picks, out_avals = found
    const_primals, const_tangents = unzip(dual_parts(interp, c) for c in const_list)
    like = library_of([*primals, *const_primals])
    op_has = [t is not None for t in tangents]
    jgs = []
    for s, pick in zip(staged, picks, strict=True):
        has = (*op_has, *(const_tangents[k] is not None for k in pick))
        moving = [*(t for t in tangents if t is not None),
                  *(const_tangents[k] for k in pick if const_tangents[k] is not None)]  # fmt: skip
        jgs.append(jvp_graph(s.graph, has, tuple(aval_of(t) for t in moving), like))
    n_out, n_in, n_const = len(out_avals), len(primals), len(const_list)
    out_has = [any(jg.out_has_tangent[j] for jg in jgs) for j in range(n_out)]
    op_tangents = [t for t in tangents if t is not None]
    moving_consts = [k for k, t in enumerate(const_tangents) if t is not None]

    def branch(b: int) -> Callable:
        def run(*xs: Any) -> tuple:
            ps, cps = xs[:n_in], xs[n_in : n_in + n_const]
            ts = xs[n_in + n_const :]
            cts = dict(zip(moving_consts, ts[len(op_tangents) :], strict=True))
            outs = eval_graph(jgs[b].graph, *ps, *(cps[k] for k in picks[b]),
                              *ts[: len(op_tangents)],
                              *(cts[k] for k in picks[b] if k in cts))  # fmt: skip
            given = iter(outs[n_out:])
            mine = [next(given) if h else None for h in jgs[b].out_has_tangent]
            pairs = [(t, a) for t, a, h in zip(mine, out_avals, out_has) if h]
            zero = lambda a: np.zeros(a.shape, a.dtype)
            return (*outs[:n_out], *(zero(a) if t is None else _fitted(t, a) for t, a in pairs))

        return run

    operands = [*primals, *const_primals, *op_tangents, *(const_tangents[k] for k in moving_consts)]
    in_tree = optree.tree_structure(tuple(operands))
    index, *operands = reaching([index, *operands])
    out = prim.bind(index, *operands, branches=tuple(FlatFn(branch(b), in_tree)
                                                     for b in range(len(staged))),
                    names=params["names"], who=params["who"])  # fmt: skip
    out_tangents = iter(out[n_out:])
    return tuple(DualTensor(interp, o, next(out_tangents)) if h else o
                 for o, h in zip(out[:n_out], out_has))  # fmt: skip


def batched_cond(interp: BatchInterpreter, prim: Primitive, index: Any, args: tuple,
                 params: dict) -> tuple | None:  # fmt: skip
    """A cond a level down whose branches are batched graphs, every output batched on
    axis 0 where some branch batches it."""
    size = interp.size
    # staged on one example: a BatchedTensor's shape is one example's
    found = _branches_and_consts(interp, (index, *args), params)
    if found is None:
        return None
    staged, const_list, picks, out_avals = found
    values, dims = unzip(batched_parts(interp, a) for a in args)
    consts, cdims = unzip(batched_parts(interp, c) for c in const_list)
    like = library_of([*values, *consts])
    bgs = []
    for s, pick in zip(staged, picks, strict=True):
        ins = [*values, *(consts[k] for k in pick)]
        in_dims = (*dims, *(cdims[k] for k in pick))
        avals = tuple(aval_of(x) for x in ins)
        bgs.append(batch_graph(s.graph, in_dims, avals, size, interp.randomness, like))
    n_out, n_in = len(out_avals), len(values)
    batched = [any(bg.out_dims[j] is not None for bg in bgs) for j in range(n_out)]

    def branch(b: int) -> Callable:
        def run(*xs: Any) -> tuple:
            outs = eval_graph(bgs[b].graph, *xs[:n_in], *(xs[n_in + k] for k in picks[b]))
            parts = zip(outs, bgs[b].out_dims, batched, out_avals, strict=True)
            return tuple(batch_axis_at(o, d, size) if m else _fitted(o, a)
                         for o, d, m, a in parts)  # fmt: skip

        return run

    operands = [*values, *consts]
    in_tree = optree.tree_structure(tuple(operands))
    index, *operands = reaching([index, *operands])
    out = prim.bind(index, *operands, branches=tuple(FlatFn(branch(b), in_tree)
                                                     for b in range(len(staged))),
                    names=params["names"], who=params["who"])  # fmt: skip
    return tuple(BatchedTensor(interp, o, 0) if m else o for o, m in zip(out, batched))
