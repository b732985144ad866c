"""Batching: BatchInterpreter, BatchedTensor, vmap.

A BatchedTensor holds a value with one extra axis, ``bdim``, that runs over
the batch; everything else sees only its logical (per-example) shape.  Each
primitive applied to one calls the primitive's batching rule with the
unwrapped values and their batch axes; a primitive without one runs in a
Python loop over the batch (``batch_by_loop``), with a warning naming it.
"""

from __future__ import annotations

import functools
import re
import warnings
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from autodiff.core import conversions, trees
from autodiff.core import tracer as _tracer
from autodiff.core.args import (
    a_type,
    check_callable,
    check_chunk_size,
    check_randomness,
    is_array,
    is_list_of_numbers,
    leaf_paths,
    number_as_array,
)
from autodiff.core.arrays import batch_size_of
from autodiff.core.loading import load
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.stack import Interpreter, check_live, new_interpreter, owned
from autodiff.core.tracer import Tracer
from autodiff.debug import checking_nans
from autodiff.debug import rules_switch as checking
from autodiff.errors import (
    AutodiffWarning,
    ConcretizationError,
    TransformTypeError,
    TransformValueError,
)
from autodiff.interpreters.unseen_draws import check_not_drawn, unseen_sources
from autodiff.rules import compositions as _comp
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import bring_to_front
from autodiff.rules.creation import as_output

__all__ = ["BatchInterpreter", "BatchedTensor", "vmap"]


class BatchInterpreter(Interpreter):
    __slots__ = ("randomness", "size")
    transform = "vmap"

    def __init__(self, size: int, randomness: str = "error") -> None:
        super().__init__()
        self.size = size
        self.randomness = randomness  # what anp.random functions do (see vmap)


class BatchedTensor(Tracer):
    """A value under ``vmap``: the batched value and its batch axis."""

    __slots__ = ("bdim", "value")

    def __init__(self, interp, value, bdim) -> None:
        self._interp = interp
        self.value = value
        self.bdim = bdim  # None: the same for every example (a lifted constant)

    @property
    def _inner(self):
        return self.value

    @property
    def shape(self):
        shape = super().shape
        if self.bdim is None:
            return shape
        return shape[: self.bdim] + shape[self.bdim + 1 :]

    def _fields(self):
        return [f"value={self.value!r}", f"bdim={self.bdim}"]

    def _refuse(self, what, kind, frame):
        self._concrete(conversions.describe(frame, what, kind), kind)

    def _concrete(self, what, kind="read"):
        # The first sentence names the fix for what the code does with the value.
        raise ConcretizationError(
            f"{what} needs one {_NEEDS.get(kind, 'value')}, but it is batched by "
            f"{self._interp.describe()}: {_batched_fix(what, kind)}. "
            f"Python control flow (if/while/and/or, float(), int(), .item(), np.asarray()) "
            f"cannot depend on a batched value: anp.where(cond, x, y) chooses elementwise, "
            f"and autodiff.cond, switch, while_loop, fori_loop and scan run control flow "
            f"per example."
        )


_NEEDS = {"condition": "truth value", "array": "array"}


def _batched_fix(what: str, kind: str) -> str:
    if kind == "condition":
        return (
            "choose per example with anp.where(pred, a, b) or autodiff.cond(pred, "
            "true_fun, false_fun, x)"
        )
    if kind == "array":
        return f"{conversions.array_fix(str(what), _tracer.array_namespace)}, which batches"
    if kind == "value":
        return "keep it an array (each example sees its own), or compute it outside vmap"
    return "compute it outside vmap, or pass what it depends on unbatched (in_dims=None)"


@lift.register(BatchInterpreter, object)
def _lift_batched(interp: BatchInterpreter, x: Any):
    return BatchedTensor(interp, x, None)  # the same for every example


@process.register(BatchInterpreter, Primitive)
def _batch(interp: BatchInterpreter, prim: Primitive, args: tuple, params: dict):
    batch_rule = prim.batch if prim.batch is not None else batch_by_loop(prim)
    values = [arg.value for arg in args]
    dims = [arg.bdim for arg in args]
    try:
        out, out_dim = batch_rule(values, dims, **params)
    except ValueError as e:
        # NumPy's shape errors (not ours, LinAlgError, AxisError or a user's other errors)
        if type(e) is not ValueError or not _SHAPE_WORDS.search(str(e)):
            raise
        raise _shape_error(prim, interp, args, e) from e
    if checking.get():
        checks = load("autodiff.debug.rule_checks")
        checks.validate_batch(prim, out, out_dim, values, dims, params, interp.size)
    if checking_nans():
        load("autodiff.debug.nans").check_output(prim, values, out)
    if prim.multiple_results:
        return tuple(_wrap(interp, o, d) for o, d in zip(out, out_dim))
    return _wrap(interp, out, out_dim)


_SHAPE_WORDS = re.compile(r"shape|broadcast|dimension|size")


def _shape_error(prim: Primitive, interp: BatchInterpreter, args: tuple, error: Exception):
    """NumPy's shape errors under vmap show batched shapes: name the per-example ones."""
    shapes = ", ".join(str(tuple(getattr(arg, "shape", ()))) for arg in args)
    return TransformValueError(
        f"{prim.name} under {interp.describe()}: {str(error).rstrip().rstrip('.')}. The "
        f"shapes NumPy reports include the batch axis (size {interp.size}); per example, "
        f"the arguments of {prim.name} have shapes {shapes}. Fix the per-example shapes, "
        f"and check that in_dims names the batch axis of each input."
    )


def _wrap(interp: BatchInterpreter, value: Any, bdim: int | None) -> Any:
    return value if bdim is None else BatchedTensor(interp, value, bdim)


# --- the fallback: a loop over the batch ----------------------------------------------

_warned: weakref.WeakSet[Primitive] = weakref.WeakSet()


def batch_by_loop(prim: Primitive) -> Callable:
    """A batching rule that loops over the batch (for primitives without one)."""

    def batch(args, dims, **params):
        size = batch_size_of(args, dims)
        if prim not in _warned:
            _warned.add(prim)
            warnings.warn(
                f"primitive '{prim.name}' has no batching rule, so vmap runs it in a Python "
                f"loop over the batch ({size} calls here). Add one with "
                f"the primitive's def_batch(rule) (see autodiff/rules/README.md).",
                AutodiffWarning,
                stacklevel=2,
            )
        if size == 0:  # run one stand-in example for the result's shape and dtype
            example = prim.bind(*(a if d is None else _zero_example(a, d)
                                  for a, d in zip(args, dims)), **params)  # fmt: skip
            if prim.multiple_results:
                return tuple(_empty_batch(o) for o in example), (0,) * len(example)
            return _empty_batch(example), 0
        outs = [
            prim.bind(*(a if d is None else _take(a, d, i) for a, d in zip(args, dims)), **params)
            for i in range(size)
        ]
        if prim.multiple_results:
            return tuple(_shp.stack(list(col)) for col in zip(*outs)), (0,) * len(outs[0])
        return _shp.stack(outs), 0

    return batch


def _zero_example(x: Any, bdim: int) -> Any:
    """Zeros shaped like one example of ``x`` (which has none), of x's array library."""
    return np.zeros_like(_red.sum(x, axis=bdim), dtype=x.dtype)


def _empty_batch(example: Any) -> Any:
    return bring_to_front(example, None, 0)  # a batch of 0 examples like ``example``


# --- vmap ------------------------------------------------------------------------


def _check_dims_spec(spec: Any, name: str) -> None:
    for leaf in trees.leaves(spec, none_is_leaf=True):
        if leaf is not None and (not isinstance(leaf, (int, np.integer)) or isinstance(leaf, bool)):
            raise TransformTypeError(
                f"vmap(func, {name}=...): every entry of {name} must be an int or None, "
                f"got {type(leaf).__name__} {leaf!r:.40} in {spec!r:.80}."
            )


def _broadcast_prefix(spec: Any, tree: Any, what: str, name: str) -> list:
    """One dim per leaf of ``tree``, from ``spec``, a pytree prefix of ``tree``."""
    dims, prefix = trees.flatten(spec, none_is_leaf=True)
    try:
        subtrees = prefix.flatten_up_to(tree)
    except ValueError as e:
        raise TransformValueError(
            f"vmap: {name} {spec!r:.80} does not match the structure of {what} "
            f"({trees.flatten(tree)[1]}); give one entry per leaf or a prefix "
            f"of its structure ({e})."
        ) from None
    return [d for d, sub in zip(dims, subtrees) for _ in trees.leaves(sub)]


def _flatten_inputs(args: tuple, in_dims: Any):
    if isinstance(in_dims, (tuple, list)):
        if len(in_dims) != len(args):
            raise TransformValueError(
                f"vmap: in_dims has {len(in_dims)} entries but the function was called "
                f"with {len(args)} positional arguments; give one in_dims entry per "
                f"positional argument (keyword arguments are never batched)."
            )
        dims = []
        for i, (spec, arg) in enumerate(zip(in_dims, args)):
            dims += _broadcast_prefix(spec, arg, f"argument {i}", f"in_dims[{i}]")
    else:
        dims = _broadcast_prefix(in_dims, args, "the arguments", "in_dims")
    flat, tree = trees.flatten(args)
    paths = leaf_paths(args)
    out_dims: list[int | None] = []
    tops = [i for i, arg in enumerate(args) for _ in trees.leaves(arg)]
    for leaf, dim, path, top in zip(flat, dims, paths, tops):
        check_live(leaf)  # a leaked tracer raises here, even if func never uses it
        if dim is None:
            out_dims.append(None)
            continue
        if not is_array(leaf):
            raise TransformValueError(_unmappable(leaf, dim, path, top, args))
        ndim = len(leaf.shape)
        if ndim == 0:
            raise TransformValueError(
                f"vmap: in_dims maps {path} over axis {dim}, but that input is 0-d (shape "
                f"()), so it has no axis to map over. Use in_dims=None for it, or give "
                f"it a batch axis."
            )
        if not -ndim <= dim < ndim:
            raise TransformValueError(
                f"vmap: in_dims for {path} is {dim}, but that input has shape "
                f"{tuple(leaf.shape)} ({ndim} dims); in_dims must be in "
                f"[{-ndim}, {ndim}) or None."
            )
        out_dims.append(int(dim) % ndim)
    return flat, out_dims, tree, paths


def _unmappable(leaf: Any, dim: int, path: str, top: int, args: tuple) -> str:
    """The message for a mapped input that is not an array: a list of numbers (JAX and
    torch users pass one where they mean an array) or a Python number or object."""
    arg = args[top]
    if is_list_of_numbers(arg):
        kind = type(arg).__name__
        return (
            f"vmap: argument {top} is {a_type(arg)} of {len(arg)} numbers, not an array: "
            f"pass np.asarray(...) of it to map over its elements. A {kind} is a pytree of "
            f"inputs to vmap, each mapped over its own axis {dim}, and a number has none; "
            f"in_dims=None would pass the whole {kind} to every example."
        )
    spelled = tuple(None if i == top else 0 for i in range(len(args)))
    return (
        f"vmap: {path} is {a_type(leaf)}, which has no axis {dim} to map over: give it "
        f"in_dims=None (in_dims={spelled} here) to pass it to every example, or pass an "
        f"array. Only arrays are batched."
    )


def _batch_size(flat: list, dims: list, paths: list) -> int:
    sizes = {path: leaf.shape[d] for leaf, d, path in zip(flat, dims, paths) if d is not None}
    if not sizes:
        raise TransformValueError(
            "vmap: no input is batched (every in_dims entry is None, or there are no "
            "array inputs); at least one input must be mapped over an axis."
        )
    if len(set(sizes.values())) > 1:
        listing = ", ".join(f"{path} has size {size}" for path, size in sizes.items())
        raise TransformValueError(
            f"vmap: inconsistent batch sizes along the mapped axes: {listing}. All "
            f"mapped inputs must have the same size along their in_dims axis."
        )
    return next(iter(sizes.values()))


def _out_dims_for(out: Any, out_dims: Any) -> list:
    if isinstance(out_dims, (int, np.integer)) or out_dims is None:
        return [out_dims] * len(trees.leaves(out))
    return _broadcast_prefix(out_dims, out, "the function's output", "out_dims")


def _unbatch_output(interp: BatchInterpreter, leaf: Any, out_dim: int | None, i: int) -> Any:
    mine = owned(interp, leaf)
    value, bdim = (leaf, None) if mine is None else (mine.value, mine.bdim)
    if out_dim is None:
        if bdim is not None:
            raise TransformValueError(
                f"vmap: out_dims is None for output {i}, but that output depends on "
                f"the batched inputs; give it an integer out_dim."
            )
        return value
    # A Python bool too (a flag the function returns): JAX broadcasts it like a number.
    value = np.asarray(value) if isinstance(value, bool) else number_as_array(value)
    if not is_array(value):
        raise TransformTypeError(
            f"vmap: output {i} of func is {a_type(value)}, not an array; "
            f"give it out_dims=None to pass it through unbatched."
        )
    ndim = len(value.shape) + (bdim is None)
    if not -ndim <= out_dim < ndim:
        raise TransformValueError(
            f"vmap: out_dims {out_dim} is out of range for output {i}, which has "
            f"{ndim} dims once batched; out_dims must be in [{-ndim}, {ndim})."
        )
    out_dim %= ndim
    if bdim is None:  # the same for every example: broadcast it
        value = _shp.expand_dims(value, out_dim)
        shape = list(value.shape)
        shape[out_dim] = interp.size
        return _shp.broadcast_to(value, tuple(shape))
    return _comp.moveaxis(value, bdim, out_dim)


class _Call(NamedTuple):
    """What one call of a vmapped function needs besides its flattened inputs."""

    func: Callable
    tree: Any  # the treedef of the positional arguments
    out_dims: Any
    kwargs: dict
    randomness: str


def _vmap_call(call: _Call, flat: list, dims: list, size: int) -> Any:
    interp = BatchInterpreter(size, call.randomness)
    unseen = unseen_sources(call.func) if call.randomness == "error" else ()
    with new_interpreter(interp):
        leaves = [_leaf(interp, x, d) for x, d in zip(flat, dims)]
        out = call.func(*trees.unflatten(call.tree, leaves), **call.kwargs)
        for rng, state in unseen:
            check_not_drawn(rng, state, interp.describe())
        out_flat, out_tree = trees.flatten(out)
        dims_out = _out_dims_for(out, call.out_dims)
        results = [
            as_output(_unbatch_output(interp, leaf, d, i))
            for i, (leaf, d) in enumerate(zip(out_flat, dims_out))
        ]
    return trees.unflatten(out_tree, results)


def _leaf(interp: BatchInterpreter, x: Any, bdim: int | None) -> Any:
    if bdim is not None:
        return BatchedTensor(interp, x, bdim)
    if isinstance(x, np.random.Generator) and _tracer.array_namespace is not None:
        # A Generator argument: its draws follow randomness, like anp.random's.
        return _tracer.array_namespace.random.vmapped_generator(x)
    return x


def _take(x: Any, dim: int, index: Any) -> Any:
    return x[(slice(None),) * dim + (index,)]


def _copy(x: Any) -> Any:
    return x.copy() if isinstance(x, np.ndarray) else x


def _chunked_call(call: _Call, flat: list, dims: list, size: int, chunk_size: int) -> Any:
    outs = []
    for start in range(0, size, chunk_size):
        if chunk_size == 1:  # a plain loop: vmap's constraints don't apply
            # copies, not views: func may update its (traced, under vmap) inputs in place
            leaves = [x if d is None else _copy(_take(x, d, start)) for x, d in zip(flat, dims)]
            outs.append(call.func(*trees.unflatten(call.tree, leaves), **call.kwargs))
        else:
            piece = slice(start, start + chunk_size)
            leaves = [x if d is None else _take(x, d, piece) for x, d in zip(flat, dims)]
            outs.append(_vmap_call(call, leaves, dims, min(chunk_size, size - start)))
    dims_out = _out_dims_for(outs[0], call.out_dims)
    _check_chunks(outs, dims_out, chunk_size)
    columns = zip(*(trees.leaves(o) for o in outs))
    joined = []
    for column, d in zip(columns, dims_out):
        if d is None:
            joined.append(column[0])
        elif chunk_size == 1:
            joined.append(_shp.stack(column, axis=d))
        else:
            joined.append(_shp.concatenate(column, axis=d))
    return trees.unflatten(trees.flatten(outs[0])[1], joined)


def _check_chunks(outs: list, dims_out: list, chunk_size: int) -> None:
    """The chunks' outputs can be joined: one structure, and (chunk_size=1, a plain
    loop, where nothing else checks it) one shape per output and, for out_dims None,
    one value."""
    structure = trees.flatten(outs[0])[1]
    for k, out in enumerate(outs):
        if trees.flatten(out)[1] != structure:
            raise TransformValueError(
                f"vmap(..., chunk_size={chunk_size}): func returned "
                f"{trees.flatten(out)[1]} for example {k * chunk_size} but {structure} "
                f"for example 0; every example's output must have the same structure."
            )
    if chunk_size != 1:  # vmap itself checked each chunk
        return
    for i, (column, d) in enumerate(zip(zip(*map(trees.leaves, outs)), dims_out)):
        for k, leaf in enumerate(column):
            if np.shape(leaf) != np.shape(column[0]):
                raise TransformValueError(
                    f"vmap(..., chunk_size=1): output {i} has shape {np.shape(column[0])} "
                    f"for example 0 but {np.shape(leaf)} for example {k}; examples can be "
                    f"batched only if their outputs' shapes do not depend on the data (as "
                    f"for x[x > 0]): use anp.where(cond, x, fill) for a fixed shape."
                )
            plain = not isinstance(leaf, Tracer) and not isinstance(column[0], Tracer)
            if d is None and plain and not np.array_equal(leaf, column[0], equal_nan=True):
                raise TransformValueError(
                    f"vmap: out_dims is None for output {i}, but that output depends on "
                    f"the batched inputs (example {k} differs from example 0); give it an "
                    f"integer out_dim."
                )


def vmap(
    func: Callable,
    in_dims: Any = 0,
    out_dims: Any = 0,
    *,
    randomness: str = "error",
    chunk_size: int | None = None,
) -> Callable:
    """Vectorise ``func`` over an axis of its inputs.

    ``in_dims`` is an int (the axis of every input), ``None`` (not batched), or
    a tuple with one entry per positional argument, each an int, ``None`` or a
    pytree prefix of that argument (e.g. ``{"w": None, "b": 0}``).  Negative
    axes count from the end.  Keyword arguments are never batched.  ``out_dims``
    says where the batch axis goes in each output (int, ``None`` for an output
    that does not depend on the batch, or a pytree prefix).  An output that
    ignores the batched inputs is broadcast along the batch.

    ``randomness`` says what ``autodiff.numpy.random`` functions, and the draws of a
    ``numpy.random.Generator`` passed as an argument (``in_dims=None`` for it), do
    inside: ``"error"`` raises, ``"different"`` draws independently for each example
    (for one random call, exactly the draws a Python loop over the batch makes, in
    order), ``"same"`` draws once for the whole batch.  **NumPy's draws that vmap does
    not see** (a Generator the function closes over, ``np.random.normal()``) **draw
    once for the whole batch**: every example gets the same value.  Under
    ``randomness="error"`` vmap raises after the call if the generators the function
    closes over or names (or NumPy's global functions its code names) drew; one reached
    only through another object or module is not seen.  Write ``anp.random.normal(...)``
    or pass the Generator as an argument.
    ``chunk_size=k`` runs ``k`` examples at a time with the same result;
    ``chunk_size=1`` is a plain Python loop (data-dependent control flow
    works, and random functions draw as in a loop).

    Inside ``func``, values batched by ``vmap`` have their per-example shape.
    Python control flow cannot depend on them; use ``anp.where``.

    >>> import numpy as np
    >>> from autodiff import vmap
    >>> vmap(lambda row: row.sum())(np.arange(6.0).reshape(2, 3))
    array([ 3., 12.])
    >>> noisy = vmap(lambda x, rng: x + rng.normal(), (0, None), randomness="different")
    >>> noisy(np.zeros(3), np.random.default_rng(0)).round(2)  # a draw per example
    array([ 0.13, -0.13,  0.64])
    """
    check_callable(func, "vmap")
    _check_dims_spec(in_dims, "in_dims")
    _check_dims_spec(out_dims, "out_dims")
    check_randomness(randomness, "vmap")
    check_chunk_size(chunk_size, "vmap")

    @functools.wraps(func)
    def batched(*args, **kwargs):
        flat, dims, tree, paths = _flatten_inputs(args, in_dims)
        size = _batch_size(flat, dims, paths)
        call = _Call(func, tree, out_dims, kwargs, randomness)
        if chunk_size is not None and chunk_size < size:
            return _chunked_call(call, flat, dims, size, chunk_size)
        return _vmap_call(call, flat, dims, size)

    return batched
