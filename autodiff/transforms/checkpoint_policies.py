"""Checkpoint policies: which intermediate values ``checkpoint(f, policy=...)`` keeps for
the backward pass instead of recomputing them (JAX's ``jax.checkpoint_policies``).

A policy is a function ``policy(prim, *avals, **params) -> bool`` of one equation of the
staged ``f``: True keeps its result.  With a policy, ``checkpoint`` stages ``f`` once
(``f`` cannot branch on values in Python there: use ``cond``); the forward pass runs
the graph and keeps the chosen results; the backward pass runs the graph again under
``vjp`` where each equation is one of three kinds, decided backwards from what the
rules read (``vjp_reads``):

* *kept*: its result is needed and was kept: replayed with the kept value, not computed;
* *recomputed*: its result is needed (a rule further on reads it, or an equation that is
  recomputed takes it) and was not kept;
* *skipped*: no one reads its result (``x @ W`` before a ``tanh`` whose result was kept:
  the matmul's VJP reads ``x`` and ``W`` only): replayed with a placeholder of its shape,
  so the backward pass still goes through its VJP and nothing computes it.

So ``dots_saveable`` in a network recomputes the cheap elementwise functions and no
matrix product, and a value named with ``checkpoint_name`` and kept costs no
recomputation of what led to it, as in JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff.core.args import at_positions
from autodiff.core.graph import Graph, Literal, Var, aval_of
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import linear_taylor
from autodiff.core.stack import current_interpreters
from autodiff.interpreters.batching import vmap
from autodiff.interpreters.forward import JvpInterpreter, jvp
from autodiff.interpreters.reverse import GradInterpreter, vjp
from autodiff.interpreters.sparsity import through_impl
from autodiff.interpreters.staging import stage
from autodiff.interpreters.taylor import push_series
from autodiff.rules._sparsity import moves
from autodiff.rules.convolution import conv_general_dilated_p
from autodiff.rules.products import einsum_p, matmul_p

__all__ = [
    "checkpoint_name",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "everything_saveable",
    "nothing_saveable",
    "save_any_names_but_these",
    "save_anything_except_these_names",
    "save_from_both_policies",
    "save_only_these_names",
]


# --- names ---------------------------------------------------------------------------------------

checkpoint_name_p = Primitive(
    "checkpoint_name",
    lambda x, *, name: x,
    vjp=[lambda ct, ans, x, *, name: ct],
    jvp=[lambda t, ans, x, *, name: checkpoint_name_p.bind(t, name=name)],
    batch=lambda args, dims, *, name: (checkpoint_name_p.bind(args[0], name=name), dims[0]),
    shape=lambda x, *, name: x,
    sparsity=moves(lambda x, *, name: x),
    vjp_reads=[()],
)
checkpoint_name_p.def_taylor(linear_taylor(checkpoint_name_p))


def checkpoint_name(x: Any, name: str) -> Any:
    """``x`` (any pytree), named for the policies ``save_only_these_names`` and its kin
    (JAX's ``jax.ad_checkpoint.checkpoint_name``); otherwise the identity.

    >>> import numpy as np, autodiff
    >>> from autodiff import checkpoint_policies as cp
    >>> f = autodiff.checkpoint(lambda x: np.sin(cp.checkpoint_name(x * 2.0, "h")) ** 2,
    ...                         policy=cp.save_only_these_names("h"))
    >>> round(float(autodiff.grad(f)(0.5)), 6)
    1.818595
    """
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name(x, name): name must be a string, got {name!r:.60}")
    return optree.tree_map(lambda leaf: checkpoint_name_p.bind(leaf, name=name), x)


# --- the policies --------------------------------------------------------------------------------


def everything_saveable(prim: Primitive, *avals: Any, **params: Any) -> bool:
    """Keep every result: nothing is recomputed (as without ``checkpoint``)."""
    return True


def nothing_saveable(prim: Primitive, *avals: Any, **params: Any) -> bool:
    """Keep no result: everything the backward pass needs is recomputed (the default)."""
    return False


def dots_saveable(prim: Primitive, *avals: Any, **params: Any) -> bool:
    """Keep the results of matrix products and convolutions (``matmul``, ``einsum``, and
    what ``dot``, ``tensordot``... are made of; ``conv_general_dilated``)."""
    return prim in (matmul_p, einsum_p, conv_general_dilated_p)


checkpoint_dots = dots_saveable


def dots_with_no_batch_dims_saveable(prim: Primitive, *avals: Any, **params: Any) -> bool:
    """Keep the results of matrix products that have no batch (stack) axes: a matmul of
    matrices or vectors, an einsum whose every output index is another's free index."""
    if prim is matmul_p:
        return all(len(a.shape) <= 2 for a in avals)
    if prim is einsum_p:
        terms, out = params["subscripts"].split("->")
        terms = terms.split(",")
        return len(terms) == 2 and not any(c in terms[0] and c in terms[1] for c in out)
    return False


checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def _named(prim: Primitive, params: dict) -> str | None:
    return params["name"] if prim is checkpoint_name_p else None


def save_only_these_names(*names: str) -> Callable:
    """Keep the values named (``checkpoint_name``) with one of ``names``, nothing else."""
    chosen = frozenset(names)
    return lambda prim, *avals, **params: _named(prim, params) in chosen


def save_any_names_but_these(*names: str) -> Callable:
    """Keep every named value except those named with one of ``names``."""
    excluded = frozenset(names)
    return lambda prim, *avals, **params: _named(prim, params) not in excluded | {None}


def save_anything_except_these_names(*names: str) -> Callable:
    """Keep every result except the values named with one of ``names``."""
    excluded = frozenset(names)
    return lambda prim, *avals, **params: _named(prim, params) not in excluded


def save_from_both_policies(first: Callable, second: Callable) -> Callable:
    """Keep what either policy keeps."""
    return lambda prim, *avals, **params: (
        first(prim, *avals, **params) or second(prim, *avals, **params)
    )


# --- replaying an equation with a value known beforehand ----------------------------------------


_MAX_OPERANDS = 64  # (einsum's limit)


@functools.cache
def _replayed(prim: Primitive) -> Primitive:
    """``prim`` whose result is given (operand 0: a kept value, or a placeholder nothing
    reads) rather than computed: its other operands are ``prim``'s, and its derivatives
    in them are ``prim``'s, at that result."""

    def vjp_of(i: int) -> Callable:  # operand i + 1: prim's operand i
        return lambda ct, ans, given, *primals, **params: prim.vjp_rule()(
            ct, ans, primals, params, [i]
        )[0]

    def jvp_of(i: int) -> Callable:  # one operand's term, the others' tangents None
        def jvp(t, ans, given, *primals, **params):
            tangents = [None] * len(primals)
            tangents[i] = t
            return prim.jvp_rule()(tangents, ans, primals, params)

        return jvp

    replay = Primitive(
        f"replay({prim.name})",
        lambda given, *primals, **params: given,
        batch=lambda args, dims, **params: (args[0], dims[0]),
        shape=lambda given, *avals, **params: given,
    )
    replay.def_vjp([None, *(vjp_of(i) for i in range(_MAX_OPERANDS))])  # only those asked
    replay.def_jvp([None, *(jvp_of(i) for i in range(_MAX_OPERANDS))])
    return replay


def _reads(prim: Primitive, nin: int) -> tuple[set, bool]:
    """Which operands ``prim``'s VJP rules read, and whether they read its result."""
    if prim.vjp_reads is None:
        return set(range(nin)), True
    read = set().union(*prim.vjp_reads)
    return {i for i in read if i != "ans"}, "ans" in read


def _plan(graph: Graph, keep: set[int]) -> tuple[list[str], list[int]]:
    """Each equation's kind in the backward pass ("kept", "recomputed", "skipped"), and the
    equations whose results the forward pass keeps: worked out backwards."""
    needed: set[Var] = set()
    named: set[Var] = set()  # values a kept name holds: their equations replay it too
    kinds = ["skipped"] * len(graph.eqns)
    keep = set(keep)
    for k in reversed(range(len(graph.eqns))):
        eqn = graph.eqns[k]
        if eqn.prim is checkpoint_name_p and k in keep:
            named.add(eqn.invars[0])
        elif eqn.outvars[0] in named:
            keep.add(k)
        simple = eqn.prim.differentiable and not eqn.prim.multiple_results \
            and not eqn.prim.effectful and not eqn.prim.traceable  # fmt: skip
        if not simple:
            kind = "recomputed"
        else:
            read, reads_ans = _reads(eqn.prim, len(eqn.invars))
            if reads_ans or eqn.outvars[0] in needed:
                kind = "kept" if k in keep else "recomputed"
            else:
                kind = "skipped"
        kinds[k] = kind
        if kind == "recomputed":
            needed.update(v for v in eqn.invars if type(v) is Var)
        else:
            needed.update(eqn.invars[i] for i in read if type(eqn.invars[i]) is Var)
    return kinds, [k for k, kind in enumerate(kinds) if kind == "kept"]


def _evaluate(graph: Graph, args: tuple, kinds: list[str] | None, kept: list) -> list:
    """Run ``graph`` on ``args`` (binding each primitive); with ``kinds``, the backward
    pass's run: kept equations replay ``kept`` (in order), skipped ones a placeholder."""
    env: dict[Var, Any] = dict(zip(graph.invars, args))
    env.update(zip(graph.constvars, graph.consts))
    values = iter(kept)

    def read(v):
        return v.value if type(v) is Literal else env[v]

    for k, eqn in enumerate(graph.eqns):
        kind = "recomputed" if kinds is None else kinds[k]
        if kind == "recomputed":
            out = eqn.prim.bind(*map(read, eqn.invars), **eqn.params)
            env.update(zip(eqn.outvars, out) if eqn.prim.multiple_results else
                       [(eqn.outvars[0], out)])  # fmt: skip
            continue
        aval = eqn.outvars[0].aval
        given = next(values) if kind == "kept" else np.broadcast_to(np.zeros((), aval.dtype),
                                                                    aval.shape)  # fmt: skip
        env[eqn.outvars[0]] = _replayed(eqn.prim).bind(given, *map(read, eqn.invars),
                                                       **eqn.params)  # fmt: skip
    return [read(v) for v in graph.outvars]


def policy_checkpoint(name: str, fn: Callable, operands: list, policy: Callable
                      ) -> tuple[Primitive, list, int]:  # fmt: skip
    """The checkpoint of ``fn`` (flat arrays -> tuple of arrays) under ``policy``: the
    primitive, its operands (``operands`` and the traced values ``fn`` closes over) and
    how many of its results are ``fn``'s (the rest are the kept values)."""
    staged = stage(lambda *xs: list(fn(*xs)), [aval_of(x) for x in operands],
                   transform=f"checkpoint({name}, policy=...)")  # fmt: skip
    graph = staged.graph
    keep = set()
    for k, eqn in enumerate(graph.eqns):
        if policy(eqn.prim, *(v.aval for v in eqn.invars), **eqn.params):
            keep.add(k)
    kinds, kept = _plan(graph, keep)
    # Where the backward pass is itself differentiated (hessian), the JVP rules of the
    # replayed equations read what their VJP rules do not: nothing is skipped there.
    safe = ["recomputed" if kind == "skipped" else kind for kind in kinds]
    nout = len(graph.outvars)

    def forward(*args):
        env_outs = _evaluate_keeping(graph, args, kept)
        return tuple(env_outs)

    def rerun(args, values, plan):
        return (*_evaluate(graph, args, plan, values), *values)

    def vjp_rule(cts, ans, primals, params, argnums):
        values = list(ans[nout:])
        differentiated = any(isinstance(i, (GradInterpreter, JvpInterpreter))
                             for i in current_interpreters())  # fmt: skip
        plan = safe if differentiated else kinds
        selected = at_positions(lambda *ops: rerun(ops, values, plan), primals, argnums)
        _, pullback = vjp(selected, *(primals[i] for i in argnums))
        return list(pullback(tuple(cts)))

    def jvp_rule(tangents, ans, primals, params):
        moving = [i for i, t in enumerate(tangents) if t is not None]
        selected = at_positions(forward, primals, moving)
        chosen = tuple(primals[i] for i in moving)
        return jvp(selected, chosen, tuple(tangents[i] for i in moving))[1]

    def batch_rule(args, dims):
        batched, _, count = policy_checkpoint(name, vmap(forward, in_dims=tuple(dims)),
                                              list(args), policy)  # fmt: skip
        outs = batched.bind(*args)[:count]
        return outs, (0,) * count

    prim = Primitive(f"checkpoint({name})", forward, multiple_results=True, traceable=True)
    prim.def_vjp(vjp_rule, packed=True)
    prim.def_jvp(jvp_rule, packed=True)
    prim.def_batch(batch_rule)
    prim.def_taylor(taylor_through(forward))  # Taylor mode keeps nothing: nothing to replay
    prim.def_sparsity(through_impl(prim))
    return prim, [*operands, *staged.captured], nout + len(kept)


def taylor_through(fn: Callable) -> Callable:
    """The Taylor rule of a checkpoint of ``fn``: the series pushed through ``fn`` itself
    (Taylor mode has no backward pass, so there is nothing to recompute)."""

    def taylor(primals, series):
        order = len(series[0])
        outs, coefficients = push_series(fn, primals, series, order)
        return tuple(outs), tuple([None] * order if c is None else c for c in coefficients)

    return taylor


def _evaluate_keeping(graph: Graph, args: tuple, kept: list[int]) -> list:
    """``graph``'s outputs, then the results of the equations ``kept``."""
    env: dict[Var, Any] = dict(zip(graph.invars, args))
    env.update(zip(graph.constvars, graph.consts))

    def read(v):
        return v.value if type(v) is Literal else env[v]

    for eqn in graph.eqns:
        out = eqn.prim.bind(*map(read, eqn.invars), **eqn.params)
        env.update(zip(eqn.outvars, out) if eqn.prim.multiple_results else
                   [(eqn.outvars[0], out)])  # fmt: skip
    return [read(v) for v in graph.outvars] + [env[graph.eqns[k].outvars[0]] for k in kept]
