"""Every sample of ``tests/registry`` under every transform.

For each sample, with ``autodiff.numpy`` functions and again with the plain
NumPy/SciPy function called on traced values:

* grad to order 2, forward and reverse mode, against central finite
  differences (``autodiff.testing.check_grads``: random direction v and
  cotangent ct; compares <vjp(ct), v>, <ct, jvp(v)> and the central difference
  of <ct, f(x + t v)>, eps 1e-6 and relative tolerance 1e-6 in float64,
  beyond an explicit round-off estimate; complex samples too);
* the transposition identity Re sum(ct * jvp(v)) == Re sum(vjp(ct) * v);
* vmap against a Python loop (``check_vmap``: outputs, their structure,
  shapes, dtypes and values) at batch sizes 3, 1 and 0.

With ``autodiff.numpy`` only: vmap(vmap) against a double loop, vmap(grad) and
vmap(jvp) against loops, and float32 (outputs, tangents and gradients stay
float32 and agree with float64).  Every record's forward value on plain arrays
is compared with its ``reference`` (NumPy, SciPy or a closed form).

Batches: every example is drawn independently from the sample's input domain
(``Sample.draw``, ``tests/registry/domains.py``), so a rule that mixes examples
up fails even for functions that cannot tell rescaled copies apart (sorts,
comparisons, ``argmax``).  ``in_dims`` are drawn per argument from None and
every axis of the batched argument, front, middle and end, counted from either
side; ``out_dims`` likewise per output, at every level of ``vmap(vmap(...))``
and for every argument of the inner transforms.  The combinations are sampled
with a generator seeded by the test's id (the same on every run), not
enumerated: ``_in_dims`` says how many.

Failures that are expected are listed, with reasons, in
``tests/registry.EXPECTED_FAILURES``; they run as strict xfails.
"""

import random
import zlib

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vjp, vmap
from autodiff.core.primitive import Primitive
from autodiff.testing import check_grads, check_vmap
from tests.registry import EXPECTED_FAILURES, OPS

CASES = [(op, sample, i) for op in OPS for i, sample in enumerate(op.samples)]


def _cases(test, *, differentiable=False, libs=("anp",), extra=None):
    """pytest params for (op, sample, lib[, extra]) with expected failures marked;
    ``extra(op, sample, ident)`` gives the extra parameter tuples of one case."""
    params = []
    for op, sample, i in CASES:
        if differentiable and (not op.differentiable or not sample.diff_positions()):
            continue
        for lib in libs:
            if lib == "np" and not op.has_numpy:
                continue
            base = f"{op.name}[{sample.label or i}]-{lib}"
            for more in extra(op, sample, f"{test}-{base}") if extra else [()]:
                ident = base + (f"-{'-'.join(map(str, more))}" if more else "")
                reason = EXPECTED_FAILURES.get((op.name, test))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                params.append(pytest.param(op, sample, lib, *more, id=ident, marks=marks))
    return params


def _seed(text):
    """A seed from a test's id: the same on every run and in every process."""
    return zlib.crc32(text.encode())


def _rng(request):
    return np.random.default_rng(_seed(request.node.name))


# --- batches of independent examples, and where their batch axes go -----------------------


def _axes(ndim):
    """Where a batch axis can go in an argument of ``ndim`` dimensions, counted from
    the front and from the end: -(ndim + 1) .. ndim."""
    return list(range(-(ndim + 1), ndim + 1))


def _draw_dim(rng, ndim):
    """A batch axis for an argument of ``ndim`` dimensions: any position, counted
    from either side."""
    return rng.choice(_axes(ndim))


def _draw_in_dims(rng, ndims, count):
    """``count`` different in_dims, one entry per argument (of ``ndims``
    dimensions): None or any axis (not all None).  The first batches every
    argument, the next each argument alone, the others are random."""
    n = len(ndims)
    combos = {tuple(_draw_dim(rng, nd) for nd in ndims): None}
    if n > 1:
        for i in range(n):
            alone = tuple(_draw_dim(rng, nd) if j == i else None for j, nd in enumerate(ndims))
            combos[alone] = None
    for _ in range(20 * count):
        if len(combos) >= count:
            break
        combo = tuple(None if rng.random() < 1 / 3 else _draw_dim(rng, nd) for nd in ndims)
        if any(d is not None for d in combo):
            combos[combo] = None
    return list(combos)[:count]


def _in_dims(op, sample, ident):
    """Up to 3 in_dims for one argument (as many as it has batch positions, each
    axis once), 8 for several: as many tests as every combination of 0, -1 and
    None gave, over far more combinations."""
    rng = random.Random(_seed(ident))
    ndims = [a.ndim for a in sample.args]
    if len(ndims) == 1:
        axes = rng.sample(range(ndims[0] + 1), min(3, ndims[0] + 1))  # distinct axes
        return [((rng.choice([d, d - ndims[0] - 1]),),) for d in axes]
    return [(dims,) for dims in _draw_in_dims(rng, ndims, 8)]


def _draw_out_dims(rng, out):
    """out_dims for ``out`` (one example's output pytree): any axis of each batched
    output leaf, counted from either side."""
    leaves, structure = optree.tree_flatten(out)
    return optree.tree_unflatten(structure, [_draw_dim(rng, np.ndim(leaf)) for leaf in leaves])


def _batched(draw, dim, size, rng):
    """``size`` independent examples from ``draw(rng)`` stacked along ``dim``."""
    return np.stack([draw(rng) for _ in range(size)], axis=dim)


def _batch_args(sample, in_dims, rng, size=3):
    """The sample's arguments with those in ``in_dims`` replaced by batches of
    independent draws."""
    return [
        a if d is None else _batched(lambda r, i=i: sample.draw(r, i), d, size, rng)
        for i, (a, d) in enumerate(zip(sample.args, in_dims, strict=True))
    ]


def _diff_function(op, sample, lib):
    """The sample as a function of its differentiable arguments only."""
    fn = op.bound(sample, lib)
    positions = sample.diff_positions()

    def f(*diff_args):
        args = list(sample.args)
        for i, a in zip(positions, diff_args, strict=True):
            args[i] = a
        return fn(*args)

    return f, tuple(sample.args[i] for i in positions)


@pytest.mark.parametrize(
    ("op", "sample", "lib"), _cases("grad", differentiable=True, libs=("anp", "np"))
)
def test_grad_against_finite_differences(op, sample, lib):
    f, args = _diff_function(op, sample, lib)
    check_grads(f, args, order=2, modes=("fwd", "rev"), rtol=sample.rtol)


@pytest.mark.parametrize(
    ("op", "sample", "lib"), _cases("transpose", differentiable=True, libs=("anp", "np"))
)
def test_jvp_vjp_transposition(op, sample, lib):
    f, args = _diff_function(op, sample, lib)
    rng = np.random.default_rng(0)
    v = tuple(_random_like(a, rng) for a in args)
    out, t = jvp(f, args, v)
    ct = optree.tree_map(lambda o: _random_like(o, rng), out)
    (_, vjp_fn) = vjp(f, *args)
    lhs = _pair(ct, t)
    rhs = _pair(vjp_fn(ct), v)
    leaves = [*args, *optree.tree_leaves(out)]
    double = all(np.asarray(x).dtype in (np.float64, np.complex128) for x in leaves)
    assert np.isclose(lhs, rhs, rtol=1e-10 if double else 1e-5, atol=1e-10)


def _pair(a, b):
    """Re sum(a * b) over matching pytrees (the bilinear pairing)."""
    xs, ys = optree.tree_leaves(a), optree.tree_leaves(b)
    return sum(np.real(np.sum(x * y)) for x, y in zip(xs, ys, strict=True))


def _random_like(x, rng):
    x = np.asarray(x)
    out = rng.standard_normal(x.shape)
    if x.dtype.kind == "c":
        out = out + 1j * rng.standard_normal(x.shape)
    return out.astype(x.dtype)


@pytest.mark.parametrize(
    ("op", "sample", "lib", "in_dims"), _cases("vmap", libs=("anp", "np"), extra=_in_dims)
)
def test_vmap_against_loop(op, sample, lib, in_dims, request):
    if lib == "np" and op.numpy_dispatch and all(in_dims[i] is None for i in op.numpy_dispatch):
        pytest.skip(f"numpy.{op.name} dispatches only on arguments {op.numpy_dispatch}")
    fn = op.bound(sample, lib)
    out_dims = _draw_out_dims(random.Random(_seed(request.node.name)), fn(*sample.args))
    check_vmap(fn, in_dims, _batch_args(sample, in_dims, _rng(request)), out_dims=out_dims)


def _nested_dims(op, sample, ident):
    """Two draws of (outer in_dims, inner in_dims) over every argument."""
    rng = random.Random(_seed(ident))
    ndims = [a.ndim for a in sample.args]
    out = []
    for _ in range(2):
        inner = rng.choice(_draw_in_dims(rng, ndims, 8))
        seen = [nd + (d is not None) for nd, d in zip(ndims, inner, strict=True)]
        out.append((rng.choice(_draw_in_dims(rng, seen, 8)), inner))
    return out


def _at(x, dim, i):
    x = np.asarray(x)
    return np.take(x, i, axis=dim % x.ndim)


@pytest.mark.parametrize(
    ("op", "sample", "lib", "outer", "inner"), _cases("vmap_vmap", extra=_nested_dims)
)
def test_vmap_of_vmap_against_double_loop(op, sample, lib, outer, inner, request):
    """Two levels of batch axes anywhere in any argument, out_dims anywhere at each
    level, against a double loop over 2 x 3 independent examples."""
    fn, rng = op.bound(sample, lib), _rng(request)
    args = []
    for i, (a, do, di) in enumerate(zip(sample.args, outer, inner, strict=True)):
        draw = lambda r, i=i: sample.draw(r, i)
        per_outer = draw if di is None else (lambda r, draw=draw, di=di: _batched(draw, di, 3, r))
        if do is None:
            args.append(a if di is None else per_outer(rng))
        else:
            args.append(_batched(per_outer, do, 2, rng))
    leaves, structure = optree.tree_flatten(fn(*sample.args))
    dims = random.Random(_seed(request.node.name))
    inner_out = [_draw_dim(dims, np.ndim(x)) for x in leaves]
    outer_out = [_draw_dim(dims, np.ndim(x) + 1) for x in leaves]
    got = vmap(
        vmap(fn, in_dims=inner, out_dims=optree.tree_unflatten(structure, inner_out)),
        in_dims=outer,
        out_dims=optree.tree_unflatten(structure, outer_out),
    )(*args)
    assert optree.tree_structure(got) == structure
    for i in range(2):
        for j in range(3):
            example = []
            for a, do, di in zip(args, outer, inner, strict=True):
                a = a if do is None else _at(a, do, i)
                example.append(a if di is None else _at(a, di, j))
            want = optree.tree_leaves(fn(*example))
            pieces = zip(optree.tree_leaves(got), want, outer_out, inner_out, strict=True)
            for g, w, dout, din in pieces:
                g = _at(_at(g, dout, i), din, j)
                assert g.dtype == np.asarray(w).dtype, (i, j)
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=f"{i}, {j}")


def _scalar(f):
    """The sum of the real parts of every output: a scalar to take gradients of."""

    def total(*a):
        leaves = optree.tree_leaves(f(*a))
        return sum(anp.sum(anp.real(leaf)) for leaf in leaves[1:]) + anp.sum(anp.real(leaves[0]))

    return total


def _one_in_dims(op, sample, ident):
    """One in_dims over every argument (the differentiated ones and the others:
    index arrays, masks)."""
    rng = random.Random(_seed(ident))
    ndims = [a.ndim for a in sample.args]
    combos = _draw_in_dims(rng, ndims, 8)
    return [(combos[rng.randrange(len(combos))],)]


@pytest.mark.parametrize(
    ("op", "sample", "lib", "in_dims"),
    _cases("vmap_grad", differentiable=True, extra=_one_in_dims),
)
def test_vmap_of_grad_against_loop(op, sample, lib, in_dims, request):
    """Per-example gradients of the summed (real part of the) output, with respect
    to every differentiable argument, any of the arguments batched."""
    fn = op.bound(sample, lib)
    g = grad(_scalar(fn), argnums=sample.diff_positions())
    out_dims = _draw_out_dims(random.Random(_seed(request.node.name)), g(*sample.args))
    args = _batch_args(sample, in_dims, _rng(request))
    check_vmap(g, in_dims, args, out_dims=out_dims, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(
    ("op", "sample", "lib", "in_dims"),
    _cases("vmap_jvp", differentiable=True, extra=_one_in_dims),
)
def test_vmap_of_jvp_against_loop(op, sample, lib, in_dims, request):
    """jvp batched over primals (any of the arguments) and tangents (of every
    differentiable argument): the primal output and the tangent against a loop."""
    fn, positions = op.bound(sample, lib), sample.diff_positions()
    n, rng, dims = len(sample.args), _rng(request), random.Random(_seed(request.node.name))

    def pushforward(*a):
        primals, tangents = list(a[:n]), a[n:]

        def f(*diff):
            full = list(primals)
            for i, x in zip(positions, diff, strict=True):
                full[i] = x
            return fn(*full)

        return jvp(f, tuple(primals[i] for i in positions), tuple(tangents))

    args = _batch_args(sample, in_dims, rng)
    t_dims = tuple(None if dims.random() < 0.3 else _draw_dim(dims, sample.args[i].ndim)
                   for i in positions)  # fmt: skip
    tangents = [
        _random_like(sample.args[i], rng)
        if d is None
        else _batched(lambda r, i=i: _random_like(sample.args[i], r), d, 3, rng)
        for i, d in zip(positions, t_dims, strict=True)
    ]
    one = pushforward(*sample.args, *(sample.args[i] for i in positions))  # its structure
    out_dims = _draw_out_dims(dims, one)
    all_dims = (*in_dims, *t_dims)
    check_vmap(pushforward, all_dims, [*args, *tangents], out_dims=out_dims)


def _single(x):
    x = np.asarray(x)
    if x.dtype == np.float64:
        return x.astype(np.float32)
    return x.astype(np.complex64) if x.dtype == np.complex128 else x


@pytest.mark.parametrize(("op", "sample", "lib"), _cases("float32", differentiable=True))
def test_float32_stays_float32(op, sample, lib):
    f, args = _diff_function(op, sample, lib)
    if not op.keeps_float32:
        pytest.skip(f"{op.name} returns float64 by design, as in NumPy")
    args32 = tuple(_single(a) for a in args)
    out64, out32 = optree.tree_leaves(f(*args)), optree.tree_leaves(f(*args32))
    for o64, o32 in zip(out64, out32, strict=True):
        assert np.asarray(o32).dtype == _single(o64).dtype
        np.testing.assert_allclose(o32, o64, rtol=2e-4, atol=2e-4)
    v = tuple(np.ones_like(a) for a in args32)
    _, t = jvp(f, args32, v)
    for t32, o32 in zip(optree.tree_leaves(t), out32, strict=True):
        assert np.asarray(t32).dtype == np.asarray(o32).dtype
    grads = grad(_scalar(f), argnums=tuple(range(len(args32))))(*args32)
    assert [g.dtype for g in grads] == [a.dtype for a in args32]


# --- conventions at kinks, ties and domain edges (documented in rules/elementwise.py) -------


@pytest.mark.parametrize(
    ("f", "x", "expected"),
    [
        (anp.abs, 0.0, 0.0),
        (anp.fabs, 0.0, 0.0),
        (lambda x: anp.maximum(x, 1.0), 1.0, 0.5),
        (lambda x: anp.minimum(x, 1.0), 1.0, 0.5),
        (lambda x: anp.clip(x, 0.0, 1.0), 1.0, 0.5),
        (lambda x: anp.max(anp.stack([x, x, 2.0 * x - 1.0])), 1.0, 4 / 3),
        (lambda x: x**2, 0.0, 0.0),
        (lambda x: x**0.5, 0.0, np.inf),
        (lambda x: 0.0**x, 2.0, 0.0),
        (anp.sqrt, 0.0, np.inf),
        (anp.sinc, 0.0, 0.0),
        (anp.nan_to_num, np.inf, 0.0),
        (anp.sign, 0.5, 0.0),
    ],
    ids=[
        "abs",
        "fabs",
        "maximum tie",
        "minimum tie",
        "clip at bound",
        "max 3-way tie",
        "x**2 at 0",
        "sqrt(x) as x**0.5 at 0",
        "exponent of 0**x",
        "sqrt at 0",
        "sinc at 0",
        "nan_to_num at inf",
        "sign (no derivative)",
    ],
)
def test_subgradient_conventions(f, x, expected):
    with np.errstate(divide="ignore", invalid="ignore"):
        assert grad(f)(x) == expected


def test_max_tie_shares_the_cotangent_equally():
    g = grad(lambda x: anp.max(x))(np.array([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5, 0.0])


@pytest.mark.parametrize("mode", ["max", "min"])
def test_scatter_max_and_min_share_ties_like_maximum(mode):
    """x.at[i].max(y) where x[i] == y: both share the cotangent (one tied value with
    x, two with a repeated index), as maximum does (docs/coverage.md's conventions).
    The registry's draws never tie, so this is pinned here."""
    sign = 1.0 if mode == "max" else -1.0
    f = lambda x, y, i: anp.sum(getattr(anp.at(x)[i], mode)(y))
    x = sign * np.array([0.0, 2.0, 0.0])
    gx, gy = grad(f, argnums=(0, 1))(x, sign * np.array([2.0]), [1])
    np.testing.assert_allclose(gx, [1.0, 0.5, 1.0])
    np.testing.assert_allclose(gy, [0.5])
    gx, gy = grad(f, argnums=(0, 1))(x, sign * np.array([2.0, 2.0]), [1, 1])
    np.testing.assert_allclose(gx, [1.0, 1 / 3, 1.0])
    np.testing.assert_allclose(gy, [1 / 3, 1 / 3])


# --- the registry itself --------------------------------------------------------------------------


def _all_primitives():
    import importlib
    import pkgutil

    import autodiff.rules

    found = {}
    for info in pkgutil.iter_modules(autodiff.rules.__path__):
        module = importlib.import_module(f"autodiff.rules.{info.name}")
        for value in vars(module).values():
            prim = getattr(value, "primitive", value)
            if isinstance(prim, Primitive):
                found[prim.name] = prim
    return found


def test_every_primitive_has_all_rules_or_is_declared_nondifferentiable():
    prims = _all_primitives()
    assert len(prims) >= 30
    for name, prim in prims.items():
        assert prim.batch is not None, f"{name} has no batching rule"
        if prim.differentiable:
            assert prim.vjp is not None, f"{name} has no VJP rule"
            assert prim.jvp is not None, f"{name} has no JVP rule"


def _own_functions(namespace):
    """The functions a namespace of autodiff.numpy defines (not NumPy's borrowed ones,
    nor its types, submodules and shorthands)."""
    names = []
    for name in sorted(namespace._own):
        value = getattr(namespace, name)
        if callable(value) and not isinstance(value, type) and name not in ("r_", "c_"):
            names.append(name)
    return names


# Public names that are not functions of arrays (questions about shapes and dtypes are
# tested in tests/test_namespace.py).
_NOT_FUNCTIONS = {"shape", "ndim", "size", "at", "result_type", "can_cast", "common_type",
                  "iscomplexobj", "isrealobj",
                  # of sizes only, no array operand (tests/test_jit_contract.py, their errors)
                  "zeros", "ones", "empty", "eye", "identity", "tri", "arange"}  # fmt: skip


def test_every_public_function_has_a_registry_record():
    names = {op.name for op in OPS}
    missing = [n for n in _own_functions(anp) if n not in names and n not in _NOT_FUNCTIONS]
    missing += [f"linalg.{n}" for n in _own_functions(anp.linalg) if f"linalg.{n}" not in names]
    missing += [f"fft.{n}" for n in _own_functions(anp.fft) if f"fft.{n}" not in names]
    special = pytest.importorskip("autodiff.scipy.special", reason="SciPy is not installed")
    missing += [f"special.{n}" for n in special.__all__ if f"special.{n}" not in names]
    assert not missing, f"functions without a record in tests/registry: {missing}"


def test_expected_failures_name_real_tests():
    names = {op.name for op in OPS}
    tests = {"grad", "transpose", "vmap", "vmap_vmap", "vmap_grad", "vmap_jvp", "float32"}
    for name, test in EXPECTED_FAILURES:
        assert name in names and test in tests, (name, test)


def test_every_record_has_a_reference():
    missing = [op.name for op in OPS if op.reference is None and not op.has_numpy]
    assert not missing, f"records without a reference for their forward values: {missing}"


@pytest.mark.parametrize(("op", "sample", "lib"), _cases("forward"))
def test_forward_agrees_with_the_reference(op, sample, lib):
    """anp.f on plain arrays gives the record's reference: NumPy's or SciPy's f on
    plain arrays, or a closed form; as many outputs, the same dtypes and values, the
    same types (a scalar where NumPy returns one, not a 0-d array), and a view of an
    argument only where the reference's answer is one (a write to it must not change
    an argument that NumPy's would leave alone)."""
    got = op.bound(sample, "anp")(*sample.args)
    want = op.reference_for(sample)(*sample.args)
    for g, w in zip(optree.tree_leaves(got), optree.tree_leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        assert np.asarray(g).dtype == np.asarray(w).dtype
        assert type(g) is type(w), (type(g), type(w))
        for x in sample.args:  # a view or the argument itself only where NumPy's is one
            if isinstance(g, np.ndarray) and isinstance(x, np.ndarray):
                assert not np.shares_memory(g, x) or np.shares_memory(w, x), "aliases"


# --- the batches themselves ---------------------------------------------------------------


def test_examples_are_drawn_independently_and_keep_shape_and_dtype():
    """Fresh draws of every argument of every sample: the sample's shape and
    dtype, and different from each other (unless the argument can take one value
    only: a 0-d integer, a constant of the sample)."""
    rng = np.random.default_rng(0)
    same = []
    for op, sample, i in CASES:
        for k, a in enumerate(sample.args):
            x, *others = (sample.draw(rng, k) for _ in range(6))
            assert (x.shape, x.dtype) == (a.shape, a.dtype), (op.name, sample.label, k)
            # six draws: an LU factorisation's pivots of a small stack, a few small
            # integers, can come out the same three times
            if a.size > 1 and all(np.array_equal(x, y, equal_nan=True) for y in others):
                same.append(f"{op.name}[{sample.label or i}] argument {k}")
    assert not same, f"arguments whose examples are all the same: {same}"


def _gaps(x):
    return np.diff(np.sort(np.ravel(x)))


def test_domains_redraw_inside_the_domain():
    """Fresh draws stay where the domain promises: indices in range, no ties for
    sorts, SPD matrices for cholesky, separated spectra for eigh, ..."""
    from tests.registry import domains as d
    from tests.registry import linalg

    rng = np.random.default_rng(1)
    sv = lambda x: np.linalg.svd(x, compute_uv=False)
    checks = [
        (d.positive(2, 3), lambda x: np.all((x >= 0.5) & (x <= 2.0))),
        (d.unit(4), lambda x: np.all(np.abs(x) < 0.8)),
        (d.above_one(4), lambda x: np.all(x >= 1.2)),
        (d.away_from_zero(5), lambda x: np.all(np.abs(x) >= 0.5)),
        (d.distinct(3, 4), lambda x: _gaps(x).min() > 0.25),
        (d.ints(4, 6), lambda x: np.all((x >= 0) & (x < 4)) and x.dtype.kind == "i"),
        (d.unique_ints(6, 2), lambda x: len(set(x.ravel())) == 2 and x.max() < 6),
        (d.mask(3, 4), lambda x: x.dtype == bool),
        (d.spd(3, 2), lambda x: np.all(np.linalg.eigvalsh(x) >= 1 - 1e-9)),
        (d.well_conditioned(3), lambda x: np.all((sv(x) >= 1 - 1e-9) & (sv(x) <= 3 + 1e-9))),
        (d.distinct_spectrum(3), lambda x: _gaps(np.linalg.eigvalsh(x)).min() > 1.2),
        (linalg.separated(3, 2), lambda x: _gaps(sv(x)).min() > 0.5),
        (linalg.hpd(3), lambda x: np.all(np.linalg.eigvalsh(x) >= 1 - 1e-9)),
        # recipes survive arithmetic with constants, astype and NumPy functions
        (d.positive(3) * 3, lambda x: np.all((x >= 1.5) & (x <= 6.0))),
        (-d.positive(2), lambda x: np.all(x < 0)),
        (np.sort(d.real(6)), lambda x: np.all(np.diff(x) >= 0)),
        (d.real(3).astype(np.float32), lambda x: x.dtype == np.float32),
    ]
    for drawn, ok in checks:
        assert drawn.redraw is not None
        for _ in range(5):
            x = np.asarray(drawn.redraw(rng))
            assert x.shape == drawn.shape and ok(x), (drawn, x)
    # a view forgets its recipe: it is redrawn near the value (a literal array)
    assert d.real(3, 2)[0].redraw is None


def test_literal_arrays_are_redrawn_near_their_value():
    from tests.registry.domains import near

    rng = np.random.default_rng(2)
    x = np.array([2.0, 0.0, -3.0, np.nan, np.inf])
    y = near(x)(rng)
    assert np.all(np.abs(y[:3] / np.where(x[:3] == 0, 1, x[:3]) - 1) <= 0.1 + (x[:3] == 0))
    np.testing.assert_array_equal(np.sign(y), np.sign(x))
    assert y[1] == 0 and np.isnan(y[3]) and y[4] == np.inf and not np.array_equal(y[:3], x[:3])
    i = np.array([4, 0, 0, 2])
    assert sorted(near(i)(rng)) == sorted(i)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int64, np.bool_])
@pytest.mark.parametrize("shape", [(), (1,), (5,), (2, 3), (0, 2), (4, 1)])
def test_broadcast_to_makes_numpys_view_of_any_array(dtype, shape):
    # rules/shape.py makes a 0-d array's view itself (a reduction's cotangent, at every
    # gradient through a sum); the rest is NumPy's: either way NumPy's read-only view
    from autodiff.rules.shape import broadcast_to_p

    x = np.asarray(np.random.default_rng(len(shape)).normal(size=shape)).astype(dtype)
    for target in [shape, (3, *shape), (2, 4, *shape), (0, *shape)]:
        view, reference = broadcast_to_p.impl(x, shape=target), np.broadcast_to(x, target)
        assert type(view) is np.ndarray and view.dtype == x.dtype and view.shape == target
        np.testing.assert_array_equal(view, reference)
        assert view.strides == reference.strides and not view.flags.writeable
        assert view.size == 0 or np.shares_memory(view, x)
    x[...] = 1  # a view, not a copy: it sees a later write to the array
    view = broadcast_to_p.impl(x, shape=(3, *shape))
    x[...] = 0
    assert not view.any()
    with pytest.raises(ValueError, match="broadcast"):
        broadcast_to_p.impl(np.ones(3, dtype), shape=(4,))
