"""Forward mode: JvpInterpreter, DualTensor, jvp.

A DualTensor carries a primal value and its tangent.  Each primitive applied
to one computes its output with the primitive itself and the output tangent
with the primitive's JVP rule.  A tangent of ``None`` is a symbolic zero: no
work is done for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.args import (
    a_type,
    as_input_array,
    check_callable,
    check_flag,
    check_no_none,
    is_array,
    leaf_paths,
    note_list_inputs,
    number_as_array,
    numbers_for_array,
    split_aux,
)
from autodiff.core.arrays import shape_of
from autodiff.core.loading import load
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.stack import Interpreter, new_interpreter, owned
from autodiff.core.tracer import Tracer
from autodiff.debug import checking_nans
from autodiff.debug import rules_switch as checking
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.rules.creation import as_output

__all__ = ["DualTensor", "JvpInterpreter", "jvp"]


class JvpInterpreter(Interpreter):
    __slots__ = ()
    transform = "jvp"


class DualTensor(Tracer):
    """A value under forward mode: primal and tangent (None: zero)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, interp, primal, tangent) -> None:
        self._interp = interp
        self.primal = primal
        self.tangent = tangent

    @property
    def _inner(self):
        return self.primal

    def _fields(self):
        return [f"primal={self.primal!r}", f"tangent={self.tangent!r}"]

    def _refuse(self, what, kind, frame):  # noqa: ARG002  (every kind drops it)
        if self.tangent is not None:  # converting drops the tangent
            raise self._derivative_error(what, frame)


@lift.register(JvpInterpreter, object)
def _lift_dual(interp: JvpInterpreter, x: Any):
    return DualTensor(interp, x, None)  # a constant: zero tangent


@process.register(JvpInterpreter, Primitive)
def _push_tangents(interp: JvpInterpreter, prim: Primitive, args: tuple, params: dict):
    primals = tuple(arg.primal for arg in args)
    if not prim.differentiable:
        return prim.bind(*primals, **params)
    if prim.jvp is None and prim.vjp is None:  # one is enough: the other is its transpose
        raise prim.missing("JVP", interp)
    ans = prim.bind(*primals, **params)
    if nans := checking_nans():  # before the JVP rule, which would spread it
        load("autodiff.debug.nans").check_output(prim, primals, ans)
    tangents = tuple(arg.tangent for arg in args)
    rule = prim.jvp or prim.jvp_rule()
    rules = getattr(rule, "rules", None)
    if rules is not None and interp.observer is None:
        # per-argument rules (core/rule_forms.py), without the wrapper: the hot path
        tangent: Any = None
        for r, t in zip(rules, tangents):
            if t is not None and r is not None:
                term = r(t, ans, *primals, **params)
                tangent = term if tangent is None else tangent + term
    elif interp.observer is None:
        tangent = rule(tangents, ans, primals, params)
    else:  # explain's hook: the calls the rule makes are the rule's, not the primitive's
        with interp.observer.rule(interp, "JVP rule"):
            tangent = rule(tangents, ans, primals, params)
    if checking.get():
        load("autodiff.debug.rule_checks").validate_jvp(prim, tangent, ans)
    if nans:
        given = [*primals, *[t for t in tangents if t is not None]]
        load("autodiff.debug.nans").check_tangent(prim, given, tangent)
    if prim.multiple_results:
        return tuple(a if t is None else DualTensor(interp, a, t) for a, t in zip(ans, tangent))
    return ans if tangent is None else DualTensor(interp, ans, tangent)


def jvp(func: Callable, primals: Any, tangents: Any, has_aux: bool = False):
    """Evaluate ``func(*primals)`` and its directional derivative along ``tangents``.

    ``primals`` and ``tangents`` are tuples (or lists) with one entry per
    positional argument of ``func``; entries may be pytrees, and each tangent
    must match its primal's structure and shapes.  Returns
    ``(output, tangent_out)``, or ``(output, tangent_out, aux)`` with
    ``has_aux=True``.  Outputs that do not depend on the primals get zero
    tangents.

    >>> import numpy as np
    >>> from autodiff import jvp
    >>> out, t = jvp(np.sin, (0.0,), (2.0,))
    >>> float(out), float(t)
    (0.0, 2.0)
    """
    check_callable(func, "jvp")
    check_flag(has_aux, "has_aux", "jvp")
    for name, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, (tuple, list)):
            raise TransformTypeError(
                f"jvp(func, primals, tangents): {name} must be a tuple (or list) with "
                f"one entry per positional argument of func, got "
                f"{type(value).__name__}. For one argument write ({name[:-1]},)."
            )
    check_no_none(primals, "jvp", what="the primal for ")
    flat_p, tree_p = trees.flatten(tuple(primals))
    flat_t, tree_t = trees.flatten(tuple(tangents))
    if tree_p != tree_t:
        listed = numbers_for_array(tuple(tangents), tree_p, "jvp: tangent")
        raise TransformValueError(
            (f"{listed} " if listed else "")
            + f"jvp: tangents must have the same structure as primals, got primals "
            f"{tree_p} and tangents {tree_t}."
        )
    paths = leaf_paths(tuple(primals))
    flat_p = [
        as_input_array(p, f"the primal for {path}", "jvp", differentiable=True)
        for p, path in zip(flat_p, paths)
    ]
    flat_t = [
        as_input_array(t, f"the tangent for {path}", "jvp", differentiable=True)
        for t, path in zip(flat_t, paths)
    ]
    for i, (p, t, path) in enumerate(zip(flat_p, flat_t, paths)):
        if shape_of(p) != shape_of(t):
            raise TransformValueError(
                f"jvp: the tangent for {path} has shape {shape_of(t)} but its primal has "
                f"shape {shape_of(p)}; each tangent must match its primal's shape."
            )
        if t.dtype != p.dtype:
            if t.dtype.kind == "c" and p.dtype.kind != "c":
                raise TransformTypeError(
                    f"jvp: the tangent for {path} is complex ({t.dtype}) but its primal is "
                    f"real ({p.dtype}); a real value only has real tangents."
                )
            flat_t[i] = t.astype(p.dtype)  # e.g. a Python float tangent for a float32 primal
    interp = JvpInterpreter()
    with new_interpreter(interp):
        duals = [DualTensor(interp, p, t) for p, t in zip(flat_p, flat_t)]
        try:
            out = func(*trees.unflatten(tree_p, duals))
        except TypeError as e:  # a list for an array: list ** 2 fails in func
            note_list_inputs(e, tuple(primals), "jvp")
            raise
        aux = None
        if has_aux:
            out, aux = split_aux(out, "jvp")
            aux = trees.tree_map(functools.partial(_primal, interp), aux)
        out_flat, out_tree = trees.flatten(out)
        primals_out, tangents_out = [], []
        for i, leaf in enumerate(out_flat):
            mine = owned(interp, leaf)
            primal, tangent = (leaf, None) if mine is None else (mine.primal, mine.tangent)
            primal = number_as_array(primal)
            if not is_array(primal):
                raise TransformTypeError(
                    f"jvp: output {i} of func is {a_type(primal)}, not an "
                    f"array. Return other values as aux (has_aux=True)."
                )
            primals_out.append(as_output(primal))
            tangents_out.append(as_output(np.zeros_like(primal) if tangent is None else tangent))
    result = (
        trees.unflatten(out_tree, primals_out),
        trees.unflatten(out_tree, tangents_out),
    )
    return (*result, aux) if has_aux else result


def _primal(interp: JvpInterpreter, x: Any) -> Any:
    return x.primal if isinstance(x, DualTensor) and x._interp is interp else x
