"""Compiled kernels on strided arguments (``autodiff/compiler/layouts.py``).

    python -m benchmarks.strided [--rounds 7] [--ab BASE]

1. ``grad(jit(f))`` of the convolutional networks of ``benchmarks/convolution.py``
   (MNIST-sized NHWC, CIFAR-sized NCHW): eagerly, the replay (``compile=False``), the
   kernels (``compile=True``: the forward graph's kernel, then the backward graph's on
   the residuals), ``jit(grad(f))`` compiled, and JAX's ``grad(jit(f))``.
2. Programs written for this measurement, on strided arguments: two fused chains (one
   of transcendental functions, one of exact arithmetic) with sums over 10^5 elements,
   called on a transposed array (``jit(f)(x.T)``) and on every other column of a wider
   one, against NumPy, against the same jitted function on a C-ordered copy, and
   against the replay (what a strided call ran before: the kernel's check sent it to
   the region's NumPy calls); ``grad(jit(mlp))`` of a small MLP whose weights arrive
   transposed, against JAX's ``grad(jit(mlp))``.
3. ``--ab BASE``: the per-call cost of a small compiled program on C-ordered arguments
   (the path a kernel's variants must not slow), this checkout against commit BASE, in
   alternating fresh processes (each its fastest of 15 rounds of 20,000 calls).

CPU time per call, medians over interleaved rounds, one thread, the process bound to
one core; every system's result is checked against its table's reference first.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before NumPy loads OpenBLAS: one thread
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import autodiff
import autodiff.numpy as anp
from autodiff import grad, lax
from benchmarks import _harness as h
from benchmarks import convolution as conv  # (XLA's flags; binds the process to one core)


def _jax():
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    return jax


def networks(rounds: int) -> list[str]:
    lines = []
    for seed, (title, loss, data) in enumerate(conv.NETWORKS):
        if "1-D" not in title:
            lines += _network(title, loss, data(np.random.default_rng(seed)), rounds)
    return lines


def _network(title: str, loss, data, rounds: int) -> list[str]:
    jax = _jax()
    params, x, y = data

    def f(p, x, y):
        return loss(lax, anp, p, x, y)

    replayed = grad(autodiff.jit(f, compile=False))
    compiled = grad(autodiff.jit(f, compile=True))
    outer = autodiff.jit(grad(f), compile=True)
    systems = {
        "autodiff eager grad": lambda: grad(f)(params, x, y),
        "autodiff grad(jit) replay": lambda: replayed(params, x, y),
        "autodiff grad(jit) compiled": lambda: compiled(params, x, y),
        "autodiff jit(grad) compiled": lambda: outer(params, x, y),
    }
    reference = "autodiff eager grad"
    if jax is not None:
        theirs = jax.grad(jax.jit(lambda p, x, y: loss(jax.lax, jax.numpy, p, x, y)))
        systems["JAX grad(jit)"] = lambda: theirs(params, x, y)
        reference = "JAX grad(jit)"
    rows = h.interleave(systems, reference, rounds=rounds, rtol=1e-8, clock=time.process_time)
    return [f"### grad(jit(f)): {title}", "", *h.table(rows, reference, "ms (CPU)", 1e3), ""]


def chain(np_, x):
    """A fused elementwise chain and its sums (written for this measurement)."""
    z = np_.tanh(x * 1.5 + 0.25) * np_.exp(-x * x) + np_.sin(x) * 0.5
    return np_.sum(z, axis=0), np_.sum(z * z)


def arith(np_, x):
    """Exact arithmetic only (compiled inline, vectorised) and its sums."""
    z = (x * 1.5 + 0.25) * x - x * x * x * 0.125 + 2.0
    return np_.sum(z, axis=0), np_.sum(z * z)


def mlp(np_, w1, w2, x):
    h1 = np_.tanh(x @ w1 + 0.1)
    return np_.sum(np_.tanh(h1 @ w2) ** 2) + 1e-3 * np_.sum(h1 * h1)


def fresh(rounds: int) -> list[str]:
    jax = _jax()
    rng = np.random.default_rng(7)
    lines = []
    base = rng.normal(size=(316, 316))
    wide = rng.normal(size=(316, 632))
    for program in (chain, arith):
        lines += _strided_chain(program, "a transposed 316x316 array (x.T)", base.T, rounds)
        lines += _strided_chain(program, "every other column of a 316x632 array (x[:, ::2])",
                                wide[:, ::2], rounds)  # fmt: skip
    w1, w2 = rng.normal(size=(64, 128)).T, rng.normal(size=(64, 10))
    xs = rng.normal(size=(256, 128))
    ours = grad(autodiff.jit(lambda a, b, v: mlp(anp, a, b, v), compile=True), argnums=(0, 1))
    replayed = grad(autodiff.jit(lambda a, b, v: mlp(anp, a, b, v), compile=False),
                    argnums=(0, 1))  # fmt: skip
    eager = grad(lambda a, b, v: mlp(anp, a, b, v), argnums=(0, 1))
    systems = {
        "autodiff eager grad": lambda: eager(w1, w2, xs),
        "autodiff grad(jit) replay": lambda: replayed(w1, w2, xs),
        "autodiff grad(jit) compiled": lambda: ours(w1, w2, xs),
    }
    reference = "autodiff eager grad"
    if jax is not None:
        theirs = jax.grad(jax.jit(lambda a, b, v: mlp(jax.numpy, a, b, v)), argnums=(0, 1))
        systems["JAX grad(jit)"] = lambda: theirs(w1, w2, xs)
        reference = "JAX grad(jit)"
    rows = h.interleave(systems, reference, rounds=rounds, inner=10, rtol=1e-10,
                        clock=time.process_time)  # fmt: skip
    lines += ["### grad(jit(mlp)), 128-64-10, batch 256, the first weights transposed (fresh)",
              "", *h.table(rows, reference, "ms (CPU)", 1e3), ""]  # fmt: skip
    return lines


def _strided_chain(program, title: str, x: np.ndarray, rounds: int) -> list[str]:
    c = np.ascontiguousarray(x)
    kernels = autodiff.jit(lambda v: program(anp, v), compile=True)
    replay = autodiff.jit(lambda v: program(anp, v), compile=False)
    systems = {
        "NumPy": lambda: program(np, x),
        "autodiff jit, compiled, strided (the kernel's variant)": lambda: kernels(x),
        "autodiff jit, replay, strided (what a strided call ran before)": lambda: replay(x),
        "autodiff jit, compiled, on a C-ordered copy": lambda: kernels(c),
    }
    rows = h.interleave(systems, "NumPy", rounds=rounds, inner=20, rtol=1e-12,
                        clock=time.process_time)  # fmt: skip
    variants = [len(e.compiled.kernels[0].impl.variants.described())
                for e in kernels._entries.values()]  # fmt: skip
    return [f"### jit({program.__name__}) on {title}, 10^5 elements (fresh)", "",
            *h.table(rows, "NumPy", "ms (CPU)", 1e3), "",
            f"(layouts compiled besides C order: {variants})", ""]  # fmt: skip


_PER_CALL = """
import statistics, time
import numpy as np
import autodiff, autodiff.numpy as anp
f = autodiff.jit(lambda v: anp.sum(anp.tanh(v * 1.5) * v + 0.5), compile=True)
x = np.linspace(0.1, 0.9, 64)
for _ in range(3):
    f(x)
assert all(k.calls_as_numpy == 0 for e in f._entries.values() for k in e.compiled.kernels) \\
    if hasattr(autodiff.compiler.kernel_call.KernelPrimitive, "calls_as_numpy") else True
times = []
for _ in range(15):
    start = time.process_time()
    for _ in range(20000):
        f(x)
    times.append((time.process_time() - start) / 20000)
print(min(times) * 1e6)
"""


def per_call_ab(base: str, rounds: int) -> list[str]:
    """The per-call cost on C-ordered arguments, this checkout against ``base``, in
    alternating fresh processes (two versions of the compiling tier cannot share one:
    their ctypes structures would meet), each reporting its fastest round."""
    import subprocess

    into = pathlib.Path(tempfile.mkdtemp(prefix="autodiff-ab-"))
    archive = subprocess.run(["git", "archive", base, "autodiff"], cwd=h_root(),
                             capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    paths = {"before": str(into), "after": str(h_root())}
    cache = tempfile.mkdtemp(prefix="autodiff-ab-cache-")
    times: dict[str, list[float]] = {k: [] for k in paths}
    for r in range(rounds):
        for name in sorted(paths, reverse=bool(r % 2)):
            env = h.child_environment(PYTHONPATH=paths[name], AUTODIFF_CACHE_DIR=cache)
            out = subprocess.run([sys.executable, "-c", _PER_CALL], env=env, check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
            times[name].append(float(out.split()[-1]))
    ratios = [a / b for a, b in zip(times["after"], times["before"])]
    return ["### Per call on C-ordered arguments: sum(tanh(1.5 x) x + 0.5), 64 elements", "",
            "| | median µs (CPU) | min-max µs |", "|---|---|---|",
            *(f"| {k} ({base if k == 'before' else 'this checkout'}) | "
              f"{statistics.median(v):.3f} | {min(v):.3f}-{max(v):.3f} |"
              for k, v in times.items()),
            "", f"after / before, median of per-process ratios: "
            f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}; "
            f"{rounds} processes each, alternating)", ""]  # fmt: skip


def h_root() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ab", default=None, help="a commit to compare the per-call cost with")
    parser.add_argument("--only", choices=["networks", "fresh", "ab"], default=None)
    args = parser.parse_args()
    lines = []
    if args.only in (None, "networks"):
        lines += networks(args.rounds)
    if args.only in (None, "fresh"):
        lines += fresh(args.rounds)
    if args.ab and args.only in (None, "ab"):
        lines += per_call_ab(args.ab, max(args.rounds, 9))
    print(f"load: {os.getloadavg()}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
