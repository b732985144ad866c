"""Jacobians built from the other transforms: jacrev, jacfwd, jacobian, hessian.

``jacrev`` maps ``vjp_fn`` over the standard basis of the outputs and
``jacfwd`` maps ``jvp`` over the standard basis of the inputs, each with one
``vmap`` (no Python loop over basis vectors).  The Jacobian's structure is
output-tree of input-tree, as in torch.func: each output leaf of shape ``S``
becomes the input structure with leaves of shape ``S + input_leaf.shape``.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.args import (
    as_input_array,
    at_positions,
    check_argnums_type,
    check_callable,
    check_chunk_size,
    check_flag,
    check_no_none,
    check_randomness,
    leaf_paths,
    normalize_argnums,
    split_aux,
)
from autodiff.core.arrays import eye_like
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.batching import vmap
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import _vjp
from autodiff.rules import compositions as _comp
from autodiff.rules import shape as _shp

__all__ = ["hessian", "jacfwd", "jacobian", "jacrev"]


def _no_complex(leaves: list, transform: str, what: str) -> None:
    for leaf in leaves:
        dtype = getattr(leaf, "dtype", None)
        if np.dtype(dtype if dtype is not None else np.result_type(leaf)).kind == "c":
            raise TransformTypeError(
                f"{transform}: complex {what} are not supported (a complex Jacobian needs "
                f"a choice of convention); use vjp or jvp directly."
            )


def _basis(leaves: list) -> list:
    """The standard basis of the space of ``leaves``, as one batch per leaf."""
    sizes = [math.prod(np.shape(leaf)) for leaf in leaves]
    total = sum(sizes)
    dtype = np.result_type(*[leaf.dtype for leaf in leaves])
    eye = eye_like(total, dtype, leaves[0])  # of the leaves' array library (CuPy, Dask...)
    bounds = np.cumsum([0, *sizes]).tolist()
    return [
        eye[:, lo:hi].reshape((total, *np.shape(leaf)))
        for leaf, lo, hi in zip(leaves, bounds[:-1], bounds[1:])
    ]


def _split_rows(stacked: Any, sizes: list) -> list:
    """``stacked`` (basis axis first) cut into one block of rows per output leaf."""
    bounds = np.cumsum([0, *sizes]).tolist()
    return [stacked[lo:hi] for lo, hi in itertools.pairwise(bounds)]


def _arg_tree(args: tuple, argnums: Any) -> Any:
    """The structure gradients have: one argument's, or a tuple of them."""
    return args[0] if isinstance(argnums, (int, np.integer)) else args


def _check_made(func: Any, argnums: Any, has_aux: Any, who: str) -> None:
    """The checks every Jacobian transform makes when it is made."""
    check_callable(func, who)
    check_argnums_type(argnums, who)
    check_flag(has_aux, "has_aux", who)


def _inputs(args: tuple, argnums: Any, who: str) -> tuple[tuple, list, Any]:
    """The positions of the differentiated arguments, their leaves as arrays (Python
    floats made arrays) and their structure; each checked, named for ``who``."""
    positions = normalize_argnums(argnums, len(args), who)
    chosen = tuple(args[i] for i in positions)
    check_no_none(chosen, who, positions)
    leaves, tree = trees.flatten(chosen)
    leaves = [as_input_array(x, what, who, differentiable=True)
              for x, what in zip(leaves, leaf_paths(chosen, positions))]  # fmt: skip
    _no_complex(leaves, who, "inputs")
    return positions, leaves, tree


def jacrev(func: Callable, argnums: int | tuple[int, ...] = 0, *, has_aux: bool = False,
           chunk_size: int | None = None) -> Callable:  # fmt: skip
    """The Jacobian of ``func`` by reverse mode: ``vmap`` of ``vjp_fn`` over the
    standard basis of the outputs (``chunk_size`` rows at a time).

    Returns output-tree of input-tree: an output leaf of shape ``S`` gives,
    for each input leaf of shape ``T``, an array of shape ``S + T``; with a
    tuple ``argnums``, a tuple over the arguments.  ``has_aux=True``: returns
    ``(jacobian, aux)``.

    >>> import numpy as np
    >>> from autodiff import jacrev
    >>> jacrev(np.sin)(np.zeros(2))
    array([[1., 0.],
           [0., 1.]])
    """
    _check_made(func, argnums, has_aux, "jacrev")
    check_chunk_size(chunk_size, "jacrev")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        positions = normalize_argnums(argnums, len(args), "jacrev")
        chosen = tuple(args[i] for i in positions)
        selected = at_positions(func, args, positions, kwargs)
        out, vjp_fn, aux = _vjp(selected, chosen, has_aux, "jacrev", positions)
        return _by_reverse_mode(out, vjp_fn, aux, chosen, argnums, has_aux, chunk_size, "jacrev")

    return wrapper


def _by_reverse_mode(out: Any, vjp_fn: Callable, aux: Any, chosen: tuple, argnums: Any,
                     has_aux: bool, chunk_size: int | None, who: str) -> Any:  # fmt: skip
    """The Jacobian from a recorded ``vjp_fn``: ``vmap`` of it over the outputs' basis."""
    out_leaves, out_tree = trees.flatten(out)
    if not out_leaves:  # no output arrays (e.g. None): nothing to differentiate
        result = trees.unflatten(out_tree, [])
        return (result, aux) if has_aux else result
    _no_complex(out_leaves, who, "outputs")
    _no_complex(trees.leaves(chosen), who, "inputs")
    sizes = [math.prod(np.shape(leaf)) for leaf in out_leaves]
    if sizes == [1]:  # one output with one element: one vjp, no vmap level
        vjp_fn._consume = True  # type: ignore[attr-defined]
        cts = vjp_fn(trees.unflatten(out_tree, [np.ones_like(out_leaves[0])]))
        in_leaves, in_tree = trees.flatten(cts)
        per_input = [[ct] for ct in in_leaves]  # the one row of each input
        in_shapes = [np.shape(ct) for ct in in_leaves]
    else:
        basis = trees.unflatten(out_tree, _basis(out_leaves))
        cts = vmap(vjp_fn, chunk_size=chunk_size)(basis)  # one batch for all rows
        in_leaves, in_tree = trees.flatten(cts)
        per_input = [_split_rows(leaf, sizes) for leaf in in_leaves]
        in_shapes = [np.shape(leaf)[1:] for leaf in in_leaves]
    jac = []
    for k, out_leaf in enumerate(out_leaves):
        blocks = [
            _shp.reshape(rows[k], np.shape(out_leaf) + shape)
            for rows, shape in zip(per_input, in_shapes)
        ]
        jac.append(_arg_tree(trees.unflatten(in_tree, blocks), argnums))
    result = trees.unflatten(out_tree, jac)
    return (result, aux) if has_aux else result


def jacfwd(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:  # fmt: skip
    """The Jacobian of ``func`` by forward mode: ``vmap`` of ``jvp`` over the
    standard basis of the inputs.  Same structure as :func:`jacrev`;
    ``randomness`` is passed to that ``vmap``.

    >>> import numpy as np
    >>> from autodiff import jacfwd
    >>> jacfwd(lambda x: x**2)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    """
    _check_made(func, argnums, has_aux, "jacfwd")
    check_randomness(randomness, "jacfwd")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        positions, in_leaves, in_tree = _inputs(args, argnums, "jacfwd")
        selected = at_positions(func, args, positions, kwargs)
        if not in_leaves:
            raise TransformValueError(
                f"jacfwd: the arguments at argnums={argnums!r} hold no arrays, so there is "
                f"nothing to differentiate; pass arrays there (or use jacrev)."
            )
        chosen = trees.unflatten(in_tree, in_leaves)

        def checked(*chosen_args):  # has_aux errors name jacfwd, not the jvp inside it
            return split_aux(selected(*chosen_args), "jacfwd")

        def push(*basis_leaves):
            tangents = trees.unflatten(in_tree, list(basis_leaves))
            return jvp(checked if has_aux else selected, chosen, tangents, has_aux=has_aux)[1:]

        aux_dims = (0, None) if has_aux else (0,)
        pushed = vmap(push, out_dims=aux_dims, randomness=randomness)(*_basis(in_leaves))
        out_tangents, aux = (pushed[0], pushed[1]) if has_aux else (pushed[0], None)
        out_leaves, out_tree = trees.flatten(out_tangents)
        _no_complex(out_leaves, "jacfwd", "outputs")
        sizes = [math.prod(np.shape(leaf)) for leaf in in_leaves]
        jac = []
        for stacked in out_leaves:  # (n_inputs, *out_shape)
            out_shape = np.shape(stacked)[1:]
            blocks = []
            for rows, leaf in zip(_split_rows(stacked, sizes), in_leaves):
                moved = _comp.moveaxis(rows, 0, -1)  # input elements last
                blocks.append(_shp.reshape(moved, out_shape + np.shape(leaf)))
            jac.append(_arg_tree(trees.unflatten(in_tree, blocks), argnums))
        result = trees.unflatten(out_tree, jac)
        return (result, aux) if has_aux else result

    return wrapper


def hessian(func: Callable, argnums: int | tuple[int, ...] = 0, *,
            sparsity: Any = None) -> Callable:  # fmt: skip
    """The Hessian of a scalar ``func``: ``jacfwd(jacrev(func, argnums), argnums)``.

    ``sparsity="auto"`` reads which inputs interact from the program
    (:func:`~autodiff.hessian_sparsity`), star-colours that pattern and computes one
    Hessian-vector product per colour, all in one ``vmap``; a pattern may be given
    instead (a ``SparsityPattern``, a SciPy sparse array, a dense boolean array).  The
    result is then a ``scipy.sparse.csr_array`` over the differentiated inputs'
    elements (raveled, concatenated), or a ``SparseMatrix`` without SciPy.

    >>> import numpy as np
    >>> from autodiff import hessian
    >>> hessian(lambda x: (x**3).sum())(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    >>> h = hessian(lambda x: (x[1:] * x[:-1] ** 2).sum(), sparsity="auto")(np.ones(5))
    >>> h.shape, h.nnz  # tridiagonal (x[4] enters linearly), from 3 Hessian-vector products
    ((5, 5), 12)
    """
    _check_made(func, argnums, False, "hessian")
    if sparsity is not None:
        # (the sparse machinery, with jit's staging, loads when a sparsity is asked for)
        from autodiff.transforms.sparse_jacobians import sparse_hessian

        return sparse_hessian(func, argnums, sparsity)
    inner = jacfwd(jacrev(func, argnums), argnums)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        _inputs(args, argnums, "hessian")  # the checks jacfwd and jacrev make, named for hessian
        return inner(*args, **kwargs)

    return wrapper


_MODES = {"auto": "auto", "forward": "forward", "fwd": "forward", "reverse": "reverse",
          "rev": "reverse"}  # fmt: skip


def jacobian(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
             mode: str = "auto", chunk_size: int | None = None,
             sparsity: Any = None) -> Callable:  # fmt: skip
    """The Jacobian of ``func``, by whichever mode needs fewer passes.

    Reverse mode (:func:`jacrev`) costs one VJP per output element, forward mode
    (:func:`jacfwd`) one JVP per element of the differentiated inputs.  With
    ``mode="auto"`` ``func`` runs once under reverse mode, which shows how many
    output elements there are; if there are no more than input elements that
    recording gives the Jacobian (nothing runs twice), else ``func`` runs again
    under forward mode.  ``mode="reverse"`` (or ``"rev"``) and ``mode="forward"``
    (``"fwd"``) force one.  The result is structured as :func:`jacrev`'s (output-tree of
    input-tree); ``has_aux=True`` returns ``(jacobian, aux)``; ``chunk_size`` is
    :func:`jacrev`'s (reverse mode only).  (``jax.jacobian`` is always reverse mode.)

    ``sparsity="auto"`` reads the Jacobian's pattern from the program
    (:func:`~autodiff.jacobian_sparsity`); a pattern may be given instead (a
    ``SparsityPattern``, a SciPy sparse array, a dense boolean array).  Columns that
    share no row are then coloured alike and pushed by one JVP per colour (or rows by
    one VJP per colour, whichever needs fewer colours; ``mode`` may force one), all in
    one ``vmap``, and the result is a ``scipy.sparse.csr_array`` whose rows are the
    outputs' elements and columns the differentiated inputs' elements (raveled and
    concatenated), or a ``SparseMatrix`` of index arrays without SciPy or under a
    transform.  Patterns and colourings are cached per input signature.

    >>> import numpy as np, autodiff.numpy as anp
    >>> from autodiff import jacobian
    >>> f = lambda x: anp.stack([x[0] * x[1], anp.sin(x[2])])  # 3 inputs, 2 outputs
    >>> jacobian(f)(np.array([1.0, 2.0, 0.0]))  # reverse mode: 2 VJPs
    array([[2., 1., 0.],
           [0., 0., 1.]])
    >>> g = lambda t: anp.stack([t, anp.sin(t), t**2])  # 1 input, 3 outputs
    >>> jacobian(g)(1.0)  # forward mode: 1 JVP
    array([1.        , 0.54030231, 2.        ])
    >>> laplacian = lambda u: anp.pad(u, 1)[2:] + anp.pad(u, 1)[:-2] - 2 * u
    >>> J = jacobian(laplacian, sparsity="auto")(np.zeros(6))  # 3 JVPs, not 6
    >>> J.toarray()[:3]
    array([[-2.,  1.,  0.,  0.,  0.,  0.],
           [ 1., -2.,  1.,  0.,  0.,  0.],
           [ 0.,  1., -2.,  1.,  0.,  0.]])
    """
    _check_made(func, argnums, has_aux, "jacobian")
    if mode not in _MODES:
        raise TransformValueError(
            f"jacobian: mode must be 'auto', 'forward' ('fwd') or 'reverse' ('rev'), got "
            f"{mode!r:.40}."
        )
    check_chunk_size(chunk_size, "jacobian")
    mode = _MODES[mode]
    if sparsity is not None:
        from autodiff.transforms.sparse_jacobians import sparse_jacobian

        return sparse_jacobian(func, argnums, has_aux, sparsity, mode)
    if mode == "forward":
        return jacfwd(func, argnums, has_aux)
    if mode == "reverse":
        return jacrev(func, argnums, has_aux=has_aux, chunk_size=chunk_size)
    forward = jacfwd(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        positions = normalize_argnums(argnums, len(args), "jacobian")
        chosen = tuple(args[i] for i in positions)
        selected = at_positions(func, args, positions, kwargs)
        out, vjp_fn, aux = _vjp(selected, chosen, has_aux, "jacobian", positions)
        n_out = sum(math.prod(np.shape(leaf)) for leaf in trees.leaves(out))
        n_in = sum(math.prod(np.shape(leaf)) for leaf in trees.leaves(chosen))
        if n_out <= n_in:
            return _by_reverse_mode(out, vjp_fn, aux, chosen, argnums, has_aux, chunk_size,
                                    "jacobian")  # fmt: skip
        return forward(*args, **kwargs)

    return wrapper
