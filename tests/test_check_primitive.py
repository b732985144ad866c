"""``autodiff.testing.check_primitive``: each check passes on correct rules and
names the rule, the argument and the worst element on wrong ones."""

import re

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff.core.arrays import batch_size_of, ndim_of, shape_of
from autodiff.core.primitive import Primitive
from autodiff.errors import RuleError
from autodiff.rules._helpers import bring_to_front, unbroadcast
from autodiff.testing import PrimitiveReport, check_primitive

X = np.array([1.0, 2.0])
ALL_CHECKS = ["forward", "VJP", "JVP", "VJP vs JVP", "second order", "batching"]
WITH_TAYLOR = [*ALL_CHECKS, "Taylor"]  # a primitive with a Taylor rule of its own


def exact(text):
    return "^" + re.escape(text) + "$"


def cube(*, vjp=None, jvp=None, batch=None):
    """x**3 with correct rules unless others are given ('none': leave it out)."""
    vjp = vjp or (lambda ct, ans, x: ct * 3 * x**2)
    jvp = jvp or (lambda t, ans, x: t * 3 * x**2)
    batch = batch or (lambda args, dims: (p.bind(*args), dims[0]))
    p = Primitive(
        "cube",
        lambda x: x**3,
        vjp=None if vjp == "none" else [vjp],
        jvp=None if jvp == "none" else [jvp],
        batch=None if batch == "none" else batch,
    )
    return p


def _xy2_batch(args, dims):
    """Batch axes to the front, unbatched operands broadcast, ranks padded."""
    size = batch_size_of(args, dims)
    rank = max(ndim_of(a) - (d is not None) for a, d in zip(args, dims, strict=True))
    padded = []
    for a, d in zip(args, dims, strict=True):
        a = bring_to_front(a, d, size)
        pad = rank - (ndim_of(a) - 1)  # unit axes each example needs to broadcast
        padded.append(anp.expand_dims(a, tuple(range(1, 1 + pad))))
    return xy2_p.bind(*padded), 0


xy2_p = Primitive(
    "xy2",
    lambda x, y: x * y**2,
    vjp=[
        lambda ct, ans, x, y: unbroadcast(ct * y**2, shape_of(x)),
        lambda ct, ans, x, y: unbroadcast(ct * 2 * x * y, shape_of(y)),
    ],
    jvp=[lambda t, ans, x, y: t * y**2, lambda t, ans, x, y: t * 2 * x * y],
    batch=_xy2_batch,
)


def colsum(*, vjp=None, batch=None):
    """x.sum(axis) with a static parameter, like the library's reductions."""
    vjp = vjp or (lambda ct, ans, x, *, axis: anp.broadcast_to(anp.expand_dims(ct, axis), x.shape))

    def correct_batch(args, dims, *, axis):
        d = dims[0]
        moved = axis + (axis >= d)  # the summed axis, counted in the batched value
        return p.bind(args[0], axis=moved), d - (moved < d)

    p = Primitive(
        "colsum",
        lambda x, *, axis: x.sum(axis=axis),
        vjp=[vjp],
        jvp=[lambda t, ans, x, *, axis: p.bind(t, axis=axis)],
        batch=batch or correct_batch,
    )
    return p


# --- passing ------------------------------------------------------------------------------


def test_correct_rules_pass_and_the_report_lists_the_checks():
    report = check_primitive(cube(), (X,), (np.array([[0.5, -1.0], [3.0, 0.0]]),))
    assert isinstance(report, PrimitiveReport)
    assert report.checks_run == ALL_CHECKS
    assert report.missing == []
    assert report.samples == 2
    assert set(report.worst_errors) == set(ALL_CHECKS) - {"second order"}
    assert all(0 <= e < 1 for e in report.worst_errors.values())
    text = str(report)
    assert text.startswith("check_primitive('cube'): passed on 2 sample(s)\n  forward ")
    assert "  second order  ok\n" in text
    assert text.endswith("\n  missing: nothing")


def test_broadcasting_two_argument_primitive_passes_for_every_in_dims():
    samples = [
        (np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]]), np.array([0.5, -2.0, 1.5])),
        (np.array(1.5), np.array([1.0, -3.0])),
    ]
    assert check_primitive(xy2_p, *samples).checks_run == ALL_CHECKS


def test_complex_and_float32_samples_pass():
    z = np.array([1.0 + 2.0j, -0.5 + 0.1j])
    assert check_primitive(cube(), (z,), (X.astype(np.float32),)).checks_run == ALL_CHECKS


def test_static_parameters_reach_every_rule():
    x = np.arange(6.0).reshape(2, 3)
    assert check_primitive(colsum(), (x,), axis=0).checks_run == ALL_CHECKS
    assert check_primitive(colsum(), (x,), axis=1).checks_run == ALL_CHECKS


def test_library_primitives_pass():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    z = a + 1j * rng.standard_normal((2, 3))
    assert check_primitive(anp.sin.primitive, (a,), (z,)).checks_run == WITH_TAYLOR
    f32 = (a.astype(np.float32), b.astype(np.float32))
    assert check_primitive(anp.matmul.primitive, (a, b), f32, (z, b)).checks_run == WITH_TAYLOR
    report = check_primitive(anp.sum.primitive, (a,), (z,), axis=(0,), keepdims=False)
    assert report.checks_run == WITH_TAYLOR
    # multiple results: Q and R (Taylor mode pushes its JVP rule through: nothing to check)
    report = check_primitive(
        anp.linalg.qr.primitive, (rng.standard_normal((3, 2)),), mode="reduced"
    )
    assert report.checks_run == ALL_CHECKS
    floor = check_primitive(anp.floor.primitive, (a,))
    assert (floor.checks_run, floor.missing) == (["forward", "batching"], [])


# --- derivative rules -------------------------------------------------------------------


def test_wrong_vjp_rule_names_the_argument_and_the_worst_element():
    wrong = cube(vjp=lambda ct, ans, x: ct * 2 * x**2)
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('cube'): VJP rule wrong for argument 0, d output[1] / d input[1]: "
            "the rule gives 8.0, finite differences give 12.0 (sample 0; worst of 4 elements)"
        ),
    ):
        check_primitive(wrong, (X,))


def test_wrong_jvp_rule_for_the_second_argument_in_a_later_sample():
    # Sample 0 passes: an integer argument has no derivative to check.
    p = Primitive(
        "xy2",
        xy2_p.impl,
        jvp=[lambda t, ans, x, y: t * y**2, lambda t, ans, x, y: t * x * y],
    )
    samples = [(X, np.array([1, 2])), (np.array([[1.0], [2.0]]), np.array([1.0, 3.0]))]
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('xy2'): JVP rule wrong for argument 1, d output[1, 1] / d input[1]: "
            "the rule gives 6.0, finite differences give 12.0 (sample 1; worst of 8 elements)"
        ),
    ):
        check_primitive(p, *samples)


def test_vjp_and_jvp_must_agree_beyond_finite_difference_accuracy():
    slightly_off = cube(vjp=lambda ct, ans, x: ct * 3 * x**2 * (1 + 1e-8))
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('cube'): VJP and JVP rules disagree for argument 0, d output[1] / "
            "d input[1]: the VJP rule gives 12.0, the JVP rule 12.0 (sample 0; worst of 4 elements)"
        ),
    ):
        check_primitive(slightly_off, (X,))


def test_complex_rules_follow_the_non_conjugating_convention():
    z = (np.array([1.0 + 2.0j]),)
    assert check_primitive(cube(), z).checks_run == ALL_CHECKS
    conjugating = cube(vjp=lambda ct, ans, x: ct * anp.conj(3 * x**2))
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('cube'): VJP rule wrong for argument 0, d Re output / d Im input: "
            "the rule gives 12.0, finite differences give -12.0 (sample 0; worst of 4 elements)"
        ),
    ):
        check_primitive(conjugating, ((z[0][0],)))


def test_vjp_rule_with_the_wrong_shape():
    forgot_to_broadcast = colsum(vjp=lambda ct, ans, x, *, axis: ct)
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('colsum'): VJP rule returned shape (3,) for argument 0 of "
            "shape (2, 3) (sample 0)"
        ),
    ):
        check_primitive(forgot_to_broadcast, (np.ones((2, 3)),), axis=0)


def test_complex_argument_needs_a_complex_cotangent():
    real_ct = cube(vjp=lambda ct, ans, x: anp.real(ct * 3 * x**2))
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('cube'): VJP rule returned float64 for argument 0 of dtype complex128 "
            "(sample 0)"
        ),
    ):
        check_primitive(real_ct, (np.array([1.0 + 1.0j]),))


def test_jvp_rule_must_keep_the_output_dtype_and_shape():
    promotes = cube(jvp=lambda t, ans, x: t * np.float64(3.0) * x**2)
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('cube'): JVP rule returned float64 for the output (tangent of "
            "argument 0) of dtype float32 (sample 0)"
        ),
    ):
        check_primitive(promotes, (X.astype(np.float32),))
    summed = cube(jvp=lambda t, ans, x: anp.sum(t * 3 * x**2))
    with pytest.raises(
        AssertionError,
        match=re.escape(
            "JVP rule returned shape () for the output (tangent of argument 0) of shape (2,)"
        ),
    ):
        check_primitive(summed, (X,))


def _xy2_declaring(vjp_reads):
    return Primitive(
        "xy2",
        xy2_p.impl,
        vjp=[
            lambda ct, ans, x, y: unbroadcast(ct * y**2, shape_of(x)),
            lambda ct, ans, x, y: unbroadcast(ct * 2 * x * y, shape_of(y)),
        ],
        jvp=[lambda t, ans, x, y: t * y**2, lambda t, ans, x, y: t * 2 * x * y],
        batch=_xy2_batch,
        vjp_reads=vjp_reads,
    )


def test_vjp_reads_that_leaves_out_what_the_rule_reads_is_caught():
    # x*y**2: the cotangent of x reads y, that of y reads x and y; "x's reads nothing"
    # is wrong even though the union over both arguments covers everything.
    with pytest.raises(
        AssertionError,
        match=re.escape(
            "check_primitive('xy2'): VJP rule raised RuleError: the VJP rule of primitive "
            "'xy2' read its argument 1, but the primitive's vjp_reads="
        ),
    ):
        check_primitive(_xy2_declaring([(), (0, 1)]), (X, X))
    check_primitive(_xy2_declaring([(1,), (0, 1)]), (X, X))


def test_rule_that_raises_is_reported():
    p = cube(vjp=lambda ct, ans, x: ct * undefined_name)  # noqa: F821
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('cube'): VJP rule raised NameError: name 'undefined_name' is not "
            "defined (sample 0)"
        ),
    ):
        check_primitive(p, (X,))


def test_rules_written_with_raw_numpy_fail_the_second_order_check():
    raw = cube(vjp=lambda ct, ans, x: ct * 3 * np.asarray(x) ** 2)
    with pytest.raises(
        AssertionError,
        match=re.escape(
            "check_primitive('cube'): second-order check failed; rules must be written with "
            "primitives (autodiff.numpy functions, operators on the values) to be differentiable "
            "themselves. ConcretizationError: np.asarray(x) would drop the derivative"
        ),
    ):
        check_primitive(raw, (X,))


def test_tolerances_can_be_overridden():
    off = 1 + 1e-4
    p = cube(vjp=lambda ct, ans, x: ct * 3 * x**2 * off, jvp=lambda t, ans, x: t * 3 * x**2 * off)
    with pytest.raises(AssertionError, match="VJP rule wrong"):
        check_primitive(p, (X,))
    assert check_primitive(p, (X,), rtol=1e-3).checks_run == ALL_CHECKS


# --- batching -----------------------------------------------------------------------------


def test_batching_rule_with_the_wrong_out_dim():
    wrong = cube(batch=lambda args, dims: (anp.moveaxis(args[0], 0, 1) ** 3, 0))
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('cube'): batching rule wrong for in_dims=(0,), it returned out_dim=0: "
            "at example 0, output[2] it gives 0.9810295, a loop of impl gives 27.0 "
            "(sample 0; worst of 9 elements)"
        ),
    ):
        check_primitive(wrong, (np.array([1.0, 2.0, 3.0]),))

    out_of_range = cube(batch=lambda args, dims: (args[0] ** 3, 2))
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('cube'): batching rule returned an out-of-range out_dim "
            "(in_dims=(0,), it returned out_dim=2 for an output of 2 dimensions) (sample 0)"
        ),
    ):
        check_primitive(out_of_range, (X,))


def test_batching_rule_that_forgets_to_move_the_axis():
    forgets = colsum(batch=lambda args, dims, *, axis: (args[0].sum(axis=axis), dims[0]))
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('colsum'): batching rule output has 2 examples, not 3 "
            "(in_dims=(0,), it returned out_dim=0) (sample 0)"
        ),
    ):
        check_primitive(forgets, (np.ones((2, 3)),), axis=0)
    with pytest.raises(
        AssertionError,
        match=re.escape(
            "batching rule wrong for in_dims=(0,), it returned out_dim=0: at example 2, output[1] "
            "it gives 26.22475, a loop of impl gives 16.76511 (sample 0; worst of 9 elements)"
        ),
    ):
        check_primitive(forgets, (np.arange(1.0, 10.0).reshape(3, 3),), axis=0)


def test_batching_is_checked_for_every_combination_of_in_dims():
    # Copied from a unary rule: right while both are batched at the front, wrong
    # for a batch axis elsewhere and for in_dims=(None, 0).
    p = Primitive("xy2", xy2_p.impl, batch=lambda args, dims: (xy2_p.bind(*args), dims[0]))
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('xy2'): batching rule (in_dims=(0, 1)) raised ValueError: operands "
            "could not be broadcast together with shapes (3,2) (2,3)  (sample 0)"
        ),
    ):
        check_primitive(p, (X, X))


def _sort_p(batch):
    return Primitive("sort", np.sort, batch=batch, differentiable=False)


def test_batching_rule_that_mixes_examples_up_is_caught_even_for_sorting():
    # A scale-invariant function: examples that were only rescaled copies of the
    # sample would all sort the same way, and a rule that gives every example
    # the first one's order would pass.
    x = np.array([0.5, 0.52, 0.3, 0.31, 1.0])
    right = lambda args, dims: (np.sort(np.moveaxis(args[0], dims[0], 0), axis=1), 0)
    assert check_primitive(_sort_p(right), (x,)).checks_run == ["forward", "batching"]

    def first_order(args, dims):
        xs = np.moveaxis(args[0], dims[0], 0)
        return np.take(xs, np.argsort(xs[0]), axis=1), 0

    with pytest.raises(AssertionError, match=r"batching rule wrong for in_dims=\(0,\)"):
        check_primitive(_sort_p(first_order), (x,))
    swapped = lambda args, dims: (np.sort(np.moveaxis(args[0], dims[0], 0), axis=1)[::-1], 0)
    with pytest.raises(AssertionError, match=r"batching rule wrong for in_dims=\(0,\)"):
        check_primitive(_sort_p(swapped), (x,))


def _two_outputs(batch):
    return Primitive("sincos", lambda x: (np.sin(x), np.cos(x)), batch=batch, multiple_results=True)


def test_batching_rule_that_drops_an_output_is_caught():
    both = lambda args, dims: (_two_outputs(None).impl(args[0]), (dims[0], dims[0]))
    assert "batching" in check_primitive(_two_outputs(both), (X,)).checks_run
    dropped = lambda args, dims: ((np.sin(args[0]),), (dims[0],))
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('sincos'): batching rule returned 1 outputs and 1 out_dims for "
            "in_dims=(0,); impl returns 2 outputs (sample 0)"
        ),
    ):
        check_primitive(_two_outputs(dropped), (X,))


def test_batching_rule_with_the_wrong_dtype_is_caught():
    single = cube(batch=lambda args, dims: ((args[0] ** 3).astype(np.float32), dims[0]))
    with pytest.raises(
        AssertionError,
        match=exact(
            "check_primitive('cube'): batching rule gives float32 (2,) per example, a loop of "
            "impl gives float64 (2,) (in_dims=(0,), it returned out_dim=0) (sample 0)"
        ),
    ):
        check_primitive(single, (X,))


def test_wrong_sign_of_a_vjp_rule_is_caught():
    flipped = cube(vjp=lambda ct, ans, x: -ct * 3 * x**2)
    with pytest.raises(AssertionError, match=r"VJP rule wrong for argument 0"):
        check_primitive(flipped, (X,))


# --- what runs ----------------------------------------------------------------------------


def test_missing_rules_are_reported_not_errors():
    # The JVP rule is derived from the VJP rule, as the transforms derive it: checked too.
    report = check_primitive(cube(jvp="none", batch="none"), (X,))
    assert report.checks_run == ["forward", "VJP", "JVP", "VJP vs JVP", "second order"]
    assert report.derived == [
        "JVP rule (the transpose of the VJP rule)",
        "Taylor rule (from the JVP rule)",
    ]
    assert report.missing == ["batching rule (transforms loop over the batch)"]
    assert str(report).endswith(
        "\n  derived: JVP rule (the transpose of the VJP rule), Taylor rule (from the JVP rule)"
        "\n  missing: batching rule (transforms loop over the batch)"
    )
    bare = check_primitive(Primitive("bare", np.sin), (X,))
    assert bare.checks_run == ["forward"]
    assert bare.missing == [
        "VJP rule",
        "JVP rule",
        "batching rule (transforms loop over the batch)",
    ]


def test_a_wrong_rule_is_named_rather_than_its_derived_transpose():
    wrong_jvp_only = Primitive("cube", lambda x: x**3, jvp=[lambda t, ans, x: t * 2 * x**2])
    with pytest.raises(AssertionError, match=r"^check_primitive\('cube'\): JVP rule wrong"):
        check_primitive(wrong_jvp_only, (X,))


def test_non_differentiable_primitive_gets_forward_and_batching_only():
    floor_p = Primitive(
        "floor",
        np.floor,
        batch=lambda args, dims: (floor_p.bind(*args), dims[0]),
        differentiable=False,
    )
    report = check_primitive(floor_p, (np.array([0.5, -1.5, 2.0]),))
    assert report.checks_run == ["forward", "batching"]
    assert report.missing == []
    ints = check_primitive(anp.equal.primitive, (np.arange(3), np.array([0, 2, 2])))
    assert ints.checks_run == ["forward", "batching"]


def test_impl_must_return_arrays():
    p = Primitive("total", lambda x: float(x.sum()))
    with pytest.raises(
        AssertionError,
        match=exact("check_primitive('total'): impl returned float, not an array (sample 0)"),
    ):
        check_primitive(p, (X,))


def test_samples_are_tuples():
    with pytest.raises(TypeError, match="tuples of arguments"):
        check_primitive(cube(), X)
    with pytest.raises(TypeError, match="tuples of arguments"):
        check_primitive(cube())


# --- Taylor rules ----------------------------------------------------------------------------


def _cube_taylor(sign=1.0):
    """(x0 + x1 t + x2 t^2 + ...)^3 by Leibniz twice; ``sign`` plants an error in the
    second coefficient."""

    def taylor(primals, series):
        (x0,), (xs,) = primals, series
        x = [x0, *(np.zeros_like(x0) if c is None else c for c in xs)]
        sq = [sum(x[j] * x[k - j] for j in range(k + 1)) for k in range(len(x))]
        cube = [sum(sq[j] * x[k - j] for j in range(k + 1)) for k in range(len(x))]
        cube[2] = sign * cube[2]
        return cube[0], cube[1:]

    return taylor


def test_a_taylor_rule_is_checked_against_the_jvp_rule_pushed_through():
    p = cube()
    p.def_taylor(_cube_taylor())
    report = check_primitive(p, (X,), (X.astype(np.float32),))
    assert report.checks_run == WITH_TAYLOR
    assert report.worst_errors["Taylor"] < 1
    wrong = cube()
    wrong.def_taylor(_cube_taylor(sign=-1.0))
    with pytest.raises(
        AssertionError,
        match=r"^check_primitive\('cube'\): Taylor rule wrong at coefficient 2 of output\[",
    ):
        check_primitive(wrong, (X,))


def test_a_taylor_rule_must_give_coefficients_shaped_like_the_output():
    p = cube()
    p.def_taylor(lambda primals, series: (primals[0] ** 3, [primals[0][:1]] * 3))
    with pytest.raises(
        AssertionError, match=r"Taylor rule returned shape \(1,\) for coefficient 1"
    ):
        check_primitive(p, (X,))


def test_a_taylor_rule_of_the_wrong_arity_is_refused_at_registration():
    with pytest.raises(RuleError, match="Taylor rule of primitive 'cube' takes 1 positional"):
        cube().def_taylor(lambda primals: primals)
