"""Control flow: C1 (an RNN's gradient through scan), C2 (per-example Newton solves
under vmap), C0 (what the primitives cost eagerly, over a Python loop).

    python -m benchmarks.control_flow       # these tables alone: results-control-flow.md
    python -m benchmarks.control_flow memory CELL SYSTEM   # one peak, in this process

``python -m benchmarks`` runs them too, with the other workloads, into results.md.

C1: 200 steps, hidden 64, batch 32, input 16.  The target cell is an LSTM: its step
keeps five (batch, hidden) arrays for its derivative besides its carry (h, c), which
is what recomputation saves.  A plain tanh RNN keeps only its new hidden state, which
*is* the next carry, so recomputing cannot keep less there: it is measured for
information.  Peak memory is tracemalloc's peak during one gradient, each system in a
fresh process, above what the inputs and one warm-up call left behind.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread, as python -m benchmarks runs (when run alone)

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import autodiff.numpy as anp  # noqa: E402
from benchmarks import _harness as h  # noqa: E402

STEPS, HIDDEN, BATCH, INPUT = 200, 64, 32, 16
CELLS = ("lstm", "tanh")
LOOP = "eager Python loop"
SYSTEMS = (LOOP, "scan", "scan(checkpoint=True)")


def rnn_data(cell: str, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    gates = 4 if cell == "lstm" else 1
    params = (
        rng.standard_normal((INPUT, gates * HIDDEN)) / 4,
        rng.standard_normal((HIDDEN, gates * HIDDEN)) / 8,
        np.zeros(gates * HIDDEN),
    )
    return params, rng.standard_normal((STEPS, BATCH, INPUT))


def _sigmoid(z: Any) -> Any:
    return 0.5 * anp.tanh(0.5 * z) + 0.5


def lstm_cell(params: tuple, carry: tuple, x: Any) -> tuple:
    wx, wh, b = params
    h, c = carry
    z = x @ wx + h @ wh + b
    n = HIDDEN
    i, f, o = _sigmoid(z[:, :n]), _sigmoid(z[:, n : 2 * n]), _sigmoid(z[:, 2 * n : 3 * n])
    c = f * c + i * anp.tanh(z[:, 3 * n :])
    h = o * anp.tanh(c)
    return (h, c), h


def tanh_cell(params: tuple, carry: tuple, x: Any) -> tuple:
    wx, wh, b = params
    h = anp.tanh(x @ wx + carry[0] @ wh + b)
    return (h,), h


def _start(cell: str) -> tuple:
    zeros = np.zeros((BATCH, HIDDEN))
    return (zeros, zeros) if cell == "lstm" else (zeros,)


def rnn_losses(cell: str) -> dict[str, Callable]:
    """The mean square of every hidden state, as a function of the weights."""
    step = lstm_cell if cell == "lstm" else tanh_cell
    _, xs = rnn_data(cell)
    start = _start(cell)

    def loop(params):
        carry, ys = start, []
        for x in xs:
            carry, y = step(params, carry, x)
            ys.append(y)
        return anp.mean(anp.stack(ys) ** 2)

    def scanned(params, checkpoint=False, unroll=1):
        _, ys = autodiff.scan(lambda c, x: step(params, c, x), start, xs, unroll=unroll,
                              checkpoint=checkpoint)  # fmt: skip
        return anp.mean(ys**2)

    return {
        LOOP: loop,
        "scan": scanned,
        "scan(checkpoint=True)": lambda p: scanned(p, checkpoint=True),
        "scan(unroll=True)": lambda p: scanned(p, unroll=True),
    }


JITTED = ("jit(grad(scan))", "jit(grad(scan(unroll=True)))", "grad(jit(scan))")


def c1_systems(cell: str, jitted: bool = False) -> dict[str, Callable[[], Any]]:
    """Each system's gradient; with ``jitted`` also the two compositions with jit,
    staged (and their first call made) here, so their rows time the replay."""
    params, _ = rnn_data(cell)
    losses = rnn_losses(cell)
    unrolled = losses.pop("scan(unroll=True)")  # eagerly the same as scan
    systems = {name: (lambda f=f: autodiff.grad(f)(params)) for name, f in losses.items()}
    if jitted:
        inside = autodiff.jit(autodiff.grad(losses["scan"]))  # two staged scans
        every_step = autodiff.jit(autodiff.grad(unrolled))  # one straight-line program
        outside = autodiff.grad(autodiff.jit(losses["scan"]))  # the staged scan, run by grad
        for name, f in zip(JITTED, (inside, every_step, outside), strict=True):
            f(params)
            f(params)  # the second call compiles: the rows time the replay
            systems[name] = lambda f=f: f(params)
    return systems


def c1_first_call(cell: str) -> tuple[float, float]:
    """Seconds of the first two calls of jit(grad(scan)): staging and a run of the
    staged graph; the passes, code generation and a replay."""
    params, _ = rnn_data(cell)
    f = autodiff.jit(autodiff.grad(rnn_losses(cell)["scan"]))
    times = []
    for _ in range(2):
        start = time.perf_counter()
        f(params)
        times.append(time.perf_counter() - start)
    return times[0], times[1]


def c1_memory(cell: str, system: str) -> dict:
    """tracemalloc's peak during one gradient (run in a fresh process)."""
    import gc
    import tracemalloc

    run = c1_systems(cell)[system]
    run()  # warm-up: lazy imports, caches
    gc.collect()
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"cell": cell, "system": system, "traced_peak_mb": peak / 2**20}


def c1_memory_rows() -> dict[tuple[str, str], float]:
    """Each (cell, system) in a fresh process: python -m benchmarks.control_flow memory."""
    rows = {}
    for cell in CELLS:
        for system in SYSTEMS:
            command = [sys.executable, "-m", "benchmarks.control_flow", "memory", cell, system]
            done = subprocess.run(command, capture_output=True, text=True, check=True,
                                  env=os.environ)  # fmt: skip
            rows[cell, system] = json.loads(done.stdout.strip().splitlines()[-1])["traced_peak_mb"]
    return rows


# --- C2: Newton's method per example ----------------------------------------------------------

NEWTON_BATCH, NEWTON_N, TOL = 1024, 16, 1e-20


def newton_data(seed: int = 0) -> tuple:
    """F(x) = x + tanh(W x) / 2 - b = 0 for every row b; the rows' scales differ, and so
    do the numbers of iterations (3 to 6)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((NEWTON_N, NEWTON_N)) / np.sqrt(NEWTON_N)
    bs = rng.standard_normal((NEWTON_BATCH, NEWTON_N)) * rng.uniform(0.1, 3.0, (NEWTON_BATCH, 1))
    return w, bs


def newton_one(w: Any, b: Any) -> Any:
    """One example: x <- x - J(x)^-1 F(x) until |F(x)|^2 <= TOL, carrying (x, F(x))."""
    eye = np.eye(NEWTON_N)
    residual = lambda x: x + 0.5 * anp.tanh(w @ x) - b

    def body(carry):
        x, _ = carry
        t = anp.tanh(w @ x)
        x = x - anp.linalg.solve(eye + 0.5 * (1 - t * t)[:, None] * w, residual(x))
        return x, residual(x)

    x0 = np.zeros(NEWTON_N)
    return autodiff.while_loop(lambda c: anp.sum(c[1] ** 2) > TOL, body, (x0, residual(x0)))[0]


def newton_by_hand(w: np.ndarray, bs: np.ndarray) -> np.ndarray:
    """The same iterations for the whole batch in NumPy, finished rows masked."""
    eye = np.eye(NEWTON_N)
    residual = lambda x: x + 0.5 * np.tanh(x @ w.T) - bs
    x = np.zeros_like(bs)
    r = residual(x)
    running = np.sum(r * r, axis=1) > TOL
    while running.any():
        t = np.tanh(x @ w.T)
        dx = np.linalg.solve(eye + 0.5 * (1 - t * t)[:, :, None] * w, r[..., None])[..., 0]
        x = np.where(running[:, None], x - dx, x)
        r = np.where(running[:, None], residual(x), r)
        running = np.sum(r * r, axis=1) > TOL
    return x


def c2_systems() -> dict[str, Callable[[], Any]]:
    w, bs = newton_data()
    per_example = autodiff.vmap(newton_one, in_dims=(None, 0))
    jitted = autodiff.jit(per_example)  # one staged loop over the batch
    jitted(w, bs)
    jitted(w, bs)  # the second call compiles: the rows time the replay
    return {
        "NumPy by hand, vectorised": lambda: newton_by_hand(w, bs),
        "autodiff vmap(while_loop)": lambda: per_example(w, bs),
        "autodiff jit(vmap(while_loop))": lambda: jitted(w, bs),
        "autodiff loop of while_loop": lambda: np.stack([newton_one(w, b) for b in bs]),
    }


# --- C0: eager cost per iteration ---------------------------------------------------------------

EAGER_STEPS = 2000


def c0_systems() -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """(Python loop, control-flow primitive) pairs of the same 2000-step loop."""
    x0, xs = np.ones(4), np.ones((EAGER_STEPS, 4))

    def py_while():
        x, i = x0, 0
        while i < EAGER_STEPS:
            x, i = x * 0.999 + 0.001, i + 1
        return x

    def py_scan():
        c, ys = x0, []
        for x in xs:
            c = c * 0.999 + x * 0.001
            ys.append(c)
        return c, np.stack(ys)

    def py_fori():
        x = x0
        for _ in range(EAGER_STEPS):
            x = x * 0.999 + 0.001
        return x

    step = lambda c, x: (c * 0.999 + x * 0.001,) * 2
    return {
        "while_loop": (py_while, lambda: autodiff.while_loop(
            lambda c: c[0] < EAGER_STEPS, lambda c: (c[0] + 1, c[1] * 0.999 + 0.001), (0, x0))[1]),
        "scan": (py_scan, lambda: autodiff.scan(step, x0, xs)),
        "fori_loop": (py_fori, lambda: autodiff.fori_loop(
            0, EAGER_STEPS, lambda i, x: x * 0.999 + 0.001, x0)),
    }  # fmt: skip


# --- the report ---------------------------------------------------------------------------------


def report(rounds: int = 7) -> tuple[list[str], list[tuple[str, str, float, str]]]:
    """Markdown lines and (workload, target, value, verdict) rows."""
    lines: list[str] = []
    targets: list[tuple[str, str, float, str]] = []

    def check(workload: str, value: float, limit: float, text: str) -> None:
        targets.append((workload, text, value, "reached" if value <= limit else "**missed**"))

    memory = c1_memory_rows()
    for cell in CELLS:
        rows = h.interleave(c1_systems(cell, jitted=cell == "lstm"), LOOP, rounds=rounds,
                            rtol=1e-9, info=("jit(grad(scan(unroll=True)))",))  # fmt: skip
        by = {r.system: r.median for r in rows}
        title = "an LSTM" if cell == "lstm" else "a tanh RNN (information only)"
        lines += [f"## C1: grad through {title}, {STEPS} steps, hidden {HIDDEN}, batch {BATCH}",
                  "", *h.table(rows, LOOP, "ms", 1e3), "",
                  "| system | traced peak MB | x eager loop |", "|---|---|---|",
                  *[f"| {s} | {memory[cell, s]:.2f} | {memory[cell, s] / memory[cell, LOOP]:.2f} |"
                    for s in SYSTEMS], ""]  # fmt: skip
        if cell == "lstm":
            check("C1", by["scan"] / by[LOOP], 1.2, "grad of scan, x eager loop's time ≤ 1.2")
            ratio = memory[cell, "scan(checkpoint=True)"] / memory[cell, LOOP]
            check("C1", ratio, 0.6, "checkpoint=True, x eager loop's peak memory ≤ 0.6")
            first, second = c1_first_call(cell)
            check("C1", by["jit(grad(scan))"] / by[LOOP], 0.5,
                  "under jit (jit(grad(scan))), x eager loop's time ≤ 0.5")  # fmt: skip
            lines += [f"jit(grad(scan)) stages the gradient of the {STEPS} steps as two "
                      f"scans (forward, keeping each step's residuals, and reversed); its "
                      f"first call (staging, one run) took {first:.2f} s and its second "
                      f"(passes, code generation, one replay) {second:.2f} s. With "
                      f"unroll=True every step is staged: one straight-line program, several "
                      f"times longer to stage, with no per-step call and no stacked "
                      f"residuals at replay. "
                      f"grad(jit(scan)) stages the scan once, "
                      f"as one body, and the grad runs it step by step at its own level, "
                      f"as eagerly.", ""]  # fmt: skip

    ref = "NumPy by hand, vectorised"
    info = ("autodiff loop of while_loop", "autodiff jit(vmap(while_loop))")
    rows = h.interleave(c2_systems(), ref, rounds=rounds, rtol=1e-9, info=info)
    by = {r.system: r.median for r in rows}
    lines += [f"## C2: Newton's method per example ({NEWTON_BATCH} systems of {NEWTON_N} "
              "equations, 3 to 6 iterations each)", "",
              *h.table(rows, ref, "ms", 1e3), ""]  # fmt: skip
    check("C2", by["autodiff vmap(while_loop)"] / by[ref], 1.5,
          "vmap(while_loop), x hand-vectorised NumPy ≤ 1.5")  # fmt: skip

    lines += [f"## C0: eager, {EAGER_STEPS} iterations of a 4-element update (information)",
              "", "| primitive | Python loop ms | primitive ms | µs added per iteration |",
              "|---|---|---|---|"]  # fmt: skip
    for name, (plain, ours) in c0_systems().items():
        pair = h.interleave({"python": plain, name: ours}, "python", rounds=rounds, rtol=1e-12)
        a, b = pair[0].median, pair[1].median
        lines.append(f"| {name} | {a * 1e3:.2f} | {b * 1e3:.2f} | "
                     f"{(b - a) / EAGER_STEPS * 1e6:.1f} |")  # fmt: skip
    return [*lines, ""], targets


def why() -> list[str]:
    """Where a missed C1 target's time goes: the Python calls each system makes
    (cProfile's count, which the machine's noise does not change)."""
    import cProfile
    import pstats

    lines = ["### C1: the Python calls scan adds", "",
             "| system | Python calls in one gradient | x eager loop |",
             "|---|---|---|"]  # fmt: skip
    base = None
    for name, run in c1_systems("lstm").items():
        profile = cProfile.Profile()
        profile.runcall(run)
        calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
        base = base or calls
        lines.append(f"| {name} | {calls} | {calls / base:.2f} |")
    return [*lines, "",
            "Control flow adds a few Python calls per iteration (flattening the carry, checking "
            "its types; C0 measures them). A time ratio well above the ratio of calls is the "
            "machine's noise: rerun on a quiet machine.", ""]  # fmt: skip


def main() -> None:
    import datetime
    import pathlib

    if hasattr(os, "sched_setaffinity"):  # one core, as python -m benchmarks runs
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    started = time.perf_counter()
    rounds = 15
    lines, targets = report(rounds)
    text = [
        "# Benchmarks: control flow",
        "",
        f"`python -m benchmarks.control_flow`, {datetime.date.today().isoformat()}. One thread; "
        f"the systems of a table run in the same process, interleaved round by round; times "
        f"are medians (and min-max) over {rounds} rounds, ratios to the first row's median; "
        "every system's result is checked against the first row's first.",
        "",
        *h.environment(),
        "",
        *lines,
        *h.targets_table(targets),
        *(why() if any(wl == "C1" and "missed" in v for wl, _, _, v in targets) else []),
        f"Run time: {time.perf_counter() - started:.0f} s.",
        "",
    ]  # fmt: skip
    out = pathlib.Path(__file__).with_name("results-control-flow.md")
    out.write_text("\n".join(text))
    print("\n".join(text[text.index("## Targets") :]))
    print(f"wrote {out}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["memory"]:
        print(json.dumps(c1_memory(sys.argv[2], sys.argv[3])))
    else:
        main()
