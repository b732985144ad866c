"""checkpoint: the same results as the plain function under every transform,
and a forward pass that keeps fewer intermediates."""

import functools
import gc
import weakref

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import checkpoint, grad, hessian, jacfwd, jit, jvp, scan, vjp, vmap
from autodiff.interpreters.reverse import GradTensor
from autodiff.interpreters.tape import reachable
from tests import crosscheck

rng = np.random.default_rng(4)
X, Wm = rng.standard_normal((4, 3)), rng.standard_normal((3, 3))


def block(x, w):
    return anp.sum(anp.tanh(anp.tanh(x @ w) @ w.T) ** 2)


TRANSFORMS = {
    "plain": lambda f: f(X, Wm),
    "grad": lambda f: grad(f)(X, Wm),
    "grad argnums": lambda f: grad(f, argnums=(0, 1))(X, Wm)[1],
    "vjp": lambda f: vjp(f, X, Wm)[1](2.0),
    "jvp": lambda f: jvp(f, (X, Wm), (X, Wm))[1],
    "vmap": lambda f: vmap(f, in_dims=(0, None))(X, Wm),
    "vmap(grad)": lambda f: vmap(grad(f), in_dims=(0, None))(X, Wm),
    "grad(vmap)": lambda f: grad(lambda x: vmap(f, in_dims=(0, None))(x, Wm).sum())(X),
    "grad(grad)": lambda f: grad(lambda x: anp.sum(grad(f)(x, Wm) ** 2))(X),
    "hessian": lambda f: hessian(lambda x: f(x, Wm))(X[0]),
    "jacfwd(grad)": lambda f: jacfwd(grad(lambda x: f(x, Wm)))(X[1]),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_checkpoint_gives_the_same_results(name):
    transform = TRANSFORMS[name]
    want, got = transform(block), transform(checkpoint(block))
    for w, g in zip(optree.tree_leaves(want), optree.tree_leaves(got), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_checkpoint_with_pytrees_and_static_arguments():
    def layer(params, x, activation):
        return {"out": activation(x @ params["w"] + params["b"]), "norm": anp.sum(x**2)}

    params = {"w": Wm, "b": rng.standard_normal(3)}

    def loss(params, layer_fn):
        r = layer_fn(params, X, anp.tanh)
        return anp.sum(r["out"] ** 2) + r["norm"]

    np.testing.assert_allclose(loss(params, checkpoint(layer)), loss(params, layer))
    g_plain, g_ckpt = grad(loss)(params, layer), grad(loss)(params, checkpoint(layer))
    for k in params:
        np.testing.assert_allclose(g_ckpt[k], g_plain[k], rtol=1e-12)


def _values(x):
    return x.value if isinstance(x, GradTensor) else x


def test_forward_keeps_fewer_intermediates():
    """The intermediates of a checkpointed function are freed after the forward pass."""
    refs = []

    def inner(x):
        h = anp.tanh(x @ Wm)  # an intermediate the backward pass of tanh/matmul needs
        refs.append(weakref.ref(_values(h)))
        return anp.sum(anp.sin(h))

    for f, kept in [(inner, True), (checkpoint(inner), False)]:
        refs.clear()
        _out, vjp_fn = vjp(f, X)  # the backward pass has not run yet
        gc.collect()
        assert (refs[0]() is not None) == kept
        np.testing.assert_allclose(vjp_fn(1.0)[0], vjp(inner, X)[1](1.0)[0], rtol=1e-13)


def test_checkpointed_function_is_one_node_on_the_tape():
    def count(f):
        _, vjp_fn = vjp(f, X, Wm)
        return len(reachable([node for node, *_ in vjp_fn._out_meta if node is not None]))

    assert count(block) == 2 + 7  # the two inputs and seven primitives
    assert count(checkpoint(block)) == 2 + 1


def test_checkpoint_recomputes_during_the_backward_pass():
    runs = []

    def f(x):
        runs.append(1)
        return anp.sum(anp.sin(x))

    g = grad(checkpoint(f))(X)
    np.testing.assert_allclose(g, np.cos(X))
    assert len(runs) == 2  # once forward, once again for the backward pass


# --- closures over traced values (issue 23) ------------------------------------------------


def _twice(lib, checkpoint_):
    """The issue's example: a checkpointed block closing over w, applied twice."""

    def f(w):
        block = checkpoint_(lambda x: lib.sin(w * x))
        return block(block(1.0))

    return f


def _rnn(lib, checkpoint_, scan_):
    """JAX's standard pattern: scan(checkpoint(cell), ...), the cell closing over weights."""

    def loss(w, xs):
        cell = checkpoint_(lambda h, x: (lib.tanh(w[0] * h + w[1] * x), lib.sin(h)))
        h, ys = scan_(cell, 0.3, xs)
        return h + lib.sum(ys**2)

    return loss


def test_a_closure_applied_twice_matches_jax():
    jax = crosscheck.jax()
    ours, theirs = _twice(anp, checkpoint), _twice(jax.numpy, jax.checkpoint)
    assert np.isclose(grad(ours)(0.5), jax.grad(theirs)(0.5), rtol=1e-13)
    assert np.isclose(grad(grad(ours))(0.5), jax.grad(jax.grad(theirs))(0.5), rtol=1e-12)
    ws = np.array([0.2, 0.5, 1.5])
    np.testing.assert_allclose(vmap(grad(ours))(ws), jax.vmap(jax.grad(theirs))(ws), rtol=1e-13)
    assert np.isclose(jvp(ours, (0.5,), (1.0,))[1], jax.jvp(theirs, (0.5,), (1.0,))[1])
    assert np.isclose(jit(grad(ours))(0.5), jax.grad(theirs)(0.5), rtol=1e-13)


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "jit"])
def test_scan_of_a_checkpointed_cell_matches_jax(staged):
    jax = crosscheck.jax()
    ours = _rnn(anp, checkpoint, scan)
    theirs = _rnn(jax.numpy, jax.checkpoint, jax.lax.scan)
    w, xs = np.array([0.9, 0.4]), np.linspace(-1.0, 1.0, 60)
    transform = (lambda f: jit(grad(f))) if staged else grad
    np.testing.assert_allclose(transform(ours)(w, xs), jax.grad(theirs)(w, xs), rtol=1e-12)
    np.testing.assert_allclose(
        transform(ours)(w, xs), grad(_rnn(anp, lambda f: f, scan))(w, xs), rtol=1e-12
    )


def test_scan_of_a_checkpointed_cell_runs_the_cell_linearly_often():
    """Each step's cell runs a fixed number of times (staged once to find what it closes
    over, once forward, once recomputed): the count grows with the steps, not faster."""
    runs = []

    def loss(w, xs):
        def cell(h, x):
            runs.append(1)
            return anp.tanh(w * h + x), h

        return scan(checkpoint(cell), 0.1, xs)[0]

    counts = []
    for n in (10, 20, 40):
        runs.clear()
        grad(loss)(0.7, np.ones(n))
        counts.append(len(runs))
    assert counts[1] == 2 * counts[0] and counts[2] == 2 * counts[1], counts


def test_a_closure_through_an_object_and_a_partial():
    class Layer:
        def __init__(self, w):
            self.w = w

        def __call__(self, x):
            return anp.tanh(self.w * x)

    def via_object(w):
        block = checkpoint(Layer(w))
        return block(block(0.4))

    def via_method(w):
        block = checkpoint(Layer(w).__call__)
        return block(block(0.4))

    def via_partial(w):
        block = checkpoint(functools.partial(lambda w, x: anp.tanh(w * x), w))
        return block(block(0.4))

    def plain(w):
        return anp.tanh(w * anp.tanh(w * 0.4))

    for f in (via_object, via_method, via_partial):
        assert np.isclose(grad(f)(0.8), grad(plain)(0.8), rtol=1e-13)


def test_python_control_flow_with_a_closure_still_runs_without_one():
    """A function branching on its input's value cannot be staged: with nothing traced
    closed over, it is checkpointed as before."""
    block = checkpoint(lambda x: anp.sin(x) if x > 0 else anp.cos(x))
    assert np.isclose(grad(lambda x: block(block(x)))(0.5), np.cos(np.sin(0.5)) * np.cos(0.5))
