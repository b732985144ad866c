"""What a conversion of a traced value to a concrete one meets: which code converts
(the user's expression, NumPy storing into an array, a NumPy function given a list),
and the message that names the fix for that case first.

A message leads with one sentence (at most about 200 characters) saying what the code
did and what to write instead, quoting the expression where Python knows its source
(``np.array([x, 2 * x])`` -> ``anp.array([x, 2 * x])``); the catalogue of other
spellings follows.  ``core/tracer.py`` decides *whether* a conversion is an error (it
would drop a derivative or a batch); this module says it.
"""

from __future__ import annotations

import ast
import dis
import itertools
import linecache
import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import numpy as np

__all__ = [
    "Described",
    "anp_spelling",
    "array_fix",
    "derivative_message",
    "describe",
    "expression",
    "is_storing",
    "list_message",
    "numpy_function",
    "store_message",
]

_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]
_LONGEST_QUOTE = 60  # a longer expression is named by what it calls, not quoted


def is_storing(frame: FrameType) -> bool:
    """Is ``frame`` assigning into a container (``plain_array[i] = x``)?

    NumPy converts the stored value with ``float()`` (``int()``, ``bool()``, ``complex()``)
    itself there; a user's own ``float(x)`` is a call, not a store, so the instruction the
    frame is executing tells the two apart.
    """
    lasti = frame.f_lasti
    return lasti >= 0 and frame.f_code.co_code[lasti] == _STORE_SUBSCR


def expression(frame: FrameType) -> str | None:
    """The source of the expression ``frame`` is evaluating (``float(s)``,
    ``np.array([x, y])``, ``out[0]``), where Python records it (3.11+) and it is short."""
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is None:
        return None
    start, end, col, end_col = next(
        itertools.islice(positions(), frame.f_lasti // 2, None), (None,) * 4
    )
    if start is None or start != end or col is None or end_col is None:
        return None
    line = linecache.getline(frame.f_code.co_filename, start).encode()
    text = line[col:end_col].decode(errors="replace").strip()
    return text if 0 < len(text) <= _LONGEST_QUOTE else None


# (pattern strings, compiled on first use by re's own cache: compiling them all at import
# cost a plain ``import autodiff`` several milliseconds, for messages most programs never show)
_NUMPY_NAME = r"(?P<module>np|numpy|math|cmath)\.(?P<name>\w+)(?P<rest>[(\[].*)$"
_MATH_NAMES = {"fabs": "abs", "pow": "power", "atan2": "arctan2"}  # math's name -> NumPy's


def anp_spelling(expr: str | None, namespace: Any) -> str | None:
    """``anp.array([x, y])`` for ``np.array([x, y])`` (``math.sqrt(x)``, ``np.r_[x, y]``):
    the same code through ``autodiff.numpy``, where that has the name; else None."""
    match = re.match(_NUMPY_NAME, expr or "", re.DOTALL)
    if match is None or namespace is None:
        return None
    name = match["name"]
    if match["module"] in ("math", "cmath"):
        name = _MATH_NAMES.get(name, name)
    if getattr(namespace, name, None) is None:
        return None
    return f"anp.{name}{match['rest']}"


def describe(frame: FrameType, fallback: str, kind: str) -> str:
    """What the code in ``frame`` does with the value, for a message: the expression
    (``float(s)``; ``the condition x > 0`` for an ``if``), else ``fallback``."""
    expr = expression(frame)
    if expr is None:
        return fallback
    if kind == "condition" and not _is_call(frame):
        return f"the condition {expr}"
    return expr


class Described:
    """:func:`describe`'s text, spelled only when a message is written (``bool(x)`` under
    ``grad`` is Python control flow: it must not read source files)."""

    __slots__ = ("fallback", "frame", "kind")

    def __init__(self, frame: FrameType, fallback: str, kind: str) -> None:
        self.frame, self.fallback, self.kind = frame, fallback, kind

    def __str__(self) -> str:
        return describe(self.frame, self.fallback, self.kind)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _is_call(frame: FrameType) -> bool:
    return dis.opname[frame.f_code.co_code[frame.f_lasti]].startswith("CALL")


_CATALOGUE = (
    "autodiff.numpy (import autodiff.numpy as anp) has NumPy's functions for traced "
    "values: anp.array and "
    "anp.asarray (also of lists holding traced values), anp.stack, anp.concatenate, "
    "anp.where, and anp.at(a)[i].set(v) instead of writing into a NumPy array. NumPy "
    "also converts traced values used as the index of a plain array (write "
    "anp.getitem(a, i)), given to ndarray methods like a.dot(x) (write a @ x), and in "
    "np.r_, np.c_ and np.vectorize (write anp.r_, anp.c_, anp.vectorize)."
)


def array_fix(what: str, namespace: Any) -> str:
    """What to write instead of NumPy code that converts a traced value to an array."""
    twin = anp_spelling(what, namespace)
    return f"write {twin or 'anp.asarray(x) (anp.array([...]) for a list)'}"


def derivative_message(what: str, holder: str, frame: FrameType, namespace: Any) -> str:
    """``float()`` (or ``.item()``, ``np.asarray()``, ...) of a value that carries a
    derivative: the fix first (the ``anp`` spelling, or ``stop_gradient``), then how to see
    or log a value and what still works."""
    did = describe(frame, what, "value")
    if what.startswith("np."):  # NumPy converts to an array
        fix = f"{array_fix(did, namespace)}, or convert autodiff.stop_gradient(x) on purpose"
        rest = _CATALOGUE
    elif (twin := anp_spelling(did, namespace)) is not None:  # math.sqrt(x), np.float64(x)
        fix = f"write {twin}, which keeps it"
        rest = f"(anp is autodiff.numpy.) {_CONVERSIONS}"
    else:
        fix = f"keep it an array, or write {_on_stopped(did)} for a constant on purpose"
        rest = _CONVERSIONS
    return (
        f"{did} would drop the derivative of a value traced by {holder}: {fix}. To see a "
        f"value, print(x) shows it; to log one, return it as an auxiliary output "
        f"(has_aux=True). {rest}"
    )


_CONVERSIONS = (
    "bool() and comparisons (if x > 0:) work under grad and jvp. Python's float(), int(), "
    "complex(), .item(), .tolist(), math functions, %-formatting, operator.index and "
    "NumPy's scalar types (np.float64(x)) convert a value to a plain one."
)


def _on_stopped(did: str) -> str:
    """``float(autodiff.stop_gradient(s))`` for ``float(s)``, ``autodiff.stop_gradient(s)
    .item()`` for ``s.item()``: the same conversion of a constant."""
    if match := re.fullmatch(r"(?P<f>[\w.]+)\((?P<x>[^()]+?)(?P<rest>, [^()]*)?\)", did):
        return f"{match['f']}(autodiff.stop_gradient({match['x']}){match['rest'] or ''})"
    if match := re.fullmatch(r"(?P<x>[\w.\[\]]+)\.(?P<m>item|tolist)\(\)", did):
        return f"autodiff.stop_gradient({match['x']}).{match['m']}()"
    return "autodiff.stop_gradient(x) in its place"


def list_message(caller: tuple[str, str], holder: str, frame: FrameType, namespace: Any) -> str:
    """A NumPy function given a list holding a traced value (``np.mean([x, y])``), or
    NumPy code that converts its items (``np.r_[x, y]``, ``np.vectorize(f)(x)``)."""
    numpy_name, anp_name = caller
    expr = expression(frame)
    did = expr or numpy_name
    twin = anp_spelling(expr, namespace) or anp_name
    return (
        f"{did} converts a value traced by {holder} to a NumPy array: write {twin}, which "
        f"takes it. NumPy hands autodiff a call only for an argument that is a traced "
        f"value itself, not a list holding one, so it converts. {_CATALOGUE}"
    )


def store_message(holder: str, reason: str, frame: FrameType) -> str:
    """Writing a traced value into a plain NumPy array (``out[i] = x``): the ``anp.at``
    spelling of that store first."""
    target = expression(frame) or ""
    match = re.fullmatch(r"(?P<array>[\w.]+)\[(?P<index>.+)\]", target)
    array, index = (match["array"], match["index"]) if match else ("out", "i")
    value = _stored_value(frame) or "x"
    return (
        f"{array}[{index}] = {value} writes a value traced by {holder} into a plain NumPy "
        f"array, which {reason}: write {array} = anp.at({array})[{index}].set({value}). "
        f"Or build the result functionally: anp.array([...]) or anp.stack([...]) of the "
        f"pieces, anp.where(mask, x, {array}). {_CATALOGUE}"
    )


def _stored_value(frame: FrameType) -> str | None:
    """The source of the value a one-line ``a[i] = value`` stores, where it is short."""
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    try:
        (statement,) = ast.parse(line).body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return None
    text = ast.get_source_segment(line, statement.value)
    return text if text and len(text) <= _LONGEST_QUOTE // 2 else None


# NumPy's vectorize converts its arguments to arrays in these methods.
_VECTORIZE_CALLS = {"_get_ufunc_and_otypes", "_vectorize_call", "_vectorize_call_with_signature"}


def numpy_function(
    frame: FrameType | None, has_rule: Callable[[Any], bool]
) -> tuple[str, str] | None:
    """``("numpy.mean(...)", "anp.mean(...)")`` when the NumPy code converting a traced value is
    a public NumPy function that autodiff implements (``has_rule``, which loads the rules
    loaded at first use: ``core/overrides.py``) (``np.mean([x, y])``: a list has
    no ``__array_function__``, so NumPy converts it instead of handing the call over),
    ``np.r_``/``np.c_`` (which call ``np.array`` on their items) or ``np.vectorize``; the
    outermost of the NumPy frames above ``frame``."""
    outer = None
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "numpy":
        code = frame.f_code
        if code.co_filename.endswith("_index_tricks_impl.py"):
            name = "c_" if frame.f_locals.get("self") is np.c_ else "r_"
            return f"numpy.{name}[...]", f"anp.{name}[...]"
        if code.co_filename.endswith("_function_base_impl.py") and (
            code.co_name in _VECTORIZE_CALLS
        ):
            return "numpy.vectorize(f)(...)", "anp.vectorize(f)(...)"
        outer, frame = frame, frame.f_back
    if outer is None:
        return None
    parts = list(itertools.takewhile(lambda p: not p.startswith("_"),
                                     outer.f_globals["__name__"].split(".")))  # fmt: skip
    for n in range(len(parts), 0, -1):  # numpy.linalg._linalg: numpy.linalg, then numpy
        module = ".".join(parts[:n])
        func = getattr(sys.modules.get(module), outer.f_code.co_name, None)
        if func is not None and has_rule(func):
            name = f"{module}.{outer.f_code.co_name}"
            return f"{name}(...)", "anp" + name.removeprefix("numpy") + "(...)"
    return None
