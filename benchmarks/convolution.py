"""Convolution: ``anp.convolve`` against NumPy's own, forward, gradient and batched.

    python benchmarks/convolution.py [--repeats 7]

For a few (signal, kernel) lengths, medians over repeats of: ``np.convolve`` (the
floor); ``grad`` of ``sum(convolve(a, v, "same") ** 2)`` in both operands (forward,
tape and the two transposed correlations); ``vmap`` over 8 signals with one kernel
against 8 calls of ``np.convolve`` (a Python loop, for reference: the batched rule
runs NumPy's kernel once on the signals laid end to end).  HIPS autograd has no VJP
for ``numpy.convolve``, so there is no peer here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import autodiff.numpy as anp
from autodiff import grad, vmap

SIZES = [(100_000, 50), (2_000, 2_000), (1_000, 10)]


def _median_ms(f, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _row(n: int, m: int, repeats: int, rng: np.random.Generator) -> list[float]:
    a, v, batch = rng.normal(size=n), rng.normal(size=m), rng.normal(size=(8, n))
    loss = grad(lambda a, v: anp.sum(anp.convolve(a, v, "same") ** 2), argnums=(0, 1))
    batched = vmap(lambda a: anp.convolve(a, v, "same"))
    return [
        _median_ms(lambda: np.convolve(a, v, "same"), repeats),
        _median_ms(lambda: loss(a, v), repeats),
        _median_ms(lambda: batched(batch), repeats),
        _median_ms(lambda: [np.convolve(row, v, "same") for row in batch], repeats),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    rng = np.random.default_rng(0)
    print("| n | m | np.convolve | grad (a and v) | vmap over 8 | 8 np.convolve calls |")
    print("|---|---|---|---|---|---|")
    for n, m in SIZES:
        times = _row(n, m, repeats, rng)
        print(f"| {n} | {m} | " + " | ".join(f"{t:.2f} ms" for t in times) + " |")


if __name__ == "__main__":
    main()
