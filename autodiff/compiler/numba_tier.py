"""numba's backend: the regions ``kernels.py`` writes as Python source, compiled by numba.

``BACKEND`` lowers a graph's regions (``kernels.regions``, ``kernels.kernel_source``: no
numba) and compiles each into one numba function, a *kernel*, called through
``kernel_call.caller`` (NumPy's floating-point errors and exceptions, exactly).  The
stages (``stages.py``) put the kernels in the graph's replay; ``tiers.py`` decides when.

**Same numbers.**  numba compiles without fast-math and with NumPy's error model, and
``kernels.py`` casts as NumPy's loops do.

**Layouts.**  A kernel is compiled for the argument types its region's avals give:
C-contiguous arrays where the example call's arguments, the constants and the results of
ufuncs are, any layout elsewhere.  Compilation is then switched off, so a call with
another layout (a strided view) never compiles by surprise: it has the any-layout
variant compiled (``_Layouts``; at once where ``sync``, else in the background while
NumPy calls run).

**Cache.**  Each kernel's source is a file of the cache on disk (``disk_cache.py``) and
numba keeps its machine code next to it, so a later process loads it.  Kernels of one
source share one module and one dispatcher in a process; the module leaves
``sys.modules`` with the last kernel using it.  numba is imported at the first kernel;
``AUTODIFF_COMPILE=0`` in the environment switches the backend off.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import itertools
import linecache
import os
import sys
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from autodiff.compiler import background
from autodiff.compiler.backend import Backend, LoweredRegion
from autodiff.compiler.disk_cache import fingerprint, source_file
from autodiff.compiler.kernel_call import KernelPrimitive, caller, flags
from autodiff.compiler.kernels import kernel_source, regions
from autodiff.compiler.numba_process import (
    HEADER,
    compile_elsewhere,
    kernel_module,
    numba,
    numba_type,
)
from autodiff.core.graph import Graph

__all__ = ["BACKEND", "CODEGEN_VERSION", "NumbaBackend", "Plan", "available", "why_not"]

CODEGEN_VERSION = "2"  # part of every kernel's hash: bump when the generated code changes meaning


# --- is the backend available ---------------------------------------------------------------


def _enabled_by_environment() -> bool:
    return os.environ.get("AUTODIFF_COMPILE", "").strip().lower() not in ("0", "false", "no", "off")


@functools.cache
def _numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def available() -> bool:
    """Whether kernels can be compiled here: numba installed, the floating-point
    status flags readable, and ``AUTODIFF_COMPILE`` not ``0``.  (numba itself is
    imported only when a kernel is compiled.)"""
    return _enabled_by_environment() and _numba_installed() and flags() is not None


def why_not() -> str:
    """Why ``available()`` is False, for error messages."""
    if not _enabled_by_environment():
        return "AUTODIFF_COMPILE=0 is set in the environment"
    if not _numba_installed():
        return "numba is not installed (pip install 'autodiff[compile]')"
    if flags() is None:
        return "the C library's floating-point status flags (fetestexcept) are not readable here"
    return "it is available"


# --- what compiling one region takes --------------------------------------------------------


class Plan:
    """A lowered region's source, the scalar functions it calls, its key (the hash of
    all that and the versions), the name of its module and file in the cache, and its
    argument types as plain data (``numba_type`` makes them in another process too)."""

    def __init__(self, lowered: LoweredRegion, contiguous: frozenset) -> None:
        region, writer = lowered.region, lowered.detail
        self.source = lowered.text
        self.functions = {n: fn for n, fn in writer.functions.values()}
        self.consts = [value for _, value in writer.consts.values()]
        prints = [fingerprint(fn) for fn in self.functions.values()]
        versions = f"{numba().__version__} {np.__version__} {sys.version_info[:2]}"
        versions += f" {CODEGEN_VERSION}"
        self.key = "\0".join([self.source, versions]).encode() + b"\0".join(
            p or b"" for p in prints
        )
        self.cacheable = all(p is not None for p in prints)
        # the name of the file (source_file), which numba's cache records and imports
        self.name = f"autodiff_kernel_{hashlib.sha256(self.key).hexdigest()[:32]}"
        if not self.cacheable:  # closures: the code does not say what they compute
            self.name += f"_{next(_unique)}"
        consts = [_describe_value(c) for c in self.consts]
        self.signature = [_describe(v.aval, "C" if v in contiguous else "A")
                          for v in region.inputs] + consts  # fmt: skip
        self.general = [_describe(v.aval, "A") for v in region.inputs] + consts


def _describe(aval: Any, layout: str) -> list:
    """An argument's numba type, as plain data: a scalar's dtype, or an array's dtype,
    dimensions, layout and (always, for inputs: kernels never write them) read-only."""
    if aval.ndim == 0:
        return [aval.dtype.str]
    return [aval.dtype.str, aval.ndim, layout, True]


def _describe_value(value: np.ndarray) -> list:
    info = value.flags
    layout = "C" if info.c_contiguous else "F" if info.f_contiguous else "A"
    return [value.dtype.str, value.ndim, layout, not info.writeable]


# --- one kernel ------------------------------------------------------------------------------


def compile_kernel(lowered: LoweredRegion, contiguous: frozenset = frozenset(),
                   sync: bool = True) -> KernelPrimitive:  # fmt: skip
    """``lowered`` compiled (or loaded from the cache on disk), for C-contiguous arrays
    where ``contiguous`` holds the input, for any layout elsewhere (module docstring)."""
    plan = Plan(lowered, contiguous)
    dispatcher = _dispatcher(plan)
    signature = tuple(numba_type(d) for d in plan.signature)
    general = tuple(numba_type(d) for d in plan.general)
    try:
        _compile(dispatcher, signature)
    except Exception:  # a cache on disk numba cannot read (a file gone, another numba's)?
        dispatcher = numba().njit(error_model="numpy", nogil=True)(dispatcher.py_func)
        _compile(dispatcher, signature)  # compiled here, not loaded (or numba's error)
    finally:  # numba read the source through linecache, which would keep it for good
        linecache.cache.pop(dispatcher.py_func.__code__.co_filename, None)
    layouts = _Layouts(dispatcher, general if general != signature else None, sync)
    runner = caller(dispatcher, lowered.region, plan.consts, layouts.missing)
    kernel = KernelPrimitive(runner, lowered.region, plan.source)
    kernel.dispatcher = dispatcher
    _users[weakref.ref(kernel, _released)] = plan.name  # the module goes with the last kernel
    return kernel


# Kernels of one source share a module and a dispatcher (compiled once per process):
# module name -> [dispatcher, kernels using it]; the module leaves sys.modules with the last.
_loaded: dict[str, list] = {}
_loaded_lock = threading.Lock()
_compile_lock = threading.RLock()  # compiling, and switching compilation on and off
_unique = itertools.count()


def _dispatcher(plan: Plan) -> Any:
    """The numba dispatcher of ``plan``'s source, shared by the kernels of that source."""
    with _loaded_lock:
        found = _loaded.get(plan.name)
        if found is not None:
            found[1] += 1
            return found[0]
    path = source_file(HEADER + plan.source, plan.key) if plan.cacheable else None
    module = kernel_module(plan.name, path, plan.source, plan.functions)
    dispatcher = numba().njit(cache=path is not None, error_model="numpy", nogil=True)(
        module.kernel
    )
    with _loaded_lock:
        found = _loaded.get(plan.name)
        if found is not None:  # another thread made it meanwhile
            found[1] += 1
            return found[0]
        sys.modules[plan.name] = module  # numba finds a cached kernel's globals there
        _loaded[plan.name] = [dispatcher, 1]
    return dispatcher


def _compile(dispatcher: Any, signature: tuple) -> None:
    """``dispatcher`` compiled for ``signature``; compilation off again afterwards, so a
    call with other types never compiles (``_Layouts`` decides)."""
    with _compile_lock:
        if signature in dispatcher.overloads:
            return
        dispatcher.disable_compile(False)
        try:
            dispatcher.compile(signature)
        finally:
            if dispatcher.overloads:
                dispatcher.disable_compile()


_users: dict = {}  # weak reference to a kernel -> the name of its module


def _released(ref: Any) -> None:
    name = _users.pop(ref, None)
    if name is not None:
        _release(name)


def _release(name: str) -> None:
    with _loaded_lock:
        found = _loaded.get(name)
        if found is None:
            return
        found[1] -= 1
        if not found[1]:
            del _loaded[name]
            sys.modules.pop(name, None)


class _Layouts:
    """A kernel's variant for arrays of any layout, compiled the first time a call
    needs it (a strided view where the kernel expected a C-contiguous array)."""

    def __init__(self, dispatcher: Any, general: tuple | None, sync: bool) -> None:
        self.dispatcher, self.general, self.sync = dispatcher, general, sync
        self.asked = general is None

    def missing(self, error: Exception) -> bool:
        """Whether ``error`` is the dispatcher's (no variant for these arguments), and
        the general variant is there now to run them."""
        if self.asked or not isinstance(error, TypeError) or "No matching" not in str(error):
            return False
        self.asked = True
        if not self.sync:
            background.compile_later(self._compile)
            return False
        self._compile()
        return True

    def _compile(self) -> None:
        assert self.general is not None
        _compile(self.dispatcher, self.general)


# --- the backend ----------------------------------------------------------------------------


def _runs_functions(prim: Any) -> bool:
    return getattr(prim, "runs_functions", False)


class NumbaBackend(Backend):
    """Regions as Python source (``kernels.py``), compiled by numba."""

    name = "numba"

    def available(self) -> bool:
        return available()

    def why_not(self) -> str:
        return why_not()

    def lower(self, graph: Graph) -> tuple[LoweredRegion, ...]:
        return tuple(LoweredRegion(r, *kernel_source(r)) for r in regions(graph, _runs_functions))

    def compile(self, lowered: LoweredRegion, contiguous: frozenset,
                sync: bool) -> KernelPrimitive:  # fmt: skip
        return compile_kernel(lowered, contiguous, sync)

    def prepare(self, lowered: Sequence[LoweredRegion], contiguous: frozenset) -> None:
        compile_elsewhere([Plan(r, contiguous) for r in lowered])


BACKEND = NumbaBackend()
