"""Which route each transform takes through a control-flow primitive (the registration
block at the end of each of ``autodiff/control/``'s modules lists them).

A scan staged by ``jit`` is transformed as a graph wherever the transform is: inside
the jit, and around it (``grad(jit(f))``, ``jvp(jit(f))``, ``vmap(jit(f))``: the jitted
graph is transformed, its scan by the staged regime), so none of the steps runs at the
transform's level.  A jitted graph whose control flow is decided by values (a
``while_loop`` or a ``cond``, also inside a scan's body) is evaluated at the transform's
level instead, where those values exist.  ``explain`` shows which: its rows name the
interpreter that handled each primitive call.
"""

from __future__ import annotations

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import cond, explain, grad, hessian, jit, jvp, scan, vjp, vmap, while_loop
from autodiff.control.cond import cond_p
from autodiff.control.scan import scan_p
from autodiff.core.primitive import current_interpreters
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


@pytest.mark.parametrize("fn", [halving, branching], ids=["while inside", "cond inside"])
def test_a_jitted_scan_holding_value_decided_control_flow_runs_at_the_level(fn):
    """Its body's loop or branch needs values: grad, jvp and vmap of the jitted function
    evaluate its graph at their own level, so they agree with the eager transforms,
    including per example under vmap (examples taking different trip counts)."""
    rng = np.random.default_rng(2)
    w, xs = _draw(rng, steps=4)
    xs = 3.0 * xs
    _close(grad(jit(fn), argnums=(0, 1))(w, xs), grad(fn, argnums=(0, 1))(w, xs), rtol=1e-12)
    check_grads(jit(fn), (w, xs), order=1, modes=("rev", "fwd"))
    assert "grad" in _handled_by(explain(grad(jit(fn)))(w, xs))
    t = rng.normal(size=(3, 3))
    _close(jvp(lambda w: jit(fn)(w, xs), (w,), (t,)), jvp(lambda w: fn(w, xs), (w,), (t,)))
    ws = 0.7 * rng.normal(size=(3, 3, 3))
    got = vmap(jit(fn), in_dims=(0, None))(ws, xs)
    _close(got, np.array([fn(w_k, xs) for w_k in ws]), rtol=1e-12)


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
