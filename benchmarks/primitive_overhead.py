"""Per-primitive overhead: grad of the sum of a chain of cheap elementwise ops.

    python benchmarks/primitive_overhead.py [--ops 200] [--repeats 30]

The chain alternates sin, *1.01, tanh, +0.1 on a length-8 float64 vector (the
performance issue's W1).  Reports, as medians (min-max) over repeats, with
every system run in the same process and interleaved round by round:

* plain NumPy forward pass (the floor), per op;
* ``anp`` functions with no transform active, per op;
* ``grad`` (forward with tape + backward pass), per primitive of the forward.

Times are per primitive call; ratios are to plain NumPy in the same rounds.
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
from autodiff import grad


def chain(lib, x, n_ops):
    for i in range(n_ops // 4):
        x = lib.sin(x)
        x = x * 1.01
        x = lib.tanh(x)
        x = x + 0.1
        del i
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--inner", type=int, default=20, help="calls per timed sample")
    args = parser.parse_args()
    x = np.linspace(0.1, 0.8, 8)

    systems = {
        "numpy forward": lambda: chain(np, x, args.ops),
        "anp forward, no transform": lambda: chain(anp, x, args.ops),
        "grad (forward + backward)": lambda: grad(lambda v: anp.sum(chain(anp, v, args.ops)))(x),
    }
    expected = np.cos(0)  # warm up and check agreement of the two forwards
    assert np.allclose(systems["numpy forward"](), systems["anp forward, no transform"]())
    del expected
    samples: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(args.repeats):
        for name, run in systems.items():  # interleaved, round by round
            start = time.perf_counter()
            for _ in range(args.inner):
                run()
            samples[name].append((time.perf_counter() - start) / args.inner / args.ops * 1e6)
    base = statistics.median(samples["numpy forward"])
    print(f"{args.ops} primitives on a length-8 float64 vector, {args.repeats} repeats")
    print(f"{'system':<28} {'us/primitive (median)':>22} {'min-max':>14} {'x numpy':>8}")
    for name, times in samples.items():
        med = statistics.median(times)
        print(f"{name:<28} {med:>22.2f} {min(times):>6.2f}-{max(times):<7.2f} {med / base:>8.1f}")


if __name__ == "__main__":
    main()
