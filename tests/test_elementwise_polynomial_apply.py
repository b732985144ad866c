"""What the registry (tests/registry/) cannot say about the elementwise, polynomial,
convolution and function-applying functions.

* Forward references for the records without a plain NumPy call on traced values
  (``vectorize``, ``frompyfunc``) and for the cases the registry leaves out because they
  read values (complex ``real_if_close`` and ``poly``, ``polydiv``'s trimming), which the
  strict arrays of tests/test_backends.py refuse: NumPy (or SciPy) on plain arrays.
* The conventions at kinks and edges that ``tests/coverage.py``'s CONVENTIONS lists.
* Batching beyond the registry's single batched axis: nested vmaps over both operands.
* Errors that name what to write instead.

Sampling: the registry runs every in_dims combination of 0, -1 and None per argument
(at most three array arguments here, so at most 26); these tests add a few hand-picked
cases each rather than products of options, and the sizes sweep of convolve/correlate
runs on plain arrays only (milliseconds).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vjp, vmap
from autodiff.errors import ConcretizationError, TransformValueError, UnsupportedFunctionError
from autodiff.testing import check_grads, check_vmap
from tests.registry.apply import _moments

rng = np.random.default_rng(13)


def _close(got, want, rtol=1e-12, atol=1e-12):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# --- i0 and its derivative I1 -------------------------------------------------------------


def test_i0_derivatives_are_i1_and_its_derivative_across_both_branches_of_i1():
    special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.linspace(-45.0, 45.0, 901), [0.0, 19.999, 20.0, 20.001, 300.0]])
    g = vmap(grad(anp.i0))(x)
    np.testing.assert_allclose(g, special.i1(x), rtol=3e-15, atol=1e-300)
    gg = vmap(grad(grad(anp.i0)))(x)  # I1' = I0 - I1 / x, 1/2 at 0
    want = np.where(x == 0, 0.5, special.i0(x) - special.i1(x) / np.where(x == 0, 1, x))
    np.testing.assert_allclose(gg, want, rtol=1e-13)


def test_i1_keeps_float32_and_third_derivatives_agree_with_finite_differences():
    assert grad(anp.i0)(np.float32(2.0)).dtype == np.float32
    check_grads(anp.i0, (np.array([0.3, -1.7, 25.0]),), order=3, modes=("rev",))


def test_i0_refuses_complex_values_as_numpy_does():
    with pytest.raises(TypeError, match="complex"):
        anp.i0(np.array([1.0 + 1j]))


# --- floating-point representation --------------------------------------------------------


def test_derivatives_of_the_representation_functions_at_their_jumps_and_steps():
    assert grad(lambda x: anp.modf(x)[0])(2.0) == 1.0  # at a jump of the fraction
    assert grad(lambda x: anp.frexp(x)[0])(8.0) == 1 / 16  # mantissa 0.5, exponent 4
    assert grad(lambda x: anp.nextafter(x, np.inf))(1.0) == 1.0
    assert grad(lambda x: anp.spacing(x))(1.0) == 0.0
    assert grad(lambda x: anp.ldexp(x, 3))(0.5) == 8.0


def test_builtin_divmod_of_traced_values_is_numpys():
    x = np.array([7.0, -7.0, 7.5])
    q, r = vmap(lambda a: divmod(a, 2.0))(x)
    _close(q, np.floor_divide(x, 2.0))
    _close(r, np.remainder(x, 2.0))
    np.testing.assert_array_equal(grad(lambda a: divmod(5.0, a)[1].sum())(x), -np.floor(5.0 / x))


# --- real_if_close ------------------------------------------------------------------------


def test_real_if_close_matches_numpy_on_complex_values():
    imaginary = rng.normal(size=3) * 1j
    cases = [(np.array([2.1 + 4e-14j, 5.2 + 3e-15j]), 1000), (imaginary, 100), (imaginary, 1e20)]
    for z, tol in cases:
        _close(anp.real_if_close(z, tol=tol), np.real_if_close(z, tol=tol))


def test_real_if_close_derivatives_follow_the_value_returned():
    z = np.array([1.5 + 1e-17j, -2.0 + 0j])
    out, t = jvp(anp.real_if_close, (z,), (np.array([1.0 + 2.0j, 3.0 - 1.0j]),))
    assert out.dtype == np.float64 and t.dtype == np.float64
    np.testing.assert_array_equal(t, [1.0, 3.0])
    _, back = vjp(anp.real_if_close, z)
    (ct,) = back(np.array([1.0, 2.0]))
    assert ct.dtype == np.complex128
    np.testing.assert_array_equal(ct, [1.0, 2.0])
    far = np.array([1.0 + 0.5j, 2.0 - 1.0j])  # kept complex: the identity's derivatives
    check_grads(anp.real_if_close, (far,), order=2)


def test_real_if_close_under_vmap_decides_for_the_batch_or_raises():
    close = np.array([[1.0 + 1e-17j, 2.0 + 0j], [3.0 - 1e-18j, 4.0 + 0j]])
    out = vmap(anp.real_if_close)(close)
    _close(out, close.real)
    check_vmap(anp.real_if_close, 0, [close + 1j])  # all kept complex
    mixed = close + np.array([[0.0], [1j]])
    with pytest.raises(TransformValueError, match="some examples"):
        vmap(anp.real_if_close)(mixed)


# --- unwrap, isclose & co. ----------------------------------------------------------------


def test_unwrap_matches_numpy_on_integer_periods_and_ties():
    p = np.array([0, 5, 10, 3, 9, 1])  # integer arithmetic with period 6 (ties at +-3)
    _close(anp.unwrap(p, period=6), np.unwrap(p, period=6))
    q = np.array([0.0, np.pi, 0.0, -np.pi, 0.0])  # steps of exactly period / 2
    _close(anp.unwrap(q), np.unwrap(q))
    np.testing.assert_array_equal(
        grad(lambda v: (anp.unwrap(v) * np.arange(5)).sum())(q), np.arange(5)
    )


def test_whole_array_comparisons_return_python_bools_on_numpy_values():
    a = np.array([1.0, 2.0])
    for got, want in [
        (anp.allclose(a, a + 1e-9), np.allclose(a, a + 1e-9)),
        (anp.array_equal(a, a), np.array_equal(a, a)),
        (anp.array_equal(a, a[:1]), np.array_equal(a, a[:1])),
        (anp.array_equiv(a, [[1.0, 2.0]] * 3), np.array_equiv(a, [[1.0, 2.0]] * 3)),
        (anp.array_equiv(a, [1.0, 2.0, 3.0]), np.array_equiv(a, [1.0, 2.0, 3.0])),
    ]:
        assert type(got) is bool and got == want
    _close(anp.isclose([1, 2], [1, 3]), np.isclose([1, 2], [1, 3]))  # integers compared as floats
    with pytest.raises(TypeError, match="complex"):
        anp.isposinf(np.array([1j]))


# --- convolve and correlate ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_every_mode_and_length_order_matches_numpy(name):
    for n in range(1, 7):
        for m in range(1, 7):
            a = rng.normal(size=n) + 1j * rng.normal(size=n)
            v = rng.normal(size=m) + 1j * rng.normal(size=m)
            for mode in ("full", "same", "valid"):
                want = getattr(np, name)(a, v, mode)
                _close(getattr(anp, name)(a, v, mode), want)
                batched = vmap(getattr(anp, name), in_dims=(0, None))(
                    np.stack([a, a]), v, mode=mode
                )
                np.testing.assert_allclose(batched[1], want, rtol=1e-12, atol=1e-12)


def test_convolution_batches_over_both_operands_at_any_axis():
    f = lambda a, v: anp.convolve(a, v, "same")
    a, v = rng.normal(size=(5, 3)), rng.normal(size=(2, 4))  # batch axes: a's last, v's first
    got = vmap(vmap(f, in_dims=(-1, None)), in_dims=(None, 0))(a, v)
    want = np.array([[np.convolve(a[:, i], v[j], "same") for i in range(3)] for j in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    check_grads(lambda a, v: vmap(f, in_dims=(-1, None))(a, v[0]), (a, v), order=2)


def test_windows_outside_the_full_correlation_are_zero():
    # The transposes ask the primitive for windows past either end; on plain arrays and
    # under vmap (strided windows) they must agree.
    from autodiff.rules.polynomial import correlate_p

    a, w = rng.normal(size=4), rng.normal(size=3)
    for offset, length in [(-6, 12), (2, 5), (-1, 2), (3, 4)]:
        padded = np.concatenate([np.zeros(10), a, np.zeros(10)])
        want = [padded[10 + i + offset : 10 + i + offset + 3] @ w for i in range(length)]
        got = correlate_p.bind(a, w, offset=offset, length=length)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        window = {"offset": offset, "length": length}
        got = vmap(lambda a, window=window: correlate_p.bind(a, w, **window))(a[None])[0]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_convolve_errors_name_the_problem():
    with pytest.raises(ValueError, match="cannot be empty"):
        anp.convolve(np.array([]), np.ones(2))
    with pytest.raises(ValueError, match="1-d"):
        anp.correlate(np.ones((2, 2)), np.ones(2))
    with pytest.raises(ValueError, match="mode must be"):
        anp.convolve(np.ones(3), np.ones(2), "circular")


# --- polynomials --------------------------------------------------------------------------


def test_poly_of_complex_roots_is_real_for_conjugate_pairs_as_numpy():
    pairs = np.array([1 + 2j, 1 - 2j, 3.0 + 0j])
    for roots in (pairs, pairs[:2] * 1.5, np.array([1 + 2j, 3.0 + 0j])):
        _close(anp.poly(roots), np.poly(roots))
    check_grads(anp.poly, (np.array([1 + 2j, 3.0 - 0.5j]),), order=2)  # no pairs: complex
    batch = np.stack([pairs, pairs * 2])  # every example real (batch size 0 could not say)
    _close(vmap(anp.poly)(batch), np.stack([np.poly(r) for r in batch]))
    with pytest.raises(TransformValueError):
        vmap(anp.poly)(np.stack([pairs, pairs + 1j]))


def test_poly_of_a_matrix_is_its_characteristic_polynomial_on_plain_arrays():
    a = rng.normal(size=(3, 3))
    _close(anp.poly(a), np.poly(a))  # traced matrices need anp.linalg.eigvals
    assert anp.poly([]) == 1.0


def test_poly_tree_of_products_matches_numpy_for_every_count():
    for n in range(1, 10):
        roots = rng.normal(size=n)
        np.testing.assert_allclose(anp.poly(roots), np.poly(roots), rtol=1e-12, atol=1e-12)


def test_polydiv_trims_leading_zeros_where_values_are_known_and_keeps_them_under_vmap():
    u, v = np.array([1.0, 0.0, 1.0, 0.0]), np.array([1.0, 0.0, 1.0])  # remainder 0
    for got, want in zip(anp.polydiv(u, v), np.polydiv(u, v)):
        _close(got, want)
    grad(lambda u: anp.polydiv(u, v)[1].sum())(u)  # trimming under grad too
    q, r = vmap(lambda u: anp.polydiv(u, v))(np.stack([u, 2 * u]))
    np.testing.assert_allclose(q, [[1.0, 0.0], [2.0, 0.0]])
    np.testing.assert_allclose(r, np.zeros((2, 2)), atol=1e-15)  # len(v) - 1 kept


def test_polyfit_rank_warning_residuals_and_covariance_against_numpy():
    x = np.linspace(-1.0, 1.0, 7)
    y = np.stack([x**2 + 0.1 * rng.normal(size=7), np.cos(x)], axis=1)
    for kwargs in ({"full": True}, {"cov": True}, {"cov": "unscaled"}, {"w": np.linspace(1, 2, 7)}):
        for got, want in zip(anp.polyfit(x, y, 2, **kwargs), np.polyfit(x, y, 2, **kwargs)):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    flat = np.zeros(4)  # every x equal: rank 1 for degree 1
    with pytest.warns(np.exceptions.RankWarning):
        anp.polyfit(flat + 1.0, np.arange(4.0), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        want = np.polyfit(flat + 1.0, np.arange(4.0), 1, full=True)
    got = anp.polyfit(flat + 1.0, np.arange(4.0), 1, full=True)
    assert got[1].shape == want[1].shape == (0,) and got[2] == want[2] == 1
    batched = vmap(lambda y: anp.polyfit(x, y, 2, full=True))(y.T)
    assert batched[1].shape == (2, 1) and batched[2].tolist() == [3, 3]


def test_polynomial_arguments_as_numpy_checks_them():
    with pytest.raises(TypeError, match="same length"):
        anp.polyfit(np.ones(3), np.ones(4), 1)
    with pytest.raises(ValueError, match="positive"):
        anp.polyder(np.ones(3), -1)
    with pytest.raises(ValueError, match="k must be"):
        anp.polyint(np.ones(3), 3, k=[1.0, 2.0])
    with pytest.raises(ValueError, match="1d or non-empty square"):
        anp.poly(np.ones((2, 3)))


def test_polynomial_arithmetic_answers_a_poly1d_where_an_argument_is_one_as_numpy():
    p, q = np.poly1d([1.0, 2.0]), [3.0, 0.0, 5.0]
    calls = {
        "polyadd": ((p, q), (q, p)),
        "polysub": ((p, q), (q, p)),
        "polymul": ((p, q), (q, p), (p, p)),
        "polydiv": ((q, p), (p, q)),
        "polyder": ((p,), (np.poly1d([2.0, 0.0, 1.0, 4.0]), 2)),
        "polyint": ((p,), (p, 2), (p, 0)),
    }
    for name, arguments in calls.items():
        for args in arguments:
            got, want = getattr(anp, name)(*args), getattr(np, name)(*args)
            for g, w in zip(
                *((r if isinstance(r, tuple) else (r,)) for r in (got, want)), strict=True
            ):
                assert type(g) is type(w) is np.poly1d, (name, args, type(g))
                _close(g.coeffs, w.coeffs)
    # a traced answer stays an array: a poly1d holds plain coefficients
    b = rng.normal(size=3)
    got = grad(lambda b: anp.polymul(p, b).sum())(b)
    _close(got, np.full(3, p.coeffs.sum()))


def test_polymul_drops_plain_operands_leading_zeros_as_numpy_and_keeps_traced_ones():
    for a1, a2 in (([0, 0, 1], [0, 2]), ([0.0, 1.0, 2.0], [1.0, 1.0]), ([], [1.0, 2.0]),
                   ([0, 0], [1, 2]), ([0.0], [0.0, 0.0, 3.0])):  # fmt: skip
        _close(anp.polymul(a1, a2), np.polymul(a1, a2))
    # traced: a leading coefficient at 0 still has a derivative (d/da0 of the sum: sum(b))
    a, b = np.array([0.0, 1.0, 2.0]), rng.normal(size=2)
    _close(grad(lambda a: anp.polymul(a, b).sum())(a), np.full(3, b.sum()))
    _close(grad(lambda a: anp.polymul(a, b).sum())(np.zeros(3)), np.full(3, b.sum()))


def test_polyint_of_order_zero_is_the_coefficients_as_they_are():
    for p in ([1, 2, 3], np.array([1.5, 2.0], np.float32), np.array([1 + 1j, 2])):
        _close(anp.polyint(p, 0), np.polyint(p, 0))


# --- interp -------------------------------------------------------------------------------


def test_interp_matches_numpy_at_sample_points_ends_repeats_and_nan():
    xp, fp = np.array([1.0, 2.0, 2.0, 3.0]), np.array([3.0, 2.0, 5.0, 0.0])
    x = np.array([1.0, 2.0, 2.5, 3.0, 0.0, 4.0, np.nan])
    _close(anp.interp(x, xp, fp), np.interp(x, xp, fp))
    _close(anp.interp(x, xp[:1], fp[:1]), np.interp(x, xp[:1], fp[:1]))
    _close(anp.interp(x, xp, fp, left=-1.0, right=9.0), np.interp(x, xp, fp, -1.0, 9.0))
    x = rng.normal(size=6) * 5
    _close(
        anp.interp(x, [0.5, 2.0, 4.0], [1.0, 0.0, 3.0], period=5),
        np.interp(x, [0.5, 2.0, 4.0], [1.0, 0.0, 3.0], period=5),
    )


def test_interp_derivative_conventions_at_sample_points_and_outside():
    xp, fp = np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 0.0])
    slope = lambda x: float(grad(anp.interp)(x, xp, fp))
    assert slope(2.0) == -2.0  # the segment to the right
    assert slope(3.0) == -2.0  # the last point: the segment to its left
    assert slope(1.0) == -1.0
    assert slope(0.5) == 0.0 and slope(3.5) == 0.0  # constant outside
    dfp = grad(lambda fp: anp.interp(0.5, xp, fp))(fp)  # left = fp[0]
    np.testing.assert_array_equal(dfp, [1.0, 0.0, 0.0])


def test_interp_float32_stays_float32():
    x32 = np.array([1.5, 2.5], np.float32)
    out = anp.interp(
        x32, np.array([1.0, 2.0, 3.0], np.float32), np.array([3.0, 2.0, 0.0], np.float32)
    )
    assert out.dtype == np.float32


# --- functions of functions ---------------------------------------------------------------


def _loop_reference(vectorized, numpy_version, *args):
    got, want = vectorized(*args), numpy_version(*args)
    for g, w in zip(
        got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
    ):
        np.testing.assert_allclose(g, np.asarray(w, dtype=np.asarray(g).dtype), rtol=1e-12)


def test_vectorize_agrees_with_numpys_loop():
    f = lambda x, y: np.sin(x) * y + x * x
    _loop_reference(anp.vectorize(f), np.vectorize(f), rng.normal(size=(3, 1)), rng.normal(size=4))
    sig = "(m,n),(n)->(m)"
    matrix = (np.matmul, {"signature": sig}, rng.normal(size=(2, 3, 4)), rng.normal(size=4))
    moments = (_moments, {"signature": "(n)->(),()"}, rng.normal(size=(3, 5)))
    coefficients = rng.normal(size=4)
    poly = (lambda x, p: np.polyval(p, x), {"excluded": {1}}, rng.normal(size=3), coefficients)
    for func, options, *args in (matrix, moments, poly):
        _loop_reference(anp.vectorize(func, **options), np.vectorize(func, **options), *args)
    hyp = anp.frompyfunc(np.hypot, 2, 1)
    a, b = rng.normal(size=(3, 1)), rng.normal(size=4)
    _loop_reference(hyp, lambda a, b: np.frompyfunc(np.hypot, 2, 1)(a, b).astype(float), a, b)
    _close(hyp.outer(a[:, 0], b), np.hypot.outer(a[:, 0], b))


def test_vectorize_keywords_decorator_otypes_and_size_one_axes():
    @anp.vectorize(otypes=[np.float32])
    def scaled(x, *, by):
        return x * by

    out = scaled(np.ones((2, 1, 3)), by=np.array([[1.0], [2.0]]))  # keyword vectorized
    assert out.dtype == np.float32 and out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out[:, 1], 2.0)
    named = anp.vectorize(lambda x, mode: x * (2.0 if mode == "double" else 1.0), excluded={"mode"})
    np.testing.assert_array_equal(named(np.ones(2), mode="double"), [2.0, 2.0])
    assert anp.vectorize(lambda x: x + 1)(2.0).shape == ()


def test_vectorize_signature_errors():
    dot = anp.vectorize(np.dot, signature="(n),(n)->()")
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'n'"):
        dot(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="core dimensions"):
        anp.vectorize(lambda v: v, signature="(n)->()")(np.ones((2, 3)))
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        anp.vectorize(np.dot, signature="(n),(n)")


def test_numpys_vectorize_and_frompyfunc_on_traced_values_name_ours():
    with pytest.raises(ConcretizationError, match=r"anp\.vectorize"):
        grad(lambda x: np.vectorize(lambda a: a * 2.0)(x).sum())(np.ones(3))
    with pytest.raises(UnsupportedFunctionError, match=r"anp\.frompyfunc"):
        grad(lambda x: np.frompyfunc(lambda a: a * 2.0, 1, 1)(x).sum())(np.ones(3))
    with pytest.raises(NotImplementedError, match="sequentially"):
        anp.frompyfunc(np.add, 2, 1).reduce(np.ones(3))


def test_piecewise_functions_see_only_values_of_their_piece():
    x = np.array([-4.0, -1.0, 0.25, 2.25, 9.0])
    f = lambda x: anp.piecewise(x, [x < 0, x >= 0], [lambda v: -np.sqrt(-v), np.sqrt])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no sqrt of a negative value anywhere
        out = f(x)
        g = grad(lambda x: f(x).sum())(x)
    want = np.piecewise(x, [x < 0, x >= 0], [lambda v: -np.sqrt(-v), np.sqrt])
    _close(out, want)
    np.testing.assert_allclose(g, 0.5 / np.sqrt(np.abs(x)))
    ints = np.array([1, -2, 3])  # NumPy's result keeps x's dtype
    _close(
        anp.piecewise(ints, [ints < 0], [lambda v: v * 1.5, 7.9]),
        np.piecewise(ints, [ints < 0], [lambda v: v * 1.5, 7.9]),
    )
    with pytest.raises(ValueError, match="either 2 or 3 functions"):
        anp.piecewise(x, [x < 0, x > 0], [np.sin])


def test_apply_along_axis_with_extra_arguments_and_scalar_results():
    a = rng.normal(size=(2, 3, 4))
    for axis in (0, 1, -1):
        _close(anp.apply_along_axis(np.sort, axis, a), np.apply_along_axis(np.sort, axis, a))
        _close(
            anp.apply_along_axis(lambda v, c: np.sum(v * c), axis, a, 2.0),
            np.apply_along_axis(lambda v, c: np.sum(v * c), axis, a, 2.0),
        )
    _close(anp.apply_along_axis(np.diag, 1, a), np.apply_along_axis(np.diag, 1, a))


def test_sequences_poly1d_and_numpys_mode_numbers_are_taken_as_numpy_takes_them():
    seq = [1.5, -2.0, 0.5]
    for f in (np.i0, np.real_if_close, np.unwrap, np.poly, np.vander, np.polyder, np.polyint):
        _close(getattr(anp, f.__name__)(seq), f(seq))
    _close(anp.polyder(np.poly1d(seq)), np.polyder(np.poly1d(seq)).coeffs)
    _close(anp.polyval(np.poly1d(seq), 2.0), np.polyval(np.poly1d(seq), 2.0))
    for mode in (0, 1, 2):
        _close(anp.convolve(seq, [1.0, 2.0], mode), np.convolve(seq, [1.0, 2.0], mode))
