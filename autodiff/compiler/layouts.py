"""A kernel's variants for the layouts its calls bring: strided arrays run compiled too.

A kernel is written for the layout NumPy's own calls would give each input: C order for
a jitted function's arguments and for the results of other kernels, the strides of a
view (a transpose, a slice) NumPy makes between kernels (``llvm_values.numpy_layouts``).
Its entry checks them, since its loops are written for those strides (static, so a
view costs nothing) and NumPy's order of a sum follows the layout it runs on: a
transposed or sliced argument (``f(x.T)``, ``f(x[:, ::2])``), a broadcast one (stride
0), or a value NumPy calls left strided (the residuals ``grad(jit(f))``'s forward pass
hands its backward pass on a call its forward graph ran as NumPy calls) does not fit.

``Variants`` compiles the kernel again for such a call's layouts (its strides in
elements, static as the first's; negative ones too), NumPy's order on those strides:
a layout's first call runs the region's NumPy calls (a layout seen once, as the
first-call residuals, is not worth a compilation), its second compiles the variant (at
once, or in the background where the kernel itself was compiled there) and every later
call runs it.  At most ``MAX_VARIANTS`` per kernel; another layout, an unaligned array
or one whose strides are not whole elements, stays NumPy calls.  Copying a strided
argument into C order at the entry instead would give another sum order than NumPy's
on the strided array.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.compiler import background
from autodiff.compiler.llvm_values import c_strides

__all__ = ["MAX_VARIANTS", "Variants", "layout_of"]

MAX_VARIANTS = 4  # layouts a kernel is compiled for besides its first
_SEEN_BOUND = 64  # layouts counted (seen once) before the count starts again


def layout_of(args: Sequence[Any], inputs: Sequence[Any]) -> tuple | None:
    """Per input of a region: the strides of its array argument in elements (those of
    C order on axes of length 1, which index nothing), or None (a 0-d one); None where
    one is not an aligned ``ndarray`` of whole-element strides."""
    key: list = []
    for a, var in zip(args, inputs):
        if not var.aval.ndim:
            key.append(None)
            continue
        if type(a) is not np.ndarray or not a.flags.aligned:
            return None
        size = a.itemsize
        strides, step = [], 1
        for n, s in zip(reversed(a.shape), reversed(a.strides)):
            if n == 1:
                s = step * size
            elif s % size:
                return None
            strides.append(s // size)
            step *= max(n, 1)
        key.append(tuple(reversed(strides)))
    return tuple(key)


class Variants:
    """A kernel's variants (module docstring).  ``build(layouts)``: the kernel compiled
    for ``layouts`` (per input variable whose strides are not C's, its strides in
    elements), as ``(entry, constants, orders)`` (``orders``: how its results are laid
    out where not as the kernel's own, else None); it raises where it cannot be.  ``sync``:
    whether a variant compiles in the calling thread (``jit(f, compile=True)``) or in the
    background (``"auto"``; the calls run NumPy's meanwhile)."""

    def __init__(self, inputs: Sequence[Any], build: Callable[[dict], tuple],
                 sync: bool) -> None:  # fmt: skip
        self.inputs, self.build, self.sync = list(inputs), build, sync
        self.ready: dict[tuple, tuple] = {}  # layout -> (entry, constants, orders)
        self.seen: dict[tuple, int] = {}
        self.refused: set[tuple] = set()
        self.lock = threading.Lock()

    def find(self, args: Sequence[Any]) -> tuple | None:
        """``(entry, constants, orders)`` for the layouts of ``args``, or None: the call runs
        as NumPy calls (a first sighting, a variant compiling, one too many)."""
        key = layout_of(args, self.inputs)
        if key is None:
            return None
        found = self.ready.get(key)
        if found is not None:
            return found
        with self.lock:
            seen = self.seen.get(key, 0) + 1
            if len(self.seen) >= _SEEN_BOUND:
                self.seen.clear()
            self.seen[key] = seen
            if seen != 2 or key in self.refused or len(self.ready) >= MAX_VARIANTS:
                return None
        if not self.sync:
            background.compile_later(lambda: self._compile(key))
            return None
        self._compile(key)
        return self.ready.get(key)

    def _compile(self, key: tuple) -> None:
        layouts = {}
        for var, strides in zip(self.inputs, key):
            if strides is not None and strides != c_strides(var.aval.shape):
                layouts[var] = strides
        try:
            made = self.build(layouts)
        except Exception:  # (NotLowered on a layout a view cannot take...): NumPy calls
            with self.lock:
                self.refused.add(key)
            return
        with self.lock:
            if len(self.ready) < MAX_VARIANTS:
                self.ready[key] = made

    def described(self) -> list[tuple]:
        """The layouts compiled besides the first: per input, strides in elements."""
        return list(self.ready)
