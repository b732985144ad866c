"""The background compile worker: one daemon thread running compile jobs in turn.

``jit(f, compile="auto")`` hands a hot signature's compilation here (``tiers.py``): no
call waits for a compiler.  A job compiles and installs what it compiled; one that raises
leaves the signature on the replay.  A signature's job goes ahead of the queued jobs of
loop bodies and branches (``nested``): the body of a scan runs hot within a call or two,
and once the signature's kernels hold the loop, compiling the body alone is wasted.
The thread is the process's (no other process is started, none outlives it): LLVM
releases the GIL while it optimises and generates code, so the program's threads run on
meanwhile; while a job runs, the interpreter switches threads every ``SWITCH_INTERVAL``
(restored after it), so that the program's NumPy calls that release the GIL get it back
at once while the job writes code in Python.  At exit the kernel being compiled is
waited for (a kernel's module is bounded: ``llvm_backend.MAX_LINES``, well under a
second), the rest of its job is abandoned (``exiting``, which ``Lowered.compile`` asks
between kernels) and the queued jobs are dropped.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import queue
import sys
import threading
from collections.abc import Callable, Iterator

from autodiff.errors import AutodiffError

__all__ = ["CompileAbandoned", "compile_later", "exiting", "native_work", "wait_for_background"]


# While a job runs, the interpreter switches threads this often (seconds; Python's default
# is 0.005): each NumPy call of the program that releases the GIL (arrays over ~500
# elements) waits up to this long for it while the job writes code in Python; at 5 ms a
# 14,000-call gradient's replay took 4.8 s instead of 0.09 s during C1's unrolled compile
SWITCH_INTERVAL = 0.0002


class CompileAbandoned(AutodiffError, RuntimeError):
    """A background compilation stopped between kernels: the interpreter is exiting."""


class _Worker:
    """One daemon thread running jobs in turn, started with the first."""

    def __init__(self) -> None:
        self.jobs: queue.PriorityQueue = queue.PriorityQueue()
        self.order = itertools.count()  # first come, first served within a priority
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.stopping = False
        self.idle = threading.Event()
        self.idle.set()
        self.pending = 0
        self.running = threading.Lock()  # held while LLVM works for a job (native_work)

    def submit(self, job: Callable[[], None], nested: bool) -> None:
        with self.lock:
            if self.stopping:
                return
            self.pending += 1
            self.idle.clear()
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="autodiff-compile",
                                               daemon=True)  # fmt: skip
                self.thread.start()
        self.jobs.put((nested, next(self.order), job))

    def _run(self) -> None:
        while True:
            _, _, job = self.jobs.get()
            interval = sys.getswitchinterval()
            try:
                if not self.stopping:
                    sys.setswitchinterval(SWITCH_INTERVAL)
                    job()
            except Exception:  # a kernel that does not compile stays NumPy calls
                pass
            finally:
                sys.setswitchinterval(interval)
                with self.lock:
                    self.pending -= 1
                    if not self.pending:
                        self.idle.set()

    def stop(self) -> None:
        self.stopping = True
        with self.running:  # LLVM's work under way ends before the interpreter does
            pass


_worker = _Worker()
atexit.register(_worker.stop)


def compile_later(job: Callable[[], None], nested: bool = False) -> None:
    """Run ``job`` (which compiles kernels and installs them) in the background; a
    signature's job (``nested`` False) before the queued jobs of loop bodies."""
    _worker.submit(job, nested)


@contextlib.contextmanager
def native_work() -> Iterator[None]:
    """Around LLVM's own work (``llvm_engine.compile_ir``): in the worker's thread, the
    exit waits for it to end (LLVM's native code must not outlive the interpreter), and
    once the interpreter is exiting none starts (``CompileAbandoned``)."""
    if threading.current_thread() is not _worker.thread:
        yield
        return
    with _worker.running:
        if _worker.stopping:
            raise CompileAbandoned("the interpreter is exiting")
        yield


def exiting() -> bool:
    """Whether the interpreter is exiting: a background job stops between kernels."""
    return _worker.stopping


def wait_for_background(timeout: float | None = None) -> bool:
    """Wait until the background compilations submitted so far are done (tests,
    benchmarks); whether they are."""
    return _worker.idle.wait(timeout)
