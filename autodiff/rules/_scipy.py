"""Implementations that call SciPy (``autodiff.scipy``'s primitives).

SciPy's functions other than its ufuncs convert their operands with
``np.asarray``: a CuPy or Dask array would be copied to the host or computed
behind the user's back.  ``scipy_impl`` calls them on NumPy arrays (and Python
scalars) only, and names the function and the library for any other array.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import numpy as np

from autodiff.core.arrays import array_library, backend_error

__all__ = ["empty_result", "scipy_impl"]


def scipy_impl(func: Callable, impl: Callable | None = None, *, name: str = "") -> Callable:
    """A primitive's implementation calling SciPy function ``func`` (through ``impl``,
    by default ``func`` itself) on NumPy operands; operands of another array library
    raise ``UnsupportedFunctionError`` naming ``func`` (or ``name``) and the library."""
    call = func if impl is None else impl
    if not name:  # scipy.linalg.expm, not scipy.linalg._matfuncs.expm
        public = itertools.takewhile(lambda p: not p.startswith("_"), func.__module__.split("."))
        name = ".".join([*public, func.__name__])

    def checked(*args, **params):
        for x in args:
            if array_library(x) is not None:
                raise backend_error(name, x)
        return call(*args, **params)

    return functools.update_wrapper(checked, call)


def empty_result(shape: tuple[int, ...], *operands: np.ndarray) -> np.ndarray:
    """The empty result of a SciPy function over an empty stack of operands (which
    SciPy's batching refuses): their floating-point dtype, as SciPy computes in."""
    return np.empty(shape, np.result_type(*operands, np.float32))
