"""HIPS autograd's example programs, unchanged, under autograd and under autodiff.

    git clone https://github.com/HIPS/autograd /tmp/autograd     # the examples/ folder
    python -m benchmarks.autograd_examples --examples /tmp/autograd/examples
        [--budget 40] [--rounds 3] [--only convnet.py,lstm.py]

Each program runs in a fresh process twice: ``python program.py`` with autograd installed
(``pip install -e ".[bench]"``), and ``python -m autodiff.compat.autograd program.py``
(autodiff behind autograd's names).  Nothing in a program is changed; both runs get the
same stand-ins, put in place by a ``sitecustomize`` module before the program starts:

* matplotlib's non-interactive Agg backend, with ``plt.pause``/``plt.show`` returning at
  once (the plotting programs draw every iteration; their figures are written nowhere);
* MNIST (``data_mnist.mnist``, a download) replaced by random images and labels of
  MNIST's shapes and dtypes, drawn from a fixed seed: the programs' arithmetic is the
  same, their accuracies are chance;
* each output line stamped with the seconds since the process started.

Times are wall-clock seconds of the whole process (interpreter start, imports, the
program): what a user waits for, with the modules' byte code cached as an installation's
is (``_harness.child_environment``; a warm-up process first). A program that finishes
within ``--budget`` seconds under both is run ``--rounds`` times, the two systems
interleaved in a new random order each round, and the ratio is of medians; a longer one
(a training loop) is cut at the budget and compared at the last output line both printed
(the same iteration of the same program), once. "same output" counts the common output
lines whose text is identical:
the programs draw from NumPy's seeded generators, which autodiff.numpy.random is, so
identical text means the same numbers to the printed digits.  Programs that use autograd's
tracer internals (``autograd.tracer``, ``Box``: a graph printer and a trace printer) are
listed and not run: autodiff has no counterpart (``autodiff.make_graph`` and
``autodiff.explain`` do those jobs).  Results go to
``benchmarks/results-autograd-examples.md``.  On a shared machine, say the load.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks._harness import child_environment

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results-autograd-examples.md"
INTERNALS = {  # programs built on autograd's tracer itself
    "dot_graph.py": "autograd.tracer (Node, trace) to draw the graph: autodiff.make_graph",
    "print_trace.py": "autograd.tracer (Node, Box) to print the trace: autodiff.explain",
    "rkhs.py": "autograd.extend.Box/VSpace to make a function space a vector space",
}
NOT_PROGRAMS = {"__init__.py", "data.py", "data_mnist.py"}

# Put in place in both systems' processes before the program runs (see the docstring).
PRELUDE = r"""
import io, sys, time, types
_start = time.perf_counter()
import numpy as _np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as _plt
_plt.pause = lambda *a, **k: None
_plt.show = lambda *a, **k: None

def _mnist():
    rng = _np.random.default_rng(0)
    def images(n):
        return rng.integers(0, 256, size=(n, 28, 28), dtype=_np.uint8)
    def labels(n):
        return rng.integers(0, 10, size=n, dtype=_np.uint8)
    return images(60000), labels(60000), images(10000), labels(10000)

_fake = types.ModuleType("data_mnist")
_fake.mnist, _fake.download = _mnist, lambda *a: None
sys.modules["data_mnist"] = _fake

class _Stamped(io.TextIOBase):
    def __init__(self, raw):
        self.raw, self.buf = raw, ""
    def write(self, s):
        self.buf += s
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            self.raw.write(f"[{time.perf_counter() - _start:9.3f}] {line}\n")
            self.raw.flush()
        return len(s)
    def flush(self):
        self.raw.flush()

sys.stdout = _Stamped(sys.__stdout__)
"""


def programs(examples: pathlib.Path) -> list[pathlib.Path]:
    found = sorted(examples.glob("*.py")) + sorted(examples.glob("*/*.py"))
    return [p for p in found if p.name not in NOT_PROGRAMS]


def run_once(system: str, program: pathlib.Path, prelude: str, budget: float) -> dict:
    env = child_environment(MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([prelude, str(HERE.parent)])
    mode = ["-m", "autodiff.compat.autograd"] if system == "autodiff" else []
    start, cpu = time.perf_counter(), _children_cpu()
    try:
        done = subprocess.run([sys.executable, *mode, program.name], cwd=program.parent, env=env,
                              capture_output=True, text=True, timeout=budget)  # fmt: skip
        out, err, rc = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = _text(e.stdout), _text(e.stderr), None
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    lines = [(float(m.group(1)), m.group(2)) for m in map(_STAMP.match, out.splitlines()) if m]
    error = err.strip().splitlines()[-1] if rc not in (0, None) and err.strip() else ""
    return {"rc": rc, "wall": wall, "cpu": cpu, "lines": lines, "error": error}


def _children_cpu() -> float:
    """CPU seconds (user + system) of the waited-for child processes so far: one child runs
    at a time, so a difference is one run's, which other jobs on the machine barely move."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_STAMP = re.compile(r"^\[\s*([\d.]+)\] (.*)$")


def _text(b: bytes | str | None) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


STARTUP = """import autograd.numpy as np
from autograd import grad
grad(lambda x: np.sum(np.tanh(x)))(np.ones(3))
"""


def startup(prelude: str, rounds: int) -> dict:
    """Each system's fixed cost: a process that imports it and takes one gradient."""
    with tempfile.TemporaryDirectory() as tmp:
        program = pathlib.Path(tmp) / "startup.py"
        program.write_text(STARTUP)
        runs: dict = {"autograd": [], "autodiff": []}
        for s in runs:  # warm-up: the modules byte-compiled (see child_environment)
            run_once(s, program, prelude, 60.0)
        for _ in range(rounds):
            for s in random.sample(list(runs), 2):
                runs[s].append(run_once(s, program, prelude, 60.0))
    fixed = {s: statistics.median(r["wall"] for r in v) for s, v in runs.items()}
    return {**fixed, "cpu": {s: statistics.median(r["cpu"] for r in v) for s, v in runs.items()}}


# convnet.py's training loop prints once per epoch (235 gradients on 60,000 images, minutes
# for both), so a budget cuts it before its first measured line: its step is timed alone,
# its module imported and its own layers put together as its __main__ does.
CONVNET_STEP = """import statistics, time
import numpy
import convnet
from autograd import grad
specs = [convnet.conv_layer((5, 5), 6), convnet.maxpool_layer((2, 2)),
         convnet.conv_layer((5, 5), 16), convnet.maxpool_layer((2, 2)),
         convnet.tanh_layer(120), convnet.tanh_layer(84), convnet.softmax_layer(10)]
n, _, loss, _ = convnet.make_nn_funs((1, 28, 28), specs, 1.0)
rng = numpy.random.default_rng(0)
W = rng.normal(size=n) * 0.1
x, y = rng.random((256, 1, 28, 28)), numpy.eye(10)[rng.integers(0, 10, 256)]
g = grad(loss)
g(W, x, y)
times = []
for _ in range(5):
    t = time.perf_counter()
    g(W, x, y)
    times.append(time.perf_counter() - t)
print("STEP", statistics.median(times))
"""


def convnet_step(examples: pathlib.Path, prelude: str, rounds: int) -> dict | None:
    """Seconds per gradient of convnet.py's loss on a batch of 256 (median of 5 calls),
    each system in its own process, the two interleaved over ``rounds``."""
    if not (examples / "convnet.py").exists():
        return None
    program = examples / "_convnet_step.py"
    program.write_text(CONVNET_STEP)
    steps: dict = {"autograd": [], "autodiff": []}
    for _ in range(rounds):
        for s in random.sample(list(steps), 2):
            lines = run_once(s, program, prelude, 300.0)["lines"]
            found = [float(t.split()[1]) for _, t in lines if t.startswith("STEP ")]
            steps[s] += found
    if not all(steps.values()):
        return None
    return {s: statistics.median(v) for s, v in steps.items()}


def compare(program: pathlib.Path, prelude: str, budget: float, rounds: int) -> dict:
    first = {s: run_once(s, program, prelude, budget) for s in ("autograd", "autodiff")}
    ag, ad = first["autograd"], first["autodiff"]
    row = {"program": program.name, "autograd": ag, "autodiff": ad}
    common = min(len(ag["lines"]), len(ad["lines"]))
    row["same"] = (sum(a[1] == b[1] for a, b in zip(ag["lines"], ad["lines"])), common)
    if ad["rc"] not in (0, None):
        row["verdict"] = "fails under autograd too" if ag["rc"] not in (0, None) else "FAILS"
    else:
        row["verdict"] = "runs" if ad["rc"] == 0 else f"runs (cut at {budget:.0f} s)"
    if ag["rc"] == 0 and ad["rc"] == 0:  # both finished: whole runs, medians over rounds
        runs: dict = {"autograd": [ag], "autodiff": [ad]}
        for _ in range(rounds - 1):
            order = ["autograd", "autodiff"]
            random.shuffle(order)
            for s in order:
                runs[s].append(run_once(s, program, prelude, budget))
        row["times"] = {s: statistics.median(r["wall"] for r in v) for s, v in runs.items()}
        row["cpu"] = {s: statistics.median(r["cpu"] for r in v) for s, v in runs.items()}
        row["how"] = f"whole run, median of {rounds}"
    elif common:  # the same output line reached by both: its time stamps
        row["times"] = {s: first[s]["lines"][common - 1][0] for s in first}
        row["how"] = f"to output line {common}, once"
        if program.name == "convnet.py":
            row["how"] += " (loading data, before training: see its step below)"
    else:
        row["times"], row["how"] = None, "no common output line"
    return row


def table(rows: list[dict], skipped: dict, budget: float, load: str, fixed: dict,
          step: dict | None) -> str:  # fmt: skip
    out = [
        "# HIPS autograd's example programs under autodiff",
        "",
        "`python -m benchmarks.autograd_examples --examples <autograd>/examples` "
        f"(budget {budget:.0f} s a run; load average at the start: {load}).",
        "Wall-clock seconds of the whole process; ratio = autodiff / autograd (below 1: "
        "autodiff faster).  See the script's docstring for the stand-ins (Agg, synthetic "
        "MNIST) and how cut runs are compared.",
        "",
        f"Fixed cost (a process that imports the library and takes one gradient, median of "
        f"{fixed['rounds']}): autograd {fixed['autograd']:.2f} s, "
        f"autodiff {fixed['autodiff']:.2f} s; "
        "'ratio less fixed' subtracts it from both sides of a whole run.",
        "",
        "| program | runs under autodiff | autograd s | autodiff s | ratio | ratio less fixed "
        "| measured | same output |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        t = r["times"]
        a, b = (f"{t['autograd']:.2f}", f"{t['autodiff']:.2f}") if t else ("-", "-")
        ratio = f"{t['autodiff'] / t['autograd']:.2f}" if t and t["autograd"] > 0 else "-"
        verdict = r["verdict"] + (f": {r['autodiff']['error'][:90]}" if r["verdict"] != "runs"
                                  and r["autodiff"]["error"] else "")  # fmt: skip
        same = f"{r['same'][0]}/{r['same'][1]}"
        less = "-"
        if t and r["how"].startswith("whole") and t["autograd"] - fixed["autograd"] > 0.05:
            less = (t["autodiff"] - fixed["autodiff"]) / (t["autograd"] - fixed["autograd"])
            less = f"{max(less, 0.0):.2f}"
        out.append(f"| {r['program']} | {verdict} | {a} | {b} | {ratio} | {less} | {r['how']} "
                   f"| {same} |")  # fmt: skip
    for name, why in skipped.items():
        out.append(f"| {name} | not run: uses {why} | - | - | - | - | - | - |")
    if step:
        out += ["", f"convnet.py's training step (the gradient of its loss on 256 images, "
                f"median of 5 calls, {step['rounds']} processes each): autograd "
                f"{step['autograd']:.3f} s, autodiff {step['autodiff']:.3f} s, ratio "
                f"{step['autodiff'] / step['autograd']:.2f}."]  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", required=True, type=pathlib.Path,
                        help="autograd's examples/ (a checkout of HIPS/autograd)")  # fmt: skip
    parser.add_argument("--budget", type=float, default=40.0, help="seconds a run at most")
    parser.add_argument("--rounds", type=int, default=3, help="rounds for programs that finish")
    parser.add_argument("--only", default="", help="comma-separated program names")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp) / "examples"  # the programs write figures beside themselves
        shutil.copytree(args.examples, work)
        prelude = pathlib.Path(tmp) / "prelude"
        prelude.mkdir()
        (prelude / "sitecustomize.py").write_text(PRELUDE)
        fixed = {**startup(str(prelude), max(args.rounds, 3)), "rounds": max(args.rounds, 3)}
        print(
            f"fixed cost: autograd {fixed['autograd']:.2f} s, autodiff {fixed['autodiff']:.2f} s "
            f"(CPU {fixed['cpu']['autograd']:.2f} s, {fixed['cpu']['autodiff']:.2f} s)"
        )
        only = set(filter(None, args.only.split(",")))
        rows, skipped = [], {}
        for program in programs(work):
            if only and program.name not in only:
                continue
            if program.name in INTERNALS:
                skipped[program.name] = INTERNALS[program.name]
                continue
            row = compare(program, str(prelude), args.budget, args.rounds)
            rows.append(row)
            t = row["times"]
            ratio = f"{t['autodiff'] / t['autograd']:.2f}" if t and t["autograd"] > 0 else "-"
            cpu = row.get("cpu")
            cpu = (f" CPU {cpu['autograd']:.2f} s / {cpu['autodiff']:.2f} s = "
                   f"{cpu['autodiff'] / cpu['autograd']:.2f}" if cpu else "")  # fmt: skip
            print(f"{program.name:40s} {row['verdict'][:50]:50s} {ratio:>6s} {row['how']}{cpu}",
                  flush=True)  # fmt: skip
        step = None
        if not only or "convnet.py" in only:
            step = convnet_step(work, str(prelude), args.rounds)
            if step:
                step["rounds"] = args.rounds
                print(f"convnet step: {step}")
    args.out.write_text(table(rows, skipped, args.budget, load, fixed, step))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
