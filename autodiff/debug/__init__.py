"""See README.md in this folder.  ``autodiff.debug.callback`` and ``autodiff.debug.print``
(JAX's ``jax.debug``) are here, loaded with ``callbacks.py`` when first named: a program
that never calls back never imports it (``autodiff/__init__.py``'s ``_LAZY``)."""

from typing import Any

from autodiff.core.loading import load

__all__ = ["callback", "print", "pure_callback"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(load("autodiff.debug.callbacks"), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
