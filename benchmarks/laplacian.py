"""L1-L3: Laplacians of networks by every method, against the Hessian's trace and JAX.

    python -m benchmarks.laplacian           # these tables alone: results-laplacian.md
    python -m benchmarks.laplacian --quick   # fewer sizes and rounds

``python -m benchmarks`` runs it too, into results.md.  NumPy float64, one thread, every
system interleaved round by round in one process, medians (``_harness.interleave``),
every exact system checked against autodiff's ``trace(hessian(f))`` first.

- **L1**: the Laplacian of a tanh MLP (width 100, depth 5, and depth 10 at d = 128) with
  respect to its input, d = 16 ... 1,024: per point and ``vmap``-ed over points.  autodiff:
  ``trace(hessian(f))``, ``laplacian`` by collapsed Taylor mode (the forward Laplacian),
  by a jet per direction (``"taylor"``), by an HVP per direction (``"hvp"``), under
  ``jit``; the estimators (16 probes) for information.  JAX under its ``jit``:
  ``trace(jacfwd(jacrev(f)))`` and ``vmap`` of ``jet`` over the unit vectors.  Memory:
  the peak of NumPy's allocations during one call (``tracemalloc``); first call: a
  fresh transform's first call (staging, detection, JAX's compilation).
- **L2**: programs of independent particles (a shared network per particle, summed):
  ``laplacian`` with the program's sparsity (one direction per colour: 3 for 3-D
  particles) against ``trace(hessian(f))``; a second program written fresh for the check.
- **L3**: one training step of a physics-informed network for the Poisson equation
  ``-Delta u = g`` in d = 10 and 100 (the loss the mean squared residual at 64 collocation
  points, its gradient with respect to the parameters, an SGD update), against JAX's.

Goals (issue 32): the collapsed Laplacian >= 4.6x faster than the Hessian's trace at
d >= 100; the sparse path >= 86x on a per-particle program.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread, as python -m benchmarks runs
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import importlib.util  # noqa: E402
import itertools  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import autodiff.numpy as anp  # noqa: E402
from benchmarks import _harness as h  # noqa: E402

HAVE_JAX = importlib.util.find_spec("jax") is not None
HESSIAN = "autodiff trace(hessian(f))"
COLLAPSED = "autodiff laplacian (collapsed)"
SPARSE = "autodiff laplacian (sparse)"
JIT_HESSIAN = "autodiff jit(trace(hessian))"
JIT_SPARSE = "autodiff jit(laplacian (sparse))"


def _jax():
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def mlp_weights(d: int, width: int = 100, depth: int = 5, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = [d, *[width] * depth]
    Ws = [rng.standard_normal((a, b)) / np.sqrt(a) for a, b in itertools.pairwise(sizes)]
    return [*Ws, rng.standard_normal(width) / np.sqrt(width)]


def fresh_net(params: list, x: Any, lib: Any = anp) -> Any:
    """The L1 check on a program not tuned on: a residual sine network (width 80)."""
    h = lib.sin(x @ params[0])
    for W in params[1:-1]:
        h = h + 0.5 * lib.sin(h @ W)
    return h @ params[-1]


def silu_net(params: list, x: Any, lib: Any = anp) -> Any:
    """The second L1 check, written after the tuning: a SiLU network with biases
    (width 96), ``z / (1 + exp(-z))``: a quotient of two moving values."""
    h = x
    for W, b in zip(params[:-1:2], params[1:-1:2]):
        z = h @ W + b
        h = z / (1.0 + lib.exp(-z))
    return h @ params[-1]


def silu_weights(d: int, depth: int, seed: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = [d, *[96] * depth]
    out: list[np.ndarray] = []
    for a, b in itertools.pairwise(sizes):
        out += [rng.standard_normal((a, b)) / np.sqrt(a), 0.1 * rng.standard_normal(b)]
    return [*out, rng.standard_normal(96) / np.sqrt(96)]


def mlp(params: list, x: Any, lib: Any = anp) -> Any:
    h = x
    for W in params[:-1]:
        h = lib.tanh(h @ W)
    return h @ params[-1]


NETS = {
    False: ("tanh MLP, width 100", mlp),
    True: ("fresh: residual sine network, width 80", fresh_net),
    "new": ("new (after tuning): SiLU network with biases, width 96", silu_net),
}


def _peak_mb(run: Callable[[], Any]) -> float:
    """The peak of NumPy's allocations during one call, in MB."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def _first_call(make: Callable[[], Callable[[], Any]]) -> float:
    start = time.perf_counter()
    make()()
    return time.perf_counter() - start


# --- L1: an MLP's Laplacian ----------------------------------------------------------------------


def _network(d: int, depth: int, fresh: bool | str) -> tuple[Callable, Any]:
    """L1's network of ``d`` inputs and its parameters: the tuned MLP, the fresh one
    (``fresh=True``) or the SiLU network written afterwards (``"new"``)."""
    net = NETS[fresh][1]
    if fresh == "new":
        params = silu_weights(d, depth)
    else:
        params = mlp_weights(d, width=80 if fresh else 100, depth=depth, seed=2 if fresh else 0)
    return net, params


def l1_systems(d: int, depth: int, points: int = 0, fresh: bool | str = False) -> tuple:
    """(exact systems, estimators, makers of fresh systems for the first call)."""
    net, params = _network(d, depth, fresh)
    f = lambda x: net(params, x)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((points, d) if points else d)

    def trace_hessian(x):
        return anp.trace(autodiff.hessian(f)(x))

    ops: dict[str, Callable] = {
        HESSIAN: trace_hessian,
        COLLAPSED: autodiff.laplacian(f, method="collapsed"),
        "autodiff laplacian (taylor)": autodiff.laplacian(f, method="taylor"),
        "autodiff laplacian (hvp)": autodiff.laplacian(f, method="hvp"),
    }
    makers: dict[str, Callable] = {
        HESSIAN: lambda: trace_hessian,
        COLLAPSED: lambda: autodiff.laplacian(f, method="collapsed"),
        JIT_HESSIAN: lambda: autodiff.jit(lambda x: trace_hessian(x)),
        "autodiff jit(laplacian)": lambda: autodiff.jit(autodiff.laplacian(f)),
    }
    ops[JIT_HESSIAN] = makers[JIT_HESSIAN]()
    ops["autodiff jit(laplacian)"] = makers["autodiff jit(laplacian)"]()
    # jit's replay tier alone: for these graphs the compiled kernels (compile="auto",
    # swapped in after a few calls) can be slower than the NumPy calls they replace
    ops["autodiff jit(trace(hessian)), replay"] = autodiff.jit(trace_hessian, compile=False)
    ops["autodiff jit(laplacian), replay"] = autodiff.jit(autodiff.laplacian(f), compile=False)
    estimators = {
        f"autodiff {m} (16 probes)": autodiff.laplacian(f, method=m, samples=16, seed=0)
        for m in ("hutchinson", "stde")
    }
    if points:
        ops = {name: autodiff.vmap(op) for name, op in ops.items()}
        makers = {name: (lambda make=make: autodiff.vmap(make())) for name, make in makers.items()}
        estimators = {name: autodiff.vmap(op) for name, op in estimators.items()}
    systems = {name: (lambda op=op: op(x)) for name, op in ops.items()}
    randoms = {name: (lambda op=op: op(x)) for name, op in estimators.items()}
    if HAVE_JAX:
        for name, make in _jax_laplacians(net, params, points).items():
            op = make()
            systems[name] = lambda op=op: op(x)
            makers[name] = make
    first = {name: (lambda make=make: (lambda op: lambda: op(x))(make()))
             for name, make in makers.items()}  # fmt: skip
    return systems, randoms, first


def _jax_laplacians(net: Callable, params: list, points: int) -> dict[str, Callable]:
    jax = _jax()
    jnp = jax.numpy
    from jax.experimental.jet import jet

    jparams = [jnp.asarray(p) for p in params]

    def make(kind: str) -> Callable:
        """A fresh jitted function (so its first call compiles: JAX caches by function)."""

        def f(x):
            return net(jparams, x, jnp)

        def hessian_trace(x):
            return jnp.trace(jax.jacfwd(jax.jacrev(f))(x))

        def by_jet(x):
            def second(v):
                return jet(f, (x,), ((v, jnp.zeros_like(v)),))[1][1]

            return jnp.sum(jax.vmap(second)(jnp.eye(x.shape[0], dtype=x.dtype)))

        op = hessian_trace if kind == "hessian" else by_jet
        return jax.jit(jax.vmap(op) if points else op)

    return {"JAX jit trace(jacfwd(jacrev))": lambda: make("hessian"),
            "JAX jit jet": lambda: make("jet")}  # fmt: skip


def l1_rows(d: int, depth: int, points: int, rounds: int, fresh: bool | str = False) -> dict:
    systems, randoms, first = l1_systems(d, depth, points, fresh)
    rows = h.interleave(systems, HESSIAN, rounds=rounds, rtol=1e-8, shuffle=True)
    random_rows = h.interleave(randoms, next(iter(randoms)), rounds=rounds, rtol=1e9, shuffle=True)
    memory = {name: _peak_mb(run) for name, run in systems.items()
              if name.startswith("autodiff")}  # fmt: skip
    firsts = {name: _first_call(make) for name, make in first.items()}
    floor = products_floor(d, depth, fresh, rounds) if not points else None
    return dict(d=d, depth=depth, points=points, rows=rows, random=random_rows, memory=memory,
                first=firsts, fresh=fresh, floor=floor)  # fmt: skip


PRODUCTS = ("matmul", "einsum", "dot", "tensordot")


def _flops(eqn: Any) -> int:
    """Floating-point operations of a product: 2 per multiply-add of a matmul, 2 per
    element of an einsum's largest operand (a sum of products over one axis)."""
    shapes = [v.aval.shape for v in eqn.invars]
    if eqn.prim.name == "matmul":
        return 2 * int(np.prod(eqn.outvars[0].aval.shape)) * shapes[0][-1]
    return 2 * max(int(np.prod(s)) for s in shapes)


def products_floor(d: int, depth: int, fresh: bool | str,
                   rounds: int) -> tuple[float, float, int, int]:  # fmt: skip
    """The arithmetic floor of each side: the CPU time of the matrix products (and
    einsums) in ``jit``'s optimised graph of ``trace(hessian(f))`` and of the collapsed
    Laplacian, run alone on operands of their shapes (medians over rounds, ms), and
    their floating-point operations.  The ratio of the operations bounds what any
    implementation of the two algorithms can reach; that of the times, this one's."""
    net, params = _network(d, depth, fresh)
    f = lambda x: net(params, x)
    x = np.random.default_rng(1).standard_normal(d)
    rng = np.random.default_rng(0)
    out, flops = [], []
    for fn in (lambda x: anp.trace(autodiff.hessian(f)(x)), autodiff.laplacian(f)):
        eqns = [e for e in autodiff.jit(fn, compile=False).graph(x).eqns
                if e.prim.name in PRODUCTS]  # fmt: skip
        flops.append(sum(_flops(e) for e in eqns))
        calls = [(e.prim.impl, [rng.standard_normal(v.aval.shape) for v in e.invars], e.params)
                 for e in eqns]  # fmt: skip
        times = []
        for _ in range(max(rounds, 5)):
            start = time.process_time()
            for impl, operands, params_ in calls:
                impl(*operands, **params_)
            times.append(time.process_time() - start)
        out.append(float(np.median(times)) * 1e3)
    return out[0], out[1], flops[0], flops[1]


def ratios(rows: list, num: str, den: str, cpu: bool = False) -> tuple[float, float]:
    """``num``'s time over ``den``'s: of the medians, and of the fastest rounds (the least
    disturbed by other jobs on a shared machine); wall clock, or CPU time."""
    by = {row.system: row for row in rows}
    if cpu:
        return (by[num].cpu_median / by[den].cpu_median, min(by[num].cpu) / min(by[den].cpu))
    return (by[num].median / by[den].median, min(by[num].times) / min(by[den].times))


def _l1_table(r: dict) -> list[str]:
    base = next(row for row in r["rows"] if row.system == HESSIAN)
    what = f"{r['points']} points, vmap" if r["points"] else "one point"
    net = NETS[r["fresh"]][0]
    lines = [f"### {net}, d = {r['d']}, depth {r['depth']}, {what}", "",
             "| system | median ms | fastest ms | x trace(hessian) faster (medians, fastest) "
             "| CPU median ms | CPU fastest ms | x by CPU time (medians, fastest) "
             "| peak MB | first call ms | agrees |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in [*r["rows"], *r["random"]]:
        estimate = row in r["random"]
        agrees = "estimate" if estimate else {True: "yes", False: "**NO**", None: "-"}[row.agrees]
        mem = r["memory"].get(row.system)
        first = r["first"].get(row.system)
        lines.append(
            f"| {row.system} | {row.median * 1e3:.3g} | {min(row.times) * 1e3:.3g} | "
            f"{base.median / row.median:.2f}, {min(base.times) / min(row.times):.2f} | "
            f"{row.cpu_median * 1e3:.3g} | {min(row.cpu) * 1e3:.3g} | "
            f"{base.cpu_median / row.cpu_median:.2f}, {min(base.cpu) / min(row.cpu):.2f} | "
            f"{'-' if mem is None else f'{mem:.1f}'} | "
            f"{'-' if first is None else f'{first * 1e3:.0f}'} | {agrees} |"
        )
    if r.get("floor"):
        hess, lap, hess_flops, lap_flops = r["floor"]
        lines += ["", f"The matrix products alone (`jit`'s graphs): trace(hessian) "
                  f"{hess_flops / 1e6:.1f} MFLOP in {hess:.3g} ms, the collapsed Laplacian "
                  f"{lap_flops / 1e6:.1f} MFLOP in {lap:.3g} ms (CPU medians): the arithmetic "
                  f"bounds the ratio at {hess_flops / lap_flops:.2f}x, these products' "
                  f"times at {hess / lap:.2f}x."]  # fmt: skip
    return [*lines, ""]


# --- L2: per-particle programs -------------------------------------------------------------------


def particles(n: int, dim: int, seed: int, act: str) -> tuple[Callable, np.ndarray]:
    rng = np.random.default_rng(seed)
    W1, W2 = rng.standard_normal((dim, 100)) / np.sqrt(dim), rng.standard_normal((100, 100)) / 10
    w3 = rng.standard_normal(100) / 10

    def energy(x):
        p = anp.reshape(x, (n, dim))
        if act == "tanh":  # a shared network per particle, and a confining potential
            h = anp.tanh(anp.tanh(p @ W1) @ W2)
            return anp.sum(h @ w3) + anp.sum(anp.exp(-anp.sum(p**2, axis=1)))
        if act == "sp":  # the first fresh program: softplus and sine features, a quartic well
            h = anp.logaddexp(0.0, anp.sin(p @ W1) @ W2)
            return anp.sum(anp.cos(h @ w3)) + 0.1 * anp.sum(anp.sum(p**2, axis=1) ** 2)
        # written after the tuning: Gaussian features, a rational squashing, a log well
        g = anp.exp(-((p @ W1) ** 2)) @ W2
        h = g / (1.0 + anp.abs(g))
        return anp.sum(anp.tanh(h) @ w3) + anp.sum(anp.log1p(anp.sum(p * p, axis=1)))

    return energy, rng.standard_normal(n * dim)


def l2_row(name: str, f: Callable, x: np.ndarray, rounds: int) -> dict:
    systems = {
        HESSIAN: lambda: anp.trace(autodiff.hessian(f)(x)),
        COLLAPSED: (lambda op: lambda: op(x))(autodiff.laplacian(f, method="collapsed")),
        SPARSE: (lambda op: lambda: op(x))(autodiff.laplacian(f, method="sparse")),
        "autodiff laplacian (auto)": (lambda op: lambda: op(x))(autodiff.laplacian(f)),
        # the same tier on both sides, as folx's figures (both under JAX's jit)
        JIT_HESSIAN: (lambda op: lambda: op(x))(
            autodiff.jit(lambda x: anp.trace(autodiff.hessian(f)(x)))
        ),
        JIT_SPARSE: (lambda op: lambda: op(x))(
            autodiff.jit(autodiff.laplacian(f, method="sparse"))
        ),
    }
    rows = h.interleave(systems, HESSIAN, rounds=rounds, rtol=1e-8, shuffle=True)
    detect = _first_call(lambda: (lambda op: lambda: op(x))(autodiff.laplacian(f, method="sparse")))
    memory = {name: _peak_mb(run) for name, run in systems.items()}
    return dict(name=name, d=x.size, rows=rows, detect=detect, memory=memory)


def _l2_table(found: list[dict]) -> list[str]:
    lines = ["| program | d | system | median ms | fastest ms | x trace(hessian) faster (medians, "
             "fastest) | CPU median ms | CPU fastest ms | x by CPU time (medians, fastest) "
             "| peak MB | agrees |", "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in found:
        for row in r["rows"]:
            agrees = {True: "yes", False: "**NO**", None: "-"}[row.agrees]
            median, fast = ratios(r["rows"], HESSIAN, row.system)
            cpu_median, cpu_fast = ratios(r["rows"], HESSIAN, row.system, cpu=True)
            lines.append(f"| {r['name']} | {r['d']} | {row.system} | {row.median * 1e3:.3g} | "
                         f"{min(row.times) * 1e3:.3g} | {median:.1f}, {fast:.1f} | "
                         f"{row.cpu_median * 1e3:.3g} | {min(row.cpu) * 1e3:.3g} | "
                         f"{cpu_median:.1f}, {cpu_fast:.1f} | "
                         f"{r['memory'][row.system]:.1f} | {agrees} |")  # fmt: skip
        lines.append(f"| {r['name']} | {r['d']} | sparse: first call (staging, detection, "
                     f"colouring) | {r['detect'] * 1e3:.0f} |{' - |' * 7}")  # fmt: skip
    return [*lines, ""]


# --- L3: a PINN training step --------------------------------------------------------------------


def pinn_problem(d: int, points: int = 64, width: int = 64, seed: int = 0) -> tuple:
    """u(x) = MLP(x) fitted to -Delta u = g with u* = mean(sin(pi x)) (g = pi^2 u*)."""
    rng = np.random.default_rng(seed)
    sizes = [d, width, width]
    params = [rng.standard_normal((a, b)) / np.sqrt(a) for a, b in itertools.pairwise(sizes)]
    params.append(rng.standard_normal(width) / np.sqrt(width))
    xs = rng.uniform(-1, 1, (points, d))
    g = np.pi**2 * np.mean(np.sin(np.pi * xs), axis=1)
    return params, xs, g


def pinn_systems(d: int) -> dict[str, Callable[[], Any]]:
    params, xs, g = pinn_problem(d)
    lr = 1e-3

    def u(x, ps):
        return mlp(ps, x)

    lap = autodiff.laplacian(u, argnums=0)

    def loss(ps):
        residual = autodiff.vmap(lap, in_dims=(0, None))(xs, ps) + g
        return anp.mean(residual**2)

    def step(ps):
        grads = autodiff.grad(loss)(ps)
        return [p - lr * gp for p, gp in zip(ps, grads)]

    jitted = autodiff.jit(step)
    systems: dict[str, Callable[[], Any]] = {
        "autodiff step (collapsed Laplacian)": lambda: step(params),
        "autodiff jit(step)": lambda: jitted(params),
    }
    hess_loss = lambda ps: anp.mean((autodiff.vmap(
        lambda x: anp.trace(autodiff.hessian(u)(x, ps)))(xs) + g) ** 2)  # fmt: skip
    systems["autodiff step (trace(hessian))"] = lambda: [
        p - lr * gp for p, gp in zip(params, autodiff.grad(hess_loss)(params))
    ]
    if HAVE_JAX:
        jax = _jax()
        jnp = jax.numpy
        jps = [jnp.asarray(p) for p in params]

        def jloss(ps):
            lapl = jax.vmap(
                lambda x: jnp.trace(jax.jacfwd(jax.jacrev(lambda x: mlp(ps, x, jnp)))(x))
            )
            return jnp.mean((lapl(xs) + g) ** 2)

        jstep = jax.jit(lambda ps: [p - lr * gp for p, gp in zip(ps, jax.grad(jloss)(ps))])
        systems["JAX jit step (trace(jacfwd(jacrev)))"] = lambda: jstep(jps)
    return systems


# --- the report --------------------------------------------------------------------------------


def report(
    rounds: int = 11, quick: bool = False
) -> tuple[list[str], list[tuple[str, str, float, str]]]:
    """Markdown lines and (workload, target, value, verdict) rows."""
    sizes: list[tuple[int, int, bool | str]] = [
        (16, 5, False), (128, 5, False), (1024, 5, False)] if quick else [
        (16, 5, False), (64, 5, False), (128, 5, False), (128, 10, False), (256, 5, False),
        (1024, 5, False), (256, 6, True), (128, 5, "new"), (256, 5, "new")]  # fmt: skip
    lines = ["## L1: the Laplacian of an MLP (width 100)", "",
             "Medians over interleaved rounds; \"x trace(hessian) faster\" is autodiff's "
             "`trace(hessian(f))` time over the system's; peak MB: NumPy's allocations in one "
             "call (autodiff's systems); first call: a fresh transform's first call (JAX: "
             "with its compilation). CPU: the process's CPU time, which on a shared machine "
             "is not charged for the time other jobs held the core (the targets go by it); "
             "\"replay\": jit's replay tier alone (compile=False).", ""]  # fmt: skip
    targets = []
    for d, depth, fresh in sizes:
        r = l1_rows(d, depth, 0, rounds, fresh)
        lines += _l1_table(r)
        if d >= 100:
            name = f"L1 {({False: '', True: 'fresh ', 'new': 'new '})[fresh]}d={d} depth {depth}"
            bound = r["floor"][2] / r["floor"][3]  # the operations' ratio
            for what, num, den in [
                ("collapsed x trace(hessian)", HESSIAN, COLLAPSED),
                ("jit(laplacian) x jit(trace(hessian))", JIT_HESSIAN, "autodiff jit(laplacian)"),
                (
                    "the same, replay tier",
                    "autodiff jit(trace(hessian)), replay",
                    "autodiff jit(laplacian), replay",
                ),
            ]:
                targets.append(_target(name, what, 4.6, r["rows"], num, den, bound))
    for d, points in [(16, 64), (128, 16)] if quick else [(16, 64), (128, 64), (1024, 8)]:
        lines += _l1_table(l1_rows(d, 5, points, max(5, rounds // 2)))
    lines += ["## L2: programs of independent particles: the sparse path", "",
              "`laplacian(f, method=\"sparse\")`: the Hessian's pattern read from the program "
              "once per input signature, coloured; one direction per colour.", ""]  # fmt: skip
    found = []
    for name, n, dim, seed, act in [
        ("tanh network, 100 particles in 3-D", 100, 3, 0, "tanh"),
        ("fresh: softplus/sine, 64 particles in 4-D", 64, 4, 1, "sp"),
        ("new (after tuning): Gaussian features, 50 particles in 5-D", 50, 5, 4, "gauss"),
    ]:
        f, x = particles(n, dim, seed, act)
        found.append(l2_row(name, f, x, rounds))
    lines += _l2_table(found)
    for r in found:
        targets.append(_target(f"L2 {r['name']}", "sparse x trace(hessian)", 86, r["rows"],
                               HESSIAN, SPARSE))  # fmt: skip
        targets.append(_target(f"L2 {r['name']}", "jit(sparse) x jit(trace(hessian))", 86,
                               r["rows"], JIT_HESSIAN, JIT_SPARSE))  # fmt: skip
    lines += ["## L3: a physics-informed network's training step (Poisson, 64 points)", "",
              "The residual's Laplacian by `laplacian` (collapsed) inside `grad` with respect "
              "to the parameters, `vmap` over the points; the same by `trace(hessian)`; JAX's "
              "under its `jit`.", ""]  # fmt: skip
    for d in (10, 100):
        systems = pinn_systems(d)
        rows = h.interleave(systems, next(iter(systems)), rounds=max(5, rounds // 2), rtol=1e-8,
                            info=tuple(s for s in systems if s.startswith("JAX")),
                            shuffle=True)  # fmt: skip
        lines += [f"### d = {d}", "", *h.table(rows, next(iter(systems)), "ms", 1e3), ""]
    return lines, targets


def _target(name: str, what: str, goal: float, rows: list, num: str, den: str,
            bound: float | None = None) -> tuple:  # fmt: skip
    """A targets row: judged by the CPU-time medians (the machine is shared: wall time
    also counts the time other jobs held the core), the other three ratios beside, and
    the bound the matrix products alone put on the ratio where it is known."""
    wall, wall_fast = ratios(rows, num, den)
    cpu, cpu_fast = ratios(rows, num, den, cpu=True)
    text = (f"{what} ≥ {goal:g} by CPU medians (CPU fastest {cpu_fast:.1f}; wall medians "
            f"{wall:.1f}, fastest {wall_fast:.1f})")  # fmt: skip
    if bound is not None:
        text += f"; the products' arithmetic bounds it at {bound:.1f}"
    return (name, text, cpu, "reached" if cpu >= goal else "**missed**")


def main() -> None:
    quick = "--quick" in sys.argv
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    lines, targets = report(rounds=3 if quick else 11, quick=quick)
    head = ["# Laplacians and differential operators", "",
            f"`python -m benchmarks.laplacian{' --quick' if quick else ''}`", "",
            *h.environment(), ""]  # fmt: skip
    text = [*head, *lines, *h.targets_table(targets)]
    out = pathlib.Path(__file__).with_name("results-laplacian.md")
    out.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
