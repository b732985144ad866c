"""Questions about dtypes, answered for traced values: ``result_type``, ``can_cast``,
``iscomplexobj``, ``isrealobj``, ``common_type``, and the elementwise ``iscomplex`` and
``isreal``.

A traced value stands for an array of its dtype, so the answers are NumPy's for an
array of that dtype; nothing here reads a value (``iscomplex`` and ``isreal`` compare
the imaginary part, a non-differentiable primitive).  Array-API-aware libraries ask
these before they compute (SciPy's ``logsumexp`` starts with ``result_type``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autodiff.core.arrays import dtype_of
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules.compositions import scalar_if_0d

__all__ = [
    "can_cast", "common_type", "iscomplex", "iscomplexobj", "isreal", "isrealobj",
    "result_type",
]  # fmt: skip


def _as_dtype_operand(x: Any) -> Any:
    """A tracer's dtype (an array of it promotes like its dtype under NEP 50); anything
    else (Python scalars, arrays, dtypes) as it is."""
    return dtype_of(x) if isinstance(x, Tracer) else x


@register_numpy(np.result_type)
def result_type(*arrays_and_dtypes):
    """Like numpy.result_type; traced values count as arrays of their dtype.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.result_type(np.zeros(2, np.float32), 1.0)
    dtype('float32')
    """
    return np.result_type(*map(_as_dtype_operand, arrays_and_dtypes))


@register_numpy(np.can_cast)
def can_cast(from_, to, casting="safe"):
    """Like numpy.can_cast; a traced ``from_`` counts as its dtype.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.can_cast(np.zeros(2, np.float32), np.float64)
    True
    """
    return np.can_cast(_as_dtype_operand(from_), to, casting)


@register_numpy(np.iscomplexobj)
def iscomplexobj(x):
    """Like numpy.iscomplexobj: whether ``x`` has a complex dtype.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.iscomplexobj(np.ones(2) * 1j)
    True
    """
    return dtype_of(x).kind == "c" if hasattr(x, "dtype") else np.iscomplexobj(x)


@register_numpy(np.isrealobj)
def isrealobj(x):
    """Like numpy.isrealobj: whether ``x`` does not have a complex dtype.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.isrealobj(np.ones(2))
    True
    """
    return not iscomplexobj(x)


@register_numpy(np.common_type)
def common_type(*arrays):
    """Like numpy.common_type; traced values count as arrays of their dtype.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.common_type(np.zeros(2, np.float32), np.zeros(2, np.int64))
    <class 'numpy.float64'>
    """
    return np.common_type(
        *(np.empty(0, dtype_of(a)) if isinstance(a, Tracer) else a for a in arrays)
    )


@register_numpy(np.iscomplex)
def iscomplex(x):
    """Like numpy.iscomplex: elementwise, whether the imaginary part is nonzero.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.iscomplex(np.array([1.0, 1.0 + 1j])).tolist()
    [False, True]
    """
    if dtype_of(x).kind != "c":  # (NumPy's answer for a 0-d x: a scalar, np.False_)
        return scalar_if_0d(_elt.astype(_cre.zeros_like(x), np.bool_))
    return _elt.not_equal(_elt.imag(x), 0)


@register_numpy(np.isreal)
def isreal(x):
    """Like numpy.isreal: elementwise, whether the imaginary part is zero.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.isreal(np.array([1.0, 1.0 + 1j])).tolist()
    [True, False]
    """
    return _elt.logical_not(iscomplex(x))
