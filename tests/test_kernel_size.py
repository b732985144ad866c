"""Kernels of bounded size, and what passes between them (``llvm_backend.lower``,
``backend._views_at_exits``).

A straight-line program of thousands of equations (the gradient of an unrolled scan)
is cut into kernels of at most ``MAX_LINES`` lines of IR: LLVM's optimisation takes
time growing faster than the code, and one module of an unrolled LSTM's gradient never
finished compiling.  A kernel expects what another kernel returns laid out as that
kernel returns it (new arrays, in NumPy's order of their axes or C's), so no variant is
compiled at run time; and a
kernel returns no view: NumPy makes it after the kernel, laid out as NumPy's own call
would, since a later product or sum follows the layout.
"""

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import grad, jit
from autodiff.compiler import background, llvm_backend
from autodiff.compiler.derived import derived_of
from tests.test_compiled import assert_bits, fallbacks, kernels_of

pytestmark = pytest.mark.skipif(not llvm_backend.BACKEND.available(),
                                reason=llvm_backend.BACKEND.why_not())  # fmt: skip

HIDDEN, STEPS = 8, 3


def _lstm_loss(params, xs):
    """An LSTM unrolled over ``xs``: slices of one product per step (views at every
    step's boundary) and NumPy's tanh between the fused loops."""
    wx, wh, b = params

    def step(carry, x):
        h, c = carry
        z = x @ wx + h @ wh + b
        n = HIDDEN
        i, f, o = (0.5 * anp.tanh(0.5 * z[:, k * n : (k + 1) * n]) + 0.5 for k in range(3))
        c = f * c + i * anp.tanh(z[:, 3 * n :])
        h = o * anp.tanh(c)
        return (h, c), h

    zeros = np.zeros((xs.shape[1], HIDDEN))
    _, hs = autodiff.scan(step, (zeros, zeros), xs, unroll=True)
    return anp.mean(hs**2)


def _lstm_data(seed):
    rng = np.random.default_rng(seed)
    params = (rng.normal(size=(3, 4 * HIDDEN)) / 2, rng.normal(size=(HIDDEN, 4 * HIDDEN)) / 3,
              rng.normal(size=4 * HIDDEN) / 4)  # fmt: skip
    return params, rng.normal(size=(STEPS, 5, 3))


@pytest.mark.parametrize("bound", ["MAX_LINES", "MAX_EQUATIONS"])
def test_a_long_straight_line_gradient_is_cut_into_kernels_of_bounded_size(bound, monkeypatch):
    """Cut where its module is too long, or (before writing it) where it has too many
    equations."""
    limit = {"MAX_LINES": 600, "MAX_EQUATIONS": 40}[bound]
    monkeypatch.setattr(llvm_backend, bound, limit)
    params, xs = _lstm_data(0)
    step = grad(_lstm_loss)
    jitted = jit(step, compile=True)
    lowered = jitted.trace(params, xs).lower()
    sizes = [(r.detail.lines, len(r.eqns)) for r in lowered.regions]
    assert len(sizes) >= 4, sizes  # (one region of ~150 equations before the bound)
    size = {"MAX_LINES": 0, "MAX_EQUATIONS": 1}[bound]
    assert all(s[size] <= limit or s[1] == 1 for s in sizes), sizes
    for _ in range(3):
        got = jitted(params, xs)
    for a, b in zip(got, step(params, xs), strict=True):
        assert_bits(a, b)
    kernels = kernels_of(jitted)
    assert len(kernels) == len(sizes)
    assert fallbacks(jitted) == 0  # every call ran compiled code ...
    assert not [k.layouts for k in kernels if k.layouts]  # ... for the layouts foreseen


def test_unbounded_the_same_program_is_one_kernel(monkeypatch):
    """(What the test above cuts: one region, longer than the bound it sets.)"""
    monkeypatch.setattr(llvm_backend, "MAX_LINES", 10**9)
    monkeypatch.setattr(llvm_backend, "MAX_EQUATIONS", 10**9)
    params, xs = _lstm_data(1)
    (region,) = jit(grad(_lstm_loss), compile=True).trace(params, xs).lower().regions
    assert region.detail.lines > 600 and len(region.eqns) > 40


def test_a_kernel_returns_no_view_numpy_makes_it_after_the_kernel():
    """``x.T`` of a strided ``x`` is a residual of ``grad(jit(mlp))``: NumPy's view, not
    the kernel's C-ordered copy, reaches the backward pass's ``x.T @ g`` (NumPy's product
    of a strided operand and of a contiguous one differ in the last bits)."""

    def mlp(w, x):
        h = anp.tanh(x @ w + 0.1)
        return anp.sum(h * h) + anp.sum(anp.transpose(x) @ h) * 1e-3

    rng = np.random.default_rng(2)
    w, x = rng.normal(size=(30, 20)), rng.normal(size=(40, 60))[:, ::2]
    jitted = jit(mlp, compile=True)
    g = grad(jitted)
    want = grad(mlp)(w, x)
    for _ in range(3):
        assert_bits(g(w, x), want)
    (traced,) = [entry.traced for entry in jitted._entries.values()]
    (vg,) = derived_of(traced.graph).transformed._entries.values()
    graph = derived_of(vg.forward).compiled[("llvm", False)].graph  # (the forward pass)
    views = {v for e in graph.eqns if e.prim.name in ("transpose", "getitem") for v in e.outvars}
    kernels = [e for e in graph.eqns if e.prim.name == "kernel"]
    assert kernels
    assert not views & {v for e in kernels for v in e.outvars}  # no kernel returns a view
    assert views & set(graph.outvars)  # NumPy makes them, after the kernel: residuals


def test_a_kernel_expects_what_another_returns_laid_out_as_it_returns_it():
    """``sin(x.T)`` is F-ordered in NumPy and as the first kernel returns it; NumPy's
    sort between the kernels is taken as C-ordered: the kernel after it is written for
    the layouts it is given, so no call falls back to NumPy calls and no variant for
    another layout is compiled."""

    def f(x):
        a = anp.sin(anp.transpose(x)) * 2.0 + 1.0
        b = anp.sort(a, axis=1)  # NumPy's call between the two kernels
        return anp.sum(anp.exp(a) * b + a, axis=1)

    x = np.random.default_rng(3).normal(size=(30, 20))
    jitted = jit(f, compile=True)
    for _ in range(3):
        got = jitted(x)
    np.testing.assert_allclose(got, f(x), rtol=1e-13)
    assert len(kernels_of(jitted)) == 2
    assert fallbacks(jitted) == 0
    assert not [k.layouts for k in kernels_of(jitted) if k.layouts]


def test_at_exit_a_background_compile_stops_between_kernels(monkeypatch):
    """At exit the worker waits for the kernel being compiled, not for the rest of its
    job: a long program is many kernels (here 4 and more), and the exit comes during the
    first."""
    monkeypatch.setattr(llvm_backend, "MAX_LINES", 600)
    params, xs = _lstm_data(4)
    lowered = jit(grad(_lstm_loss)).trace(params, xs).lower()
    assert len(lowered.regions) >= 4
    compiled_kernels = []
    compile_one = llvm_backend.BACKEND.compile

    def compile_then_exit(*args):
        compiled_kernels.append(compile_one(*args))
        monkeypatch.setattr(background._worker, "stopping", True)  # the interpreter exits
        return compiled_kernels[-1]

    monkeypatch.setattr(llvm_backend.BACKEND, "compile", compile_then_exit)
    with pytest.raises(background.CompileAbandoned, match="exiting"):
        lowered.compile(sync=False)  # as the background worker compiles
    assert len(compiled_kernels) == 1
    assert len(lowered.compile(sync=True).kernels) == len(lowered.regions)  # (compile=True's)


def test_the_stage_api_says_the_views_after_a_kernel_are_numpy_calls():
    def f(w, x):
        h = anp.tanh(x @ w + 0.1)
        return h, anp.transpose(h)[:3]

    lowered = jit(f, compile=True).trace(np.ones((5, 4)), np.ones((6, 5))).lower()
    costs = lowered.cost_analysis()
    assert (costs["compiled_equations"], costs["kernels"], costs["numpy_calls"]) == (3, 1, 2)
    assert [e.prim.name for e in lowered.numpy_calls] == ["transpose", "getitem"]
    text = lowered.as_text()
    graph_text = text.split("\n\n")[0]  # (the graph; each kernel's IR follows)
    assert graph_text.count("# NumPy, after kernel 0") == 2
    assert graph_text.count("# kernel 0") == 3
