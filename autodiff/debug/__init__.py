"""See README.md in this folder.  ``autodiff.debug.callback`` and ``autodiff.debug.print``
(JAX's ``jax.debug``) are here, loaded with ``callbacks.py`` when first named: a program
that never calls back never imports it (``autodiff/__init__.py``'s ``_LAZY``)."""

import contextvars

from autodiff.core.loading import on_first_use

__all__ = ["callback", "print", "pure_callback"]

# The two switches every transform reads at each primitive, here so that the checks
# they turn on load with debug_nans() (nans.py) and debug_rules() (rule_checks.py): a
# program that never checks never imports those.
nans_switch: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "autodiff_debug_nans", default=False
)
rules_switch: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "autodiff_debug_rules", default=False
)


def checking_nans() -> bool:
    """Whether ``debug_nans()`` is on here."""
    return nans_switch.get()


__getattr__, __dir__ = on_first_use(
    globals(), {name: ("autodiff.debug.callbacks", name) for name in __all__}
)
