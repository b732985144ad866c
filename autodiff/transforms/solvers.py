"""Derivatives of solvers: ``custom_root`` and ``custom_linear_solve`` (JAX's API).

A root-finder or an iterative linear solve is differentiated by the implicit function
theorem, not through its iterations: ``f(x(θ), θ) = 0`` gives ``∂f/∂x · dx = -∂f/∂θ ·
dθ``, one linear solve with ``f`` linearised at the root (``tangent_solve``); ``A(θ) x =
b`` gives ``A dx = db - dA x`` (forward) and ``Aᵀ ct_b = ct_x`` (reverse, with
``transpose_solve``).  Each is one primitive whose operands are the right-hand side (or
the initial guess) and the values the user's functions close over (found by staging the
function, as ``jit`` does: so derivatives flow to a parameter of the equation closed
over by ``f``), and whose rules are those formulas:

- ``linear_solve_p``: a JVP rule and a VJP rule (the transpose uses ``transpose_solve``,
  or ``solve`` when ``symmetric``); its Hessians differentiate the rules again;
- ``root_p``: a JVP rule whose linear solve is a ``linear_solve_p``, so reverse mode
  transposes it (the core derives the VJP).

Under ``jit`` each is one equation whose shape is the initial guess's or ``b``'s: the
solver runs at replay on concrete values (its Python control flow is allowed); ``vmap``
solves example by example.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff.core.args import check_callable, check_flag
from autodiff.core.arrays import batch_size_of, dtype_of
from autodiff.core.graph import ShapedArray, aval_of
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import stop_gradient, vjp
from autodiff.interpreters.staging import eval_graph, innermost_staging, stage
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import move_to_front

__all__ = ["custom_linear_solve", "custom_root", "linear_solve_p", "root_p"]


class _Closed:
    """``fn(tree)`` staged on ``tree``'s avals: ``call(leaves, params)`` runs it with the
    values it closed over passed explicitly (``params``, the graph's last inputs)."""

    def __init__(self, fn: Callable, tree: Any, who: str) -> None:
        leaves, self.in_tree = optree.tree_flatten(tree)
        cell: list = []

        def flat(*xs):
            out = fn(optree.tree_unflatten(self.in_tree, list(xs)))
            out_leaves, out_tree = optree.tree_flatten(out)
            cell[:] = [out_tree]
            return out_leaves

        avals = [ShapedArray(tuple(np.shape(x)), dtype_of(x)) if isinstance(x, Tracer)
                 else aval_of(x) for x in leaves]  # fmt: skip
        staged = stage(flat, avals, transform=who, name=who)
        self.graph, self.params, self.out_tree = staged.graph, staged.captured, cell[0]
        self.n_in = len(leaves)

    def call(self, leaves: Any, params: Any) -> list:
        return eval_graph(self.graph, *leaves, *params)

    def tree_fn(self, params: Any) -> Callable:
        """The function of a pytree, with ``params`` as its closed-over values."""

        def fn(tree):
            leaves = self.in_tree.flatten_up_to(tree)
            return optree.tree_unflatten(self.out_tree, self.call(leaves, params))

        return fn


def _loop_batch(prim: Primitive) -> Callable:
    """Example by example (a solver's control flow is the user's): the results stacked."""

    def batch(args, dims, **params):
        size = batch_size_of(args, dims)
        moved = [a if d is None else move_to_front(a, d) for a, d in zip(args, dims)]
        if size == 0:
            raise TransformValueError(f"vmap of {prim.name} over a batch of no examples")
        outs = [prim.bind(*(a if d is None else a[i] for a, d in zip(moved, dims)), **params)
                for i in range(size)]  # fmt: skip
        return tuple(_shp.stack(list(col)) for col in zip(*outs)), (0,) * len(outs[0])

    return batch


# --- custom_linear_solve -------------------------------------------------------------------------


def _linear_solve_impl(*operands, matvec, solve, transpose_solve, symmetric, n_b):
    b_leaves, params = operands[:n_b], operands[n_b:]
    b = optree.tree_unflatten(matvec.in_tree, list(b_leaves))
    x = solve(matvec.tree_fn(params), b)
    return tuple(_leaves_like(x, b, "solve", "b"))


def _leaves_like(x: Any, ref: Any, who: str, what: str) -> list:
    leaves, tree = optree.tree_flatten(x)
    ref_leaves, ref_tree = optree.tree_flatten(ref)
    if tree != ref_tree or any(np.shape(a) != np.shape(r) for a, r in zip(leaves, ref_leaves)):
        raise TransformValueError(
            f"{who} returned a value structured as {tree} with shapes "
            f"{[np.shape(a) for a in leaves]}; it must be structured like {what} ({ref_tree}, "
            f"shapes {[np.shape(r) for r in ref_leaves]})."
        )
    return leaves


def _linear_solve_jvp(tangents, ans, primals, params):
    """``A dx = db - dA x``: one more solve, of the same primitive."""
    n_b, matvec = params["n_b"], params["matvec"]
    b_dot, p_dot = tangents[:n_b], tangents[n_b:]
    p = primals[n_b:]
    rhs = [np.zeros_like(b) if t is None else t for t, b in zip(b_dot, primals[:n_b])]
    moving = [i for i, t in enumerate(p_dot) if t is not None]
    if moving:  # dA x: the matvec at the solution, pushed along the parameters' tangents

        def along(*chosen):
            full = list(p)
            for i, c in zip(moving, chosen):
                full[i] = c
            return tuple(matvec.call(ans, full))

        _, dax = jvp(along, tuple(p[i] for i in moving), tuple(p_dot[i] for i in moving))
        rhs = [r - d for r, d in zip(rhs, dax)]
    return linear_solve_p.bind(*rhs, *p, **params)


def _linear_solve_vjp(cts, ans, primals, params, argnums):
    """``ct_b = A⁻ᵀ ct_x``; ``ct_θ = -(∂(A(θ) x)/∂θ)ᵀ ct_b``."""
    n_b, matvec = params["n_b"], params["matvec"]
    p = primals[n_b:]
    cts = [np.zeros_like(a) if c is None else c for c, a in zip(cts, ans)]
    if params["symmetric"]:
        ct_b = linear_solve_p.bind(*cts, *p, **params)
    else:
        ct_b = _transposed_solve(cts, p, params)
    out: list = []
    wanted_p = [i - n_b for i in argnums if i >= n_b]
    grads_p = _pulled_back(matvec.call, ans, p, wanted_p, ct_b)
    for i in argnums:
        out.append(ct_b[i] if i < n_b else grads_p[i - n_b])
    return out


def _transposed_solve(cts, p, params) -> tuple:
    """``Aᵀ y = cts`` solved with ``transpose_solve`` (its own derivatives by the same
    rules: a linear solve whose matrix is ``Aᵀ``)."""
    matvec = params["matvec"]
    if params["transpose_solve"] is None:
        raise TransformTypeError(
            "custom_linear_solve: reverse mode needs the transposed solve; pass "
            "transpose_solve=..., or symmetric=True if the matrix is symmetric."
        )
    avals = matvec.graph.in_avals[: matvec.n_in]
    zeros = optree.tree_unflatten(matvec.in_tree, [np.zeros(a.shape, a.dtype) for a in avals])
    t_fn = lambda ct: vjp(matvec.tree_fn(p), zeros)[1](ct)[0]
    transpose = _Closed(t_fn, optree.tree_unflatten(matvec.in_tree, list(cts)),
                        "custom_linear_solve (transpose)")  # fmt: skip
    return linear_solve_p.bind(*cts, *transpose.params, matvec=transpose, n_b=params["n_b"],
                               solve=params["transpose_solve"], transpose_solve=params["solve"],
                               symmetric=False)  # fmt: skip


linear_solve_p = Primitive(
    "custom_linear_solve",
    _linear_solve_impl,
    multiple_results=True,
    shape=lambda *avals, n_b, **params: tuple(avals[:n_b]),
)
linear_solve_p.def_jvp(_linear_solve_jvp, packed=True)
linear_solve_p.def_vjp(_linear_solve_vjp, packed=True)
linear_solve_p.def_batch(_loop_batch(linear_solve_p))
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
    ``b`` and every array ``matvec`` closes over.  Composes with ``grad``, ``jvp``,
    ``vmap`` (example by example), ``jit`` (the solver runs at replay) and itself.
    ``has_aux``: ``solve`` returns ``(x, aux)``; aux is returned as it is (no derivative).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> def x_of(a):  # solves [[a, 1], [1, 3]] x = [1, 2]
    ...     matvec = lambda v: anp.stack([a * v[0] + v[1], v[0] + 3 * v[1]])
    ...     dense = lambda mv, rhs: np.linalg.solve(autodiff.jacfwd(mv)(rhs), rhs)
    ...     return autodiff.custom_linear_solve(matvec, np.array([1.0, 2.0]), dense,
    ...                                         symmetric=True)
    >>> x_of(2.0).round(6).tolist()
    [0.2, 0.6]
    >>> round(float(autodiff.grad(lambda a: x_of(a)[0])(2.0)), 6)  # -x0 (A^-1)_00
    -0.12
    """
    check_callable(matvec, "custom_linear_solve (matvec)")
    check_callable(solve, "custom_linear_solve (solve)")
    if transpose_solve is not None:
        check_callable(transpose_solve, "custom_linear_solve (transpose_solve)")
    check_flag(symmetric, "symmetric", "custom_linear_solve")
    check_flag(has_aux, "has_aux", "custom_linear_solve")
    b_leaves, _ = optree.tree_flatten(b)
    aux_cell: list = []
    inner = solve
    if has_aux:

        def inner(mv, rhs):
            x, aux = solve(mv, rhs)
            aux_cell[:] = [aux]
            return x

    closed = _Closed(matvec, b, "custom_linear_solve")
    outs = linear_solve_p.bind(*b_leaves, *closed.params, matvec=closed, n_b=len(b_leaves),
                               solve=inner, transpose_solve=transpose_solve,
                               symmetric=symmetric)  # fmt: skip
    x = optree.tree_unflatten(closed.in_tree, list(outs))
    return (x, aux_cell[0] if aux_cell else None) if has_aux else x


# --- custom_root -------------------------------------------------------------------------------


class _AuxTree:
    """Where the solve's aux structure is left for ``custom_root`` to rebuild it."""

    tree: Any = None


def _root_impl(*operands, f, solve, tangent_solve, n_x, has_aux, aux_avals, aux_tree):
    x0_leaves, params = operands[:n_x], operands[n_x:]
    x0 = optree.tree_unflatten(f.in_tree, list(x0_leaves))
    found = solve(f.tree_fn(params), x0)
    if has_aux:
        if not (isinstance(found, tuple) and len(found) == 2):
            raise TransformTypeError(
                "custom_root(..., has_aux=True): solve must return a pair (solution, aux)."
            )
        found, aux = found
        aux_tree.tree = optree.tree_structure(aux)
        return (*_leaves_like(found, x0, "custom_root: solve", "initial_guess"),
                *optree.tree_leaves(aux))  # fmt: skip
    return tuple(_leaves_like(found, x0, "custom_root: solve", "initial_guess"))


def _root_jvp(tangents, ans, primals, params):
    """``f(x, θ) = 0``: ``∂f/∂x dx = -∂f/∂θ dθ``, solved by ``tangent_solve`` as a
    ``custom_linear_solve`` (so reverse mode transposes it)."""
    n_x, f, tangent_solve = params["n_x"], params["f"], params["tangent_solve"]
    x, aux = list(ans[:n_x]), ans[n_x:]
    p = primals[n_x:]
    moving = [i for i, t in enumerate(tangents[n_x:]) if t is not None]
    tangent_aux = [np.zeros_like(a) for a in aux]
    if not moving:
        return (*(np.zeros_like(v) for v in x), *tangent_aux)

    def along(*chosen):
        full = list(p)
        for i, c in zip(moving, chosen):
            full[i] = c
        return tuple(f.call(x, full))

    _, f_dot = jvp(along, tuple(p[i] for i in moving), tuple(tangents[n_x + i] for i in moving))
    x_tree = optree.tree_unflatten(f.in_tree, x)
    rhs = optree.tree_unflatten(f.in_tree, [-d for d in f_dot])

    def linearized(v):  # ∂f/∂x at the root, with the parameters held
        return jvp(f.tree_fn(p), (x_tree,), (v,))[1]

    def transposed_solve(vecmat, y):
        return tangent_solve(vecmat, y)

    dx = custom_linear_solve(linearized, rhs, lambda g, y: tangent_solve(g, y),
                             transpose_solve=transposed_solve)  # fmt: skip
    return (*optree.tree_leaves(dx), *tangent_aux)


root_p = Primitive(
    "custom_root",
    _root_impl,
    multiple_results=True,
    shape=lambda *avals, n_x, f, **params: (
        tuple(avals[:n_x]) + tuple(params["aux_avals"])
        if params.get("aux_avals")
        else tuple(avals[:n_x])
    ),
)
root_p.def_jvp(_root_jvp, packed=True)
root_p.def_taylor(jvp_taylor(root_p))


def _root_vjp(cts, ans, primals, params, argnums):
    """``ct_θ = -(∂f/∂θ)ᵀ y`` with ``(∂f/∂x)ᵀ y = ct_x``: the transposed system solved by
    ``tangent_solve`` on the transposed linearisation (a ``custom_linear_solve``, whose
    own derivatives follow); none for the initial guess, none through the aux."""
    n_x, f, tangent_solve = params["n_x"], params["f"], params["tangent_solve"]
    x, p = list(ans[:n_x]), primals[n_x:]
    x_tree = optree.tree_unflatten(f.in_tree, x)
    ct_x = [np.zeros_like(v) if c is None else c for c, v in zip(cts[:n_x], x)]

    def transposed(v):
        return vjp(f.tree_fn(p), x_tree)[1](v)[0]

    y = custom_linear_solve(transposed, optree.tree_unflatten(f.in_tree, ct_x),
                            lambda g, r: tangent_solve(g, r),
                            transpose_solve=lambda g, r: tangent_solve(g, r))  # fmt: skip
    wanted = [i - n_x for i in argnums if i >= n_x]
    grads = _pulled_back(f.call, x, p, wanted, optree.tree_leaves(y))
    return [grads[i - n_x] if i >= n_x else None for i in argnums]


def _pulled_back(call: Callable, at: Any, p: Sequence, wanted: list, ct: Sequence) -> dict:
    """The cotangents of the closed-over values ``p[i]`` (``i`` in ``wanted``) of
    ``call(at, p)``, pulled back from ``-ct``: the implicit function theorem's second
    step, after the transposed solve gave ``ct``."""
    if not wanted:
        return {}

    def along(*chosen):
        full = list(p)
        for i, c in zip(wanted, chosen):
            full[i] = c
        return tuple(call(at, full))

    _, pull = vjp(along, *(p[i] for i in wanted))
    return dict(zip(wanted, pull(tuple(-c for c in ct))))


root_p.def_vjp(_root_vjp, packed=True)
root_p.def_batch(_loop_batch(root_p))


def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False) -> Any:  # fmt: skip
    """The root of ``f`` found by ``solve(f, initial_guess)``, differentiated by the
    implicit function theorem (JAX's ``lax.custom_root``).

    ``solve`` is any root-finder (Newton's method with a sparse Jacobian, SciPy's
    ``fsolve``), whose iterations are never differentiated; ``tangent_solve(g, y)`` solves
    the linear system ``g(x) = y`` for ``g``, ``f`` linearised at the root (for a scalar,
    ``lambda g, y: y / g(1.0)``; for a vector, e.g. ``np.linalg.solve(jacobian(g)(y),
    y)``).  Derivatives reach every array ``f`` closes over (the parameters of the
    equation), none reach ``initial_guess``.  Reverse mode transposes the tangent solve
    (``tangent_solve`` is called with the transposed linearisation).  Composes with
    ``grad``, ``jvp``, ``vmap`` (example by example), ``jit`` (the solver runs at replay
    on concrete values) and ``custom_linear_solve``.  ``has_aux``: ``solve`` returns
    ``(solution, aux)``, and so does ``custom_root`` (aux carries no derivative).

    >>> import numpy as np, autodiff
    >>> def newton(f, x):
    ...     for _ in range(30):
    ...         x = x - f(x) / autodiff.grad(f)(x)
    ...     return x
    >>> def cube_root(a):  # the root of x**3 - a
    ...     return autodiff.custom_root(lambda x: x**3 - a, 1.0, newton,
    ...                                 lambda g, y: y / g(1.0))
    >>> round(float(cube_root(8.0)), 9), round(float(autodiff.grad(cube_root)(8.0)), 9)
    (2.0, 0.083333333)
    """
    check_callable(f, "custom_root (f)")
    check_callable(solve, "custom_root (solve)")
    check_callable(tangent_solve, "custom_root (tangent_solve)")
    check_flag(has_aux, "has_aux", "custom_root")
    x0_leaves, x0_tree = optree.tree_flatten(initial_guess)
    x0_leaves = [np.asarray(x, float) if isinstance(x, (int, float)) else x for x in x0_leaves]
    guess = optree.tree_unflatten(x0_tree, x0_leaves)
    closed = _Closed(f, guess, "custom_root")
    params: dict[str, Any] = dict(f=closed, solve=solve, tangent_solve=tangent_solve,
                                  n_x=len(x0_leaves), has_aux=has_aux)  # fmt: skip
    params["aux_avals"], params["aux_tree"] = None, _AuxTree()
    if has_aux and innermost_staging() is not None:  # staging needs the aux's shapes: from
        # one solve on the staged values (so under jit a solve with aux must be traceable)
        aux_leaves, params["aux_tree"].tree = optree.tree_flatten(
            solve(closed.tree_fn(closed.params), guess)[1]
        )
        params["aux_avals"] = tuple(aval_of(a) for a in aux_leaves)
    outs = root_p.bind(*x0_leaves, *closed.params, **params)
    x = optree.tree_unflatten(x0_tree, list(outs[: len(x0_leaves)]))
    if has_aux:
        aux = [stop_gradient(a) for a in outs[len(x0_leaves) :]]
        return x, optree.tree_unflatten(params["aux_tree"].tree, aux)
    return x
