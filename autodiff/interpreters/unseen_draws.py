"""NumPy's draws that ``vmap`` and ``jit`` cannot see, caught after the call where they
are wrong.

A ``numpy.random.Generator`` the vmapped function closes over (or names as a global),
and NumPy's global functions (``np.random.normal``), are not arguments: vmap cannot make
their draws follow ``randomness`` (a Generator *argument* it can, ``batching.py``).
Under ``randomness="error"``, where no draw is right, vmap reads their states before the
call and checks after it that they did not advance: a draw there gave every example the
same value.  Which sources a function reaches is looked up once per function
(:func:`autodiff.core.reach.refers_to`, within a bound); NumPy's global state is read
only where the function's code names one of its draws, since reading it costs about a
vmap call.  A generator reached only through another object's attributes or another
module's function is not seen (the documentation says so).  ``jit`` checks the same
sources while it stages a function: a draw there would be replayed as a constant.
"""

from __future__ import annotations

import functools
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core.reach import global_names, refers_to
from autodiff.errors import TransformValueError

__all__ = ["check_not_drawn", "unseen_sources"]

_LOOK_AT_MOST = 64  # objects visited per call, through closures and the globals code names


@functools.cache
def _global_draws() -> frozenset[str]:
    """np.random's draws by name; not "random" itself, which names the module too (so
    np.random.random() alone is not checked: a function naming "random" is common).
    Built at first use: ``np.random`` is a module NumPy itself loads only when named
    (with ``secrets``, ``hashlib``), which a program that draws nothing never does."""
    names = frozenset(n for n in dir(np.random.RandomState) if not n.startswith("_"))
    return names - {"get_state", "set_state", "seed", "random"}


class _GlobalState:
    """NumPy's global random state (``np.random.seed``), as a stream vmap watches."""

    def __repr__(self) -> str:
        return "numpy.random's global state"


def _state(source: Any) -> Any:
    if isinstance(source, np.random.Generator):
        return source.bit_generator.state
    if isinstance(source, np.random.RandomState):
        return source.get_state(legacy=False)
    return np.random.get_state(legacy=False)  # (one read: about a vmap call's time)


_sources: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # func -> its sources


def unseen_sources(func: Callable, also: tuple = ()) -> list[tuple[Any, Any]]:
    """The random streams func reaches outside its arguments (and those in ``also``: a
    jitted function's static arguments, looked for at each call), with their states now."""
    try:
        sources = _sources.get(func)
    except TypeError:  # not weakly referable (a ufunc): nothing of its own to find
        sources = ()
    else:
        if sources is None:
            sources = _sources[func] = _find_sources(func)
    if also:
        sources = (*sources, *(s for s in _find_sources(also) if all(s is not t for t in sources)))
    return [(source, _state(source)) for source in sources]


def _find_sources(func: Any) -> tuple[Any, ...]:
    """Looked for once per function (the search walks what it refers to)."""
    found: dict[int, Any] = {}
    names: set[str] = set()
    todo: list[Any] = [func]
    seen: set[int] = set()
    # no Generator exists before NumPy loads np.random: a program that never draws skips it
    kinds = (np.random.Generator, np.random.RandomState) if "numpy.random" in sys.modules else ()
    while todo and len(seen) < _LOOK_AT_MOST:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if kinds and isinstance(obj, kinds):
            found[id(obj)] = obj
            continue
        if isinstance(obj, types.BuiltinMethodType):  # rng.normal itself
            todo.append(obj.__self__)
        if isinstance(obj, types.FunctionType):
            names.update(global_names(obj.__code__))
        todo += refers_to(obj)
    if "random" in names and names & _global_draws():  # np.random.normal(...) in func's code
        found[0] = _GlobalState()
    return tuple(found.values())


# What each kind of source is, and the spelling that draws where it is wrong: under a
# vmap (following its randomness), and under jit (at every call).
_SOURCES = {  # by the kind's name: np.random is loaded at first use (above)
    "Generator": (
        "a numpy.random.Generator it closes over",
        "pass the Generator as an argument with in_dims=None, and its draws follow randomness",
        "write anp.random.normal(rng, shape), or pass the Generator as an argument; both "
        "draw at every call",
    ),
    "RandomState": (
        "a numpy.random.RandomState it closes over",
        "draw from a Generator passed as an argument (in_dims=None), which follows randomness",
        "draw from a numpy.random.Generator passed as an argument, which draws at every call",
    ),
    "_GlobalState": (
        "NumPy's global random functions (np.random.normal, ...)",
        "write anp.random.normal(...) (any np.random name), which follows randomness",
        "write anp.random.normal(...) (any np.random name), which draws at every call",
    ),
}


def _texts(source: Any) -> tuple[str, str, str]:
    if isinstance(source, _GlobalState):
        return _SOURCES["_GlobalState"]
    return _SOURCES["Generator" if isinstance(source, np.random.Generator) else "RandomState"]


def check_not_drawn(source: Any, state: Any, transform: str, staging: bool = False) -> None:
    """Raise if ``source`` drew since its ``state`` was read, naming the fix: under
    ``transform``, a vmap, or (``staging``) a jit staging its function, where the draw
    would be a constant of the graph, the same value at every call."""
    if _same_state(_state(source), state):
        return
    what, under_vmap, under_jit = _texts(source)
    if staging:
        raise TransformValueError(
            f"jit: the function drew from {what} while being staged: {under_jit}. NumPy "
            f"drew once, when {transform} staged it ({source!r}), so every call would "
            f"return that one draw. For a constant on purpose, draw it outside the function "
            f"and close over it."
        )
    raise TransformValueError(
        f"vmap: func drew from {what}, one draw for the whole batch: {under_vmap}. NumPy drew "
        f"once ({source!r}), so every example of {transform} got the same value. With "
        f"randomness='different' each example gets its own draws (anp.random.normal(rng, "
        f"shape) too); randomness='same' says one shared draw is meant."
    )


def _same_state(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
        )
    return bool(np.array_equal(a, b))
