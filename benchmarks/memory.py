"""W6: peak memory above baseline during one W2 gradient, one system per process.

    python -m benchmarks.memory SYSTEM     # prints a JSON line

Two measures: the resident set size sampled every 0.2 ms by a thread (any
system), and tracemalloc's peak (exact, but it sees only allocations made
through Python's and NumPy's allocators, so it is reported for NumPy-based
systems only).  The baseline is taken after the inputs exist and after one
warm-up call.  ``floor_mb`` is the least any system can peak at
(``workloads.w6_floor_mb``: the gradients plus one hidden-layer-sized array);
``x_floor`` is the traced peak over it.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
import tracemalloc

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class Sampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.running = rss(), True

    def run(self) -> None:
        while self.running:
            self.peak = max(self.peak, rss())
            time.sleep(0.0002)


def measure(system: str) -> dict:
    from benchmarks._harness import settled
    from benchmarks.workloads import w2_systems, w6_floor_mb

    run = settled(system, w2_systems()[system])
    run()  # warm-up: lazy imports, caches, first-call allocations
    gc.collect()
    sys.setswitchinterval(1e-4)  # let the sampler in often
    base = rss()
    sampler = Sampler()
    sampler.start()
    result = run()
    sampler.running = False
    sampler.join()
    out = {"system": system, "rss_peak_mb": (max(sampler.peak, rss()) - base) / 2**20,
           "floor_mb": w6_floor_mb()}  # fmt: skip
    del result
    gc.collect()
    if "JAX" not in system and "torch" not in system:
        tracemalloc.start()
        run()
        out["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out["x_floor"] = out["traced_peak_mb"] / out["floor_mb"]
    return out


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1])))
