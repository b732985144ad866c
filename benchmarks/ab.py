"""Interleaved A/B of two commits in one process: W1 (eager and jit) and the first call
of jit, and a program of the same kind written apart from the workloads.

    python -m benchmarks.ab BASE [HEAD] [--rounds N]

Each commit's ``autodiff`` is exported (``git archive``) into a temporary folder under
a name of its own (``autodiff_a``, ``autodiff_b``: every ``autodiff`` in its sources
renamed), so both import side by side, each with its own tracers, tables and caches.
Every round times each metric on both, the order flipping each round, so drift and
noise hit both alike; the report gives each commit's median and the median and
interquartile range of the per-round ratios HEAD/BASE.  Times are this process's CPU
time: on a shared machine wall time swings with other jobs' load (W1's forward pass read
1.14x in wall time and 1.000x in CPU time under a load of 7).  For changes whose speed
must stay within noise (a refactoring: issue 29).
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import workloads as w

ROOT = pathlib.Path(__file__).resolve().parents[1]
X = np.linspace(0.1, 0.8, 8)


def export(commit: str, name: str, into: pathlib.Path) -> Any:
    """``commit``'s package, importable as ``name``."""
    archive = subprocess.run(["git", "archive", commit, "autodiff"], cwd=ROOT,
                             capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    (into / "autodiff").rename(into / name)
    for path in (into / name).rglob("*.py"):
        path.write_text(re.sub(r"\bautodiff\b", name, path.read_text()))
    return importlib.import_module(name)


def fresh(anp: Any) -> Callable:
    """A program of W1's kind that nothing was tuned on: other elementwise functions,
    and compositions (mean, var, moveaxis, linalg.norm) between them."""

    def f(v: Any) -> Any:
        for _ in range(25):
            v = anp.exp(-v * v) * 0.9 + 0.05
            v = anp.cos(v) - anp.mean(v)
            v = v / (1.0 + anp.var(v))
        return anp.linalg.norm(anp.moveaxis(anp.reshape(v, (2, 4)), 0, 1)) + anp.sum(v)

    return f


def _per_call(fn: Callable, inner: int) -> float:
    start = time.process_time()
    for _ in range(inner):
        fn()
    return (time.process_time() - start) / inner


def _first_call(ad: Any, make: Callable) -> float:
    jitted = ad.jit(make())  # a new function: nothing cached for it
    start = time.process_time()
    jitted(X)
    return time.process_time() - start


def metrics(ad: Any) -> dict[str, Callable[[], float]]:
    anp = importlib.import_module(ad.__name__ + ".numpy")
    ad.jit(lambda v: anp.sum(anp.tanh(v) * 2.0))(np.ones(3))  # as first_call.py: warm-up

    def w1_grad():
        return ad.grad(lambda v: anp.sum(w.chain(anp, v)))

    replay, compiled = ad.jit(w1_grad(), compile=False), ad.jit(w1_grad(), compile=True)
    compiled(X), compiled(X)  # staged, then compiled: not timed
    f = fresh(anp)
    f_replay = ad.jit(ad.grad(f), compile=False)
    out = {
        "W1 grad eager": lambda: _per_call(lambda: w1_grad()(X), 10),
        "W1 grad jit (replay)": lambda: _per_call(lambda: replay(X), 100),
        "W1 grad jit (compiled)": lambda: _per_call(lambda: compiled(X), 1000),
        "W1 forward eager": lambda: _per_call(lambda: w.chain(anp, X), 100),
        "W1 first call of jit(grad)": lambda: _first_call(ad, w1_grad),
        "fresh grad eager": lambda: _per_call(lambda: ad.grad(f)(X), 5),
        "fresh grad jit (replay)": lambda: _per_call(lambda: f_replay(X), 50),
        "fresh first call of jit(grad)": lambda: _first_call(ad, lambda: ad.grad(f)),
    }
    for measure in out.values():
        measure()  # every path once before timing
    return out


def interleaved(metrics: Callable[[Any], dict[str, Callable[[], float]]], base: str, head: str,
                rounds: int) -> dict[str, tuple[list[float], list[float]]]:  # fmt: skip
    """Per metric, the times of ``base`` and of ``head`` over ``rounds`` rounds (the order
    flipping each round); ``metrics(ad)`` gives a commit's metrics, each a function
    returning one time."""
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)
        a = metrics(export(base, "autodiff_a", pathlib.Path(tmp)))
        b = metrics(export(head, "autodiff_b", pathlib.Path(tmp)))
        times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in a}
        for r in range(rounds):
            for k in a:
                if r % 2:
                    times[k][1].append(b[k]())
                    times[k][0].append(a[k]())
                else:
                    times[k][0].append(a[k]())
                    times[k][1].append(b[k]())
    return times


def report(times: dict[str, tuple[list[float], list[float]]], base: str, head: str) -> None:
    """Each metric's medians and the median and interquartile range of head/base."""
    print(f"{'':32} {base[:12]:>12} {head[:12]:>12} {'head/base':>10}  ratio IQR")
    for k, (ta, tb) in times.items():
        ratios = [y / x for x, y in zip(ta, tb)]
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        unit, scale = ("ms", 1e3) if statistics.median(ta) > 1e-3 else ("us", 1e6)
        print(f"{k:32} {statistics.median(ta) * scale:9.2f} {unit} "
              f"{statistics.median(tb) * scale:9.2f} {unit} {statistics.median(ratios):10.3f}"
              f"  [{q1:.3f}, {q3:.3f}]")  # fmt: skip


def run_ab(metrics: Callable, doc: str, rounds: int) -> None:
    """The command line of an A/B script: ``BASE [HEAD] [--rounds N]``, then the report."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("base")
    parser.add_argument("head", nargs="?", default="HEAD")
    parser.add_argument("--rounds", type=int, default=rounds)
    args = parser.parse_args()
    report(interleaved(metrics, args.base, args.head, args.rounds), args.base, args.head)


def main() -> None:
    run_ab(metrics, __doc__, 100)


if __name__ == "__main__":
    main()
