"""Long straight-line programs: the gradient of a recurrent network unrolled over every
step, under ``jit(..., compile=True)`` and JAX's ``jit``.

    python -m benchmarks.long_programs             # the table (results-long.md)
    python -m benchmarks.long_programs one SYSTEM PROGRAM   # one process's figures (JSON)

A ``scan(unroll=True)`` stages every step: C1's LSTM (200 steps, hidden 64, batch 32) is
14,197 equations after the passes.  One kernel of all of them never finished compiling
(LLVM's optimisation grows faster than the module); the backend cuts such a region into
kernels of at most ``llvm_backend.MAX_LINES`` lines of IR (docs/architecture.md).
Programs: C1's LSTM (``benchmarks.control_flow``), and a GRU (100 steps, hidden 48, batch
16) written afresh for this table.  Each system runs in its own fresh process, with an
empty kernel cache and one BLAS thread: the first two calls (ours: staging and a run of
the graph, then the passes and the compile, ``compile=True`` waiting for it; JAX's:
tracing and compiling, then a run), then the median of 5 later calls, and the
gradient checked against the replay's (ours: bit for bit; JAX: to 1e-9).
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import datetime
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import _harness as h

OUT = pathlib.Path(__file__).with_name("results-long.md")
SYSTEMS = ("replay", "compiled", "jax")
PROGRAMS = {
    "lstm": "C1's LSTM, 200 steps, hidden 64, batch 32",
    "gru": "GRU, 100 steps, hidden 48, batch 16 (fresh)",
}
GRU_H, GRU_B, GRU_I, GRU_T = 48, 16, 12, 100


def _gru(np_: Any, scan: Callable) -> tuple[Callable, tuple]:
    rng = np.random.default_rng(7)
    h = GRU_H
    params = (rng.normal(size=(GRU_I, 3 * h)) / 4, rng.normal(size=(h, 3 * h)) / 7,
              np.zeros(3 * h))  # fmt: skip
    xs = rng.normal(size=(GRU_T, GRU_B, GRU_I))

    def loss(p):
        wx, wh, b = p

        def step(carry, x):
            zx, zh = x @ wx + b, carry @ wh
            r = 1 / (1 + np_.exp(-(zx[:, :h] + zh[:, :h])))
            u = 1 / (1 + np_.exp(-(zx[:, h : 2 * h] + zh[:, h : 2 * h])))
            n = np_.tanh(zx[:, 2 * h :] + r * zh[:, 2 * h :])
            carry = (1 - u) * n + u * carry
            return carry, carry

        _, hs = scan(step, np_.zeros((GRU_B, h)), xs)
        return np_.mean(hs**2)

    return loss, params


def _lstm(np_: Any, scan: Callable) -> tuple[Callable, tuple]:
    from benchmarks import control_flow as cf

    params, xs = cf.rnn_data("lstm")
    n = cf.HIDDEN

    def loss(p):
        wx, wh, b = p

        def step(carry, x):
            hid, c = carry
            z = x @ wx + hid @ wh + b
            sig = lambda v: 0.5 * np_.tanh(0.5 * v) + 0.5
            i, f, o = sig(z[:, :n]), sig(z[:, n : 2 * n]), sig(z[:, 2 * n : 3 * n])
            c = f * c + i * np_.tanh(z[:, 3 * n :])
            hid = o * np_.tanh(c)
            return (hid, c), hid

        zeros = np_.zeros((xs.shape[1], n))
        _, hs = scan(step, (zeros, zeros), xs)
        return np_.mean(hs**2)

    return loss, params


def one(system: str, program: str) -> dict:
    """The figures of one fresh process (module docstring)."""
    make = {"gru": _gru, "lstm": _lstm}[program]
    if system == "jax":
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        loss, params = make(jnp, lambda f, c, xs: jax.lax.scan(f, c, xs, unroll=True))
        g = jax.jit(jax.grad(loss))
        run = lambda: jax.block_until_ready(g(params))
    else:
        import autodiff
        import autodiff.numpy as anp

        scan = lambda f, c, xs: autodiff.scan(f, c, xs, unroll=True)
        loss, params = make(anp, scan)
        g = autodiff.jit(autodiff.grad(loss), compile=system == "compiled")
        run = lambda: g(params)
    firsts, later = [], []
    for _ in range(2):
        start = time.perf_counter()
        out = run()
        firsts.append(time.perf_counter() - start)
    for _ in range(5):
        start = time.perf_counter()
        out = run()
        later.append(time.perf_counter() - start)
    flat = np.concatenate([np.ravel(np.asarray(a)) for a in out])
    return {"first": firsts[0], "second": firsts[1], "steady": statistics.median(later),
            "gradient": flat.tolist()}  # fmt: skip


def _child(system: str, program: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = h.child_environment(AUTODIFF_CACHE_DIR=cache)
        command = [sys.executable, "-m", "benchmarks.long_programs", "one", system, program]
        done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    load = os.getloadavg()
    subprocess.run(
        [sys.executable, "-c", "import autodiff, jax"], check=True, env=h.child_environment()
    )  # fmt: skip  (byte code written once)
    rows = []
    for program, title in PROGRAMS.items():
        found = {system: _child(system, program) for system in SYSTEMS}
        ours = np.asarray(found["replay"]["gradient"])
        same = np.array_equal(np.asarray(found["compiled"]["gradient"]), ours)
        theirs = np.asarray(found["jax"]["gradient"])
        close = bool(np.allclose(theirs, ours, rtol=1e-9, atol=1e-12))
        r, c, j = found["replay"], found["compiled"], found["jax"]
        rows.append([title, f"{r['first']:.2f}", f"{c['second']:.1f}", f"{j['first']:.1f}",
                     f"{c['second'] / j['first']:.2f}", f"{r['steady'] * 1e3:.1f}",
                     f"{c['steady'] * 1e3:.1f}", f"{j['steady'] * 1e3:.1f}",
                     "yes" if same else "NO", "yes" if close else "NO"])  # fmt: skip
    header = ["program", "first call s (staging)", "compile=True's second call s",
              "JAX first call s", "x JAX", "replay ms", "compiled ms", "JAX jit ms",
              "compiled = replay, bit for bit", "JAX agrees (1e-9)"]  # fmt: skip
    text = "\n".join([
        "# Long straight-line programs: unrolled recurrent gradients",
        "",
        f"`python -m benchmarks.long_programs`, {datetime.date.today()}; load average at "
        f"the start {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}. Each system in a fresh "
        "process with an empty kernel cache and one BLAS thread (the module's docstring).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ])  # fmt: skip
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["one"]:
        print(json.dumps(one(sys.argv[2], sys.argv[3])))
    else:
        main()
