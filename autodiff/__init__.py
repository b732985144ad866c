"""autodiff: composable function transforms (grad, vjp, jvp, vmap) for NumPy code.

>>> import numpy as np
>>> from autodiff import grad, vmap
>>> per_example = vmap(grad(lambda w, x: np.sum(np.tanh(x @ w))), in_dims=(None, 0))
>>> per_example(np.ones(3), np.zeros((4, 3))).shape
(4, 3)
"""

from autodiff import (
    _staged_control,  # noqa: F401  (staging's method for control flow)
    _staged_grad,  # noqa: F401  (reverse mode's methods for cond and scan)
    _staged_loops,  # noqa: F401  (vmap's and jvp's methods for loops under jit)
    errors,
    numpy,
)
from autodiff._batching import vmap
from autodiff._checkpoint import checkpoint
from autodiff._control import cond, switch, while_loop
from autodiff._custom import custom_jvp, custom_vjp
from autodiff._derived import hessian, jacfwd, jacrev, linearize
from autodiff._explain import explain
from autodiff._forward import jvp
from autodiff._jit import jit, make_graph
from autodiff._nans import debug_nans
from autodiff._reverse import grad, grad_and_value, no_grad, stop_gradient, value_and_grad, vjp
from autodiff._scan import fori_loop, scan
from autodiff._validate import debug_rules

__all__ = [
    "checkpoint",
    "cond",
    "custom_jvp",
    "custom_vjp",
    "debug_nans",
    "debug_rules",
    "errors",
    "explain",
    "fori_loop",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jit",
    "jvp",
    "linearize",
    "make_graph",
    "no_grad",
    "numpy",
    "scan",
    "stop_gradient",
    "switch",
    "value_and_grad",
    "vjp",
    "vmap",
    "while_loop",
]
__version__ = "0.1.0"
