"""numba compiling kernels in another Python process, and what both processes share.

numba holds the GIL for much of its work: a thread compiling here would make calls
wait (a thread compiling the pendulum's kernels made one call in 300 wait more than a
millisecond, some 0.1 s).  So the background thread (``background.py``) has another
process compile a signature's kernels into the cache on disk (``compile_elsewhere``),
then loads them (a few ms).  What goes across is plain data: each kernel's source, the
code of the scalar functions it calls (where another process can rebuild them:
``portable``) and its argument types as lists (``numba_type`` makes them in either
process).  A kernel that cannot go is compiled here; a failure there only means the
kernels compile here too.  The other process never outlives this one: it is killed at
exit, and stops by itself between kernels where this one died unannounced.

``kernel_module`` is the module a kernel's source runs in, in this process and in the
other one alike (numba finds a cached kernel's globals through ``sys.modules``).
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dis
import functools
import json
import marshal
import math
import os
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from autodiff.compiler.disk_cache import cache_dir, source_file

__all__ = ["HEADER", "compile_elsewhere", "kernel_module", "numba", "numba_type", "portable"]

HEADER = "import numpy as np\n\n\n"  # the first lines of every kernel's file


@functools.cache
def numba() -> Any:
    """numba, imported at the first kernel (never at ``import autodiff``)."""
    import numba

    return numba


def kernel_module(name: str, path: Path | None, source: str, functions: dict) -> Any:
    """The module ``source`` runs in: NumPy, and the scalar ``functions`` compiled."""
    nb = numba()
    module = types.ModuleType(name)
    module.__file__ = str(path) if path else "<autodiff kernel>"
    module.__dict__["np"] = np
    for fn_name, fn in functions.items():
        module.__dict__[fn_name] = nb.njit(error_model="numpy", cache=False)(fn)
    exec(compile(HEADER + source, module.__file__, "exec"), module.__dict__)
    return module


def numba_type(description: list) -> Any:
    """The numba type of an argument described as plain data: ``[dtype]`` for a scalar,
    ``[dtype, ndim, layout, readonly]`` for an array."""
    nb = numba()
    dtype = nb.from_dtype(np.dtype(description[0]))
    if len(description) == 1:
        return dtype
    _, ndim, layout, readonly = description
    return nb.types.Array(dtype, ndim, layout, readonly=readonly)


# The globals a scalar function may read to be compiled in another process.
_PORTABLE_GLOBALS = {"np": np, "numpy": np, "math": math}
_MISSING = object()


def portable(fn: Callable) -> str | None:
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


def compile_elsewhere(plans: list) -> None:
    """Compile the kernels of ``plans`` (``numba_tier.Plan``) in another Python process,
    into the cache on disk, from which this one then loads them (module docstring)."""
    specs = []
    for plan in plans:
        codes = {name: portable(fn) for name, fn in plan.functions.items()}
        path = source_file(HEADER + plan.source, plan.key) if plan.cacheable else None
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
        command = [sys.executable, "-m", "autodiff.compiler.numba_process", spec, str(os.getpid())]
        with subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) as child:  # fmt: skip
            _children.add(child)
            try:
                child.wait(timeout=1800)
            except subprocess.TimeoutExpired:
                child.kill()
            finally:
                _children.discard(child)
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(spec)


# The compiling processes running now: ended when this one exits (a compile process
# never outlives the user's; the child also stops if this process dies unannounced).
_children: set = set()


@atexit.register
def _end_children() -> None:
    for child in list(_children):
        with contextlib.suppress(OSError):
            child.kill()


def _compile_specs(spec_file: str, parent: int) -> None:
    """The other process's side of ``compile_elsewhere``: it stops between kernels once
    ``parent`` (the process that asked) is gone."""
    nb = numba()
    with open(spec_file) as f:
        specs = json.load(f)
    for spec in specs:
        if os.getppid() != parent:
            return
        functions = {
            name: types.FunctionType(marshal.loads(bytes.fromhex(code)),
                                     {**_PORTABLE_GLOBALS, "__builtins__": builtins}, name)
            for name, code in spec["functions"].items()
        }  # fmt: skip
        module = kernel_module(spec["name"], Path(spec["path"]), spec["source"], functions)
        sys.modules[spec["name"]] = module
        dispatcher = nb.njit(cache=True, error_model="numpy", nogil=True)(module.kernel)
        dispatcher.compile(tuple(numba_type(d) for d in spec["signature"]))


if __name__ == "__main__":  # python -m autodiff.compiler.numba_process SPEC PID
    _compile_specs(sys.argv[1], int(sys.argv[2]))
