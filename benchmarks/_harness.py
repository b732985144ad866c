"""Timing discipline shared by every workload.

Systems run in the same process, interleaved round by round (so drift and
noise hit all of them alike); each round times ``inner`` calls; we report
medians and min-max over rounds and ratios to the reference's median.  Every
system's result is first checked against the reference: a benchmark whose
systems disagree is worthless.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Row:
    system: str
    times: list[float] = field(default_factory=list)  # seconds per call, one per round
    cpu: list[float] = field(default_factory=list)  # the process's CPU seconds, likewise
    agrees: bool | None = None
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def cpu_median(self) -> float:
        """The median of the CPU time (unlike the wall clock, not charged for the time
        other jobs on a shared machine held the core)."""
        return statistics.median(self.cpu)


def child_environment(**extra: str) -> dict[str, str]:
    """The environment of a timed child process: this one's, with byte-compiled modules
    written and read as a user's installation does.  ``PYTHONDONTWRITEBYTECODE`` (set in
    some sandboxes and CI images) would make every child compile the checkout's ~190
    modules from source, about 0.3 s of CPU that installed packages (NumPy, autograd,
    JAX: compiled by pip at install) never pay; the callers warm up once first."""
    env = {**os.environ, **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def to_numpy(x: Any) -> Any:
    """Results of any system as NumPy arrays (tuples/lists/dicts kept)."""
    if isinstance(x, (tuple, list)):
        return type(x)(to_numpy(v) for v in x)
    if isinstance(x, dict):
        return {k: to_numpy(v) for k, v in x.items()}
    if hasattr(x, "detach"):  # torch
        return x.detach().cpu().numpy()
    if type(x).__module__.startswith("cupy"):  # CuPy converts only when asked to
        return x.get()
    return np.asarray(x)


def agree(got: Any, want: Any, rtol: float) -> bool:
    got, want = to_numpy(got), to_numpy(want)
    if isinstance(want, dict):
        return all(agree(got[k], want[k], rtol) for k in want)
    if isinstance(want, (tuple, list)):
        return len(got) == len(want) and all(agree(g, w, rtol) for g, w in zip(got, want))
    scale = max(float(np.max(np.abs(want))), 1e-300)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=rtol, atol=rtol * scale))


def interleave(
    systems: dict[str, Callable[[], Any]],
    reference: str,
    *,
    rounds: int,
    inner: int = 1,
    rtol: float = 1e-7,
    info: tuple[str, ...] = (),
    shuffle: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> list[Row]:
    """Check every system against ``reference``, then time them interleaved.  With
    ``shuffle`` each round runs them in a new order (seeded): a system that runs right
    after one that allocates a lot pays for the memory given back, and a fixed order
    would charge that to the same system every round.  ``clock``: wall time, or
    ``time.process_time``, the process's CPU time, which other jobs on a shared machine
    disturb far less (for single-threaded systems)."""
    systems = {name: settled(name, run) for name, run in systems.items()}
    want = systems[reference]()
    rows = {name: Row(name) for name in systems}
    for name, run in systems.items():
        rows[name].agrees = agree(run(), want, rtol)  # also a warm-up call
        if name in info:
            rows[name].note = "information only"
    _settle_compiling_tier(systems)
    order = list(systems.items())
    rng = random.Random(0)
    for _ in range(rounds):
        if shuffle:
            rng.shuffle(order)
        for name, run in order:
            start, start_cpu = clock(), time.process_time()
            for _ in range(inner):
                run()
            rows[name].cpu.append((time.process_time() - start_cpu) / inner)
            rows[name].times.append((clock() - start) / inner)
    return list(rows.values())


def table(rows: list[Row], reference: str | None, unit: str, scale: float) -> list[str]:
    """Markdown rows: median, min-max, ratio to the reference's median, agreement."""
    lines = [f"| system | median {unit} | min-max {unit} | x reference | agrees |",
             "|---|---|---|---|---|"]  # fmt: skip
    base = next((r.median for r in rows if r.system == reference), None)
    for r in rows:
        ratio = f"{r.median / base:.3f}" if base else "-"
        agrees = {True: "yes", False: "**NO**", None: "-"}[r.agrees]
        name = r.system + (f" ({r.note})" if r.note else "")
        lines.append(f"| {name} | {r.median * scale:.3g} | {min(r.times) * scale:.3g}-"
                     f"{max(r.times) * scale:.3g} | {ratio} | {agrees} |")  # fmt: skip
    return lines


def _settle_compiling_tier(systems: dict[str, Callable[[], Any]]) -> None:
    """Call autodiff's systems until their hot signatures have been compiled by jit's
    compiling tier (in the background, from the HOT_CALLS-th call on) and wait for that:
    the rounds then time what a long-running program runs, not a compile competing for
    the core they are bound to."""
    tiers = sys.modules.get("autodiff.compiler.tiers")
    if tiers is None or not tiers.default_backend().available():
        return
    for name, run in systems.items():
        if name.startswith("autodiff"):
            for _ in range(tiers.HOT_CALLS):
                run()
    tiers.background.wait_for_background()
    for name, run in systems.items():  # the swapped-in kernels' first (loading) calls
        if name.startswith("autodiff"):
            run()


def settled(name: str, run: Callable[[], Any]) -> Callable[[], Any]:
    """JAX dispatches asynchronously: its systems are timed until the result exists."""
    if not name.startswith("JAX"):
        return run
    jax = sys.modules["jax"]
    return lambda: jax.block_until_ready(run())


def targets_table(targets: list[tuple[str, str, float, str]]) -> list[str]:
    """A report's targets section: one row per (workload, target, measured, verdict)."""
    return ["## Targets", "", "| workload | target | measured | verdict |", "|---|---|---|---|",
            *[f"| {wl} | {t} | {'-' if v != v else f'{v:.3g}'} | {verdict} |"
              for wl, t, v, verdict in targets], ""]  # fmt: skip


def standalone(title: str, command: str, report: Callable, out: Any, note: str = "") -> None:
    """A workload module's ``main``: bound to one core, ``report(rounds)`` run (5 rounds
    with ``--quick``, else 15), its tables and targets written to ``out`` (a path) with
    the environment, and printed."""
    import datetime

    if hasattr(os, "sched_setaffinity"):  # one core, as python -m benchmarks runs
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    started = time.perf_counter()
    rounds = 5 if "--quick" in sys.argv else 15
    lines, targets = report(rounds)
    text = [
        f"# {title}",
        "",
        f"`{command}`, {datetime.date.today().isoformat()}. One thread; the systems of a "
        f"table run in the same process, interleaved round by round; times are medians "
        f"(and min-max) over {rounds} rounds; every system's result is checked against "
        f"its table's first row's first{note}.",
        "",
        *environment(),
        "",
        *lines,
        *targets_table(targets),
        f"Run time: {time.perf_counter() - started:.0f} s.",
        "",
    ]
    out.write_text("\n".join(text))
    print("\n".join(lines + text[text.index("## Targets") :]))
    print(f"wrote {out}")


def environment() -> list[str]:
    """Machine, versions and BLAS, for the report."""
    lines = [
        f"- machine: {platform.machine()}, {_cpu()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; one thread per system, the process bound "
        f"to {_affinity()}",
        f"- numpy {np.__version__}, BLAS: {_blas()}",
    ]
    for dist in ("autodiff", "plum-dispatch", "autograd", "jax", "torch"):
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:  # not installed: no rows
            module = sys.modules.get(dist)  # autodiff run from a checkout
            version = getattr(module, "__version__", "not installed") + (
                " (from the source tree)" if module else ""
            )
        lines.append(f"- {dist}: {version}")
    return lines


def _affinity() -> str:
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return f"core {cores[0]}" if len(cores) == 1 else f"{len(cores) or 'all'} cores"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(
                line.split(":", 1)[1].strip() for line in f if line.startswith("model name")
            )
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def _blas() -> str:
    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # older NumPy: no dict form
        return "unknown"
