"""Argument checks shared by the transforms, each with a message that says
what was wrong and what to do instead."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.stack import check_live
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError

__all__ = [
    "as_input_array",
    "as_tangent",
    "check_callable",
    "check_chunk_size",
    "check_flag",
    "check_no_none",
    "check_randomness",
    "is_array",
    "normalize_argnums",
    "split_aux",
    "at_positions",
    "number_as_array",
    "leaf_paths",
    "is_list_of_numbers",
    "note_list_inputs",
    "numbers_for_array",
]


def a_type(x: Any) -> str:
    """'a list', 'an object': the type of x with its article, for messages."""
    name = type(x).__name__
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


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


def check_chunk_size(chunk_size: Any, transform: str) -> None:
    if chunk_size is None:
        return
    if not isinstance(chunk_size, (int, np.integer)) or isinstance(chunk_size, bool):
        raise TransformTypeError(
            f"{transform}(..., chunk_size={chunk_size!r:.40}): chunk_size must be None or "
            f"a positive int, got {type(chunk_size).__name__}."
        )
    if chunk_size < 1:
        raise TransformValueError(
            f"{transform}(..., chunk_size={chunk_size!r}): chunk_size must be None or a "
            f"positive int (the number of examples run at once; 1 is a plain loop)."
        )


RANDOMNESS = ("error", "different", "same")


def check_randomness(randomness: Any, transform: str) -> None:
    if not isinstance(randomness, str):
        raise TransformTypeError(
            f"{transform}(..., randomness={randomness!r:.40}): randomness must be one of "
            f"the strings {RANDOMNESS}, got {type(randomness).__name__}."
        )
    if randomness not in RANDOMNESS:
        raise TransformValueError(
            f"{transform}(..., randomness={randomness!r}): randomness must be one of {RANDOMNESS}."
        )


def check_no_none(
    args: Sequence[Any], transform: str, positions: Sequence[int] | None = None, what: str = ""
) -> None:
    """A differentiated argument that is None (a pytree with no leaves) would reach
    ``func`` as None and fail inside it, far from the cause."""
    for i, arg in enumerate(args):
        if arg is None:
            position = i if positions is None else positions[i]
            raise TransformTypeError(
                f"{transform}: {what}argument {position} is None, so there is nothing to "
                f"differentiate. Pass an array (or a pytree of arrays) there; pass None, "
                f"or any value that is not an array, through an argument that is not "
                f"differentiated."
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


def as_input_array(x: Any, what: str, transform: str, *, differentiable: bool) -> Any:
    """Check one input leaf; Python scalars become NumPy values."""
    if isinstance(x, (bool, np.bool_)) or (isinstance(x, (int, np.integer)) and differentiable):
        fix = (  # a flag: not an input to differentiate
            "pass it through an argument that is not differentiated (argnums)"
            if isinstance(x, (bool, np.bool_))
            else f"pass {float(x)!r}"
        )
        raise TransformTypeError(
            f"{transform}: {what} is the {type(x).__name__} {x!r}, and {transform} "
            f"differentiates floating-point inputs only: {fix}."
        )
    if isinstance(x, (int, float, complex)):
        return np.asarray(x)
    check_live(x)  # a leaked tracer raises here, even if func never uses it
    if not is_array(x):
        raise TransformTypeError(
            f"{transform}: {what} is {a_type(x)}, not an array. Pass NumPy "
            f"arrays or Python floats (or pytrees of them); pass other values "
            f"through a closure or an argument that is not transformed."
        )
    if differentiable and np.dtype(x.dtype).kind not in "fc":
        raise TransformTypeError(
            f"{transform}: {what} has dtype {x.dtype}, and {transform} differentiates "
            f"floating-point (or complex) inputs only: pass x.astype(float), or pass it "
            f"through an argument that is not differentiated (argnums)."
        )
    return x


def as_tangent(t: Any, dtype: Any, what: str, transform: str) -> Any:
    """Check one tangent or cotangent leaf against the dtype of the value it
    belongs to (its primal, or the output); Python floats become NumPy values."""
    if isinstance(t, (bool, np.bool_, int, np.integer)):
        raise TransformTypeError(
            f"{transform}: {what} is the {type(t).__name__} {t!r}; tangents and "
            f"cotangents must be floating-point. Pass a float (e.g. {float(t)!r}) instead."
        )
    if isinstance(t, (float, complex)):
        t = np.asarray(t)
    if not is_array(t):
        raise TransformTypeError(
            f"{transform}: {what} is {a_type(t)}, not an array. Pass a NumPy "
            f"array (or a Python float) with the shape of the value it belongs to."
        )
    kind = np.dtype(t.dtype).kind
    if kind not in "fc":
        raise TransformTypeError(
            f"{transform}: {what} has dtype {t.dtype}; tangents and cotangents must be "
            f"floating-point (complex for complex values). Convert it with "
            f".astype({np.dtype(dtype).name})."
        )
    if kind == "c" and np.dtype(dtype).kind != "c":
        raise TransformTypeError(
            f"{transform}: {what} is complex ({t.dtype}) but the value it belongs to is "
            f"real ({np.dtype(dtype).name}); a real value only has real tangents and "
            f"cotangents. Pass its real part (np.real) if that is what you mean."
        )
    return t


def numbers_for_array(given: Any, expected: Any, what: str) -> str | None:
    """Where ``given`` has a list (or tuple) of numbers in place of an array leaf of the
    ``expected`` structure (a treespec): the first sentence of the error that says so,
    naming the fix (``np.asarray``), else None.  JAX and torch users pass a list where
    NumPy would take one; a transform's pytrees take it for several leaves."""
    try:
        parts = expected.flatten_up_to(given)
    except (ValueError, TypeError):
        return None
    for i, part in enumerate(parts):
        if is_list_of_numbers(part):
            return (
                f"{what} {i} is {'a list' if isinstance(part, list) else 'a tuple'} of "
                f"{len(part)} numbers where an array goes: pass np.asarray(...) of it."
            )
    return None


def note_list_inputs(error: BaseException, args: tuple, transform: str) -> None:
    """A TypeError in the function a transform runs, given a list of numbers as an input:
    add a note (the last line of the traceback) that the transform took the list for
    separate scalar inputs, and that np.asarray(...) makes it one array."""
    if not isinstance(error, TypeError) or not hasattr(error, "add_note"):  # (3.11+)
        return
    for i, arg in enumerate(args):
        if is_list_of_numbers(arg):
            error.add_note(
                f"{transform}: argument {i} is {'a list' if isinstance(arg, list) else 'a tuple'}"
                f" of {len(arg)} numbers, which {transform} takes for {len(arg)} separate "
                f"scalar inputs (a pytree) and hands to the function as such: to give it "
                f"one array, pass np.asarray(...) of it."
            )
            return


def is_list_of_numbers(x: Any) -> bool:
    """A non-empty list or tuple of Python or NumPy numbers: where a JAX or torch user
    passes one, they mean an array."""
    return (
        isinstance(x, (list, tuple))
        and bool(x)
        and all(isinstance(v, (bool, int, float, complex, np.generic)) for v in x)
    )


def split_aux(out: Any, transform: str) -> tuple[Any, Any]:
    if not (isinstance(out, tuple) and len(out) == 2):
        if isinstance(out, tuple):
            got = f"a tuple of length {len(out)}"
        elif is_array(out):
            got = f"a single array of shape {tuple(out.shape)}"
        else:
            got = a_type(out) + (" (return a tuple)" if isinstance(out, list) else "")
        raise TransformTypeError(
            f"{transform}(func, has_aux=True): func must return a pair "
            f"(output, aux), but it returned {got}."
        )
    return out


def at_positions(
    func: Callable, args: Sequence[Any], positions: Sequence[int], kwargs: dict | None = None
) -> Callable:
    """``func`` as a function of the arguments at ``positions`` only; the others
    keep their values in ``args`` (what grad's ``argnums`` and jacrev's mean)."""

    def selected(*chosen):
        full = list(args)
        for i, value in zip(positions, chosen):
            full[i] = value
        return func(*full, **(kwargs or {}))

    return selected


def number_as_array(value: Any) -> Any:
    """A Python number a transformed function returned, as a 0-d array."""
    if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
        return np.asarray(value)
    return value


def leaf_paths(args: tuple, positions: Sequence[int] | None = None) -> list[str]:
    """Readable names of the leaves of an argument tuple: ``argument 1['w']``.

    ``positions`` maps entries of ``args`` to the caller's argument positions.
    """
    names: list[str] = []
    tree = trees.flatten(tuple(args))[1]
    if isinstance(tree, trees.Flat):  # plain values in tuples and lists: no optree to import
        for i, shape in enumerate(tree.shape[1]):
            _paths(shape, f"argument {i if positions is None else positions[i]}", names)
        return names
    import optree

    paths, _, _ = optree.tree_flatten_with_path(args)
    names = []
    for path in paths:
        position = path[0] if positions is None else positions[path[0]]
        names.append(f"argument {position}" + "".join(f"[{p!r}]" for p in path[1:]))
    return names


def _paths(shape: Any, path: str, names: list[str]) -> None:
    """Appends the paths of the leaves of a plain structure (``trees.Flat.shape``), as
    optree's paths are written above."""
    if shape is None:
        names.append(path)
        return
    for i, item in enumerate(shape[1]):
        _paths(item, f"{path}[{i!r}]", names)
