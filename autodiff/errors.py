"""The exceptions autodiff raises.

Every class subclasses :class:`AutodiffError` *and* the built-in exception a
caller would naturally catch (``TypeError``, ``ValueError``, ...), so both
``except AutodiffError`` and ``except ValueError`` work.

>>> import autodiff
>>> try:
...     autodiff.grad(lambda x: x * 2.0)(1)
... except autodiff.errors.TransformTypeError as e:
...     print("caught:", type(e).__name__)
caught: TransformTypeError
"""

from __future__ import annotations

__all__ = [
    "AutodiffError",
    "AutodiffWarning",
    "ConcretizationError",
    "ConvergenceError",
    "LeakedTracerError",
    "MissingRuleError",
    "NonFiniteError",
    "RuleError",
    "TransformTypeError",
    "TransformValueError",
    "UnsupportedFunctionError",
]


class AutodiffError(Exception):
    """Base class of every error raised by autodiff."""


class TransformTypeError(AutodiffError, TypeError):
    """A transform got the wrong kind of argument.

    For example a non-callable ``func``, a non-integer ``argnums``, an integer
    array where ``grad`` needs floats, or a ``has_aux`` function that did not
    return a pair.
    """


class TransformValueError(AutodiffError, ValueError):
    """A transform argument has the right kind but a wrong value.

    For example ``argnums`` out of range, inconsistent batch sizes under
    ``vmap``, a cotangent whose shape does not match the output, or a
    non-scalar output of ``grad``.
    """


class ConcretizationError(AutodiffError, TypeError):
    """A traced value was needed as a concrete Python value.

    Raised by ``bool()``, ``float()``, ``int()``, ``.item()`` and
    ``np.asarray()`` on values batched by ``vmap`` (their value differs across
    the batch), and by ``np.asarray()`` on any traced value (the conversion
    would silently drop derivatives).
    """


class ConvergenceError(AutodiffError, RuntimeError):
    """A solver did not converge where its solution was to be differentiated
    (``autodiff.scipy.optimize``, ``autodiff.scipy.sparse.linalg``): the implicit
    function theorem holds at a solution, not at wherever the iterations stopped."""


class LeakedTracerError(AutodiffError, RuntimeError):
    """A traced value was used after the transform that created it ended."""


class MissingRuleError(AutodiffError, NotImplementedError):
    """A primitive lacks the rule (VJP, JVP or batching) a transform needs."""


class RuleError(AutodiffError, ValueError):
    """A primitive's rule is malformed or returned the wrong structure or shape."""


class UnsupportedFunctionError(AutodiffError, TypeError):
    """A NumPy function, ufunc method or keyword has no autodiff rule."""


class NonFiniteError(AutodiffError, FloatingPointError):
    """Under ``debug_nans()``: a primitive, or one of its derivative rules, made a
    NaN or an infinity from finite inputs."""


class AutodiffWarning(UserWarning):
    """Something works but not as well as it could (e.g. a batching loop)."""
