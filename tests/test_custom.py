"""Extending autodiff: user primitives with any subset of rules, custom_vjp and
custom_jvp under every transform (and inside each other), and rule checks."""

import itertools
import warnings

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import custom_jvp, custom_vjp, debug_rules, grad, hessian, jacrev, jvp, vjp, vmap
from autodiff.errors import AutodiffWarning, MissingRuleError, RuleError
from autodiff.extend import Primitive
from autodiff.testing import check_grads, check_vmap
from tests import crosscheck

rng = np.random.default_rng(8)
x2 = np.array([0.4, -1.3])
xs = np.stack([x2, 2 * x2, -x2])

# --- transforms as functions of f, to run every case through every one ------------------

TRANSFORMS = {
    "grad": lambda f: grad(lambda x: anp.sum(f(x)))(x2),
    "vjp": lambda f: vjp(f, x2)[1](np.array([1.0, 2.0]))[0],
    "jvp": lambda f: jvp(f, (x2,), (np.array([0.5, -1.0]),))[1],
    "vmap": lambda f: vmap(f)(xs),
    "vmap(grad)": lambda f: vmap(grad(lambda x: anp.sum(f(x))))(xs),
    "grad(vmap)": lambda f: grad(lambda x: anp.sum(vmap(f)(x)))(xs),
    "grad(grad)": lambda f: grad(lambda x: anp.sum(grad(lambda y: anp.sum(f(y)))(x) ** 2))(x2),
    "jvp(grad)": lambda f: jvp(grad(lambda x: anp.sum(f(x))), (x2,), (np.ones(2),))[1],
    "hessian": lambda f: hessian(lambda x: anp.sum(f(x)))(x2),
    "jacrev": lambda f: jacrev(f)(x2),
}


def _same(got, want):
    for g, w in zip(optree.tree_leaves(got), optree.tree_leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def reference(x):
    """x**3, written with library functions: the value every variant must give."""
    return x * x * x


# --- user primitives with each subset of rules ----------------------------------------------


def _cube_primitive(rules):
    prim = Primitive("cube", lambda x: x**3)
    if "vjp" in rules:
        prim.def_vjp([lambda ct, ans, x: ct * 3.0 * x * x])
    if "jvp" in rules:
        prim.def_jvp([lambda t, ans, x: t * 3.0 * x * x])
    if "batch" in rules:
        prim.def_batch(lambda args, dims: (prim.bind(*args), dims[0]))
    return prim


SUBSETS = [set(s) for n in range(4) for s in itertools.combinations(["vjp", "jvp", "batch"], n)]


@pytest.mark.parametrize("rules", SUBSETS, ids=lambda r: "+".join(sorted(r)) or "none")
@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_user_primitive_with_each_subset_of_rules(rules, name):
    prim = _cube_primitive(rules)
    needs_derivative = name != "vmap"
    run = TRANSFORMS[name]
    if needs_derivative and not rules & {"vjp", "jvp"}:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AutodiffWarning)  # vmap may loop before grad fails
            with pytest.raises(MissingRuleError, match="'cube' has no"):
                run(prim.bind)
        return
    with warnings.catch_warnings():
        # Without a batching rule vmap loops, warning once per primitive.
        warnings.simplefilter("ignore" if "batch" not in rules else "error", AutodiffWarning)
        _same(run(prim.bind), run(reference))


def test_derived_rules_are_exact_to_second_order():
    for rules in ({"vjp", "batch"}, {"jvp", "batch"}):
        check_grads(_cube_primitive(rules).bind, (x2,), order=2)


def test_missing_batching_rule_falls_back_to_a_loop_that_warns_once():
    prim = _cube_primitive({"vjp"})
    with pytest.warns(AutodiffWarning, match="'cube' has no batching rule.*def_batch"):
        check_vmap(lambda x: prim.bind(x), 0, (xs,))  # sizes 3, 1 and 0: one warning


# --- custom_vjp -----------------------------------------------------------------------------


def _custom_vjp_cube():
    calls = {"fwd": 0, "bwd": 0}

    @custom_vjp
    def cube(x):
        return x * x * x

    def fwd(x):
        calls["fwd"] += 1
        return x * x * x, x  # residual: x

    def bwd(x, ct):
        calls["bwd"] += 1
        return (ct * 3.0 * x * x,)

    cube.defvjp(fwd, bwd)
    return cube, calls


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_custom_vjp_under_every_transform(name):
    cube, _ = _custom_vjp_cube()
    _same(TRANSFORMS[name](cube), TRANSFORMS[name](reference))


def test_custom_vjp_uses_its_rule_and_saves_residuals():
    cube, calls = _custom_vjp_cube()
    grad(lambda x: anp.sum(cube(x)))(x2)
    assert calls == {"fwd": 1, "bwd": 1}

    @custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda res, ct: (anp.clip(ct, -1.0, 1.0),))
    assert grad(lambda x: 5.0 * clip_gradient(x))(2.0) == 1.0  # not the true derivative 5
    # jvp transposes bwd (JAX refuses jvp of a custom_vjp function).  Clipping is not
    # linear, so its transpose is taken at its linearisation at 0, the identity: the
    # tangent is the true one, 3 * 5.
    assert jvp(lambda x: clip_gradient(x) * 5.0, (2.0,), (3.0,))[1] == 15.0


def test_custom_vjp_with_pytrees():
    @custom_vjp
    def f(p, s):
        return {"y": p["a"] * s, "z": anp.sum(p["b"])}

    def fwd(p, s):
        return f.fun(p, s), (p, s)

    def bwd(res, ct):
        p, s = res
        return ({"a": ct["y"] * s, "b": ct["z"] * anp.ones_like(p["b"])}, anp.sum(ct["y"] * p["a"]))

    f.defvjp(fwd, bwd)
    p, s = {"a": np.array([1.0, 2.0]), "b": np.array([3.0])}, np.array(4.0)
    _out, vjp_fn = vjp(f, p, s)
    gp, gs = vjp_fn({"y": np.array([1.0, 1.0]), "z": np.array(2.0)})
    np.testing.assert_allclose(gp["a"], [4.0, 4.0])
    np.testing.assert_allclose(gp["b"], [2.0])
    assert gs == 3.0


def test_custom_vjp_errors_are_clear():
    @custom_vjp
    def f(x):
        return x

    with pytest.raises(TypeError, match=r"no rule yet: call f\.defvjp"):
        f(1.0)
    f.defvjp(lambda x: (x, None), lambda res, ct: ct)  # not a tuple
    with pytest.raises(TypeError, match="bwd must return a tuple with one cotangent per argument"):
        grad(f)(1.0)


# --- custom_jvp ------------------------------------------------------------------------------


def _custom_jvp_cube():
    @custom_jvp
    def cube(x):
        return x * x * x

    @cube.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return cube(x), t * 3.0 * x * x

    return cube


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_custom_jvp_under_every_transform(name):
    _same(TRANSFORMS[name](_custom_jvp_cube()), TRANSFORMS[name](reference))


def test_custom_jvp_rule_is_used_everywhere():
    @custom_jvp
    def log1pexp(x):
        return anp.log1p(anp.exp(x))

    @log1pexp.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return log1pexp(x), t * (1 - 1 / (1 + anp.exp(x)))

    x = np.array([1000.0, 0.0])
    with np.errstate(over="ignore", invalid="ignore"):
        naive = grad(lambda x: anp.sum(anp.log1p(anp.exp(x))))(x)
    assert np.isnan(naive[0])  # the naive derivative overflows to inf/inf
    with np.errstate(over="ignore"):  # the primal itself is inf at 1000; its derivative is not
        np.testing.assert_allclose(grad(lambda x: anp.sum(log1pexp(x)))(x), [1.0, 0.5])
        np.testing.assert_allclose(vmap(grad(log1pexp))(x), [1.0, 0.5])


# --- custom rules inside each other ------------------------------------------------------------


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_custom_vjp_and_custom_jvp_inside_each_other(name):
    inner_vjp, _ = _custom_vjp_cube()

    @custom_jvp
    def outer(x):  # cube(x) * 2, via a custom_vjp function
        return inner_vjp(x) * 2.0

    @outer.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return outer(x), 6.0 * x * x * t

    inner_jvp = _custom_jvp_cube()

    @custom_vjp
    def outer2(x):  # cube(x) * 2, via a custom_jvp function
        return inner_jvp(x) * 2.0

    outer2.defvjp(lambda x: (outer2.fun(x), x), lambda x, ct: (ct * 6.0 * x * x,))
    want = TRANSFORMS[name](lambda x: 2.0 * reference(x))
    _same(TRANSFORMS[name](outer), want)
    _same(TRANSFORMS[name](outer2), want)


# --- rule checks -------------------------------------------------------------------------------


def test_rules_are_checked_at_registration():
    with pytest.raises(RuleError, match="given for 2 arguments, but the implementation takes 1"):
        Primitive("p", np.sin, vjp=[lambda ct, a, x: ct, lambda ct, a, x: ct])
    with pytest.raises(
        RuleError, match=r"takes 2 positional arguments; it should take \(ct, ans, \*primals\): 3"
    ):
        Primitive("p", np.sin, vjp=[lambda ct, x: ct])


def _wrong(kind):
    prim = Primitive("wrong", lambda x: x * 2.0)
    prim.def_vjp(lambda ct, ans, x: (anp.sum(ct) if kind == "vjp" else 2.0 * ct,))
    prim.def_jvp([lambda t, ans, x: anp.sum(t) if kind == "jvp" else 2.0 * t])
    prim.def_batch(lambda args, dims: (prim.bind(args[0]), 1 if kind == "batch" else dims[0]))
    return prim


@pytest.mark.parametrize(
    ("kind", "run", "message"),
    [
        (
            "vjp",
            lambda f: grad(lambda x: anp.sum(f(x)))(np.ones(3)),
            r"the VJP rule of primitive 'wrong' returned shape \(\) for argument 0, "
            r"which has shape \(3,\)",
        ),
        (
            "jvp",
            lambda f: jvp(f, (np.ones(3),), (np.ones(3),)),
            r"the JVP rule of primitive 'wrong' returned shape \(\) for an output of shape \(3,\)",
        ),
        (
            "batch",
            lambda f: vmap(f)(np.ones((4, 3))),
            r"the batching rule of primitive 'wrong' returned shape \(4, 3\) with batch axis 1",
        ),
    ],
)
def test_debug_rules_catches_wrong_rules(kind, run, message):
    f = lambda x: _wrong(kind).bind(x)
    with debug_rules(), pytest.raises(RuleError, match=message):
        run(f)


# --- nondiff_argnums: JAX's signature and semantics -------------------------------------------
# The fixed-point recipe of JAX's documentation ("Custom derivative rules for JAX-transformable
# Python functions"), written exactly as there with autodiff's spellings of jax's names.


def _fixed_point_recipe(custom_vjp, vjp, while_loop, jnp):
    from functools import partial

    @partial(custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f, a, x_guess):
        def cond_fun(carry):
            x_prev, x = carry
            return jnp.abs(x_prev - x) > 1e-6

        def body_fun(carry):
            _, x = carry
            return x, f(a, x)

        _, x_star = while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star

    def fixed_point_fwd(f, a, x_init):
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def fixed_point_rev(f, res, x_star_bar):
        a, x_star = res
        _, vjp_a = vjp(lambda a: f(a, x_star), a)
        (a_bar,) = vjp_a(fixed_point(partial(rev_iter, f), (a, x_star, x_star_bar), x_star_bar))
        return a_bar, jnp.zeros_like(x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)

    def newton_sqrt(a):
        update = lambda a, x: 0.5 * (x + a / x)
        return fixed_point(update, a, a)

    return newton_sqrt


def test_jax_fixed_point_recipe_runs_unchanged():
    import autodiff

    newton_sqrt = _fixed_point_recipe(autodiff.custom_vjp, autodiff.vjp, autodiff.while_loop, anp)
    a = 2.0
    assert np.isclose(newton_sqrt(a), np.sqrt(a))
    assert np.isclose(grad(newton_sqrt)(a), 0.5 / np.sqrt(a), rtol=1e-8)
    assert np.isclose(grad(grad(newton_sqrt))(a), -0.25 * a**-1.5, rtol=1e-6)
    np.testing.assert_allclose(vmap(grad(newton_sqrt))(np.array([1.0, 4.0])), [0.5, 0.25])
    assert np.isclose(autodiff.jit(grad(newton_sqrt))(a), 0.5 / np.sqrt(a), rtol=1e-8)
    assert np.isclose(jvp(newton_sqrt, (a,), (1.0,))[1], 0.5 / np.sqrt(a), rtol=1e-8)

    jax = crosscheck.jax()
    reference = _fixed_point_recipe(jax.custom_vjp, jax.vjp, jax.lax.while_loop, jax.numpy)
    for order in (grad, lambda f: grad(grad(f))):
        jax_order = jax.grad if order is grad else lambda f: jax.grad(jax.grad(f))
        assert np.isclose(order(newton_sqrt)(a), jax_order(reference)(a), rtol=1e-7)


def _clipped(custom_vjp):
    def apply(f, x, bound):
        return f(x)

    def bwd(f, bound, x, ct):  # the non-differentiable arguments first, in order
        assert f is anp.square
        return (anp.clip(ct * 2 * x, -bound, bound),)

    clipped = custom_vjp(apply, nondiff_argnums=(0, 2))
    clipped.defvjp(lambda f, x, bound: (f(x), x), bwd)
    return clipped


def test_custom_vjp_nondiff_arguments_come_first_in_bwd():
    clipped = _clipped(custom_vjp)
    x = np.array([0.5, 3.0])
    np.testing.assert_allclose(grad(lambda x: clipped(anp.square, x, 2.0).sum())(x), [1.0, 2.0])
    np.testing.assert_allclose(
        vmap(grad(lambda x: clipped(anp.square, x, 2.0).sum()))(np.stack([x, -x])),
        [[1.0, 2.0], [-1.0, -2.0]],
    )
    # by keyword, matched to positions as in JAX
    np.testing.assert_allclose(
        grad(lambda x: clipped(anp.square, bound=2.0, x=x).sum())(x), [1.0, 2.0]
    )
    # nondiff_argnames names the same positions
    by_name = custom_vjp(lambda f, x: f(x), nondiff_argnames=("f",))
    by_name.defvjp(lambda f, x: (f(x), x), lambda f, x, ct: (ct * 3.0,))
    assert by_name.nondiff_argnums == (0,)
    assert grad(lambda x: by_name(anp.sin, x))(0.3) == 3.0


def test_custom_jvp_nondiff_arguments_match_jax():
    jax = crosscheck.jax()

    def make(custom_jvp, np_):
        def f(fn, scale, x):
            return scale * fn(x)

        g = custom_jvp(f, nondiff_argnums=(0, 1))

        @g.defjvp
        def _(fn, scale, primals, tangents):
            (x,), (t,) = primals, tangents
            return g(fn, scale, x), scale * np_.cos(x) * t  # fn is sin here

        return g

    ours, theirs = make(custom_jvp, anp), make(jax.custom_jvp, jax.numpy)
    x, scale = np.array([0.3, 1.1]), np.array([2.0, -1.0])
    # an array among the non-differentiable arguments, traced: a constant (stop_gradient)
    got = grad(lambda s, x: ours(anp.sin, s, x).sum(), argnums=(0, 1))(scale, x)
    want = jax.grad(lambda s, x: theirs(jax.numpy.sin, s, x).sum(), argnums=(0, 1))(scale, x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    np.testing.assert_allclose(got[0], 0.0)
    # ... at every order: the rule's own use of scale carries no derivative either
    second = grad(lambda s: grad(lambda x: ours(anp.sin, s, x).sum())(x).sum())(scale)
    jax_second = jax.grad(lambda s: jax.grad(lambda x: theirs(jax.numpy.sin, s, x).sum())(x).sum())(
        scale
    )
    np.testing.assert_allclose(second, jax_second, atol=1e-15)
    got = jvp(lambda x: ours(anp.sin, scale, x), (x,), (np.ones(2),))[1]
    want = jax.jvp(lambda x: theirs(jax.numpy.sin, scale, x), (x,), (np.ones(2),))[1]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    batch = np.stack([x, 2 * x, -x])
    got = vmap(grad(lambda x, s: ours(anp.sin, s, x).sum()))(batch, np.stack([scale] * 3))
    want = jax.vmap(jax.grad(lambda x, s: theirs(jax.numpy.sin, s, x).sum()))(
        batch, np.stack([scale] * 3)
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)
