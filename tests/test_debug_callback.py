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
