"""Memory: what a transform keeps is freed as soon as nothing refers to it, by reference
counting alone (no cycles, so no wait for the garbage collector), and long loops of
transforms do not grow memory.

Residuals are ``Tracked`` arrays (plain ndarrays cannot be weakly referenced), as in
``test_tape.py``, which pins what the tape keeps *during* a computation; here it is what
is left *after* it.
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import (
    checkpoint,
    custom_vjp,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    value_and_grad,
    vjp,
    vmap,
)
from autodiff.extend import Primitive, current_interpreters


class Tracked(np.ndarray):
    """An ndarray that can be weakly referenced."""


def tracked(a):
    return np.asarray(a, dtype=float).view(Tracked)


RNG = np.random.default_rng(0)
W = tracked(RNG.standard_normal((3, 3)))
X = tracked([0.3, -0.8, 1.1])


@pytest.fixture
def no_gc():
    """Freed means freed by reference counting: the cycle collector stays off."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Spy:
    """Weak references to the values a function computes, and to the interpreters it
    ran under."""

    def __init__(self):
        self.values, self.interpreters = [], []

    def keep(self, tracer):
        value = tracer
        while hasattr(value, "_inner"):  # down to the array, through every level
            value = value._inner
        if isinstance(value, Tracked):
            self.values.append(weakref.ref(value))
        for interp in current_interpreters():
            self.interpreters.append(weakref.ref(interp))
        return tracer

    def alive(self):
        return sum(ref() is not None for ref in self.values + self.interpreters)


def model(spy):
    def f(x):
        h = spy.keep(anp.tanh(W @ x))  # tanh's node keeps its output
        s = spy.keep(anp.sin(h))  # sin's node keeps its input h
        return s * x  # multiply's node keeps both operands (the output is the caller's)

    return f


# --- vjp_fn and the outputs dropped: the tape goes ------------------------------------------


def test_vjp_keeps_the_tape_while_vjp_fn_lives_and_frees_it_after(no_gc):
    spy = Spy()
    out, vjp_fn = vjp(model(spy), X)
    assert spy.values and all(ref() is not None for ref in spy.values)  # the tape's residuals
    g1 = vjp_fn(np.ones(3))[0]
    g2 = vjp_fn(np.ones(3))[0]  # called again: still all there
    assert all(ref() is not None for ref in spy.values)
    np.testing.assert_array_equal(g1, g2)
    h = np.tanh(W @ X)
    expected = (W.T @ ((1 - h * h) * np.cos(h) * X)) + np.sin(h)
    np.testing.assert_allclose(g1, expected, rtol=1e-12)
    del vjp_fn
    assert spy.alive() == 0  # the output is an array: it holds no tape
    assert isinstance(out, np.ndarray)


def test_linearize_frees_the_tape_with_jvp_fn(no_gc):
    spy = Spy()
    _, jvp_fn = linearize(model(spy), X)
    t = jvp_fn(np.ones(3))
    assert spy.alive() > 0
    h = np.tanh(W @ X)
    expected = np.cos(h) * (1 - h * h) * (W @ np.ones(3)) * X + np.sin(h)
    np.testing.assert_allclose(t, expected, rtol=1e-12)
    del jvp_fn
    assert spy.alive() == 0


TRANSFORMS = {
    "grad": lambda f: grad(lambda x: anp.sum(f(x)))(X),
    "value_and_grad": lambda f: value_and_grad(lambda x: anp.sum(f(x)))(X),
    "jvp": lambda f: jvp(f, (X,), (np.ones(3),)),
    "vmap": lambda f: vmap(f)(tracked(np.stack([X, 2 * X]))),
    "jacrev": lambda f: jacrev(f)(X),
    "jacfwd": lambda f: jacfwd(f)(X),
    "hessian": lambda f: hessian(lambda x: anp.sum(f(x)))(X),
    "vmap(grad)": lambda f: vmap(grad(lambda x: anp.sum(f(x))))(tracked(np.stack([X, 2 * X]))),
    "grad(grad)": lambda f: grad(lambda x: anp.sum(grad(lambda y: anp.sum(f(y)))(x)))(X),
    "checkpoint": lambda f: grad(lambda x: anp.sum(checkpoint(f)(x)))(X),
    "vjp, then vjp_fn": lambda f: vjp(f, X)[1](np.ones(3)),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_nothing_outlives_the_call(name, no_gc):
    """Residuals, intermediates and interpreters: all gone once the result is returned."""
    spy = Spy()
    result = TRANSFORMS[name](model(spy))
    assert spy.values and spy.interpreters  # what was watched
    assert spy.alive() == 0
    assert all(isinstance(leaf, np.ndarray) for leaf in optree.tree_leaves(result))


def test_custom_vjp_residuals_are_freed_after_the_backward_pass(no_gc):
    refs = []

    @custom_vjp
    def f(x):
        return anp.tanh(x)

    def fwd(x):
        y = anp.tanh(x)
        res = tracked(1 - np.tanh(X) ** 2)  # the residual bwd reads
        refs.append(weakref.ref(res))
        return y, res

    f.defvjp(fwd, lambda res, ct: (ct * res,))
    g = grad(lambda x: anp.sum(f(x)))(X)
    np.testing.assert_allclose(g, 1 - np.tanh(X) ** 2, rtol=1e-12)
    assert refs and refs[0]() is None


def test_a_fault_in_the_backward_pass_leaves_nothing_behind(no_gc):
    calls = []

    def vjp_rule(ct, ans, x):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("fault in the backward pass")
        return ct * anp.cos(x)

    fsin = Primitive("fsin", np.sin, vjp=[vjp_rule])
    spy = Spy()

    def f(x):
        return anp.sum(spy.keep(fsin.bind(model(spy)(x))))

    with pytest.raises(RuntimeError, match="fault in the backward pass") as info:
        grad(f)(X)
    del info  # the traceback holds the frames of the backward pass
    assert spy.alive() == 0
    g = grad(f)(X)  # and the next call is right
    h = np.tanh(W @ X)
    s = np.sin(h) * X
    ds = np.cos(s)
    np.testing.assert_allclose(g, W.T @ ((1 - h * h) * np.cos(h) * X * ds) + np.sin(h) * ds)


# --- long loops: no growth ------------------------------------------------------------------


def mlp_loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = anp.tanh(x @ w1 + b1)
    return anp.mean((h @ w2 + b2 - y) ** 2)


def _traced_growth(step, state, warmup=50, steps=1000):
    """Bytes of memory still allocated after ``steps`` more steps than after warm-up."""
    for _ in range(warmup):
        state = step(state)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(steps):
            state = step(state)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, state


def test_a_thousand_gradient_descent_steps_do_not_grow_memory():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 4))
    y = np.sin(x @ rng.standard_normal((4, 2)))
    params = (
        (0.5 * rng.standard_normal((4, 16)), np.zeros(16)),
        (0.5 * rng.standard_normal((16, 2)), np.zeros(2)),
    )
    loss_and_grad = value_and_grad(mlp_loss)
    losses = {}  # the first and the latest (a growing list would be growth of its own)

    def step(params):
        loss, g = loss_and_grad(params, x, y)
        losses.setdefault("first", float(loss))
        losses["last"] = float(loss)
        return tuple((w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, g))

    growth, params = _traced_growth(step, params)
    assert growth < 100_000, f"memory grew by {growth} bytes over 1,000 steps"
    assert losses["last"] < 0.5 * losses["first"]  # it did train
    # the last gradient is right: central differences on one weight
    eps = 1e-6
    (w1, b1), rest = params
    bump = np.zeros_like(w1)
    bump[1, 3] = eps
    fd = (mlp_loss(((w1 + bump, b1), rest), x, y) - mlp_loss(((w1 - bump, b1), rest), x, y)) / (
        2 * eps
    )
    np.testing.assert_allclose(grad(mlp_loss)(params, x, y)[0][0][1, 3], fd, rtol=1e-6)


def test_loops_of_every_transform_do_not_grow_memory():
    x = np.array([0.3, -0.8, 1.1])
    w = np.array([[0.5, -1.0, 0.2], [0.3, 0.1, -0.7], [1.0, 0.4, 0.0]])
    f = lambda x: anp.tanh(w @ x) * x

    @custom_vjp
    def g(x):
        return anp.sin(x)

    g.defvjp(lambda x: (anp.sin(x), x), lambda x, ct: (ct * anp.cos(x),))

    def step(acc):
        _, vjp_fn = vjp(f, x)
        _, jvp_fn = linearize(f, x)
        results = (
            vjp_fn(np.ones(3))[0],
            jvp_fn(np.ones(3)),
            jvp(f, (x,), (np.ones(3),))[1],
            vmap(grad(lambda r: anp.sum(f(r))))(np.stack([x, -x]))[0],
            jacrev(f)(x).sum(0),
            hessian(lambda r: anp.sum(f(r)))(x).sum(0),
            grad(lambda r: anp.sum(checkpoint(f)(r) + g(r)))(x),
        )
        return acc + sum(results)

    growth, acc = _traced_growth(step, np.zeros(3), warmup=20, steps=150)
    assert growth < 100_000, f"memory grew by {growth} bytes over 150 steps"
    assert np.all(np.isfinite(acc))


# --- the peak of a gradient (benchmark W6, in small) ----------------------------------


def _traced_peak(run):
    """Bytes allocated at the peak of ``run()``, above what was allocated before it."""
    run()  # warm-up: lazy imports, dispatch tables
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_grad_of_a_tanh_mlp_peaks_at_its_floor():
    # W6's MLP at a quarter of the size.  The least any gradient can peak at is the
    # gradients (the result) plus one (N, H) array: the hidden layer's cotangent,
    # alive while the last matmul writes dW1.  tanh's VJP used to need two more
    # (N, H) temporaries next to its output and cotangent (1.29x this floor).
    rng = np.random.default_rng(6)
    n, d, h, o = 256, 512, 512, 128
    X, Y = rng.standard_normal((n, d)), rng.standard_normal((n, o))
    params = (rng.standard_normal((d, h)) / 23, rng.standard_normal(h) / 10,
              rng.standard_normal((h, o)) / 23, rng.standard_normal(o) / 10)  # fmt: skip

    def loss(p):
        w1, b1, w2, b2 = p
        return anp.mean((anp.tanh(X @ w1 + b1) @ w2 + b2 - Y) ** 2)

    floor = sum(p.nbytes for p in params) + n * h * 8
    peak = _traced_peak(lambda: grad(loss)(params))
    assert peak <= 1.10 * floor, f"peak {peak / floor:.2f}x the floor of {floor} bytes"
    w1, b1, w2, b2 = params  # and the gradient is the hand-written one
    hidden = np.tanh(X @ w1 + b1)
    d_out = (hidden @ w2 + b2 - Y) * (2.0 / Y.size)
    d_hidden = (d_out @ w2.T) * (1 - hidden * hidden)
    want = (X.T @ d_hidden, d_hidden.sum(0), hidden.T @ d_out, d_out.sum(0))
    for got, expected in zip(grad(loss)(params), want):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_tanh_derivative_on_plain_arrays_is_the_expression_bit_for_bit(dtype):
    # The one-buffer evaluation of tanh's derivative for large plain arrays is the
    # same arithmetic as the expression traced values take, in the same order.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((256, 256)).astype(dtype)  # 256 KiB and more
    g = rng.standard_normal((256, 256)).astype(dtype)
    ans = np.tanh(x)
    (rule,) = anp.tanh.primitive.vjp.rules
    got = rule(g, ans, x)
    assert got.dtype == dtype and got is not g and got is not ans
    np.testing.assert_array_equal(got, g * (1 - ans * ans), strict=True)
    np.testing.assert_array_equal(ans, np.tanh(x))  # the residual is left as it was
    # other shapes, dtypes, small and 0-d values take the expression itself
    np.testing.assert_array_equal(rule(g[:1], ans, x), g[:1] * (1 - ans * ans), strict=True)
    small = rule(g[:4, :4], ans[:4, :4], x[:4, :4])
    np.testing.assert_array_equal(small, g[:4, :4] * (1 - ans[:4, :4] ** 2), strict=True)
    np.testing.assert_array_equal(rule(np.float64(2.0), ans[0, 0], x[0, 0]),
                                  2.0 * (1 - ans[0, 0] ** 2))  # fmt: skip
