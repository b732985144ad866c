"""Fused elementwise chains and reductions on 10^5 to 10^7 elements: compiled against NumPy.

    python -m benchmarks.large_arrays           # the table (results-large.md)

NumPy makes one pass over memory (and one temporary) per operation; a compiled kernel one
pass for a whole chain of elementwise operations (NumPy's own loops called on runs of
8192 elements for ``exp``, ``tanh`` and the like, LLVM's vector code for arithmetic), and
its results are NumPy's to the bit (checked).  Three programs, each on 10^5, 10^6 and
10^7 float64 elements:

- **chain**: ``sin``, ``tanh``, ``exp``, ``log1p``, ``abs`` and arithmetic, 12 operations;
- **reduce**: ``sum(exp(-x * x) * y + x, axis=0)`` (NumPy: temporaries, then its pairwise
  sum; compiled: the sum taken as the loop makes its terms, in NumPy's pairwise order,
  ``llvm_sum.py``: no temporary);
- **arith**: ``((1.5 x + y)(x - y) + 0.25) / (1 + x^2)``, arithmetic only;
- **mean** and **sqdist**, written afresh after the sums were fused (not tuned on):
  ``mean(sqrt(x^2 + y^2) cos(x - y))`` and ``sum((x - y / 2) ** 2)``.

Systems: NumPy (the reference), ``autodiff.jit(f, compile=True)``, JAX jit; each system's
process CPU time, interleaved, medians.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import datetime
import pathlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import autodiff
import autodiff.numpy as anp
from benchmarks import _harness as h
from benchmarks.workloads import HAVE

if HAVE["jax"]:
    import jax
    import jax.numpy as jnp

    if "jax_cpu_enable_async_dispatch" in jax.config.values:
        jax.config.update("jax_cpu_enable_async_dispatch", False)

OUT = pathlib.Path(__file__).with_name("results-large.md")
NUMPY, COMPILED, JAX = "NumPy", "autodiff jit, compiled", "JAX jit"
SIZES = (10**5, 10**6, 10**7)


def chain(lib: Any, x: Any, y: Any) -> Any:
    a = lib.sin(x) * 1.01 + y
    b = lib.tanh(a) * 0.5 - x * y
    c = lib.exp(-b * b) + lib.log1p(lib.abs(a))
    return c * 2.0 - 1.0


def reduce(lib: Any, x: Any, y: Any) -> Any:
    return lib.sum(lib.exp(-x * x) * y + x, axis=0)


def arith(lib: Any, x: Any, y: Any) -> Any:
    return ((x * 1.5 + y) * (x - y) + 0.25) / (1.0 + x * x)


def mean(lib: Any, x: Any, y: Any) -> Any:
    return lib.mean(lib.sqrt(x * x + y * y) * lib.cos(x - y))


def sqdist(lib: Any, x: Any, y: Any) -> Any:
    return lib.sum((x - y / 2) ** 2)


PROGRAMS = {"chain": chain, "reduce": reduce, "arith": arith, "mean": mean, "sqdist": sqdist}


def systems(fn: Callable, n: int) -> tuple[dict[str, Callable[[], Any]], bool]:
    """The systems on ``n`` elements, and whether the compiled results are NumPy's bits."""
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    compiled = autodiff.jit(lambda a, b: fn(anp, a, b), compile=True)
    compiled(x, y)
    exact = bool(np.array_equal(compiled(x, y), fn(np, x, y)))
    out: dict[str, Callable[[], Any]] = {NUMPY: lambda: fn(np, x, y),
                                         COMPILED: lambda: compiled(x, y)}  # fmt: skip
    if HAVE["jax"]:
        jax.config.update("jax_enable_x64", True)
        jitted = jax.jit(lambda a, b: fn(jnp, a, b))
        xj, yj = jnp.asarray(x), jnp.asarray(y)
        jax.block_until_ready(jitted(xj, yj))
        out[JAX] = lambda: jitted(xj, yj)
    return out, exact


def report(rounds: int = 7) -> tuple[list[str], list[tuple[str, str, float, str]]]:
    lines = ["| program | elements | NumPy ms | compiled ms | x NumPy | JAX jit ms | x NumPy | "
             "compiled = NumPy, bit for bit |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    targets = []
    for name, fn in PROGRAMS.items():
        for n in SIZES:
            found, exact = systems(fn, n)
            inner = max(1, 10**6 // n)
            rows = h.interleave(found, NUMPY, rounds=rounds if n < 10**7 else 3, inner=inner,
                                rtol=1e-9, clock=time.process_time)  # fmt: skip
            by = {r.system: r.median for r in rows}
            ratio = by[COMPILED] / by[NUMPY]
            jax_cols = (f"{by[JAX] * 1e3:.3g} | {by[JAX] / by[NUMPY]:.2f}" if JAX in by
                        else "- | -")  # fmt: skip
            lines.append(f"| {name} | {n:.0e} | {by[NUMPY] * 1e3:.3g} | "
                         f"{by[COMPILED] * 1e3:.3g} | {ratio:.2f} | {jax_cols} | "
                         f"{'yes' if exact else '**no**'} |")  # fmt: skip
            targets.append((f"{name} {n:.0e}", "compiled x NumPy < 1", ratio,
                            "reached" if ratio < 1 and exact else "**missed**"))  # fmt: skip
    return [*lines, ""], targets


def main() -> None:
    started = time.perf_counter()
    lines, targets = report(3 if "--quick" in sys.argv else 7)
    text = ["# Benchmarks: fused elementwise chains and reductions on large arrays", "",
            f"`python -m benchmarks.large_arrays`, {datetime.date.today().isoformat()}. "
            "Process CPU time, interleaved, medians (module docstring).", "",
            *h.environment(), "", *lines, *h.targets_table(targets),
            f"Run time: {time.perf_counter() - started:.0f} s.", ""]  # fmt: skip
    OUT.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
