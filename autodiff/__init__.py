"""autodiff: composable function transforms (grad, vjp, jvp, vmap) for NumPy code.

>>> import numpy as np
>>> from autodiff import grad, vmap
>>> per_example = vmap(grad(lambda w, x: np.sum(np.tanh(x @ w))), in_dims=(None, 0))
>>> per_example(np.ones(3), np.zeros((4, 3))).shape
(4, 3)
"""

from autodiff.core.loading import loading_package, on_first_use

with loading_package():  # (core/loading.py: why)
    from autodiff import debug, errors, numpy
    from autodiff.interpreters.forward import jvp
    from autodiff.interpreters.reverse import (
        grad,
        grad_and_value,
        no_grad,
        stop_gradient,
        value_and_grad,
        vjp,
    )

# Imported on first use (a module-level __getattr__): ``vmap``'s interpreter, the
# callbacks (``pure_callback``), the compiler behind ``jit`` and ``stages`` (its LLVM
# backend, disk cache and background compiler), the control flow built on it (``lax``,
# ``cond``, ``scan``, ...; the solvers), and the transforms built from the ones above
# (Jacobians, differential operators, sparsity, ``linearize``, ``explain``), Taylor mode
# (``jet``), ``checkpoint`` and its policies, and the custom rules (``custom_jvp``,
# ``custom_vjp``).  A program of ``grad`` and ``autodiff.numpy`` (autograd's examples)
# never needs them, and they are a third of the package's own import time
# (``docs/architecture.md``, "Layers").  ``from autodiff import jit`` works as before.
_LAZY = {
    "vmap": ("autodiff.interpreters.batching", "vmap"),
    "pure_callback": ("autodiff.debug.callbacks", "pure_callback"),
    "debug_nans": ("autodiff.debug.nans", "debug_nans"),
    "debug_rules": ("autodiff.debug.rule_checks", "debug_rules"),
    "jet": ("autodiff.interpreters.taylor", "jet"),
    "checkpoint": ("autodiff.transforms.checkpoint", "checkpoint"),
    "checkpoint_name": ("autodiff.transforms.checkpoint_policies", "checkpoint_name"),
    "checkpoint_policies": ("autodiff.transforms.checkpoint_policies", None),
    "custom_jvp": ("autodiff.transforms.custom", "custom_jvp"),
    "custom_vjp": ("autodiff.transforms.custom", "custom_vjp"),
    "lax": ("autodiff.lax", None),
    "stages": ("autodiff.stages", None),
    "jit": ("autodiff.compiler.jit", "jit"),
    "make_graph": ("autodiff.compiler.jit", "make_graph"),
    "cond": ("autodiff.control.cond", "cond"),
    "switch": ("autodiff.control.cond", "switch"),
    "fori_loop": ("autodiff.control.fori_loop", "fori_loop"),
    "scan": ("autodiff.control.scan", "scan"),
    "while_loop": ("autodiff.control.while_loop", "while_loop"),
    "custom_linear_solve": ("autodiff.transforms.solvers", "custom_linear_solve"),
    "custom_root": ("autodiff.transforms.solvers", "custom_root"),
    "explain": ("autodiff.interpreters.explain", "explain"),
    **{name: ("autodiff.transforms.differential", name) for name in (
        "biharmonic", "differential_operator", "divergence", "hessian_diag", "hvp",
        "laplacian")},
    **{name: ("autodiff.transforms.jacobians", name) for name in (
        "hessian", "jacfwd", "jacobian", "jacrev")},
    "linearize": ("autodiff.transforms.linearize", "linearize"),
    **{name: ("autodiff.transforms.sparsity", name) for name in (
        "SparseMatrix", "SparsityPattern", "hessian_sparsity", "jacobian_sparsity")},
}  # fmt: skip


__getattr__, __dir__ = on_first_use(globals(), _LAZY)


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
