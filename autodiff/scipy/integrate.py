"""``autodiff.scipy.integrate``: ``odeint`` and ``solve_ivp``, differentiable and batchable.

``odeint(func, y0, t, args=())`` is SciPy's (LSODA, through
``scipy.integrate.odeint``) on plain arrays.  Each call is one primitive over
``y0``, ``t`` and the array entries of ``args``, whose rules call ``odeint`` again
on augmented systems, so they compose to any order:

* **VJP, by forward sensitivities** where the inputs are few (inputs x state size at
  most ``SENSITIVITIES_AT_MOST``): under ``grad`` the solution is integrated together
  with its Jacobian in ``y0`` and ``args`` (one system: ``y`` and one sensitivity per
  input direction, ``ds/dt = (df/dy) s + (df/dargs) dargs``; the primitive is a
  ``CustomVJPPrimitive`` whose ``fwd`` does it), and the VJP contracts the cotangent
  with it: one run of the solver for value and gradient.  So the value returned under
  ``grad`` agrees with the plain solve to the tolerances, not to the last bit (the
  solver's error control then includes the sensitivities).  ``solve_ivp``'s explicit
  methods (``RK23``, ``RK45``, ``DOP853``) control the error of the solution alone
  (``_IVP._along_the_solution``): they step as the plain solve does, its value to the
  rounding, and the sensitivities are the Runge-Kutta formulas' at those steps.
* **VJP, by the adjoint method** otherwise: from the last time backwards, segment by
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
  Batched times are mapped to a shared unit interval per segment.  (``solve_ivp``
  solves example by example, as a loop does.)
* **Sparsity** (``jacobian_sparsity``): the solution at ``t[i]`` reads what the
  dynamics' staged graph reaches from ``y0`` and ``args`` in any number of steps,
  and ``t[0]`` and ``t[i]``; at ``t[0]`` it is ``y0``.

The augmented systems are staged and replayed (``_replay``), once across calls where
the dynamics and what they read are the same (a fit's every gradient), and their
replays compiled to kernels by the compiling tier once called often (``_HotReplay``).
The derivatives are those of the exact solution, computed to the tolerances
``rtol`` and ``atol`` (as in HIPS autograd and JAX): tighten them when derivatives
must be accurate.  ``func`` takes what it depends on through ``args`` (any pytree)
or by closing over it: traced values it closes over are the primitive's operands too
(``transforms/closures.py``), differentiated and batched like ``args``.

``solve_ivp`` shares the primitive, integrated by ``scipy.integrate.solve_ivp`` with the
user's method (``_IVP``); its output times, and its events' times found by
``custom_root`` at each event (the implicit function theorem on ``g(t, y(t)) = 0``),
are operands, so everything it returns is differentiable.
"""

from __future__ import annotations

import contextlib
import math
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.integrate")

import numpy as np  # noqa: E402
import optree  # noqa: E402
import scipy.integrate as _si  # noqa: E402
from scipy.integrate._ivp.rk import RungeKutta as _RungeKutta  # noqa: E402

import autodiff.numpy as anp  # noqa: E402
from autodiff.compiler import background  # noqa: E402
from autodiff.compiler.stages import compiled, default_backend, replay  # noqa: E402
from autodiff.core.args import at_positions  # noqa: E402
from autodiff.core.arrays import array_library, backend_error, eye_like, shape_of  # noqa: E402
from autodiff.core.caches import LRUCache  # noqa: E402
from autodiff.core.graph import ShapedArray, aval_of  # noqa: E402
from autodiff.core.index_sets import propagating  # noqa: E402
from autodiff.core.primitive import Primitive  # noqa: E402
from autodiff.core.rule_forms import jvp_taylor  # noqa: E402
from autodiff.core.stack import current_interpreters  # noqa: E402
from autodiff.core.tracer import Tracer  # noqa: E402
from autodiff.errors import (  # noqa: E402
    ConcretizationError,
    ConvergenceError,
    TransformTypeError,
    TransformValueError,
)
from autodiff.interpreters.batching import vmap  # noqa: E402
from autodiff.interpreters.forward import jvp  # noqa: E402
from autodiff.interpreters.reverse import stop_gradient, vjp  # noqa: E402
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
from autodiff.transforms.closures import closure_of, environment  # noqa: E402
from autodiff.transforms.custom import CustomVJPPrimitive  # noqa: E402
from autodiff.transforms.jacobians import jacfwd  # noqa: E402
from autodiff.transforms.solvers import loop_batch  # noqa: E402
from autodiff.transforms.solvers import root as _root  # noqa: E402

__all__ = ["odeint", "solve_ivp"]

# odeint's solver options that change no shapes (passed through to SciPy)
_OPTIONS = ("rtol", "atol", "tcrit", "h0", "hmax", "hmin", "ixpr", "mxstep", "mxhnil",
            "mxordn", "mxords", "printmessg")  # fmt: skip


def _solve(fn: Callable, options: Any, staged: bool, y0, t, *args):
    """SciPy's odeint (or, for ``options`` an ``_IVP``, solve_ivp) on plain arrays, for a
    ``y0`` of any shape; with ``staged``, ``fn`` (an augmented system a rule built) runs
    as its replay (``_replay``)."""
    who = options.name if isinstance(options, _IVP) else "odeint"
    shape = np.shape(y0)
    times = np.asarray(t)
    if np.size(y0) == 0:
        return np.zeros((len(times), *shape), np.result_type(y0, np.float32))
    replay = _replay(fn, np.reshape(y0, shape), float(times[0]), args) if staged else None

    def rhs(y, tt):
        dy = fn(np.reshape(y, shape), tt, *args)
        if isinstance(dy, Tracer):
            raise TransformTypeError(
                f"{who}: func returned a traced value when called with plain arrays, so it "
                f"reaches a traced value that autodiff did not find: one inside an object of "
                f"args that is not a pytree node (a tuple, list, dict, None or a registered "
                f"class), or one it closes over too deep down. Pass every value to "
                f"differentiate or batch in args= (any pytree of arrays)."
            )
        if np.shape(dy) != shape:
            raise ValueError(
                f"{who}: func returned {_described(dy)} for a state y of shape {shape}; "
                f"dy/dt must have y's shape"
            )
        return np.ravel(dy)

    def replayed(y, tt):  # the staged step checked its shapes once
        return replay(y.reshape(shape), tt, *args)[0].ravel()  # type: ignore[misc]

    step = rhs if replay is None else replayed
    if isinstance(options, _IVP):
        ys = options(step, np.ravel(y0), times, staged, args, getattr(fn, "solution", None))
    else:
        ys = _si.odeint(step, np.ravel(y0), times, **options)
    out = np.reshape(ys, (len(times), *shape))
    return out.astype(np.float32) if np.result_type(y0) == np.float32 else out


def _solution_shape(y0: Any, t: Any, *args: Any) -> ShapedArray:
    """The solution's shape and dtype: ``y0``'s at each time (float32 stays float32)."""
    dtype = np.float32 if y0.dtype == np.float32 else np.float64
    return ShapedArray((*t.shape[:1], *y0.shape), np.dtype(dtype))


def _described(x: Any) -> str:
    shape = getattr(x, "shape", None)
    return f"an array of shape {tuple(shape)}" if shape is not None else f"a {type(x).__name__}"


# rhs -> {abstract arguments: its compiled replay, or None where it cannot be staged}
_replays: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# (an rhs's cache_key, abstract arguments) -> (replay, what the key's identities name):
# the same dynamics, augmented alike, staged once across calls (a fit's every gradient)
_kept_replays = LRUCache(64)


def _replay(fn: Callable, y: Any, t: float, args: tuple) -> Callable | None:
    """``fn`` staged on abstract values like ``(y, t, *args)`` and compiled to a replay of
    NumPy calls (``compiler/replay.py``), once per function and signature: the augmented
    dynamics call ``vjp`` or ``jvp`` of ``func`` at every step the solver takes, and
    recording a transform costs far more than replaying what it records.  A rule builds
    its function once per call and integrates it segment after segment; under ``jit``
    once for good; and where the function says what it computes (``cache_key``: the
    user's dynamics, its environment, the augmentation), once across calls.  None where
    staging cannot see the whole step (Python control flow on the state): then ``fn``
    runs as it is."""
    key = tuple(aval_of(x) for x in (y, t, *args))
    cache = _replays.setdefault(fn, {})
    if key not in cache:
        shared = getattr(fn, "cache_key", None)
        found = None if shared is None else _kept_replays.get((shared[0], key))
        if found is not None:
            cache[key] = found[0]
            return found[0]
        try:
            staged = stage(lambda *xs: [fn(*xs)], key, transform="odeint",
                           name=getattr(fn, "__name__", "dynamics"))  # fmt: skip
        except ConcretizationError:
            cache[key] = None
        else:
            out = staged.graph.outvars[0].aval
            fits = getattr(out, "shape", None) == np.shape(y)
            cache[key] = _HotReplay(staged.graph) if fits and not staged.captured else None
            if shared is not None:
                _kept_replays.put((shared[0], key), (cache[key], shared[1]))
    return cache[key]


class _HotReplay:
    """A replay of dynamics, which compiles its graph's regions to kernels (numba, the
    compiling tier: ``compiler/numba_tier.py``) in the background once it has been
    called ``HOT_CALLS`` times, and runs them when they are ready: an integration calls
    its dynamics hundreds of times, and each replayed call costs a NumPy call per
    equation.  Without numba, or with jit's compiling tier off, it stays a replay."""

    HOT_CALLS = 2000  # evaluations of one system (a gradient's sensitivities: some 700)

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.run = replay(graph)
        self.calls: int | None = 0 if default_backend().available() else None

    def __call__(self, *args: Any) -> Any:
        if self.calls is not None:
            self.calls += 1
            if self.calls >= self.HOT_CALLS:
                self.calls = None
                layouts = [type(a) is np.ndarray and a.flags.c_contiguous for a in args]

                def compile_then_swap() -> None:
                    found = compiled(self.graph, layouts=layouts, sync=False)
                    if found is not None:
                        self.run = found.run

                background.compile_later(compile_then_swap)
        return self.run(*args)


def _keyed(fn: Callable, base: Callable, *static: Any) -> Callable:
    """``fn`` (an augmented system of ``base``'s) with a ``cache_key`` where ``base`` has
    one: its replay is then staged once across calls."""
    shared = getattr(base, "cache_key", None)
    if shared is not None:
        fn.cache_key = ((shared[0], fn.__name__, *static), shared[1])  # type: ignore[attr-defined]
    return fn


def _odeint_primitive(fn: Callable, options: Any, staged: bool = False) -> Primitive:
    """The primitive ``(y0, t, *args) -> y at the times t`` for ``dy/dt = fn(y, t, *args)``
    (``fn`` replayed when ``staged``: the rules' augmented systems are), integrated by
    SciPy's odeint with ``options`` (a dict), or by solve_ivp (``options`` an ``_IVP``)."""
    scipy_fn = _si.solve_ivp if isinstance(options, _IVP) else _si.odeint
    prim = CustomVJPPrimitive(
        f"{scipy_fn.__name__}({getattr(fn, '__name__', 'func')})",
        scipy_impl(scipy_fn, lambda y0, t, *args: _solve(fn, options, staged, y0, t, *args)),
        shape=_solution_shape,
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
        _keyed(augmented, fn, tuple(moving), n)
        augmented.solution = math.prod(shape_of(y0))  # type: ignore[attr-defined]
        out = solve(anp.stack([y0, s0]), t, *args, *(dargs[i] for i in moving), rhs=augmented)
        tangent = out[:, 1]
        if dt is not None:  # moving an output time moves the output along f
            slopes = vmap(lambda y, tt: fn(y, tt, *args))(ans, t)
            tangent = tangent + slopes * anp.reshape(dt, (-1,) + (1,) * (anp.ndim(y0)))
        return _as_dtype_of(tangent, ans)  # func may compute in float64 for a float32 y0

    def fwd(y0, t, *args):
        """Under ``grad`` (``CustomVJPPrimitive``): with few inputs the solution is
        integrated together with its sensitivities, which the VJP then contracts; else
        the solution alone, the VJP solving the adjoint."""
        moving = [0, *(2 + i for i, a in enumerate(args) if anp.result_type(a).kind == "f")]
        inputs = sum(int(np.prod(shape_of(primals))) for primals in (y0, *args))
        if inputs * int(np.prod(shape_of(y0))) <= SENSITIVITIES_AT_MOST:
            with contextlib.suppress(ConcretizationError):  # (as in the VJP rule)
                ys, jacobian = _sensitivities(fn, solve, (y0, t, *args), moving)
                return ys, (moving, jacobian)
        return prim.bind(y0, t, *args), None

    def vjp_rule(ct, ans, primals, params, argnums):
        y0, t, *args = primals
        wanted = [i - 2 for i in argnums if i >= 2]  # the args that need cotangents
        known = params.get("residuals")
        if known is not None and set(argnums) - {1} <= set(known[0]):
            return _contracted(fn, ct, ans, primals, argnums, *known)
        inputs = sum(int(np.prod(shape_of(primals[i]))) for i in {0, *argnums} - {1})
        if inputs * int(np.prod(shape_of(y0))) <= SENSITIVITIES_AT_MOST:
            # (under vmap over the directions: func branching on the state in Python
            # cannot run there, and the adjoint, which needs no vmap, does instead)
            with contextlib.suppress(ConcretizationError):
                moving = [0, *(i for i in argnums if i >= 2)]  # y0's also gives t[0]'s
                _, jacobian = _sensitivities(fn, solve, primals, moving)
                return _contracted(fn, ct, ans, primals, argnums, moving, jacobian)
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

        _keyed(backward, fn, tuple(wanted), tuple(shapes))
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
        if isinstance(options, _IVP):  # solve_ivp: one solve per example, as a loop gives
            return loop_batch(prim)(args, dims)
        (y0, t, *rest), (yd, td, *rest_dims) = args, dims
        size = next(shape_of(x)[d] for x, d in zip(args, dims) if d is not None)
        y0 = bring_to_front(y0, yd, size)
        if td is None:  # one system of all examples

            def together(y, tt, *values):
                return vmap(lambda y, *v: fn(y, tt, *v), in_dims=(0, *rest_dims))(y, *values)

            _keyed(together, fn, tuple(rest_dims))
            return solve(y0, t, *rest, rhs=together), 1
        # each example its own times: every segment [t[i], t[i+1]] mapped to [0, 1]
        times = bring_to_front(t, td, size)
        unit = np.array([0.0, 1.0])

        def segment(y, s, ta, tb, *values):
            def one(y, ta, tb, *v):
                return fn(y, ta + s * (tb - ta), *v) * (tb - ta)

            return vmap(one, in_dims=(0, 0, 0, *rest_dims))(y, ta, tb, *values)

        _keyed(segment, fn, tuple(rest_dims))
        outs = [y0]
        for i in range(shape_of(times)[1] - 1):
            y0 = solve(y0, unit, times[:, i], times[:, i + 1], *rest, rhs=segment)[1]
            outs.append(y0)
        return anp.stack(outs, axis=1), 0

    prim.def_vjp(vjp_rule, packed=True)
    prim.def_jvp(jvp_rule, packed=True)
    prim.def_batch(batch_rule)
    prim.fwd = fwd
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


def _sensitivities(fn, solve, primals, moving):
    """The solution and its Jacobian in the inputs at ``moving`` (0: ``y0``; ``2 + i``:
    ``args[i]``), as ``(inputs, *solution.shape)``: the forward sensitivities along
    every input direction at once, one system (``y`` and one sensitivity per direction,
    ``ds/dt = (df/dy) s + (df/dargs) dargs``, the state's derivative shared), one run of
    the solver.  The adjoint method restarts the solver at every output time, backwards,
    which costs some 30 evaluations each; with few inputs one run of a larger system
    costs less."""
    y0, t, *args = primals
    shapes = [shape_of(primals[i]) for i in moving]
    sizes = [math.prod(shape) for shape in shapes]
    eye = eye_like(sum(sizes), np.float64, y0)  # (of y0's array library)
    bounds = np.cumsum([0, *sizes])
    directions = [
        anp.astype(anp.reshape(eye[:, a:b], (-1, *shape)), anp.result_type(primals[i]))
        for i, a, b, shape in zip(moving, bounds, bounds[1:], shapes)
    ]
    n, chosen = len(args), [i - 2 for i in moving[1:]]

    def sensitivities(state, tt, *values):  # (y, s_1..s_k) -> (f, (df/dy) s_d + ...)
        y, s, full, along = state[0], state[1:], values[:n], values[n:]
        f_of = at_positions(lambda y, *a: fn(y, tt, *a), [y, *full], [0, *(1 + i for i in chosen)])
        one = lambda s_d, *a_d: jvp(f_of, (y, *(full[i] for i in chosen)), (s_d, *a_d))
        f, ds = vmap(one, out_dims=(None, 0))(s, *along)
        return anp.concatenate([anp.expand_dims(f, 0), ds])

    _keyed(sensitivities, fn, tuple(chosen))
    sensitivities.solution = math.prod(shape_of(y0))  # type: ignore[attr-defined]
    s0 = anp.astype(directions[0], anp.result_type(y0))
    start = anp.concatenate([anp.expand_dims(y0, 0), s0])
    out = solve(start, t, *args, *directions[1:], rhs=sensitivities)  # (T, 1 + k, *y.shape)
    return out[:, 0], anp.moveaxis(out[:, 1:], 1, 0)


def _contracted(fn, ct, ans, primals, argnums, moving, jacobian):
    """The VJP as ``ct`` contracted with the Jacobian in the inputs at ``moving``
    (``_sensitivities``); the times' cotangents follow from the slopes, as in the adjoint
    method."""
    y0, t, *args = primals
    shapes = [shape_of(primals[i]) for i in moving]
    bounds = np.cumsum([0, *(math.prod(shape) for shape in shapes)])
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
    ``func`` must be written with ``autodiff.numpy`` (or NumPy functions that reach it);
    it takes what it depends on through ``args`` or closes over it.  SciPy's solver
    options (``rtol``, ``atol``, ``mxstep``, ``hmax``, ...) are passed on; ``Dfun`` and
    ``full_output`` are not supported (the derivatives come from ``func``).

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
    fn, values = _dynamics(func, args, lambda f, y, tt, a: f(tt, y, *a) if tfirst else f(y, tt, *a))
    if anp.ndim(y0) == 0:  # as in SciPy: a scalar is a state of one component
        y0 = anp.reshape(y0, (1,))
    prim = _odeint_primitive(fn, dict(options))
    return prim.bind(y0, t, *values)


def _dynamics(func: Callable, args: Any, call: Callable) -> tuple[Callable, list]:
    """``fn(y, t, *values)``, ``func`` called (by ``call(func, y, t, args)``) with the
    array leaves of ``args`` (any pytree) and the traced values ``func`` closes over (or
    an object in ``args`` holds) taken from ``values`` (``transforms/closures.py``); and
    those values."""
    leaves, tree = optree.tree_flatten(args)
    traced = [i for i, leaf in enumerate(leaves) if _is_array(leaf)]
    closure = closure_of(func, *(leaf for leaf in leaves if not _is_array(leaf)))
    n = len(traced)

    def fn(y, tt, *values):
        full = list(leaves)
        for i, v in zip(traced, values):
            full[i] = v
        rebuilt = optree.tree_unflatten(tree, full)
        return closure.run(values[n:], call, func, y, tt, rebuilt)

    fn.__name__ = getattr(func, "__name__", "func")
    statics = [leaf for i, leaf in enumerate(leaves) if i not in traced]
    identity, kept = environment(func, call, *statics)
    fn.cache_key = (("dynamics", tree, tuple(traced), len(closure), identity), kept)  # type: ignore[attr-defined]
    return fn, [*(leaves[i] for i in traced), *closure.tracers]


def _as_dtype_of(x, like):
    dtype = anp.result_type(like)
    return x if anp.result_type(x) == dtype else anp.astype(x, dtype)


def _is_array(x: Any) -> bool:
    return isinstance(x, (Tracer, float)) or (hasattr(x, "shape") and hasattr(x, "dtype"))


# --- solve_ivp -------------------------------------------------------------------------------

_IMPLICIT = ("Radau", "BDF", "LSODA")
_OF_THE_SYSTEM = ("jac", "jac_sparsity", "lband", "uband", "vectorized")  # not of augmented ones


class _IVP:
    """How ``_odeint_primitive`` integrates for ``solve_ivp``: SciPy's ``solve_ivp`` with
    the user's method and options, reporting the solution at the given times.  The
    system's own options (its Jacobian, sparsity, bands) are for the system itself; the
    augmented systems of the rules get the tolerances (a vector ``atol`` as its smallest
    entry) and step limits only, and for an implicit method SciPy's differenced Jacobian.
    ``jac``: the system's Jacobian as ``jac(y, t, *values)`` (the user's, or autodiff's)."""

    name = "solve_ivp"

    def __init__(self, method: Any, options: dict, jac: Callable | None) -> None:
        self.method, self.jac = method, jac
        self.options = {k: v for k, v in options.items() if k != "jac"}
        self.augmented = {k: v for k, v in options.items() if k not in _OF_THE_SYSTEM}
        if np.ndim(self.augmented.get("atol", 0.0)) > 0:
            self.augmented["atol"] = float(np.min(self.augmented["atol"]))
        # of the last solve (the system itself, or with its sensitivities under grad)
        self.counts: dict = {"nfev": -1, "njev": -1, "nlu": -1}

    def __call__(self, rhs: Callable, y0: np.ndarray, times: np.ndarray, augmented: bool,
                 values: tuple, solution: int | None = None) -> np.ndarray:  # fmt: skip
        if len(times) < 2 or times[0] == times[-1]:
            return np.repeat(y0[None], len(times), axis=0)
        sign = 1.0 if times[-1] > times[0] else -1.0
        distinct, where = np.unique(sign * np.asarray(times), return_inverse=True)
        if len(distinct) < len(times):  # (SciPy's t_eval may not repeat a time)
            return self(rhs, y0, sign * distinct, augmented, values, solution)[where.ravel()]
        options = dict(self.augmented if augmented else self.options)
        if not augmented and self.jac is not None:
            options["jac"] = lambda tt, y: np.asarray(self.jac(y, tt, *values))
        along = augmented and solution is not None and self._explicit()
        if along and solution is not None:
            options.update(self._along_the_solution(solution, len(y0)))
        with warnings.catch_warnings():
            if along:  # (an rtol scaled below 100 eps: SciPy clips it, as it would the user's)
                warnings.filterwarnings("ignore", "At least one element of `rtol`")
            sol = _si.solve_ivp(lambda tt, y: rhs(y, tt), (times[0], times[-1]), y0,
                                method=self.method, t_eval=times, **options)  # fmt: skip
        if sol.status < 0:
            raise ConvergenceError(f"solve_ivp ({self.method}) failed: {sol.message}")
        self.counts = {"nfev": sol.nfev, "njev": sol.njev, "nlu": sol.nlu}
        return sol.y.T

    def _explicit(self) -> bool:
        method = getattr(_si, self.method) if isinstance(self.method, str) else self.method
        return isinstance(method, type) and issubclass(method, _RungeKutta)

    def _along_the_solution(self, solution: int, size: int) -> dict:
        """Tolerances for an augmented system (its first ``solution`` components the
        solution, the rest its sensitivities) under which an explicit method steps as the
        solve itself does: the error estimate counts the solution only (the rest's
        tolerance infinite) and SciPy's RMS norm, taken over every component, is
        compensated.  The sensitivities are then those of the computed solution at its
        own steps (the same Runge-Kutta formulas differentiated, steps held fixed), and
        the solution under ``grad`` is the plain solve's; error control over the
        sensitivities too would take some 30% more steps."""
        shrink = math.sqrt(solution / size)
        rtol = np.full(size, self.options.get("rtol", 1e-3) * shrink)
        atol = np.full(size, np.inf)
        atol[:solution] = np.broadcast_to(self.options.get("atol", 1e-6), (solution,)) * shrink
        return {"rtol": rtol, "atol": atol}


def solve_ivp(fun: Callable, t_span: Any, y0: Any, method: Any = "RK45", t_eval: Any = None,
              dense_output: bool = False, events: Any = None, vectorized: bool = False,
              args: Any = None, **options: Any) -> Any:  # fmt: skip
    """Like ``scipy.integrate.solve_ivp``: SciPy's ``OdeResult`` for ``dy/dt = fun(t, y,
    *args)``, ``y(t_span[0]) = y0``, every method SciPy offers, with derivatives in
    ``y0``, ``args``, the values ``fun`` (and the events) close over, ``t_span`` and
    ``t_eval``.

    Under a transform the solution at the output times is ``odeint``'s primitive
    integrated by ``solve_ivp`` (reverse mode by forward sensitivities or the adjoint,
    chosen by the sizes; forward mode by sensitivities; ``vmap`` one system of all
    examples).  An event's time is differentiated by the implicit function theorem on
    ``event(t, y(t)) = 0`` (``custom_root``), and so is the end of a terminal event's
    trajectory; the values at events move with it (``dy = ∂y/∂θ dθ + f dt``).
    ``sol`` (``dense_output=True``) is then a function that integrates to the times it
    is given (differentiable; without a transform it is SciPy's ``OdeSolution``).
    The solver's steps (``t_eval=None``) are taken as fixed times.  The number of
    outputs and events depends on the solution, so under ``vmap`` and ``jit`` give
    ``t_eval`` and no events.  Implicit methods (``Radau``, ``BDF``, ``LSODA``) get
    autodiff's exact Jacobian when ``jac`` is not given.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> from autodiff.scipy.integrate import solve_ivp
    >>> def at_one(k):  # y' = -k y, y(0) = 1: y(1) = exp(-k)
    ...     return solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0]),
    ...                      t_eval=[1.0], rtol=1e-10, atol=1e-12).y[0, 0]
    >>> bool(np.isclose(at_one(2.0), np.exp(-2.0)))
    True
    >>> bool(np.isclose(autodiff.grad(at_one)(2.0), -np.exp(-2.0), rtol=1e-6))
    True
    >>> def hits_zero(v):  # a ball thrown up at speed v lands at t = 2 v / g
    ...     ground = lambda t, y: y[0]
    ...     ground.terminal, ground.direction = True, -1
    ...     res = solve_ivp(lambda t, y: anp.stack([y[1], -9.81]), (0.0, 10.0),
    ...                     anp.stack([0.0, v]), events=ground, rtol=1e-10, atol=1e-12)
    ...     return res.t_events[0][0]
    >>> round(float(autodiff.grad(hits_zero)(4.0)), 6), round(2 / 9.81, 6)
    (0.203874, 0.203874)
    """
    who = "solve_ivp"
    if not callable(fun):
        raise TypeError(f"{who}: fun must be callable, got {type(fun).__name__}")
    args = () if args is None else (args if isinstance(args, tuple) else (args,))
    events_list = [] if events is None else (list(events) if isinstance(events, (list, tuple))
                                             else [events])  # fmt: skip
    if len(t_span) != 2:
        raise ValueError(f"{who}: t_span must be a pair (t0, tf), got {len(t_span)} entries")
    t0, t1 = (anp.asarray(t, dtype=float) for t in t_span)
    y0 = anp.asarray(y0)
    y0 = y0 if anp.result_type(y0).kind in "fc" else anp.astype(y0, np.float64)
    if anp.ndim(y0) != 1:
        raise ValueError(f"{who}: y0 must be 1-dimensional (as in SciPy), got {anp.shape(y0)}")
    if method in _IMPLICIT and "jac" not in options:  # an exact Jacobian, not differences
        options["jac"] = _jacobian_of(fun)
    for leaf in (y0, t0, t1, *optree.tree_leaves(args)):
        if array_library(_underlying(leaf)) is not None:  # SciPy's solver takes NumPy's
            raise backend_error("scipy.integrate.solve_ivp", _underlying(leaf))
    if not current_interpreters():  # nothing traced: SciPy's own result
        return _si.solve_ivp(fun, t_span, y0, method=method, t_eval=t_eval,
                             dense_output=dense_output, events=events, vectorized=vectorized,
                             args=args if args else None, **options)  # fmt: skip
    if anp.result_type(y0).kind == "c":
        raise TypeError(f"{who}: complex y0 is differentiated as real and imaginary parts; "
                        f"pass them as a real state twice as long")  # fmt: skip
    fn, values = _dynamics(fun, args, lambda f, y, tt, a: f(tt, y, *a))
    jac = options.pop("jac", None)
    jac_fn = None
    if getattr(jac, "autodiff_jacobian", False):  # ours: the dynamics' own Jacobian
        jac_fn = _jacobian_of_dynamics(fn)
    elif callable(jac):  # the user's, of the same args and its own closed-over values
        jac_fn, jac_values = _dynamics(jac, args, lambda f, y, tt, a: f(tt, y, *a))
        jac_fn = _shifted(jac_fn, len(values))
        fn = _ignoring(fn, len(values))
        values = [*values, *jac_values]
    elif jac is not None:
        options["jac"] = jac  # a constant matrix
    integrator = _IVP(method, {**options, "vectorized": vectorized}, jac_fn)
    prim = _odeint_primitive(fn, integrator)

    def phi(times):  # the solution at ``times`` (from t0): the differentiable map
        return prim.bind(y0, times, *values)

    plan = None
    if t_eval is None or events_list:
        plan = _plan(fun, t_span, y0, method, t_eval, events_list, args, options, vectorized,
                     values)  # fmt: skip
    t_end = t1
    t_events, y_events = [], []
    for j, event in enumerate(events_list):
        found = [] if plan is None else plan.t_events[j]
        times_j = [_event_time(event, phi, t0, y0, args, float(te)) for te in found]
        t_events.append(anp.stack(times_j) if times_j else np.zeros(0))
        y_events.append(anp.stack([phi(anp.stack([t0, te]))[-1] for te in times_j])
                        if times_j else np.zeros((0, anp.shape(y0)[0])))  # fmt: skip
    if plan is not None and plan.status == 1:  # a terminal event ended the integration:
        # the terminal one that occurred last (in the direction of integration)
        sign = 1.0 if float(plan.t[-1]) >= float(_concrete(t0, who)) else -1.0
        ending = [j for j, e in enumerate(events_list)
                  if getattr(e, "terminal", False) and len(plan.t_events[j])]  # fmt: skip
        last = max(ending, key=lambda j: sign * float(plan.t_events[j][-1]))
        t_end = t_events[last][-1]
    if t_eval is not None:
        t_eval = anp.asarray(t_eval, dtype=float)
        if plan is not None:
            t_eval = t_eval[: len(plan.t)]  # those before a terminal event
        times = anp.concatenate([anp.reshape(t0, (1,)), t_eval])
        ys, t_out = phi(times)[1:], t_eval
    else:
        assert plan is not None
        inner = stop_gradient(anp.asarray(plan.t[1:-1]))
        times = anp.concatenate([anp.reshape(t0, (1,)), inner, anp.reshape(t_end, (1,))])
        ys, t_out = phi(times), times
    counts = dict(integrator.counts) if plan is None else {k: plan[k] for k in ("nfev", "njev",
                                                                               "nlu")}  # fmt: skip
    status = 0 if plan is None else plan.status
    message = "The solver successfully reached the end of the integration interval." if (
        plan is None) else plan.message  # fmt: skip
    sol = None
    if dense_output:

        def sol(t):
            t = anp.asarray(t, dtype=float)
            at = phi(anp.concatenate([anp.reshape(t0, (1,)), anp.reshape(t, (-1,))]))[1:]
            return anp.swapaxes(at, 0, 1) if anp.ndim(t) else at[0]

    return _si._ivp.ivp.OdeResult(t=t_out, y=anp.swapaxes(ys, 0, 1), sol=sol,
                                  t_events=t_events if events_list else None,
                                  y_events=y_events if events_list else None,
                                  status=status, message=message, success=status >= 0,
                                  **counts)  # fmt: skip


def _underlying(x: Any) -> Any:
    """The array under ``x``'s tracers (a staged value: an array of its library)."""
    while isinstance(x, Tracer):
        x = x._inner
    return x


def _ignoring(fn: Callable, n: int) -> Callable:
    """``fn`` of the first ``n`` values (the rest are the Jacobian's)."""

    def first(y, tt, *values):
        return fn(y, tt, *values[:n])

    first.__name__ = getattr(fn, "__name__", "func")
    return _keyed(first, fn, n)


def _shifted(fn: Callable, n: int) -> Callable:
    """``fn`` of the values after the first ``n``."""
    return lambda y, tt, *values: fn(y, tt, *values[n:])


def _jacobian_of(fun: Callable) -> Callable:
    """``jac(t, y, *args)``: autodiff's Jacobian of ``fun`` in ``y`` (plain arrays)."""

    def jac(t, y, *args):
        return np.asarray(jacfwd(lambda y: fun(t, y, *args))(np.asarray(y, dtype=float)))

    jac.autodiff_jacobian = True  # type: ignore[attr-defined]
    return jac


def _jacobian_of_dynamics(fn: Callable) -> Callable:
    """``jac(y, t, *values)``: autodiff's Jacobian of ``fn(y, t, *values)`` in ``y``."""
    return lambda y, tt, *values: jacfwd(lambda y: fn(y, tt, *values))(y)


def _concrete(x: Any, who: str) -> Any:
    """``x``'s value, where a transform holds one (``grad``, ``jvp``: not ``vmap``, ``jit``)."""
    if not isinstance(x, Tracer):
        return x
    try:
        return x._concrete_value(who)
    except ConcretizationError:
        raise TransformValueError(
            "solve_ivp: with events, or without t_eval, how many times and events it returns "
            "depends on the solution's values, which vmap and jit do not have; give t_eval "
            "and no events there (or vmap over examples with a Python loop)."
        ) from None


def _plan(fun, t_span, y0, method, t_eval, events, args, options, vectorized, values):
    """SciPy's solve on the values (where the transforms hold them): its steps, events
    and status, which fix what the differentiable solve computes."""
    closure = closure_of(fun, *events, options.get("jac"))
    plain = lambda x: optree.tree_map(lambda v: _concrete(v, "solve_ivp"), x)
    consts = [_concrete(c, "solve_ivp") for c in closure.tracers]
    span, start, at, extra = plain(tuple(t_span)), plain(y0), plain(t_eval), plain(args)

    def run():
        return _si.solve_ivp(fun, span, start, method=method, t_eval=at, events=events,
                             vectorized=vectorized, args=extra if extra else None,
                             **options)  # fmt: skip

    result = closure.run(consts, run, isolated=True)
    if result.status < 0:
        raise ConvergenceError(f"solve_ivp ({method}) failed: {result.message}")
    return result


def _event_time(event: Callable, phi: Callable, t0: Any, y0: Any, args: tuple, found: float):
    """The time of an event SciPy found at ``found``, as a function of everything the
    solution depends on: the root of ``event(t, y(t))`` in ``t``."""

    def residual(t):
        y = phi(anp.stack([t0, t]))[-1]
        return anp.asarray(event(t, y, *args), dtype=float)

    return _root(residual, np.asarray(found), lambda _f, _x: np.asarray(found),
                 lambda g, y: y / g(1.0), check=False)  # fmt: skip
