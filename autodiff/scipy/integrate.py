"""``autodiff.scipy.integrate``: ``odeint``, differentiable and batchable.

``odeint(func, y0, t, args=())`` is SciPy's (LSODA, through
``scipy.integrate.odeint``) on plain arrays.  Each call is one primitive over
``y0``, ``t`` and the array entries of ``args``, whose rules call ``odeint`` again
on augmented systems, so they compose to any order:

* **VJP, by the adjoint method**: from the last time backwards, segment by
  segment, the adjoint ``a`` (the cotangent of ``y``) and the cotangents of
  ``args`` are integrated along with ``y`` itself::

      dy/dt = f,  da/dt = -(df/dy)^T a,  d(a_args)/dt = -(df/dargs)^T a

  starting each segment from the forward solution at its end and adding that
  output's cotangent to ``a``.  The times get ``ct[i] . f(y[i], t[i])`` and the
  first time ``-a(t[0]) . f(y0, t[0])``.  Nothing of the forward integration's
  steps is kept: memory is that of the outputs.
* **JVP, by forward sensitivities**: ``s = dy`` along the tangents solves
  ``ds/dt = (df/dy) s + (df/dargs) dargs`` with ``s(t0) = dy0 - f(y0, t0) dt0``,
  integrated with ``y``; each output adds ``f(y[i], t[i]) dt[i]``.
* **Batching**: the examples become one system (``vmap`` of ``func``), integrated
  together: LSODA then takes one sequence of steps for all, so a batched result
  agrees with a loop over examples within the tolerances, not to the last bit.
  Batched times are mapped to a shared unit interval per segment.
* **Sparsity** (``jacobian_sparsity``): the solution at ``t[i]`` reads what the
  dynamics' staged graph reaches from ``y0`` and ``args`` in any number of steps,
  and ``t[0]`` and ``t[i]``; at ``t[0]`` it is ``y0``.

The derivatives are those of the exact solution, computed to the tolerances
``rtol`` and ``atol`` (as in HIPS autograd and JAX): tighten them when derivatives
must be accurate.  ``func`` must take what it differentiates through ``args``:
a traced value it closes over is refused with an error saying so.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable
from typing import Any

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.integrate")

import numpy as np  # noqa: E402
import optree  # noqa: E402
import scipy.integrate as _si  # noqa: E402

import autodiff.numpy as anp  # noqa: E402
from autodiff.compiler.stages import replay  # noqa: E402
from autodiff.core.args import at_positions  # noqa: E402
from autodiff.core.arrays import shape_of  # noqa: E402
from autodiff.core.graph import ShapedArray, aval_of  # noqa: E402
from autodiff.core.index_sets import propagating  # noqa: E402
from autodiff.core.primitive import Primitive  # noqa: E402
from autodiff.core.rule_forms import jvp_taylor  # noqa: E402
from autodiff.core.tracer import Tracer  # noqa: E402
from autodiff.errors import ConcretizationError, TransformTypeError  # noqa: E402
from autodiff.interpreters.batching import vmap  # noqa: E402
from autodiff.interpreters.forward import jvp  # noqa: E402
from autodiff.interpreters.reverse import vjp  # noqa: E402
from autodiff.interpreters.sparsity import (  # noqa: E402
    dense_sets,
    fixed_point,
    interact,
    stacked_sets,
    union,
)
from autodiff.interpreters.staging import stage  # noqa: E402
from autodiff.rules._helpers import bring_to_front  # noqa: E402
from autodiff.rules._scipy import scipy_impl  # noqa: E402

__all__ = ["odeint"]

# odeint's solver options that change no shapes (passed through to SciPy)
_OPTIONS = ("rtol", "atol", "tcrit", "h0", "hmax", "hmin", "ixpr", "mxstep", "mxhnil",
            "mxordn", "mxords", "printmessg")  # fmt: skip


def _solve(fn: Callable, options: dict, staged: bool, y0, t, *args):
    """SciPy's odeint on plain arrays, for a ``y0`` of any shape; with ``staged``, ``fn``
    (an augmented system a rule built) runs as its replay (``_replay``)."""
    shape = np.shape(y0)
    times = np.asarray(t)
    if np.size(y0) == 0:
        return np.zeros((len(times), *shape), np.result_type(y0, np.float32))
    replay = _replay(fn, np.reshape(y0, shape), float(times[0]), args) if staged else None

    def rhs(y, tt):
        dy = fn(np.reshape(y, shape), tt, *args)
        if isinstance(dy, Tracer):
            raise TransformTypeError(
                "odeint: func returned a traced value when called with plain arrays, so it "
                "reaches a traced value that is not an array leaf of args=: one it closes "
                "over, or one inside an object of args that is not a pytree node (a tuple, "
                "list, dict, None or a registered class). Pass every value to differentiate "
                "or batch in args= (any pytree of arrays)."
            )
        if np.shape(dy) != shape:
            raise ValueError(
                f"odeint: func returned {_described(dy)} for a state y of shape {shape}; "
                f"dy/dt must have y's shape"
            )
        return np.ravel(dy)

    def replayed(y, tt):  # the staged step checked its shapes once
        return replay(y.reshape(shape), tt, *args)[0].ravel()  # type: ignore[misc]

    ys = _si.odeint(rhs if replay is None else replayed, np.ravel(y0), times, **options)
    out = np.reshape(ys, (len(times), *shape))
    return out.astype(np.float32) if np.result_type(y0) == np.float32 else out


def _described(x: Any) -> str:
    shape = getattr(x, "shape", None)
    return f"an array of shape {tuple(shape)}" if shape is not None else f"a {type(x).__name__}"


# rhs -> {abstract arguments: its compiled replay, or None where it cannot be staged}
_replays: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _replay(fn: Callable, y: Any, t: float, args: tuple) -> Callable | None:
    """``fn`` staged on abstract values like ``(y, t, *args)`` and compiled to a replay of
    NumPy calls (``compiler/replay.py``), once per function and signature: the augmented
    dynamics call ``vjp`` or ``jvp`` of ``func`` at every step the solver takes, and
    recording a transform costs far more than replaying what it records.  A rule builds
    its function once per call and integrates it segment after segment; under ``jit``
    once for good.  None where staging cannot see the whole step (Python control flow on
    the state, a traced value ``func`` closes over): then ``fn`` runs as it is."""
    key = tuple(aval_of(x) for x in (y, t, *args))
    cache = _replays.setdefault(fn, {})
    if key not in cache:
        try:
            staged = stage(lambda *xs: [fn(*xs)], key, transform="odeint",
                           name=getattr(fn, "__name__", "dynamics"))  # fmt: skip
        except ConcretizationError:
            cache[key] = None
        else:
            out = staged.graph.outvars[0].aval
            fits = getattr(out, "shape", None) == np.shape(y)
            cache[key] = replay(staged.graph) if fits and not staged.captured else None
    return cache[key]


def _odeint_primitive(fn: Callable, options: dict, staged: bool = False) -> Primitive:
    """The primitive ``(y0, t, *args) -> y at the times t`` for ``dy/dt = fn(y, t, *args)``
    (``fn`` replayed when ``staged``: the rules' augmented systems are)."""
    prim = Primitive(
        f"odeint({getattr(fn, '__name__', 'func')})",
        scipy_impl(_si.odeint, lambda y0, t, *args: _solve(fn, options, staged, y0, t, *args)),
    )

    # Taylor mode from the forward sensitivities, pushed through to order K-1 (each order
    # one more augmented system)
    prim.def_taylor(jvp_taylor(prim))
    prim.def_sparsity(_sparsity_rule(fn))

    def solve(y0, t, *args, rhs=fn):
        return _odeint_primitive(rhs, options, staged=rhs is not fn).bind(y0, t, *args)

    def jvp_rule(tangents, ans, primals, params):
        y0, t, *args = primals
        dy0, dt, *dargs = tangents
        moving = [i for i, d in enumerate(dargs) if d is not None]
        n = len(args)

        def augmented(state, tt, *values):  # (y, s) -> (f, (df/dy) s + (df/dargs) dargs)
            y, s = state[0], state[1]
            f_of = at_positions(
                lambda y, *a: fn(y, tt, *a), [y, *values[:n]], [0, *(1 + i for i in moving)]
            )
            f, ds = jvp(f_of, (y, *(values[:n][i] for i in moving)), (s, *values[n:]))
            return anp.stack([f, ds])

        s0 = anp.zeros_like(y0) if dy0 is None else dy0
        if dt is not None:
            s0 = s0 - fn(y0, t[0], *args) * dt[0]
        out = solve(anp.stack([y0, s0]), t, *args, *(dargs[i] for i in moving), rhs=augmented)
        tangent = out[:, 1]
        if dt is not None:  # moving an output time moves the output along f
            slopes = vmap(lambda y, tt: fn(y, tt, *args))(ans, t)
            tangent = tangent + slopes * anp.reshape(dt, (-1,) + (1,) * (anp.ndim(y0)))
        return _as_dtype_of(tangent, ans)  # func may compute in float64 for a float32 y0

    def vjp_rule(ct, ans, primals, params, argnums):
        y0, t, *args = primals
        wanted = [i - 2 for i in argnums if i >= 2]  # the args that need cotangents
        inputs = sum(int(np.prod(shape_of(primals[i]))) for i in {0, *argnums} - {1})
        if inputs * int(np.prod(shape_of(y0))) <= SENSITIVITIES_AT_MOST:
            # (under vmap over the directions: func branching on the state in Python
            # cannot run there, and the adjoint, which needs no vmap, does instead)
            with contextlib.suppress(ConcretizationError):
                return _vjp_by_sensitivities(fn, jvp_rule, ct, ans, primals, argnums)
        shapes = [shape_of(y0), shape_of(y0), *(shape_of(args[i]) for i in wanted)]
        sizes = [int(np.prod(s)) for s in shapes]

        def pack(parts):
            return anp.concatenate([anp.ravel(p) for p in parts])

        def unpack(flat):
            bounds = np.cumsum([0, *sizes])
            return [anp.reshape(flat[a:b], s) for a, b, s in zip(bounds, bounds[1:], shapes)]

        def backward(flat, tt, *values):  # (y, a, a_args) -> (f, -(df/dy)^T a, -(df/dargs)^T a)
            y, a = unpack(flat)[:2]
            f_of = at_positions(
                lambda y, *v: fn(y, tt, *v), [y, *values], [0, *(1 + i for i in wanted)]
            )
            f, pullback = vjp(f_of, y, *(values[i] for i in wanted))
            return pack([f, *(-c for c in pullback(a))])

        a = anp.zeros_like(y0)
        a_args = [anp.zeros_like(args[i]) for i in wanted]
        ct_t = []
        for i in range(shape_of(t)[0] - 1, 0, -1):
            a = a + ct[i]
            if 1 in argnums:
                ct_t.append(anp.sum(ct[i] * fn(ans[i], t[i], *args)))
            segment = anp.stack([t[i], t[i - 1]])
            flat = solve(pack([ans[i], a, *a_args]), segment, *args, rhs=backward)[1]
            _, a, *a_args = unpack(flat)
        out = {0: a + ct[0]}
        if 1 in argnums:
            ct_t.append(-anp.sum(a * fn(y0, t[0], *args)))
            out[1] = anp.stack(ct_t[::-1])
        for i, c in zip(wanted, a_args):
            out[i + 2] = c
        # func may compute in float64, and the adjoints are packed with y: each cotangent
        # in its argument's dtype
        return [_as_dtype_of(out[i], primals[i]) for i in argnums]

    def batch_rule(args, dims):
        (y0, t, *rest), (yd, td, *rest_dims) = args, dims
        size = next(shape_of(x)[d] for x, d in zip(args, dims) if d is not None)
        y0 = bring_to_front(y0, yd, size)
        if td is None:  # one system of all examples

            def together(y, tt, *values):
                return vmap(lambda y, *v: fn(y, tt, *v), in_dims=(0, *rest_dims))(y, *values)

            return solve(y0, t, *rest, rhs=together), 1
        # each example its own times: every segment [t[i], t[i+1]] mapped to [0, 1]
        times = bring_to_front(t, td, size)
        unit = np.array([0.0, 1.0])

        def segment(y, s, ta, tb, *values):
            def one(y, ta, tb, *v):
                return fn(y, ta + s * (tb - ta), *v) * (tb - ta)

            return vmap(one, in_dims=(0, 0, 0, *rest_dims))(y, ta, tb, *values)

        outs = [y0]
        for i in range(shape_of(times)[1] - 1):
            y0 = solve(y0, unit, times[:, i], times[:, i + 1], *rest, rhs=segment)[1]
            outs.append(y0)
        return anp.stack(outs, axis=1), 0

    prim.def_vjp(vjp_rule, packed=True)
    prim.def_jvp(jvp_rule, packed=True)
    prim.def_batch(batch_rule)
    return prim


def _sparsity_rule(fn: Callable) -> Callable:
    """The sparsity rule of ``odeint(fn)``, from the dynamics' own staged graph: the
    solution at ``t[0]`` is ``y0``; at ``t[i]`` each state reads what the dynamics reach
    from ``y0`` and ``args`` in any number of steps (a loop's fixed point), and the times
    ``t[0]`` (the start) and ``t[i]`` (the slope there), which interact with everything
    it reads (for Hessians).  Dense where the dynamics cannot be staged."""

    @propagating
    def rule(sets, operands, **params):
        y0_sets, t_sets, *arg_sets = sets
        y0, t, *args = (x if isinstance(x, ShapedArray) else aval_of(x) for x in operands)
        n, steps = y0.size, t.shape[0]
        avals = [y0, ShapedArray((), t.dtype), *args]
        name = getattr(fn, "__name__", "dynamics")
        try:
            staged = stage(lambda *xs: [fn(*xs)], avals, transform="odeint", name=name)
        except ConcretizationError:  # Python control flow on the state
            staged = None
        if staged is None or staged.captured:
            return dense_sets(sets, [steps * n])
        reach = fixed_point(staged.graph, [y0_sets], [None, *arg_sets])[0][0]
        rows = [y0_sets]
        for i in range(1, steps):
            at = None if t_sets is None else union(*(t_sets.gather(np.full(n, k)) for k in (0, i)))
            row = union(reach, at)
            interact(at, row)
            rows.append(row)
        return [stacked_sets(rows, n)]

    return rule


# The VJP integrates the forward sensitivities dy/d(inputs) instead of the adjoint when
# they have at most this many entries (inputs x state size): see _vjp_by_sensitivities.
SENSITIVITIES_AT_MOST = 1024


def _vjp_by_sensitivities(fn, jvp_rule, ct, ans, primals, argnums):
    """The VJP as ``ct`` contracted with the Jacobian of the solution in ``y0`` and the
    args that need cotangents: the JVP rule's forward sensitivities along every input
    direction at once (under ``vmap``: one system, one run of the solver, given the
    solution ``ans`` already known).  The adjoint method restarts the solver at every
    output time, backwards, which costs some 30 evaluations each; with few inputs one run
    of a larger system costs less.  The times' cotangents follow from the slopes, as in
    the adjoint method."""
    y0, t, *args = primals
    moving = [0, *(i for i in argnums if i >= 2)]  # y0's Jacobian also gives t[0]'s
    shapes = [shape_of(primals[i]) for i in moving]
    sizes = [math.prod(shape) for shape in shapes]
    eye = np.eye(sum(sizes))
    bounds = np.cumsum([0, *sizes])
    directions = [
        np.reshape(eye[:, a:b], (-1, *shape)).astype(anp.result_type(primals[i]), copy=False)
        for i, a, b, shape in zip(moving, bounds, bounds[1:], shapes)
    ]

    def along(*direction):  # the solution's derivative along one input direction
        tangents: list = [None] * len(primals)
        for i, d in zip(moving, direction):
            tangents[i] = d
        return jvp_rule(tuple(tangents), ans, primals, {})

    jacobian = vmap(along)(*directions)  # (inputs, *ans.shape)
    flat = anp.tensordot(jacobian, ct, axes=anp.ndim(ans))
    cts = {i: anp.reshape(flat[a:b], shape)
           for i, a, b, shape in zip(moving, bounds, bounds[1:], shapes)}  # fmt: skip
    if 1 in argnums:  # moving t[i] moves y[i] along f; y0 is y[0] wherever t[0] is
        slopes = [anp.sum(ct[i] * fn(ans[i], t[i], *args)) for i in range(1, shape_of(t)[0])]
        first = -anp.sum((cts[0] - ct[0]) * fn(y0, t[0], *args))
        cts[1] = anp.stack([first, *slopes])
    return [_as_dtype_of(cts[i], primals[i]) for i in argnums]


def odeint(func, y0, t, args=(), Dfun=None, col_deriv=0, full_output=0, tfirst=False, **options):
    """Like scipy.integrate.odeint: ``y`` at the times ``t`` for ``dy/dt = func(y, t, *args)``
    (``func(t, y, *args)`` with ``tfirst=True``), ``y(t[0]) = y0``; shape ``(len(t), *y0.shape)``
    (a scalar ``y0`` is one component, as in SciPy; unlike SciPy's, ``y0`` may have any shape).

    Differentiable in ``y0``, ``t`` and the arrays in ``args`` (adjoint-method VJP,
    forward-sensitivity JVP; see the module's docstring) and batchable in all of them.
    ``func`` must be written with ``autodiff.numpy`` (or NumPy functions that reach it)
    and take what it depends on through ``args``.  SciPy's solver options (``rtol``,
    ``atol``, ``mxstep``, ``hmax``, ...) are passed on; ``Dfun`` and ``full_output``
    are not supported (the derivatives come from ``func``).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> from autodiff.scipy.integrate import odeint
    >>> t = np.array([0.0, 1.0])
    >>> decay = lambda y, t, k: -k * y
    >>> odeint(decay, 1.0, t, args=(2.0,)).shape
    (2, 1)
    >>> bool(np.isclose(odeint(decay, 1.0, t, args=(2.0,))[1, 0], np.exp(-2.0)))
    True
    >>> dk = autodiff.grad(lambda k: odeint(decay, 1.0, t, args=(k,), rtol=1e-10)[1, 0])(2.0)
    >>> bool(np.isclose(dk, -np.exp(-2.0), rtol=1e-6))
    True
    """
    if Dfun is not None or full_output:
        raise NotImplementedError(
            "odeint: Dfun and full_output are not supported (derivatives come from func, and "
            "the output is the solution only)"
        )
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"odeint: unexpected keyword argument(s) {sorted(unknown)}")
    if not callable(func):
        raise TypeError(f"odeint: func must be callable, got {type(func).__name__}")
    if not isinstance(args, tuple):
        args = (args,)
    t = anp.asarray(t)
    if anp.ndim(t) != 1:
        raise ValueError(f"odeint: t must be a 1-d sequence of times, not of shape {anp.shape(t)}")
    if not _is_array(y0):  # a number or a list (which may hold traced values), as SciPy's
        y0 = anp.asarray(y0)
        y0 = y0 if anp.result_type(y0).kind == "f" else anp.astype(y0, np.float64)
    if any(anp.result_type(x).kind == "c" for x in (y0, t)):
        raise TypeError("odeint: complex y0 or t are not supported (SciPy's odeint is real)")
    # args is any pytree (HIPS autograd's and JAX's odeint take one: a list of (W, b) pairs,
    # a dict): its array leaves are the primitive's operands, the rest stays with func
    leaves, tree = optree.tree_flatten(args)
    traced = [i for i, leaf in enumerate(leaves) if _is_array(leaf)]

    def fn(y, tt, *values):
        full = list(leaves)
        for i, v in zip(traced, values):
            full[i] = v
        rebuilt = optree.tree_unflatten(tree, full)
        return func(tt, y, *rebuilt) if tfirst else func(y, tt, *rebuilt)

    fn.__name__ = getattr(func, "__name__", "func")
    if anp.ndim(y0) == 0:  # as in SciPy: a scalar is a state of one component
        y0 = anp.reshape(y0, (1,))
    prim = _odeint_primitive(fn, dict(options))
    return prim.bind(y0, t, *(leaves[i] for i in traced))


def _as_dtype_of(x, like):
    dtype = anp.result_type(like)
    return x if anp.result_type(x) == dtype else anp.astype(x, dtype)


def _is_array(x: Any) -> bool:
    return isinstance(x, (Tracer, float)) or (hasattr(x, "shape") and hasattr(x, "dtype"))
