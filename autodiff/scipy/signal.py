"""``autodiff.scipy.signal``: like ``scipy.signal``'s convolutions, differentiable and
batchable.

The primitive, ``convolve``, is declared with its rules in ``autodiff/rules/signal.py``;
its compositions (``correlate``, ``fftconvolve``) are here, and HIPS autograd's spelling
of ``convolve`` (``axes=``, ``dot_axes=``: a convolutional layer), which is one
``conv_general_dilated`` (``autodiff/rules/convolution.py``).
"""

from __future__ import annotations

import math
import operator

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.signal")

import numpy as np  # noqa: E402
import scipy.signal as _reference  # noqa: E402

from autodiff.core.arrays import is_complex, shape_of  # noqa: E402
from autodiff.core.numpy_args import wrap_namespace as _wrap_namespace  # noqa: E402
from autodiff.rules import compositions as _comp  # noqa: E402
from autodiff.rules import convolution as _conv  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
from autodiff.rules.signal import *  # noqa: E402, F403
from autodiff.rules.signal import __all__ as _primitives  # noqa: E402
from autodiff.rules.signal import _check, _flipped, convolve_p  # noqa: E402
from autodiff.rules.signal import convolve as _convolve  # noqa: E402

_compositions = ["convolve", "correlate", "fftconvolve"]  # convolve: autograd's form too


def convolve(  # type: ignore[no-redef]
    in1, in2, mode="full", method="auto", *, axes=None, dot_axes=None
):
    """Like scipy.signal.convolve: the N-dimensional convolution of two arrays of the same
    number of dimensions, in ``mode`` ``'full'``, ``'same'`` (the shape of ``in1``) or
    ``'valid'``.  Differentiable in both; ``method`` is accepted and SciPy's ``'auto'``
    choice is used.

    Also HIPS autograd's form, ``convolve(A, B, axes=([...], [...]), dot_axes=([...],
    [...]), mode=...)`` (its third and fourth positional arguments are ``axes`` and
    ``dot_axes``): ``A`` and ``B`` convolved along the paired ``axes``, summed along the
    paired ``dot_axes``, and every other axis kept, as an outer product; the result's axes
    are ``A``'s others, ``B``'s others, then the convolved ones (a convolutional layer:
    ``convolve(images, kernels, axes=([2, 3], [2, 3]), dot_axes=([1], [0]))``).

    >>> import numpy as np, autodiff, autodiff.scipy.signal as sig
    >>> sig.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5])).tolist()
    [0.0, 1.0, 2.5, 4.0, 1.5]
    >>> autodiff.grad(lambda k: sig.convolve(np.ones(3), k, "valid").sum())(np.ones(2)).tolist()
    [2.0, 2.0]
    >>> images, kernels = np.ones((5, 3, 8, 8)), np.ones((3, 4, 2, 2))
    >>> sig.convolve(images, kernels, axes=([2, 3], [2, 3]), dot_axes=([1], [0]),
    ...              mode="valid").shape
    (5, 4, 7, 7)
    """
    if not isinstance(mode, str) or not isinstance(method, str):  # autograd's positions
        axes = mode if not isinstance(mode, str) else axes
        dot_axes = method if not isinstance(method, str) else dot_axes
        mode, method = "full", "auto"
    if axes is not None or dot_axes is not None:
        return _convolve_along(in1, in2, axes, dot_axes, mode)
    return _convolve(in1, in2, mode=mode, method=method)


def _axis_list(axes, ndim: int, what: str) -> list[int]:
    try:
        out = [operator.index(a) % ndim for a in axes]
    except (TypeError, ZeroDivisionError):
        raise ValueError(f"convolve: {what} must be two sequences of axes (one per array), "
                         f"got {axes!r}") from None  # fmt: skip
    if len(set(out)) != len(out):
        raise ValueError(f"convolve: {what} repeats an axis: {axes!r}")
    return out


def _convolve_along(a, b, axes, dot_axes, mode: str):
    """HIPS autograd's ``convolve(A, B, axes, dot_axes, mode)``, as one
    ``conv_general_dilated``: ``A``'s other axes are its batch, ``B``'s its output
    features, the dot axes the input features, and ``B`` flipped (a convolution)."""
    if mode not in ("full", "same", "valid"):
        raise ValueError(
            f"convolve: acceptable mode flags are 'valid', 'same', or 'full', not {mode!r}"
        )
    shape_a, shape_b = shape_of(a), shape_of(b)
    if axes is None:
        if len(shape_a) != len(shape_b):
            raise ValueError(f"convolve: without axes, A and B must have the same number of "
                             f"axes, got shapes {shape_a} and {shape_b}")  # fmt: skip
        axes = (range(len(shape_a)), range(len(shape_b)))
    dot_axes = ((), ()) if dot_axes is None else dot_axes
    if len(axes) != 2 or len(dot_axes) != 2:
        raise ValueError("convolve: axes and dot_axes are pairs: (A's axes, B's axes)")
    conv_a, conv_b = (_axis_list(x, len(s), "axes") for x, s in zip(axes, (shape_a, shape_b)))
    dot_a, dot_b = (_axis_list(x, len(s), "dot_axes") for x, s in zip(dot_axes, (shape_a, shape_b)))
    if len(conv_a) != len(conv_b) or [shape_a[i] for i in dot_a] != [shape_b[i] for i in dot_b]:
        raise ValueError(f"convolve: axes must pair as many axes of A as of B, and dot_axes "
                         f"axes of equal sizes (shapes {shape_a}, {shape_b}, axes {axes}, "
                         f"dot_axes {dot_axes})")  # fmt: skip
    if set(conv_a) & set(dot_a) or set(conv_b) & set(dot_b):
        raise ValueError(f"convolve: an axis cannot be both convolved and summed ({axes}, "
                         f"{dot_axes})")  # fmt: skip
    _check(tuple(shape_a[i] for i in conv_a), tuple(shape_b[i] for i in conv_b), mode, "convolve")
    rest_a = [i for i in range(len(shape_a)) if i not in conv_a and i not in dot_a]
    rest_b = [i for i in range(len(shape_b)) if i not in conv_b and i not in dot_b]

    def operand(x, shape, rest, dot, conv):
        lead = (math.prod(shape[i] for i in rest), math.prod(shape[i] for i in dot))
        return _shp.reshape(_shp.transpose(x, rest + dot + conv),
                            lead + tuple(shape[i] for i in conv))  # fmt: skip

    lhs = operand(a, shape_a, rest_a, dot_a, conv_a)
    rhs = operand(b, shape_b, rest_b, dot_b, conv_b)
    rhs = _comp.flip(rhs, tuple(range(2, 2 + len(conv_b))))  # a convolution, not a correlation
    pads = []
    for na, nb in zip((shape_a[i] for i in conv_a), (shape_b[i] for i in conv_b)):
        if mode == "full":
            pads.append((nb - 1, nb - 1))
        elif mode == "same":  # centred as SciPy centres it, on A's length
            pads.append((nb - 1 - (nb - 1) // 2, (nb - 1) // 2))
        else:  # valid: |na - nb| + 1 positions, whichever is longer
            pads.append((nb - min(na, nb), nb - min(na, nb)))
    out = _conv.conv_general_dilated(lhs, rhs, (1,) * len(conv_a), pads)
    kept = tuple(shape_a[i] for i in rest_a) + tuple(shape_b[i] for i in rest_b)
    return _shp.reshape(out, kept + shape_of(out)[2:])


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


__all__ = [*(n for n in _primitives if n != "convolve"), *_compositions]
_wrap_namespace(globals(), _reference)  # lists and tuples as SciPy takes them
