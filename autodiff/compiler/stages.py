"""The compiler's pipeline, stated once: trace, optimise, replay or lower, compile, cache.

=========================  ===============================  =====================================
step                       gives                            where
=========================  ===============================  =====================================
trace                      ``Traced``: the graph as         ``interpreters/staging.py``;
                           staged, what it closed over      ``JitFunction.trace``
optimise                   the graph a call runs            ``optimized`` (``passes.py``)
replay                     a Python function of NumPy       ``replay`` (``replay.py``)
                           calls, buffers reused
or lower                   ``Lowered``: the regions that    ``lower`` (a ``Backend``:
                           compile, as the backend's text   ``llvm_backend.py``)
compile                    ``Compiled``: the kernels, and   ``Lowered.compile``
                           the replay calling them
cache                      each result once per graph       ``derived.py``; kernels on disk,
                                                            ``disk_cache.py``; per signature,
                                                            ``jit.py``
=========================  ===============================  =====================================

``jit`` takes the steps as a signature's calls come (``tiers.py``: the first call
interprets the staged graph, the second replays it, a hot one compiles).  The stage
values are public (``autodiff.stages``, after JAX's ``jax.stages``):
``jit(f).trace(*args)`` is a ``Traced``, ``.lower()`` a ``Lowered`` (which equations
compile and which stay NumPy calls, each kernel's source, ``cost_analysis()``),
``.compile()`` a ``Compiled`` (a callable, with its ``compile_time``).  Each is a frozen
value; what a graph's stages made is kept on the graph (``derived.py``), never the
values it closed over (``Traced.captured``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optree

from autodiff.compiler import background, llvm_backend
from autodiff.compiler.backend import Backend, LoweredRegion
from autodiff.compiler.derived import derived_of
from autodiff.compiler.kernel_call import KernelPrimitive
from autodiff.compiler.passes import optimize
from autodiff.compiler.replay import compile_graph
from autodiff.core.graph import Eqn, Graph, Var
from autodiff.core.tracer import Tracer
from autodiff.errors import AutodiffWarning, TransformTypeError

__all__ = [
    "Compiled",
    "Lowered",
    "Traced",
    "compiled",
    "cost_of",
    "default_backend",
    "failures",
    "functions_of",
    "lower",
    "optimized",
    "replay",
]

# Regions a backend refused to compile, with the error (tests: a lowering LLVM refuses)
failures: list = []


# --- optimise, replay ------------------------------------------------------------------------


def optimized(graph: Graph, kind: str = "numpy") -> Graph:
    """``graph`` as a call runs it on arrays of ``kind``: after the passes, custom rules
    inlined; for libraries that refuse NumPy arrays (``"other"``: CuPy), with no new
    NumPy constants."""
    numpy_constants = kind != "other"
    store = derived_of(graph)
    found = store.optimized.get(numpy_constants)
    if found is None:
        found = optimize(graph, inline_rules=True, numpy_constants=numpy_constants)
        with graph.lock:
            found = store.optimized.setdefault(numpy_constants, found)
    return found


def replay(graph: Graph, kind: str = "numpy", like: Any = None, fresh: bool = False) -> Callable:
    """The replay of ``graph`` on arrays of ``kind`` (``replay.array_kind``): its optimised
    form as a Python function of NumPy calls, made once per kind; ``fresh``: with results
    that share no memory (a jitted function's)."""
    key = (kind, None if like is None else type(like), fresh)
    store = derived_of(graph)
    found = store.replays.get(key)
    if found is None:  # compiled without a lock: two threads may both compile, one wins
        found = compile_graph(optimized(graph, kind), kind, like, fresh)
        with graph.lock:
            found = store.replays.setdefault(key, found)
    return found


# --- lower, compile ----------------------------------------------------------------------------


def default_backend() -> Backend:
    """The backend ``jit`` compiles with: LLVM's (``llvm_backend.py``)."""
    return llvm_backend.BACKEND


def lower(
    graph: Graph,
    backend: Backend | None = None,
    layouts: Sequence[bool] | None = None,
    kind: str = "numpy",
    like: Any = None,
    traced: Traced | None = None,
) -> Lowered:
    """``graph``'s optimised form with the regions ``backend`` (None: the default one)
    compiles, lowered.  ``layouts``: per input, whether it is a C-contiguous array (an
    example call's; None: none known)."""
    final = optimized(graph, kind)
    backend = backend or default_backend()
    note = ""
    if kind != "numpy":
        note = "nothing compiles: arrays of other libraries run as their library's calls"
    elif not backend.available():
        note = f"nothing compiles: {backend.why_not()}"
    if note:
        return Lowered(final, (), None, note, kind=kind, like=like, traced=traced)
    contiguous = frozenset(_contiguous(final, layouts))
    return Lowered(final, backend.lower(final), backend, contiguous=contiguous, traced=traced)


def compiled(graph: Graph, fresh: bool = False, layouts: Sequence[bool] | None = None,
             sync: bool = True, backend: Backend | None = None) -> Compiled | None:  # fmt: skip
    """``graph`` lowered and compiled by ``backend`` (None: the default one), once per
    graph; None where no region compiled.  ``sync``: whether a variant a later call
    needs (another layout) compiles at once, else in the background."""
    backend = backend or default_backend()
    key = (backend.name, fresh)
    store = derived_of(graph)
    found = store.compiled.get(key, False)
    if found is False:
        lowered = lower(graph, backend, layouts)
        found = lowered.compile(fresh, sync) if lowered.regions else None
        if found is not None and not found.kernels:
            found = None
        with graph.lock:
            found = store.compiled.setdefault(key, found)
    return found


def _contiguous(graph: Graph, layouts: Sequence[bool] | None) -> list[Var]:
    """The variables of ``graph`` that hold C-contiguous arrays: the inputs ``layouts``
    says are, the constants that are, and the results of ufuncs (NumPy makes them
    C-contiguous from such operands)."""
    found = [c for c, value in zip(graph.constvars, graph.consts)
             if isinstance(value, np.ndarray) and value.flags.c_contiguous]  # fmt: skip
    found += [v for v, c in zip(graph.invars, layouts or ()) if c]
    known = set(found)
    for eqn in graph.eqns:
        if isinstance(eqn.prim.impl, np.ufunc) and all(
            type(v) is not Var or v.aval.ndim == 0 or v in known for v in eqn.invars
        ):
            known.update(eqn.outvars)
    return list(known)


def _typed(run: Callable, fused: Graph, graph: Graph, kind: str, fresh: bool) -> Callable:
    """``run`` returning each 0-d result a kernel computes as NumPy returns it there (a
    NumPy scalar, or a 0-d array: a kernel cannot tell): its first call runs NumPy's
    replay and notes which, the later calls run ``run``."""
    from_kernel = {v for e in fused.eqns if isinstance(e.prim, KernelPrimitive)
                   for v in e.outvars}  # fmt: skip
    zero_d = [i for i, v in enumerate(fused.outvars)
              if type(v) is Var and v in from_kernel and v.aval.ndim == 0]  # fmt: skip
    if not zero_d:
        return run
    return _ZeroD(run, compile_graph(graph, kind, None, fresh), zero_d)


class _ZeroD:
    """A replay whose 0-d results are typed as NumPy's (``_typed``)."""

    __slots__ = ("numpy", "run", "scalars", "source", "zero_d")

    def __init__(self, run: Callable, numpy: Callable, zero_d: list[int]) -> None:
        self.run, self.numpy, self.zero_d = run, numpy, zero_d
        self.source = run.source  # type: ignore[attr-defined]
        self.scalars: list[int] | None = None

    def __call__(self, *args: Any) -> tuple:
        if self.scalars is None:
            outs = self.numpy(*args)
            self.scalars = [i for i in self.zero_d if type(outs[i]) is not np.ndarray]
            return outs
        outs = self.run(*args)
        if self.scalars:
            outs = list(outs)
            for i in self.scalars:
                outs[i] = outs[i][()]
            outs = tuple(outs)
        return outs


def _fused(graph: Graph, kernels: Sequence[KernelPrimitive]) -> Graph:
    """``graph`` with each kernel's region replaced by one equation of the kernel, where
    the region starts, and the views NumPy makes of what it returns (``Region.views``)."""
    if not kernels:
        return graph
    first = {id(k.region.eqns[0]): k for k in kernels}
    members = {id(e) for k in kernels for e in k.region.eqns if id(e) not in k.region.views}
    eqns: list[Eqn] = []
    for eqn in graph.eqns:
        kernel = first.get(id(eqn))
        if kernel is not None:
            eqns.append(Eqn(kernel, list(kernel.region.inputs), list(kernel.region.outputs), {}))
        if id(eqn) not in members:  # (a view at a region's exit: after the kernel)
            eqns.append(eqn)
    return graph.replace(eqns=eqns, name=graph.name)


# --- the stage values ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Traced:
    """A function staged for one signature (``jit(f).trace(*args)``): ``graph`` as
    staged, the tracers of outer transforms it closed over (``captured``, the graph's
    last inputs, passed by the caller), the pytree structures of its arguments and
    results, the ``signature`` as text.  ``lower()`` goes on.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> traced = autodiff.jit(lambda x, n: anp.sin(x) * n).trace(np.ones(3), 2)
    >>> print(traced.signature)
    (f64[3], i64[] (Python scalar))
    >>> print(traced.as_text())
    { lambda a:f64[3] b:i64[] . let
        c:f64[3] = sin a
        d:f64[3] = multiply c b
      in (d,) }
    """

    graph: Graph
    captured: tuple = ()
    in_tree: Any = None
    out_tree: Any = None
    signature: str = ""
    kind: str = "numpy"  # the arguments' array library (``replay.array_kind``)
    like: Any = field(default=None, repr=False)  # an argument of that library, or None
    layouts: tuple = ()  # per argument leaf: a C-contiguous array?
    check: Callable | None = field(default=None, repr=False)  # (args, kwargs) -> leaves

    def as_text(self) -> str:
        """The graph as staged, before the passes."""
        return str(self.graph)

    def lower(self, backend: Backend | None = None) -> Lowered:
        """The optimised graph and the regions of it ``backend`` (None: the one ``jit``
        uses) compiles: none where it is not available here, or for arrays of other
        libraries (``note`` says which)."""
        if self.captured:
            raise TransformTypeError(
                f"trace(...).lower(): the function closes over {len(self.captured)} traced "
                f"value(s) of a transform around it, which only a call under that transform "
                f"provides; trace it outside the transform (or pass those values as arguments)."
            )
        return lower(self.graph, backend, self.layouts, self.kind, self.like, self)


@dataclass(frozen=True, eq=False)
class Lowered:
    """The optimised ``graph`` a call runs and the ``regions`` of it that compile
    (``LoweredRegion``: equations, inputs, outputs and the kernel's ``text``); the other
    equations are NumPy calls (``numpy_calls``).  ``note`` says why nothing compiles,
    where nothing does.  ``compile()`` goes on.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> f = autodiff.jit(lambda x: anp.cumsum(anp.sin(x) * 2.0) * x)
    >>> lowered = f.trace(np.linspace(0.0, 1.0, 5)).lower()
    >>> lowered.cost_analysis()["numpy_calls"], [r.primitives for r in lowered.regions]
    (2, [['sin', 'multiply']])
    """

    graph: Graph
    regions: tuple[LoweredRegion, ...]
    backend: Backend | None
    note: str = ""
    contiguous: frozenset = frozenset()
    kind: str = "numpy"
    like: Any = field(default=None, repr=False)
    traced: Traced | None = field(default=None, repr=False)

    @property
    def numpy_calls(self) -> list[Eqn]:
        """The equations that run as NumPy calls, one call each per run."""
        inside = {id(e) for r in self.regions for e in r.eqns if id(e) not in r.region.views}
        return [e for e in self.graph.eqns if id(e) not in inside]

    def as_text(self) -> str:
        """The graph with each equation's place (``kernel k`` or ``NumPy``), then each
        kernel's text."""
        regions = [r.region for r in self.regions]
        backend = self.backend.name if self.backend else ""
        text = _text(self.graph, regions, [r.text for r in self.regions], backend, self.note)
        return "\n".join([text, *self._nested()])

    def _nested(self) -> list[str]:
        """The staged functions of the control flow that runs as NumPy calls (a loop
        whose body lowers only in part): each its own graph, whose regions compile once
        it is hot (``tiers.call_graph``), lowered in turn."""
        if self.backend is None:
            return []
        lines = []
        for eqn in self.numpy_calls:
            for label, graph in functions_of(eqn):
                inner = lower(graph, self.backend)
                outs = " ".join(f"{v.aval.str_short()}" for v in eqn.outvars)
                lines += ["", f"# {eqn.prim.name} -> ({outs}) runs as NumPy calls; its {label}, "
                          f"on each call:", inner.as_text()]  # fmt: skip
        return lines

    def cost_analysis(self) -> dict[str, int]:
        """What one call runs (``cost_of``)."""
        return cost_of(self.graph, [r.region for r in self.regions])

    def compile(self, fresh: bool = True, sync: bool = True) -> Compiled:
        """The kernels of the regions, and the replay that calls them between NumPy
        calls (``fresh``: results that share no memory, as a jitted function's).  A region
        the backend refuses stays NumPy calls, with a warning."""
        start = time.perf_counter()
        backend = self.backend
        kernels = []
        if backend is not None and self.regions:
            if not sync:  # the backend's work elsewhere: this thread only loads
                backend.prepare(self.regions, self.contiguous)
            for region in self.regions:
                if not sync and background.exiting():  # (at exit: no more kernels)
                    raise background.CompileAbandoned("the interpreter is exiting")
                try:
                    kernels.append(backend.compile(region, self.contiguous, sync))
                except background.CompileAbandoned:
                    raise
                except Exception as e:  # a lowering the compiler refuses: NumPy calls
                    failures.append((region.region, e))
                    warnings.warn(
                        f"jit: a region of {len(region.eqns)} equations of "
                        f"'{self.graph.name}' ({', '.join(sorted(region.primitives))}) did "
                        f"not compile and runs as NumPy calls: {type(e).__name__}: "
                        f"{str(e)[:300]}",
                        AutodiffWarning,
                        stacklevel=2,
                    )
        fused = _fused(self.graph, kernels)
        run = _typed(compile_graph(fused, self.kind, self.like, fresh), fused, self.graph,
                     self.kind, fresh)  # fmt: skip
        return Compiled(self, run, fused, tuple(kernels), time.perf_counter() - start)


@dataclass(frozen=True, eq=False)
class Compiled:
    """A compiled signature: ``run`` (the argument leaves in, a tuple of results out:
    the replay, calling ``kernels`` between NumPy calls), ``graph`` (what ``run`` runs:
    each kernel one equation) and ``compile_time`` (seconds, compiling or loading the
    kernels from the cache on disk, and writing the replay).  Called with the traced
    call's arguments, it returns what the jitted function returns.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> f = autodiff.jit(lambda x: anp.cumsum(anp.sin(x) * 2.0) * x)
    >>> x = np.linspace(0.0, 1.0, 5)
    >>> compiled = f.trace(x).lower().compile()
    >>> [eqn.prim.name for eqn in compiled.graph.eqns]  # each kernel one equation
    ['kernel', 'cumsum', 'multiply']
    >>> bool(np.allclose(compiled(x), np.cumsum(np.sin(x) * 2.0) * x))
    True
    """

    lowered: Lowered
    run: Callable
    graph: Graph
    kernels: tuple[KernelPrimitive, ...]
    compile_time: float

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        traced = self.lowered.traced
        if traced is None or traced.check is None:
            return self.run(*args)
        leaves = traced.check(args, kwargs)
        if any(isinstance(leaf, Tracer) for leaf in leaves):
            raise TransformTypeError(
                "a Compiled runs on arrays, not on the traced values of a transform; "
                "call the jitted function itself under transforms."
            )
        return optree.tree_unflatten(traced.out_tree, list(self.run(*leaves)))

    def as_text(self) -> str:
        """The replay's source, then each kernel's."""
        return "\n".join([self.run.source, *(k.source for k in self.kernels)])  # type: ignore[attr-defined]

    def cost_analysis(self) -> dict[str, int]:
        """What one call runs (``cost_of``), as compiled."""
        return cost_of(self.lowered.graph, [k.region for k in self.kernels])


# --- reading the stages ----------------------------------------------------------------------


def _nbytes(v: Any) -> int:
    return int(getattr(v.aval, "nbytes", 0)) if type(v) is Var else 0


def cost_of(graph: Graph, regions: Sequence[Any]) -> dict[str, int]:
    """What one run of ``graph`` with ``regions`` compiled costs: ``equations``,
    ``compiled_equations`` (in kernels), ``kernels`` and ``numpy_calls`` (calls per run),
    and ``bytes_accessed``: the bytes each NumPy call and each kernel reads and writes
    (an estimate of memory traffic; a loop counts once, its steps' work not included),
    beside ``bytes_accessed_as_numpy``, the same with every equation a NumPy call."""
    inside = {id(e) for r in regions for e in r.eqns if id(e) not in r.views}
    numpy_calls = [e for e in graph.eqns if id(e) not in inside]

    def traffic(eqns: Sequence[Any], kernels: Sequence[Any]) -> int:
        calls = sum(_nbytes(v) for e in eqns for v in (*e.invars, *e.outvars))
        return calls + sum(_nbytes(v) for r in kernels for v in (*r.inputs, *r.outputs))

    return {
        "equations": len(graph.eqns),
        "compiled_equations": len(inside),
        "kernels": len(regions),
        "numpy_calls": len(numpy_calls),
        "bytes_accessed": traffic(numpy_calls, regions),
        "bytes_accessed_as_numpy": traffic(graph.eqns, ()),
    }


def _text(graph: Graph, regions: Sequence[Any], texts: Sequence[str], backend: str,
          note: str) -> str:  # fmt: skip
    where = {id(e): f"kernel {k}" if id(e) not in r.views else f"NumPy, after kernel {k}"
             for k, r in enumerate(regions) for e in r.eqns}  # fmt: skip
    notes = {id(e): where.get(id(e), "NumPy") for e in graph.eqns}
    costs = cost_of(graph, regions)
    head = f"# {note}"
    if backend:
        head = (f"# {backend} compiles {costs['compiled_equations']} of {costs['equations']} "
                f"equations into {_count(costs['kernels'], 'kernel')}; "
                f"{_count(costs['numpy_calls'], 'NumPy call')} per run")  # fmt: skip
    lines = [head, graph.text(notes)]
    for k, (region, text) in enumerate(zip(regions, texts)):
        names = ", ".join(dict.fromkeys(e.prim.name for e in region.eqns))
        lines += ["", f"# kernel {k}: {_count(len(region.eqns), 'equation')} ({names})",
                  text.rstrip()]  # fmt: skip
    return "\n".join(lines)


def functions_of(eqn: Eqn) -> list[tuple[str, Graph]]:
    """The staged functions a control-flow equation calls (``GraphFn`` parameters, alone
    or in a tuple: ``cond``'s branches), with their parameter's name."""
    out = []
    for key, value in eqn.params.items():
        values = value if isinstance(value, tuple) else (value,)
        for i, v in enumerate(values):
            graph = getattr(v, "graph", None)
            if isinstance(graph, Graph):
                out.append((f"{key}[{i}]" if isinstance(value, tuple) else key, graph))
    return out


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
