"""Calling a compiled kernel exactly as NumPy would run its region.

A backend compiles a region of a graph into an *entry*, a built-in function of the
region's inputs, its constants and its (preallocated) results that returns
``code << 8 | flags``: the processor's floating-point status flags its run raised
(``invalid``, ``divide``, ``overflow``, ``underflow``: ``flag_bits``) and 0, or a code
saying why it did not run (``CONVERT``: an argument it does not take; ``SINGULAR``: a
singular matrix; ``NO_MEMORY``).  Here is what every kernel is called through (``caller``),
so that a compiled region is indistinguishable from the NumPy calls it replaces:

- **Results** are new arrays, allocated here for every call, laid out as NumPy's calls
  would lay them out where that is an order of their axes (a transposed result,
  ``Region.orders``), else in C order: they share memory with nothing
  (``KernelPrimitive.fresh_results``, which ``replay.plan`` relies on).
- **Floating-point errors.**  NumPy reports them (``invalid value encountered in log``)
  from the same flags after each loop.  Where a flag went up that ``np.geterr()`` does
  not ignore (with the ``np.errstate`` the staged function set around the region's
  equations over it: ``core/errstate.py``), the region runs again as NumPy calls
  (``Fallback``, the region's own replay), which warn or raise exactly as NumPy does and
  give the same values.
- **What the entry refused.**  A 0-d argument of another type (a Python int) is converted
  and the entry called again; an array of another layout than the one NumPy's own calls
  would give the kernel (a transposed, sliced or broadcast view: NumPy's order of a sum
  follows the layout) runs the kernel's variant for that layout (``layouts.py``:
  compiled from the layout's second call on; NumPy calls before, or where there is
  none); a singular matrix (NumPy raises ``LinAlgError``) or a failed allocation run
  the region as NumPy calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.compiler.replay import compile_graph
from autodiff.core.errstate import merged
from autodiff.core.graph import Graph
from autodiff.core.primitive import Primitive

__all__ = ["CONVERT", "NO_MEMORY", "SINGULAR", "Fallback", "KernelPrimitive", "caller"]

CONVERT = 1  # an argument the entry does not take: converted, or NumPy calls
SINGULAR = 2  # a singular matrix in a solve: NumPy raises LinAlgError
NO_MEMORY = 3


class KernelPrimitive(Primitive):
    """A region of a graph compiled into one kernel: its implementation runs it (with
    the checks of the module docstring); its results are new arrays."""

    __slots__ = ("native", "region", "source")
    fresh_results = True  # for replay.py: its results share memory with nothing

    def __init__(self, runner: Callable, region: Any, source: str) -> None:
        super().__init__("kernel", runner, multiple_results=True)
        self.region, self.source = region, source
        self.native: Any = None  # the backend's compiled module, for inspection

    @property
    def layouts(self) -> list[tuple]:
        """The layouts it was compiled for besides its first (``layouts.Variants``): per
        input, the strides in elements of the calls that run them (None: a 0-d input)."""
        variants = getattr(self.impl, "variants", None)
        return variants.described() if variants is not None else []

    @property
    def calls_as_numpy(self) -> int:
        """How many of its calls ran the region's NumPy calls instead (``Fallback``)."""
        return self.impl.fallback.calls  # type: ignore[attr-defined]


def caller(entry: Any, region: Any, consts: Sequence, flag_bits: Sequence[int],
           layouts: Callable[[np.ndarray, Any], tuple],
           variants: Any = None) -> Callable:  # fmt: skip
    """The function a kernel's equation calls (generated, so that a call costs what it
    must): the results allocated, ``entry(*inputs, *consts, *results)`` called, its
    result handled as the module docstring says.  ``flag_bits``: this processor's
    (invalid, divide, overflow, underflow) bits; ``layouts(array, var)``: the byte
    strides the entry takes for an input; ``variants``: the kernel compiled for other
    layouts (``layouts.Variants``), or None."""
    names = [f"a{i}" for i in range(len(region.inputs))]
    outs = [f"o{i}" for i in range(len(region.outputs))]
    fallback = Fallback(region)
    lines = [f"def run({', '.join(names)}):"]
    orders = getattr(region, "orders", {})
    for o, var in zip(outs, region.outputs):
        shape, back = _allocation(var, orders)
        transposed = f".transpose({back!r})" if back else ""
        lines.append(f"    {o} = _empty({shape!r}, _t_{o}){transposed}")
    call = ", ".join([*names, *(f"_k{i}" for i in range(len(consts))), *outs])
    lines += [
        f"    r = _entry({call})",
        "    if r:",
        f"        return _trouble(r, ({''.join(n + ', ' for n in names)}), "
        f"({''.join(o + ', ' for o in outs)}))",
        f"    return ({''.join(o + ', ' for o in outs)})",
    ]
    namespace: dict[str, Any] = {"_empty": np.empty, "_entry": entry}
    namespace.update((f"_k{i}", c) for i, c in enumerate(consts))
    namespace.update((f"_t_{o}", v.aval.dtype) for o, v in zip(outs, region.outputs))
    namespace["_trouble"] = _Trouble(entry, region, consts, fallback, flag_bits, layouts,
                                     variants)  # fmt: skip
    exec(compile("\n".join(lines) + "\n", "<autodiff kernel caller>", "exec"), namespace)
    run = namespace["run"]
    run.fallback = fallback
    run.variants = variants
    return run


def _allocation(var: Any, orders: dict) -> tuple[tuple, tuple | None]:
    """How a result is allocated: the shape of a C-ordered array and the transpose that
    makes it ``var``'s (None: none), laid out in NumPy's order of its axes (``orders``:
    ``Region.orders``; C's where it has none)."""
    shape, order = tuple(var.aval.shape), orders.get(var)
    if not order:
        return shape, None
    return tuple(shape[a] for a in order), tuple(order.index(a) for a in range(len(order)))


def allocate(outputs: Sequence[Any], orders: dict) -> tuple:
    """New arrays for ``outputs``, laid out as ``orders`` says (``_allocation``)."""
    made = []
    for var in outputs:
        shape, back = _allocation(var, orders)
        a = np.empty(shape, var.aval.dtype)
        made.append(a.transpose(back) if back else a)
    return tuple(made)


class _Trouble:
    """What the caller does when an entry's result is not 0 (module docstring)."""

    def __init__(self, entry: Any, region: Any, consts: Sequence, fallback: Callable,
                 flag_bits: Sequence[int], layouts: Callable, variants: Any) -> None:  # fmt: skip
        self.entry, self.region, self.consts, self.fallback = entry, region, consts, fallback
        self.bits = list(zip(flag_bits, ("invalid", "divide", "over", "under")))
        self.layouts, self.variants = layouts, variants
        self.last: tuple | None = None  # (entry, constants, orders) of the last variant run

    def matters(self, raised: int) -> bool:
        """Whether NumPy would report one of the ``raised`` flags (``np.geterr()``, with
        the region's own ``np.errstate`` over it)."""
        err = merged(self.region.errstate)
        return any(raised & bit and err[name] != "ignore" for bit, name in self.bits)

    def __call__(self, r: int, args: tuple, outs: tuple) -> tuple:
        code = r >> 8
        if code == CONVERT and self.last is not None:  # the previous strided call's layout
            entry, consts, orders = self.last
            last_outs = outs if orders is None else allocate(self.region.outputs, orders)
            r = entry(*args, *consts, *last_outs)
            code = r >> 8
            if not code:
                outs = last_outs
        if code == CONVERT:
            again = self.converted(args, outs)
            if again is None or again[0] >> 8:
                return self.fallback(*args)
            r, outs = again
        elif code:
            return self.fallback(*args)
        raised = r & 0xFF
        if raised and self.matters(raised):
            return self.fallback(*args)
        return outs

    def converted(self, args: tuple, outs: tuple) -> tuple | None:
        """The entry's result on ``args`` converted (a Python scalar for a 0-d input),
        by the variant for their layouts, and the results it wrote (a variant lays them
        out as NumPy would for those layouts); None where neither is possible."""
        converted = []
        entry, consts = self.entry, self.consts
        for a, var in zip(args, self.region.inputs):
            if var.aval.ndim == 0 and type(a) is not np.ndarray:
                try:
                    a = np.asarray(a, dtype=var.aval.dtype)
                except (TypeError, ValueError, OverflowError):
                    return None
            elif (
                type(a) is not np.ndarray
                or not a.flags.aligned
                or (a.strides != self.layouts(a, var))
            ):
                entry = None  # NumPy's order follows the layout: another variant
            converted.append(a)
        if entry is None:
            found = self.variants.find(converted) if self.variants is not None else None
            if found is None:
                return None
            entry, consts, orders = self.last = found
            if orders is not None:
                outs = allocate(self.region.outputs, orders)
        return entry(*converted, *consts, *outs), outs


class Fallback:
    """The region as NumPy calls (compiled the first time it is needed), each making
    its result as NumPy makes it: no buffer is reused (``out=``), whose layout would
    not be the one NumPy gives a result of strided operands, and the order of a later
    sum follows that layout."""

    def __init__(self, region: Any) -> None:
        self.region = region
        self.replay: Callable | None = None
        self.calls = 0  # (for tests: how often the kernel was not used)

    def __call__(self, *args: Any) -> tuple:
        self.calls += 1
        if self.replay is None:
            r = self.region
            graph = Graph(r.inputs, r.outputs, r.eqns, r.constvars, r.consts)
            self.replay = compile_graph(graph, fresh=True, reuse=False)
        return self.replay(*args)
