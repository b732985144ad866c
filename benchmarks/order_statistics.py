"""Order statistics, nan-reductions and histograms: NumPy's own functions against
``anp`` on plain arrays, and what ``grad`` and ``vmap`` of them cost.

    python -m benchmarks.order_statistics [--repeats 7]

A 500 x 1000 float64 array (rows reduced: 500 slices of 1000), medians over
interleaved repeats in one process, one thread.  On plain arrays ``anp`` calls
NumPy's own median, quantile and histogram (the compositions sort where NumPy
partitions); under ``grad`` and ``vmap`` the composition runs: a stable argsort
and two gathers per quantile, or searchsorted and a bincount for a histogram.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import autodiff.numpy as anp
from autodiff import grad, vmap


def cases(x: np.ndarray, w: np.ndarray) -> list[tuple[str, Callable[[], object]]]:
    flat = x.ravel()
    q3 = np.array([0.1, 0.5, 0.9])
    return [
        ("np.sort(axis=1, stable)  (the sort the compositions do)",
         lambda: np.sort(x, axis=1, kind="stable")),
        ("np.median(axis=1)", lambda: np.median(x, axis=1)),
        ("anp.median(axis=1), plain", lambda: anp.median(x, axis=1)),
        ("grad of sum(median(axis=1))", lambda: grad(lambda x: anp.median(x, axis=1).sum())(x)),
        ("grad of sum(quantile(q3, axis=1))",
         lambda: grad(lambda x: anp.quantile(x, q3, axis=1).sum())(x)),
        ("vmap(median) over rows", lambda: vmap(anp.median)(x)),
        ("np.nanstd(axis=1)", lambda: np.nanstd(x, axis=1)),
        ("anp.nanstd(axis=1), plain", lambda: anp.nanstd(x, axis=1)),
        ("grad of sum(nanstd(axis=1))", lambda: grad(lambda x: anp.nanstd(x, axis=1).sum())(x)),
        ("np.histogram(50 bins, weights)", lambda: np.histogram(flat, 50, weights=w)),
        ("anp.histogram(50 bins, weights), plain", lambda: anp.histogram(flat, 50, weights=w)),
        ("grad of histogram in the weights",
         lambda: grad(lambda w: anp.histogram(flat, 50, weights=w)[0].sum())(w)),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((500, 1000))
    w = rng.uniform(size=x.size)
    runs = cases(x, w)
    times: dict[str, list[float]] = {name: [] for name, _ in runs}
    for _name, run in runs:
        run()  # warm up
    for _ in range(args.repeats):  # interleaved: every case once per round
        for name, run in runs:
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    for name, ts in times.items():
        print(f"{name:58s} {statistics.median(ts) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
