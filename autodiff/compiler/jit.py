"""``jit`` and ``make_graph``: stage a function once per input signature, then replay it.

The signature of a call is what the staged program depends on: the pytree structure
of the arguments, each array's shape and dtype (and its library, when it is not
NumPy), which arguments are Python scalars (weakly typed), the values of the static
arguments, and the type of each ``numpy.random.Generator`` argument.  A jitted
function keeps a bounded cache (LRU) from signatures to staged graphs with their
compiled replays; ``cache_info()`` says how often it staged and for which
signatures.

Called with tracers of transforms outside it, a jitted function binds ``call_p``
(``compiler/call.py``) on its graph, whose rules transform the graph; called with plain
arrays it runs the compiled replay of the optimised graph (``compiler/passes.py``,
``compiler/replay.py``).  The first call with NumPy arrays of a signature runs the staged
graph's implementations one by one instead (``interpret``): code generation costs
more than a run, so it waits for the second call, and a function called once with a
signature never pays for it (``compile_at_once()`` turns that off, for tests).

The compiling tier (``compiler/numba_tier.py``, with numba installed) comes last:
with ``compile="auto"`` a signature called ``HOT_CALLS`` times has its graph's regions
compiled in a background thread, and the calls after that run the kernels once they
are ready (until then, the replay: no call waits for the compiler); ``compile=True``
compiles them with the replay, on the second call; ``compile=False`` never does.
``compiling(mode)`` overrides every function's setting (tests).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import optree

from autodiff.compiler import llvm_tier
from autodiff.compiler.call import call_p
from autodiff.compiler.passes import optimize
from autodiff.compiler.replay import array_kind, compiled, final_graph, fresh_results, interpret
from autodiff.core.args import a_type, check_callable
from autodiff.core.arrays import library_of
from autodiff.core.graph import Graph, OpaqueAval, ShapedArray, aval_of
from autodiff.core.primitive import check_live, current_interpreters
from autodiff.core.tracer import Tracer
from autodiff.debug.nans import checking_nans
from autodiff.debug.rule_checks import checking as checking_rules
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.staging import StagedTensor, eval_graph, innermost_staging, stage

__all__ = ["CacheInfo", "JitFunction", "compile_at_once", "compiling", "jit", "make_graph"]

# Whether a first call compiles its replay at once instead of interpreting the graph.
_at_once: contextvars.ContextVar[bool] = contextvars.ContextVar("compile_at_once", default=False)


@contextlib.contextmanager
def compile_at_once():
    """Inside, a jitted function's first call generates and compiles its replay (as
    every later call runs it) instead of interpreting the staged graph."""
    token = _at_once.set(True)
    try:
        yield
    finally:
        _at_once.reset(token)


# Overrides every jitted function's compile= setting where set (tests, benchmarks).
_forced: contextvars.ContextVar[Any] = contextvars.ContextVar("compiling", default=None)


@contextlib.contextmanager
def compiling(mode: Any):
    """Inside, every jitted function compiles as ``jit(f, compile=mode)`` would
    (``True``: with its replay, synchronously; ``False``: never; ``"auto"``); the
    signatures already compiled keep their kernels."""
    _check_compile(mode)
    token = _forced.set(mode)
    try:
        yield
    finally:
        _forced.reset(token)


def _check_compile(mode: Any) -> None:
    if not (mode is True or mode is False or (isinstance(mode, str) and mode == "auto")):
        raise TransformValueError(
            f"jit(fun, compile={mode!r:.40}): compile must be 'auto' (compile a signature "
            f"once it is called often, in the background), True (compile with the "
            f"replay) or False (NumPy calls only)."
        )


DEFAULT_MAXSIZE = 128


def _positions(static: Any, what: str) -> tuple:
    items = (static,) if isinstance(static, (int, str)) else tuple(static)
    kind = str if what == "static_argnames" else int
    for item in items:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise TransformTypeError(
                f"jit(fun, {what}=...): {what} must be "
                f"{'a str or a tuple of strs' if kind is str else 'an int or a tuple of ints'}, "
                f"got {static!r:.60}."
            )
    return items


class _Arguments:
    """How a function's arguments split into static and traced ones."""

    def __init__(self, fun: Callable, static_argnums: Any, static_argnames: Any) -> None:
        self.argnums = set(_positions(static_argnums, "static_argnums"))
        self.argnames = set(_positions(static_argnames, "static_argnames"))
        try:  # a static position is static when passed by name too, and vice versa
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            params = None
        if params is not None:
            _check_static(params, self.argnums, self.argnames)
        params = params or []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                           p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
        for i in list(self.argnums):
            if -len(positional) <= i < len(positional):
                self.argnames.add(positional[i])
        for name in list(self.argnames):
            if name in positional:
                self.argnums.add(positional.index(name))
        self.any = bool(self.argnums or self.argnames)

    def split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple]:
        """(traced positional args, traced keyword args, static key)."""
        if not self.any:
            return args, kwargs, ()
        n = len(args)
        static_pos = {i % n for i in self.argnums if -n <= i < n}
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.argnames}
        statics = tuple((i, args[i]) for i in sorted(static_pos)) + tuple(
            sorted((k, v) for k, v in kwargs.items() if k in self.argnames)
        )
        key = []
        for where, value in statics:
            try:
                hash(value)
            except TypeError:
                what = f"argument {where}" if isinstance(where, int) else f"argument {where!r}"
                raise TransformTypeError(
                    f"jit: the static {what} is {a_type(value)}, which is not hashable; "
                    f"static arguments are part of the cache key, so they must be hashable "
                    f"(a tuple instead of a list, a frozen dataclass, ...). Pass arrays as "
                    f"traced (non-static) arguments."
                ) from None
            key.append((where, type(value), value))
        return dyn_args, dyn_kwargs, tuple(key)

    def merge(self, args: tuple, dyn_args: Sequence, dyn_kwargs: dict, kwargs: dict):
        if not self.any:
            return tuple(dyn_args), dyn_kwargs
        n = len(args)
        static_pos = {i % n for i in self.argnums if -n <= i < n}
        it = iter(dyn_args)
        full = tuple(args[i] if i in static_pos else next(it) for i in range(n))
        full_kwargs = {k: (v if k in self.argnames else dyn_kwargs[k]) for k, v in kwargs.items()}
        return full, full_kwargs


def _check_static(params: list, argnums: set, argnames: set) -> None:
    """Static positions and names the function's signature cannot take raise, as JAX's
    do: silently ignored, they would leave the argument traced, and the error that
    follows would ask to mark static an argument the user did mark."""
    kinds = {p.kind for p in params}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        wrong = sorted(i for i in argnums if not -len(positional) <= i < len(positional))
        if wrong:
            raise TransformValueError(
                f"jit: static_argnums={tuple(sorted(argnums))} names position(s) {wrong}, but "
                f"the function takes {len(positional)} positional argument(s) "
                f"({', '.join(p.name for p in positional) or 'none'}); count from 0, or name "
                f"the argument in static_argnames."
            )
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        names = {p.name for p in params if p.kind != inspect.Parameter.POSITIONAL_ONLY}
        wrong = sorted(argnames - names)
        if wrong:
            raise TransformValueError(
                f"jit: static_argnames names {wrong}, which the function has no parameter "
                f"for (it takes {', '.join(p.name for p in params) or 'none'}); check the "
                f"spelling."
            )


_SCALARS = (bool, int, float, complex)


def _leaf_key(leaf: Any, path: str) -> tuple[Any, bool]:
    """The part of the signature one argument leaf contributes, and whether it is a tracer."""
    cls = type(leaf)
    if cls is np.ndarray:
        return (leaf.shape, leaf.dtype), False
    if isinstance(leaf, Tracer):
        check_live(leaf)
        if isinstance(leaf, StagedTensor) and isinstance(leaf.aval, OpaqueAval):
            return leaf.aval.type, True
        return (tuple(leaf.shape), leaf.dtype), True
    if cls in _SCALARS:
        return cls, False
    if isinstance(leaf, np.generic):
        return (leaf.dtype, np.generic), False
    if isinstance(leaf, np.random.Generator):
        return cls, False
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype") and hasattr(cls, "__array_function__"):
        return (cls, tuple(leaf.shape), leaf.dtype), False
    raise TransformTypeError(
        f"jit: {path} is {a_type(leaf)}, which is neither an array nor a Python or NumPy "
        f"scalar, so it cannot be traced. Mark the argument static (jit(fun, "
        f"static_argnums=...) or static_argnames=...) if the program depends on its value, "
        f"or pass it through a closure."
    )


class CacheInfo(NamedTuple):
    """What a jitted function's cache holds: ``traces`` (stagings so far), ``hits``,
    ``misses``, ``size``, ``maxsize``, and the ``signatures`` it holds, readable."""

    traces: int
    hits: int
    misses: int
    size: int
    maxsize: int
    signatures: list


class _Entry:
    __slots__ = ("calls", "effects", "flat_key", "graph", "out_tree", "ran", "replay",
                 "signature", "single", "watch")  # fmt: skip

    def __init__(self, graph: Graph, out_tree: Any, signature: str, flat_key: Any) -> None:
        self.graph = graph
        self.out_tree = out_tree
        self.signature = signature
        self.replay: Callable | None = None
        self.ran = False  # whether a call ran it (the first is interpreted)
        # compile="auto": calls of the replay are counted until HOT_CALLS
        self.watch = False
        self.calls = 0
        self.single = out_tree.is_leaf()  # the function returns one array
        # the key of the fast path, when the arguments are positional NumPy arrays only
        self.flat_key = flat_key
        # random draws (or control flow, whose functions may draw): under a transform
        # they must meet its interpreters, as eagerly (vmap's randomness)
        self.effects = any(eqn.prim.effectful for eqn in graph.eqns)


class _Claim:
    """A signature being staged by one thread: the others wait for it, unless waiting
    would close a cycle of threads waiting for each other (mutually recursive jitted
    functions staged from two threads): then they stage it themselves."""

    __slots__ = ("done", "entry", "owner")

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self.done = threading.Event()
        self.entry: _Entry | None = None


# thread -> the thread whose staging it waits for; read and written under _waits_lock only
_waits: dict[int, int] = {}
_waits_lock = threading.Lock()


def _wait_for(claim: _Claim) -> bool:
    """Wait until ``claim``'s staging ends, unless its thread waits (transitively) for
    this one, or is this one; whether it waited."""
    me = threading.get_ident()
    with _waits_lock:
        other: int | None = claim.owner
        while other is not None:
            if other == me:
                return False
            other = _waits.get(other)
        _waits[me] = claim.owner
    try:
        claim.done.wait()
    finally:
        with _waits_lock:
            del _waits[me]
    return True


def _debugging() -> bool:
    """Under ``debug_nans()`` or ``debug_rules()``: what they check runs in ``fun`` itself
    (rules, each primitive's values), which a replay skips."""
    return checking_nans() or checking_rules.get()


def _describe(avals: Sequence[Any], statics: tuple, kind: str) -> str:
    parts = []
    for a in avals:
        text = a.str_short()
        parts.append(text + (" (Python scalar)" if getattr(a, "weak_type", False) else ""))
    for where, _, value in statics:
        parts.append(f"{where}={value!r:.40} (static)")
    library = "" if kind == "numpy" else f" on {kind} arrays"
    return f"({', '.join(parts)}){library}"


class JitFunction:
    """A jitted function (see :func:`jit`)."""

    def __init__(self, fun: Callable, static_argnums: Any, static_argnames: Any,
                 maxsize: int, compile: Any = "auto") -> None:  # fmt: skip
        functools.update_wrapper(self, fun)
        self.fun = fun
        self._compile = compile
        self._args = _Arguments(fun, static_argnums, static_argnames)
        self._name = getattr(fun, "__name__", "function")
        self._entries: OrderedDict[Any, _Entry] = OrderedDict()
        self._flat: dict[Any, _Entry] = {}  # the fast path's view of the same entries
        self._claims: dict[Any, _Claim] = {}  # signatures being staged now
        # guards the dictionaries above; never held while user code runs (staging)
        self._lock = threading.Lock()
        self._maxsize = maxsize
        self._traces = self._hits = self._misses = 0

    def _signature(self, args: tuple, kwargs: dict):
        dyn_args, dyn_kwargs, statics = self._args.split(args, kwargs)
        leaves, treedef = optree.tree_flatten((dyn_args, dyn_kwargs))
        traced = False
        keys = []
        for i, leaf in enumerate(leaves):
            key, is_tracer = _leaf_key(leaf, f"argument leaf {i}")
            traced = traced or is_tracer
            keys.append(key)
        return (treedef, statics, tuple(keys)), leaves, treedef, traced

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _debugging():  # the checks run in fun's own primitives, on every call
            return self.fun(*args, **kwargs)
        if not kwargs:  # the fast path: positional NumPy arrays, seen before
            key: Any = []
            for a in args:
                if type(a) is not np.ndarray:
                    break
                key += (a.shape, a.dtype)
            else:
                entry = self._flat.get(tuple(key))
                if entry is not None and not (entry.effects and current_interpreters()):
                    self._hits += 1
                    out = entry.replay(*args)  # type: ignore[misc]
                    if entry.watch:
                        self._count(entry)
                    return (
                        out[0] if entry.single else optree.tree_unflatten(entry.out_tree, list(out))
                    )
        key, leaves, treedef, traced = self._signature(args, kwargs)
        if not traced and innermost_staging() is not None:
            # Inside a staging, plain arguments: fun runs, so that the staging records
            # what it does (its draws then draw at every call of the outer function).
            return self.fun(*args, **kwargs)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._fill(key, args, kwargs, leaves, treedef)
        else:
            self._hits += 1
            with contextlib.suppress(KeyError):  # evicted by another thread meanwhile
                self._entries.move_to_end(key)
        captured = entry.graph.cache.get("captured")
        if traced or captured:
            out = call_p.bind(*leaves, *(captured or ()), graph=entry.graph, name=self._name)
        elif entry.effects and current_interpreters():
            # draws under a transform: each meets the interpreters as it would eagerly
            # (a vmap's randomness), the graph evaluated at their level
            out = fresh_results(eval_graph(entry.graph, *leaves), entry.graph, leaves)
        else:
            replay = entry.replay
            if replay is None:
                kind = array_kind(leaves)
                if not entry.ran and kind[0] == "numpy" and not _at_once.get():
                    entry.ran = True
                    out = interpret(entry.graph, *leaves)
                    return optree.tree_unflatten(entry.out_tree, list(out))
                replay = entry.replay = self._replay(entry, kind)
                if entry.flat_key is not None:
                    with self._lock:
                        self._flat[entry.flat_key] = entry
            out = replay(*leaves)
            if entry.watch:
                self._count(entry)
        return optree.tree_unflatten(entry.out_tree, list(out))

    # --- the compiling tier --------------------------------------------------------------------

    def _mode(self) -> Any:
        forced = _forced.get()
        return self._compile if forced is None else forced

    def _replay(self, entry: _Entry, kind: tuple) -> Callable:
        """The replay a signature's calls run from now: its kernels where ``compile=True``
        (and there are regions worth compiling), else the NumPy replay, whose calls
        ``compile="auto"`` counts."""
        replay = compiled(entry.graph, kind[0], kind[1], fresh=True)
        mode = self._mode()
        if kind[0] != "numpy" or mode is False or not llvm_tier.available():
            return replay
        if mode is True:
            return llvm_tier.fused_replay(entry.graph, fresh=True) or replay
        entry.watch = True
        return replay

    def _count(self, entry: _Entry) -> None:
        entry.calls += 1
        if entry.calls >= llvm_tier.HOT_CALLS:
            entry.watch = False

            def compile_then_swap() -> None:
                kernels = llvm_tier.fused_replay(entry.graph, fresh=True)
                if kernels is not None:
                    entry.replay = kernels  # the next call runs it

            llvm_tier.compile_later(compile_then_swap)

    def _stage(self, args: tuple, kwargs: dict, leaves: list, treedef: Any, transform: str):
        avals = [_aval(leaf) for leaf in leaves]
        cell: list = []

        def flat(*xs):
            dyn_args, dyn_kwargs = optree.tree_unflatten(treedef, list(xs))
            full_args, full_kwargs = self._args.merge(args, dyn_args, dyn_kwargs, kwargs)
            out = self.fun(*full_args, **full_kwargs)
            out_leaves, out_tree = optree.tree_flatten(out)
            cell[:] = [out_tree]
            return out_leaves

        staged = stage(flat, avals, transform=transform, name=self._name,
                       like=library_of(leaves))  # fmt: skip
        graph = staged.graph
        graph.in_tree, graph.out_tree = treedef, cell[0]
        if staged.captured:
            graph.cache["captured"] = staged.captured
        return graph, avals

    def _fill(self, key: Any, args: tuple, kwargs: dict, leaves: list, treedef: Any) -> _Entry:
        """The entry for ``key``, staged by this thread or, where another is staging it,
        by that one; no lock is held while ``fun`` is staged (it may call other jitted
        functions, which other threads may be staging)."""
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    return entry
                claim = self._claims.get(key)
                if claim is None:
                    claim = self._claims[key] = _Claim()
                    break
            if not _wait_for(claim):
                claim = _Claim()  # a cycle of waiting threads: stage it here as well
                break
            if claim.entry is not None:
                return claim.entry
            # that staging failed: try again (and raise its error here, if it is ours too)
        try:
            entry = self._staged_entry(key, args, kwargs, leaves, treedef)
            # a graph that closed over this call's tracers is this call's alone
            claim.entry = None if "captured" in entry.graph.cache else entry
        finally:
            with self._lock:
                if self._claims.get(key) is claim:
                    del self._claims[key]
            claim.done.set()
        return entry

    def _staged_entry(self, key: Any, args: tuple, kwargs: dict, leaves: list,
                      treedef: Any) -> _Entry:  # fmt: skip
        graph, avals = self._stage(args, kwargs, leaves, treedef, "jit")
        kind = array_kind(leaves)[0]
        flat = not kwargs and all(type(a) is np.ndarray for a in args)
        flat_key = tuple(x for a in args for x in (a.shape, a.dtype)) if flat else None
        entry = _Entry(graph, graph.out_tree, _describe(avals, key[1], kind), flat_key)
        with self._lock:
            self._misses += 1
            self._traces += 1
            if "captured" in graph.cache:  # closed over tracers of this call: stage again
                return entry
            entry = self._entries.setdefault(key, entry)  # a racing thread's, if it won
            while len(self._entries) > self._maxsize:
                _, old = self._entries.popitem(last=False)
                self._flat.pop(old.flat_key, None)
        return entry

    # --- inspection --------------------------------------------------------------------

    def cache_info(self) -> CacheInfo:
        """How many times the function was staged, and for which signatures."""
        with self._lock:
            signatures = [e.signature for e in self._entries.values()]
            return CacheInfo(self._traces, self._hits, self._misses, len(self._entries),
                             self._maxsize, signatures)  # fmt: skip

    def clear_cache(self) -> None:
        with self._lock:
            self._entries.clear()
            self._flat.clear()

    def graph(self, *args: Any, **kwargs: Any) -> Graph:
        """The optimised graph that calls with these arguments replay (its ``log``
        says what each pass removed)."""
        key, leaves, treedef, _ = self._signature(args, kwargs)
        entry = self._entries.get(key) or self._fill(key, args, kwargs, leaves, treedef)
        return final_graph(entry.graph, array_kind(leaves)[0])

    def source(self, *args: Any, **kwargs: Any) -> str:
        """The Python source of the replay that calls with these arguments run, and of
        its compiled kernels once the compiling tier made them."""
        key, leaves, treedef, _ = self._signature(args, kwargs)
        entry = self._entries.get(key) or self._fill(key, args, kwargs, leaves, treedef)
        replay: Any = entry.replay
        if replay is None:
            replay = compiled(entry.graph, *array_kind(leaves))
        kernels = getattr(replay, "kernels", ())
        return "\n".join([replay.source, *(k.source for k in kernels)])

    def __repr__(self) -> str:
        return f"<jit of {self.fun!r}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # methods: jit per instance call
        if obj is None:
            return self
        return functools.partial(self, obj)


def _aval(leaf: Any) -> Any:
    if isinstance(leaf, StagedTensor):
        return leaf.aval  # a Generator argument staged by an outer jit stays opaque
    if isinstance(leaf, Tracer):
        return ShapedArray(leaf.shape, leaf.dtype)
    if isinstance(leaf, np.random.Generator):
        return OpaqueAval(type(leaf))
    return aval_of(leaf)


def jit(
    fun: Callable | None = None,
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    maxsize: int = DEFAULT_MAXSIZE,
    compile: bool | str = "auto",
) -> Any:
    """Stage ``fun`` once per input signature and replay it as compiled NumPy calls.

    The first call with a new signature (the pytree structure of the arguments, each
    array's shape, dtype and library, which leaves are Python scalars, the values of
    the static arguments) runs ``fun`` on abstract values and records every primitive
    it calls, then runs the recorded graph once as it is.  The second call simplifies
    the graph (``compiler/passes.py``) and compiles it to a straight-line Python function of
    NumPy calls that reuses dead buffers; later calls with that signature run only the
    compiled function.  Under a transform (``grad(jit(f))``,
    ``vmap(jit(f))``, ``jvp``) the transform applies to the graph, and the result is
    staged and compiled once as well.

    Inside ``fun``, arguments are staged values: their shapes and dtypes are known,
    their values are not, so Python control flow on them raises
    ``ConcretizationError``; mark such arguments static (``static_argnums``,
    ``static_argnames``: positions and names, hashable values), use ``anp.where``, or
    the control-flow primitives (``cond``, ``while_loop``, ``scan``: staged once).
    ``maxsize`` bounds the cache (least recently used signatures go first);
    ``f.cache_info()`` tells what it holds, ``f.graph(*args)`` and ``f.source(*args)``
    show the optimised graph and the replayed code.

    ``compile``: with numba installed (``pip install 'autodiff[compile]'``), the
    regions of the graph that lower (elementwise equations, fused into one loop each;
    loops whose contents all lower, iterations included) are compiled to machine code.
    ``"auto"`` (the default) does it for a signature called often, in another process
    started from a background thread, and swaps the kernels in when they are ready (no
    call waits for them);
    ``True`` compiles with the replay, on the second call; ``False`` never compiles.
    Kernels are kept on disk across processes (``autodiff.compiler.numba_tier``).

    The contract: ``jit(fun)(x)`` behaves like ``fun(x)`` in everything a NumPy user
    can observe, except time, on every call (the first, the compiled ones):

    - arrays ``fun`` closes over (its globals, a bound method's attributes) are
      captured by value when it is staged: writing into them later changes neither
      the value nor any derivative of the jitted function (stage again, with a new
      ``jit``, to see new values);
    - every result is an array of its own, sharing memory with no argument, constant
      or other result, so the caller may write into it; arguments are never written;
    - the graph's rewrites are exact in IEEE arithmetic (``x + 0.0`` stays: it is not
      ``x`` for ``x = -0.0``);
    - ``no_grad()`` inside ``fun`` (or its ``cond`` branches, ``scan`` bodies) means
      what it means eagerly for every transform of the jitted function;
      ``debug_nans()`` and ``debug_rules()`` check every call (the function runs as it
      is, so the first NaN is found and named); ``explain`` lists its primitives;
    - random draws (``anp.random``, a ``Generator`` argument's methods) draw at every
      call, and under ``vmap`` follow its ``randomness`` as eagerly;
    - no lock is held while ``fun`` is staged (jitted functions may call each other
      from several threads); the caches are bounded and release what they evict.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> @autodiff.jit
    ... def f(x, w):
    ...     return anp.tanh(x @ w).sum()
    >>> x, w = np.ones((2, 3)), np.full(3, 0.1)
    >>> bool(np.isclose(f(x, w), np.tanh(x @ w).sum()))
    True
    >>> autodiff.grad(f, argnums=1)(x, w).round(4).tolist()
    [1.8303, 1.8303, 1.8303]
    >>> f.cache_info().traces
    1
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums, compile=compile,
                                 static_argnames=static_argnames, maxsize=maxsize)  # fmt: skip
    check_callable(fun, "jit")
    if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1:
        raise TransformValueError(f"jit(fun, maxsize={maxsize!r}): maxsize must be a positive int.")
    _check_compile(compile)
    if compile is True and not llvm_tier.available():
        raise TransformValueError(
            f"jit(fun, compile=True): the compiling tier is not available because "
            f"{llvm_tier.why_not()}; use compile='auto' (compiles where it can) or False."
        )
    return JitFunction(fun, static_argnums, static_argnames, maxsize, compile)


def make_graph(
    fun: Callable,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    *,
    optimized: bool = False,
) -> Callable[..., Graph]:
    """``make_graph(fun)(*args)``: the program ``fun`` runs on arguments like ``args``.

    The :class:`~autodiff.core.graph.Graph` lists the inputs, one equation per primitive
    call (primitive, static parameters, input and output variables with their shapes
    and dtypes) and the outputs; ``print`` it, or ``graph.draw()`` it.  Transforms
    inside ``fun`` show what they emit: ``make_graph(grad(f))(x)`` is ``f``'s forward
    pass followed by the VJP rules that ran.  With ``optimized=True`` the graph is the
    one ``jit`` replays (after the passes; its ``log`` says what they removed).
    Arrays ``fun`` closes over are constants of the graph.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> print(autodiff.make_graph(lambda x: anp.sin(x) * 2.0)(np.zeros(3)))
    { lambda a:f64[3] . let
        b:f64[3] = sin a
        c:f64[3] = multiply b 2.0
      in (c,) }
    """
    check_callable(fun, "make_graph")
    jitted = JitFunction(fun, static_argnums, static_argnames, 1)

    @functools.wraps(fun)
    def make(*args: Any, **kwargs: Any) -> Graph:
        _, leaves, treedef, _ = jitted._signature(args, kwargs)
        graph, _ = jitted._stage(args, kwargs, leaves, treedef, "make_graph")
        return optimize(graph, inline_rules=True) if optimized else graph

    return make
