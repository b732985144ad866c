"""Why a target was missed: measurements and a profile, written into results.md.

Each function returns markdown lines for one workload; ``__main__`` calls the
ones whose targets were missed.  The numbers are measured here, in this run.
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import autodiff
import autodiff.numpy as anp
from autodiff.interpreters.reverse import _vjp
from benchmarks import workloads as w


def _median_time(fn: Callable[[], Any], inner: int, rounds: int = 9) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def w1(per_op_us: float, reference_us: float) -> list[str]:
    """Split one primitive's cost under grad into NumPy, recording and backward."""
    x = np.linspace(0.1, 0.8, 8)
    f = lambda v: anp.sum(w.chain(anp, v))
    g = autodiff.grad(f)
    n = w.N_OPS
    numpy_forward = _median_time(lambda: w.chain(np, x), 200) / n * 1e6
    forward = _median_time(lambda: _vjp(f, (x,), False, "grad"), 20) / n * 1e6
    total = _median_time(lambda: g(x), 20) / n * 1e6
    profile = cProfile.Profile()
    profile.runcall(lambda: [g(x) for _ in range(30)])
    stats = pstats.Stats(profile).sort_stats("tottime")
    rows = []
    for (filename, line, name), (_, calls, tottime, _, _) in list(stats.stats.items()):
        rows.append((tottime, calls, f"{filename.split('autodiff/')[-1]}:{line}({name})"))
    rows.sort(reverse=True)
    whole = sum(r[0] for r in rows)
    return [
        "### W1: where a primitive's time goes under grad",
        "",
        f"Measured separately in this run (µs per primitive): NumPy running the chain "
        f"{numpy_forward:.2f}; the hand-written forward and backward {reference_us:.2f}; "
        f"autodiff recording the forward pass {forward:.2f}; the whole grad {total:.2f}, so "
        f"the backward pass {total - forward:.2f}. (The interleaved table above says "
        f"{per_op_us:.2f}.)",
        "",
        "Per primitive, autodiff adds to NumPy's own work: in the forward pass the "
        "operator on the tracer, the public function, `bind` (find the top interpreter, "
        "look the `process` method up in its dispatch table), grad's `process` (unwrap, call "
        "the implementation, declare residuals), a `Node` and a `GradTensor`; in the "
        "backward pass a heap pop, the normalised VJP wrapper and the rule (a lambda "
        "calling one to three NumPy functions, each through its public function), the "
        "cotangent sum and a heap push. Every step is a Python call of 0.05-0.3 µs; "
        "none dominates, which is why the 2.5 µs target is out of reach for a tracer "
        "that records one Python object per primitive. Closing it needs fewer Python "
        "calls per primitive, not faster ones: e.g. tracing the function once and "
        "replaying a flat list of NumPy calls (what `JAX (jit)` does, at "
        "a fraction of a µs), or a C extension for the tape.",
        "",
        "The top of a cProfile of 30 grad calls (profiling inflates small calls, so "
        "read the shares, not the absolute times):",
        "",
        "| share of profiled time | calls | function |",
        "|---|---|---|",
        *[f"| {t / whole:.1%} | {c} | `{name}` |" for t, c, name in rows[:12]],
        "",
    ]


def w3(by: dict[str, float], per_op_us: float) -> list[str]:
    """The loop's own floor: the same NumPy work, one example at a time."""
    loop, vmapped = by["autodiff loop of grad"], by["autodiff vmap(grad)"]
    floor = by["NumPy by hand, loop over examples"]
    reference = by["reference (NumPy by hand, batched)"]
    return [
        "### W3: why vmap is not 3x faster than our loop",
        "",
        f"The per-example gradients are 256 x (784 x 128 + 128 + 128 x 10 + 10) float64 "
        f"numbers, 207 MB, and writing them dominates: the hand-batched reference takes "
        f"{reference * 1e3:.1f} ms and vmap(grad) {vmapped * 1e3:.1f} ms. A loop writes the "
        f"same bytes in cache-sized pieces, so even hand-written NumPy looping over the "
        f"examples (`NumPy by hand, loop over examples`) takes only {floor * 1e3:.1f} ms, "
        f"{floor / reference:.2f}x the batched reference. Our loop of grad takes "
        f"{loop * 1e3:.1f} ms: that floor plus {(loop - floor) / 256 * 1e6:.0f} µs of "
        f"per-example overhead. vmap(grad) is at the floor already ({vmapped / reference:.2f}x "
        f"the reference), so the speed-up over the loop can only grow if the loop gets "
        f"slower: the target conflicts with W1 (at W1's 2.5 µs per primitive instead of "
        f"{per_op_us:.1f}, the loop would take about "
        f"{(floor + (loop - floor) * 2.5 / per_op_us) * 1e3:.0f} ms and the speed-up would "
        f"be smaller still). On this model the speed-up measures per-example overhead, "
        f"not vmap.",
        "",
    ]


def near_reference(workload: str, rows: Any) -> list[str]:
    """W2 and W5: the same NumPy calls as the reference, so the gap is noise or the
    loss's own few extra calls."""
    by = {r.system: r for r in rows}
    ours, ref = by["autodiff"], by["reference (NumPy by hand)"]
    return [
        f"### {workload}: within noise of the reference",
        "",
        f"autodiff's median {ours.median * 1e3:.1f} ms (min {min(ours.times) * 1e3:.1f}) "
        f"against the reference's {ref.median * 1e3:.1f} ms (min "
        f"{min(ref.times) * 1e3:.1f}); ratio of minima "
        f"{min(ours.times) / min(ref.times):.3f}. The NumPy calls are the reference's "
        f"(the same matmuls; nothing computed for X or Y) plus the loss's own "
        f"`** 2`, `mean` and their derivatives on (512, 256) arrays: about 1% of the work.",
        "",
    ]


def first_call(rows: list[dict]) -> list[str]:
    """Where the first call of a jitted function goes."""
    by = {r["workload"]: r for r in rows}
    w1 = by["W1 grad (201-op chain)"]
    fwd = by["W1 forward (200-op chain)"]
    per_eqn = w1["stage_ms"] / w1["eqns"] * 1e3
    return [
        "### First call: staging costs several eager calls where NumPy's work is small",
        "",
        f"On the per-primitive workloads the first call is staging, then one run of the "
        f"staged graph's implementations; the passes, code generation and Python's compiler "
        f"wait for the second call, since they cost more than a run. For W1's gradient: "
        f"{w1['stage_ms']:.1f} ms staging ({per_eqn:.0f} µs per equation: every primitive "
        f"is recorded by grad *and* by the staging, which also computes its output's shape "
        f"and makes a variable and an equation), then {w1['passes_ms']:.1f} ms of passes and "
        f"{w1['codegen_ms']:.1f} ms to generate and compile {w1['final_eqns']} lines at the "
        f"second call, against {w1['eager_ms']:.2f} ms for one eager gradient. Without a "
        f"transform the eager call is {fwd['eager_ms']:.2f} ms of NumPy calls "
        f"({fwd['eager_ms'] / fwd['eqns'] * 1e3:.2f} µs each), while tracing any primitive "
        f"through the interpreter stack costs several µs, so no staging of {fwd['eqns']} "
        f"equations can be within 5x of it. Where NumPy's work dominates (W2: large arrays) "
        f"the first call costs what an eager call costs. Both are paid once per signature; "
        f"every later call replays the compiled code.",
        "",
    ]


def w4(ms: float) -> list[str]:
    x = np.random.default_rng(4).standard_normal(64)
    A = np.random.default_rng(5).standard_normal((64, 64)) / 8
    calls = autodiff.explain(autodiff.hessian(lambda v: anp.sum(anp.tanh(A @ v) ** 2)))(x).calls
    return [
        "### W4: the Hessian is overhead-bound",
        "",
        f"hessian = jacfwd(jacrev(f)): {len(calls)} NumPy calls on 64 x 64 arrays "
        f"(`autodiff.explain` lists them), each through two or three interpreters; "
        f"{ms:.3f} ms is about {ms * 1e3 / len(calls):.0f} µs per NumPy call. The same "
        f"per-primitive costs as W1 apply.",
        "",
    ]
