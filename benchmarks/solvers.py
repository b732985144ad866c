"""S1-S3: gradients through SciPy's own solvers, against their forward solves and JAX.

    python -m benchmarks.solvers          # these tables alone: results-solvers.md

- **S1**: the gradient of a Lotka-Volterra fit through ``autodiff.scipy.integrate.
  solve_ivp`` (RK45, 41 times, rtol = atol = 1e-8) in the rates and the initial state;
  **S1b**, a program written afresh after S1 was tuned: an SIR epidemic's fit
  (DOP853, 31 times) in its two rates and the initial infected fraction.  Issue 33's
  target: the gradient costs at most 3x the forward solve.  JAX: ``jax.experimental.
  ode.odeint`` (its own Dormand-Prince: other steps), jitted.
- **S2**: a bilevel problem: ridge regression's weights found by
  ``autodiff.scipy.optimize.minimize`` (L-BFGS-B, 30 features, 200 examples), the
  regularisation's gradient of a validation loss through them (the implicit function
  theorem).  JAX: ``jax.scipy.optimize.minimize`` (BFGS) under ``lax.custom_root``
  for the implicit gradient, jitted (JAX's own way without jaxopt).
- **S3**: a 2-D Poisson problem's solution (100 x 100 = 10^4 unknowns, a coefficient
  per node) through ``autodiff.scipy.sparse.linalg.spsolve``, a misfit's gradient in
  the 10^4 coefficients.  JAX: ``jax.experimental.sparse.linalg.spsolve``, jitted.

Each table's first row is autodiff's forward solve; "x forward" is each row over it.
JAX's rows are for information (other solvers, compiled).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread, as python -m benchmarks runs (when run alone)

import importlib.util  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import autodiff.numpy as anp  # noqa: E402
from benchmarks import _harness as h  # noqa: E402
from benchmarks.workloads import HAVE  # noqa: E402

HAVE_SCIPY = importlib.util.find_spec("scipy") is not None
FORWARD, GRAD = "autodiff forward solve", "autodiff grad"


def _ours(forward: Callable, *args: Any, argnums: Any = 0) -> tuple[dict, dict]:
    """The autodiff rows of a workload: its forward solve and its gradient."""
    gradient = autodiff.grad(forward, argnums=argnums)
    return {FORWARD: lambda: forward(*args)}, {GRAD: lambda: gradient(*args)}


def _jax() -> Any:
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


# --- S1, S1b: ODE fits -------------------------------------------------------------------------


def lotka_volterra(lib: Any) -> Callable:
    def dynamics(t, y, rates):
        a, b, c, d = rates[0], rates[1], rates[2], rates[3]
        return lib.stack([a * y[0] - b * y[0] * y[1], c * y[0] * y[1] - d * y[1]])

    return dynamics


def sir(lib: Any) -> Callable:
    def dynamics(t, y, rates):
        beta, gamma = rates[0], rates[1]
        infections = beta * y[0] * y[1]
        return lib.stack([-infections, infections - gamma * y[1], gamma * y[1]])

    return dynamics


# (dynamics, t_span, times, y0, parameters, method, tolerance)
ODES = {
    "S1": (lotka_volterra, (0.0, 10.0), np.linspace(0.0, 10.0, 41), np.array([1.0, 1.0]),
           np.array([1.5, 1.0, 3.0, 1.0]), "RK45", 1e-8),
    "S1b": (sir, (0.0, 30.0), np.linspace(0.0, 30.0, 31), np.array([0.99, 0.01, 0.0]),
            np.array([0.5, 0.2]), "DOP853", 1e-8),
}  # fmt: skip


def ode_systems(name: str) -> tuple[dict, dict]:
    """(forward solves, gradients) of workload ``name``."""
    from autodiff.scipy.integrate import solve_ivp

    make, span, times, y0, params, method, tol = ODES[name]
    dynamics = make(anp)
    data = solve_ivp(dynamics, span, y0, method=method, t_eval=times, args=(params * 1.1,),
                     rtol=1e-10, atol=1e-10).y  # fmt: skip

    def loss(y0, params):
        ys = solve_ivp(dynamics, span, y0, method=method, t_eval=times, args=(params,),
                       rtol=tol, atol=tol).y  # fmt: skip
        return anp.mean((ys - data) ** 2)

    solves, grads = _ours(loss, y0, params, argnums=(0, 1))
    if HAVE["jax"]:
        jax = _jax()
        jnp = jax.numpy
        from jax.experimental.ode import odeint

        jax_dynamics = make(jnp)

        def jax_loss(y0, params):
            ys = odeint(lambda y, t, p: jax_dynamics(t, y, p), y0, jnp.asarray(times), params,
                        rtol=tol, atol=tol)  # fmt: skip
            return jnp.mean((ys.T - data) ** 2)

        j_y0, j_params = jnp.asarray(y0), jnp.asarray(params)
        jax_solve, jax_grad = jax.jit(jax_loss), jax.jit(jax.grad(jax_loss, argnums=(0, 1)))
        jax_solve(j_y0, j_params)
        jax_grad(j_y0, j_params)
        solves["JAX jit forward solve"] = lambda: jax_solve(j_y0, j_params)
        grads["JAX jit(grad)"] = lambda: jax_grad(j_y0, j_params)
    return solves, grads


# --- S2: bilevel ridge ----------------------------------------------------------------------

RIDGE_RNG = np.random.default_rng(33)
X_TRAIN, X_VAL = RIDGE_RNG.normal(size=(200, 30)), RIDGE_RNG.normal(size=(100, 30))
W_TRUE = RIDGE_RNG.normal(size=30)
Y_TRAIN = X_TRAIN @ W_TRUE + RIDGE_RNG.normal(size=200)
Y_VAL = X_VAL @ W_TRUE + RIDGE_RNG.normal(size=100)
LAMBDA = 3.0


def bilevel_systems() -> tuple[dict, dict]:
    from autodiff.scipy.optimize import minimize

    def train(w, lam):
        return anp.mean((X_TRAIN @ w - Y_TRAIN) ** 2) + lam * anp.mean(w**2)

    def validation(lam):
        w = minimize(train, np.zeros(30), args=(lam,), method="L-BFGS-B",
                     options={"gtol": 1e-10, "ftol": 1e-14}).x  # fmt: skip
        return anp.mean((X_VAL @ w - Y_VAL) ** 2)

    solves, grads = _ours(validation, LAMBDA)
    if HAVE["jax"]:
        jax = _jax()
        jnp = jax.numpy
        import jax.scipy.optimize  # (not imported with jax.scipy)

        def jax_train(w, lam):
            return jnp.mean((X_TRAIN @ w - Y_TRAIN) ** 2) + lam * jnp.mean(w**2)

        def jax_validation(lam):
            def solve(_, w0):
                return jax.scipy.optimize.minimize(jax_train, w0, args=(lam,), method="BFGS",
                                                   tol=1e-10).x  # fmt: skip

            def tangent_solve(g, y):
                return jnp.linalg.solve(jax.jacobian(g)(y), y)

            optimality = lambda w: jax.grad(jax_train)(w, lam)
            w = jax.lax.custom_root(optimality, jnp.zeros(30), solve, tangent_solve)
            return jnp.mean((X_VAL @ w - Y_VAL) ** 2)

        jax_value, jax_grad = jax.jit(jax_validation), jax.jit(jax.grad(jax_validation))
        jax_value(LAMBDA)
        jax_grad(LAMBDA)
        solves["JAX jit forward solve"] = lambda: jax_value(LAMBDA)
        grads["JAX jit(grad)"] = lambda: jax_grad(LAMBDA)
    return solves, grads


# --- S3: Poisson ---------------------------------------------------------------------------


def poisson(n: int) -> tuple[Any, Any]:
    """-div(k grad u) = 1 on the unit square's n x n interior nodes, u = 0 outside, a
    coefficient k per node (a face's: the mean of its two nodes'; outside, the node's
    own): the CSR pattern, and the constant sparse map from k to the stored values."""
    import scipy.sparse as sp

    idx = np.arange(n * n).reshape(n, n)
    r, c = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    half = 0.5 * (n + 1) ** 2
    entry_r, entry_c, nodes, weights = [], [], [], []
    for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0)):
        rr, cc = r + dr, c + dc
        inside = ((rr >= 0) & (rr < n) & (cc >= 0) & (cc < n)).ravel()
        i = idx.ravel()
        j = np.where(inside, idx[np.clip(rr, 0, n - 1), np.clip(cc, 0, n - 1)].ravel(), i)
        for node in (i, j):  # the face's value: half of each of its two nodes'
            entry_r += [i, i[inside]]
            entry_c += [i, j[inside]]
            nodes += [node, node[inside]]
            weights += [np.full(i.size, half), np.full(int(inside.sum()), -half)]
    keys = np.concatenate(entry_r) * n * n + np.concatenate(entry_c)
    unique, where = np.unique(keys, return_inverse=True)
    to_values = sp.csr_array((np.concatenate(weights), (where.ravel(), np.concatenate(nodes))),
                             shape=(unique.size, n * n))  # fmt: skip
    pattern = sp.csr_array((np.ones(unique.size), (unique // (n * n), unique % (n * n))),
                           shape=(n * n, n * n))  # fmt: skip
    pattern.sort_indices()
    return pattern, to_values


N_GRID = 100


def poisson_systems() -> tuple[dict, dict]:
    import autodiff.scipy.sparse as asp
    from autodiff.scipy.sparse.linalg import spsolve

    pattern, to_values = poisson(N_GRID)
    nodes = N_GRID * N_GRID
    k0 = 1.0 + 0.5 * np.sin(np.arange(nodes) / 37.0)
    rhs = np.ones(nodes)
    assemble = asp.csr_array(to_values)
    target = spsolve(asp.csr_array((assemble @ (k0 * 1.2), pattern.indices, pattern.indptr),
                                   shape=pattern.shape), rhs)  # fmt: skip

    def misfit(k):
        a = asp.csr_array((assemble @ k, pattern.indices, pattern.indptr), shape=pattern.shape)
        return anp.mean((spsolve(a, rhs) - target) ** 2)

    solves, grads = _ours(misfit, k0)
    if HAVE["jax"]:
        jax = _jax()
        jnp = jax.numpy
        from jax.experimental import sparse as jsparse
        from jax.experimental.sparse.linalg import spsolve as jax_spsolve

        j_assemble = jsparse.BCOO.from_scipy_sparse(to_values)
        indices, indptr = jnp.asarray(pattern.indices), jnp.asarray(pattern.indptr)

        def jax_misfit(k):
            return jnp.mean((jax_spsolve(j_assemble @ k, indices, indptr, jnp.asarray(rhs))
                             - jnp.asarray(target)) ** 2)  # fmt: skip

        jax_value, jax_grad = jax.jit(jax_misfit), jax.jit(jax.grad(jax_misfit))
        jk = jnp.asarray(k0)
        jax_value(jk)
        jax_grad(jk)
        solves["JAX jit forward solve"] = lambda: jax_value(jk)
        grads["JAX jit(grad)"] = lambda: jax_grad(jk)
    return solves, grads


# --- the report ----------------------------------------------------------------------------

TITLES = {
    "S1": "gradient of a Lotka-Volterra fit through solve_ivp (RK45, 41 times, 6 inputs)",
    "S1b": "gradient of an SIR fit through solve_ivp (DOP853, 31 times; written after S1 "
           "was tuned)",
    "S2": "bilevel ridge regression: a validation loss's gradient in the regularisation "
          "through minimize (L-BFGS-B, 30 weights)",
    "S3": f"a {N_GRID}x{N_GRID} Poisson solution's misfit, its gradient in the "
          f"{N_GRID * N_GRID} coefficients through spsolve",
}  # fmt: skip


def _cpu_ratio(forward: Callable, gradient: Callable, rounds: int) -> float:
    """The median CPU time of ``gradient()`` over ``forward()``'s, timed interleaved with
    the process's clock: a shared machine's other load stretches wall-clock times by
    whatever it takes from this core, CPU times far less."""
    times: dict[Callable, list[float]] = {forward: [], gradient: []}
    for _ in range(rounds):
        for run, kept in times.items():
            start = time.process_time()
            run()
            kept.append(time.process_time() - start)
    return float(np.median(times[gradient]) / np.median(times[forward]))


def report(rounds: int = 7) -> tuple[list[str], list[tuple[str, str, float, str]]]:
    """Markdown lines and (workload, target, value, verdict) rows."""
    lines: list[str] = []
    targets: list[tuple[str, str, float, str]] = []
    workloads = {"S1": lambda: ode_systems("S1"), "S1b": lambda: ode_systems("S1b"),
                 "S2": bilevel_systems, "S3": poisson_systems}  # fmt: skip
    for name, make in workloads.items():
        solves, grads = make()
        info = tuple(n for n in [*solves, *grads] if n.startswith("JAX"))
        # other solvers agree to their tolerances (JAX's BFGS stops 3e-6 short in S2)
        rtol = 1e-4 if name.startswith("S1") else 1e-5
        solve_rows = h.interleave(solves, FORWARD, rounds=rounds, rtol=rtol, info=info)
        grad_rows = h.interleave(grads, GRAD, rounds=rounds, rtol=rtol, info=info)
        base = solve_rows[0].median
        by = {r.system: r.median for r in [*solve_rows, *grad_rows]}
        lines += [f"## {name}: {TITLES[name]}", "", *h.table(solve_rows, FORWARD, "ms", 1e3), "",
                  *h.table(grad_rows, GRAD, "ms", 1e3), "", "| system | x autodiff's forward "
                  "solve |", "|---|---|",
                  *[f"| {r.system} | {r.median / base:.2f} |" for r in [*solve_rows, *grad_rows]],
                  ""]  # fmt: skip
        ratio = by[GRAD] / base
        cpu = _cpu_ratio(solves[FORWARD], grads[GRAD], rounds)
        lines += [
            f"CPU time (the process's, interleaved, median of {rounds}): the gradient "
            f"costs {cpu:.2f}x the forward solve (wall clock above: {ratio:.2f}x).",
            "",
        ]
        if name.startswith("S1"):
            verdict = "reached" if cpu <= 3 else "**missed**"
            targets.append((name, "gradient x forward solve ≤ 3 (CPU time)", cpu, verdict))
        else:
            targets.append((name, "gradient x forward solve (CPU time, reported)", cpu, "-"))
        if "JAX jit(grad)" in by:
            targets.append((f"{name} JAX", "autodiff grad x JAX jit(grad) (information)",
                            by[GRAD] / by["JAX jit(grad)"], "-"))  # fmt: skip
    return lines, targets


def main() -> None:
    import pathlib

    out = pathlib.Path(__file__).with_name("results-solvers.md")
    title = "Benchmarks: gradients through SciPy's solvers"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    note = (f" (JAX's: its own solvers, to the tolerances). Load average at the start: "
            f"{load:.1f} on {os.cpu_count()} cores; wall-clock times stretch with it, so the "
            f"targets are read in the process's CPU time")  # fmt: skip
    h.standalone(title, "python -m benchmarks.solvers", report, out, note)


if __name__ == "__main__":
    main()
