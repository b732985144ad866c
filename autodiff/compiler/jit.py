"""``jit`` and ``make_graph``: stage a function once per input signature, then replay it.

A jitted function keeps a bounded cache (LRU) from signatures (``signature.py``: the
arguments' structure, shapes, dtypes, libraries, Python scalars, static values) to
entries (``tiers.Entry``): the ``Traced`` stage of the signature and what its calls run
now; ``cache_info()`` says how often it staged and for which signatures.

Called with tracers of transforms outside it, a jitted function binds ``call_p``
(``compiler/call.py``) on its graph, whose rules transform the graph; called with plain
arrays it runs the signature's stages (``stages.py``) as ``tiers.py`` moves its calls
on: the staged graph interpreted, then its replay, then (a hot signature, with a
backend) its kernels.  The stages are public: ``f.trace(*args)`` is the ``Traced``
stage, from which ``.lower()`` and ``.compile()`` go on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import optree

from autodiff.compiler import tiers
from autodiff.compiler.call import call_p
from autodiff.compiler.claims import Claim, wait_for
from autodiff.compiler.passes import optimize
from autodiff.compiler.replay import array_kind, fresh_results, interpret
from autodiff.compiler.signature import Arguments, describe, leaf_aval, leaf_key
from autodiff.compiler.stages import Lowered, Traced, default_backend, optimized, replay
from autodiff.core.args import check_callable
from autodiff.core.arrays import library_of
from autodiff.core.graph import Graph
from autodiff.core.stack import current_interpreters
from autodiff.debug import checking_nans
from autodiff.debug import rules_switch as checking_rules
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.staging import eval_graph, innermost_staging, stage
from autodiff.interpreters.unseen_draws import check_not_drawn, unseen_sources

__all__ = ["CacheInfo", "JitFunction", "jit", "make_graph"]

DEFAULT_MAXSIZE = 128


class CacheInfo(NamedTuple):
    """What a jitted function's cache holds: ``traces`` (stagings so far), ``hits``,
    ``misses``, ``size``, ``maxsize``, and the ``signatures`` it holds, readable."""

    traces: int
    hits: int
    misses: int
    size: int
    maxsize: int
    signatures: list


def _debugging() -> bool:
    """Under ``debug_nans()`` or ``debug_rules()``: what they check runs in ``fun`` itself
    (rules, each primitive's values), which a replay skips."""
    return checking_nans() or checking_rules.get()


class JitFunction:
    """A jitted function (see :func:`jit`)."""

    def __init__(self, fun: Callable, static_argnums: Any, static_argnames: Any,
                 maxsize: int, compile: Any = "auto") -> None:  # fmt: skip
        functools.update_wrapper(self, fun)
        self.fun = fun
        self._compile = compile
        self._args = Arguments(fun, static_argnums, static_argnames)
        self._name = getattr(fun, "__name__", "function")
        self._entries: OrderedDict[Any, tiers.Entry] = OrderedDict()
        self._flat: dict[Any, tiers.Entry] = {}  # the fast path's view of the same entries
        self._claims: dict[Any, Claim] = {}  # signatures being staged now
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
            key, is_tracer = leaf_key(leaf, f"argument leaf {i}")
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
                    if entry.watch:  # compile="auto", not hot yet: timed
                        start = time.perf_counter()
                        out = entry.run(*args)  # type: ignore[misc]
                        tiers.count(entry, args, time.perf_counter() - start)
                    else:
                        out = entry.run(*args)  # type: ignore[misc]
                    return (
                        out[0]
                        if entry.single
                        else optree.tree_unflatten(entry.traced.out_tree, list(out))
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
        staged = entry.traced
        if traced or staged.captured:
            tiers.set_mode(staged.graph, self._compile)  # (tiers.call_graph reads it)
            out = call_p.bind(*leaves, *staged.captured, graph=staged.graph, name=self._name)
        elif entry.effects and current_interpreters():
            # draws under a transform: each meets the interpreters as it would eagerly
            # (a vmap's randomness), the graph evaluated at their level
            out = fresh_results(eval_graph(staged.graph, *leaves), staged.graph, leaves)
        else:
            run = entry.run
            if run is None:
                kind = array_kind(leaves)
                if not entry.ran and kind[0] == "numpy" and not tiers.at_once():
                    entry.ran = True
                    # its loops' bodies run through tiers.call_graph: as this function
                    tiers.set_mode(staged.graph, tiers.mode_of(self._compile))
                    out = interpret(staged.graph, *leaves)
                    return optree.tree_unflatten(staged.out_tree, list(out))
                run = entry.run = tiers.first_run(entry, kind, leaves, self._compile)
                if entry.flat_key is not None:
                    with self._lock:
                        self._flat[entry.flat_key] = entry
            start = time.perf_counter()
            out = run(*leaves)
            if entry.watch:
                tiers.count(entry, leaves, time.perf_counter() - start)
        return optree.tree_unflatten(staged.out_tree, list(out))

    # --- staging -------------------------------------------------------------------------------

    def _stage(self, args: tuple, kwargs: dict, leaves: list, treedef: Any,
               transform: str) -> Traced:  # fmt: skip
        avals = [leaf_aval(leaf) for leaf in leaves]
        cell: list = []

        def flat(*xs):
            dyn_args, dyn_kwargs = optree.tree_unflatten(treedef, list(xs))
            full_args, full_kwargs = self._args.merge(args, dyn_args, dyn_kwargs, kwargs)
            out = self.fun(*full_args, **full_kwargs)
            out_leaves, out_tree = optree.tree_flatten(out)
            cell[:] = [out_tree]
            return out_leaves

        # NumPy's draws that staging cannot see would be replayed as constants
        statics = self._args.split(args, kwargs)[2]
        also = tuple(value for _, _, value in statics)  # a Generator given as static
        unseen = unseen_sources(self.fun, also) if transform == "jit" else ()
        staged = stage(flat, avals, transform=transform, name=self._name,
                       like=library_of(leaves))  # fmt: skip
        for source, state in unseen:
            check_not_drawn(source, state, f"jit({self._name})", staging=True)
        graph = staged.graph
        graph.in_tree, graph.out_tree = treedef, cell[0]
        kind = array_kind(leaves)[0]
        return Traced(graph, tuple(staged.captured), treedef, cell[0],
                      describe(avals, statics, kind), kind)  # fmt: skip

    def _fill(self, key: Any, args: tuple, kwargs: dict, leaves: list,
              treedef: Any) -> tiers.Entry:  # fmt: skip
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
                    claim = self._claims[key] = Claim()
                    break
            if not wait_for(claim):
                claim = Claim()  # a cycle of waiting threads: stage it here as well
                break
            if claim.entry is not None:
                return claim.entry
            # that staging failed: try again (and raise its error here, if it is ours too)
        try:
            entry = self._staged_entry(key, args, kwargs, leaves, treedef)
            # a graph that closed over this call's tracers is this call's alone
            claim.entry = None if entry.traced.captured else entry
        finally:
            with self._lock:
                if self._claims.get(key) is claim:
                    del self._claims[key]
            claim.done.set()
        return entry

    def _staged_entry(self, key: Any, args: tuple, kwargs: dict, leaves: list,
                      treedef: Any) -> tiers.Entry:  # fmt: skip
        traced = self._stage(args, kwargs, leaves, treedef, "jit")
        flat = not kwargs and all(type(a) is np.ndarray for a in args)
        flat_key = tuple(x for a in args for x in (a.shape, a.dtype)) if flat else None
        entry = tiers.Entry(traced, flat_key)
        with self._lock:
            self._misses += 1
            self._traces += 1
            if traced.captured:  # closed over tracers of this call: stage again
                return entry
            entry = self._entries.setdefault(key, entry)  # a racing thread's, if it won
            while len(self._entries) > self._maxsize:
                _, old = self._entries.popitem(last=False)
                self._flat.pop(old.flat_key, None)
        return entry

    def _entry(self, args: tuple, kwargs: dict) -> tuple[tiers.Entry, list, Any]:
        """The entry of calls like this one (staged now if need be), the leaves, the key."""
        key, leaves, treedef, _ = self._signature(args, kwargs)
        entry = self._entries.get(key) or self._fill(key, args, kwargs, leaves, treedef)
        return entry, leaves, key

    # --- inspection --------------------------------------------------------------------

    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """The ``Traced`` stage of calls like this one (``compiler/stages.py``): the
        graph as staged (``.graph``, ``.as_text()``), from which ``.lower()`` (the
        regions that compile, each kernel's source, which equations stay NumPy calls,
        ``.cost_analysis()``) and ``.compile()`` (a callable, with its
        ``compile_time``) go on, after JAX's ``jit(f).trace(x).lower().compile()``.
        Staged once per signature, as the calls stage it.

        >>> import numpy as np, autodiff, autodiff.numpy as anp
        >>> f = autodiff.jit(lambda x: anp.cumsum(anp.tanh(x) * 2.0 + 1.0) * x)
        >>> traced = f.trace(np.linspace(0.0, 1.0, 4))
        >>> print(traced.as_text())
        { lambda a:f64[4] . let
            b:f64[4] = tanh a
            c:f64[4] = multiply b 2.0
            d:f64[4] = add c 1.0
            e:f64[4] = cumsum[axis=0] d
            f:f64[4] = multiply e a
          in (f,) }
        >>> [eqn.prim.name for eqn in traced.lower().numpy_calls]  # the rest: one kernel
        ['cumsum', 'multiply']
        """
        entry, leaves, key = self._entry(args, kwargs)
        kind, like = array_kind(leaves)
        layouts = tuple(type(a) is np.ndarray and a.flags.c_contiguous for a in leaves)
        check = functools.partial(self._check, entry.traced.signature, key)
        return dataclasses.replace(entry.traced, kind=kind, like=like, layouts=layouts, check=check)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """``self.trace(*args, **kwargs).lower()``, as JAX's ``jit(f).lower(x)``.

        >>> import numpy as np, autodiff, autodiff.numpy as anp
        >>> lowered = autodiff.jit(lambda x: anp.exp(-x * x) * 2.0).lower(np.ones(4))
        >>> [r.primitives for r in lowered.regions], lowered.numpy_calls  # each name once
        ([['negative', 'multiply', 'exp']], [])
        """
        return self.trace(*args, **kwargs).lower()

    def _check(self, signature: str, key: Any, args: tuple, kwargs: dict) -> list:
        """The leaves of ``args``, where they have the signature ``key``."""
        got, leaves, _, _ = self._signature(args, kwargs)
        if got != key:
            raise TransformTypeError(
                f"jit(...).trace(...).compile(): compiled for arguments {signature}, called "
                f"with other ones; trace and compile again for these (or call the jitted "
                f"function, which stages each signature once)."
            )
        return leaves

    def cache_info(self) -> CacheInfo:
        """How many times the function was staged, and for which signatures."""
        with self._lock:
            signatures = [e.traced.signature for e in self._entries.values()]
            return CacheInfo(self._traces, self._hits, self._misses, len(self._entries),
                             self._maxsize, signatures)  # fmt: skip

    def clear_cache(self) -> None:
        with self._lock:
            self._entries.clear()
            self._flat.clear()

    def graph(self, *args: Any, **kwargs: Any) -> Graph:
        """The optimised graph that calls with these arguments replay (its ``log``
        says what each pass removed)."""
        entry, leaves, _ = self._entry(args, kwargs)
        return optimized(entry.traced.graph, array_kind(leaves)[0])

    def source(self, *args: Any, **kwargs: Any) -> str:
        """The Python source of the replay that calls with these arguments run, and of
        its compiled kernels once the compiling tier made them."""
        entry, leaves, _ = self._entry(args, kwargs)
        if entry.compiled is not None and entry.run is entry.compiled.run:
            return entry.compiled.as_text()
        run: Any = entry.run
        if run is None:
            run = replay(entry.traced.graph, *array_kind(leaves))
        return run.source

    def __repr__(self) -> str:
        return f"<jit of {self.fun!r}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # methods: jit per instance call
        if obj is None:
            return self
        return functools.partial(self, obj)


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
    show the optimised graph and the replayed code, and ``f.trace(*args)`` is the first
    of the compiler's stages (``.lower()``: which equations compile, each kernel's
    source; ``.compile()``: a callable with its ``compile_time``).

    ``compile``: with llvmlite installed (``pip install 'autodiff[compile]'``), the
    regions of the graph that lower (elementwise equations fused into one loop each,
    reductions, views, small matrix products, loops and branches whose contents lower,
    iterations included) are compiled to machine code through LLVM, with NumPy's results
    bit for bit.  ``"auto"`` (the default) does it for a signature called often
    (``tiers.HOT_CALLS``), in a background thread, and swaps the kernels in when they
    are ready (no call waits for them); ``True`` compiles with the replay, on the
    second call; ``False`` never compiles.  Compiled objects are kept on disk across
    processes (``autodiff.compiler.disk_cache``).

    The contract: ``jit(fun)(x)`` behaves like ``fun(x)`` in everything a NumPy user
    can observe, except time, on every call (the first, the compiled ones):

    - arrays ``fun`` closes over (its globals, a bound method's attributes) are
      captured by value when it is staged: writing into them later changes neither
      the value nor any derivative of the jitted function (stage again, with a new
      ``jit``, to see new values);
    - every result is an array of its own, sharing memory with no argument, constant
      or other result, so the caller may write into it; arguments are never written;
      a 0-d result is a 0-d array where ``fun`` returns one (a transform's results:
      ``jit(grad(f))(0.5)`` as ``grad(f)(0.5)``) and a NumPy scalar where ``fun``
      returns one (what a ufunc gives for 0-d operands);
    - the graph's rewrites are exact in IEEE arithmetic (``x + 0.0`` stays: it is not
      ``x`` for ``x = -0.0``);
    - ``no_grad()`` inside ``fun`` (or its ``cond`` branches, ``scan`` bodies) means
      what it means eagerly for every transform of the jitted function;
      ``debug_nans()`` and ``debug_rules()`` check every call (the function runs as it
      is, so the first NaN is found and named); ``explain`` lists its primitives;
    - random draws (``anp.random``, a ``Generator`` argument's methods) draw at every
      call, and under ``vmap`` follow its ``randomness`` as eagerly; NumPy's own draws
      that staging cannot see (``np.random.normal()``, a ``Generator`` or
      ``RandomState`` the function closes over) would be one constant, and raise;
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
    tiers.check_compile(compile)
    if compile is True and not default_backend().available():
        raise TransformValueError(
            f"jit(fun, compile=True): the compiling tier is not available because "
            f"{default_backend().why_not()}; use compile='auto' (compiles where it can) or False."
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
        graph = jitted._stage(args, kwargs, leaves, treedef, "make_graph").graph
        return optimize(graph, inline_rules=True) if optimized else graph

    return make
