"""Primitive families: each module declares its primitives, one block each
(implementation + VJP + JVP + batching rule), and the public functions that
``autodiff.numpy`` re-exports.  See ``README.md`` in this folder."""

from autodiff.rules import (  # noqa: F401  (importing registers the primitives)
    creation,
    dtypes,
    elementwise,
    fft,
    indexing,
    linalg,
    products,
    reductions,
    sets,
    shape,
    sorting,
    statistics,
)

try:
    import scipy.special  # noqa: F401
except ImportError:  # SciPy is optional; autodiff.scipy.special says so when imported
    pass
else:
    from autodiff.rules import special  # noqa: F401
