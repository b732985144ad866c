"""JAX's ``lax.dot`` and ``lax.dot_general`` (``autodiff.lax``), written with
``autodiff.numpy``'s ``dot`` and ``einsum``, whose rules they use; ``precision`` and
``preferred_element_type`` as ``autodiff.numpy.dot`` takes them."""

from __future__ import annotations

import string
from typing import Any

import autodiff.numpy as anp
from autodiff.core.arrays import ndim_of, shape_of

__all__ = ["dot", "dot_general"]


def dot(lhs, rhs, *, dimension_numbers: Any = None, precision: Any = None,
        preferred_element_type: Any = None):  # fmt: skip
    """Like jax.lax.dot: vector-vector, matrix-vector or matrix-matrix products (any other
    ranks need ``dimension_numbers``, as in ``dot_general``).

    >>> import numpy as np
    >>> dot(np.ones((2, 3)), np.arange(3.0), precision="highest")
    array([3., 3.])
    """
    if dimension_numbers is not None:
        return dot_general(lhs, rhs, dimension_numbers, precision=precision,
                           preferred_element_type=preferred_element_type)  # fmt: skip
    if ndim_of(lhs) not in (1, 2) or ndim_of(rhs) not in (1, 2):
        raise TypeError(f"lax.dot: operands of shapes {shape_of(lhs)} and {shape_of(rhs)}: "
                        f"only 1-D and 2-D operands without dimension_numbers (pass "
                        f"dimension_numbers=((lhs_contract, rhs_contract), (lhs_batch, "
                        f"rhs_batch)), or use autodiff.numpy.matmul).")  # fmt: skip
    return anp.dot(lhs, rhs, precision=precision, preferred_element_type=preferred_element_type)


def dot_general(lhs, rhs, dimension_numbers, precision: Any = None,
                preferred_element_type: Any = None):  # fmt: skip
    """Like jax.lax.dot_general: contract ``lhs`` and ``rhs`` over the paired axes
    ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``; the result's axes are the
    batch axes, then ``lhs``'s free axes, then ``rhs``'s.

    >>> import numpy as np
    >>> dot_general(np.ones((4, 2, 3)), np.ones((4, 3, 5)), (((2,), (1,)), ((0,), (0,)))).shape
    (4, 2, 5)
    """
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    if len(lhs_contract) != len(rhs_contract) or len(lhs_batch) != len(rhs_batch):
        raise TypeError(f"lax.dot_general: dimension_numbers={dimension_numbers!r} pairs "
                        f"unequal numbers of contracting or batch axes.")  # fmt: skip
    letters = iter(string.ascii_letters)
    lhs_names = [next(letters) for _ in range(ndim_of(lhs))]
    rhs_names = [next(letters) for _ in range(ndim_of(rhs))]
    for i, j in zip((*lhs_contract, *lhs_batch), (*rhs_contract, *rhs_batch)):
        if shape_of(lhs)[i] != shape_of(rhs)[j]:
            raise TypeError(f"lax.dot_general: axis {i} of lhs {shape_of(lhs)} and axis {j} of "
                            f"rhs {shape_of(rhs)} are paired but differ in length.")  # fmt: skip
        rhs_names[j] = lhs_names[i]
    paired_lhs, paired_rhs = {*lhs_contract, *lhs_batch}, {*rhs_contract, *rhs_batch}
    out = ([lhs_names[i] for i in lhs_batch]
           + [n for i, n in enumerate(lhs_names) if i not in paired_lhs]
           + [n for j, n in enumerate(rhs_names) if j not in paired_rhs])  # fmt: skip
    spec = f"{''.join(lhs_names)},{''.join(rhs_names)}->{''.join(out)}"
    result = anp.einsum(spec, lhs, rhs)
    return result if preferred_element_type is None else result.astype(preferred_element_type)
