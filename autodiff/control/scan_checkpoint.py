"""``scan(..., checkpoint=True)`` under an eager grad: one tape node whose VJP
recomputes the steps.

``scan.py``'s ``scan_grad`` takes this route (``recomputed``) where the scan is not
staged and ``checkpoint=True``; the node's VJP (``recomputed_vjp``, called by
``scan_vjp``) runs the steps backwards, recomputing each from the carry it started from.

Each step runs at the grad's own level on fresh inputs, so its primitives form a small
tape of their own; whatever they reach that was recorded before the step (values ``f``
closes over, such as weights) is found on that tape, becomes an input of the scan's
node, and receives the cotangents the steps send it.  During the backward pass the
steps run again under the same interpreter, recording again for that time
(``reverse.recording_again``).  The node is the primitive's the caller passes
(``scan_p``): this module sits below ``scan.py``, which imports it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autodiff.control.scan_body import stacked, steps
from autodiff.core.arrays import dtype_of
from autodiff.core.primitive import Primitive
from autodiff.core.tracer import Tracer
from autodiff.errors import RuleError
from autodiff.interpreters.reverse import (
    GradInterpreter,
    GradTensor,
    no_grad_level,
    recording_again,
    unpack,
)
from autodiff.interpreters.tape import Dropped, Node, backward
from autodiff.rules.shape import stack

__all__ = ["recomputed", "recomputed_vjp"]


def _fresh(interp: GradInterpreter, value: Any) -> Any:
    """``value`` as an input of a step's own tape (if it can have a derivative)."""
    if dtype_of(value).kind in "fc":
        return GradTensor(interp, value, Node(None, {}, (), None, ()))
    return value


def _mark() -> int:
    """A number below every node recorded from now on."""
    return Node(None, {}, (), None, ()).seq


def _value(interp: GradInterpreter, x: Any) -> Any:
    return x.value if isinstance(x, GradTensor) and x._interp is interp else x


def _outside(interp: GradInterpreter, outs: tuple) -> bool:
    """Whether a step's output is a value of a transform above ``interp`` (one that ``f``
    closes over): then the scan is not this level's to make one node of."""
    return any(isinstance(o, Tracer) and o._interp is not interp and o._interp.level > interp.level
               for o in outs)  # fmt: skip


def _closed_over(prim: Primitive, interp: GradInterpreter, outs: tuple, start: int,
                 found: dict) -> None:  # fmt: skip
    """Add to ``found`` the nodes recorded before ``start`` that the step's outputs
    depend on (the values ``f`` closes over), with a stand-in for each value."""
    todo = []
    for o in outs:
        if isinstance(o, GradTensor) and o._interp is interp and o.node is not None:
            if o.node.seq < start:  # f returned a closed-over value itself
                found.setdefault((id(o.node), o.index), (o.node, o.index, Dropped(prim, 0, o)))
            else:
                todo.append(o.node)
    seen = set()
    while todo:
        node = todo.pop()
        for argnum, parent, index in node.parents:
            if parent.seq < start:
                key = (id(parent), index)
                if key not in found:
                    found[key] = (parent, index, Dropped(prim, argnum, node.primals[argnum]))
            elif id(parent) not in seen:
                seen.add(id(parent))
                todo.append(parent)


def recomputed(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict) -> tuple | None:
    """The steps run now, each on a tape of its own, keeping the carry each started
    from; one node whose VJP (``scan_vjp``) recomputes them.  None where a step's
    outputs are values of a transform inside the grad (the plain loop must run)."""
    values, parents, _ = unpack(interp, args)
    body, length, reverse = params["body"], params["length"], params["reverse"]
    n = body.n_carry
    carry, xs = tuple(values[:n]), values[n:]
    traced_xs = {i - n for i, _, _ in parents if i >= n}
    saved: list = [None] * length
    ys: list = [None] * length
    closures: dict = {}
    for t in steps(length, reverse):
        saved[t] = carry
        start = _mark()
        x = [_fresh(interp, v[t]) if j in traced_xs else v[t] for j, v in enumerate(xs)]
        outs = body(*(_fresh(interp, c) for c in carry), *x)
        if _outside(interp, outs):
            return None
        _closed_over(prim, interp, outs, start, closures)
        carry = tuple(_value(interp, o) for o in outs[:n])
        ys[t] = tuple(_value(interp, o) for o in outs[n:])
    outs = (*carry, *stacked(ys, body, carry, xs))
    found = list(closures.values())
    parents += [(len(values) + k, node, index) for k, (node, index, _) in enumerate(found)]
    if not parents:
        return outs
    residuals = dict(params, route="recompute", saved=saved, closures=found, interp=interp,
                     no_grad=no_grad_level())  # fmt: skip
    primals = [*values, *(stand_in for _, _, stand_in in found)]
    node = Node(prim, residuals, primals, outs, parents)
    return tuple(GradTensor(interp, o, node, i) for i, o in enumerate(outs))


def recomputed_vjp(cts: tuple, primals: list, params: dict, argnums: list) -> list:
    """``scan_vjp`` of the checkpointed route: the steps backwards, each recomputed,
    then its own backward pass from the cotangents of its outputs to those of its inputs
    and of the values it closes over."""
    interp, body, saved, found = (params[k] for k in ("interp", "body", "saved", "closures"))
    n, length = body.n_carry, params["length"]
    xs = primals[n : len(primals) - len(found)]
    wanted_xs = {i - n for i in argnums if n <= i < n + len(xs)}
    ct_carry, ct_ys = list(cts[:n]), cts[n:]
    ct_xs: dict = {j: [None] * length for j in wanted_xs}
    ct_closures: list = [None] * len(found)
    position = {(id(node), index): k for k, (node, index, _) in enumerate(found)}
    for t in reversed(steps(length, params["reverse"])):
        with recording_again(interp, params["no_grad"]):
            start = _mark()
            carry = [_fresh(interp, c) for c in saved[t]]
            x = [_fresh(interp, v[t]) if j in wanted_xs else v[t] for j, v in enumerate(xs)]
            outs = body(*carry, *x)
        seeds = [
            (o.node, o.index, ct)
            for o, ct in zip(outs, (*ct_carry, *(c[t] for c in ct_ys)))
            if isinstance(o, GradTensor) and o._interp is interp and o.node is not None
        ]
        got = backward(seeds, consume=True, stop=start) if seeds else {}
        ct_carry = [_ct_of(got, c, v) for c, v in zip(carry, saved[t])]
        for j in wanted_xs:
            ct_xs[j][t] = got.get(x[j].node)
        for node, ct in got.items():
            if node.seq >= start:
                continue  # the step's own inputs
            for index, c in enumerate(ct) if isinstance(ct, list) else [(None, ct)]:
                k = position.get((id(node), index))
                if c is None:
                    continue
                if k is None:
                    raise RuleError(
                        "scan(..., checkpoint=True): recomputing a step reached a traced "
                        "value that the forward pass did not; f must compute the same "
                        "way each time it runs."
                    )
                ct_closures[k] = c if ct_closures[k] is None else ct_closures[k] + c
    out = []
    for i in argnums:
        if i < n:
            out.append(ct_carry[i])
        elif i < n + len(xs):
            per_step = ct_xs[i - n]
            if all(c is None for c in per_step):
                out.append(None)
            else:
                x = xs[i - n]
                out.append(stack([np.zeros_like(x[t]) if c is None else c
                                  for t, c in enumerate(per_step)]))  # fmt: skip
        else:
            out.append(ct_closures[i - n - len(xs)])
    return out


def _ct_of(got: dict, carry: Any, value: Any) -> Any:
    ct = got.get(carry.node) if isinstance(carry, GradTensor) else None
    return np.zeros_like(value) if ct is None else ct
