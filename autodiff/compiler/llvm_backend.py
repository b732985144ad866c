"""LLVM's backend: the regions of a graph written as LLVM IR and compiled by llvmlite.

``BACKEND.lower(graph)`` finds the regions (``backend.regions``, with ``lowerable``: each
equation written once on a scratch ``Codegen``) and writes each as one LLVM module
(``llvm_codegen.py``: the body; here, its *entry*); ``BACKEND.compile(lowered)`` has LLVM
optimise and generate its machine code (``llvm_engine.py``, or loads it from the cache on
disk) and returns its ``KernelPrimitive``, called through ``kernel_call.caller``.  A region
is worth a kernel when it holds a loop, ``MIN_EQUATIONS`` elementwise equations on arrays,
``MIN_SCALAR_EQUATIONS`` on 0-d values (a kernel's call costs about what two NumPy calls
cost), or other equations beside elementwise ones on arrays.

**The entry** is what CPython calls (``METH_FASTCALL``: a call costs what calling a
built-in costs).  It checks each argument: an exact ``ndarray``, aligned, with the layout
NumPy's own calls would give it (C order, or the strides ``llvm_values.numpy_layouts``
predicts: a transposed view, ...; a variant's, those of the calls it was compiled for,
``layouts.py``), or for a 0-d input a 0-d array, a NumPy scalar or a Python float of its
dtype; it takes their data pointers (an array with negative strides: its lowest element's,
as the body indexes it), clears the floating-point status
flags, runs the body (the workspace on the stack; a larger one the kernel's own NumPy
buffer, allocated once and passed after the constants: a kernel runs holding the GIL and
calls no Python, so no two runs share it; one above ``KEPT_BYTES`` ``malloc``'ed at each
call, not kept) and returns ``code << 8 | flags`` (``kernel_call.py``).  A workspace
``malloc``'ed at every call cost W2's gradient (38 MB of intermediates) a fresh mapping
of its pages each time: 1.37x the replay.

``AUTODIFF_COMPILE=0`` switches the backend off; without llvmlite it is off
(``available()``, ``why_not()``).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autodiff.compiler import llvm_codegen, llvm_engine, llvm_ir
from autodiff.compiler.backend import Backend, LoweredRegion, Region, regions
from autodiff.compiler.kernel_call import CONVERT, NO_MEMORY, KernelPrimitive, caller
from autodiff.compiler.layouts import Variants
from autodiff.compiler.llvm_codegen import Codegen
from autodiff.compiler.llvm_ir import Function, mem_type, reg_type
from autodiff.compiler.llvm_values import (
    Array,
    Scalar,
    dense_order,
    lowest,
    numpy_layouts,
    strides_in_order,
)
from autodiff.core.graph import Eqn, Graph, Literal
from autodiff.core.lowering import Elementwise, NotLowered, View

__all__ = ["BACKEND", "MIN_EQUATIONS", "MIN_SCALAR_EQUATIONS", "LLVMBackend", "lowerable"]

MIN_EQUATIONS = 2  # elementwise equations on arrays a region without a loop needs
MIN_SCALAR_EQUATIONS = 8  # or elementwise equations on 0-d values
STACK_BYTES = 1 << 16  # a workspace up to this size lives on the stack, larger ones in a buffer
KEPT_BYTES = 1 << 26  # the kernel keeps its buffer up to this size; larger ones malloc'ed per call
# A kernel's module has at most this many lines of IR (a fused loop is ~15-60): LLVM's
# optimisation takes time growing faster than the code (an unrolled LSTM's gradient: 100
# equations, 1,800 lines, 0.3 s; 500 equations 3.5 s; all 14,000 in one never ended), while
# one kernel of a CNN's step (2,400 lines) compiles in 0.2 s
MAX_LINES = 3000
MAX_EQUATIONS = 1000  # a region longer is cut before its module is written (~15 lines each)


# --- regions ----------------------------------------------------------------------------------


def lowerable(eqn: Eqn) -> bool:
    """Whether ``eqn`` (and, for control flow, everything in its functions) compiles:
    written once on a scratch ``Codegen``."""
    if eqn.prim.lowering is None:
        return False
    cg = Codegen()
    cg.errstate = eqn.errstate
    try:
        args = []
        for i, v in enumerate(eqn.invars):
            args.append(cg.atom({}, v) if type(v) is Literal else cg.param(v.aval, f"x{i}"))
        cg.emit_eqn(eqn, args)
    except NotLowered:
        return False
    return True


def worth_it(region: Region) -> bool:
    """A loop; or ``MIN_EQUATIONS`` operations on arrays (elementwise ones, reductions,
    products; not views, free in NumPy too); or ``MIN_SCALAR_EQUATIONS`` elementwise
    ones on 0-d values (a kernel's call costs about what two NumPy calls cost)."""
    if region.loops:
        return True
    arrays = scalars = 0
    for eqn in region.eqns:
        lowering = eqn.prim.lowering
        if isinstance(lowering, View):
            continue
        if isinstance(lowering, Elementwise) and not eqn.outvars[0].aval.ndim:
            scalars += 1
        elif any(getattr(v.aval, "ndim", 0) for v in (*eqn.invars, *eqn.outvars)):
            arrays += 1
    return arrays >= MIN_EQUATIONS or scalars >= MIN_SCALAR_EQUATIONS


# --- the module -------------------------------------------------------------------------------

_OB_TYPE, _ARRAY_DATA, _ARRAY_STRIDES, _ARRAY_FLAGS, _SCALAR_VALUE = 8, 16, 40, 64, 16
_C_CONTIGUOUS_ALIGNED, _ALIGNED = 0x101, 0x100


def layout_known() -> bool:
    """Whether this CPython and NumPy lay out objects as the entries read them."""
    a = np.arange(6.0).reshape(2, 3)
    s = np.float64(2.5)
    try:
        return (
            object.__basicsize__ == 16
            and ctypes.c_void_p.from_address(id(a) + _OB_TYPE).value == id(np.ndarray)
            and ctypes.c_void_p.from_address(id(a) + _ARRAY_DATA).value == a.ctypes.data
            and ctypes.c_int.from_address(id(a) + _ARRAY_FLAGS).value & 0x101 == 0x101
            and ctypes.cast(
                ctypes.c_void_p.from_address(id(a) + _ARRAY_STRIDES).value or 0,
                ctypes.POINTER(ctypes.c_int64),
            )[0]
            == 24
            and ctypes.c_double.from_address(id(s) + _SCALAR_VALUE).value == 2.5
            and ctypes.c_double.from_address(id(2.75) + _SCALAR_VALUE).value == 2.75
        )
    except (ValueError, OSError):
        return False


def _type_symbol(cls: type) -> str:
    name = f"adx.type.{cls.__module__}.{cls.__qualname__}"
    llvm_engine.symbol(name, id(cls))
    return name


def _scalar_types(dtype: np.dtype) -> list[type]:
    """The scalar objects a 0-d input of ``dtype`` may arrive as (their value at offset 16)."""
    types = [dtype.type]
    if dtype == np.dtype(np.float64):
        types.append(float)
    return types


class _Built:
    """One region written as a module: its body (``llvm_codegen``), its entry, ``text``."""

    def __init__(self, region: Region, layouts: dict | None = None,
                 orders: dict | None = None) -> None:  # fmt: skip
        cg = self.cg = Codegen()
        cg.errstate = region.errstate
        self.region = region
        # per input, its strides in elements where not C's: NumPy's own (region.layouts),
        # or those of the calls a variant is compiled for; per output in another order of
        # its axes than C's, that order (NumPy's for those layouts)
        self.layouts = region.layouts if layouts is None else layouts
        self.orders = region.orders if orders is None else orders
        inputs = [cg.param(v.aval, f"p{i}", self.layouts.get(v))
                  for i, v in enumerate(region.inputs)]  # fmt: skip
        graph = Graph(region.inputs, region.outputs, region.eqns, region.constvars, region.consts)
        outs = [Array(v.aval.dtype, tuple(v.aval.shape), f"%o{i}", 0, _out_strides(v, self.orders))
                for i, v in enumerate(region.outputs)]  # fmt: skip
        cg.destinations = {v: o for v, o in zip(region.outputs, outs) if v.aval.ndim}
        values = cg.emit_graph(graph, inputs)
        for out, value in zip(outs, values, strict=True):
            if isinstance(value, Scalar):
                cg.store(out, "0", value.ref, value.dtype)
            elif value is not out:  # (a result written where it was made needs no copy)
                cg.copy_into(out, value)
        cg.f.do(f"br i1 {cg.status_failed()}, label %fail, label %success")
        cg.f.enter("success")
        cg.f.do("ret i32 0")
        for code, label in sorted(cg.errors.items()):
            cg.f.enter(label)
            cg.f.do(f"ret i32 {code}")
        cg.f.enter("fail")
        cg.f.do("ret i32 -1")
        params = [*cg.params, *(f"ptr noalias %o{i}" for i in range(len(outs))), "ptr noalias %ws"]
        cg.f.header = f"define internal i32 @body({', '.join(params)}) alwaysinline nounwind"
        self.consts = cg.consts
        self.workspace = max(cg.workspace, 64)
        names = " ".join(e.prim.name for e in region.eqns)
        self.text = f"; kernel: {names}\n" + module_text([self])
        self.lines = self.text.count("\n")

    def entry(self) -> str:
        """The entry CPython calls: arguments checked and unpacked, the body run between
        clearing and reading the status flags."""
        region = self.region
        f = Function("define ptr @entry(ptr %self, ptr %args, i64 %nargs)")
        f.n = 0
        ndarray = _type_symbol(np.ndarray)
        bad = "convert"
        call_args = []
        position = 0

        def arg() -> str:
            nonlocal position
            at = f.op(f"getelementptr inbounds ptr, ptr %args, i64 {position}")
            position += 1
            return f.op(f"load ptr, ptr {at}")

        def field(obj: str, offset: int, ty: str) -> str:
            at = f.op(f"getelementptr inbounds i8, ptr {obj}, i64 {offset}")
            return f.op(f"load {ty}, ptr {at}")

        def check(condition: str) -> None:
            ok = f.block("ok")
            f.do(f"br i1 {condition}, label %{ok}, label %{bad}")
            f.enter(ok)

        for var in region.inputs:
            obj = arg()
            kind = field(obj, _OB_TYPE, "ptr")
            dtype = var.aval.dtype
            is_array = f.op(f'icmp eq ptr {kind}, @"{ndarray}"')
            if var.aval.ndim:
                check(is_array)
                flags = field(obj, _ARRAY_FLAGS, "i32")
                expected = self.layouts.get(var)
                need = _C_CONTIGUOUS_ALIGNED if expected is None else _ALIGNED
                both = f.op(f"and i32 {flags}, {need}")
                check(f.op(f"icmp eq i32 {both}, {need}"))
                data = field(obj, _ARRAY_DATA, "ptr")
                if expected is not None:  # the strides it was compiled for, one by one
                    strides = field(obj, _ARRAY_STRIDES, "ptr")
                    size = dtype.itemsize
                    for d, (n, st) in enumerate(zip(var.aval.shape, expected)):
                        if n != 1:
                            at = f.op(f"getelementptr inbounds i64, ptr {strides}, i64 {d}")
                            got = f.op(f"load i64, ptr {at}")
                            check(f.op(f"icmp eq i64 {got}, {st * size}"))
                    low = lowest(var.aval.shape, expected)
                    if low:  # the body takes its lowest element (Codegen.param)
                        data = f.op(f"getelementptr i8, ptr {data}, i64 {low * size}")
                call_args.append(f"ptr {data}")
                continue
            # a 0-d input: a 0-d array (its data) or a scalar object (its value)
            scalar = f.op("icmp eq i1 false, true")
            for cls in _scalar_types(dtype):
                same = f.op(f'icmp eq ptr {kind}, @"{_type_symbol(cls)}"')
                scalar = f.op(f"or i1 {scalar}, {same}")
            either = f.op(f"or i1 {scalar}, {is_array}")
            check(either)
            data = field(obj, _ARRAY_DATA, "ptr")
            inline = f.op(f"getelementptr inbounds i8, ptr {obj}, i64 {_SCALAR_VALUE}")
            where = f.op(f"select i1 {is_array}, ptr {data}, ptr {inline}")
            value = f.op(f"load {mem_type(dtype)}, ptr {where}")
            if dtype.kind == "b":
                value = f.op(f"icmp ne i8 {value}, 0")
            call_args.append(f"{reg_type(dtype)} {value}")
        for _ in self.consts:
            call_args.append(f"ptr {field(arg(), _ARRAY_DATA, 'ptr')}")
        size = self.workspace
        kept = STACK_BYTES < size <= KEPT_BYTES
        if kept:  # the kernel's buffer, the last "constant"
            f.do(f"; workspace: {size} bytes, the kernel's own buffer")
            ws = field(arg(), _ARRAY_DATA, "ptr")
        for _ in region.outputs:
            call_args.append(f"ptr {field(arg(), _ARRAY_DATA, 'ptr')}")
        fe = llvm_engine.fe_bits()
        every = fe[0] | fe[1] | fe[2] | fe[3]
        if size <= STACK_BYTES:
            ws = f.alloca("i8", size, 64)
        elif not kept:
            ws = f.op(f"call ptr @adx_malloc(i64 {size})")
            missing = f.op(f"icmp eq ptr {ws}, null")
            ok = f.block("ok")
            f.do(f"br i1 {missing}, label %nomem, label %{ok}")
            f.enter(ok)
        f.do(f"call i32 @adx_feclearexcept(i32 {every})")
        rc = f.op(f"call i32 @body({', '.join(call_args)}, ptr {ws})")
        raised = f.op(f"call i32 @adx_fetestexcept(i32 {every})")
        if size > KEPT_BYTES:
            f.do(f"call void @adx_free(ptr {ws})")
        failed = f.op(f"icmp slt i32 {rc}, 0")
        done = f.block("done")
        f.do(f"br i1 {failed}, label %raised, label %{done}")
        f.enter(done)
        shifted = f.op(f"shl i32 {rc}, 8")
        code = f.op(f"or i32 {shifted}, {raised}")
        wide = f.op(f"sext i32 {code} to i64")
        f.do(f"ret ptr {f.op(f'call ptr @adx_PyLong_FromLong(i64 {wide})')}")
        f.enter("raised")
        f.do("ret ptr null")
        f.enter(bad)
        f.do(f"ret ptr {f.op(f'call ptr @adx_PyLong_FromLong(i64 {CONVERT << 8})')}")
        f.enter("nomem")
        f.do(f"ret ptr {f.op(f'call ptr @adx_PyLong_FromLong(i64 {NO_MEMORY << 8})')}")
        return f.text()


_COMMON = [
    "declare i32 @adx_feclearexcept(i32)",
    "declare i32 @adx_fetestexcept(i32)",
    "declare i32 @adx_feraiseexcept(i32)",
    "declare ptr @adx_malloc(i64)",
    "declare void @adx_free(ptr)",
    "declare ptr @adx_PyLong_FromLong(i64)",
]


def module_text(built: Sequence[_Built]) -> str:
    """The module of the regions ``built``: declarations, then each body and entry."""
    decls: set[str] = set()
    intrinsics: set[str] = set()
    helpers: set = set()
    functions = []
    for b in built:
        entry = b.entry()
        decls |= b.cg.decls
        intrinsics |= b.cg.f.intrinsics
        helpers |= b.cg.helpers
        functions += [b.cg.f.text(), entry]
    functions += [llvm_codegen.helper(*h) for h in sorted(helpers)]
    types = sorted({line for line in "\n".join(functions).split('"')
                    if line.startswith("adx.type.")})  # fmt: skip
    globals_ = [f'@"{t}" = external global i8' for t in types]
    text = "\n".join([*_COMMON, *sorted(decls), *sorted(intrinsics), *globals_, *functions])
    return llvm_ir.numbered_loops(text + "\n")


def _expected_strides(a: np.ndarray, var: Any, layouts: dict) -> tuple:
    """The byte strides an entry takes for ``a`` (C order where ``layouts`` has none)."""
    strides = layouts.get(var)
    if strides is None:
        return np.empty(a.shape, a.dtype).strides if a.ndim else ()
    return tuple(s * a.dtype.itemsize if n != 1 else st for s, n, st in
                 zip(strides, a.shape, a.strides))  # fmt: skip


# --- the backend ------------------------------------------------------------------------------


class LLVMBackend(Backend):
    """LLVM's backend (module docstring)."""

    name = "llvm"

    def available(self) -> bool:
        return self._reason() is None

    def why_not(self) -> str:
        return self._reason() or "it is available"

    def _reason(self) -> str | None:
        reason = llvm_engine.why_not()
        if reason is None and not layout_known():
            reason = "this Python's or NumPy's object layout is not the one kernels read"
        return reason

    def lower(self, graph: Graph) -> tuple[LoweredRegion, ...]:
        """The regions of ``graph`` written as modules, none longer than ``MAX_LINES``:
        a region of more than ``MAX_EQUATIONS`` equations, or whose module is longer, is
        cut into pieces of equal numbers of equations, and those regrouped, until each
        fits (or is one equation).  Each region expects its inputs laid out as NumPy's
        calls and the other kernels lay them out: a kernel returns a result in NumPy's
        order of its axes where that has no gaps (``Region.orders``), else C-ordered."""
        layouts, cuts = numpy_layouts(graph), frozenset[int]()
        built: dict[tuple, _Built | None] = {}  # per region (equations, layouts): its module
        index = {id(eqn): i for i, eqn in enumerate(graph.eqns)}
        lowers: dict[int, bool] = {}  # per equation (id): lowerable, asked once

        def lowers_once(eqn: Eqn) -> bool:
            if (found := lowers.get(id(eqn))) is None:
                found = lowers[id(eqn)] = lowerable(eqn)
            return found

        while True:
            found = regions(graph, lowers_once, worth_it, layouts, cuts)
            fresh = {v for region in found for v in region.outputs}
            final = numpy_layouts(graph, fresh)
            more: set[int] = set()
            modules = []
            for region in found:
                eqns = region.eqns
                if len(eqns) > MAX_EQUATIONS:  # (not written: its module would be too long)
                    more.update(_cuts(eqns, len(eqns) / MAX_EQUATIONS, index))
                    continue
                region.layouts = {v: final[v] for v in region.inputs if v in final}
                region.orders = {v: order for v in region.outputs if v in final
                                 if (order := dense_order(v.aval.shape, final[v]))}  # fmt: skip
                key = (*map(id, eqns), *((id(v), s) for v, s in region.layouts.items()),
                       *((id(v), tuple(o)) for v, o in region.orders.items()))  # fmt: skip
                if key not in built:
                    try:
                        built[key] = _Built(region)
                    except NotLowered:  # (a lowering that writes on a scratch Codegen only)
                        built[key] = None
                if (module := built[key]) is None:
                    continue
                modules.append(LoweredRegion(region, module.text, module))
                if module.lines > MAX_LINES and len(eqns) > 1:  # (a quarter spare: one cut)
                    more.update(_cuts(eqns, module.lines / (0.75 * MAX_LINES), index))
            if not more:
                return tuple(modules)
            cuts |= more

    def compile(
        self,
        lowered: LoweredRegion,
        contiguous: frozenset,  # noqa: ARG002  (the region knows NumPy's layouts)
        sync: bool,
    ) -> KernelPrimitive:
        built: _Built = lowered.detail
        entry, consts, native, buffer = _loaded(built)
        region = lowered.region
        layouts = region.layouts

        def strides(a: np.ndarray, var: Any) -> tuple:
            return _expected_strides(a, var, layouts)

        def variant(other: dict) -> tuple:  # the region for calls of other layouts
            orders = _orders(region, other)  # (its results: as NumPy lays them out then)
            entry, consts, native, _ = _loaded(_Built(region, other, orders), buffer)
            natives.append(native)
            return entry, consts, None if orders == region.orders else orders

        natives = [native]  # the variants' modules, alive while the kernel is
        variants = Variants(region.inputs, variant, sync)
        run = caller(entry, region, consts, llvm_engine.fe_bits(), strides, variants)
        kernel = KernelPrimitive(run, region, built.text)
        kernel.native = native
        return kernel


def _out_strides(var: Any, orders: dict) -> tuple | None:
    """Where a kernel writes ``var``: in NumPy's order of its axes (None: C's)."""
    order = orders.get(var)
    return strides_in_order(tuple(var.aval.shape), order) if order else None


def _orders(region: Region, layouts: dict) -> dict:
    """Per output of ``region``, the order of its axes NumPy's calls give it for inputs
    of ``layouts``, where that is not C's and has no gaps (``Region.orders``)."""
    graph = Graph(region.inputs, region.outputs, region.eqns, region.constvars, region.consts)
    found = numpy_layouts(graph, given=layouts)
    return {v: order for v in region.outputs if v in found
            if (order := dense_order(v.aval.shape, found[v]))}  # fmt: skip


def _cuts(eqns: list[Eqn], pieces: float, index: dict[int, int]) -> list[int]:
    """Where ``eqns`` are cut into ``pieces`` (rounded up) of equal numbers of
    equations: the indices in the graph of the equations that start a piece."""
    n = min(math.ceil(pieces), len(eqns))
    return [index[id(eqns[round(k * len(eqns) / n)])] for k in range(1, n)]


def _loaded(built: _Built, shared: np.ndarray | None = None) -> tuple:
    """``built`` compiled (or loaded from the cache): its entry, the constants it is
    called with (its workspace last where it keeps one), the compiled module and that
    workspace (or None).  ``shared``: the first kernel's workspace, for a variant, which
    uses it where it is large enough (a kernel's variants never run at once: each runs
    holding the GIL)."""
    native = llvm_engine.compile_ir(built.text, ["entry"])
    consts = list(built.consts)
    workspace = None
    if STACK_BYTES < built.workspace <= KEPT_BYTES:  # the kernel's own, kept
        if shared is not None and shared.nbytes >= built.workspace:
            workspace = shared
        else:
            buffer = np.empty(built.workspace + 64, np.uint8)
            start = -buffer.ctypes.data % 64  # aligned as the stack's workspace is
            workspace = buffer[start : start + built.workspace]
        consts.append(workspace)
    return native.functions[0], consts, native, workspace


BACKEND = LLVMBackend()
