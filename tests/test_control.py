"""Control flow (cond, switch, while_loop, fori_loop, scan) under every transform.

Each program below is written twice: with the control-flow primitives (``fn``) and
with Python's own ``if``/``while``/``for`` (``ref``), the same maths.  ``ref`` runs
on plain arrays and, since grad and jvp tracers hold concrete values, under
``grad``, ``jvp``, ``jacfwd`` and ``jacrev`` too: an independent oracle for every
derivative, besides the finite differences of ``check_grads``.  Batches are
examples drawn independently, checked against a loop over them, with the
predicate batched and not; each batch is asserted to contain examples that take
different branches or run different numbers of iterations, so the select and the
freeze are exercised, not just the uniform case.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
import tracemalloc
from collections.abc import Callable

import numpy as np
import optree
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import (
    cond,
    explain,
    fori_loop,
    grad,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    scan,
    switch,
    vjp,
    vmap,
    while_loop,
)
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.testing import check_grads, check_vmap

# --- the programs ---------------------------------------------------------------------


@dataclasses.dataclass
class Program:
    name: str
    fn: Callable  # with control-flow primitives
    ref: Callable  # the same with Python control flow
    draw: Callable  # rng -> one example's arguments (a tuple of arrays)
    diff: tuple  # the differentiable positions
    kind: Callable  # one example's arguments -> its branch or trip count
    varies: bool = True  # whether examples can take different paths


def _away(rng, low, high, bad, margin):
    """A number in [low, high] at least ``margin`` from every point of ``bad``."""
    while True:
        v = rng.uniform(low, high)
        if all(abs(v - b) > margin for b in bad):
            return v


# cond: the branches close over p, a traced value when p is differentiated
def cond_fn(p, x):
    yes = lambda x: (anp.sin(x) * p, anp.sum(x))
    no = lambda x: (anp.cos(x) + p**2 * x, anp.sum(x**2))
    return cond(p > 0, yes, no, x)


def cond_ref(p, x):
    return (anp.sin(x) * p, anp.sum(x)) if p > 0 else (anp.cos(x) + p**2 * x, anp.sum(x**2))


def cond_draw(rng):
    return np.array(rng.choice([-1, 1]) * rng.uniform(0.5, 1.5)), rng.normal(size=3)


# switch: an integer index, clamped to the branches
BRANCHES = [lambda x: x @ x, lambda x: anp.exp(x), lambda x: -3.0 * x]


def switch_fn(i, x):
    return switch(i, BRANCHES, x)


def switch_ref(i, x):
    return BRANCHES[min(max(int(i), 0), 2)](x)


# cond on a pytree, predicate computed from the operands, closure over w
def tree_fn(w, x):
    yes = lambda d: {"a": d["x"] * w, "b": (d["y"],)}
    no = lambda d: {"a": anp.tanh(d["x"]), "b": (d["y"] * 2.0,)}
    return cond(anp.sum(x) > 0, yes, no, {"x": x, "y": w})


def tree_ref(w, x):
    return {"a": x * w, "b": (w,)} if anp.sum(x) > 0 else {"a": anp.tanh(x), "b": (w * 2.0,)}


def tree_draw(rng):
    x = rng.normal(size=3)
    return rng.normal(size=3), x + (0.3 - x.sum() / 3 if rng.random() < 0.5 else -0.3 - x.sum() / 3)


# while_loop: Newton's method for sqrt(a), a number of iterations that depends on a
def _tol(a):
    return 64 * np.finfo(anp.result_type(a)).eps * a


def newton_fn(a):
    return while_loop(lambda x: abs(x * x - a) > _tol(a), lambda x: 0.5 * (x + a / x), a)


def newton_ref(a):
    x = a
    while abs(x * x - a) > _tol(a):
        x = 0.5 * (x + a / x)
    return x


def _newton_trips(a):
    x, n = a, 0
    while abs(x * x - a) > _tol(a):
        x, n = 0.5 * (x + a / x), n + 1
    return n


def newton_draw(rng):
    while True:  # away from a change of the number of iterations (finite differences)
        a = rng.uniform(0.5, 400.0)
        if _newton_trips(a * (1 - 1e-3)) == _newton_trips(a) == _newton_trips(a * (1 + 1e-3)):
            return (np.array(a),)


# while_loop on a pytree carry with an integer counter; the body closes over w
def grow_fn(w, x0):
    def body(c):
        return {"x": c["x"] * 1.3 + w * anp.sin(c["x"]), "k": c["k"] + 1}

    out = while_loop(lambda c: (anp.sum(c["x"] ** 2) < 25.0) & (c["k"] < 40), body,
                     {"x": x0, "k": np.array(0)})  # fmt: skip
    return out["x"], out["k"]


def grow_ref(w, x0):
    x, k = x0, np.array(0)
    while anp.sum(x**2) < 25.0 and k < 40:
        x, k = x * 1.3 + w * anp.sin(x), k + 1
    return x, k


def _grow_margin(w, x0):
    x = x0
    for _ in range(40):
        s = float(np.sum(x**2))
        if abs(s - 25.0) < 0.5:
            return False
        if s >= 25.0:
            return True
        x = x * 1.3 + w * np.sin(x)
    return True


def grow_draw(rng):
    while True:
        w, x0 = rng.uniform(0.1, 0.5, size=2), rng.uniform(0.2, 1.5, size=2)
        if _grow_margin(w, x0):
            return w, x0


# fori_loop with static bounds: a scan of 4 steps, using the index
def fori_fn(w, x0):
    return fori_loop(0, 4, lambda i, x: anp.sin(x * w) + 0.1 * i, x0)


def fori_ref(w, x0):
    x = x0
    for i in range(4):
        x = anp.sin(x * w) + 0.1 * i
    return x


# fori_loop with a traced upper bound: a while loop, n iterations per example
def fori_n_fn(n, x):
    return fori_loop(0, n, lambda i, c: 0.9 * c + anp.sin(c) * i, x)


def fori_n_ref(n, x):
    for i in range(int(n)):
        x = 0.9 * x + anp.sin(x) * i
    return x


# scan: an RNN closing over its weights, with a y per step
def rnn(checkpoint, reverse=False):
    def fn(w, xs, h0):
        def cell(h, x):
            h = anp.tanh(h @ w + x)
            return h, anp.sum(h**2)

        return scan(cell, h0, xs, reverse=reverse, checkpoint=checkpoint)

    return fn


def rnn_ref(reverse=False):
    def ref(w, xs, h0):
        h, ys = h0, [None] * len(xs)
        for t in range(len(xs))[:: -1 if reverse else 1]:
            h = anp.tanh(h @ w + xs[t])
            ys[t] = anp.sum(h**2)
        return h, anp.stack(ys)

    return ref


def rnn_draw(rng):
    return 0.6 * rng.normal(size=(3, 3)), rng.normal(size=(5, 3)), rng.normal(size=3)


# scan over pytrees: a dict carry, a tuple of xs, a tuple of ys
def tree_scan(checkpoint):
    def fn(a, b, c0):
        def step(c, x):
            u = c["u"] * x[1] + anp.sin(x[0])
            return {"u": u, "v": c["v"] + anp.sum(u)}, (u * c["v"], c["v"])

        v = np.array(0.5, dtype=anp.result_type(c0))
        return scan(step, {"u": c0, "v": v}, (a, b), reverse=True, checkpoint=checkpoint)

    return fn


def tree_scan_ref(a, b, c0):
    c, ys = {"u": c0, "v": np.array(0.5, dtype=anp.result_type(c0))}, [None] * len(b)
    for t in range(len(b) - 1, -1, -1):
        u = c["u"] * b[t] + anp.sin(a[t])
        ys[t], c = (u * c["v"], c["v"]), {"u": u, "v": c["v"] + anp.sum(u)}
    return c, (anp.stack([y[0] for y in ys]), anp.stack([y[1] for y in ys]))


# cond inside scan: the predicate of each step comes from xs
def scan_cond(checkpoint):
    def fn(w, xs):
        def step(c, x):
            return cond(x > 0, lambda c: c * w * x, lambda c: anp.sin(c) - x, c), c

        return scan(step, anp.ones_like(w), xs, checkpoint=checkpoint)

    return fn


def scan_cond_ref(w, xs):
    c, ys = anp.ones_like(w), []
    for x in xs:
        ys.append(c)
        c = c * w * x if x > 0 else anp.sin(c) - x
    return c, anp.stack(ys)


def _signs(rng, n):
    return rng.choice([-1.0, 1.0], size=n) * rng.uniform(0.3, 1.2, size=n)


PROGRAMS = [
    Program("cond", cond_fn, cond_ref, cond_draw, (0, 1), lambda p, x: bool(p > 0)),
    Program("switch", switch_fn, switch_ref,
            lambda rng: (np.array(rng.integers(-1, 4)), rng.normal(size=(2, 2)) * 0.5), (1,),
            lambda i, x: min(max(int(i), 0), 2)),
    Program("cond pytree", tree_fn, tree_ref, tree_draw, (0, 1), lambda w, x: bool(x.sum() > 0)),
    Program("while newton", newton_fn, newton_ref, newton_draw, (0,), _newton_trips),
    Program("while pytree", grow_fn, grow_ref, grow_draw, (0, 1),
            lambda w, x0: int(grow_ref(w, x0)[1])),
    Program("fori static", fori_fn, fori_ref,
            lambda rng: (rng.normal(size=3), rng.normal(size=3)), (0, 1), lambda w, x0: 4, False),
    Program("fori traced", fori_n_fn, fori_n_ref,
            lambda rng: (np.array(rng.integers(0, 5)), rng.normal(size=2)), (1,),
            lambda n, x: int(n)),
    Program("scan", rnn(False), rnn_ref(), rnn_draw, (0, 1, 2), lambda *a: 5, False),
    Program("scan checkpoint", rnn(True), rnn_ref(), rnn_draw, (0, 1, 2), lambda *a: 5, False),
    Program("scan reverse checkpoint", rnn(True, True), rnn_ref(True), rnn_draw, (0, 1, 2),
            lambda *a: 5, False),
    Program("scan pytree", tree_scan(False), tree_scan_ref,
            lambda rng: (rng.normal(size=(4, 2)), rng.uniform(0.5, 1.0, 4), rng.normal(size=2)),
            (0, 1, 2), lambda *a: 4, False),
    Program("scan pytree checkpoint", tree_scan(True), tree_scan_ref,
            lambda rng: (rng.normal(size=(4, 2)), rng.uniform(0.5, 1.0, 4), rng.normal(size=2)),
            (0, 1, 2), lambda *a: 4, False),
    Program("cond in scan", scan_cond(False), scan_cond_ref,
            lambda rng: (rng.normal(size=2), _signs(rng, 4)), (0, 1),
            lambda w, xs: tuple(xs > 0)),
    Program("cond in checkpointed scan", scan_cond(True), scan_cond_ref,
            lambda rng: (rng.normal(size=2), _signs(rng, 4)), (0, 1),
            lambda w, xs: tuple(xs > 0)),
]  # fmt: skip
IDS = [p.name for p in PROGRAMS]


def _rng(prog, salt=0):
    return np.random.default_rng([sum(map(ord, prog.name)), salt])


def _floats(out):
    """The floating-point outputs (integer ones, like a loop's counter, have no derivative)."""
    return [x for x in optree.tree_leaves(out) if np.dtype(anp.result_type(x)).kind == "f"]


def _total(out):
    """A scalar of every floating-point output (for grad)."""
    return sum(anp.sum(x * (i + 1.0)) for i, x in enumerate(_floats(out)))


def _on(fn, args, diff):
    """``fn`` as a function of the arguments at ``diff`` only."""

    def selected(*chosen):
        full = list(args)
        for i, value in zip(diff, chosen, strict=True):
            full[i] = value
        return fn(*full)

    return selected


def _close(got, want, rtol=1e-9, atol=1e-11):
    got_leaves, want_leaves = optree.tree_leaves(got), optree.tree_leaves(want)
    assert optree.tree_structure(got) == optree.tree_structure(want)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g, dtype=float), np.asarray(w, dtype=float),
                                   rtol=rtol, atol=atol)  # fmt: skip


def _examples(prog, n=4, salt=0):
    """``n`` independent examples, drawn until they do not all take the same branch
    (or run the same number of iterations), where the program can differ at all."""
    rng = _rng(prog, salt)
    for _ in range(50):
        examples = [prog.draw(rng) for _ in range(n)]
        if len({prog.kind(*e) for e in examples}) > 1 or not prog.varies:
            return examples
    raise AssertionError(f"{prog.name}: every draw takes the same path")


def _batched(examples, dims):
    """The examples' arguments stacked along axis 0 where ``dims`` says 0; the first
    example's where it says None."""
    return tuple(np.stack([e[i] for e in examples]) if d == 0 else examples[0][i]
                 for i, d in enumerate(dims))  # fmt: skip


def _in_dims(prog):
    """Every argument batched; each argument alone batched (the predicate batched or
    not, depending on the argument)."""
    n = len(prog.draw(_rng(prog)))
    alone = [tuple(0 if j == i else None for j in range(n)) for i in range(n)]
    return [(0,) * n, *(alone if n > 1 else [])]


VMAP_CASES = [pytest.param(p, d, id=f"{p.name}-{d}") for p in PROGRAMS for d in _in_dims(p)]


# --- each program under each transform ----------------------------------------------------


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_forward_is_the_python_control_flow(prog):
    for args in _examples(prog):
        _close(prog.fn(*args), prog.ref(*args))


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_grads_against_finite_differences(prog):
    args = _examples(prog)[0]
    diff = tuple(args[i] for i in prog.diff)
    check_grads(_on(lambda *a: _total(prog.fn(*a)), args, prog.diff), diff, order=2)


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_grad_jvp_and_jacobians_match_python_control_flow(prog):
    args = _examples(prog)[1]
    diff = tuple(args[i] for i in prog.diff)
    argnums = tuple(range(len(diff)))
    f, ref = (_on(lambda *a, g=g: _total(g(*a)), args, prog.diff) for g in (prog.fn, prog.ref))
    _close(grad(f, argnums)(*diff), grad(ref, argnums)(*diff))
    tangents = tuple(np.cos(np.arange(np.size(d)) + 1.0).reshape(np.shape(d)) for d in diff)
    _close(jvp(f, diff, tangents), jvp(ref, diff, tangents))
    _close(linearize(f, *diff)[1](*tangents), jvp(ref, diff, tangents)[1])
    full, full_ref = (_on(lambda *a, g=g: _floats(g(*a)), args, prog.diff)
                      for g in (prog.fn, prog.ref))  # fmt: skip
    _close(jacrev(full, argnums)(*diff), jacrev(full_ref, argnums)(*diff))
    _close(jacfwd(jacrev(f, argnums), argnums)(*diff), jacfwd(jacrev(ref, argnums), argnums)(*diff))


@pytest.mark.parametrize(("prog", "dims"), VMAP_CASES)
def test_vmap_against_loop(prog, dims):
    examples = _examples(prog)
    check_vmap(prog.fn, dims, _batched(examples, dims))


def _example(args, dims, k):
    return tuple(a if d is None else a[k] for a, d in zip(args, dims, strict=True))


@pytest.mark.parametrize(("prog", "dims"), VMAP_CASES)
def test_vmap_of_grad_against_loop(prog, dims):
    """Against a loop of grad of the Python control flow."""
    examples = _examples(prog)
    args = _batched(examples, dims)
    g = lambda f: grad(lambda *a: _total(f(*a)), prog.diff)
    got = vmap(g(prog.fn), dims)(*args)
    for k in range(len(examples)):
        _close(optree.tree_map(lambda x, k=k: x[k], got), g(prog.ref)(*_example(args, dims, k)))


@pytest.mark.parametrize(("prog", "dims"), VMAP_CASES)
def test_grad_of_vmap_against_loop(prog, dims):
    examples = _examples(prog)
    args = _batched(examples, dims)
    diff = tuple(args[i] for i in prog.diff)
    batched = _on(lambda *a: _total(vmap(prog.fn, dims)(*a)), args, prog.diff)
    size = len(examples)
    looped = _on(lambda *a: sum(_total(prog.ref(*_example(a, dims, k))) for k in range(size)),
                 args, prog.diff)  # fmt: skip
    argnums = tuple(range(len(diff)))
    _close(grad(batched, argnums)(*diff), grad(looped, argnums)(*diff))


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_vmap_of_vmap_against_double_loop(prog):
    rows = [_examples(prog, 3, salt) for salt in range(2)]
    n = len(rows[0][0])
    args = tuple(np.stack([np.stack([e[i] for e in row]) for row in rows]) for i in range(n))
    got = vmap(vmap(prog.fn))(*args)
    for r, row in enumerate(rows):
        for k, e in enumerate(row):
            _close(optree.tree_map(lambda x, r=r, k=k: x[r, k], got), prog.ref(*e))


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_float32_stays_float32(prog):
    args = tuple(a.astype(np.float32) if a.dtype == float else a for a in _examples(prog)[0])
    out = prog.fn(*args)
    for leaf in optree.tree_leaves(out):
        assert anp.result_type(leaf) in (np.float32, np.int64), (prog.name, anp.result_type(leaf))
    diff = tuple(args[i] for i in prog.diff)
    grads = grad(_on(lambda *a: _total(prog.fn(*a)), args, prog.diff), tuple(range(len(diff))))(
        *diff
    )
    assert all(g.dtype == np.float32 for g in grads)


def test_every_batch_mixes_branches_and_trip_counts():
    """What the vmap tests rely on: their examples disagree where they can."""
    for prog in PROGRAMS:
        kinds = {prog.kind(*e) for e in _examples(prog)}
        assert len(kinds) > 1 or not prog.varies, prog.name


# --- what runs, and how often ----------------------------------------------------------------


class Counting:
    """A function that counts its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


def test_eagerly_and_under_grad_only_the_chosen_branch_runs():
    yes, no = Counting(lambda x: x * 2.0), Counting(lambda x: x * 3.0)
    assert float(cond(True, yes, no, 1.0)) == 2.0
    assert float(grad(lambda x: cond(x > 0, yes, no, x))(1.0)) == 2.0
    assert float(jvp(lambda x: cond(x < 0, yes, no, x), (1.0,), (1.0,))[1]) == 3.0
    assert (yes.calls, no.calls) == (2, 1)


def test_under_vmap_only_the_branches_some_example_takes_run():
    branches = [Counting(lambda x, k=k: x * k) for k in (1.0, 2.0, 3.0, 4.0)]
    out = vmap(lambda i, x: switch(i, branches, x))(np.array([3, 1, 3, 9]), np.ones(4))
    np.testing.assert_array_equal(out, [4.0, 2.0, 4.0, 4.0])  # 9 is clamped to 3
    assert [b.calls for b in branches] == [0, 1, 0, 1]  # once each for the whole batch
    same = vmap(lambda p, x: cond(p, branches[0], branches[2], x))(np.array([True] * 3), np.ones(3))
    np.testing.assert_array_equal(same, 1.0)
    assert branches[2].calls == 0


def test_a_batched_while_loop_runs_until_every_example_is_done():
    body = Counting(lambda c: (c[0] + 1, c[1] * 2.0))
    n, x = vmap(lambda m: while_loop(lambda c: c[0] < m, body, (0, 1.0)))(np.array([1, 4, 2]))
    np.testing.assert_array_equal(n, [1, 4, 2])
    np.testing.assert_array_equal(x, [2.0, 16.0, 4.0])  # finished examples stay frozen
    assert body.calls == 4


def test_an_unbatched_carry_becomes_batched_in_the_body():
    f = lambda xs: scan(lambda c, x: (c * x + 1.0, c), 0.0, xs)
    check_vmap(f, 1, (np.arange(12.0).reshape(4, 3) / 10,))
    g = lambda m: while_loop(lambda c: c < m, lambda c: c + 1.5, 0.0)
    check_vmap(g, 0, (np.array([1.0, 4.0, 7.0]),))


# --- values the functions close over ---------------------------------------------------------


def test_closed_over_values_of_outer_transforms_keep_their_derivatives():
    x = np.array([0.3, -1.2])
    for ckpt in (False, True):

        def f(w, ckpt=ckpt):
            g = lambda v: cond(v > 0, lambda: v * w, lambda: v - w)  # closes over w and v
            s = scan(lambda c, _: (c * w, None), 1.0, None, length=3, checkpoint=ckpt)[0]
            n = while_loop(lambda c: c < 2.0, lambda c: c + w, 0.0)
            return anp.sum(vmap(g)(x)) + s + n

        check_grads(f, (0.7,), order=2)
        # w * 1 + (-1.2 - w), w**3, and a while loop of 3 steps: 3 w
        assert np.isclose(grad(f)(0.7), 0.3 - 1 + 3 * 0.7**2 + 3)


def test_a_checkpointed_scan_closing_over_values_of_a_vmap_inside_grad():
    """f closes over the vmap's value: the scan is that vmap's, not grad's, so it is
    recorded step by step (and right)."""
    ys, xs = np.array([0.5, -0.3, 1.1]), np.array([0.2, 0.4, -0.1])

    def f(w, ckpt):
        one = lambda y: scan(lambda c, x: (anp.sin(c * y + x), c), w, xs, checkpoint=ckpt)[0]
        return vmap(one)(ys).sum()

    assert np.isclose(grad(f)(0.3, True), grad(f)(0.3, False))
    check_grads(lambda w: f(w, True), (0.3,), order=2)


# --- checkpoint=True: one node, recomputed -----------------------------------------------------


def _lstm(checkpoint, steps=60, hidden=32):
    rng = np.random.default_rng(1)
    w = rng.normal(size=(hidden, 4 * hidden)) / 8
    xs = rng.normal(size=(steps, 8, 4 * hidden))
    h0 = np.zeros((8, hidden))

    def loss(w):
        def cell(carry, x):
            h, c = carry
            z = h @ w + x
            i, f, g, o = (anp.tanh(z[:, k * hidden : (k + 1) * hidden]) for k in range(4))
            c = f * c + i * g
            h = o * anp.tanh(c)
            return (h, c), h

        return anp.sum(scan(cell, (h0, h0), xs, checkpoint=checkpoint)[1] ** 2)

    return loss, w


def _peak(run):
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_checkpoint_keeps_the_carries_not_every_step():
    kept, w = _lstm(False)
    recomputed, _ = _lstm(True)
    np.testing.assert_allclose(grad(recomputed)(w), grad(kept)(w), rtol=1e-12)
    assert _peak(lambda: grad(recomputed)(w)) < 0.5 * _peak(lambda: grad(kept)(w))


def test_checkpoint_is_one_tape_node_whose_vjp_recomputes():
    loss, w = _lstm(True, steps=4, hidden=2)
    calls = explain(grad(loss))(w).calls
    assert sum(c.prim == "tanh" for c in calls) == 2 * 5 * 4  # forward, then once more
    text = str(explain(grad(loss))(w))
    assert "in tape node of scan" in text and "VJP of scan (backward pass)" in text


def test_a_checkpointed_vjp_fn_runs_later_many_times_and_under_vmap():
    loss, w = _lstm(True, steps=5, hidden=3)
    plain, _ = _lstm(False, steps=5, hidden=3)
    _, vjp_fn = vjp(loss, w)
    first = vjp_fn(np.array(1.0))[0]
    np.testing.assert_allclose(vjp_fn(np.array(2.0))[0], 2 * first, rtol=1e-12)
    np.testing.assert_allclose(first, grad(plain)(w), rtol=1e-12)

    def inside_no_grad(ct):  # no_grad of a transform newer than the vjp: it still records
        with autodiff.no_grad():
            return vjp_fn(ct)[0]

    np.testing.assert_allclose(vmap(inside_no_grad)(np.ones(2))[0], first, rtol=1e-12)
    many = vmap(vjp_fn)(np.array([1.0, -1.0]))[0]
    np.testing.assert_allclose(many, np.stack([first, -first]), rtol=1e-12)
    thread_result = []
    worker = threading.Thread(target=lambda: thread_result.append(vjp_fn(np.array(1.0))[0]))
    worker.start()
    worker.join()
    np.testing.assert_allclose(thread_result[0], first, rtol=1e-12)


def test_checkpoint_under_linearize_and_debug_rules():
    loss, w = _lstm(True, steps=3, hidden=2)
    plain, _ = _lstm(False, steps=3, hidden=2)
    v = np.ones_like(w)
    np.testing.assert_allclose(linearize(loss, w)[1](v), jvp(plain, (w,), (v,))[1], rtol=1e-12)
    with autodiff.debug_rules():
        np.testing.assert_allclose(grad(loss)(w), grad(plain)(w), rtol=1e-12)


def test_checkpoint_composes_with_autodiff_checkpoint():
    """Each step as an autodiff.checkpoint (here the weights travel in the carry)."""
    xs = np.linspace(-1.0, 1.0, 6).reshape(3, 2)

    def f(w, wrap):
        step = lambda c, x: ((anp.tanh(c[0] @ c[1] + x), c[1]), None)
        return anp.sum(scan(wrap(step), (np.ones(2), w), xs)[0][0])

    w = np.array([[0.5, -0.2], [0.1, 0.4]])
    np.testing.assert_allclose(grad(f)(w, autodiff.checkpoint), grad(f)(w, lambda s: s))


# --- shapes, orders and edge cases -----------------------------------------------------------


def test_scan_edge_cases():
    f = lambda c, x: (c + x, {"double": 2 * x, "none": None})
    carry, ys = scan(f, np.zeros(3), np.zeros((0, 3)))  # no step: f runs once for y's shapes
    assert carry.shape == (3,) and ys["double"].shape == (0, 3) and ys["none"] is None
    carry, ys = scan(lambda c, _: (c * 2.0, c), 1.0, None, length=4)
    np.testing.assert_array_equal(ys, [1.0, 2.0, 4.0, 8.0])
    _, ys = scan(lambda c, x: (c + x, c), 0.0, np.arange(4.0), reverse=True)
    np.testing.assert_array_equal(ys, [6.0, 5.0, 3.0, 0.0])
    step = lambda c, x: (c + x["a"].sum() + x["b"], None)
    carry, _ = scan(step, 0.0, {"a": np.ones((2, 3)), "b": np.ones(2)})
    assert float(carry) == 8.0


def test_fori_loop_bounds():
    assert fori_loop(3, 3, lambda i, x: x + 1.0, 5.0) == 5.0
    assert float(fori_loop(2, 5, lambda i, x: x + i, 0.0)) == 9.0
    out = vmap(lambda lo, x: fori_loop(lo, 4, lambda i, c: c * 2.0, x))(np.array([0, 3, 5]),
                                                                         np.ones(3))  # fmt: skip
    np.testing.assert_array_equal(out, [16.0, 2.0, 1.0])


def test_switch_index_is_clamped_under_every_transform():
    f = lambda i, x: switch(i, BRANCHES, x)
    x = np.array([[0.5, 0.1], [0.2, -0.4]])
    for i in (-5, 0, 1, 2, 9):
        got = grad(lambda x, i=i: _total(f(i, x)))(x)
        _close(got, grad(lambda x, i=i: _total(switch_ref(i, x)))(x))
    check_vmap(f, (0, None), (np.array([-5, 0, 9]), x))


def test_weakly_typed_python_numbers_take_the_dtype_of_the_loop():
    out = scan(lambda c, x: (c + x, c), 0.0, np.ones(3, np.float32))
    assert out[0].dtype == np.float32 and out[1].dtype == np.float32
    assert while_loop(lambda c: c < 3, lambda c: c + 1, 0) == 3


# --- type errors, caught up front, naming the leaf ----------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: cond(np.array([True, False]), lambda: 1.0, lambda: 2.0), TransformTypeError,
         r"cond: pred must be a scalar \(shape \(\)\), got shape \(2,\)"),
        (lambda: cond(1.0, lambda: 1.0, lambda: 2.0), TransformTypeError,
         "cond: pred must be boolean, got dtype float64"),
        (lambda: cond(True, lambda: 1.0, 3.0), TransformTypeError, "cond .false_fun."),
        (lambda: switch(0.5, BRANCHES, 1.0), TransformTypeError,
         "switch: index must be an integer, got dtype float64"),
        (lambda: switch(0, [], 1.0), TransformTypeError, "branches must be a non-empty"),
        (lambda: cond(True, lambda x: x, lambda x: x, "text"), TransformTypeError,
         r"operands\[0\] is a str"),
        (lambda: while_loop(lambda c: c["x"] < 3, lambda c: {"x": c["x"] + 1.0}, {"x": 0}),
         TransformTypeError, r"while_loop: the value body_fun returned has shape \(\) and "
         r"dtype float64 at init_val\['x'\], where the value it was given has shape \(\) and "
         r"dtype int64"),
        (lambda: while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, np.ones(3)), (0, np.ones(2))),
         TransformTypeError, r"shape \(3,\) and dtype float64 at init_val\[1\]"),
        (lambda: while_loop(lambda c: c < 3, lambda c: (c + 1,), 0), TransformTypeError,
         r"the value body_fun returned is structured as PyTreeSpec\(\(\*,\)\), where the value "
         r"it was given is structured as PyTreeSpec\(\*\)"),
        (lambda: while_loop(lambda c: np.array([True]), lambda c: c, 0.0), TransformTypeError,
         r"while_loop: the value cond_fun returns must be a scalar"),
        (lambda: fori_loop(0, 3, lambda i, x: {"a": x["a"][:1]}, {"a": np.ones(2)}),
         TransformTypeError, r"fori_loop: the value body_fun returned has shape \(1,\).* at "
         r"init_val\['a'\]"),
        (lambda: fori_loop(0.0, 3, lambda i, x: x, 1.0), TransformTypeError,
         "fori_loop: lower must be an integer"),
        (lambda: scan(lambda c, x: c + x, 0.0, np.ones(3)), TransformTypeError,
         r"scan: f must return a pair \(carry, y\), got a float64"),
        (lambda: scan(lambda c, x: ({"h": c["h"] * x}, None), {"h": np.ones(1)}, np.ones((3, 4))),
         TransformTypeError, r"scan: the carry f returned has shape \(4,\).* at init\['h'\]"),
        (lambda: scan(lambda c, x: (c, x if x > 0 else (x,)), 0.0, np.array([1.0, -1.0])),
         TransformTypeError, r"scan: the y f returned is structured as"),
        (lambda: scan(lambda c, x: (c, c), 0.0, {"a": np.ones(3), "b": np.ones(4)}),
         TransformValueError, r"xs\['a'\] has 3, xs\['b'\] has 4"),
        (lambda: scan(lambda c, x: (c, c), 0.0, np.ones(3), length=2), TransformValueError,
         "xs has 3, length has 2"),
        (lambda: scan(lambda c, x: (c, c), 0.0, np.array(1.0)), TransformValueError,
         r"scan: xs has shape \(\)"),
        (lambda: scan(lambda c, x: (c, c), 0.0), TransformValueError, "give the number of steps"),
        (lambda: scan(lambda c, x: (c, c), 0.0, length=-1), TransformValueError,
         "length must be None or a non-negative int"),
        (lambda: scan(lambda c, x: (c, c), 0.0, length=2.0), TransformTypeError,
         "length must be None or a non-negative int"),
    ],
)  # fmt: skip
def test_type_errors_name_the_offending_leaf(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_branches_that_disagree_are_caught_where_both_run():
    f = lambda p, x: cond(p, lambda x: {"a": x}, lambda x: {"a": x[:1]}, x)
    f(True, np.ones(2))  # eagerly only one branch runs: nothing to compare it with
    message = (r"cond: the output of true_fun has shape \(2,\).* at output\['a'\], where the "
               r"output of false_fun has shape \(1,\)")  # fmt: skip
    with pytest.raises(TransformTypeError, match=message):
        vmap(f, (0, None))(np.array([True, False]), np.ones(2))
    g = lambda p, x: cond(p, lambda x: x.astype(np.float32), lambda x: x, x)
    with pytest.raises(TransformTypeError, match="dtype float32"):
        vmap(g, (0, None))(np.array([True, False]), np.ones(2))


def test_the_types_of_a_branch_not_taken_come_from_output_types(monkeypatch):
    """Where output_types can answer without running a branch (staging will), an
    untaken branch that disagrees is an error even eagerly."""
    from autodiff.control import cond as _control

    class Spec:
        shape, dtype = (5,), np.dtype(float)

    monkeypatch.setattr(_control, "output_types",
                        lambda fn, leaves: (optree.tree_structure(0), [Spec()]))  # fmt: skip
    with pytest.raises(TransformTypeError, match=r"the output of true_fun has shape \(5,\)"):
        cond(False, lambda x: x, lambda x: x, np.ones(2))


def test_after_an_error_the_next_call_works():
    with pytest.raises(TransformTypeError):
        grad(lambda x: scan(lambda c, _: (c * x, 1.0 if c > 2 else (1.0,)), x, None,
                            length=4, checkpoint=True)[0])(1.5)  # fmt: skip
    assert float(grad(lambda x: scan(lambda c, _: (c * x, None), 1.0, None, length=3,
                                     checkpoint=True)[0])(2.0)) == 12.0  # fmt: skip


# --- backends: scan has no data-dependent decision, so it stays on the operands' library -----


def test_scan_and_static_fori_on_a_strict_array():
    from tests.backends import strict, unwrap

    w, xs, h0 = rnn_draw(np.random.default_rng(3))
    for ckpt in (False, True):
        fn = rnn(ckpt)
        total = lambda w, xs, h0, fn=fn: _total(fn(w, xs, h0))
        want = grad(total, (0, 1, 2))(w, xs, h0)
        got = grad(total, (0, 1, 2))(*strict((w, xs, h0)))
        _close(unwrap(got), want)
        got = vmap(fn, (None, 0, None))(*strict((w, np.stack([xs, -xs]), h0)))
        _close(unwrap(got), vmap(fn, (None, 0, None))(w, np.stack([xs, -xs]), h0))
    got = jvp(fori_fn, strict((w[0], h0)), strict((h0, h0)))
    _close(unwrap(got), jvp(fori_fn, (w[0], h0), (h0, h0)))


def test_scan_on_dask_stays_lazy():
    """No data-dependent decision: a scan builds a Dask graph and computes nothing;
    a data-dependent branch reads its predicate (computes it), as it must."""
    from tests.backends import Dask

    dask = Dask()
    if dask.reason:
        pytest.skip(dask.reason)
    w, xs, h0 = rnn_draw(np.random.default_rng(5))
    for ckpt in (False, True):
        fn = rnn(ckpt)
        total = lambda w, xs, h0, fn=fn: _total(fn(w, xs, h0))
        with dask.lazy():
            got = grad(total, (0, 1, 2))(*dask.put((w, xs, h0)))
        assert all(isinstance(g, dask.array_type()) for g in got)
        _close(dask.get(got), grad(total, (0, 1, 2))(w, xs, h0))
    with dask.lazy(), pytest.raises(AssertionError, match="a Dask graph was computed"):
        cond_fn(*dask.put(cond_draw(np.random.default_rng(0))))


def test_nested_checkpointed_scans_and_loops():
    xs = np.linspace(-1.0, 1.0, 12).reshape(3, 4)

    def f(w, ckpt):
        def row(c, x):
            inner = scan(lambda d, v: (anp.sin(d * w + v), d), c, x, checkpoint=ckpt)
            n = while_loop(lambda k: k[0] < 2, lambda k: (k[0] + 1, k[1] * w), (0, inner[0]))
            return n[1], anp.sum(inner[1])

        return _total(scan(row, 0.3, xs, checkpoint=ckpt, reverse=True))

    np.testing.assert_allclose(grad(f)(0.7, True), grad(f)(0.7, False), rtol=1e-12)
    check_grads(lambda w: f(w, True), (0.7,), order=2)
    np.testing.assert_allclose(vmap(grad(f), (0, None))(np.array([0.7, -0.4]), True),
                               vmap(grad(f), (0, None))(np.array([0.7, -0.4]), False))  # fmt: skip


@pytest.mark.parametrize(
    ("fn", "dims", "shapes"),
    [
        (cond_fn, (None, 1), [(), (3, 4)]),
        (cond_fn, (0, -1), [(4,), (3, 4)]),
        (rnn(True), (None, 2, 1), [(3, 3), (5, 3, 4), (3, 4)]),
        (rnn(False), (-1, None, 0), [(3, 3, 4), (5, 3), (4, 3)]),
        (fori_n_fn, (0, 1), [(4,), (2, 4)]),
    ],
)
def test_batch_axes_other_than_the_first(fn, dims, shapes):
    rng = np.random.default_rng(7)
    args = [rng.normal(size=s) for s in shapes]
    if fn in (cond_fn,):
        args[0] = np.where(np.arange(args[0].size).reshape(np.shape(args[0])) % 2, 0.8, -0.9)
    if fn is fori_n_fn:
        args[0] = np.array([0, 3, 1, 2])
    for out_dims in (0, -1):
        check_vmap(fn, dims, tuple(args), out_dims=out_dims)


def test_the_slices_of_xs_are_one_primitive_with_every_rule():
    """A traced xs is sliced once (its VJP stacks the steps' cotangents, where a slice
    per step would send back a cotangent of all of xs from each)."""
    from autodiff.control.scan import slices_p
    from autodiff.testing import check_primitive

    check_primitive(slices_p, (np.random.default_rng(0).normal(size=(4, 3, 2)),))
    calls = explain(grad(lambda xs: _total(rnn(False)(np.eye(3), xs, np.zeros(3)))))(
        np.ones((4, 3))
    )
    names = [c.prim for c in calls.calls]
    assert names.count("scan_slices") == 1 and "getitem" not in names[: names.index("stack")]


def test_a_checkpointed_vjp_fn_in_several_threads_at_once():
    """Each thread's recomputation makes the grad's interpreter live; it stays live until
    the last of them ends (one thread ending must not end it for the others)."""
    import sys

    loss, w = _lstm(True, steps=20, hidden=4)
    plain, _ = _lstm(False, steps=20, hidden=4)
    _, vjp_fn = vjp(loss, w)
    want, errors, start = grad(plain)(w), [], threading.Barrier(4)

    def work():
        start.wait()
        try:
            for _ in range(3):
                np.testing.assert_allclose(vjp_fn(np.array(1.0))[0], want, rtol=1e-10)
        except Exception as e:  # reported below, from the main thread
            errors.append(e)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, inside the recomputations
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[0]
