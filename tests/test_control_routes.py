"""Which route each transform takes through a control-flow primitive (the registration
block at the end of each of ``autodiff/control/``'s modules lists them).

Control flow staged by ``jit`` is transformed as a graph wherever the transform is:
inside the jit, and around it (``grad(jit(f))``, ``jvp(jit(f))``, ``vmap(jit(f))``: the
jitted graph is transformed, its scans, conds and while_loops by their staged regimes),
so no step or branch runs at the transform's level, and the transformed graphs compile.
Reverse mode through a ``while_loop`` whose carry it differentiates cannot be staged
(its trip count exists only when it runs): ``grad(jit(f))`` then evaluates the graph at
grad's level, recording the iterations as eager grad does.  ``explain`` shows which:
its rows name the interpreter that handled each primitive call.
"""

from __future__ import annotations

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import cond, explain, grad, hessian, jit, jvp, scan, vjp, vmap, while_loop
from autodiff.compiler.stages import lower
from autodiff.control.cond import cond_p
from autodiff.control.scan import scan_p
from autodiff.core.stack import current_interpreters
from autodiff.errors import RuleError
from autodiff.testing import check_grads
from tests.test_control import _close


def rnn(w, xs, checkpoint=False, reverse=False):
    """A scan closing over its weights, a y per step."""
    step = lambda h, x: (anp.tanh(h @ w + x), anp.sum(h**2))
    h, ys = scan(step, np.zeros(3), xs, checkpoint=checkpoint, reverse=reverse)
    return anp.sum(h) + anp.sum(ys * anp.arange(1.0, 1.0 + len(xs)))


def halving(w, xs):
    """A scan whose body holds a while_loop: its trip count is decided by the values."""

    def step(h, x):
        h = while_loop(lambda c: anp.sum(c**2) > 4.0, lambda c: c / 2.0, h)
        return anp.tanh(h @ w + x) * 3.0, anp.sum(h)

    h, ys = scan(step, np.zeros(3), xs)
    return anp.sum(h) + anp.sum(ys)


def branching(w, xs):
    """A scan whose body holds a cond on a carried value."""

    def step(h, x):
        h = cond(anp.sum(h) > 0, lambda h: h * w[0], lambda h: anp.sin(h @ w), h)
        return anp.tanh(h + x), h[0]

    h, ys = scan(step, np.full(3, 0.3), xs)
    return anp.sum(h) + anp.sum(ys)


def _draw(rng, steps=6):
    return 0.7 * rng.normal(size=(3, 3)), rng.normal(size=(steps, 3))


def _handled_by(explanation) -> set[str]:
    """The interpreters that handled some primitive call (``numpy``: none did)."""
    return {stage.transform.split(" ")[0] for c in explanation.calls for stage in c.stages}


@pytest.mark.parametrize(("checkpoint", "reverse"), [(False, False), (True, False), (False, True)])
def test_grad_of_a_jitted_scan_transforms_its_graph(checkpoint, reverse):
    """grad(jit(f)): the forward graph (a scan keeping residuals) and the backward graph
    (a reversed scan) replayed, no step recorded by grad; the gradient is eager grad's,
    on independently drawn examples, and the finite differences'."""
    f = lambda w, xs: rnn(w, xs, checkpoint, reverse)
    g = grad(jit(f), argnums=(0, 1))
    rng = np.random.default_rng(0)
    for _ in range(3):
        w, xs = _draw(rng)
        _close(g(w, xs), grad(f, argnums=(0, 1))(w, xs), rtol=1e-12)
    check_grads(jit(f), (w, xs), order=2, modes=("rev",))
    assert _handled_by(explain(g)(w, xs)) == {"numpy"}
    assert "grad" in _handled_by(explain(grad(f))(w, xs))  # eagerly: every step recorded


def test_jvp_and_vmap_of_a_jitted_scan_transform_its_graph():
    rng = np.random.default_rng(1)
    w, xs = _draw(rng)
    t = rng.normal(size=(3, 3))
    push = lambda fn: jvp(lambda w: fn(w, xs), (w,), (t,))
    _close(push(jit(rnn)), push(rnn), rtol=1e-12)
    assert _handled_by(explain(lambda w: jvp(lambda w: jit(rnn)(w, xs), (w,), (t,)))(w)) == {
        "numpy"
    }  # fmt: skip
    ws = 0.7 * rng.normal(size=(4, 3, 3))  # independently drawn examples
    for in_dims, args in (((0, None), (ws, xs)), ((None, 1), (w, np.stack([xs] * 2, 1)))):
        got = vmap(jit(rnn), in_dims=in_dims)(*args)
        assert _handled_by(explain(vmap(jit(rnn), in_dims=in_dims))(*args)) == {"numpy"}
        for k in range(len(got)):
            one = [a if d is None else np.take(a, k, axis=d) for a, d in zip(args, in_dims)]
            _close(got[k], rnn(*one), rtol=1e-12)


def _check_transforms_of_jit(fn, w, xs, rng, grad_staged=True, errors="warn", vmap_errors="warn"):
    """grad, jvp and vmap of ``jit(fn)`` agree with the eager transforms (vmap on
    independently drawn examples, which take different branches or trip counts), and
    explain shows which ran as graphs; grad and jvp under ``np.errstate(all=errors)``,
    vmap under ``vmap_errors``."""
    with np.errstate(all=errors):
        _check_grad_and_jvp(fn, w, xs, rng, grad_staged)
    ws = 0.7 * rng.normal(size=(5, *w.shape))
    with np.errstate(all=vmap_errors):
        got = vmap(jit(fn), in_dims=(0, None))(ws, xs)
        _close(got, np.array([fn(w_k, xs) for w_k in ws]), rtol=1e-12)
        assert _handled_by(explain(vmap(jit(fn), in_dims=(0, None)))(ws, xs)) == {"numpy"}


def _check_grad_and_jvp(fn, w, xs, rng, grad_staged):
    _close(grad(jit(fn), argnums=(0, 1))(w, xs), grad(fn, argnums=(0, 1))(w, xs), rtol=1e-12)
    check_grads(jit(fn), (w, xs), order=1, modes=("rev", "fwd"))
    by_grad = _handled_by(explain(grad(jit(fn)))(w, xs))
    assert (by_grad == {"numpy"}) if grad_staged else ("grad" in by_grad)
    t = rng.normal(size=w.shape)
    push = lambda fn, w: jvp(lambda v: fn(v, xs), (w,), (t,))
    _close(push(jit(fn), w), push(fn, w), rtol=1e-12)
    assert _handled_by(explain(lambda w: push(jit(fn), w))(w)) == {"numpy"}


@pytest.mark.parametrize("fn", [halving, branching], ids=["while inside", "cond inside"])
def test_a_jitted_scan_holding_value_decided_control_flow_transforms_its_graph(fn):
    """Its body's loop or branch is transformed by its staged route; grad through the
    while_loop (its carry differentiated) evaluates the graph at grad's level."""
    rng = np.random.default_rng(2)
    w, xs = _draw(rng, steps=4)
    _check_transforms_of_jit(fn, w, 3.0 * xs, rng, grad_staged=fn is branching)


def guarded(w, x):
    """A cond whose branches differ, the one not taken undefined there (sqrt, log of a
    negative number): it must not run, or a warning (an error in the tests) and a NaN in
    the derivative would show it."""
    s = anp.sum(x * w)
    y = cond(s > 0, lambda v: anp.sqrt(v) * w, lambda v: anp.log(-v) + w**2, s)
    return anp.sum(anp.tanh(y) * x)


def newton(w, x):
    """A while_loop (Newton on v**3 + w v = x) whose trip count differs per example."""
    c = anp.sum(w**2) + 1.0
    body = lambda s: (s[0] - (s[0] ** 3 + c * s[0] - x) / (3 * s[0] ** 2 + c), s[1] + 1)
    v, _ = while_loop(lambda s: (anp.max(anp.abs(s[0] ** 3 + c * s[0] - x)) > 1e-12)
                      & (s[1] < 50), body, (x, 0))  # fmt: skip
    return anp.sum(v * w)


@pytest.mark.parametrize("x_sign", [1.0, -1.0], ids=["true branch", "false branch"])
def test_a_jitted_cond_is_transformed_as_a_graph_taking_one_branch(x_sign):
    rng = np.random.default_rng(5)
    w, x = np.abs(rng.normal(size=3)) + 0.2, x_sign * (np.abs(rng.normal(size=3)) + 0.1)
    # grad and jvp: the branch not taken would raise (vmap's examples take both, and
    # each branch runs on all of them, as eagerly: invalid values where not taken)
    _check_transforms_of_jit(guarded, w, x, rng, errors="raise", vmap_errors="ignore")


@pytest.mark.parametrize("x_sign", [1.0, -1.0], ids=["true branch", "false branch"])
def test_vmap_of_a_jitted_cond_with_an_unbatched_predicate_takes_one_branch(x_sign):
    """The predicate reads the unbatched argument only: one cond of the batched branches,
    the branch not taken never runs (it would raise), each example's value the eager
    one (independently drawn weights)."""
    rng = np.random.default_rng(9)
    x = x_sign * (np.abs(rng.normal(size=3)) + 0.1)
    ws = rng.normal(size=(4, 3))

    def f(w, x):
        s = anp.sum(x)
        return cond(s > 0, lambda v: anp.sqrt(v) * w + w**2, lambda v: anp.log(-v) - w, s)

    with np.errstate(all="raise"):
        got = vmap(jit(f), in_dims=(0, None))(ws, x)
        assert _handled_by(explain(vmap(jit(f), in_dims=(0, None)))(ws, x)) == {"numpy"}
        _close(got, np.array([f(w, x) for w in ws]), rtol=1e-15)
        g = vmap(grad(lambda w, x: anp.sum(jit(f)(w, x) ** 2)), in_dims=(0, None))(ws, x)
        _close(g, np.array([grad(lambda w: anp.sum(f(w, x) ** 2))(w) for w in ws]), rtol=1e-12)


def test_vmap_of_a_jitted_cond_with_a_batched_predicate_selects_per_example():
    """Examples taking either branch: every branch runs on the batch and ``where``
    selects (JAX's vmap of cond), each example's value the eager one."""
    rng = np.random.default_rng(6)
    f = lambda x: cond(anp.sum(x) > 0, lambda v: anp.sin(v) * 2.0, lambda v: v**3, x)
    xs = rng.normal(size=(6, 3))
    got = vmap(jit(f))(xs)
    _close(got, np.array([f(x) for x in xs]), rtol=1e-15)
    assert _handled_by(explain(vmap(jit(f)))(xs)) == {"numpy"}


def test_a_jitted_while_loop_is_transformed_as_a_graph_but_for_reverse_mode():
    """jvp and vmap of jit(newton) stage one loop; grad through it runs at grad's level
    and records the iterations, as eager grad does (JAX refuses reverse mode there)."""
    rng = np.random.default_rng(7)
    w, x = 0.5 * rng.normal(size=3), rng.normal(size=3)
    _check_transforms_of_jit(newton, w, x, rng, grad_staged=False)


def _transformed_graphs(graph):
    """The graphs call_p derived from ``graph`` (its JVP, VJP and batched forms)."""
    from autodiff.compiler.derived import derived_of

    cache = derived_of(graph).transformed
    found = []
    for made in list(cache._entries.values()) if cache is not None else ():
        found += [getattr(made, n) for n in ("graph", "forward", "backward") if hasattr(made, n)]
    return found


@pytest.mark.parametrize("fn", [guarded, newton], ids=["cond", "while_loop"])
def test_the_transformed_graphs_of_a_jitted_cond_or_while_loop_compile(fn):
    """With compile=True the JVP and batched graphs (and cond's VJP graphs) compile
    their control flow into kernels: the stage API shows it."""
    from autodiff.compiler.derived import derived_of
    from autodiff.compiler.stages import default_backend

    if not default_backend().available():
        pytest.skip(default_backend().why_not())
    rng = np.random.default_rng(8)
    w, x = np.abs(rng.normal(size=3)) + 0.2, np.abs(rng.normal(size=3)) + 0.1
    jitted = jit(fn, compile=True)
    t = rng.normal(size=3)
    for _ in range(2):
        jvp(lambda w: jitted(w, x), (w,), (t,))
        vmap(jitted, in_dims=(0, None))(np.stack([w, 2 * w]), x)
        if fn is guarded:
            grad(jitted)(w, x)
    graphs = _transformed_graphs(jitted.trace(w, x).graph)
    assert len(graphs) == (4 if fn is guarded else 2)
    for g in graphs:
        lowered = lower(g)
        assert lowered.regions, lowered.as_text()
        compiled = derived_of(g).compiled.get(("llvm", False))
        assert compiled is not None and compiled.kernels, g


def test_higher_orders_of_a_jitted_scan():
    """hessian(jit(f)) and grad of grad(jit(f)): the backward graph's scan is
    differentiated as a graph again."""
    rng = np.random.default_rng(3)
    w, xs = _draw(rng, steps=4)
    f = lambda x0: rnn(w, anp.concatenate([x0[None], xs[1:]]))
    _close(hessian(jit(f))(xs[0]), hessian(f)(xs[0]), rtol=1e-10)
    g2 = grad(lambda w: anp.sum(grad(jit(rnn))(w, xs) ** 2))
    _close(g2(w), grad(lambda w: anp.sum(grad(rnn)(w, xs) ** 2))(w), rtol=1e-10)


def test_the_tape_nodes_vjp_rules_run_on_recorded_nodes_only():
    """scan_p's and cond_p's VJP rules read what their grad method recorded; called on
    a bind's parameters (a transform of your own treating them as ordinary primitives)
    they say so instead of failing on a missing key."""
    with pytest.raises(RuleError, match=r"scan_grad.*not on a scan's own parameters"):
        scan_p.vjp_rule()((1.0,), (1.0,), [1.0], {"length": 1, "reverse": False}, [0])
    with pytest.raises(RuleError, match=r"cond_grad.*not on a cond's own parameters"):
        cond_p.vjp_rule()((1.0,), (1.0,), [True, 1.0], {"who": "cond"}, [1])


def test_a_checkpointed_scan_node_recomputes_with_the_forward_interpreter():
    """The backward pass of scan(..., checkpoint=True) records each recomputed step with
    the grad of the forward pass (core's live_again): the weights' cotangents arrive
    through the nodes recorded before the scan, after that grad ended, in vjp's pullback
    called twice, and the interpreter is inactive again afterwards."""
    rng = np.random.default_rng(4)
    w, xs = _draw(rng)
    f = lambda w: rnn(anp.sin(w), xs, checkpoint=True)
    _, pullback = vjp(f, w)
    first, second = pullback(1.0)[0], pullback(2.0)[0]
    want = grad(lambda w: rnn(anp.sin(w), xs))(w)
    _close(first, want, rtol=1e-12)
    _close(second, 2.0 * want, rtol=1e-12)
    assert current_interpreters() == ()


@pytest.mark.parametrize("x", [2.0, -2.0], ids=["true branch", "false branch"])
def test_jvp_and_vmap_inside_a_jit_run_only_the_taken_branch_of_a_cond_they_do_not_reach(x):
    """The cond's operands carry no tangent and no batch axis (they are the jit's own):
    it stays a cond, so the branch not taken (undefined there) never runs."""
    branches = (lambda v: anp.sqrt(v), lambda v: anp.log(-v))
    f = lambda w, x: jvp(lambda w: w * cond(x > 0, *branches, x), (w,), (1.0,))
    g = lambda ws, x: vmap(lambda w: w * cond(x > 0, *branches, x))(ws)
    with np.errstate(all="raise"):
        _close(jit(f)(3.0, x), f(3.0, x), rtol=1e-15)
        ws = np.array([0.5, -1.0, 2.0])
        _close(jit(g)(ws, x), g(ws, x), rtol=1e-15)


def test_call_ps_vjp_rule_differentiates_a_while_loop_graph_at_its_callers_level():
    """call_p's VJP rule called on a bind's parameters (a transform of your own treating
    it as an ordinary primitive): a graph whose VJP cannot be staged (the while_loop's
    carry differentiated) is differentiated as eager grad does."""
    from autodiff.compiler.call import call_p

    rng = np.random.default_rng(10)
    w, x = 0.5 * rng.normal(size=3), rng.normal(size=3)
    graph = jit(newton).trace(w, x).graph
    ans = jit(newton)(w, x)
    got = call_p.vjp_rule()((np.array(2.0),), (ans,), [w, x], {"graph": graph, "name": "n"}, [0, 1])
    want = grad(lambda w, x: 2.0 * newton(w, x), argnums=(0, 1))(w, x)
    _close(tuple(got), want, rtol=1e-12)
