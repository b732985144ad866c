"""Primitive families: each module declares its primitives, one block each
(implementation and every rule), and the public functions that bind them, which
``autodiff.numpy`` re-exports; ``compositions`` holds the few compositions the rules
call.  See ``README.md`` in this folder."""

from autodiff.rules import (  # noqa: F401  (importing registers the primitives)
    compositions,
    creation,
    elementwise,
    fft,
    indexing,
    linalg,
    polynomial,
    products,
    reductions,
    sets,
    shape,
    sorting,
    statistics,
)

try:
    import scipy.special  # noqa: F401
except ImportError:  # SciPy is optional; the autodiff.scipy modules say so when imported
    pass
else:
    # registers scipy.special's ufuncs, so that scipy.special.erf(traced) reaches the rules;
    # scipy_linalg and signal (whose SciPy functions cannot meet a traced value) are
    # imported with autodiff.scipy.linalg and .signal (scipy.signal takes a second to import)
    from autodiff.rules import special  # noqa: F401
