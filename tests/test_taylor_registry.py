"""Every differentiable sample of ``tests/registry`` under Taylor mode.

For each sample, ``jet`` of orders 1, 2 and 3 along a random path through its
differentiable arguments, ``x(t) = x0 + x1 t + x2 t^2/2 + x3 t^3/6``, against the
derivatives of ``f(x(t))`` at ``t = 0`` by nested ``jvp`` (forward mode, itself checked
against finite differences in ``test_primitives.py``): every coefficient of every
output.  Every primitive has a Taylor rule of its own or one its family declares, so
Taylor mode's warning for a primitive without one (an ``AutodiffWarning``: an error in
the suite) fails the test.
"""

import math

import numpy as np
import optree
import pytest

from autodiff import jet, jvp
from tests.test_primitives import _cases, _diff_function, _random_like, _rng

ORDER = 3


def _flat(f):
    return lambda *args: tuple(optree.tree_leaves(f(*args)))


def _nested_jvp(f, args, series):
    """f(x(t)) and its first ORDER derivatives at t = 0, by nested forward mode."""

    def g(t):
        xs = [a + sum(s[k] * (t ** (k + 1) / math.factorial(k + 1)) for k in range(ORDER))
              for a, s in zip(args, series)]  # fmt: skip
        return f(*xs)

    def derivative(h):
        return lambda t: jvp(h, (t,), (np.ones(()),))[1]

    derivatives, h = [], g
    for _ in range(ORDER):
        h = derivative(h)
        derivatives.append(h(np.zeros(())))
    return g(np.zeros(())), derivatives


@pytest.mark.parametrize(("op", "sample", "lib"), _cases("taylor", differentiable=True))
def test_jet_against_nested_jvp(op, sample, lib, request):
    f, args = _diff_function(op, sample, lib)
    f = _flat(f)
    rng = _rng(request)
    series = [[_random_like(a, rng) for _ in range(ORDER)] for a in args]
    out = f(*args)
    _, want = _nested_jvp(f, args, series)
    single = any(np.asarray(a).dtype in (np.float32, np.complex64) for a in args)
    rtol = sample.rtol or (2e-3 if single else 1e-7)
    for order in (1, 2, 3):
        primals, got = jet(f, args, [s[:order] for s in series])
        for n, (o, p, coefficients) in enumerate(zip(out, primals, got, strict=True)):
            np.testing.assert_allclose(p, o, rtol=rtol, err_msg=f"output {n}: primal")
            if np.asarray(o).dtype.kind not in "fc":
                continue
            assert len(coefficients) == order
            for k in range(order):
                w = np.asarray(want[k][n])
                c = np.asarray(coefficients[k])
                assert c.shape == w.shape and c.dtype == np.asarray(o).dtype, (n, k)
                scale = np.max(np.abs(w[np.isfinite(w)]), initial=0.0)
                np.testing.assert_allclose(
                    c, w, rtol=rtol, atol=rtol * scale + 1e-12, equal_nan=True,
                    err_msg=f"jet of order {order}: output {n}, coefficient {k + 1}",
                )  # fmt: skip
