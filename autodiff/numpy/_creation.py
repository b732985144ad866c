"""Array creation: from nested lists of traced values (``array``), ranges whose ends may
be traced (``linspace``, ``logspace``, ``geomspace``, ``arange``), ``full``,
``full_like``, ``meshgrid``, and the constructors whose sizes must be concrete
(``zeros``, ``ones``, ``eye``...).

No function here has a derivative of its own: each is a composition (``array``
stacks its traced elements, ``linspace`` is ``start + i * step``), so derivatives and
batching come from ``stack``, ``broadcast_to`` and the elementwise rules.  With no
traced value among the arguments each function is NumPy's own, exactly.  The
primitives ``zeros_like`` and ``ones_like`` are in ``autodiff/rules/creation.py``,
``asarray`` (which rules call) in ``autodiff/rules/compositions.py``.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

from autodiff.core.arrays import array_like, dtype_of, ndim_of, shape_of
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules import indexing as _idx
from autodiff.rules import shape as _shp
from autodiff.rules.compositions import _holds_tracer, _traced_array, asarray
from autodiff.rules.creation import as_output, zeros_like

__all__ = [
    "arange", "array", "asanyarray", "ascontiguousarray", "asfortranarray", "copy", "empty",
    "empty_like", "eye", "full", "full_like", "geomspace", "identity", "linspace", "logspace",
    "meshgrid", "ones", "tri", "zeros",
]  # fmt: skip


@register_numpy(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Like numpy.full_like; a traced ``fill_value`` stays differentiable.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.full_like(np.zeros(2), 3.5)
    array([3.5, 3.5])
    """
    target = np.dtype(dtype) if dtype is not None else a.dtype
    ans = _elt.astype(zeros_like(a, dtype=target, shape=shape) + fill_value, target)
    return as_output(ans)  # (the sum of two 0-d arrays is a scalar; NumPy's is an array)


@register_numpy(np.empty_like)
def empty_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Like numpy.empty_like; the entries are zeros (NumPy leaves them unspecified)."""
    return zeros_like(a, dtype=dtype, shape=shape)


def array(object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    """Like numpy.array; nested lists and tuples may hold traced values.

    The result is differentiable and batchable in every traced element; dtypes
    promote as NumPy promotes them for arrays of the same shapes and dtypes.
    (Plain ``np.array`` cannot do this: NumPy has no protocol that hands a list
    of traced values to autodiff.)

    >>> import numpy as np, autodiff.numpy as anp
    >>> from autodiff import grad
    >>> float(grad(lambda x: anp.array([[x, 2.0], [3.0, x * x]]).sum())(1.5))
    4.0
    """
    if not _holds_tracer(object):
        kwargs = {} if like is None else {"like": like}
        return np.array(object, dtype, copy=copy, order=order, subok=subok, ndmin=ndmin, **kwargs)
    return _traced_array(object, dtype, ndmin)


def asanyarray(a, dtype=None, order=None, *, device=None, copy=None, like=None):
    """Like numpy.asanyarray (see ``asarray``)."""
    return asarray(a, dtype, order, device=device, copy=copy, like=like)


def ascontiguousarray(a, dtype=None, *, like=None):
    """Like numpy.ascontiguousarray (memory layout is NumPy's concern: see ``asarray``)."""
    if not _holds_tracer(a):
        return np.ascontiguousarray(a, dtype, **({} if like is None else {"like": like}))
    return _traced_array(a, dtype, 0)


def asfortranarray(a, dtype=None, *, like=None):
    """Like numpy.asfortranarray (memory layout is NumPy's concern: see ``asarray``)."""
    if not _holds_tracer(a):
        return np.asfortranarray(a, dtype, **({} if like is None else {"like": like}))
    return _traced_array(a, dtype, 0)


@register_numpy(np.copy)
def copy(a, order="K", subok=False):
    """Like numpy.copy.  Traced values are immutable, so their copy is a new handle on
    the same value; lists holding traced values become arrays, as in NumPy."""
    if isinstance(a, Tracer):
        return a.copy()
    if _holds_tracer(a):
        return asarray(a)
    if array_like(a) is not None:  # another library's array (Dask has no np.copy)
        return a.copy()
    return np.copy(a, order=order, subok=subok)


def full(shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    """Like numpy.full; a traced ``fill_value`` stays differentiable and batchable.

    >>> import numpy as np, autodiff.numpy as anp
    >>> from autodiff import grad
    >>> float(grad(lambda v: anp.full((2, 3), v).sum())(0.5))
    6.0
    """
    if not _holds_tracer(fill_value):
        kwargs = {} if like is None else {"like": like}
        if device is not None:
            kwargs["device"] = device
        return np.full(shape, fill_value, dtype, order, **kwargs)
    fill = asarray(fill_value)
    target = np.dtype(dtype) if dtype is not None else dtype_of(fill)
    shape = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(shape)
    return _shp.broadcast_to(_elt.astype(fill, target), shape)


# --- ranges with traced ends -----------------------------------------------------------------


def _numpy_can(args: list) -> bool:
    """Whether NumPy's own range function takes ``args``: no traced value, and no array
    of another library (Dask's ``linspace`` wants chunks; the composition stays lazy)."""
    return not _holds_tracer(args) and all(array_like(a) is None for a in args)


def _range_dtype(*ends: Any) -> np.dtype:
    """NumPy's dtype for linspace of these ends: their promotion (Python numbers weak),
    made inexact."""
    dt = np.result_type(*(e if isinstance(e, (int, float, complex)) else dtype_of(e) for e in ends))
    return dt if dt.kind in "fc" else np.result_type(dt, np.float64)


def _operand(x: Any, dtype: np.dtype) -> Any:
    """An end of a range as ``dtype``: a NumPy scalar for a Python number (it then
    combines with any array library's arrays), else cast with ``astype``."""
    if isinstance(x, (int, float, complex)):
        return dtype.type(x)
    return _elt.astype(asarray(x), dtype)


def _with_ends(y: Any, first: Any, last: Any) -> Any:
    """``y`` (samples along axis 0) with its first/last sample replaced by ``first``/``last``
    (None: kept), broadcast to a sample's shape: the ends then come out exact."""
    head = _idx.getitem(y, slice(0, 1))
    parts = [y]
    if first is not None:  # zeros_like + first: a block of y's own array library
        parts = [zeros_like(head) + first, _idx.getitem(y, slice(1, None))]
    if last is not None:
        parts[-1] = _idx.getitem(parts[-1], slice(None, -1))
        parts.append(zeros_like(head) + last)
    return _shp.concatenate(parts, axis=0) if len(parts) > 1 else y


def _move_sample_axis(y: Any, axis: int) -> Any:
    return y if axis == 0 else _comp.moveaxis(y, 0, axis)


@register_numpy(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    """Like numpy.linspace; differentiable and batchable in ``start`` and ``stop``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> from autodiff import grad
    >>> float(grad(lambda t: anp.linspace(0.0, t, 5).sum())(2.0))  # d/dt of sum(i/4 * t)
    2.5
    """
    if _numpy_can([start, stop]):
        kwargs = {} if device is None else {"device": device}
        return np.linspace(start, stop, num, endpoint, retstep, dtype, axis, **kwargs)
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    dt = _range_dtype(start, stop)
    start, stop = _operand(start, dt), _operand(stop, dt)
    div = num - 1 if endpoint else num
    delta = stop - start
    like = array_like(delta)  # the sample numbers, made by the ends' array library
    i = np.arange(num, dtype=dt) if like is None else np.arange(num, dtype=dt, like=like)
    i = _shp.reshape(i, (-1,) + (1,) * ndim_of(delta))
    step = delta / div if div > 0 else delta * np.nan
    y = (i * step if div > 0 else i * delta) + start  # NumPy's own order of operations
    if endpoint and num > 1:
        y = _with_ends(y, None, stop)
    y = _move_sample_axis(y, axis)
    if dtype is not None:
        target = np.dtype(dtype)
        y = _elt.astype(_elt.floor(y) if target.kind in "iu" else y, target)
    return (y, step) if retstep else y


@register_numpy(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """Like numpy.logspace: ``base ** linspace(start, stop)``; differentiable and
    batchable in ``start``, ``stop`` and ``base``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.logspace(0.0, 2.0, 3)
    array([  1.,  10., 100.])
    """
    if _numpy_can([start, stop, base]):
        return np.logspace(start, stop, num, endpoint, base, dtype, axis)
    if ndim_of(base):  # a non-scalar base broadcasts with the ends, the samples axis inserted
        ndmax = len(np.broadcast_shapes(shape_of(start), shape_of(stop), shape_of(base)))
        start, stop, base = (
            _shp.reshape(asarray(a), (1,) * (ndmax - ndim_of(a)) + shape_of(a))
            for a in (start, stop, base)
        )
        base = _shp.expand_dims(base, axis)
    y = _elt.power(base, linspace(start, stop, num=num, endpoint=endpoint, axis=axis))
    return y if dtype is None else _elt.astype(y, dtype)


@register_numpy(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """Like numpy.geomspace; differentiable and batchable in ``start`` and ``stop``
    (real ends of either sign; the ends come out exact; float64 at least, as in NumPy).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.geomspace(1.0, 1000.0, 4)
    array([   1.,   10.,  100., 1000.])
    """
    if _numpy_can([start, stop]):
        return np.geomspace(start, stop, num, endpoint, dtype, axis)
    dt = np.result_type(_range_dtype(start, stop), np.float64)  # as NumPy: float64 at least
    start, stop = _operand(start, dt), _operand(stop, dt)
    if dt.kind == "c":
        raise NotImplementedError("geomspace of complex traced values is not supported")
    sign = _elt.sign(start)  # a constant: the sequence is rotated to positive values
    start, stop = start / sign, stop / sign
    y = logspace(_elt.log10(start), _elt.log10(stop), num=num, endpoint=endpoint, base=10.0)
    if num > 0:
        y = _with_ends(y, start, stop if num > 1 and endpoint else None)
    y = _move_sample_axis(sign * y, axis)
    return y if dtype is None else _elt.astype(y, dtype)


@register_numpy(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Like numpy.meshgrid; differentiable and batchable in every coordinate vector.

    >>> import numpy as np, autodiff.numpy as anp
    >>> [g.shape for g in anp.meshgrid(np.arange(3.0), np.arange(2.0))]
    [(2, 3), (2, 3)]
    """
    if _numpy_can(list(xi)):
        return np.meshgrid(*xi, copy=copy, sparse=sparse, indexing=indexing)
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    ndim = len(xi)
    ones = (1,) * ndim
    shapes = [(*ones[:i], -1, *ones[i + 1 :]) for i in range(ndim)]
    if indexing == "xy" and ndim > 1:  # the first two axes swap roles
        shapes[0], shapes[1] = (1, -1, *ones[2:]), (-1, 1, *ones[2:])
    out = [_shp.reshape(asarray(x), shape) for x, shape in zip(xi, shapes)]
    return tuple(out) if sparse else tuple(_comp.broadcast_arrays(*out))


# --- sizes and shapes: concrete values -----------------------------------------------------------


def _concrete_sizes(name: str, value: Any) -> Any:
    """``value`` (sizes, a shape, bounds) with each traced part replaced by its concrete
    value; where it has none (staged by jit, batched by vmap), the ConcretizationError
    that says what to do (``static_argnums``...) instead of NumPy's TypeError."""
    if isinstance(value, Tracer):
        return value._concrete_value(f"anp.{name}'s sizes")
    if isinstance(value, (tuple, list)):
        return type(value)(_concrete_sizes(name, v) for v in value)
    return value


def _sized(numpy_func: Any) -> Any:
    name = numpy_func.__name__

    @functools.wraps(numpy_func)
    def sized(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = _concrete_sizes(name, args), _concrete_sizes(name, kwargs)
        return numpy_func(*args, **kwargs)

    example, shape = _EXAMPLES[name]
    sized.__doc__ = (
        f"Like numpy.{name}; its sizes (and bounds) must be concrete: under jit, from an "
        f"argument marked static (a traced one raises ConcretizationError).\n\n"
        f">>> import autodiff.numpy as anp\n>>> anp.{name}({example}).shape\n{shape}\n"
    )
    return sized


_EXAMPLES = {"zeros": ("(2, 3)", (2, 3)), "ones": ("3", (3,)), "empty": ("(0,)", (0,)),
             "eye": ("2", (2, 2)), "identity": ("3", (3, 3)), "tri": ("2", (2, 2)),
             "arange": ("1, 4", (3,))}  # fmt: skip


zeros, ones, empty, eye, identity, tri = (
    _sized(f) for f in (np.zeros, np.ones, np.empty, np.eye, np.identity, np.tri)
)


_numpy_arange = _sized(np.arange)


@functools.wraps(np.arange)
def arange(*args: Any, **kwargs: Any) -> Any:
    out = _numpy_arange(*args, **kwargs)
    bounds = dict(zip(("start", "stop", "step") if len(args) > 1 else ("stop",), args))
    bounds.update((k, v) for k, v in kwargs.items() if k in ("start", "stop", "step"))
    start, step = bounds.get("start", 0), bounds.get("step", 1)
    if out.dtype.kind not in "fc" or not (isinstance(start, Tracer) or isinstance(step, Tracer)):
        return out
    # NumPy's values are start + i * step: written so, they keep the derivatives of start
    # and step (stop only sets the length)
    return _elt.astype(_elt.add(start, _elt.multiply(step, np.arange(out.size))), out.dtype)


arange.__doc__ = (
    "Like numpy.arange; the length must be concrete (under jit, from bounds marked "
    "static); traced start and step keep their derivatives (the values are start + i * "
    "step).\n\n>>> import autodiff, autodiff.numpy as anp\n>>> anp.arange(1, 4).shape\n"
    "(3,)\n>>> float(autodiff.grad(lambda s: anp.arange(s, s + 3.0).sum())(0.5))\n3.0\n"
)
