"""Checks of what rules return, on every call in debug mode.

``debug_rules()`` turns on a check of what every VJP, JVP and batching rule
returns (structure, shapes, real/complex kind): a wrong rule then fails at
the call that misbehaves, with an error naming the primitive, the rule and
the expected and actual shapes, instead of producing a wrong number later.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from autodiff.core.arrays import is_complex
from autodiff.debug import rules_switch as checking
from autodiff.errors import RuleError

__all__ = ["checking", "debug_rules", "validate_batch", "validate_jvp", "validate_vjp"]


@contextlib.contextmanager
def debug_rules() -> Iterator[None]:
    """Check the output of every rule that runs inside this block.

    >>> import numpy as np, autodiff
    >>> with autodiff.debug_rules():
    ...     float(autodiff.grad(np.sin)(0.0))
    1.0
    """
    token = checking.set(True)
    try:
        yield
    finally:
        checking.reset(token)


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _fail(prim: Any, rule: str, message: str) -> RuleError:
    return RuleError(f"the {rule} rule of primitive '{prim.name}' {message}")


def validate_vjp(prim: Any, cts: Sequence, primals: Sequence, argnums: Sequence[int]) -> None:
    if len(cts) != len(argnums):
        raise _fail(prim, "VJP", f"returned {len(cts)} cotangents for {len(argnums)} arguments")
    for ct, i in zip(cts, argnums):
        if ct is None:
            continue
        if _shape(ct) != _shape(primals[i]):
            raise _fail(prim, "VJP", f"returned shape {_shape(ct)} for argument {i}, which "
                                     f"has shape {_shape(primals[i])}")  # fmt: skip


def validate_jvp(prim: Any, tangent: Any, ans: Any) -> None:
    pairs = zip(tangent, ans) if prim.multiple_results else [(tangent, ans)]
    if prim.multiple_results and len(tangent) != len(ans):
        raise _fail(prim, "JVP", f"returned {len(tangent)} tangents for {len(ans)} outputs")
    for t, a in pairs:
        if t is not None and _shape(t) != _shape(a):
            raise _fail(prim, "JVP", f"returned shape {_shape(t)} for an output of shape "
                                     f"{_shape(a)}")  # fmt: skip
        if t is not None and is_complex(t) and not is_complex(a):
            raise _fail(prim, "JVP", "returned a complex tangent for a real output")


def validate_batch(prim: Any, out: Any, out_dim: Any, values: Sequence, dims: Sequence,
                   params: dict, size: int) -> None:  # fmt: skip
    """Compare with the primitive applied to the first example (the batch is not empty)."""
    outs, out_dims = (out, out_dim) if prim.multiple_results else ((out,), (out_dim,))
    if size == 0:
        return
    example = prim.bind(*(v if d is None else v[(slice(None),) * d + (0,)]
                          for v, d in zip(values, dims)), **params)  # fmt: skip
    expected = example if prim.multiple_results else (example,)
    for o, d, e in zip(outs, out_dims, expected):
        shape = _shape(o)
        if d is None:
            logical = shape
        elif not 0 <= d < len(shape) or shape[d] != size:
            raise _fail(prim, "batching", f"returned shape {shape} with batch axis {d}, "
                                          f"which does not hold the batch of {size}")  # fmt: skip
        else:
            logical = shape[:d] + shape[d + 1 :]
        if logical != _shape(e):
            raise _fail(prim, "batching", f"returned per-example shape {logical} (shape "
                                          f"{shape}, batch axis {d}); the primitive gives "
                                          f"{_shape(e)}")  # fmt: skip
