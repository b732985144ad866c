"""numpy.linalg and numpy.fft beyond the registry: conventions at the edges and
behaviour the registry's samples cannot show.

The registry (``tests/registry/linalg.py``, ``fft.py``, ``products.py``) runs every
function's samples through the full primitive x transform matrix and against NumPy on
plain arrays.  Here: derivatives at zero vectors and matrices, the eigenvector gauge,
degenerate spectra, rank-deficient and batched ``lstsq``, the zeros ``roots`` strips,
NumPy's deprecated 2-vector cross products and FFT arguments, and the errors.  Each
test is one small case (no products of parameters beyond the norm orders).
"""

import warnings

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import grad, hessian, jacfwd, jvp, vjp, vmap
from autodiff.testing import check_grads, check_vmap

rng = np.random.default_rng(31)


def _same(got, want, rtol=1e-12):
    """Equal values (and dtypes and shapes) leaf by leaf."""
    got_leaves, want_leaves = optree.tree_leaves(got), optree.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-12)


# --- norms at zero: derivative 0, not NaN --------------------------------------------------

VECTOR_ORDS = [None, 2, 1, -1, np.inf, -np.inf, 3, 0.5, -2.5]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


@pytest.mark.parametrize("ord", VECTOR_ORDS, ids=str)
def test_vector_norm_at_zero_has_derivative_zero(ord):
    zero = np.zeros(3)
    norm = lambda x: anp.linalg.norm(x, ord=ord)
    assert float(norm(zero)) == 0.0
    np.testing.assert_array_equal(grad(norm)(zero), 0.0)
    assert jvp(norm, (zero,), (np.ones(3),))[1] == 0.0
    np.testing.assert_array_equal(hessian(norm)(zero), 0.0)
    # batched: a zero example next to a nonzero one keeps its 0, the other its gradient
    xs = np.stack([zero, np.array([0.5, -1.0, 2.0])])
    got = vmap(grad(norm))(xs)
    np.testing.assert_array_equal(got[0], 0.0)
    np.testing.assert_allclose(got[1], grad(norm)(xs[1]), rtol=1e-14)


@pytest.mark.parametrize("ord", MATRIX_ORDS, ids=str)
def test_matrix_norm_at_zero_has_derivative_zero(ord):
    zero = np.zeros((2, 3))
    norm = lambda x: anp.linalg.norm(x, ord=ord)
    assert float(norm(zero)) == 0.0
    np.testing.assert_array_equal(grad(norm)(zero), 0.0)
    np.testing.assert_array_equal(hessian(norm)(zero[:, :2]), 0.0)
    stack = np.stack([zero, rng.standard_normal((2, 3))])
    got = vmap(grad(lambda x: anp.linalg.matrix_norm(x, ord="fro" if ord is None else ord)))(stack)
    np.testing.assert_array_equal(got[0], 0.0)
    assert np.all(np.isfinite(got[1])) and np.any(got[1] != 0)


def test_norm_at_zero_entries_for_small_and_negative_orders():
    x = np.array([0.0, 1.0, -2.0])
    # 0 < ord < 1: the zero entry gets 0 (torch), the others their derivative
    g = grad(lambda x: anp.linalg.norm(x, ord=0.5))(x)
    assert g[0] == 0.0
    check_grads(lambda v: anp.linalg.norm(anp.concatenate([x[:1], v]), ord=0.5), (x[1:],))
    # ord < 0 with a zero entry: the norm is 0 (as NumPy's inf ** (1/ord)), derivative 0
    assert float(anp.linalg.norm(x, ord=-1)) == 0.0
    np.testing.assert_array_equal(grad(lambda x: anp.linalg.norm(x, ord=-1))(x), 0.0)


def test_norm_of_the_default_and_vector_norm_at_zero():
    np.testing.assert_array_equal(grad(anp.linalg.norm)(np.zeros((2, 2, 2))), 0.0)
    np.testing.assert_array_equal(grad(lambda x: anp.linalg.vector_norm(x, ord=3))(np.zeros(4)), 0)
    z = np.zeros(3, np.complex128)
    np.testing.assert_array_equal(vjp(anp.linalg.norm, z)[1](1.0)[0], 0.0)


# --- eig: the gauge, and the eigenvalue equation ---------------------------------------------


def _diagonalizable(n, complex_):
    q = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if complex_ else 0)
    w = np.arange(1.0, n + 1) + (1j * rng.uniform(-1, 1, n) if complex_ else 0)
    return (q * w) @ np.linalg.inv(q)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_eigenvector_derivative_is_unit_norm_with_the_documented_phase(complex_):
    a = _diagonalizable(3, complex_)
    da = rng.standard_normal((3, 3)) + (1j * rng.standard_normal((3, 3)) if complex_ else 0)
    (w, v), (dw, dv) = jvp(anp.linalg.eig, (a,), (da,))
    # it solves the differentiated eigenvalue equation: da V + a dV = dV W + V dW
    np.testing.assert_allclose(da @ v + a @ dv, dv * w + v * dw, atol=1e-12)
    # the columns keep unit norm, and the phase: Im diag(V^-1 dV) = 0
    np.testing.assert_allclose(np.real(np.sum(np.conj(v) * dv, axis=0)), 0.0, atol=1e-13)
    np.testing.assert_allclose(np.imag(np.diag(np.linalg.solve(v, dv))), 0.0, atol=1e-13)


def test_eig_of_a_real_matrix_with_complex_eigenvalues_has_real_input_gradients():
    a = np.array([[1.0, -2.0, 0.3], [2.0, 1.0, 0.1], [0.0, 0.4, 3.0]])
    g = grad(lambda a: anp.sum(anp.abs(anp.linalg.eigvals(a)) ** 2))(a)
    assert g.dtype == np.float64
    check_grads(lambda a: anp.abs(anp.linalg.eigvals(a)), (a,), order=2, modes=("fwd", "rev"))


# --- degenerate spectra ------------------------------------------------------------------------


def test_values_only_decompositions_stay_finite_at_degenerate_spectra():
    eye = np.eye(3)
    np.testing.assert_allclose(grad(lambda a: anp.linalg.eigvalsh(a).sum())(2 * eye), eye)
    np.testing.assert_allclose(grad(lambda a: anp.linalg.svdvals(a).sum())(2 * eye), eye)
    np.testing.assert_allclose(
        grad(lambda a: anp.linalg.svd(a, compute_uv=False).sum())(2 * eye), eye
    )
    np.testing.assert_allclose(grad(lambda a: anp.linalg.norm(a, "nuc"))(2 * eye), eye)


ONE_TRIANGLE = {  # functions that read one triangle of a matrix, and which
    "pinv": (lambda a: anp.linalg.pinv(a, hermitian=True), "L"),
    "svd": (lambda a: anp.linalg.svd(a, hermitian=True)[1], "L"),
    "svdvals": (lambda a: anp.linalg.svd(a, hermitian=True, compute_uv=False), "L"),
    "eigh": (lambda a: anp.linalg.eigh(a, UPLO="U")[0], "U"),
    "eigvalsh": (lambda a: anp.linalg.eigvalsh(a), "L"),
    "cholesky": (lambda a: anp.linalg.cholesky(a, upper=True), "U"),
}


@pytest.mark.parametrize("name", sorted(ONE_TRIANGLE))
def test_one_triangle_functions_differentiate_the_triangle_they_read(name):
    """At a matrix that is not symmetric the derivative is the one of the function of
    the triangle read (finite differences), zero in the other triangle, and so are the
    second derivatives (the rules use the matrix LAPACK reads, not the argument)."""
    fn, uplo = ONE_TRIANGLE[name]
    rng = np.random.default_rng(3)
    m = rng.standard_normal((3, 3))
    a = m @ m.T + 3 * np.eye(3)
    other = np.tri(3, k=-1, dtype=bool) if uplo == "U" else np.tri(3, k=-1, dtype=bool).T
    a[other] += rng.uniform(0.3, 0.8, 3)  # what the function never reads
    w = rng.standard_normal(np.shape(fn(a)))
    f = lambda a: anp.sum(fn(a) * w)
    eps, fd = 1e-6, np.zeros((3, 3))
    for i, j in np.ndindex(3, 3):
        e = np.zeros((3, 3))
        e[i, j] = eps
        fd[i, j] = (f(a + e) - f(a - e)) / (2 * eps)
    g = grad(f)(a)
    np.testing.assert_allclose(g, fd, atol=1e-7)
    assert not g[other].any()
    assert not hessian(f)(a)[..., other].any()


def test_vector_derivatives_at_degenerate_spectra_are_not_finite():
    """The documented limit: eigenvector derivatives divide by eigenvalue gaps."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dv = jvp(lambda a: anp.linalg.eigh(a)[1], (np.eye(2),), (np.ones((2, 2)),))[1]
    assert not np.all(np.isfinite(dv))


# --- svd with full_matrices=True of non-square matrices --------------------------------------


@pytest.mark.parametrize("shape", [(4, 2), (2, 4)], ids=["tall", "wide"])
def test_full_svd_derivative_keeps_the_factors_unitary_and_turns_the_extra_ones_least(shape):
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    da = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    (u, _, vh), (du, ds, dvh) = jvp(anp.linalg.svd, (a,), (da,))
    k = min(shape)
    for q, dq in ((u, du), (np.conj(vh.T), np.conj(dvh.T))):
        omega = np.conj(q.T) @ dq  # skew-Hermitian: q stays unitary
        np.testing.assert_allclose(omega, -np.conj(omega.T), atol=1e-12)
        np.testing.assert_allclose(omega[k:, k:], 0.0, atol=1e-12)  # no turn among extras
    # and the reduced factors are the reduced SVD's
    _, (du_r, ds_r, dvh_r) = jvp(lambda a: anp.linalg.svd(a, full_matrices=False), (a,), (da,))
    np.testing.assert_allclose(du[:, :k], du_r, atol=1e-12)
    np.testing.assert_allclose(dvh[:k], dvh_r, atol=1e-12)
    np.testing.assert_allclose(ds, ds_r, atol=1e-12)


# --- lstsq ------------------------------------------------------------------------------------


def test_lstsq_rank_deficient_and_wide_problems_match_numpy():
    a = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 3))  # rank 2 of 3 columns
    b = rng.standard_normal((5, 2))
    _same(anp.linalg.lstsq(a, b), np.linalg.lstsq(a, b))
    _same(anp.linalg.lstsq(a, b, rcond=0.3), np.linalg.lstsq(a, b, rcond=0.3))
    _same(anp.linalg.lstsq(a.T, b[:3, 0]), np.linalg.lstsq(a.T, b[:3, 0]))
    _same(anp.linalg.lstsq(a[:, :2], b[:, 0]), np.linalg.lstsq(a[:, :2], b[:, 0]))


def test_lstsq_gradient_is_the_normal_equations_one():
    a, b = rng.standard_normal((5, 3)), rng.standard_normal(5)
    got = grad(lambda b: anp.linalg.lstsq(a, b)[0].sum())(b)
    np.testing.assert_allclose(got, a @ np.linalg.solve(a.T @ a, np.ones(3)), rtol=1e-12)
    got = grad(lambda a: anp.linalg.lstsq(a, b)[1][0])(a)  # d |b - a x|^2 = -2 r x^T
    x = np.linalg.lstsq(a, b)[0]
    np.testing.assert_allclose(got, -2 * np.outer(b - a @ x, x), rtol=1e-10, atol=1e-12)


def test_lstsq_residuals_under_vmap_are_decided_for_the_whole_batch():
    b = rng.standard_normal(5)
    full = rng.standard_normal((2, 5, 3))
    deficient = np.stack([rng.standard_normal((5, 2)) @ rng.standard_normal((2, 3))] * 2)
    residuals = lambda a: anp.linalg.lstsq(a, b)[1]
    assert vmap(residuals)(full).shape == (2, 1)
    check_vmap(lambda a: anp.linalg.lstsq(a, b)[:3], 0, (full,))
    assert vmap(residuals)(deficient).shape == (2, 0)
    assert vmap(residuals)(np.stack([full[0], deficient[0]])).shape == (2, 0)  # mixed
    nested = vmap(vmap(residuals))(np.stack([full, full]))
    np.testing.assert_allclose(nested[1, 0], np.linalg.lstsq(full[0], b)[1], rtol=1e-12)


def test_lstsq_and_matrix_rank_errors_are_numpys():
    with pytest.raises(np.linalg.LinAlgError, match="two-dimensional"):
        anp.linalg.lstsq(np.ones((2, 3, 3)), np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match="Incompatible dimensions"):
        anp.linalg.lstsq(np.ones((3, 2)), np.ones(4))
    assert anp.linalg.matrix_rank(np.zeros(3)) == 0


# --- cond ---------------------------------------------------------------------------------------


def test_cond_of_a_singular_matrix():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's errstate, not a warning
        assert float(anp.linalg.cond(singular)) == np.linalg.cond(singular)
        nan = np.array([[np.nan, 0.0], [0.0, 1.0]])
        assert np.isnan(anp.linalg.cond(nan, 1)) and np.isnan(np.linalg.cond(nan, 1))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):  # NumPy: inf
        anp.linalg.cond(singular, "fro")
    with pytest.raises(np.linalg.LinAlgError, match="empty"):
        anp.linalg.cond(np.zeros((0, 0)))


# --- roots ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "p",
    [
        [0.0, 0.0, 1.0, -3.0, 2.0],
        [1.0, -3.0, 2.0, 0.0, 0.0],
        [0.0, 2.0, 0.5, 0.0],
        [0.0, 0.0],
        [3.0],
        [0.0, 4.0],
        [1, 2, 3],
        [1j, 2.0, 0.0],
        np.float32([1.0, 0.5, -2.0]),
    ],
    ids=str,
)
def test_roots_strip_zeros_as_numpy_does(p):
    _same(anp.roots(p), np.roots(p), rtol=0)
    _same(anp.roots(np.asarray(p)), np.roots(p), rtol=0)


def _finite_difference_of_roots(p, k, eps=1e-6):
    """d roots / d p[k], roots sorted, centrally; roots that come from infinity (a
    perturbed leading zero) are left out."""
    e = np.zeros(len(p))
    e[k] = eps

    def moved(q):
        r = np.roots(q)
        return np.sort(r[np.abs(r) < 1e3])

    return (moved(p + e) - moved(p - e)) / (2 * eps)


@pytest.mark.parametrize(
    "p", [[1.0, -3.0, 2.0, 0.0], [0.0, 1.0, -3.0, 2.0]], ids=["trailing zero", "leading zero"]
)
def test_roots_derivative_covers_the_zeros_numpy_strips(p):
    """A trailing zero still moves the root at 0 (and the others); a leading zero moves
    the finite roots.  NumPy strips both, so the derivative must not come from the
    companion matrix of the stripped polynomial."""
    p = np.array(p)
    order = np.argsort(np.roots(p))
    jac = jacfwd(anp.roots)(p)[order]
    for k in range(len(p)):
        np.testing.assert_allclose(jac[:, k], _finite_difference_of_roots(p, k), atol=1e-7)
    assert np.all(jac[:, 0 if p[0] == 0 else -1] != 0)  # the stripped coefficient counts


def test_roots_under_vmap_strip_the_zeros_every_example_has():
    ps = np.stack([np.poly([1.0, 2.0, 4.0]) * k for k in (1.0, 2.0, -0.5)])
    leading = np.concatenate([np.zeros((3, 1)), ps], axis=1)
    got = vmap(anp.roots)(leading)
    np.testing.assert_allclose(got, [np.roots(p) for p in leading], rtol=1e-12)
    # a trailing zero in one example only: the same roots, in eigvals' order
    mixed = np.concatenate([ps, np.zeros((3, 1))], axis=1)
    mixed[1, -1] = 0.3
    got = vmap(anp.roots)(mixed)
    for g, p in zip(got, mixed):
        np.testing.assert_allclose(np.sort_complex(g), np.sort_complex(np.roots(p)), atol=1e-12)
    # a leading zero in one example only: no common degree, a clear error
    leading[1, 0] = 1.0
    with pytest.raises(np.linalg.LinAlgError, match="same degree"):
        vmap(anp.roots)(leading)
    with pytest.raises(ValueError, match="rank-1"):
        anp.roots(np.ones((2, 2)))


# --- cross ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("shapes", [((2,), (2,)), ((4, 2), (3,)), ((3,), (2, 2))], ids=str)
def test_cross_of_2_vectors_is_numpys_deprecated_one(shapes):
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    with pytest.warns(DeprecationWarning, match="2-dimensional vectors"):
        want = np.cross(a, b)
    with pytest.warns(DeprecationWarning, match="2-dimensional vectors"):
        _same(anp.cross(a, b), want, rtol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check_grads(anp.cross, (a, b), order=2, modes=("fwd", "rev"))
        check_vmap(anp.cross, (0, None), (np.stack([a, 2 * a]), b))


def test_cross_errors():
    with pytest.raises(ValueError, match="dimension must be 2 or 3"):
        anp.cross(np.ones(4), np.ones(3))
    with pytest.raises(np.exceptions.AxisError):
        anp.cross(np.ones(3), np.ones(3), axisc=1)
    with pytest.raises(ValueError, match="3-dimensional vectors"):
        anp.linalg.cross(np.ones(2), np.ones(2))


# --- fft ------------------------------------------------------------------------------------------


def test_fft_s_without_axes_warns_as_numpy_does():
    x = rng.standard_normal((3, 4))
    for name in ("fftn", "rfftn", "irfftn"):
        with pytest.warns(DeprecationWarning, match="`axes` should not be `None`") as ours:
            got = getattr(anp.fft, name)(x, s=(3, 6))
        assert ours[0].filename == __file__  # the warning points at the caller
        with pytest.warns(DeprecationWarning, match="`axes` should not be `None`"):
            want = getattr(np.fft, name)(x, s=(3, 6))
        _same(got, want)


def test_fftfreq_is_numpys_for_a_plain_spacing_and_differentiable_in_a_traced_one():
    for n, d in ((8, 0.1), (7, 2.0), (1, 1.0)):
        _same(anp.fft.fftfreq(n, d), np.fft.fftfreq(n, d), rtol=0)
        _same(anp.fft.rfftfreq(n, d), np.fft.rfftfreq(n, d), rtol=0)
    bins = np.fft.fftfreq(5, 1.0) * 5  # [0, 1, 2, -2, -1]
    np.testing.assert_allclose(jacfwd(lambda d: anp.fft.fftfreq(5, d))(0.5), -bins / (5 * 0.25))
    spacings = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(
        vmap(lambda d: anp.fft.rfftfreq(4, d))(spacings), [np.fft.rfftfreq(4, d) for d in spacings]
    )
    with pytest.raises(ValueError, match="n should be an integer"):
        anp.fft.fftfreq(4.0)


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_hermitian_transforms_invert_each_other(norm):
    x = rng.standard_normal(7)
    np.testing.assert_allclose(anp.fft.hfft(anp.fft.ihfft(x, norm=norm), 7, norm=norm), x)
