"""The kernels' machine code on disk, so that a later process loads what an earlier compiled.

Each entry is one file, ``<key>.kernel``, named by the hash of what determines the code
(the LLVM IR, the processor, the LLVM version: ``llvm_engine.cache_key``), holding a
header, a checksum and the object code.  The folder is ``cache_dir()``:
``$AUTODIFF_CACHE_DIR``, else ``$XDG_CACHE_HOME/autodiff/kernels``, else
``~/.cache/autodiff/kernels``.

Nothing here can make a program fail or compute something else:

- **Corrupted or foreign files** (a truncated write, another version's format, a bad
  checksum) are treated as missing, and deleted.
- **Concurrent processes** write each file under a temporary name and rename it into
  place (atomic), so a reader sees a whole file or none; two writers of one key write
  the same bytes.
- **A missing, unwritable or read-only folder** means nothing is kept: kernels are
  compiled, not loaded.
- **Bounded**: when the folder holds more than ``max_bytes()`` (``$AUTODIFF_CACHE_MB``
  megabytes, default 256), the least recently used files go until it holds three
  quarters of that.  A temporary file left by a killed process is deleted after an hour.

``clear_cache()`` deletes every entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["cache_dir", "clear_cache", "load", "max_bytes", "store"]

_MAGIC = b"autodiff kernel 1\n"
_SUFFIX = ".kernel"
_TEMP_PREFIX = ".tmp-"
_STALE_TEMP = 3600.0  # seconds after which a temporary file is another process's leftover


def cache_dir() -> Path:
    """Where compiled kernels are kept (module docstring)."""
    explicit = os.environ.get("AUTODIFF_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "autodiff" / "kernels"


def max_bytes() -> int:
    """The size the folder is kept under (``$AUTODIFF_CACHE_MB``, default 256 MB)."""
    try:
        megabytes = float(os.environ.get("AUTODIFF_CACHE_MB", "256"))
    except ValueError:
        megabytes = 256.0
    return max(0, int(megabytes * (1 << 20)))


def clear_cache() -> None:
    """Delete every kernel kept on disk (kernels loaded in this process stay)."""
    shutil.rmtree(cache_dir(), ignore_errors=True)


def _path(key: str) -> Path:
    return cache_dir() / f"{key}{_SUFFIX}"


def load(key: str) -> bytes | None:
    """The object code stored under ``key``, or None (missing, unreadable, corrupted)."""
    path = _path(key)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC)
    digest, payload = data[head : head + 32], data[head + 32 :]
    if data[:head] != _MAGIC or hashlib.sha256(payload).digest() != digest:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    with contextlib.suppress(OSError):  # recently used: evicted last
        os.utime(path)
    return payload


def store(key: str, payload: bytes) -> None:
    """Keep ``payload`` under ``key`` where the folder can be written (else nothing)."""
    folder = cache_dir()
    temp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=_TEMP_PREFIX)
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(temp, _path(key))
        temp = None
    except OSError:
        return
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
    _bound(folder)


def _bound(folder: Path) -> None:
    """Delete the least recently used entries while the folder is over ``max_bytes()``,
    and temporary files older than an hour."""
    limit = max_bytes()
    now = time.time()
    entries = []
    total = 0
    try:
        with os.scandir(folder) as it:
            for item in it:
                try:
                    info = item.stat()
                except OSError:
                    continue
                if item.name.startswith(_TEMP_PREFIX):
                    if now - info.st_mtime > _STALE_TEMP:
                        with contextlib.suppress(OSError):
                            os.unlink(item.path)
                    continue
                if item.name.endswith(_SUFFIX):
                    entries.append((info.st_mtime, info.st_size, item.path))
                    total += info.st_size
    except OSError:
        return
    if total <= limit:
        return
    entries.sort()
    for _, size, path in entries:
        if total <= limit * 3 // 4:
            break
        with contextlib.suppress(OSError):
            os.unlink(path)
        total -= size
