"""``check_grads`` and ``check_vmap``: the numerical checkers ``autodiff.testing``
re-exports (see its docstring).  ``check_primitive`` builds on them
(``testing/primitive_checks.py``), which is why they live below both public modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.args import as_input_array, check_callable, check_no_none, leaf_paths
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import vjp

__all__ = ["check_grads", "check_vmap", "precision"]


def _check_args(f: Any, args: Any, checker: str) -> tuple:
    check_callable(f, checker)
    if not isinstance(args, (tuple, list)):
        raise TransformTypeError(
            f"{checker}(f, args): args must be a tuple (or list) of f's positional "
            f"arguments, got {type(args).__name__}; for one argument write (x,)."
        )
    return tuple(args)


def _random_like(tree: Any, rng: np.random.Generator) -> Any:
    def draw(x):
        x = np.asarray(x)
        out = rng.standard_normal(x.shape)
        if x.dtype.kind == "c":
            out = out + 1j * rng.standard_normal(x.shape)
        return out.astype(x.dtype)

    return trees.tree_map(draw, tree)


def _inner(a: Any, b: Any) -> float:
    """Re sum(a * b): bilinear, not conjugating.  With JAX's convention for
    complex numbers (which autodiff follows) <ct, J v> = <vjp(ct), v> holds in
    this pairing, and finite differences of <ct, f(x + t v)> give <ct, J v>."""
    xs, ys = trees.leaves(a), trees.leaves(b)
    if len(xs) != len(ys):
        raise AssertionError(
            f"check_grads: a derivative has {len(xs)} leaves where {len(ys)} are expected "
            f"(a rule dropped or added an output)"
        )
    return float(
        sum(np.real(np.sum(np.asarray(x) * np.asarray(y))) for x, y in zip(xs, ys, strict=True))
    )


def _conj(tree: Any) -> Any:
    return trees.tree_map(np.conj, tree)


def _axpy(t: float, v: Any, x: Any) -> Any:
    return trees.tree_map(lambda vi, xi: xi + t * vi, v, x)


def precision(tree: Any) -> float:
    """Machine epsilon of the least precise floating dtype among the leaves."""
    dtypes = [np.asarray(x).dtype for x in trees.leaves(tree)]
    return max((np.finfo(d).eps for d in dtypes if d.kind in "fc"), default=np.finfo(float).eps)


def check_grads(
    f: Callable,
    args: Sequence[Any],
    order: int = 2,
    modes: Sequence[str] = ("fwd", "rev"),
    *,
    eps: float | None = None,
    rtol: float | None = None,
    seed: int = 0,
) -> None:
    """Check ``f``'s derivatives at ``args`` up to ``order``.

    At each order: the reverse-mode VJP ``<vjp(ct), v>`` and the forward-mode
    JVP ``<ct, jvp(v)>`` (for random directions ``v`` and cotangents ``ct``)
    must match the central difference of ``<ct, f(x + t v)>`` to ``rtol``
    (beyond the difference's own round-off, which is estimated), and each
    other to ``rtol / 1000``.  Higher orders apply the same checks to the
    functions ``x -> vjp(ct)`` and ``x -> jvp(v)``.  ``eps`` and ``rtol``
    default by dtype: 1e-6 and 1e-6 in float64, 1e-3 and 2e-3 in float32.

    >>> import numpy as np
    >>> from autodiff.extend import Primitive
    >>> check_grads(lambda x: np.sin(x) * x, (np.array([0.3, 1.2]),), order=2)
    >>> wrong_p = Primitive("wrong_sin", np.sin, vjp=[lambda ct, ans, x: ct * np.sin(x)])
    >>> try:
    ...     check_grads(wrong_p.bind, (np.array([0.3]),), order=1)
    ... except AssertionError as e:
    ...     print(str(e)[:60])
    check_grads: derivatives of bind disagree (1 order(s) from t
    """
    args = _check_args(f, args, "check_grads")
    check_no_none(args, "check_grads")
    for x, what in zip(trees.leaves(args), leaf_paths(args), strict=True):
        as_input_array(x, what, "check_grads", differentiable=True)
    if not isinstance(order, (int, np.integer)) or isinstance(order, bool) or order < 1:
        raise TransformValueError(
            f"check_grads(..., order={order!r}): order must be a positive int (1: first "
            f"derivatives only)."
        )
    if isinstance(modes, str) or not modes or not set(modes) <= {"fwd", "rev"}:
        raise TransformValueError(
            f"check_grads(..., modes={modes!r}): modes must be a non-empty tuple of "
            f"'fwd' and 'rev', e.g. ('fwd', 'rev') or ('rev',)."
        )
    single = precision(args) > 1e-10
    eps = (1e-3 if single else 1e-6) if eps is None else eps
    rtol = (2e-3 if single else 1e-6) if rtol is None else rtol
    rng = np.random.default_rng(seed)
    v = _random_like(args, rng)
    # f's value from the first mode's own pass (one evaluation of f fewer at each order)
    if "rev" in modes:
        out, vjp_fn = vjp(f, *args)
    else:
        out, jvp_out = jvp(f, args, v)
    ct = _random_like(out, rng)

    def along(t):
        return _inner(ct, f(*_axpy(t, v, args)))

    plus, minus = along(eps), along(-eps)
    numeric = (plus - minus) / (2 * eps)
    # Round-off in the difference quotient, and a floor for values that cancel to ~0.
    noise = 10 * precision((args, out)) * (abs(plus) + abs(minus)) / eps
    floor = rtol * 1e-3 * float(np.sqrt(_inner(ct, _conj(ct)) * _inner(v, _conj(v))))
    found = {}
    if "rev" in modes:
        found["reverse mode <vjp(ct), v>"] = _inner(vjp_fn(ct), v)
    if "fwd" in modes:
        if "rev" in modes:
            jvp_out = jvp(f, args, v)[1]
        found["forward mode <ct, jvp(v)>"] = _inner(ct, jvp_out)
    values = list(found.values())
    bad = [
        x for x in values if abs(x - numeric) > rtol * max(abs(x), abs(numeric)) + noise + floor
    ] + [
        x
        for x in values[1:]
        if abs(x - values[0]) > rtol * 1e-3 * max(abs(x), abs(values[0])) + floor
    ]
    finite = bool(np.isfinite([numeric, *values]).all())  # NaN compares False: never "bad"
    if bad or not finite:
        report = ", ".join(f"{k} = {x:.12g}" for k, x in found.items())
        problem = (
            "disagree"
            if finite
            else "are not finite (check at a point where f and its derivatives are finite)"
        )
        raise AssertionError(
            f"check_grads: derivatives of {getattr(f, '__name__', f)} {problem} "
            f"({order} order(s) from the top; eps={eps}, rtol={rtol}): {report}, "
            f"central differences = {numeric:.12g} (round-off ~{noise:.2g})"
        )
    if order > 1:
        kw = {"eps": eps, "rtol": rtol}
        if "rev" in modes:
            check_grads(lambda *a: vjp(f, *a)[1](ct), args, order - 1, modes, seed=seed + 1, **kw)
        if "fwd" in modes:
            check_grads(lambda *a: jvp(f, a, v)[1], args, order - 1, modes, seed=seed + 2, **kw)


def _take(x: Any, axis: int, i: int | slice) -> Any:
    return np.asarray(x)[(slice(None),) * (axis % np.ndim(x)) + (i,)]


def _dims_per_leaf(out_dims: Any, out: Any) -> list:
    """One out_dim per leaf of ``out``, from ``out_dims`` (an int, None, or a pytree
    prefix of ``out``), as ``vmap`` reads it."""
    import optree

    prefix = optree.tree_structure(out_dims, none_is_leaf=True)
    subtrees = prefix.flatten_up_to(out)
    dims = optree.tree_leaves(out_dims, none_is_leaf=True)
    return [d for d, sub in zip(dims, subtrees, strict=True) for _ in optree.tree_leaves(sub)]


def _stacked(leaves: list, dim: int | None, n: int, like: Any) -> np.ndarray:
    """What vmap should give for one output leaf: the examples' values stacked
    along ``dim`` (``like``, one example's value, gives the shape when n is 0)."""
    if dim is None:
        return np.asarray(like)
    if n == 0:
        empty = np.asarray(like)[np.newaxis][:0]
        return np.moveaxis(empty, 0, dim % empty.ndim)
    stacked = np.stack([np.asarray(x) for x in leaves])
    return np.moveaxis(stacked, 0, dim % stacked.ndim)


def check_vmap(
    f: Callable,
    in_dims: Any,
    args: Sequence[Any],
    *,
    out_dims: Any = 0,
    rtol: float = 1e-7,
    atol: float = 1e-9,
) -> None:
    """Check ``vmap(f, in_dims, out_dims)(*args)`` against a Python loop over the batch.

    ``args`` are plain arrays (not pytrees); ``in_dims`` an int, None or one
    entry per argument; ``out_dims`` as ``vmap`` takes it (an int, None or a
    pytree prefix of f's output).  The result must have the loop's structure,
    and each output the loop's shape, dtype and values (an output with
    out_dims None must be the same for every example).  Batches of size 1 and
    0 (the first examples of ``args``) are checked too; for size 0 only
    structure, shapes and dtypes can be.

    >>> import numpy as np
    >>> from autodiff.extend import Primitive
    >>> check_vmap(lambda x: x - x.mean(), 0, (np.ones((3, 2)),))
    >>> total_p = Primitive("total", np.sum, batch=lambda args, dims: (np.sum(args[0]), None))
    >>> try:  # this batching rule sums over the batch axis too
    ...     check_vmap(total_p.bind, 0, (np.ones((3, 2)),))
    ... except AssertionError as e:
    ...     print(str(e)[:45])
    check_vmap: output 0 of vmap(bind, in_dims=0,
    """
    import optree  # (vmap's trees and interpreter: checking gradients alone loads neither)

    from autodiff.interpreters.batching import vmap

    args = _check_args(f, args, "check_vmap")
    batched = vmap(f, in_dims=in_dims, out_dims=out_dims)  # checks the kinds of the dims
    dims = tuple(in_dims) if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
    try:
        sizes = [np.shape(a)[d] for a, d in zip(args, dims, strict=True) if d is not None]
        size = sizes[0]
    except (IndexError, ValueError):  # a mapped axis that is not there, or none
        batched(*args)  # raises vmap's own error, which names the argument
        raise
    if size == 0:
        raise TransformValueError(
            "check_vmap: the mapped axes have size 0, so there is no example to loop "
            "over; give at least one example (batch sizes 1 and 0 are checked too)."
        )
    name = getattr(f, "__name__", f)
    where = f"vmap({name}, in_dims={in_dims}, out_dims={out_dims})"

    def example(i):
        return f(*[a if d is None else _take(a, d, i) for a, d in zip(args, dims, strict=True)])

    loop = [example(i) for i in range(size)]
    for n in sorted({size, 1, 0}):
        sliced = [
            a if d is None else _take(a, d, slice(0, n)) for a, d in zip(args, dims, strict=True)
        ]
        got = vmap(f, in_dims=in_dims, out_dims=out_dims)(*sliced)
        outs = loop[: max(n, 1)]  # n = 0: one example for the shapes
        structure = optree.tree_structure(outs[0])
        if optree.tree_structure(got) != structure:
            raise AssertionError(
                f"check_vmap: {where} at batch size {n} returns {optree.tree_structure(got)}, "
                f"a loop {structure}"
            )
        columns = zip(*(optree.tree_leaves(o) for o in outs), strict=True)
        leaf_dims = _dims_per_leaf(out_dims, outs[0])
        pieces = zip(optree.tree_leaves(got), columns, leaf_dims, strict=True)
        for k, (g, column, d) in enumerate(pieces):
            g = np.asarray(g)
            want = _stacked(list(column[:n]), d, n, column[0])
            if d is None and not all(
                np.array_equal(np.asarray(c), want, equal_nan=True) for c in column[:n]
            ):
                raise AssertionError(
                    f"check_vmap: output {k} of {where} has out_dims None, but the loop's "
                    f"examples differ there (it depends on the batch)"
                )
            same = g.shape == want.shape and g.dtype == want.dtype
            if not same or not np.allclose(g, want, rtol=rtol, atol=atol, equal_nan=True):
                raise AssertionError(
                    f"check_vmap: output {k} of {where} at batch size {n} differs from a "
                    f"loop: got {g.dtype} of shape {g.shape}, expected {want.dtype} of shape "
                    f"{want.shape}; max abs difference "
                    f"{np.max(np.abs(g - want), initial=0) if g.shape == want.shape else 'n/a'}"
                )
