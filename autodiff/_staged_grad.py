"""Reverse mode inside a ``jit``: ``scan`` and ``cond`` staged, as JAX transposes them.

``cond`` first: where its index is staged (a grad inside a jit), running every branch
and selecting would differentiate the branches not taken too, and a NaN there (the
``sqrt`` of a negative number in a branch guarded against it) would reach the gradient
through ``0 * nan``.  So each branch is staged once and its VJP staged as a forward
and a backward graph (``vjp_graphs``); a forward ``cond`` on the same index returns
the outputs and the taken branch's residuals (every branch returns a slot for every
branch's residuals, zeros in the others', so the branches agree in type), and the
backward pass runs a ``cond`` of the backward graphs.  Only the taken branch runs, in
both directions.

``scan``:

``grad`` meets a scan at its own level.  With nothing staged below it, it runs the
steps (``_scan.grad_of_scan``: recorded like a Python loop, or with
``checkpoint=True`` as one tape node that recomputes them).  Where a staging runs
below the grad (``jit(grad(f))``), recording the steps would unroll them into the
staged program.  Instead the body is staged once, on one step's values; its VJP is
staged as ``jit``'s call's is (``vjp_graphs``): a forward graph (the step's outputs
and residuals) and a backward graph (residuals and cotangents in, input cotangents
out).  Then two scans are bound one level down, where the staging records each as one
equation: the forward scan, now, stacking every step's residuals (with
``checkpoint=True`` only the carry each step started from); and in the backward pass
the reversed scan, carrying the carry's cotangent and summing the cotangents of the
values the body closes over, its ``y`` the cotangents of ``xs``.  This is JAX's
transposition of ``scan``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff._call import library_of, vjp_graphs
from autodiff._control import CondPrimitive, _bottom, _Branch, _run_here, cond_p
from autodiff._core import Primitive, process
from autodiff._graph import aval_of
from autodiff._reverse import GradInterpreter, GradTensor, recording, unpack
from autodiff._scan import ScanPrimitive, grad_of_scan
from autodiff._staged_control import (
    _cond,
    _unclosed,
    bind_scan,
    closes_over_above,
    reaching,
    sliced,
)
from autodiff._staging import eval_graph, innermost_staging, stage, staging_below
from autodiff._tape import Node
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import dtype_of, shape_of

__all__: list[str] = []


def _is_float(x: Any) -> bool:
    return dtype_of(x).kind in "fc"


@process.register(GradInterpreter, ScanPrimitive)
def _grad_of_scan(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    args, params = _unclosed(args, params)  # staged: the closed-over values as closures
    if (params["length"] and recording(interp) and not interp.keep_all_residuals
            and not params["unroll"] and staging_below(interp)):  # fmt: skip
        return _staged_grad_of_scan(interp, prim, args, params)
    return grad_of_scan(interp, prim, args, params)


# --- cond --------------------------------------------------------------------------------


@process.register(GradInterpreter, CondPrimitive)
def _grad_of_cond(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    if recording(interp) and not interp.keep_all_residuals and staging_below(interp):
        args, params = _unclosed(args, params)
        index = args[0].value if isinstance(args[0], GradTensor) else args[0]
        if _bottom(index) is None:  # staged: no branch can be chosen now
            return _staged_grad_of_cond(interp, prim, args, params)
    return _run_here(interp, prim, args, params)


def _fitted(x: Any, aval: Any) -> Any:
    """``x`` with the shape and dtype of ``aval`` (a branch's zero cotangent may come
    out as a Python 0.0 where the other branches give arrays)."""
    if shape_of(x) == aval.shape and dtype_of(x) == aval.dtype:
        return x
    return _shp.broadcast_to(_elt.astype(_elt.add(np.zeros(aval.shape, aval.dtype), x),
                                         aval.dtype), aval.shape)  # fmt: skip


def _staged_grad_of_cond(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    values, parents, _ = unpack(interp, args)
    index, operands = values[0], values[1:]
    staging = innermost_staging()
    assert staging is not None
    _, staged, _ = _cond(staging, args, [aval_of(v) for v in values], params)  # type-checked
    consts: dict[int, Any] = {}
    for s in staged:
        if closes_over_above(s.captured, interp):
            return _run_here(interp, prim, args, params)  # a transform inside the grad
        for c in s.captured:
            consts.setdefault(id(c), c)
    const_list = list(consts.values())
    position = {id(c): k for k, c in enumerate(const_list)}
    const_values = [c.value if isinstance(c, GradTensor) and c._interp is interp else c
                    for c in const_list]  # fmt: skip
    const_diff = [k for k, c in enumerate(const_list)
                  if isinstance(c, GradTensor) and c._interp is interp
                  and c.node is not None]  # fmt: skip
    op_diff = [i - 1 for i, _, _ in parents if i >= 1]
    if not op_diff and not const_diff:
        return _run_here(interp, prim, args, params)
    like = library_of(values)
    n_ops = len(operands)
    vgs, picks = [], []
    for s in staged:
        pick = [position[id(c)] for c in s.captured]
        argnums = (*op_diff, *(n_ops + j for j, k in enumerate(pick) if k in const_diff))
        vgs.append(vjp_graphs(s.graph, argnums, like))
        picks.append(pick)
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
    fwd = tuple(_Branch(forward(b), in_tree) for b in range(len(staged)))
    index, *ops = reaching([index, *operands])
    out = cond_p.bind(index, *ops, branches=fwd, names=params["names"], who=params["who"])
    n_out = vgs[0].n_out
    outs, residuals = out[:n_out], out[n_out:]
    node_params = {"index": index, "vgs": vgs, "picks": picks, "slots": slots,
                   "residuals": residuals, "op_diff": op_diff, "const_diff": const_diff,
                   "const_values": const_values, "n_ops": n_ops, "names": params["names"],
                   "who": params["who"]}  # fmt: skip
    all_parents = [*parents, *((len(values) + k, c.node, c.index)
                               for k, c in enumerate(const_list) if k in const_diff)]  # fmt: skip
    node = Node(staged_cond_p, node_params, [*values, *const_values], outs, all_parents)
    floats = set(vgs[0].float_outputs)
    return tuple(GradTensor(interp, o, node, i) if i in floats else o for i, o in enumerate(outs))


def _staged_cond_vjp(cts, ans, primals, params, argnums):
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
    bwd = tuple(_Branch(backward(b), in_tree) for b in range(len(vgs)))
    got = cond_p.bind(params["index"], *operands, branches=bwd, names=params["names"],
                      who=params["who"])  # fmt: skip
    by_position = dict(zip([1 + i for i in op_diff], got[: len(op_diff)], strict=True))
    base = len(primals) - len(const_values)
    by_position.update((base + k, c) for k, c in zip(const_diff, got[len(op_diff) :],
                                                      strict=True))  # fmt: skip
    return [by_position.get(i) for i in argnums]


# The tape node of a staged cond: its VJP is the cond of the branches' backward graphs.
staged_cond_p = Primitive("cond", lambda *a: a, multiple_results=True)
staged_cond_p.vjp = _staged_cond_vjp


# --- scan --------------------------------------------------------------------------------


def _staged_grad_of_scan(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    values, parents, _ = unpack(interp, args)
    fn, length, reverse = params["body"], params["length"], params["reverse"]
    n = fn.n_carry
    carry, xs = list(values[:n]), list(values[n:])
    like = library_of(values)
    avals = [*map(aval_of, carry), *map(sliced, xs)]
    staged = stage(fn, avals, transform="jit", name="scan.body", like=like)
    if closes_over_above(staged.captured, interp):
        return grad_of_scan(interp, prim, args, params)  # a transform inside the grad
    consts, const_parents = [], []
    for k, c in enumerate(staged.captured):
        if isinstance(c, GradTensor) and c._interp is interp:
            consts.append(c.value)
            if c.node is not None:
                const_parents.append((k, c.node, c.index))
        else:
            consts.append(c)
    if not parents and not const_parents:
        return grad_of_scan(interp, prim, args, params)
    x_parents = {i - n for i, _, _ in parents if i >= n}
    diff_carry = [i for i in range(n) if _is_float(carry[i])]
    diff_xs = sorted(x_parents)
    diff_consts = [k for k, _, _ in const_parents]
    argnums = (*diff_carry, *(n + j for j in diff_xs), *(n + len(xs) + k for k in diff_consts))
    vg = vjp_graphs(staged.graph, argnums, like)
    checkpoint = params["checkpoint"]

    def forward(c: tuple, x: tuple) -> tuple:
        outs = eval_graph(vg.forward, *c, *x, *consts)
        kept = c if checkpoint else outs[vg.n_out :]
        return tuple(outs[:n]), (tuple(outs[n : vg.n_out]), tuple(kept))

    final, stacked = bind_scan(forward, carry, xs, length, reverse)
    n_y = vg.n_out - n
    outs = (*final, *stacked[:n_y])
    saved = list(stacked[n_y:])
    node_params = {"vg": vg, "saved": saved, "consts": consts, "xs": xs, "n": n,
                   "diff": (diff_carry, diff_xs, diff_consts), "length": length,
                   "reverse": reverse, "checkpoint": checkpoint}  # fmt: skip
    all_parents = [*parents, *((len(values) + k, node, index) for k, node, index in const_parents)]
    node = Node(staged_scan_p, node_params, [*values, *consts], outs, all_parents)
    return tuple(GradTensor(interp, o, node, i) if _is_float(o) else o for i, o in enumerate(outs))


def _staged_scan_vjp(cts, ans, primals, params, argnums):
    vg, saved, consts, xs = params["vg"], params["saved"], params["consts"], params["xs"]
    n, length, checkpoint = params["n"], params["length"], params["checkpoint"]
    diff_carry, diff_xs, diff_consts = params["diff"]
    float_outputs = vg.float_outputs
    carry_float = [j for j in float_outputs if j < n]
    y_float = [j for j in float_outputs if j >= n]
    ct_carry = [cts[i] for i in diff_carry]
    accs = [_cre.zeros_like(consts[k]) for k in diff_consts]
    step_xs = [*saved, *(cts[j] for j in y_float), *(xs if checkpoint else ())]
    n_saved, n_ys = len(saved), len(y_float)

    def backward(c: tuple, x: tuple) -> tuple:
        ct_c, acc = list(c[: len(diff_carry)]), list(c[len(diff_carry) :])
        if checkpoint:  # recompute this step's residuals from the carry it started from
            res = eval_graph(vg.forward, *x[:n_saved], *x[n_saved + n_ys :], *consts)[vg.n_out :]
        else:
            res = list(x[:n_saved])
        by_carry = dict(zip(diff_carry, ct_c, strict=True))
        ct_out = [by_carry[j] for j in carry_float] + list(x[n_saved : n_saved + n_ys])
        in_cts = list(eval_graph(vg.backward, *res, *ct_out))
        k = len(diff_carry)
        new_c = [_or_zeros(t, ct_c[i]) for i, t in enumerate(in_cts[:k])]
        ct_x = [_or_zeros(t, None) for t in in_cts[k : k + len(diff_xs)]]
        new_acc = [a if t is None else a + t for a, t in zip(acc, in_cts[k + len(diff_xs) :],
                                                             strict=True)]  # fmt: skip
        return (*new_c, *new_acc), tuple(ct_x)

    final, ct_xs = bind_scan(backward, [*ct_carry, *accs], step_xs, length, not params["reverse"])
    by_position: dict[int, Any] = dict(zip(diff_carry, final[: len(diff_carry)], strict=True))
    by_position.update((n + j, c) for j, c in zip(diff_xs, ct_xs, strict=True))
    base = n + len(xs)
    by_position.update((base + k, c) for k, c in zip(diff_consts, final[len(diff_carry) :],
                                                      strict=True))  # fmt: skip
    return [by_position.get(i) for i in argnums]


def _or_zeros(ct: Any, like: Any) -> Any:
    if ct is None and like is not None:
        return _cre.zeros_like(like)
    return ct


# The tape node of a staged scan: its VJP is the reversed scan above.
staged_scan_p = Primitive("scan", lambda *a: a, multiple_results=True)
staged_scan_p.vjp = _staged_scan_vjp
