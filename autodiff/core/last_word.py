"""Our error is the one the user reads last, even where C code between replaces it.

A traced value converted by Python's or NumPy's C code (``plain_array[i] = x``,
``"%d" % x``, ``a.fill(x)``) raises our error from ``__float__`` or ``__int__``, and
that C code then raises its own in its place: NumPy's "setting an array element with
a sequence" for anything that supports indexing, Python's "%d format: a real number is
required".  No protocol lets a value keep its error there, so :func:`surface` watches
the frame that runs the conversion, for that one statement: if another exception
reaches it, ours replaces it there (Python's tracing lets an ``"exception"`` event's
handler raise in its place); if ours reaches it, or the statement goes on, it steps
aside.  The tracing is on only from our ``raise`` until the frame's next event, and only
in this thread.  Where a tracer (a debugger, coverage) is installed, replacing the
exception would switch it off (Python drops a trace function that raises), so then the
exception keeps its class and takes our message instead, ours staying its cause.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

__all__ = ["surface"]


def surface(error: BaseException, frame: FrameType) -> BaseException:
    """Arrange that ``error``, about to be raised, is what reaches ``frame``; return it.

    >>> import numpy as np, autodiff
    >>> def f(x):
    ...     out = np.zeros(2)
    ...     out[0] = x  # NumPy converts x with float(), then raises its own ValueError
    ...     return out.sum()
    >>> try:
    ...     autodiff.grad(f)(1.0)
    ... except autodiff.errors.ConcretizationError as e:  # not NumPy's ValueError
    ...     print("into a plain NumPy array" in str(e))
    True
    """
    previous_global = sys.gettrace()
    previous_local = frame.f_trace
    previous_opcodes = frame.f_trace_opcodes

    def step_aside() -> None:
        frame.f_trace = previous_local
        frame.f_trace_opcodes = previous_opcodes
        sys.settrace(previous_global)

    def local(event_frame: FrameType, event: str, arg: Any) -> Any:
        if event_frame is not frame:  # (a frame the C code called into: not traced)
            return None
        step_aside()
        if event == "exception" and arg[1] is not error:
            if previous_global is not None:  # keep the debugger's tracing: reword only
                arg[1].args = (str(error),)
                return previous_local
            error.__suppress_context__ = True
            raise error.with_traceback(arg[2])
        return previous_local

    frame.f_trace = local
    frame.f_trace_opcodes = True  # the statement going on is an event too: step aside then
    sys.settrace(lambda *_: None)  # turns tracing on in this thread; new frames untraced
    return error
