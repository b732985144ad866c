"""Disagreements found by the random-program tests (``tests/test_random_programs.py``),
each pinned as a plain example with a note on what was wrong."""

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap
from autodiff.errors import ConcretizationError, TransformValueError


def test_jvp_of_python_float_base_to_float32_power_stays_float32():
    # Found as jacfwd(lambda x: 0.5 ** x) on a float32 x returning float64.  The JVP
    # rule for the exponent computed log(base) as where(base == 0, 0, log(base)); with
    # a Python float base, where() made that a 0-d float64 array, which NumPy does not
    # treat as a weak scalar, so the tangent was promoted to float64 (grad, which
    # casts gradients to the input's dtype, hid it).
    x = np.array([0.3, -1.2, 2.0], dtype=np.float32)
    v = np.array([1.0, 2.0, -1.0], dtype=np.float32)
    want = 0.5**x * np.log(np.float32(0.5)) * v
    for base_power in (lambda x: 0.5**x, lambda x: anp.power(0.5, x), lambda x: np.power(3, x)):
        out, tangent = jvp(base_power, (x,), (v,))
        assert out.dtype == tangent.dtype == np.float32
    out, tangent = jvp(lambda x: 0.5**x, (x,), (v,))
    np.testing.assert_allclose(tangent, want, rtol=1e-6)
    jac = jacfwd(lambda x: 0.5**x)(x)
    assert jac.dtype == np.float32
    np.testing.assert_allclose(jac, np.diag(want / v), rtol=1e-6)
    assert linearize(lambda x: 2.0**x, x)[1](v).dtype == np.float32
    batched = vmap(lambda x: jvp(lambda x: 0.5**x, (x,), (np.float32(1.0) + 0 * x,))[1])(x)
    assert batched.dtype == np.float32
    # a zero base: the derivative in the exponent is taken as 0 (0**y for y > 0)
    out, tangent = jvp(lambda y: 0.0**y, (np.abs(x),), (v,))
    assert tangent.dtype == np.float32
    np.testing.assert_array_equal(tangent, 0.0)


# The programs below are where torch.func (2.13) disagreed with autodiff, JAX and
# finite differences, and (the last) where JAX under jit disagreed with autodiff,
# eager JAX and finite differences.  autodiff was right each time; the tests pin its
# answers to hand-derived values.  ``TorchTransforms.avoid`` in ``tests/programs.py``
# keeps the random programs from comparing against torch there, and
# ``JaxTransforms.compile`` runs those programs op by op.


def test_third_derivatives_of_prod_with_an_exact_zero_factor():
    # torch.func: NaN (division by the zero factor in its prod rules)
    x = np.array([0.0, 0.7, -1.3])
    # d3/dx_i dx_j dx_k of x0 * x1 * x2 is 1 where {i, j, k} = {0, 1, 2}, else 0
    want = np.zeros((3, 3, 3))
    for i, j, k in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]:
        want[i, j, k] = 1.0
    np.testing.assert_array_equal(jacfwd(hessian(anp.prod))(x), want)
    np.testing.assert_array_equal(jacrev(jacrev(jacrev(anp.prod)))(x), want)
    # a constant zero factor: the function is 0 everywhere, so are its derivatives
    zero = lambda x: anp.prod(anp.concatenate([anp.sin(x), np.zeros(1)]))
    np.testing.assert_array_equal(jacfwd(hessian(zero))(x[1:]), 0.0)
    np.testing.assert_array_equal(jacrev(jacrev(jacfwd(zero)))(x[1:]), 0.0)


def test_reverse_of_forward_through_cumprod_of_a_zero_variance():
    # torch.func: vjp of jvp of cumprod(var(x, axis=0)) for x of shape (1, 1) is NaN;
    # the variance of one element is 0 for every x, so the answer is 0
    f = lambda x: anp.cumprod(anp.var(anp.sin(x), axis=0), axis=0)
    x, v = np.array([[0.3]]), np.ones((1, 1))
    _, vjp_fn = vjp(lambda x, v: jvp(f, (x,), (v,))[1], x, v)
    for ct in vjp_fn(np.ones(1)):
        np.testing.assert_array_equal(ct, 0.0)


def _logdet_hessian(a):
    # d2 logdet(A) = -tr(A^-1 dA A^-1 dA), with A = I + X / 3
    inv = np.linalg.inv(a)
    return -np.einsum("li,jk->ijkl", inv, inv) / 9


def test_second_derivatives_of_slogdet_solve_and_det_through_forward_mode():
    # torch.func: jacrev(jacfwd(slogdet)) and jacfwd(jacfwd(slogdet)) are 0,
    # jacfwd(jacfwd(solve)) differs from hessian(solve), and jacrev of the jvp of
    # det on a 1x1 matrix is not 0
    x = np.array([[0.3, -0.2], [0.5, 0.1]])
    a = np.eye(2) + x / 3
    logdet = lambda x: anp.linalg.slogdet(np.eye(2) + x / 3)[1]
    b = np.array([[1.0], [2.0]])
    solve = lambda x: anp.linalg.solve(np.eye(2) + x / 3, b).sum()
    inv = np.linalg.inv(a)
    u, w = inv.sum(axis=0), (inv @ b)[:, 0]  # 1^T A^-1 and A^-1 b
    # d2 (1^T A^-1 b) = 2 1^T A^-1 dA A^-1 dA A^-1 b, symmetrised over the two dA
    solve_hessian = (
        np.einsum("i,jk,l->ijkl", u, inv, w) + np.einsum("k,li,j->ijkl", u, inv, w)
    ) / 9
    for second in (
        hessian,
        lambda f: jacfwd(jacfwd(f)),
        lambda f: jacrev(jacfwd(f)),
        lambda f: jacfwd(jacrev(f)),
        lambda f: jacrev(jacrev(f)),
    ):
        np.testing.assert_allclose(second(logdet)(x), _logdet_hessian(a), rtol=1e-12)
        np.testing.assert_allclose(second(solve)(x), solve_hessian, rtol=1e-12)
    det_tangent = lambda x, v: jvp(lambda x: anp.linalg.det(np.eye(1) + x / 3), (x,), (v,))[
        1
    ]  # = v / 3 for every x
    for jac in (jacrev, jacfwd):
        jacobian = jac(det_tangent)(np.array([[0.4]]), np.ones((1, 1)))
        np.testing.assert_allclose(jacobian, 0.0, atol=1e-15)  # torch: 0.098


def test_vmap_out_dims_of_an_output_that_ignores_the_batch():
    # torch.func: out_dims=1 raises, out_dims=-1 returns a tensor of shape
    # (34359738370, 2, 1)
    x, y = np.arange(3.0), np.array([[1.0], [2.0]])
    for out_dims in (0, 1, 2, -1, -2):
        out = vmap(lambda x, y: y * 2, in_dims=(0, None), out_dims=out_dims)(x, y)
        want = np.moveaxis(np.broadcast_to(y * 2, (3, 2, 1)), 0, out_dims)
        np.testing.assert_array_equal(out, want)


def test_vmap_over_an_empty_batch():
    # torch.func: select() out of range, reshape with -1 fails, var warns
    def loss(x):
        return anp.var(anp.sin(x), axis=0) + anp.sin(x).reshape(-1).sum()

    xs = np.zeros((0, 3))
    assert vmap(anp.sin)(xs).shape == (0, 3)
    assert vmap(loss)(xs).shape == (0,)
    assert vmap(grad(loss))(xs).shape == (0, 3)
    assert jacrev(vmap(loss))(xs).shape == (0, 0, 3)
    out, tangent = jvp(vmap(loss), (xs,), (xs,))
    assert out.shape == tangent.shape == (0,)
    _, vjp_fn = vjp(vmap(grad(loss)), xs)
    assert vjp_fn(xs)[0].shape == (0, 3)


def test_index_mixing_an_integer_and_an_array_follows_numpy():
    # NumPy (and JAX) count the integer as an advanced index, so with a slice in
    # between the broadcast axes go first: z[0, :, [0]] has shape (1, 3); torch
    # gives (3, 1).  A convention, not a bug, but the gradient must follow NumPy's.
    z = np.arange(24.0).reshape(2, 3, 4)
    w = np.array([[1.0, 2.0, 3.0]])
    assert z[0, :, [0]].shape == w.shape
    out, tangent = jvp(lambda z: z[0, :, [0]], (z,), (z,))
    np.testing.assert_array_equal(out, z[0, :, [0]])
    np.testing.assert_array_equal(tangent, z[0, :, [0]])
    want = np.zeros_like(z)
    want[0, :, 0] = w[0]
    np.testing.assert_array_equal(grad(lambda z: (z[0, :, [0]] * w).sum())(z), want)


def test_third_derivatives_of_det_in_every_mode():
    # torch.func: jacrev(jacrev(jacrev(det))) is NaN, jacfwd(hessian(det)) and
    # jacfwd(jacfwd(jacfwd(det))) are wrong (found as linearize(vjp(grad(det))) on a
    # 2x2 matrix, whose det is quadratic).  det(A) = sum eps_abc A_1a A_2b A_3c, so
    # d3 det / dA_ia dA_jb dA_kc = eps_ijk eps_abc for every A.
    eps = np.zeros((3, 3, 3))
    for i, j, k in [(0, 1, 2), (1, 2, 0), (2, 0, 1)]:
        eps[i, j, k], eps[i, k, j] = 1.0, -1.0
    want = np.einsum("ijk,abc->iajbkc", eps, eps)
    x = np.array([[0.3, -1.2, 0.5], [0.8, 0.1, -0.4], [-0.6, 0.9, 1.1]])
    det = anp.linalg.det
    for third in (
        lambda f: jacrev(jacrev(jacrev(f))),
        lambda f: jacfwd(hessian(f)),
        lambda f: jacfwd(jacfwd(jacfwd(f))),
        lambda f: jacrev(jacfwd(jacrev(f))),
    ):
        np.testing.assert_allclose(third(det)(x), want, atol=1e-13)
    # the case as found: the JVP of the VJP of the gradient, along (v, v)
    x2, v = x[:2, :2], np.ones((2, 2))
    _, tangent = jvp(lambda x, ct: vjp(grad(det), x)[1](ct)[0], (x2, v), (v, v))
    # grad det(A) = [[d, -c], [-b, a]] for A = [[a, b], [c, d]]: linear, so the VJP
    # is ct contracted with a constant Hessian, and its JVP along ct_dot = v is that
    # contraction with v
    np.testing.assert_allclose(tangent, np.array([[1.0, -1.0], [-1.0, 1.0]]), atol=1e-15)


def test_vjp_of_cumsum_along_a_trailing_axis_then_indexed():
    # JAX 0.10.2 under jit (XLA on CPU) gives [[1, 1, 1]] for this VJP; eager JAX,
    # finite differences and autodiff give [[1, 1, 0]].  Found as
    # jvp(vjp(jvp(lambda x: diagonal(cumsum(x + x, axis=1), offset=1)))) on a (1, 3) x.
    # out = t[:, 0] + t[:, 1] reads the first two columns only.
    t = np.array([[0.5, 0.7, 0.9], [0.1, -0.2, 0.3]])
    _, vjp_fn = vjp(lambda t: anp.cumsum(t, axis=1)[:, 1], t)
    np.testing.assert_array_equal(vjp_fn(np.array([1.0, 2.0]))[0], [[1, 1, 0], [2, 2, 0]])

    def diagonal_of_cumsum(x):  # [2 (x00 + x01)] for x of shape (1, 3)
        return anp.diagonal(anp.cumsum(x + x, axis=1), offset=1, axis1=-2, axis2=1)

    def pullback_of_tangent(x, t, ct):  # ct * [[2, 2, 0]], for every x and t
        return vjp(lambda t: jvp(diagonal_of_cumsum, (x,), (t,))[1], t)[1](ct)[0]

    x, t, ct = t[:1], np.array([[0.1, 0.2, 0.3]]), np.array([0.7])
    np.testing.assert_allclose(pullback_of_tangent(x, t, ct), [[1.4, 1.4, 0.0]], rtol=1e-15)
    _, tangent = jvp(pullback_of_tangent, (x, t, ct), (x, t, np.array([0.25])))
    np.testing.assert_allclose(tangent, [[0.5, 0.5, 0.0]], rtol=1e-15)


# --- found by the independent batches of tests/test_primitives.py (issue 14) ---------------


def test_vmap_of_grad_of_a_multiplying_scatter_with_batched_indices():
    # The check for repeated indices asked the batched index for one concrete value
    # (ConcretizationError); now each example's indices are checked.  With no repeat,
    # d/dv_k sum(x with x[i_k] *= v_k) = x[i_k]; d/dx_j = v_k where j = i_k, else 1.
    f = lambda x, i, v: anp.sum(anp.at(x)[i].multiply(v))
    x, v = np.arange(1.0, 6.0), np.array([2.0, 3.0])
    i = np.array([[0, 2], [1, 4], [3, 2]])
    got = vmap(grad(f, argnums=2), in_dims=(None, 0, None))(x, i, v)
    np.testing.assert_array_equal(got, x[i])
    gx, gv = vmap(grad(f, argnums=(0, 2)), in_dims=(0, 0, None))(np.stack([x, 2 * x]), i[:2], v)
    np.testing.assert_array_equal(gx, [[2, 1, 3, 1, 1], [1, 2, 1, 1, 3]])
    np.testing.assert_array_equal(gv, [x[i[0]], 2 * x[i[1]]])
    # forward mode: the tangent along v = (1, 1) is sum(x[i_k]) per example
    tangents = vmap(lambda i: jvp(lambda v: f(x, i, v), (v,), (np.ones(2),))[1])(i)
    np.testing.assert_array_equal(tangents, x[i].sum(axis=1))
    # one example repeating an index still raises, as without vmap
    with pytest.raises(NotImplementedError, match="names every position at most once"):
        vmap(grad(f, argnums=2), in_dims=(None, 0, None))(x, np.array([[0, 2], [3, 3]]), v)


def test_vmap_chunk_size_1_of_a_data_dependent_shape_raises_the_librarys_error():
    # chunk_size=1 is a loop; stacking outputs of different shapes let NumPy's "all
    # input arrays must have the same shape" escape (unchunked: ConcretizationError).
    xs = np.array([[1.0, -1.0, 2.0], [1.0, 2.0, 3.0]])
    with pytest.raises(ConcretizationError, match="boolean mask indexing"):
        vmap(lambda x: x[x > 0])(xs)
    with pytest.raises(
        TransformValueError,
        match=r"chunk_size=1\): output 0 has shape \(2,\) for example 0 but \(3,\) for example 1",
    ):
        vmap(lambda x: x[x > 0], chunk_size=1)(xs)
    # the same for outputs whose structure depends on the data, which zip() cut short
    with pytest.raises(TransformValueError, match="must have the same structure"):
        vmap(lambda x: (x, x) if x[1] > 0 else (x,), chunk_size=1)(xs)
    # and out_dims=None for an output that depends on the batch returned example 0's
    with pytest.raises(TransformValueError, match="out_dims is None for output 0"):
        vmap(lambda x: 2 * x, out_dims=None, chunk_size=1)(xs)
    # a fixed shape works, chunked or not: sum of the positive entries
    for chunk in (None, 1):
        got = vmap(lambda x: anp.where(x > 0, x, 0.0).sum(), chunk_size=chunk)(xs)
        np.testing.assert_array_equal(got, [3.0, 6.0])
