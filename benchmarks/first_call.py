"""The first calls of a jitted function against one eager call of the same function:
the first (staging, then the staged graph interpreted), the second (the passes, code
generation and compilation, then the replay), and the parts of both.

    python -m benchmarks.first_call

Each workload is jitted afresh (a new function object, so nothing is cached for it)
five times; the report gives medians of the first call and of its parts, and of one
eager call.  The process is warmed up first (one other function staged), since the
first staging in a process also fills caches of the library's own (the dtypes of
elementwise primitives).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import optree

import autodiff
import autodiff.numpy as anp
from autodiff.compiler.passes import optimize
from autodiff.compiler.replay import array_kind, compile_graph
from benchmarks import workloads as w


def _workloads() -> dict[str, tuple[Callable[[], Callable], tuple]]:
    x8 = np.linspace(0.1, 0.8, 8)
    X, Y, params = w.mlp_data()
    rng = np.random.default_rng(4)
    A, x64 = rng.standard_normal((64, 64)) / 8, rng.standard_normal(64)
    return {
        "W1 grad (201-op chain)": (
            lambda: autodiff.grad(lambda v: anp.sum(w.chain(anp, v))), (x8,)),
        "W1 forward (200-op chain)": (lambda: (lambda v: w.chain(anp, v)), (x8,)),
        "W4 hessian (n = 64)": (
            lambda: autodiff.hessian(lambda v: anp.sum(anp.tanh(A @ v) ** 2)), (x64,)),
        "W2 grad (MLP)": (lambda: autodiff.grad(lambda p: w.mlp_loss(anp, p, X, Y)), (params,)),
    }  # fmt: skip


def _time(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(repeats: int = 5) -> list[dict]:
    autodiff.jit(lambda v: anp.sum(anp.tanh(v) * 2.0))(np.ones(3))  # warm-up
    rows = []
    for name, (make, args) in _workloads().items():
        eager = statistics.median(_time(lambda m=make, a=args: m()(*a)) for _ in range(repeats))
        first, second, parts = [], [], []
        for _ in range(repeats):
            jitted = autodiff.jit(make())
            first.append(_time(lambda j=jitted, a=args: j(*a)))
            second.append(_time(lambda j=jitted, a=args: j(*a)))
            # the same steps again, one by one, for the breakdown
            again = autodiff.jit(make())
            t0 = time.perf_counter()
            traced = again.trace(*args)
            graph, leaves = traced.graph, optree.tree_leaves(args)
            t1 = time.perf_counter()
            final = optimize(graph, inline_rules=True)
            t2 = time.perf_counter()
            compile_graph(final, *array_kind(leaves))
            t3 = time.perf_counter()
            parts.append((t1 - t0, t2 - t1, t3 - t2, len(graph.eqns), len(final.eqns)))
        median = [statistics.median(p[k] for p in parts) for k in range(5)]
        rows.append({
            "workload": name, "eager_ms": eager * 1e3, "first_ms": statistics.median(first) * 1e3,
            "second_ms": statistics.median(second) * 1e3,
            "stage_ms": median[0] * 1e3, "passes_ms": median[1] * 1e3,
            "codegen_ms": median[2] * 1e3, "eqns": int(median[3]), "final_eqns": int(median[4]),
        })  # fmt: skip
    return rows


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| workload | one eager call ms | first jit call ms | x eager | second call ms "
        "| staging ms | passes ms | code generation + compile ms | staging + passes + code, "
        "x eager | equations staged / replayed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        staged = r["stage_ms"] + r["passes_ms"] + r["codegen_ms"]
        lines.append(
            f"| {r['workload']} | {r['eager_ms']:.3g} | {r['first_ms']:.3g} | "
            f"{r['first_ms'] / r['eager_ms']:.2f} | {r['second_ms']:.3g} | {r['stage_ms']:.3g} | "
            f"{r['passes_ms']:.3g} | {r['codegen_ms']:.3g} | {staged / r['eager_ms']:.2f} | "
            f"{r['eqns']} / {r['final_eqns']} |"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(table(measure())))
