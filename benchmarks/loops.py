"""Loops and small programs against JAX jit: where compiled code is the limit.

    python -m benchmarks.loops          # these tables alone: results-loops.md
    python -m benchmarks.loops --quick  # fewer rounds

``python -m benchmarks`` runs them too, into results.md.  Each program is written once
per library; the systems run in one process, interleaved round by round, on one core:

- L1: a fixed point by ``while_loop`` (Newton's square root of 16 numbers, to 1e-12)
  with its gradient by the implicit function theorem, a ``custom_vjp`` whose backward
  pass is another fixed point (JAX's documented recipe), ``jit(grad(f))``;
- L2: a Lagrangian double pendulum: the accelerations from the ``hessian`` of the
  Lagrangian in the velocities, ``jacfwd(grad)`` for the mixed term and ``solve``, in an
  RK4 ``scan`` of 100 steps, ``jit(f)``;
- L3: the gradient of a tanh RNN (hidden 32, batch 8, 100 steps) through
  ``scan(checkpoint=True)`` (``jax.checkpoint`` of the step in JAX), ``jit(grad(f))``;
- L4: ``vmap`` of a Newton ``while_loop`` (Kepler's equation for 256 anomalies), ``jit``;
- L5-L8, programs of the same kinds written afresh (not tuned on): the implicit gradient
  of another fixed point (``x = cos(a x)``); a spring pendulum's Lagrangian in an RK4
  ``scan``; the gradient of a gated RNN's ``scan`` (no checkpoint); ``vmap`` of Newton's
  method for ``x**3 + x = c``;
- L9-L11, written afresh again once L1-L8 had been worked on (issue 31), not tuned on:
  ``vmap`` of Newton's method for Lambert's W (``exp`` and ``log1p`` in the loop); the
  implicit gradient of a deep equilibrium layer ``z = tanh(W z + a)`` (a matrix fixed
  point, ``custom_vjp``); the gradient of a Van der Pol oscillator's RK4 ``scan`` in its
  damping and initial state.

Rows: JAX jit (the reference), autodiff's replay (``jit(f, compile=False)``: NumPy calls,
the loop in Python) and its compiling tier (``jit(f, compile=True)``: LLVM kernels).
Compile times are ``benchmarks/compile_times.py``'s.
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread, as python -m benchmarks runs (when run alone)
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import datetime  # noqa: E402
import pathlib  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import autodiff.numpy as anp  # noqa: E402
from autodiff.compiler.stages import default_backend  # noqa: E402
from benchmarks import _harness as h  # noqa: E402
from benchmarks.workloads import HAVE  # noqa: E402

if HAVE["jax"]:
    import jax
    import jax.numpy as jnp

    if "jax_cpu_enable_async_dispatch" in jax.config.values:  # its work in the calling
        jax.config.update("jax_cpu_enable_async_dispatch", False)  # thread: CPU time is fair

JAX = "JAX jit"
REPLAY = "autodiff jit, replay (compile=False)"
COMPILED = "autodiff jit, compiled (compile=True)"
LIMIT = 1.0  # issue 31's target: compiled x JAX jit
OUT = pathlib.Path(__file__).with_name("results-loops.md")


# --- the programs, written once per library ----------------------------------------------------


def fixed_point_loss(lib: Any, custom_vjp: Callable, while_loop: Callable, vjp: Callable):
    """L1: sum(sqrt(a)) by Newton's fixed point, its gradient by the implicit function
    theorem (JAX's custom_vjp recipe, the backward pass another fixed point)."""

    def newton(a, x):
        return 0.5 * (x + a / x)

    def solve(a, x0):
        def cond(c):
            return lib.max(lib.abs(c[0] - c[1])) > 1e-12

        return while_loop(cond, lambda c: (c[1], newton(a, c[1])), (x0, newton(a, x0)))[1]

    fixed_point = custom_vjp(solve)

    def fwd(a, x0):
        z = solve(a, x0)
        return z, (a, z)

    def bwd(res, z_bar):
        a, z = res
        _, vjp_x = vjp(lambda x: newton(a, x), z)

        def cond(c):
            return lib.max(lib.abs(c[0] - c[1])) > 1e-12

        def body(c):
            return c[1], vjp_x(c[1])[0] + z_bar

        u = while_loop(cond, body, (z_bar, vjp_x(z_bar)[0] + z_bar))[1]
        _, vjp_a = vjp(lambda a: newton(a, z), a)
        return vjp_a(u)[0], lib.zeros_like(z)

    fixed_point.defvjp(fwd, bwd)
    return lambda a: lib.sum(fixed_point(a, a))


def pendulum(lib: Any, hessian: Callable, grad: Callable, jacfwd: Callable, scan: Callable,
             solve: Callable, steps: int = 100, dt: float = 0.01) -> Callable:  # fmt: skip
    """L2: a double pendulum's path from its Lagrangian (the equations of motion of
    Lagrangian neural networks: q_tt = H^-1 (dL/dq - d2L/dq_t dq q_t)), RK4 steps."""

    def lagrangian(q, q_t, m1=1.0, m2=1.0, l1=1.0, l2=1.0, g=9.8):
        t1, t2, w1, w2 = q[0], q[1], q_t[0], q_t[1]
        kinetic = 0.5 * m1 * (l1 * w1) ** 2 + 0.5 * m2 * (
            (l1 * w1) ** 2 + (l2 * w2) ** 2 + 2 * l1 * l2 * w1 * w2 * lib.cos(t1 - t2)
        )
        y1 = -l1 * lib.cos(t1)
        potential = m1 * g * y1 + m2 * g * (y1 - l2 * lib.cos(t2))
        return kinetic - potential

    def field(state):
        q, q_t = state[:2], state[2:]
        mass = hessian(lagrangian, 1)(q, q_t)
        mixed = jacfwd(grad(lagrangian, 1), 0)(q, q_t)
        q_tt = solve(mass, grad(lagrangian, 0)(q, q_t) - mixed @ q_t)
        return lib.concatenate([q_t, q_tt])

    def rk4(state, _):
        k1 = field(state)
        k2 = field(state + dt / 2 * k1)
        k3 = field(state + dt / 2 * k2)
        k4 = field(state + dt * k3)
        new = state + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return new, new

    return lambda s0: scan(rk4, s0, None, steps)[1]


RNN = {"hidden": 32, "batch": 8, "steps": 100, "input": 8}


def rnn_data(seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    n, b, s, i = RNN["hidden"], RNN["batch"], RNN["steps"], RNN["input"]
    params = (rng.standard_normal((i, n)) / 4, rng.standard_normal((n, n)) / 8, np.zeros(n))
    return params, rng.standard_normal((s, b, i))


def rnn_loss(lib: Any, scan: Callable) -> Callable:
    """L3: a tanh RNN's loss; ``scan(step, h0, xs)`` recomputes the steps backwards."""

    def loss(params, xs):
        wx, wh, b = params
        h, _ = scan(lambda h, x: (lib.tanh(x @ wx + h @ wh + b), None),
                    lib.zeros((RNN["batch"], RNN["hidden"])), xs)  # fmt: skip
        return lib.sum(h**2)

    return loss


def kepler(lib: Any, while_loop: Callable, vmap: Callable, e: float = 0.6) -> Callable:
    """L4: the eccentric anomaly E - e sin E = M by Newton's method, per anomaly M."""

    def solve(m):
        def body(c):
            step = (c[0] - e * lib.sin(c[0]) - m) / (1 - e * lib.cos(c[0]))
            return c[0] - step, step

        return while_loop(lambda c: lib.abs(c[1]) > 1e-12, body, (m, lib.ones_like(m)))[0]

    return vmap(solve)


def fixed_point_cos_loss(lib: Any, custom_vjp: Callable, while_loop: Callable,
                         vjp: Callable) -> Callable:  # fmt: skip
    """L5: sum(x) for x = cos(a x) per element, by iteration; the gradient by the
    implicit function theorem (the adjoint another fixed point)."""

    def step(a, x):
        return lib.cos(a * x)

    def solve(a):
        def cond(c):
            return lib.max(lib.abs(c[0] - c[1])) > 1e-13

        return while_loop(cond, lambda c: (c[1], step(a, c[1])), (a * 0.0, step(a, a * 0.0)))[1]

    root = custom_vjp(solve)

    def fwd(a):
        x = solve(a)
        return x, (a, x)

    def bwd(res, x_bar):
        a, x = res
        _, vjp_x = vjp(lambda v: step(a, v), x)

        def cond(c):
            return lib.max(lib.abs(c[0] - c[1])) > 1e-13

        u = while_loop(cond, lambda c: (c[1], vjp_x(c[1])[0] + x_bar),
                       (x_bar, vjp_x(x_bar)[0] + x_bar))[1]  # fmt: skip
        _, vjp_a = vjp(lambda b: step(b, x), a)
        return (vjp_a(u)[0],)

    root.defvjp(fwd, bwd)
    return lambda a: lib.sum(root(a))


def spring_pendulum(lib: Any, hessian: Callable, grad: Callable, jacfwd: Callable,
                    scan: Callable, solve: Callable, steps: int = 100,
                    dt: float = 0.01) -> Callable:  # fmt: skip
    """L6: a pendulum on a spring (length r, angle t), from its Lagrangian, RK4."""

    def lagrangian(q, q_t, m=1.0, k=20.0, rest=1.0, g=9.8):
        r, t, r_t, t_t = q[0], q[1], q_t[0], q_t[1]
        kinetic = 0.5 * m * (r_t**2 + (r * t_t) ** 2)
        potential = 0.5 * k * (r - rest) ** 2 - m * g * r * lib.cos(t)
        return kinetic - potential

    def field(state):
        q, q_t = state[:2], state[2:]
        mass = hessian(lagrangian, 1)(q, q_t)
        mixed = jacfwd(grad(lagrangian, 1), 0)(q, q_t)
        q_tt = solve(mass, grad(lagrangian, 0)(q, q_t) - mixed @ q_t)
        return lib.concatenate([q_t, q_tt])

    def rk4(state, _):
        k1 = field(state)
        k2 = field(state + dt / 2 * k1)
        k3 = field(state + dt / 2 * k2)
        k4 = field(state + dt * k3)
        new = state + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return new, new[:2]

    return lambda s0: scan(rk4, s0, None, steps)[1]


GATED = {"hidden": 16, "batch": 4, "steps": 80, "input": 6}


def gated_data(seed: int = 1) -> tuple:
    rng = np.random.default_rng(seed)
    n, b, s, i = GATED["hidden"], GATED["batch"], GATED["steps"], GATED["input"]
    params = (rng.standard_normal((i, n)) / 3, rng.standard_normal((n, n)) / 5,
              rng.standard_normal((n, n)) / 5, np.zeros(n))  # fmt: skip
    return params, rng.standard_normal((s, b, i))


def gated_loss(lib: Any, scan: Callable) -> Callable:
    """L7: a gated RNN (h <- g h + (1 - g) tanh(...), g a sigmoid) through scan."""

    def loss(params, xs):
        wx, wh, wg, b = params

        def step(h, x):
            z = x @ wx
            gate = 1.0 / (1.0 + lib.exp(-(h @ wg + b)))
            return gate * h + (1.0 - gate) * lib.tanh(z + h @ wh), lib.sum(h * h)

        h, ys = scan(step, lib.zeros((GATED["batch"], GATED["hidden"])), xs)
        return lib.sum(h**2) + 0.01 * lib.sum(ys)

    return loss


def cubic_roots(lib: Any, while_loop: Callable, vmap: Callable) -> Callable:
    """L8: vmap of Newton's method for x**3 + x = c."""

    def solve(c):
        def body(s):
            step = (s[0] ** 3 + s[0] - c) / (3 * s[0] ** 2 + 1)
            return s[0] - step, step

        return while_loop(lambda s: lib.abs(s[1]) > 1e-13, body, (c / 2, lib.ones_like(c)))[0]

    return vmap(solve)


def lambert_w(lib: Any, while_loop: Callable, vmap: Callable) -> Callable:
    """L9 (fresh): vmap of Newton's method for Lambert's W, w exp(w) = c."""

    def solve(c):
        def body(s):
            ew = lib.exp(s[0])
            step = (s[0] * ew - c) / (ew * (s[0] + 1.0))
            return s[0] - step, step

        return while_loop(lambda s: lib.abs(s[1]) > 1e-13, body,
                          (lib.log1p(c), lib.ones_like(c)))[0]  # fmt: skip

    return vmap(solve)


EQUILIBRIUM = {"size": 12}


def equilibrium_data(seed: int = 2) -> tuple:
    rng = np.random.default_rng(seed)
    n = EQUILIBRIUM["size"]
    return rng.standard_normal((n, n)) / (2.0 * np.sqrt(n)), rng.standard_normal(n)


def equilibrium_loss(lib: Any, custom_vjp: Callable, while_loop: Callable,
                     vjp: Callable) -> Callable:  # fmt: skip
    """L10 (fresh): a deep equilibrium layer z = tanh(W z + a) (W contractive), its
    gradient in (W, a) by the implicit function theorem: the adjoint another fixed point."""

    def layer(w, a, z):
        return lib.tanh(w @ z + a)

    def solve(w, a):
        def cond(c):
            return lib.max(lib.abs(c[0] - c[1])) > 1e-12

        z0 = lib.zeros_like(a)
        return while_loop(cond, lambda c: (c[1], layer(w, a, c[1])), (z0, layer(w, a, z0)))[1]

    root = custom_vjp(solve)

    def fwd(w, a):
        z = solve(w, a)
        return z, (w, a, z)

    def bwd(res, z_bar):
        w, a, z = res
        _, vjp_z = vjp(lambda v: layer(w, a, v), z)

        def cond(c):
            return lib.max(lib.abs(c[0] - c[1])) > 1e-12

        u = while_loop(cond, lambda c: (c[1], vjp_z(c[1])[0] + z_bar),
                       (z_bar, vjp_z(z_bar)[0] + z_bar))[1]  # fmt: skip
        _, vjp_wa = vjp(lambda w_, a_: layer(w_, a_, z), w, a)
        return vjp_wa(u)

    root.defvjp(fwd, bwd)

    def loss(params):
        w, a = params
        z = root(w, a)
        return lib.sum(z * z) + lib.sum(lib.sin(z))

    return loss


def van_der_pol_loss(lib: Any, scan: Callable, steps: int = 120, dt: float = 0.02) -> Callable:
    """L11 (fresh): the gradient, in its damping and the initial state, of a Van der Pol
    oscillator's RK4 path against a target curve (a scan of 120 steps)."""

    def field(state, mu):
        x, v = state[0], state[1]
        return lib.stack([v, mu * (1.0 - x * x) * v - x])

    def loss(params):
        mu, s0 = params
        target = lib.sin(lib.arange(steps) * dt * 1.3)

        def rk4(state, t):
            k1 = field(state, mu)
            k2 = field(state + dt / 2 * k1, mu)
            k3 = field(state + dt / 2 * k2, mu)
            k4 = field(state + dt * k3, mu)
            new = state + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            return new, (new[0] - t) ** 2

        _, errors = scan(rk4, s0, target)
        return lib.sum(errors) * dt

    return loss


def programs() -> dict[str, dict]:
    """Per program: its title, its arguments and, per system, a maker of the function."""
    params, xs = rnn_data()
    ours: dict[str, dict] = {
        "L1": {"title": "fixed point (while_loop) with an implicit custom_vjp gradient, "
                        "16 numbers, jit(grad(f))",
               "args": (np.linspace(1.0, 4.0, 16),),
               "autodiff": lambda: autodiff.grad(fixed_point_loss(
                   anp, autodiff.custom_vjp, autodiff.while_loop, autodiff.vjp))},
        "L2": {"title": "Lagrangian double pendulum: hessian in an RK4 scan, 100 steps",
               "args": (np.array([np.pi / 2, np.pi / 3, 0.0, 0.0]),),
               "autodiff": lambda: pendulum(anp, autodiff.hessian, autodiff.grad,
                                            autodiff.jacfwd,
                                            lambda f, c, x, n: autodiff.scan(f, c, x, n),
                                            anp.linalg.solve)},
        "L3": {"title": f"RNN scan gradient, checkpoint=True (hidden {RNN['hidden']}, batch "
                        f"{RNN['batch']}, {RNN['steps']} steps), jit(grad(f))",
               "args": (params, xs),
               "autodiff": lambda: autodiff.grad(rnn_loss(
                   anp, lambda f, c, x: autodiff.scan(f, c, x, checkpoint=True)))},
        "L4": {"title": "vmap of a Newton while_loop (Kepler's equation, 256 anomalies)",
               "args": (np.linspace(0.1, 6.0, 256),),
               "autodiff": lambda: kepler(anp, autodiff.while_loop, autodiff.vmap)},
        "L5": {"title": "fresh: the implicit gradient of x = cos(a x) (while_loop, custom_vjp), "
                        "12 numbers, jit(grad(f))",
               "args": (np.linspace(0.2, 1.0, 12),),
               "autodiff": lambda: autodiff.grad(fixed_point_cos_loss(
                   anp, autodiff.custom_vjp, autodiff.while_loop, autodiff.vjp))},
        "L6": {"title": "fresh: a spring pendulum's Lagrangian in an RK4 scan, 100 steps",
               "args": (np.array([1.1, 0.7, 0.0, 0.3]),),
               "autodiff": lambda: spring_pendulum(anp, autodiff.hessian, autodiff.grad,
                                                   autodiff.jacfwd,
                                                   lambda f, c, x, n: autodiff.scan(f, c, x, n),
                                                   anp.linalg.solve)},
        "L7": {"title": f"fresh: gated RNN scan gradient (hidden {GATED['hidden']}, batch "
                        f"{GATED['batch']}, {GATED['steps']} steps), jit(grad(f))",
               "args": gated_data(),
               "autodiff": lambda: autodiff.grad(gated_loss(
                   anp, lambda f, c, x: autodiff.scan(f, c, x)))},
        "L8": {"title": "fresh: vmap of Newton's method for x**3 + x = c (200 numbers)",
               "args": (np.linspace(-30.0, 40.0, 200),),
               "autodiff": lambda: cubic_roots(anp, autodiff.while_loop, autodiff.vmap)},
        "L9": {"title": "fresh: vmap of Newton's method for Lambert's W (w exp(w) = c, "
                        "300 numbers)",
               "args": (np.linspace(0.05, 80.0, 300),),
               "autodiff": lambda: lambert_w(anp, autodiff.while_loop, autodiff.vmap)},
        "L10": {"title": f"fresh: a deep equilibrium layer's implicit gradient (size "
                         f"{EQUILIBRIUM['size']}, while_loop, custom_vjp), jit(grad(f))",
                "args": (equilibrium_data(),),
                "autodiff": lambda: autodiff.grad(equilibrium_loss(
                    anp, autodiff.custom_vjp, autodiff.while_loop, autodiff.vjp))},
        "L11": {"title": "fresh: the gradient of a Van der Pol oscillator's RK4 scan (120 steps) "
                         "in its damping and initial state, jit(grad(f))",
                "args": ((np.float64(1.5), np.array([0.5, 0.0])),),
                "autodiff": lambda: autodiff.grad(van_der_pol_loss(
                    anp, lambda f, c, x: autodiff.scan(f, c, x)))},
    }  # fmt: skip
    if HAVE["jax"]:
        jwhile = lambda c, b, i: jax.lax.while_loop(c, b, i)
        ours["L1"]["jax"] = lambda: jax.grad(fixed_point_loss(jnp, jax.custom_vjp, jwhile,
                                                              jax.vjp))  # fmt: skip
        ours["L2"]["jax"] = lambda: pendulum(
            jnp, jax.hessian, jax.grad, jax.jacfwd,
            lambda f, c, x, n: jax.lax.scan(f, c, x, length=n), jnp.linalg.solve)  # fmt: skip
        ours["L3"]["jax"] = lambda: jax.grad(rnn_loss(
            jnp, lambda f, c, x: jax.lax.scan(jax.checkpoint(f), c, x)))  # fmt: skip
        ours["L4"]["jax"] = lambda: kepler(jnp, jwhile, jax.vmap)
        ours["L5"]["jax"] = lambda: jax.grad(fixed_point_cos_loss(jnp, jax.custom_vjp, jwhile,
                                                                  jax.vjp))  # fmt: skip
        ours["L6"]["jax"] = lambda: spring_pendulum(
            jnp, jax.hessian, jax.grad, jax.jacfwd,
            lambda f, c, x, n: jax.lax.scan(f, c, x, length=n), jnp.linalg.solve)  # fmt: skip
        ours["L7"]["jax"] = lambda: jax.grad(gated_loss(
            jnp, lambda f, c, x: jax.lax.scan(f, c, x)))  # fmt: skip
        ours["L8"]["jax"] = lambda: cubic_roots(jnp, jwhile, jax.vmap)
        ours["L9"]["jax"] = lambda: lambert_w(jnp, jwhile, jax.vmap)
        ours["L11"]["jax"] = lambda: jax.grad(van_der_pol_loss(
            jnp, lambda f, c, x: jax.lax.scan(f, c, x)))  # fmt: skip
        ours["L10"]["jax"] = lambda: jax.grad(equilibrium_loss(jnp, jax.custom_vjp, jwhile,
                                                               jax.vjp))  # fmt: skip
    return ours


def _jax_args(args: tuple) -> Any:
    return jax.tree_util.tree_map(jnp.asarray, args)


def systems(program: dict) -> dict[str, Callable[[], Any]]:
    args = program["args"]
    replay = autodiff.jit(program["autodiff"](), compile=False)
    compiled = autodiff.jit(program["autodiff"](), compile=True)
    for jitted in (replay, compiled):  # staged, then replayed (and compiled): not timed
        jitted(*args)
        jitted(*args)
    out: dict[str, Callable[[], Any]] = {}
    if "jax" in program:
        jitted, jargs = jax.jit(program["jax"]()), _jax_args(args)
        out[JAX] = lambda: jitted(*jargs)
    out[REPLAY] = lambda: replay(*args)
    out[COMPILED] = lambda: compiled(*args)
    return out


# --- the report ---------------------------------------------------------------------------------


def report(rounds: int = 7) -> tuple[list[str], list[tuple[str, str, float, str]]]:
    """Markdown lines and (workload, target, value, verdict) rows."""
    lines: list[str] = []
    targets: list[tuple[str, str, float, str]] = []
    if not default_backend().available():
        return [f"## L1-L8: not run ({default_backend().why_not()})", ""], targets
    for name, program in programs().items():
        rows = h.interleave(systems(program), JAX if HAVE["jax"] else REPLAY, rounds=rounds,
                            inner=_inner(name), rtol=1e-9, clock=time.process_time)  # fmt: skip
        by = {r.system: r.median for r in rows}
        lines += [f"## {name}: {program['title']}", "",
                  *h.table(rows, JAX if HAVE["jax"] else REPLAY, "ms", 1e3), ""]  # fmt: skip
        if HAVE["jax"]:
            ratio = by[COMPILED] / by[JAX]
            targets.append((name, f"compiled x JAX jit ≤ {LIMIT}", ratio,
                            "reached" if ratio <= LIMIT else "**missed**"))  # fmt: skip
    return [*lines, ""], targets


def _inner(name: str) -> int:
    return {
        "L1": 200,
        "L2": 2,
        "L3": 2,
        "L4": 50,
        "L5": 100,
        "L6": 2,
        "L7": 2,
        "L8": 50,
        "L9": 50,
        "L10": 50,
        "L11": 5,
    }[name]


def main() -> None:
    quick = "--quick" in sys.argv
    started = time.perf_counter()
    lines, targets = report(rounds=5 if quick else 15)
    text = [
        "# Benchmarks: loops and small programs against JAX jit",
        "",
        f"`python -m benchmarks.loops`, {datetime.date.today().isoformat()}. One thread; the "
        "systems of a table run in the same process, interleaved round by round; times are "
        "the process's CPU time (a shared machine disturbs it far less than wall time; JAX's "
        "dispatch synchronous, so its work is in the process's one thread too), medians (and "
        "min-max), ratios to JAX jit's median; every system's result is checked against "
        "JAX's first.",
        "",
        *h.environment(),
        "",
        *lines,
        *h.targets_table(targets),
        f"Run time: {time.perf_counter() - started:.0f} s.",
        "",
    ]
    OUT.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    if hasattr(os, "sched_setaffinity"):  # one core, as python -m benchmarks runs
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    main()
