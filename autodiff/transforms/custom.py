"""Python functions with custom rules: ``custom_vjp`` and ``custom_jvp``.

Each call of such a function binds a primitive of its own, whose rules are
the user's; every transform then treats it like any other primitive: ``jvp``
of a ``custom_vjp`` function transposes its backward function, ``vmap`` maps
the function and its rules, and higher orders differentiate the rules.  Only
reverse mode treats a ``custom_vjp`` primitive specially (it runs ``fwd`` and
keeps its residuals): that ``process`` method is registered here, for
``(GradInterpreter, CustomVJPPrimitive)``.

The function and its rules may close over traced values (a layer's weights): those
become operands of the primitive (``transforms/closures.py``), and the function and
rules run with them standing for the operands' values.  The rule gives the derivative
in the explicit arguments; the derivative in a closed-over value goes through the
function's own code (JAX refuses to differentiate with respect to one).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.args import check_callable
from autodiff.core.arrays import batch_size_of, shape_of
from autodiff.core.loading import unchecked_rules
from autodiff.core.primitive import Primitive, process
from autodiff.core.rule_forms import jvp_taylor
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import (
    GradInterpreter,
    GradTensor,
    recording,
    stop_gradient,
    unpack,
    vjp,
)
from autodiff.interpreters.tape import Node
from autodiff.rules._helpers import bring_to_front
from autodiff.transforms.closures import Closure, closure_of

__all__ = ["CustomVJPPrimitive", "custom_jvp", "custom_vjp"]


def _is_leaf(x: Any) -> bool:
    return hasattr(x, "shape") or isinstance(x, (int, float, complex))


def _kind(x: Any) -> str:
    """What a user function returned, for error messages."""
    if isinstance(x, tuple):
        return f"a tuple of length {len(x)}"
    return f"a single array of shape {np.shape(x)}" if hasattr(x, "shape") else type(x).__name__


def _positional(fun: Callable, name: str, args: tuple, kwargs: dict) -> tuple:
    """``args`` and ``kwargs`` as positional arguments of ``fun`` (as JAX resolves them),
    defaults filled in where keywords skip over them."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TransformTypeError(
            f"{name}: the arguments could not be matched to the function's parameters "
            f"({e}); functions with custom rules take their arguments by position."
        ) from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TransformTypeError(
            f"{name}: functions with custom rules take positional arguments only (keyword "
            f"arguments {sorted(bound.kwargs)} have no position); bind them with "
            f"functools.partial first."
        )
    return tuple(bound.args)


def _nondiff_positions(fun: Callable, name: str, nums: Any, names: Any) -> tuple[int, ...]:
    """``nondiff_argnums`` and the positions of ``nondiff_argnames``, sorted."""
    nums = (nums,) if isinstance(nums, int) else tuple(nums)
    names = (names,) if isinstance(names, str) else tuple(names)
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in nums):
        raise TransformTypeError(
            f"{name}(fun, nondiff_argnums={nums!r}): nondiff_argnums must be non-negative "
            f"ints (positions of fun's arguments)"
        )
    positions = set(nums)
    if names:
        params = list(inspect.signature(fun).parameters)
        for n in names:
            if n not in params:
                raise TransformValueError(
                    f"{name}(fun, nondiff_argnames=...): fun has no parameter {n!r}"
                )
            positions.add(params.index(n))
    return tuple(sorted(positions))


def _split(name: str, args: tuple, nondiff: tuple[int, ...]) -> tuple[dict, tuple]:
    """The non-differentiable arguments by position, and the others in order."""
    if nondiff and nondiff[-1] >= len(args):
        raise TransformValueError(
            f"{name}: nondiff_argnums {nondiff} names argument {nondiff[-1]}, but it was "
            f"called with {len(args)} argument(s)"
        )
    static = {i: args[i] for i in nondiff}
    return static, tuple(a for i, a in enumerate(args) if i not in static)


def _merged(static: dict, dynamic: Any) -> list:
    """All the arguments in order: ``static`` at their positions, ``dynamic`` around them."""
    out, rest = [], iter(dynamic)
    for i in range(len(static) + len(dynamic)):
        out.append(static[i] if i in static else next(rest))
    return out


def _check_args(name: str, args: tuple) -> tuple[list, Any]:
    leaves, tree = trees.flatten(args)
    for leaf in leaves:
        if not hasattr(leaf, "shape") and not isinstance(leaf, (int, float, complex)):
            raise TransformTypeError(
                f"{name}: every argument leaf must be an array, got {type(leaf).__name__}; "
                f"pass other values through a closure or nondiff_argnums."
            )
    return leaves, tree


class CustomVJPPrimitive(Primitive):
    """A ``custom_vjp`` function: under ``grad`` its ``fwd`` runs and ``bwd`` is
    the VJP (``_grad_of_custom_vjp`` below); elsewhere, a primitive like any other."""

    __slots__ = ("bwd", "fwd")
    fwd: Callable  # (*args) -> (outputs, residuals)
    bwd: Callable  # (residuals, cotangents, argnums) -> cotangents of the arguments


@process.register(GradInterpreter, CustomVJPPrimitive)
def _grad_of_custom_vjp(
    interp: GradInterpreter, prim: CustomVJPPrimitive, args: tuple, params: dict
):
    """Run the function's ``fwd`` and keep its residuals on the tape for ``bwd``."""
    values, parents, _ = unpack(interp, args)
    if not parents or not recording(interp):
        return prim.bind(*values, **params)
    outs, residuals = prim.fwd(*values)
    node = Node(prim, {"residuals": residuals}, values, outs, parents)
    if not prim.multiple_results:  # (odeint's primitive: scipy/integrate.py)
        return GradTensor(interp, outs, node)
    return tuple(GradTensor(interp, out, node, i) for i, out in enumerate(outs))


def _batched(make: Callable[[], Primitive]) -> Callable:
    """The batching rule of a custom-rule primitive: bind the primitive that ``make``
    builds of the function and its rules under ``vmap``, on batch-first values."""

    def batch(args, dims, **params):
        size = batch_size_of(args, dims)
        outs = make().bind(*(bring_to_front(a, d, size) for a, d in zip(args, dims)))
        return outs, (0,) * len(outs)

    return batch


def _vmap(fun: Callable) -> Callable:
    """vmap's, imported when a custom rule is first batched: a program that never calls
    vmap (a grad through autograd's ``@primitive``) never loads its interpreter."""
    from autodiff.interpreters.batching import vmap

    return vmap(fun)


def _make_custom_vjp_primitive(name: str, fun: Callable, fwd: Callable, bwd: Callable):
    """fun, fwd, bwd on flat leaves: fwd -> (outs, residuals); bwd(residuals, cts, argnums)
    -> cts (those at ``argnums`` are read)."""
    prim = CustomVJPPrimitive(name, fun, multiple_results=True, traceable=True)
    prim.fwd, prim.bwd = fwd, bwd
    with unchecked_rules():  # (the JVP rule: the VJP's transpose, derived at first use)
        prim.def_vjp(_custom_vjp_rule(name, fwd, bwd), packed=True)
        prim.def_taylor(jvp_taylor(prim))  # through bwd's transpose: the custom rule, respected
        prim.def_batch(
            _batched(
                lambda: _make_custom_vjp_primitive(
                    name,
                    _vmap(fun),
                    _vmap(fwd),
                    lambda res, cts, argnums: _vmap(lambda r, c: bwd(r, c, argnums))(res, cts),
                )
            )
        )
    return prim


def _custom_vjp_rule(name: str, fwd: Callable, bwd: Callable) -> Callable:
    """The packed VJP rule of a ``custom_vjp`` primitive: ``bwd`` on the residuals its
    ``fwd`` kept on the tape (or ``fwd`` run again, where none were: a staged graph)."""

    def vjp_rule(cts, ans, primals, params, argnums):
        residuals = params["residuals"] if "residuals" in params else fwd(*primals)[1]
        cts_in = bwd(residuals, tuple(cts), tuple(argnums))
        for i in argnums:
            if cts_in[i] is not None and shape_of(cts_in[i]) != shape_of(primals[i]):
                raise TransformValueError(
                    f"custom_vjp function '{name}': bwd returned a cotangent of shape "
                    f"{shape_of(cts_in[i])} for an argument of shape {shape_of(primals[i])}; "
                    f"each cotangent must have the shape of its argument."
                )
        return [cts_in[i] for i in argnums]

    return vjp_rule


def _closed_custom_vjp(name: str, fun: Callable, fwd: Callable, bwd: Callable,
                       closure: Closure, n: int) -> Primitive:  # fmt: skip
    """The primitive of a ``custom_vjp`` function whose ``fun``, ``fwd`` or ``bwd`` close
    over traced values: those are its last operands, ``bwd`` gives the cotangents of the
    first ``n`` and the closed-over values' come through ``fun``'s own code."""

    def fun_c(*operands):
        return closure.run(operands[n:], fun, *operands[:n])

    def fwd_c(*operands):
        outs, residuals = closure.run(operands[n:], fwd, *operands[:n])
        return outs, (residuals, operands)

    def bwd_c(saved, cts, argnums):
        residuals, operands = saved
        xs, cs = operands[:n], operands[n:]
        cts_in = list(closure.run(cs, bwd, residuals, cts, argnums))
        wanted = [i - n for i in argnums if i >= n]
        if wanted:
            _, pull = vjp(closure.along(cs, wanted, fun, *xs), *(cs[i] for i in wanted))
            cts_in += [None] * len(cs)
            for i, ct in zip(wanted, pull(tuple(cts))):
                cts_in[n + i] = ct
        return tuple(cts_in)

    return _make_custom_vjp_primitive(name, fun_c, fwd_c, bwd_c)


class custom_vjp:
    """Give a Python function its own VJP (JAX's API).

    ``f.defvjp(fwd, bwd)``: ``fwd(*args)`` returns ``(output, residuals)``
    (residuals: a pytree of arrays, or None) and ``bwd(residuals, cotangent)``
    returns one cotangent per argument (a tuple).  The function then works
    under every transform: ``grad`` and ``vjp`` use ``bwd``; ``jvp`` transposes
    ``bwd`` (exact when it is written with ``autodiff.numpy`` functions; a
    ``bwd`` that is not linear in the cotangent, like gradient clipping, is
    transposed at its linearisation at 0); ``vmap`` maps ``f``, ``fwd`` and
    ``bwd``; higher orders differentiate ``bwd``.

    ``nondiff_argnums`` (or ``nondiff_argnames``), as in JAX: arguments that are not
    differentiated, such as functions.  ``fwd`` takes every argument in order; ``bwd``
    takes the non-differentiable ones first, ``bwd(*nondiff, residuals, cotangent)``, and
    returns cotangents for the others only.  They must not hold traced values (make
    such an argument a differentiable one, whose cotangent ``bwd`` may give as None).
    Keyword arguments are matched to positions by ``f``'s signature.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> @autodiff.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, ct: (anp.clip(ct, -1.0, 1.0),))
    >>> float(autodiff.grad(lambda x: 5.0 * clip_gradient(x))(2.0))
    1.0
    >>> from functools import partial
    >>> @partial(autodiff.custom_vjp, nondiff_argnums=(0,))
    ... def apply(f, x):
    ...     return f(x)
    >>> apply.defvjp(lambda f, x: (f(x), x), lambda f, x, ct: (ct * 2 * x,))
    >>> float(autodiff.grad(lambda x: apply(anp.square, x))(3.0))
    6.0
    """

    def __init__(self, fun: Callable, nondiff_argnums: Any = (), nondiff_argnames: Any = ()):
        check_callable(fun, "custom_vjp")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, "custom_vjp", nondiff_argnums,
                                                  nondiff_argnames)  # fmt: skip
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:  # fmt: skip
        check_callable(fwd, "custom_vjp.defvjp (fwd)")
        check_callable(bwd, "custom_vjp.defvjp (bwd)")
        if symbolic_zeros or optimize_remat:
            raise NotImplementedError(
                "custom_vjp.defvjp: symbolic_zeros and optimize_remat are not supported; bwd "
                "gets every cotangent as an array (zeros where the output is unused)"
            )
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "custom_vjp")
        if self.fwd is None or self.bwd is None:
            raise TransformTypeError(
                f"custom_vjp function '{name}' has no rule yet: call {name}.defvjp(fwd, bwd)."
            )
        where = f"custom_vjp function '{name}'"
        args = _positional(self.fun, where, args, kwargs)
        static, dynamic = _split(where, args, self.nondiff_argnums)
        for i, value in static.items():
            if any(isinstance(leaf, Tracer) for leaf in trees.leaves(value)):
                raise TransformTypeError(
                    f"{where}: argument {i} is in nondiff_argnums but holds a traced value; "
                    f"non-differentiable arguments are for values that cannot be traced "
                    f"(functions, settings), as in JAX. Make it a regular argument (bwd may "
                    f"return None as its cotangent)."
                )
        leaves, in_tree = _check_args(where, dynamic)
        out_cell: list = []
        fwd, bwd = self.fwd, self.bwd
        nondiff = [static[i] for i in self.nondiff_argnums]

        def full(flat_args):
            return _merged(static, trees.unflatten(in_tree, list(flat_args)))

        def flat_fwd(*flat_args):
            pair = fwd(*full(flat_args))
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TransformTypeError(
                    f"{where}: fwd must return a pair (output, residuals), got {_kind(pair)}. "
                    f"Return (output, None) if bwd needs no residuals."
                )
            out, residuals = pair
            out_leaves, out_tree = trees.flatten(out)
            out_cell[:] = [out_tree]
            return tuple(out_leaves), residuals

        def flat_bwd(residuals, cts, argnums=()):
            cts_tree = trees.unflatten(out_cell[0], list(cts))
            cts_in = bwd(*nondiff, residuals, cts_tree)
            if not isinstance(cts_in, tuple) or len(cts_in) != len(dynamic):
                which = " differentiable" if static else ""
                raise TransformTypeError(
                    f"{where}: bwd must return a tuple with one cotangent per{which} "
                    f"argument ({len(dynamic)}), got {type(cts_in).__name__}"
                    + (f" of length {len(cts_in)}" if isinstance(cts_in, tuple) else "")
                )
            # None is a zero cotangent, for an argument or any part of one
            cts_in = tuple(
                trees.tree_map(lambda _: None, arg) if ct is None else ct
                for arg, ct in zip(dynamic, cts_in)
            )
            try:
                leaves = in_tree.flatten_up_to(cts_in)
            except ValueError:
                leaves = [()]  # reported below
            if not all(ct is None or _is_leaf(ct) for ct in leaves):
                raise TransformValueError(
                    f"{where}: bwd must return cotangents structured like the arguments "
                    f"({in_tree}), got {trees.flatten(cts_in)[1]}; use None for a zero "
                    f"cotangent."
                )
            return tuple(leaves)

        def flat_fun(*flat_args):
            out = self.fun(*full(flat_args))
            out_leaves, out_tree = trees.flatten(out)
            out_cell[:] = [out_tree]
            return tuple(out_leaves)

        closure = closure_of(self.fun, fwd, bwd, *nondiff)
        if closure:
            prim = _closed_custom_vjp(name, flat_fun, flat_fwd, flat_bwd, closure, len(leaves))
        else:
            prim = _make_custom_vjp_primitive(name, flat_fun, flat_fwd, flat_bwd)
        outs = prim.bind(*leaves, *closure.tracers)
        return trees.unflatten(out_cell[0], list(outs))


def _make_custom_jvp_primitive(name: str, fun: Callable, jvp_fun: Callable) -> Primitive:
    """fun and jvp_fun on flat leaves: jvp_fun(primals, tangents) -> tangents_out, where a
    tangent is None for an argument that has none."""
    prim = Primitive(name, fun, multiple_results=True, traceable=True)

    def jvp_rule(tangents, ans, primals, params):
        return jvp_fun(primals, tuple(tangents))

    with unchecked_rules():  # (the VJP rule: the JVP's transpose, derived at first use)
        prim.def_jvp(jvp_rule, packed=True)
        prim.def_taylor(jvp_taylor(prim))  # Taylor mode through the custom rule (JAX ignores it)
        prim.def_batch(
            _batched(lambda: _make_custom_jvp_primitive(name, _vmap(fun), _vmap(jvp_fun)))
        )
    return prim


def _zeros_for_none(tangents: tuple, primals: tuple) -> tuple:
    return tuple(np.zeros_like(p) if t is None else t for t, p in zip(tangents, primals))


def _closed_custom_jvp(name: str, fun: Callable, jvp_fun: Callable, closure: Closure,
                       n: int) -> Primitive:  # fmt: skip
    """The primitive of a ``custom_jvp`` function whose function or rule close over traced
    values: those are its last operands; the rule gives the tangent along the first
    ``n``, the closed-over values' tangents go through ``fun``'s own code."""

    def fun_c(*operands):
        return closure.run(operands[n:], fun, *operands[:n])

    def jvp_c(primals, tangents):
        xs, cs = primals[:n], primals[n:]
        out = closure.run(cs, jvp_fun, xs, tangents[:n])
        moving = [i for i, t in enumerate(tangents[n:]) if t is not None]
        if moving:
            along = closure.along(cs, moving, fun, *xs)
            _, through = jvp(along, tuple(cs[i] for i in moving),
                             tuple(tangents[n + i] for i in moving))  # fmt: skip
            out = tuple(a + b for a, b in zip(out, through))
        return out

    return _make_custom_jvp_primitive(name, fun_c, jvp_c)


class custom_jvp:
    """Give a Python function its own JVP (JAX's API).

    ``f.defjvp(rule)``: ``rule(primals, tangents)`` gets two tuples (one entry
    per argument) and returns ``(output, tangent_out)``.  Every transform then
    uses it: ``jvp`` directly, ``grad``/``vjp`` by transposing it (exact when it
    is written with ``autodiff.numpy`` functions), ``vmap`` by mapping both.

    ``nondiff_argnums`` (or ``nondiff_argnames``), as in JAX: arguments that are not
    differentiated (no derivative flows through them: traced values there are taken
    as constants), passed to the rule first, ``rule(*nondiff, primals, tangents)``,
    with ``primals`` and ``tangents`` holding the other arguments only.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> @autodiff.custom_jvp
    ... def log1pexp(x):
    ...     return anp.log1p(anp.exp(x))
    >>> @log1pexp.defjvp
    ... def _(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return log1pexp(x), t * (1 - 1 / (1 + anp.exp(x)))
    >>> float(autodiff.grad(log1pexp)(100.0))  # stable: the naive rule gives nan
    1.0
    """

    def __init__(self, fun: Callable, nondiff_argnums: Any = (), nondiff_argnames: Any = ()):
        check_callable(fun, "custom_jvp")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, "custom_jvp", nondiff_argnums,
                                                  nondiff_argnames)  # fmt: skip
        self.jvp: Callable | None = None

    def defjvp(self, rule: Callable, symbolic_zeros: bool = False) -> Callable:
        check_callable(rule, "custom_jvp.defjvp")
        if symbolic_zeros:
            raise NotImplementedError(
                "custom_jvp.defjvp: symbolic_zeros is not supported; the rule gets every "
                "tangent as an array (zeros where an argument has none)"
            )
        self.jvp = rule
        return rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "custom_jvp")
        if self.jvp is None:
            raise TransformTypeError(
                f"custom_jvp function '{name}' has no rule yet: decorate one with @{name}.defjvp."
            )
        where = f"custom_jvp function '{name}'"
        args = _positional(self.fun, where, args, kwargs)
        static, dynamic = _split(where, args, self.nondiff_argnums)
        # the non-differentiable arguments' arrays are operands too (vmap maps them, a
        # staging sees them), with their derivatives stopped; their other leaves stay here
        nd_leaves, nd_tree = trees.flatten([static[i] for i in self.nondiff_argnums])
        nd_arrays = [i for i, leaf in enumerate(nd_leaves) if hasattr(leaf, "shape")]
        leaves, in_tree = _check_args(where, dynamic)
        n = len(leaves)
        out_cell: list = []
        rule = self.jvp

        def nondiff(values):
            full = list(nd_leaves)
            for i, v in zip(nd_arrays, values):
                full[i] = v
            return trees.unflatten(nd_tree, full)

        def flat_fun(*flat):
            fixed = dict(zip(self.nondiff_argnums, nondiff(flat[n:])))
            out = self.fun(*_merged(fixed, trees.unflatten(in_tree, list(flat[:n]))))
            out_leaves, out_tree = trees.flatten(out)
            out_cell[:] = [out_tree]
            return tuple(out_leaves)

        def flat_jvp(primals, tangents):
            tangents = _zeros_for_none(tangents, primals)
            pair = rule(
                *nondiff(primals[n:]),
                tuple(trees.unflatten(in_tree, list(primals[:n]))),
                tuple(trees.unflatten(in_tree, list(tangents[:n]))),
            )
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TransformTypeError(
                    f"{where}: the rule must return a pair (output, tangent_out), got "
                    f"{_kind(pair)}."
                )
            out, tangent = pair
            out_leaves, out_tree = trees.flatten(out)
            t_leaves, t_tree = trees.flatten(tangent)
            if t_tree != out_tree:
                raise TransformValueError(
                    f"{where}: the rule's tangent_out must be structured like its output "
                    f"({out_tree}), got {t_tree}."
                )
            for o, t in zip(out_leaves, t_leaves):
                if shape_of(o) != shape_of(t):
                    raise TransformValueError(
                        f"{where}: the rule returned a tangent of shape {shape_of(t)} for an "
                        f"output of shape {shape_of(o)}; each tangent must have the shape of "
                        f"its output."
                    )
            out_cell[:] = [out_tree]
            return tuple(t_leaves)

        constants = [stop_gradient(nd_leaves[i]) for i in nd_arrays]
        closure = closure_of(self.fun, rule, *(static[i] for i in self.nondiff_argnums))
        if closure:
            prim = _closed_custom_jvp(name, flat_fun, flat_jvp, closure, n + len(constants))
        else:
            prim = _make_custom_jvp_primitive(name, flat_fun, flat_jvp)
        outs = prim.bind(*leaves, *constants, *closure.tracers)
        return trees.unflatten(out_cell[0], list(outs))
