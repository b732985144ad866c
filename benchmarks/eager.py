"""The eager path before and after a change: W1's chain without any transform and
under grad, timed with the code of another git revision (default ``main``) and with
this checkout, in alternating fresh processes.

    python -m benchmarks.eager [REV]

Two versions of one package cannot share a process, so the interleaving is by
process: before, after, before, after, ... (``ROUNDS`` each); each process reports
its fastest round (the least disturbed by other processes on a shared machine), and
the report gives the median over processes.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
ROUNDS = 7

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
g = autodiff.grad(lambda v: anp.sum(chain(anp, v)))
def per_op(fn, inner):
    times = []
    for _ in range(15):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner / N_OPS * 1e6)
    return min(times)  # the round least disturbed by other processes
fn_plain, fn_grad = (lambda: chain(anp, x)), (lambda: g(x))
fn_plain(); fn_grad()
print(json.dumps({"plain": per_op(fn_plain, 50), "grad": per_op(fn_grad, 5),
                  "file": autodiff.__file__}))
"""


def _export(rev: str, into: pathlib.Path) -> pathlib.Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "autodiff"],
                             check=True, capture_output=True).stdout  # fmt: skip
    path = into / "archive.tar"
    path.write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(into, filter="data")
    return into


def measure(rev: str = "main", rounds: int = ROUNDS) -> dict[str, dict[str, float]]:
    """Per-primitive µs, plain and under grad, for ``rev`` ("before") and this checkout."""
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
    return {
        name: {k: statistics.median(s[k] for s in runs) for k in ("plain", "grad")}
        for name, runs in samples.items()
    }


def table(result: dict[str, dict[str, float]], rev: str) -> list[str]:
    b, a = result["before"], result["after"]
    return [
        "| W1 chain, µs per primitive | before (`" + rev + "`) | after (this checkout) | "
        "after / before |",
        "|---|---|---|---|",
        f"| no transform (anp on ndarrays) | {b['plain']:.3f} | {a['plain']:.3f} | "
        f"{a['plain'] / b['plain']:.3f} |",
        f"| under grad | {b['grad']:.3f} | {a['grad']:.3f} | {a['grad'] / b['grad']:.3f} |",
    ]


if __name__ == "__main__":
    rev = sys.argv[1] if len(sys.argv) > 1 else "main"
    print("\n".join(table(measure(rev), rev)))
