"""Compiled comparisons, before and after they were made quiet (``llvm_ir._fcmp``: no
invalid flag for a NaN operand, as NumPy's), interleaved A/B of two commits in one
process (``benchmarks/ab.py``), CPU time per call of the compiled kernels.

    python -m benchmarks.quiet_comparisons BASE [HEAD] [--rounds N]

On 10^6 elements without NaNs (where a signalling compare cost nothing) and with a NaN in
every tenth element (where it ran the region again as NumPy calls): the program the
change was made on (``where(x < y, x, y)``, which LLVM made ``minpd``) and one written
apart from it (a clip by two ``where``s and a count of ``x <= y``).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.ab import _per_call, run_ab

N = 10**6


def metrics(ad: Any) -> dict[str, Callable[[], float]]:
    anp = importlib.import_module(ad.__name__ + ".numpy")
    x = np.linspace(-1.0, 1.0, N)
    y = np.cos(7.0 * x)
    nan_x = x.copy()
    nan_x[::10] = np.nan

    def tuned(x: Any, y: Any) -> Any:
        return anp.where(x < y, x, y) * 2.0 + 1.0

    def fresh(x: Any, y: Any) -> Any:  # written apart
        clipped = anp.where(x > 0.5, 0.5, anp.where(x < -0.5, -0.5, x))
        return clipped * y, anp.sum(x <= y)

    out = {}
    for name, f in {"where(x < y)": tuned, "fresh clip, count": fresh}.items():
        for data, xs in (("", x), (", NaNs", nan_x)):
            jitted = ad.jit(f, compile=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                jitted(xs, y), jitted(xs, y)  # staged, then compiled: not timed
            out[name + data] = lambda j=jitted, xs=xs: _per_call(lambda: j(xs, y), 20)
    return out


def main() -> None:
    run_ab(metrics, __doc__, 21)


if __name__ == "__main__":
    main()
