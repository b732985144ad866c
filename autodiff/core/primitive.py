"""Primitives and ``bind``: a primitive's implementation and rules, and the call that
hands it to the top interpreter of the stack (``core/stack.py``).

A primitive call flows like this (see ``docs/architecture.md``)::

    prim.bind(*args, **params)
      -> the top interpreter      the live interpreter with the highest level
                                  among the tracers in ``args`` (none: NumPy)
      -> lift(top, arg)           each other argument becomes a tracer of
                                  ``top``; dispatched on (interpreter, value)
      -> process(top, prim, ...)  the interpreter applies the primitive's rule
                                  for its transform; dispatched on
                                  (interpreter, primitive).  The rule binds
                                  primitives again on lower-level values, so
                                  each call peels exactly one interpreter.

``bind`` is where the top interpreter is chosen by level; the only other
readers of levels are ``check_live`` (``core/stack.py``: a tracer of another
thread's transform) and ``no_grad`` (which grad levels record).  This module knows
no primitive and no transform: each registers its ``lift`` and ``process`` methods
(see ``core/dispatch.py``) next to its own code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autodiff.core.dispatch import DispatchPoint, dispatch
from autodiff.core.loading import checks_rules, resolved
from autodiff.core.lowering import Lowering
from autodiff.core.rule_forms import (
    check_arity,
    check_batch,
    check_packed,
    check_taylor_arity,
    normalize_reads,
    normalized_jvp,
    normalized_vjp,
)
from autodiff.core.stack import Interpreter
from autodiff.core.tracer import Tracer, leaked_error, stood_in
from autodiff.errors import MissingRuleError

__all__ = ["Primitive", "dispatch", "lift", "process"]


# --- primitives ---------------------------------------------------------------------


class Primitive:
    """A named operation with a NumPy implementation and one rule per transform.

    Rules are written with primitives, so they are themselves differentiable
    and batchable.  Positional arguments are arrays; static parameters are
    keyword-only and reach ``impl`` and every rule as keywords.

    vjp
        Either one function ``vjp(ct, ans, *primals, **params)`` returning one
        cotangent per positional argument (None for zero), or a sequence with
        one function ``vjp_i(ct, ans, *primals, **params)`` per argument (None
        for an argument that is not differentiable); per-argument rules only
        run for arguments that need a cotangent.
    jvp
        Either ``jvp(tangents, ans, *primals, **params)`` with zero tangents
        filled in, or a sequence of ``jvp_i(t_i, ans, *primals, **params)``
        whose results are summed over the non-zero tangents.
    batch
        ``batch(args, dims, **params) -> (out, out_dim)``: ``args`` are the
        unwrapped values, ``dims`` their batch axes (None: not batched).
    differentiable
        False for primitives whose outputs carry no derivative (comparisons,
        ``argmax``, ``stop_gradient``): transforms then skip vjp/jvp.
    vjp_reads
        Optional, for memory: per argument, what its VJP rule reads besides
        the cotangent and shapes/dtypes: primal positions and/or ``"ans"``
        (``[(1,), (0,)]`` for ``multiply``, ``[("ans",)]`` for ``tanh``,
        ``[(), ()]`` for ``add``).  The tape then keeps only those residuals.
        None (the default) keeps everything.
    multiple_results
        True if ``impl`` returns a tuple of arrays.  Cotangents and tangents are
        then tuples too (zeros filled in), the JVP rule is one function, and
        the batching rule returns a tuple of batch axes.
    shape
        Optional, for staging (``jit``, ``make_graph``): ``shape(*avals, **params)``
        returns the abstract value of the result (a ``ShapedArray``, or a tuple of
        them for ``multiple_results``) from those of the arguments, without data.
        Without one, staging runs ``impl`` once per signature on placeholder zeros.
    traceable
        True if ``impl`` is written with autodiff functions (``checkpoint``,
        ``custom_vjp``): staging then traces it for its output shapes, and a
        replayed graph inlines it.
    sparsity
        Optional, for sparsity detection (``jacobian_sparsity``, ``jacobian(f,
        sparsity="auto")``): ``sparsity(*operands, **params)`` returns a
        ``core.index_sets.Sparsity`` (a tuple of them for ``multiple_results``) saying
        which operand elements each output element reads, and which operands interact
        non-linearly; each operand is its value where it is a constant of the graph,
        else its abstract value.  Without one, every output element depends on every
        input element (safe, never wrong).
    lowering
        Optional, for ``jit``'s compiling tier: how the primitive is compiled, one of
        ``core/lowering.py``'s kinds: ``Elementwise`` (a NumPy ufunc, or a traced scalar
        function, applied to each element; equations of one shape fuse into one loop),
        ``Reduction``, ``View``, ``Gufunc`` or ``Emitter`` (code written with the
        backend's context).  Without one, the primitive is a NumPy call between compiled
        regions.
    taylor
        Optional, for Taylor mode (``jet`` and the differential operators):
        ``taylor(primals, series, **params) -> (ans, series_out)`` pushes a truncated
        Taylor series through the primitive.  ``series`` has one entry per argument, a
        tuple of its K *normalised* coefficients (``x(t) = x0 + x1 t + ... + xK t^K``;
        ``None``: a zero coefficient); ``series_out`` is a list of K coefficients (None:
        zero), a tuple of them for ``multiple_results``.  Forms for whole families are in
        ``core/rule_forms.py`` (``linear_taylor``, ``multilinear_taylor``).  Without one,
        Taylor mode derives the coefficients from the JVP rule (exact, slower; it warns
        once).

    >>> import numpy as np
    >>> from autodiff.core.primitive import Primitive
    >>> cube_p = Primitive("cube", lambda x: x**3, vjp=[lambda ct, ans, x: ct * 3 * x**2])
    >>> float(cube_p.bind(2.0))
    8.0
    """

    __slots__ = ("__weakref__", "_derived_jvp", "_derived_vjp", "batch", "differentiable",
                 "impl", "jvp", "lowering", "multiple_results", "name", "shape", "sparsity",
                 "taylor", "traceable", "vjp", "vjp_reads")  # fmt: skip
    # Effectful primitives (random draws) run at every replay of a staged graph, in
    # order: graph passes never drop, merge or precompute them.
    effectful = False

    def __init__(
        self,
        name: str,
        impl: Callable,
        *,
        vjp: Callable | Sequence[Callable | None] | None = None,
        jvp: Callable | Sequence[Callable | None] | None = None,
        batch: Callable | None = None,
        differentiable: bool = True,
        multiple_results: bool = False,
        vjp_reads: Sequence[Sequence[int | str]] | None = None,
        shape: Callable | None = None,
        traceable: bool = False,
        sparsity: Callable | None = None,
        lowering: Lowering | None = None,
        taylor: Callable | None = None,
    ) -> None:
        self.name = name
        self.shape: Callable | None = None
        self.sparsity: Callable | None = None
        self.lowering: Lowering | None = None
        if shape is not None:
            self.def_shape(shape)
        if sparsity is not None:
            self.def_sparsity(sparsity)
        if lowering is not None:
            self.def_lowering(lowering)
        self.traceable = traceable
        self.vjp_reads = normalize_reads(name, vjp_reads)
        self.impl = impl
        self.differentiable = differentiable
        self.multiple_results = multiple_results
        self.vjp: Callable | None = None
        self.jvp: Callable | None = None
        self.batch: Callable | None = None
        # (the rule it was derived from, the derived rule): see vjp_rule and jvp_rule
        self._derived_vjp: tuple[Callable | None, Callable] | None = None
        self._derived_jvp: tuple[Callable | None, Callable] | None = None
        if vjp is not None:
            self.def_vjp(vjp)
        if jvp is not None:
            self.def_jvp(jvp)
        if batch is not None:
            self.def_batch(batch)
        self.taylor: Callable | None = None
        if taylor is not None:
            self.def_taylor(taylor)

    def def_vjp(self, rule: Callable | Sequence[Callable | None], *, packed: bool = False) -> Any:
        """The VJP rule, in either form described above; ``packed=True``: already in the
        form the transforms call, ``rule(ct, ans, primals, params, argnums)`` returning a
        cotangent for each position in ``argnums`` (``core/rule_forms.py``), for rules
        that read parameters recorded with the call (control flow, ``custom_vjp``)."""
        if packed:
            if checks_rules():
                check_packed(self, "VJP", rule)
            self.vjp = rule  # type: ignore[assignment]
        else:
            if checks_rules():
                check_arity(self, "VJP", rule)
            self.vjp = normalized_vjp(rule)
        return rule

    def def_jvp(self, rule: Callable | Sequence[Callable | None], *, packed: bool = False) -> Any:
        """The JVP rule, in either form described above; ``packed=True``: already in the
        form the transforms call, ``rule(tangents, ans, primals, params)`` with None for
        a zero tangent."""
        if packed:
            if checks_rules():
                check_packed(self, "JVP", rule)
            self.jvp = rule  # type: ignore[assignment]
        else:
            if checks_rules():
                check_arity(self, "JVP", rule)
            self.jvp = normalized_jvp(self, rule)
        return rule

    def vjp_rule(self) -> Callable:
        """The VJP rule (normalised form): the one given, or one derived from the JVP
        rule by transposition, once, at first use."""
        if self.vjp is not None:
            return self.vjp
        derived = self._derived_vjp
        if derived is None or derived[0] is not self.jvp:
            derived = self._derived_vjp = (self.jvp, _transposed(self, "vjp_from_jvp", self.jvp))
        return derived[1]

    def jvp_rule(self) -> Callable:
        """The JVP rule (normalised form): the one given, or one derived from the VJP
        rule by transposition, once, at first use."""
        if self.jvp is not None:
            return self.jvp
        derived = self._derived_jvp
        if derived is None or derived[0] is not self.vjp:
            derived = self._derived_jvp = (self.vjp, _transposed(self, "jvp_from_vjp", self.vjp))
        return derived[1]

    def def_batch(self, rule: Callable) -> Callable:
        """``rule(args, dims, **params) -> (out, out_dim)`` (see ``batch`` above)."""
        if checks_rules():
            check_batch(self, rule)
        self.batch = rule
        return rule

    def def_shape(self, rule: Callable) -> Callable:
        """``rule(*avals, **params) -> aval`` (or a tuple of avals): the result's
        shape and dtype for staging, from the arguments' (see ``shape`` above)."""
        self.shape = self._function("shape", rule)
        return rule

    def def_sparsity(self, rule: Callable) -> Callable:
        """``rule(*operands, **params) -> Sparsity``: which operand elements each output
        element reads, for sparsity detection (see ``sparsity`` above)."""
        self.sparsity = self._function("sparsity", rule)
        if checks_rules():  # a rule made at first call (core/loading.py), made now
            resolved(rule)
        return rule

    def def_taylor(self, rule: Callable) -> Callable:
        """``rule(primals, series, **params) -> (ans, series_out)``: how a truncated
        Taylor series of the arguments maps to the result's (see ``taylor`` above)."""
        if checks_rules():  # the rule itself, where it is made at first call (core/loading.py)
            check_taylor_arity(self, resolved(rule))
        self.taylor = rule
        return rule

    def def_lowering(self, lowering: Lowering | None) -> Lowering | None:
        """How the primitive is written as compiled code (see ``lowering`` above);
        None: it has none (a NumPy call between compiled regions), also where a helper
        gave it one."""
        if lowering is not None and not isinstance(lowering, Lowering):
            raise TypeError(
                f"primitive '{self.name}': a lowering is an Elementwise or an Emitter "
                f"(autodiff.core.lowering), or None, got {lowering!r:.60}"
            )
        self.lowering = lowering
        return lowering

    def _function(self, what: str, rule: Any) -> Callable:
        if not callable(rule):
            raise TypeError(f"primitive '{self.name}': its {what} rule must be a function, "
                            f"got {rule!r:.60}")  # fmt: skip
        return rule

    def bind(self, *args: Any, **params: Any) -> Any:
        # The hot path of the library.  With no tracer among the arguments this
        # is a type check per argument and a call of the implementation.
        top = None
        for arg in args:
            if isinstance(arg, Tracer):
                interp = arg._interp
                if interp is not top:
                    if not interp.active:  # leaked, or standing in for a value
                        return self._bind_stood_in(args, params)
                    if top is None or interp.level > top.level:
                        top = interp
        if top is None:
            return self.impl(*args, **params)
        if top.lifts:
            for arg in args:
                if not isinstance(arg, Tracer) or arg._interp is not top:
                    args = tuple([a if isinstance(a, Tracer) and a._interp is top
                                  else _lift(top, a) for a in args])  # fmt: skip
                    break
        key = (type(top), type(self))
        method = _process_methods.get(key) or process.resolve(*key)
        if top.observer is None:
            return method(top, self, args, params)
        return top.observer.process(method, top, self, args, params)

    def _bind_stood_in(self, args: tuple, params: dict) -> Any:
        """``bind`` with the values that inactive tracers stand for (``standing_in``);
        a tracer that stands for none has leaked."""
        replaced = tuple(stood_in(a) if isinstance(a, Tracer) and not a._interp.active else a
                         for a in args)  # fmt: skip
        for a in replaced:
            if isinstance(a, Tracer) and not a._interp.active and stood_in(a) is a:
                raise leaked_error(a)
        return self.bind(*replaced, **params)

    def missing(self, rule: str, interp: Interpreter) -> MissingRuleError:
        """The error for a missing derivative rule (``"VJP"`` or ``"JVP"``): either
        one would do, since each is derived from the other when absent."""
        other = "JVP" if rule == "VJP" else "VJP"
        return MissingRuleError(
            f"primitive '{self.name}' has no {rule} rule (nor a {other} rule to transpose "
            f"into one), which {interp.describe()} needs. Add one with "
            f"{self.name}_p.def_{rule.lower()}(...) (see autodiff/rules/README.md), or "
            f"declare it with differentiable=False if it has no derivative."
        )

    def __repr__(self) -> str:
        return f"Primitive({self.name!r})"


# --- rules derived by transposition ------------------------------------------------------------
# A VJP and a JVP are transposes of each other, so a missing one is derived from the
# other by running reverse mode through it.  Reverse mode is a layer above the core:
# ``interpreters/transpose.py`` puts its two derivations here when the interpreters
# are imported (``interpreters/__init__.py``), so the tape and forward mode ask the
# primitive (``vjp_rule``, ``jvp_rule``) and depend on the core only.
transposition: dict[str, Callable[[Callable], Callable]] = {}


def _transposed(prim: Primitive, how: str, rule: Callable | None) -> Callable:
    if rule is None:  # transforms raise MissingRuleError before they get here
        raise TypeError(f"primitive '{prim.name}' has neither a VJP nor a JVP rule")
    return transposition[how](rule)


# --- the two dispatch points ------------------------------------------------------
# Each transform registers methods for its own interpreter class, next to its
# code (``@process.register(GradInterpreter, Primitive)``); special kinds of
# primitive register more specific ones (``transforms/custom.py``: CustomVJPPrimitive).
# These defaults are for the most general types.


def _no_lift(interp: Interpreter, x: object):
    raise NotImplementedError(f"{type(interp).__name__} registers no lift method")


def _no_process(interp: Interpreter, prim: Primitive, args: tuple, params: dict):
    raise NotImplementedError(f"{type(interp).__name__} registers no process method")


lift = DispatchPoint("lift", _no_lift, (Interpreter, object))
"""``lift(interp, x)``: ``x`` (a constant or a lower-level tracer) as a tracer of ``interp``."""
process = DispatchPoint("process", _no_process, (Interpreter, Primitive), rest=(tuple, dict))
"""``process(interp, prim, args, params)``: apply ``prim`` to ``args`` (tracers of
``interp``) under its transform."""
dispatch.points.update(lift=lift, process=process)
# bind reads the tables directly: one dict lookup per call.
_lift_methods = lift.table
_process_methods = process.table


def _lift(interp: Interpreter, x: Any) -> Any:
    key = (type(interp), type(x))
    return (_lift_methods.get(key) or lift.resolve(*key))(interp, x)
