"""See README.md in this folder.  ``autodiff.debug.callback`` and ``autodiff.debug.print``
(JAX's ``jax.debug``) are here."""

from autodiff.debug.callbacks import callback, print

__all__ = ["callback", "print"]
