"""Random programs (``tests/programs.py``) with ``jit`` inserted at random depths of
their transform stacks: the result equals the same stack without ``jit`` (which
``tests/test_random_programs.py`` checks against finite differences, loops, JAX and
torch.func); where ``jit`` is outermost, its whole contract holds
(``tests/jit_contract.py``: fresh results, signed zeros, the caller's writes).

The depths are drawn from the case's seed: ``jit`` around the program itself (depth
0), around any layer, and around the whole stack, each with probability 1/2 (at
least one).  Each program runs with the compiling tier off (the NumPy replay) and on
(``compiling(True)``: every region that lowers compiled, the kernels run from the
first calls).  The normal suite runs a fixed set of programs; the long run::

    AUTODIFF_RANDOM_PROGRAMS=1000 python -m pytest tests/test_jit_programs.py
"""

import os
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings

import autodiff
from autodiff.compiler.stages import default_backend
from autodiff.compiler.tiers import compiling
from tests import programs
from tests.jit_contract import check_calls

LONG = int(os.environ.get("AUTODIFF_RANDOM_PROGRAMS", "0"))


def jitted_stack(case, depths):
    """The case's stack with ``jit`` around the functions at ``depths``."""
    T, lib = programs.AutodiffTransforms, programs.AUTODIFF
    fn = case.program.function(lib, np.float64)
    if 0 in depths:
        fn = autodiff.jit(fn)
    for k, layer in enumerate(case.layers, start=1):
        fn = layer.wrap(T, fn, np.float64)
        if k in depths:
            fn = autodiff.jit(fn)
    return fn


def check_with_jit(case):
    rng = np.random.default_rng(case.seed)
    depths = {k for k in range(len(case.layers) + 1) if rng.random() < 0.5}
    depths = depths or {int(rng.integers(len(case.layers) + 1))}
    args = case.arguments()
    eager = case.functions(programs.AutodiffTransforms, programs.AUTODIFF, np.float64)[-1](*args)
    fn = jitted_stack(case, depths)
    if len(case.layers) in depths:  # jit outermost: its whole contract (tests/jit_contract.py)
        check_calls(fn, eager, args, rtol=1e-9)  # (a scalar where f answers one)
        return
    want, got = np.asarray(eager), np.asarray(fn(*args))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12,
                               err_msg=f"jit at depths {sorted(depths)}")  # fmt: skip
    again = np.asarray(fn(*args))  # the replay of the cached graphs
    np.testing.assert_array_equal(again, got)


TIERS = [
    "replay",
    pytest.param("compiled", marks=pytest.mark.skipif(not default_backend().available(),
                                                      reason=default_backend().why_not())),
]  # fmt: skip


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("top", ["forward", *programs.KINDS])
def test_jit_at_random_depths_changes_nothing(top, tier):
    @settings(
        max_examples=LONG or 15,
        derandomize=not LONG,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(case=programs.cases(top))
    def run(case):
        with compiling(tier == "compiled"):
            check_with_jit(case)

    if not LONG:
        run = seed(zlib.crc32(f"jit-{top}".encode()))(run)
    run()
