"""``autodiff.debug.callback`` and ``autodiff.debug.print`` (JAX's ``jax.debug``): the
concrete values, once per call of the program, in program order, under every transform
and every tier of ``jit``."""

from __future__ import annotations

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import fori_loop, grad, hessian, jit, jvp, scan, vjp, vmap

X = np.array([0.5, 1.5])


def program(seen):
    def f(x):
        y = anp.sin(x) * 2.0
        autodiff.debug.callback(lambda v, tag: seen.append((tag, np.array(v))), y, "y")
        z = anp.cos(y) + 1.0
        autodiff.debug.callback(lambda v, tag: seen.append((tag, np.array(v))), z, "z")
        return anp.sum(z**2)

    return f


def expected(x):
    y = np.sin(x) * 2.0
    return [("y", y), ("z", np.cos(y) + 1.0)]


def check(seen, calls):
    assert [tag for tag, _ in seen] == [tag for call in calls for tag, _ in call]
    for (_, got), (_, want) in zip(seen, [item for call in calls for item in call]):
        assert isinstance(got, np.ndarray)  # concrete values, never tracers
        np.testing.assert_allclose(got, want, rtol=1e-14)


RUNS = {
    "eager": lambda f: f(X),
    "grad": lambda f: grad(f)(X),
    "vjp and its pullback": lambda f: vjp(f, X)[1](1.0),
    "jvp": lambda f: jvp(f, (X,), (X,)),
    "hessian": lambda f: hessian(f)(X),
    "jit": lambda f: jit(f)(X),
    "jit(grad)": lambda f: jit(grad(f))(X),
    "grad(jit)": lambda f: grad(jit(f))(X),
    "jit(compile=True)": lambda f: jit(f, compile=True)(X),
}


@pytest.mark.parametrize("name", RUNS)
def test_values_are_the_concrete_ones_once_per_call_in_order(name):
    seen = []
    RUNS[name](program(seen))
    check(seen, [expected(X)])  # the backward pass does not run the callbacks again


@pytest.mark.parametrize("compile", [False, True])
def test_every_call_of_a_jitted_function_calls_back_with_its_values(compile):
    seen = []
    f = jit(program(seen), compile=compile)
    inputs = [X + k for k in range(6)]  # past the replay's and the compiling tier's starts
    for x in inputs:
        f(x)
    check(seen, [expected(x) for x in inputs])


def test_vmap_calls_back_once_per_example_in_order():
    seen, xs = [], np.stack([X, X + 1, X + 2])
    vmap(program(seen))(xs)
    check(seen, [[item] for x in xs for item in expected(x)[:1]] +
          [[item] for x in xs for item in expected(x)[1:]])  # fmt: skip
    seen.clear()
    jit(vmap(program(seen)))(xs)  # the same, staged
    assert [tag for tag, _ in seen] == ["y"] * 3 + ["z"] * 3
    seen.clear()
    vmap(grad(program(seen)), in_dims=1)(xs.T)
    check(seen, [[item] for x in xs for item in expected(x)[:1]] +
          [[item] for x in xs for item in expected(x)[1:]])  # fmt: skip


def test_inside_loops_eagerly_and_jitted(capsys):
    def body(i, c):
        autodiff.debug.print("step {} carry {}", i, c)
        return c * 2.0

    want = "step 0 carry 1.0\nstep 1 carry 2.0\nstep 2 carry 4.0\n"
    fori_loop(0, 3, body, 1.0)
    assert capsys.readouterr().out == want
    looped = jit(lambda c: fori_loop(0, 3, body, c), compile=True)
    looped(1.0), looped(1.0)
    assert capsys.readouterr().out == want * 2

    def step(c, x):
        autodiff.debug.print("x={x}", x=x)
        return c + x, c

    jit(lambda c: scan(step, c, np.arange(2.0)))(0.0)
    assert capsys.readouterr().out == "x=0.0\nx=1.0\n"


def test_pytrees_static_arguments_and_a_result_nobody_reads(capsys):
    got = []
    f = jit(lambda x: autodiff.debug.callback(lambda d, flag: got.append((d, flag)),
                                              {"a": x, "b": [x * 2]}, flag=True) or x)  # fmt: skip
    out = f(np.ones(2))
    assert len(got) == 1 and got[0][1] is True
    np.testing.assert_array_equal(got[0][0]["b"][0], 2 * np.ones(2))
    assert not np.shares_memory(out, got[0][0]["a"])
    # the callback feeds nothing: no pass drops it
    jit(lambda x: autodiff.debug.print("{}", x) or 0.0)(3.0)
    assert capsys.readouterr().out == "3.0\n"


def test_bad_arguments():
    with pytest.raises(TypeError, match="must be callable"):
        autodiff.debug.callback("print", 1.0)
    with pytest.raises(TypeError, match="fmt must be a string"):
        autodiff.debug.print(1.0)
    with pytest.raises(TypeError, match="ordered"):
        autodiff.debug.callback(print, 1.0, ordered="yes")


# --- a callback with no traced operand, under jit ------------------------------------------------


@pytest.mark.parametrize("compile", [False, True])
def test_a_callback_without_traced_operands_runs_at_every_call(capsys, compile):
    """No operand, or a constant one: still one call per call of the jitted function
    (not one while staging), and none while ``custom_linear_solve`` checks its matvec."""

    def f(x):
        autodiff.debug.print("tick")
        autodiff.debug.print("const {}", np.arange(2))
        return x * 2

    g = jit(f, compile=compile)
    assert capsys.readouterr().out == ""
    for x in (1.0, 2.0, 3.0):
        assert g(x) == 2 * x
    assert capsys.readouterr().out == "tick\nconst [0 1]\n" * 3

    def matvec(v):
        autodiff.debug.print("matvec")
        return 2 * v

    def solve(b):
        return autodiff.custom_linear_solve(matvec, b, lambda mv, c: c / 2 + 0 * mv(c))

    np.testing.assert_allclose(solve(X), X / 2)
    np.testing.assert_allclose(jit(solve)(X), X / 2)
    assert capsys.readouterr().out == "matvec\n" * 2


# --- pure_callback --------------------------------------------------------------------------------


def sinc_sum(x, w, *, vmap_method="sequential", calls=None):
    """A two-result callback (NumPy's sinc and a product) with a static keyword."""

    def host(x, w, scale):
        if calls is not None:
            calls.append(np.shape(x))
        assert isinstance(x, np.ndarray) and isinstance(w, np.ndarray)
        # (written for a leading batch axis too, as expand_dims and broadcast_all need)
        return {"sinc": np.sinc(x) * scale, "sum": np.einsum("...ij,...j->...i", x, w)}

    spec = {"sinc": np.empty(np.shape(x)), "sum": np.empty(np.shape(x)[:-1])}
    return autodiff.pure_callback(host, spec, x, w, scale=3, vmap_method=vmap_method)


def reference(x, w):
    return {"sinc": np.sinc(x) * 3.0, "sum": x @ w}


def close(got, want):
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-14, atol=1e-15)


def test_pure_callback_eagerly_and_under_jit_every_call():
    rng = np.random.default_rng(0)
    calls: list = []
    f = jit(lambda x, w: sinc_sum(x, w, calls=calls))
    for _ in range(2):
        x, w = rng.normal(size=(3, 4)), rng.normal(size=4)
        close(sinc_sum(x, w), reference(x, w))
        close(f(x, w), reference(x, w))
    assert calls == [(3, 4), (3, 4)]  # once per call, after the one staging
    out = f(x, w)["sinc"]
    out[0] = 99.0  # a fresh result: the next call is not changed by it
    close(f(x, w), reference(x, w))


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
@pytest.mark.parametrize("axes", [(0, None), (1, 0), (2, None), (0, 0)])
def test_pure_callback_under_vmap_is_the_loop_over_examples(method, axes):
    """Each vmap_method, on every batch axis of x, w batched or not, eagerly and jitted:
    the loop over independently drawn examples."""
    rng = np.random.default_rng(1)
    x_axis, w_axis = axes
    x_shape, w_shape = [3, 4], [4]
    x_shape.insert(x_axis, 5)
    if w_axis is not None:
        w_shape.insert(w_axis, 5)
    x, w = rng.normal(size=x_shape), rng.normal(size=w_shape)
    f = vmap(lambda x, w: sinc_sum(x, w, vmap_method=method), in_dims=axes)
    wants = [reference(np.take(x, i, x_axis), w if w_axis is None else np.take(w, i, w_axis))
             for i in range(5)]  # fmt: skip
    want = {k: np.stack([r[k] for r in wants]) for k in wants[0]}
    close(f(x, w), want)
    close(jit(f)(x, w), want)


def test_pure_callback_vmap_methods_call_the_function_as_named():
    calls: list = []
    x, w = np.ones((5, 3, 4)), np.ones(4)
    vmap(lambda x: sinc_sum(x, w, calls=calls))(x)
    assert calls == [(3, 4)] * 5  # sequential: once per example
    calls.clear()
    vmap(lambda x: sinc_sum(x, w, vmap_method="expand_dims", calls=calls))(x)
    assert calls == [(5, 3, 4)]  # once, the batch first
    calls.clear()
    vmap(vmap(lambda x: sinc_sum(x, w, vmap_method="expand_dims", calls=calls)))(
        np.ones((2, 5, 3, 4)))  # fmt: skip
    assert calls == [(2, 5, 3, 4)]
    calls.clear()
    empty = vmap(lambda x: sinc_sum(x, w, calls=calls))(np.ones((0, 3, 4)))
    assert empty["sinc"].shape == (0, 3, 4) and empty["sum"].shape == (0, 3) and calls == []


def test_pure_callback_refuses_what_it_cannot_do():
    x, w = np.ones((2, 3)), np.ones(3)
    with pytest.raises(ValueError, match=r"pure_callback has no derivative.*custom_jvp"):
        grad(lambda x: anp.sum(sinc_sum(x, w)["sinc"]))(x)
    with pytest.raises(ValueError, match="pure_callback has no derivative"):
        jvp(lambda x: sinc_sum(x, w)["sum"], (x,), (x,))

    # a derivative through the other inputs only is fine: the callback's are constants
    def loss(w):
        return anp.sum(w) * anp.sum(sinc_sum(autodiff.stop_gradient(w) * x, np.ones(3))["sum"])

    np.testing.assert_allclose(grad(loss)(w), 6.0)
    with pytest.raises(ValueError, match="vmap_method="):
        vmap(lambda x: autodiff.pure_callback(np.sinc, np.empty(x.shape), x))(x)
    with pytest.raises(TypeError, match=r"result 0 .* shape \(3,\) and dtype float64, where .*"
                                        r"declares \(2,\)"):  # fmt: skip
        autodiff.pure_callback(np.sinc, np.empty(2), w)
    with pytest.raises(TypeError, match="dtype int64"):
        autodiff.pure_callback(lambda v: v.astype(np.int64), np.empty(3), w)
    with pytest.raises(TypeError, match="returned"):
        autodiff.pure_callback(lambda v: (v, v), np.empty(3), w)
    with pytest.raises(TypeError, match=r"\.shape and \.dtype"):
        autodiff.pure_callback(np.sinc, (3,), w)
    with pytest.raises(ValueError, match="vmap_method='loop'"):
        autodiff.pure_callback(np.sinc, np.empty(3), w, vmap_method="loop")
