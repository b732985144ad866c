"""``scan`` and ``fori_loop``: loops of a fixed number of steps.

``scan`` is a control-flow primitive (``_control.py``): every transform runs its
steps at its own level, so ``jvp`` pushes (carry, tangent) through the steps,
``vmap`` batches the carry and ``xs`` (a carry that becomes batched in the body
simply is batched from then on), and ``grad`` records each step's primitives, as
it would a Python loop (inside a ``jit`` grad stages two scans instead:
``_staged_grad.py``, which also registers reverse mode's method for scans).

``checkpoint=True`` changes what reverse mode keeps: one tape node for the whole
scan holding only the carry each step started from; its VJP runs the steps
backwards, recomputing each one and running its backward pass
(``_grad_of_checkpointed_scan``).  Each step runs at the grad's own level on fresh
inputs, so its primitives form a small tape of their own; whatever they reach
that was recorded before the step (values ``f`` closes over, such as weights)
is found on that tape, becomes an input of the scan's node, and receives the
cotangents the steps send it.  During the backward pass the steps run again
under the same interpreter, made live for that time (``_live``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import optree

from autodiff import _core
from autodiff._args import a_type, check_callable, check_flag
from autodiff._control import (
    ControlFlowPrimitive,
    _check_predicate,
    _while,
    check_like,
    leaves_of,
    names_of,
    staged_if_jitting,
)
from autodiff._core import Primitive, current_interpreters, lift
from autodiff._reverse import GradInterpreter, GradTensor, _no_grad_below, recording, unpack
from autodiff._tape import Dropped, Node, backward
from autodiff._tracer import Tracer
from autodiff.errors import RuleError, TransformTypeError, TransformValueError
from autodiff.rules._helpers import array_like, dtype_of, shape_of
from autodiff.rules.shape import moveaxis, stack

__all__ = ["ScanPrimitive", "fori_loop", "grad_of_scan", "scan", "scan_p"]

_CARRY_HINT = "a loop's carry keeps its structure, shapes and dtypes (cast with .astype)."


class ScanPrimitive(ControlFlowPrimitive):
    """``scan``: reverse mode has a method of its own for it (``checkpoint=True``)."""

    __slots__ = ()


class _Body:
    """``f`` on flat leaves, ``(*carry, *x) -> (*carry, *y)``, checking what it returns:
    a pair, a carry like the one it was given (unless ``carry_names`` is None: the
    caller checks it), and ``y`` like the last step's."""

    __slots__ = ("carry_names", "carry_tree", "f", "n_carry", "xs_tree", "y_names", "y_tree",
                 "y_types")  # fmt: skip

    def __init__(self, f: Callable, carry_tree: Any, carry_names: list | None,
                 xs_tree: Any) -> None:  # fmt: skip
        self.f, self.xs_tree = f, xs_tree
        self.carry_tree, self.carry_names = carry_tree, carry_names
        self.n_carry = carry_tree.num_leaves
        self.y_tree: Any = None
        self.y_types: list = []
        self.y_names: list = []

    def __call__(self, *leaves: Any) -> tuple:
        carry, x = leaves[: self.n_carry], leaves[self.n_carry :]
        out = self.f(optree.tree_unflatten(self.carry_tree, list(carry)),
                     optree.tree_unflatten(self.xs_tree, list(x)))  # fmt: skip
        if not (isinstance(out, tuple) and len(out) == 2):
            got = f"a tuple of length {len(out)}" if isinstance(out, tuple) else a_type(out)
            raise TransformTypeError(
                f"scan: f must return a pair (carry, y), got {got}. Return (carry, None) "
                f"when there is nothing to stack."
            )
        new, c_tree = optree.tree_flatten(out[0])
        if self.carry_names is not None:
            check_like(new, c_tree, carry, self.carry_tree, self.carry_names,
                       "scan: the carry f returned", "the carry it was given",
                       _CARRY_HINT)  # fmt: skip
        y, y_tree = optree.tree_flatten(out[1])
        if self.y_tree is None:
            self.y_tree, self.y_names = y_tree, names_of(y_tree, "y")
        else:
            check_like(y, y_tree, self.y_types, self.y_tree, self.y_names,
                       "scan: the y f returned", "the y of the step before",
                       "every step's y must have the same structure, shapes and dtypes, "
                       "to be stacked.")  # fmt: skip
        self.y_types = y
        return (*new, *y)


def _steps(length: int, reverse: bool) -> range:
    return range(length - 1, -1, -1) if reverse else range(length)


def _stacked(ys: list, body: _Body, carry: tuple, xs: tuple) -> tuple:
    """The steps' ``y`` leaves, each stacked along a new first axis."""
    if not ys:  # no step ran: run f once on stand-ins to learn the shapes of y
        x = [np.zeros(shape_of(v)[1:], dtype_of(v), like=array_like(v)) for v in xs]
        out = body(*carry, *x)[len(carry) :]
        return tuple(np.zeros((0, *shape_of(v)), dtype_of(v), like=array_like(v)) for v in out)
    return tuple(map(_stack, zip(*ys)))


def _stack(column: tuple) -> Any:
    """One y leaf of every step, stacked; Python numbers take the others' dtype."""
    if any(isinstance(y, (bool, int, float, complex)) for y in column):
        dtype = np.result_type(*(y if isinstance(y, (bool, int, float, complex)) else dtype_of(y)
                                 for y in column))  # fmt: skip
        return stack(list(column), dtype=dtype)
    return stack(list(column))


def _scan_impl(*operands: Any, body: _Body, length: int, reverse: bool, checkpoint: bool,
               unroll: bool) -> tuple:  # fmt: skip
    n = body.n_carry
    carry, xs = operands[:n], operands[n:]
    # traced xs are sliced by one primitive, whose VJP stacks the steps' cotangents: a
    # slice x[t] each would send a cotangent of all of xs back from every step
    slices = [slices_p.bind(x) if isinstance(x, Tracer) and length else x for x in xs]
    ys: list = [None] * length
    for t in _steps(length, reverse):
        out = body(*carry, *(x[t] for x in slices))
        carry, ys[t] = out[:n], out[n:]
    return (*carry, *_stacked(ys, body, carry, xs))


def _slices_batch(args, dims):
    (x,), (d,) = args, dims
    if d == 0:  # the steps are axis 1: bring them to the front
        x, d = moveaxis(x, 1, 0), 1
    out = slices_p.bind(x)
    return out, (d - 1,) * len(out)


slices_p = Primitive(
    "scan_slices",  # xs[0], xs[1], ...: the views along the first axis
    lambda x: tuple(x),
    vjp=lambda cts, ans, x: [stack(list(cts))],
    jvp=lambda tangents, ans, x: slices_p.bind(tangents[0]),
    batch=_slices_batch,
    multiple_results=True,  # (vjp_reads cannot drop a tuple of results; they are views of x)
)


scan_p = ScanPrimitive("scan", _scan_impl, multiple_results=True)


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: bool | int = 1, *,
         checkpoint: bool = False) -> tuple:  # fmt: skip
    """Loop ``f`` over the leading axis of ``xs``, carrying a state (JAX's ``lax.scan``).

    ``f(carry, x) -> (carry, y)``: each step gets the carry and one slice of ``xs``
    and returns the new carry (same structure, shapes and dtypes as ``init``) and
    ``y``.  Returns the final carry and the ``y`` of every step stacked along a new
    first axis; ``xs``, ``y`` and the carry are pytrees of arrays.  ``length`` is
    the number of steps (needed when ``xs`` is None); ``reverse=True`` runs from the
    last slice to the first (``ys`` stay in the order of ``xs``).

    ``checkpoint=True``: under ``grad``/``vjp`` keep only the carry each step
    started from and recompute the steps during the backward pass, instead of
    keeping every step's intermediate values (as :func:`autodiff.checkpoint` does
    for one function).  It applies where the scan is reached by ``grad``'s own
    values or runs directly inside it (``grad(f)``, ``vmap(grad(f))``); values of
    a ``vmap`` running inside the ``grad`` are recorded step by step.

    Under ``jit`` the body is staged once and the replay runs the loop, also for
    ``jit(grad(f))``, where the gradient is two staged scans (forward, keeping each
    step's residuals, and reversed).  ``unroll=True`` stages every step instead: a
    longer program to stage, a faster one to replay when the steps are small (no
    per-step call, no stacked residuals).  Eagerly it changes nothing.  (JAX's
    ``unroll=k``, k steps per iteration, is not supported: pass 1 or True.)

    >>> import numpy as np, autodiff
    >>> cumsum = lambda xs: autodiff.scan(lambda c, x: (c + x, c + x), 0.0, xs)
    >>> total, partial = cumsum(np.array([1.0, 2.0, 3.0]))
    >>> float(total), partial
    (6.0, array([1., 3., 6.]))
    >>> def rnn(w, xs, checkpoint):
    ...     step = lambda h, x: (np.tanh(w * h + x), None)
    ...     return autodiff.scan(step, 0.0, xs, checkpoint=checkpoint)[0]
    >>> xs = np.array([1.0, -1.0, 0.5])
    >>> [round(float(autodiff.grad(rnn)(0.5, xs, c)), 6) for c in (False, True)]
    [-0.271276, -0.271276]
    """
    check_callable(f, "scan")
    check_flag(reverse, "reverse", "scan")
    check_flag(checkpoint, "checkpoint", "scan")
    if unroll not in (0, 1) or not isinstance(unroll, (bool, int)):
        raise TransformValueError(
            f"scan: unroll must be 1 (one staged body) or True (every step staged), got "
            f"{unroll!r:.40}; unrolling k steps per iteration, as JAX's unroll=k, is not "
            f"supported."
        )
    return _scan(f, init, xs, length, reverse, checkpoint, unroll=unroll is True)


def _scan(f: Callable, init: Any, xs: Any, length: Any, reverse: bool, checkpoint: bool,
          check_carry: bool = True, unroll: bool = False) -> tuple:  # fmt: skip
    carry, carry_tree, carry_names = leaves_of(init, "init", "scan")
    x_leaves, xs_tree, x_names = leaves_of(xs, "xs", "scan")
    length = _length(x_leaves, x_names, length)
    body = _Body(f, carry_tree, carry_names if check_carry else None, xs_tree)
    operands = [*carry, *x_leaves]
    if checkpoint:
        operands = _for_checkpoint(operands)
    operands = staged_if_jitting(operands)
    outs = scan_p.bind(*operands, body=body, length=length, reverse=reverse,
                       checkpoint=checkpoint, unroll=unroll)  # fmt: skip
    n = len(carry)
    return (optree.tree_unflatten(carry_tree, list(outs[:n])),
            optree.tree_unflatten(body.y_tree, list(outs[n:])))  # fmt: skip


def _length(x_leaves: list, names: list, length: Any) -> int:
    if length is not None and (not _static_int(length) or length < 0):
        error = TransformValueError if _static_int(length) else TransformTypeError
        raise error(f"scan: length must be None or a non-negative int, got {length!r:.40}.")
    sizes = {}
    for leaf, name in zip(x_leaves, names):
        if not shape_of(leaf):
            raise TransformValueError(
                f"scan: {name} has shape (); every leaf of xs needs a leading axis to "
                f"scan over (pass a scalar that every step sees through a closure)."
            )
        sizes[name] = shape_of(leaf)[0]
    if length is not None:
        sizes["length"] = int(length)
    if not sizes:
        raise TransformValueError("scan: with xs=None, give the number of steps as length=.")
    if len(set(sizes.values())) > 1:
        listing = ", ".join(f"{name} has {size}" for name, size in sizes.items())
        raise TransformValueError(
            f"scan: the leaves of xs must have the same leading size (the number of "
            f"steps), but {listing}."
        )
    return next(iter(sizes.values()))


def _static_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any) -> Any:
    """``val = init_val; for i in range(lower, upper): val = body_fun(i, val)``
    (JAX's ``lax.fori_loop``).

    With Python ints as bounds it is a :func:`scan` of ``upper - lower`` steps;
    with traced bounds (which may differ per example under ``vmap``) a
    :func:`while_loop`.  ``body_fun`` keeps the structure, shapes and dtypes of
    ``init_val``.

    >>> import numpy as np, autodiff
    >>> power = lambda x, n: autodiff.fori_loop(0, n, lambda i, p: p * x, 1.0)
    >>> float(power(2.0, 10)), float(autodiff.grad(power)(2.0, 3))
    (1024.0, 12.0)
    >>> autodiff.vmap(power)(np.array([2.0, 3.0]), np.array([3, 2]))
    array([8., 9.])
    """
    check_callable(body_fun, "fori_loop (body_fun)")
    for name, bound in (("lower", lower), ("upper", upper)):
        _check_predicate(bound, f"fori_loop: {name}", "int")
    _, tree, names = leaves_of(init_val, "init_val", "fori_loop")

    def step(i: Any, x: Any) -> Any:
        out = body_fun(i, x)
        got, got_tree = optree.tree_flatten(out)
        check_like(got, got_tree, optree.tree_leaves(x), tree, names,
                   "fori_loop: the value body_fun returned", "the value it was given",
                   _CARRY_HINT)  # fmt: skip
        return out

    if _static_int(lower) and _static_int(upper):
        if upper <= lower:
            return init_val
        # step checks the carry, with fori_loop's names: the scan need not
        steps = int(upper) - int(lower)
        (_, out), _ = _scan(lambda c, _: ((c[0] + 1, step(*c)), None), (int(lower), init_val),
                            None, steps, False, False, check_carry=False)  # fmt: skip
        return out
    _, out = _while("fori_loop", lambda c: c[0] < upper, lambda c: (c[0] + 1, step(*c)),
                    (lower, init_val), check_carry=False)  # fmt: skip
    return out


# --- reverse mode with recomputation ---------------------------------------------------


def _for_checkpoint(operands: list) -> list:
    """Where nothing passed to the scan is a value of the innermost transform and that
    transform is a grad, its values may still reach the steps through ``f``'s closure:
    lift one operand into it, so that its method for scan (below) sees the scan."""
    stack = current_interpreters()
    if not stack or not isinstance(stack[-1], GradInterpreter) or not operands:
        return operands
    top = stack[-1]
    if any(isinstance(x, Tracer) and x._interp.level >= top.level for x in operands):
        return operands
    return [lift(top, operands[0]), *operands[1:]]


def grad_of_scan(interp: GradInterpreter, prim: Primitive, args: tuple, params: dict):
    """Reverse mode's method for a scan run eagerly: the steps recorded like a Python
    loop, or (``checkpoint=True``) one tape node that recomputes them.  Registered, with
    the method for a scan inside a jit, by ``_staged_grad.py``."""
    if params["checkpoint"] and params["length"] and recording(interp) \
            and not interp.keep_all_residuals:  # fmt: skip
        return _grad_of_checkpointed_scan(interp, prim, args, params)
    return prim.impl(*args, **params)  # the steps, recorded like any Python loop


def _fresh(interp: GradInterpreter, value: Any) -> Any:
    """``value`` as an input of a step's own tape (if it can have a derivative)."""
    if dtype_of(value).kind in "fc":
        return GradTensor(interp, value, Node(None, {}, (), None, ()))
    return value


def _mark() -> int:
    """A number below every node recorded from now on."""
    return Node(None, {}, (), None, ()).seq


def _value(interp: GradInterpreter, x: Any) -> Any:
    return x.value if isinstance(x, GradTensor) and x._interp is interp else x


def _outside(interp: GradInterpreter, outs: tuple) -> bool:
    """Whether a step's output is a value of a transform above ``interp`` (one that ``f``
    closes over): then the scan is not this level's to make one node of."""
    return any(isinstance(o, Tracer) and o._interp is not interp and o._interp.level > interp.level
               for o in outs)  # fmt: skip


def _closed_over(interp: GradInterpreter, outs: tuple, start: int, found: dict) -> None:
    """Add to ``found`` the nodes recorded before ``start`` that the step's outputs
    depend on (the values ``f`` closes over), with a stand-in for each value."""
    todo = []
    for o in outs:
        if isinstance(o, GradTensor) and o._interp is interp and o.node is not None:
            if o.node.seq < start:  # f returned a closed-over value itself
                found.setdefault((id(o.node), o.index), (o.node, o.index, Dropped(scan_p, 0, o)))
            else:
                todo.append(o.node)
    seen = set()
    while todo:
        node = todo.pop()
        for argnum, parent, index in node.parents:
            if parent.seq < start:
                key = (id(parent), index)
                if key not in found:
                    found[key] = (parent, index, Dropped(scan_p, argnum, node.primals[argnum]))
            elif id(parent) not in seen:
                seen.add(id(parent))
                todo.append(parent)


def _grad_of_checkpointed_scan(interp, prim, args, params):
    values, parents, _ = unpack(interp, args)
    body, length, reverse = params["body"], params["length"], params["reverse"]
    n = body.n_carry
    carry, xs = tuple(values[:n]), values[n:]
    traced_xs = {i - n for i, _, _ in parents if i >= n}
    saved: list = [None] * length
    ys: list = [None] * length
    closures: dict = {}
    for t in _steps(length, reverse):
        saved[t] = carry
        start = _mark()
        x = [_fresh(interp, v[t]) if j in traced_xs else v[t] for j, v in enumerate(xs)]
        outs = body(*(_fresh(interp, c) for c in carry), *x)
        if _outside(interp, outs):
            return prim.impl(*args, **params)
        _closed_over(interp, outs, start, closures)
        carry = tuple(_value(interp, o) for o in outs[:n])
        ys[t] = tuple(_value(interp, o) for o in outs[n:])
    outs = (*carry, *_stacked(ys, body, carry, xs))
    found = list(closures.values())
    parents += [(len(values) + k, node, index) for k, (node, index, _) in enumerate(found)]
    if not parents:
        return outs
    residuals = dict(params, saved=saved, closures=found, interp=interp,
                     no_grad=_no_grad_below.get())  # fmt: skip
    node = Node(prim, residuals, [*values, *(stand_in for _, _, stand_in in found)], outs, parents)
    return tuple(GradTensor(interp, o, node, i) for i, o in enumerate(outs))


# How many recomputations have each interpreter live now (backward passes of one tape
# may run in several threads at once), and whether it was before the first.
_lives: dict[GradInterpreter, list] = {}
_lives_lock = threading.Lock()


@contextlib.contextmanager
def _live(interp: GradInterpreter, no_grad: int) -> Iterator[None]:
    """``interp`` live again, as when the forward pass ran: a step recomputed during
    the backward pass is recorded on a tape of its own, reaching the nodes that the
    values it closes over had in the forward pass.  On this thread's stack for the
    time, ``no_grad`` as it was; active until the last recomputation using it ends."""
    with _lives_lock:
        count = _lives.setdefault(interp, [0, interp.active])
        count[0] += 1
        interp.active = True
    no_grad_token = _no_grad_below.set(no_grad)
    stack = current_interpreters()
    token = None if interp in stack else _core._stack.set((*stack, interp))
    try:
        yield
    finally:
        if token is not None:
            _core._stack.reset(token)
        _no_grad_below.reset(no_grad_token)
        with _lives_lock:
            count[0] -= 1
            if not count[0]:
                interp.active = count[1]
                del _lives[interp]


def _scan_vjp(cts, ans, primals, params, argnums):
    """The checkpointed scan's VJP: the steps backwards, each recomputed, then its
    own backward pass from the cotangents of its outputs to those of its inputs and of
    the values it closes over."""
    interp, body, saved, found = (params[k] for k in ("interp", "body", "saved", "closures"))
    n, length = body.n_carry, params["length"]
    xs = primals[n : len(primals) - len(found)]
    wanted_xs = {i - n for i in argnums if n <= i < n + len(xs)}
    ct_carry, ct_ys = list(cts[:n]), cts[n:]
    ct_xs: dict = {j: [None] * length for j in wanted_xs}
    ct_closures: list = [None] * len(found)
    position = {(id(node), index): k for k, (node, index, _) in enumerate(found)}
    for t in reversed(_steps(length, params["reverse"])):
        with _live(interp, params["no_grad"]):
            start = _mark()
            carry = [_fresh(interp, c) for c in saved[t]]
            x = [_fresh(interp, v[t]) if j in wanted_xs else v[t] for j, v in enumerate(xs)]
            outs = body(*carry, *x)
        seeds = [
            (o.node, o.index, ct)
            for o, ct in zip(outs, (*ct_carry, *(c[t] for c in ct_ys)))
            if isinstance(o, GradTensor) and o._interp is interp and o.node is not None
        ]
        got = backward(seeds, consume=True, stop=start) if seeds else {}
        ct_carry = [_ct_of(got, c, v) for c, v in zip(carry, saved[t])]
        for j in wanted_xs:
            ct_xs[j][t] = got.get(x[j].node)
        for node, ct in got.items():
            if node.seq >= start:
                continue  # the step's own inputs
            for index, c in enumerate(ct) if isinstance(ct, list) else [(None, ct)]:
                k = position.get((id(node), index))
                if c is None:
                    continue
                if k is None:
                    raise RuleError(
                        "scan(..., checkpoint=True): recomputing a step reached a traced "
                        "value that the forward pass did not; f must compute the same "
                        "way each time it runs."
                    )
                ct_closures[k] = c if ct_closures[k] is None else ct_closures[k] + c
    out = []
    for i in argnums:
        if i < n:
            out.append(ct_carry[i])
        elif i < n + len(xs):
            steps = ct_xs[i - n]
            if all(c is None for c in steps):
                out.append(None)
            else:
                x = xs[i - n]
                out.append(stack([np.zeros_like(x[t]) if c is None else c
                                  for t, c in enumerate(steps)]))  # fmt: skip
        else:
            out.append(ct_closures[i - n - len(xs)])
    return out


def _ct_of(got: dict, carry: Any, value: Any) -> Any:
    ct = got.get(carry.node) if isinstance(carry, GradTensor) else None
    return np.zeros_like(value) if ct is None else ct


scan_p.vjp = _scan_vjp
