"""anp.random under vmap's randomness modes, grad and jvp: exact values against
equal-seeded NumPy generators drawing in a plain Python loop."""

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vmap
from autodiff.core.stack import current_interpreters
from autodiff.errors import TransformTypeError, TransformValueError

SEED = 1234
xs = np.arange(15.0).reshape(5, 3)


def _rngs():
    return np.random.default_rng(SEED), np.random.default_rng(SEED)


# (autodiff draw of shape (3,), the same draw with a NumPy generator)
DRAWS = {
    "normal": (lambda r: anp.random.normal(r, (3,)), lambda r: r.normal(size=3)),
    "uniform": (lambda r: anp.random.uniform(r, (3,)), lambda r: r.uniform(size=3)),
    "bernoulli": (lambda r: anp.random.bernoulli(r, 0.3, (3,)), lambda r: r.random(3) < 0.3),
}


# --- outside vmap -----------------------------------------------------------------------


@pytest.mark.parametrize("name", DRAWS)
def test_plain_draw_equals_numpy(name):
    ours, theirs = DRAWS[name]
    rng1, rng2 = _rngs()
    np.testing.assert_array_equal(ours(rng1), theirs(rng2))
    np.testing.assert_array_equal(ours(rng1), theirs(rng2))  # the stream advanced alike


def test_plain_draws_with_parameters():
    rng1, rng2 = _rngs()
    np.testing.assert_allclose(
        anp.random.normal(rng1, (4,), loc=2.0, scale=3.0), rng2.normal(2.0, 3.0, size=4)
    )
    np.testing.assert_allclose(
        anp.random.uniform(rng1, (4,), low=-1.0, high=3.0), rng2.uniform(-1.0, 3.0, size=4)
    )
    # shape broadcasts with the parameters' shapes; bernoulli defaults to p's shape
    assert anp.random.normal(rng1, (), loc=np.zeros((2, 3))).shape == (2, 3)
    assert anp.random.uniform(rng1, (4, 1), high=np.ones(3)).shape == (4, 3)
    out = anp.random.bernoulli(rng1, np.array([0.0, 1.0, 0.0, 1.0]))
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, [False, True, False, True])


def test_float32_is_kept():
    rng1, rng2 = _rngs()
    z = anp.random.normal(rng1, (4,), dtype=np.float32)
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z, rng2.standard_normal(4, dtype=np.float32))
    assert anp.random.normal(rng1, (2,), loc=1.0, scale=2.0, dtype=np.float32).dtype == np.float32
    assert anp.random.uniform(rng1, (2,), low=-1.0, high=2.0, dtype="float32").dtype == np.float32
    batched = vmap(
        lambda x: x + anp.random.normal(rng1, (3,), dtype=np.float32), randomness="different"
    )(xs.astype(np.float32))
    assert batched.dtype == np.float32


# --- randomness="different" -------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [None, 2, 1])
@pytest.mark.parametrize("name", DRAWS)
def test_different_equals_a_loop(name, chunk_size):
    ours, theirs = DRAWS[name]
    rng1, rng2 = _rngs()
    out = vmap(lambda x: x + ours(rng1), randomness="different", chunk_size=chunk_size)(xs)
    np.testing.assert_array_equal(out, np.stack([x + theirs(rng2) for x in xs]))


def test_different_with_in_dims_and_out_dims():
    rng1, rng2 = _rngs()
    f = lambda x: x * anp.random.uniform(rng1, (3,))
    out = vmap(f, in_dims=1, out_dims=1, randomness="different")(xs.T)
    np.testing.assert_array_equal(out, np.stack([x * rng2.random(3) for x in xs]).T)


def test_different_several_calls_are_independent_per_example():
    rng1, _ = _rngs()
    f = lambda x: anp.stack([anp.random.normal(rng1, (2,)), anp.random.normal(rng1, (2,))]) + x
    out = vmap(f, randomness="different")(np.zeros(4))
    assert out.shape == (4, 2, 2)
    assert len({float(v) for v in out.ravel()}) == out.size  # all draws differ


# --- randomness="same" ------------------------------------------------------------------


@pytest.mark.parametrize("name", DRAWS)
def test_same_shares_one_draw(name):
    ours, theirs = DRAWS[name]
    rng1, rng2 = _rngs()
    out = vmap(lambda x: x + ours(rng1), randomness="same")(xs)
    draw = theirs(rng2)
    np.testing.assert_array_equal(out, xs + draw)
    out = vmap(lambda x: ours(rng1) + 0 * x, randomness="same")(xs)
    np.testing.assert_array_equal(out, np.broadcast_to(theirs(rng2), xs.shape))


def test_same_returns_an_unbatched_value():
    rng1, rng2 = _rngs()
    out = vmap(lambda x: anp.random.normal(rng1, (2,)), randomness="same")(xs)
    np.testing.assert_array_equal(out, np.broadcast_to(rng2.normal(size=2), (5, 2)))


# --- randomness="error" -----------------------------------------------------------------


@pytest.mark.parametrize("name", DRAWS)
def test_error_mode_raises_and_cleans_up(name):
    ours, theirs = DRAWS[name]
    rng1, rng2 = _rngs()
    with pytest.raises(TransformValueError, match=rf"anp\.random\.{name}.*vmap \(level \d+\)"):
        vmap(lambda x: x + ours(rng1))(xs)
    with pytest.raises(TransformValueError, match=r'randomness="different".*randomness="same"'):
        vmap(lambda x: x + ours(rng1), randomness="error")(xs)
    assert current_interpreters() == ()
    # nothing was drawn, and the next call works
    np.testing.assert_array_equal(ours(rng1), theirs(rng2))
    vmap(lambda x: x + ours(rng1), randomness="different")(xs)


@pytest.mark.parametrize(
    ("outer", "inner"),
    [("error", "error"), ("error", "different"), ("error", "same"), ("different", "error"),
     ("same", "error")],
)  # fmt: skip
def test_nested_error_level_raises(outer, inner):
    rng1, _ = _rngs()
    f = vmap(vmap(lambda x: x + anp.random.normal(rng1), randomness=inner), randomness=outer)
    with pytest.raises(TransformValueError, match="randomness="):
        f(xs)
    assert current_interpreters() == ()


# --- nested vmaps -----------------------------------------------------------------------


def _nested(rng, outer, inner):
    inner_f = vmap(lambda x: x + anp.random.normal(rng, (2,)), randomness=inner)
    return vmap(inner_f, randomness=outer)(np.zeros((4, 3)))


def test_nested_different_different_equals_a_double_loop():
    rng1, rng2 = _rngs()
    expected = np.stack([np.stack([rng2.normal(size=2) for _ in range(3)]) for _ in range(4)])
    np.testing.assert_array_equal(_nested(rng1, "different", "different"), expected)


def test_nested_different_same_equals_a_loop_sharing_inside():
    rng1, rng2 = _rngs()
    expected = np.stack([np.broadcast_to(rng2.normal(size=2), (3, 2)) for _ in range(4)])
    np.testing.assert_array_equal(_nested(rng1, "different", "same"), expected)


def test_nested_same_different_shares_across_the_outer_batch():
    rng1, rng2 = _rngs()
    expected = np.broadcast_to(rng2.normal(size=(3, 2)), (4, 3, 2))
    np.testing.assert_array_equal(_nested(rng1, "same", "different"), expected)


def test_nested_same_same_is_one_draw():
    rng1, rng2 = _rngs()
    expected = np.broadcast_to(rng2.normal(size=2), (4, 3, 2))
    np.testing.assert_array_equal(_nested(rng1, "same", "same"), expected)


def test_nested_with_grad_between_vmaps():
    rng1, rng2 = _rngs()
    per_example = grad(lambda mu: anp.sum(anp.random.normal(rng1, (2,), loc=mu) ** 2))
    out = vmap(vmap(per_example, randomness="different"), randomness="different")(np.ones((2, 3)))
    expected = [[np.sum(2 * (1.0 + rng2.normal(size=2))) for _ in range(3)] for _ in range(2)]
    np.testing.assert_allclose(out, expected, rtol=1e-15)


# --- derivatives through the parameters -------------------------------------------------


def test_grad_through_loc_and_scale():
    rng1, rng2 = _rngs()
    f = lambda mu: anp.sum(anp.random.normal(rng1, (5,), loc=mu, scale=2.0))
    assert grad(f)(1.0) == 5.0
    rng1, rng2 = _rngs()
    g = lambda s: anp.sum(anp.random.normal(rng1, (5,), loc=1.0, scale=s))
    assert grad(g)(2.0) == np.sum(rng2.standard_normal(5))


def test_grad_through_low_and_high():
    rng1, rng2 = _rngs()
    g = lambda hi: anp.sum(anp.random.uniform(rng1, (5,), low=-1.0, high=hi))
    assert grad(g)(2.0) == np.sum(rng2.random(5))
    rng1, rng2 = _rngs()
    h = lambda lo: anp.sum(anp.random.uniform(rng1, (5,), low=lo, high=2.0))
    np.testing.assert_allclose(grad(h)(-1.0), 5.0 - np.sum(rng2.random(5)), rtol=1e-15)


def test_jvp_through_loc_and_scale():
    rng1, rng2 = _rngs()
    f = lambda mu, s: anp.random.normal(rng1, (3,), loc=mu, scale=s)
    out, tangent = jvp(f, (1.0, 2.0), (0.5, 1.0))
    z = rng2.normal(size=3)
    np.testing.assert_array_equal(out, 1.0 + 2.0 * z)
    np.testing.assert_array_equal(tangent, 0.5 + z)


def test_vmap_of_grad_over_loc_equals_a_loop():
    rng1, rng2 = _rngs()
    f = lambda mu: anp.sum(anp.random.normal(rng1, (4,), loc=mu, scale=0.5) ** 2)
    mus = np.linspace(-1.0, 1.0, 6)
    out = vmap(grad(f), randomness="different")(mus)
    expected = [np.sum(2 * (mu + 0.5 * rng2.normal(size=4))) for mu in mus]
    np.testing.assert_allclose(out, expected, rtol=1e-15)


def test_batched_parameters_with_same_and_different():
    rng1, rng2 = _rngs()
    locs = np.arange(4.0)
    same = vmap(lambda m: anp.random.normal(rng1, (2,), loc=m), randomness="same")(locs)
    np.testing.assert_array_equal(same, locs[:, None] + rng2.normal(size=2))
    diff = vmap(lambda m: anp.random.normal(rng1, (2,), loc=m), randomness="different")(locs)
    np.testing.assert_array_equal(diff, np.stack([m + rng2.normal(size=2) for m in locs]))
    ps = np.array([0.0, 1.0, 0.0])
    draws = vmap(lambda p: anp.random.bernoulli(rng1, p, (2,)), randomness="different")(ps)
    np.testing.assert_array_equal(draws, [[False, False], [True, True], [False, False]])


# --- bad arguments ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda: anp.random.bernoulli(0, 0.5), TransformTypeError, "default_rng"),
        (
            lambda: anp.random.uniform(np.random.RandomState(0)),
            TransformTypeError,
            r"numpy\.random\.Generator",
        ),
        (lambda: anp.random.normal(np.random.default_rng(), (3.0,)), TransformTypeError, "ints"),
        (lambda: anp.random.normal(np.random.default_rng(), "3"), TransformTypeError, "shape"),
        (lambda: anp.random.uniform(np.random.default_rng(), (-1,)), TransformValueError, "neg"),
        (
            lambda: anp.random.normal(np.random.default_rng(), (3,), dtype=np.int64),
            TransformTypeError,
            "float32",
        ),
        (
            lambda: anp.random.normal(np.random.default_rng(), (3,), scale=-1.0),
            TransformValueError,
            "non-negative",
        ),
        (
            lambda: anp.random.normal(np.random.default_rng(), (3,), loc="a"),
            TransformTypeError,
            "loc must be a real",
        ),
        (
            lambda: anp.random.bernoulli(np.random.default_rng(), 1.5),
            TransformValueError,
            r"in \[0, 1\]",
        ),
        (
            lambda: anp.random.normal(np.random.default_rng(), (3,), loc=np.zeros(2)),
            TransformValueError,
            "broadcast",
        ),
    ],
)
def test_bad_arguments(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# --- NumPy's own draws under vmap ------------------------------------------------------------
# A Generator given to the vmapped function follows randomness; NumPy's draws vmap does
# not see (a closed-over Generator, np.random's functions) are caught after the call
# under randomness="error", where any draw gives every example the same value.

ONE_RNG = np.random.default_rng(SEED)  # a module-level generator a function names


@pytest.mark.parametrize("in_dim", [0, 1])
@pytest.mark.parametrize(
    "method", ["normal", "uniform", "standard_normal", "random", "integers", "exponential"]
)
def test_a_generator_argument_draws_per_example_like_a_loop(method, in_dim):
    args = (0, 10) if method == "integers" else ()
    batch = np.zeros((4, 3)) if in_dim == 0 else np.zeros((3, 4))
    out = vmap(
        lambda x, rng: x + getattr(rng, method)(*args, size=3),
        in_dims=(in_dim, None),
        randomness="different",
    )(batch, np.random.default_rng(SEED))
    loop_rng = np.random.default_rng(SEED)
    loop = np.stack([getattr(loop_rng, method)(*args, size=3) for _ in range(4)])
    np.testing.assert_array_equal(out, loop)


def test_a_generator_argument_follows_same_and_error_and_nests():
    rng = np.random.default_rng(SEED)
    same = vmap(lambda x, r: x + r.normal(), (0, None), randomness="same")(np.zeros(4), rng)
    assert len(set(same.tolist())) == 1
    with pytest.raises(TransformValueError, match=r"Generator argument's normal"):
        vmap(lambda x, r: x + r.normal(), (0, None))(np.zeros(4), rng)
    inner = vmap(lambda x, r: x + r.normal(), (0, None), randomness="different")
    out = vmap(inner, (0, None), randomness="different")(np.zeros((2, 3)), np.random.default_rng(1))
    loop_rng = np.random.default_rng(1)
    np.testing.assert_array_equal(out, [[loop_rng.normal() for _ in range(3)] for _ in range(2)])


def test_a_generator_argument_is_still_a_generator_of_the_same_stream():
    rng = np.random.default_rng(SEED)
    seen = []

    def f(x, r):
        seen.append((isinstance(r, np.random.Generator), r.bit_generator is rng.bit_generator))
        return x

    vmap(f, (0, None))(np.zeros(2), rng)
    assert seen == [(True, True)]


def _helper_drawing():
    return ONE_RNG.normal()


@pytest.mark.parametrize(
    ("func", "source"),
    [
        (lambda: lambda x: x + ONE_RNG.normal(), "Generator it closes over"),
        (lambda: lambda x: x + _helper_drawing(), "Generator it closes over"),
        (lambda: lambda x: x + np.random.normal(), "NumPy's global random functions"),
        (lambda: lambda x: x + np.random.rand(), "NumPy's global random functions"),
        (
            lambda: (lambda rs: lambda x: x + rs.normal())(np.random.RandomState(0)),
            "RandomState it closes over",
        ),
    ],
    ids=["closed-over", "through-a-helper", "np.random.normal", "np.random.rand", "RandomState"],
)
def test_numpy_draws_vmap_cannot_see_raise_under_error(func, source):
    with pytest.raises(TransformValueError, match=f"vmap: func drew from .*{source}") as info:
        vmap(func())(np.zeros(3))
    first = str(info.value).split(". ")[0]
    assert len(first) <= 200 and ("as an argument" in first or "anp.random" in first), first
    out = vmap(func(), randomness="same")(np.zeros(3))  # one shared draw: what "same" says
    assert len(set(out.tolist())) == 1


def test_a_function_that_names_random_but_does_not_draw_passes():
    def f(x, draw=False):
        named = ONE_RNG if draw else None  # named, not drawn from
        return x + (np.random.normal() if named is not None else 0.0)

    np.testing.assert_array_equal(vmap(f)(np.ones(3)), np.ones(3))
