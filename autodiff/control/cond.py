"""``cond`` and ``switch``: one primitive, ``cond_p``, and every transform's entry for it.

``switch(index, branches, *operands)`` chooses a branch by an integer, ``cond(pred,
true_fun, false_fun, *operands)`` by a boolean (``false_fun`` is branch 0).  The
registration block at the end of this module lists each transform's one entry.  The
routes, by transform:

- no tracer: runs the chosen branch (``_cond_impl``);
- grad, jvp, vmap, explain: run the branches some example takes at their own level,
  on their tracers; where a batch's examples disagree, ``where`` selects per example
  (``common.run_here``);
- staging (``jit``, ``make_graph``): every branch staged once, all type-checked, one
  equation (``cond_stage``); lowering: an ``if``/``elif`` with every branch inline
  (``_cond_lowering``); sparsity detection: ``_cond_sparsity``;
- jvp inside a jit, or of a jitted function (``cond_jvp``; the index has no values): a
  cond of the branches' JVP graphs, so only the taken branch runs, as eagerly
  (``cond_staged.pushed_cond``);
- vmap inside a jit, or of a jitted function (``cond_batch``): an unbatched index, a cond
  of the branches' batched graphs (``cond_staged.batched_cond``); a batched one, every
  branch runs at vmap's level and ``where`` selects per example, as JAX's ``vmap`` does
  (``common.run_here``);
- grad inside a jit, or of a jitted function (``cond_grad``): a forward ``cond``
  returning the outputs and the taken branch's residuals, and one tape node,
  ``cond_p``'s, whose VJP rule (``cond_vjp``) is a backward ``cond`` of the branches'
  VJPs, so only the taken branch runs (``cond_staged.two_conds``, ``backward_cond``).

The staged routes, and the branches staged once that staging records, live in
``cond_staged.py``; this module holds the primitive, its public functions, each
transform's entry (which chooses the route) and the registration block.  A transform
of a jitted function transforms its graph (``compiler/call.py``), so the staged routes
are theirs too: ``grad(jit(f))``, ``jvp(jit(f))`` and ``vmap(jit(f))`` of a function
holding a cond run compiled graphs.

Grad inside a jit must not select: a branch not taken would be differentiated too,
and a NaN there (the ``sqrt`` of a negative number in a branch that guards against
it) would reach the gradient through ``0 * nan``.  So each branch is staged once and
its VJP staged as a forward and a backward graph (``vjp_graphs``); every branch
returns a slot for every branch's residuals, zeros in the others', so the branches
agree in type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from autodiff.control.cond_staged import (
    backward_cond,
    batched_cond,
    pushed_cond,
    stage_branches,
    staged_index,
    two_conds,
)
from autodiff.control.leaves import check_like, check_predicate, leaves_of, names_of, output_types
from autodiff.control.subgraphs import batched_parts, stage_control, unclosed
from autodiff.core.args import a_type, check_callable
from autodiff.core.arrays import dtype_of
from autodiff.core.index_sets import propagating
from autodiff.core.lowering import Emitter, NotLowered
from autodiff.core.primitive import Primitive, process
from autodiff.core.tracer import Tracer
from autodiff.errors import RuleError, TransformTypeError
from autodiff.interpreters.batching import BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.forward import JvpInterpreter
from autodiff.interpreters.reverse import GradInterpreter, GradTensor, recording
from autodiff.interpreters.sparsity import propagate, union
from autodiff.interpreters.staging import StagingInterpreter, staging_below
from autodiff.interpreters.taylor import JetInterpreter
from autodiff.rules import elementwise as _elt
from autodiff.rules.compositions import clip
from autodiff.rules.elementwise import equal, where

__all__ = ["CondPrimitive", "cond", "cond_p", "switch"]


class CondPrimitive(ControlFlowPrimitive):
    """``cond`` and ``switch`` (the module docstring says how each transform treats it)."""

    __slots__ = ()


def _taken(index: Any, n: int) -> list[int]:
    """The branches some example takes (``index`` clamped to [0, n - 1]), sorted; for
    a batch of no examples the first branch (which gives the outputs' types); every
    branch where the index is staged (then ``where`` selects, as JAX's ``cond`` does
    under ``vmap``)."""
    if not isinstance(index, Tracer):
        return [min(max(int(index), 0), n - 1)]
    values = bottom(index)
    if values is None:
        return list(range(n))
    if np.ndim(values) == 0:
        return [min(max(int(values), 0), n - 1)]
    return sorted({min(max(int(v), 0), n - 1) for v in np.unique(values)}) or [0]


def _cond_impl(index: Any, *operands: Any, branches: tuple, names: tuple, who: str) -> tuple:
    taken = _taken(index, len(branches))
    if len(taken) == 1:
        outs = {taken[0]: branches[taken[0]](*operands)}
    else:  # each branch on operands that carry no derivative where it is not taken
        outs = {b: branches[b](*derivative_where(_takes(index, b, len(branches)), operands))
                for b in taken}  # fmt: skip
    first = taken[0]
    ref_tree = branches[first].out_tree
    ref_names = names_of(ref_tree, "output")
    hint = "every branch must return the same structure, shapes and dtypes."
    for b, branch in enumerate(branches):
        # a branch that did not run: its types, where they can be known without running it
        got = (branch.out_tree, outs[b]) if b in outs else output_types(branch, operands)
        if got is not None and b != first:
            check_like(got[1], got[0], outs[first], ref_tree, ref_names,
                       f"{who}: the output of {names[b]}", f"the output of {names[first]}",
                       hint)  # fmt: skip
    if len(taken) == 1:
        return outs[first]
    if dtype_of(index).kind == "b":  # cond: one select
        return tuple(where(index, t, f) for t, f in zip(outs[1], outs[0]))
    index = clip(index, 0, len(branches) - 1)
    chosen = list(outs[taken[-1]])
    for b in reversed(taken[:-1]):
        chosen = [where(equal(index, b), o, c) for o, c in zip(outs[b], chosen)]
    return tuple(chosen)


def _takes(index: Any, b: int, n: int) -> Any:
    """Per example, whether it takes branch ``b``."""
    if dtype_of(index).kind == "b":
        return index if b == 1 else _elt.logical_not(index)
    return equal(clip(index, 0, n - 1), b)


cond_p = CondPrimitive("cond", _cond_impl, multiple_results=True)


def _cond_lowering(ctx, index, *operands, branches, n_consts=0, **params):
    """Staged: one ``if`` per branch, each written inline (where everything in them
    lowers); the index clamped as ``_taken`` clamps it."""
    if not all(isinstance(b, GraphFn) for b in branches):
        raise NotLowered("cond's branches are not staged")
    split = len(operands) - n_consts
    ops, consts = operands[:split], operands[split:]
    chosen = ctx.clamp(index, 0, len(branches) - 1)
    results = ctx.variables(ctx.out_avals)
    for b, branch in enumerate(branches):
        with ctx.branch(chosen, b):
            ctx.assign(results, inline_function(ctx, branch, ops, consts))
    return tuple(ctx.read(results))


@propagating
def _cond_sparsity(sets, operands, *, branches, n_consts=0, **params):
    """Staged: what any branch's outputs depend on (the index passes no derivative)."""
    ops, consts = sets[1 : len(sets) - n_consts], sets[len(sets) - n_consts :]
    outs = [propagate(b.graph, [*ops, *(consts[i] for i in b.picks)]) for b in branches]
    return [union(*column) for column in zip(*outs)]


def _branch_call(what: str, index: Any, fns: Sequence[Callable], names: tuple, operands):
    leaves, tree, _ = leaves_of(tuple(operands), "operands", what)
    branches = tuple(FlatFn(fn, tree) for fn in fns)
    index, *leaves = staged_if_jitting([index, *leaves])
    outs = cond_p.bind(index, *leaves, branches=branches, names=names, who=what)
    ran = next(b for b in branches if b.out_tree is not None)
    return optree.tree_unflatten(ran.out_tree, list(outs))


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)`` (JAX's ``lax.cond``).

    ``pred`` is a boolean scalar; operands and results are pytrees of arrays, and
    both branches must return the same structure, shapes and dtypes.  Eagerly and
    under ``grad``/``jvp`` only the chosen branch runs (and is differentiated);
    under ``vmap`` with a batched ``pred``, each branch some example takes runs and
    the results are selected per example.

    >>> import numpy as np, autodiff
    >>> f = lambda x: autodiff.cond(x > 0, lambda x: x**2, lambda x: -x, x)
    >>> float(autodiff.grad(f)(3.0)), float(autodiff.grad(f)(-3.0))
    (6.0, -1.0)
    >>> autodiff.vmap(f)(np.array([-2.0, 3.0]))
    array([2., 9.])
    """
    check_callable(true_fun, "cond (true_fun)")
    check_callable(false_fun, "cond (false_fun)")
    check_predicate(pred, "cond: pred", "bool")
    return _branch_call("cond", pred, (false_fun, true_fun), ("false_fun", "true_fun"), operands)


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """``branches[index](*operands)``, ``index`` clamped to ``[0, len(branches) - 1]``
    (JAX's ``lax.switch``).

    ``index`` is an integer scalar; every branch must return the same structure,
    shapes and dtypes.  Transforms treat it as :func:`cond`.

    >>> import numpy as np, autodiff
    >>> fs = [lambda x: x, lambda x: 2 * x, lambda x: 3 * x]
    >>> [float(autodiff.switch(i, fs, 1.0)) for i in (-1, 1, 7)]
    [1.0, 2.0, 3.0]
    >>> autodiff.vmap(lambda i, x: autodiff.switch(i, fs, x))(np.array([0, 2]), np.ones(2))
    array([1., 3.])
    """
    if not isinstance(branches, (list, tuple)) or not branches:
        raise TransformTypeError(
            f"switch(index, branches, *operands): branches must be a non-empty list or "
            f"tuple of functions, got {a_type(branches)}."
        )
    for i, fn in enumerate(branches):
        check_callable(fn, f"switch (branches[{i}])")
    check_predicate(index, "switch: index", "int")
    names = tuple(f"branches[{i}]" for i in range(len(branches)))
    return _branch_call("switch", index, tuple(branches), names, operands)


# --- staging: every branch staged once ----------------------------------------------------------


def cond_stage(interp: StagingInterpreter, prim: CondPrimitive, args: tuple, params: dict):
    """Staging (``jit``, ``make_graph``): every branch staged once and type-checked, one
    equation."""
    return stage_control(interp, prim, args, params, stage_branches)


# --- grad, jvp, vmap: the eager route here, the staged ones in cond_staged.py --------------------


def cond_grad(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    """grad/vjp of a cond.  Staged (inside a jit, the index staged): a forward cond
    returning the taken branch's residuals and one tape node whose VJP is a cond of the
    branches' backward graphs (``cond_staged.two_conds``).  Eager, or where a branch closes over a
    value of a transform inside the grad, or nothing is differentiated: the taken
    branch recorded at grad's level."""
    if recording(interp) and not interp.keep_all_residuals and staging_below(interp):
        args, params = unclosed(args, params)
        index = args[0].value if isinstance(args[0], GradTensor) else args[0]
        if bottom(index) is None:  # staged: no branch can be chosen now
            out = two_conds(interp, prim, args, params)
            if out is not None:
                return out
    return run_here(interp, prim, args, params)


def cond_vjp(cts, ans, primals, params, argnums):
    """The VJP rule of the tape node ``cond_grad`` records: the cond of the branches'
    backward graphs, on the index the forward cond took."""
    if params.get("route") != "two conds":
        raise RuleError(
            "cond's VJP rule runs on the tape nodes its reverse-mode method (cond_grad) "
            "records, not on a cond's own parameters: differentiate a cond by calling it "
            "under grad or vjp, and a transform of your own by running it at its level "
            "(docs/extending.md)."
        )
    return backward_cond(cond_p, cts, primals, params, argnums)


def cond_jvp(interp: JvpInterpreter, prim: Primitive, args: tuple, params: dict):
    """jvp of a cond.  Staged (the index staged: inside a jit, or ``jvp(jit(f))``): one
    cond of the branches' JVP graphs, so only the taken branch runs
    (``cond_staged.pushed_cond``).
    Eager: the taken branch at jvp's level."""
    if staging_below(interp):
        args, params = unclosed(args, params)
        if staged_index(args[0]):
            out = pushed_cond(interp, prim, args, params)
            if out is not None:
                return out
    return run_here(interp, prim, args, params)


def cond_batch(interp: BatchInterpreter, prim: Primitive, args: tuple, params: dict):
    """vmap of a cond.  Staged, its index unbatched: one cond of the branches' batched
    graphs (``cond_staged.batched_cond``).  Eager, or a batched index: each branch some example
    takes (every branch, where the index is staged) runs at vmap's level and ``where``
    selects per example (``common.run_here``)."""
    if staging_below(interp):
        args, params = unclosed(args, params)
        index, dim = batched_parts(interp, args[0])
        if dim is None and staged_index(index):
            out = batched_cond(interp, prim, index, args[1:], params)
            if out is not None:
                return out
    return run_here(interp, prim, args, params)


# --- cond_p: every transform's one entry --------------------------------------------------------
# The implementation is _cond_impl (the taken branch; under vmap, every branch some example
# takes, selected per example).  A transform of a jitted function holding a cond
# transforms its graph (compiler/call.py), so it takes the entries' staged routes.

process.register(GradInterpreter, CondPrimitive)(cond_grad)  # grad, vjp
cond_p.def_vjp(cond_vjp, packed=True)  # the backward pass of cond_grad's tape node
process.register(JvpInterpreter, CondPrimitive)(cond_jvp)  # jvp: the taken branch
process.register(BatchInterpreter, CondPrimitive)(cond_batch)  # vmap: branches taken, selected
process.register(ExplainInterpreter, CondPrimitive)(run_here)  # explain: the taken branch
process.register(StagingInterpreter, CondPrimitive)(cond_stage)  # jit, make_graph
cond_p.def_lowering(Emitter(_cond_lowering))  # jit's compiling tier
cond_p.def_sparsity(_cond_sparsity)  # jacobian_sparsity
process.register(JetInterpreter, CondPrimitive)(run_here)  # jet, the operators: the taken branch
