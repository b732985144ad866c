"""The interpreter stack lives in a ContextVar: threads and asyncio tasks
transforming at the same time never see each other's levels."""

import asyncio
import itertools
import sys
import threading

import numpy as np

import autodiff.numpy as anp
from autodiff import grad, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap
from autodiff.core.stack import check_live, current_interpreters, new_interpreter
from autodiff.interpreters.reverse import GradInterpreter, GradTensor
from autodiff.interpreters.tape import Node, backward

xs = np.linspace(-1.0, 1.0, 5)
W = np.random.default_rng(5).standard_normal((5, 5))


def _workloads():
    """(name, function of k, expected value) with results that depend on k."""
    return [
        (
            "grad",
            lambda k: grad(lambda x: anp.sum(anp.tanh(W @ x) * k))(xs),
            lambda k: W.T @ ((1 - np.tanh(W @ xs) ** 2) * k),
        ),
        ("vmap-grad", lambda k: vmap(grad(lambda x: anp.sin(x) * k))(xs), lambda k: np.cos(xs) * k),
        ("grad-grad", lambda k: grad(grad(lambda x: x**3 * k))(float(k)), lambda k: 6.0 * k * k),
        (
            "jvp-vmap",
            lambda k: jvp(vmap(lambda x: x * x * k), (xs,), (np.ones(5),))[1],
            lambda k: 2 * xs * k,
        ),
    ]


def test_threads_running_different_transforms_get_correct_results():
    work = _workloads()
    errors, results = [], {}
    barrier = threading.Barrier(8)

    def run(t):
        name, f, _ = work[t % len(work)]
        try:
            barrier.wait()
            results[t] = [f(t + 1) for _ in range(150)]
            assert current_interpreters() == ()
        except Exception as e:  # reported below, with the thread
            errors.append((t, name, e))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for t, outs in results.items():
        expected = work[t % len(work)][2](t + 1)
        for out in outs:
            np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_asyncio_tasks_interleaving_inside_transforms():
    async def task(k):
        def f(x):
            return x * k

        total = 0.0
        for _ in range(20):
            # Yield to the other tasks while this task's transform is running.
            g = grad(lambda x: anp.sum(f(x)) * 1.0)(xs)
            await asyncio.sleep(0)
            total += float(np.sum(g))
        return total

    async def main():
        return await asyncio.gather(*(task(k) for k in range(1, 6)))

    totals = asyncio.run(main())
    np.testing.assert_allclose(totals, [20 * 5 * k for k in range(1, 6)])


def test_asyncio_to_thread_copies_of_the_context_do_not_share_a_stack():
    # asyncio.to_thread runs each call in a copy of the caller's context; a
    # mutable stack object in the ContextVar would be shared by all copies.
    work = _workloads()

    def run(k):
        _name, f, expected = work[k % len(work)]
        outs = [f(k + 1) for _ in range(100)]
        return [np.allclose(out, expected(k + 1), rtol=1e-12) for out in outs]

    async def main():
        return await asyncio.gather(*(asyncio.to_thread(run, k) for k in range(8)))

    assert all(all(oks) for oks in asyncio.run(main()))
    assert current_interpreters() == ()


# --- many threads, each running its own nested transforms ------------------------------------


def _nested_workloads():
    """name -> (function of (k, n), expected by hand): nested transforms, shapes set by n."""
    rng = np.random.default_rng(3)
    A = {n: rng.standard_normal((2, n)) for n in range(2, 6)}
    X = {n: rng.uniform(-1.0, 1.0, n) for n in range(2, 6)}
    XS = {n: rng.uniform(-1.0, 1.0, (4, n)) for n in range(2, 6)}
    WS = {n: rng.standard_normal((n, 2)) for n in range(2, 6)}

    def hess_tanh(k, n):  # d2/dx_j dx_l of k tanh(A x)_i
        h = np.tanh(A[n] @ X[n])
        return k * np.einsum("i,ij,il->ijl", -2 * h * (1 - h * h), A[n], A[n])

    return {
        "vmap(grad)": (
            lambda k, n: vmap(grad(lambda w, x: anp.sum(anp.sin(x @ w)) * k), in_dims=(None, 0))(
                WS[n], XS[n]
            ),
            lambda k, n: k * np.einsum("bi,bj->bij", XS[n], np.cos(XS[n] @ WS[n])),
        ),
        "jacfwd(jacrev)": (
            lambda k, n: jacfwd(jacrev(lambda x: anp.tanh(A[n] @ x) * k))(X[n]),
            hess_tanh,
        ),
        "grad(grad)": (
            lambda k, n: grad(grad(lambda t: k * t**3 + anp.sin(t)))(0.1 * n),
            lambda k, n: 6 * k * 0.1 * n - np.sin(0.1 * n),
        ),
        "jvp(grad)": (
            lambda k, n: jvp(grad(lambda x: k * anp.sum(x**4) / 4), (X[n],), (XS[n][0],))[1],
            lambda k, n: 3 * k * X[n] ** 2 * XS[n][0],
        ),
        "vmap(jvp)": (
            lambda k, n: vmap(lambda x: jvp(lambda y: anp.exp(y * k), (x,), (X[n],))[1])(XS[n]),
            lambda k, n: k * np.exp(k * XS[n]) * X[n],
        ),
        "hessian": (
            lambda k, n: hessian(lambda x: k * anp.sum(anp.sin(x)))(XS[n][:2]),
            lambda k, n: np.einsum("ij,ik,jl->ijkl", -k * np.sin(XS[n][:2]), np.eye(2), np.eye(n)),
        ),
        "grad(vmap)": (
            lambda k, n: grad(lambda xs: anp.sum(vmap(lambda r: k * (r @ r))(xs)))(XS[n]),
            lambda k, n: 2 * k * XS[n],
        ),
        "jacrev(jvp)": (
            lambda k, n: jacrev(lambda x: jvp(lambda y: k * anp.sin(y), (x,), (X[n],))[1])(X[n]),
            lambda k, n: np.diag(-k * np.sin(X[n]) * X[n]),
        ),
    }


def test_eight_threads_running_nested_transforms_match_single_threaded_runs():
    work = _nested_workloads()
    names = list(work)
    # thread t: workload t, its own scale k and shapes n; 120 iterations each
    plans = [(names[t], t + 1.0, 2 + t % 4) for t in range(8)]
    single = [work[name][0](k, n) for name, k, n in plans]
    for (name, k, n), result in zip(
        plans, single, strict=True
    ):  # the single-threaded runs are right
        np.testing.assert_allclose(result, work[name][1](k, n), rtol=1e-12, atol=1e-14)

    errors, results = [], {}
    barrier = threading.Barrier(8)

    def run(t):
        name, k, n = plans[t]
        try:
            barrier.wait()
            outs = []
            for _ in range(120):
                outs.append(work[name][0](k, n))
                assert current_interpreters() == ()
            results[t] = outs
        except Exception as e:  # reported below, with the thread
            errors.append((t, name, e))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: in the middle of transforms
    try:
        threads = [threading.Thread(target=run, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(switch)
    assert not errors, errors
    for t, outs in results.items():
        for out in outs:
            np.testing.assert_array_equal(out, single[t], strict=True)


def test_each_thread_sees_only_its_own_levels_while_others_transform():
    depths, errors = [], []
    barrier = threading.Barrier(8)

    def run(t):
        def innermost(x):
            stack = current_interpreters()
            # this thread's three levels, in order, none of the other threads'
            depths.append(len(stack))
            assert [type(i).__name__ for i in stack] == kinds
            assert all(a.level < b.level for a, b in itertools.pairwise(stack))
            return anp.sin(x) * (t + 1)

        kinds = ["BatchInterpreter", "GradInterpreter", "JvpInterpreter"]
        f = vmap(grad(lambda x: jvp(innermost, (x,), (1.0,))[1]))
        try:
            barrier.wait()
            for _ in range(30):
                np.testing.assert_allclose(f(xs), -np.sin(xs) * (t + 1), rtol=1e-12)
        except Exception as e:  # reported below
            errors.append((t, e))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=run, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(switch)
    assert not errors, errors
    assert depths == [3] * (8 * 30)


# --- asyncio tasks that await inside their transforms -----------------------------------------


async def async_grad(afunc, x):
    """``grad`` of an async function: the transform stays open across its awaits, so other
    tasks run (and push and pop their own transforms) while this one is inside it."""
    interp = GradInterpreter("grad")
    with new_interpreter(interp):
        node = Node(None, {}, (), None, ())
        out = check_live(await afunc(GradTensor(interp, x, node)))
        assert isinstance(out, GradTensor) and out._interp is interp
    cts = backward([(out.node, None, np.ones_like(out.value))], consume=True)
    return cts.get(node, np.zeros_like(x))


ROWS = np.array([[1.0, 2.0, -1.0, 0.5, 0.0], [0.5, -0.5, 1.0, 2.0, 1.5]])


async def _steps(x, k, stack_checks):
    """Several transformed steps with awaits between them, inside the caller's transform."""
    own = current_interpreters()
    y = anp.sin(x) * k  # recorded by our grad
    await asyncio.sleep(0)
    stack_checks.append(current_interpreters() == own)
    z = vmap(lambda r: anp.sum(r * y))(ROWS)  # an inner vmap closing over our tracer
    await asyncio.sleep(0)
    stack_checks.append(current_interpreters() == own)
    h = grad(lambda t: anp.sum(anp.tanh(t * y)))(x)  # an inner grad (perturbations apart)
    await asyncio.sleep(0)
    stack_checks.append(current_interpreters() == own)
    _, tangent = jvp(lambda u: anp.exp(u * 0.5), (x,), (y,))
    await asyncio.sleep(0)
    stack_checks.append(current_interpreters() == own)
    return anp.sum(z) + anp.sum(h * x) + anp.sum(tangent)


def _steps_sync(x, k):
    """The same computation, no awaits, for the public grad and finite differences."""
    y = anp.sin(x) * k
    z = vmap(lambda r: anp.sum(r * y))(ROWS)
    h = grad(lambda t: anp.sum(anp.tanh(t * y)))(x)
    _, tangent = jvp(lambda u: anp.exp(u * 0.5), (x,), (y,))
    return anp.sum(z) + anp.sum(h * x) + anp.sum(tangent)


def test_asyncio_tasks_awaiting_inside_their_transforms_interleave():
    x0 = np.linspace(-0.9, 0.7, 5)
    ks = [0.5 * (i + 1) for i in range(8)]
    expected = [grad(_steps_sync)(x0, k) for k in ks]
    for k, g in zip(ks[:2], expected):  # the reference is right: central differences
        eps, eye = 1e-6, np.eye(5)
        fd = [(_steps_sync(x0 + eps * e, k) - _steps_sync(x0 - eps * e, k)) / (2 * eps)
              for e in eye]  # fmt: skip
        np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)

    order, stack_checks = [], []

    async def task(i):
        outs = []
        for _ in range(10):
            order.append(i)
            outs.append(await async_grad(lambda x: _steps(x, ks[i], stack_checks), x0))
        return outs

    async def main():
        return await asyncio.gather(*(task(i) for i in range(8)))

    results = asyncio.run(main())
    assert stack_checks and all(stack_checks)
    assert order[:8] == list(range(8))  # every task entered its transform before any left
    for i, outs in enumerate(results):
        for out in outs:
            np.testing.assert_allclose(out, expected[i], rtol=1e-12)
    assert current_interpreters() == ()


def test_asyncio_tasks_call_vjp_fn_and_jvp_fn_across_awaits():
    async def task(k):
        x = np.linspace(0.1, 0.9, 4) * k
        _, vjp_fn = vjp(lambda y: anp.tanh(y) * k, x)
        _, jvp_fn = linearize(lambda y: anp.exp(y * k), x)
        await asyncio.sleep(0)  # the other tasks' transforms run in between
        (g,) = vjp_fn(np.ones(4))
        await asyncio.sleep(0)
        t = jvp_fn(np.ones(4))
        await asyncio.sleep(0)
        return g, t, x

    async def main():
        return await asyncio.gather(*(task(k) for k in (1.0, 2.0, 3.0, 4.0, 5.0)))

    for k, (g, t, x) in zip((1.0, 2.0, 3.0, 4.0, 5.0), asyncio.run(main()), strict=True):
        np.testing.assert_allclose(g, k * (1 - np.tanh(x) ** 2), rtol=1e-12)
        np.testing.assert_allclose(t, k * np.exp(k * x), rtol=1e-12)
