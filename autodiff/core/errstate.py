"""``np.errstate`` inside a staged function: recorded on its equations, as it ran eagerly.

A function may set how NumPy reports floating-point errors around part of its work
(``with np.errstate(divide="ignore"): y = np.log(x)``).  Eagerly that setting wins over
its caller's for those operations, and keeps the caller's for the categories it does not
set; a staged graph must do the same on every call, whatever the caller's setting then.

Staging runs the function inside a *watch* (``watching``): every category set to
``"call"`` a sentinel, so that wherever an equation is recorded, the categories that are
not the sentinel's are the function's own (``own``: None where it set none, the common
case, found with one identity check).  An equation keeps them (``Eqn.errstate``, sorted
pairs of ``np.errstate``'s keywords) and runs inside them (``applied``): in the first
call's interpretation, in the replay, under transforms of the graph (they re-stage the
equation inside them, so derived equations keep them) and in compiled kernels (a region
holds equations of one setting, and reports with it).  Arithmetic the function does
while it is staged (on constants) reports as the caller's setting says: the sentinel
passes each error on to it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["Watch", "applied", "combined", "merged", "own", "watching"]

try:  # NumPy 2 keeps the setting in a context variable: its identity says if it changed
    from numpy._core._ufunc_config import (  # type: ignore[attr-defined]
        _extobj_contextvar as _STATE,
    )
except ImportError:  # pragma: no cover
    _STATE = None

_CATEGORY = {"divide by zero": "divide", "overflow": "over", "underflow": "under",
             "invalid value": "invalid"}  # fmt: skip


class Watch:
    """The sentinel of one staging: called for errors of arithmetic done while staging,
    which it reports as the setting outside the staging says."""

    __slots__ = ("call", "modes", "state")

    def __init__(self) -> None:
        self.modes, self.call = np.geterr(), np.geterrcall()
        # the id of NumPy's setting object while watched (not the object: it holds the
        # watch as its handler, and a reference back would be a cycle NumPy's capsule
        # keeps from the garbage collector)
        self.state: int | None = None

    def __call__(self, err: str, flag: int) -> None:
        mode = self.modes.get(_CATEGORY.get(err, "invalid"), "warn")
        message = f"{err} encountered while staging"
        if mode == "warn":
            warnings.warn(message, RuntimeWarning, stacklevel=3)
        elif mode == "raise":
            raise FloatingPointError(message)
        elif mode == "call" and self.call is not None:
            if callable(self.call):
                self.call(err, flag)
            else:
                self.call.write(message)  # type: ignore[union-attr]
        elif mode == "print":
            print(message)
        elif mode == "log" and self.call is not None:
            self.call.write(message)  # type: ignore[union-attr]


@contextlib.contextmanager
def watching() -> Iterator[Watch]:
    """Inside, ``own(watch)`` says which floating-point settings the code sets itself."""
    watch = Watch()
    with np.errstate(all="call", call=watch):
        watch.state = id(_STATE.get()) if _STATE is not None else None
        yield watch


def own(watch: Watch) -> tuple | None:
    """The settings in effect now that are not the watch's (the staged function's own),
    as sorted ``(keyword, value)`` pairs; None where there are none."""
    if _STATE is not None and id(_STATE.get()) == watch.state:
        return None
    modes: dict[str, Any] = dict(np.geterr())
    call: Any = np.geterrcall()
    while isinstance(call, Watch) and call is not watch:  # an inner staging's sentinel:
        inner = call  # what it stands in for is the setting it replaced
        replaced: dict[str, Any] = dict(inner.modes)
        modes = {k: replaced[k] if v == "call" else v for k, v in modes.items()}
        call = inner.call
    found = {k: v for k, v in modes.items() if v != "call"}
    if call is not watch:  # a handler of the function's own: its "call" categories too
        found.update((k, v) for k, v in modes.items() if v == "call")
        found["call"] = call
    return tuple(sorted(found.items())) or None


def applied(state: tuple | None) -> contextlib.AbstractContextManager:
    """The context an equation of ``state`` runs in (nothing to do for None)."""
    if not state:
        return contextlib.nullcontext()
    return np.errstate(**dict(state))


def combined(outer: tuple | None, inner: tuple | None) -> tuple | None:
    """``inner``'s settings over ``outer``'s (an equation inlined where a setting holds)."""
    if not outer or not inner:
        return inner or outer
    return tuple(sorted({**dict(outer), **dict(inner)}.items()))


def merged(state: tuple | None) -> dict:
    """``np.geterr()`` with ``state``'s categories over the caller's."""
    modes: dict[str, Any] = dict(np.geterr())
    if state:
        modes.update((k, v) for k, v in state if k != "call")
    return modes
