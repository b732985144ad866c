"""Python functions with custom rules: ``custom_vjp`` and ``custom_jvp``.

Each call of such a function binds a primitive of its own, whose rules are
the user's; every transform then treats it like any other primitive: ``jvp``
of a ``custom_vjp`` function transposes its backward function, ``vmap`` maps
the function and its rules, and higher orders differentiate the rules.  Only
reverse mode treats a ``custom_vjp`` primitive specially (it runs ``fwd`` and
keeps its residuals): that ``process`` method is registered here, for
``(GradInterpreter, CustomVJPPrimitive)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff.core.args import check_callable
from autodiff.core.arrays import batch_size_of
from autodiff.core.primitive import Primitive, process
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.batching import vmap
from autodiff.interpreters.reverse import GradInterpreter, GradTensor, recording, unpack
from autodiff.interpreters.tape import Node
from autodiff.interpreters.transpose import jvp_from_vjp, vjp_from_jvp
from autodiff.rules._helpers import bring_to_front

__all__ = ["CustomVJPPrimitive", "custom_jvp", "custom_vjp"]


def _flat_function(fn: Callable, in_tree: Any, out_cell: list) -> Callable:
    """``fn`` as a function of flat array leaves returning a tuple of leaves."""

    def flat(*leaves):
        out = fn(*optree.tree_unflatten(in_tree, list(leaves)))
        out_leaves, out_tree = optree.tree_flatten(out)
        out_cell[:] = [out_tree]
        return tuple(out_leaves)

    return flat


def _is_leaf(x: Any) -> bool:
    return hasattr(x, "shape") or isinstance(x, (int, float, complex))


def _kind(x: Any) -> str:
    """What a user function returned, for error messages."""
    if isinstance(x, tuple):
        return f"a tuple of length {len(x)}"
    return f"a single array of shape {np.shape(x)}" if hasattr(x, "shape") else type(x).__name__


def _check_args(name: str, args: tuple, kwargs: dict) -> tuple[list, Any]:
    if kwargs:
        raise TransformTypeError(
            f"{name}: functions with custom rules take positional arguments only (got "
            f"{sorted(kwargs)}); bind keyword arguments with functools.partial first."
        )
    leaves, tree = optree.tree_flatten(args)
    for leaf in leaves:
        if not hasattr(leaf, "shape") and not isinstance(leaf, (int, float, complex)):
            raise TransformTypeError(
                f"{name}: every argument leaf must be an array, got {type(leaf).__name__}; "
                f"pass other values through a closure."
            )
    return leaves, tree


class CustomVJPPrimitive(Primitive):
    """A ``custom_vjp`` function: under ``grad`` its ``fwd`` runs and ``bwd`` is
    the VJP (``_grad_of_custom_vjp`` below); elsewhere, a primitive like any other."""

    __slots__ = ("bwd", "fwd")
    fwd: Callable  # (*args) -> (outputs, residuals)
    bwd: Callable  # (residuals, cotangents) -> cotangents of the arguments


@process.register(GradInterpreter, CustomVJPPrimitive)
def _grad_of_custom_vjp(
    interp: GradInterpreter, prim: CustomVJPPrimitive, args: tuple, params: dict
):
    """Run the function's ``fwd`` and keep its residuals on the tape for ``bwd``."""
    values, parents, _ = unpack(interp, args)
    if not parents or not recording(interp):
        return prim.bind(*values, **params)
    outs, residuals = prim.fwd(*values)
    node = Node(prim, {"residuals": residuals}, values, outs, parents)
    return tuple(GradTensor(interp, out, node, i) for i, out in enumerate(outs))


def _batched(make: Callable[[], Primitive]) -> Callable:
    """The batching rule of a custom-rule primitive: bind the primitive that ``make``
    builds of the function and its rules under ``vmap``, on batch-first values."""

    def batch(args, dims, **params):
        size = batch_size_of(args, dims)
        outs = make().bind(*(bring_to_front(a, d, size) for a, d in zip(args, dims)))
        return outs, (0,) * len(outs)

    return batch


def _make_custom_vjp_primitive(name: str, fun: Callable, fwd: Callable, bwd: Callable):
    """fun, fwd, bwd on flat leaves: fwd -> (outs, residuals); bwd(residuals, cts) -> cts."""
    prim = CustomVJPPrimitive(name, fun, multiple_results=True, traceable=True)
    prim.fwd, prim.bwd = fwd, bwd

    def vjp_rule(cts, ans, primals, params, argnums):
        residuals = params["residuals"] if "residuals" in params else fwd(*primals)[1]
        cts_in = bwd(residuals, tuple(cts))
        for i in argnums:
            if cts_in[i] is not None and np.shape(cts_in[i]) != np.shape(primals[i]):
                raise TransformValueError(
                    f"custom_vjp function '{name}': bwd returned a cotangent of shape "
                    f"{np.shape(cts_in[i])} for an argument of shape {np.shape(primals[i])}; "
                    f"each cotangent must have the shape of its argument."
                )
        return [cts_in[i] for i in argnums]

    prim.vjp = vjp_rule
    prim.jvp = jvp_from_vjp(vjp_rule)
    prim.batch = _batched(
        lambda: _make_custom_vjp_primitive(
            name, vmap(fun), vmap(fwd), vmap(lambda res, cts: bwd(res, cts))
        )
    )
    return prim


class custom_vjp:
    """Give a Python function its own VJP (JAX's API).

    ``f.defvjp(fwd, bwd)``: ``fwd(*args)`` returns ``(output, residuals)``
    (residuals: a pytree of arrays, or None) and ``bwd(residuals, cotangent)``
    returns one cotangent per argument (a tuple).  The function then works
    under every transform: ``grad`` and ``vjp`` use ``bwd``; ``jvp`` transposes
    ``bwd`` (exact when it is written with ``autodiff.numpy`` functions; a
    ``bwd`` that is not linear in the cotangent, like gradient clipping, is
    transposed at its linearisation at 0); ``vmap`` maps ``f``, ``fwd`` and
    ``bwd``; higher orders differentiate ``bwd``.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> @autodiff.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, ct: (anp.clip(ct, -1.0, 1.0),))
    >>> float(autodiff.grad(lambda x: 5.0 * clip_gradient(x))(2.0))
    1.0
    """

    def __init__(self, fun: Callable) -> None:
        check_callable(fun, "custom_vjp")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        check_callable(fwd, "custom_vjp.defvjp (fwd)")
        check_callable(bwd, "custom_vjp.defvjp (bwd)")
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "custom_vjp")
        if self.fwd is None or self.bwd is None:
            raise TransformTypeError(
                f"custom_vjp function '{name}' has no rule yet: call {name}.defvjp(fwd, bwd)."
            )
        leaves, in_tree = _check_args(f"custom_vjp function '{name}'", args, kwargs)
        out_cell: list = []
        fwd, bwd = self.fwd, self.bwd

        def flat_fwd(*flat_args):
            pair = fwd(*optree.tree_unflatten(in_tree, list(flat_args)))
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TransformTypeError(
                    f"custom_vjp function '{name}': fwd must return a pair (output, "
                    f"residuals), got {_kind(pair)}. Return (output, None) if bwd needs "
                    f"no residuals."
                )
            out, residuals = pair
            out_leaves, out_tree = optree.tree_flatten(out)
            out_cell[:] = [out_tree]
            return tuple(out_leaves), residuals

        def flat_bwd(residuals, cts):
            cts_tree = optree.tree_unflatten(out_cell[0], list(cts))
            cts_in = bwd(residuals, cts_tree)
            if not isinstance(cts_in, tuple) or len(cts_in) != len(args):
                raise TransformTypeError(
                    f"custom_vjp function '{name}': bwd must return a tuple with one "
                    f"cotangent per argument ({len(args)}), got {type(cts_in).__name__}"
                    + (f" of length {len(cts_in)}" if isinstance(cts_in, tuple) else "")
                )
            # None is a zero cotangent, for an argument or any part of one
            cts_in = tuple(
                optree.tree_map(lambda _: None, arg) if ct is None else ct
                for arg, ct in zip(args, cts_in)
            )
            try:
                leaves = in_tree.flatten_up_to(cts_in)
            except ValueError:
                leaves = [()]  # reported below
            if not all(ct is None or _is_leaf(ct) for ct in leaves):
                raise TransformValueError(
                    f"custom_vjp function '{name}': bwd must return cotangents structured "
                    f"like the arguments ({in_tree}), got {optree.tree_structure(cts_in)}; "
                    f"use None for a zero cotangent."
                )
            return tuple(leaves)

        prim = _make_custom_vjp_primitive(
            name, _flat_function(self.fun, in_tree, out_cell), flat_fwd, flat_bwd
        )
        outs = prim.bind(*leaves)
        return optree.tree_unflatten(out_cell[0], list(outs))


def _make_custom_jvp_primitive(name: str, fun: Callable, jvp_fun: Callable) -> Primitive:
    """fun and jvp_fun on flat leaves: jvp_fun(primals, tangents) -> tangents_out."""
    prim = Primitive(name, fun, multiple_results=True, traceable=True)

    def jvp_rule(tangents, ans, primals, params):
        tangents = tuple(np.zeros_like(p) if t is None else t for t, p in zip(tangents, primals))
        return jvp_fun(primals, tangents)

    prim.jvp = jvp_rule
    prim.vjp = vjp_from_jvp(jvp_rule)
    prim.batch = _batched(lambda: _make_custom_jvp_primitive(name, vmap(fun), vmap(jvp_fun)))
    return prim


class custom_jvp:
    """Give a Python function its own JVP (JAX's API).

    ``f.defjvp(rule)``: ``rule(primals, tangents)`` gets two tuples (one entry
    per argument) and returns ``(output, tangent_out)``.  Every transform then
    uses it: ``jvp`` directly, ``grad``/``vjp`` by transposing it (exact when it
    is written with ``autodiff.numpy`` functions), ``vmap`` by mapping both.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> @autodiff.custom_jvp
    ... def log1pexp(x):
    ...     return anp.log1p(anp.exp(x))
    >>> @log1pexp.defjvp
    ... def _(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return log1pexp(x), t * (1 - 1 / (1 + anp.exp(x)))
    >>> float(autodiff.grad(log1pexp)(100.0))  # stable: the naive rule gives nan
    1.0
    """

    def __init__(self, fun: Callable) -> None:
        check_callable(fun, "custom_jvp")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.jvp: Callable | None = None

    def defjvp(self, rule: Callable) -> Callable:
        check_callable(rule, "custom_jvp.defjvp")
        self.jvp = rule
        return rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "custom_jvp")
        if self.jvp is None:
            raise TransformTypeError(
                f"custom_jvp function '{name}' has no rule yet: decorate one with @{name}.defjvp."
            )
        leaves, in_tree = _check_args(f"custom_jvp function '{name}'", args, kwargs)
        out_cell: list = []
        rule = self.jvp

        def flat_jvp(primals, tangents):
            pair = rule(
                tuple(optree.tree_unflatten(in_tree, list(primals))),
                tuple(optree.tree_unflatten(in_tree, list(tangents))),
            )
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TransformTypeError(
                    f"custom_jvp function '{name}': the rule must return a pair (output, "
                    f"tangent_out), got {_kind(pair)}."
                )
            out, tangent = pair
            out_leaves, out_tree = optree.tree_flatten(out)
            t_leaves, t_tree = optree.tree_flatten(tangent)
            if t_tree != out_tree:
                raise TransformValueError(
                    f"custom_jvp function '{name}': the rule's tangent_out must be "
                    f"structured like its output ({out_tree}), got {t_tree}."
                )
            for o, t in zip(out_leaves, t_leaves):
                if np.shape(o) != np.shape(t):
                    raise TransformValueError(
                        f"custom_jvp function '{name}': the rule returned a tangent of "
                        f"shape {np.shape(t)} for an output of shape {np.shape(o)}; each "
                        f"tangent must have the shape of its output."
                    )
            out_cell[:] = [out_tree]
            return tuple(t_leaves)

        prim = _make_custom_jvp_primitive(
            name, _flat_function(self.fun, in_tree, out_cell), flat_jvp
        )
        outs = prim.bind(*leaves)
        return optree.tree_unflatten(out_cell[0], list(outs))
