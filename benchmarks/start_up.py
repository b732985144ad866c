"""Short programs' whole processes, autograd against autodiff: CPU time and instructions.

    python -m benchmarks.start_up --examples <autograd>/examples [--rounds 25] [--control]
        [--only define_gradient.py,tanh.py] [--instructions [--seeds 5]] [--simulate]
        [--modules]

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
* **A control** (``--control``): autograd runs a second time as a third system in the
  same rounds, and its ratio to the first is printed beside autodiff's: the spread of a
  system against itself, which a ratio must clear to mean anything (on a 2-core
  virtual machine, up to ~4% over 60 rounds).
* **A simulated processor** (``--simulate``, valgrind's cachegrind with its cache and
  branch simulation, hash seed 0): autodiff's instructions, instruction- and data-cache
  misses and mispredicted branches less autograd's, and a cost in cycles weighing them
  1, 10, 10 and 15 (an L1 miss served by L2, a mispredicted branch: rough figures for a
  current x86 core; cachegrind's predictor is simpler than a processor's).  Two programs
  can run the same instructions and differ by their mispredictions: Python code run
  once is dispatched by branches not yet predicted.
* **Modules** (``--modules``): how many modules each process loads beyond those the
  prelude loads by itself (matplotlib, NumPy), and the size of their byte code (what
  the interpreter finds, reads and unmarshals for each: a few hundred thousand
  instructions per module, and more the more code it holds).

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
from typing import Any

from benchmarks._harness import child_environment
from benchmarks.autograd_examples import PRELUDE

HERE = pathlib.Path(__file__).resolve().parent
SHORT = ("define_gradient.py", "fixed_points.py", "logistic_regression.py", "rosenbrock.py",
         "tanh.py")  # fmt: skip
SYSTEMS = ("autograd", "autodiff")


CONTROL = "autograd again"  # autograd's command, run as a third system (``--control``)
TOOLS = {
    "callgrind": ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"],
    "cachegrind": ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes",
                   "--cachegrind-out-file=/dev/null"],
}  # fmt: skip
# cachegrind's summary lines, and the cycles each event is weighed at (``--simulate``)
EVENTS = {"instructions": (r"I\s+refs:\s+([\d,]+)", 1),
          "I1 misses": (r"I1\s+misses:\s+([\d,]+)", 10),
          "D1 misses": (r"D1\s+misses:\s+([\d,]+)", 10),
          "mispredicted branches": (r"Mispredicts:\s+([\d,]+)", 15)}  # fmt: skip


# Appended to the prelude for ``--modules``: at exit, every module loaded, with the size
# of its byte code (0 for built-in and extension modules).
MODULES_AT_EXIT = r"""
import atexit as _atexit, os as _os, sys as _sys
def _modules_at_exit(path=_os.environ["START_UP_MODULES"]):
    with open(path, "w") as out:
        for name, module in sorted(_sys.modules.items()):
            cached = getattr(module, "__cached__", None)
            size = _os.path.getsize(cached) if cached and _os.path.exists(cached) else 0
            out.write(f"{name} {size}\n")
_atexit.register(_modules_at_exit)
"""


def _command(system: str, program: str, tool: str | None) -> list[str]:
    mode = ["-m", "autodiff.compat.autograd"] if system == "autodiff" else []
    return [*TOOLS.get(tool or "", []), sys.executable, *mode, program]


def _run(system: str, program: str, work: pathlib.Path, prelude: str,
         tool: str | None = None, seed: int = 0, **extra: str) -> Any:  # fmt: skip
    """CPU seconds of one whole process; under ``tool`` "callgrind" its instruction count,
    under "cachegrind" its counts of :data:`EVENTS`, with the hash seed ``seed``."""
    env = child_environment(MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                            **extra)  # fmt: skip
    env["PYTHONPATH"] = os.pathsep.join([prelude, str(HERE.parent)])
    if tool:
        env["PYTHONHASHSEED"] = str(seed)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(_command(system, program, tool), cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{system} {program}: {done.stderr[-1000:]}")
    if tool == "callgrind":
        return int(re.search(r"Collected : (\d+)", done.stderr).group(1))  # type: ignore
    if tool == "cachegrind":
        return {event: int(re.search(pattern, done.stderr).group(1).replace(",", ""))  # type: ignore
                for event, (pattern, _) in EVENTS.items()}  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.start_up")
    parser.add_argument("--examples", required=True, type=pathlib.Path,
                        help="autograd's examples/ (a checkout of HIPS/autograd)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--control", action="store_true",
                        help="autograd again in the same rounds (its own spread)")  # fmt: skip
    parser.add_argument("--only", default="", help="comma-separated program names")
    parser.add_argument("--instructions", action="store_true", help="count them (valgrind)")
    parser.add_argument("--seeds", type=int, default=1,
                        help="count under the hash seeds 0 .. N-1 (medians)")  # fmt: skip
    parser.add_argument("--simulate", action="store_true",
                        help="cache misses, mispredicted branches (cachegrind)")  # fmt: skip
    parser.add_argument("--modules", action="store_true",
                        help="modules loaded beyond the prelude's; their byte code")  # fmt: skip
    args = parser.parse_args(argv)
    fresh = sorted(p.name for p in (HERE / "autograd_fresh").glob("*.py"))
    programs = args.only.split(",") if args.only else [*SHORT, *fresh]
    timed = (*SYSTEMS, CONTROL) if args.control else SYSTEMS
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
        cpu: dict = {(s, p): [] for s in timed for p in programs}
        for _ in range(args.rounds):
            for program in programs:
                for system in random.sample(timed, len(timed)):
                    cpu[system, program].append(_run(system, program, work, str(prelude)))
        counts = {}
        if args.instructions:
            counts = {(s, p): [_run(s, p, work, str(prelude), "callgrind", seed=k)
                               for k in range(args.seeds)]
                      for s in SYSTEMS for p in programs}  # fmt: skip
        simulated = {}
        if args.simulate:
            simulated = {(s, p): _run(s, p, work, str(prelude), "cachegrind")
                         for s in SYSTEMS for p in programs}  # fmt: skip
        loaded = _loaded_modules(programs, work, prelude) if args.modules else {}
    print(f"{args.rounds} rounds, load average {os.getloadavg()[0]:.1f}\n")
    if args.rounds or counts:
        _print_counts(programs, cpu if args.rounds else {}, counts, args)
    if simulated:
        _print_simulated(programs, simulated)
    if loaded:
        _print_modules(programs, loaded)


def _print_counts(programs: list[str], cpu: dict, counts: dict, args: argparse.Namespace) -> None:
    control = " autograd again / autograd |" if args.control else ""
    header = "| program |" + (f" autograd CPU s | autodiff CPU s | ratio |{control}" if cpu else "")
    m = " median" if args.seeds > 1 else ""
    seeds = " | ratio | worst seed |" if args.seeds > 1 else " | ratio |"
    print(header + (f" autograd{m} M instr. | autodiff{m} M instr.{seeds}" if counts else ""))
    three = "---:|---:|---:|" + ("---:|" if args.control else "")
    worst = "---:|" if args.seeds > 1 else ""
    print("|---|" + (three if cpu else "") + ("---:|---:|---:|" + worst if counts else ""))
    for program in programs:
        row = f"| {program} |"
        if cpu:
            a, b = (statistics.median(cpu[s, program]) for s in SYSTEMS)
            row += f" {a:.3f} | {b:.3f} | {b / a:.3f} |"
            if args.control:
                row += f" {statistics.median(cpu[CONTROL, program]) / a:.3f} |"
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


def _loaded_modules(programs: list[str], work: pathlib.Path, prelude: pathlib.Path) -> dict:
    """``{(system, program): {module: byte code size}}`` for the modules each process
    loads that the prelude alone (an empty program) does not."""
    (prelude / "sitecustomize.py").write_text(PRELUDE + MODULES_AT_EXIT)
    listing = prelude.parent / "modules.txt"
    (work / "_empty.py").write_text("")

    def modules(system: str, program: str) -> dict[str, int]:
        _run(system, program, work, str(prelude), START_UP_MODULES=str(listing))
        return {name: int(size) for name, size in map(str.split, listing.read_text().splitlines())}

    base = modules("autograd", "_empty.py")
    loaded = {}
    for system in SYSTEMS:
        for program in programs:
            mine = modules(system, program)
            loaded[system, program] = {m: mine[m] for m in mine if m not in base}
    (prelude / "sitecustomize.py").write_text(PRELUDE)
    return loaded


def _print_modules(programs: list[str], loaded: dict) -> None:
    print("\nModules loaded beyond the prelude's (matplotlib, NumPy), and their byte code, KB\n")
    print("| program | autograd: modules | KB | autodiff: modules | KB |")
    print("|---|---:|---:|---:|---:|")
    for program in programs:
        row = f"| {program} |"
        for system in SYSTEMS:
            sizes = loaded[system, program]
            row += f" {len(sizes)} | {sum(sizes.values()) / 1e3:,.0f} |"
        print(row)


def _print_simulated(programs: list[str], simulated: dict) -> None:
    """autodiff's counts less autograd's, in millions, and the weighted cycles' ratio."""
    events = list(EVENTS)
    print("\nSimulated (cachegrind, hash seed 0): autodiff less autograd, M; cycles weighed "
          + ", ".join(f"{e} x{w}" for e, (_, w) in EVENTS.items()) + "\n")  # fmt: skip
    print("| program | " + " | ".join(events) + " | weighed cycles, ratio |")
    print("|---|" + "---:|" * (len(events) + 1))
    for program in programs:
        a, b = (simulated[s, program] for s in SYSTEMS)
        cycles = [sum(c[e] * w for e, (_, w) in EVENTS.items()) for c in (a, b)]
        diffs = " | ".join(f"{(b[e] - a[e]) / 1e6:+,.2f}" for e in events)
        print(f"| {program} | {diffs} | {cycles[1] / cycles[0]:.4f} |")


if __name__ == "__main__":
    main()
