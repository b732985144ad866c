"""Short programs' whole processes, autograd against autodiff: CPU time and instructions.

    python -m benchmarks.start_up --examples <autograd>/examples [--rounds 25]
        [--only define_gradient.py,tanh.py] [--instructions [--seeds 5]]

A short program (autograd's define_gradient.py, tanh.py, ...) lasts well under a second,
so its start-up (imports, first calls, shutdown) is most of it, and the margins between
two libraries are a few per cent.  Each program runs as ``autograd_examples.py`` runs
it (the same prelude: matplotlib's Agg backend, no MNIST download; byte code cached),
once as ``python program.py`` with autograd and once as ``python -m
autodiff.compat.autograd program.py``, and this script reports:

* **CPU seconds** (user + sys of the whole process): medians over ``--rounds``, the two
  interleaved in a new random order each round.  On a shared 2-core machine a ratio
  moves by up to 0.1 between runs: read a few per cent as noise.
* **Instructions** (``--instructions``, where valgrind is installed): one run of each
  under callgrind with ``PYTHONHASHSEED=0``, the count of the whole process.  It does not
  move with the load, but it counts no cache miss, page fault or kernel time.
  ``--rounds 0 --instructions`` counts them alone.  One count is one draw: the hash seed
  orders every dict and set, and with the address space's layout and the temporary
  directory's name it moves a program by up to ~0.2% (±5 M instructions of 2,500 M).
  ``--seeds N`` counts each program under the hash seeds 0 .. N-1 and reports the
  medians, their ratio, the largest of the N ratios of one seed's two counts, and each
  seed's counts.

The programs are looked for in ``--examples`` and in ``benchmarks/autograd_fresh/``
(programs of the same kind written for these measurements).  Prints a Markdown table.
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

from benchmarks._harness import child_environment
from benchmarks.autograd_examples import PRELUDE

HERE = pathlib.Path(__file__).resolve().parent
SHORT = ("define_gradient.py", "fixed_points.py", "logistic_regression.py", "rosenbrock.py",
         "tanh.py")  # fmt: skip
SYSTEMS = ("autograd", "autodiff")


def _command(system: str, program: str, instructions: bool) -> list[str]:
    mode = ["-m", "autodiff.compat.autograd"] if system == "autodiff" else []
    command = [sys.executable, *mode, program]
    if instructions:
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
    return command


def _run(system: str, program: str, work: pathlib.Path, prelude: str, instructions=False,
         seed=0):  # fmt: skip
    """CPU seconds of one whole process, or (``instructions``) its instruction count
    under the hash seed ``seed``."""
    env = child_environment(MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([prelude, str(HERE.parent)])
    if instructions:
        env["PYTHONHASHSEED"] = str(seed)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(_command(system, program, instructions), cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{system} {program}: {done.stderr[-1000:]}")
    if instructions:
        return int(re.search(r"Collected : (\d+)", done.stderr).group(1))  # type: ignore
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.start_up")
    parser.add_argument("--examples", required=True, type=pathlib.Path,
                        help="autograd's examples/ (a checkout of HIPS/autograd)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--only", default="", help="comma-separated program names")
    parser.add_argument("--instructions", action="store_true", help="count them (valgrind)")
    parser.add_argument("--seeds", type=int, default=1,
                        help="count under the hash seeds 0 .. N-1 (medians)")  # fmt: skip
    args = parser.parse_args(argv)
    fresh = sorted(p.name for p in (HERE / "autograd_fresh").glob("*.py"))
    programs = args.only.split(",") if args.only else [*SHORT, *fresh]
    with tempfile.TemporaryDirectory() as tmp:
        prelude = pathlib.Path(tmp) / "prelude"
        prelude.mkdir()
        (prelude / "sitecustomize.py").write_text(PRELUDE)
        work = pathlib.Path(tmp) / "examples"
        shutil.copytree(args.examples, work)
        for name in fresh:
            shutil.copy(HERE / "autograd_fresh" / name, work / name)
        for program in programs:  # warm-up: byte code written, as an installation's is
            for system in SYSTEMS:
                _run(system, program, work, str(prelude))
        cpu: dict = {(s, p): [] for s in SYSTEMS for p in programs}
        for _ in range(args.rounds):
            for program in programs:
                for system in random.sample(SYSTEMS, 2):
                    cpu[system, program].append(_run(system, program, work, str(prelude)))
        counts = {}
        if args.instructions:
            counts = {(s, p): [_run(s, p, work, str(prelude), instructions=True, seed=k)
                               for k in range(args.seeds)]
                      for s in SYSTEMS for p in programs}  # fmt: skip
    header = "| program |" + (" autograd CPU s | autodiff CPU s | ratio |" if args.rounds else "")
    print(f"{args.rounds} rounds, load average {os.getloadavg()[0]:.1f}\n")
    m = " median" if args.seeds > 1 else ""
    seeds = " | ratio | worst seed |" if args.seeds > 1 else " | ratio |"
    print(header + (f" autograd{m} M instr. | autodiff{m} M instr.{seeds}" if counts else ""))
    three = "---:|---:|---:|"
    worst = "---:|" if args.seeds > 1 else ""
    print("|---|" + (three if args.rounds else "") + (three + worst if counts else ""))
    for program in programs:
        row = f"| {program} |"
        if args.rounds:
            a, b = (statistics.median(cpu[s, program]) for s in SYSTEMS)
            row += f" {a:.3f} | {b:.3f} | {b / a:.3f} |"
        if counts:
            i, j = (statistics.median(counts[s, program]) / 1e6 for s in SYSTEMS)
            row += f" {i:,.0f} | {j:,.0f} | {j / i:.4f} |"
            if args.seeds > 1:
                pairs = zip(*(counts[s, program] for s in SYSTEMS))
                row += f" {max(b / a for a, b in pairs):.4f} |"
        print(row)
    if counts and args.seeds > 1:
        print("\nEach seed's counts, M instructions, autograd / autodiff:\n")
        for program in programs:
            each = zip(*(counts[s, program] for s in SYSTEMS))
            print(f"- {program}: " + ", ".join(f"{a / 1e6:,.1f} / {b / 1e6:,.1f}" for a, b in each))


if __name__ == "__main__":
    main()
