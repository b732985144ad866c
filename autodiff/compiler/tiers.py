"""When a jitted signature's calls move on: interpreted, replayed, compiled.

A signature's calls go through the stages (``stages.py``) as they come, as JavaScript
engines tier their code:

1. **The first call** on NumPy arrays runs the staged graph's implementations in turn
   (``replay.interpret``): writing and compiling the replay costs more than a run, so a
   function called once never pays it.  ``compile_at_once()`` skips this (tests).
2. **The second call** writes the replay (``stages.replay``), which every later call
   runs; with ``compile=True`` it also lowers and compiles the kernels
   (``stages.compiled``), here, and runs them from then on.
3. **A hot signature**, with ``compile="auto"``: the calls of the replay are counted
   and timed, and at ``HOT_CALLS`` calls or ``HOT_SECONDS`` spent in them (a slow replay:
   a loop of many steps, whose kernels pay off at once) the background worker
   (``background.py``) lowers and compiles the kernels and swaps them in (``Entry.run``)
   when they are ready: no call waits for the compiler, the replay runs meanwhile.
   A function's loop bodies and branches compile on their own (``call_graph``: a
   loop whose body lowers only in part) only once the function's compilation is decided
   and its kernels do not hold them (``set_mode``, ``settle_functions``).
   ``compile=False`` stays on the replay; so does every signature where
   the backend is not available (llvmlite not installed, ``AUTODIFF_COMPILE=0``) or the
   arrays are another library's.

``compiling(mode)`` overrides every function's ``compile=`` (tests, benchmarks).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.compiler import background
from autodiff.compiler.derived import derived_of
from autodiff.compiler.replay import array_kind
from autodiff.compiler.stages import (
    Traced,
    compiled,
    default_backend,
    functions_of,
    optimized,
    replay,
)
from autodiff.core.graph import Graph
from autodiff.errors import TransformValueError

__all__ = ["HOT_CALLS", "Entry", "at_once", "call_graph", "check_compile", "compile_at_once",
           "compiling", "mode_of", "set_mode"]  # fmt: skip

HOT_CALLS = 3  # calls of one signature after which compile="auto" compiles it (in the background)
HOT_SECONDS = 0.005  # or seconds spent in its replay's calls (one slow call is enough)
# A loop body or branch of a function compiling with "auto" waits for the function's own
# compilation (set_mode), or compiles on its own after this many calls.
AFTER_FUNCTION = "after its function"
LATE_CALLS = 1000

# Whether a first call compiles its replay at once instead of interpreting the graph.
_at_once: contextvars.ContextVar[bool] = contextvars.ContextVar("compile_at_once", default=False)
at_once = _at_once.get


@contextlib.contextmanager
def compile_at_once():
    """Inside, a jitted function's first call generates and compiles its replay (as
    every later call runs it) instead of interpreting the staged graph."""
    token = _at_once.set(True)
    try:
        yield
    finally:
        _at_once.reset(token)


# Overrides every jitted function's compile= setting where set (tests, benchmarks).
_forced: contextvars.ContextVar[Any] = contextvars.ContextVar("compiling", default=None)


@contextlib.contextmanager
def compiling(mode: Any):
    """Inside, every jitted function compiles as ``jit(f, compile=mode)`` would
    (``True``: with its replay, synchronously; ``False``: never; ``"auto"``); the
    signatures already compiled keep their kernels."""
    check_compile(mode)
    token = _forced.set(mode)
    try:
        yield
    finally:
        _forced.reset(token)


def mode_of(setting: Any) -> Any:
    """The ``compile=`` a function with ``setting`` runs under here (``compiling``'s, if set)."""
    forced = _forced.get()
    return setting if forced is None else forced


def check_compile(mode: Any) -> None:
    if not (mode is True or mode is False or (isinstance(mode, str) and mode == "auto")):
        raise TransformValueError(
            f"jit(fun, compile={mode!r:.40}): compile must be 'auto' (compile a signature "
            f"once it is called often, in the background), True (compile with the "
            f"replay) or False (NumPy calls only)."
        )


class Entry:
    """One signature of a jitted function: its ``Traced`` stage, what its calls run now
    (``run``: None until the second call, then the replay, then the kernels' replay), the
    ``Compiled`` stage once there is one, and the counts the tiers go by."""

    __slots__ = ("calls", "compiled", "effects", "flat_key", "ran", "run", "single", "spent",
                 "traced", "watch")  # fmt: skip

    def __init__(self, traced: Traced, flat_key: Any) -> None:
        self.traced = traced
        self.run: Callable | None = None
        self.compiled: Any = None  # stages.Compiled
        self.ran = False  # whether a call ran it (the first is interpreted)
        # compile="auto": calls of the replay are counted (and timed) until hot
        self.watch = False
        self.calls = 0
        self.spent = 0.0
        self.single = traced.out_tree.is_leaf()  # the function returns one array
        # the key of the fast path, when the arguments are positional NumPy arrays only
        self.flat_key = flat_key
        # random draws (or control flow, whose functions may draw): under a transform
        # they must meet its interpreters, as eagerly (vmap's randomness)
        self.effects = any(eqn.prim.effectful for eqn in traced.graph.eqns)


def first_run(entry: Entry, kind: tuple, leaves: Sequence, setting: Any) -> Callable:
    """What ``entry``'s calls run from the second on: its kernels where ``compile=True``
    (and a region is worth compiling), else the replay, whose calls ``"auto"`` counts."""
    graph = entry.traced.graph
    run = replay(graph, kind[0], kind[1], fresh=True)
    mode = mode_of(setting)
    if kind[0] != "numpy" or mode is False or not default_backend().available():
        set_mode(graph, False)
        return run
    set_mode(graph, mode)
    if mode is True:
        found = compiled(graph, fresh=True, layouts=_layouts(leaves))
        if found is None:
            return run
        entry.compiled = found
        return found.run
    entry.watch = True
    return run


def count(entry: Entry, args: Sequence, seconds: float) -> None:
    """One more call of ``entry``'s replay, which took ``seconds``: at ``HOT_CALLS``
    calls or ``HOT_SECONDS`` in all, compile in the background."""
    entry.calls += 1
    entry.spent += seconds
    if entry.calls >= HOT_CALLS or entry.spent >= HOT_SECONDS:
        entry.watch = False
        layouts = _layouts(args)  # what the kernels are compiled for: this call's layouts

        def compile_then_swap() -> None:
            found = None
            try:
                found = compiled(entry.traced.graph, fresh=True, layouts=layouts, sync=False)
            finally:
                settle_functions(entry.traced.graph, found)
            if found is not None:
                entry.compiled = found
                entry.run = found.run  # the next call runs it

        background.compile_later(compile_then_swap)


def settle_functions(graph: Graph, found: Any) -> None:
    """Once ``graph``'s own compilation is decided (``found``: its ``Compiled``, or None),
    the functions of its control flow that ``"auto"`` deferred (``AFTER_FUNCTION``) are
    settled: those its kernels hold are not called on their own any more and never
    compile; the others (a loop that runs as NumPy calls, its body lowering in part)
    compile once hot, as a signature does (``call_graph``)."""
    held = {id(e) for k in found.kernels for e in k.region.eqns} if found is not None else ()
    for eqn in optimized(graph).eqns:
        for _, inner in functions_of(eqn):
            store = derived_of(inner)
            if id(eqn) in held:
                set_mode(inner, False)
            elif store.mode == AFTER_FUNCTION:
                store.calls = 0
                store.mode = "auto"


def _layouts(args: Sequence) -> list[bool]:
    return [type(a) is np.ndarray and a.flags.c_contiguous for a in args]


def set_mode(graph: Graph, mode: Any) -> None:
    """``graph`` takes the ``compile=`` setting ``mode`` and the functions of its control
    flow (loop bodies, branches, at any depth) follow it: a body that runs as a replay (it
    lowers only in part) is compiled, or not, as the function is (``call_graph``), with
    ``"auto"`` only after the function's own compilation is decided (``AFTER_FUNCTION``,
    ``settle_functions``): the body of a scan runs hot within one call, and compiling it
    alone is wasted where the function's kernels hold the whole loop.  Set before any of
    them runs: a body left at the default would compile on its own once hot."""
    derived_of(graph).mode = mode
    inner_mode = AFTER_FUNCTION if isinstance(mode, str) and mode == "auto" else mode
    for eqn in graph.eqns:
        for _, inner in functions_of(eqn):
            set_mode(inner, inner_mode)


def call_graph(graph: Graph, args: Sequence) -> tuple:
    """Run ``graph`` on concrete ``args`` for ``call_p`` (a jitted function under a
    transform: ``grad(jit(f))``'s forward and backward graphs, ``vmap(jit(f))``'s batched
    one), tiered as a signature's calls are: replayed, and compiled once hot (in the
    background with ``compile="auto"``, at once with ``True``; the jitted function's
    setting, which the graphs derived from its graph inherit)."""
    store = derived_of(graph)
    run = store.run
    if run is not None:
        return run(*args)
    plain = store.counted
    if plain is None or array_kind(args)[0] != "numpy":
        return _first_call_of(graph, store, args)
    mode = mode_of(store.mode)
    if mode is False:
        return plain(*args)
    _count_call(graph, store, plain, mode)
    return plain(*args)


def _first_call_of(graph: Graph, store: Any, args: Sequence) -> tuple:
    """``call_graph``'s first call (or one on arrays of another kind): the replay written,
    the graph's functions given its setting, its kernels compiled with ``True``."""
    kind = array_kind(args)
    plain = replay(graph, kind[0], kind[1])
    set_mode(graph, store.mode)  # its loops' bodies: as the graph (derived graphs' are new)
    mode = mode_of(store.mode)
    if kind[0] != "numpy" or mode is False or not default_backend().available():
        store.run = plain
        return plain(*args)
    if mode is True:
        found = compiled(graph)
        store.run = found.run if found is not None else plain
        return store.run(*args)
    store.counted = plain  # the later calls go straight to it, counted
    _count_call(graph, store, plain, mode)
    return plain(*args)


def _count_call(graph: Graph, store: Any, plain: Callable, mode: Any) -> None:
    """One more call of ``graph``'s replay: once hot, compile it in the background (a
    function's body, later, and after the signatures' jobs)."""
    store.calls += 1
    deferred = isinstance(mode, str) and mode == AFTER_FUNCTION
    if store.calls != (LATE_CALLS if deferred else HOT_CALLS):
        return

    def compile_then_swap() -> None:
        if mode_of(store.mode) is False:  # its function's kernels hold it meanwhile
            return
        found = None
        try:
            found = compiled(graph, sync=False)
        finally:
            settle_functions(graph, found)
        store.run = found.run if found is not None else plain

    background.compile_later(compile_then_swap, nested=deferred)
