"""autodiff: composable function transforms (grad, vjp, jvp, vmap) for NumPy code.

>>> import numpy as np
>>> from autodiff import grad, vmap
>>> per_example = vmap(grad(lambda w, x: np.sum(np.tanh(x @ w))), in_dims=(None, 0))
>>> per_example(np.ones(3), np.zeros((4, 3))).shape
(4, 3)
"""

from autodiff import debug, errors, lax, numpy, stages
from autodiff.compiler.jit import jit, make_graph
from autodiff.control.cond import cond, switch
from autodiff.control.fori_loop import fori_loop
from autodiff.control.scan import scan
from autodiff.control.while_loop import while_loop
from autodiff.debug.callbacks import pure_callback
from autodiff.debug.nans import debug_nans
from autodiff.debug.rule_checks import debug_rules
from autodiff.interpreters.batching import vmap
from autodiff.interpreters.explain import explain
from autodiff.interpreters.forward import jvp
from autodiff.interpreters.reverse import (
    grad,
    grad_and_value,
    no_grad,
    stop_gradient,
    value_and_grad,
    vjp,
)
from autodiff.interpreters.taylor import jet
from autodiff.transforms import checkpoint_policies
from autodiff.transforms.checkpoint import checkpoint
from autodiff.transforms.checkpoint_policies import checkpoint_name
from autodiff.transforms.custom import custom_jvp, custom_vjp
from autodiff.transforms.differential import (
    biharmonic,
    differential_operator,
    divergence,
    hessian_diag,
    hvp,
    laplacian,
)
from autodiff.transforms.jacobians import hessian, jacfwd, jacobian, jacrev
from autodiff.transforms.linearize import linearize
from autodiff.transforms.solvers import custom_linear_solve, custom_root
from autodiff.transforms.sparsity import (
    SparseMatrix,
    SparsityPattern,
    hessian_sparsity,
    jacobian_sparsity,
)

__all__ = [
    "SparseMatrix",
    "SparsityPattern",
    "biharmonic",
    "checkpoint",
    "checkpoint_name",
    "checkpoint_policies",
    "cond",
    "custom_jvp",
    "custom_linear_solve",
    "custom_root",
    "custom_vjp",
    "debug",
    "debug_nans",
    "debug_rules",
    "differential_operator",
    "divergence",
    "errors",
    "explain",
    "fori_loop",
    "grad",
    "grad_and_value",
    "hessian",
    "hessian_diag",
    "hessian_sparsity",
    "hvp",
    "jacfwd",
    "jacobian",
    "jacobian_sparsity",
    "jacrev",
    "jet",
    "jit",
    "jvp",
    "laplacian",
    "lax",
    "linearize",
    "make_graph",
    "no_grad",
    "numpy",
    "pure_callback",
    "scan",
    "stages",
    "stop_gradient",
    "switch",
    "value_and_grad",
    "vjp",
    "vmap",
    "while_loop",
]
__version__ = "0.1.0"
