"""jit: composition with every transform (both ways, any depth), retracing exactly when
the signature changes, the error paths, threads, randomness, array libraries.

Results are compared with the same computation without jit (which the rest of the
suite checks against finite differences) and, for derivatives, with finite
differences directly (``check_grads``)."""

import threading

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import (
    checkpoint,
    custom_jvp,
    custom_vjp,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jit,
    jvp,
    linearize,
    make_graph,
    vjp,
    vmap,
)
from autodiff.errors import ConcretizationError, LeakedTracerError, TransformTypeError
from autodiff.extend import current_interpreters
from autodiff.testing import check_grads

rng = np.random.default_rng(0)
X = rng.uniform(0.2, 0.9, (3, 4))
W = rng.uniform(-1.0, 1.0, (4,))


def loss(x, w):
    return anp.sum(anp.tanh(x @ w) ** 2) + anp.sum(anp.sin(x) * 1.5)


def close(a, b, rtol=1e-12):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-13)


# --- composition ---------------------------------------------------------------------------------


def test_jit_equals_the_function():
    close(jit(loss)(X, W), loss(X, W))


@pytest.mark.parametrize(
    "make",
    [
        lambda f: jit(grad(f, argnums=(0, 1))),
        lambda f: grad(jit(f), argnums=(0, 1)),
        lambda f: jit(grad(jit(f), argnums=(0, 1))),
        lambda f: grad(jit(jit(f)), argnums=(0, 1)),
    ],
    ids=["jit(grad)", "grad(jit)", "jit(grad(jit))", "grad(jit(jit))"],
)
def test_gradients_both_ways(make):
    want = grad(loss, argnums=(0, 1))(X, W)
    for got, w in zip(make(loss)(X, W), want, strict=True):
        close(got, w)


def test_grad_of_jit_against_finite_differences():
    check_grads(jit(loss), (X, W), order=2, modes=("fwd", "rev"))


def test_vmap_both_ways_and_nested():
    xs = np.stack([X, 2 * X, 3 * X])
    want = vmap(loss, in_dims=(0, None))(xs, W)
    close(vmap(jit(loss), in_dims=(0, None))(xs, W), want)
    close(jit(vmap(loss, in_dims=(0, None)))(xs, W), want)
    close(jit(vmap(jit(loss), in_dims=(0, None)))(xs, W), want)
    # the batch axis elsewhere, and vmap of vmap over jit
    close(vmap(jit(loss), in_dims=(2, None))(np.moveaxis(xs, 0, 2), W), want)
    xss = np.stack([xs, xs + 1])
    close(vmap(vmap(jit(loss), in_dims=(0, None)), in_dims=(0, None))(xss, W),
          vmap(vmap(loss, in_dims=(0, None)), in_dims=(0, None))(xss, W))  # fmt: skip


def test_per_example_gradients_both_ways():
    xs = np.stack([X, 2 * X, 3 * X])
    g = grad(loss, argnums=1)
    want = vmap(g, in_dims=(0, None))(xs, W)
    close(jit(vmap(g, in_dims=(0, None)))(xs, W), want)
    close(vmap(jit(g), in_dims=(0, None))(xs, W), want)
    close(vmap(grad(jit(loss), argnums=1), in_dims=(0, None))(xs, W), want)


def test_jvp_both_ways():
    t = (np.ones_like(X), np.full_like(W, 0.5))
    want = jvp(loss, (X, W), t)
    for got in (jvp(jit(loss), (X, W), t), jit(lambda a, b: jvp(loss, (a, b), t))(X, W)):
        close(got[0], want[0])
        close(got[1], want[1])


def test_hessian_under_jit_and_of_jit():
    f = lambda w: loss(X, w)
    want = hessian(f)(W)
    close(jit(hessian(f))(W), want)
    close(hessian(jit(f))(W), want)
    close(jacfwd(jacrev(jit(f)))(W), want)
    close(jacrev(jacfwd(jit(f)))(W), want)


def test_third_order_through_jit():
    f = jit(lambda x: anp.sum(anp.sin(x) * x))
    x = np.array([0.3, 0.7])
    third = grad(lambda x: grad(lambda y: grad(f)(y).sum())(x).sum())
    close(third(x), -3 * np.sin(x) - x * np.cos(x))


def test_linearize_and_vjp_of_jit():
    f = jit(lambda x: anp.sin(x) * x)
    x = np.array([0.3, 0.7])
    out, jvp_fn = linearize(f, x)
    close(out, np.sin(x) * x)
    close(jvp_fn(np.ones(2)), np.cos(x) * x + np.sin(x))
    out, vjp_fn = vjp(f, x)
    close(vjp_fn(np.ones(2))[0], np.cos(x) * x + np.sin(x))


def test_jit_inside_jit_is_inlined():
    inner = jit(lambda x: anp.sin(x) * 2.0)
    outer = jit(lambda x: inner(x) + inner(x + 1.0))
    x = np.array([0.1, 0.2])
    close(outer(x), np.sin(x) * 2 + np.sin(x + 1) * 2)
    names = make_graph(outer)(x).primitives()
    assert "jit_call" not in names and names["sin"] == 2


def test_a_closed_over_traced_value_keeps_its_derivative():
    # x is a tracer of grad, outside the staging: it becomes an input of the graph
    g = grad(lambda x: jit(lambda y: x * y)(2.0))(3.0)
    close(g, 2.0)
    h = grad(lambda x: jit(lambda y: anp.sin(x) * y)(np.ones(2)).sum())(0.5)
    close(h, 2 * np.cos(0.5))


def test_checkpoint_inside_jit():
    block = checkpoint(lambda h, w: anp.tanh(h * w))
    f = lambda x, w: anp.sum(block(block(x, w), w))
    want = grad(f, argnums=(0, 1))(X, W)
    for got, w in zip(jit(grad(f, argnums=(0, 1)))(X, W), want, strict=True):
        close(got, w)
    for got, w in zip(grad(jit(f), argnums=(0, 1))(X, W), want, strict=True):
        close(got, w)
    # replayed, the checkpoint is inlined: no Python function runs
    assert not any("checkpoint" in name for name in jit(f).graph(X, W).primitives())


def test_checkpoint_closing_over_a_traced_value_under_jit():
    def f(x, w):
        return anp.sum(checkpoint(lambda h: anp.tanh(h * w))(x))

    want = grad(lambda x, w: anp.sum(anp.tanh(x * w)), argnums=(0, 1))(X, W)
    for got, w in zip(jit(grad(f, argnums=(0, 1)))(X, W), want, strict=True):
        close(got, w)


def test_custom_vjp_and_custom_jvp_inside_jit():
    @custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda res, ct: (anp.clip(ct, -1.0, 1.0),))

    @custom_jvp
    def log1pexp(x):
        return anp.log1p(anp.exp(x))

    @log1pexp.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return log1pexp(x), t * (1 - 1 / (1 + anp.exp(x)))

    f = lambda x: anp.sum(5.0 * clip_gradient(x)) + anp.sum(log1pexp(100.0 * x))
    x = np.array([0.5, 1.0])
    want = np.array([1.0 + 100.0, 1.0 + 100.0])  # the custom rules, not the naive ones
    close(grad(f)(x), want)
    close(jit(grad(f))(x), want)
    close(grad(jit(f))(x), want)
    close(jit(f)(x), f(x))
    close(vmap(grad(jit(f)))(np.stack([x, x])), np.stack([want, want]))


def test_custom_vjp_closing_over_a_traced_value_is_staged_with_it():
    def f(x, s):
        @custom_vjp
        def g(y):
            return y * s

        g.defvjp(lambda y: (y * s, None), lambda res, ct: (ct,))  # (not g's derivative in y)
        return anp.sum(g(x))

    close(jit(f)(X, 2.0), f(X, 2.0))
    # the rule for x (ones), the function's code for the closed-over s (sum of x)
    for fn in (grad(f, (0, 1)), jit(grad(f, (0, 1))), grad(jit(f), (0, 1))):
        close(fn(X, 2.0)[0], np.ones_like(X))
        close(fn(X, 2.0)[1], np.sum(X))


def test_pytrees_keyword_arguments_and_outputs():
    def f(params, x, *, scale):
        return {"out": params["w"] * x * scale, "aux": (x.sum(), "label")}

    params = {"w": np.array([1.0, 2.0])}
    x = np.array([3.0, 4.0])
    got = jit(f)(params, x, scale=2.0)
    assert got["aux"][1] == "label"
    close(got["out"], params["w"] * x * 2)
    g = grad(lambda p: jit(f)(p, x, scale=2.0)["out"].sum())(params)
    close(g["w"], x * 2)


def test_python_scalars_are_weakly_typed():
    f = jit(lambda x, c: x * c)
    x32 = np.ones(3, np.float32)
    assert f(x32, 2.0).dtype == np.float32 == (x32 * 2.0).dtype
    assert f(x32, np.float64(2.0)).dtype == (x32 * np.float64(2.0)).dtype == np.float64


def test_float32_stays_float32_under_jit_of_grad():
    x = np.linspace(0.1, 0.5, 4, dtype=np.float32)
    g = jit(grad(lambda x: anp.sum(anp.tanh(x) * 2.0)))(x)
    assert g.dtype == np.float32
    close(g, 2 * (1 - np.tanh(x) ** 2), rtol=1e-6)


def test_outputs_that_are_constants_or_inputs_are_fresh_arrays():
    f = jit(lambda x: (x, np.ones(2), 3.0))
    x = np.zeros(2)
    for _ in range(3):  # interpreted, compiled, replayed
        a, b, c = f(x)
        assert a is not x and not np.shares_memory(a, x) and c == 3.0
        a[0] = 7.0  # writing into a returned input changes neither the input...
        b[0] = 5.0  # ...nor, for a returned constant, what later calls return
        assert x[0] == 0.0 and f(x)[1][0] == 1.0


# --- the cache ------------------------------------------------------------------------------------


def test_retraces_exactly_when_the_signature_changes():
    calls = []

    def f(x, n):
        calls.append(1)
        return x * n

    jf = jit(f, static_argnums=1)
    x = np.ones(3)
    jf(x, 2)
    jf(2 * x, 2)  # same signature: no trace
    assert len(calls) == 1
    jf(x, 3)  # new static value
    jf(np.ones(4), 3)  # new shape
    jf(np.ones(4, np.float32), 3)  # new dtype
    jf((np.ones(4),)[0], 3)
    jf(1.0, 3)  # a Python scalar
    jf(np.float64(1.0), 3)  # a NumPy scalar: another signature
    assert len(calls) == 6
    info = jf.cache_info()
    assert info.traces == 6 and info.size == 6 and info.misses == 6
    assert "f64[3]" in info.signatures[0] and "1=2 (static)" in info.signatures[0]
    jf(x, n=2)  # static by name too (the same parameter)
    assert len(calls) == 7  # passed by keyword: another structure


def test_the_cache_is_bounded():
    jf = jit(lambda x: x + 1.0, maxsize=2)
    for n in range(1, 5):
        jf(np.ones(n))
    info = jf.cache_info()
    assert info.size == 2 and info.traces == 4
    jf(np.ones(4))  # still cached
    jf(np.ones(1))  # evicted: staged again
    assert jf.cache_info().traces == 5


def test_static_arguments_must_be_hashable():
    jf = jit(lambda x, shape: anp.reshape(x, shape), static_argnums=1)
    with pytest.raises(TransformTypeError, match=r"static argument 1 is a list.*hashable"):
        jf(np.ones(4), [2, 2])
    assert jf(np.ones(4), (2, 2)).shape == (2, 2)


def test_non_array_arguments_name_static_argnums():
    with pytest.raises(TransformTypeError, match="static_argnums"):
        jit(lambda x, mode: x)(np.ones(2), "fast")
    assert jit(lambda x, mode: x * (2 if mode == "fast" else 1), static_argnames="mode")(
        np.ones(2), mode="fast"
    ).tolist() == [2.0, 2.0]


def test_an_error_while_staging_leaves_no_entry_and_no_stack():
    calls = []

    def f(x):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first call fails")
        return x * 2

    jf = jit(f)
    with pytest.raises(ValueError, match="first call fails"):
        jf(np.ones(2))
    assert jf.cache_info().size == 0
    assert current_interpreters() == ()
    close(jf(np.ones(2)), 2 * np.ones(2))


def test_threads_share_one_jitted_function():
    calls = []

    def f(x):
        calls.append(1)
        return anp.sin(x) * 2.0

    jf = jit(f)
    results = {}
    barrier = threading.Barrier(8)

    def work(k):
        barrier.wait()
        for i in range(20):
            x = np.full(3, 0.1 * k + 0.01 * i)
            got = jf(x) if i % 2 else grad(lambda y: jf(y).sum())(x)
            want = np.sin(x) * 2 if i % 2 else 2 * np.cos(x)
            results[(k, i)] = np.allclose(got, want)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 160 and all(results.values())
    assert len(calls) == 1  # one signature: staged once, however many threads asked


# --- errors ---------------------------------------------------------------------------------------


def test_python_control_flow_on_a_staged_value_names_the_ways_out():
    def f(x):
        return x if x.sum() > 0 else -x

    with pytest.raises(ConcretizationError) as info:
        jit(f)(np.ones(2))
    message = str(info.value)
    for name in ("static_argnums", "static_argnames", "anp.where", "autodiff.cond",
                 "autodiff.while_loop"):  # fmt: skip
        assert name in message
    for convert in (float, int, bool, lambda x: x.item(), np.asarray):
        with pytest.raises(ConcretizationError):
            jit(lambda x, c=convert: c(x.sum()))(np.ones(2))


def test_a_leaked_staged_value_raises():
    leaked = []

    @jit
    def f(x):
        leaked.append(x * 2)
        return x

    f(np.ones(2))
    with pytest.raises(LeakedTracerError, match="StagedTensor"):
        anp.sin(leaked[0])
    with pytest.raises(LeakedTracerError):
        jit(lambda y: y + leaked[0])(np.ones(2))


def test_bad_arguments_of_jit():
    with pytest.raises(TransformTypeError, match="callable"):
        jit(3)
    with pytest.raises(TransformTypeError, match="static_argnums"):
        jit(lambda x: x, static_argnums="x")
    with pytest.raises(ValueError, match="maxsize"):
        jit(lambda x: x, maxsize=0)


# --- randomness -----------------------------------------------------------------------------------


def noisy(x, rng):
    return x + anp.random.normal(rng, (3,), scale=0.5)


def test_draws_happen_at_every_call_from_the_generator_argument():
    jf = jit(noisy)
    a, b = np.random.default_rng(0), np.random.default_rng(0)
    x = np.zeros(3)
    for _ in range(3):
        np.testing.assert_array_equal(jf(x, a), noisy(x, b))
    assert jf.cache_info().traces == 1
    assert "random_normal" in make_graph(noisy)(x, a).primitives()


def test_draws_are_never_folded_merged_or_dropped():
    def f(x, rng):
        unused = anp.random.uniform(rng, (2,))  # noqa: F841  (advances the generator)
        return x + anp.random.uniform(rng, (2,)) - anp.random.uniform(rng, (2,))

    a, b = np.random.default_rng(1), np.random.default_rng(1)
    x = np.zeros(2)
    np.testing.assert_array_equal(jit(f)(x, a), f(x, b))
    assert jit(f).graph(x, a).primitives()["random_uniform"] == 3


def test_a_closed_over_generator_and_the_legacy_functions_draw_at_replay():
    gen = np.random.default_rng(2)
    jf = jit(lambda x: x * anp.random.uniform(gen, (3,)))
    first, second = jf(np.ones(3)), jf(np.ones(3))
    assert not np.array_equal(first, second)
    np.random.seed(0)
    legacy = jit(lambda x: x + anp.random.randn(3))
    got = [legacy(np.zeros(3)), legacy(np.zeros(3))]
    np.random.seed(0)
    want = [np.random.randn(3), np.random.randn(3)]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["different", "same"])
def test_vmap_randomness_holds_under_jit(mode):
    xs = np.zeros((4, 3))
    eager = vmap(noisy, in_dims=(0, None), randomness=mode)
    for stack in (jit(eager), vmap(jit(noisy), in_dims=(0, None), randomness=mode)):
        a, b = np.random.default_rng(3), np.random.default_rng(3)
        np.testing.assert_array_equal(stack(xs, a), eager(xs, b))


def test_vmap_randomness_error_holds_under_jit():
    with pytest.raises(ValueError, match="randomness='error'"):
        vmap(jit(noisy), in_dims=(0, None))(np.zeros((4, 3)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="randomness='error'"):
        jit(vmap(noisy, in_dims=(0, None)))(np.zeros((4, 3)), np.random.default_rng(0))


def test_gradients_through_reparameterised_draws():
    f = lambda mu, rng: anp.sum(anp.random.normal(rng, (3,), loc=mu) ** 2)
    a, b = np.random.default_rng(4), np.random.default_rng(4)
    mu = np.array([0.1, 0.2, 0.3])
    close(jit(grad(f))(mu, a), grad(f)(mu, b))
    a, b = np.random.default_rng(4), np.random.default_rng(4)
    close(grad(jit(f))(mu, a), grad(f)(mu, b))


# --- array libraries ------------------------------------------------------------------------------


def test_dask_arrays_stay_lazy():
    da = pytest.importorskip("dask.array")
    x = da.from_array(X, chunks=(2, 4))
    out = jit(lambda x, w: anp.tanh(x @ w) * 2.0 + 1.0)(x, W)
    assert isinstance(out, da.Array)
    close(out.compute(), np.tanh(X @ W) * 2 + 1)
    g = jit(grad(lambda x: anp.sum(anp.sin(x) ** 2)))(x)
    assert isinstance(g, da.Array)
    close(g.compute(), 2 * np.sin(X) * np.cos(X))


def test_integer_outputs_of_a_jitted_function_carry_no_derivative():
    order = jit(lambda x: (anp.argsort(x), x * 2.0))
    take = jit(lambda x, i: x[i] * 2.0)

    def f(x):
        idx, y = order(x)
        return anp.sum(take(y, idx) ** 2)  # idx: an integer output, then an input

    x = np.array([0.3, -0.2, 0.5])
    close(grad(f)(x), 32 * x)
    close(jit(grad(f))(x), 32 * x)
    _, jvp_fn = linearize(grad(f), x)
    close(jvp_fn(np.ones(3)), np.full(3, 32.0))


def test_debug_nans_runs_the_function_itself():
    f = jit(lambda x: anp.log(x) * 2.0)
    g = grad(lambda x: f(x).sum())
    g(np.ones(2))  # staged and compiled
    with pytest.raises(autodiff.errors.NonFiniteError, match="'log'"), autodiff.debug_nans():
        g(np.array([1.0, -1.0]))


@pytest.mark.interpreted
def test_the_first_call_interprets_and_the_second_compiles(monkeypatch):
    from autodiff.compiler import tiers

    compiled = []
    real = tiers.replay
    monkeypatch.setattr(tiers, "replay", lambda *a, **k: compiled.append(a) or real(*a, **k))
    c = np.arange(3.0)
    f = jit(lambda x: (anp.sin(x) * 2.0 + 1.0, c))
    x = np.linspace(0.0, 1.0, 3)
    want = np.sin(x) * 2.0 + 1.0
    first = f(x)
    assert not compiled  # the staged graph ran as it is
    first[1][0] = 99.0  # a constant returned is the caller's copy
    second = f(x)
    assert len(compiled) == 1
    np.testing.assert_array_equal(first[0], want)
    np.testing.assert_array_equal(second[0], want)
    np.testing.assert_array_equal(second[1], np.arange(3.0))
    f(x)
    assert len(compiled) == 1 and f.cache_info().misses == 1
    with tiers.compile_at_once():
        g = jit(lambda x: x * 3.0)
        g(x)
    assert len(compiled) == 2
