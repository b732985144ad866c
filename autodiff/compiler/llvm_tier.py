"""``jit``'s compiling tier: a graph's regions as LLVM kernels, swapped into its replay.

``fused_replay(graph, fresh)`` compiles the regions ``llvm_kernel.regions`` finds in a
jitted function's optimised graph (all in one LLVM module) and returns the graph's replay
with each region replaced by one call of its kernel; what does not lower stays the NumPy
calls of ``replay.py`` between them.  ``jit.py`` decides when (``compile=`` and
``HOT_CALLS``) and swaps the result in when it is ready; ``compile_later`` runs that work
in a background thread, so no call waits for it.  llvmlite releases the GIL while LLVM
optimises and generates code, so the program runs on meanwhile; the thread ends with
the process (a compilation under way at exit is waited for: well under a second).

**Same results.**  Kernels compute what NumPy computes, bit for bit
(``llvm_codegen.py``), report floating-point errors as NumPy reports them
(``llvm_kernel.py``), and return fresh arrays.  A 0-d result comes back as what NumPy's
replay returns there (a NumPy scalar or a 0-d array): the first call of a fused replay
runs the NumPy replay and notes which, the later calls run the kernels.

``AUTODIFF_COMPILE=0`` in the environment switches the tier off; without llvmlite it is
off (``available()``, ``why_not()``).
"""

from __future__ import annotations

import atexit
import queue
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.compiler import kernel_cache, llvm_engine, llvm_kernel
from autodiff.compiler.replay import compile_graph, compiled, final_graph
from autodiff.core.graph import Eqn, Graph, Var
from autodiff.errors import AutodiffWarning

__all__ = [
    "HOT_CALLS",
    "available",
    "cache_dir",
    "clear_cache",
    "compile_later",
    "fused_replay",
    "wait_for_background",
    "why_not",
]

HOT_CALLS = 2  # calls of one signature after which compile="auto" compiles it (in the background)

# Regions that did not compile, with the error (for tests)
failures: list = []

cache_dir = kernel_cache.cache_dir
clear_cache = kernel_cache.clear_cache


def _reason() -> str | None:
    reason = llvm_engine.why_not()
    if reason is None and not llvm_kernel.layout_known():
        reason = "this Python's or NumPy's object layout is not the one compiled kernels read"
    return reason


def available() -> bool:
    """Whether kernels can be compiled here (``llvm_engine.available``, and CPython's and
    NumPy's object layouts as the kernels' entries read them)."""
    return _reason() is None


def why_not() -> str:
    """Why ``available()`` is False, for messages."""
    return _reason() or "it is available"


def fused_graph(graph: Graph, name: str = "kernel") -> tuple[Graph, list]:
    """``graph`` (optimised) with each region worth compiling replaced by one equation
    of its kernel; the kernels (none: nothing to compile)."""
    found = llvm_kernel.regions(graph)
    if not found:
        return graph, []
    try:
        kernels, _ = llvm_kernel.compile_kernels(found, name)
    except Exception as e:  # LLVM refused a module: the graph stays NumPy calls
        failures.append((found, e))
        warnings.warn(
            f"jit: the kernels of '{graph.name}' did not compile and run as NumPy calls: "
            f"{type(e).__name__}: {str(e)[:300]}",
            AutodiffWarning,
            stacklevel=2,
        )
        return graph, []
    compiled_ = [(r, k) for r, k in zip(found, kernels) if k is not None]
    if not compiled_:
        return graph, []
    first = {id(r.eqns[0]): (r, k) for r, k in compiled_}
    members = {id(e) for r, _ in compiled_ for e in r.eqns}
    eqns: list[Eqn] = []
    for eqn in graph.eqns:
        if id(eqn) in first:
            region, kernel = first[id(eqn)]
            eqns.append(
                Eqn(kernel, list(region.inputs), list(region.outputs), {})
            )  # (consts inside)
        elif id(eqn) not in members:
            eqns.append(eqn)
    return graph.replace(eqns=eqns, name=graph.name), [k for _, k in compiled_]


def fused_replay(graph: Graph, fresh: bool = False, args: Any = None,
                 sync: bool = True) -> Callable | None:  # fmt: skip
    """The replay of ``graph`` with its regions compiled (module docstring), cached on
    the graph; None where no region is worth compiling.  (``args`` and ``sync``: kept for
    the callers of the numba tier's signature; kernels take any layout.)"""
    key = ("kernels", fresh)
    found = graph.cache.get(key, False)
    if found is False:
        final = final_graph(graph, "numpy")
        fused, kernels = fused_graph(final, graph.name or "kernel")
        found = None
        if kernels:
            replay = compile_graph(fused, "numpy", None, fresh)
            found = _typed(replay, fused, graph, fresh)
            found.kernels = kernels  # type: ignore[attr-defined]
            found.fused_graph = fused  # type: ignore[attr-defined]
            found.source = replay.source  # type: ignore[attr-defined]
        with graph.lock:
            found = graph.cache.setdefault(key, found)
    return found


def _typed(replay: Callable, fused: Graph, graph: Graph, fresh: bool) -> Callable:
    """``replay`` returning each 0-d result a kernel computes as NumPy's replay returns it
    (a NumPy scalar or a 0-d array): noted on the first call, which runs NumPy's replay."""
    from_kernel = {v for e in fused.eqns if isinstance(e.prim, llvm_kernel.KernelPrimitive)
                   for v in e.outvars}  # fmt: skip
    zero_d = [i for i, v in enumerate(fused.outvars)
              if type(v) is Var and v in from_kernel and v.aval.ndim == 0]  # fmt: skip
    if not zero_d:
        return _Plain(replay)
    return _Typed(replay, compiled(graph, "numpy", None, fresh), zero_d)


class _Plain:
    __slots__ = ("__dict__", "replay")

    def __init__(self, replay: Callable) -> None:
        self.replay = replay

    def __call__(self, *args: Any) -> tuple:
        return self.replay(*args)


class _Typed:
    __slots__ = ("__dict__", "numpy", "replay", "scalars", "zero_d")

    def __init__(self, replay: Callable, numpy: Callable, zero_d: list[int]) -> None:
        self.replay, self.numpy, self.zero_d = replay, numpy, zero_d
        self.scalars: list[int] | None = None

    def __call__(self, *args: Any) -> tuple:
        if self.scalars is None:
            outs = self.numpy(*args)
            self.scalars = [i for i in self.zero_d if type(outs[i]) is not np.ndarray]
            return outs
        outs = self.replay(*args)
        if self.scalars:
            outs = list(outs)
            for i in self.scalars:
                outs[i] = outs[i][()]
            outs = tuple(outs)
        return outs


# --- compiling in the background ------------------------------------------------------------


class _Worker:
    """One daemon thread compiling kernels in turn; at exit, the job under way is waited
    for and the others are dropped."""

    def __init__(self) -> None:
        self.jobs: queue.Queue = queue.Queue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.stopping = False
        self.idle = threading.Event()
        self.idle.set()
        self.pending = 0
        self.running = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self.lock:
            if self.stopping:
                return
            self.pending += 1
            self.idle.clear()
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="autodiff-compile",
                                               daemon=True)  # fmt: skip
                self.thread.start()
        self.jobs.put(job)

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                with self.running:
                    if not self.stopping:
                        job()
            except Exception:  # a kernel that does not compile stays NumPy calls
                pass
            finally:
                with self.lock:
                    self.pending -= 1
                    if not self.pending:
                        self.idle.set()

    def stop(self) -> None:
        self.stopping = True
        with self.running:  # the compilation under way ends before the interpreter does
            pass


_worker = _Worker()
atexit.register(_worker.stop)


def compile_later(job: Callable[[], None]) -> None:
    """Run ``job`` (which compiles kernels and installs them) in the background."""
    _worker.submit(job)


def wait_for_background(timeout: float | None = None) -> bool:
    """Wait until the background compilations submitted so far are done (tests,
    benchmarks); whether they are."""
    return _worker.idle.wait(timeout)
