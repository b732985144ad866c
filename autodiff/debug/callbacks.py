"""``autodiff.debug.callback`` and ``autodiff.debug.print`` (JAX's ``jax.debug``): a
function of the concrete values, called where the program reaches it, under any transform;
and ``autodiff.pure_callback`` (JAX's ``jax.pure_callback``): a NumPy function of concrete
values whose results the program uses.

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

from autodiff.core.arrays import shape_of
from autodiff.core.graph import ShapedArray
from autodiff.core.primitive import Primitive
from autodiff.core.stack import current_interpreters
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError

__all__ = ["callback", "print", "pure_callback"]


class _Effect(Primitive):
    """A primitive run for its effect, at every replay, in order (never dropped)."""

    __slots__ = ()
    effectful = True


def _is_operand(x: Any) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic, float, complex)) and not isinstance(
        x, bool
    )


def _call(*operands: Any, function: Callable, tree: Any, statics: tuple) -> tuple:
    import optree  # imported at first use: a program without callbacks never needs it

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
    import optree

    if not callable(function):
        raise TypeError(f"debug.callback(function, ...): function must be callable, got "
                        f"{function!r:.60}")  # fmt: skip
    if not isinstance(ordered, bool):
        raise TypeError(f"debug.callback(..., ordered=...) must be True or False, got {ordered!r}")
    leaves, tree = optree.tree_flatten((args, kwargs), none_is_leaf=True)
    operands = [leaf for leaf in leaves if _is_operand(leaf)]
    statics = tuple(_OPERAND if _is_operand(leaf) else leaf for leaf in leaves)
    staging: Any = next((i for i in reversed(current_interpreters()) if i.stages), None)
    if staging is not None:  # recorded even with no traced operand: under jit the call
        # happens at every call of the jitted function, not once while it is staged (an
        # unused 0-d operand carries a call with none)
        operands = [x if isinstance(x, Tracer) else staging.staged(x)
                    for x in operands or [np.zeros(())]]  # fmt: skip
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


# --- pure_callback: a function of concrete values whose results the program uses -------------

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")


def _pure_call(*operands: Any, function: Callable, results: tuple, vmap_method: Any) -> tuple:
    return _checked(function(*operands), results)


def _pure_shape(*avals: Any, function: Callable, results: tuple, vmap_method: Any) -> tuple:
    return tuple(ShapedArray(shape, dtype) for shape, dtype in results)


def _no_derivative(*args: Any, **params: Any) -> Any:
    raise TransformValueError(
        "pure_callback has no derivative: its function runs outside the transforms. Wrap "
        "the call in autodiff.custom_jvp or custom_vjp and give the rule, or pass the "
        "differentiated value through stop_gradient if it is a constant on purpose."
    )


def _pure_batch(args: list, dims: list, *, function: Callable, results: tuple,
                vmap_method: Any) -> tuple[tuple, tuple]:  # fmt: skip
    if vmap_method not in VMAP_METHODS:
        raise TransformValueError(
            f"vmap of pure_callback needs vmap_method= (one of {', '.join(VMAP_METHODS)}); "
            f"got {vmap_method!r}: 'sequential' calls the function once per example, "
            f"'expand_dims' once with the batch as a leading axis (size 1 where unbatched)."
        )
    size = next(shape_of(a)[d] for a, d in zip(args, dims) if d is not None)

    def batched(*operands: Any) -> tuple:  # concrete values: NumPy does the slicing
        leading = [np.asarray(o)[None] if d is None else np.moveaxis(o, d, 0)
                   for o, d in zip(operands, dims)]  # fmt: skip
        if vmap_method == "expand_dims":
            return function(*leading)
        if vmap_method == "broadcast_all":
            return function(*[np.broadcast_to(o, (size, *o.shape[1:])) for o in leading])
        each = [_checked(function(*[o[0] if d is None else o[i] for o, d in zip(leading, dims)]),
                         results) for i in range(size)]  # fmt: skip
        if not each:  # an empty batch: no call
            return tuple(np.empty((0, *shape), dtype) for shape, dtype in results)
        return tuple(np.stack(column) for column in zip(*each))

    batched_results = tuple(((size, *shape), dtype) for shape, dtype in results)
    outs = pure_callback_p.bind(*args, function=batched, results=batched_results,
                                vmap_method=vmap_method)  # fmt: skip
    return outs, (0,) * len(outs)


def _checked(outs: tuple, results: tuple) -> tuple:
    """The function's results checked against the declared shapes and dtypes."""
    if len(outs) != len(results):
        raise TransformTypeError(f"pure_callback: the function returned {len(outs)} arrays "
                                 f"where result_shape_dtypes declares {len(results)}.")  # fmt: skip
    checked = []
    for i, (out, (shape, dtype)) in enumerate(zip(outs, results)):
        out = np.array(out)  # a fresh array: the function may keep and change its own
        if out.shape != shape or out.dtype != dtype:
            raise TransformTypeError(
                f"pure_callback: result {i} of the function has shape {out.shape} and dtype "
                f"{out.dtype}, where result_shape_dtypes declares {shape} and "
                f"{np.dtype(dtype)}: return what was declared (x.astype(...))."
            )
        checked.append(out)
    return tuple(checked)


pure_callback_p = Primitive("pure_callback", _pure_call, jvp=_no_derivative,
                            multiple_results=True, shape=_pure_shape)  # fmt: skip
pure_callback_p.def_batch(_pure_batch)


def pure_callback(callback: Callable, result_shape_dtypes: Any, *args: Any,
                  vmap_method: str | None = None, **kwargs: Any) -> Any:  # fmt: skip
    """Call ``callback(*args, **kwargs)`` on the concrete values of ``args`` (pytrees) and
    return its results, which must have the shapes and dtypes of ``result_shape_dtypes``
    (a pytree of objects with ``.shape`` and ``.dtype``: arrays, ``jax.ShapeDtypeStruct``)
    (JAX's ``jax.pure_callback``).  The function must be pure: under ``jit`` it runs at
    every call (or not at all, if nothing uses its results).  Under ``vmap``,
    ``vmap_method`` says how: ``"sequential"`` calls it once per example and stacks the
    results; ``"expand_dims"`` once, with batched arguments' batch axis first and size 1
    for the others; ``"broadcast_all"`` likewise with every argument broadcast to the batch.
    It has no derivative: under ``grad``/``jvp`` of its inputs it raises (wrap it in
    ``custom_jvp``).

    >>> import numpy as np, autodiff
    >>> def f(x):
    ...     return autodiff.pure_callback(np.sinc, np.empty(x.shape, x.dtype), x,
    ...                                   vmap_method="sequential")
    >>> autodiff.jit(autodiff.vmap(f))(np.array([0.0, 0.5])).round(4)
    array([1.    , 0.6366])
    """
    import optree

    if not callable(callback):
        raise TypeError(f"pure_callback(callback, ...): callback must be callable, got "
                        f"{callback!r:.60}")  # fmt: skip
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"pure_callback(..., vmap_method={vmap_method!r}): use one of "
                         f"{', '.join(VMAP_METHODS)}")  # fmt: skip
    specs, out_tree = optree.tree_flatten(result_shape_dtypes, none_is_leaf=False)
    try:
        results = tuple((tuple(int(n) for n in spec.shape), np.dtype(spec.dtype)) for spec in specs)
    except (AttributeError, TypeError):
        raise TypeError("pure_callback: result_shape_dtypes must be a pytree of objects with "
                        ".shape and .dtype (np.empty(shape, dtype), jax.ShapeDtypeStruct), got "
                        f"{result_shape_dtypes!r:.80}") from None  # fmt: skip
    leaves, tree = optree.tree_flatten((args, kwargs), none_is_leaf=True)
    statics = tuple(_OPERAND if _is_operand(leaf) else leaf for leaf in leaves)

    def flat(*operands: Any) -> tuple:
        values = iter(operands)
        given = [next(values) if leaf is _OPERAND else leaf for leaf in statics]
        call_args, call_kwargs = optree.tree_unflatten(tree, given)
        out = callback(*call_args, **call_kwargs)
        outs, got_tree = optree.tree_flatten(out, none_is_leaf=False)
        if got_tree != out_tree:
            raise TransformTypeError(f"pure_callback: the function returned {got_tree}, where "
                                     f"result_shape_dtypes declares {out_tree}.")  # fmt: skip
        return tuple(outs)

    operands = [leaf for leaf in leaves if _is_operand(leaf)]
    outs = pure_callback_p.bind(*operands, function=flat, results=results,
                                vmap_method=vmap_method)  # fmt: skip
    return optree.tree_unflatten(out_tree, list(outs))
