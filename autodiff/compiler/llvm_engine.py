"""LLVM, through llvmlite: LLVM IR text in, a Python-callable native function out.

``compile_ir(text, entry)`` parses a module written by ``llvm_codegen.py``, optimises it
(LLVM's ``-O2`` pipeline, never fast-math: ``fadd`` stays ``fadd``), generates machine
code for this processor and returns a :class:`Native` whose ``function`` is a CPython
built-in function (``METH_FASTCALL``) running the module's ``entry``: a call costs what
calling ``len`` costs, no ctypes conversion.  Each module has an execution engine
of its own, so the memory of a kernel (its code and its module) goes when the last
reference to its function goes.

The machine code is kept on disk (``disk_cache.py``) under a hash of the IR text, the
processor and the LLVM version: a later process parses the module but skips the
optimisation and code generation.  The IR names the addresses it needs (NumPy's own
loops, the C library's ``fetestexcept``, ``malloc``) by symbol (``symbol``), resolved in
each process, so cached code never holds another process's addresses.

llvmlite is imported on first use (``python -m autodiff`` and plain ``import autodiff``
never pay for it).  Its calls release the GIL: a compilation in a background thread
leaves the program's threads running.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import importlib.util
import os
import platform
import threading
import time
import weakref
from typing import Any

import numpy as np

from autodiff.compiler import background, disk_cache

__all__ = ["Native", "available", "compile_ir", "host", "symbol", "why_not"]

CODEGEN_VERSION = "1"  # part of every cache key: bump when the generated code changes meaning

# fenv.h's exception bits where the compiled code runs: (invalid, divide, overflow, underflow)
_FE_BITS = {"x86_64": (0x01, 0x04, 0x08, 0x10), "aarch64": (0x01, 0x02, 0x04, 0x08)}


def _arch() -> str | None:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return "x86_64"
    if machine in ("arm64", "aarch64"):
        return "aarch64"
    return None


def _enabled_by_environment() -> bool:
    return os.environ.get("AUTODIFF_COMPILE", "").strip().lower() not in ("0", "false", "no", "off")


@functools.cache
def _llvmlite_installed() -> bool:
    return importlib.util.find_spec("llvmlite") is not None


@functools.cache
def _llvm_version() -> tuple:
    """llvmlite's LLVM version, read without initialising LLVM."""
    try:
        from llvmlite.binding import llvm_version_info
    except ImportError:  # pragma: no cover
        return (0,)
    return tuple(llvm_version_info)


@functools.cache
def _numpy_loops() -> bool:
    """Whether NumPy exposes its inner loops (``ufunc._get_strided_loop``, NumPy >= 1.24)."""
    return hasattr(np.add, "_get_strided_loop") and hasattr(np.add, "_resolve_dtypes_and_context")


def available() -> bool:
    """Whether kernels can be compiled here: llvmlite installed, a 64-bit x86 or ARM
    processor, NumPy's inner loops reachable, the C library's floating-point status
    flags readable, and ``AUTODIFF_COMPILE`` not ``0``.  (llvmlite is imported only
    when a kernel is compiled.)"""
    return why_not() is None


def why_not() -> str | None:
    """Why ``available()`` is False, for error messages (None where it is True)."""
    if not _enabled_by_environment():
        return "AUTODIFF_COMPILE=0 is set in the environment"
    if not _llvmlite_installed():
        return "llvmlite is not installed (pip install 'autodiff[compile]')"
    if _llvm_version() < (19,):
        return (f"llvmlite's LLVM is {'.'.join(map(str, _llvm_version()))}, older than the 19 "
                f"the kernels' IR is written for (pip install 'llvmlite>=0.45')")  # fmt: skip
    if _arch() is None:
        return (
            f"compiled kernels are made for x86-64 and ARM64 processors, not {platform.machine()}"
        )
    if not _numpy_loops():
        return "this NumPy does not expose its inner loops (ufunc._get_strided_loop)"
    if _libc() is None:
        return "the C library's floating-point status flags (fetestexcept) are not readable here"
    return None


# --- the process's symbols ------------------------------------------------------------------------


@functools.cache
def _libc() -> Any:
    """A C library with ``fetestexcept`` and ``malloc``, or None."""
    for name in (ctypes.util.find_library("m"), ctypes.util.find_library("c"), None):
        try:
            lib = ctypes.CDLL(name)
            for f in ("feclearexcept", "fetestexcept", "feraiseexcept", "malloc", "free"):
                getattr(lib, f)
        except (OSError, AttributeError):
            continue
        return lib
    return None


def fe_bits() -> tuple[int, int, int, int]:
    """This processor's status flag bits: (invalid, divide by zero, overflow, underflow)."""
    arch = _arch()
    assert arch is not None
    return _FE_BITS[arch]


_symbols: dict[str, int] = {}
_symbols_lock = threading.Lock()


def symbol(name: str, address: int) -> None:
    """Make ``name`` resolve to ``address`` in the modules compiled from now on."""
    with _symbols_lock:
        if _symbols.get(name) == address:
            return
        _llvm().add_symbol(name, address)
        _symbols[name] = address


def _address(fn: Any) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


@functools.cache
def _llvm() -> Any:
    """llvmlite's binding, initialised, with the symbols every kernel may call."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    libc = _libc()
    for name in ("feclearexcept", "fetestexcept", "feraiseexcept", "malloc", "free"):
        llvm.add_symbol(f"adx_{name}", _address(getattr(libc, name)))
    api = ctypes.pythonapi
    for name in ("PyLong_FromLong", "PyErr_Occurred"):
        llvm.add_symbol(f"adx_{name}", _address(getattr(api, name)))
    return llvm


@functools.cache
def host() -> tuple[str, str, str]:
    """(triple, processor name, its features): what the machine code is made for."""
    llvm = _llvm()
    return (
        llvm.get_process_triple(),
        llvm.get_host_cpu_name(),
        llvm.get_host_cpu_features().flatten(),
    )


def _target_machine() -> Any:
    llvm = _llvm()
    triple, cpu, features = host()
    target = llvm.Target.from_triple(triple)
    return target.create_target_machine(cpu=cpu, features=features, opt=2, codemodel="jitdefault")


# --- compiling ---------------------------------------------------------------------------------


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]  # fmt: skip


_METH_FASTCALL = 0x80
_NAME = b"kernel"


class _Definitions:
    """Method definitions for native functions.  CPython reads a built-in function's
    definition until the function's memory is gone (its flags, in its deallocation),
    which the garbage collector may do after freeing what the function held: so the
    definitions are never freed, only reused once their function is gone (a weak
    reference's callback; a late reader still finds a definition with the same flags)."""

    def __init__(self) -> None:
        self.blocks: list = []
        self.free: list = []
        self.lock = threading.Lock()
        new = ctypes.pythonapi.PyCFunction_NewEx
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.POINTER(_MethodDef), ctypes.py_object, ctypes.py_object]
        self.new = new
        self.alive: dict = {}

    def function(self, address: int, holder: Any) -> Any:
        with self.lock:
            if not self.free:
                block = (_MethodDef * 64)()
                self.blocks.append(block)
                self.free.extend(block)
            definition = self.free.pop()
        definition.ml_name, definition.ml_meth = _NAME, address
        definition.ml_flags, definition.ml_doc = _METH_FASTCALL, None
        function = self.new(ctypes.byref(definition), holder, None)

        def gone(_: Any, d: Any = definition) -> None:
            self._free(d)

        self.alive[id(definition)] = weakref.ref(function, gone)
        return function

    def _free(self, definition: Any) -> None:
        # No lock: a collection during ``function``'s allocation (holding the lock) runs
        # this in the same thread, which would wait for ever. An append and a pop of a
        # dict are atomic under the GIL; the lock only keeps two ``function``s from
        # taking the same definition.
        self.alive.pop(id(definition), None)
        self.free.append(definition)


_definitions = _Definitions()


class Native:
    """A compiled module: ``functions`` run its entries (built-in functions of the
    arguments); ``seconds`` its compilation took, ``cached`` whether its machine code
    came from the disk cache.  Each function holds the engine, and the engine the code."""

    __slots__ = ("cached", "functions", "key", "seconds")

    def __init__(self, functions: list, key: str, cached: bool, seconds: float) -> None:
        self.functions, self.key, self.cached, self.seconds = functions, key, cached, seconds


class _Holder:
    """What a native function keeps alive: its engine (the ``self`` of the built-in
    functions)."""

    __slots__ = ("__weakref__", "engine")

    def __init__(self, engine: Any) -> None:
        self.engine = engine


_engines: weakref.WeakSet = weakref.WeakSet()  # the holders of live engines (for tests)


def live_engines() -> int:
    """How many compiled modules are alive in this process."""
    return len(_engines)


def cache_key(text: str) -> str:
    triple, cpu, features = host()
    llvm = _llvm()
    parts = [text, triple, cpu, features, ".".join(map(str, llvm.llvm_version_info)),
             CODEGEN_VERSION]  # fmt: skip
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def compile_ir(text: str, entries: list[str], name: str = "kernel") -> Native:
    """``text`` (LLVM IR) compiled, its functions ``entries`` as built-in functions
    (``METH_FASTCALL``: ``entry(ptr self, ptr args, i64 nargs) -> ptr``)."""
    with background.native_work():  # (the exit waits for LLVM's work under way)
        return _compile_ir(text, entries)


def _compile_ir(text: str, entries: list[str]) -> Native:
    start = time.perf_counter()
    llvm = _llvm()
    key = cache_key(text)
    code = disk_cache.load(key)
    cached = code is not None
    if code is None:  # optimised, then machine code (an object file), kept on disk
        module = llvm.parse_assembly(text)
        module.verify()
        options = llvm.create_pipeline_tuning_options(speed_level=2)
        options.loop_vectorization = True
        options.slp_vectorization = True
        machine = _target_machine()
        builder = llvm.create_pass_builder(machine, options)
        builder.getModulePassManager().run(module, builder)
        code = machine.emit_object(module)
        disk_cache.store(key, code)
    # an engine of an empty module, loading the object file: nothing of it is left to the
    # garbage collector's order (an object cache disposed of before its engine crashes)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
    engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    engine.finalize_object()
    holder = _Holder(engine)
    functions = [_definitions.function(engine.get_function_address(e), holder) for e in entries]
    _engines.add(holder)
    return Native(functions, key, cached, time.perf_counter() - start)
