"""Messages lead with the user's fix: for the commonest mistakes of a JAX or torch.func
user (docs/errors.md lists them, with what autodiff said before), the first sentence
says what the code did and what to write instead, in at most about 200 characters, and
is the last line of the traceback.  Python records each expression's source from 3.11:
there the first sentence quotes it (``np.array([x, 2 * x])`` -> ``anp.array([x, 2 * x])``).
"""

import math
import re
import sys
import traceback

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import grad, jit, jvp, vjp, vmap
from autodiff.errors import AutodiffError

QUOTES = sys.version_info >= (3, 11)
LONGEST = 200


def _float_in_grad():
    grad(lambda s: float(s) * s)(1.0)


def _math_in_grad():
    grad(lambda s: math.sqrt(s) * s)(1.0)


def _np_array_of_traced():
    grad(lambda x: np.array([x, 2 * x]).sum())(1.0)


def _numpy_function_given_a_list():
    grad(lambda x: np.mean([x, 2 * x]))(1.0)


def _list_for_a_cotangent():
    vjp(lambda x: x**2, np.ones(2))[1]([1.0, 1.0])


def _list_for_a_tangent():
    jvp(lambda x: x**2, (np.ones(2),), ([1.0, 0.0],))


def _vmap_over_a_list():
    vmap(lambda x: x**2)([1.0, 2.0, 3.0])


def _store_into_a_plain_array():
    def fill(x):
        out = np.zeros(2)
        out[0] = x
        return out.sum()

    grad(fill)(1.0)


def _if_on_a_batched_value():
    vmap(lambda x: x if x > 0 else -x)(np.array([1.0, -2.0]))


def _if_under_jit():
    jit(lambda x: x if x > 0 else -x)(1.0)


RNG = np.random.default_rng(0)


def _closed_over_generator_in_vmap():
    vmap(lambda x: x + RNG.normal())(np.zeros(3))


def _numpy_global_draw_in_vmap():
    vmap(lambda x: x + np.random.normal())(np.zeros(3))


def _closed_over_generator_in_jit():
    jit(lambda x: x + RNG.normal())(np.zeros(3))


def _numpy_global_draw_in_jit():
    jit(lambda x: x + np.random.normal())(np.zeros(3))


def _integer_input_to_grad():
    grad(lambda x: x * x)(3)


def _torch_detach():
    grad(lambda x: x.detach() * x)(1.0)


def _number_mapped_by_vmap():
    vmap(lambda x, a: x * a)(np.ones(3), 2.0)


# (mistake, what the first sentence must name: the code, then the fix; 3.10's without
# the quoted expression)
CASES = [
    (_float_in_grad, "float(s)", "float(autodiff.stop_gradient(s))", "stop_gradient"),
    (_math_in_grad, "math.sqrt(s)", "write anp.sqrt(s)", "stop_gradient"),
    (_np_array_of_traced, "np.array([x, 2 * x])", "write anp.array([x, 2 * x])", "anp.array(["),
    (
        _numpy_function_given_a_list,
        "np.mean([x, 2 * x])",
        "write anp.mean([x, 2 * x])",
        "write anp.mean(",
    ),
    (_list_for_a_cotangent, "cotangent 0 is a list of 2 numbers", "pass np.asarray(", None),
    (_list_for_a_tangent, "tangent 0 is a list of 2 numbers", "pass np.asarray(", None),
    (_vmap_over_a_list, "argument 0 is a list of 3 numbers", "pass np.asarray(", None),
    (
        _store_into_a_plain_array,
        "out[0] = x",
        "write out = anp.at(out)[0].set(x)",
        "anp.at(out)[i].set(x)",
    ),
    (_if_on_a_batched_value, "the condition x > 0", "anp.where(", "anp.where("),
    (_if_under_jit, "the condition x > 0", "static_argnums", "static_argnums"),
    (
        _closed_over_generator_in_vmap,
        "a numpy.random.Generator it closes over",
        "pass the Generator as an argument with in_dims=None",
        None,
    ),
    (
        _numpy_global_draw_in_vmap,
        "NumPy's global random functions",
        "write anp.random.normal(",
        None,
    ),
    (
        _closed_over_generator_in_jit,
        "a numpy.random.Generator it closes over",
        "write anp.random.normal(rng, shape)",
        None,
    ),
    (
        _numpy_global_draw_in_jit,
        "NumPy's global random functions",
        "write anp.random.normal(",
        None,
    ),
    (_integer_input_to_grad, "argument 0 is the int 3", "pass 3.0", None),
    (_torch_detach, "no attribute 'detach'", "autodiff.stop_gradient(x)", None),
    (_number_mapped_by_vmap, "argument 1 is a float", "in_dims=(0, None)", None),
]


def _first_sentence(message):
    """The first sentence, its transform levels written with 3 digits (a level counts the
    transforms the process ran, so its width depends on what ran before)."""
    first = re.split(r"(?<=[.!?])\s", message, maxsplit=1)[0]
    return re.sub(r"\(level \d+\)", "(level 999)", first)


def _raised(mistake):
    with pytest.raises((AutodiffError, AttributeError)) as info:
        mistake()
    return info.value


@pytest.mark.parametrize(("mistake", "did", "fix", "fix_310"), CASES, ids=lambda c: str(c)[:0])
def test_the_first_sentence_says_what_was_done_and_the_fix(mistake, did, fix, fix_310):
    first = _first_sentence(str(_raised(mistake)))
    assert len(first) <= LONGEST, f"{len(first)} characters: {first}"
    if QUOTES or fix_310 is None:
        assert did in first and fix in first, first
        assert first.index(did) < first.index(fix), first  # what was done, then the fix
    else:
        assert fix_310 in first, first


@pytest.mark.parametrize(("mistake", "did", "fix", "fix_310"), CASES, ids=lambda c: str(c)[:0])
def test_the_last_line_of_the_traceback_is_ours(mistake, did, fix, fix_310):
    error = _raised(mistake)
    last = traceback.format_exception_only(type(error), error)[-1]
    assert re.split(r"(?<=[.!?])\s", str(error), maxsplit=1)[0] in last


def test_the_catalogue_follows_the_first_sentence():
    message = str(_raised(_np_array_of_traced))
    first = _first_sentence(message)
    rest = message[len(first) :]
    assert "anp.stack" in rest and "anp.r_" in rest and "anp.at(a)[i].set(v)" in rest


def test_a_list_given_to_grad_gets_a_note_under_pythons_error():
    if not hasattr(BaseException, "add_note"):
        pytest.skip("exception notes are Python 3.11's")
    with pytest.raises(TypeError) as info:
        grad(lambda x: (x**2).sum())([1.0, 2.0])
    (note,) = info.value.__notes__
    assert note.startswith("grad: argument 0 is a list of 2 numbers") and "np.asarray" in note
    assert grad(lambda x: (x**2).sum())(np.asarray([1.0, 2.0])).tolist() == [2.0, 4.0]


def test_the_fixes_the_messages_name_work():
    # What the first sentences say to write, written.
    assert grad(lambda s: anp.sqrt(s) * s)(1.0) == 1.5
    assert grad(lambda s: float(autodiff.stop_gradient(s)) * s)(1.0) == 1.0
    assert grad(lambda x: anp.array([x, 2 * x]).sum())(1.0) == 3.0
    assert grad(lambda x: anp.mean([x, 2 * x]))(1.0) == 1.5
    out = vjp(lambda x: x**2, np.ones(2))[1](np.asarray([1.0, 1.0]))
    assert out[0].tolist() == [2.0, 2.0]
    assert vmap(lambda x: x**2)(np.asarray([1.0, 2.0, 3.0])).tolist() == [1.0, 4.0, 9.0]

    def fill(x):
        out = np.zeros(2)
        out = anp.at(out)[0].set(x)
        return out.sum()

    assert grad(fill)(1.0) == 1.0
    xs = np.array([1.0, -2.0])
    assert vmap(lambda x: anp.where(x > 0, x, -x))(xs).tolist() == [1.0, 2.0]
    assert vmap(lambda x: autodiff.cond(x > 0, lambda v: v, lambda v: -v, x))(xs).tolist() == [
        1.0,
        2.0,
    ]
    drawn = vmap(lambda x, r: x + r.normal(), in_dims=(0, None), randomness="different")(
        np.zeros(3), np.random.default_rng(0)
    )
    assert len(set(drawn.tolist())) == 3
    assert grad(lambda x: x * x)(3.0) == 6.0
    assert grad(lambda x: autodiff.stop_gradient(x) * x)(1.0) == 1.0
    assert vmap(lambda x, a: x * a, in_dims=(0, None))(np.ones(3), 2.0).tolist() == [2.0] * 3
