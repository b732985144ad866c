"""compile="auto" over a program's first seconds: how long any call waits, when the
kernels arrive, and the speed then, against JAX jit.

    python -m benchmarks.first_seconds           # the table (results-first-seconds.md)
    python -m benchmarks.first_seconds one NAME  # one program, in this process (JSON)

Each program of ``benchmarks/compile_times.py`` runs in a fresh process with an empty
kernel cache, called in a loop for ``SECONDS`` seconds of wall time with jit's default
``compile="auto"``: the first call interprets the staged graph, the next ones replay it,
and at ``HOT_CALLS`` the kernels compile in the background thread (LLVM releases the GIL
while it works) and are swapped in.  Reported: the longest call (no call may wait for the
compiler; the first call stages and interprets, the second writes the replay: shown
apart; beside it, the calling thread's CPU time in that call: what remains is waiting,
for the GIL or, on a loaded machine, for a core), when the kernels were swapped in
(seconds after the first call), the median
call of the last second, JAX jit's (its first call compiles: also shown), and the ratio
the target reads: right after the seconds, the same function (as it runs then) and JAX's
timed in alternating blocks of calls, by the process's CPU time, the median of the
blocks' ratios (the last second and JAX's calls timed after it would meet different
loads from other jobs on a shared machine).
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import datetime  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.compile_times import _Autodiff, _Jax, programs  # noqa: E402

OUT = pathlib.Path(__file__).with_name("results-first-seconds.md")
SECONDS = 3.0


def _one(name: str) -> dict:
    program = programs()[name]
    args = program["args"]()
    ours = _Autodiff()
    warm = ours.jit(lambda v: ours.np.tanh(ours.np.sin(v) * 2.0) + 1.0)
    for _ in range(8):  # the backend's one-time start (llvmlite's import), not timed
        warm(np.ones(3))
    from autodiff.compiler import background

    background.wait_for_background()
    f = ours.jit(program["make"](ours))  # compile="auto"
    start = time.perf_counter()
    stamps, durations, cpu = [], [], []
    swapped = None
    entry_of = lambda: next(iter(f._entries.values()), None)
    while time.perf_counter() - start < SECONDS:
        t, c = time.perf_counter(), time.thread_time()
        f(*args)
        durations.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
        stamps.append(t - start)
        entry = entry_of()
        if swapped is None and entry is not None and entry.compiled is not None:
            swapped = time.perf_counter() - start
    last = [d for s, d in zip(stamps, durations) if s > SECONDS - 1.0]
    later = durations[2:] or durations  # (the first stages, the second writes the replay)
    longest = durations.index(max(later), 2 if len(durations) > 2 else 0)
    found = {"max_call": max(later), "max_call_cpu": cpu[longest], "first_call": durations[0],
             "second_call": durations[1] if len(durations) > 1 else 0.0,
             "swapped": swapped, "calls": len(durations),
             "steady": statistics.median(last)}  # fmt: skip
    try:
        theirs = _Jax()
    except ImportError:
        print(json.dumps(found))
        return found
    if "jax_cpu_enable_async_dispatch" in theirs.jax.config.values:
        theirs.jax.config.update("jax_cpu_enable_async_dispatch", False)
    jargs = theirs.jax.tree_util.tree_map(theirs.np.asarray, args)
    g = theirs.jit(program["make"](theirs))
    t = time.perf_counter()
    theirs.jax.block_until_ready(g(*jargs))
    found["jax_first"] = time.perf_counter() - t
    times = []
    for _ in range(max(20, min(2000, int(1.0 / max(found["steady"], 1e-6))))):
        t = time.perf_counter()
        theirs.jax.block_until_ready(g(*jargs))
        times.append(time.perf_counter() - t)
    found["jax_steady"] = statistics.median(times)
    found["ratio"] = _alternating(lambda: f(*args),
                                  lambda: theirs.jax.block_until_ready(g(*jargs)))  # fmt: skip
    print(json.dumps(found))
    return found


def _alternating(ours: Callable, theirs: Callable, rounds: int = 21) -> float:
    """The median over ``rounds`` of (our block's CPU time / theirs), each block as many
    calls as take about 20 ms."""
    per_call = min(_block(ours, 3), _block(theirs, 3)) / 3
    n = max(1, int(0.02 / max(per_call, 1e-7)))
    return statistics.median(_block(ours, n) / _block(theirs, n) for _ in range(rounds))


def _block(fn: Callable, n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return time.process_time() - start


def report(names: list[str] | None = None) -> tuple[list[str], list[tuple]]:
    names = names or list(programs())
    lines = ["| program | first call s | second call s | longest later call ms (its CPU ms) | "
             f"kernels in after s | calls in {SECONDS:.0f} s | last second, median ms | JAX jit "
             "ms | x JAX (alternating, CPU time) | JAX's first call s |",
             "|---" * 10 + "|"]  # fmt: skip
    targets = []
    for name in names:
        with tempfile.TemporaryDirectory() as folder:
            env = dict(os.environ, AUTODIFF_CACHE_DIR=folder)
            done = subprocess.run([sys.executable, "-m", "benchmarks.first_seconds", "one", name],
                                  capture_output=True, text=True, env=env, check=True)  # fmt: skip
        r = json.loads(done.stdout.strip().splitlines()[-1])
        ratio = r.get("ratio", float("nan"))
        swapped = "-" if r["swapped"] is None else f"{r['swapped']:.2f}"
        lines.append(f"| {name}: {programs()[name]['title']} | {r['first_call']:.3f} | "
                     f"{r['second_call']:.3f} | {r['max_call'] * 1e3:.1f} "
                     f"({r.get('max_call_cpu', float('nan')) * 1e3:.1f}) | "
                     f"{swapped} | {r['calls']} | {r['steady'] * 1e3:.3g} | "
                     f"{r.get('jax_steady', float('nan')) * 1e3:.3g} | {ratio:.2f} | "
                     f"{r.get('jax_first', float('nan')):.2f} |")  # fmt: skip
        targets.append((f"{name} auto", "longest call after the second ≤ 0.1 s", r["max_call"],
                        "reached" if r["max_call"] <= 0.1 else "**missed**"))  # fmt: skip
        targets.append((f"{name} auto", "after the seconds x JAX jit ≤ 1 (alternating, CPU)", ratio,
                        "reached" if ratio <= 1 else "**missed**"))  # fmt: skip
    return [*lines, ""], targets


def main() -> None:
    from benchmarks import _harness as h

    started = time.perf_counter()
    lines, targets = report()
    text = ["# Benchmarks: compile='auto' over a program's first seconds", "",
            f"`python -m benchmarks.first_seconds`, {datetime.date.today().isoformat()}, load "
            f"average {os.getloadavg()[0]:.1f} at the start. Wall time (the ratio to JAX: CPU "
            "time), each program in a fresh process with an empty kernel cache (module "
            "docstring).", "", *h.environment(), "", *lines, *h.targets_table(targets),
            f"Run time: {time.perf_counter() - started:.0f} s.", ""]  # fmt: skip
    OUT.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    if sys.argv[1:2] == ["one"]:
        _one(sys.argv[2])
    else:
        main()
