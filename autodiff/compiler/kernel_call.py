"""Calling a compiled kernel exactly as NumPy would run its region.

A backend (``numba_tier.py``) compiles a region of a graph into machine code; here is
what every backend's kernel is called through, so that a compiled region is
indistinguishable from the NumPy calls it replaces:

- **Floating-point errors.**  NumPy reports them (``invalid value encountered in log``)
  from the processor's status flags after each loop.  The caller clears the flags
  (``feclearexcept``), runs the kernel and, where a flag went up that ``np.geterr()``
  does not ignore, runs the region again as NumPy calls (``Fallback``, the region's own
  replay), which warn or raise exactly as NumPy does and give the same values.  Where
  the flags cannot be read (no C library with ``fetestexcept``), nothing compiles.
- **Exceptions.**  A kernel that raises (a singular matrix: numba's ``LinAlgError`` is
  not NumPy's) runs as NumPy calls too, unless the backend's ``retry`` says the error
  only meant a missing variant, compiled now (a strided view where the kernel expected a
  contiguous array): then the kernel runs again.
- **Values.**  0-d inputs are passed as scalars and 0-d results come back as NumPy
  scalars of their dtype; every array result is new (``kernels.py`` copies what may be
  a view), which ``replay.plan`` relies on (``KernelPrimitive.fresh_results``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.compiler.kernels import Region
from autodiff.compiler.replay import compile_graph
from autodiff.core.graph import Graph
from autodiff.core.primitive import Primitive

__all__ = ["Fallback", "KernelPrimitive", "caller", "flags"]


class KernelPrimitive(Primitive):
    """A region of a graph compiled into one kernel: its implementation runs it (with
    the checks of the module docstring); its results are new arrays."""

    __slots__ = ("dispatcher", "region", "source")
    fresh_results = True  # for replay.py: its results share memory with nothing

    def __init__(self, runner: Callable, region: Region, source: str) -> None:
        super().__init__("kernel", runner, multiple_results=True)
        self.region, self.source = region, source
        self.dispatcher: Any = None  # the backend's compiled function, for inspection


# --- the floating-point status flags, as NumPy reads them --------------------------------------

# fenv.h's bits, per architecture: (invalid, divide by zero, overflow, underflow)
_FE_BITS = {"x86": (0x01, 0x04, 0x08, 0x10), "arm": (0x01, 0x02, 0x04, 0x08)}


class _Flags:
    def __init__(self, libm: Any, bits: tuple[int, int, int, int]) -> None:
        self.clear = libm.feclearexcept
        self.test = libm.fetestexcept
        self.bits = bits
        self.all = bits[0] | bits[1] | bits[2] | bits[3]

    def matter(self, raised: int) -> bool:
        """Whether NumPy would report one of the ``raised`` flags (np.geterr())."""
        err: dict = dict(np.geterr())
        for bit, name in zip(self.bits, ("invalid", "divide", "over", "under")):
            if raised & bit and err[name] != "ignore":
                return True
        return False


@functools.cache
def flags() -> _Flags | None:
    """The C library's ``feclearexcept``/``fetestexcept`` with this machine's bits; None
    where they cannot be read (then no kernel is called)."""
    machine = platform.machine().lower()
    arch = (
        "x86"
        if machine in ("x86_64", "amd64", "i386", "i686")
        else "arm"
        if machine in ("arm64", "aarch64")
        else None
    )
    if arch is None:
        return None
    for name in (ctypes.util.find_library("m"), ctypes.util.find_library("c"), None):
        try:
            lib = ctypes.CDLL(name)
            lib.feclearexcept.argtypes = lib.fetestexcept.argtypes = [ctypes.c_int]
            lib.feclearexcept.restype = lib.fetestexcept.restype = ctypes.c_int
        except (OSError, AttributeError):
            continue
        return _Flags(lib, _FE_BITS[arch])
    return None


# --- the caller -----------------------------------------------------------------------------


def caller(kernel: Callable, region: Region, consts: list,
           retry: Callable[[Exception], bool]) -> Callable:  # fmt: skip
    """The function a kernel's equation calls (generated: a call costs what it must):
    ``kernel(*inputs, *consts)`` with the checks of the module docstring.
    ``retry(error)``: whether ``error`` meant a variant the kernel lacked, made now."""
    found = flags()
    assert found is not None
    names = [f"a{i}" for i in range(len(region.inputs))]
    fallback = Fallback(region)
    args = [
        f"({n}[()] if {n}.__class__ is _ndarray else {n})" if v.aval.ndim == 0 else n
        for n, v in zip(names, region.inputs)
    ] + [f"_k{i}" for i in range(len(consts))]
    results = [
        f"_t{i}(r[{i}])" if v.aval.ndim == 0 else f"r[{i}]" for i, v in enumerate(region.outputs)
    ]
    call = f"_kernel({', '.join(args)})"
    lines = [
        f"def run({', '.join(names)}):",
        f"    _clear({found.all})",
        "    try:",
        f"        r = {call}",
        "    except Exception as e:",
        "        if not _retry(e):",  # NumPy's own error, exactly
        f"            return _fallback({', '.join(names)})",
        f"        r = {call}",  # the variant made now
        f"    raised = _test({found.all})",
        "    if raised and _matter(raised):",  # NumPy's warning or error, exactly
        f"        return _fallback({', '.join(names)})",
        f"    return ({''.join(r + ', ' for r in results)})",
    ]
    namespace: dict[str, Any] = {
        "_clear": found.clear,
        "_test": found.test,
        "_matter": found.matter,
        "_kernel": kernel,
        "_ndarray": np.ndarray,
        "_fallback": fallback,
        "_retry": retry,
    }
    namespace.update((f"_k{i}", c) for i, c in enumerate(consts))
    namespace.update((f"_t{i}", v.aval.dtype.type) for i, v in enumerate(region.outputs))
    exec(compile("\n".join(lines) + "\n", "<autodiff kernel caller>", "exec"), namespace)
    run = namespace["run"]
    run.fallback = fallback
    return run


class Fallback:
    """The region as NumPy calls (compiled the first time it is needed)."""

    def __init__(self, region: Region) -> None:
        self.region = region
        self.replay: Callable | None = None
        self.calls = 0  # (for tests: how often the kernel was not used)

    def __call__(self, *args: Any) -> tuple:
        self.calls += 1
        if self.replay is None:
            graph = Graph(self.region.inputs, self.region.outputs, self.region.eqns)
            self.replay = compile_graph(graph, fresh=True)
        return self.replay(*args)
