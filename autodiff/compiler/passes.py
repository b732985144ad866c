"""Graph passes: functions Graph -> Graph that keep what a graph computes.

- ``dce``: drop equations no output depends on (random draws stay: they advance
  their generator, which later draws see);
- ``cse``: one equation for repeated ``prim(same inputs, equal parameters)``;
- ``fold``: run, once, equations whose inputs are all constants (not draws, and
  not where the result is much larger than its inputs: a constant that size would
  cost memory for the whole life of the graph);
- ``simplify``: the identities the rules make common, each only where the result
  keeps its shape and dtype and only where it is exact in IEEE arithmetic: ``x - 0``,
  ``x + (-0.0)`` and, for integers, ``x + 0`` (for floats ``-0.0 + 0.0`` is ``+0.0``);
  ``x * 1``, ``1 * x``, ``x / 1`` for real ``x`` (a complex product with an infinite
  part makes a NaN); ``-(-x)``, a reshape to the same shape, reshapes of reshapes
  (``expand_dims`` and ``squeeze`` are reshapes), transposes of transposes,
  ``broadcast_to`` the same shape, ``astype`` the same dtype.  Zeros (with their sign)
  and ones are known from literals, small constants, ``zeros_like``/``ones_like`` and
  reshapes and broadcasts of them; a 0-d ``zeros_like``/``ones_like`` (``grad``'s seed)
  becomes a literal;
- ``inline``: equations of primitives whose implementation is written with autodiff
  functions (``checkpoint``, ``custom_vjp``, ``custom_jvp``) replaced by their staged
  implementation, for replay (their rules matter only while a graph is transformed);
- ``optimize``: all of them (simplify and fold in one walk), repeated while CSE
  merges anything.

Each pass appends ``(name, equations removed, {what: count})`` to the graph's ``log``.
A rewrite may make a result the same array as an input or another result; the
replay of a jitted function copies where that happens (``replay.fresh_results``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core.errstate import combined
from autodiff.core.graph import Eqn, Graph, Literal, Var
from autodiff.interpreters.reverse import no_grad_p
from autodiff.interpreters.staging import freeze, traced_impl
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp

__all__ = ["cse", "dce", "fold", "inline", "optimize", "simplify"]


def _logged(graph: Graph, name: str, eqns: list, details: dict, **changes: Any) -> Graph:
    removed = len(graph.eqns) - len(eqns)
    log = [*graph.log, (name, removed, {k: v for k, v in details.items() if v})]
    return graph.replace(eqns=eqns, log=log, **changes)


class _Substitution:
    """Variables replaced by others (or by literals), followed to the end."""

    def __init__(self) -> None:
        self.to: dict[Var, Any] = {}

    def __call__(self, v: Any) -> Any:
        while type(v) is Var and v in self.to:
            v = self.to[v]
        return v

    def eqn(self, eqn: Eqn) -> Eqn:
        to = self.to
        if to:  # (the passes' hot loop: no new equation unless an input changes)
            for v in eqn.invars:
                if v in to:
                    return Eqn(eqn.prim, [self(v) for v in eqn.invars], eqn.outvars, eqn.params,
                               eqn.errstate)  # fmt: skip
        return eqn

    def outvars(self, graph: Graph) -> list:
        return [self(v) for v in graph.outvars]


# --- dead code ---------------------------------------------------------------------------------


def dce(graph: Graph) -> Graph:
    """Drop the equations no output depends on (effectful ones stay), and unused constants."""
    live = {v for v in graph.outvars if type(v) is Var}
    kept = []
    for eqn in reversed(graph.eqns):
        outs = eqn.outvars
        if (outs[0] in live if len(outs) == 1 else not live.isdisjoint(outs)) or (
            eqn.prim.effectful
        ):
            kept.append(eqn)
            for v in eqn.invars:
                if type(v) is Var:
                    live.add(v)
    kept.reverse()
    pairs = [(v, c) for v, c in zip(graph.constvars, graph.consts) if v in live]
    return _logged(graph, "dce", kept, {}, constvars=[v for v, _ in pairs],
                   consts=[c for _, c in pairs])  # fmt: skip


# --- common subexpressions ----------------------------------------------------------------------


def _input_key(v: Any) -> Any:
    if type(v) is Literal:
        value = v.value
        if isinstance(value, (bool, int, float, complex, np.generic)):
            return (Literal, type(value), repr(value))  # repr: 0.0 and -0.0 differ
        return (Literal, id(value))
    return v


def cse(graph: Graph) -> Graph:
    """Keep the first of equations with the same primitive, inputs and parameters."""
    sub = _Substitution()
    seen: dict[Any, Eqn] = {}
    kept = []
    merged: dict[str, int] = {}
    for eqn in graph.eqns:
        eqn = sub.eqn(eqn)
        if not eqn.prim.effectful:
            key: Any = [eqn.prim]
            for v in eqn.invars:
                key.append(v if type(v) is Var else _input_key(v))
            try:
                params = eqn.params
                if params:
                    key.extend((k, freeze(v)) for k, v in params.items())
                if eqn.errstate:  # the same value, reported otherwise
                    key.append(eqn.errstate)
                key = tuple(key)
                hash(key)
            except TypeError:  # an array parameter: not compared
                key = None
            if key is not None:
                first = seen.get(key)
                if first is not None:
                    for old, new in zip(eqn.outvars, first.outvars):
                        sub.to[old] = new
                    merged[eqn.prim.name] = merged.get(eqn.prim.name, 0) + 1
                    continue
                seen[key] = eqn
        kept.append(eqn)
    return _logged(graph, "cse", kept, merged, outvars=sub.outvars(graph))


# --- constant folding -----------------------------------------------------------------------------

# A folded result may be this many times larger than its largest input (plus a little).
FOLD_GROWTH = 4
FOLD_SLACK = 1024


def fold(graph: Graph, numpy_constants: bool = True) -> Graph:
    """Compute equations whose inputs are all constants; their results become constants.
    With ``numpy_constants=False`` (a replay on an array library that refuses NumPy
    arrays, as CuPy does) only equations with a constant array among their inputs,
    whose results are then of its library, not those of literals alone."""
    return _walk(graph, numpy_constants, simplifying=False, folding=True)


def _known_values(eqn: Eqn, known: dict) -> list | None:
    if eqn.prim.effectful or eqn.prim.traceable:
        return None
    values = []
    for v in eqn.invars:
        if type(v) is Literal:
            values.append(v.value)
        elif v in known:
            values.append(known[v])
        else:
            return None
    biggest = max((int(np.size(x)) for x in values), default=1)
    size = sum(o.aval.size for o in eqn.outvars)
    if size > FOLD_GROWTH * biggest + FOLD_SLACK:
        return None
    if any(not isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)) for x in values):
        return None  # a generator, another library's array: leave it to run time
    return values


def _try(eqn: Eqn, values: list) -> Any:
    """The equation's result, or None if computing it warns or fails (it then runs,
    and warns or fails, at run time as it would have)."""
    try:
        with np.errstate(all="raise"), warnings.catch_warnings():
            warnings.simplefilter("error")
            return eqn.prim.impl(*values, **eqn.params)
    except Exception:
        return None


# --- algebraic simplification ---------------------------------------------------------------------

_RESHAPES = {_shp.reshape_p, _shp.expand_dims_p, _shp.squeeze_p}
# Results that are all zeros (ones) when their input is.
_KEEPS_VALUE = {*_RESHAPES, _shp.broadcast_to_p, _shp.transpose_p}
_ZEROS_LIKE = _cre.zeros_like.primitive
_ONES_LIKE = _cre.ones_like.primitive
SMALL_CONSTANT = 4096  # constants up to this many elements are checked for all-zero/all-one


def _same_type(a: Any, b: Any) -> bool:
    return a.aval.shape == b.aval.shape and a.aval.dtype == b.aval.dtype


class _Facts:
    """What is known about values: all zeros, all ones, how they were made."""

    def __init__(self, graph: Graph) -> None:
        self.value: dict[Var, float] = {}  # var -> 0.0 or 1.0: every element equals it
        self.made_by: dict[Var, Eqn] = {}
        for var, const in zip(graph.constvars, graph.consts):
            self.constant_array(var, const)

    def constant_array(self, var: Var, const: Any) -> None:
        if isinstance(const, np.ndarray) and 0 < const.size <= SMALL_CONSTANT:
            if const.dtype.kind in "iufc" and bool(np.all(const == 1)):
                self.value[var] = 1
            elif const.dtype.kind in "iu" and not np.any(const):
                self.value[var] = 0
            elif const.dtype.kind in "fc" and not np.any(const):  # zeros of one sign only
                signs = np.signbit(np.stack([const.real, const.imag]) if const.dtype.kind
                                   == "c" else const)  # fmt: skip
                if not signs.any() or signs.all():
                    self.value[var] = -0.0 if signs.all() else 0.0

    def constant(self, v: Any) -> float | None:
        """0 or 1 if every element of ``v`` is known to equal it, else None (a zero keeps
        its sign: ``-0.0`` where every element is a negative zero)."""
        if type(v) is not Literal:
            return self.value.get(v)
        value = v.value
        numeric = isinstance(value, (int, float, complex, np.number))
        if not numeric or isinstance(value, (bool, np.bool_)):
            return None
        if value == 0 and isinstance(value, (complex, np.complexfloating)):
            parts = (math.copysign(1.0, value.real), math.copysign(1.0, value.imag))
            return None if parts[0] != parts[1] else math.copysign(0.0, parts[0])
        return value if value in (0, 1) else None

    def learn(self, eqn: Eqn) -> None:
        out = eqn.outvars[0]
        self.made_by[out] = eqn
        if eqn.prim is _ZEROS_LIKE:
            self.value[out] = 0
        elif eqn.prim is _ONES_LIKE:
            self.value[out] = 1
        elif eqn.prim in _KEEPS_VALUE and eqn.invars[0] in self.value:
            self.value[out] = self.value[eqn.invars[0]]


def _negative_zero(value: float | None) -> bool:
    return value == 0 and math.copysign(1.0, value) < 0


def _identity(eqn: Eqn, facts: _Facts, numpy_constants: bool = True) -> tuple[Any, str] | None:
    """The value an equation equals (an input of the same shape and dtype), if any.
    Only identities exact in IEEE arithmetic: ``x + 0.0`` is not ``x`` for ``x = -0.0``
    (it is ``+0.0``), ``x - 0.0`` and ``x + (-0.0)`` are; a complex ``x * 1`` is not ``x``
    where a part is infinite (``inf * 0`` in the complex product is NaN)."""
    prim, ins, out = eqn.prim, eqn.invars, eqn.outvars[0]
    kind = out.aval.dtype.kind
    if prim is _elt.add_p:
        for x, other in ((ins[0], ins[1]), (ins[1], ins[0])):
            zero = facts.constant(other)
            if (
                zero == 0
                and _same_type(x, out)
                and (kind not in "fc" or (kind == "f" and _negative_zero(zero)))
            ):
                return x, "x + 0"
    elif prim is _elt.subtract_p:
        zero = facts.constant(ins[1])
        if zero == 0 and _same_type(ins[0], out) and not _negative_zero(zero):
            return ins[0], "x - 0"
    elif prim is _elt.multiply_p:
        for x, other in ((ins[0], ins[1]), (ins[1], ins[0])):
            if facts.constant(other) == 1 and _same_type(x, out) and kind != "c":
                return x, "x * 1"
    elif prim is _elt.divide_p:
        if facts.constant(ins[1]) == 1 and _same_type(ins[0], out) and kind != "c":
            return ins[0], "x / 1"
    elif prim is _elt.negative_p:
        inner = facts.made_by.get(ins[0])
        if inner is not None and inner.prim is _elt.negative_p and _same_type(inner.invars[0], out):
            return inner.invars[0], "-(-x)"
    elif prim in (_shp.reshape_p, _shp.broadcast_to_p, _shp.expand_dims_p, _shp.squeeze_p):
        if type(ins[0]) is Var and _same_type(ins[0], out):
            return ins[0], f"{prim.name} to the same shape"
    elif prim is _shp.transpose_p:
        if tuple(eqn.params["axes"]) == tuple(range(out.aval.ndim)):
            return ins[0], "transpose by the identity"
    elif prim is _elt.astype_p or prim is _elt.astype_discrete_p:
        if type(ins[0]) is Var and _same_type(ins[0], out):
            return ins[0], "astype to the same dtype"
    elif (prim is _ZEROS_LIKE or prim is _ONES_LIKE) and out.aval.ndim == 0 and numpy_constants:
        # grad's seed: a scalar that no longer waits for the value it is shaped like
        value = (np.zeros if prim is _ZEROS_LIKE else np.ones)((), out.aval.dtype)[()]
        return Literal(value), f"{prim.name} of a scalar"
    return None


def _rewrite(eqn: Eqn, facts: _Facts) -> tuple[Eqn, str] | None:
    """A cheaper equation with the same result: one reshape for a chain of them,
    one transpose for a transpose of a transpose."""
    prim, ins, out = eqn.prim, eqn.invars, eqn.outvars[0]
    inner = facts.made_by.get(ins[0]) if ins and type(ins[0]) is Var else None
    if inner is None:
        return None
    if prim in _RESHAPES and inner.prim in _RESHAPES:
        source = inner.invars[0]
        if type(source) is not Var:
            return None
        new = Eqn(_shp.reshape_p, [source], [out], {"shape": out.aval.shape})
        return new, "reshape of a reshape"
    if prim is _shp.transpose_p and _only_unit_axes_move(eqn):
        new = Eqn(_shp.reshape_p, [ins[0]], [out], {"shape": out.aval.shape})
        return new, "transpose of unit axes"
    if prim is _shp.transpose_p and inner.prim is _shp.transpose_p:
        a, b = inner.params["axes"], eqn.params["axes"]
        axes = tuple(a[i] for i in b)
        new = Eqn(_shp.transpose_p, [inner.invars[0]], [out], {"axes": axes})
        return new, "transpose of a transpose"
    return None


def _only_unit_axes_move(eqn: Eqn) -> bool:
    """A transpose that keeps the order of the axes longer than 1: a reshape."""
    shape = eqn.invars[0].aval.shape
    moved = [a for a in eqn.params["axes"] if shape[a] != 1]
    return moved == sorted(moved)


# The primitives simplify looks at; the others pass straight through.
_SIMPLIFIED = {_elt.add_p, _elt.subtract_p, _elt.multiply_p, _elt.divide_p, _elt.negative_p,
               _elt.astype_p, _elt.astype_discrete_p, _ZEROS_LIKE, _ONES_LIKE,
               _shp.transpose_p, *_KEEPS_VALUE}  # fmt: skip


def simplify(graph: Graph, numpy_constants: bool = True) -> Graph:
    """Apply the identities of the module docstring (without ``numpy_constants``, not
    the one that makes a literal of a 0-d ``zeros_like``/``ones_like``: see ``fold``)."""
    return _walk(graph, numpy_constants, simplifying=True, folding=False)


def simplify_and_fold(graph: Graph, numpy_constants: bool = True) -> Graph:
    """``simplify`` and ``fold`` in one walk, so that what one finds the other uses at
    once (a folded constant of ones, then ``x * 1``); logged as the two passes."""
    return _walk(graph, numpy_constants, simplifying=True, folding=True)


def _walk(graph: Graph, numpy_constants: bool, simplifying: bool, folding: bool) -> Graph:
    facts = _Facts(graph)
    known: dict[Var, Any] = dict(zip(graph.constvars, graph.consts))
    constvars, consts = list(graph.constvars), list(graph.consts)
    sub = _Substitution()
    kept: list[Eqn] = []
    done: dict[str, int] = {}
    folded: dict[str, int] = {}
    for eqn in graph.eqns:
        eqn = sub.eqn(eqn)
        if folding:
            values = _known_values(eqn, known)
            if values is not None and not numpy_constants and all(type(v) is Literal
                                                                  for v in eqn.invars):  # fmt: skip
                values = None
            out = None if values is None else _try(eqn, values)
            if out is not None:
                folded[eqn.prim.name] = folded.get(eqn.prim.name, 0) + 1
                for var, value in zip(eqn.outvars, out if eqn.prim.multiple_results else [out]):
                    if isinstance(value, np.generic):
                        sub.to[var] = Literal(value)
                    else:
                        known[var] = value
                        constvars.append(var)
                        consts.append(value)
                        facts.constant_array(var, value)
                continue
        if simplifying and eqn.prim in _SIMPLIFIED:
            for _ in range(3):  # a rewrite may lead to another, or to an identity
                found = _identity(eqn, facts, numpy_constants)
                if found is not None and (numpy_constants or type(found[0]) is Var):
                    sub.to[eqn.outvars[0]], what = found
                    done[what] = done.get(what, 0) + 1
                    eqn = None  # type: ignore[assignment]
                    break
                rewritten = _rewrite(eqn, facts)
                if rewritten is None:
                    break
                eqn, what = rewritten
                done[what] = done.get(what, 0) + 1
            if eqn is None:
                continue
            facts.learn(eqn)
        kept.append(eqn)
    n_folded = sum(folded.values())
    log = list(graph.log)
    if simplifying:
        simplified = len(graph.eqns) - len(kept) - n_folded
        log.append(("simplify", simplified, {k: v for k, v in done.items() if v}))
    if folding:
        log.append(("fold", n_folded, folded))
    return graph.replace(eqns=kept, log=log, outvars=sub.outvars(graph), constvars=constvars,
                         consts=consts)  # fmt: skip


# --- inlining -------------------------------------------------------------------------------------


def inline(graph: Graph) -> Graph:
    """Replace equations of traceable primitives by their staged implementations, and
    drop ``no_grad`` marks (they too matter only while a graph is transformed)."""
    if not any(eqn.prim.traceable or eqn.prim is no_grad_p for eqn in graph.eqns):
        return _logged(graph, "inline", graph.eqns, {})
    sub = _Substitution()
    eqns: list[Eqn] = []
    constvars, consts = list(graph.constvars), list(graph.consts)
    inlined: dict[str, int] = {}
    for eqn in graph.eqns:
        eqn = sub.eqn(eqn)
        if eqn.prim is no_grad_p:
            sub.to[eqn.outvars[0]] = eqn.invars[0]
            inlined["no_grad"] = inlined.get("no_grad", 0) + 1
            continue
        if not eqn.prim.traceable:
            eqns.append(eqn)
            continue
        body = traced_impl(eqn.prim, [v.aval for v in eqn.invars], eqn.params).graph
        rename: dict[Var, Any] = dict(zip(body.invars, eqn.invars))
        for var, const in zip(body.constvars, body.consts):
            rename[var] = var
            constvars.append(var)
            consts.append(const)
        for inner in body.eqns:
            new_outs = [Var(v.aval) for v in inner.outvars]
            rename.update(zip(inner.outvars, new_outs))
            ins = [v if type(v) is Literal else rename[v] for v in inner.invars]
            eqns.append(
                Eqn(inner.prim, ins, new_outs, inner.params, combined(eqn.errstate, inner.errstate))
            )
        for var, value in zip(eqn.outvars, body.outvars):
            sub.to[var] = value if type(value) is Literal else rename[value]
        key = "custom rules" if "checkpoint" not in eqn.prim.name else "checkpoint"
        inlined[key] = inlined.get(key, 0) + 1
    graph = graph.replace(eqns=eqns, outvars=sub.outvars(graph), constvars=constvars,
                          consts=consts)  # fmt: skip
    # Inlining adds equations; log how many calls it replaced rather than a negative count.
    graph.log = [*graph.log, ("inline", 0, inlined)]
    return graph


# --- all of them ----------------------------------------------------------------------------------

PASSES: list[Callable[..., Graph]] = [simplify, fold, cse, dce]  # what optimize runs


def optimize(
    graph: Graph, *, inline_rules: bool = False, rounds: int = 4, numpy_constants: bool = True
) -> Graph:
    """``graph`` after every pass (``inline`` first when ``inline_rules``): ``simplify``
    and ``fold`` in one walk, ``cse``, ``dce``, again while ``cse`` merges anything;
    the log sums each pass's work over the rounds.
    ``numpy_constants=False``: no new constants that are NumPy arrays (see ``fold``)."""
    start = len(graph.log)
    if inline_rules:
        for _ in range(8):  # nested checkpoints inline one level per round
            if not any(eqn.prim.traceable or eqn.prim is no_grad_p for eqn in graph.eqns):
                break
            graph = inline(graph)
    for _ in range(rounds):
        graph = simplify_and_fold(graph, numpy_constants)  # (the first two of PASSES)
        graph = cse(graph)
        merged = graph.log[-1][1]
        graph = dce(graph)
        if not merged:  # one walk found everything else; merged equations may open more
            break
    graph.log = graph.log[:start] + _merged(graph.log[start:])
    return graph


def _merged(entries: list) -> list:
    totals: dict[str, list] = {}
    for name, removed, details in entries:
        entry = totals.setdefault(name, [0, {}])
        entry[0] += removed
        for k, v in details.items():
            entry[1][k] = entry[1].get(k, 0) + v
    return [(name, removed, details) for name, (removed, details) in totals.items()]
