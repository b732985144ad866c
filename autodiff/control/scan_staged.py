"""``scan`` where it is staged: the body staged on one step, and the staged routes of
grad, jvp and vmap, each a scan of the body's transformed graph bound one level down.

``scan.py`` holds the primitive, its public function and every transform's entry; an
entry takes the route here where a ``jit`` stages the scan (inside a ``jit``, or a
transform of a jitted function) and it is not unrolled:

- every route starts from the body staged on the carry and one slice of ``xs``
  (``staged_body``), and binds one scan of a step function of its own
  (``bind_scan``), whatever the length;
- vmap (``batched_scan``): the body batched as a jitted graph is, the carry batched on
  axis 0, ``xs`` and the ys on axis 1;
- jvp (``pushed_scan``): the body's JVP graph, the carry's tangents as more carry,
  ``xs``' tangents as more ``xs``, the ys' tangents as more ys;
- grad, vjp (``two_scans``): JAX's transposition, the body's VJP staged as a forward
  and a backward graph; a forward scan stacking each step's residuals (with
  ``checkpoint=True`` the carries) and one tape node whose VJP is a reversed scan of
  the backward graph (``reversed_scan``), carrying the carry's cotangents and the sums
  of the closed-over values'.

``staged_body`` (and so each route) gives None where the body closes over a value of a
transform inside the one at hand: that transform's level then runs the steps (the
eager regime).  The routes bind the primitive they are given, ``scan_p``: this module
sits below ``scan.py``, which imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optree

from autodiff.compiler.graph_transforms import batch_graph, vjp_graphs
from autodiff.control.scan_body import ScanBody
from autodiff.control.subgraphs import (
    batch_axis_at,
    batched_parts,
    carry_tangents,
    closes_over_above,
    dual_parts,
    reaching,
    sliced,
    unzip,
)
from autodiff.core.arrays import is_float, library_of
from autodiff.core.graph import aval_of
from autodiff.core.primitive import Primitive
from autodiff.core.stack import Interpreter
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter
from autodiff.interpreters.reverse import GradInterpreter, GradTensor, unpack
from autodiff.interpreters.staging import Staged, eval_graph, stage
from autodiff.interpreters.tape import Node
from autodiff.rules import creation as _cre

__all__ = ["batched_scan", "bind_scan", "pushed_scan", "reversed_scan", "staged_body", "two_scans"]


def staged_body(fn: Callable, carry: Sequence, xs: Sequence, like: Any,
                 interp: Interpreter) -> Staged | None:  # fmt: skip
    """The body staged on the carry and one slice of ``xs``; None where it closes over a
    value of a transform running inside ``interp``'s (that transform's level, nearer the
    body, then runs the steps: the eager regime)."""
    avals = [*map(aval_of, carry), *map(sliced, xs)]
    staged = stage(fn, avals, transform="jit", name="scan.body", like=like)
    return None if closes_over_above(staged.captured, interp) else staged


def bind_scan(prim: Primitive, step: Callable, carry: list, xs: list, length: int, reverse: bool,
              checkpoint: bool = False) -> tuple:  # fmt: skip
    """``scan(step, carry, xs)`` on flat lists one level down (``step(c, x) -> (c, y)``
    with tuples), reaching the staging even where every operand is a constant; the
    final carry and the stacked ``y`` leaves."""
    operands = reaching([*carry, *xs])
    body = ScanBody(step, optree.tree_structure(tuple(carry)), None,
                 optree.tree_structure(tuple(xs)))  # fmt: skip
    outs = prim.bind(*operands, body=body, length=length, reverse=reverse,
                       checkpoint=checkpoint, unroll=False)  # fmt: skip
    return outs[: len(carry)], outs[len(carry) :]


def batched_scan(interp: BatchInterpreter, prim: Primitive, staged: Staged, args: tuple,
                 params: dict) -> tuple:  # fmt: skip
    """One scan a level down of the batched body: carry batched on axis 0, ``xs`` on
    axis 1, the ys on axis 1."""
    length, size, n = params["length"], interp.size, params["body"].n_carry
    values, dims = unzip(batched_parts(interp, a) for a in args)
    like = library_of(values)
    consts, c_dims = unzip(batched_parts(interp, c) for c in staged.captured)
    carry = [batch_axis_at(v, d, size) for v, d in zip(values[:n], dims[:n], strict=True)]
    xs = [v if d is None else batch_axis_at(v, d, size, where_to=1)
          for v, d in zip(values[n:], dims[n:], strict=True)]  # fmt: skip
    x_dims = tuple(None if d is None else 0 for d in dims[n:])
    step_avals = (*map(aval_of, carry), *map(sliced, xs), *map(aval_of, consts))
    bg = batch_graph(staged.graph, (0,) * n + x_dims + tuple(c_dims), step_avals, size,
                     interp.randomness, like)  # fmt: skip

    def step(c: tuple, x: tuple) -> tuple:
        outs = eval_graph(bg.graph, *c, *x, *consts)
        moved = [batch_axis_at(o, d, size) for o, d in zip(outs, bg.out_dims, strict=True)]
        return tuple(moved[:n]), tuple(moved[n:])

    final, ys = bind_scan(prim, step, carry, xs, length, params["reverse"],
                          params["checkpoint"])  # fmt: skip
    return (*(BatchedTensor(interp, c, 0) for c in final),
            *(BatchedTensor(interp, y, 1) for y in ys))  # fmt: skip


def pushed_scan(interp: JvpInterpreter, prim: Primitive, staged: Staged, args: tuple,
                params: dict) -> tuple:  # fmt: skip
    """One scan a level down of the body's JVP graph: the carry's tangents as more
    carry, ``xs``' tangents as more ``xs``, the ys' tangents as more ys."""
    length, n = params["length"], params["body"].n_carry
    m = len(args) - n
    primals, tangents = unzip(dual_parts(interp, a) for a in args)
    like = library_of(primals)
    pairs = [dual_parts(interp, c) for c in staged.captured]
    x_tangents = [t for t in tangents[n:] if t is not None]
    rest_has = [*(t is not None for t in tangents[n:]), *(t is not None for _, t in pairs)]
    rest_avals = [*map(sliced, x_tangents),
                  *(aval_of(t) for _, t in pairs if t is not None)]  # fmt: skip
    has, jg = carry_tangents(staged.graph, primals[:n], tangents[:n], rest_has, rest_avals,
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

    final, ys = bind_scan(prim, step, [*primals[:n], *carry_t], [*primals[n:], *x_tangents], length,
                          params["reverse"], params["checkpoint"])  # fmt: skip
    carry_moving, y_moving = iter(final[n:]), iter(ys[n_out - n :])
    assert len(final) == n + k
    carry = [DualTensor(interp, o, next(carry_moving)) if h else o
             for o, h in zip(final[:n], has, strict=True)]  # fmt: skip
    y_out = [DualTensor(interp, o, next(y_moving)) if h else o
             for o, h in zip(ys[: n_out - n], jg.out_has_tangent[n:], strict=True)]  # fmt: skip
    return (*carry, *y_out)


def two_scans(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict) -> tuple | None:
    """The forward scan now, keeping each step's residuals (or carries) for the
    reversed scan of ``scan_vjp``; None where the eager routes must run instead."""
    values, parents, _ = unpack(interp, args)
    fn, length, reverse = params["body"], params["length"], params["reverse"]
    n = fn.n_carry
    carry, xs = list(values[:n]), list(values[n:])
    like = library_of(values)
    staged = staged_body(fn, carry, xs, like, interp)
    if staged is None:
        return None  # a transform inside the grad: its level runs the steps
    consts, const_parents, _ = unpack(interp, tuple(staged.captured))  # as the operands are
    if not parents and not const_parents:
        return None  # nothing here is differentiated
    x_parents = {i - n for i, _, _ in parents if i >= n}
    diff_carry = [i for i in range(n) if is_float(carry[i])]
    diff_xs = sorted(x_parents)
    diff_consts = [k for k, _, _ in const_parents]
    argnums = (*diff_carry, *(n + j for j in diff_xs), *(n + len(xs) + k for k in diff_consts))
    vg = vjp_graphs(staged.graph, argnums, like)
    checkpoint = params["checkpoint"]

    def forward(c: tuple, x: tuple) -> tuple:
        outs = eval_graph(vg.forward, *c, *x, *consts)
        kept = c if checkpoint else outs[vg.n_out :]
        return tuple(outs[:n]), (tuple(outs[n : vg.n_out]), tuple(kept))

    final, stacked = bind_scan(prim, forward, carry, xs, length, reverse)
    n_y = vg.n_out - n
    outs = (*final, *stacked[:n_y])
    saved = list(stacked[n_y:])
    node_params = {"route": "two scans", "vg": vg, "saved": saved, "consts": consts, "xs": xs,
                   "n": n, "diff": (diff_carry, diff_xs, diff_consts), "length": length,
                   "reverse": reverse, "checkpoint": checkpoint}  # fmt: skip
    all_parents = [*parents, *((len(values) + k, node, index) for k, node, index in const_parents)]
    node = Node(prim, node_params, [*values, *consts], outs, all_parents)
    return tuple(GradTensor(interp, o, node, i) if is_float(o) else o for i, o in enumerate(outs))


def reversed_scan(prim: Primitive, cts: tuple, primals: list, params: dict, argnums: list) -> list:
    """``scan_vjp`` of the staged route: a reversed scan of the body's backward graph,
    carrying the carry's cotangents and the sums of the closed-over values'."""
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

    final, ct_xs = bind_scan(prim, backward, [*ct_carry, *accs], step_xs, length,
                             not params["reverse"])  # fmt: skip
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
