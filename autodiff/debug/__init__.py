"""See README.md in this folder.  ``autodiff.debug.callback`` and ``autodiff.debug.print``
(JAX's ``jax.debug``) are here, loaded with ``callbacks.py`` when first named: a program
that never calls back never imports it (``autodiff/__init__.py``'s ``_LAZY``)."""

from autodiff.core.loading import on_first_use

__all__ = ["callback", "print", "pure_callback"]

__getattr__, __dir__ = on_first_use(
    globals(), {name: ("autodiff.debug.callbacks", name) for name in __all__}
)
