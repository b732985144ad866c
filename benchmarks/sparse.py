"""S1: sparse Jacobians and Hessians, detected from the program and coloured.

    python -m benchmarks.sparse     # this table alone: results-sparse.md

``python -m benchmarks`` runs it too, into results.md.  Problems: the 2-D Bratu
residual ``Δu + λ exp(u)`` (5-point Laplacian, zero boundary) on n x n grids, whose
Jacobian has 5 non-zeros per row, and the chained Rosenbrock function, whose Hessian is
tridiagonal.  Per problem: the time to detect the pattern (staging and index-set
propagation, a fresh function each round), to colour it, the colours, the compressed
evaluation (one ``vmap`` of a JVP, VJP or Hessian-vector product per colour) as a
multiple of one JVP (one HVP for Hessians) of the same function at the same point, and
dense ``jacfwd`` (``hessian``) where its result fits in memory (200 MB here).  Target:
the compressed Jacobian costs at most (colours + 1) JVPs.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pathlib  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import autodiff.numpy as anp  # noqa: E402
from autodiff.transforms.sparse_jacobians import plan_hessian, plan_jacobian  # noqa: E402

DENSE_LIMIT = 200e6  # bytes of a dense result that we still compute


def bratu(u: Any, lam: float = 1.0) -> Any:
    h = 1.0 / (u.shape[0] + 1)
    p = anp.pad(u, 1)
    return (p[2:, 1:-1] + p[:-2, 1:-1] + p[1:-1, 2:] + p[1:-1, :-2] - 4 * u) / h**2 + lam * anp.exp(
        u
    )


def rosenbrock(x: Any) -> Any:
    return anp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def _median(run: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _interleaved(runs: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Medians of the runs timed round by round, interleaved (after a warm-up each)."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def jacobian_row(name: str, f: Callable, x: np.ndarray, rounds: int) -> dict:
    v = np.random.default_rng(0).standard_normal(x.shape)
    detect = _median(lambda: autodiff.jacobian_sparsity(f)(x), max(3, rounds // 3))
    pattern = autodiff.jacobian_sparsity(f)(x)
    start = time.perf_counter()
    plan = plan_jacobian(pattern, "auto")
    colour = time.perf_counter() - start
    jac = autodiff.jacobian(f, sparsity="auto")
    runs = {"jvp": lambda: autodiff.jvp(f, (x,), (v,)), "sparse": lambda: jac(x)}
    dense_bytes = pattern.shape[0] * pattern.shape[1] * 8
    if dense_bytes <= DENSE_LIMIT:
        runs["dense"] = lambda: autodiff.jacfwd(f)(x)
    t = _interleaved(runs, rounds)
    if "dense" in t:
        got, want = jac(x).toarray(), autodiff.jacfwd(f)(x).reshape(pattern.shape)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    return dict(name=name, shape=pattern.shape, nnz=pattern.nnz, detect=detect, colour=colour,
                colors=plan.n_colors, mode=plan.mode, one=t["jvp"], sparse=t["sparse"],
                dense=t.get("dense"), dense_mb=dense_bytes / 1e6)  # fmt: skip


def hessian_row(name: str, f: Callable, x: np.ndarray, rounds: int) -> dict:
    v = np.random.default_rng(0).standard_normal(x.shape)
    gradient = autodiff.grad(f)
    detect = _median(lambda: autodiff.hessian_sparsity(f)(x), max(3, rounds // 3))
    pattern = autodiff.hessian_sparsity(f)(x)
    start = time.perf_counter()
    plan = plan_hessian(pattern)
    colour = time.perf_counter() - start
    hess = autodiff.hessian(f, sparsity="auto")
    runs = {"hvp": lambda: autodiff.jvp(gradient, (x,), (v,)), "sparse": lambda: hess(x)}
    dense_bytes = x.size * x.size * 8
    if dense_bytes <= DENSE_LIMIT:
        runs["dense"] = lambda: autodiff.hessian(f)(x)
    t = _interleaved(runs, rounds)
    if "dense" in t:
        np.testing.assert_allclose(hess(x).toarray(), autodiff.hessian(f)(x), rtol=1e-10)
    return dict(name=name, shape=pattern.shape, nnz=pattern.nnz, detect=detect, colour=colour,
                colors=plan.n_colors, mode="HVP (star)", one=t["hvp"], sparse=t["sparse"],
                dense=t.get("dense"), dense_mb=dense_bytes / 1e6)  # fmt: skip


def rows(rounds: int) -> list[dict]:
    rng = np.random.default_rng(1)
    out = []
    for n in (50, 100, 200):
        out.append(jacobian_row(f"Bratu {n}x{n} Jacobian", bratu, rng.random((n, n)), rounds))
    for n in (1000, 10_000):
        out.append(hessian_row(f"chained Rosenbrock n={n} Hessian", rosenbrock,
                               rng.random(n), rounds))  # fmt: skip
    return out


def report(rounds: int = 7) -> tuple[list[str], list[tuple[str, str, float, str]]]:
    """Markdown lines and (workload, target, value, verdict) rows."""
    found = rows(rounds)
    lines = [
        "## S1: sparse Jacobians and Hessians (detected pattern, coloured, compressed)",
        "",
        "One JVP (HVP for Hessians) of the same function at the same point is the unit; "
        "dense is `jacfwd` (`hessian`), run where its result fits in 200 MB; times are "
        f"medians over {rounds} interleaved rounds (detection: a fresh function each round).",
        "",
        "| problem | matrix | non-zeros | detect ms | colour ms | colours (mode) | one JVP ms "
        "| compressed ms | x one JVP | dense ms | dense x compressed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    targets = []
    for r in found:
        dense = "-" if r["dense"] is None else f"{r['dense'] * 1e3:.1f}"
        speedup = "-" if r["dense"] is None else f"{r['dense'] / r['sparse']:.0f}"
        if r["dense"] is None:
            dense = f"- ({r['dense_mb']:.0f} MB)"
        ratio = r["sparse"] / r["one"]
        lines.append(
            f"| {r['name']} | {r['shape'][0]}x{r['shape'][1]} | {r['nnz']} | "
            f"{r['detect'] * 1e3:.1f} | {r['colour'] * 1e3:.1f} | {r['colors']} ({r['mode']}) | "
            f"{r['one'] * 1e3:.2f} | {r['sparse'] * 1e3:.2f} | {ratio:.1f} | {dense} | {speedup} |"
        )
        if "Jacobian" in r["name"]:
            targets.append((f"S1 {r['name']}", f"compressed x one JVP ≤ colours + 1 "
                            f"= {r['colors'] + 1}", ratio,
                            "reached" if ratio <= r["colors"] + 1 else "**missed**"))  # fmt: skip
    lines.append("")
    return lines, targets


def main() -> None:
    lines, targets = report()
    verdicts = [f"| {wl} | {t} | {v:.3g} | {verdict} |" for wl, t, v, verdict in targets]
    head = ["# Sparse derivatives", "", "`python -m benchmarks.sparse`", ""]
    text = [*head, *lines, "| workload | target | measured | verdict |", "|---|---|---|---|",
            *verdicts, ""]  # fmt: skip
    out = pathlib.Path(__file__).with_name("results-sparse.md")
    out.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
