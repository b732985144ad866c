"""``autodiff.scipy.signal``: like ``scipy.signal``'s convolutions, differentiable and
batchable.

The primitive, ``convolve``, is declared with its rules in ``autodiff/rules/signal.py``;
its compositions (``correlate``, ``fftconvolve``) are here.
"""

from __future__ import annotations

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.signal")

import numpy as np  # noqa: E402
import scipy.signal as _reference  # noqa: E402

from autodiff.core.arrays import is_complex, shape_of  # noqa: E402
from autodiff.core.numpy_args import wrap_namespace as _wrap_namespace  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
from autodiff.rules.signal import *  # noqa: E402, F403
from autodiff.rules.signal import __all__ as _primitives  # noqa: E402
from autodiff.rules.signal import _check, _flipped, convolve, convolve_p  # noqa: E402

_compositions = ["correlate", "fftconvolve"]


def correlate(in1, in2, mode="full", method="auto"):
    """Like scipy.signal.correlate: ``z[k] = sum_n in1[n + k] * conj(in2[n])`` in N
    dimensions, every mode: ``convolve(in1, flip(conj(in2)))``.

    >>> import numpy as np, autodiff.scipy.signal as sig
    >>> sig.correlate(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0]), "valid").tolist()
    [3.0, 5.0]
    """
    _check(shape_of(in1), shape_of(in2), mode, "correlate")
    kernel = _elt.conj(in2) if is_complex(in2) else in2
    return convolve(in1, _flipped(kernel, 0), mode=mode, method=method)


def fftconvolve(in1, in2, mode="full", axes=None):
    """Like scipy.signal.fftconvolve: ``convolve`` over ``axes`` (default: all); along
    the other axes the arrays broadcast (equal sizes, or 1), as in SciPy.

    >>> import numpy as np, autodiff.scipy.signal as sig
    >>> x = np.array([[1.0, 2.0, 3.0], [1.0, 0.0, 0.0]])
    >>> sig.fftconvolve(x, np.array([[1.0, 1.0]]), axes=1).round(12).tolist()
    [[1.0, 3.0, 5.0, 3.0], [1.0, 1.0, 0.0, 0.0]]
    """
    shape1, shape2 = shape_of(in1), shape_of(in2)
    if axes is None:
        _check(shape1, shape2, mode, "fftconvolve")
        return convolve_p.bind(in1, in2, mode=mode, nbatch=0)
    n = len(shape1)
    if len(shape2) != n:
        _check(shape1, shape2, mode, "fftconvolve")  # raises: other numbers of dimensions
    conv = sorted({int(a) % n for a in ([axes] if isinstance(axes, int) else axes)})
    others = [i for i in range(n) if i not in conv]
    for i in others:
        if shape1[i] != shape2[i] and 1 not in (shape1[i], shape2[i]):
            raise ValueError(f"fftconvolve: incompatible shapes for in1 and in2 along axis {i}")
    _check(*(tuple(sh[i] for i in conv) for sh in (shape1, shape2)), mode, "fftconvolve")
    order = [*others, *conv]
    a, b = (_shp.transpose(x, order) for x in (in1, in2))
    out = convolve_p.bind(a, b, mode=mode, nbatch=len(others))
    return _shp.transpose(out, [int(i) for i in np.argsort(order)])


__all__ = [*_primitives, *_compositions]
_wrap_namespace(globals(), _reference)  # lists and tuples as SciPy takes them
