"""The kernels' cache on disk (``compiler/disk_cache.py``): a later process loads what an
earlier one compiled, and nothing about the folder can make a program fail or compute
something else -- corrupted files, a folder that cannot be written, concurrent processes,
a size bound -- and the tests never write into the user's home."""

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import jit
from autodiff.compiler import disk_cache, llvm_backend

BACKEND = llvm_backend.BACKEND
pytestmark = pytest.mark.skipif(not BACKEND.available(), reason=BACKEND.why_not())

_SCRIPT = """
import sys, numpy as np, autodiff, autodiff.numpy as anp
k = float(sys.argv[1])
f = autodiff.jit(lambda x: anp.sin(x) * k + anp.cos(x), compile=True)
x = np.linspace(0.0, 1.0, 7)
for _ in range(3):
    out = f(x)
assert np.array_equal(out, np.sin(x) * k + np.cos(x))
(kernel,) = f._entries[next(iter(f._entries))].compiled.kernels
print(kernel.native.cached)
"""


def run(folder, k=3.0, env=None):
    """A fresh process compiling one kernel: whether it loaded it from ``folder``."""
    environment = {"AUTODIFF_CACHE_DIR": str(folder), "PATH": "", **(env or {})}
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(k)], capture_output=True,
                          text=True, env=environment, check=True)  # fmt: skip
    return done.stdout.strip() == "True"


def entries(folder):
    return sorted(pathlib.Path(folder).glob("*.kernel"))


def here(folder, k=3.0, monkeypatch=None, env=None):
    """The same in this process: the kernel's module compiled with ``folder`` as the
    cache (the engine reads the disk each time); whether it was loaded."""
    with pytest.MonkeyPatch.context() as m:
        m.setenv("AUTODIFF_CACHE_DIR", str(folder))
        for key, value in (env or {}).items():
            m.setenv(key, value)
        (region,) = jit(lambda x: anp.sin(x) * k + anp.cos(x)).trace(np.ones(7)).lower().regions
        kernel = BACKEND.compile(region, frozenset(), True)
        x = np.linspace(0.0, 1.0, 7)
        (out,) = kernel.impl(x)
        np.testing.assert_array_equal(out, np.sin(x) * k + np.cos(x))
        return kernel.native.cached


def test_kernels_are_kept_on_disk_for_the_next_process(tmp_path, monkeypatch):
    assert not run(tmp_path)  # compiled, and kept
    assert len(entries(tmp_path)) == 1
    assert run(tmp_path)  # loaded
    assert not here(tmp_path, k=4.0)  # another kernel
    assert len(entries(tmp_path)) == 2
    assert not list(tmp_path.glob(".tmp-*"))  # no temporary file left
    monkeypatch.setenv("AUTODIFF_CACHE_DIR", str(tmp_path))
    disk_cache.clear_cache()
    assert not tmp_path.exists()


def test_a_corrupted_file_is_passed_over_and_replaced(tmp_path):
    here(tmp_path)
    (path,) = entries(tmp_path)
    for garbage in (b"", b"not what was written", path.read_bytes()[:-7]):
        path.write_bytes(garbage)
        assert not here(tmp_path)  # compiled again: the file's checksum did not match
        assert here(tmp_path)


def test_a_folder_that_cannot_be_written_keeps_nothing(tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("in the way")
    folder = blocker / "kernels"  # cannot be made: its parent is a file
    assert not here(folder) and not here(folder)  # compiled each time, no error
    assert not here(tmp_path / "missing" / "folder")  # a missing folder is made
    assert here(tmp_path / "missing" / "folder")


def test_concurrent_processes_share_the_folder(tmp_path):
    env = {"AUTODIFF_CACHE_DIR": str(tmp_path), "PATH": ""}
    procs = [subprocess.Popen([sys.executable, "-c", _SCRIPT, str(k)], env=env,
                              stdout=subprocess.PIPE, text=True)
             for k in (2.0, 2.0, 5.0)]  # fmt: skip
    for p in procs:
        p.communicate(timeout=300)
        assert p.returncode == 0
    assert len(entries(tmp_path)) == 2  # one file per kernel
    assert not list(tmp_path.glob(".tmp-*"))
    assert here(tmp_path, 2.0) and here(tmp_path, 5.0)


def test_the_folder_is_kept_under_its_bound(tmp_path):
    here(tmp_path, 1.0)
    one = entries(tmp_path)[0].stat().st_size
    env = {"AUTODIFF_CACHE_MB": str(2.5 * one / (1 << 20))}  # room for two
    for k in (2.0, 3.0, 4.0, 5.0):
        time.sleep(0.01)  # (the least recently used goes first, by modification time)
        here(tmp_path, k, env=env)
        total = sum(p.stat().st_size for p in entries(tmp_path))
        assert total <= 2.5 * one
    assert here(tmp_path, 5.0, env=env)  # the most recent survived
    assert not here(tmp_path, 1.0, env=env)  # the oldest went first


def test_stale_temporary_files_are_removed(tmp_path):
    stale = tmp_path / ".tmp-left-by-a-killed-process"
    fresh = tmp_path / ".tmp-being-written-now"
    for p in (stale, fresh):
        p.write_bytes(b"half a kernel")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    here(tmp_path)
    assert not stale.exists() and fresh.exists()


def test_the_tests_never_write_into_the_users_home():
    folder = disk_cache.cache_dir().resolve()
    home = pathlib.Path("~").expanduser().resolve()
    assert os.environ["AUTODIFF_CACHE_DIR"] == str(folder) or folder.is_relative_to(
        pathlib.Path(os.environ["AUTODIFF_CACHE_DIR"]).resolve()
    )
    assert not folder.is_relative_to(home / ".cache"), folder
    jit(lambda x: anp.sin(x) * 0.75 + 1.0, compile=True)(np.ones(4))
    assert folder.exists() or not any(folder.parent.glob("*.kernel"))


_EXITING = """
import numpy as np, autodiff, autodiff.numpy as anp

def chain(x):
    for _ in range(40):
        x = anp.tanh(anp.sin(x) * 1.01 + 0.1)
    return x

f = autodiff.jit(chain)  # compile="auto": hot after a few calls, compiled in the background
x = np.linspace(0.0, 1.0, 9)
for _ in range(6):
    f(x)
# exits at once, its background compile under way or queued
"""


def test_a_script_exiting_while_it_compiles_leaves_nothing_behind(tmp_path):
    """No process or thread outlives the script (it exits, its process group is empty),
    no temporary file is left in the cache, nothing is written into its home."""
    home, folder = tmp_path / "home", tmp_path / "kernels"
    home.mkdir()
    env = {"AUTODIFF_CACHE_DIR": str(folder), "HOME": str(home), "PATH": ""}
    proc = subprocess.Popen([sys.executable, "-c", _EXITING], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        _, err = proc.communicate(timeout=120)  # a worker keeping it alive hangs here
        assert proc.returncode == 0 and not err, err
        with pytest.raises(ProcessLookupError):  # nothing of its session is left running
            os.killpg(proc.pid, 0)
    finally:  # (where it failed: none of it outlives the test)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert not list(folder.glob(".tmp-*"))
    assert list(home.iterdir()) == []
