import atexit
import os
import shutil
import tempfile

import pytest

# The kernels the tests compile are kept in a folder of the test run's own (inherited by
# the processes tests start), never in the user's cache: set before autodiff is imported.
if "AUTODIFF_TEST_CACHE" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="autodiff-test-kernels-")
    os.environ["AUTODIFF_TEST_CACHE"] = os.environ["AUTODIFF_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, True)
# Nor do the libraries the notebooks and plots use (matplotlib's font cache, IPython's
# profile): their folders are the test run's too, where the caller did not choose them.
if "AUTODIFF_TEST_HOME" not in os.environ:
    os.environ["AUTODIFF_TEST_HOME"] = _home = tempfile.mkdtemp(prefix="autodiff-test-home-")
    atexit.register(shutil.rmtree, _home, True)
    os.environ.setdefault("MPLCONFIGDIR", os.path.join(_home, "matplotlib"))
    os.environ.setdefault("IPYTHONDIR", os.path.join(_home, "ipython"))

from autodiff.compiler import tiers
from autodiff.compiler.tiers import compile_at_once
from autodiff.core.stack import current_interpreters


@pytest.fixture(autouse=True)
def _interpreter_stack_is_restored():
    """Every test must leave the interpreter stack empty, also when it raised."""
    assert current_interpreters() == (), "a previous test leaked an interpreter"
    yield
    assert current_interpreters() == (), "this test left an interpreter on the stack"


@pytest.fixture(autouse=True)
def _drop_every_unread_residual(monkeypatch):
    """The tape keeps small arrays even when a VJP does not read them; the tests
    drop every residual a primitive's ``vjp_reads`` leaves out, so a wrong
    declaration raises in every test that runs that VJP."""
    from autodiff.interpreters import tape as _tape

    monkeypatch.setattr(_tape, "KEEP_SMALL_RESIDUALS", -1)


@pytest.fixture(autouse=True)
def _first_calls_compile(request, monkeypatch):
    """A jitted function's first call interprets its graph and the second compiles it
    (autodiff/compiler/tiers.py); the tests compile at once, so that every jit call they make
    runs the generated replay, except those marked ``interpreted``.  Those are also the
    only ones where ``compile="auto"`` compiles kernels once a signature is hot (in the
    background: elsewhere a test calling a function often would set kernels compiling
    while other tests run; the tests of the compiling tier ask for it explicitly)."""
    if request.node.get_closest_marker("interpreted"):
        yield
        return
    monkeypatch.setattr(tiers, "HOT_CALLS", 1 << 62)
    monkeypatch.setattr(tiers, "HOT_SECONDS", float("inf"))
    with compile_at_once():
        yield
