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

The routes, by transform:

- no tracer: the loop in Python; traced ``xs`` are sliced by one primitive
  (``slices_p``), whose VJP stacks the steps' cotangents (``_scan_impl``);
- staging (``jit``, ``make_graph``): the body staged once, one equation
  (``scan_stage``); ``unroll=True``: every step recorded (the eager regime);
- lowering (``jit``'s compiling tier): the loop in compiled code, the body inline
  (``_scan_lowering``); sparsity detection: ``_scan_sparsity``;
- vmap (``scan_batch``): staged, the body batched as a jitted graph is, one scan, carry
  on axis 0 and ``xs`` on axis 1 (``_batched_scan``); eager, the steps at vmap's level;
- jvp (``scan_jvp``): staged, one scan carrying the tangents, ``xs``' tangents as more
  ``xs`` (``_pushed_scan``); eager, the steps at jvp's level;
- grad, vjp (``scan_grad``): staged, two scans, JAX's transposition: the body's VJP
  staged as a forward and a backward graph, a forward scan stacking each step's
  residuals (with ``checkpoint=True`` the carries) and a reversed scan of the backward
  graph (``_two_scans``); eager with ``checkpoint=True``, one tape node that keeps the
  carry each step started from and recomputes the steps in the backward pass
  (``_recomputed``); eager, the steps recorded like a Python loop.  The node either
  records is ``scan_p``'s, and its VJP rule (``scan_vjp``) runs the reversed scan or
  the recomputation;
- explain: the steps at its level (``run_here``).

**The checkpointed scan's node** (``_recomputed``): each step runs at the grad's own
level on fresh inputs, so its primitives form a small tape of their own; whatever they
reach that was recorded before the step (values ``f`` closes over, such as weights) is
found on that tape, becomes an input of the scan's node, and receives the cotangents
the steps send it.  During the backward pass the steps run again under the same
interpreter, recording again for that time (``reverse.recording_again``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff.compiler.graph_transforms import batch_graph, vjp_graphs
from autodiff.control.common import (
    CARRY_HINT,
    ControlFlowPrimitive,
    GraphFn,
    check_like,
    inline_function,
    is_static_int,
    leaves_of,
    names_of,
    run_here,
    staged_if_jitting,
)
from autodiff.control.subgraphs import (
    StagedFunction,
    batch_axis_at,
    batched_parts,
    carry_tangents,
    closes_over_above,
    dual_parts,
    joined,
    reaching,
    sliced,
    stage_control,
    unclosed,
    unzip,
)
from autodiff.core.args import a_type, check_callable, check_flag
from autodiff.core.arrays import array_like, dtype_of, is_float, library_of, shape_of
from autodiff.core.graph import ShapedArray, aval_of
from autodiff.core.index_sets import Groups, apply_read, propagating
from autodiff.core.lowering import Emitter, NotLowered
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.rule_forms import linear_taylor
from autodiff.core.stack import Interpreter, current_interpreters
from autodiff.core.tracer import Tracer
from autodiff.errors import RuleError, TransformTypeError, TransformValueError
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter
from autodiff.interpreters.reverse import (
    GradInterpreter,
    GradTensor,
    no_grad_level,
    recording,
    recording_again,
    unpack,
)
from autodiff.interpreters.sparsity import fixed_point, propagate, stacked_sets
from autodiff.interpreters.staging import (
    Staged,
    StagingInterpreter,
    eval_graph,
    stage,
    staging_below,
)
from autodiff.interpreters.tape import Dropped, Node, backward
from autodiff.interpreters.taylor import JetInterpreter
from autodiff.rules import creation as _cre
from autodiff.rules._sparsity import moves, shape_of_operand
from autodiff.rules.compositions import moveaxis
from autodiff.rules.shape import stack

__all__ = ["ScanPrimitive", "run_scan", "scan", "scan_p", "slices_p"]


class ScanPrimitive(ControlFlowPrimitive):
    """``scan`` (the module docstring says how each transform treats it)."""

    __slots__ = ()


class ScanBody:
    """``f`` on flat leaves, ``(*carry, *x) -> (*carry, *y)``, checking what it returns:
    a pair, a carry like the one it was given (unless ``carry_names`` is None: the
    caller checks it), and ``y`` like the last step's."""

    __slots__ = ("carry_names", "carry_tree", "f", "n_carry", "xs_tree", "y_names", "y_tree",
                 "y_types")  # fmt: skip

    def __init__(self, f: Callable, carry_tree: Any, carry_names: list | None,
                 xs_tree: Any) -> None:  # fmt: skip
        self.f, self.xs_tree = f, xs_tree
        self.carry_tree, self.carry_names = carry_tree, carry_names
        self.n_carry = carry_tree.num_leaves
        self.y_tree: Any = None
        self.y_types: list = []
        self.y_names: list = []

    def __call__(self, *leaves: Any) -> tuple:
        carry, x = leaves[: self.n_carry], leaves[self.n_carry :]
        out = self.f(optree.tree_unflatten(self.carry_tree, list(carry)),
                     optree.tree_unflatten(self.xs_tree, list(x)))  # fmt: skip
        if not (isinstance(out, tuple) and len(out) == 2):
            got = f"a tuple of length {len(out)}" if isinstance(out, tuple) else a_type(out)
            raise TransformTypeError(
                f"scan: f must return a pair (carry, y), got {got}. Return (carry, None) "
                f"when there is nothing to stack."
            )
        new, c_tree = optree.tree_flatten(out[0])
        if self.carry_names is not None:
            check_like(new, c_tree, carry, self.carry_tree, self.carry_names,
                       "scan: the carry f returned", "the carry it was given",
                       CARRY_HINT)  # fmt: skip
        y, y_tree = optree.tree_flatten(out[1])
        if self.y_tree is None:
            self.y_tree, self.y_names = y_tree, names_of(y_tree, "y")
        else:
            check_like(y, y_tree, self.y_types, self.y_tree, self.y_names,
                       "scan: the y f returned", "the y of the step before",
                       "every step's y must have the same structure, shapes and dtypes, "
                       "to be stacked.")  # fmt: skip
        self.y_types = y
        return (*new, *y)


def _steps(length: int, reverse: bool) -> range:
    return range(length - 1, -1, -1) if reverse else range(length)


def _stacked(ys: list, body: ScanBody, carry: Sequence, xs: Sequence) -> tuple:
    """The steps' ``y`` leaves, each stacked along a new first axis."""
    if not ys:  # no step ran: run f once on stand-ins to learn the shapes of y
        x = [np.zeros(shape_of(v)[1:], dtype_of(v), like=array_like(v)) for v in xs]
        out = body(*carry, *x)[len(carry) :]
        return tuple(np.zeros((0, *shape_of(v)), dtype_of(v), like=array_like(v)) for v in out)
    return tuple(map(_stack, zip(*ys)))


def _stack(column: tuple) -> Any:
    """One y leaf of every step, stacked; Python numbers take the others' dtype."""
    if any(isinstance(y, (bool, int, float, complex)) for y in column):
        dtype = np.result_type(*(y if isinstance(y, (bool, int, float, complex)) else dtype_of(y)
                                 for y in column))  # fmt: skip
        return stack(list(column), dtype=dtype)
    return stack(list(column))


def _scan_impl(*operands: Any, body: ScanBody, length: int, reverse: bool, checkpoint: bool,
               unroll: bool) -> tuple:  # fmt: skip
    n = body.n_carry
    carry, xs = operands[:n], operands[n:]
    # traced xs are sliced by one primitive, whose VJP stacks the steps' cotangents: a
    # slice x[t] each would send a cotangent of all of xs back from every step
    slices = [slices_p.bind(x) if isinstance(x, Tracer) and length else x for x in xs]
    ys: list = [None] * length
    for t in _steps(length, reverse):
        out = body(*carry, *(x[t] for x in slices))
        carry, ys[t] = out[:n], out[n:]
    return (*carry, *_stacked(ys, body, carry, xs))


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


def bind_scan(step: Callable, carry: list, xs: list, length: int, reverse: bool,
              checkpoint: bool = False) -> tuple:  # fmt: skip
    """``scan(step, carry, xs)`` on flat lists one level down (``step(c, x) -> (c, y)``
    with tuples), reaching the staging even where every operand is a constant; the
    final carry and the stacked ``y`` leaves."""
    operands = reaching([*carry, *xs])
    body = ScanBody(step, optree.tree_structure(tuple(carry)), None,
                 optree.tree_structure(tuple(xs)))  # fmt: skip
    outs = scan_p.bind(*operands, body=body, length=length, reverse=reverse,
                       checkpoint=checkpoint, unroll=False)  # fmt: skip
    return outs[: len(carry)], outs[len(carry) :]


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
        for t in _steps(length, reverse):
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


def _staged_body(fn: Callable, carry: Sequence, xs: Sequence, like: Any,
                 interp: Interpreter) -> Staged | None:  # fmt: skip
    """The body staged on the carry and one slice of ``xs``; None where it closes over a
    value of a transform running inside ``interp``'s (that transform's level, nearer the
    body, then runs the steps: the eager regime)."""
    avals = [*map(aval_of, carry), *map(sliced, xs)]
    staged = stage(fn, avals, transform="jit", name="scan.body", like=like)
    return None if closes_over_above(staged.captured, interp) else staged


# --- vmap ---------------------------------------------------------------------------------------


def scan_batch(interp: BatchInterpreter, prim: ScanPrimitive, args: tuple, params: dict):
    """vmap of a scan.  Staged: the body staged on one example and batched as a jitted
    graph is, then one scan a level down (``_batched_scan``) instead of every step
    unrolled into the graph.  Eager: the steps at vmap's level."""
    if _inside_jit(interp, params):
        args, params = unclosed(args, params)
        values = [batched_parts(interp, a)[0] for a in args]
        n = params["body"].n_carry
        # a BatchedTensor's shape is one example's
        staged = _staged_body(params["body"], args[:n], args[n:], library_of(values), interp)
        if staged is not None:
            return _batched_scan(interp, staged, args, params)
    return run_here(interp, prim, args, params)


def _batched_scan(interp: BatchInterpreter, staged: Staged, args: tuple, params: dict) -> tuple:
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

    final, ys = bind_scan(step, carry, xs, length, params["reverse"], params["checkpoint"])
    return (*(BatchedTensor(interp, c, 0) for c in final),
            *(BatchedTensor(interp, y, 1) for y in ys))  # fmt: skip


# --- jvp ----------------------------------------------------------------------------------------


def scan_jvp(interp: JvpInterpreter, prim: ScanPrimitive, args: tuple, params: dict):
    """jvp of a scan.  Staged: one scan a level down carrying the tangents with the
    primals (``_pushed_scan``).  Eager: the steps at jvp's level."""
    if _inside_jit(interp, params):
        args, params = unclosed(args, params)
        primals = [dual_parts(interp, a)[0] for a in args]
        n = params["body"].n_carry
        staged = _staged_body(params["body"], primals[:n], primals[n:], library_of(primals),
                              interp)  # fmt: skip
        if staged is not None:
            return _pushed_scan(interp, staged, args, params)
    return run_here(interp, prim, args, params)


def _pushed_scan(interp: JvpInterpreter, staged: Staged, args: tuple, params: dict) -> tuple:
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

    final, ys = bind_scan(step, [*primals[:n], *carry_t], [*primals[n:], *x_tangents], length,
                          params["reverse"], params["checkpoint"])  # fmt: skip
    carry_moving, y_moving = iter(final[n:]), iter(ys[n_out - n :])
    assert len(final) == n + k
    carry = [DualTensor(interp, o, next(carry_moving)) if h else o
             for o, h in zip(final[:n], has, strict=True)]  # fmt: skip
    y_out = [DualTensor(interp, o, next(y_moving)) if h else o
             for o, h in zip(ys[: n_out - n], jg.out_has_tangent[n:], strict=True)]  # fmt: skip
    return (*carry, *y_out)


# --- grad and vjp -------------------------------------------------------------------------------


def scan_grad(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    """grad/vjp of a scan, one of three routes.  Staged: two scans, a forward one
    keeping residuals and a reversed one of the body's VJP (``_two_scans``).  Eager with
    ``checkpoint=True``: one tape node recomputing the steps in the backward pass
    (``_recomputed``).  Eager: the steps recorded like a Python loop.  The staged route
    gives way to the eager ones where the body closes over a value of a transform
    inside the grad, or nothing in it is differentiated; the checkpointed one to the
    plain loop where a step's outputs are values of such a transform."""
    args, params = unclosed(args, params)  # staged: the closed-over values as closures
    if params["length"] and recording(interp) and not interp.keep_all_residuals:
        if _inside_jit(interp, params):
            out = _two_scans(interp, args, params)
            if out is not None:
                return out
        if params["checkpoint"]:
            out = _recomputed(interp, args, params)
            if out is not None:
                return out
    return prim.impl(*args, **params)  # the steps, recorded like any Python loop


def scan_vjp(cts, ans, primals, params, argnums):
    """The VJP rule of the tape node ``scan_grad`` records (``params["route"]``): the
    reversed scan of the staged route, or the recomputation of the checkpointed one."""
    route = params.get("route")
    if route == "two scans":
        return _reversed_scan(cts, primals, params, argnums)
    if route == "recompute":
        return _recomputed_vjp(cts, primals, params, argnums)
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


# --- grad, staged: two scans --------------------------------------------------------------------


def _two_scans(interp: GradInterpreter, args: tuple, params: dict) -> tuple | None:
    """The forward scan now, keeping each step's residuals (or carries) for the
    reversed scan of ``scan_vjp``; None where the eager routes must run instead."""
    values, parents, _ = unpack(interp, args)
    fn, length, reverse = params["body"], params["length"], params["reverse"]
    n = fn.n_carry
    carry, xs = list(values[:n]), list(values[n:])
    like = library_of(values)
    staged = _staged_body(fn, carry, xs, like, interp)
    if staged is None:
        return None  # a transform inside the grad: its level runs the steps
    consts, const_parents = [], []
    for k, c in enumerate(staged.captured):
        if isinstance(c, GradTensor) and c._interp is interp:
            consts.append(c.value)
            if c.node is not None:
                const_parents.append((k, c.node, c.index))
        else:
            consts.append(c)
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

    final, stacked = bind_scan(forward, carry, xs, length, reverse)
    n_y = vg.n_out - n
    outs = (*final, *stacked[:n_y])
    saved = list(stacked[n_y:])
    node_params = {"route": "two scans", "vg": vg, "saved": saved, "consts": consts, "xs": xs,
                   "n": n, "diff": (diff_carry, diff_xs, diff_consts), "length": length,
                   "reverse": reverse, "checkpoint": checkpoint}  # fmt: skip
    all_parents = [*parents, *((len(values) + k, node, index) for k, node, index in const_parents)]
    node = Node(scan_p, node_params, [*values, *consts], outs, all_parents)
    return tuple(GradTensor(interp, o, node, i) if is_float(o) else o for i, o in enumerate(outs))


def _reversed_scan(cts: tuple, primals: list, params: dict, argnums: list) -> list:
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


# --- grad, eager with checkpoint=True: one node, the steps recomputed ----------------------------


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


def _closed_over(interp: GradInterpreter, outs: tuple, start: int, found: dict) -> None:
    """Add to ``found`` the nodes recorded before ``start`` that the step's outputs
    depend on (the values ``f`` closes over), with a stand-in for each value."""
    todo = []
    for o in outs:
        if isinstance(o, GradTensor) and o._interp is interp and o.node is not None:
            if o.node.seq < start:  # f returned a closed-over value itself
                found.setdefault((id(o.node), o.index), (o.node, o.index, Dropped(scan_p, 0, o)))
            else:
                todo.append(o.node)
    seen = set()
    while todo:
        node = todo.pop()
        for argnum, parent, index in node.parents:
            if parent.seq < start:
                key = (id(parent), index)
                if key not in found:
                    found[key] = (parent, index, Dropped(scan_p, argnum, node.primals[argnum]))
            elif id(parent) not in seen:
                seen.add(id(parent))
                todo.append(parent)


def _recomputed(interp: GradInterpreter, args: tuple, params: dict) -> tuple | None:
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
    for t in _steps(length, reverse):
        saved[t] = carry
        start = _mark()
        x = [_fresh(interp, v[t]) if j in traced_xs else v[t] for j, v in enumerate(xs)]
        outs = body(*(_fresh(interp, c) for c in carry), *x)
        if _outside(interp, outs):
            return None
        _closed_over(interp, outs, start, closures)
        carry = tuple(_value(interp, o) for o in outs[:n])
        ys[t] = tuple(_value(interp, o) for o in outs[n:])
    outs = (*carry, *_stacked(ys, body, carry, xs))
    found = list(closures.values())
    parents += [(len(values) + k, node, index) for k, (node, index, _) in enumerate(found)]
    if not parents:
        return outs
    residuals = dict(params, route="recompute", saved=saved, closures=found, interp=interp,
                     no_grad=no_grad_level())  # fmt: skip
    primals = [*values, *(stand_in for _, _, stand_in in found)]
    node = Node(scan_p, residuals, primals, outs, parents)
    return tuple(GradTensor(interp, o, node, i) for i, o in enumerate(outs))


def _recomputed_vjp(cts: tuple, primals: list, params: dict, argnums: list) -> list:
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
    for t in reversed(_steps(length, params["reverse"])):
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
            steps = ct_xs[i - n]
            if all(c is None for c in steps):
                out.append(None)
            else:
                x = xs[i - n]
                out.append(stack([np.zeros_like(x[t]) if c is None else c
                                  for t, c in enumerate(steps)]))  # fmt: skip
        else:
            out.append(ct_closures[i - n - len(xs)])
    return out


def _ct_of(got: dict, carry: Any, value: Any) -> Any:
    ct = got.get(carry.node) if isinstance(carry, GradTensor) else None
    return np.zeros_like(value) if ct is None else ct


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
