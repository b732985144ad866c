"""What the compiler derives from one staged graph: each result made once, kept on it.

A staged graph is optimised, replayed, lowered, compiled and transformed, often many
times and from many places (a jitted function's calls, the graphs of its derivatives, a
loop body run at every step).  Each result is a typed field of the graph's ``Derived``
(``graph.derived``, made at first use), filled under ``graph.lock``:

===================  ==========================================  =========================
field                holds                                       filled by
===================  ==========================================  =========================
``prepared``         the graph as transforms read it (passes)    ``graph_transforms.py``
``transformed``      its JVP, VJP and batched graphs (an LRU;    ``call.py``
                     ``AT_LEVEL`` where one cannot be staged)
``optimized``        per "NumPy constants allowed": the graph    ``stages.optimized``
                     replays run (passes, custom rules inlined)
``replays``          per (array kind, library, fresh): the       ``stages.replay``
                     replay, a Python function of NumPy calls
``compiled``         per (backend, fresh): the ``Compiled``      ``stages.compiled``
                     stage (kernels), None where nothing compiles
``mode``, ``calls``, the ``compile=`` of the jitted function it     ``tiers.call_graph``
``counted``, ``run`` comes from; how often ``call_p`` ran it;
                     the replay counted until hot; what
                     ``call_p`` runs (the replay, kernels)
===================  ==========================================  =========================

Nothing here is semantic: a graph's meaning is its equations and constants, and the
values it closed over from outer transforms travel beside it (``Staged.captured``,
``stages.Traced.captured``), never in this cache.
"""

from __future__ import annotations

from typing import Any

from autodiff.core.graph import Graph

__all__ = ["Derived", "derived_of"]


class Derived:
    """The results derived from one graph (see the module docstring)."""

    __slots__ = ("calls", "compiled", "counted", "mode", "optimized", "prepared", "replays",
                 "run", "transformed")  # fmt: skip

    def __init__(self) -> None:
        self.mode: Any = "auto"
        self.calls = 0
        self.run: Any = None
        self.counted: Any = None  # the replay whose calls are counted until hot ("auto")
        self.prepared: Graph | None = None
        self.transformed: Any = None  # core.caches.LRUCache, made by call.py
        self.optimized: dict[bool, Graph] = {}
        self.replays: dict[tuple, Any] = {}
        self.compiled: dict[tuple, Any] = {}


def derived_of(graph: Graph) -> Derived:
    """``graph``'s ``Derived``, made the first time it is asked for."""
    found = graph.derived
    if found is None:
        with graph.lock:
            found = graph.derived
            if found is None:
                found = graph.derived = Derived()
    return found
