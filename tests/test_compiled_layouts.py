"""Kernels on strided arguments (``compiler/layouts.py``): a transposed, sliced, reversed
or broadcast array runs compiled code, NumPy's values to the bit.

A kernel is written for the layouts NumPy's own calls give its inputs; a call bringing
another layout runs NumPy calls the first time and the kernel's variant for that layout
from the second on.  Each case checks the values against NumPy's, bit for bit (sums in
NumPy's order on the strided array, which is not the order on a C-contiguous copy),
that the variant ran (the kernel fell back once, on the layout's first call, and never
after), and the jit contract (fresh results).
"""

import zlib

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jit, vmap
from autodiff.compiler import background, layouts, llvm_backend
from autodiff.compiler.derived import derived_of
from tests.jit_contract import assert_fresh
from tests.test_compiled import assert_bits, fallbacks, kernels_of

pytestmark = pytest.mark.skipif(not llvm_backend.BACKEND.available(),
                                reason=llvm_backend.BACKEND.why_not())  # fmt: skip

# views of shape (24, 40) of different layouts, each from its own base
LAYOUTS = {
    "transposed": lambda rng, dt: rng.normal(size=(40, 24)).astype(dt).T,
    "rows reversed": lambda rng, dt: rng.normal(size=(24, 40)).astype(dt)[::-1],
    "both reversed": lambda rng, dt: rng.normal(size=(24, 40)).astype(dt)[::-1, ::-1],
    "every other column": lambda rng, dt: rng.normal(size=(24, 80)).astype(dt)[:, ::2],
    "sliced block": lambda rng, dt: rng.normal(size=(30, 50)).astype(dt)[3:27, 5:45],
    "transposed, reversed": lambda rng, dt: rng.normal(size=(40, 24)).astype(dt).T[::-1],
    "broadcast row (stride 0)": lambda rng, dt: np.broadcast_to(
        rng.normal(size=40).astype(dt), (24, 40)),
    "broadcast column (stride 0)": lambda rng, dt: np.broadcast_to(
        rng.normal(size=(24, 1)).astype(dt), (24, 40)),
}  # fmt: skip


def chain(x, y):
    return (anp.tanh(x * 1.5 + y) * anp.exp(-x * x) - y / 3.0,)


def sums(x, y):
    z = anp.sin(x) * 2.0 + x * y
    return anp.sum(z, axis=0), anp.sum(x * 3.0 + 1.0, axis=1), anp.sum(z)


def reductions(x, y):
    return anp.max(x * y - 1.0, axis=0), anp.mean(anp.cos(x) + y, axis=1, keepdims=True)


def product(x, y):
    return (anp.tanh((x * 2.0) @ anp.transpose(y + 1.0)) * 0.5,)


PROGRAMS = [chain, sums, reductions, product]


def _kernel_ran(jitted, calls):
    """The kernels fell back once (the layout's first call) and compiled a variant."""
    found = kernels_of(jitted)
    assert found, "nothing compiled"
    assert fallbacks(jitted) == 1, f"{fallbacks(jitted)} of {calls} calls ran as NumPy calls"
    assert any(k.impl.variants.described() for k in found), "no variant was compiled"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_strided_argument_runs_the_kernel_with_numpys_bits(layout, program, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{layout} {program.__name__}".encode()))
    x = LAYOUTS[layout](rng, dtype)
    y = rng.normal(size=(24, 40)).astype(dtype)
    assert not x.flags.c_contiguous
    jitted = jit(program, compile=True)
    want = program(x, y)
    for call in range(4):  # C kernel + first sighting, then the variant compiles and runs
        got = jitted(x, y)
        for g, w in zip(got, want, strict=True):
            if call == 0 and program is sums:  # (its 0-d result: the first call is the
                # whole replay's, whose out= buffers can take another layout than NumPy's)
                np.testing.assert_allclose(g, w, rtol=1e-5 if dtype == np.float32 else 1e-12)
            else:
                assert_bits(g, w, f"{layout}, call {call}")
        assert_fresh(got, (x, y), layout)
    _kernel_ran(jitted, 4)
    # the contiguous arguments still run the first kernel, untouched
    c = np.ascontiguousarray(x)
    before = fallbacks(jitted)
    for g, w in zip(jitted(c, y), program(c, y), strict=True):
        assert_bits(g, w, "C order")
    assert fallbacks(jitted) == before


def test_each_layout_is_a_variant_of_its_own_and_their_number_is_bounded(monkeypatch):
    monkeypatch.setattr(layouts, "MAX_VARIANTS", 2)
    rng = np.random.default_rng(3)
    base = rng.normal(size=(20, 20))
    jitted = jit(lambda x: anp.sum(anp.sin(x) * 2.0 + x, axis=0), compile=True)
    jitted(base)
    views = [base.T, base[::-1], base[:, ::-1]]
    for v in views:
        for _ in range(3):
            assert_bits(jitted(v), np.sum(np.sin(v) * 2.0 + v, axis=0))
    (kernel,) = kernels_of(jitted)
    assert kernel.impl.variants.described() == [((1, 20),), ((-20, 1),)]
    assert fallbacks(jitted) == 1 + 1 + 3  # each first sighting; the third layout always
    for v in [base.T, base[::-1], base, base.T, base[::-1]]:  # alternating: each its own
        assert_bits(jitted(v), np.sum(np.sin(v) * 2.0 + v, axis=0))
    assert fallbacks(jitted) == 5


def test_a_layout_seen_once_compiles_nothing(monkeypatch):
    built = []
    jitted = jit(lambda x: anp.exp(anp.sin(x) * 2.0) + x, compile=True)
    x = np.random.default_rng(4).normal(size=(8, 9))
    jitted(x)
    (kernel,) = kernels_of(jitted)
    monkeypatch.setattr(kernel.impl.variants, "build", lambda lay: built.append(lay))
    assert_bits(jitted(x.T.copy().T), np.exp(np.sin(x) * 2.0) + x)
    assert built == [] and fallbacks(jitted) == 1


def test_an_unaligned_or_odd_strided_argument_runs_as_numpy_calls():
    raw = np.zeros(8 * 30 + 1, np.uint8)[1:].view(np.float64).reshape(5, 6)  # unaligned
    raw[...] = np.arange(30.0).reshape(5, 6)
    assert not raw.flags.aligned
    jitted = jit(lambda x: anp.sum(anp.sin(x) * 2.0 + x, axis=1), compile=True)
    for _ in range(3):
        assert_bits(jitted(raw), np.sum(np.sin(raw) * 2.0 + raw, axis=1))
    assert fallbacks(jitted) == 3
    assert layouts.layout_of([raw], kernels_of(jitted)[0].region.inputs) is None


def test_grad_of_jit_on_strided_arguments_runs_its_kernels():
    """The forward kernel takes the transposed weights, the backward one the residuals."""

    def mlp(w1, w2, x):
        h = anp.tanh(x @ w1 + 0.1)
        return anp.sum(anp.tanh(h @ w2) ** 2) + anp.sum(h * h) * 1e-3

    rng = np.random.default_rng(5)
    w1, w2 = rng.normal(size=(20, 30)).T, rng.normal(size=(20, 16))  # w1: (30, 20), F order
    x = rng.normal(size=(40, 60))[:, ::2]
    jitted = jit(mlp, compile=True)
    g = grad(jitted, argnums=(0, 1))
    want = grad(mlp, argnums=(0, 1))(w1, w2, x)
    for _ in range(4):
        got = g(w1, w2, x)
        for a, b in zip(got, want):
            assert_bits(a, b)
    graph = next(iter(jitted._entries.values())).traced.graph
    (vg,) = [v for _, v in derived_of(graph).transformed._entries.items()]
    kernels = [k for part in (vg.forward, vg.backward)
               for k in derived_of(part).compiled[("llvm", False)].kernels]  # fmt: skip
    assert kernels
    assert sum(k.impl.fallback.calls for k in kernels) <= len(kernels)
    assert any(k.impl.variants.described() for k in kernels)


def test_vmap_of_jit_on_a_strided_batch_runs_its_kernel():
    f = jit(lambda a, b: anp.sum(anp.exp(anp.sin(a) * b), axis=0), compile=True)
    v = vmap(f, in_dims=(0, None))
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=(50, 40)).T, rng.normal(size=50)  # the batch of 40 rows, strided
    eager = vmap(lambda a, b: anp.sum(anp.exp(anp.sin(a) * b), axis=0), in_dims=(0, None))
    for _ in range(4):
        assert_bits(v(a, b), eager(a, b))
    graph = next(iter(f._entries.values())).traced.graph
    batched = [g.graph for g in derived_of(graph).transformed._entries.values()]
    kernels = derived_of(batched[0]).compiled[("llvm", False)].kernels
    assert sum(k.impl.fallback.calls for k in kernels) == 1
    assert kernels[0].impl.variants.described()


def test_a_fused_loop_keeps_each_value_in_numpys_order():
    """C-ordered arguments, a transpose inside: ``t * 3.0`` is laid out as ``t`` (NumPy's
    K order of its own operand), beside ``t * y`` in C order in the same loop; the sums
    over each follow its own layout, as NumPy's do."""

    def f(x, y):
        t = anp.transpose(x)
        z = anp.sin(t) * 2.0 + t * y
        return anp.sum(z, axis=0), anp.sum(t * 3.0 + 1.0, axis=1), anp.sum(t * t - 0.5)

    rng = np.random.default_rng(8)
    for dtype in (np.float64, np.float32):
        x, y = rng.normal(size=(40, 24)).astype(dtype), rng.normal(size=(24, 40)).astype(dtype)
        jitted = jit(f, compile=True)
        jitted(x, y)  # (the first call of a 0-d result is the replay's: stages._ZeroD)
        for _ in range(2):
            for g, w in zip(jitted(x, y), f(x, y), strict=True):
                assert_bits(g, w)
        assert kernels_of(jitted) and fallbacks(jitted) == 0


@pytest.mark.interpreted
def test_auto_compiles_a_layouts_variant_in_the_background():
    jitted = jit(lambda x: anp.sum(anp.cos(x) * x + 2.0, axis=1))  # compile="auto"
    x = np.random.default_rng(9).normal(size=(30, 30))
    for _ in range(6):
        jitted(x)
    background.wait_for_background()
    jitted(x)
    (kernel,) = kernels_of(jitted)
    for _ in range(2):  # the first sighting, then the variant queued
        assert_bits(jitted(x.T), np.sum(np.cos(x.T) * x.T + 2.0, axis=1))
    assert background.wait_for_background(60)
    assert_bits(jitted(x.T), np.sum(np.cos(x.T) * x.T + 2.0, axis=1))
    assert kernel.impl.variants.described() == [((1, 30),)]
    assert kernel.impl.fallback.calls == 2


def test_a_variant_shares_its_kernels_workspace():
    """A workspace above the stack's size is the kernel's buffer, kept between calls;
    its variants use the same one (they never run at once) rather than one each."""
    x = np.random.default_rng(10).normal(size=(160, 160))  # 200 KB intermediates
    jitted = jit(lambda v: anp.sum(anp.sin(v) * 2.0 + v * v, axis=0), compile=True)
    jitted(x)
    for _ in range(3):
        assert_bits(jitted(x.T), np.sum(np.sin(x.T) * 2.0 + x.T * x.T, axis=0))
    (kernel,) = kernels_of(jitted)
    (variant,) = kernel.impl.variants.ready.values()
    workspace = variant[1][-1]  # (entry, constants): the workspace is the last constant
    assert workspace.nbytes > llvm_backend.STACK_BYTES
    assert workspace is kernel.impl.__globals__["_trouble"].consts[-1]


@pytest.mark.parametrize("axes", [(1, 0), (2, 0, 1), (1, 2, 0)])
def test_a_kernels_transposed_result_is_laid_out_as_numpys(axes):
    """An elementwise result of a transposed operand is, in NumPy, laid out in that
    operand's order (``K``): the kernel returns it so, to the caller (strides the user
    sees) and to what follows (a NumPy call, and the replay's buffers, see its layout)."""

    def f(x):
        t = anp.sin(anp.transpose(x, axes)) * 2.0 + 1.0
        return t, anp.cumsum(t, axis=0) * t + t  # (cumsum: a NumPy call between kernels)

    x = np.random.default_rng(9).normal(size=(6, 5, 4)[: len(axes)])
    jitted = jit(f, compile=True)
    want = f(x)
    for _ in range(3):
        got = jitted(x)
        for a, b in zip(got, want, strict=True):
            assert_bits(a, b)
            assert a.strides == b.strides
    # the graph does not foresee cumsum's layout (NumPy's, the operand's order): the
    # second kernel runs NumPy calls on its first sighting, then its variant, whose
    # result is laid out as NumPy lays it out for those operands
    assert len(kernels_of(jitted)) == 2 and fallbacks(jitted) == 1
    assert [k.layouts for k in kernels_of(jitted)][1]
    assert_fresh(got, x, f"transposed {axes}")
