"""Questions about arrays that need no primitive: shapes, dtypes, array libraries.

Every layer asks them (the tape, batching, the rules, control flow), so they live
here, below the rules, and are answered for NumPy arrays, Python scalars, other
libraries' arrays (CuPy, Dask) and tracers alike: a tracer answers ``shape`` and
``dtype`` for its logical value, and ``array_like`` looks through it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from autodiff.core.tracer import Tracer
from autodiff.errors import UnsupportedFunctionError

__all__ = [
    "array_library",
    "array_like",
    "backend_error",
    "batch_size_of",
    "broadcast_shapes",
    "dtype_of",
    "eye_like",
    "fresh",
    "is_complex",
    "is_float",
    "library_of",
    "ndim_of",
    "normalize_axes",
    "shape_of",
]


def shape_of(x: Any) -> tuple[int, ...]:
    """The (logical) shape of an array, tracer or Python scalar: under ``vmap`` a
    traced value has the shape of one example.

    >>> import numpy as np
    >>> from autodiff import vmap
    >>> seen = []
    >>> _ = vmap(lambda x: seen.append(shape_of(x)) or x)(np.zeros((3, 2)))
    >>> shape_of(2.0), shape_of(np.zeros((3, 2))), seen
    ((), (3, 2), [(2,)])
    """
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else np.shape(x)


def ndim_of(x: Any) -> int:
    """The (logical) number of axes of an array, tracer or Python scalar,
    ``len(shape_of(x))``.

    >>> import numpy as np
    >>> ndim_of(2.0), ndim_of(np.zeros((3, 2)))
    (0, 2)
    """
    return len(shape_of(x))


def fresh(ans: Any, *args: Any) -> Any:
    """``ans``, copied where it is a plain ndarray that may share memory with one of
    ``args``: for compositions whose NumPy namesake returns a new array but whose last
    step (a slice, a broadcast, ``real``) can be a view of an argument, which a write
    to the answer would change.  A traced value is never written: it passes as it is.

    >>> import numpy as np
    >>> x = np.arange(3.0)
    >>> fresh(x[:2], x).base is None, fresh(np.ones(2), x).base is None
    (True, True)
    """
    if type(ans) is np.ndarray and any(
        type(a) is np.ndarray and np.may_share_memory(ans, a) for a in args
    ):
        return ans.copy()
    return ans


def dtype_of(x: Any) -> np.dtype:
    """The dtype of an array, tracer, abstract value or Python scalar."""
    return x.dtype if hasattr(x, "dtype") else np.result_type(x)


def is_complex(x: Any) -> bool:
    return dtype_of(x).kind == "c"


def is_float(x: Any) -> bool:
    """Whether ``x`` (a value or an abstract value) can carry a derivative: a real or
    complex floating dtype.  An opaque value (a Generator) cannot."""
    dtype = getattr(x, "dtype", None)
    if dtype is None and not isinstance(x, (bool, int, float, complex, np.generic)):
        return False
    return dtype_of(x).kind in "fc"


def batch_size_of(args: Sequence[Any], dims: Sequence[int | None]) -> int:
    """The batch size of a batching rule's arguments: the size of any batch axis."""
    return next(shape_of(a)[d] for a, d in zip(args, dims) if d is not None)


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or tuple; negatives allowed) as sorted non-negative ints.

    >>> normalize_axes(None, 3), normalize_axes(-1, 3), normalize_axes((2, 0), 3)
    ((0, 1, 2), (2,), (0, 2))
    """
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(int(a), ndim)
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"duplicate value in 'axis': {axis}")
    return tuple(sorted(out))


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """``np.broadcast_shapes``, with the common cases (equal shapes, scalars) first."""
    first = shapes[0]
    if all(s == first or not s for s in shapes):
        return first if first or len(shapes) == 1 else max(shapes, key=len)
    return np.broadcast_shapes(*shapes)


# --- other array libraries ---------------------------------------------------------------
#
# Rules reach CuPy, Dask and other libraries through NumPy's dispatch protocols.  Where a
# library lacks a function, the user gets an error naming the function and the library
# (see rules/_helpers.py's numpy_impl), never a silent conversion to NumPy.


def array_like(x: Any) -> Any:
    """What to pass as ``like=`` to a NumPy creation function (``np.eye``,
    ``np.arange``, ``np.tri``) so that a constant for a rule about ``x`` is an
    array of ``x``'s own library (CuPy, Dask, ...): the array under ``x``'s
    tracers, or None (NumPy) for NumPy arrays and Python scalars.  A complex array
    stands in by its real part: Dask gives arrays created ``like=`` it its dtype."""
    while isinstance(x, Tracer):
        x = x._inner
    if isinstance(x, np.ndarray) or not hasattr(type(x), "__array_function__"):
        return None
    return x.real if x.dtype.kind == "c" else x


def library_of(values: Iterable[Any]) -> Any:
    """An array of the values' library, looking through tracers (None: NumPy)."""
    for v in values:
        like = array_like(v)
        if like is not None:
            return like
    return None


def eye_like(n: int, dtype: Any, x: Any) -> Any:
    """An ``n`` x ``n`` identity matrix of ``dtype``, of ``x``'s array library.
    (``np.eye(n, like=x)`` passes ``order=`` on, which Dask's ``eye`` does not take.)"""
    like = array_like(x)
    if like is None:
        return np.eye(n, dtype=dtype)
    i = np.arange(n, dtype=np.intp, like=like)
    return (i[:, None] == i).astype(dtype)


def array_library(x: Any) -> str | None:
    """The name of the array library of a concrete value that is not NumPy's
    (``"dask"``, ``"cupy"``, ...), or None for NumPy arrays and Python scalars."""
    cls = type(x)
    if cls is np.ndarray or isinstance(x, np.generic) or not hasattr(cls, "__array_function__"):
        return None
    return cls.__module__.split(".")[0]


def backend_error(what: str, x: Any, detail: str = "") -> UnsupportedFunctionError:
    """The error for ``what`` (a NumPy function) that ``x``'s array library lacks."""
    cls = type(x)
    return UnsupportedFunctionError(
        f"{what} is not implemented by {array_library(x)} arrays "
        f"({cls.__module__}.{cls.__qualname__}){detail}, and autodiff does not convert them "
        f"to NumPy behind your back. Compute this step on NumPy arrays (for a Dask array: "
        f"x.compute()), or use functions the library implements."
    )
