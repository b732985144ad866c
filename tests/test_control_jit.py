"""Control flow under ``jit``: each function staged once, the loop run by the replay.

The programs are ``tests/test_control.py``'s, each with a Python-control-flow twin
(``ref``) that is the oracle: ``jit(fn)`` must agree with it on independently drawn
examples that take different branches or run different numbers of iterations (one
staging for all of them), and so must every transform around the ``jit`` (grad,
jvp, vmap) and, where the trip count is static, every transform inside it.
"""

from __future__ import annotations

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import (
    cond,
    custom_vjp,
    fori_loop,
    grad,
    hessian,
    jacfwd,
    jit,
    jvp,
    make_graph,
    scan,
    switch,
    vjp,
    vmap,
    while_loop,
)
from autodiff.errors import ConcretizationError, TransformTypeError, TransformValueError
from tests.test_control import IDS, PROGRAMS, _close, _examples, _on, _total

# Programs whose loops run a number of times that depends on the values: reverse mode
# inside the jit cannot record them.
WHILE = {"while newton", "while pytree", "fori traced"}


def _grad_of(fn, diff):
    return lambda *args: grad(lambda *d: _total(_on(fn, args, diff)(*d)), argnums=tuple(
        range(len(diff))))(*(args[i] for i in diff))  # fmt: skip


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_jit_is_the_python_control_flow_staged_once(prog):
    f = jit(prog.fn)
    for example in _examples(prog, n=5):
        _close(f(*example), prog.ref(*example), rtol=1e-12)
    assert f.cache_info().misses == 1  # branches and trip counts differ, the graph does not


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_grad_and_jvp_of_jit(prog):
    for example in _examples(prog, n=3, salt=1):
        _close(_grad_of(jit(prog.fn), prog.diff)(*example),
               _grad_of(prog.ref, prog.diff)(*example))  # fmt: skip
        primals = tuple(example[i] for i in prog.diff)
        tangents = tuple(np.full(np.shape(p), 0.7) for p in primals)
        got = jvp(_on(jit(prog.fn), example, prog.diff), primals, tangents)
        _close(got, jvp(_on(prog.ref, example, prog.diff), primals, tangents))


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_vmap_of_jit_against_a_loop(prog):
    examples = _examples(prog, n=4, salt=2)
    batched = tuple(np.stack(column) for column in zip(*examples, strict=True))
    got = vmap(jit(prog.fn))(*batched)
    for k, example in enumerate(examples):
        _close(optree.tree_map(lambda x, k=k: x[k], got), prog.ref(*example))


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_transforms_inside_jit(prog):
    """jit(vmap(f)), jit(jvp(f)), jit(grad(f)): a cond computes both branches and
    selects, a scan is unrolled, a while_loop is staged as one loop (batched: running
    while any example runs; with its tangents); reverse mode of a loop whose trip count
    depends on the values raises, naming the composition that works."""
    examples = _examples(prog, n=3, salt=3)
    batched = tuple(np.stack(column) for column in zip(*examples, strict=True))
    f = jit(vmap(prog.fn))
    got = f(*batched)
    for k, example in enumerate(examples):
        _close(optree.tree_map(lambda x, k=k: x[k], got), prog.ref(*example))
    for example in examples:
        primals = tuple(example[i] for i in prog.diff)
        tangents = tuple(np.full(np.shape(p), 0.7) for p in primals)
        push = lambda *p, e=example, t=tangents: jvp(_on(prog.fn, e, prog.diff), p, t)
        _close(jit(push)(*primals), jvp(_on(prog.ref, example, prog.diff), primals, tangents))
    if prog.name in WHILE:
        loops = [e.prim.name for e in make_graph(vmap(prog.fn))(*batched).eqns]
        assert loops.count("while_loop") == 1  # one staged loop, not unrolled
        with pytest.raises(ConcretizationError, match=r"grad\(jit\(f\)\)"):
            jit(_grad_of(prog.fn, prog.diff))(*examples[0])
        return
    for example in examples:
        _close(jit(_grad_of(prog.fn, prog.diff))(*example),
               _grad_of(prog.ref, prog.diff)(*example))  # fmt: skip


def test_a_long_scan_is_one_staged_body():
    def loss(w, xs):
        h, _ = scan(lambda h, x: (anp.tanh(w * h + x), None), 0.0, xs)
        return h

    small, large = make_graph(loss)(0.5, np.ones(10)), make_graph(loss)(0.5, np.ones(1000))
    assert len(small.eqns) == len(large.eqns) == 1
    (eqn,) = large.eqns
    assert eqn.prim.name == "scan" and eqn.params["length"] == 1000
    assert [e.prim.name for e in eqn.params["body"].graph.eqns] == ["multiply", "add", "tanh"]
    xs = np.random.default_rng(0).normal(size=1000)
    np.testing.assert_allclose(jit(loss)(0.5, xs), loss(0.5, xs), rtol=1e-13)
    text = str(large)
    assert "body:" in text and "tanh" in text


def test_every_branch_is_staged_and_printed():
    f = lambda i, x: switch(i, [lambda x: x, lambda x: anp.sin(x), lambda x: x * x], x)
    graph = make_graph(f)(1, np.ones(2))
    (eqn,) = [e for e in graph.eqns if e.prim.name == "cond"]
    assert [len(b.graph.eqns) for b in eqn.params["branches"]] == [0, 1, 1]
    assert "branches[2]:" in str(graph)
    for i in (-3, 0, 1, 2, 9):
        np.testing.assert_allclose(jit(f)(i, np.full(2, 0.3)), f(i, np.full(2, 0.3)))


def test_a_branch_not_taken_is_type_checked_under_jit():
    f = lambda x: cond(x > 0, lambda x: x, lambda x: x.astype(np.float32), x)
    assert float(f(1.0)) == 1.0  # eagerly only the chosen branch runs
    with pytest.raises(TransformTypeError, match="the output of true_fun has shape"):
        jit(f)(1.0)
    g = lambda x: cond(x > 0, lambda x: x, lambda x: (x, x), x)
    with pytest.raises(TransformTypeError, match="structured as"):
        jit(g)(np.ones(()))


def test_a_loop_body_that_changes_its_carry_is_caught_when_staged():
    with pytest.raises(TransformTypeError, match=r"init_val\['h'\]"):
        jit(lambda x: while_loop(lambda c: c["h"].sum() < 1, lambda c: {"h": c["h"][:1]},
                                 {"h": x}))(np.zeros(3))  # fmt: skip
    with pytest.raises(
        TransformTypeError,
        match=r"the value cond_fun returns must be a scalar \(shape \(\)\), got shape \(3,\)",
    ):
        jit(lambda x: while_loop(lambda c: c, lambda c: c, x))(np.zeros(3))


def test_closed_over_values_staged_and_of_outer_transforms():
    # branches closing over staged values only: the cond still reaches the staging
    h = lambda x, y: cond(x > 0, lambda: x * y, lambda: y)
    assert (jit(h)(2.0, 3.0), jit(h)(-2.0, 3.0)) == (6.0, 3.0)
    hj = jit(h)
    assert (hj(2.0, 3.0), hj(-2.0, 3.0)) == (6.0, 3.0) and hj.cache_info().misses == 1
    np.testing.assert_allclose(grad(hj, argnums=(0, 1))(2.0, 3.0), (3.0, 2.0))

    # a value of a grad outside the jit, closed over by a loop body inside it
    def outer(w):
        body = lambda i, x: x * w + i
        return jit(lambda x: fori_loop(0, 3, body, x))(2.0)

    want = grad(lambda w: fori_loop(0, 3, lambda i, x: x * w + i, 2.0))(1.5)
    np.testing.assert_allclose(grad(outer)(1.5), want, rtol=1e-13)
    np.testing.assert_allclose(want, 6 * 1.5**2 + 1.0, rtol=1e-13)  # x3 = 2 w**3 + w + 2


def test_traced_bounds_and_a_hessian_of_a_jitted_loop():
    power = lambda x, n: fori_loop(0, n, lambda i, p: p * x, 1.0)
    for n in (0, 1, 5):
        assert float(jit(power)(2.0, n)) == 2.0**n
    np.testing.assert_allclose(hessian(jit(lambda x: power(x, 4)))(1.5), 12 * 1.5**2)
    np.testing.assert_allclose(jit(hessian(lambda x: fori_loop(0, 4, lambda i, p: p * x, 1.0)))(
        1.5), 12 * 1.5**2)  # fmt: skip


def test_jit_inside_a_branch_and_a_loop_inside_jit_inside_jit():
    inner = jit(lambda x: anp.sin(x) * 2.0)
    f = jit(lambda x: cond(x.sum() > 0, inner, lambda x: x, x))
    np.testing.assert_allclose(f(np.ones(2)), 2 * np.sin(np.ones(2)))
    np.testing.assert_allclose(f(-np.ones(2)), -np.ones(2))
    g = jit(lambda x: jit(lambda y: scan(lambda c, t: (c + t, c), 0.0, y))(x))
    carry, ys = g(np.arange(4.0))
    assert float(carry) == 6.0 and ys.tolist() == [0.0, 0.0, 1.0, 3.0]


def test_random_draws_in_a_staged_body_draw_at_every_replay():
    def noisy(rng, x):
        return scan(lambda c, _: (c + anp.random.normal(rng, shape=()), None), x, None,
                    length=3)[0]  # fmt: skip

    f = jit(noisy)
    a, b = f(np.random.default_rng(1), 0.0), f(np.random.default_rng(1), 0.0)
    c = f(np.random.default_rng(2), 0.0)
    assert float(a) == float(b) != float(c)
    np.testing.assert_allclose(a, noisy(np.random.default_rng(1), 0.0), rtol=1e-14)


def test_each_function_gets_its_own_closed_over_values():
    def f(a, b, c, x):
        return cond(x > 0, lambda x: x * a - b, lambda x: x * c - b / 2, x)

    args = (2.0, 3.0, 5.0)
    for x in (1.5, -1.5):
        np.testing.assert_allclose(jit(f)(*args, x), f(*args, x), rtol=1e-15)
        np.testing.assert_allclose(grad(jit(f), argnums=(0, 1, 2))(*args, x),
                                   grad(f, argnums=(0, 1, 2))(*args, x))  # fmt: skip


def test_a_branch_closing_over_a_value_batched_inside_the_jit():
    """The cond's operands are staged, its branches close over a vmap's value (a level
    above the staging): the vmap runs it, selecting between the staged branches."""

    def f(p, xs):
        return vmap(lambda x: cond(p > 0, lambda: x * 2.0, lambda: x - 1.0))(xs)

    xs = np.array([1.0, 2.0, 3.0])
    for p in (1.0, -1.0):
        np.testing.assert_allclose(jit(f)(p, xs), f(p, xs), rtol=1e-15)


def test_jvp_inside_jit_of_a_loop_whose_carry_gains_a_tangent_in_the_body():
    """The carry starts constant; the body makes it depend on w, closed over: the
    staged loop (its trip count n staged too) must carry a tangent from the start."""

    def f(w, n):
        out = while_loop(lambda c: c[1] < n, lambda c: (c[0] * w + 1.0, c[1] + 1), (1.0, 0))
        return out[0]  # n = 3: w**3 + w**2 + w + 1

    w, n = 1.5, np.array(3)
    for push in (jit(lambda w, n: jvp(lambda w: f(w, n), (w,), (1.0,))),
                 lambda w, n: jvp(lambda w: f(w, n), (w,), (1.0,))):  # fmt: skip
        value, tangent = push(w, n)
        np.testing.assert_allclose([value, tangent], [w**3 + w**2 + w + 1, 3 * w**2 + 2 * w + 1])
    ws = np.array([0.5, 1.5])
    np.testing.assert_allclose(jit(vmap(jacfwd(f), in_dims=(0, None)))(ws, n),
                               3 * ws**2 + 2 * ws + 1)  # fmt: skip


@pytest.mark.parametrize("checkpoint", [False, True])
def test_grad_inside_jit_of_a_scan_is_two_staged_scans(checkpoint):
    """jit(grad(f)) of a scan: a forward scan keeping each step's residuals (with
    checkpoint=True the carries, recomputing in the backward scan) and a reversed scan
    of the body's VJP, whatever the length; unroll=True stages every step instead."""

    def loss(w, xs, unroll=1):
        step = lambda h, x: (anp.tanh(w[0] * h + x * w[1]), h**2)
        h, ys = scan(step, 0.1, xs, unroll=unroll, checkpoint=checkpoint)
        return h + anp.sum(ys * xs)

    w = np.array([0.5, 0.8])
    for n in (10, 300):
        graph = make_graph(grad(loss, argnums=(0, 1)))(w, np.ones(n))
        assert [e.prim.name for e in graph.eqns].count("scan") == 2
        assert len(graph.eqns) < 20
    xs = np.random.default_rng(5).normal(size=40)
    want = grad(loss, argnums=(0, 1))(w, xs)
    unrolled_loss = lambda w, xs: loss(w, xs, unroll=True)
    for f in (loss, unrolled_loss):
        _close(jit(grad(f, argnums=(0, 1)))(w, xs), want, rtol=1e-12)
    unrolled = make_graph(grad(lambda w, xs: loss(w, xs, unroll=True)))(w, np.ones(10))
    assert "scan" not in [e.prim.name for e in unrolled.eqns]
    # higher orders inside the jit: grad of grad, and a Hessian
    g2 = grad(lambda w, xs: anp.sum(grad(loss)(w, xs) ** 2))
    _close(jit(g2)(w, xs), g2(w, xs), rtol=1e-10)
    _close(jit(hessian(loss))(w, xs), hessian(loss)(w, xs), rtol=1e-10)


def test_scan_unroll_takes_one_or_true():
    with pytest.raises(TransformValueError, match="unroll must be 1"):
        scan(lambda c, x: (c, x), 0.0, np.ones(3), unroll=2)
    carry, ys = scan(lambda c, x: (c + x, c), 0.0, np.arange(3.0), unroll=True)
    assert float(carry) == 3.0 and ys.tolist() == [0.0, 0.0, 1.0]


def test_grad_inside_jit_of_a_cond_runs_only_the_taken_branch():
    """jit(grad(f)) of a cond on a staged predicate: a cond of the branches' forward
    graphs and a cond of their backward graphs, so a branch not taken (sqrt of a
    negative number) cannot put a NaN into the gradient, as selecting would."""
    f = lambda x: cond(x > 0, lambda x: anp.sqrt(x), lambda x: -x, x)
    with np.errstate(invalid="raise"):  # the untaken sqrt never runs
        assert float(jit(grad(f))(-1.0)) == -1.0
        assert float(jit(grad(f))(4.0)) == 0.25
    names = [e.prim.name for e in make_graph(grad(f))(4.0).eqns]
    assert names.count("cond") == 2 and "where" not in names

    def g(i, x, w, v):  # branches closing over different values, one over none
        fs = [lambda x: x * w, lambda x: anp.sin(x) * v + w, lambda x: x**3]
        return anp.sum(switch(i, fs, x))

    x, w, v = np.array([0.5, -1.0]), 1.5, 2.0
    for i in (0, 1, 2, 5):
        _close(jit(grad(g, argnums=(1, 2, 3)))(i, x, w, v), grad(g, argnums=(1, 2, 3))(i, x, w, v))
    _close(jit(hessian(lambda x: g(1, x, w, v)))(x), hessian(lambda x: g(1, x, w, v))(x))


def test_vmap_inside_jit_of_a_scan_is_one_staged_scan():
    """jit(vmap(f)) and jit(vmap(grad(f))) of a scan: one scan over the batch (carry
    batched on axis 0, xs on axis 1), whatever the length, on every batch axis of xs,
    with the weights batched or not."""

    def rnn(w, xs):
        h, ys = scan(lambda h, x: (anp.tanh(w * h + x), h**2), 0.1, xs)
        return h + anp.sum(ys)

    rng = np.random.default_rng(7)
    for steps in (5, 400):
        graph = make_graph(vmap(rnn, in_dims=(None, 0)))(0.7, np.ones((3, steps)))
        assert [e.prim.name for e in graph.eqns].count("scan") == 1 and len(graph.eqns) < 8
    xs, ws = rng.normal(size=(3, 20)), np.array([0.3, 0.7, 1.1])
    for in_dims, args in (((None, 0), (0.7, xs)), ((None, 1), (0.7, xs.T)),
                          ((0, 0), (ws, xs)), ((0, -1), (ws, xs.T))):  # fmt: skip
        for f in (vmap(rnn, in_dims=in_dims), vmap(grad(rnn, argnums=(0, 1)), in_dims=in_dims)):
            _close(jit(f)(*args), f(*args), rtol=1e-12)
    per_example = vmap(grad(rnn), in_dims=(None, 0))
    assert [e.prim.name for e in make_graph(per_example)(0.7, xs).eqns].count("scan") == 2
    # jvp inside the jit too: one scan carrying the tangents (so jacfwd and hessian stage)
    push = lambda w, xs: jvp(lambda w: rnn(w, xs), (w,), (1.0,))
    for steps in (5, 400):
        names = [e.prim.name for e in make_graph(push)(0.7, np.ones(steps)).eqns]
        assert names.count("scan") == 1 and len(names) < 8
    _close(jit(push)(0.7, xs[0]), push(0.7, xs[0]), rtol=1e-12)
    _close(jit(hessian(rnn))(0.7, xs[0]), hessian(rnn)(0.7, xs[0]), rtol=1e-10)


def test_a_custom_vjp_solving_by_while_loop_differentiates_inside_jit():
    """JAX's fixed-point recipe: the forward pass iterates to a fixed point, the
    backward pass solves the adjoint by another; grad differentiates neither loop (the
    custom_vjp's rule does), so both are staged inside jit(grad(f)), where a loop the
    grad would have to differentiate raises.  d sum(sqrt(a)) / da = 1 / (2 sqrt(a))."""

    def newton(a, x):
        return 0.5 * (x + a / x)

    def solve(a, x0):
        def cond(c):
            return anp.max(anp.abs(c[0] - c[1])) > 1e-13

        return while_loop(cond, lambda c: (c[1], newton(a, c[1])), (x0, newton(a, x0)))[1]

    root = custom_vjp(solve)

    def bwd(res, z_bar):
        a, z = res
        _, vjp_x = vjp(lambda x: newton(a, x), z)
        u = while_loop(lambda c: anp.max(anp.abs(c[0] - c[1])) > 1e-13,
                       lambda c: (c[1], vjp_x(c[1])[0] + z_bar),
                       (z_bar, vjp_x(z_bar)[0] + z_bar))[1]  # fmt: skip
        return vjp(lambda a: newton(a, z), a)[1](u)[0], None

    def fwd(a, x0):
        z = solve(a, x0)
        return z, (a, z)

    root.defvjp(fwd, bwd)
    loss = lambda a: anp.sum(root(a, a))
    a = np.linspace(1.0, 4.0, 5)
    want = 0.5 / np.sqrt(a)
    for got in (jit(grad(loss))(a), grad(jit(loss))(a), grad(loss)(a)):
        np.testing.assert_allclose(got, want, rtol=1e-10)
    graph = make_graph(grad(loss))(a)
    assert [e.prim.name for e in graph.eqns].count("while_loop") == 2

    def through(a):  # a loop grad must differentiate: still refused inside the jit
        return anp.sum(while_loop(lambda x: anp.max(x) < 10.0, lambda x: x * 2.0, a))

    with pytest.raises(ConcretizationError, match=r"grad\(jit\(f\)\)"):
        jit(grad(through))(a)
