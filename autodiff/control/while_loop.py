"""``while_loop``: the primitive ``while_loop_p`` and every transform's entry for it.

The registration block at the end of this module lists each transform's one entry;
where a transform has two regimes (eager, and staged inside a ``jit``), the entry
chooses between them in its first lines.  The routes, by transform (the staged ones of
vmap, jvp and Taylor mode in ``while_loop_staged.py``):

- no tracer: the loop in Python (``_while_impl``);
- grad, jvp, vmap, explain, jet: the loop at the transform's own level; grad records the
  iterations that ran (JAX's reverse mode refuses); under vmap it runs while any
  example runs, finished examples frozen by ``where`` (``common.run_here``);
- a transform of a jitted function holding a while_loop transforms its graph
  (``compiler/call.py``): jvp and vmap take the staged routes below (one loop, compiled);
  grad, where it differentiates the carry, cannot be staged (``_decided`` raises) and
  evaluates the graph at its own level: the eager route, iterations recorded;
- staging (``jit``, ``make_graph``): ``cond_fun`` and ``body_fun`` staged once, one
  equation (``while_loop_stage``); lowering: the loop in compiled code with both
  functions inline (``_while_lowering``); sparsity detection: ``_while_sparsity``;
- vmap inside a jit (``while_loop_batch``): the functions staged on one example and
  batched as a jitted graph is, then one batched loop a level down (``batched_loop``);
- jvp inside a jit (``while_loop_jvp``): one loop a level down carrying the tangents; a
  carry leaf gains a tangent wherever the body gives it one, found by a fixed point
  before the loop (``pushed_loop``);
- Taylor mode inside a jit (``while_loop_jet``): one loop a level down carrying every
  floating carry's coefficients, the body pushed through Taylor mode at each step
  (``jet_loop``); under a differential operator's collapsed mode it refuses;
- grad inside a jit (``while_loop_grad``): where the carry holds nothing that grad
  differentiates (a ``custom_vjp``'s ``fwd`` solving by iteration, as JAX's fixed-point
  recipe does), the loop is staged one level down and its result is a constant for the
  grad; else ``ConcretizationError``, since the trip count is not known while staging,
  as in JAX's reverse mode (``_decided``).

``fori_loop`` with traced bounds is a ``while_loop`` (``fori_loop.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff.control.common import (
    ControlFlowPrimitive,
    FlatFn,
    GraphFn,
    bottom,
    derivative_where,
    inline_function,
    run_here,
    staged_if_jitting,
)
from autodiff.control.leaves import CARRY_HINT, check_like, check_predicate, leaves_of
from autodiff.control.subgraphs import StagedFunction, joined, reaching, stage_control, unclosed
from autodiff.control.while_loop_staged import batched_loop, jet_loop, pushed_loop
from autodiff.core.args import check_callable
from autodiff.core.index_sets import propagating
from autodiff.core.lowering import Emitter, NotLowered
from autodiff.core.primitive import process
from autodiff.core.tracer import Tracer
from autodiff.errors import ConcretizationError, TransformTypeError
from autodiff.interpreters.batching import BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.forward import JvpInterpreter
from autodiff.interpreters.reverse import GradInterpreter, unpack
from autodiff.interpreters.sparsity import fixed_point
from autodiff.interpreters.staging import StagingInterpreter, staging_below
from autodiff.interpreters.taylor import JetInterpreter
from autodiff.rules.elementwise import where

__all__ = ["WhileLoopPrimitive", "run_while", "while_loop", "while_loop_p"]


class WhileLoopPrimitive(ControlFlowPrimitive):
    """``while_loop`` (the module docstring says how each transform treats it)."""

    __slots__ = ()


def _decided(pred: Any) -> bool | None:
    """``bool(pred)`` when every example agrees (or nothing is batched), None when the
    examples of a batch differ; False for a batch of no examples."""
    if not isinstance(pred, Tracer):
        return bool(pred)
    values = bottom(pred)
    if values is None:
        raise ConcretizationError(
            "while_loop: its condition is staged by jit, under reverse mode running inside "
            "the jit (jit(grad(f))), which would have to record a number of iterations not "
            "known while staging. Put grad outside the jit instead (grad(jit(f)): the loop "
            "is staged once, grad runs it), or loop a fixed number of times with "
            "fori_loop(0, n, ...) or scan; vmap and jvp inside a jit stage the loop."
        )
    if not bool(np.any(values)):
        return False
    return True if bool(np.all(values)) else None


def _while_impl(*carry: Any, cond_fun: FlatFn, body_fun: FlatFn, tree: Any,
                names: list | None, who: str) -> tuple:  # fmt: skip
    while True:
        pred = cond_fun(*carry)
        if not cond_fun.out_tree.is_leaf():
            raise TransformTypeError(
                f"{who}: cond_fun must return a boolean scalar, got a value structured "
                f"as {cond_fun.out_tree}."
            )
        pred = pred[0]
        check_predicate(pred, f"{who}: the value cond_fun returns", "bool")
        running = _decided(pred)
        if running is False:
            return tuple(carry)
        # some examples done: the body runs on theirs too, its derivative cut there
        new = body_fun(*(carry if running else derivative_where(pred, carry)))
        if names is not None:
            check_like(new, body_fun.out_tree, carry, tree, names,
                       f"{who}: the value body_fun returned", "the value it was given",
                       CARRY_HINT)  # fmt: skip
        if running is None:  # some examples are done: they keep their carry
            new = tuple(n if n is c else where(pred, n, c) for n, c in zip(new, carry))
        carry = new


while_loop_p = WhileLoopPrimitive("while_loop", _while_impl, multiple_results=True)


def _while_lowering(ctx, *operands, cond_fun, body_fun, n_consts=0, **params):
    """Staged: the loop in compiled code, ``cond_fun`` and ``body_fun`` written inline
    (where everything in them lowers; else the loop stays Python's)."""
    if not isinstance(cond_fun, GraphFn) or not isinstance(body_fun, GraphFn):
        raise NotLowered("while_loop's functions are not staged")
    split = len(operands) - n_consts
    consts = operands[split:]
    carry = ctx.variables(ctx.out_avals, operands[:split])
    with ctx.while_loop() as exit_unless:
        (running,) = inline_function(ctx, cond_fun, ctx.read(carry), consts)
        exit_unless(running)
        ctx.assign(carry, inline_function(ctx, body_fun, ctx.read(carry), consts))
    return tuple(ctx.read(carry))


@propagating
def _while_sparsity(sets, operands, *, body_fun, n_consts=0, **params):
    """Staged: the carries after any number of iterations (the condition passes no
    derivative)."""
    carry, consts = sets[: len(sets) - n_consts], sets[len(sets) - n_consts :]
    return fixed_point(body_fun.graph, carry, [consts[i] for i in body_fun.picks])[0]


def run_while(who: str, cond_fun: Callable, body_fun: Callable, init_val: Any,
           check_carry: bool = True) -> Any:  # fmt: skip
    """``while_loop``; ``check_carry=False``: the caller's body checks the carry itself."""
    leaves, tree, names = leaves_of(init_val, "init_val", who)
    called = optree.tree_structure((init_val,))  # the functions take the carry as one argument
    outs = while_loop_p.bind(*staged_if_jitting(leaves), cond_fun=FlatFn(cond_fun, called),
                             body_fun=FlatFn(body_fun, called), tree=tree,
                             names=names if check_carry else None, who=who)  # fmt: skip
    return optree.tree_unflatten(tree, list(outs))


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """``val = init_val; while cond_fun(val): val = body_fun(val)`` (JAX's ``lax.while_loop``).

    ``cond_fun`` returns a boolean scalar; ``body_fun`` returns a value with the
    structure, shapes and dtypes of ``init_val`` (a pytree of arrays).  Reverse mode
    differentiates through the iterations that ran (JAX's reverse mode refuses a
    while loop; this one runs eagerly and records them).  Under ``vmap`` with a
    condition that differs per example, the loop runs until every example is done,
    and finished examples keep their value.

    >>> import numpy as np, autodiff
    >>> def newton_sqrt(a):  # x <- (x + a / x) / 2 until x * x is close to a
    ...     return autodiff.while_loop(lambda x: abs(x * x - a) > 1e-12,
    ...                                lambda x: (x + a / x) / 2, a)
    >>> autodiff.vmap(newton_sqrt)(np.array([4.0, 9.0, 1e6]))
    array([   2.,    3., 1000.])
    >>> round(float(autodiff.grad(newton_sqrt)(4.0)), 9)  # d sqrt(a) / da = 1 / (2 sqrt(a))
    0.25
    """
    check_callable(cond_fun, "while_loop (cond_fun)")
    check_callable(body_fun, "while_loop (body_fun)")
    return run_while("while_loop", cond_fun, body_fun, init_val)


# --- staging: cond_fun and body_fun staged once -------------------------------------------------


def while_loop_stage(interp: StagingInterpreter, prim: WhileLoopPrimitive, args: tuple,
                     params: dict):  # fmt: skip
    """Staging (``jit``, ``make_graph``): ``cond_fun`` and ``body_fun`` staged once, one
    equation."""
    return stage_control(interp, prim, args, params, _stage_functions)


def _stage_functions(interp, args, avals, params) -> tuple[dict, list, list]:
    """``cond_fun`` and ``body_fun`` staged on the carry's avals, their types checked."""
    who, tree, names = params["who"], params["tree"], params["names"]
    cond = StagedFunction(interp, params["cond_fun"], avals, f"{who}.cond_fun")
    if not cond.fn.out_tree.is_leaf():
        raise TransformTypeError(f"{who}: cond_fun must return a boolean scalar, got a "
                                 f"value structured as {cond.fn.out_tree}.")  # fmt: skip
    check_predicate(cond.outs[0], f"{who}: the value cond_fun returns", "bool")
    body = StagedFunction(interp, params["body_fun"], avals, f"{who}.body_fun")
    if names is not None:
        check_like(body.outs, body.fn.out_tree, args, tree, names,
                   f"{who}: the value body_fun returned", "the value it was given",
                   CARRY_HINT)  # fmt: skip
    return (
        {"cond_fun": cond, "body_fun": body, "names": None},
        [cond, body],
        joined(list(avals), body.avals()),
    )


# --- grad and vjp -------------------------------------------------------------------------------


def while_loop_grad(interp: GradInterpreter, prim: WhileLoopPrimitive, args: tuple,
                    params: dict):  # fmt: skip
    """grad/vjp of a while_loop.  Eager: the iterations that ran, recorded at grad's
    level.  Staged (inside a jit), a loop whose carry has no derivative at this level (a
    ``custom_vjp``'s ``fwd``, which the grad does not differentiate): staged one level
    down, its result a constant here.  Where its functions close over values this grad
    differentiates, the staging hands it back with them as operands, and it runs here
    (and raises, as the trip count is unknown while staging: ``_decided``)."""
    values, parents, _ = unpack(interp, args)
    if staging_below(interp) and not parents:
        return prim.bind(*reaching(list(values)), **params)
    return run_here(interp, prim, args, params)


# --- vmap and jvp: inside a jit one staged loop -------------------------------------------------


def while_loop_batch(interp: BatchInterpreter, prim: WhileLoopPrimitive, args: tuple,
                     params: dict):  # fmt: skip
    """vmap of a while_loop.  Staged: both functions staged on one example and batched
    as a jitted graph is, then one loop a level down running while any example runs
    (``batched_loop``).  Eager: the loop at vmap's level, finished examples frozen."""
    if staging_below(interp):
        return batched_loop(interp, prim, *unclosed(args, params))
    return run_here(interp, prim, args, params)


def while_loop_jvp(interp: JvpInterpreter, prim: WhileLoopPrimitive, args: tuple,
                   params: dict):  # fmt: skip
    """jvp of a while_loop.  Staged: one loop a level down carrying the tangents; a carry
    leaf gains a tangent wherever the body gives it one, found by a fixed point before
    the loop (``pushed_loop``).  Eager: the loop at jvp's level."""
    if staging_below(interp):
        return pushed_loop(interp, prim, *unclosed(args, params))
    return run_here(interp, prim, args, params)


def while_loop_jet(interp: JetInterpreter, prim: WhileLoopPrimitive, args: tuple,
                   params: dict):  # fmt: skip
    """Taylor mode of a while_loop.  Staged: one loop a level down carrying each floating
    carry's K coefficients (zeros where it has none yet), its body pushed through Taylor
    mode at every step (``jet_loop``).  Eager: the loop at jet's level."""
    if not staging_below(interp):
        return run_here(interp, prim, args, params)
    if interp.collapse is not None:
        raise ConcretizationError(
            f"{params['who']}: its condition is staged by jit, under a differential operator "
            f"running inside the jit (collapsed Taylor mode), whose directions a staged loop "
            f"cannot carry. Put the jit inside the operator (laplacian(jit(f))), or loop a "
            f"fixed number of times with fori_loop(0, n, ...) or scan."
        )
    return jet_loop(interp, prim, *unclosed(args, params))


# --- while_loop_p: every transform's one entry --------------------------------------------------
# The implementation is _while_impl (the loop in Python; under vmap, while any example
# runs).  A transform of a jitted function holding a while_loop transforms its graph
# (compiler/call.py), through the staged regime of the entries below; grad of a carry
# that cannot be staged evaluates the graph at grad's level, the eager regime.

process.register(GradInterpreter, WhileLoopPrimitive)(while_loop_grad)  # grad, vjp
process.register(JvpInterpreter, WhileLoopPrimitive)(while_loop_jvp)  # jvp, jacfwd
process.register(BatchInterpreter, WhileLoopPrimitive)(while_loop_batch)  # vmap
process.register(ExplainInterpreter, WhileLoopPrimitive)(run_here)  # explain: the iterations
process.register(StagingInterpreter, WhileLoopPrimitive)(while_loop_stage)  # jit, make_graph
process.register(JetInterpreter, WhileLoopPrimitive)(while_loop_jet)  # jet, the operators
while_loop_p.def_lowering(Emitter(_while_lowering))  # jit's compiling tier
while_loop_p.def_sparsity(_while_sparsity)  # jacobian_sparsity
