"""The interpreter stack: which transforms are running, and at which levels.

Each transform call creates one :class:`Interpreter`, which takes a fresh *level* from
a global counter (unique per call, increasing with time, so an inner transform has the
higher level) and lives on a stack held in a ``ContextVar`` (one per thread and asyncio
task) for the time of the call (``new_interpreter``).  ``Primitive.bind``
(``core/primitive.py``) picks the live interpreter with the highest level among its
arguments' tracers; the rest of the library asks this module:

- which transforms run here (``current_interpreters``);
- whether a tracer's transform is still running, here (``check_live``), and whether a
  value is a tracer of a given transform (``owned``: how a transform unwraps its
  outputs);
- an interpreter live again after its call, for work its transform deferred
  (``live_again``: a checkpointed scan's step recomputed in the backward pass);
- closed-over tracers standing for other values while a solver or a custom rule runs a
  user's function (``standing_in``; the table it fills is ``core/tracer.py``'s).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from autodiff.core.observe import Observer, current_observer
from autodiff.core.tracer import Tracer, leaked_error, stand_ins, stood_in
from autodiff.errors import LeakedTracerError

__all__ = [
    "Interpreter",
    "check_live",
    "current_interpreters",
    "live_again",
    "new_interpreter",
    "owned",
    "standing_in",
]

# Level tokens: unique per transform *call*, increasing with time.  Within one
# thread's stack a later (inner) interpreter therefore has a larger level, and
# two sibling calls at the same depth never share one.
_level_counter = itertools.count(1)

# The stack of live interpreters, innermost last.  A tuple (immutable) in a
# ContextVar, so threads and asyncio tasks each see their own stack.
_stack: contextvars.ContextVar[tuple[Interpreter, ...]] = contextvars.ContextVar(
    "autodiff_interpreters", default=()
)


class Interpreter:
    """One running transform: a level on the stack and the tracers it owns.

    Subclasses set ``transform`` (the user-facing name, for messages) and
    register ``lift`` and ``process`` methods for themselves.  This is the
    extension point for new transforms (``docs/extending.md``).
    """

    __slots__ = ("__weakref__", "active", "level", "observer")
    transform = "transform"
    # False: ``process`` receives other arguments unlifted and treats them as
    # constants itself (reverse mode does, to save a dispatch per constant).
    lifts = True
    stages = False  # records programs (jit's staging): effects bound under it are recorded

    def __init__(self) -> None:
        self.level = next(_level_counter)
        self.active = False
        self.observer: Observer | None = None

    def describe(self) -> str:
        return f"{self.transform} (level {self.level})"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} level={self.level} active={self.active}>"


def current_interpreters() -> tuple[Interpreter, ...]:
    """The live interpreters of this thread/task, outermost first.

    >>> import numpy as np
    >>> from autodiff import grad, vmap
    >>> seen = []
    >>> _ = vmap(grad(lambda x: seen.append(current_interpreters()) or x))(np.zeros(2))
    >>> current_interpreters(), [i.transform for i in seen[0]]
    ((), ['vmap', 'grad'])
    """
    return _stack.get()


class new_interpreter:  # (a context manager: named as the functions that are one)
    """Push ``interp`` for the duration of one transform call.

    The interpreter is marked inactive on exit, also on exceptions: any of its
    tracers that escaped are then detected as leaked on their next use.  (A class, not
    a generator: every transform call enters one, and ``contextlib``'s machinery cost
    more than the rest of it.)

    >>> class Plain(Interpreter):
    ...     transform = "plain"
    >>> with new_interpreter(Plain()) as interp:
    ...     print(current_interpreters()[-1] is interp, interp.active)
    True True
    >>> interp.active, current_interpreters()
    (False, ())
    """

    __slots__ = ("_interp", "_previous")

    def __init__(self, interp: Interpreter) -> None:
        self._interp = interp

    def __enter__(self) -> Interpreter:
        interp = self._interp
        self._previous = previous = _stack.get()
        _stack.set((*previous, interp))
        interp.active = True
        interp.observer = current_observer()  # explain's hook (core/observe.py)
        return interp

    def __exit__(self, *exc: object) -> None:
        self._interp.active = False
        _stack.set(self._previous)


# How many ``live_again`` blocks hold each interpreter now (a tape's backward passes may
# run in several threads at once), and whether it was active before the first began.
_revived: dict[Interpreter, list] = {}
_revived_lock = threading.Lock()


@contextlib.contextmanager
def live_again(interp: Interpreter) -> Iterator[Interpreter]:
    """``interp`` live again for the block, as while its transform ran: active, and on
    this thread's stack (innermost) unless it is there already.  For work its transform
    defers past its end: reverse mode recomputing a step of ``scan(..., checkpoint=True)``
    in the backward pass records it with the interpreter of the forward pass, reaching
    the nodes recorded then.  It stays active until the last block holding it ends, in
    whatever thread; then it is as it was (inactive, once its transform has ended).

    >>> class Plain(Interpreter):
    ...     transform = "plain"
    >>> with new_interpreter(Plain()) as interp:
    ...     pass
    >>> with live_again(interp):
    ...     print(current_interpreters()[-1] is interp, interp.active)
    True True
    >>> interp.active, current_interpreters()
    (False, ())
    """
    with _revived_lock:
        count = _revived.setdefault(interp, [0, interp.active])
        count[0] += 1
        interp.active = True
    stack = _stack.get()
    token = None if interp in stack else _stack.set((*stack, interp))
    try:
        yield interp
    finally:
        if token is not None:
            _stack.reset(token)
        with _revived_lock:
            count[0] -= 1
            if not count[0]:
                interp.active = count[1]
                del _revived[interp]


def check_live(x: Any) -> Any:
    """``x``, unless it is a tracer whose transform has ended, or one of a transform
    running in another thread or asyncio task that is newer than the innermost one
    here (where a transform unwraps its outputs, it would hide that transform's own
    tracers from it, and their derivatives would silently be lost).

    >>> import numpy as np
    >>> from autodiff import vmap
    >>> leaked = []
    >>> _ = vmap(lambda x: leaked.append(x) or x)(np.zeros(2))
    >>> check_live(1.0)
    1.0
    >>> check_live(leaked[0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    autodiff.errors.LeakedTracerError: BatchedTensor of vmap (level ...) used after ...
    """
    if isinstance(x, Tracer):
        if not x._interp.active:
            value = stood_in(x)
            if value is x:
                raise leaked_error(x)
            return check_live(value)
        stack = _stack.get()
        if stack and x._interp.level > stack[-1].level:  # not ours: ours are at most this
            raise LeakedTracerError(
                f"{type(x).__name__} of {x._interp.describe()} reached "
                f"{stack[-1].describe()}, but that transform runs in another thread or "
                f"asyncio task. Traced values must not be passed between threads or "
                f"tasks while their transform runs; pass plain arrays instead."
            )
    return x


def owned(interp: Interpreter, x: Any) -> Any:
    """``x`` if it is a tracer of ``interp``, else None (checked with ``check_live``):
    what a transform asks of each output leaf before unwrapping it.

    >>> import numpy as np
    >>> from autodiff import vmap
    >>> def f(x):
    ...     return owned(current_interpreters()[-1], x) is x, owned(current_interpreters()[-1], 1.0)
    >>> vmap(f, out_dims=None)(np.zeros(2))
    (True, None)
    """
    x = check_live(x)
    return x if isinstance(x, Tracer) and x._interp is interp else None


@contextlib.contextmanager
def standing_in(tracers: Sequence[Any], values: Sequence[Any],
                isolated: bool = False) -> Iterator[None]:  # fmt: skip
    """For the time of the block, each traced value of ``tracers`` stands for the value
    at the same position of ``values``: a user function that closes over ``tracers``
    computes on ``values`` (closure conversion without rewriting the function).

    Solvers and custom rules run the functions they are given on their own operands
    (unwrapped by the transforms above, sliced per example, concrete at the bottom),
    and those functions' closed-over traced values are among the operands (found by
    ``transforms/closures.py``).  The transforms that own the replaced tracers are
    marked inactive for the block, so each use of one leaves ``bind``'s fast path for
    its slow path, which looks the stand-in up (``core.tracer.stand_ins``): nothing is
    checked on the fast path.  A tracer of those transforms that is *not* replaced
    (one the search did not find) then raises ``LeakedTracerError`` rather than mixing
    levels.  ``isolated``: the block computes on plain values only (a solver's
    implementation, at the bottom of the stack), so every transform of the stack is
    marked inactive for it, and any traced value the block meets is either replaced or
    refused.

    >>> import numpy as np
    >>> from autodiff import grad
    >>> def f(w):
    ...     scale = lambda v: w * v  # closes over the traced w
    ...     with standing_in([w], [10.0]):
    ...         print(scale(np.ones(2)))
    ...     return w
    >>> _ = grad(f)(3.0)
    [10. 10.]
    """
    pairs = [(t, v) for t, v in zip(tracers, values, strict=True)
             if isinstance(t, Tracer) and v is not t]  # fmt: skip
    if not pairs and not isolated:
        yield
        return
    table = dict(stand_ins.get())
    table.update((id(t), (t, v)) for t, v in pairs)
    table[None] = (None, None)  # (marks the block for leaked_error's message)
    owners = [t._interp for t, _ in pairs] + list(_stack.get() if isolated else ())
    interps = list({id(i): i for i in owners}.values())
    before = [i.active for i in interps]
    token = stand_ins.set(table)
    for interp in interps:
        interp.active = False
    try:
        yield
    finally:
        for interp, active in zip(interps, before):
            interp.active = active
        stand_ins.reset(token)
