"""jit's paths before and after a change: W1's chain jitted (the replay, and the kernels of
``compile=True``) and the first two calls of a fresh ``jit``, timed with the code of another
git revision (default ``main``) and with this checkout, in alternating fresh processes.

    python -m benchmarks.jit_before_after [REV]

As ``benchmarks/eager.py`` does for the eager path (whose export it shares): two versions
of one package cannot share a process, so before and after alternate by process
(``ROUNDS`` each); each process reports its fastest round of the steady calls (the least
disturbed by other processes) and the median of five fresh ``jit``s for the first and
second calls; the report gives medians over processes and after / before.
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
    "replay": "W1 jit(grad), replay (compile=False), µs per call",
    "kernels": "W1 jit(grad), kernels (compile=True), µs per call",
    "plain": "W1 jit, no transform, replay, µs per call",
    "first": "first call of a fresh jit(grad(W1)), ms",
    "second": "second call (passes, code generation), ms",
}

_PROBE = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import autodiff, autodiff.numpy as anp
N_OPS = 200
def chain(lib, x):  # benchmarks/workloads.py's W1
    for _ in range(N_OPS // 4):
        x = lib.sin(x)
        x = x * 1.01
        x = lib.tanh(x)
        x = x + 0.1
    return x
x = np.linspace(0.1, 0.8, 8)
loss = lambda v: anp.sum(chain(anp, v))
def steady(fn, inner):
    fn(), fn()  # staged, then compiled: not timed
    times = []
    for _ in range(15):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner * 1e6)
    return min(times)  # the round least disturbed by other processes
replay = autodiff.jit(autodiff.grad(loss), compile=False)
kernels = autodiff.jit(autodiff.grad(loss), compile=True)
plain = autodiff.jit(lambda v: chain(anp, v), compile=False)
out = {"replay": steady(lambda: replay(x), 50), "kernels": steady(lambda: kernels(x), 200),
       "plain": steady(lambda: plain(x), 100)}
autodiff.jit(lambda v: anp.sum(anp.tanh(v) * 2.0))(np.ones(3))  # warm-up, as first_call.py
first, second = [], []
for _ in range(5):
    f = autodiff.jit(autodiff.grad(loss), compile=False)
    start = time.perf_counter(); f(x); first.append((time.perf_counter() - start) * 1e3)
    start = time.perf_counter(); f(x); second.append((time.perf_counter() - start) * 1e3)
out.update(first=statistics.median(first), second=statistics.median(second),
           file=autodiff.__file__)
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
