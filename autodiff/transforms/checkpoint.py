"""checkpoint: rematerialisation.

``checkpoint(func)`` makes ``func`` one primitive.  Under ``grad``/``vjp`` the
tape then holds one node for it, keeping its inputs (and outputs), not the
intermediates of ``func``; the VJP rule runs ``func`` again under a fresh
``vjp`` to get them back.  The JVP rule is ``jvp`` of ``func``, and the
batching rule is a checkpoint of ``vmap(func)``, so rematerialisation
survives any nesting: ``grad(vmap(checkpoint(f)))``, ``grad(grad(...))``...
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff.core.args import at_positions, check_callable, check_flag, is_array
from autodiff.core.graph import aval_of
from autodiff.core.primitive import Primitive
from autodiff.core.stack import current_interpreters
from autodiff.errors import ConcretizationError, TransformTypeError
from autodiff.interpreters.batching import vmap
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import vjp
from autodiff.interpreters.sparsity import through_impl
from autodiff.interpreters.staging import graph_function, innermost_staging, traced_impl
from autodiff.transforms import checkpoint_policies
from autodiff.transforms.closures import reaches_tracer

__all__ = ["checkpoint"]


class CheckpointPrimitive(Primitive):
    """A checkpointed function.  Its implementation is written with autodiff functions
    (``traceable``): staging traces it, and where it closes over traced values, binds
    ``closure_convert(flat)`` instead, the checkpoint of ``flat`` (the staged
    function with those values as extra arguments), so their derivatives flow too."""

    __slots__ = ("base_name",)
    base_name: str

    def closure_convert(self, flat: Callable) -> Primitive:
        return _checkpoint_primitive(self.base_name, flat)


def _checkpoint_primitive(name: str, fn: Callable) -> CheckpointPrimitive:
    """A primitive running ``fn`` (flat array arguments -> tuple of arrays)."""

    def vjp_rule(cts, ans, primals, params, argnums):
        selected = at_positions(fn, primals, argnums)
        _, pullback = vjp(selected, *(primals[i] for i in argnums))  # the forward again
        return list(pullback(tuple(cts)))

    def jvp_rule(tangents, ans, primals, params):
        moving = [i for i, t in enumerate(tangents) if t is not None]
        selected = at_positions(fn, primals, moving)
        chosen = tuple(primals[i] for i in moving)
        return jvp(selected, chosen, tuple(tangents[i] for i in moving))[1]

    def batch_rule(args, dims):
        batched = _checkpoint_primitive(name, vmap(fn, in_dims=tuple(dims)))
        outs = batched.bind(*args)
        return outs, (0,) * len(outs)

    prim = CheckpointPrimitive(f"checkpoint({name})", fn, multiple_results=True, traceable=True)
    prim.base_name = name

    prim.def_vjp(vjp_rule, packed=True)
    prim.def_jvp(jvp_rule, packed=True)
    prim.def_batch(batch_rule)
    prim.def_taylor(checkpoint_policies.taylor_through(fn))
    prim.def_sparsity(through_impl(prim))  # its derivative is its implementation's
    return prim


def _closure_converted(prim: Any, operands: list) -> tuple[Primitive, list]:
    """If ``func`` closes over traced values (a layer's weights, say), the checkpoint of
    its staged form with those values as extra operands, so that every transform sees
    them (and differentiates them) as arguments.  Eagerly too: the recomputation runs
    after the transform that traced them has ended (the backward pass), where a closed-
    over traced value would be a leaked one."""
    body = traced_impl(prim, [aval_of(x) for x in operands], {})
    if not body.captured:
        return prim, operands
    return prim.closure_convert(graph_function(body.graph)), [*operands, *body.captured]


def checkpoint(func: Callable, *, policy: Callable | None = None, prevent_cse: bool = True,
               static_argnums: int | tuple[int, ...] = ()) -> Callable:  # fmt: skip
    """``func``, recomputed during the backward pass instead of remembered.

    Reverse mode normally keeps every intermediate value of ``func`` until the
    backward pass; with ``checkpoint`` it keeps only ``func``'s inputs and
    outputs and runs ``func`` again when its VJP is needed, trading compute
    for memory.  Results are unchanged under every transform (``grad``,
    ``vjp``, ``jvp``, ``vmap``, and nestings of them).  Array arguments
    (pytrees allowed) are traced; other argument leaves, and the arguments at
    ``static_argnums``, are passed as they are.

    ``policy`` (JAX's): which intermediate results to keep after all, one of
    ``autodiff.checkpoint_policies`` (``dots_saveable``, ``save_only_these_names(...)``
    with ``checkpoint_name``, ``everything_saveable``, ``nothing_saveable``, ...) or a
    function ``policy(prim, *avals, **params) -> bool``; ``func`` is then staged, and
    the backward pass recomputes only what the derivative rules read and nothing kept
    (see ``autodiff/transforms/checkpoint_policies.py``).  ``prevent_cse`` is accepted
    for JAX's sake (no pass merges a checkpoint's recomputation with its forward run).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> block = autodiff.checkpoint(lambda x: anp.sin(anp.sin(x)))
    >>> float(autodiff.grad(block)(0.0))
    1.0
    >>> dense = autodiff.checkpoint(lambda x, w: anp.tanh(x @ w),
    ...                             policy=autodiff.checkpoint_policies.dots_saveable)
    >>> autodiff.grad(lambda w: dense(np.ones(2), w).sum())(np.zeros((2, 2)))
    array([[1., 1.],
           [1., 1.]])
    """
    check_callable(func, "checkpoint")
    check_flag(prevent_cse, "prevent_cse", "checkpoint")
    if policy is not None and not callable(policy):
        raise TransformTypeError(
            f"checkpoint(..., policy={policy!r:.60}): a policy is a function (prim, *avals, "
            f"**params) -> bool, such as autodiff.checkpoint_policies.dots_saveable"
        )
    if policy is checkpoint_policies.everything_saveable:
        return func  # nothing to recompute: the plain function, whose tape keeps it all
    if policy is checkpoint_policies.nothing_saveable:
        policy = None
    static = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
    name = getattr(func, "__name__", "function")

    @functools.wraps(func)
    def wrapped(*args: Any) -> Any:
        statics = {i % len(args) for i in static}
        dynamic = tuple(None if i in statics else a for i, a in enumerate(args))
        leaves, in_tree = optree.tree_flatten(dynamic, none_is_leaf=True)
        traced = [i for i, leaf in enumerate(leaves) if is_array(leaf) or isinstance(leaf, float)]
        out_tree: list = []

        def flat(*values):
            full = list(leaves)
            for i, value in zip(traced, values):
                # a copy of a plain array: func may update its input in place, which
                # must change neither the caller's array nor the one kept to recompute
                full[i] = value.copy() if isinstance(value, np.ndarray) else value
            rebuilt = optree.tree_unflatten(in_tree, full)
            out = func(*(args[i] if i in statics else a for i, a in enumerate(rebuilt)))
            out_leaves, tree = optree.tree_flatten(out)
            out_tree[:] = [tree]
            return tuple(out_leaves)

        operands = [leaves[i] for i in traced]
        if policy is not None:
            try:
                kept, operands, _ = checkpoint_policies.policy_checkpoint(
                    name, flat, operands, policy
                )
            except ConcretizationError as e:
                raise ConcretizationError(
                    f"checkpoint(..., policy=...) stages {name} to choose what to keep, so "
                    f"it cannot branch on values in Python (use autodiff.cond or "
                    f"autodiff.numpy.where), or leave policy=None: {e}"
                ) from e
            outs = kept.bind(*operands)[: out_tree[0].num_leaves]  # then the kept values
            return optree.tree_unflatten(out_tree[0], list(outs))
        prim: Primitive = _checkpoint_primitive(name, flat)
        if innermost_staging() is not None:
            prim, operands = _closure_converted(prim, operands)
        elif current_interpreters() and reaches_tracer(func):  # it closes over one
            with contextlib.suppress(ConcretizationError):  # Python control flow on values:
                prim, operands = _closure_converted(prim, operands)  # func runs as it is
        outs = prim.bind(*operands)
        return optree.tree_unflatten(out_tree[0], list(outs))

    return wrapped
