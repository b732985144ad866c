"""W1 (eager and jitted) and a fresh jit's first two calls before and after a change, with
the code of another git revision (default ``main``) and with this checkout, in alternating
fresh processes; and the same on a program written apart from W1 (a small network's
gradient), so that a figure is not only the tuned program's.

    python -m benchmarks.jit_before_after [REV]

As ``benchmarks/eager.py`` does for the eager path (whose export it shares): two versions
of one package cannot share a process, so before and after alternate by process
(``ROUNDS`` each).  Times are the process's CPU time (``time.process_time``), which
other processes on a shared machine disturb far less than the wall clock; each process
reports its fastest round of the steady calls and the median of fresh ``jit``s for the
first and second calls; the report gives medians over processes and after / before.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

from benchmarks.eager import ROOT, _export

ROUNDS = 7
KEYS = {
    "plain": "W1 eager, no transform, µs per primitive",
    "grad": "W1 eager, under grad, µs per primitive",
    "replay": "W1 jit(grad), replay (compile=False), µs per call",
    "kernels": "W1 jit(grad), kernels (compile=True), µs per call",
    "jit plain": "W1 jit, no transform, replay, µs per call",
    "first": "first call of a fresh jit(grad(W1)), ms",
    "second": "its second call (passes, code generation), ms",
    "net eager": "fresh program: grad of a small network, eager, µs per call",
    "net replay": "fresh program: its jit(grad), replay, µs per call",
    "net first": "fresh program: first call of a fresh jit(grad), ms",
    "net second": "fresh program: its second call, ms",
}

_PROBE = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import autodiff, autodiff.numpy as anp
clock = time.process_time
N_OPS = 200
def chain(lib, x):  # benchmarks/workloads.py's W1
    for _ in range(N_OPS // 4):
        x = lib.sin(x)
        x = x * 1.01
        x = lib.tanh(x)
        x = x + 0.1
    return x
def steady(fn, inner):
    fn(), fn()  # (jitted: staged, then compiled; not timed)
    times = []
    for _ in range(15):
        start = clock()
        for _ in range(inner):
            fn()
        times.append((clock() - start) / inner * 1e6)
    return min(times)  # the round least disturbed by other processes
def calls(make, args, n=11):
    first, second = [], []
    for _ in range(n):
        f = make()
        start = clock(); f(*args); first.append((clock() - start) * 1e3)
        start = clock(); f(*args); second.append((clock() - start) * 1e3)
    return statistics.median(first), statistics.median(second)
x = np.linspace(0.1, 0.8, 8)
loss = lambda v: anp.sum(chain(anp, v))
g = autodiff.grad(loss)
replay = autodiff.jit(autodiff.grad(loss), compile=False)
kernels = autodiff.jit(autodiff.grad(loss), compile=True)
plain = autodiff.jit(lambda v: chain(anp, v), compile=False)
out = {"plain": steady(lambda: chain(anp, x), 50) / N_OPS,
       "grad": steady(lambda: g(x), 10) / N_OPS,
       "replay": steady(lambda: replay(x), 50), "kernels": steady(lambda: kernels(x), 200),
       "jit plain": steady(lambda: plain(x), 100)}
autodiff.jit(lambda v: anp.sum(anp.tanh(v) * 2.0))(np.ones(3))  # warm-up, as first_call.py
out["first"], out["second"] = calls(lambda: autodiff.jit(autodiff.grad(loss), compile=False), (x,))
rng = np.random.default_rng(0)  # the fresh program: a small network's loss
X, Y = rng.normal(size=(32, 6)), rng.normal(size=(32, 3))
W1, W2 = rng.normal(size=(6, 16)), rng.normal(size=(16, 3))
def net(w1, w2):
    h = anp.tanh(X @ w1) * anp.exp(-0.1 * anp.abs(X @ w1))
    return anp.mean((anp.logaddexp(h @ w2, 0.0) - Y) ** 2) + 1e-3 * anp.sum(w1 * w1)
gn = autodiff.grad(net, argnums=(0, 1))
jn = autodiff.jit(autodiff.grad(net, argnums=(0, 1)), compile=False)
out["net eager"] = steady(lambda: gn(W1, W2), 20)
out["net replay"] = steady(lambda: jn(W1, W2), 50)
out["net first"], out["net second"] = calls(
    lambda: autodiff.jit(autodiff.grad(net, argnums=(0, 1)), compile=False), (W1, W2))
out["file"] = autodiff.__file__
print(json.dumps(out))
"""


def measure(rev: str = "main", rounds: int = ROUNDS) -> dict[str, dict[str, float]]:
    """``KEYS``' figures for ``rev`` ("before") and this checkout ("after")."""
    with tempfile.TemporaryDirectory() as tmp:
        before = _export(rev, pathlib.Path(tmp))
        samples: dict[str, list[dict]] = {"before": [], "after": []}
        for _ in range(rounds):
            for name, path in (("before", before), ("after", ROOT)):
                done = subprocess.run([sys.executable, "-c", _PROBE, str(path)],
                                      check=True, capture_output=True, text=True)  # fmt: skip
                sample = json.loads(done.stdout.strip().splitlines()[-1])
                assert sample["file"].startswith(str(path)), sample["file"]
                samples[name].append(sample)
    return {name: {k: statistics.median(s[k] for s in runs) for k in KEYS}
            for name, runs in samples.items()}  # fmt: skip


def table(result: dict[str, dict[str, float]], rev: str) -> list[str]:
    b, a = result["before"], result["after"]
    lines = [f"| | before (`{rev}`) | after (this checkout) | after / before |",
             "|---|---|---|---|"]  # fmt: skip
    for key, text in KEYS.items():
        lines.append(f"| {text} | {b[key]:.4g} | {a[key]:.4g} | {a[key] / b[key]:.3f} |")
    return lines


if __name__ == "__main__":
    rev = sys.argv[1] if len(sys.argv) > 1 else "main"
    print("\n".join(table(measure(rev), rev)))
