"""The convolution family compiled (``jit(f, compile=True)``): the implementation's values
to the bit, and JAX's to rounding.

A compiled convolution writes the implementation's own steps (``rules/convolution.py``,
its lowering section): the same padded copy, im2col columns and chunks of examples, and
NumPy's matmul loop (BLAS) on the same matrices with the same strides.  So each test
asserts the bits of the eager implementation, the kernel checked to have run (no NumPy
fallback), and JAX's values to a tolerance (XLA sums in another order): every padding
kind, layout, dilation, group kind and 1-D/2-D/3-D, float32 and float64, the windowed
reductions with ties, and a CNN's forward and gradient under ``jit``, ``grad(jit)``
and ``vmap(jit)``."""

from __future__ import annotations

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import grad, jit, jvp, lax, vjp, vmap
from autodiff.compiler import llvm_backend, tiers
from autodiff.rules import convolution
from tests.crosscheck import jax as _jax
from tests.test_compiled import assert_bits
from tests.test_convolution import CONV_CASES, POOL_CASES

BACKEND = llvm_backend.BACKEND
pytestmark = pytest.mark.skipif(not BACKEND.available(), reason=BACKEND.why_not())

FAMILY = {"conv_general_dilated", "reduce_window_sum", "reduce_window_max",
          "reduce_window_min", "window_gather", "window_scatter"}  # fmt: skip


@pytest.fixture(autouse=True)
def every_equation_compiles(monkeypatch):
    """A region of one convolution is compiled too (the tier would leave it to NumPy)."""
    monkeypatch.setattr(llvm_backend, "MIN_EQUATIONS", 0)


@pytest.fixture
def made(monkeypatch):
    """The compiled stages of every graph jit compiles (transforms of a jitted function
    included), in order."""
    found = []
    real = tiers.compiled

    def spy(graph, *args, **kwargs):
        found.append(real(graph, *args, **kwargs))
        return found[-1]

    monkeypatch.setattr(tiers, "compiled", spy)
    return found


def compiled_primitives(stages, fallback_ok: bool = False) -> set:
    """The primitives in kernels of ``stages``, which never fell back to NumPy calls
    (unless ``fallback_ok``)."""
    kernels = [k for c in stages if c is not None for k in c.kernels]
    if not fallback_ok:
        assert all(k.impl.fallback.calls == 0 for k in kernels), "a kernel fell back to NumPy"
    return {e.prim.name for k in kernels for e in k.region.eqns}


def run_compiled(f, args, made, calls=3):
    """``jit(f, compile=True)`` called ``calls`` times (the later calls run kernels)."""
    jitted = jit(f, compile=True)
    return [jitted(*args) for _ in range(calls)][-1]


def assert_tree_bits(got, want):
    for g, w in zip(optree.tree_leaves(got), optree.tree_leaves(want), strict=True):
        assert_bits(g, w)


def close(a, b, dtype):
    tol = 1e-10 if np.dtype(dtype) == np.float64 else 2e-4
    for x, y in zip(optree.tree_leaves(a), optree.tree_leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", CONV_CASES)
def test_compiled_convolutions_are_the_implementations_bits(case, dtype, made):
    ls, rs, strides, pad, ld, rd, dn, groups, batches = CONV_CASES[case]
    rng = np.random.default_rng(len(case))
    x, w = rng.standard_normal(ls).astype(dtype), rng.standard_normal(rs).astype(dtype)

    def f(x, w):
        return lax.conv_general_dilated(x, w, strides, pad, ld, rd, dn, groups, batches)

    want = f(x, w)
    got = run_compiled(f, (x, w), made)
    assert_bits(got, want)
    assert "conv_general_dilated" in compiled_primitives(made)
    jl = _jax().lax
    close(got, jl.conv_general_dilated(x, w, strides, pad, ld, rd, dn, groups, batches,
                                       precision="highest"), dtype)  # fmt: skip
    if dtype == np.float32:
        return  # (the derivatives' lowerings are the same convolution's)
    # its derivatives (convolutions again, of flipped kernels and cotangents) compiled
    loss = lambda x, w: anp.sum(anp.tanh(f(x, w)))
    made.clear()
    got = run_compiled(grad(loss, argnums=(0, 1)), (x, w), made)
    assert_tree_bits(got, grad(loss, argnums=(0, 1))(x, w))
    assert "conv_general_dilated" in compiled_primitives(made)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_compiled_windowed_reductions_are_the_implementations_bits(case, kind, dtype, made):
    shape, window, strides, pad, base, dilation = POOL_CASES[case]
    rng = np.random.default_rng(2)
    x = np.round(rng.standard_normal(shape), 0).astype(dtype)  # ties, as after a relu
    op = {"sum": lax.add, "max": lax.max, "min": lax.min}[kind]
    init = {"sum": 0.0, "max": -np.inf, "min": np.inf}[kind]

    def f(x):
        return lax.reduce_window(x, init, op, window, strides, pad, base, dilation)

    got = run_compiled(f, (x,), made)
    assert_bits(got, f(x))
    assert f"reduce_window_{kind}" in compiled_primitives(made)
    # the derivatives: a windowed sum again, or the first maximum's gather and scatter
    t = rng.standard_normal(shape).astype(dtype)
    c = rng.uniform(0.5, 1.5, np.shape(got)).astype(dtype)  # (windows of padding: infinities)
    loss = lambda x: anp.sum((f(x) ** 2 if kind == "sum" else f(x)) * c)
    for g, args in ((grad(loss), (x,)), (lambda x, t: jvp(f, (x,), (t,))[1], (x, t))):
        made.clear()
        assert_tree_bits(run_compiled(g, args, made), g(*args))
        names = compiled_primitives(made)
        assert names & FAMILY, names


@pytest.mark.parametrize("window", [(2, 2), (3, 4)])  # by window position; by rows
@pytest.mark.parametrize("kind", ["max", "min"])
def test_chosen_elements_follow_the_implementation_with_nans_ties_and_signed_zeros(
    kind, window, made
):
    """Which element a window's derivative goes to, compiled: by window position (the
    implementation's comparisons) and by rows (``np.argmax``'s rule: the first NaN)."""
    x = np.array([[0.0, -0.0, 1.0, np.nan, 1.0], [1.0, -1.0, np.nan, -0.0, 0.0],
                  [2.0, 2.0, -2.0, -2.0, 0.5]])  # fmt: skip
    t = np.arange(1.0, 16.0).reshape(3, 5)
    op = lax.reduce_window_max if kind == "max" else lax.reduce_window_min
    pool = lambda v: op(v, window, (1, 1), "VALID")
    ct = np.arange(1.0, 1.0 + pool(x).size).reshape(pool(x).shape)
    tangent = lambda x, t: jvp(pool, (x,), (t,))[1]
    cotangent = lambda x, ct: vjp(pool, x)[1](ct)[0]
    for h, args in ((tangent, (x, t)), (cotangent, (x, ct))):
        made.clear()
        # (compiled comparisons with a NaN raise the invalid flag NumPy's do not: ignored
        # here, so the kernel's results are returned rather than NumPy's run again)
        with np.errstate(invalid="ignore"):
            assert_bits(run_compiled(h, args, made), h(*args))
        assert compiled_primitives(made) & {"window_gather", "window_scatter"}


@pytest.mark.parametrize("dtype", [np.int64, np.int8])
def test_integer_convolutions_and_pooling_are_the_implementations(dtype, made):
    """Integers (NumPy's matmul loop without BLAS; int8 wrapping as NumPy's does)."""
    rng = np.random.default_rng(9)
    x, w = rng.integers(-9, 9, (2, 3, 7, 6)).astype(dtype), rng.integers(-9, 9, (4, 3, 3, 2))

    def f(x, w):
        y = lax.conv_general_dilated(x, w.astype(dtype), (2, 1), "SAME", None, (2, 1))
        return lax.reduce_window_max(y, (1, 1, 2, 2), (1, 1, 1, 1), "SAME")

    assert_bits(run_compiled(f, (x, w), made), f(x, w))
    assert {"conv_general_dilated", "reduce_window_max"} <= compiled_primitives(made)


def test_chunks_of_examples_are_the_implementations(monkeypatch, made):
    """A batch cut into chunks (a loop over the whole chunks, then the rest) gives the
    implementation's products: the same matrices for BLAS."""
    monkeypatch.setattr(convolution, "_COLUMNS", 400)  # 3 examples a chunk here
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((11, 6, 7, 2)), rng.standard_normal((3, 3, 2, 4))
    dn = ("NHWC", "HWIO", "NHWC")
    for groups in (1, 2):
        f = lambda x, w, g=groups: lax.conv_general_dilated(
            x, w[:, :, : 2 // g], (1, 2), "SAME", dimension_numbers=dn, feature_group_count=g
        )
        made.clear()
        assert_bits(run_compiled(f, (x, w), made), f(x, w))
        assert "conv_general_dilated" in compiled_primitives(made)


# --- a CNN, forward and gradient, one kernel ---------------------------------------------------


def _stax_cnn(L, np_, params, images):
    """stax-style: Conv 3x3 SAME, Relu, MaxPool 2x2, Conv 3x3 strided VALID, Relu,
    AvgPool (a windowed sum), Flatten, Dense, LogSoftmax; NHWC."""
    (w1, b1), (w2, b2), (w3, b3) = params
    dn = ("NHWC", "HWIO", "NHWC")
    x = L.conv_general_dilated(images, w1, (1, 1), "SAME", dimension_numbers=dn) + b1
    x = np_.maximum(x, 0.0)
    x = L.reduce_window(x, -np.inf, L.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = np_.maximum(L.conv_general_dilated(x, w2, (2, 2), "VALID", dimension_numbers=dn) + b2, 0)
    x = L.reduce_window(x, 0.0, L.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME") / 4
    logits = np_.reshape(x, (x.shape[0], -1)) @ w3 + b3
    return logits - np_.log(np_.sum(np_.exp(logits), axis=1, keepdims=True))


def _cnn_data(dtype=np.float64):
    rng = np.random.default_rng(8)
    params = ((rng.normal(0, 0.3, (3, 3, 1, 4)), rng.normal(0, 0.1, 4)),
              (rng.normal(0, 0.3, (3, 3, 4, 6)), rng.normal(0, 0.1, 6)),
              (rng.normal(0, 0.3, (3 * 3 * 6, 5)), np.zeros(5)))  # fmt: skip
    params = optree.tree_map(lambda a: a.astype(dtype), params)
    images = rng.standard_normal((4, 14, 14, 1)).astype(dtype)
    return params, images, np.eye(5, dtype=dtype)[[0, 3, 1, 4]]


def _cnn_loss(params, images, labels):
    return -anp.mean(anp.sum(_stax_cnn(lax, anp, params, images) * labels, axis=1))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_cnn_step_is_one_kernel_with_the_implementations_bits(dtype, made):
    params, images, labels = _cnn_data(dtype)
    step = grad(_cnn_loss)
    jitted = jit(step, compile=True)
    lowered = jitted.trace(params, images, labels).lower()
    costs = lowered.cost_analysis()
    assert costs["numpy_calls"] == 0 and costs["kernels"] == 1, costs  # nothing falls back
    assert "compiles" in lowered.as_text()
    for _ in range(3):
        got = jitted(params, images, labels)
    assert_tree_bits(got, step(params, images, labels))
    assert FAMILY - {"window_gather", "reduce_window_min"} <= compiled_primitives(made)
    jx = _jax()
    theirs = jx.grad(lambda p: -jx.numpy.mean(jx.numpy.sum(
        _stax_cnn(jx.lax, jx.numpy, p, images) * labels, axis=1)))(params)  # fmt: skip
    close(got, theirs, dtype)


@pytest.mark.parametrize("transform", ["grad(jit)", "vmap(jit)"])
def test_transforms_of_a_jitted_cnn_run_compiled(transform, made):
    """grad(jit(f)) and vmap(jit(f)): the graphs jit derives (forward and backward,
    batched) compile, convolutions and pooling inside kernels, the bits of the same
    transforms of the uncompiled jit."""
    params, images, _ = _cnn_data()
    forward = lambda p, x: anp.sum(_stax_cnn(lax, anp, p, x) ** 2)
    if transform == "grad(jit)":
        run = lambda f: grad(f)(params, images)
    else:  # one example at a time: the batch axis folds into the convolution's batch
        per_example = lambda f: lambda x: f(params, x[None])
        run = lambda f: vmap(per_example(f))(images)
    want = run(jit(forward, compile=False))
    for _ in range(3):
        got = run(jit(forward, compile=True))
    assert_tree_bits(got, want)
    # grad(jit): the backward kernel is handed the forward's residuals as transposed views
    # and runs as NumPy calls (its layout check); an MLP's does the same (not this family's)
    names = compiled_primitives(made, fallback_ok=transform == "grad(jit)")
    assert {"conv_general_dilated", "reduce_window_max"} <= names
