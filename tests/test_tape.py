"""Structural properties the speed and memory of the transforms depend on.

Nothing here is timed: each test pins a count or a lifetime, so a change that
makes the library do or keep more work than it should fails here first.
"""

import gc
import weakref

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import explain, grad, vjp, vmap
from autodiff.core import primitive as _core
from autodiff.core.dispatch import DispatchPoint
from autodiff.core.primitive import Primitive
from autodiff.errors import RuleError
from autodiff.interpreters.tape import Dropped, reachable


class Tracked(np.ndarray):
    """An ndarray that can be weakly referenced (plain ndarrays cannot)."""


def tracked(a):
    return np.asarray(a, dtype=float).view(Tracked)


RNG = np.random.default_rng(0)
X, W, B = tracked(RNG.standard_normal((4, 3))), tracked(RNG.standard_normal((3, 5))), tracked(0.1)


# --- residuals ----------------------------------------------------------------------


def test_intermediates_no_vjp_reads_are_freed_during_the_forward_pass():
    refs = {}

    def f(w):
        z = X @ w  # matmul's VJP reads the operands, not its output
        a = z + B  # add's VJP reads nothing
        h = anp.tanh(a)  # tanh's VJP reads its output only
        refs.update(z=weakref.ref(z.value), a=weakref.ref(a.value), h=weakref.ref(h.value))
        del z, a
        gc.collect()
        refs["alive"] = {k: r() is not None for k, r in refs.items()}
        return anp.sum(h)

    g = grad(f)(W)
    assert refs["alive"] == {"z": False, "a": False, "h": True}
    t = np.tanh(X @ W + B)
    np.testing.assert_allclose(g, X.T @ (1 - t * t))


def _spy(check):
    """The identity, whose VJP runs ``check()`` when the backward pass reaches it."""
    return Primitive("spy", lambda x: x + 0.0, vjp=[lambda ct, ans, x: (check(), ct)[1]])


def test_grad_frees_each_nodes_residuals_once_it_has_run():
    refs, seen = {}, []
    spy = _spy(lambda: seen.append(refs["h"]() is not None))

    def f(x):
        h = anp.tanh(spy.bind(x))
        refs["h"] = weakref.ref(h.value)  # kept by tanh's node only
        return anp.sum(h)

    g = grad(f)(tracked([0.1, 0.2, 0.3]))
    assert seen == [False]  # tanh's node ran, then let its output go
    np.testing.assert_allclose(g, 1 - np.tanh([0.1, 0.2, 0.3]) ** 2)


def test_vjp_keeps_residuals_for_every_call_of_vjp_fn():
    refs, seen = {}, []
    spy = _spy(lambda: seen.append(refs["h"]() is not None))

    def f(x):
        h = anp.tanh(spy.bind(x))
        refs["h"] = weakref.ref(h.value)
        return h

    x = tracked([0.1, 0.2, 0.3])
    _, vjp_fn = vjp(f, x)
    first, second = vjp_fn(np.ones(3)), vjp_fn(np.ones(3))
    assert seen == [True, True]
    np.testing.assert_array_equal(first[0], second[0])


def test_a_wrong_vjp_reads_declaration_raises_naming_the_primitive():
    p = Primitive("twice", lambda x: 2 * x, vjp=[lambda ct, ans, x: ct * 2 + 0 * x], vjp_reads=[()])
    with pytest.raises(RuleError, match=r"primitive 'twice' read its argument 0.*vjp_reads"):
        grad(lambda x: anp.sum(p.bind(x)))(np.ones(3))


def test_dropped_residuals_keep_shape_and_dtype_and_nothing_else():
    d = Dropped(anp.tanh.primitive, 0, np.zeros((2, 3), np.float32))
    assert (d.shape, d.ndim, d.size, d.dtype) == ((2, 3), 2, 6, np.float32)
    for use in (lambda: d + 1, lambda: np.asarray(d), lambda: d[0], lambda: float(d)):
        with pytest.raises(RuleError, match="'tanh'"):
            use()


def test_a_bad_vjp_reads_declaration_is_a_type_error():
    with pytest.raises(TypeError, match="vjp_reads takes, per argument"):
        Primitive("p", np.sin, vjp_reads=[("x",)])


def test_work_no_output_depends_on_is_not_on_the_tape():
    def f(x):
        anp.exp(x) * 3.0  # dead code
        return anp.sum(anp.sin(x))

    _, vjp_fn = vjp(f, np.ones(3))
    nodes = reachable([node for node, *_ in vjp_fn._out_meta])
    assert [n.prim.name if n.prim else "input" for n in nodes] == ["input", "sin", "sum"]


# --- dispatch budget ----------------------------------------------------------------


class _CountingTable:
    """Stands in for one of bind's dispatch tables, counting its lookups."""

    def __init__(self, table, counts, name):
        self.table, self.counts, self.name = table, counts, name

    def get(self, key):
        self.counts[self.name] += 1
        return self.table.get(key)


@pytest.fixture
def dispatch_counts(monkeypatch):
    """Lookups of process and lift methods by bind, and resolutions by plum (misses)."""
    counts = {"process": 0, "lift": 0, "plum": 0}
    for name in ("process", "lift"):
        table = getattr(_core, f"_{name}_methods")
        monkeypatch.setattr(_core, f"_{name}_methods", _CountingTable(table, counts, name))
    resolve = DispatchPoint.resolve

    def counting_resolve(self, *types):
        counts["plum"] += 1
        return resolve(self, *types)

    monkeypatch.setattr(DispatchPoint, "resolve", counting_resolve)
    return counts


def loss(x):
    return anp.sum(anp.tanh(x * 2.0 + 1.0))  # four primitives, two of them with a constant


def test_grad_dispatches_once_per_primitive_and_never_lifts(dispatch_counts):
    grad(loss)(np.ones(3))  # warm the dispatch tables
    for k in dispatch_counts:
        dispatch_counts[k] = 0
    grad(loss)(np.ones(3))
    assert dispatch_counts == {"process": 4, "lift": 0, "plum": 0}


def test_vmap_of_grad_dispatches_once_per_primitive_per_level(dispatch_counts):
    f = vmap(grad(loss))
    xs = np.ones((5, 3))
    calls = explain(f)(xs).calls  # each call's stages: the levels that handled it, then NumPy
    levels_handled = sum(len(call.stages) - 1 for call in calls)
    f(xs)
    for k in dispatch_counts:
        dispatch_counts[k] = 0
    f(xs)
    assert dispatch_counts["process"] == levels_handled == 4 * 2 + 6
    assert dispatch_counts["plum"] == 0  # every dispatch found its table filled
    # vmap lifts its constants (2.0 and 1.0 forward; 1 and 2.0 in the VJPs); grad none
    assert dispatch_counts["lift"] == 4


# --- batching -----------------------------------------------------------------------------


def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    return anp.mean((anp.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)


def test_per_sample_gradients_make_the_same_numpy_calls_for_any_batch_size():
    params = tuple(RNG.standard_normal(s) for s in [(6, 4), (4,), (4, 2), (2,)])
    per_example = vmap(grad(mlp_loss), in_dims=(None, 0, 0))

    def numpy_calls(n):
        xs, ys = RNG.standard_normal((n, 6)), RNG.standard_normal((n, 2))
        return [call.prim for call in explain(per_example)(params, xs, ys).calls]

    assert numpy_calls(3) == numpy_calls(17)  # no loop over examples anywhere
