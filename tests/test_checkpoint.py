"""checkpoint: the same results as the plain function under every transform,
and a forward pass that keeps fewer intermediates."""

import gc
import weakref

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import checkpoint, grad, hessian, jacfwd, jvp, vjp, vmap
from autodiff.interpreters.reverse import GradTensor
from autodiff.interpreters.tape import reachable

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
