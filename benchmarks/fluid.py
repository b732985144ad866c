"""W7: the gradient of a small 2-D fluid simulation (rolls and integer-array gathers).

    python -m benchmarks.fluid            # about a minute
    python -m benchmarks.fluid --quick    # fewer rounds
    python -m benchmarks.fluid --profile  # also: where autodiff's time goes
    python -m benchmarks.fluid --n=128    # another grid size (default 64)
    python -m benchmarks.fluid --write    # also write benchmarks/results-fluid.md

A grid of velocities ``(u, v)`` and a smoke density, stepped ``STEPS`` times:
each step carries the fields along the flow by semi-Lagrangian advection
(trace each cell back along the velocity, blend its four neighbours there: four
gathers ``f[rows, cols]`` with integer index arrays), then makes the flow
nearly divergence-free with a few Jacobi sweeps of a pressure solve, written
with ``np.roll`` finite differences on the periodic grid.  The loss is the
squared distance of the final smoke to a target; we time its gradient with
respect to the initial velocities.  This is the kind of program that HIPS
autograd's users write, and the one where autodiff was 1.3x slower than
autograd (issue 13): its time goes into the VJPs of ``roll`` (a roll back)
and of the gathers (a scatter-add of the cotangent).  A second table times those
VJPs alone, the backward pass of a chain of one op (HIPS autograd has no VJP for ``np.take``:
there the same gather is written as indexing).

Systems run in one process, interleaved round by round, on one thread
(``benchmarks._harness``); HIPS autograd is the peer and the reference the
others are checked against.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import pathlib
import sys
from collections.abc import Callable
from typing import Any

if __name__ == "__main__":  # one thread for every system (before NumPy is imported)
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import numpy as np

import autodiff
import autodiff.numpy as anp
from benchmarks import _harness as h

HAVE_AUTOGRAD = importlib.util.find_spec("autograd") is not None
if HAVE_AUTOGRAD:
    import autograd
    import autograd.numpy as agnp

N, STEPS, SWEEPS, DT = 64, 8, 10, 0.5
OUT = pathlib.Path(__file__).with_name("results-fluid.md")


def advect(lib: Any, f: Any, u: Any, v: Any) -> Any:
    """``f`` carried along ``(u, v)`` for one time step (bilinear, periodic)."""
    n = f.shape[0]
    rows, cols = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    back_r = rows - DT * n * u  # where the fluid in each cell was one step ago
    back_c = cols - DT * n * v
    r0 = lib.floor(back_r).astype(int)
    c0 = lib.floor(back_c).astype(int)
    wr, wc = back_r - r0, back_c - c0  # weights of the far neighbours
    r0, c0 = r0 % n, c0 % n
    r1, c1 = (r0 + 1) % n, (c0 + 1) % n
    near = (1 - wc) * f[r0, c0] + wc * f[r0, c1]
    far = (1 - wc) * f[r1, c0] + wc * f[r1, c1]
    return (1 - wr) * near + wr * far


def project(lib: Any, u: Any, v: Any) -> tuple[Any, Any]:
    """``(u, v)`` less the gradient of a pressure that cancels most of its divergence."""
    roll = lib.roll
    div = 0.5 * (roll(u, -1, 0) - roll(u, 1, 0) + roll(v, -1, 1) - roll(v, 1, 1))
    p = 0.0 * div
    for _ in range(SWEEPS):  # Jacobi sweeps of the discrete Poisson equation
        p = (roll(p, 1, 0) + roll(p, -1, 0) + roll(p, 1, 1) + roll(p, -1, 1) - div) / 4.0
    u = u - 0.5 * (roll(p, -1, 0) - roll(p, 1, 0))
    v = v - 0.5 * (roll(p, -1, 1) - roll(p, 1, 1))
    return u, v


def loss(lib: Any, velocity: Any, smoke: Any, target: Any) -> Any:
    u, v = velocity[0], velocity[1]
    for _ in range(STEPS):
        u, v = advect(lib, u, u, v), advect(lib, v, u, v)
        u, v = project(lib, u, v)
        smoke = advect(lib, smoke, u, v)
    return lib.sum((smoke - target) ** 2)


def data(n: int = N, seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 2 * np.pi, n, endpoint=False)
    s, c = np.sin(x), np.cos(x)
    swirl = np.stack([c[:, None] * s[None, :], -s[:, None] * c[None, :]])
    velocity = 0.01 * swirl + 0.002 * rng.standard_normal((2, n, n))
    smoke = np.exp(-((x[:, None] - 3.0) ** 2 + (x[None, :] - 3.0) ** 2))
    target = np.roll(smoke, n // 8, axis=1)
    return velocity, smoke, target


def _pair(loss_of: Callable[[Any, Any], Any], x: np.ndarray) -> dict[str, Callable[[], Any]]:
    """The gradient of ``loss_of(lib, x)`` under HIPS autograd (if installed) and autodiff."""
    out: dict[str, Callable[[], Any]] = {}
    if HAVE_AUTOGRAD:
        g = autograd.grad(lambda v: loss_of(agnp, v))
        out["HIPS autograd"] = lambda: g(x)
    g_ad = autodiff.grad(lambda v: loss_of(anp, v))
    out["autodiff"] = lambda: g_ad(x)
    return out


def systems(n: int) -> dict[str, Callable[[], Any]]:
    velocity, smoke, target = data(n)
    return _pair(lambda lib, vel: loss(lib, vel, smoke, target), velocity)


def _take(lib: Any, v: Any, indices: np.ndarray, axis: int | None) -> Any:
    """np.take; HIPS autograd has no VJP for it, so there the same gather is indexing."""
    if lib is anp:
        return anp.take(v, indices, axis=axis)
    return v[indices] if axis == 0 else lib.ravel(v)[indices]


DEPTH = 8  # ops per chain in the VJP table: the cost per op, not per backward pass


def _vjps(op: Callable[[Any, Any], Any], x: np.ndarray) -> dict[str, Callable[[], Any]]:
    """The backward pass alone through a chain of ``DEPTH`` applications of ``op``: the
    VJP function applied to a cotangent (the forward pass and its tape are made once),
    under HIPS autograd (if installed) and autodiff."""

    def chain(lib: Any, v: Any) -> Any:
        for _ in range(DEPTH):
            v = op(lib, v)
        return v

    ct = np.random.default_rng(4).standard_normal(x.shape)
    out: dict[str, Callable[[], Any]] = {}
    if HAVE_AUTOGRAD:
        vjp_ag, _ = autograd.make_vjp(lambda v: chain(agnp, v))(x)
        out["HIPS autograd"] = lambda: vjp_ag(ct)
    _, vjp_ad = autodiff.vjp(lambda v: chain(anp, v), x)
    out["autodiff"] = lambda: vjp_ad(ct)[0]
    return out


def single_vjps(n: int) -> dict[str, dict[str, Callable[[], Any]]]:
    """Each VJP on its own, on n x n arrays (every op keeps the shape)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, n))
    rows = rng.integers(0, n, n)  # a take along axis 0, some rows repeated
    flat = rng.integers(0, n * n, n * n)  # a take from the flattened array
    r = (np.arange(n)[:, None] + rng.integers(-2, 3, (n, n))) % n  # nearby cells, as in
    c = (np.arange(n)[None, :] + rng.integers(-2, 3, (n, n))) % n  # the advection step
    return {
        "roll": _vjps(lambda lib, v: lib.roll(v, 1, axis=0), x),
        "take (rows)": _vjps(lambda lib, v: _take(lib, v, rows, 0), x),
        "take (flat)": _vjps(lambda lib, v: lib.reshape(_take(lib, v, flat, None), (n, n)), x),
        "x[rows, cols]": _vjps(lambda lib, v: v[r, c], x),
    }


def report(n: int, rounds: int) -> list[str]:
    """The markdown tables: the whole workload, then each VJP alone at two sizes."""
    found = systems(n)
    reference = "HIPS autograd" if "HIPS autograd" in found else "autodiff"
    rows = h.interleave(found, reference, rounds=rounds, rtol=1e-9)
    lines = [f"## W7: gradient of a {n}x{n} fluid simulation, {STEPS} steps ({SWEEPS} Jacobi "
             f"sweeps each), medians over {rounds} rounds", "",
             *h.table(rows, reference, "ms", 1e3)]  # fmt: skip
    for size in (64, 512):
        lines += ["", f"### The VJPs alone: the backward pass of {DEPTH} ops, x {size}x{size}",
                  "", "| op | HIPS autograd ms | autodiff ms | x autograd | agrees |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for op, pair in single_vjps(size).items():
            timed = h.interleave(pair, reference, rounds=rounds, inner=3, rtol=1e-12)
            by = {row.system: row for row in timed}
            ours, peer = by["autodiff"], by.get("HIPS autograd", by["autodiff"])
            agrees = "yes" if ours.agrees else "**NO**"
            lines.append(f"| {op} | {peer.median * 1e3:.3g} | {ours.median * 1e3:.3g} | "
                         f"{ours.median / peer.median:.2f} | {agrees} |")  # fmt: skip
    return lines


def main() -> None:
    quick = "--quick" in sys.argv
    n = next((int(a[4:]) for a in sys.argv if a.startswith("--n=")), N)
    lines = report(n, rounds=5 if quick else 21)
    print("\n".join(lines))
    if "--write" in sys.argv:
        command = "python -m benchmarks.fluid " + " ".join(sys.argv[1:])
        header = [
            "# W7: a fluid simulation's gradient",
            "",
            f"`{command}`, {datetime.date.today().isoformat()}: one process, one thread, "
            "systems interleaved round by round.",
            "",
            *h.environment(),
            "",
        ]
        OUT.write_text("\n".join([*header, *lines, ""]))
        print(f"wrote {OUT}")
    if "--profile" in sys.argv:
        import cProfile
        import pstats

        with cProfile.Profile() as prof:
            for _ in range(3):
                systems(n)["autodiff"]()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
