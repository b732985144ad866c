"""When compile="auto" compiles (``compiler/tiers.py``): a signature once hot by calls or
by the time its calls took, ahead of its loops' bodies, which wait for it and never
compile where its kernels hold them."""

from __future__ import annotations

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import jit, scan
from autodiff.compiler import background, tiers
from autodiff.compiler.derived import derived_of
from autodiff.compiler.stages import default_backend, optimized
from tests.jit_contract import assert_exact

pytestmark = [
    pytest.mark.interpreted,  # the tiers as a user meets them (tests/conftest.py)
    pytest.mark.skipif(not default_backend().available(), reason="no compiling backend here"),
]


def _held_jobs(monkeypatch) -> list:
    jobs: list = []
    monkeypatch.setattr(background, "compile_later",
                        lambda job, nested=False: jobs.append((job, nested)))  # fmt: skip
    return jobs


def _rnn(x):
    """A scan whose body runs hot within one call."""

    def step(h, w):
        h = anp.tanh(h * w + 0.5) * 0.9
        return h, anp.sum(h)

    h, ys = scan(step, x, np.linspace(0.5, 1.5, 40))
    return anp.sum(h) + anp.sum(ys)


def test_a_slow_replay_is_hot_at_its_first_counted_call(monkeypatch):
    jobs = _held_jobs(monkeypatch)
    x = np.linspace(-1.0, 1.0, 5)
    f = lambda x: anp.sin(x) * 2.0 + anp.cos(x)
    jitted = jit(f)
    monkeypatch.setattr(tiers, "HOT_SECONDS", 0.0)  # every call "slow"
    jitted(x)  # interpreted: not counted
    assert jobs == []
    jitted(x)  # the replay written and run: counted, hot
    assert [nested for _, nested in jobs] == [False]
    monkeypatch.setattr(tiers, "HOT_SECONDS", float("inf"))
    slow = jit(lambda x: anp.tanh(x) * 3.0 - x)
    for _ in range(tiers.HOT_CALLS):  # by calls: the interpreted one, then HOT_CALLS - 1
        slow(x)
    assert len(jobs) == 1
    slow(x)
    assert len(jobs) == 2


def test_the_loop_bodies_wait_for_their_function_and_retire_when_it_holds_them(monkeypatch):
    """The scan's body runs 40 times a call: it compiles on its own only after
    LATE_CALLS, never before the function's job; once the function's kernels hold the
    loop, the body is never compiled at all."""
    jobs = _held_jobs(monkeypatch)
    x = np.linspace(-1.0, 1.0, 5)
    jitted = jit(_rnn)
    for _ in range(tiers.HOT_CALLS + 1):
        assert_exact(jitted(x), _rnn(x), rtol=0)
    assert [nested for _, nested in jobs] == [False]  # the signature's alone
    graph = next(iter(jitted._entries.values())).traced.graph
    (loop,) = [e for e in optimized(graph).eqns if e.prim.name == "scan"]
    body = derived_of(loop.params["body"].graph)
    assert body.mode == tiers.AFTER_FUNCTION and body.run is None
    jobs[0][0]()  # the background thread's work: the whole loop in one kernel
    assert body.mode is False
    for _ in range(3):
        assert_exact(jitted(x), _rnn(x), rtol=0)
    assert len(jobs) == 1 and body.run is None  # the body never compiled on its own


def test_a_deferred_body_compiles_after_late_calls(monkeypatch):
    """A function called once, its loop long: the body compiles on its own once it has
    run LATE_CALLS times, after the signatures' jobs (nested)."""
    jobs = _held_jobs(monkeypatch)
    monkeypatch.setattr(tiers, "LATE_CALLS", 30)
    x = np.linspace(-1.0, 1.0, 5)
    assert_exact(jit(_rnn)(x), _rnn(x), rtol=0)  # one call, interpreted: 40 steps
    assert [nested for _, nested in jobs] == [True]


def test_a_background_job_switches_threads_often_and_restores_the_interval():
    """While the worker writes code in Python, the program's thread gets the GIL back
    within ``SWITCH_INTERVAL`` after each NumPy call that released it (at Python's 5 ms a
    long replay beside a long compile ran many times slower); after the job, failed or
    not, the interval is the program's again."""
    import sys

    before = sys.getswitchinterval()
    seen = []

    def job(fail):
        seen.append(sys.getswitchinterval())
        if fail:
            raise RuntimeError("a kernel that does not compile")

    for fail in (False, True):
        background.compile_later(lambda fail=fail: job(fail))
        assert background.wait_for_background(60)
    assert seen == pytest.approx([background.SWITCH_INTERVAL] * 2)
    assert before > background.SWITCH_INTERVAL
    assert sys.getswitchinterval() == before
