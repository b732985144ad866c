"""checkpoint: the same results as the plain function under every transform,
and a forward pass that keeps fewer intermediates."""

import functools
import gc
import weakref

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import checkpoint, checkpoint_name, grad, hessian, jacfwd, jit, jvp, scan, vjp, vmap
from autodiff import checkpoint_policies as cp
from autodiff.core.graph import ShapedArray
from autodiff.core.primitive import Primitive
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


# --- policies (JAX's jax.checkpoint_policies) -----------------------------------------------


POLICIES = {
    "None": None,
    "nothing_saveable": cp.nothing_saveable,
    "everything_saveable": cp.everything_saveable,
    "dots_saveable": cp.dots_saveable,
    "dots_with_no_batch_dims_saveable": cp.dots_with_no_batch_dims_saveable,
    "save_only_these_names": cp.save_only_these_names("h"),
    "save_any_names_but_these": cp.save_any_names_but_these("other"),
    "save_anything_except_these_names": cp.save_anything_except_these_names("h"),
    "save_from_both_policies": cp.save_from_both_policies(cp.dots_saveable,
                                                          cp.save_only_these_names("h")),
}  # fmt: skip


def named_block(x, w):
    h = checkpoint_name(anp.tanh(x @ w), "h")
    return anp.sum(anp.tanh(h @ w.T) ** 2)


@pytest.mark.parametrize("name", list(TRANSFORMS))
@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_policy_gives_the_same_results(policy, name):
    transform = TRANSFORMS[name]
    want, got = transform(named_block), transform(checkpoint(named_block, policy=POLICIES[policy]))
    for w, g in zip(optree.tree_leaves(want), optree.tree_leaves(got), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)
    jitted = jit(grad(checkpoint(named_block, policy=POLICIES[policy]), argnums=(0, 1)))
    for w, g in zip(grad(named_block, argnums=(0, 1))(X, Wm), jitted(X, Wm), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-11)


def _counted(name, impl, deriv, reads):
    """A primitive whose implementation counts its runs; ``deriv(ct, ans, x)``."""
    runs = []

    def run(x):
        runs.append(1)
        return impl(x)

    prim = Primitive(name, run, vjp=[deriv], vjp_reads=[reads],
                     shape=lambda x: ShapedArray(x.shape, x.dtype))  # fmt: skip
    prim.def_batch(lambda args, dims: (prim.bind(args[0]), dims[0]))
    return prim, runs


# A's VJP reads its operand; B's reads its result (as matmul's and tanh's do)
A_p, A_runs = _counted("A", np.sin, lambda ct, ans, x: ct * anp.cos(x), (0,))
B_p, B_runs = _counted("B", np.tanh, lambda ct, ans, x: ct * (1 - ans**2), ("ans",))


def _chain(x):
    return anp.sum(B_p.bind(checkpoint_name(A_p.bind(x), "a")) ** 2)


@pytest.mark.parametrize(
    ("policy", "recomputed"),
    [
        (None, {"A": 1, "B": 1}),  # everything the backward pass reads, again
        (cp.nothing_saveable, {"A": 1, "B": 1}),
        (cp.everything_saveable, {"A": 0, "B": 0}),  # nothing again: the plain function
        (lambda prim, *avals, **params: prim is B_p, {"A": 0, "B": 0}),  # B's VJP reads B only
        (lambda prim, *avals, **params: prim is A_p, {"A": 0, "B": 1}),  # B needs A's result
        (cp.save_only_these_names("a"), {"A": 0, "B": 1}),  # the name holds A's result
        (cp.save_anything_except_these_names("a"), {"A": 0, "B": 0}),
    ],
)  # fmt: skip
def test_each_policy_recomputes_what_it_says(policy, recomputed):
    x = np.linspace(0.1, 1.0, 5)
    A_runs.clear(), B_runs.clear()
    _, pullback = vjp(checkpoint(_chain, policy=policy), x)
    assert (len(A_runs), len(B_runs)) == (1, 1)  # the forward pass
    A_runs.clear(), B_runs.clear()
    got = pullback(1.0)[0]
    assert {"A": len(A_runs), "B": len(B_runs)} == recomputed
    np.testing.assert_allclose(got, vjp(_chain, x)[1](1.0)[0], rtol=1e-13)


def test_dots_saveable_recomputes_no_matrix_product_and_keeps_their_results(monkeypatch):
    """In a two-layer network: the backward pass multiplies only for the cotangents (3
    products), never again for the forward values; the memory kept between the passes
    is the products' results (``tracemalloc``), more than nothing_saveable's and less than
    keeping everything."""
    import tracemalloc

    from autodiff.rules.products import matmul_p

    runs = []
    impl = matmul_p.impl
    monkeypatch.setattr(matmul_p, "impl", lambda a, b: runs.append(1) or impl(a, b))
    big = np.random.default_rng(0)
    x, w1, w2 = big.standard_normal((400, 300)), big.standard_normal((300, 300)), \
        big.standard_normal((300, 300))  # fmt: skip

    def net(x, w1, w2):
        return anp.sum(anp.tanh(anp.tanh(x @ w1) @ w2))

    kept = {}
    for name in ("nothing_saveable", "dots_saveable", "everything_saveable"):
        f = checkpoint(net, policy=getattr(cp, name))
        gc.collect()
        tracemalloc.start()
        _, pullback = vjp(lambda w1, w2, f=f: f(x, w1, w2), w1, w2)
        kept[name] = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        runs.clear()
        pullback(1.0)
        if name == "dots_saveable":
            assert len(runs) == 3  # the cotangents' products only
        del pullback
    layer = 400 * 300 * 8  # one layer's values
    assert kept["nothing_saveable"] < layer / 2
    assert 1.5 * layer < kept["dots_saveable"] < 2.5 * layer  # the two products
    assert 1.5 * layer < kept["everything_saveable"]  # what the plain tape keeps: the tanhs


def test_policy_errors_and_static_arguments():
    with pytest.raises(TypeError, match="a policy is a function"):
        checkpoint(block, policy="dots")

    def branchy(x):
        return anp.sin(x) if anp.sum(x) > 0 else anp.cos(x)

    with pytest.raises(TypeError, match="cannot branch on values in Python"):
        grad(lambda x: anp.sum(checkpoint(branchy, policy=cp.dots_saveable)(x)))(X)

    def scaled(x, power):
        return anp.sum(x**power)

    f = checkpoint(scaled, policy=cp.dots_saveable, static_argnums=1)
    np.testing.assert_allclose(grad(f)(X, 3), 3 * X**2)
