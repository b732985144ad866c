"""Regions of a graph and their kernels: which equations compile together, the module that
computes them, and the Python caller that runs it with NumPy's semantics.

``regions(graph)`` gathers the equations that lower (each primitive's ``lowering``, tried
once on a scratch ``Codegen``) into regions, each to become one kernel: an equation joins
the open region when every operand it reads existed when the region started or is
computed in it.  A region is worth a kernel when it holds a loop, ``MIN_EQUATIONS``
elementwise equations on arrays or ``MIN_SCALAR_EQUATIONS`` on 0-d values (a kernel's
call costs about what two NumPy calls cost).

``compile_kernels(regions)`` writes one LLVM module with a body function per region
(``llvm_codegen.py``) and an *entry* per region that CPython calls directly
(``METH_FASTCALL``): it checks each argument (an exact ``ndarray``, C-contiguous and
aligned, or for a 0-d input a NumPy scalar or a Python float of its dtype), takes the
data pointers, clears the floating-point status flags, runs the body and returns
``code << 8 | flags``: 0 when all went well.

The **caller** (``KernelPrimitive.impl``) allocates the results (fresh arrays, C order),
calls the entry and, where the result is not 0, does what NumPy would: arguments the
entry did not take (a Python int, a strided view) are converted or the region runs as
NumPy calls; a raised flag that ``np.geterr()`` does not ignore, a singular matrix or a
failed NumPy loop runs the region as NumPy calls, which warn or raise exactly as NumPy
does (and give the same values).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.compiler import llvm_codegen, llvm_engine
from autodiff.compiler.llvm_codegen import Array, Codegen, Scalar, numpy_layouts
from autodiff.compiler.llvm_ir import Function, mem_type, reg_type
from autodiff.compiler.replay import compile_graph
from autodiff.core.graph import Eqn, Graph, Literal, Var
from autodiff.core.lowering import Elementwise, NotLowered
from autodiff.core.primitive import Primitive

__all__ = ["MIN_EQUATIONS", "MIN_SCALAR_EQUATIONS", "KernelPrimitive", "Region",
           "compile_kernels", "lowerable", "regions"]  # fmt: skip

MIN_EQUATIONS = 2  # elementwise equations on arrays a region without a loop needs
MIN_SCALAR_EQUATIONS = 8  # or elementwise equations on 0-d values
STACK_BYTES = 1 << 16  # a workspace up to this size lives on the stack, larger ones are malloc'ed

# The codes of an entry's result (above the status flags' byte)
CONVERT = 1  # an argument the entry does not take: converted, or NumPy calls
SINGULAR = llvm_codegen.SINGULAR  # a singular matrix in a solve: NumPy raises LinAlgError
NO_MEMORY = 3


# --- regions ----------------------------------------------------------------------------------


def lowerable(eqn: Eqn) -> bool:
    """Whether ``eqn`` (and, for control flow, everything in its functions) compiles:
    written once on a scratch ``Codegen``."""
    if eqn.prim.lowering is None:
        return False
    cg = Codegen()
    try:
        args = []
        for i, v in enumerate(eqn.invars):
            args.append(cg.atom({}, v) if type(v) is Literal else cg.param(v.aval, f"x{i}"))
        cg.emit_eqn(eqn, args)
    except NotLowered:
        return False
    return True


class Region:
    """Equations of a graph compiled into one kernel: ``eqns`` in order, the variables
    it reads (``inputs``) and those read after it (``outputs``)."""

    __slots__ = ("consts", "constvars", "eqns", "inputs", "layouts", "loops", "outputs", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.eqns: list[Eqn] = []
        self.inputs: list[Var] = []
        self.outputs: list[Var] = []
        self.constvars: list[Var] = []  # the graph's constants it reads, compiled in
        self.consts: list = []
        self.layouts: dict = {}  # input -> the strides NumPy gives it (elements), where not C's
        self.loops = 0

    def worth_it(self) -> bool:
        if self.loops:
            return True
        shapes = [e.outvars[0].aval.ndim for e in self.eqns
                  if isinstance(e.prim.lowering, Elementwise)]  # fmt: skip
        arrays = sum(1 for n in shapes if n)
        others = len(self.eqns) - len(shapes)
        return (
            arrays >= MIN_EQUATIONS
            or len(shapes) - arrays >= MIN_SCALAR_EQUATIONS
            or (others and len(self.eqns) >= MIN_EQUATIONS and arrays)
        )


def regions(graph: Graph) -> list[Region]:
    """The regions of ``graph`` worth compiling (module docstring)."""
    made: dict[Var, int] = {}
    found: list[Region] = []
    current: Region | None = None
    members: set = set()
    for i, eqn in enumerate(graph.eqns):
        if lowerable(eqn):
            ready = current is not None and all(
                type(v) is not Var or v in members or made.get(v, -1) < current.start
                for v in eqn.invars
            )
            if not ready:
                current, members = Region(i), set()
                found.append(current)
            assert current is not None
            current.eqns.append(eqn)
            current.loops += bool(getattr(eqn.prim, "runs_functions", False))
            members.update(eqn.outvars)
        for v in eqn.outvars:
            made[v] = i
    kept = [r for r in found if r.worth_it()]
    if not kept:
        return []
    inside = {v: r for r in kept for e in r.eqns for v in e.outvars}
    owners = {id(e): id(r) for r in kept for e in r.eqns}
    readers: dict[Var, set] = {}
    for eqn in graph.eqns:
        for v in eqn.invars:
            if type(v) is Var:
                readers.setdefault(v, set()).add(owners.get(id(eqn)))
    final = {v for v in graph.outvars if type(v) is Var}
    constants = dict(zip(graph.constvars, graph.consts))
    layouts = numpy_layouts(graph)
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
    return kept


# --- the module -------------------------------------------------------------------------------

_OB_TYPE, _ARRAY_DATA, _ARRAY_STRIDES, _ARRAY_FLAGS, _SCALAR_VALUE = 8, 16, 40, 64, 16
_C_CONTIGUOUS_ALIGNED, _ALIGNED = 0x101, 0x100


@functools.cache
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
                ctypes.c_void_p.from_address(id(a) + _ARRAY_STRIDES).value,
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
    """One region written: its body's IR, the values it passes, what its entry reads."""

    def __init__(self, k: int, region: Region) -> None:
        cg = self.cg = Codegen()
        self.region, self.k = region, k
        inputs = [cg.param(v.aval, f"p{i}", region.layouts.get(v))
                  for i, v in enumerate(region.inputs)]  # fmt: skip
        graph = Graph(region.inputs, region.outputs, region.eqns, region.constvars, region.consts)
        values = cg.emit_graph(graph, inputs)
        outs = []
        for i, (var, value) in enumerate(zip(region.outputs, values, strict=True)):
            dtype = var.aval.dtype
            out = Array(dtype, tuple(var.aval.shape), f"%o{i}")
            outs.append(out)
            if isinstance(value, Scalar):
                cg.store(out, "0", value.ref, value.dtype)
            else:
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
        cg.f.header = f"define internal i32 @body{k}({', '.join(params)}) alwaysinline nounwind"
        self.consts = cg.consts

    def entry(self) -> str:
        """The entry CPython calls: arguments checked and unpacked, the body run between
        clearing and reading the status flags."""
        cg, region, k = self.cg, self.region, self.k
        f = Function(f"define ptr @entry{k}(ptr %self, ptr %args, i64 %nargs)")
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
                expected = region.layouts.get(var)
                need = _C_CONTIGUOUS_ALIGNED if expected is None else _ALIGNED
                both = f.op(f"and i32 {flags}, {need}")
                check(f.op(f"icmp eq i32 {both}, {need}"))
                if expected is not None:  # the strides NumPy gives it, one by one
                    strides = field(obj, _ARRAY_STRIDES, "ptr")
                    size = dtype.itemsize
                    for d, (n, st) in enumerate(zip(var.aval.shape, expected)):
                        if n != 1:
                            at = f.op(f"getelementptr inbounds i64, ptr {strides}, i64 {d}")
                            got = f.op(f"load i64, ptr {at}")
                            check(f.op(f"icmp eq i64 {got}, {st * size}"))
                call_args.append(f"ptr {field(obj, _ARRAY_DATA, 'ptr')}")
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
        for _ in region.outputs:
            call_args.append(f"ptr {field(arg(), _ARRAY_DATA, 'ptr')}")
        size = max(cg.workspace, 64)
        fe = llvm_engine.fe_bits()
        every = fe[0] | fe[1] | fe[2] | fe[3]
        if size <= STACK_BYTES:
            ws = f.alloca("i8", size, 64)
        else:
            ws = f.op(f"call ptr @adx_malloc(i64 {size})")
            missing = f.op(f"icmp eq ptr {ws}, null")
            ok = f.block("ok")
            f.do(f"br i1 {missing}, label %nomem, label %{ok}")
            f.enter(ok)
        f.do(f"call i32 @adx_feclearexcept(i32 {every})")
        rc = f.op(f"call i32 @body{k}({', '.join(call_args)}, ptr {ws})")
        raised = f.op(f"call i32 @adx_fetestexcept(i32 {every})")
        if size > STACK_BYTES:
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
    return "\n".join([*_COMMON, *sorted(decls), *sorted(intrinsics), *globals_, *functions]) + "\n"


# --- kernels ----------------------------------------------------------------------------------


class KernelPrimitive(Primitive):
    """A region of a graph compiled into one kernel: its implementation runs it (with
    the checks of the module docstring); its results are new arrays."""

    __slots__ = ("native", "region", "source")
    fresh_results = True  # for replay.py: its results share memory with nothing

    def __init__(self, runner: Callable, region: Region, source: str) -> None:
        super().__init__("kernel", runner, multiple_results=True)
        self.region, self.source = region, source
        self.native: Any = None


def compile_kernels(found: Sequence[Region], name: str = "kernel") -> tuple[list, Any]:
    """The regions ``found`` compiled in one module: their kernel primitives (None for a
    region that did not lower after all), and the compiled module."""
    built: list[_Built] = []
    for k, region in enumerate(found):
        try:
            built.append(_Built(k, region))
        except NotLowered:
            continue
    if not built:
        return [None] * len(found), None
    text = module_text(built)
    import os

    if os.environ.get("ADX_DUMP"):
        with open(os.environ["ADX_DUMP"], "w") as dump:
            dump.write(text)
            for b in built:
                dump.write(f"\n; region {b.k}: " + " ".join(e.prim.name for e in b.region.eqns))
                dump.write("\n; " + "\n; ".join(str(v.aval) for v in b.region.inputs))
    native = llvm_engine.compile_ir(text, [f"entry{b.k}" for b in built], name)
    kernels: list = [None] * len(found)
    for b, function in zip(built, native.functions, strict=True):
        runner = _runner(function, b.region, b.consts)
        kernel = KernelPrimitive(runner, b.region, text)
        kernel.native = native
        kernels[b.k] = kernel
    return kernels, native


def _runner(entry: Any, region: Region, consts: list) -> Callable:
    """The kernel's caller (generated, so that a call costs what it must)."""
    names = [f"a{i}" for i in range(len(region.inputs))]
    outs = [f"o{i}" for i in range(len(region.outputs))]
    fallback = _Fallback(region)
    lines = [f"def run({', '.join(names)}):"]
    for o, var in zip(outs, region.outputs):
        lines.append(f"    {o} = _empty({tuple(var.aval.shape)!r}, _t_{o})")
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
    trouble = _Trouble(entry, region, consts, fallback)
    namespace["_trouble"] = trouble
    exec(compile("\n".join(lines) + "\n", "<autodiff kernel caller>", "exec"), namespace)
    run = namespace["run"]
    run.fallback = fallback
    return run


class _Trouble:
    """What the caller does when an entry's result is not 0 (module docstring)."""

    def __init__(self, entry: Any, region: Region, consts: list, fallback: Callable) -> None:
        self.entry, self.region, self.consts, self.fallback = entry, region, consts, fallback
        bits = llvm_engine.fe_bits()
        self.bits = list(zip(bits, ("invalid", "divide", "over", "under")))

    def matters(self, raised: int) -> bool:
        """Whether NumPy would report one of the ``raised`` flags (``np.geterr()``)."""
        err = np.geterr()
        return any(raised & bit and err[name] != "ignore" for bit, name in self.bits)

    def __call__(self, r: int, args: tuple, outs: tuple) -> tuple:
        code, raised = r >> 8, r & 0xFF
        if code == CONVERT:
            converted = []
            for a, var in zip(args, self.region.inputs):
                if var.aval.ndim == 0 and type(a) is not np.ndarray:
                    try:
                        a = np.asarray(a, dtype=var.aval.dtype)
                    except (TypeError, ValueError, OverflowError):
                        return self.fallback(*args)
                elif (
                    type(a) is not np.ndarray
                    or not a.flags.aligned
                    or (a.strides != _bytes(self.region.layouts.get(var), a))
                ):
                    return self.fallback(*args)  # NumPy's order follows the layout
                converted.append(a)
            r = self.entry(*converted, *self.consts, *outs)
            if r >> 8:
                return self.fallback(*args)
            raised = r & 0xFF
        elif code:
            return self.fallback(*args)
        if raised and self.matters(raised):
            return self.fallback(*args)
        return outs


def _bytes(strides: tuple | None, a: np.ndarray) -> tuple:
    """The byte strides a kernel expects of ``a`` (C order where ``strides`` is None)."""
    if strides is None:
        return np.empty(a.shape, a.dtype).strides if a.ndim else ()
    return tuple(s * a.dtype.itemsize if n != 1 else st for s, n, st in
                 zip(strides, a.shape, a.strides))  # fmt: skip


class _Fallback:
    """The region as NumPy calls (compiled the first time it is needed)."""

    def __init__(self, region: Region) -> None:
        self.region = region
        self.replay: Callable | None = None
        self.calls = 0  # (for tests: how often the kernel was not used)
        self.lock = threading.Lock()

    def __call__(self, *args: Any) -> tuple:
        self.calls += 1
        if self.replay is None:
            r = self.region
            graph = Graph(r.inputs, r.outputs, r.eqns, r.constvars, r.consts)
            self.replay = compile_graph(graph, fresh=True)
        return self.replay(*args)
