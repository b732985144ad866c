"""explain's hook: an observer of the interpreters started while it is installed.

``observing(observer)`` installs one for a block (a context variable, so threads and
asyncio tasks do not share it).  ``new_interpreter`` copies the observer onto each
interpreter it pushes, so ``bind`` tests one attribute per call: when it is set,
``bind`` hands the ``process`` call to ``observer.process`` instead of making it.
Where a transform runs a rule inside its own ``process`` (forward mode's JVP rule) it
says so with ``observer.rule``, and the backward pass says what each of its calls
belongs to through the mark ``observer.backward()`` gives.  ``explain`` is the one
observer (``interpreters/explain.py``); ``debug_nans`` has a hook of its own (``debug/nans.py``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["BackwardMark", "Observer", "current_observer", "observing"]

_observer: contextvars.ContextVar[Observer | None] = contextvars.ContextVar(
    "autodiff_observer", default=None
)


class Observer:
    """What an observer implements; these defaults only run what they are given."""

    def process(self, method: Callable, interp: Any, prim: Any, args: tuple, params: dict):
        """One ``process`` call, made by ``bind``: run it with ``method(...)``."""
        return method(interp, prim, args, params)

    def rule(self, interp: Any, what: str) -> contextlib.AbstractContextManager:  # noqa: ARG002
        """Inside the ``process`` call of ``interp`` now running, the calls made in
        this block are ``what`` (``"JVP rule"``) of its primitive, not the call itself."""
        return contextlib.nullcontext()

    def backward(self) -> contextlib.AbstractContextManager[BackwardMark]:
        """A backward pass runs in this block; it sets the mark's ``what`` to what its
        calls belong to (``"VJP of sin"``, ``"cotangent sum after sin"``)."""
        return contextlib.nullcontext(BackwardMark())


class BackwardMark:
    """Where a backward pass is: ``what`` its calls belong to now (None: bookkeeping)."""

    __slots__ = ("what",)

    def __init__(self) -> None:
        self.what: str | None = None


@contextlib.contextmanager
def observing(observer: Observer) -> Iterator[None]:
    """Install ``observer`` for the transforms started inside the block."""
    token = _observer.set(observer)
    try:
        yield
    finally:
        _observer.reset(token)


def current_observer() -> Observer | None:
    return _observer.get()
