"""The interpreter stack lives in a ContextVar: threads and asyncio tasks
transforming at the same time never see each other's levels."""

import asyncio
import threading

import numpy as np

import autodiff.numpy as anp
from autodiff import grad, jvp, vmap
from autodiff._core import current_interpreters

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
