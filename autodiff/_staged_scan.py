"""Reverse mode of ``scan``: which method runs, and the one for a scan inside a ``jit``.

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

import optree

from autodiff._call import library_of, vjp_graphs
from autodiff._core import Primitive, process
from autodiff._graph import ShapedArray, aval_of
from autodiff._reverse import GradInterpreter, GradTensor, recording, unpack
from autodiff._scan import ScanPrimitive, _Body, grad_of_scan, scan_p
from autodiff._staging import eval_graph, innermost_staging, stage, staging_below
from autodiff._subgraphs import closed
from autodiff._tape import Node
from autodiff._tracer import Tracer
from autodiff.rules import creation as _cre
from autodiff.rules._helpers import dtype_of, shape_of

__all__: list[str] = []


def _is_float(x: Any) -> bool:
    return dtype_of(x).kind in "fc"


@process.register(GradInterpreter, ScanPrimitive)
def _grad_of_scan(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    if params.get("n_consts"):  # staged: the body's closed-over values become its closure
        args, params = closed(args, params["n_consts"], params)
    if (params["length"] and recording(interp) and not interp.keep_all_residuals
            and not params["unroll"] and staging_below(interp)):  # fmt: skip
        return _staged_grad_of_scan(interp, prim, args, params)
    return grad_of_scan(interp, prim, args, params)


def _bind_scan(step: Callable, carry: list, xs: list, length: int, reverse: bool) -> tuple:
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
    outs = scan_p.bind(*operands, body=body, length=length, reverse=reverse, checkpoint=False,
                       unroll=False)  # fmt: skip
    return outs[: len(carry)], outs[len(carry) :]


def _staged_grad_of_scan(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    values, parents, _ = unpack(interp, args)
    fn, length, reverse = params["body"], params["length"], params["reverse"]
    n = fn.n_carry
    carry, xs = list(values[:n]), list(values[n:])
    like = library_of(values)
    avals = [*map(aval_of, carry), *(ShapedArray(shape_of(x)[1:], dtype_of(x)) for x in xs)]
    staged = stage(fn, avals, transform="jit", name="scan.body", like=like)
    consts, const_parents = [], []
    for k, c in enumerate(staged.captured):
        if isinstance(c, GradTensor) and c._interp is interp:
            consts.append(c.value)
            if c.node is not None:
                const_parents.append((k, c.node, c.index))
        elif isinstance(c, Tracer) and c._interp.level > interp.level:
            return grad_of_scan(interp, prim, args, params)  # a transform inside the grad
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

    final, stacked = _bind_scan(forward, carry, xs, length, reverse)
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

    final, ct_xs = _bind_scan(backward, [*ct_carry, *accs], step_xs, length, not params["reverse"])
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
