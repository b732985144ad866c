"""Compiled kernels kept on disk, so that a later process loads them instead of compiling.

Each kernel's source is written to a file named by a hash of its *key*: the source, the
versions of the compiler, NumPy and Python, and the code of the scalar functions it
calls with the values of the globals they read (``fingerprint``).  The files are in
``cache_dir()``: ``$AUTODIFF_CACHE_DIR``, else ``$XDG_CACHE_HOME/autodiff/kernels``,
else ``~/.cache/autodiff/kernels``.  numba keeps the machine code next to its source
(``__pycache__``).  ``clear_cache()`` (or deleting the directory) empties it; a kernel
whose functions' code does not say what they compute (a closure) is compiled, never
cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["cache_dir", "clear_cache", "fingerprint", "source_file"]


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


def fingerprint(fn: Callable) -> bytes | None:
    """The code of a scalar function a kernel calls, for the kernel's key; None where
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


def source_file(source: str, key: bytes) -> Path | None:
    """The file holding ``source``, written once under the hash of ``key``; None where
    the cache directory cannot be written (the kernel is then compiled, not cached)."""
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
