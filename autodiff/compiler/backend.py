"""What a compiling backend provides to the stages: regions lowered to text, then kernels.

The stages (``stages.py``) do not know which compiler runs: a backend finds the regions
of an optimised graph it can compile and writes each one as text, with no compiler run
(``lower``, giving ``LoweredRegion`` values), then turns a lowered region into a kernel
(``compile``): a ``KernelPrimitive`` (``kernel_call.py``) whose implementation calls
the machine code as NumPy would run the region.  The stages replace each region by one
equation of its kernel and write the graph's replay around them.

The backend ``jit`` uses is LLVM's (``llvm_backend.py``: regions written as LLVM IR,
compiled by llvmlite).  Another (CuPy's kernels) subclasses ``Backend`` and is handed to
``stages.lower``; nothing in the stages changes.  ``regions`` gathers the equations a
backend says lower (its ``lowerable``) into regions, as every backend would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from autodiff.compiler.kernel_call import KernelPrimitive
from autodiff.core.graph import Eqn, Graph, Var
from autodiff.core.lowering import View

__all__ = ["Backend", "LoweredRegion", "Region", "regions"]


class Region:
    """Equations of a graph compiled into one kernel: ``eqns`` in order, the variables
    it reads (``inputs``) and those read after it (``outputs``); the graph's constants it
    reads (``constvars``, their values ``consts``: compiled in); ``layouts``, per input
    whose strides NumPy's calls would not make C's, those strides (in elements);
    ``errstate``, the floating-point setting of all its equations (``Eqn.errstate``);
    ``views``: its equations that also run after the kernel, as NumPy's views of what it
    returns (``_views_at_exits``), by id; ``orders``: per output NumPy would lay out in
    another order of its axes than C's (a transposed result), that order, outermost axis
    first (set by the backend, which returns it so laid out)."""

    __slots__ = ("consts", "constvars", "eqns", "errstate", "inputs", "layouts", "loops",
                 "orders", "outputs", "start", "views")  # fmt: skip

    def __init__(self, start: int, errstate: tuple | None = None) -> None:
        self.start, self.errstate = start, errstate
        self.eqns: list[Eqn] = []
        self.inputs: list[Var] = []
        self.outputs: list[Var] = []
        self.constvars: list[Var] = []
        self.consts: list = []
        self.layouts: dict = {}
        self.views: dict[int, Eqn] = {}
        self.orders: dict[Var, list[int]] = {}
        self.loops = 0


def regions(graph: Graph, lowerable: Callable[[Eqn], bool], worth_it: Callable[[Region], bool],
            layouts: dict | None = None,
            cuts: frozenset = frozenset()) -> list[Region]:  # fmt: skip
    """The regions of ``graph`` worth compiling: the equations that lower (``lowerable``)
    gathered in order, an equation joining the open region when every operand it reads
    existed when the region started or is computed in it (the region runs where it
    starts), and has the region's ``np.errstate`` setting; those ``worth_it`` kept, with
    what each reads and what is read after it.  ``layouts``: the strides NumPy gives each
    variable where they are not C's; ``cuts``: the indices of equations that start a new
    region (a backend's bound on a kernel's size)."""
    made: dict[Var, int] = {}
    found: list[Region] = []
    current: Region | None = None
    members: set = set()
    for i, eqn in enumerate(graph.eqns):
        if lowerable(eqn):
            ready = (
                current is not None
                and i not in cuts
                and current.errstate == eqn.errstate
                and all(
                    type(v) is not Var or v in members or made.get(v, -1) < current.start
                    for v in eqn.invars
                )
            )
            if not ready:
                current, members = Region(i, eqn.errstate), set()
                found.append(current)
            assert current is not None
            current.eqns.append(eqn)
            current.loops += bool(getattr(eqn.prim, "runs_functions", False))
            members.update(eqn.outvars)
        for v in eqn.outvars:
            made[v] = i
    kept = [r for r in found if worth_it(r)]
    inside = {v: r for r in kept for e in r.eqns for v in e.outvars}
    owners = {id(e): id(r) for r in kept for e in r.eqns}
    readers: dict[Var, set] = {}
    for eqn in graph.eqns:
        for v in eqn.invars:
            if type(v) is Var:
                readers.setdefault(v, set()).add(owners.get(id(eqn)))
    final = {v for v in graph.outvars if type(v) is Var}
    constants = dict(zip(graph.constvars, graph.consts))
    layouts = layouts or {}
    for r in kept:
        seen: set = set()
        for e in r.eqns:
            for v in e.invars:
                if type(v) is Var and inside.get(v) is not r and v not in seen:
                    seen.add(v)
                    if v in constants:
                        r.constvars.append(v)
                        r.consts.append(constants[v])
                    else:
                        r.inputs.append(v)
                        if v in layouts:
                            r.layouts[v] = layouts[v]
        for e in r.eqns:
            for v in e.outvars:
                if v in final or any(who != id(r) for who in readers.get(v, ())):
                    r.outputs.append(v)
        _views_at_exits(r)
    return kept


def _views_at_exits(region: Region) -> None:
    """A view the region would return (a transpose, a slice of an input or of a value
    it computes) made by NumPy after the kernel instead, of the kernel's result or of
    the region's input: as NumPy's own calls lay it out (a kernel returns new arrays
    with no gaps, and a later sum or product follows the layout: ``x.T @ y`` of a
    strided ``x`` and of its C copy differ in the last bits).  Its equations stay in the
    region for the kernel's own uses and run outside it too (``Region.views``)."""
    made = {v: e for e in region.eqns for v in e.outvars}
    outputs: list[Var] = []
    for v in region.outputs:
        chain, base = [], v
        while base in made and _is_view(made[base]):
            chain.append(made[base])
            base = next(x for x in made[base].invars if type(x) is Var)
        if not chain or not v.aval.ndim:
            outputs.append(v)
            continue
        region.views.update((id(e), e) for e in chain)
        if base in made:  # computed in the region: the kernel returns it, NumPy views it
            outputs.append(base)
    region.outputs = list(dict.fromkeys(outputs))


def _is_view(eqn: Eqn) -> bool:
    return (
        isinstance(eqn.prim.lowering, View)
        and sum(type(x) is Var for x in eqn.invars) == 1
        and all(getattr(v.aval, "ndim", 0) for v in eqn.outvars)
    )


@dataclass(frozen=True, eq=False)
class LoweredRegion:
    """One region of a graph as a backend lowered it: ``region`` (its equations, in
    order, the variables it reads, ``inputs``, and those read after it, ``outputs``),
    ``text`` (the kernel as the backend wrote it: LLVM IR for LLVM's) and
    ``detail`` (what the backend keeps to compile it).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> f = autodiff.jit(lambda x: anp.exp(-x * x) / 2.0)
    >>> (region,) = f.trace(np.ones(4)).lower().regions
    >>> region.primitives, len(region.eqns), region.text.splitlines()[0]
    (['negative', 'multiply', 'exp', 'divide'], 4, '; kernel: negative multiply exp divide')
    """

    region: Region
    text: str
    detail: Any = None

    @property
    def eqns(self) -> list:
        return self.region.eqns

    @property
    def primitives(self) -> list[str]:
        """The names of the primitives it computes, each once, in order."""
        return list(dict.fromkeys(eqn.prim.name for eqn in self.region.eqns))


class Backend:
    """A compiler of regions (see the module docstring); this base is available nowhere."""

    name = "none"

    def available(self) -> bool:
        """Whether kernels can be compiled here (the compiler installed, ...)."""
        return False

    def why_not(self) -> str:
        """Why ``available()`` is False, for error messages."""
        return "no compiling backend is installed"

    def lower(self, graph: Graph) -> tuple[LoweredRegion, ...]:
        """The regions of ``graph`` (optimised) worth compiling, written as text."""
        raise NotImplementedError(f"the {self.name} backend lowers nothing")

    def compile(self, lowered: LoweredRegion, contiguous: frozenset,
                sync: bool) -> KernelPrimitive:  # fmt: skip
        """``lowered`` as a kernel.  ``contiguous``: the region's inputs known to be
        C-contiguous arrays (a backend may specialise on them); ``sync``: whether a
        variant needed later (another layout) is compiled at once or in the background.
        Raises where the compiler refuses the region (it then stays NumPy calls)."""
        raise NotImplementedError(f"the {self.name} backend compiles nothing")

    def prepare(self, lowered: Sequence[LoweredRegion], contiguous: frozenset) -> None:
        """Called before ``compile`` in the background thread: work that can be done
        before the kernels are compiled one by one (none for LLVM's)."""
