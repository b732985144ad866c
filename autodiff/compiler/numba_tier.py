"""``jit``'s compiling tier: regions of a graph compiled by numba, cached on disk.

``fused_replay(graph, fresh)`` compiles the regions ``kernels.regions`` finds in a
jitted function's optimised graph (one numba function each, a *kernel*) and returns
the graph's replay with each region replaced by one call of its kernel; what does not
lower stays the NumPy calls of ``replay.py`` between them.  ``jit.py`` decides when
(``compile=`` and ``HOT_CALLS``) and swaps the result in when it is ready;
``compile_later`` runs that work in a background thread, so no call waits for it, and
that thread has numba compile in another process (``compile_elsewhere``: numba holds
the GIL for much of its work), then loads the kernels from the cache on disk.

**Same numbers.**  numba compiles without fast-math and with NumPy's error model, and
``kernels.py`` casts as NumPy's loops do.  NumPy reports floating-point errors
(``invalid value encountered in log``) from the processor's status flags after each
loop; a kernel's caller does the same: it clears the flags, runs the kernel and, where
a flag went up that ``np.geterr()`` does not ignore, runs the region again as NumPy
calls, which warn or raise exactly as NumPy does (and give the same values).  A
kernel that raises (a singular matrix) or meets an argument it was not compiled for
runs as NumPy calls too.  Where the flags cannot be read (no C library with
``fetestexcept``), the tier is off.

**The cache.**  Each kernel's source is written to a file named by a hash of the
source (and of numba's, NumPy's and this package's versions, and the code of the
scalar functions it calls), in ``cache_dir()``: ``$AUTODIFF_CACHE_DIR``, else
``$XDG_CACHE_HOME/autodiff/kernels``, else ``~/.cache/autodiff/kernels``.  numba keeps
the machine code next to it (``__pycache__``), so a later process loads a kernel
instead of compiling it.  ``clear_cache()`` (or deleting the directory) empties it.
``AUTODIFF_COMPILE=0`` in the environment switches the tier off.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import ctypes
import ctypes.util
import dis
import functools
import hashlib
import importlib.util
import itertools
import json
import linecache
import marshal
import math
import os
import platform
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import types
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from autodiff.compiler.kernels import Region, kernel_source, regions
from autodiff.compiler.replay import compile_graph, final_graph
from autodiff.core.graph import Eqn, Graph, Var
from autodiff.core.primitive import Primitive
from autodiff.errors import AutodiffWarning

__all__ = [
    "HOT_CALLS",
    "KernelPrimitive",
    "available",
    "cache_dir",
    "clear_cache",
    "compile_later",
    "fused_replay",
    "wait_for_background",
]

# Regions that did not compile, with the error (for tests: a lowering numba refuses)
failures: list = []

HOT_CALLS = 8  # calls of one signature after which compile="auto" compiles it (in the background)
CODEGEN_VERSION = "2"  # part of every kernel's hash: bump when the generated code changes meaning


# --- is the tier available ------------------------------------------------------------------


def _enabled_by_environment() -> bool:
    return os.environ.get("AUTODIFF_COMPILE", "").strip().lower() not in ("0", "false", "no", "off")


@functools.cache
def _numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def available() -> bool:
    """Whether kernels can be compiled here: numba installed, the floating-point
    status flags readable, and ``AUTODIFF_COMPILE`` not ``0``.  (numba itself is
    imported only when a kernel is compiled.)"""
    return _enabled_by_environment() and _numba_installed() and _flags() is not None


def why_not() -> str:
    """Why ``available()`` is False, for error messages."""
    if not _enabled_by_environment():
        return "AUTODIFF_COMPILE=0 is set in the environment"
    if not _numba_installed():
        return "numba is not installed (pip install 'autodiff[compile]')"
    if _flags() is None:
        return "the C library's floating-point status flags (fetestexcept) are not readable here"
    return "it is available"


@functools.cache
def _numba() -> Any:
    import numba  # optional, and seconds to import: only when a kernel is first compiled

    return numba


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
def _flags() -> _Flags | None:
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


# --- the cache on disk ------------------------------------------------------------------------


def cache_dir() -> Path:
    """Where compiled kernels are kept (see the module docstring)."""
    explicit = os.environ.get("AUTODIFF_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "autodiff" / "kernels"


def clear_cache() -> None:
    """Delete every kernel kept on disk (kernels loaded in this process stay)."""
    shutil.rmtree(cache_dir(), ignore_errors=True)


def _fingerprint(fn: Callable) -> bytes | None:
    """The code of a scalar function a kernel calls, for the kernel's hash; None where
    the code alone does not say what it computes (closures, builtins: then the kernel
    is compiled, not cached)."""
    if isinstance(fn, np.ufunc):
        return fn.__name__.encode()
    code = getattr(fn, "__code__", None)
    if code is None or getattr(fn, "__closure__", None):
        return None
    # numba freezes the globals a function reads: their values are part of what it computes
    read = {name: fn.__globals__[name] for name in code.co_names if name in fn.__globals__}
    frozen = {k: v for k, v in read.items() if isinstance(v, (int, float, complex, bool, tuple))}
    try:
        return marshal.dumps(code) + repr(sorted(frozen.items())).encode()
    except ValueError:
        return None


def _source_file(source: str, key: bytes) -> Path | None:
    """The file holding ``source``, written once under its hash; None where the cache
    directory cannot be written (the kernel is then compiled, not cached)."""
    name = "k" + hashlib.sha256(key).hexdigest()[:32] + ".py"
    folder = cache_dir()
    path = folder / name
    if path.exists():
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        try:  # never rewrite an existing file: numba's index goes by its time stamp
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:
            if not path.exists():
                os.replace(tmp, path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    except OSError:
        return None
    return path


# --- one kernel ------------------------------------------------------------------------------


class KernelPrimitive(Primitive):
    """A region of a graph compiled into one kernel: its implementation runs it (with
    the checks of the module docstring); its results are new arrays."""

    __slots__ = ("dispatcher", "region", "source")
    fresh_results = True  # for replay.py: its results share memory with nothing

    def __init__(self, runner: Callable, region: Region, source: str) -> None:
        super().__init__("kernel", runner, multiple_results=True)
        self.region, self.source = region, source
        self.dispatcher: Any = None  # numba's, for tests and inspection


_HEADER = "import numpy as np\n\n\n"


def _numba_type(aval: Any, layout: str = "A") -> Any:
    nb = _numba()
    dtype = nb.from_dtype(aval.dtype)
    if aval.ndim == 0:
        return dtype
    return nb.types.Array(dtype, aval.ndim, layout, readonly=True)


class _Plan:
    """What compiling a region takes: its source, the scalar functions it calls, the
    name of its module (the hash of all that) and its file in the cache, and the
    argument types (portable: ``_type_of`` makes them in another process too)."""

    def __init__(self, region: Region, contiguous: frozenset) -> None:
        nb = _numba()
        self.source, writer = kernel_source(region)
        self.functions = {n: fn for n, fn in writer.functions.values()}
        self.consts = [value for _, value in writer.consts.values()]
        prints = [_fingerprint(fn) for fn in self.functions.values()]
        versions = f"{nb.__version__} {np.__version__} {sys.version_info[:2]} {CODEGEN_VERSION}"
        self.key = "\0".join([self.source, versions]).encode() + b"\0".join(
            p or b"" for p in prints
        )
        self.cacheable = all(p is not None for p in prints)
        # the name of the file (_source_file), which numba's cache records and imports
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
    flags = value.flags
    layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
    return [value.dtype.str, value.ndim, layout, not flags.writeable]


def _type_of(description: list) -> Any:
    nb = _numba()
    dtype = nb.from_dtype(np.dtype(description[0]))
    if len(description) == 1:
        return dtype
    _, ndim, layout, readonly = description
    return nb.types.Array(dtype, ndim, layout, readonly=readonly)


def compile_kernel(region: Region, contiguous: frozenset = frozenset(),
                   sync: bool = True) -> KernelPrimitive:  # fmt: skip
    """``region`` compiled (or loaded from the cache on disk), for C-contiguous arrays
    where ``contiguous`` holds the input (the arguments of the call that made the
    signature hot; NumPy's results are too, mostly), for any layout elsewhere.  A call
    with another layout (a strided view) has the kernel compiled for any layout as
    well: at once where ``sync``, else in the background while NumPy calls run."""
    plan = _Plan(region, contiguous)
    dispatcher = _dispatcher(plan)
    signature = tuple(_type_of(d) for d in plan.signature)
    general = tuple(_type_of(d) for d in plan.general)
    try:
        _compile(dispatcher, signature)
    except Exception:  # a cache on disk numba cannot read (a file gone, another numba's)?
        dispatcher = _numba().njit(error_model="numpy", nogil=True)(dispatcher.py_func)
        _compile(dispatcher, signature)  # compiled here, not loaded (or numba's error)
    finally:  # numba read the source through linecache, which would keep it for good
        linecache.cache.pop(dispatcher.py_func.__code__.co_filename, None)
    layouts = _Layouts(dispatcher, general if general != signature else None, sync)
    runner = _runner(dispatcher, region, plan.consts, layouts)
    kernel = KernelPrimitive(runner, region, plan.source)
    kernel.dispatcher = dispatcher
    _users[weakref.ref(kernel, _released)] = plan.name  # the module goes with the last kernel
    return kernel


# Kernels of one source share a module and a dispatcher (compiled once per process):
# module name -> [dispatcher, kernels using it]; the module leaves sys.modules with the last.
_loaded: dict[str, list] = {}
_loaded_lock = threading.Lock()
_compile_lock = threading.RLock()  # compiling, and switching compilation on and off
_unique = itertools.count()


def _dispatcher(plan: _Plan) -> Any:
    """The numba dispatcher of ``plan``'s source, shared by the kernels of that source."""
    with _loaded_lock:
        found = _loaded.get(plan.name)
        if found is not None:
            found[1] += 1
            return found[0]
    path = _source_file(_HEADER + plan.source, plan.key) if plan.cacheable else None
    module = _module(plan.name, path, plan.source, plan.functions)
    dispatcher = _numba().njit(cache=path is not None, error_model="numpy", nogil=True)(
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


def _module(name: str, path: Path | None, source: str, functions: dict) -> Any:
    """The module a kernel's source runs in (the same in a compiling process)."""
    nb = _numba()
    module = types.ModuleType(name)
    module.__file__ = str(path) if path else "<autodiff kernel>"
    module.__dict__["np"] = np
    for fn_name, fn in functions.items():
        module.__dict__[fn_name] = nb.njit(error_model="numpy", cache=False)(fn)
    exec(compile(_HEADER + source, module.__file__, "exec"), module.__dict__)
    return module


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
            compile_later(self._compile)
            return False
        self._compile()
        return True

    def _compile(self) -> None:
        assert self.general is not None
        _compile(self.dispatcher, self.general)


def _runner(dispatcher: Any, region: Region, consts: list, layouts: _Layouts) -> Callable:
    """The kernel's caller (generated: a call costs what it must): 0-d inputs as
    scalars, the status flags checked, 0-d results as NumPy scalars of their dtype."""
    flags = _flags()
    assert flags is not None
    names = [f"a{i}" for i in range(len(region.inputs))]
    fallback = _Fallback(region)
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
        f"    _clear({flags.all})",
        "    try:",
        f"        r = {call}",
        "    except Exception as e:",
        "        if not _missing(e):",  # NumPy's own error, exactly
        f"            return _fallback({', '.join(names)})",
        f"        r = {call}",  # the variant for any layout, compiled now
        f"    raised = _test({flags.all})",
        "    if raised and _matter(raised):",  # NumPy's warning or error, exactly
        f"        return _fallback({', '.join(names)})",
        f"    return ({''.join(r + ', ' for r in results)})",
    ]
    namespace: dict[str, Any] = {
        "_clear": flags.clear,
        "_test": flags.test,
        "_matter": flags.matter,
        "_kernel": dispatcher,
        "_ndarray": np.ndarray,
        "_fallback": fallback,
        "_missing": layouts.missing,
    }
    namespace.update((f"_k{i}", c) for i, c in enumerate(consts))
    namespace.update((f"_t{i}", v.aval.dtype.type) for i, v in enumerate(region.outputs))
    exec(compile("\n".join(lines) + "\n", "<autodiff kernel caller>", "exec"), namespace)
    run = namespace["run"]
    run.fallback = fallback
    return run


class _Fallback:
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


# --- the graph with its regions compiled ------------------------------------------------------


def _runs_functions(prim: Any) -> bool:
    return getattr(prim, "runs_functions", False)


def fused_graph(graph: Graph, contiguous: frozenset = frozenset(),
                sync: bool = True) -> tuple[Graph, list[KernelPrimitive]]:  # fmt: skip
    """``graph`` (optimised) with each region worth compiling replaced by one equation
    of its kernel; the kernels (none: nothing to compile).  ``contiguous``: the
    variables known to hold C-contiguous arrays (``compile_kernel``)."""
    found = regions(graph, _runs_functions)
    if not found:
        return graph, []
    if not sync:  # numba's work in another process: this one only loads the kernels
        compile_elsewhere([_Plan(r, contiguous) for r in found])
    compiled = []
    for region in found:
        try:
            compiled.append((region, compile_kernel(region, contiguous, sync)))
        except Exception as e:  # a lowering numba refuses: its region stays NumPy calls
            failures.append((region, e))
            warnings.warn(
                f"jit: a region of {len(region.eqns)} equations of '{graph.name}' "
                f"({', '.join(sorted({q.prim.name for q in region.eqns}))}) did not compile "
                f"and runs as NumPy calls: {type(e).__name__}: {str(e)[:300]}",
                AutodiffWarning,
                stacklevel=2,
            )
    if not compiled:
        return graph, []
    found = [r for r, _ in compiled]
    kernels = [k for _, k in compiled]
    first = {id(r.eqns[0]): (r, k) for r, k in compiled}
    members = {id(e) for r in found for e in r.eqns}
    eqns: list[Eqn] = []
    for eqn in graph.eqns:
        if id(eqn) in first:
            region, kernel = first[id(eqn)]
            eqns.append(Eqn(kernel, list(region.inputs), list(region.outputs), {}))
        elif id(eqn) not in members:
            eqns.append(eqn)
    return graph.replace(eqns=eqns, name=graph.name), kernels


def fused_replay(graph: Graph, fresh: bool = False, args: Any = None,
                 sync: bool = True) -> Callable | None:  # fmt: skip
    """The replay of ``graph`` with its regions compiled (module docstring), cached on
    the graph; None where no region is worth compiling.  ``args``: an example of the
    arguments (kernels are compiled for C-contiguous arrays where they are); ``sync``:
    whether a call needing another variant of a kernel compiles it at once (else in
    the background)."""
    key = ("kernels", fresh)
    found = graph.cache.get(key, False)
    if found is False:
        final = final_graph(graph, "numpy")
        contiguous = frozenset(_contiguous(final, args))
        fused, kernels = fused_graph(final, contiguous, sync)
        found = None
        if kernels:
            found = compile_graph(fused, "numpy", None, fresh)
            found.kernels = kernels  # type: ignore[attr-defined]
            found.fused_graph = fused  # type: ignore[attr-defined]
        with graph.lock:
            found = graph.cache.setdefault(key, found)
    return found


def _contiguous(graph: Graph, args: Any) -> list[Var]:
    """The variables of ``graph`` that hold C-contiguous arrays: the arguments that are
    (in ``args``, an example call's), the constants that are, and the results of
    ufuncs (NumPy makes them C-contiguous from such operands) and of other kernels."""
    found = [c for c, value in zip(graph.constvars, graph.consts)
             if isinstance(value, np.ndarray) and value.flags.c_contiguous]  # fmt: skip
    if args is not None:
        found += [v for v, a in zip(graph.invars, args)
                  if isinstance(a, np.ndarray) and a.flags.c_contiguous]  # fmt: skip
    known = set(found)
    for eqn in graph.eqns:
        if isinstance(eqn.prim.impl, np.ufunc) and all(
            type(v) is not Var or v.aval.ndim == 0 or v in known for v in eqn.invars
        ):
            known.update(eqn.outvars)
    return list(known)


# --- compiling in another process ------------------------------------------------------------

# The globals a scalar function may read to be compiled in another process.
_PORTABLE_GLOBALS = {"np": np, "numpy": np, "math": math}


def _portable(fn: Callable) -> str | None:
    """``fn``'s code (marshalled, hex) where another process can rebuild it: no closure,
    no defaults, reading no globals but NumPy, ``math`` and the builtins."""
    code = getattr(fn, "__code__", None)
    if code is None or fn.__closure__ or fn.__defaults__ or fn.__kwdefaults__:  # type: ignore[attr-defined]
        return None
    for instruction in dis.get_instructions(code):
        if instruction.opname == "LOAD_GLOBAL":
            name = instruction.argval
            found = fn.__globals__.get(name, _MISSING)  # type: ignore[attr-defined]
            if found is _MISSING:
                if not hasattr(builtins, name):
                    return None
            elif _PORTABLE_GLOBALS.get(name) is not found:
                return None
    if any(hasattr(c, "co_code") for c in code.co_consts):  # nested functions: compile here
        return None
    return marshal.dumps(code).hex()


_MISSING = object()


def compile_elsewhere(plans: list[_Plan]) -> None:
    """Compile the kernels of ``plans`` in another Python process, into the cache on
    disk, from which this one then loads them: numba holds the GIL for much of its
    work, and a thread compiling here would make calls wait (up to 0.1 s at a time).
    Kernels calling functions another process cannot rebuild (``_portable``) are left
    to compile here; a failure there only means they compile here too."""
    specs = []
    for plan in plans:
        codes = {name: _portable(fn) for name, fn in plan.functions.items()}
        path = _source_file(_HEADER + plan.source, plan.key) if plan.cacheable else None
        if path is None or any(c is None for c in codes.values()):
            continue
        specs.append({"name": plan.name, "path": str(path), "source": plan.source,
                      "functions": codes, "signature": plan.signature})  # fmt: skip
    if not specs or not sys.executable:
        return
    folder = cache_dir()
    package = str(Path(__file__).resolve().parents[2])  # where autodiff is imported from
    search = os.pathsep.join(filter(None, [package, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, AUTODIFF_CACHE_DIR=str(folder), PYTHONPATH=search)
    try:
        fd, spec = tempfile.mkstemp(dir=folder, suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(specs, f)
        subprocess.run([sys.executable, "-m", "autodiff.compiler.numba_tier", spec], env=env,
                       capture_output=True, timeout=1800, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(spec)


def _compile_specs(spec_file: str) -> None:
    """The other process's side of ``compile_elsewhere``."""
    nb = _numba()
    with open(spec_file) as f:
        specs = json.load(f)
    for spec in specs:
        functions = {
            name: types.FunctionType(marshal.loads(bytes.fromhex(code)),
                                     {**_PORTABLE_GLOBALS, "__builtins__": builtins}, name)
            for name, code in spec["functions"].items()
        }  # fmt: skip
        module = _module(spec["name"], Path(spec["path"]), spec["source"], functions)
        sys.modules[spec["name"]] = module
        dispatcher = nb.njit(cache=True, error_model="numpy", nogil=True)(module.kernel)
        dispatcher.compile(tuple(_type_of(d) for d in spec["signature"]))


# --- compiling in the background ------------------------------------------------------------


class _Worker:
    """One daemon thread compiling kernels in turn; the jobs left at exit are dropped."""

    def __init__(self) -> None:
        self.jobs: queue.Queue = queue.Queue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.stopping = False
        self.idle = threading.Event()
        self.idle.set()
        self.pending = 0

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


_worker = _Worker()
atexit.register(_worker.stop)


def compile_later(job: Callable[[], None]) -> None:
    """Run ``job`` (which compiles kernels and installs them) in the background."""
    _worker.submit(job)


def wait_for_background(timeout: float | None = None) -> bool:
    """Wait until the background compilations submitted so far are done (tests,
    benchmarks); whether they are."""
    return _worker.idle.wait(timeout)


if __name__ == "__main__":  # python -m autodiff.compiler.numba_tier SPEC: compile_elsewhere's
    _compile_specs(sys.argv[1])
