"""The per-call cost of a transform's 0-d results under ``jit`` (``as_array_p``: one more
equation in the graph, a NumPy call or part of a kernel), interleaved A/B of two commits
in one process (``benchmarks/ab.py``), CPU time per call.

    python -m benchmarks.zero_d_outputs BASE [HEAD] [--rounds N]

The program the change was made on (``grad`` of a scalar function of a 0-d input) and one
written apart from it (``value_and_grad`` and ``jvp`` of another scalar function, whose
results are all 0-d), on the replay and compiled.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.ab import _per_call, run_ab

X0 = np.array(0.7)


def metrics(ad: Any) -> dict[str, Callable[[], float]]:
    anp = importlib.import_module(ad.__name__ + ".numpy")

    def h(x: Any) -> Any:
        return anp.tanh(x) * x + anp.sin(x) * 2.0 - x * x / 3.0 + anp.exp(-x) * anp.cos(x)

    def fresh(x: Any) -> Any:  # written apart: a damped oscillator's energy
        return 0.5 * anp.exp(-0.1 * x) * (anp.cos(3.0 * x) ** 2 + 9.0 * anp.sin(3.0 * x) ** 2)

    runs = {
        "grad, replay": ad.jit(ad.grad(h), compile=False),
        "grad, compiled": ad.jit(ad.grad(h), compile=True),
        "fresh value_and_grad, replay": ad.jit(ad.value_and_grad(fresh), compile=False),
        "fresh value_and_grad, compiled": ad.jit(ad.value_and_grad(fresh), compile=True),
        "fresh jvp, replay": ad.jit(lambda x: ad.jvp(fresh, (x,), (x,)), compile=False),
    }
    out = {}
    for name, run in runs.items():
        run(X0), run(X0)  # staged, then replayed or compiled: not timed
        out[name] = lambda run=run: _per_call(lambda: run(X0), 2000)
    return out


def main() -> None:
    run_ab(metrics, __doc__, 31)


if __name__ == "__main__":
    main()
