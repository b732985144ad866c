"""Argument checks shared by the transforms, each with a message that says
what was wrong and what to do instead."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff._tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError

__all__ = [
    "as_input_array",
    "check_callable",
    "check_flag",
    "is_array",
    "normalize_argnums",
    "split_aux",
    "unwrap_tree",
]


def check_callable(func: Any, transform: str) -> None:
    if not callable(func):
        raise TransformTypeError(
            f"{transform}(func, ...): func must be callable, got "
            f"{type(func).__name__} {func!r:.60}."
        )


def check_flag(value: Any, name: str, transform: str) -> None:
    if not isinstance(value, bool):
        raise TransformTypeError(
            f"{transform}(..., {name}=...): {name} must be True or False, got "
            f"{type(value).__name__} {value!r:.60}."
        )


def check_argnums_type(argnums: Any, transform: str) -> None:
    """Validate the kind of ``argnums`` when the transform is created."""
    ints = argnums if isinstance(argnums, (tuple, list)) else (argnums,)
    if not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in ints):
        raise TransformTypeError(
            f"{transform}(func, argnums=...): argnums must be an int or a tuple of "
            f"ints, got {argnums!r:.60}."
        )
    if isinstance(argnums, (tuple, list)) and not argnums:
        raise TransformValueError(
            f"{transform}(func, argnums=()): argnums must name at least one "
            f"argument to differentiate with respect to."
        )


def normalize_argnums(argnums: int | Sequence[int], nargs: int, transform: str) -> tuple[int, ...]:
    """Non-negative argument positions, validated against ``nargs``."""
    ints = tuple(argnums) if isinstance(argnums, (tuple, list)) else (argnums,)
    out = []
    for i in ints:
        if not -nargs <= i < nargs:
            raise TransformValueError(
                f"{transform}(func, argnums={argnums!r}): argument {i} is out of range "
                f"for a call with {nargs} positional argument(s); valid argnums are "
                f"{-nargs}..{nargs - 1}."
                if nargs
                else f"{transform}(func, argnums={argnums!r}): func was called with no "
                f"positional arguments, so there is nothing to differentiate."
            )
        out.append(int(i) % nargs)
    if len(set(out)) != len(out):
        raise TransformValueError(
            f"{transform}(func, argnums={argnums!r}): argnums must not repeat an "
            f"argument (after resolving negative positions: {tuple(out)})."
        )
    return tuple(out)


def is_array(x: Any) -> bool:
    """An array or array-like leaf (NumPy, a tracer, or another array library)."""
    return isinstance(x, (np.ndarray, np.generic, Tracer)) or (
        hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__array_function__")
    )


def as_output(x: Any) -> Any:
    """A NumPy scalar (what a ufunc returns for 0-d input) as a 0-d array: every
    array a transform returns is an ndarray, as every JAX and torch result is a
    JAX array or a tensor; other leaves pass through."""
    return np.asarray(x) if isinstance(x, np.generic) else x


def as_input_array(x: Any, what: str, transform: str, *, differentiable: bool) -> Any:
    """Check one input leaf; Python scalars become NumPy values."""
    if isinstance(x, (bool, np.bool_)) or (isinstance(x, (int, np.integer)) and differentiable):
        raise TransformTypeError(
            f"{transform}: {what} is the {type(x).__name__} {x!r}; {transform} needs "
            f"floating-point inputs. Pass a float (e.g. {float(x)!r}) instead."
        )
    if isinstance(x, (int, float, complex)):
        return np.asarray(x)
    if not is_array(x):
        raise TransformTypeError(
            f"{transform}: {what} is a {type(x).__name__}, not an array. Pass NumPy "
            f"arrays or Python floats (or pytrees of them); pass other values "
            f"through a closure or an argument that is not transformed."
        )
    if differentiable and np.dtype(x.dtype).kind not in "fc":
        raise TransformTypeError(
            f"{transform}: {what} has dtype {x.dtype}; {transform} needs floating-point "
            f"(or complex) inputs. Convert it with x.astype(float), or pass it "
            f"through an argument that is not differentiated (argnums)."
        )
    return x


def split_aux(out: Any, transform: str) -> tuple[Any, Any]:
    if not (isinstance(out, tuple) and len(out) == 2):
        got = f"a tuple of length {len(out)}" if isinstance(out, tuple) else type(out).__name__
        raise TransformTypeError(
            f"{transform}(func, has_aux=True): func must return a pair "
            f"(output, aux), but it returned {got}."
        )
    return out


def unwrap_tree(tree: Any, unwrap_leaf: Callable[[Any], Any]) -> Any:
    return optree.tree_map(unwrap_leaf, tree)


def leaf_paths(args: tuple, positions: Sequence[int] | None = None) -> list[str]:
    """Readable names of the leaves of an argument tuple: ``argument 1['w']``.

    ``positions`` maps entries of ``args`` to the caller's argument positions.
    """
    paths, _, _ = optree.tree_flatten_with_path(args)
    names = []
    for path in paths:
        position = path[0] if positions is None else positions[path[0]]
        names.append(f"argument {position}" + "".join(f"[{p!r}]" for p in path[1:]))
    return names
