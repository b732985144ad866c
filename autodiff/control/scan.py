"""``scan``: the primitive ``scan_p`` and every transform's entry for it.

``scan(f, init, xs)`` loops ``f(carry, x) -> (carry, y)`` over the leading axis of
``xs`` (JAX's ``lax.scan``).  The registration block at the end of this module lists
each transform's one entry; where a transform has two regimes, the entry chooses
between them in its first lines.  The two regimes:

- **eager**: the steps at the transform's own level, on its tracers, as a Python loop
  would run them (``common.run_here``), so a body may branch on its values in Python
  and close over values of any transform; a carry that becomes batched simply is
  batched from then on;
- **staged**: where ``jit`` staged the scan (a transform inside a ``jit``, or a
  transform of a jitted function, ``compiler/call.py``), the body is staged once,
  transformed as a graph and bound as one scan a level down, whatever the length.

The routes, by transform (the staged ones in ``scan_staged.py``, the checkpointed
grad's in ``scan_checkpoint.py``, the body each step runs in ``scan_body.py``):

- no tracer: the loop in Python; traced ``xs`` are sliced by one primitive
  (``slices_p``), whose VJP stacks the steps' cotangents (``_scan_impl``);
- staging (``jit``, ``make_graph``): the body staged once, one equation
  (``scan_stage``); ``unroll=True``: every step recorded (the eager regime);
- lowering (``jit``'s compiling tier): the loop in compiled code, the body inline
  (``_scan_lowering``); sparsity detection: ``_scan_sparsity``;
- vmap (``scan_batch``): staged, the body batched as a jitted graph is, one scan, carry
  on axis 0 and ``xs`` on axis 1 (``batched_scan``); eager, the steps at vmap's level;
- jvp (``scan_jvp``): staged, one scan carrying the tangents, ``xs``' tangents as more
  ``xs`` (``pushed_scan``); eager, the steps at jvp's level;
- grad, vjp (``scan_grad``): staged, two scans, JAX's transposition: a forward scan
  stacking each step's residuals (with ``checkpoint=True`` the carries) and a reversed
  scan of the body's backward graph (``two_scans``); eager with ``checkpoint=True``,
  one tape node that keeps the carry each step started from and recomputes the steps
  in the backward pass (``recomputed``); eager, the steps recorded like a Python loop.
  The node either records is ``scan_p``'s, and its VJP rule (``scan_vjp``) runs the
  reversed scan or the recomputation;
- explain: the steps at its level (``run_here``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff.control.common import (
    ControlFlowPrimitive,
    GraphFn,
    inline_function,
    run_here,
    staged_if_jitting,
)
from autodiff.control.leaves import is_static_int, leaves_of
from autodiff.control.scan_body import ScanBody, stacked, steps
from autodiff.control.scan_checkpoint import recomputed, recomputed_vjp
from autodiff.control.scan_staged import (
    batched_scan,
    pushed_scan,
    reversed_scan,
    staged_body,
    two_scans,
)
from autodiff.control.subgraphs import (
    StagedFunction,
    batched_parts,
    dual_parts,
    joined,
    stage_control,
    unclosed,
)
from autodiff.core.args import check_callable, check_flag
from autodiff.core.arrays import library_of, shape_of
from autodiff.core.graph import ShapedArray
from autodiff.core.index_sets import Groups, apply_read, propagating
from autodiff.core.lowering import Emitter, NotLowered
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.rule_forms import linear_taylor
from autodiff.core.stack import Interpreter, current_interpreters
from autodiff.core.tracer import Tracer
from autodiff.errors import RuleError, TransformTypeError, TransformValueError
from autodiff.interpreters.batching import BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.forward import JvpInterpreter
from autodiff.interpreters.reverse import (
    GradInterpreter,
    recording,
)
from autodiff.interpreters.sparsity import fixed_point, propagate, stacked_sets
from autodiff.interpreters.staging import (
    StagingInterpreter,
    staging_below,
)
from autodiff.interpreters.taylor import JetInterpreter
from autodiff.rules._sparsity import moves, shape_of_operand
from autodiff.rules.compositions import moveaxis
from autodiff.rules.shape import stack

__all__ = ["ScanPrimitive", "run_scan", "scan", "scan_p", "slices_p"]


class ScanPrimitive(ControlFlowPrimitive):
    """``scan`` (the module docstring says how each transform treats it)."""

    __slots__ = ()


def _scan_impl(*operands: Any, body: ScanBody, length: int, reverse: bool, checkpoint: bool,
               unroll: bool) -> tuple:  # fmt: skip
    n = body.n_carry
    carry, xs = operands[:n], operands[n:]
    # traced xs are sliced by one primitive, whose VJP stacks the steps' cotangents: a
    # slice x[t] each would send a cotangent of all of xs back from every step
    slices = [slices_p.bind(x) if isinstance(x, Tracer) and length else x for x in xs]
    ys: list = [None] * length
    for t in steps(length, reverse):
        out = body(*carry, *(x[t] for x in slices))
        carry, ys[t] = out[:n], out[n:]
    return (*carry, *stacked(ys, body, carry, xs))


def _slices_batch(args, dims):
    (x,), (d,) = args, dims
    if d == 0:  # the steps are axis 1: bring them to the front
        x, d = moveaxis(x, 1, 0), 1
    out = slices_p.bind(x)
    return out, (d - 1,) * len(out)


slices_p = Primitive(
    "scan_slices",  # xs[0], xs[1], ...: the views along the first axis
    lambda x: tuple(x),
    vjp=lambda cts, ans, x: [stack(list(cts))],
    jvp=lambda tangents, ans, x: slices_p.bind(tangents[0]),
    batch=_slices_batch,
    multiple_results=True,  # (vjp_reads cannot drop a tuple of results; they are views of x)
)

slices_p.def_sparsity(moves(slices_p.impl, multiple_results=True))
slices_p.def_taylor(linear_taylor(slices_p))

scan_p = ScanPrimitive("scan", _scan_impl, multiple_results=True)


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: bool | int = 1, *,
         checkpoint: bool = False) -> tuple:  # fmt: skip
    """Loop ``f`` over the leading axis of ``xs``, carrying a state (JAX's ``lax.scan``).

    ``f(carry, x) -> (carry, y)``: each step gets the carry and one slice of ``xs``
    and returns the new carry (same structure, shapes and dtypes as ``init``) and
    ``y``.  Returns the final carry and the ``y`` of every step stacked along a new
    first axis; ``xs``, ``y`` and the carry are pytrees of arrays.  ``length`` is
    the number of steps (needed when ``xs`` is None); ``reverse=True`` runs from the
    last slice to the first (``ys`` stay in the order of ``xs``).

    ``checkpoint=True``: under ``grad``/``vjp`` keep only the carry each step
    started from and recompute the steps during the backward pass, instead of
    keeping every step's intermediate values (as :func:`autodiff.checkpoint` does
    for one function).  It applies where the scan is reached by ``grad``'s own
    values or runs directly inside it (``grad(f)``, ``vmap(grad(f))``); values of
    a ``vmap`` running inside the ``grad`` are recorded step by step.

    Under ``jit`` the body is staged once and the replay runs the loop, also for
    ``jit(grad(f))``, where the gradient is two staged scans (forward, keeping each
    step's residuals, and reversed).  ``unroll=True`` stages every step instead: a
    longer program to stage, a faster one to replay when the steps are small (no
    per-step call, no stacked residuals).  Eagerly it changes nothing.  (JAX's
    ``unroll=k``, k steps per iteration, is not supported: pass 1 or True.)

    >>> import numpy as np, autodiff
    >>> cumsum = lambda xs: autodiff.scan(lambda c, x: (c + x, c + x), 0.0, xs)
    >>> total, partial = cumsum(np.array([1.0, 2.0, 3.0]))
    >>> float(total), partial
    (6.0, array([1., 3., 6.]))
    >>> def rnn(w, xs, checkpoint):
    ...     step = lambda h, x: (np.tanh(w * h + x), None)
    ...     return autodiff.scan(step, 0.0, xs, checkpoint=checkpoint)[0]
    >>> xs = np.array([1.0, -1.0, 0.5])
    >>> [round(float(autodiff.grad(rnn)(0.5, xs, c)), 6) for c in (False, True)]
    [-0.271276, -0.271276]
    """
    check_callable(f, "scan")
    check_flag(reverse, "reverse", "scan")
    check_flag(checkpoint, "checkpoint", "scan")
    if unroll not in (0, 1) or not isinstance(unroll, (bool, int)):
        raise TransformValueError(
            f"scan: unroll must be 1 (one staged body) or True (every step staged), got "
            f"{unroll!r:.40}; unrolling k steps per iteration, as JAX's unroll=k, is not "
            f"supported."
        )
    return run_scan(f, init, xs, length, reverse, checkpoint, unroll=unroll is True)


def run_scan(f: Callable, init: Any, xs: Any, length: Any, reverse: bool, checkpoint: bool,
          check_carry: bool = True, unroll: bool = False) -> tuple:  # fmt: skip
    carry, carry_tree, carry_names = leaves_of(init, "init", "scan")
    x_leaves, xs_tree, x_names = leaves_of(xs, "xs", "scan")
    length = _length(x_leaves, x_names, length)
    body = ScanBody(f, carry_tree, carry_names if check_carry else None, xs_tree)
    operands = [*carry, *x_leaves]
    if checkpoint:
        operands = _for_checkpoint(operands)
    operands = staged_if_jitting(operands)
    outs = scan_p.bind(*operands, body=body, length=length, reverse=reverse,
                       checkpoint=checkpoint, unroll=unroll)  # fmt: skip
    n = len(carry)
    return (optree.tree_unflatten(carry_tree, list(outs[:n])),
            optree.tree_unflatten(body.y_tree, list(outs[n:])))  # fmt: skip


def _length(x_leaves: list, names: list, length: Any) -> int:
    if isinstance(length, Tracer):  # staged or batched: the error says what to do
        length = np.asarray(length._concrete_value("scan's length")).item()
    if length is not None and (not is_static_int(length) or length < 0):
        error = TransformValueError if is_static_int(length) else TransformTypeError
        raise error(f"scan: length must be None or a non-negative int, got {length!r:.40}.")
    sizes = {}
    for leaf, name in zip(x_leaves, names):
        if not shape_of(leaf):
            raise TransformValueError(
                f"scan: {name} has shape (); every leaf of xs needs a leading axis to "
                f"scan over (pass a scalar that every step sees through a closure)."
            )
        sizes[name] = shape_of(leaf)[0]
    if length is not None:
        sizes["length"] = int(length)
    if not sizes:
        raise TransformValueError("scan: with xs=None, give the number of steps as length=.")
    if len(set(sizes.values())) > 1:
        listing = ", ".join(f"{name} has {size}" for name, size in sizes.items())
        raise TransformValueError(
            f"scan: the leaves of xs must have the same leading size (the number of "
            f"steps), but {listing}."
        )
    return next(iter(sizes.values()))


# --- staging: the body staged once --------------------------------------------------------------


def scan_stage(interp: StagingInterpreter, prim: ScanPrimitive, args: tuple, params: dict):
    """Staging (``jit``, ``make_graph``): one equation holding the body staged once;
    with ``unroll=True`` every step recorded at the staging's level instead."""
    if params["unroll"]:
        return run_here(interp, prim, args, params)
    return stage_control(interp, prim, args, params, _stage_body)


def _stage_body(interp, args, avals, params) -> tuple[dict, list, list]:
    """The body staged on the carry and one slice of ``xs``."""
    fn, length = params["body"], params["length"]
    n = fn.n_carry
    x_avals = [ShapedArray(a.shape[1:], a.dtype) for a in avals[n:]]
    body = StagedFunction(interp, fn, [*avals[:n], *x_avals], "scan.body")
    outs = body.avals()
    ys = [ShapedArray((length, *a.shape), a.dtype) for a in outs[n:]]
    return {"body": body}, [body], [*joined(list(avals[:n]), outs[:n]), *ys]


# --- lowering and sparsity: rules of the staged equation ----------------------------------------


def _scan_lowering(ctx, *operands, body, length, reverse, n_consts=0, **params):
    """Staged: the loop in compiled code, the body written inline (where everything in
    it lowers); each step's ``y`` written into the stacked result."""
    if not isinstance(body, GraphFn):
        raise NotLowered("scan's body is not staged")
    n, split = body.n_carry, len(operands) - n_consts
    out_avals = ctx.out_avals
    carry = ctx.variables(out_avals[:n], operands[:n])
    xs, consts = operands[n:split], operands[split:]
    ys = [ctx.empty(aval) for aval in out_avals[n:]]
    with ctx.loop(length, reverse) as step:
        x_t = [ctx.at(x, step) for x in xs]
        new = inline_function(ctx, body, [*ctx.read(carry), *x_t], consts)
        for y, value in zip(ys, new[n:], strict=True):
            ctx.store_at(y, step, value)
        ctx.assign(carry, new[:n])
    return (*ctx.read(carry), *ys)


# A staged scan is unrolled for sparsity detection (each step reads its own slice of xs)
# up to this many equations in all; longer ones take every step's slice as one.
UNROLL_EQUATIONS = 20_000


@propagating
def _scan_sparsity(sets, operands, *, body, length, reverse, n_consts=0, **params):
    n, split = body.n_carry, len(sets) - n_consts
    carry, xs = list(sets[:n]), sets[n:split]
    rest = [sets[split + i] for i in body.picks]
    x_sizes = [shape_of_operand(x)[1:] for x in operands[n:split]]
    x_sizes = [int(np.prod(s)) for s in x_sizes]
    y_sizes = [v.aval.size for v in body.graph.outvars[n:]]
    if length * len(body.graph.eqns) <= UNROLL_EQUATIONS:
        ys: list = [None] * length
        for t in steps(length, reverse):
            x_t = [
                None if x is None else x.gather(np.arange(k) + t * k) for x, k in zip(xs, x_sizes)
            ]
            out = propagate(body.graph, [*carry, *x_t, *rest])
            carry, ys[t] = out[:n], out[n:]
        return [*carry, *(stacked_sets([y[j] for y in ys], k) for j, k in enumerate(y_sizes))]
    x_any = [
        apply_read(Groups(np.arange(k * length) % max(k, 1), np.arange(k)), x, k)
        for x, k in zip(xs, x_sizes)
    ]  # fmt: skip  (each step's slice, any step)
    carry, outs = fixed_point(body.graph, carry, [*x_any, *rest])
    return [
        *carry,
        *(
            None if y is None else y.gather(np.tile(np.arange(k), length))
            for y, k in zip(outs[n:], y_sizes)
        ),
    ]


# --- the staged regime: the body staged on one step, transformed as a graph ---------------------


def _inside_jit(interp: Interpreter, params: dict) -> bool:
    """Whether the scan is the staged regime's: a ``jit`` stages below this transform
    (which includes a transform of a jitted function, whose graph is transformed under a
    staging: ``compiler/call.py``) and the scan is not unrolled."""
    return staging_below(interp) and not params["unroll"]


# --- vmap ---------------------------------------------------------------------------------------


def scan_batch(interp: BatchInterpreter, prim: ScanPrimitive, args: tuple, params: dict):
    """vmap of a scan.  Staged: the body staged on one example and batched as a jitted
    graph is, then one scan a level down (``batched_scan``) instead of every step
    unrolled into the graph.  Eager: the steps at vmap's level."""
    if _inside_jit(interp, params):
        args, params = unclosed(args, params)
        values = [batched_parts(interp, a)[0] for a in args]
        n = params["body"].n_carry
        # a BatchedTensor's shape is one example's
        staged = staged_body(params["body"], args[:n], args[n:], library_of(values), interp)
        if staged is not None:
            return batched_scan(interp, prim, staged, args, params)
    return run_here(interp, prim, args, params)


# --- jvp ----------------------------------------------------------------------------------------


def scan_jvp(interp: JvpInterpreter, prim: ScanPrimitive, args: tuple, params: dict):
    """jvp of a scan.  Staged: one scan a level down carrying the tangents with the
    primals (``pushed_scan``).  Eager: the steps at jvp's level."""
    if _inside_jit(interp, params):
        args, params = unclosed(args, params)
        primals = [dual_parts(interp, a)[0] for a in args]
        n = params["body"].n_carry
        staged = staged_body(params["body"], primals[:n], primals[n:], library_of(primals),
                              interp)  # fmt: skip
        if staged is not None:
            return pushed_scan(interp, prim, staged, args, params)
    return run_here(interp, prim, args, params)


# --- grad and vjp -------------------------------------------------------------------------------


def scan_grad(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    """grad/vjp of a scan, one of three routes.  Staged: two scans, a forward one
    keeping residuals and a reversed one of the body's VJP (``two_scans``).  Eager with
    ``checkpoint=True``: one tape node recomputing the steps in the backward pass
    (``recomputed``).  Eager: the steps recorded like a Python loop.  The staged route
    gives way to the eager ones where the body closes over a value of a transform
    inside the grad, or nothing in it is differentiated; the checkpointed one to the
    plain loop where a step's outputs are values of such a transform."""
    args, params = unclosed(args, params)  # staged: the closed-over values as closures
    if params["length"] and recording(interp) and not interp.keep_all_residuals:
        if _inside_jit(interp, params):
            out = two_scans(interp, prim, args, params)
            if out is not None:
                return out
        if params["checkpoint"]:
            out = recomputed(interp, prim, args, params)
            if out is not None:
                return out
    return prim.impl(*args, **params)  # the steps, recorded like any Python loop


def scan_vjp(cts, ans, primals, params, argnums):
    """The VJP rule of the tape node ``scan_grad`` records (``params["route"]``): the
    reversed scan of the staged route, or the recomputation of the checkpointed one."""
    route = params.get("route")
    if route == "two scans":
        return reversed_scan(scan_p, cts, primals, params, argnums)
    if route == "recompute":
        return recomputed_vjp(cts, primals, params, argnums)
    raise RuleError(
        "scan's VJP rule runs on the tape nodes its reverse-mode method (scan_grad) records, "
        "not on a scan's own parameters: differentiate a scan by calling it under grad or "
        "vjp, and a transform of your own by running it at its level (docs/extending.md)."
    )


def _for_checkpoint(operands: list) -> list:
    """Where nothing passed to the scan is a value of the innermost transform and that
    transform is a grad, its values may still reach the steps through ``f``'s closure:
    lift one operand into it, so that its method for scan (above) sees the scan."""
    stack = current_interpreters()
    if not stack or not isinstance(stack[-1], GradInterpreter) or not operands:
        return operands
    top = stack[-1]
    if any(isinstance(x, Tracer) and x._interp.level >= top.level for x in operands):
        return operands
    return [lift(top, operands[0]), *operands[1:]]


# --- scan_p: every transform's one entry --------------------------------------------------------
# The implementation is _scan_impl (the loop in Python).  grad(jit(f)), jvp(jit(f)) and
# vmap(jit(f)) transform the jitted graph under a staging (compiler/call.py), so a scan
# staged by jit reaches the staged regime of the entries below, as inside a jit.

process.register(GradInterpreter, ScanPrimitive)(scan_grad)  # grad, vjp: three routes
scan_p.def_vjp(scan_vjp, packed=True)  # the backward pass of scan_grad's tape node
process.register(JvpInterpreter, ScanPrimitive)(scan_jvp)  # jvp, jacfwd, linearize
process.register(BatchInterpreter, ScanPrimitive)(scan_batch)  # vmap
process.register(ExplainInterpreter, ScanPrimitive)(run_here)  # explain: the steps
process.register(StagingInterpreter, ScanPrimitive)(scan_stage)  # jit, make_graph
scan_p.def_lowering(Emitter(_scan_lowering))  # jit's compiling tier
scan_p.def_sparsity(_scan_sparsity)  # jacobian_sparsity, jacobian(..., sparsity="auto")
process.register(JetInterpreter, ScanPrimitive)(run_here)  # jet, the operators: the steps
