"""O1: the gradient of a Lotka-Volterra fit through ``odeint``, against its forward solve.

    python -m benchmarks.ode        # this table alone: results-ode.md

``python -m benchmarks`` runs it too, with the other workloads, into results.md.

The loss is the mean square of the solution at 41 times on [0, 10] (two populations,
four rates; rtol = atol = 1e-8), differentiated with respect to the rates and the
initial state.  The figure is the gradient's time over the forward solve's: the adjoint
method integrates an augmented system (the state, its adjoint, the rates' cotangents)
backwards, segment by segment, so a gradient costs a few forward solves when each
evaluation of the augmented dynamics is a replay of NumPy calls, and hundreds when each
records a fresh ``vjp`` in Python.  JAX (``jax.experimental.ode.odeint``, its own
Dormand-Prince solver, so its step counts differ) is shown for information where
installed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread, as python -m benchmarks runs (when run alone)

import importlib.util  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import autodiff.numpy as anp  # noqa: E402
from benchmarks import _harness as h  # noqa: E402
from benchmarks.workloads import HAVE  # noqa: E402

HAVE_SCIPY = importlib.util.find_spec("scipy") is not None  # odeint is SciPy's
TIMES = np.linspace(0.0, 10.0, 41)
Y0 = np.array([1.0, 1.0])
RATES = np.array([1.5, 1.0, 3.0, 1.0])  # prey growth, predation, predator growth, death
TOL = {"rtol": 1e-8, "atol": 1e-8}
SOLVE = "autodiff forward solve"
GRAD = "autodiff grad"
JIT_GRAD = "autodiff jit(grad)"


def lotka_volterra(lib: Any) -> Callable:
    def dynamics(y, t, rates):
        prey, predators = y[0], y[1]
        a, b, c, d = rates[0], rates[1], rates[2], rates[3]
        return lib.stack([a * prey - b * prey * predators, c * prey * predators - d * predators])

    return dynamics


def loss(y0: Any, rates: Any) -> Any:
    from autodiff.scipy.integrate import odeint

    ys = odeint(lotka_volterra(anp), y0, TIMES, args=(rates,), **TOL)
    return anp.mean(ys**2)


def systems() -> tuple[dict[str, Callable[[], Any]], dict[str, Callable[[], Any]]]:
    """(forward solves, gradients): the rows of each group agree with its first."""
    gradient = autodiff.grad(loss, argnums=(0, 1))
    jitted = autodiff.jit(gradient)
    jitted(Y0, RATES)
    jitted(Y0, RATES)  # the second call compiles: the row times the replay
    solves = {SOLVE: lambda: loss(Y0, RATES)}
    grads = {GRAD: lambda: gradient(Y0, RATES), JIT_GRAD: lambda: jitted(Y0, RATES)}
    if HAVE["jax"]:
        import jax
        import jax.numpy as jnp
        from jax.experimental.ode import odeint as jax_odeint

        jax.config.update("jax_enable_x64", True)
        dynamics = lotka_volterra(jnp)

        def jax_loss(y0, rates):
            ys = jax_odeint(dynamics, y0, jnp.asarray(TIMES), rates, **TOL)
            return jnp.mean(ys**2)

        y0, rates = jnp.asarray(Y0), jnp.asarray(RATES)
        jax_grad = jax.grad(jax_loss, argnums=(0, 1))
        jax_jit = jax.jit(jax_grad)
        jax_jit(y0, rates)
        solves["JAX forward solve (eager)"] = lambda: jax_loss(y0, rates)
        grads["JAX grad (eager)"] = lambda: jax_grad(y0, rates)
        grads["JAX jit(grad)"] = lambda: jax_jit(y0, rates)
    return solves, grads


def report(rounds: int = 7) -> tuple[list[str], list[tuple[str, str, float, str]]]:
    """Markdown lines and (workload, target, value, verdict) rows."""
    solves, grads = systems()
    # Different solvers agree to the tolerances, not to the last bit.
    info = tuple(name for name in [*solves, *grads] if name.startswith("JAX"))
    solve_rows = h.interleave(solves, SOLVE, rounds=rounds, rtol=1e-5, info=info)
    grad_rows = h.interleave(grads, GRAD, rounds=rounds, rtol=1e-5, info=info)
    base = solve_rows[0].median
    by = {r.system: r.median for r in grad_rows}
    lines = [
        f"## O1: gradient through odeint (Lotka-Volterra, {len(TIMES)} times, rtol = atol = "
        f"{TOL['rtol']:g})",
        "",
        *h.table(solve_rows, SOLVE, "ms", 1e3),
        "",
        *h.table(grad_rows, GRAD, "ms", 1e3),
        "",
        "| system | x autodiff's forward solve |",
        "|---|---|",
        *[f"| {r.system} | {r.median / base:.2f} |" for r in [*solve_rows, *grad_rows]],
        "",
    ]
    ratio, jit_ratio = by[GRAD] / base, by[JIT_GRAD] / by[GRAD]
    targets = [
        ("O1", "gradient x forward solve ≤ 5", ratio, "reached" if ratio <= 5 else "**missed**"),
        ("O1 jit", "jit(grad) x grad < 1 (jit helps)", jit_ratio,
         "reached" if jit_ratio < 1 else "**missed**"),
    ]  # fmt: skip
    return lines, targets


def main() -> None:
    import pathlib

    out = pathlib.Path(__file__).with_name("results-ode.md")
    h.standalone("Benchmarks: ODE gradients", "python -m benchmarks.ode", report, out)  # fmt: skip


if __name__ == "__main__":
    main()
