"""Every sample of ``tests/registry.py`` under every transform.

* grad to order 2, forward and reverse mode, against central finite
  differences (``autodiff.testing.check_grads``: random direction v and
  cotangent ct, compares <vjp(ct), v>, <ct, jvp(v)> and the central difference
  of <ct, f(x + t v)> with eps 1e-6 and relative tolerance 1e-5 in float64;
  eps 1e-3 and tolerance 2e-2 for float32 samples).
* the transposition identity <ct, jvp(v)> == <vjp(ct), v> to 1e-10.
* vmap against a Python loop for every combination of in_dims 0, -1 and None
  per argument (not all None), at batch sizes 3 and 1.
"""

import itertools

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vjp, vmap
from autodiff._core import Primitive
from autodiff.testing import check_grads, check_vmap
from tests.registry import SAMPLES

DIFFERENTIABLE = [s for s in SAMPLES if s.differentiable]


def _diff_function(s):
    """The sample as a function of its differentiable arguments only."""

    def f(*diff_args):
        args = list(s.args)
        for i, a in zip(s.diff, diff_args):
            args[i] = a
        return s.fn(*args)

    return f, tuple(s.args[i] for i in s.diff)


@pytest.mark.parametrize("s", DIFFERENTIABLE, ids=lambda s: s.id)
def test_grad_against_finite_differences(s):
    f, args = _diff_function(s)
    check_grads(f, args, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("s", DIFFERENTIABLE, ids=lambda s: s.id)
def test_jvp_vjp_transposition(s):
    f, args = _diff_function(s)
    rng = np.random.default_rng(0)
    v = tuple(rng.standard_normal(np.shape(a)).astype(np.asarray(a).dtype) for a in args)
    out, t = jvp(f, args, v)
    ct = rng.standard_normal(np.shape(out))
    (_, vjp_fn) = vjp(f, *args)
    lhs = np.sum(ct * t)
    rhs = sum(np.sum(g * vi) for g, vi in zip(vjp_fn(ct), v))
    double = all(np.asarray(x).dtype == np.float64 for x in (*args, out))
    assert np.isclose(lhs, rhs, rtol=1e-10 if double else 1e-5, atol=1e-10)


def _variant(arg, k):
    """The k-th example like ``arg``, in the same input domain."""
    arg = np.asarray(arg)
    if arg.dtype.kind == "f":
        return arg * (1 + 0.05 * k)
    return np.roll(arg.ravel(), k).reshape(arg.shape)  # index arrays, masks: stay valid


def _batched(arg, dim, size=3, start=0):
    """``size`` different examples of ``arg`` stacked along ``dim``."""
    return np.stack([_variant(arg, start + k) for k in range(size)], axis=dim)


def _in_dims_cases():
    for s in SAMPLES:
        for dims in itertools.product([0, -1, None], repeat=len(s.args)):
            if any(d is not None for d in dims):
                yield pytest.param(s, dims, id=f"{s.id}-{dims}")


@pytest.mark.parametrize(("s", "in_dims"), list(_in_dims_cases()))
def test_vmap_against_loop(s, in_dims):
    args = [a if d is None else _batched(a, d) for a, d in zip(s.args, in_dims)]
    check_vmap(s.fn, args, in_dims=in_dims)


@pytest.mark.parametrize("s", SAMPLES, ids=lambda s: s.id)
@pytest.mark.parametrize("inner_dim", [0, -1])
def test_vmap_of_vmap_against_double_loop(s, inner_dim):
    """Two batch axes on the first argument: outer at 0, inner at ``inner_dim``."""
    rest = (None,) * (len(s.args) - 1)
    x = np.stack([_batched(s.args[0], inner_dim, start=3 * i) for i in range(2)])
    got = vmap(vmap(s.fn, in_dims=(inner_dim, *rest)), in_dims=(0, *rest))(x, *s.args[1:])
    for i in range(2):
        for j in range(3):
            example = np.take(x[i], j, axis=inner_dim)
            want = s.fn(example, *s.args[1:])
            np.testing.assert_allclose(np.asarray(got)[i, j], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("s", DIFFERENTIABLE, ids=lambda s: s.id)
def test_vmap_of_grad_against_loop(s):
    """Per-example gradients: vmap(grad) of the summed sample, batched on argument 0."""
    f, args = _diff_function(s)

    def scalar(*a):
        return anp.sum(f(*a))

    g = grad(scalar, argnums=tuple(range(len(args))))
    batched = [_batched(args[0], 0), *args[1:]]
    got = vmap(g, in_dims=(0,) + (None,) * (len(args) - 1))(*batched)
    for i in range(3):
        want = g(batched[0][i], *args[1:])
        for gi, wi in zip(got, want):
            np.testing.assert_allclose(gi[i], wi, rtol=1e-7, atol=1e-9)


def _all_primitives():
    found = {}
    for name in anp.__all__:
        prim = getattr(getattr(anp, name), "primitive", None)
        if isinstance(prim, Primitive):
            found[prim.name] = prim
    from autodiff.rules import creation, elementwise, indexing, linalg, reductions, shape

    for module in (creation, elementwise, indexing, linalg, reductions, shape):
        for value in vars(module).values():
            if isinstance(value, Primitive):
                found[value.name] = value
    return found


def test_every_primitive_has_all_rules_or_is_declared_nondifferentiable():
    prims = _all_primitives()
    assert len(prims) >= 30
    for name, prim in prims.items():
        assert prim.batch is not None, f"{name} has no batching rule"
        if prim.differentiable:
            assert prim.vjp is not None, f"{name} has no VJP rule"
            assert prim.jvp is not None, f"{name} has no JVP rule"


# Public names that are aliases or queries rather than primitives with samples.
_ALIASES = {
    "absolute": "abs",
    "true_divide": "divide",
    "mod": "remainder",
    "amax": "max",
    "amin": "min",
    "getitem": "getitem",
    "shape": None,
    "ndim": None,
    "size": None,
}


def test_every_public_function_has_a_registry_sample():
    names = {s.name.split("[")[0] for s in SAMPLES}
    missing = [
        n
        for n in anp.__all__
        if n not in names and _ALIASES.get(n, n) not in names and n not in _ALIASES
    ]
    assert not missing, f"functions without a sample in tests/registry.py: {missing}"
