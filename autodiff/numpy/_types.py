"""The array and scalar types of the ``anp`` namespace.

``anp.ndarray`` is the type of everything ``anp`` functions return: ``isinstance`` holds
for NumPy arrays and for traced values alike (as ``jax.Array`` does in JAX), so code that
checks its inputs keeps working inside a transform.

``anp.float32``, ``anp.int64``, ... are NumPy's scalar types with one difference: called
on a traced value they cast it (``astype``), so ``anp.float32(x)`` stays differentiable
and batchable where ``np.float32(x)`` would need a concrete value.  Everywhere else
(``dtype=anp.float32``, ``np.dtype(anp.float32)``, ``isinstance(v, anp.float64)``,
``np.issubdtype``) they are NumPy's types.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from autodiff.core.tracer import Tracer
from autodiff.rules.compositions import asarray
from autodiff.rules.elementwise import astype

__all__ = ["SCALAR_NAMES", "ndarray"]


class _ArrayType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, (np.ndarray, Tracer))

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, (np.ndarray, Tracer))


class ndarray(metaclass=_ArrayType):
    """The type of arrays: ``isinstance(x, anp.ndarray)`` holds for NumPy arrays and
    for values traced by a transform.  Calling it builds a NumPy array, as
    ``np.ndarray(shape, dtype)`` does (``anp.array`` and ``anp.zeros`` are the usual way).

    >>> import numpy as np, autodiff.numpy as anp
    >>> from autodiff import grad
    >>> def f(x):
    ...     assert isinstance(x, anp.ndarray)
    ...     return x * x
    >>> float(grad(f)(3.0)), isinstance(np.zeros(2), anp.ndarray)
    (6.0, True)
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
        return np.ndarray(*args, **kwargs)


class _ScalarType(type):
    """The metaclass of ``anp``'s scalar types: instances are those of NumPy's type."""

    _numpy: type

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._numpy)

    def __repr__(cls) -> str:
        return f"<class 'autodiff.numpy.{cls.__name__}'>"


def _scalar_type(numpy_type: type) -> type:
    def __new__(cls, *args):
        if args and isinstance(args[0], (Tracer, list, tuple)):
            return astype(asarray(args[0]), numpy_type)
        return numpy_type(*args)

    doc = (
        f"NumPy's ``{numpy_type.__name__}``; called on a traced value it casts it "
        f"(``astype``), so the result stays traced."
    )
    return _ScalarType(
        numpy_type.__name__,
        (numpy_type,),
        {"__new__": __new__, "__doc__": doc, "__module__": __name__, "_numpy": numpy_type},
    )


def _numeric_scalar_names() -> dict[str, type]:
    """Every public name of NumPy for a concrete numeric scalar type, with that type
    (aliases such as ``double`` and ``float64`` name one type)."""
    out = {}
    for name in np.__all__:
        # (vars, not getattr: NumPy imports a submodule such as numpy.testing or
        # numpy.f2py when its name is first read, which would cost import autodiff ~0.5 s)
        obj = vars(np).get(name)
        if not (isinstance(obj, type) and issubclass(obj, np.generic)):
            continue
        try:
            kind = np.dtype(obj).kind
        except TypeError:  # abstract types: np.floating, np.integer, ...
            continue
        if kind in "biufc":
            out[name] = obj
    return out


SCALAR_NAMES = _numeric_scalar_names()


@functools.cache
def _twin(numpy_type: type) -> type:
    return _scalar_type(numpy_type)


def __getattr__(name: str) -> type:
    """``anp.float64`` and the rest, each made when first read (making all 18 cost the
    import ~0.5 ms), one per NumPy type: ``anp.double is anp.float64``."""
    if name in SCALAR_NAMES:
        return _twin(SCALAR_NAMES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
