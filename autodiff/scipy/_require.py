"""SciPy is an optional dependency: the ``autodiff.scipy`` modules say how to get it."""

from __future__ import annotations


def require_scipy(module: str) -> None:
    """Raise ImportError naming the ``scipy`` extra if SciPy cannot be imported."""
    try:  # the check itself: SciPy is optional
        import scipy  # noqa: F401
    except ImportError as error:
        raise ImportError(
            f"{module} needs SciPy, which is not installed: "
            "pip install 'autodiff[scipy]' (or pip install scipy)"
        ) from error
