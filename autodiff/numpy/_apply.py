"""NumPy's functions that apply a Python function: ``vectorize``, ``frompyfunc``,
``apply_along_axis``, ``apply_over_axes`` and ``piecewise``, for NumPy code that uses
them to run under every transform.

NumPy calls the function once per element (or slice) in a Python loop; these call it
once, under ``vmap`` over the loop axes (as ``jax.numpy.vectorize`` does), so the
function sees one example's values and must be written with array functions (``anp``
or ``np`` ones on traced values): Python control flow on its arguments' values cannot
run under ``vmap``; ``anp.where`` can.  ``piecewise`` evaluates each function on the
whole array and selects with ``where``.

``np.apply_along_axis``, ``np.apply_over_axes`` and ``np.piecewise`` reach these through
NumPy's dispatch.  ``np.vectorize`` and ``np.frompyfunc`` objects cannot hand traced
values over (NumPy converts them to object arrays); the error they raise names
``anp.vectorize`` and ``anp.frompyfunc``.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from autodiff.core.arrays import array_library, ndim_of, normalize_axes, shape_of
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer
from autodiff.interpreters.batching import vmap
from autodiff.rules.compositions import asarray, moveaxis, ravel, take
from autodiff.rules.creation import zeros_like
from autodiff.rules.elementwise import as_operands, astype, stop_gradient, where
from autodiff.rules.reductions import argmax
from autodiff.rules.shape import broadcast_to, expand_dims, squeeze

__all__ = ["apply_along_axis", "apply_over_axes", "frompyfunc", "piecewise", "vectorize"]

# --- generalized-ufunc signatures: "(m,n),(n)->(m)" ------------------------------------------

_CORE = r"\((?:\w+(?:,\w+)*)?\)"
_SIGNATURE = rf"^{_CORE}(?:,{_CORE})*->{_CORE}(?:,{_CORE})*$"  # (compiled on first use)


def _parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The core dimensions of each input and each output, by name."""
    compact = re.sub(r"\s+", "", signature)
    if not re.match(_SIGNATURE, compact):
        raise ValueError(f"not a valid gufunc signature: {signature!r}")
    sides = compact.split("->")
    return [
        [tuple(name for name in core.split(",") if name) for core in re.findall(r"\((.*?)\)", side)]
        for side in sides
    ]  # type: ignore[return-value]


def _core_sizes(args, cores) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for i, (arg, core) in enumerate(zip(args, cores)):
        shape = shape_of(arg)
        if len(shape) < len(core):
            raise ValueError(
                f"vectorize: input {i} has {len(shape)} dimension(s), but the signature "
                f"gives it {len(core)} core dimension(s) {core}"
            )
        for name, size in zip(core, shape[len(shape) - len(core) :]):
            if sizes.setdefault(name, size) != size:
                raise ValueError(
                    f"vectorize: inconsistent size for core dimension {name!r}: "
                    f"{sizes[name]} and {size}"
                )
    return sizes


def _checked_outputs(func, sizes, out_cores):
    """``func``, checking that its outputs end in the signature's core dimensions."""

    def checked(*args):
        out = func(*args)
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(out_cores):
            raise ValueError(
                f"vectorize: the function returned {len(outs)} output(s), but the signature "
                f"has {len(out_cores)}"
            )
        for i, (o, core) in enumerate(zip(outs, out_cores)):
            shape = shape_of(o)
            if len(shape) != len(core):
                raise ValueError(
                    f"vectorize: output {i} has shape {shape}, but the signature gives it "
                    f"core dimensions {core}"
                )
            for name, size in zip(core, shape):
                if sizes.setdefault(name, size) != size:
                    raise ValueError(
                        f"vectorize: output {i} has size {size} for core dimension "
                        f"{name!r}, which the inputs give size {sizes[name]}"
                    )
        return out

    return checked


# --- vectorize ---------------------------------------------------------------------------


def _vectorizable(x: Any) -> bool:
    """Values vectorize maps over; anything else (strings, None, callables) passes through."""
    return (
        isinstance(x, (Tracer, np.ndarray, np.generic, numbers.Number, list, tuple))
        or array_library(x) is not None
    )


def _map_over_loop_axes(func, args, cores):
    """``func`` applied to every element (every core-shaped cell) of the broadcast loop
    axes of ``args``: one ``vmap`` per loop axis.  Size-1 loop axes are squeezed and mapped
    with ``None`` rather than broadcast, and axes no argument has are added to the result."""
    loops = [shape_of(a)[: ndim_of(a) - len(c)] for a, c in zip(args, cores)]
    loop_shape = np.broadcast_shapes(*loops)
    squeezed = [
        squeeze(a, tuple(i for i, n in enumerate(loop) if n == 1)) if 1 in loop else a
        for a, loop in zip(args, loops)
    ]
    padded = [(1,) * (len(loop_shape) - len(loop)) + loop for loop in loops]
    mapped, unit_axes = func, []
    for axis in reversed(range(len(loop_shape))):  # innermost first, so outer vmaps peel axis 0
        in_dims = tuple(None if loop[axis] == 1 else 0 for loop in padded)
        if all(d is None for d in in_dims):
            unit_axes.append(axis)
        else:
            mapped = vmap(mapped, in_dims=in_dims)
    out = mapped(*squeezed)
    if not unit_axes:
        return out
    axes = tuple(sorted(unit_axes))
    if isinstance(out, tuple):
        return tuple(expand_dims(o, axes) for o in out)
    return expand_dims(out, axes)


class vectorize:  # NumPy's name
    """Like numpy.vectorize, with ``jax.numpy.vectorize``'s semantics: ``pyfunc`` is
    called once, under ``vmap`` over the broadcast loop axes of its arguments, so the
    result is differentiable and batchable.  With ``signature`` (a generalized ufunc's,
    e.g. ``"(n),(n)->()"``) the core dimensions are passed whole; ``excluded`` names
    positional indices or keywords passed unchanged (arguments that are not arrays or
    numbers pass unchanged too).  Keyword arguments not excluded are vectorized after the
    positional ones, as in NumPy.  ``otypes`` casts the outputs; ``cache`` has no effect.

    ``pyfunc`` sees one example's values: Python control flow on them raises under vmap;
    write ``anp.where(cond, a, b)`` instead of ``if``.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> f = anp.vectorize(lambda a, b: np.sin(a) * b)
    >>> f(np.array([[0.0], [np.pi / 2]]), np.array([1.0, 2.0, 3.0]))
    array([[0., 0., 0.],
           [1., 2., 3.]])
    >>> dot = anp.vectorize(np.dot, signature="(n),(n)->()")
    >>> autodiff.grad(lambda x: dot(x, x).sum())(np.ones((2, 3))).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    """

    def __init__(
        self,
        pyfunc: Callable | None = None,
        otypes: Any = None,
        doc: str | None = None,
        excluded: Iterable[int | str] | None = None,
        cache: bool = False,
        signature: str | None = None,
    ) -> None:
        self.pyfunc = pyfunc
        self.otypes = None if otypes is None else [np.dtype(t) for t in otypes]
        self.excluded = set(excluded or ())
        self.cache = cache
        self.signature = signature
        self._cores = None if signature is None else _parse_signature(signature)
        self.__doc__ = doc if doc is not None else getattr(pyfunc, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.pyfunc is None:  # @anp.vectorize(signature=...) as a decorator
            (pyfunc,) = args
            return vectorize(pyfunc, self.otypes, self.__doc__, self.excluded, self.cache,
                             self.signature)  # fmt: skip
        positions = [i for i, a in enumerate(args) if i not in self.excluded and _vectorizable(a)]
        names = [k for k, v in kwargs.items() if k not in self.excluded and _vectorizable(v)]
        values = [as_operands(args[i]) for i in positions] + [as_operands(kwargs[k]) for k in names]

        def call(*mapped):
            full, keywords = list(args), dict(kwargs)
            for i, value in zip(positions, mapped):
                full[i] = value
            keywords.update(zip(names, mapped[len(positions) :]))
            return self.pyfunc(*full, **keywords)  # type: ignore[misc]

        if self._cores is None:
            cores: list[tuple[str, ...]] = [()] * len(values)
            func: Callable = call
        else:
            cores, out_cores = self._cores
            if len(cores) != len(values):
                raise TypeError(
                    f"vectorize: the signature {self.signature!r} has {len(cores)} input(s), "
                    f"but {len(values)} vectorized argument(s) were given"
                )
            func = _checked_outputs(call, _core_sizes(values, cores), out_cores)
        out = _map_over_loop_axes(func, values, cores) if values else call()
        return self._finish(out)

    def _finish(self, out):
        outs = out if isinstance(out, tuple) else (out,)
        outs = tuple(o if hasattr(o, "shape") else asarray(o) for o in outs)
        if self.otypes is not None:
            outs = tuple(astype(o, t) for o, t in zip(outs, self.otypes))
        return outs if isinstance(out, tuple) else outs[0]


class frompyfunc:  # NumPy's name
    """Like numpy.frompyfunc: a ufunc-like object applying ``func`` elementwise, with
    broadcasting, through ``vectorize``; ``outer`` applies it to every pair.  The results
    are arrays of the values' own dtype (NumPy's are object arrays, which no transform
    can trace); ``reduce``, ``accumulate`` and ``at`` are not provided.

    >>> import numpy as np, autodiff.numpy as anp
    >>> add = anp.frompyfunc(lambda a, b: a + b, 2, 1)
    >>> add.outer(np.array([1.0, 2.0]), np.array([10.0, 20.0, 30.0]))
    array([[11., 21., 31.],
           [12., 22., 32.]])
    """

    def __init__(self, func: Callable, /, nin: int, nout: int, *, identity: Any = None) -> None:
        self.func, self.nin, self.nout, self.identity = func, int(nin), int(nout), identity
        self.nargs = self.nin + self.nout
        self.__name__ = f"{getattr(func, '__name__', 'func')} (vectorized)"
        self._vectorized = vectorize(func)

    def __call__(self, *args: Any) -> Any:
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__} takes {self.nin} arguments ({len(args)} given)")
        out = self._vectorized(*args)
        if self.nout > 1 and not (isinstance(out, tuple) and len(out) == self.nout):
            raise ValueError(f"{self.__name__} must return {self.nout} values")
        return out

    def outer(self, a: Any, b: Any) -> Any:
        if self.nin != 2:
            raise ValueError("outer product only supported for binary functions")
        a, b = as_operands(a, b)
        n = ndim_of(b)
        return self(expand_dims(a, tuple(range(ndim_of(a), ndim_of(a) + n))) if n else a, b)

    def __getattr__(self, name: str) -> Any:
        if name in ("reduce", "accumulate", "reduceat", "at"):
            raise NotImplementedError(
                f"anp.frompyfunc(...).{name} is not provided: it would call the function "
                f"sequentially, element after element; write it with anp functions"
            )
        raise AttributeError(name)


# --- along axes ------------------------------------------------------------------------------


@register_numpy(np.apply_along_axis)
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """Like numpy.apply_along_axis: ``func1d`` of every 1-d slice of ``arr`` along
    ``axis`` (extra arguments passed unchanged), its results' axes in place of ``axis``.
    One call under ``vmap`` over the other axes.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.apply_along_axis(lambda v: v[::-1] * v[0], 0, np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[3., 8.],
           [1., 4.]])
    """
    arr = as_operands(arr)
    ndim = ndim_of(arr)
    axis = normalize_axes(axis, ndim)[0]
    rows = moveaxis(arr, axis, -1)
    per_slice = lambda v: asarray(func1d(v, *args, **kwargs))  # as NumPy converts it
    out = _map_over_loop_axes(per_slice, [rows], [("n",)])
    k = ndim_of(out) - (ndim - 1)  # the result's own axes, after the loop axes
    if k == 0:
        return out
    return moveaxis(out, tuple(range(ndim - 1, ndim - 1 + k)), tuple(range(axis, axis + k)))


@register_numpy(np.apply_over_axes)
def apply_over_axes(func, a, axes):
    """Like numpy.apply_over_axes: ``a = func(a, axis)`` for each of ``axes`` in turn,
    keeping the dimensions (a reduced axis comes back with length 1).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.apply_over_axes(np.sum, np.arange(24.0).reshape(2, 3, 4), [0, 2])
    array([[[ 60.],
            [ 92.],
            [124.]]])
    """
    value = as_operands(a)
    ndim = ndim_of(value)
    for axis in np.atleast_1d(np.asarray(axes)).tolist():
        axis = axis + ndim if axis < 0 else axis
        result = func(value, axis)
        if ndim_of(result) != ndim:
            result = expand_dims(result, axis)
            if ndim_of(result) != ndim:
                raise ValueError("function is not returning an array of the correct shape")
        value = result
    return value


# --- piecewise -------------------------------------------------------------------------------


def _is_array(c: Any) -> bool:
    """A list or an array of at least one dimension (NumPy asks ``isinstance(c, (list,
    ndarray))`` of ``condlist[0]``, whose entries are scalars for a single condition)."""
    return isinstance(c, list) or (hasattr(c, "shape") and ndim_of(c) > 0)


def _inside(x, cond):
    """``x`` where ``cond`` holds, elsewhere its first entry that does: a function of one
    piece then only sees values of that piece (no warnings, and no NaN derivatives that
    ``where`` would multiply by zero).  The filler is a constant: the pieces it fills
    are not selected, so no derivative flows through it."""
    flat_cond, flat_x = ravel(broadcast_to(cond, shape_of(x))), ravel(stop_gradient(x))
    return where(cond, x, take(flat_x, argmax(flat_cond)))


@register_numpy(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """Like numpy.piecewise: ``funclist[k](x)`` where ``condlist[k]`` holds (later
    conditions win; one more function than conditions covers the rest; constants are
    constant functions; 0 where nothing holds), in x's dtype.

    Each function is applied to the whole array and the pieces are selected with
    ``where``, so functions must be elementwise (NumPy passes each only its piece).  At
    the positions of other pieces a function sees a value of its own piece instead, so a
    ``log`` or ``sqrt`` valid only on its piece raises no warning and gives no NaN
    derivatives.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> f = lambda x: anp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: np.sqrt(v)])
    >>> f(np.array([-2.0, 4.0]))
    array([2., 2.])
    >>> autodiff.grad(lambda x: f(x).sum())(np.array([-2.0, 4.0]))
    array([-1.  ,  0.25])
    """
    x = as_operands(x)
    if np.isscalar(condlist) or (not _is_array(condlist[0]) and ndim_of(x) != 0):
        condlist = [condlist]  # a single condition
    conditions = [astype(as_operands(c), np.bool_) for c in condlist]
    if len(conditions) == len(funclist) - 1:  # the "otherwise" piece
        covered = conditions[0]
        for c in conditions[1:]:
            covered = covered | c
        conditions.append(~covered)
    elif len(conditions) != len(funclist):
        n = len(conditions)
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    out = zeros_like(x)
    for cond, func in zip(conditions, funclist):
        value = func(_inside(x, cond), *args, **kw) if callable(func) else func
        out = where(cond, value, out)
    return astype(out, x.dtype) if hasattr(x, "dtype") else out
