"""How a NumPy (or SciPy) function takes its arguments: which parameters are
``array_like``, read from the function's own documentation, and the wrapper that
converts lists and tuples there before autodiff's implementation sees them.

NumPy converts an ``array_like`` argument with ``np.asarray`` on the way in, so
``np.mean([1.0, 2.0])`` and ``np.prod((16, 5, 5), dtype=int)`` work.  autodiff's
implementations are written for arrays and traced values; ``takes_array_likes`` gives
each the same entrance: a list or tuple in an ``array_like`` position becomes an array
(through ``as_array``: ``anp.asarray``, which stacks traced items), so
``anp.mean([x, y])`` is ``anp.mean(anp.asarray([x, y]))`` under every transform.

Which parameters those are is NumPy's own word: its docstrings type every parameter
(``a : array_like``, ``arrays : sequence of array_like``, ``x : ndarray``, ``bins : int
or sequence of scalars``, ``shape : int or tuple of ints``), and ``inspect.signature``
places them.  A parameter typed as an array or a sequence of numbers is converted
whole; a sequence of arrays has each item converted; a ufunc's inputs are all arrays;
``out`` is never converted (it is written into).  Where the
documentation says nothing (an alias documented by reference, or docstrings stripped
by ``python -OO``), the first parameter is taken to be the array, as in every NumPy
function that has one.  The specification is worked out on first use and cached;
for the functions programs and autodiff's own rules most often call with a list or a
tuple, the result is written down (``_WRITTEN_DOWN``), so a first call reads nothing.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "ArrayLikes",
    "array_likes_of",
    "as_array",
    "converts",
    "reads_its_lists",
    "wrap_namespace",
    "takes_array_likes",
    "warn_caller",
]

_SEQUENCES = (list, tuple)


def _missing_as_array(x: Any) -> Any:  # pragma: no cover - rules/compositions.py sets it
    raise RuntimeError("autodiff.rules.compositions was not imported")


# The conversion of one list or tuple: anp.asarray, which autodiff/rules/compositions.py
# hands down when it is imported (it sits a layer above, and stacks traced items).
as_array: Callable[[Any], Any] = _missing_as_array


class ArrayLikes(NamedTuple):
    """Where a function takes ``array_like`` values.  ``positions``/``names``: whole
    arguments, by position or keyword; ``items_at``/``item_names``: arguments that
    are sequences of array_likes; ``rest_from``: the index from which every extra
    positional argument (``*args``) is an array_like."""

    positions: tuple[int, ...] = ()
    names: frozenset[str] = frozenset()
    items_at: tuple[int, ...] = ()
    item_names: frozenset[str] = frozenset()
    rest_from: int | None = None


# (pattern strings, compiled on first use by re's own cache, not at import: a docstring is
# read only when a NumPy function first meets a traced list)
_PARAMETERS = r"^Parameters\n-+\n(.*?)(?=\n[A-Z][A-Za-z ]*\n-+\n|\Z)"
_ENTRY = r"^([*`\w][^:\n]*?)\s*:\s*(.*)$"
_ARRAY = (
    r"\b(?:nd)?arrays?\b|array[_ -]?likes?\b"  # an array
    r"|(?:sequence|list) of [^,]*?(?:scalars|floats?\b|numbers)"  # numbers: one array too
)
_OF_ITEMS = r"^(?:\(.*?\)\s*)?(?:\d-d\s+)?(?:sequence|list|tuple)s?\b.*\bof\b"


def _documented(func: Any) -> list[tuple[list[str], str]] | None:
    """The ``Parameters`` section of ``func``'s docstring: (names, kind) per entry that
    is an array (kind ``"whole"``) or a sequence of them (``"items"``), or None where
    there is none."""
    # (getdoc cleans the docstring; cleaning a NumPy docstring again cost a first call ~0.5 ms)
    ufunc = isinstance(func, np.ufunc)
    doc = inspect.cleandoc(func.__doc__ or "") if ufunc else inspect.getdoc(func)
    found = re.search(_PARAMETERS, doc, re.S | re.M) if doc else None
    if found is None:
        return None
    out = []
    for line in found.group(1).splitlines():
        entry = re.match(_ENTRY, line)
        if entry is not None and not line.startswith(" "):
            names = [n.strip(" *`") for n in entry.group(1).split(",")]
            names = [n for n in names if n and n != "..."]
            kind = _kind(entry.group(2).strip())
            if kind is not None and names != ["out"]:  # out= is written into, not read
                out.append((names, kind))
    return out


# Where the functions that programs and autodiff's own rules most often call with a list
# or a tuple (arrays to stack, a shape, axes) take array_likes, as array_likes_of works it
# out from the installed NumPy (tests/test_array_likes.py checks each entry against it):
# reading the signature and docstring cost a first call 0.1-2 ms (inspect parses a C
# function's signature with ast, which it imports; the docstring patterns compile).  Used
# with the NumPy it was checked against; another one is read as every other function is.
_WRITTEN_FOR = "2.4."
_A = ArrayLikes
_WRITTEN_DOWN: dict[str, ArrayLikes] = {
    "append": _A(positions=(0, 1), names=frozenset({"arr", "values"})),
    "broadcast_to": _A(positions=(0,), names=frozenset({"array"})),
    "clip": _A(positions=(0, 1, 2), names=frozenset({"a", "a_max", "a_min", "max", "min"})),
    "column_stack": _A(items_at=(0,), item_names=frozenset({"tup"})),
    "concatenate": _A(items_at=(0,)),
    "diag": _A(positions=(0,), names=frozenset({"v"})),
    "dot": _A(positions=(0, 1), names=frozenset({"a", "b"})),
    "dstack": _A(items_at=(0,), item_names=frozenset({"tup"})),
    "einsum": _A(rest_from=0),
    "expand_dims": _A(positions=(0,), names=frozenset({"a"})),
    "full_like": _A(positions=(0, 1), names=frozenset({"a", "fill_value"})),
    "hstack": _A(items_at=(0,), item_names=frozenset({"tup"})),
    "linspace": _A(positions=(0, 1), names=frozenset({"start", "stop"})),
    "matmul": _A(positions=(0, 1)),
    "max": _A(positions=(0, 5), names=frozenset({"a", "where"})),
    "mean": _A(positions=(0,), names=frozenset({"a", "where"})),
    "min": _A(positions=(0, 5), names=frozenset({"a", "where"})),
    "moveaxis": _A(positions=(0,), names=frozenset({"a"})),
    "outer": _A(positions=(0, 1), names=frozenset({"a", "b"})),
    "pad": _A(positions=(0, 1), names=frozenset({"array", "pad_width"})),
    "prod": _A(positions=(0, 6), names=frozenset({"a", "where"})),
    "repeat": _A(positions=(0, 1), names=frozenset({"a", "repeats"})),
    "reshape": _A(positions=(0,)),
    "split": _A(positions=(0, 1), names=frozenset({"ary", "indices_or_sections"})),
    "squeeze": _A(positions=(0,), names=frozenset({"a"})),
    "stack": _A(items_at=(0,), item_names=frozenset({"arrays"})),
    "std": _A(positions=(0,), names=frozenset({"a", "mean", "where"})),
    "sum": _A(positions=(0, 6), names=frozenset({"a", "where"})),
    "swapaxes": _A(positions=(0,), names=frozenset({"a"})),
    "take": _A(positions=(0, 1), names=frozenset({"a", "indices"})),
    "tensordot": _A(positions=(0, 1, 2), names=frozenset({"a", "axes", "b"})),
    "tile": _A(positions=(0, 1), names=frozenset({"A", "reps"})),
    "transpose": _A(positions=(0,), names=frozenset({"a"})),
    "var": _A(positions=(0,), names=frozenset({"a", "mean", "where"})),
    "vstack": _A(items_at=(0,), item_names=frozenset({"tup"})),
    "where": _A(positions=(0, 1, 2)),
}


_NUMPY_CHECKED = np.__version__.startswith(_WRITTEN_FOR)


def _kind(type_text: str) -> str | None:
    """``"whole"`` (an array: ``array_like``, ``ndarray``, ``(M, M) array``, a sequence
    of numbers...), ``"items"`` (a sequence of arrays) or None (``int or tuple of
    ints``, ``str``...)."""
    text = type_text.lower()
    if not re.search(_ARRAY, text) or text.startswith("nested"):
        return None  # np.block's nesting is its own
    items = re.match(_OF_ITEMS, text)
    if items and re.search(r"\b(?:nd)?arrays?\b|array[_ -]?likes?\b", text[items.end() :]):
        return "items"
    return "whole"


def _signature(func: Any) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None


@functools.cache
def array_likes_of(func: Any) -> ArrayLikes:
    """Where NumPy (or SciPy) function ``func`` takes ``array_like`` values (see the
    module docstring).  ``(ufunc, method)`` pairs are ufunc methods."""
    if isinstance(func, tuple):  # np.add.outer, np.add.reduce, ...
        if func[1] == "outer":
            return ArrayLikes(positions=(0, 1))
        return ArrayLikes(positions=(0,), names=frozenset({"array"}))
    if isinstance(func, np.ufunc):
        return ArrayLikes(positions=tuple(range(func.nin)))
    name = getattr(func, "__name__", None)
    if name in _WRITTEN_DOWN and _NUMPY_CHECKED and getattr(np, name, None) is func:
        return _WRITTEN_DOWN[name]
    params = _signature(func)
    if params is None:
        return ArrayLikes()
    documented = _documented(func)
    if documented is None:  # documented by reference, or no docstrings: the first is the array
        first = params[0] if params else None
        if first is None or first.kind not in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD):
            return ArrayLikes()
        return ArrayLikes(positions=(0,), names=frozenset({first.name}))
    by_name = {p.name: (i, p) for i, p in enumerate(params)}
    rest = next((i for i, p in enumerate(params) if p.kind == p.VAR_POSITIONAL), None)
    first_positional = 0 if params and params[0].kind <= params[0].POSITIONAL_OR_KEYWORD else None
    spec: dict[str, set] = {"positions": set(), "names": set(), "items_at": set(),
                            "item_names": set()}  # fmt: skip
    rest_from = None
    for names, kind in documented:
        matched = [n for n in names if n in by_name]
        for name in matched:
            i, p = by_name[name]
            if p.kind == p.VAR_POSITIONAL:
                rest_from = i  # each extra positional argument is one (or, for einsum, a str)
                continue
            if p.kind == p.VAR_KEYWORD:
                continue
            if p.kind != p.KEYWORD_ONLY:
                spec["positions" if kind == "whole" else "items_at"].add(i)
            if p.kind != p.POSITIONAL_ONLY:
                spec["names" if kind == "whole" else "item_names"].add(name)
        if not matched and names:
            # "a1, a2, ... : sequence of array_like", "arys1, arys2, ... : array_like":
            # the items of *args, or of the first argument (np.concatenate's arrays)
            if rest is not None:
                rest_from = rest
            elif first_positional is not None and kind == "items":
                spec["items_at"].add(first_positional)
    return ArrayLikes(
        tuple(sorted(spec["positions"])),
        frozenset(spec["names"]),
        tuple(sorted(spec["items_at"])),
        frozenset(spec["item_names"]),
        rest_from,
    )


def _whole(x: Any) -> Any:
    return as_array(x) if x.__class__ in _SEQUENCES else x


def _items(x: Any) -> Any:
    if x.__class__ not in _SEQUENCES:
        return x
    return type(x)(as_array(item) if item.__class__ in _SEQUENCES else item for item in x)


def converts(spec: ArrayLikes, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with the lists and tuples in ``spec``'s places as arrays."""
    n = len(args)
    new = list(args)
    for i in spec.positions:
        if i < n:
            new[i] = _whole(new[i])
    for i in spec.items_at:
        if i < n:
            new[i] = _items(new[i])
    if spec.rest_from is not None:
        for i in range(spec.rest_from, n):
            new[i] = _whole(new[i])
    if kwargs:
        kwargs = {
            k: _whole(v) if k in spec.names else _items(v) if k in spec.item_names else v
            for k, v in kwargs.items()
        }
    return tuple(new), kwargs


def _holds_sequence(x: Any) -> bool:
    """Whether sequence-of-arrays argument ``x`` has a list or tuple among its items
    (``stack([x, y])`` has nothing to convert; ``stack([[x, y], z])`` has)."""
    return x.__class__ in _SEQUENCES and any(item.__class__ in _SEQUENCES for item in x)


def _needs(spec: ArrayLikes, args: tuple, kwargs: dict) -> bool:
    """Whether any argument has something to convert (the wrapper's fast path)."""
    n = len(args)
    for i in spec.positions:
        if i < n and args[i].__class__ in _SEQUENCES:
            return True
    for i in spec.items_at:
        if i < n and _holds_sequence(args[i]):
            return True
    if spec.rest_from is not None and any(
        a.__class__ in _SEQUENCES for a in args[spec.rest_from :]
    ):
        return True
    if kwargs:
        return any(
            (k in spec.names and v.__class__ in _SEQUENCES)
            or (k in spec.item_names and _holds_sequence(v))
            for k, v in kwargs.items()
        )
    return False


def _no_sequence(args: tuple, kwargs: dict) -> bool:
    """Whether no argument is a list or tuple: then no spec has anything to convert, and
    the docstring need not be read (a first call of each function would cost ~0.5 ms)."""
    for a in args:
        if a.__class__ in _SEQUENCES:
            return False
    if kwargs:
        for v in kwargs.values():
            if v.__class__ in _SEQUENCES:
                return False
    return True


def takes_array_likes(fn: Callable, reference: Any) -> Callable:
    """``fn``, the implementation of NumPy/SciPy function ``reference``, taking
    ``array_like`` arguments as ``reference`` does: lists and tuples in its
    ``array_like`` places become arrays first.  ``fn`` itself where it reads them
    itself (``fn.takes_array_likes``: see ``reads_its_lists``)."""
    if getattr(fn, "takes_array_likes", False):
        return fn

    def wrapper(*args, **kwargs):
        if _no_sequence(args, kwargs):  # the common call: nothing any spec would convert
            return fn(*args, **kwargs)
        spec = array_likes_of(reference)  # (worked out at the first such call, then cached)
        if _needs(spec, args, kwargs):
            args, kwargs = converts(spec, args, kwargs)
        return fn(*args, **kwargs)

    # functools.wraps, spelled out: it costs ~3x this, for each of the ~400 functions
    # made as the package loads (it reads __annotations__, making a dict for each)
    wrapper.__dict__.update(fn.__dict__)
    wrapper.__module__, wrapper.__name__ = fn.__module__, fn.__name__
    wrapper.__qualname__, wrapper.__doc__ = fn.__qualname__, fn.__doc__
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    wrapper.takes_array_likes = True  # type: ignore[attr-defined]
    return wrapper


def reads_its_lists(fn: Callable) -> Callable:
    """Decorator: ``fn`` reads the lists and tuples it is given itself, because NumPy
    gives them a meaning of their own there (``np.histogramdd``'s list of coordinate
    arrays is not the array of them), so ``takes_array_likes`` leaves it as it is."""
    fn.takes_array_likes = True  # type: ignore[attr-defined]
    return fn


def wrap_namespace(namespace: dict[str, Any], reference: Any) -> None:
    """Give every public function of ``namespace`` (a module's globals, which lists
    them in ``__all__``) the entrance of its namesake in module ``reference``, where
    ``register_numpy`` has not (SciPy's functions, which NumPy does not dispatch)."""
    for name in namespace["__all__"]:
        fn, ref = namespace[name], getattr(reference, name, None)
        if inspect.isfunction(fn) and callable(ref):
            namespace[name] = takes_array_likes(fn, ref)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../autodiff


def warn_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn``, attributed to the first frame outside autodiff: the line that
    called the function, as NumPy attributes its warnings (however many of autodiff's
    frames, such as ``takes_array_likes``' wrapper, lie between)."""
    frame: Any = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
