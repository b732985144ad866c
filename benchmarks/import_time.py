"""How long ``import autodiff`` takes, against ``import numpy`` and ``import jax``.

    python -m benchmarks.import_time            # 15 rounds
    python -m benchmarks.import_time --rounds 5

Each measurement is a fresh Python process that times its own import statement (the
interpreter's start-up is not counted; HIPS autograd's import and autodiff's names for it,
``autodiff.compat.autograd``, where autograd is installed); the rounds interleave the statements, so
drift and load hit all of them alike, and the report gives medians and min-max.
``import autodiff`` imports NumPy: what autodiff adds is its median minus NumPy's.
The heavy modules (SciPy, numba, plum and beartype, Dask, matplotlib) wait until
first used; the last rows time that first use (``grad``'s first call, which needs no
plum; ``autodiff.scipy.special``, SciPy) in a process where ``import autodiff`` is done.
One warm-up round (byte-compiling the modules, written even where the environment says
``PYTHONDONTWRITEBYTECODE``, as an installed package's are: see ``child_environment``) is
not counted.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics
import subprocess
import sys

from benchmarks._harness import child_environment

# statement -> code run in a fresh process, which prints the seconds the timed part took
STATEMENTS = {
    "import numpy": "import numpy",
    "import autodiff": "import autodiff",
    "import jax": "import jax",
    # HIPS autograd (the bench extra) and its names on autodiff: what a short autograd
    # program pays before its first line (issue 30: none slower than under autograd)
    "import autograd.numpy": "import autograd.numpy",
    "import autodiff.compat.autograd": "import autodiff.compat.autograd",
    "import autodiff, then grad(np.sin)(0.5)": (
        "import autodiff, numpy as np",
        "autodiff.grad(np.sin)(0.5)",
    ),
    "import autodiff, then autodiff.scipy.special": (
        "import autodiff",
        "import autodiff.scipy.special",
    ),
}
ROOT = pathlib.Path(__file__).resolve().parents[1]  # the checkout measured (python -c: cwd)
HEAVY = ("scipy", "numba", "llvmlite", "plum", "beartype", "dask", "matplotlib", "networkx")


def _child(statement: str | tuple[str, str]) -> str:
    setup, timed = ("", statement) if isinstance(statement, str) else statement
    return (
        f"{setup}\nimport time\nstart = time.perf_counter()\n{timed}\n"
        f"print(time.perf_counter() - start)"
    )


def _run(code: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
        cwd=ROOT, env=child_environment(),
    )  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def measure(rounds: int = 15) -> dict[str, list[float]]:
    """Seconds per statement, one per round, the rounds interleaved."""
    statements = {
        name: code
        for name, code in STATEMENTS.items()
        if ("jax" not in name or importlib.util.find_spec("jax") is not None)
        and ("import autograd" not in name or importlib.util.find_spec("autograd") is not None)
    }
    for code in statements.values():  # warm-up: byte-compiled modules, a warm disk cache
        _run(_child(code))
    times: dict[str, list[float]] = {name: [] for name in statements}
    for _ in range(rounds):
        for name, code in statements.items():
            times[name].append(_run(_child(code)))
    return times


def heavy_modules_after_import() -> list[str]:
    """The heavy modules ``import autodiff`` loads (none, if they wait for first use)."""
    code = (
        "import sys, autodiff\n"
        f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
        env=child_environment(),
    )  # fmt: skip
    return out.stdout.split()


def table(times: dict[str, list[float]]) -> list[str]:
    numpy = statistics.median(times["import numpy"])
    rows = ["| statement | median | min-max | beyond `import numpy` |", "|---|---|---|---|"]
    for name, samples in times.items():
        median = statistics.median(samples)
        plain = isinstance(STATEMENTS[name], str)  # (not a first use, timed after the import)
        beyond = f"{(median - numpy) * 1e3:+.0f} ms" if plain else ""
        rows.append(
            f"| `{name}` | {median * 1e3:.0f} ms | {min(samples) * 1e3:.0f}-"
            f"{max(samples) * 1e3:.0f} ms | {beyond} |"
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.import_time")
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args(argv).rounds
    times = measure(rounds)
    print(f"Python {sys.version.split()[0]}, {rounds} rounds, fresh processes, medians\n")
    print("\n".join(table(times)))
    heavy = heavy_modules_after_import()
    print(f"\nheavy modules `import autodiff` loads: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
