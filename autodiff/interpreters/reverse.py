"""Reverse mode: GradInterpreter, GradTensor, the tape, vjp / grad / no_grad.

Under ``vjp`` every primitive applied to a GradTensor records a ``Node``: the
primitive, its parameters, its inputs and output (the residuals its VJP rule
reads), and the nodes of the inputs that need a cotangent.  ``vjp_fn`` walks
the nodes from the outputs back to the inputs in reverse topological order,
calling VJP rules.  The walk runs ordinary primitives after the level ended,
so outer transforms (a surrounding ``grad`` or ``vmap``) record or batch it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.args import (
    as_input_array,
    as_tangent,
    at_positions,
    check_argnums_type,
    check_callable,
    check_flag,
    check_no_none,
    is_array,
    leaf_paths,
    normalize_argnums,
    note_list_inputs,
    number_as_array,
    numbers_for_array,
    split_aux,
)
from autodiff.core.arrays import is_complex, shape_of
from autodiff.core.loading import load
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.rule_forms import linear_taylor
from autodiff.core.stack import (
    Interpreter,
    current_interpreters,
    live_again,
    new_interpreter,
    owned,
)
from autodiff.core.tracer import Tracer
from autodiff.debug import checking_nans
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.tape import Node, backward, keep_residuals
from autodiff.rules._helpers import sparsity_kit
from autodiff.rules.creation import as_output
from autodiff.rules.elementwise import stop_gradient as _stop

__all__ = [
    "GradInterpreter",
    "GradTensor",
    "grad",
    "grad_and_value",
    "no_grad",
    "stop_gradient",
    "value_and_grad",
    "vjp",
]

# Grad levels at or below this one record nothing (see no_grad); a staging at or below
# it marks what it records (no_grad_p), for the transforms of its graph.
no_grad_below: contextvars.ContextVar[int] = contextvars.ContextVar(
    "autodiff_no_grad_below", default=0
)


class GradInterpreter(Interpreter):
    __slots__ = ("keep_all_residuals", "name")
    transform = "grad"
    lifts = False  # process treats foreign arguments as constants itself

    def __init__(self, name: str = "grad", keep_all_residuals: bool = False) -> None:
        super().__init__()
        self.name = name
        # linearize replays JVP rules over the tape, which read any residual.
        self.keep_all_residuals = keep_all_residuals

    def describe(self) -> str:
        return f"{self.name} (level {self.level})"


class GradTensor(Tracer):
    """A value under reverse mode: its value and the tape node that made it."""

    __slots__ = ("index", "node", "value")

    def __init__(self, interp, value, node, index=None) -> None:
        self._interp = interp
        self.value = value
        self.node = node  # None: a constant at this level
        self.index = index  # output position, for multiple-result primitives

    @property
    def _inner(self):
        return self.value

    def _refuse(self, what, kind, frame):  # noqa: ARG002  (every kind drops it)
        # Converting drops the derivative unless no_grad() covers this level (the user
        # stopped it on purpose) or the value is a constant at it.
        if self.node is not None and recording(self._interp):
            raise self._derivative_error(what, frame)


@lift.register(GradInterpreter, object)
def _lift_grad(interp: GradInterpreter, x: Any):
    return GradTensor(interp, x, None)  # a constant at this level (bind never asks: lifts=False)


def recording(interp: GradInterpreter) -> bool:
    """Whether ``interp`` records: not inside a ``no_grad()`` entered at or above its level."""
    return interp.level > no_grad_below.get()


def no_grad_level() -> int:
    """What ``no_grad()`` covers now (the grad levels at or below it record nothing): kept
    by work that records again later (``recording_again``)."""
    return no_grad_below.get()


@contextlib.contextmanager
def recording_again(interp: GradInterpreter, no_grad: int) -> Iterator[None]:
    """``interp`` recording again after its transform ended, as when it ran: live again
    (``core.stack.live_again``) and ``no_grad()`` covering ``no_grad`` (what
    ``no_grad_level()`` returned then).  The backward pass of ``scan(...,
    checkpoint=True)`` recomputes each step so, on a tape of its own that reaches the
    nodes the values the step closes over had in the forward pass."""
    with live_again(interp):
        token = no_grad_below.set(no_grad)
        try:
            yield
        finally:
            no_grad_below.reset(token)


def unpack(interp: GradInterpreter, args: tuple) -> tuple[list, list, bool]:
    """The values of ``args``; ``(position, node, index)`` for each that needs a
    cotangent; whether any value is a tracer of a lower level.  Arguments that
    are not GradTensors of ``interp`` arrive unlifted (``lifts = False``): they
    are constants here."""
    values = []
    parents = []
    traced = False
    for i, arg in enumerate(args):
        if isinstance(arg, GradTensor) and arg._interp is interp:
            value = arg.value
            if arg.node is not None:
                parents.append((i, arg.node, arg.index))
        else:
            value = arg
        traced = traced or isinstance(value, Tracer)
        values.append(value)
    return values, parents, traced


@process.register(GradInterpreter, Primitive)
def _record(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    # The hot path of reverse mode: one Node and one GradTensor per primitive.
    values, parents, traced = unpack(interp, args)
    # (not recording(interp), inlined: this is the hot path)
    if not prim.differentiable or not parents or interp.level <= no_grad_below.get():
        return prim.bind(*values, **params)
    if prim.vjp is None and prim.jvp is None:  # one is enough: the other is its transpose
        raise prim.missing("VJP", interp)
    # With no lower-level tracer left, bind would call impl: skip its search.
    ans = prim.bind(*values, **params) if traced else prim.impl(*values, **params)
    if prim.vjp_reads is None or interp.keep_all_residuals:
        node = Node(prim, params, values, ans, parents)
    else:
        primals, kept = keep_residuals(prim, values, ans, [i for i, _, _ in parents])
        node = Node(prim, params, primals, kept, parents)
    if checking_nans():
        nans = load("autodiff.debug.nans")
        nans.check_output(prim, values, ans)
        node.site = (nans.user_site(), interp.describe())
    if prim.multiple_results:
        return tuple([GradTensor(interp, a, node, i) for i, a in enumerate(ans)])
    return GradTensor(interp, ans, node)


def _match_realness(ct: Any, primal: Any) -> Any:
    """The cotangent of a real value is real: drop the imaginary part a rule
    produced where a real value met complex ones (JAX's convention)."""
    return np.real(ct) if is_complex(ct) and not is_complex(primal) else ct


# --- vjp -------------------------------------------------------------------------


class _VJPFunction:
    """The ``vjp_fn`` returned by :func:`vjp`; callable many times, any time."""

    def __init__(self, transform, in_tree, in_nodes, in_values, out_tree, out_meta):
        self._consume = False  # grad's private vjp_fn runs once and frees the tape as it goes
        self._transform = transform
        self._in_tree = in_tree
        self._in_nodes = in_nodes
        self._in_values = in_values
        self._out_tree = out_tree
        self._out_meta = out_meta  # per output leaf: (node, index, shape, dtype)

    def __call__(self, *args: Any) -> tuple:
        if len(args) != 1:
            raise TransformTypeError(
                f"vjp_fn takes exactly one argument (the cotangents, structured like "
                f"the output), got {len(args)}. Pass a tuple for tuple outputs."
            )
        flat, tree = trees.flatten(args[0])
        if tree is not self._out_tree and tree != self._out_tree:
            listed = numbers_for_array((args[0],), _one(self._out_tree), "vjp_fn: cotangent")
            raise TransformValueError(
                (f"{listed} " if listed else "")
                + f"vjp_fn: the cotangent structure {tree} does not match the structure "
                f"of the function's output {self._out_tree}; pass one cotangent per "
                f"output, in the same containers."
            )
        seeds = []
        for i, (ct, (node, index, shape, dtype)) in enumerate(zip(flat, self._out_meta)):
            ct = as_tangent(ct, dtype, f"cotangent {i}", "vjp_fn")
            if shape_of(ct) != shape:
                raise TransformValueError(
                    f"vjp_fn: cotangent {i} has shape {shape_of(ct)} but the "
                    f"output it belongs to has shape {shape}; pass one with the "
                    f"output's shape (e.g. np.ones_like(out))."
                )
            if node is not None:
                seeds.append((node, index, ct))
        input_cts = backward(seeds, self._consume) if seeds else {}
        grads = []
        for node, value in zip(self._in_nodes, self._in_values):
            ct = input_cts.get(node)
            if ct is None:
                ct = np.zeros_like(value)
            elif ct.dtype != value.dtype:
                # e.g. float64 constants met a float32 input: gradients keep the input's dtype
                ct = _match_realness(ct, value).astype(value.dtype)
            grads.append(as_output(ct))
        return trees.unflatten(self._in_tree, grads)


def _one(tree: Any) -> Any:
    """The treespec of ``(x,)`` for ``x`` structured as ``tree``."""
    import optree  # (for an error's message)

    return optree.tree_structure((trees.unflatten(tree, [0] * tree.num_leaves),))


def _vjp(
    func: Callable,
    primals: tuple,
    has_aux: bool,
    transform: str,
    positions=None,
    keep_all_residuals: bool = False,
):
    check_no_none(primals, transform, positions)
    flat, in_tree = trees.flatten(primals)
    if not all(type(x) is np.ndarray and x.dtype.kind in "fc" for x in flat):
        # (floating-point arrays pass as they are: the check, and the names of the
        # leaves its messages need, only for the others)
        flat = [
            as_input_array(x, what, transform, differentiable=True)
            for x, what in zip(flat, leaf_paths(primals, positions))
        ]
    interp = GradInterpreter(transform, keep_all_residuals)
    with new_interpreter(interp):
        in_nodes = [Node(None, {}, (), None, ()) for _ in flat]
        tracers = [GradTensor(interp, x, node) for x, node in zip(flat, in_nodes)]
        try:
            out = func(*trees.unflatten(in_tree, tracers))
        except TypeError as e:  # a list for an array: list ** 2 fails in func
            note_list_inputs(e, primals, transform)
            raise
        aux = None
        if has_aux:
            out, aux = split_aux(out, transform)
            aux = trees.tree_map(functools.partial(_unwrap, interp), aux)
        out_flat, out_tree = trees.flatten(out)
        values, meta = [], []
        for i, leaf in enumerate(out_flat):
            mine = owned(interp, leaf)
            if mine is None:
                value, node, index = number_as_array(leaf), None, None
            else:
                value, node, index = number_as_array(mine.value), mine.node, mine.index
            if not is_array(value) or np.dtype(value.dtype).kind not in "fc":
                what = type(value).__name__ if not is_array(value) else f"dtype {value.dtype}"
                raise TransformTypeError(
                    f"{transform}: output {i} of func is {what}; outputs must be "
                    f"floating-point arrays. Return other values as aux (has_aux=True)."
                )
            values.append(value)  # (vjp and grad_and_value return them as_output)
            meta.append((node, index, shape_of(value), value.dtype))
    vjp_fn = _VJPFunction(transform, in_tree, in_nodes, flat, out_tree, meta)
    return trees.unflatten(out_tree, values), vjp_fn, aux


def _unwrap(interp: GradInterpreter, x: Any) -> Any:
    return x.value if isinstance(x, GradTensor) and x._interp is interp else x


def vjp(func: Callable, *primals: Any, has_aux: bool = False):
    """Evaluate ``func(*primals)`` and return a function computing its VJP.

    Returns ``(output, vjp_fn)``, or ``(output, vjp_fn, aux)`` with
    ``has_aux=True`` (``func`` then returns ``(output, aux)``; ``aux`` is not
    differentiated).  ``primals`` and the output may be pytrees (tuples, lists,
    dicts, ...).  ``vjp_fn(cotangents)`` takes exactly one argument structured
    like the output and returns a tuple with one cotangent per primal.  It may
    be called many times, after ``vjp`` returned, and under other transforms:
    ``vmap(vjp_fn)(basis)`` gives a Jacobian.

    >>> import numpy as np
    >>> from autodiff import vjp
    >>> out, vjp_fn = vjp(lambda x, y: x * y, np.array(2.0), np.array(3.0))
    >>> [float(g) for g in vjp_fn(np.array(1.0))]
    [3.0, 2.0]
    """
    check_callable(func, "vjp")
    check_flag(has_aux, "has_aux", "vjp")
    out, vjp_fn, aux = _vjp(func, primals, has_aux, "vjp")
    out = trees.tree_map(as_output, out)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _grad_and_value_impl(func, argnums, has_aux, transform):
    check_callable(func, transform)
    check_argnums_type(argnums, transform)
    check_flag(has_aux, "has_aux", transform)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        positions = normalize_argnums(argnums, len(args), transform)
        diff_args = tuple(args[i] for i in positions)
        selected = at_positions(func, args, positions, kwargs)
        out, vjp_fn, aux = _vjp(selected, diff_args, has_aux, transform, positions)
        _check_scalar_output(out, transform, has_aux)
        vjp_fn._consume = True
        grads = vjp_fn(np.ones_like(out))
        grads = grads[0] if isinstance(argnums, (int, np.integer)) else grads
        if transform != "grad":  # (grad drops the value)
            out = trees.tree_map(as_output, out)
        return grads, ((out, aux) if has_aux else out)

    return wrapper


def _check_scalar_output(out: Any, transform: str, has_aux: bool) -> None:
    if not is_array(out):
        hint = "" if has_aux else " (if it returns (output, aux), pass has_aux=True)"
        raise TransformTypeError(
            f"{transform}(func): func must return a single scalar, but it returned a "
            f"{type(out).__name__}{hint}. For several outputs use vjp or jacrev."
        )
    shape = tuple(out.shape)
    if shape != ():
        hint = (
            ": index it (out[0]) or sum it (out.sum())"
            if shape == (1,)
            else ": reduce it (e.g. .sum() or .mean()), or use vjp/jacrev for non-scalar outputs"
        )
        raise TransformValueError(
            f"{transform}(func): func must return a scalar (shape ()), but it returned "
            f"shape {shape}{hint}."
        )
    if np.dtype(out.dtype).kind == "c":
        raise TransformTypeError(
            f"{transform}(func): func returned a complex scalar; {transform} needs a "
            f"real output. Use vjp for complex outputs, or take .real or abs()."
        )


def grad_and_value(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False):
    """Like :func:`grad`, but the wrapped function returns ``(gradient, value)``.

    With ``has_aux=True`` it returns ``(gradient, (value, aux))`` (torch.func's
    convention).

    >>> from autodiff import grad_and_value
    >>> g, v = grad_and_value(lambda x: x**2)(3.0)
    >>> float(g), float(v)
    (6.0, 9.0)
    """
    return _grad_and_value_impl(func, argnums, has_aux, "grad_and_value")


def value_and_grad(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False):
    """Like :func:`grad`, but returns ``(value, gradient)`` (JAX's order).

    With ``has_aux=True`` it returns ``((value, aux), gradient)``.

    >>> from autodiff import value_and_grad
    >>> v, g = value_and_grad(lambda x: x**2)(3.0)
    >>> float(v), float(g)
    (9.0, 6.0)
    """
    inner = _grad_and_value_impl(func, argnums, has_aux, "value_and_grad")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        grads, value = inner(*args, **kwargs)
        return value, grads

    return wrapper


def grad(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False):
    """The gradient of a scalar-valued ``func`` with respect to ``argnums``.

    ``argnums`` is an int (the gradient comes back bare) or a tuple of ints (a
    tuple of gradients, even for one entry); negative positions count from
    the end.  Gradients have the structure of their argument (a dict of
    parameters gives a dict).  With ``has_aux=True``, ``func`` returns
    ``(output, aux)`` and the wrapper returns ``(gradient, aux)``.  ``grad``
    nests and composes: ``grad(grad(f))``, ``vmap(grad(f))``.

    >>> import numpy as np
    >>> from autodiff import grad
    >>> float(grad(np.sin)(0.0))
    1.0
    >>> float(grad(grad(np.sin))(0.0))
    -0.0
    """
    inner = _grad_and_value_impl(func, argnums, has_aux, "grad")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        grads, value = inner(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return wrapper


# --- no_grad and stop_gradient ---------------------------------------------------


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Inside a function: don't differentiate what is computed in this block.

    It applies to every ``grad``/``vjp`` active when the block is entered.  A
    transform *called* inside the block still differentiates its own function
    (a function transform's result must not depend on context outside it).

    >>> from autodiff import grad, no_grad
    >>> def f(x):
    ...     with no_grad():
    ...         c = x**2
    ...     return x - c
    >>> float(grad(f)(3.0))
    1.0
    """
    stack = current_interpreters()
    level = max(stack[-1].level if stack else 0, no_grad_below.get())
    token = no_grad_below.set(level)
    try:
        yield
    finally:
        no_grad_below.reset(token)


class NoGradPrimitive(Primitive):
    """``no_grad_p``: a value computed inside ``no_grad()`` while ``jit`` staged it."""

    __slots__ = ()


# What no_grad() means, kept in a staged graph: reverse mode treats the value as a
# constant (as the grad levels it covered did not record it), forward mode and vmap
# pass it through (no_grad concerns reverse mode only, as torch's).  Replays drop it.
no_grad_p = NoGradPrimitive(
    "no_grad",
    lambda x: x,
    jvp=[lambda t, ans, x: t],
    batch=lambda args, dims: (no_grad_p.bind(*args), dims[0]),
    shape=lambda aval: aval,
    sparsity=sparsity_kit.elementwise([True], ()),  # each element its own, linear
)
no_grad_p.def_taylor(linear_taylor(no_grad_p))


@process.register(GradInterpreter, NoGradPrimitive)
def _no_grad_value(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    (x,) = args
    return prim.bind(x.value if isinstance(x, GradTensor) and x._interp is interp else x)


def stop_gradient(x: Any) -> Any:
    """``x`` as a constant for every transform's derivative (pytree-aware).

    Values still flow (and are batched by ``vmap``); derivatives do not.

    >>> from autodiff import grad, stop_gradient
    >>> float(grad(lambda x: x * stop_gradient(x))(3.0))
    3.0
    """
    return trees.tree_map(lambda leaf: _stop(leaf) if is_array(leaf) else leaf, x)
