"""Sparsity detection and compressed sparse Jacobians and Hessians.

The detected pattern never misses a non-zero: it is compared with the dense Jacobian
(``jacfwd``) and Hessian at random points, on every sample of the registry
(``tests/registry``) and on random programs (``tests/programs.py``, with transforms
staged inside them: their derivative code is read too).  On a registry sample that is
one primitive's call, whose Jacobian has the same non-zeros at every point drawn, the
primitive's rule is no looser either (a dense rule planted on a moving primitive fails
there; ``LOOSER`` lists the rules left looser, with why).  It is also checked to be
precise where it should be (stencils, loops, products).  The compressed evaluations
equal the dense matrices, with the colour counts the stencils allow.
"""

import warnings
import zlib

import numpy as np
import optree
import pytest
import scipy.sparse
from hypothesis import HealthCheck, given, seed, settings

import autodiff
import autodiff.numpy as anp
from autodiff import (
    SparseMatrix,
    SparsityPattern,
    hessian,
    hessian_sparsity,
    jacfwd,
    jacobian,
    jacobian_sparsity,
    jit,
)
from autodiff.core.primitive import Primitive
from autodiff.errors import TransformValueError
from autodiff.interpreters.staging import StagedTensor
from autodiff.transforms.sparse_jacobians import plan_hessian, plan_jacobian
from tests import programs
from tests.registry import OPS


def _dense_jacobian(fn, args, positions):
    """The Jacobian over the raveled outputs and the raveled, concatenated inputs."""
    out = fn(*args)
    blocks = []
    for p in positions:
        jac = jacfwd(fn, argnums=p)(*args)
        leaves = optree.tree_leaves(jac)
        n = sum(np.size(a) for a in optree.tree_leaves(args[p]))
        blocks.append(np.concatenate([np.reshape(j, (np.size(o), n)) for j, o in
                                      zip(leaves, optree.tree_leaves(out))], axis=0))  # fmt: skip
    return np.concatenate(blocks, axis=1)


def _covers(pattern, dense, what):
    dense = np.asarray(dense)
    missed = (dense != 0) & ~pattern.toarray()
    assert pattern.shape == dense.shape, (pattern.shape, dense.shape)
    assert not missed.any(), f"{what}: the pattern misses {np.argwhere(missed)[:5].tolist()}"


# --- the registry -------------------------------------------------------------------------------

POINTS = 4  # the sample's point and three drawn from its domain

# Primitives whose rule is looser than their Jacobian on some sample, though that sample's
# pattern is the same at every point drawn: the extra entries, and why they are left.
# (``test_the_looser_rules_listed_are_looser`` keeps the list true.)  Two kinds: the
# pattern depends on the values (a rule holds for every value), or the Jacobian as
# computed is not exactly zero where the mathematics is (roundoff, about 1e-16, which the
# rule must cover since the test compares exact non-zeros).
CHOLESKY = (
    "L[i, j] depends on a[:j+1, :j+1] and row i alone, but the JVP (L phi(L^-1 da L^-H)) "
    "cancels to roundoff, not zero, elsewhere in the triangle at random points; the rule "
    "reads a's triangle into the factor's"
)
LOOSER = {
    "prod": "a zero in every example of the sample's domain (a traced value): through it "
    "the others' derivatives vanish; the rule holds for every value",
    "linalg.cholesky": CHOLESKY,
    "scipy.linalg.cholesky": CHOLESKY,
    "scipy.linalg.cho_factor": CHOLESKY,
    "linalg.qr": "column j of Q and R[:j+1, j] depend on a's columns 0..j alone, but the "
    "JVP's roundoff reaches the others at random points; the rule reads the matrix (and "
    "nothing into R's zeros)",
}
ROUNDOFF = {"linalg.qr"}  # LOOSER entries whose extra entries only roundoff shows


def _one_primitive(fn, args):
    """Whether ``fn``'s staged graph is one equation on its inputs: then the pattern
    is that primitive's sparsity rule's alone."""
    graph = autodiff.make_graph(fn)(*args)
    return len(graph.eqns) == 1 and graph.outvars == graph.eqns[0].outvars


def _looser(pattern, seen, fn, args):
    """The entries of ``pattern`` that the Jacobian has at no point (``seen``: their
    non-zeros), where that is a rule's fault: a sample that is one primitive's call, with
    the same non-zeros at every point (a pattern that does not depend on the values).
    (Where the points differ, a selection such as ``maximum`` or ``sort``, a rule's
    pattern is the union over every value, which no few points show; a composition's
    pattern is its rules' together, each checked on its own samples.)  None otherwise."""
    if any((s != seen[0]).any() for s in seen[1:]) or not _one_primitive(fn, args):
        return None
    return pattern.toarray() & ~seen[0]


def _registry_cases():
    cases = []
    for op in OPS:
        if not op.differentiable:
            continue
        for i, sample in enumerate(op.samples):
            diff = sample.diff_positions()
            if not diff or any(sample.args[p].dtype.kind == "c" for p in diff):
                continue
            cases.append(pytest.param(op, sample, id=f"{op.name}[{sample.label or i}]"))
    return cases


def _pattern_and_jacobians(op, sample):
    """The detected pattern of a registry sample and, at ``POINTS`` points, where its
    dense Jacobian is non-zero, each checked to be covered; None where it has no such
    pattern (outputs that are not real floats, a shape jit refuses)."""
    fn = op.bound(sample)
    args = sample.args
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        leaves = optree.tree_leaves(fn(*args))
        if not leaves or any(np.asarray(o).dtype.kind not in "f" for o in leaves):
            return None
        try:
            pattern = jacobian_sparsity(fn, argnums=tuple(sample.diff_positions()))(*args)
        except autodiff.errors.ConcretizationError:
            return None  # jit refuses it (a value-dependent shape or dtype)
        rng = np.random.default_rng(zlib.crc32(op.name.encode()))
        seen = []
        for k in range(POINTS):  # the given point and others drawn afresh
            point = args if k == 0 else tuple(sample.draw(rng, p) for p in range(len(args)))
            dense = _dense_jacobian(fn, point, sample.diff_positions())
            _covers(pattern, dense, op.name)
            seen.append(np.asarray(dense) != 0)
    return fn, pattern, seen


@pytest.mark.parametrize(("op", "sample"), _registry_cases())
def test_registry_patterns_are_the_dense_jacobians(op, sample):
    """Never a non-zero missed, at any point; and a primitive's rule no looser than its
    Jacobian where that does not depend on the values (``_looser``; ``LOOSER`` lists
    the rules left looser, and why)."""
    found = _pattern_and_jacobians(op, sample)
    if found is None:
        pytest.skip("not real floating-point outputs, or a shape jit refuses")
    fn, pattern, seen = found
    args = sample.args
    extra = _looser(pattern, seen, fn, args)
    if extra is not None and op.name not in LOOSER:
        assert not extra.any(), (
            f"{op.name}[{sample.label}]: the rule's pattern has {int(extra.sum())} entries the "
            f"Jacobian has at no point, e.g. {np.argwhere(extra)[:5].tolist()}: a rule looser "
            f"than the function (dense where a moving one is due?)"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if len(sample.diff_positions()) == 1:  # the Hessian of the sum of the outputs
            (p,) = sample.diff_positions()

            def total(x):
                full = list(args)
                full[p] = x
                return sum(anp.sum(o) for o in optree.tree_leaves(fn(*full)))

            h_pattern = hessian_sparsity(total)(args[p])
            dense = np.asarray(autodiff.hessian(total)(args[p])).reshape(h_pattern.shape)
            big = np.abs(dense) > 1e-9 * max(1.0, np.abs(dense).max(initial=0.0))
            _covers(h_pattern, big & np.isfinite(dense), f"hessian of {op.name}")


def test_the_looser_rules_listed_are_looser():
    """Each primitive ``LOOSER`` lists has a sample where its rule is looser (a rule made
    exact leaves the list)."""
    looser = set()
    for param in _registry_cases():
        op, sample = param.values
        if op.name in LOOSER and op.name not in looser:
            found = _pattern_and_jacobians(op, sample)
            extra = None if found is None else _looser(found[1], found[2], found[0], sample.args)
            if extra is not None and extra.any():
                looser.add(op.name)
    # (qr's looser entries are roundoff's: on some processors' LAPACK its Jacobian's
    # zeros differ from point to point, and no sample shows the rule looser)
    assert set(LOOSER) - ROUNDOFF <= looser <= set(LOOSER), (
        f"exact now: {sorted(set(LOOSER) - looser)}"
    )


# --- random programs --------------------------------------------------------------------------


def _check_program(case):
    # (arrays: staging a Python float's derivative code can meet a rule that wants a dtype)
    args = tuple(np.asarray(a) for a in case.arguments())
    fn = case.functions(programs.AutodiffTransforms, programs.AUTODIFF, np.float64)[-1]
    positions = tuple(range(len(args)))
    pattern = jacobian_sparsity(fn, argnums=positions)(*args)
    _covers(pattern, _dense_jacobian(fn, args, positions), repr(case))
    if len(args) == 1:  # the Hessian of the sum of the outputs
        total = lambda x: anp.sum(fn(x))
        h_pattern = hessian_sparsity(total)(*args)
        dense = np.asarray(autodiff.hessian(total)(*args)).reshape(h_pattern.shape)
        big = np.abs(dense) > 1e-9 * max(1.0, np.abs(dense).max(initial=0.0))
        _covers(h_pattern, big, f"hessian of {case!r}")


@pytest.mark.parametrize("top", ["forward", "grad", "jacrev", "vmap", "jvp"])
def test_random_program_patterns_never_miss_a_nonzero(top):
    @settings(
        max_examples=40,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(case=programs.cases(top, max_depth=2))
    def run(case):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            _check_program(case)

    seed(zlib.crc32(f"sparsity-{top}".encode()))(run)()


# --- precision ----------------------------------------------------------------------------------


def bratu(u, lam=1.0):
    """The 2-D Bratu residual (5-point Laplacian plus lam * exp(u)), zero boundary."""
    h = 1.0 / (u.shape[0] + 1)
    p = anp.pad(u, 1)
    lap = (p[2:, 1:-1] + p[:-2, 1:-1] + p[1:-1, 2:] + p[1:-1, :-2] - 4 * u) / h**2
    return lap + lam * anp.exp(u)


def rosenbrock(x):
    return anp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def test_stencil_patterns_are_exact():
    n = 7
    pattern = jacobian_sparsity(bratu)(np.zeros((n, n)))
    assert pattern.nnz == 5 * n * n - 4 * n  # the 5-point stencil, cut at the boundary
    _covers(pattern, _dense_jacobian(bratu, (np.random.rand(n, n),), (0,)), "bratu")
    h = hessian_sparsity(rosenbrock)(np.zeros(6))
    np.testing.assert_array_equal(h.toarray(), np.abs(np.subtract.outer(range(6), range(6))) <= 1)
    # x @ x pairs each element with itself only; x[0] * x[1] only the two
    assert (hessian_sparsity(lambda x: x @ x)(np.zeros(4)).toarray() == np.eye(4, dtype=bool)).all()
    assert hessian_sparsity(lambda x: x[0] * x[1])(np.zeros(3)).rows.tolist() == [0, 1]
    assert hessian_sparsity(lambda x: anp.sum(x * 2.0 + 1.0))(np.zeros(3)).nnz == 0


def test_control_flow_is_the_union_of_what_it_can_touch():
    def loop(x):  # each pass multiplies by the left neighbour: an unknown number of passes
        step = lambda c: (anp.roll(c[0], 1) * c[0], c[1] + 1)
        return autodiff.while_loop(lambda c: c[1] < 2, step, (x, 0))[0]

    assert jacobian_sparsity(loop)(np.zeros(5)).toarray().all()
    branches = lambda x: autodiff.cond(x[0] > 0, lambda a: a[::-1], lambda a: 2.0 * a, x)
    p = jacobian_sparsity(branches)(np.zeros(4)).toarray()
    np.testing.assert_array_equal(p, np.eye(4, dtype=bool) | np.eye(4, dtype=bool)[::-1])
    running = lambda x: autodiff.scan(lambda c, xi: (c * xi, c + xi), 1.0, x)[1]
    p = jacobian_sparsity(running)(np.zeros(5)).toarray()
    np.testing.assert_array_equal(p, np.tri(5, dtype=bool))  # y[t] = c + x[t]: x[:t + 1]
    _covers(jacobian_sparsity(running)(np.zeros(5)),
            _dense_jacobian(running, (np.random.rand(5),), (0,)), "scan")  # fmt: skip


def test_odeint_reads_what_its_dynamics_reach():
    """The solution at t[i] reads what the dynamics reach from y0 and the rates, and
    t[0] and t[i]; at t[0] it is y0.  A chain (each state driven by the one before, the
    last one not moving) is triangular, not dense; the Hessian is covered too."""
    pytest.importorskip("scipy")
    from autodiff.scipy.integrate import odeint

    def chain(y, t, k):
        driven = anp.concatenate([anp.zeros(1), y[:-2] * y[:-2]])
        return anp.concatenate([-k * y[:-1] + anp.sin(t) * driven, anp.zeros(1)])

    def solution(y0, t, k):
        return odeint(chain, y0, t, args=(k,), rtol=1e-12, atol=1e-12)

    y0, t, k = np.array([0.5, -0.3, 0.8, 0.2]), np.array([0.0, 0.4, 1.0]), np.array([1.0, 0.7, 1.3])
    pattern = jacobian_sparsity(solution, argnums=(0, 1, 2))(y0, t, k).toarray()
    rows = pattern.reshape(3, 4, 10)  # times, states, (y0, t, k)
    np.testing.assert_array_equal(rows[0], np.eye(4, 10, dtype=bool))  # y(t[0]) = y0
    reach = np.tri(4, dtype=bool)  # state j reads y0[:j + 1] and k[:j + 1]
    reach[3] = np.eye(4, dtype=bool)[3]  # the last one stays y0[3]
    for i in (1, 2):
        np.testing.assert_array_equal(rows[i][:, :4], reach)
        np.testing.assert_array_equal(rows[i][:, 7:], np.tri(4, 3, dtype=bool) & reach[:, :3])
        times = np.isin(np.arange(3), [0, i])  # the start and its own time
        np.testing.assert_array_equal(rows[i][:3, 4:7], np.broadcast_to(times, (3, 3)))
    for point in range(3):  # never a non-zero missed
        args = (y0 + 0.3 * point, t, k * (1 + 0.2 * point))
        _covers(SparsityPattern.of(pattern), _dense_jacobian(solution, args, (0, 1, 2)), "odeint")
    w = np.random.default_rng(5).standard_normal((3, 4))  # linear: the pairs are the rule's
    total = lambda x: anp.sum(solution(x[:4], x[4:7], x[7:]) * w)
    x = np.concatenate([y0, t, k])
    h_pattern = hessian_sparsity(total)(x)
    dense = np.asarray(autodiff.hessian(total)(x))
    _covers(h_pattern, np.abs(dense) > 1e-7 * np.abs(dense).max(), "hessian of odeint")
    assert not h_pattern.toarray()[3, [0, 1, 2, 7, 8, 9]].any()  # y0[3] stays, alone


def test_a_primitive_without_a_rule_is_dense_and_one_without_a_derivative_is_empty():
    shift_p = Primitive("shift_no_rule", lambda x: np.roll(x, 1), jvp=[lambda t, a, x: t])
    p = jacobian_sparsity(lambda x: shift_p.bind(x) * x)(np.zeros(3))
    assert p.toarray().all()
    assert jacobian_sparsity(lambda x: anp.floor(x) + 1.0)(np.zeros(3)).nnz == 0


# --- compressed evaluation --------------------------------------------------------------------


def test_colour_counts_on_stencils():
    assert plan_jacobian(jacobian_sparsity(bratu)(np.zeros((30, 30))), "auto").n_colors == 5
    tri = hessian_sparsity(rosenbrock)(np.zeros(200))
    assert plan_hessian(tri).n_colors <= 3
    wide = jacobian_sparsity(lambda x: anp.stack([x.sum(), (x**2).sum()]))(np.zeros(9))
    plan = plan_jacobian(wide, "auto")  # 2 dense rows: 2 VJPs, not 9 JVPs
    assert (plan.mode, plan.n_colors) == ("reverse", 2)


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_sparse_jacobian_equals_the_dense_one(mode):
    u = np.random.default_rng(0).random((6, 5))
    J = jacobian(bratu, sparsity="auto", mode=mode)(u)
    assert isinstance(J, scipy.sparse.csr_array)
    np.testing.assert_allclose(J.toarray(), jacfwd(bratu)(u).reshape(30, 30), rtol=1e-12)
    wide = lambda x, w: anp.stack([(x * w).sum(), (x**2).sum()])
    x, w = np.arange(4.0), np.ones(4)
    got = jacobian(wide, argnums=(0, 1), sparsity="auto", mode=mode)(x, w).toarray()
    np.testing.assert_allclose(got, np.hstack(jacfwd(wide, argnums=(0, 1))(x, w)))


def test_sparse_hessian_equals_the_dense_one():
    x = np.random.default_rng(1).random(12)
    H = hessian(rosenbrock, sparsity="auto")(x)
    np.testing.assert_allclose(H.toarray(), autodiff.hessian(rosenbrock)(x), rtol=1e-12)
    star = lambda x: anp.sum(x[0] * x[1:]) + anp.sum(anp.sin(x))  # an arrow: 2 colours
    H = hessian(star, sparsity="auto")(x)
    np.testing.assert_allclose(H.toarray(), autodiff.hessian(star)(x), rtol=1e-12)
    assert plan_hessian(hessian_sparsity(star)(x)).n_colors == 2


def test_given_patterns_and_wrong_ones():
    u = np.random.default_rng(2).random((4, 4))
    dense = jacfwd(bratu)(u).reshape(16, 16)
    for pattern in (dense != 0, scipy.sparse.csr_array(dense), SparsityPattern.of(dense != 0)):
        np.testing.assert_allclose(jacobian(bratu, sparsity=pattern)(u).toarray(), dense)
    with pytest.raises(TransformValueError, match=r"shape \(16, 16\)"):
        jacobian(bratu, sparsity=np.ones((16, 16)))(np.zeros((3, 3)))
    with pytest.raises(TransformValueError, match="'auto'"):
        jacobian(bratu, sparsity="detect")


def test_patterns_are_cached_per_signature_and_composes_with_jit():
    calls = []

    def f(x):
        calls.append(isinstance(x, StagedTensor))  # staged: for the detection
        return anp.sin(x[1:]) * x[:-1]

    jac = jacobian(f, sparsity="auto")
    for _ in range(3):
        jac(np.ones(6))
    assert sum(calls) == 1  # staged once for the signature
    jac(np.ones(7))
    assert sum(calls) == 2
    x = np.linspace(0.1, 1.0, 6)
    want = jacfwd(f)(x)
    np.testing.assert_allclose(jacobian(jit(f), sparsity="auto")(x).toarray(), want)
    inside = jit(lambda x: jacobian(f, sparsity="auto")(x))(x)  # traced: index arrays
    assert isinstance(inside, SparseMatrix)
    np.testing.assert_allclose(inside.toarray(), want)
    aux = jacobian(lambda x: (f(x), x.sum()), has_aux=True, sparsity="auto")(x)
    np.testing.assert_allclose(aux[0].toarray(), want)
    assert aux[1] == pytest.approx(x.sum())


# --- the star colouring itself ------------------------------------------------------------


def _random_symmetric_graph(rng, n, density):
    upper = np.triu(rng.random((n, n)) < density, 1)
    a, b = np.nonzero(upper | upper.T)
    return [b[a == k].tolist() for k in range(n)]


@pytest.mark.parametrize("seed_", range(12))
def test_greedy_star_colourings_are_star_colourings(seed_):
    """Proper, and no path on four vertices two-coloured (what makes every entry of
    the compressed Hessian recoverable directly), before the safety net in
    star_coloring could replace a wrong one."""
    from autodiff.transforms.coloring import _orders, _star

    rng = np.random.default_rng(seed_)
    adj = _random_symmetric_graph(rng, int(rng.integers(5, 40)), float(rng.uniform(0.05, 0.4)))
    for order in _orders(adj):
        color = _star(adj, order)
        for v, neighbours in enumerate(adj):
            assert all(color[v] != color[w] for w in neighbours)
            for w in neighbours:  # paths v - w - x - y
                for x in adj[w]:
                    if x == v:
                        continue
                    for y in adj[x]:
                        if y not in (v, w):
                            assert not (color[v] == color[x] and color[w] == color[y]), (
                                v, w, x, y)  # fmt: skip


def test_a_staged_no_grad_mark_keeps_the_pattern_elementwise():
    def h(x):
        with autodiff.no_grad():
            c = x**2
        return x - c

    pattern = jacobian_sparsity(h)(np.ones(4))
    np.testing.assert_array_equal(pattern.toarray(), np.eye(4, dtype=bool))
