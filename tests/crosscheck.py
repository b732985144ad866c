"""JAX as a reference system for the derivative tests (not a test module).

``jax()`` is JAX with 64-bit floats, or the calling test skipped where it is not
installed; where ``AUTODIFF_REQUIRE_CROSSCHECKS`` names ``jax`` (``.ci/run`` does) a
missing JAX fails the test instead, as in ``tests/test_random_programs.py``.
"""

import importlib
import os

import pytest

REQUIRED = set(os.environ.get("AUTODIFF_REQUIRE_CROSSCHECKS", "").replace(",", " ").split())


def jax():
    if "jax" in REQUIRED:
        try:
            module = importlib.import_module("jax")
        except ImportError as e:
            pytest.fail(f"AUTODIFF_REQUIRE_CROSSCHECKS names jax, which does not import ({e})")
    else:
        module = pytest.importorskip(
            "jax", reason="jax is not installed (pip install -e '.[test]')"
        )
    module.config.update("jax_enable_x64", True)
    return module
