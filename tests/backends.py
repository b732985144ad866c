"""Array backends for ``tests/test_backends.py``: a strict stand-in for a foreign
array library, and adapters for Dask and CuPy (``BACKENDS``).

``StrictArray`` is the backend-neutrality guard.  It is a duck array that
computes with NumPy underneath, through NumPy's own dispatch protocols
(``__array_ufunc__``, ``__array_function__``, ``like=``), but refuses what a
GPU or out-of-core library cannot do cheaply or at all:

* coercion: ``np.asarray(x)``, ``np.array(x)``, ``x.__array__()`` raise
  ``CoercionError`` (on Dask it silently computes the graph, on CuPy it copies
  to the host or raises);
* mixing: a plain ``numpy.ndarray`` meeting a ``StrictArray`` in a ufunc or a
  NumPy function raises ``MixedArrayError`` (CuPy refuses ``cupy + numpy``), so
  a rule that builds a constant with ``np.eye(n)`` instead of
  ``np.eye(n, like=x)`` fails;
* concrete values: ``float(x)``, ``bool(x)``, ``x.item()`` raise
  ``CoercionError`` (they force a Dask graph, or a device sync, inside a rule).

Plain NumPy arrays are accepted as *indices* (``x[np.arange(3)]``), as every
array library accepts them there.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import optree

__all__ = [
    "BACKENDS",
    "Backend",
    "CoercionError",
    "MixedArrayError",
    "StrictArray",
    "strict",
    "unwrap",
]


class CoercionError(AssertionError):
    """A StrictArray was converted to NumPy (or to a Python value)."""


class MixedArrayError(AssertionError):
    """A plain NumPy array met a StrictArray in a computation."""


def _unwrap_operand(x: Any, where: str) -> Any:
    if type(x) is StrictArray:
        return x._a
    if isinstance(x, np.ndarray):
        raise MixedArrayError(
            f"{where}: a plain numpy.ndarray of shape {x.shape} met a StrictArray. A rule "
            f"created a NumPy array where it should create one of its operands' kind "
            f"(np.zeros_like(x), np.eye(n, like=x), or arithmetic on operands)."
        )
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap_operand(v, where) for v in x)
    return x


def _wrap(x: Any) -> Any:
    if isinstance(x, (np.ndarray, np.generic)):
        return StrictArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


def _unwrap_index(index: Any) -> Any:
    if type(index) is StrictArray:
        return index._a
    if isinstance(index, tuple):
        return tuple(_unwrap_index(i) for i in index)
    return index


class StrictArray(np.lib.mixins.NDArrayOperatorsMixin):
    """A duck array over a NumPy array that raises on any conversion to NumPy."""

    __slots__ = ("_a",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, a: np.ndarray) -> None:
        assert type(a) is np.ndarray, type(a)
        self._a = a

    # --- the protocols ----------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise CoercionError(
            f"np.asarray() on a StrictArray of shape {self.shape}: something converted "
            f"an operand to NumPy instead of computing with it through NumPy's dispatch."
        )

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        where = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        if method == "at":  # ufunc.at(x, index, y): in place, index as in x[index]
            x, index, *rest = inputs
            if type(x) is not StrictArray:
                return NotImplemented
            rest = [_unwrap_operand(y, where) for y in rest]
            getattr(ufunc, method)(x._a, _unwrap_index(index), *rest, **kwargs)
            return None
        if not all(isinstance(x, (StrictArray, np.ndarray, numbers.Number)) for x in inputs):
            return NotImplemented  # e.g. a tracer: let it handle the call
        args = [_unwrap_operand(x, where) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(_unwrap_operand(o, where) for o in kwargs["out"])
        return _wrap(getattr(ufunc, method)(*args, **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        if not all(issubclass(t, (StrictArray, np.ndarray)) for t in types):
            return NotImplemented
        where = f"{func.__module__}.{func.__name__}"
        args = [_unwrap_operand(a, where) for a in args]
        kwargs = {k: _unwrap_operand(v, where) for k, v in kwargs.items()}
        return _wrap(func(*args, **kwargs))

    # --- what an array has ----------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._a.shape

    @property
    def dtype(self) -> np.dtype:
        return self._a.dtype

    @property
    def ndim(self) -> int:
        return self._a.ndim

    @property
    def size(self) -> int:
        return self._a.size

    @property
    def T(self) -> StrictArray:
        return StrictArray(self._a.T)

    @property
    def real(self) -> StrictArray:
        return StrictArray(np.asarray(self._a.real))

    @property
    def imag(self) -> StrictArray:
        return StrictArray(np.asarray(self._a.imag))

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, index):
        return _wrap(self._a[_unwrap_index(index)])

    def __setitem__(self, index, value):
        self._a[_unwrap_index(index)] = _unwrap_operand(value, "x[...] = value")

    def __repr__(self) -> str:
        return f"StrictArray({self._a!r})"

    def __getattr__(self, name: str) -> Any:
        # ndarray methods (x.sum(), x.reshape(), x.astype()): computed and rewrapped.
        # Dunders (__array_interface__, __array_struct__, ...) are not forwarded:
        # NumPy would use them to read the data.
        if name.startswith("__") or name in ("item", "tolist", "tobytes", "view"):
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)

        def method(*args, **kwargs):
            where = f"ndarray.{name}"
            args = tuple(_unwrap_operand(a, where) for a in args)
            kwargs = {k: _unwrap_operand(v, where) for k, v in kwargs.items()}
            return _wrap(attr(*args, **kwargs))

        return method

    def _refuse(self, *args: Any) -> Any:
        raise CoercionError(
            f"a StrictArray of shape {self.shape} was converted to a Python value "
            f"(float(), int(), bool(), .item()): a rule must not read array values."
        )

    __float__ = __int__ = __bool__ = __complex__ = __index__ = _refuse  # type: ignore[assignment]


def strict(tree: Any) -> Any:
    """Every NumPy array (and NumPy scalar) leaf of ``tree`` as a StrictArray."""
    return optree.tree_map(
        lambda x: StrictArray(np.asarray(x)) if isinstance(x, (np.ndarray, np.generic)) else x,
        tree,
    )


def unwrap(tree: Any) -> Any:
    """Every StrictArray leaf of ``tree`` back as its NumPy array."""
    return optree.tree_map(lambda x: x._a if type(x) is StrictArray else x, tree)


# --- the backends the tests run on ------------------------------------------------------


class Backend:
    """How the tests put NumPy arrays on an array library and read results back."""

    name = ""
    reason = ""  # why the backend is unavailable ("" when it is)

    def array_type(self) -> type:
        raise NotImplementedError

    def put(self, tree: Any, family: str = "") -> Any:
        """Every NumPy array leaf of ``tree`` as this backend's array."""
        raise NotImplementedError

    def get(self, tree: Any) -> Any:
        """Every array leaf of ``tree`` as a NumPy array (computing lazy ones)."""
        raise NotImplementedError

    def lazy(self) -> Any:
        """A context in which nothing may be computed (Dask: the transforms stay lazy)."""
        import contextlib

        return contextlib.nullcontext()

    def __repr__(self) -> str:
        return self.name


def _is_numpy(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


class Strict(Backend):
    name = "strict"

    def array_type(self) -> type:
        return StrictArray

    def put(self, tree: Any, family: str = "") -> Any:
        return strict(tree)

    def get(self, tree: Any) -> Any:
        return unwrap(tree)


class Dask(Backend):
    """Dask arrays split in two chunks along their first axis (whole for FFTs, linear
    algebra and products, which Dask applies to single-chunk axes, square-chunked
    matrices and equally chunked repeated einsum indices only);
    ``lazy()`` makes any computation raise, and ``get`` computes synchronously."""

    name = "dask"
    WHOLE_CHUNKS = ("fft", "linalg", "products")

    def __init__(self) -> None:
        try:
            import dask.array  # noqa: F401
        except ImportError:
            self.reason = "Dask is not installed (pip install -e '.[dask]')"

    def array_type(self) -> type:
        import dask.array as da

        return da.Array

    def put(self, tree: Any, family: str = "") -> Any:
        import dask.array as da

        def one(x):
            if not _is_numpy(x):
                return x
            x = np.asarray(x)
            whole = family in self.WHOLE_CHUNKS or x.ndim == 0 or x.shape[0] < 2
            chunks = -1 if whole else ((x.shape[0] + 1) // 2, *(-1,) * (x.ndim - 1))
            return da.from_array(x, chunks=chunks)

        return optree.tree_map(one, tree)

    def get(self, tree: Any) -> Any:
        import dask

        leaves, treedef = optree.tree_flatten(tree)
        computed = dask.compute(*leaves, scheduler="sync", optimize_graph=False)
        return optree.tree_unflatten(treedef, [np.asarray(x) for x in computed])

    def lazy(self) -> Any:
        import dask

        def refuse(dsk: Any, keys: Any, **kwargs: Any) -> Any:
            raise AssertionError(
                "a Dask graph was computed inside a transform: the transforms must build "
                "graphs and leave computing them to the user"
            )

        return dask.config.set(scheduler=refuse)


class CuPy(Backend):
    name = "cupy"

    def __init__(self) -> None:
        try:
            import cupy
        except ImportError:
            self.reason = "CuPy is not installed (it needs an NVIDIA GPU and CUDA)"
            return
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # no driver, no device
            self.reason = f"CuPy finds no GPU ({type(e).__name__}: {e})"
            return
        if count == 0:
            self.reason = "CuPy finds no GPU"

    def array_type(self) -> type:
        import cupy

        return cupy.ndarray

    def put(self, tree: Any, family: str = "") -> Any:
        import cupy

        return optree.tree_map(lambda x: cupy.asarray(x) if _is_numpy(x) else x, tree)

    def get(self, tree: Any) -> Any:
        import cupy

        return optree.tree_map(
            lambda x: cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else x, tree
        )


BACKENDS: list[Backend] = [Strict(), Dask(), CuPy()]
