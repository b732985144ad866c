"""``autodiff.debug.callback`` and ``autodiff.debug.print`` (JAX's ``jax.debug``): a
function of the concrete values, called where the program reaches it, under any transform.

One effectful primitive with no result.  Its implementation calls the function with the
values; ``grad`` and ``jvp`` pass it the primal values (it has no derivative, and the
backward pass does not run it again); ``vmap``'s rule calls it once per example, in
order, with that example's values (as JAX does); under ``jit`` it is an equation of the
graph that no pass drops, moves or merges, so every call of the jitted function calls it
with that call's values, in program order.  Non-array arguments (strings, flags) reach the
function as they are.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from autodiff.core.arrays import shape_of
from autodiff.core.primitive import Primitive
from autodiff.core.tracer import Tracer

__all__ = ["callback", "print"]


class _Effect(Primitive):
    """A primitive run for its effect, at every replay, in order (never dropped)."""

    __slots__ = ()
    effectful = True


def _is_operand(x: Any) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic, float, complex)) and not isinstance(
        x, bool
    )


def _call(*operands: Any, function: Callable, tree: Any, statics: tuple) -> tuple:
    leaves, values = list(statics), iter(operands)
    leaves = [next(values) if leaf is _OPERAND else leaf for leaf in leaves]
    args, kwargs = optree.tree_unflatten(tree, leaves)
    function(*args, **kwargs)
    return ()


def _batch(args: list, dims: list, **params: Any) -> tuple[tuple, tuple]:
    size = next(shape_of(a)[d] for a, d in zip(args, dims) if d is not None)
    for i in range(size):  # one call per example, in order
        example = [a if d is None else a[(slice(None),) * d + (i,)] for a, d in zip(args, dims)]
        debug_callback_p.bind(*example, **params)
    return (), ()


debug_callback_p = _Effect("debug_callback", _call, multiple_results=True, differentiable=False,
                           shape=lambda *avals, **params: ())  # fmt: skip
debug_callback_p.def_batch(_batch)
_OPERAND = object()  # where an operand goes among the leaves


def callback(function: Callable, *args: Any, ordered: bool = False, **kwargs: Any) -> None:
    """Call ``function(*args, **kwargs)`` with the concrete values of ``args`` (pytrees)
    where the program reaches this line: eagerly, under ``grad``/``jvp`` (the primal
    values), under ``vmap`` (once per example, in order) and under ``jit`` (at every call,
    with that call's values).  ``ordered`` is accepted for JAX's sake: calls always happen
    in program order.  Returns None.

    >>> import numpy as np, autodiff
    >>> seen = []
    >>> def f(x):
    ...     autodiff.debug.callback(lambda v: seen.append(float(v)), x)
    ...     return x * x
    >>> _ = autodiff.vmap(autodiff.grad(f))(np.array([1.0, 2.0]))
    >>> _ = autodiff.jit(f)(3.0)
    >>> seen
    [1.0, 2.0, 3.0]
    """
    if not callable(function):
        raise TypeError(f"debug.callback(function, ...): function must be callable, got "
                        f"{function!r:.60}")  # fmt: skip
    if not isinstance(ordered, bool):
        raise TypeError(f"debug.callback(..., ordered=...) must be True or False, got {ordered!r}")
    leaves, tree = optree.tree_flatten((args, kwargs), none_is_leaf=True)
    operands = [leaf for leaf in leaves if _is_operand(leaf)]
    statics = tuple(_OPERAND if _is_operand(leaf) else leaf for leaf in leaves)
    debug_callback_p.bind(*operands, function=function, tree=tree, statics=statics)


def print(fmt: str, *args: Any, ordered: bool = False, **kwargs: Any) -> None:
    """Print ``fmt.format(*args, **kwargs)`` with the concrete values, as
    ``debug.callback`` calls a function (JAX's ``jax.debug.print``).

    >>> import numpy as np, autodiff
    >>> _ = autodiff.grad(lambda x: autodiff.debug.print("x = {}", x) or x * x)(2.0)
    x = 2.0
    >>> _ = autodiff.vmap(lambda x: autodiff.debug.print("x = {x}", x=x) or x)(np.arange(2.0))
    x = 0.0
    x = 1.0
    """
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print(fmt, ...): fmt must be a string, got {fmt!r:.60}")
    callback(lambda *a, **k: builtins.print(fmt.format(*a, **k)), *args, ordered=ordered,
             **kwargs)  # fmt: skip
