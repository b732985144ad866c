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
  (``_pushed_cond``);
- vmap inside a jit, or of a jitted function (``cond_batch``): an unbatched index, a cond
  of the branches' batched graphs (``_batched_cond``); a batched one, every branch runs
  at vmap's level and ``where`` selects per example, as JAX's ``vmap`` does
  (``common.run_here``);
- grad inside a jit, or of a jitted function (``cond_grad``): a forward ``cond``
  returning the outputs and the taken branch's residuals, and one tape node,
  ``cond_p``'s, whose VJP rule (``cond_vjp``) is a backward ``cond`` of the branches'
  VJPs, so only the taken branch runs (``_two_conds``, ``_backward_cond``).

A transform of a jitted function transforms its graph (``compiler/call.py``), so the
staged routes are theirs too: ``grad(jit(f))``, ``jvp(jit(f))`` and ``vmap(jit(f))``
of a function holding a cond run compiled graphs.

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

from autodiff.compiler.graph_transforms import batch_graph, jvp_graph, vjp_graphs
from autodiff.control.common import (
    ControlFlowPrimitive,
    FlatFn,
    GraphFn,
    bottom,
    check_like,
    check_predicate,
    derivative_where,
    inline_function,
    leaves_of,
    names_of,
    output_types,
    run_here,
    staged_if_jitting,
)
from autodiff.control.subgraphs import (
    StagedFunction,
    batch_axis_at,
    batched_parts,
    closes_over_above,
    dual_parts,
    joined,
    reaching,
    stage_control,
    unclosed,
    unzip,
)
from autodiff.core.args import a_type, check_callable
from autodiff.core.arrays import dtype_of, library_of, shape_of
from autodiff.core.graph import aval_of
from autodiff.core.index_sets import propagating
from autodiff.core.lowering import Emitter, NotLowered
from autodiff.core.primitive import Primitive, process
from autodiff.core.tracer import Tracer
from autodiff.errors import RuleError, TransformTypeError
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter
from autodiff.interpreters.reverse import GradInterpreter, GradTensor, recording, unpack
from autodiff.interpreters.sparsity import propagate, union
from autodiff.interpreters.staging import (
    StagingInterpreter,
    eval_graph,
    innermost_staging,
    staging_below,
)
from autodiff.interpreters.tape import Node
from autodiff.interpreters.taylor import JetInterpreter
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp
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
    return stage_control(interp, prim, args, params, _stage_branches)


def _stage_branches(interp, args, avals, params) -> tuple[dict, list, list]:
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


# --- grad and vjp -------------------------------------------------------------------------------


def cond_grad(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    """grad/vjp of a cond.  Staged (inside a jit, the index staged): a forward cond
    returning the taken branch's residuals and one tape node whose VJP is a cond of the
    branches' backward graphs (``_two_conds``).  Eager, or where a branch closes over a
    value of a transform inside the grad, or nothing is differentiated: the taken
    branch recorded at grad's level."""
    if recording(interp) and not interp.keep_all_residuals and staging_below(interp):
        args, params = unclosed(args, params)
        index = args[0].value if isinstance(args[0], GradTensor) else args[0]
        if bottom(index) is None:  # staged: no branch can be chosen now
            out = _two_conds(interp, args, params)
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
    return _backward_cond(cts, primals, params, argnums)


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


def _two_conds(interp: GradInterpreter, args: tuple, params: dict) -> tuple | None:
    """The forward cond now, each branch returning its outputs and a slot for every
    branch's residuals; None where the taken branch must run at grad's level."""
    values, parents, _ = unpack(interp, args)
    index, operands = values[0], values[1:]
    staging = innermost_staging()
    assert staging is not None
    _, staged, _ = _stage_branches(
        staging, args, [aval_of(v) for v in values], params
    )  # type-checked
    consts: dict[int, Any] = {}
    for s in staged:
        if closes_over_above(s.captured, interp):
            return None  # a transform inside the grad: its level runs the branch
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
        return None  # nothing here is differentiated
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
    fwd = tuple(FlatFn(forward(b), in_tree) for b in range(len(staged)))
    index, *ops = reaching([index, *operands])
    out = cond_p.bind(index, *ops, branches=fwd, names=params["names"], who=params["who"])
    n_out = vgs[0].n_out
    outs, residuals = out[:n_out], out[n_out:]
    node_params = {"route": "two conds", "index": index, "vgs": vgs, "picks": picks, "slots": slots,
                   "residuals": residuals, "op_diff": op_diff, "const_diff": const_diff,
                   "const_values": const_values, "n_ops": n_ops, "names": params["names"],
                   "who": params["who"]}  # fmt: skip
    all_parents = [*parents, *((len(values) + k, c.node, c.index)
                               for k, c in enumerate(const_list) if k in const_diff)]  # fmt: skip
    node = Node(cond_p, node_params, [*values, *const_values], outs, all_parents)
    floats = set(vgs[0].float_outputs)
    return tuple(GradTensor(interp, o, node, i) if i in floats else o for i, o in enumerate(outs))


def _backward_cond(cts: tuple, primals: list, params: dict, argnums: list) -> list:
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
    got = cond_p.bind(params["index"], *operands, branches=bwd, names=params["names"],
                      who=params["who"])  # fmt: skip
    by_position = dict(zip([1 + i for i in op_diff], got[: len(op_diff)], strict=True))
    base = len(primals) - len(const_values)
    by_position.update((base + k, c) for k, c in zip(const_diff, got[len(op_diff) :],
                                                      strict=True))  # fmt: skip
    return [by_position.get(i) for i in argnums]


# --- jvp and vmap: inside a jit one staged cond -------------------------------------------------


def _staged_index(index: Any) -> bool:
    """Whether no branch can be chosen now: the index is staged (it has no values)."""
    return isinstance(index, Tracer) and bottom(index) is None


def _branches_and_consts(interp: Any, args: tuple, params: dict) -> tuple | None:
    """Every branch staged on ``args``' avals (type-checked), the values any of them
    closes over (in order), and per branch which of those it reads; None where one
    closes over a value of a transform inside ``interp`` (that level runs the cond)."""
    staging = innermost_staging()
    assert staging is not None
    _, staged, out_avals = _stage_branches(staging, args, [aval_of(a) for a in args], params)
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


def cond_jvp(interp: JvpInterpreter, prim: Primitive, args: tuple, params: dict):
    """jvp of a cond.  Staged (the index staged: inside a jit, or ``jvp(jit(f))``): one
    cond of the branches' JVP graphs, so only the taken branch runs (``_pushed_cond``).
    Eager: the taken branch at jvp's level."""
    if staging_below(interp):
        args, params = unclosed(args, params)
        if _staged_index(args[0]):
            out = _pushed_cond(interp, args, params)
            if out is not None:
                return out
    return run_here(interp, prim, args, params)


def _pushed_cond(interp: JvpInterpreter, args: tuple, params: dict) -> tuple | None:
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
    out = cond_p.bind(index, *operands, branches=tuple(FlatFn(branch(b), in_tree)
                                                       for b in range(len(staged))),
                      names=params["names"], who=params["who"])  # fmt: skip
    out_tangents = iter(out[n_out:])
    return tuple(DualTensor(interp, o, next(out_tangents)) if h else o
                 for o, h in zip(out[:n_out], out_has))  # fmt: skip


def cond_batch(interp: BatchInterpreter, prim: Primitive, args: tuple, params: dict):
    """vmap of a cond.  Staged, its index unbatched: one cond of the branches' batched
    graphs (``_batched_cond``).  Eager, or a batched index: each branch some example
    takes (every branch, where the index is staged) runs at vmap's level and ``where``
    selects per example (``common.run_here``)."""
    if staging_below(interp):
        args, params = unclosed(args, params)
        index, dim = batched_parts(interp, args[0])
        if dim is None and _staged_index(index):
            out = _batched_cond(interp, index, args[1:], params)
            if out is not None:
                return out
    return run_here(interp, prim, args, params)


def _batched_cond(interp: BatchInterpreter, index: Any, args: tuple, params: dict) -> tuple | None:
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
    out = cond_p.bind(index, *operands, branches=tuple(FlatFn(branch(b), in_tree)
                                                       for b in range(len(staged))),
                      names=params["names"], who=params["who"])  # fmt: skip
    return tuple(BatchedTensor(interp, o, 0) if m else o for o, m in zip(out, batched))


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
