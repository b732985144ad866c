"""Graph passes on small graphs with known results, and buffer reuse in the replay.

Each pass is checked for what it removes (and what it must keep), and every
optimised graph for computing what the graph it came from computes.  Buffer reuse
must never write into an input, an output, a constant, or a buffer that a live view
may share."""

import tracemalloc

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jit, make_graph
from autodiff.compiler.passes import cse, dce, fold, inline, optimize, simplify
from autodiff.compiler.replay import compile_graph
from autodiff.core.graph import Eqn, Graph, Literal, ShapedArray, Var
from autodiff.interpreters.staging import eval_graph
from autodiff.rules import elementwise as elt
from autodiff.rules import shape as shp

X = np.linspace(0.1, 0.9, 6).reshape(2, 3)


def graph_of(f, *args):
    return make_graph(f)(*args)


def counts(graph):
    return graph.primitives()


def same_results(before, after, *args):
    for a, b in zip(eval_graph(before, *args), eval_graph(after, *args)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))  # exact: signed zeros too


# --- dce ------------------------------------------------------------------------------------------


def test_dce_drops_what_no_output_reads():
    def f(x):
        unused = anp.exp(x)  # noqa: F841
        return anp.sin(x)

    g = graph_of(f, X)
    assert counts(dce(g)) == {"sin": 1}
    assert dce(g).log[-1][:2] == ("dce", 1)


def test_dce_keeps_draws():
    def f(x, rng):
        unused = anp.random.normal(rng, (2,))  # noqa: F841  (advances the generator)
        return x * 2.0

    g = dce(graph_of(f, X, np.random.default_rng(0)))
    assert counts(g) == {"random_normal": 1, "multiply": 1}


# --- cse ------------------------------------------------------------------------------------------


def test_cse_merges_repeated_calls_only():
    def f(x):
        a = anp.sum(anp.sin(x), axis=0) + anp.sum(anp.sin(x), axis=0)
        b = anp.sum(anp.sin(x), axis=1)  # another axis: not the same
        return a, b, x * 0.0, x * -0.0  # 0.0 and -0.0 are different literals

    g = graph_of(f, X)
    out = cse(g)
    assert counts(out) == {"sin": 1, "sum": 2, "add": 1, "multiply": 2}
    assert out.log[-1][2] == {"sin": 2, "sum": 1}
    same_results(g, out, X)


def test_cse_keeps_repeated_draws():
    f = lambda x, rng: x + anp.random.uniform(rng, (3,)) + anp.random.uniform(rng, (3,))
    g = graph_of(f, X, np.random.default_rng(0))
    assert counts(cse(g))["random_uniform"] == 2
    # even two draws with the very same parameters and source
    first = next(eqn for eqn in g.eqns if eqn.prim.effectful)
    again = Eqn(first.prim, first.invars, [Var(first.outvars[0].aval)], first.params)
    twice = g.replace(eqns=[first, again], outvars=[first.outvars[0], again.outvars[0]])
    assert len(cse(twice).eqns) == 2


# --- fold -----------------------------------------------------------------------------------------


def _constant_graph(const, prim, out_aval, params=None):
    c, x, y, z = Var(ShapedArray(const.shape, const.dtype)), Var(out_aval), Var(out_aval), None
    eqns = [Eqn(prim, [c], [y], params or {}), Eqn(elt.add_p, [x, y], [z := Var(out_aval)], {})]
    return Graph([x], [z], eqns, [c], [const])


def test_fold_computes_equations_of_constants_once():
    const = np.array([0.5, 1.0, 2.0])
    g = _constant_graph(const, elt.sin_p, ShapedArray((3,), np.float64))
    out = fold(g)
    assert counts(out) == {"add": 1}
    np.testing.assert_array_equal(eval_graph(out, np.ones(3))[0], 1 + np.sin(const))


def test_fold_leaves_large_results_and_warnings_to_run_time():
    const = np.array([1.0])
    big = ShapedArray((100_000,), np.float64)
    g = _constant_graph(const, shp.broadcast_to_p, big, {"shape": (100_000,)})
    assert counts(fold(g)) == {"broadcast_to": 1, "add": 1}  # a constant that size costs memory
    negative = np.array([-1.0, 4.0])
    g = _constant_graph(negative, elt.log_p, ShapedArray((2,), np.float64))
    assert counts(fold(g)) == {"log": 1, "add": 1}  # log(-1) warns: at run time, as it would


# --- simplify -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "what"),
    [
        (lambda x: x + -0.0, "x + 0"),  # -0.0 + -0.0 is -0.0: exact
        (lambda x: -0.0 + x, "x + 0"),
        (lambda x: x - 0.0, "x - 0"),
        (lambda x: x * 1.0, "x * 1"),
        (lambda x: 1 * x, "x * 1"),
        (lambda x: x / 1.0, "x / 1"),
        (lambda x: -anp.negative(x), "-(-x)"),
        (lambda x: x * anp.ones_like(x), "x * 1"),
        (lambda x: x - anp.broadcast_to(anp.zeros_like(x[0]), x.shape), "x - 0"),
        (lambda x: shp.reshape_p.bind(x, shape=x.shape), "reshape to the same shape"),
        (lambda x: shp.broadcast_to_p.bind(x, shape=x.shape), "broadcast_to to the same shape"),
        (lambda x: elt.astype_p.bind(x, dtype=x.dtype), "astype to the same dtype"),
        (lambda x: shp.squeeze_p.bind(anp.expand_dims(x, 0), axis=(0,)), "reshape of a reshape"),
        (lambda x: anp.reshape(anp.reshape(x, (3, 2)), (6,)), "reshape of a reshape"),
        (lambda x: anp.transpose(anp.transpose(x)), "transpose of a transpose"),
    ],
)
def test_simplify_removes_identities(f, what):
    g = graph_of(f, X)
    out = optimize(g)
    assert what in out.log[0][2], out.log
    assert len(out.eqns) <= 1  # at most the one reshape the chain collapsed into
    same_results(g, out, X)
    signed = X * np.array([[1.0, -1.0, 1.0], [-1.0, 1.0, -1.0]]) * 0.0  # +0.0 and -0.0
    same_results(g, out, signed)


def test_adding_zero_to_integers_is_simplified():
    g = graph_of(lambda n: n + 0, np.arange(6))
    out = optimize(g)
    assert "x + 0" in out.log[0][2] and not out.eqns


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x[0] + anp.zeros((2, 3)),  # the zeros broadcast x: the shape changes
        lambda x: x.astype(np.float32) * np.float64(1.0),  # promotes: the dtype changes
        lambda x: x * 0.0,  # not x: NaN * 0 is NaN, inf * 0 is NaN
        lambda x: x * 2.0,
        lambda x: x + 0.0,  # not x: -0.0 + 0.0 is +0.0
        lambda x: 0.0 + x,
        lambda x: x + anp.zeros_like(x),
        lambda x: x - (-0.0),  # x + 0.0
        lambda x: (x + 0j) * 1.0,  # complex: (1 + inf j) * 1.0 is (nan + inf j)
        lambda x: (x + 0j) / 1.0,
    ],
)
def test_simplify_keeps_what_changes_shape_or_dtype(f):
    g = graph_of(f, X)
    out = simplify(g)
    assert len(out.eqns) == len(g.eqns)


def test_transposes_compose():
    f = lambda x: anp.transpose(anp.transpose(x[None], (1, 0, 2)), (2, 0, 1))
    g = graph_of(f, X)
    out = optimize(g)
    assert counts(out) == {"getitem": 1, "transpose": 1}
    same_results(g, out, X)


def test_a_transpose_of_unit_axes_is_a_reshape():
    f = lambda x: anp.transpose(anp.expand_dims(x, 1), (0, 2, 1))  # (2, 1, 3) -> (2, 3, 1)
    g = graph_of(f, X)
    out = optimize(g)
    assert counts(out) == {"reshape": 1}
    assert out.log[0][2] == {"transpose of unit axes": 1, "reshape of a reshape": 1}
    same_results(g, out, X)


def test_grad_graphs_lose_the_ones_of_the_seed():
    g = graph_of(grad(lambda x: anp.sum(anp.sin(x))), X)
    assert "ones_like" in counts(g)
    out = optimize(g)
    assert counts(out) == {"cos": 1}  # sin's VJP rule: ct * cos(x), with ct all ones


# --- inline ---------------------------------------------------------------------------------------


def test_inline_replaces_checkpoints_by_their_bodies():
    from autodiff import checkpoint

    f = lambda x: checkpoint(lambda y: anp.sin(anp.sin(y)))(x)
    g = graph_of(f, X)
    assert counts(g) == {"checkpoint(<lambda>)": 1}
    out = inline(g)
    assert counts(out) == {"sin": 2}
    same_results(g, out, X)


# --- optimize: the passes together keep results ---------------------------------------------------


def test_optimized_graphs_compute_the_same():
    def f(x):
        y = anp.sin(x) * 1.0 + anp.sin(x)
        return anp.reshape(anp.reshape(y, (3, 2)), (2, 3)) - 0.0, anp.cos(x).T.T

    g = graph_of(f, X)
    out = optimize(g)
    assert counts(out) == {"sin": 1, "add": 1, "cos": 1}
    same_results(g, out, X)
    assert [name for name, _, _ in out.log] == ["simplify", "fold", "cse", "dce"]


# --- buffer reuse ---------------------------------------------------------------------------------


def test_elementwise_chains_run_in_place():
    f = jit(lambda x: anp.tanh(anp.sin(x) * 2.0 + 1.0))
    source = f.source(X)
    assert source.count("out=") == 3  # sin allocates; *, +, tanh write into its buffer
    x = X.copy()
    np.testing.assert_array_equal(f(x), np.tanh(np.sin(X) * 2 + 1))
    np.testing.assert_array_equal(x, X)  # the input is never written


def test_outputs_and_inputs_are_never_overwritten():
    def f(x):
        a = anp.sin(x)
        b = a * 2.0 + 1.0  # a is an output: b must not be written into it
        return a, b, anp.exp(x)  # x is an input: exp must not be written into it

    x = X.copy()
    a, b, c = jit(f)(x)
    np.testing.assert_array_equal(a, np.sin(X))
    np.testing.assert_array_equal(b, np.sin(X) * 2 + 1)
    np.testing.assert_array_equal(c, np.exp(X))
    np.testing.assert_array_equal(x, X)


@pytest.mark.parametrize(
    "view",
    [
        lambda y: anp.reshape(y, (3, 2)),
        lambda y: y.T,
        lambda y: y[:, 1:],
        lambda y: anp.broadcast_to(y[None], (2, 2, 3)),
        lambda y: anp.expand_dims(y, 0),
        lambda y: anp.squeeze(y[None]),
        lambda y: elt.stop_gradient(y),  # returns its input itself
    ],
)
def test_a_buffer_a_live_view_may_share_is_not_reused(view):
    def f(x):
        y = anp.sin(x)
        v = view(y)  # may be a view of y's buffer
        w = anp.exp(y)  # y's last direct use: w must not be written into y
        return anp.sum(v) + anp.sum(w * 2.0)

    x = X.copy()
    np.testing.assert_allclose(jit(f)(x), f(x), rtol=1e-14)


# Laid out otherwise than C: NumPy's ufunc gives its result its operands' memory order
# (order "K"), and a sum over it adds in that order; writing into another buffer would
# change the layout and so the sum's last bits.  (Arrays under 256 KiB: NumPy's own
# temporary elision, which writes an expression's large temporaries in place, stays out.)
TRANSPOSED = [
    lambda x, y: anp.sum(anp.sin(x.T) * 2.0 + x.T * y, 0),
    lambda x, y: anp.sum(y * anp.exp(x.T) - x.T, 1),
    lambda x, y: anp.sum(anp.sin(x.T) * anp.cos(y) + anp.exp(y), 1),
]


@pytest.mark.parametrize("f", TRANSPOSED)
@pytest.mark.parametrize("order", ["C", "F"])
def test_buffers_are_reused_only_where_numpy_would_lay_out_in_c_order(f, order):
    rng = np.random.default_rng(7)
    x = np.asarray(rng.normal(size=(130, 170)), order=order)
    y = rng.normal(size=(170, 130))
    g = jit(f, compile=False)
    for _ in range(3):  # the first call interprets; the next ones run the replay
        got = g(x, y)
    by_numpy = f(x, y)  # anp's functions on plain arrays are NumPy's calls
    assert got.tobytes() == by_numpy.tobytes()


def test_inputs_not_c_ordered_run_the_replay_without_reuse():
    f = jit(lambda x: anp.sum(anp.tanh(anp.sin(x) * 2.0 + 1.0), 0), compile=False)
    source = f.source(X)
    assert "out=" in source and "c_contiguous" in source and "_plain" in source
    x = np.asfortranarray(np.random.default_rng(3).normal(size=(140, 150)))
    for _ in range(3):
        got = f(x)
    expected = np.sum(np.tanh(np.sin(x) * 2.0 + 1.0), 0)
    assert got.tobytes() == expected.tobytes()


def test_a_dead_buffer_is_reused_only_until_the_next_allocation():
    def f(x):
        a = anp.sin(x)
        b = anp.cos(a)  # a dies: b may take its buffer
        return b * 3.0

    assert jit(f).source(X).count("out=") == 2


def test_dask_graphs_write_into_nothing():
    da = pytest.importorskip("dask.array")
    f = jit(lambda x: anp.sin(x) * 2.0 + 1.0)
    x = da.from_array(X, chunks=(1, 3))
    assert "out=" not in f.source(x)
    np.testing.assert_allclose(f(x).compute(), np.sin(X) * 2 + 1)


def test_the_peak_memory_of_a_replay_is_at_most_numpys():
    x = np.linspace(0, 1, 200_000)

    def by_hand(x):
        a = np.sin(x)
        b = np.tanh(a * 1.5 + 0.5)
        return np.sum(b * b)

    f = jit(lambda x: anp.sum(anp.tanh(anp.sin(x) * 1.5 + 0.5) ** 2))
    f(x)

    def peak(fn):
        tracemalloc.start()
        fn(x)
        out = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return out

    assert peak(f) <= peak(by_hand)


def test_compile_graph_by_hand():
    x, y = Var(ShapedArray((3,), np.float64)), Var(ShapedArray((3,), np.float64))
    z = Var(ShapedArray((3,), np.float64))
    g = Graph([x], [z], [Eqn(elt.sin_p, [x], [y], {}), Eqn(elt.add_p, [y, Literal(1.0)], [z], {})])
    replay = compile_graph(g)
    np.testing.assert_array_equal(replay(np.zeros(3))[0], np.ones(3))
    assert "add_" in replay.source and "1.0" in replay.source
