"""``debug_nans()``: stop at the first primitive that makes a NaN or an infinity.

Each transform's ``process`` (and the backward pass, for cotangents) asks
``checking_nans()``, a context variable read that costs nothing else when the
check is off.  When it is on, every concrete NumPy value a primitive produces
(its output, a JVP's tangent, a VJP's cotangent) is tested with
``np.isfinite``; a NaN where the inputs had none, or an infinity where they
had none, raises ``NonFiniteError`` naming the primitive, the transforms
active, and the line of user code that called the primitive.  Traced values
are left to the interpreter below, which sees them as concrete arrays; lazy or
foreign arrays (Dask, CuPy) are not checked.
"""

from __future__ import annotations

import contextlib
import contextvars
import linecache
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from autodiff.core.stack import current_interpreters
from autodiff.debug import checking_nans
from autodiff.debug import nans_switch as _active
from autodiff.errors import NonFiniteError

__all__ = [
    "check_cotangent",
    "check_output",
    "check_tangent",
    "checking_nans",
    "debug_nans",
    "in_vjp_of",
    "node_site",
    "user_site",
]

# While a VJP rule runs under debug_nans: (primitive name, where it was called).
_vjp_of: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "autodiff_vjp_of", default=None
)

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # autodiff/
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))


@contextlib.contextmanager
def debug_nans() -> Iterator[None]:
    """Raise at the first NaN or infinity made from finite values under a transform.

    Inside the block, each primitive's output, each JVP tangent and each VJP
    cotangent computed by ``grad``, ``vjp``, ``jvp``, ``vmap`` and the
    transforms built on them is checked; the error names the primitive, the
    transforms and your line of code.  Checking costs one ``np.isfinite`` per
    value; outside the block it costs nothing.

    >>> import numpy as np
    >>> from autodiff import debug_nans, grad
    >>> with debug_nans():  # doctest: +ELLIPSIS
    ...     grad(lambda x: np.sqrt(x).sum())(np.array([1.0, 0.0]))
    Traceback (most recent call last):
    ...
    autodiff.errors.NonFiniteError: the VJP of 'sqrt' made inf in the cotangent of its ...
    """
    token = _active.set(True)
    try:
        # NumPy's own warnings for these would pre-empt the error that says where.
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            yield
    finally:
        _active.reset(token)


@contextlib.contextmanager
def in_vjp_of(prim_name: str, site: str) -> Iterator[None]:
    """Name the VJP rule being run, for errors raised by the calls inside it."""
    token = _vjp_of.set((prim_name, site))
    try:
        yield
    finally:
        _vjp_of.reset(token)


def user_site() -> str:
    """``file:line `source``` of the innermost frame outside autodiff and NumPy."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith((_PACKAGE, _NUMPY)):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "an unknown place"
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    source = linecache.getline(filename, lineno).strip()
    return f"{filename}:{lineno}" + (f" `{source}`" if source else "")


def _bad(x: Any) -> set[str]:
    """Which of 'nan' and 'inf' a concrete NumPy value holds (empty if it cannot tell)."""
    if not isinstance(x, (np.ndarray, np.generic, float, complex)):
        return set()
    a = np.asarray(x)
    if a.dtype.kind not in "fc":
        return set()
    bad = set()
    if np.isnan(a).any():
        bad.add("nan")
    if np.isinf(a).any():
        bad.add("inf")
    return bad


def _new(outputs: Sequence[Any], inputs: Sequence[Any]) -> list[str]:
    """Kinds of non-finite value in ``outputs`` that no input had."""
    made = set().union(*map(_bad, outputs)) if outputs else set()
    if not made:
        return []
    had = set().union(*map(_bad, inputs)) if inputs else set()
    return sorted(made - had)


def _where() -> str:
    transforms = " > ".join(interp.describe() for interp in current_interpreters())
    vjp = _vjp_of.get()
    inside = f", inside the VJP of '{vjp[0]}' (called at {vjp[1]})" if vjp else ""
    return f"under {transforms or 'no transform'}{inside}"


def check_output(prim: Any, inputs: Sequence[Any], out: Any) -> None:
    """A primitive's output, computed by the innermost interpreter's process."""
    outs = out if isinstance(out, tuple) else (out,)
    if kinds := _new(outs, inputs):
        raise NonFiniteError(
            f"'{prim.name}' made {' and '.join(kinds)} from finite values {_where()}; "
            f"'{prim.name}' was called at {user_site()}. Its inputs were "
            f"{_shapes(inputs)}."
        )


def check_tangent(prim: Any, inputs: Sequence[Any], tangent: Any) -> None:
    """A JVP rule's output tangent; ``inputs`` are the primals and input tangents."""
    ts = tangent if isinstance(tangent, tuple) else (tangent,)
    if kinds := _new([t for t in ts if t is not None], inputs):
        raise NonFiniteError(
            f"the JVP of '{prim.name}' made {' and '.join(kinds)} in the output tangent from "
            f"finite values {_where()}; '{prim.name}' was called at {user_site()}."
        )


def node_site(node: Any) -> tuple[str, str]:
    """(where the node's primitive was called, the transform that recorded it)."""
    return getattr(node, "site", None) or ("an unknown place (recorded before debug_nans)", "grad")


def check_cotangent(node: Any, argnum: int, ct_in: Any, ct: Any, primals: Sequence) -> None:
    """A VJP rule's cotangent for argument ``argnum`` of ``node``'s primitive, from the
    incoming cotangent ``ct_in`` and the residuals."""
    if kinds := _new([ct], [ct_in, *primals, node.ans]):
        name = node.prim.name
        site, transform = node_site(node)
        raise NonFiniteError(
            f"the VJP of '{name}' made {' and '.join(kinds)} in the cotangent of its argument "
            f"{argnum} from finite values, in the backward pass of {transform}; "
            f"'{name}' was called at {site}."
        )


def _shapes(values: Sequence[Any]) -> str:
    return ", ".join(f"{getattr(v, 'dtype', type(v).__name__)}{list(np.shape(v))}" for v in values)
