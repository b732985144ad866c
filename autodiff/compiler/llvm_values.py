"""The values of compiled code and NumPy's layouts: what a kernel's arrays look like.

A 0-d value is a :class:`Scalar` (an LLVM register, or a constant); an array an
:class:`Array`: a base pointer, an offset in elements (static, plus a register where a
loop indexes it) and strides in elements, all static but that register.  A view
(``reshape``, ``transpose``, a static index, ``broadcast_to``) is only another layout,
found by running NumPy's own function on a stand-in array (``view_layout``).

NumPy's results have layouts of their own (an elementwise result follows its operands'
memory order, ``keep_order``: NumPy's iterator's axis sort), and the order of a sum
follows the layout it runs on, so compiled code lays its arrays out as NumPy would
(``numpy_layouts`` predicts them for a graph's variables, ``coalesced`` merges
dimensions as NumPy's iterator does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.lib.stride_tricks import as_strided

from autodiff.compiler import llvm_ir
from autodiff.core.graph import Graph, ShapedArray, Var
from autodiff.core.lowering import Elementwise, NotLowered, View

if TYPE_CHECKING:
    from autodiff.compiler.llvm_ir import Function
    from autodiff.compiler.npy_loops import Loop

__all__ = ["Array", "Emitting", "Scalar", "Value", "broadcast_strides", "c_strides", "coalesced",
           "dense_order", "dtype_of", "keep_order", "keepdims_strides", "lowest", "numpy_layouts",
           "strides_in_order", "view_layout"]  # fmt: skip


class Scalar:
    """A 0-d value in a register (``ref``: an SSA name or a constant)."""

    __slots__ = ("dtype", "ref")

    def __init__(self, dtype: np.dtype, ref: str) -> None:
        self.dtype, self.ref = dtype, ref

    shape: tuple = ()
    ndim = 0


class Array:
    """An array in memory: element ``i`` (a tuple) at ``base[offset + dyn + sum(i * strides)]``
    (``dyn``: an i64 register or None)."""

    __slots__ = ("base", "dtype", "dyn", "offset", "shape", "strides")

    def __init__(self, dtype: np.dtype, shape: tuple, base: str, offset: int = 0,
                 strides: tuple | None = None, dyn: str | None = None) -> None:  # fmt: skip
        self.dtype, self.shape, self.base, self.offset, self.dyn = dtype, shape, base, offset, dyn
        self.strides = strides if strides is not None else c_strides(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def c_contiguous(self) -> bool:
        return all(s == c or n == 1 for n, s, c in zip(self.shape, self.strides,
                                                       c_strides(self.shape)))  # fmt: skip


Value = Scalar | Array


class Emitting(Protocol):
    """What the fused loops (``llvm_fusion``) and the lowerings' context (``llvm_context``)
    ask of the code generator (``llvm_codegen.Codegen``, which imports them: this names it
    without an import circle)."""

    f: Function
    decls: set[str]  # the module's declarations and constants

    def alloc(self, shape: tuple, dtype: np.dtype, order: Sequence[int] | None = None) -> Array: ...
    def index_of(self, a: Array, terms: Sequence[tuple[str, int]]) -> str: ...
    def pointer(self, a: Array, index: str) -> str: ...
    def load(self, a: Array, index: str) -> str: ...
    def store(self, a: Array, index: str, value: str, dtype: np.dtype | None = None) -> None: ...
    def element(self, a: Array, position: Sequence[int]) -> Scalar: ...
    def loop(self, ufunc: Any, dtypes: tuple, reduction: bool = False) -> Loop: ...
    def call_loop(self, loop: Loop, pointers: Sequence[str], dims: Sequence[str | int],
                  steps: Sequence[str | int]) -> None: ...  # fmt: skip
    def status_failed(self) -> str: ...
    def opaque(self, value: Scalar) -> Scalar: ...
    def scalar_slot(self, value: Scalar) -> str: ...
    def materialize(self, value: Value, order: Sequence[int] | None = None) -> Array: ...
    def copy_into(self, dst: Array, src: Value) -> None: ...
    def fill(self, dst: Array, value: Any) -> None: ...
    def const(self, value: Any) -> Value: ...
    def scratch(self, key: str, shape: tuple, dtype: np.dtype) -> Array: ...
    def view(self, x: Value, fn: Callable[[np.ndarray], Any], element: bool = True) -> Value: ...
    def emit_graph(self, graph: Graph, inputs: Sequence[Value]) -> list[Value]: ...
    def reduce(self, ufunc: np.ufunc, x: Value, out_aval: Any, *, axis: tuple,
               keepdims: bool) -> Value: ...  # fmt: skip


def c_strides(shape: Sequence[int]) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def lowest(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The offset (in elements, <= 0) of an array's lowest element in memory from its
    first: how far its negative strides reach back."""
    return sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0 and n)


def dtype_of(aval: Any) -> np.dtype:
    if not isinstance(aval, ShapedArray) or not llvm_ir.supported(aval.dtype):
        raise NotLowered(f"a value of {getattr(aval, 'dtype', aval)} is not compiled")
    return aval.dtype


# --- NumPy's iteration order ------------------------------------------------------------------


def keep_order(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> list[int]:
    """The axes of ``shape`` from outermost to innermost as NumPy's iterator orders them
    for operands of ``strides`` (its insertion sort by stride: where operands disagree, C
    order wins; size-1 axes and stride-0 operands do not vote)."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))  # innermost first, as NumPy's axis data
    for i0 in range(1, ndim):
        ipos, j0 = i0, perm[i0]
        for i1 in range(i0 - 1, -1, -1):
            ambiguous, swap = True, False
            j1 = perm[i1]
            for st in strides:
                s0 = st[j0] if shape[j0] != 1 else 0
                s1 = st[j1] if shape[j1] != 1 else 0
                if s0 and s1:
                    if abs(s1) <= abs(s0):
                        swap = False
                    elif ambiguous:
                        swap = True
                    ambiguous = False
            if not ambiguous:
                if swap:
                    ipos = i1
                else:
                    break
        if ipos != i0:
            perm.insert(ipos, perm.pop(i0))
    return perm[::-1]


def numpy_layouts(graph: Graph, fresh: Container = (), given: dict | None = None) -> dict:
    """The strides (in elements) NumPy's arrays have at each variable of ``graph`` when
    its inputs are C-contiguous: views as NumPy makes them (``View`` lowerings, on a
    stand-in), elementwise results in NumPy's ``K`` order, everything else C order (a
    guess: kernels check the layouts they are given).  ``fresh``: variables a kernel
    returns, new arrays in NumPy's layout where that is an order of its axes with no
    gaps (``dense_order``: a transposed result), else in C order; ``given``: the strides
    of inputs that are not C-contiguous."""
    layouts: dict = dict(given or {})
    for eqn in graph.eqns:
        lowering = eqn.prim.lowering
        found: list = [None] * len(eqn.outvars)
        try:
            if isinstance(lowering, View) and len(eqn.invars) == 1 and type(eqn.invars[0]) is Var:
                x = eqn.invars[0]
                if x.aval.ndim and eqn.outvars[0].aval.ndim:
                    stand_in = Array(x.aval.dtype, tuple(x.aval.shape), "%x", 0, layouts.get(x))
                    fn, params = lowering.fn or eqn.prim.impl, eqn.params
                    seen = view_layout(stand_in, lambda a, fn=fn, params=params: fn(a, **params))
                    if seen is not None and seen[0]:
                        found[0] = seen[2]
            elif isinstance(lowering, Elementwise) and eqn.outvars[0].aval.ndim:
                shape = tuple(eqn.outvars[0].aval.shape)
                operands = [Array(v.aval.dtype, tuple(v.aval.shape), "%x", 0, layouts.get(v))
                            for v in eqn.invars if type(v) is Var and v.aval.ndim]  # fmt: skip
                order = keep_order(shape, [broadcast_strides(a, shape) for a in operands])
                if order != list(range(len(shape))):
                    found[0] = strides_in_order(shape, order)
        except (NotLowered, ValueError, TypeError, IndexError):
            pass
        for v, strides in zip(eqn.outvars, found):
            if v in fresh and strides is not None and dense_order(v.aval.shape, strides) is None:
                strides = None
            if strides is not None and strides != c_strides(v.aval.shape):
                layouts[v] = strides
    return layouts


def dense_order(shape: Sequence[int], strides: Sequence[int]) -> list[int] | None:
    """The order of ``shape``'s axes (outermost first) in which an array of ``strides``
    is contiguous, None where it is not contiguous in any (a slice, a broadcast, a
    reversal)."""
    order = keep_order(shape, [strides])
    want = strides_in_order(shape, order)
    if all(n == 1 or a == b for n, a, b in zip(shape, strides, want, strict=True)):
        return order
    return None


def strides_in_order(shape: Sequence[int], order: Sequence[int]) -> tuple:
    """Strides of an array contiguous in the axis ``order`` (outermost first)."""
    inner = c_strides([shape[a] for a in order])
    by_axis = [0] * len(shape)
    for a, s in zip(order, inner):
        by_axis[a] = s
    return tuple(by_axis)


def coalesced(sizes: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Size-1 dimensions dropped, neighbours merged where every operand allows it (as
    NumPy's iterator coalesces); at least one dimension remains."""
    keep = [d for d, n in enumerate(sizes) if n != 1]
    sizes = [sizes[d] for d in keep]
    strides = [[st[d] for d in keep] for st in strides]
    d = len(sizes) - 1
    while d > 0:
        if all(st[d - 1] == st[d] * sizes[d] for st in strides):
            sizes[d] *= sizes[d - 1]
            del sizes[d - 1]
            for st in strides:
                del st[d - 1]
        d -= 1
    if not sizes:
        return [1], [[0] for _ in strides]
    return sizes, strides


def broadcast_strides(a: Array, shape: tuple) -> list[int]:
    lead = len(shape) - a.ndim
    out = [0] * lead
    for d, n in enumerate(a.shape):
        out.append(0 if n == 1 and shape[lead + d] != 1 else a.strides[d])
    return out


def keepdims_strides(ndim: int, kept: list, strides: tuple) -> tuple:
    out = [0] * ndim
    for d, s in zip(kept, strides):
        out[d] = s
    return tuple(out)


def view_layout(x: Array, fn: Callable) -> tuple | None:
    """(shape, offset, strides) of ``fn(x)`` in elements, or None where ``fn`` copies."""
    extent = x.offset + sum(max(s, 0) * (n - 1) for n, s in zip(x.shape, x.strides)) + 1
    low = x.offset + sum(min(s, 0) * (n - 1) for n, s in zip(x.shape, x.strides))
    if low < 0 or 0 in x.shape:
        raise NotLowered("a view of an empty array, or one before its buffer")
    buffer = np.empty(max(extent, 1), np.uint8)
    stand_in = as_strided(buffer[x.offset :], x.shape, x.strides, writeable=False)
    result = fn(stand_in)
    if isinstance(result, np.generic):  # one element (an integer index): which one
        positions = np.arange(extent, dtype=np.int64)
        element = fn(as_strided(positions[x.offset :], x.shape,
                                tuple(8 * s for s in x.strides), writeable=False))  # fmt: skip
        return (), int(element), ()
    if not isinstance(result, np.ndarray):
        return None
    start = buffer.__array_interface__["data"][0]
    at = result.__array_interface__["data"][0]
    if result.base is None or not start <= at < start + buffer.size or result.dtype != np.uint8:
        return None
    return tuple(result.shape), at - start, tuple(result.strides)
