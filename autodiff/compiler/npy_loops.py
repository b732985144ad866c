"""NumPy's own inner loops, called from compiled code: NumPy's results, bit for bit.

A ufunc's work is done by an inner loop, a C function ``loop(context, data, dimensions,
strides, auxdata)`` that NumPy picks for the operands' dtypes (its SIMD variant for
this processor included) and calls on runs of elements.  NumPy hands it out for code
like ours (``ufunc._resolve_dtypes_and_context`` and ``ufunc._get_strided_loop``, since
NumPy 1.24); a kernel that calls it on the same runs of elements NumPy would computes
what NumPy computes, to the bit: ``exp`` and ``tanh`` as NumPy's SIMD code computes them,
``power`` with NumPy's special cases, sums in NumPy's pairwise order, ``matmul`` through
the same BLAS call, ``solve`` through the same LAPACK call.

``loop(ufunc, dtypes)`` returns a :class:`Loop`: the loop's dtypes and the names of
three symbols (``llvm_engine.symbol``) the IR reads: the function, and cells holding its
context and auxiliary data.  The names are the same in every process (the machine code
can be cached); the addresses are this process's.  The capsules that own the context
stay alive with the process (one per ufunc and dtypes).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from autodiff.compiler import llvm_engine

__all__ = ["Loop", "loop"]

_CAPSULE = b"numpy_1.24_ufunc_call_info"


class Loop:
    """One of NumPy's inner loops (module docstring): ``dtypes`` its operands' and
    results' dtypes, ``fn``, ``context`` and ``aux`` the symbols naming it."""

    __slots__ = ("aux", "context", "dtypes", "fn", "nin", "nout")

    def __init__(self, name: str, dtypes: tuple, nin: int, nout: int) -> None:
        self.fn, self.context, self.aux = f"{name}.fn", f"{name}.ctx", f"{name}.aux"
        self.dtypes, self.nin, self.nout = dtypes, nin, nout

    def declarations(self) -> list[str]:
        """The IR declaring this loop's symbols."""
        return [
            f'declare i32 @"{self.fn}"(ptr, ptr, ptr, ptr, ptr)',
            f'@"{self.context}" = external global ptr',
            f'@"{self.aux}" = external global ptr',
        ]


_found: dict[tuple, Loop] = {}
_keep: list = []  # capsules and the cells pointing into them: alive with the process
_lock = threading.Lock()


def _pointer(capsule: Any) -> int:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, _CAPSULE)


def _name(ufunc: Any) -> str:
    module = getattr(ufunc, "__module__", None) or "numpy"
    return f"{module}.{ufunc.__name__}"


def loop(ufunc: np.ufunc, dtypes: tuple, reduction: bool = False) -> Loop:
    """NumPy's loop of ``ufunc`` for the operand dtypes ``dtypes`` (and the results';
    for a reduction, ``(dtype, dtype, None)``); ``TypeError`` where NumPy has none."""
    key = (ufunc, tuple(dtypes), reduction)
    found = _found.get(key)
    if found is not None:
        return found
    with _lock:
        found = _found.get(key)
        if found is not None:
            return found
        # NumPy's private API for its inner loops (checked in llvm_engine.why_not)
        resolve = ufunc._resolve_dtypes_and_context  # type: ignore[attr-defined]
        resolved, capsule = resolve(tuple(dtypes), reduction=reduction)
        ufunc._get_strided_loop(capsule)  # type: ignore[attr-defined]
        address = _pointer(capsule)
        fn, context, aux = (ctypes.c_void_p * 3).from_address(address)
        if not fn:  # no loop for these dtypes: the caller's NumPy call raises as NumPy does
            raise TypeError(f"{_name(ufunc)}: NumPy has no inner loop for {dtypes}")
        chars = "".join(np.dtype(d).str[1:] for d in resolved)
        name = f"adx.npy.{_name(ufunc)}.{chars}{'.r' if reduction else ''}"
        cells = (ctypes.c_void_p(context), ctypes.c_void_p(aux))
        llvm_engine.symbol(f"{name}.fn", fn)
        llvm_engine.symbol(f"{name}.ctx", ctypes.addressof(cells[0]))
        llvm_engine.symbol(f"{name}.aux", ctypes.addressof(cells[1]))
        _keep.append((capsule, cells))
        found = _found[key] = Loop(name, tuple(np.dtype(d) for d in resolved), ufunc.nin,
                                   ufunc.nout)  # fmt: skip
    return found
