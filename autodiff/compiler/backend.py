"""What a compiling backend provides to the stages: regions lowered to text, then kernels.

The stages (``stages.py``) do not know which compiler runs: a backend finds the regions
of an optimised graph it can compile and writes each one as text, with no compiler run
(``lower``, giving ``LoweredRegion`` values), then turns a lowered region into a kernel
(``compile``): a ``KernelPrimitive`` (``kernel_call.py``) whose implementation calls
the machine code as NumPy would run the region.  The stages replace each region by one
equation of its kernel and write the graph's replay around them.

numba's backend is ``numba_tier.py`` (regions written as Python source by
``kernels.py``).  Another (LLVM IR through llvmlite, CuPy's kernels) subclasses
``Backend`` and is handed to ``stages.lower``; nothing in the stages changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autodiff.compiler.kernel_call import KernelPrimitive
from autodiff.compiler.kernels import Region
from autodiff.core.graph import Graph

__all__ = ["Backend", "LoweredRegion"]


@dataclass(frozen=True, eq=False)
class LoweredRegion:
    """One region of a graph as a backend lowered it: ``region`` (its equations, in
    order, the variables it reads, ``inputs``, and those read after it, ``outputs``),
    ``text`` (the kernel as the backend wrote it: numba's is Python source) and
    ``detail`` (what the backend keeps to compile it).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> f = autodiff.jit(lambda x: anp.exp(-x * x) / 2.0)
    >>> (region,) = f.trace(np.ones(4)).lower().regions
    >>> region.primitives, len(region.eqns), region.text.splitlines()[0]
    (['negative', 'multiply', 'exp', 'divide'], 4, 'def kernel(a0):')
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
        without holding this process's GIL (numba's: compiling in another process,
        into the cache on disk, so that ``compile`` only loads)."""
