"""A sum fused into the loop computing its terms: NumPy's pairwise order, no temporary.

NumPy sums the n float terms of a contiguous run (``np.add.reduce``'s inner loop,
``pairwise_sum`` in NumPy's ``loops_utils.h.src``) by halving: more than 128 terms are
split after ``n // 2`` rounded down to a multiple of 8, each half summed alike and the two
sums added; up to 128 are summed with eight accumulators.  Every node of that tree is the
whole sum of its own terms, so a kernel summing an elementwise chain need not write the
chain's n values anywhere: it walks the tree down to nodes of at most ``LEAF`` terms
(``leaves``), computes a node's terms into a buffer that stays in cache (the group's
loops on the node's range, ``Group.emit_range``), sums it with NumPy's own reduce loop
(from ``-0.0``, which adds nothing: ``-0.0 + s`` is ``s`` for every ``s``) and adds the
nodes' sums as the tree adds them: on a stack, the last two added once for every
subtree a node completes.  The result is NumPy's to the bit; memory is read once.
"""

from __future__ import annotations

import hashlib

import numpy as np

from autodiff.compiler.llvm_fusion import CHUNK, Group
from autodiff.compiler.llvm_ir import constant, mem_type
from autodiff.compiler.llvm_values import Emitting
from autodiff.compiler.npy_loops import Loop

__all__ = ["LEAF", "emit_sum", "leaves"]

LEAF = CHUNK  # terms per node summed by NumPy's loop (64 KiB of float64: in cache)
_BLOCK = 128  # NumPy's PW_BLOCKSIZE: a node of at most this many terms is not split


def leaves(n: int, leaf: int = LEAF) -> list[tuple[int, int, int]]:
    """NumPy's pairwise tree of ``n`` terms cut at nodes of at most ``leaf`` terms: per
    node, in order, (first term, terms, additions after it: how many subtrees it ends)."""
    assert leaf >= _BLOCK
    out: list[tuple[int, int, int]] = []
    todo = [(0, n, 0)]
    while todo:  # depth first, left before right
        start, m, ends = todo.pop()
        if m <= leaf:
            out.append((start, m, ends))
            continue
        half = m // 2
        half -= half % 8
        todo.append((start + half, m - half, ends + 1))
        todo.append((start, half, 0))
    return out


def _table(cg: Emitting, name: str, values: list[int]) -> str:
    """A constant i64 array in the module, named by its contents (shared by kernels)."""
    text = ", ".join(f"i64 {v}" for v in values)
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]  # the same in every process
    symbol = f"@adx.pw.{name}.{len(values)}.{digest}"
    cg.decls.add(f"{symbol} = private unnamed_addr constant [{len(values)} x i64] [{text}]")
    return symbol


def emit_sum(group: Group, refs: list, loop: Loop, dtype: np.dtype) -> list[str]:
    """The registers holding the pairwise sums (NumPy's) of the values ``refs`` (of
    ``dtype``) of ``group``, a group on one dimension (``Group.line``) of more than
    ``LEAF`` elements; ``loop`` is NumPy's add reduce loop for ``dtype``.  Writes the
    group's loops."""
    cg, f = group.cg, group.cg.f
    n = group.line()
    assert n > LEAF
    nodes = leaves(n)
    starts = _table(cg, "start", [s for s, _, _ in nodes])
    counts = _table(cg, "count", [m for _, m, _ in nodes])
    adds = _table(cg, "adds", [a for _, _, a in nodes])
    ty, size = mem_type(dtype), dtype.itemsize
    depth = n.bit_length() + 1  # the tree's depth bounds each stack
    buffers = [cg.alloc((LEAF,), dtype) for _ in refs]
    stacks = [f.alloca(ty, depth, 64) for _ in refs]
    top = f.alloca("i64")
    f.do(f"store i64 0, ptr {top}")
    partial = f.alloca(ty)

    def at(stack: str, index: str) -> str:
        return f.op(f"getelementptr inbounds {ty}, ptr {stack}, i64 {index}")

    with f.loop(len(nodes)) as k:

        def entry(table: str) -> str:
            where = f.op(
                f"getelementptr inbounds [{len(nodes)} x i64], ptr {table}, i64 0, i64 {k}"
            )
            return f.op(f"load i64, ptr {where}")

        start, count = entry(starts), entry(counts)
        group.emit_range(start, count, LEAF, list(zip(refs, buffers)))
        sp = f.op(f"load i64, ptr {top}")
        for buffer, stack in zip(buffers, stacks):  # push the node's sum
            f.do(f"store {ty} {constant(dtype, -0.0)}, ptr {partial}")
            cg.call_loop(loop, [partial, cg.pointer(buffer, "0"), partial], [count], [0, size, 0])
            f.do(f"store {ty} {f.op(f'load {ty}, ptr {partial}')}, ptr {at(stack, sp)}")
        f.do(f"store i64 {f.op(f'add i64 {sp}, 1')}, ptr {top}")
        with f.loop(entry(adds)):  # right = pop, left = pop, push left + right
            sp = f.op(f"load i64, ptr {top}")
            last = f.op(f"sub i64 {sp}, 1")
            before = f.op(f"sub i64 {sp}, 2")
            for stack in stacks:
                right = f.op(f"load {ty}, ptr {at(stack, last)}")
                left_at = at(stack, before)
                left = f.op(f"load {ty}, ptr {left_at}")
                f.do(f"store {ty} {f.op(f'fadd {ty} {left}, {right}')}, ptr {left_at}")
            f.do(f"store i64 {last}, ptr {top}")
    return [f.op(f"load {ty}, ptr {stack}") for stack in stacks]
