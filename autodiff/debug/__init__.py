"""See README.md in this folder.  ``autodiff.debug.callback`` and ``autodiff.debug.print``
(JAX's ``jax.debug``) are here."""

from autodiff.debug.callbacks import callback, print, pure_callback

__all__ = ["callback", "print", "pure_callback"]
