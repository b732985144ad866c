"""Derivatives of solvers: ``custom_root`` and ``custom_linear_solve`` (JAX's API).

A root-finder or an iterative linear solve is differentiated by the implicit function
theorem, not through its iterations: ``f(x(θ), θ) = 0`` gives ``∂f/∂x · dx = -∂f/∂θ ·
dθ``, one linear solve with ``f`` linearised at the root (``tangent_solve``); ``A(θ) x =
b`` gives ``A dx = db - dA x`` (forward) and ``Aᵀ ct_b = ct_x`` (reverse, with
``transpose_solve``).  Each is one primitive whose operands are the right-hand side (or
the initial guess) and the traced values the user's functions close over
(``transforms/closures.py``: so derivatives flow to a parameter of the equation that
``f`` or ``matvec`` closes over, and ``solve`` may close over the traced matrix), and
whose rules are those formulas:

- ``linear_solve_p``: a JVP rule and a VJP rule (the transpose uses ``transpose_solve``,
  or ``solve`` when ``symmetric``); its Hessians differentiate the rules again;
- ``root_p``: a JVP rule whose linear solve is a ``custom_linear_solve``, and a VJP rule
  solving the transposed system the same way.

The solvers run on plain values (their implementation), the closed-over tracers
standing for the operands' values there: under ``jit`` each is one equation whose
shapes are the initial guess's or ``b``'s, the solver running at replay (its Python
control flow and SciPy calls are allowed); ``vmap`` solves example by example.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff.core.args import check_callable, check_flag
from autodiff.core.arrays import batch_size_of, dtype_of, shape_of
from autodiff.core.graph import ShapedArray, aval_of
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import stop_gradient, vjp
from autodiff.interpreters.staging import innermost_staging, stage
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import move_to_front
from autodiff.transforms.closures import Closure, closure_of

__all__ = ["custom_linear_solve", "custom_root", "linear_solve_p", "root_p"]


def loop_batch(prim: Primitive) -> Callable:
    """Example by example (a solver's control flow is the user's): the results stacked."""

    def batch(args, dims, **params):
        size = batch_size_of(args, dims)
        moved = [a if d is None else move_to_front(a, d) for a, d in zip(args, dims)]
        if size == 0:  # no example to solve: the shapes one would have
            one = [ShapedArray(shape_of(a)[0 if d is None else 1 :], dtype_of(a))
                   for a, d in zip(moved, dims)]  # fmt: skip
            problem = params.get("problem")
            if problem is not None and problem.has_aux and problem.aux.tree is None:
                raise TransformValueError(
                    f"vmap of {prim.name}(..., has_aux=True) over a batch of no examples: "
                    f"the aux's shapes are unknown, since no solve ran."
                )
            avals = prim.shape(*one, **params)  # type: ignore[misc]
            if not prim.multiple_results:
                return np.zeros((0, *avals.shape), avals.dtype), 0
            return tuple(np.zeros((0, *v.shape), v.dtype) for v in avals), (0,) * len(avals)
        outs = [prim.bind(*(a if d is None else a[i] for a, d in zip(moved, dims)), **params)
                for i in range(size)]  # fmt: skip
        if not prim.multiple_results:
            return _shp.stack(outs), 0
        return tuple(_shp.stack(list(col)) for col in zip(*outs)), (0,) * len(outs[0])

    return batch


def leaves_like(x: Any, ref_leaves: Sequence, ref_tree: Any, who: str, what: str) -> list:
    """The leaves of ``x``, which ``who`` returned, checked to be structured and shaped
    like ``what`` (``ref_leaves`` in ``ref_tree``)."""
    leaves, tree = optree.tree_flatten(x)
    if tree != ref_tree:
        raise TransformTypeError(
            f"{who} output pytree {tree} must be structured like {what} ({ref_tree})."
        )
    shapes, want = [np.shape(a) for a in leaves], [np.shape(r) for r in ref_leaves]
    if shapes != want:
        raise TransformValueError(
            f"{who} output shapes {shapes} must be those of {what} ({want}): it must be "
            f"structured like {what}."
        )
    return leaves


def checked_map(fn: Callable, tree: Any, ref_leaves: Sequence, who: str, what: str) -> Callable:
    """``fn`` (a function of a pytree like ``ref``) with its output checked to be
    structured like its input: a linear map of a square system, or a residual."""

    dtypes = [dtype_of(r) for r in ref_leaves]

    def mapped(v):
        # (SciPy's LinearOperator probes a matvec with integers: as b's dtype here)
        leaves = tree.flatten_up_to(v) if not isinstance(v, np.ndarray) else [v]
        if any(isinstance(x, np.ndarray) and x.dtype.kind in "biu" for x in leaves):
            v = optree.tree_unflatten(tree, [np.asarray(x, d) if isinstance(x, np.ndarray) else x
                                             for x, d in zip(leaves, dtypes)])  # fmt: skip
        out = fn(v)
        leaves_like(out, ref_leaves, tree, who, what)
        return out

    return mapped


def check_by_staging(fn: Callable, leaves: list, tree: Any, who: str, what: str) -> None:
    """Refuse ``fn`` at once if its output is not structured like its input (as JAX
    does), by staging it on the input's shapes; a function that cannot be staged (Python
    control flow on values) is checked where it runs instead."""
    avals = [ShapedArray(tuple(np.shape(x)), dtype_of(x)) if isinstance(x, Tracer)
             else aval_of(x) for x in leaves]  # fmt: skip
    cell: list = []

    def flat(*xs):
        out = fn(optree.tree_unflatten(tree, list(xs)))
        out_leaves, out_tree = optree.tree_flatten(out)
        cell[:] = [out_tree, [np.shape(o) for o in out_leaves]]
        return out_leaves

    try:
        stage(flat, avals, transform=who, name=who)
    except Exception:  # (checked where it runs instead, where its own error raises)
        return
    if cell:
        leaves_like(optree.tree_unflatten(cell[0], [np.zeros(s) for s in cell[1]]),
                    [np.zeros(a.shape) for a in avals], tree, who, what)  # fmt: skip


def _aux_leaves(aux: Any, who: str) -> list:
    leaves = optree.tree_leaves(aux)
    for leaf in leaves:
        if not (hasattr(leaf, "shape") or isinstance(leaf, (bool, int, float, complex))):
            raise TransformTypeError(
                f"{who}(..., has_aux=True): the aux leaves must be arrays or numbers, got "
                f"a {type(leaf).__name__}; return other values through a closure."
            )
    return [np.asarray(x) if isinstance(x, (bool, int, float, complex)) else x for x in leaves]


def _split_aux(found: Any, who: str, fn: str) -> tuple[Any, Any]:
    if not (isinstance(found, tuple) and len(found) == 2):
        raise TransformTypeError(
            f"{who}(..., has_aux=True): {fn} must return a pair (solution, aux), got "
            f"{type(found).__name__}."
        )
    return found


class _Aux:
    """The aux structure and shapes of a solve with ``has_aux``: found where it first
    runs (or, under ``jit``, by staging it), read by the shape rule and the caller."""

    __slots__ = ("avals", "tree")

    def __init__(self) -> None:
        self.tree: Any = None
        self.avals: tuple = ()

    def record(self, aux: Any, who: str) -> list:
        leaves = _aux_leaves(aux, who)
        self.tree = optree.tree_structure(aux)
        self.avals = tuple(aval_of(a) for a in leaves)
        return leaves


# --- custom_linear_solve -------------------------------------------------------------------------


class LinearProblem:
    """A linear system's functions and settings: ``linear_solve_p``'s parameter."""

    __slots__ = ("aux", "closure", "has_aux", "matvec", "names", "solve", "symmetric",
                 "transpose_solve", "tree", "who")  # fmt: skip

    def __init__(self, matvec, solve, transpose_solve, symmetric, tree, closure, has_aux,
                 who, names) -> None:  # fmt: skip
        self.matvec, self.solve, self.transpose_solve = matvec, solve, transpose_solve
        self.symmetric, self.tree, self.closure = symmetric, tree, closure
        self.has_aux, self.who, self.names, self.aux = has_aux, who, names, _Aux()

    def transposed(self, x_leaves: Sequence) -> LinearProblem:
        """``Aᵀ y = c``: the transposed product (``vjp`` of ``matvec``, linear) solved by
        ``transpose_solve``, whose own transpose is ``solve``."""
        if self.symmetric:
            return self
        if self.transpose_solve is None:
            raise TransformTypeError(
                f"{self.who}: transpose_solve required for reverse mode (the transposed "
                f"solve): pass transpose_solve=..., or symmetric=True if the matrix is "
                f"symmetric."
            )
        # (plain zeros: the point a linear map is differentiated at does not matter, and
        # the function must not close over a traced value the transform does not see)
        zeros = optree.tree_unflatten(
            self.tree, [np.zeros(np.shape(x), dtype_of(x)) for x in x_leaves]
        )
        matvec = self.matvec

        def vecmat(ct):
            return vjp(matvec, zeros)[1](ct)[0]

        matvec_name, solve_name, transpose_name = self.names
        names = (f"the transpose of {matvec_name}", transpose_name, solve_name)
        out = LinearProblem(vecmat, self.transpose_solve, self.solve, False, self.tree,
                            self.closure, self.has_aux, self.who, names)  # fmt: skip
        out.aux = self.aux
        return out


def _linear_solve_impl(*operands, problem: LinearProblem, n_b: int):
    b_leaves, consts = operands[:n_b], operands[n_b:]
    b = optree.tree_unflatten(problem.tree, list(b_leaves))
    who, (matvec_name, solve_name, _) = problem.who, problem.names
    matvec = checked_map(problem.matvec, problem.tree, b_leaves, f"{who}: {matvec_name}()", "b")
    found = problem.closure.run(consts, problem.solve, matvec, b, isolated=True)
    aux: list = []
    if problem.has_aux:
        found, aux_tree = _split_aux(found, who, solve_name)
        aux = problem.aux.record(aux_tree, who)
    x = leaves_like(found, b_leaves, problem.tree, f"{who}: {solve_name}()", "b")
    return (*x, *aux)


def _linear_solve_jvp(tangents, ans, primals, params):
    """``A dx = db - dA x``: one more solve, of the same primitive."""
    n_b, problem = params["n_b"], params["problem"]
    b_dot, c_dot = tangents[:n_b], tangents[n_b:]
    consts = primals[n_b:]
    rhs = [np.zeros_like(b) if t is None else t for t, b in zip(b_dot, primals[:n_b])]
    moving = [i for i, t in enumerate(c_dot) if t is not None]
    if moving:  # dA x: the matvec at the solution, pushed along the closed-over values
        x = optree.tree_unflatten(problem.tree, list(ans[:n_b]))
        along = problem.closure.along(consts, moving, problem.matvec, x)
        _, dax = jvp(along, tuple(consts[i] for i in moving), tuple(c_dot[i] for i in moving))
        rhs = [r - d for r, d in zip(rhs, dax)]
    dx = linear_solve_p.bind(*rhs, *consts, **params)[:n_b]
    return (*dx, *(np.zeros_like(a) for a in ans[n_b:]))


def _differentiable(consts: Sequence, wanted: list[int]) -> list[int]:
    """The closed-over values of ``wanted`` that carry a derivative: not integer ones (an
    LU factorisation's pivots, computed from the traced matrix), whose cotangent is zero."""
    return [i for i in wanted if np.issubdtype(dtype_of(consts[i]), np.inexact)]


def _linear_solve_vjp(cts, ans, primals, params, argnums):
    """``ct_b = A⁻ᵀ ct_x``; ``ct_θ = -(∂(A(θ) x)/∂θ)ᵀ ct_b``."""
    n_b, problem = params["n_b"], params["problem"]
    consts, x = primals[n_b:], ans[:n_b]
    ct_x = [np.zeros_like(a) if c is None else c for c, a in zip(cts[:n_b], x)]
    ct_b = linear_solve_p.bind(*ct_x, *consts, problem=problem.transposed(x), n_b=n_b)[:n_b]
    wanted = _differentiable(consts, [i - n_b for i in argnums if i >= n_b])
    grads = {}
    if wanted:
        at = optree.tree_unflatten(problem.tree, list(x))
        along = problem.closure.along(consts, wanted, problem.matvec, at)
        _, pull = vjp(along, *(consts[i] for i in wanted))
        grads = dict(zip(wanted, pull(tuple(-c for c in ct_b))))
    return [ct_b[i] if i < n_b else grads.get(i - n_b) for i in argnums]


def _linear_solve_shape(*avals, problem: LinearProblem, n_b: int):
    return (*avals[:n_b], *problem.aux.avals)


linear_solve_p = Primitive("custom_linear_solve", _linear_solve_impl, multiple_results=True,
                           shape=_linear_solve_shape)  # fmt: skip
linear_solve_p.def_jvp(_linear_solve_jvp, packed=True)
linear_solve_p.def_vjp(_linear_solve_vjp, packed=True)
linear_solve_p.def_batch(loop_batch(linear_solve_p))
# Taylor mode through the implicit function theorem's JVP (the solver is never differentiated)
linear_solve_p.def_taylor(jvp_taylor(linear_solve_p))


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable,
                        transpose_solve: Callable | None = None, symmetric: bool = False,
                        has_aux: bool = False) -> Any:  # fmt: skip
    """``x`` with ``matvec(x) = b``, computed by ``solve(matvec, b)``, differentiated
    implicitly (JAX's ``lax.custom_linear_solve``).

    ``matvec`` is linear (a matrix-vector product, maybe matrix-free, closing over the
    matrix's parameters); ``b`` a pytree of arrays; ``solve(matvec, b)`` any solver
    (conjugate gradients, a factorisation, SciPy), whose iterations are never
    differentiated: ``jvp`` solves ``A dx = db - dA x`` with ``solve`` again, ``grad``
    solves ``Aᵀ y = ct`` with ``transpose_solve(vecmat, ct)`` (``vecmat``: the
    transposed product), or with ``solve`` when ``symmetric=True``.  Derivatives reach
    ``b`` and every traced value ``matvec`` closes over; ``solve`` and
    ``transpose_solve`` may close over traced values too (the matrix itself, for a
    direct solve), which they see as plain arrays.  Composes with ``grad``, ``jvp``,
    ``vmap`` (example by example), ``jit`` (the solver runs at replay) and itself.
    ``has_aux``: ``solve`` (and ``transpose_solve``) return ``(x, aux)``; aux is returned
    as it is, without derivatives.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> def x_of(a):  # solves [[a, 1], [1, 3]] x = [1, 2]
    ...     m = anp.stack([anp.stack([a, 1.0]), anp.array([1.0, 3.0])])
    ...     direct = lambda matvec, rhs: anp.linalg.solve(m, rhs)  # closes over m
    ...     return autodiff.custom_linear_solve(lambda v: m @ v, np.array([1.0, 2.0]),
    ...                                         direct, symmetric=True)
    >>> x_of(2.0).round(6).tolist()
    [0.2, 0.6]
    >>> round(float(autodiff.grad(lambda a: x_of(a)[0])(2.0)), 6)  # -x0 (A^-1)_00
    -0.12
    """
    return linear_solve(matvec, b, solve, transpose_solve, symmetric, has_aux)


def linear_solve(matvec, b, solve, transpose_solve, symmetric, has_aux, who="custom_linear_solve",
                 names=("matvec", "solve", "transpose_solve"), aux_like=None):  # fmt: skip
    """``custom_linear_solve``, its messages naming ``who`` and the functions ``names``
    (``custom_root`` calls it for its tangent solves); ``aux_like``: an aux shaped like
    the one ``solve`` returns, for solvers that cannot be staged to find it."""
    check_callable(matvec, f"{who} ({names[0]})")
    check_callable(solve, f"{who} ({names[1]})")
    if transpose_solve is not None:
        check_callable(transpose_solve, f"{who} ({names[2]})")
    check_flag(symmetric, "symmetric", who)
    check_flag(has_aux, "has_aux", who)
    b_leaves, tree = optree.tree_flatten(b)
    b_leaves = [np.asarray(x, float) if isinstance(x, (int, float)) else x for x in b_leaves]
    closure = closure_of(matvec, solve, transpose_solve)
    check_by_staging(matvec, b_leaves, tree, f"{who}: {names[0]}()", "b")
    if transpose_solve is not None:  # (with matvec standing in for its transpose: the
        # shapes are those of a square system's)

        def transposed(c):
            out = transpose_solve(matvec, c)
            return _split_aux(out, who, names[2])[0] if has_aux else out

        check_by_staging(transposed, b_leaves, tree, f"{who}: {names[2]}()", "b")
    problem = LinearProblem(matvec, solve, transpose_solve, symmetric, tree, closure, has_aux,
                            who, names)  # fmt: skip
    if aux_like is not None:
        problem.aux.record(aux_like, who)
    elif has_aux and innermost_staging() is not None:  # the shapes of aux, for staging: from
        # the solve staged here (so under jit a solve with aux must be traceable)
        found = solve(matvec, optree.tree_unflatten(tree, b_leaves))
        problem.aux.record(_split_aux(found, who, names[1])[1], who)
    outs = linear_solve_p.bind(*b_leaves, *closure.tracers, problem=problem, n_b=len(b_leaves))
    x = optree.tree_unflatten(tree, list(outs[: len(b_leaves)]))
    if has_aux:
        aux = [stop_gradient(a) for a in outs[len(b_leaves) :]]
        return x, optree.tree_unflatten(problem.aux.tree, aux)
    return x


# --- custom_root -------------------------------------------------------------------------------


class RootProblem:
    """A root-finding problem's functions: ``root_p``'s parameter."""

    __slots__ = ("aux", "closure", "f", "has_aux", "solve", "tangent_solve", "tree")

    def __init__(self, f, solve, tangent_solve, tree, closure, has_aux) -> None:
        self.f, self.solve, self.tangent_solve = f, solve, tangent_solve
        self.tree, self.closure, self.has_aux, self.aux = tree, closure, has_aux, _Aux()


def _root_impl(*operands, problem: RootProblem, n_x: int):
    x0_leaves, consts = operands[:n_x], operands[n_x:]
    x0 = optree.tree_unflatten(problem.tree, list(x0_leaves))
    f = checked_map(problem.f, problem.tree, x0_leaves, "custom_root: f()", "initial_guess")
    found = problem.closure.run(consts, problem.solve, f, x0, isolated=True)
    aux: list = []
    if problem.has_aux:
        found, aux_tree = _split_aux(found, "custom_root", "solve")
        aux = problem.aux.record(aux_tree, "custom_root")
    x = leaves_like(found, x0_leaves, problem.tree, "custom_root: solve()", "initial_guess")
    return (*x, *aux)


def _tangent_solve(problem: RootProblem, g: Callable, y: Any, transposed: bool) -> Any:
    """``g(v) = y`` (``g``: ``f`` linearised at the root, or its transpose) as a
    ``custom_linear_solve`` by ``tangent_solve``, so its own derivatives follow."""
    ts = problem.tangent_solve
    lin = "the transposed linearisation of f" if transposed else "the linearisation of f"
    return linear_solve(g, y, lambda m, r: ts(m, r), lambda m, r: ts(m, r), False, False,
                        "custom_root", (lin, "tangent_solve", "tangent_solve"))  # fmt: skip


def _root_jvp(tangents, ans, primals, params):
    """``f(x, θ) = 0``: ``∂f/∂x dx = -∂f/∂θ dθ``, solved by ``tangent_solve`` as a
    ``custom_linear_solve`` (so its derivatives, and reverse mode, follow)."""
    n_x, problem = params["n_x"], params["problem"]
    x_leaves, aux, consts = list(ans[:n_x]), ans[n_x:], primals[n_x:]
    moving = [i for i, t in enumerate(tangents[n_x:]) if t is not None]
    tangent_aux = [np.zeros_like(a) for a in aux]
    if not moving:
        return (*(np.zeros_like(v) for v in x_leaves), *tangent_aux)
    x = optree.tree_unflatten(problem.tree, x_leaves)
    along = problem.closure.along(consts, moving, problem.f, x)
    _, f_dot = jvp(along, tuple(consts[i] for i in moving),
                   tuple(tangents[n_x + i] for i in moving))  # fmt: skip
    rhs = optree.tree_unflatten(problem.tree, [-d for d in f_dot])

    def linearized(v):  # ∂f/∂x at the root, with the closed-over values held
        return jvp(problem.f, (x,), (v,))[1]

    dx = problem.closure.run(consts, _tangent_solve, problem, linearized, rhs, False)
    return (*optree.tree_leaves(dx), *tangent_aux)


def _root_vjp(cts, ans, primals, params, argnums):
    """``ct_θ = -(∂f/∂θ)ᵀ y`` with ``(∂f/∂x)ᵀ y = ct_x``: the transposed system solved by
    ``tangent_solve`` on the transposed linearisation (a ``custom_linear_solve``, whose
    own derivatives follow); none for the initial guess, none through the aux."""
    n_x, problem = params["n_x"], params["problem"]
    x_leaves, consts = list(ans[:n_x]), primals[n_x:]
    x = optree.tree_unflatten(problem.tree, x_leaves)
    ct_x = optree.tree_unflatten(problem.tree, [np.zeros_like(v) if c is None else c
                                                for c, v in zip(cts[:n_x], x_leaves)])  # fmt: skip

    def transposed(v):
        return vjp(problem.f, x)[1](v)[0]

    y = problem.closure.run(consts, _tangent_solve, problem, transposed, ct_x, True)
    wanted = _differentiable(consts, [i - n_x for i in argnums if i >= n_x])
    grads = {}
    if wanted:
        along = problem.closure.along(consts, wanted, problem.f, x)
        _, pull = vjp(along, *(consts[i] for i in wanted))
        grads = dict(zip(wanted, pull(tuple(-c for c in optree.tree_leaves(y)))))
    return [grads.get(i - n_x) if i >= n_x else None for i in argnums]


root_p = Primitive(
    "custom_root",
    _root_impl,
    multiple_results=True,
    shape=lambda *avals, problem, n_x: (*avals[:n_x], *problem.aux.avals),
)
root_p.def_jvp(_root_jvp, packed=True)
root_p.def_taylor(jvp_taylor(root_p))
root_p.def_vjp(_root_vjp, packed=True)
root_p.def_batch(loop_batch(root_p))


def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False) -> Any:  # fmt: skip
    """The root of ``f`` found by ``solve(f, initial_guess)``, differentiated by the
    implicit function theorem (JAX's ``lax.custom_root``).

    ``solve`` is any root-finder (Newton's method with a sparse Jacobian, SciPy's
    ``fsolve``), whose iterations are never differentiated; ``tangent_solve(g, y)`` solves
    the linear system ``g(x) = y`` for ``g``, ``f`` linearised at the root (for a scalar,
    ``lambda g, y: y / g(1.0)``; for a vector, e.g. ``np.linalg.solve(jacobian(g)(y),
    y)``).  Derivatives reach every traced value ``f`` closes over (the parameters of the
    equation), none reach ``initial_guess``; ``solve`` and ``tangent_solve`` may close
    over traced values too (they see them as plain arrays).  Reverse mode transposes the
    tangent solve (``tangent_solve`` is called with the transposed linearisation).
    Composes with ``grad``, ``jvp``, ``vmap`` (example by example), ``jit`` (the solver
    runs at replay on concrete values) and ``custom_linear_solve``.  ``has_aux``:
    ``solve`` returns ``(solution, aux)``, and so does ``custom_root`` (aux carries no
    derivative).

    >>> import numpy as np, autodiff
    >>> def cube_root(a):  # the root of x**3 - a
    ...     f = lambda x: x**3 - a
    ...     def newton(_, x):  # (uses f, which closes over a, rather than its argument)
    ...         for _ in range(30):
    ...             x = x - f(x) / (3 * x**2)
    ...         return x
    ...     return autodiff.custom_root(f, 1.0, newton, lambda g, y: y / g(1.0))
    >>> round(float(cube_root(8.0)), 9), round(float(autodiff.grad(cube_root)(8.0)), 9)
    (2.0, 0.083333333)
    """
    check_callable(f, "custom_root (f)")
    check_callable(solve, "custom_root (solve)")
    check_callable(tangent_solve, "custom_root (tangent_solve)")
    check_flag(has_aux, "has_aux", "custom_root")
    return root(f, initial_guess, solve, tangent_solve, has_aux)


def root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
         has_aux: bool = False, aux_like: Any = None, closure: Closure | None = None,
         check: bool = True) -> Any:  # fmt: skip
    """``custom_root`` for the library's own solvers (``autodiff.scipy.optimize``):
    ``aux_like``, an aux structured and shaped like the one ``solve`` will return (for
    staging, where a solve calling SciPy cannot be staged to find it); ``closure``,
    the traced values the functions close over, where the caller found them; ``check``:
    whether to stage ``f`` to check its output's structure at once."""
    x0_leaves, tree = optree.tree_flatten(initial_guess)
    x0_leaves = [np.asarray(x, float) if isinstance(x, (int, float)) else x for x in x0_leaves]
    guess = optree.tree_unflatten(tree, x0_leaves)
    if closure is None:
        closure = closure_of(f, solve, tangent_solve)
    if check:
        check_by_staging(f, x0_leaves, tree, "custom_root: f()", "initial_guess")
    problem = RootProblem(f, solve, tangent_solve, tree, closure, has_aux)
    if aux_like is not None:
        problem.aux.record(aux_like, "custom_root")
    elif has_aux and innermost_staging() is not None:  # the shapes of aux, for staging: from
        # one solve on the staged values (so under jit a solve with aux must be traceable)
        problem.aux.record(_split_aux(solve(f, guess), "custom_root", "solve")[1], "custom_root")
    outs = root_p.bind(*x0_leaves, *closure.tracers, problem=problem, n_x=len(x0_leaves))
    x = optree.tree_unflatten(tree, list(outs[: len(x0_leaves)]))
    if has_aux:
        aux = [stop_gradient(a) for a in outs[len(x0_leaves) :]]
        return x, optree.tree_unflatten(problem.aux.tree, aux)
    return x
