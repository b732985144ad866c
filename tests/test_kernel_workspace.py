"""A kernel's workspace (its intermediate arrays): on the stack when small, else the
kernel's own buffer, allocated once and reused by every call, or above ``KEPT_BYTES``
``malloc``'ed at each call (``compiler/llvm_backend.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import jit
from autodiff.compiler import llvm_backend
from autodiff.compiler.stages import default_backend

pytestmark = pytest.mark.skipif(not default_backend().available(),
                                reason="no compiling backend here")  # fmt: skip


def _program(a, w):
    """A product feeding elementwise work: its (200, 100) result lives in the workspace."""
    h = a @ w
    return anp.tanh(h * 0.5 + 1.0) * h - anp.sum(h * h, axis=0) * 1e-3


@pytest.mark.parametrize("kept", [True, False], ids=["kept buffer", "malloc per call"])
def test_a_large_workspace_gives_numpys_values_call_after_call(kept, monkeypatch):
    if not kept:
        monkeypatch.setattr(llvm_backend, "KEPT_BYTES", llvm_backend.STACK_BYTES)
    rng = np.random.default_rng(0)
    w = rng.normal(size=(100, 100)) / 10
    jitted = jit(_program, compile=True)
    for _ in range(4):  # independently drawn inputs: nothing of a call stays in the buffer
        a = rng.normal(size=(200, 100))
        got = jitted(a, w)
        np.testing.assert_array_equal(got, _program(a, w))
    entry = next(iter(jitted._entries.values()))
    (kernel,) = entry.compiled.kernels
    assert ("call ptr @adx_malloc" in kernel.source) is not kept
    # two functions sharing nothing but the shapes, interleaved
    other = jit(lambda a, w: _program(a * 2.0, w), compile=True)
    a = rng.normal(size=(200, 100))
    first, second = jitted(a, w), other(a, w)
    np.testing.assert_array_equal(first, _program(a, w))
    np.testing.assert_array_equal(second, _program(a * 2.0, w))
