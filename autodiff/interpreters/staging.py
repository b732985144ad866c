"""Staging: an interpreter that records a program instead of computing it.

Under a :class:`StagingInterpreter` every primitive call that reaches it becomes an
equation of a :class:`~autodiff.core.graph.Graph`, ``outs = prim(ins, **params)``, whose
results are :class:`StagedTensor` values: tracers that know only their abstract
value (shape, dtype, weak type) and the graph variable they stand for.  The staging
interpreter sits below the transforms the staged function starts (``stage`` pushes it
first), so ``stage(vmap(grad(f)))`` records exactly the primitives ``vmap(grad(f))``
emits; plain ``np.*`` calls, operators and methods reach it through the same
protocols as every other tracer.

Output shapes come from each primitive's shape rule (``Primitive.shape``), else from
running its implementation once per signature on placeholder zeros (cached), else,
for primitives whose implementation is written with autodiff functions
(``checkpoint``, ``custom_vjp``), from staging that implementation.

What the staged function meets besides its inputs:

- arrays it closed over, or made with NumPy from constants: constants of the graph
  (``constvars``; scalars inline as ``Literal``) - captured by value at staging time;
- tracers of a transform running *outside* the staging (a closed-over traced value,
  as in ``grad(lambda x: jit(lambda y: x * y)(2.0))``): extra inputs of the graph,
  appended after the real ones, which the caller passes in (``Staged.captured``);
  making them constants would silently drop their derivatives.

Python control flow on a staged value raises ``ConcretizationError``.
``eval_graph(graph, *args)`` runs a graph by binding each equation's primitive, so
a graph runs under any interpreter (that is how ``jit``'s call primitive is
differentiated, batched and inlined).
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from autodiff.core import conversions
from autodiff.core import tracer as _tracer
from autodiff.core.caches import LRUCache
from autodiff.core.errstate import Watch, applied, own, watching
from autodiff.core.graph import Eqn, Graph, Literal, OpaqueAval, ShapedArray, Var, aval_of
from autodiff.core.primitive import Primitive, process
from autodiff.core.stack import Interpreter, check_live, current_interpreters, new_interpreter
from autodiff.core.tracer import Tracer
from autodiff.errors import ConcretizationError, MissingRuleError, TransformTypeError
from autodiff.interpreters.reverse import no_grad_below, no_grad_p

__all__ = [
    "CONTROL_FLOW_HINT",
    "captured_value",
    "Staged",
    "StagedTensor",
    "StagingInterpreter",
    "abstract_eval",
    "eval_graph",
    "freeze",
    "graph_function",
    "innermost_staging",
    "staging_below",
    "stage",
]

# What to use instead of Python control flow on a staged value.  The control-flow
# primitives (issue 17) are named here so that this is the one place to change.
CONTROL_FLOW_HINT = (
    "mark the argument static (jit(f, static_argnums=...) or static_argnames=...) if "
    "the branch depends only on it, choose elementwise with anp.where(cond, x, y), or "
    "use the control-flow primitives autodiff.cond, autodiff.switch, "
    "autodiff.while_loop, autodiff.fori_loop and autodiff.scan"
)


class StagingInterpreter(Interpreter):
    """Records equations (see the module docstring).  ``transform`` names what
    staged (``jit``, ``make_graph``) in error messages."""

    __slots__ = ("captured", "const_ids", "consts", "constvars", "eqns", "like", "originals",
                 "transform", "watch")  # fmt: skip
    lifts = False  # process classifies foreign arguments itself: constant or captured
    stages = True

    def __init__(self, transform: str = "jit", like: Any = None) -> None:
        super().__init__()
        self.transform = transform
        # An array of the arguments' library (None: NumPy), which staged values hand to
        # rules as their concrete value's stand-in, so constants the rules make with
        # like= (array_like, eye_like) are arrays of that library.
        self.like = like
        self.eqns: list[Eqn] = []
        self.constvars: list[Var] = []
        self.consts: list[Any] = []
        self.const_ids: dict[int, Var] = {}
        self.originals: list[Any] = []  # the constants as the function held them (their ids)
        # id(tracer) -> (tracer, var): tracers of transforms outside this staging
        self.captured: dict[int, tuple[Tracer, Var]] = {}
        # the sentinel errstate the staging runs in (core/errstate.py)
        self.watch: Watch | None = None

    def errstate(self) -> tuple | None:
        """The floating-point settings the staged function set around what it stages now."""
        return None if self.watch is None else own(self.watch)

    def read(self, x: Any) -> Var | Literal:
        """The graph variable (or literal) standing for ``x``."""
        if type(x) is StagedTensor and x._interp is self:
            return x._var
        if isinstance(x, Tracer):
            live = check_live(x)
            if live is not x:  # x stands for another value (core.stack.standing_in)
                return self.read(live)
            found = self.captured.get(id(x))
            if found is None:
                found = self.captured[id(x)] = (x, Var(ShapedArray(x.shape, x.dtype)))
            return found[1]
        if isinstance(x, (bool, int, float, complex, np.generic)):
            return Literal(x)
        var = self.const_ids.get(id(x))
        if var is None:
            var = self.const_ids[id(x)] = Var(aval_of(x))
            self.constvars.append(var)
            self.consts.append(captured_value(x))
            self.originals.append(x)  # keeps x alive, so its id stays unique
        return var

    def staged(self, x: Any) -> StagedTensor:
        """``x`` (a constant, or a tracer of an outer transform) as a value of this graph."""
        var = self.read(x)
        if isinstance(var, Literal):  # a scalar: as a 0-d constant
            var = self.read(np.asarray(var.value))
        assert isinstance(var, Var)
        return StagedTensor(self, var)


class StagedTensor(Tracer):
    """A value being staged: its abstract value and its variable in the graph."""

    __slots__ = ("_var",)  # not "var": that is the ndarray method

    def __init__(self, interp: StagingInterpreter, var: Var) -> None:
        self._interp = interp
        self._var = var

    @property
    def aval(self) -> Any:
        return self._var.aval

    @property
    def _inner(self) -> Any:
        return self._interp.like  # no concrete value: see StagingInterpreter.like

    @property
    def shape(self) -> tuple[int, ...]:
        return self._var.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self._var.aval.dtype

    def _refuse(self, what: str, kind: str, frame: Any) -> None:
        self._concrete(conversions.describe(frame, what, kind), kind)

    def _concrete(self, what: str | conversions.Described, kind: str = "read") -> Any:
        fix = (
            conversions.array_fix(str(what), _tracer.array_namespace)
            if kind == "array"
            else "mark the argument static (jit(f, static_argnums=...)) or use autodiff.cond "
            "or anp.where"
        )
        raise ConcretizationError(
            f"{what} needs a concrete value, but it is staged by {self._interp.describe()}: "
            f"{fix}. A staged value stands for any {self.aval.str_short()} value the "
            f"function may be called with: Python control flow (if/while/and/or, float(), "
            f"int(), .item(), np.asarray()) cannot depend on it; the ways out: "
            f"{CONTROL_FLOW_HINT}."
        )

    def __getattr__(self, name: str) -> Any:
        # (only for names no class attribute has) a staged Generator argument draws as
        # the Generator does: rng.normal(size=3) is anp.random's normal draw from it
        aval = object.__getattribute__(self, "_var").aval
        if isinstance(aval, OpaqueAval) and issubclass(aval.type, np.random.Generator):
            namespace = _tracer.array_namespace
            if namespace is not None and not name.startswith("_"):
                return namespace.random.generator_method(self, name)
        hint = _tracer.THEIR_SPELLINGS.get(name)  # (its property raised and led here)
        raise AttributeError(
            f"'{type(self).__name__}' object has no attribute '{name}'"
            + (f": {hint}." if hint else "")
        )

    def __repr__(self) -> str:
        return f"StagedTensor({self.aval.str_short()}, {self._interp.describe()})"


def staging_below(interp: Interpreter) -> bool:
    """Whether a staging is live below ``interp`` (a transform inside a ``jit``)."""
    staging = innermost_staging()
    return staging is not None and staging.level < interp.level


def innermost_staging() -> StagingInterpreter | None:
    """The innermost live staging interpreter, or None."""
    for interp in reversed(current_interpreters()):
        if isinstance(interp, StagingInterpreter):
            return interp
    return None


def captured_value(x: Any) -> Any:
    """What a graph keeps of an array its function closes over: its value when staged
    (jit's contract: a later write into ``x`` changes neither the value nor the derivative
    of the jitted function).  A NumPy array is copied, read-only, once: the copy owns its
    memory and cannot change, so graphs staged from this one share it.  Another
    library's array is copied if it has ``copy`` (Dask's arrays never change)."""
    if isinstance(x, np.ndarray):
        if x.flags.writeable or x.base is not None:
            x = x.copy()
            x.flags.writeable = False
        return x
    if hasattr(x, "__array_function__") and hasattr(x, "copy") \
            and not type(x).__module__.startswith("dask"):  # fmt: skip
        return x.copy()
    return x  # a Generator: its state is what draws advance


# --- abstract evaluation ------------------------------------------------------------------------


def freeze(value: Any) -> Any:
    """A hashable stand-in for a parameter value (slices and lists as tuples);
    raises TypeError for values that cannot be compared (arrays)."""
    if type(value) is not list:
        try:  # the common case: already hashable (ints, tuples of ints, dtypes, strings)
            hash(value)
            return value
        except TypeError:
            pass
    if isinstance(value, (tuple, list)):
        return (type(value), *map(freeze, value))
    if isinstance(value, slice):
        return (slice, value.start, value.stop, value.step)
    if isinstance(value, dict):
        return (dict, *sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        raise TypeError("arrays are not hashable")
    hash(value)
    return value


def _params_key(params: dict) -> Any:
    return tuple((k, freeze(v)) for k, v in params.items())


# (primitive, input avals, params) -> output avals, for primitives without a shape rule;
# (primitive) -> {(input avals, params): graph} for traceable primitives, reused by
# inlining.  Bounded per primitive: a program called with ever new shapes stays flat.
CACHE_MAXSIZE = 512
_evaluated: weakref.WeakKeyDictionary[Primitive, LRUCache] = weakref.WeakKeyDictionary()
_traced: weakref.WeakKeyDictionary[Primitive, LRUCache] = weakref.WeakKeyDictionary()


def _cache(caches: weakref.WeakKeyDictionary, prim: Primitive) -> LRUCache:
    found = caches.get(prim)
    if found is None:
        found = caches.setdefault(prim, LRUCache(CACHE_MAXSIZE))
    return found


def _placeholder(aval: Any, kind: str = "view") -> Any:
    """Zeros as a read-only broadcast view (``"view"``), zeros that can be written
    (``"writable"``), or identity matrices in the last two axes (``"eye"``), for
    solvers that refuse a singular matrix."""
    if isinstance(aval, OpaqueAval):
        if issubclass(aval.type, np.random.Generator):
            return np.random.default_rng(0)
        raise TypeError(f"no placeholder for a {aval.type.__name__}")
    if aval.weak_type:
        return {"f": 0.0, "c": 0j, "b": False}.get(aval.dtype.kind, 0)
    if kind == "writable":
        return np.zeros(aval.shape, aval.dtype)
    if kind == "eye" and len(aval.shape) >= 2:
        *_, m, n = aval.shape
        return np.broadcast_to(np.eye(m, n, dtype=aval.dtype), aval.shape).copy()
    return np.broadcast_to(np.zeros((), aval.dtype), aval.shape)


def _as_avals(prim: Primitive, out: Any) -> tuple | Any:
    if prim.multiple_results:
        return tuple(aval_of(o) if not isinstance(o, (ShapedArray, OpaqueAval)) else o
                     for o in out)  # fmt: skip
    return out if isinstance(out, (ShapedArray, OpaqueAval)) else aval_of(out)


def _evaluate(prim: Primitive, avals: Sequence[Any], params: dict) -> Any:
    """Output avals by running ``impl`` on placeholders (read-only broadcast zeros
    first, then writable ones, then identity matrices), with floating-point errors and
    warnings silenced."""
    error: Exception | None = None
    for kind in ("view", "writable", "eye"):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = prim.impl(*(_placeholder(a, kind) for a in avals), **params)
            return _as_avals(prim, out)
        except Exception as e:
            error = e
    shapes = ", ".join(a.str_short() for a in avals)
    raise MissingRuleError(
        f"staging could not infer the output shape of primitive '{prim.name}' for "
        f"arguments {shapes}: running its implementation on placeholders (zeros, "
        f"identity matrices) raised "
        f"{type(error).__name__}: {error}. If the arguments are valid, give the primitive "
        f"a shape rule, {prim.name}_p.def_shape(lambda *avals, **params: "
        f"ShapedArray(shape, dtype)) (see autodiff/rules/README.md)."
    ) from error


def abstract_eval(prim: Primitive, avals: Sequence[Any], params: dict) -> Any:
    """The abstract value(s) of ``prim``'s result for arguments of ``avals``."""
    rule = prim.shape
    if rule is not None:
        return _as_avals(prim, rule(*avals, **params))
    if prim.traceable:
        graph = traced_impl(prim, avals, params).graph
        outs = tuple(v.aval for v in graph.outvars)
        return outs if prim.multiple_results else outs[0]
    try:
        key = (tuple(avals), _params_key(params))
    except TypeError:  # unhashable parameters: evaluate each time
        return _evaluate(prim, avals, params)
    return _cache(_evaluated, prim).get_or_make(key, lambda: _evaluate(prim, avals, params))


def traced_impl(prim: Primitive, avals: Sequence[Any], params: dict) -> Staged:
    """``prim.impl`` staged for arguments of ``avals`` (cached per primitive, unless it
    closed over tracers of outer transforms, ``captured``: those belong to one call)."""
    try:
        key: Any = (tuple(avals), _params_key(params))
    except TypeError:
        key = None
    cache = _cache(_traced, prim)
    found = None if key is None else cache.get(key)
    if found is None:
        staged = stage(lambda *xs: _as_list(prim, prim.impl(*xs, **params)), avals,
                       transform=f"staging of {prim.name}")  # fmt: skip
        found = Staged(staged.graph, staged.captured)
        if key is not None and not staged.captured:
            found = cache.put(key, found)
    return found


def _as_list(prim: Primitive, out: Any) -> list:
    return list(out) if prim.multiple_results else [out]


_no_grad_level = no_grad_below.get  # (read once per equation: bound here)


@process.register(StagingInterpreter, Primitive)
def _stage_equation(interp: StagingInterpreter, prim: Primitive, args: tuple, params: dict):
    # The hot path of staging: the common cases inlined.
    invars = [a._var if type(a) is StagedTensor and a._interp is interp else interp.read(a)
              for a in args]  # fmt: skip
    avals = [v.aval for v in invars]
    rule = prim.shape
    if rule is not None and not prim.multiple_results:
        out = rule(*avals, **params)
        var = Var(out if type(out) is ShapedArray else _as_avals(prim, out))
        interp.eqns.append(Eqn(prim, invars, [var], params, interp.errstate()))
        if _no_grad_level() < interp.level:  # (not inside no_grad(): the common case)
            return StagedTensor(interp, var)
        return _without_grad(interp, prim, StagedTensor(interp, var))
    if prim.traceable and traced_impl(prim, avals, params).captured:
        raise TransformTypeError(
            f"'{prim.name}' closes over a traced value (one computed from the "
            f"arguments of the staged function or of a transform around it), which "
            f"{interp.describe()} cannot hand to its rules. Pass that value to "
            f"'{prim.name}' as an argument instead."
        )
    out = abstract_eval(prim, avals, params)
    if prim.multiple_results:
        outvars = [Var(a) for a in out]
        interp.eqns.append(Eqn(prim, invars, outvars, params, interp.errstate()))
        staged: Any = tuple(StagedTensor(interp, v) for v in outvars)
    else:
        var = Var(out)
        interp.eqns.append(Eqn(prim, invars, [var], params, interp.errstate()))
        staged = StagedTensor(interp, var)
    if _no_grad_level() < interp.level:
        return staged
    return _without_grad(interp, prim, staged)


def _without_grad(interp: StagingInterpreter, prim: Primitive, out: Any) -> Any:
    """``prim``'s staged results, recorded inside ``no_grad()``: each marked so that the
    transforms of this graph take it as a constant (``no_grad_p``)."""
    if not prim.differentiable or prim is no_grad_p:
        return out
    if prim.multiple_results:
        return tuple(_mark(interp, o) for o in out)
    return _mark(interp, out)


def _mark(interp: StagingInterpreter, x: StagedTensor) -> StagedTensor:
    if x.aval.dtype.kind not in "fc":
        return x
    var = Var(x.aval)
    interp.eqns.append(Eqn(no_grad_p, [x._var], [var], {}))
    return StagedTensor(interp, var)


def graph_function(graph: Graph) -> Callable:
    """A flat function running ``graph`` (arguments in, tuple of results out)."""

    def run(*args):
        return tuple(eval_graph(graph, *args))

    run.__name__ = graph.name
    return run


# --- staging a function ------------------------------------------------------------------------


class Staged(NamedTuple):
    """A staged function: its graph, the tracers of outer transforms it closed over
    (the graph's last inputs), and what the function returned (staged values of a
    finished staging, for checking their types)."""

    graph: Graph
    captured: list
    outs: Sequence[Any] = ()


def stage(
    fun: Callable[..., Sequence[Any]],
    avals: Sequence[Any],
    *,
    transform: str = "jit",
    name: str = "graph",
    like: Any = None,
) -> Staged:
    """Stage ``fun`` (flat arguments -> sequence of results) on arguments of ``avals``
    (of the array library of ``like``; None: NumPy)."""
    interp = StagingInterpreter(transform, like)
    with new_interpreter(interp), watching() as interp.watch:
        invars = [Var(a) for a in avals]
        outs = fun(*(StagedTensor(interp, v) for v in invars))
        outvars = [_output_var(interp, o) for o in outs]
    captured = list(interp.captured.values())
    graph = Graph(
        invars + [var for _, var in captured],
        outvars,
        interp.eqns,
        interp.constvars,
        interp.consts,
        name=name,
    )
    return Staged(graph, [tracer for tracer, _ in captured], tuple(outs))


def _output_var(interp: StagingInterpreter, out: Any) -> Var | Literal:
    if isinstance(out, Tracer) or hasattr(out, "__array_function__"):
        return interp.read(out)
    if isinstance(out, (bool, int, float, complex, np.generic)):
        return Literal(out)
    held = out.values() if isinstance(out, Mapping) else vars(out).values() if hasattr(
        out, "__dict__") else ()  # fmt: skip
    if any(isinstance(v, Tracer) for v in held):  # (a staged value would escape in it)
        raise TransformTypeError(
            f"{interp.describe()}: the function returned a {type(out).__name__} holding traced "
            f"values, which is not a pytree (tuples, lists, dicts, namedtuples, None): return "
            f"its arrays instead (of a SciPy result, e.g. res.x, or (res.x, res.success))."
        )
    return Literal(out, OpaqueAval(type(out)))  # a static output: a string, None, ...


# --- running a graph ----------------------------------------------------------------------------


def eval_graph(graph: Graph, *args: Any, bind: bool = True) -> list:
    """Run ``graph`` on ``args`` by binding each equation's primitive, so that the
    interpreters on the stack (a transform, a staging) see every primitive; with
    ``bind=False`` by calling each implementation (concrete arguments only)."""
    env: dict[Var, Any] = dict(zip(graph.invars, args))
    env.update(zip(graph.constvars, graph.consts))

    def read(v):
        return v.value if type(v) is Literal else env[v]

    for eqn in graph.eqns:
        run = eqn.prim.bind if bind else eqn.prim.impl
        if eqn.errstate:  # the function's own setting (re-staged with it, under bind)
            with applied(eqn.errstate):
                out = run(*map(read, eqn.invars), **eqn.params)
        else:
            out = run(*map(read, eqn.invars), **eqn.params)
        if eqn.prim.multiple_results:
            env.update(zip(eqn.outvars, out))
        else:
            env[eqn.outvars[0]] = out
    return [read(v) for v in graph.outvars]
