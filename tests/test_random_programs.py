"""Differential testing with random programs (see ``tests/programs.py`` and
``docs/testing.md``).

Random compositions of NumPy functions under random stacks of up to three
transforms, whose outermost is the test's parameter, are checked layer by layer
against finite differences (derivatives) and a Python loop (``vmap``), float32
against float64, and the whole stack against JAX and torch.func when they are
installed.  JAX is part of the ``test`` extra; torch is in ``crosscheck``
(``pip install -e ".[test,crosscheck]"``).  Without them those tests skip,
except where ``AUTODIFF_REQUIRE_CROSSCHECKS`` names them (``.ci/run`` sets it
to ``jax``): there a missing reference system fails the test instead, so CI
cannot silently stop comparing.

The normal suite runs a fixed, small set of programs (derandomized: the same
ones on every run).  The long run draws new ones each time::

    AUTODIFF_RANDOM_PROGRAMS=1000 python -m pytest tests/test_random_programs.py

runs 1,000 programs per test (26 tests); ``--hypothesis-seed=N`` repeats a run.
"""

import importlib
import os
import zlib

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests import programs

LONG = int(os.environ.get("AUTODIFF_RANDOM_PROGRAMS", "0"))
# Reference systems whose cross-checks must run (fail, not skip, without them).
REQUIRED = set(os.environ.get("AUTODIFF_REQUIRE_CROSSCHECKS", "").replace(",", " ").split())


def _reference_system(module, extra):
    """``module`` imported, or the test skipped (failed, if it is required)."""
    if module in REQUIRED:
        try:
            return importlib.import_module(module)
        except ImportError as e:
            pytest.fail(
                f"AUTODIFF_REQUIRE_CROSSCHECKS names {module}, which does not import ({e}); "
                f"install it (pip install -e '.[{extra}]')"
            )
    return pytest.importorskip(
        module, reason=f"{module} is not installed (pip install -e '.[{extra}]')"
    )


def _run(name, top, check, examples):
    """``check`` on ``examples`` random cases whose outermost transform is ``top``."""

    @settings(
        max_examples=LONG or examples,
        derandomize=not LONG,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(case=programs.cases(top))
    def run(case):
        check(case)

    if not LONG:  # a different fixed sequence for each test
        run = seed(zlib.crc32(f"{name}-{top}".encode()))(run)
    run()


@pytest.mark.parametrize("top", list(programs.KINDS))
def test_against_finite_differences_and_loops(top):
    _run("fd", top, programs.check_case, examples=50)


@pytest.mark.parametrize("top", ["forward", *programs.KINDS])
def test_against_jax(top):
    _reference_system("jax", "test")
    transforms, lib = programs.JaxTransforms(), programs.jax_lib()
    _run("jax", top, lambda case: programs.compare_with(case, transforms, lib), examples=12)


@pytest.mark.parametrize("top", ["forward", *programs.KINDS])
def test_against_torch_func(top):
    _reference_system("torch", "crosscheck")
    transforms, lib = programs.TorchTransforms(), programs.TorchLib()
    _run("torch", top, lambda case: programs.compare_with(case, transforms, lib), examples=12)
