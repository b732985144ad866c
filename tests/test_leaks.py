"""Leaked tracers: every way a traced value can outlive its transform is caught on its
next use, with a ``LeakedTracerError`` that names the transform.

``test_semantics.py`` pins the basic case (a list, then arithmetic, for grad, jvp and
vmap); here each way of escaping is one test, over every transform, and every kind of
next use is checked for every transform.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import (
    explain,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    stop_gradient,
    value_and_grad,
    vjp,
    vmap,
)
from autodiff.errors import LeakedTracerError
from autodiff.extend import current_interpreters
from tests.test_concurrency import async_grad  # grad of an async function: open across awaits

X = np.array([0.3, -0.8, 1.1])
ROWS = np.stack([X, 2 * X])


def total(f):
    return lambda x: anp.sum(f(x))


# name: (run f under the transform, the tracer class and the transform its message names)
TRANSFORMS = {
    "grad": (lambda f: grad(total(f))(X), "GradTensor", "grad"),
    "grad_and_value": (lambda f: grad_and_value(total(f))(X), "GradTensor", "grad_and_value"),
    "value_and_grad": (lambda f: value_and_grad(total(f))(X), "GradTensor", "value_and_grad"),
    "vjp": (lambda f: vjp(f, X)[1](X), "GradTensor", "vjp"),
    "jvp": (lambda f: jvp(f, (X,), (X,)), "DualTensor", "jvp"),
    "vmap": (lambda f: vmap(f)(ROWS), "BatchedTensor", "vmap"),
    "jacrev": (lambda f: jacrev(f)(X), "GradTensor", "jacrev"),
    # jacfwd is vmap of jvp: the function sees jvp's tracers
    "jacfwd": (lambda f: jacfwd(f)(X), "DualTensor", "jvp"),
    # hessian is jacfwd(jacrev): the function sees jacrev's tracers
    "hessian": (lambda f: hessian(total(f))(X), "GradTensor", "jacrev"),
    "linearize": (lambda f: linearize(f, X)[1](X), "GradTensor", "linearize"),
    "explain": (lambda f: explain(f)(X), "ExplainTensor", "explain"),
}


def leaked_error(transform):
    _, cls, name = TRANSFORMS[transform]
    return pytest.raises(
        LeakedTracerError, match=rf"{cls} of {name} \(level \d+\) used after that transform ended"
    )


def leak_from(transform, leak):
    """Run ``leak(x)`` (which stores x somewhere and returns nothing) inside the transform."""

    def f(x):
        leak(x)
        return x * x

    TRANSFORMS[transform][0](f)


# --- every next use, for every transform ---------------------------------------------------


USES = {
    "multiply": lambda t: t * 2.0,
    "reflected add": lambda t: 1.0 + t,
    "in-place add": lambda t: t.__iadd__(1.0),
    "np.sin": np.sin,
    "np.sum": np.sum,
    "np.dot": lambda t: np.dot(t, X),
    "np.stack": lambda t: np.stack([t, t]),
    "anp.exp": anp.exp,
    "method": lambda t: t.sum(),
    "index": lambda t: t[0],
    "iterate": list,
    "compare": lambda t: t > 0,
    "float": lambda t: float(t[0]),
    "bool": lambda t: bool(t[0] > 0),
    "np.asarray": np.asarray,
    "stop_gradient": stop_gradient,
    "grad (closure)": lambda t: grad(lambda y: y * anp.sum(t))(1.0),
    "vmap (closure)": lambda t: vmap(lambda y: y * t)(np.ones(2)),
    "jvp (closure)": lambda t: jvp(lambda y: y * t, (1.0,), (1.0,)),
    "grad (input)": lambda t: grad(lambda y: anp.sum(y * y))(t),
    "vjp (input, identity)": lambda t: vjp(lambda y: y, t),
    "jvp (input, identity)": lambda t: jvp(lambda y: y, (t,), (np.ones(3),)),
    "vmap (input, identity)": lambda t: vmap(lambda y: y)(t),
    "vmap (input, unused)": lambda t: vmap(lambda r, c: r, in_dims=(0, None))(ROWS, t),
    "linearize (input)": lambda t: linearize(lambda y: y, t),
    "jacrev (input)": lambda t: jacrev(lambda y: y)(t),
}


@pytest.mark.parametrize("use", list(USES))
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_every_next_use_of_a_leaked_tracer_raises_naming_its_transform(transform, use):
    box = []
    leak_from(transform, box.append)
    (tracer,) = box
    with leaked_error(transform):
        USES[use](tracer)
    # what needs no value still works, for debugging
    assert tracer.shape == (3,) and tracer.dtype == np.float64
    assert TRANSFORMS[transform][2] in repr(tracer)


# --- every way out ---------------------------------------------------------------------------

LEAKED = None


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_stored_in_a_global(transform):
    def leak(x):
        global LEAKED
        LEAKED = anp.sin(x)

    leak_from(transform, leak)
    with leaked_error(transform):
        LEAKED + 1.0


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_captured_by_a_closure_called_later(transform):
    closures = []
    leak_from(transform, lambda x: closures.append(lambda k: x * k))
    with leaked_error(transform):
        closures[0](2.0)
    with leaked_error(transform):  # the closure handed to another transform
        grad(lambda y: anp.sum(closures[0](y)))(1.0)


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_kept_in_a_nonlocal_cell(transform):
    def make():
        cell = None

        def leak(x):
            nonlocal cell
            cell = x

        return leak, lambda: cell

    leak, read = make()
    leak_from(transform, leak)
    with leaked_error(transform):
        np.exp(read())


class Holder:
    """Not a pytree: transforms do not look inside it."""

    def __init__(self, value):
        self.value = value


HAS_AUX = {
    "grad": lambda f: grad(f, has_aux=True)(X)[1],
    "grad_and_value": lambda f: grad_and_value(f, has_aux=True)(X)[1][1],
    "value_and_grad": lambda f: value_and_grad(f, has_aux=True)(X)[0][1],
    "vjp": lambda f: vjp(f, X, has_aux=True)[2],
    "jvp": lambda f: jvp(f, (X,), (X,), has_aux=True)[2],
    "jacrev": lambda f: jacrev(f, has_aux=True)(X)[1],
    "jacfwd": lambda f: jacfwd(f, has_aux=True)(X)[1],
}


@pytest.mark.parametrize("transform", list(HAS_AUX))
def test_returned_inside_aux(transform):
    def f(x):
        # The pytree part of aux is unwrapped; the object is opaque, its tracer escapes.
        return anp.sum(x * x), {"plain": x * 2.0, "object": Holder(x * 3.0)}

    aux = HAS_AUX[transform](f)
    np.testing.assert_array_equal(aux["plain"], 2.0 * X)  # unwrapped: a plain array
    assert isinstance(aux["plain"], np.ndarray)
    with leaked_error(transform):
        aux["object"].value * 2.0


@pytest.mark.parametrize("transform", list(HAS_AUX))
def test_tracer_of_an_inner_transform_returned_inside_aux(transform):
    def f(x):
        inner = []
        vmap(lambda r: inner.append(r) or r)(ROWS)
        return anp.sum(x * x), inner[0]

    error = pytest.raises(LeakedTracerError, match=r"BatchedTensor of vmap \(level \d+\)")
    if transform == "jacfwd":  # its own vmap checks its outputs, aux included: at once
        with error:
            HAS_AUX[transform](f)
        return
    aux = HAS_AUX[transform](f)
    with error:  # the others on its next use
        anp.sin(aux)


class Model:
    def __init__(self):
        self.w = np.array([0.5, -1.0, 2.0])

    def __call__(self, x):
        self.activation = anp.tanh(self.w * x)  # kept "for inspection"
        return self.activation * x


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_stored_as_an_attribute_of_an_object(transform):
    model = Model()
    TRANSFORMS[transform][0](model)
    with leaked_error(transform):
        model.activation.mean()


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_yielded_from_a_generator_that_outlives_the_call(transform):
    generators = []

    def powers(x):
        p = x
        while True:
            yield p
            p = p * x  # runs when the generator is resumed

    def f(x):
        gen = powers(x)
        first = next(gen)  # used inside: fine
        generators.append(gen)
        return first * 1.0

    TRANSFORMS[transform][0](f)
    with leaked_error(transform):
        next(generators[0])  # resumed after the transform ended


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_yielded_value_used_after_the_call(transform):
    def f(x):
        gen = iter([x * 2.0, x * 3.0])
        values.append(gen)
        return next(gen)

    values = []
    TRANSFORMS[transform][0](f)
    with leaked_error(transform):
        anp.log(next(values[0]))


@pytest.mark.parametrize("container", ["list", "dict", "dict keyed by id", "tuple in a list"])
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_put_in_a_container_that_outlives_the_call(transform, container):
    kept: dict = {"list": [], "dict": {}, "dict keyed by id": {}, "tuple in a list": []}

    def leak(x):
        if container == "list":
            kept["list"].append(x)
        elif container == "dict":
            kept["dict"]["x"] = x
        elif container == "dict keyed by id":
            kept["dict keyed by id"][id(x)] = x  # tracers are unhashable: keyed by id
        else:
            kept["tuple in a list"].append((1, (x, "label")))

    leak_from(transform, leak)
    tracer = {
        "list": lambda: kept["list"][0],
        "dict": lambda: kept["dict"]["x"],
        "dict keyed by id": lambda: next(iter(kept["dict keyed by id"].values())),
        "tuple in a list": lambda: kept["tuple in a list"][0][1][0],
    }[container]()
    with leaked_error(transform):
        tracer @ X


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_carried_out_by_an_exception(transform):
    class Diverged(Exception):
        pass

    def f(x):
        raise Diverged("loss diverged", x * 10.0)

    with pytest.raises(Diverged) as info:
        TRANSFORMS[transform][0](f)
    with leaked_error(transform):
        np.abs(info.value.args[1])


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_bound_by_functools_partial(transform):
    partials = []
    leak_from(transform, lambda x: partials.append(functools.partial(np.multiply, x)))
    with leaked_error(transform):
        partials[0](2.0)


NESTING = {
    "grad": lambda f: lambda x: grad(total(f))(x),
    "vjp": lambda f: lambda x: vjp(f, x)[1](np.ones(3))[0],
    "jvp": lambda f: lambda x: jvp(f, (x,), (np.ones(3),))[1],
    "vmap": lambda f: lambda x: vmap(f)(anp.stack([x, x]))[0],
    "jacrev": lambda f: lambda x: jacrev(f)(x)[0],
}
INNER = {name: TRANSFORMS[name][1:] for name in NESTING}


@pytest.mark.parametrize("inner", list(NESTING))
@pytest.mark.parametrize("outer", list(NESTING))
def test_tracer_of_a_nested_transform_returned_from_the_outer_function(outer, inner):
    """The inner transform's tracer escapes it (through a list) and is returned by the
    outer function: the outer transform raises at once, naming the inner one."""

    def f(x):
        box = []
        NESTING[inner](lambda y: box.append(y) or y * x)(x)
        return box[0]

    cls, name = INNER[inner]
    with pytest.raises(LeakedTracerError, match=rf"{cls} of {name} \(level \d+\)"):
        NESTING[outer](f)(X)


@pytest.mark.parametrize("inner", list(NESTING))
@pytest.mark.parametrize("outer", list(NESTING))
def test_tracer_of_a_finished_nested_transform_used_by_the_outer_one(outer, inner):
    def f(x):
        box = []
        NESTING[inner](lambda y: box.append(y) or y * x)(x)
        return x * anp.sum(box[0])  # the inner transform has ended

    cls, name = INNER[inner]
    with pytest.raises(LeakedTracerError, match=rf"{cls} of {name} \(level \d+\)"):
        NESTING[outer](f)(X)


# --- other threads and tasks ---------------------------------------------------------------


def test_tracer_handed_to_another_thread_after_its_transform_ended():
    out: queue.Queue = queue.Queue()
    box = []
    leak_from("grad", box.append)

    def use():
        try:
            anp.sin(box[0])
        except LeakedTracerError as e:
            out.put(e)

    thread = threading.Thread(target=use)
    thread.start()
    thread.join()
    assert "GradTensor of grad" in str(out.get_nowait())


@pytest.mark.parametrize("theirs", ["grad", "jvp", "vmap"])
@pytest.mark.parametrize("ours", ["grad", "vjp", "jvp", "vmap"])
def test_live_tracer_of_a_transform_in_another_thread_cannot_reach_our_output(ours, theirs):
    """Thread B's transform started first, so A's tracer (a later, higher level) would
    wrap B's values, and B's transform would find a foreign tracer where its own should
    be: its derivative would silently be zero.  B gets an error instead."""
    to_b: queue.Queue = queue.Queue()
    b_done = threading.Event()
    b_started = threading.Event()
    results: dict = {}

    def thread_b():
        def fb(y):
            b_started.set()
            return y * to_b.get(timeout=10)  # A's live tracer

        try:
            results["b"] = NESTING[ours](fb)(X)
        except Exception as e:  # checked below
            results["b"] = e
        finally:
            b_done.set()

    def fa(x):
        to_b.put(x * 1.0)
        assert b_done.wait(timeout=10)
        return x * 2.0

    thread = threading.Thread(target=thread_b)
    thread.start()
    assert b_started.wait(timeout=10)  # B's transform is running (lower level)
    a = NESTING[theirs](fa)(X)
    thread.join()
    np.testing.assert_array_equal(a, {"grad": 2.0, "jvp": 2.0, "vmap": 2 * X}[theirs] + 0 * X)
    assert isinstance(results["b"], LeakedTracerError), results["b"]
    cls, name = TRANSFORMS[theirs][1:]
    assert f"{cls} of {name}" in str(results["b"])
    assert "another thread" in str(results["b"])


def test_live_tracer_of_another_asyncio_task_cannot_reach_our_output():
    async def main():
        handoff: asyncio.Queue = asyncio.Queue()
        b_done = asyncio.Event()

        async def task_b():
            async def fb(y):
                t = await handoff.get()
                assert len(current_interpreters()) == 1  # B's own level only
                return anp.sum(y * t)

            try:
                return await async_grad(fb, X)
            except LeakedTracerError as e:
                return e
            finally:
                b_done.set()

        async def task_a():
            async def fa(x):
                await handoff.put(x * 1.0)
                await b_done.wait()
                return anp.sum(x * 2.0)

            return await async_grad(fa, X)

        b = asyncio.create_task(task_b())
        await asyncio.sleep(0)  # B's transform starts first
        return await asyncio.gather(b, task_a())

    b, a = asyncio.run(main())
    np.testing.assert_array_equal(a, 2.0 + 0 * X)
    assert isinstance(b, LeakedTracerError) and "another thread" in str(b)
