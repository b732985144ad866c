"""The convolution family (``autodiff.lax``) against JAX's ``lax``, beyond the registry's
samples (``tests/registry/convolution.py`` runs those through every transform): every
padding string, layout, group kind and dilation of ``conv_general_dilated`` with its
VJP, JVP and batching; ties and padding in max pooling; ``reduce_window``'s init values;
``conv_transpose`` and the shape helpers; a small CNN's gradient; ``jit``; errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import grad, jit, jvp, lax, vjp, vmap
from autodiff.testing import check_grads
from tests.crosscheck import jax as _jax


@pytest.fixture(scope="module")
def jl():
    return _jax().lax


@pytest.fixture(scope="module")
def jx():
    return _jax()


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


CONV_CASES = {
    "1-d valid": ((2, 3, 7), (4, 3, 3), (1,), "VALID", None, None, None, 1, 1),
    "2-d same strided atrous": ((2, 3, 7, 6), (4, 3, 3, 2), (2, 1), "SAME", None, (2, 1), None,
                                1, 1),
    "same_lower": ((1, 2, 6, 5), (3, 2, 2, 2), (2, 2), "SAME_LOWER", None, None, None, 1, 1),
    "NHWC transposed negative pad": ((2, 7, 6, 3), (3, 2, 3, 4), (2, 2), [(1, -1), (2, 0)],
                                     (1, 2), (1, 1), ("NHWC", "HWIO", "NHWC"), 1, 1),
    "layouts differ": ((2, 6, 7, 5), (3, 2, 5, 6), (1, 2), [(1, 2), (0, 1)], (2, 1), (2, 1),
                       ("NHWC", "HWIO", "NCHW"), 1, 1),
    "odd layout letters": ((3, 5, 2, 4), (2, 4, 3, 2), (1, 1), "SAME", None, None,
                           ("WNCH", "IHOW", "HNWC"), 1, 1),
    "feature groups": ((2, 6, 5), (6, 3, 2), (1,), [(1, 1)], None, None, None, 2, 1),
    "depthwise": ((2, 4, 9), (8, 1, 3), (1,), "VALID", None, None, None, 4, 1),
    "batch groups": ((4, 6, 5), (6, 6, 2), (2,), [(1, 1)], None, None, None, 1, 2),
    "batch groups dilated": ((6, 4, 9), (6, 4, 3), (2,), [(0, 0)], (1,), (3,), None, 1, 3),
    "3-d": ((1, 2, 4, 5, 3), (3, 2, 2, 2, 2), (1, 2, 1), "SAME", None, None, None, 1, 1),
    "kernel larger than input": ((1, 1, 3), (1, 1, 5), (1,), "VALID", None, None, None, 1, 1),
}  # fmt: skip


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_value_vjp_jvp_vmap_agree_with_jax(case, jl, jx):
    ls, rs, strides, pad, ld, rd, dn, groups, batches = CONV_CASES[case]
    rng = np.random.default_rng(len(case))
    lhs, rhs = rng.standard_normal(ls), rng.standard_normal(rs)
    args = (strides, pad, ld, rd, dn, groups, batches)
    f = lambda x, w: lax.conv_general_dilated(x, w, *args)
    g = lambda x, w: jl.conv_general_dilated(x, w, *args, precision="highest")
    out = f(lhs, rhs)
    close(out, g(lhs, rhs))
    ct = rng.standard_normal(out.shape)
    for ours, theirs in zip(vjp(f, lhs, rhs)[1](ct), jx.vjp(g, lhs, rhs)[1](ct)):
        close(ours, theirs)
    t = (rng.standard_normal(ls), rng.standard_normal(rs))
    close(jvp(f, (lhs, rhs), t)[1], jx.jvp(g, (lhs, rhs), t)[1])
    # both batched (the registry's vmap tests batch each alone, against loops)
    xs = [np.stack([rng.standard_normal(s) for _ in range(3)], axis=1) for s in (ls, rs)]
    close(vmap(f, in_dims=1)(*xs), jx.vmap(g, in_axes=1)(*xs))


def test_conv_second_order_agrees_with_jax(jl, jx):
    rng = np.random.default_rng(0)
    lhs, rhs = rng.standard_normal((2, 2, 5, 5)), rng.standard_normal((3, 2, 2, 2))

    def loss(conv, lhs, rhs):
        return (conv(lhs, rhs, (2, 1), "SAME", rhs_dilation=(1, 2)) ** 2).sum()

    v = rng.standard_normal(rhs.shape)
    ours = jvp(grad(lambda w: loss(lax.conv_general_dilated, lhs, w)), (rhs,), (v,))[1]
    theirs = jx.jvp(jx.grad(lambda w: loss(jl.conv_general_dilated, lhs, w)), (rhs,), (v,))[1]
    close(ours, theirs, 1e-9)


def test_conv_transpose_and_shape_helpers_agree_with_jax(jl):
    rng = np.random.default_rng(1)
    dn = ("NHWC", "HWIO", "NHWC")
    for k, s, pad, tk in itertools.product(
        (1, 2, 3), ((1, 1), (2, 1), (2, 2)), ("SAME", "VALID", [(1, 0), (0, 2)]), (False, True)
    ):
        x, w = rng.standard_normal((2, 5, 4, 3)), rng.standard_normal((k, k, 3, 3))
        ours = lax.conv_transpose(x, w, s, pad, dimension_numbers=dn, transpose_kernel=tk)
        close(ours, jl.conv_transpose(x, w, s, pad, dimension_numbers=dn, transpose_kernel=tk,
                                      precision="highest"))  # fmt: skip
        if isinstance(pad, str):
            shape = lax.conv_transpose_shape_tuple(x.shape, w.shape, s, pad, dn)
            assert shape == jl.conv_transpose_shape_tuple(x.shape, w.shape, s, pad, dn)
            assert shape == ours.shape
        shape = lax.conv_general_shape_tuple(x.shape, w.shape, s, pad, dn)
        assert shape == jl.conv_general_shape_tuple(x.shape, w.shape, s, pad, dn)
    x, w = rng.standard_normal((1, 4, 3)), rng.standard_normal((3, 3, 2))
    for pad in ([(1, 0)], [(0, 2)]):  # PyTorch's meaning of the pairs
        close(lax.conv_transpose(x, w, (2,), pad, use_consistent_padding=True),
              jl.conv_transpose(x, w, (2,), pad, use_consistent_padding=True,
                                precision="highest"))  # fmt: skip
    assert lax.padtype_to_pads((7, 5), (3, 2), (2, 2), "SAME") == list(
        map(tuple, jl.padtype_to_pads((7, 5), (3, 2), (2, 2), "SAME")))  # fmt: skip


POOL_CASES = {
    "2x2 pooling": ((2, 4, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),
    "3x3 overlapping same": ((6, 7), (3, 3), (1, 2), "SAME", None, None),
    "dilations": ((6, 7), (3, 3), (1, 2), "SAME", (2, 1), (1, 2)),
    "negative pad": ((9,), (4,), (1,), [(2, -1)], (1,), (2,)),
    "global": ((3, 4), (3, 4), (1, 1), "VALID", None, None),
    "all padding windows": ((2,), (2,), (1,), [(3, 3)], None, None),
}  # fmt: skip


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_windowed_reductions_agree_with_jax_ties_included(case, kind, jl, jx):
    shape, window, strides, pad, base, dilation = POOL_CASES[case]
    rng = np.random.default_rng(2)
    x = np.round(rng.standard_normal(shape), 0)  # many ties (zeros and ones), as after a relu
    init = {"sum": 0.0, "max": -np.inf, "min": np.inf}[kind]
    op = {"sum": lax.add, "max": lax.max, "min": lax.min}[kind]
    jop = {"sum": jl.add, "max": jl.max, "min": jl.min}[kind]
    f = lambda x: lax.reduce_window(x, init, op, window, strides, pad, base, dilation)
    g = lambda x: jl.reduce_window(x, init, jop, window, strides, pad, base, dilation)
    out = f(x)
    close(out, g(x))
    t = rng.standard_normal(shape)
    close(jvp(f, (x,), (t,))[1], jx.jvp(g, (x,), (t,))[1])
    ct = rng.standard_normal(out.shape)
    ours = vjp(f, x)[1](ct)[0]
    np.testing.assert_allclose(np.sum(ours * t), np.sum(ct * jvp(f, (x,), (t,))[1]))
    xs = np.stack([np.round(rng.standard_normal(shape)) for _ in range(3)], axis=-1)
    close(vmap(f, in_dims=-1)(xs), jx.vmap(g, in_axes=-1)(xs))
    if kind != "sum" and dilation is not None:
        return  # JAX has no VJP of a max or min over dilated windows
    close(ours, jx.vjp(g, x)[1](ct)[0])
    close(vmap(grad(lambda x: (f(x) ** 2).sum()), in_dims=-1, out_dims=-1)(xs),
          jx.vmap(jx.grad(lambda x: (g(x) ** 2).sum()), in_axes=-1, out_axes=-1)(xs))  # fmt: skip


def test_max_pooling_gives_each_window_derivative_to_its_first_maximum():
    x = np.array([[1.0, 1.0], [1.0, 1.0]])
    g = grad(lambda x: lax.reduce_window_max(x, (2, 2), (1, 1), "SAME").sum())(x)
    # windows (SAME pads at the end): [0,0] sees all four, [0,1] the right column, ...
    np.testing.assert_array_equal(g, [[1.0, 1.0], [1.0, 1.0]])
    g = grad(lambda x: lax.reduce_window_max(x, (2, 2), (2, 2)).sum())(x)
    np.testing.assert_array_equal(g, [[1.0, 0.0], [0.0, 0.0]])
    # a window that sees padding only: value -inf, no derivative anywhere
    out = lax.reduce_window_max(np.array([1.0]), (1,), (1,), [(1, 0)])
    np.testing.assert_array_equal(out, [-np.inf, 1.0])
    np.testing.assert_array_equal(grad(lambda x: lax.reduce_window_max(
        x, (1,), (1,), [(1, 0)])[1])(np.array([1.0])), [1.0])  # fmt: skip


@pytest.mark.parametrize("init", [0.0, 2.5])
@pytest.mark.parametrize("kind", ["add", "max", "min"])
def test_reduce_window_init_values_agree_with_jax_and_are_differentiable(kind, init, jl, jx):
    """JAX refuses the derivative in ``init_value`` (zero where it is the identity); here it
    is the mathematical one (checked by finite differences)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4))
    ops = {"add": (lax.add, jl.add), "max": (lax.max, jl.max), "min": (lax.min, jl.min)}
    (op, jop), args = ops[kind], ((2, 3), (1, 2), [(1, 1), (2, 0)], (2, 1), None)
    f = lambda x, c: lax.reduce_window(x, c, op, *args)
    g = lambda x, c: jl.reduce_window(x, c, jop, *args)
    close(f(x, init), g(x, init))
    if kind == "add" and init == 0.0:  # JAX differentiates the identity's case only
        close(grad(lambda x: f(x, init).sum())(x), jx.grad(lambda x: g(x, init).sum())(x))
    check_grads(f, (x, np.float64(init + 0.1)), order=2)


def _cnn(lax_module, anp_module, params, images):
    """Conv (SAME) -> relu -> max pool -> conv (strided, VALID) -> avg pool -> dense."""
    (w1, b1), (w2, b2), w3 = params
    dn = ("NHWC", "HWIO", "NHWC")
    x = lax_module.conv_general_dilated(images, w1, (1, 1), "SAME", dimension_numbers=dn) + b1
    x = anp_module.maximum(x, 0.0)
    x = lax_module.reduce_window(x, -np.inf, lax_module.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = lax_module.conv_general_dilated(x, w2, (2, 2), "VALID", dimension_numbers=dn) + b2
    x = anp_module.tanh(x)
    x = lax_module.reduce_window(x, 0.0, lax_module.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME") / 4
    logits = anp_module.reshape(x, (x.shape[0], -1)) @ w3
    return anp_module.sum(logits**2)


def test_a_small_cnn_gradient_agrees_with_jax(jl, jx):
    rng = np.random.default_rng(4)
    params = ((rng.standard_normal((3, 3, 1, 4)), rng.standard_normal(4)),
              (rng.standard_normal((3, 3, 4, 6)), rng.standard_normal(6)),
              rng.standard_normal((2 * 2 * 6, 5)))  # fmt: skip
    images = rng.standard_normal((3, 10, 10, 1))
    ours = grad(lambda p: _cnn(lax, anp, p, images))(params)
    theirs = jx.grad(lambda p: _cnn(jl, jx.numpy, p, images))(params)
    for a, b in zip(autodiff_leaves(ours), autodiff_leaves(theirs)):
        close(a, b, 1e-9)
    per_example = vmap(grad(lambda p, x: _cnn(lax, anp, p, x[None])), in_dims=(None, 0))
    got = per_example(params, images)
    for i in range(3):
        want = grad(lambda p, x=images[i : i + 1]: _cnn(lax, anp, p, x))(params)
        for a, b in zip(autodiff_leaves(got), autodiff_leaves(want)):
            close(a[i], b, 1e-9)


def autodiff_leaves(tree):
    import optree

    return optree.tree_leaves(tree)


def test_jit_of_the_family_behaves_like_the_function():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 6, 6, 2)), rng.standard_normal((3, 3, 2, 3))

    def f(x, w):
        dn = ("NHWC", "HWIO", "NHWC")
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn)
        return lax.reduce_window(y, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    jf = jit(f)
    for _ in range(3):  # the first call, the replay, the compiled tier's (NumPy calls) replay
        out = jf(x, w)
        close(out, f(x, w), 1e-12)
        assert not np.shares_memory(out, x) and not np.shares_memory(out, w)
    loss = lambda x, w: (f(x, w) ** 2).sum()
    close(jit(grad(loss, argnums=1))(x, w), grad(loss, argnums=1)(x, w), 1e-12)
    graph = autodiff.make_graph(f)(x, w)
    assert [e.prim.name for e in graph.eqns] == ["conv_general_dilated", "reduce_window_max"]


PRODUCTS = {
    "conv": lambda x, w, **kw: lax.conv(x[None, None], w[None, None], (1,), "VALID", **kw),
    "dot": lambda x, w, **kw: anp.dot(x, w, **kw),
    "matmul": lambda x, w, **kw: anp.matmul(x, w, **kw),
    "einsum": lambda x, w, **kw: anp.einsum("i,i->", x, w, **kw),
    "tensordot": lambda x, w, **kw: anp.tensordot(x, w, 1, **kw),
    "vdot": lambda x, w, **kw: anp.vdot(x, w, **kw),
    "inner": lambda x, w, **kw: anp.inner(x, w, **kw),
}


@pytest.mark.parametrize("name", PRODUCTS)
def test_precision_is_checked_and_changes_nothing(name):
    """JAX's ``precision=`` on every product: each value JAX takes gives the same result
    (NumPy computes float64 as float64), a misspelt one raises as in JAX, under ``grad``
    too; ``preferred_element_type`` is the result's dtype."""
    f, rng = PRODUCTS[name], np.random.default_rng(6)
    x, w = rng.standard_normal(5), rng.standard_normal(5)
    want = f(x, w)
    for precision in (
        "highest",
        "float32",
        lax.Precision.HIGH,
        ("default", "bfloat16"),
        [lax.Precision.DEFAULT, lax.Precision.HIGHEST],
        "F64_F64_F64",
        None,
    ):
        np.testing.assert_array_equal(f(x, w, precision=precision), want)  # fmt: skip
    close(
        grad(lambda x: anp.sum(f(x, w, precision="highest")))(x),
        grad(lambda x: anp.sum(f(x, w)))(x),
    )
    for bad in ("hihgest", 3, ("highest",), ("high", "nope")):
        with pytest.raises(ValueError, match="precision must be None, a Precision"):
            f(x, w, precision=bad)
        with pytest.raises(ValueError, match="precision"):
            grad(lambda x, bad=bad: anp.sum(f(x, w, precision=bad)))(x)
    out = f(x, w, preferred_element_type=np.float32)
    assert out.dtype == np.float32
    close(out, want, 1e-6)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda x, w: lax.conv(x, w[0], (1,), "VALID"), "same number of axes"),
        (lambda x, w: lax.conv(x[0], w[0], (1, 1), "SAME"), "window_strides must have 1"),
        (lambda x, w: lax.conv(x[0], w[0], (0,), "SAME"), "window_strides must be positive"),
        (lambda x, w: lax.conv(x[0], w[0], (1,), "FULL"), "padding must be 'SAME'"),
        (lambda x, w: lax.conv(x[0], w[0], (1,), [(1, 1), (1, 1)]), "1 \\(low, high\\) pairs"),
        (lambda x, w: lax.conv(x[0], w[0], (1,), [(-9, 0)]), "negative padding"),
        (lambda x, w: lax.conv_general_dilated(x[0], w[0], (1,), "SAME", lhs_dilation=(2,)),
         "conv_transpose"),
        (lambda x, w: lax.conv_general_dilated(x[0], w[0], (1,), "SAME", feature_group_count=2),
         "feature_group_count must divide"),
        (lambda x, w: lax.conv_general_dilated(x[0], w[0], (1,), "SAME",
                                               dimension_numbers=("NCH", "OIX", "NCH")),
         "same spatial axes"),
        (lambda x, w: lax.reduce_window(x, 0.0, np.multiply, (1, 1, 1, 1)), "lax.add, lax.max"),
        (lambda x, w: lax.reduce_window_max(x, (2, 2)), "window_dimensions must have 4"),
    ],
)  # fmt: skip
def test_bad_arguments_raise_naming_the_argument(call, match):
    x, w = np.ones((1, 2, 3, 5)), np.ones((1, 2, 3, 2))
    with pytest.raises((ValueError, TypeError, NotImplementedError), match=match):
        call(x, w)


def test_hips_autograds_convolve_spelling_keeps_scipys():
    """``autodiff.scipy.signal.convolve`` takes autograd's ``axes``/``dot_axes`` (by keyword
    or in its positions) and SciPy's ``mode``/``method`` as before."""
    sig = pytest.importorskip("autodiff.scipy.signal")
    from tests.registry.signal import _autograd_form

    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((4, 2, 6, 5)), rng.standard_normal((2, 3, 3, 2))
    spec = dict(axes=([2, 3], [2, 3]), dot_axes=([1], [0]))
    want = _autograd_form(a, b, mode="valid", **spec)
    close(sig.convolve(a, b, mode="valid", **spec), want)
    full = _autograd_form(a, b, mode="full", **spec)
    close(sig.convolve(a, b, spec["axes"], spec["dot_axes"]), full)  # in autograd's positions
    for mode in ("full", "same", "valid"):
        close(sig.convolve(a[0, 0], b[0, 0], mode), __import__("scipy.signal").signal.convolve(
            a[0, 0], b[0, 0], mode))  # fmt: skip
    with pytest.raises(ValueError, match="equal sizes"):
        sig.convolve(a, b, axes=([2, 3], [2, 3]), dot_axes=([1], [1]))
    with pytest.raises(ValueError, match="mode flags"):
        sig.convolve(a, b, axes=([2], [2]), mode="circular")
    ag = pytest.importorskip("autograd.scipy.signal", reason="HIPS autograd is not installed")
    for mode in ("full", "same", "valid"):
        close(sig.convolve(a, b, mode=mode, **spec), ag.convolve(a, b, mode=mode, **spec))
