"""The tracer base class: operators, ndarray methods and attributes, and
NumPy's protocols behave alike for GradTensor, DualTensor and BatchedTensor,
and give the same numbers as plain NumPy."""

import operator

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vmap
from autodiff.core.tracer import Tracer
from autodiff.interpreters.batching import BatchedTensor
from autodiff.interpreters.forward import DualTensor
from autodiff.interpreters.reverse import GradTensor

rng = np.random.default_rng(11)
A = rng.uniform(0.5, 2.0, (3, 4))
B = rng.uniform(0.5, 2.0, (3, 4))


def _under(kind, f, *args):
    """``f(*args)`` evaluated with ``args[0]`` traced by ``kind``; returns plain values."""
    if kind == "grad":
        out = []

        def g(x):
            out.append(f(x, *args[1:]))
            return anp.sum(x) * 0.0

        grad(g)(args[0])
        value = out[0]
        return value.value if isinstance(value, GradTensor) else value
    if kind == "jvp":
        return jvp(lambda x: f(x, *args[1:]), (args[0],), (np.zeros_like(args[0]),))[0]
    # vmap over a batch of one example
    return vmap(lambda x: f(x, *args[1:]))(args[0][None])[0]


KINDS = ["grad", "jvp", "vmap"]

BINARY_OPERATORS = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    operator.eq,
    operator.ne,
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", BINARY_OPERATORS, ids=lambda op: op.__name__)
def test_binary_operators_and_reflected_forms(kind, op):
    np.testing.assert_allclose(_under(kind, lambda x, y: op(x, y), A, B), op(A, B))
    np.testing.assert_allclose(_under(kind, lambda x, y: op(y, x), A, B), op(B, A))
    np.testing.assert_allclose(_under(kind, lambda x: op(x, 1.5), A), op(A, 1.5))
    np.testing.assert_allclose(_under(kind, lambda x: op(1.5, x), A), op(1.5, A))


@pytest.mark.parametrize("kind", KINDS)
def test_matmul_operator_with_ndarray_on_either_side(kind):
    W = rng.standard_normal((4, 2))
    np.testing.assert_allclose(_under(kind, lambda x: x @ W, A), A @ W)
    np.testing.assert_allclose(_under(kind, lambda x: W.T @ x.T, A), W.T @ A.T)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", [operator.neg, operator.pos, abs], ids=["neg", "pos", "abs"])
def test_unary_operators(kind, op):
    np.testing.assert_allclose(_under(kind, op, A - 1.0), op(A - 1.0))


METHODS = {
    "sum": lambda x: x.sum(),
    "sum(axis)": lambda x: x.sum(axis=0, keepdims=True),
    "mean": lambda x: x.mean(1),
    "max": lambda x: x.max(),
    "min(axis)": lambda x: x.min(axis=-1),
    "reshape(*)": lambda x: x.reshape(2, 6),
    "reshape(())": lambda x: x.reshape((6, 2)),
    "transpose()": lambda x: x.transpose(),
    "transpose(*)": lambda x: x.transpose(1, 0),
    "T": lambda x: x.T,
    "dot": lambda x: x.dot(np.ones(4)),
    "ravel": lambda x: x.ravel(),
    "flatten": lambda x: x.flatten(),
    "squeeze": lambda x: x[None].squeeze(),
    "clip": lambda x: x.clip(0.8, 1.5),
    "astype": lambda x: x.astype(np.float32),
    "argmax": lambda x: x.argmax(),
    "getitem": lambda x: x[1:, [0, 2]],
    "prod": lambda x: x.prod(axis=1),
    "cumsum": lambda x: x.cumsum(axis=0),
    "cumprod": lambda x: x.cumprod(),
    "var": lambda x: x.var(ddof=1),
    "std": lambda x: x.std(axis=0),
    "any": lambda x: (x > 1).any(axis=1),
    "all": lambda x: (x > 0).all(),
    "argsort": lambda x: x.argsort(axis=0),
    "round": lambda x: x.round(1),
    "conj": lambda x: x.conj(),
    "real": lambda x: x.real,
    "imag": lambda x: x.imag,
    "trace": lambda x: x.trace(),
    "diagonal": lambda x: x.diagonal(1),
    "repeat": lambda x: x.repeat(2, axis=0),
    "take": lambda x: x.take([0, 3], axis=1),
    "swapaxes": lambda x: x.swapaxes(0, 1),
    "copy": lambda x: x.copy(),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(METHODS))
def test_ndarray_methods(kind, name):
    f = METHODS[name]
    np.testing.assert_allclose(_under(kind, f, A), f(A))


@pytest.mark.parametrize("kind", KINDS)
def test_attributes_are_logical(kind):
    seen = []

    def f(x):
        seen.append((x.shape, x.ndim, x.size, x.dtype, len(x), np.shape(x), np.ndim(x)))
        return x

    _under(kind, f, A)
    assert seen == [((3, 4), 2, 12, np.float64, 3, (3, 4), 2)]


def test_batched_tensor_exposes_per_example_shape():
    shapes = []
    vmap(lambda x: shapes.append(x.shape) or x, in_dims=1)(np.ones((2, 5, 3)))
    assert shapes == [(2, 3)]


@pytest.mark.parametrize("kind", KINDS)
def test_iteration_and_unpacking(kind):
    def f(x):
        first, _second, third = x
        return first + 2 * third

    np.testing.assert_allclose(_under(kind, f, A), A[0] + 2 * A[2])


@pytest.mark.parametrize("kind", KINDS)
def test_numpy_ufuncs_and_functions_route_to_rules(kind):
    f = lambda x: np.sum(np.tanh(np.maximum(x, 1.0)) * np.exp(-x), axis=0)
    np.testing.assert_allclose(_under(kind, f, A), f(A))


def test_tracer_index_into_tracer():
    x = rng.standard_normal((5, 2))
    idx = np.array([[4, 0], [1, 1]])
    out = vmap(lambda x, i: x[i])(np.stack([x, x + 1]), np.stack([idx[0], idx[1]]))
    np.testing.assert_allclose(out, np.stack([x[idx[0]], (x + 1)[idx[1]]]))


@pytest.mark.parametrize("cls", [GradTensor, DualTensor, BatchedTensor])
def test_tracers_use_slots(cls):
    assert issubclass(cls, Tracer)
    assert "__dict__" not in dir(cls)
    with pytest.raises(AttributeError):
        cls.__new__(cls).some_attribute = 1


def test_tracers_are_unhashable_like_ndarrays():
    def f(x):
        with pytest.raises(TypeError):
            hash(x)
        return x

    grad(lambda x: anp.sum(f(x)))(A)


def test_array_priority_makes_ndarray_operators_defer():
    assert Tracer.__array_priority__ > np.ndarray(0).__array_priority__
    g = grad(lambda x: anp.sum(A @ x))(np.ones(4))  # ndarray @ tracer
    np.testing.assert_allclose(g, A.sum(0))


@pytest.mark.parametrize("kind", KINDS)
def test_in_place_sort_and_copy_semantics(kind):
    def f(x):
        y = x.copy()
        alias = x
        x.sort(axis=1)  # in place: x and its alias become the sorted value
        return alias + 0.0 * y, y

    sorted_x, original = _under(kind, lambda x: f(x)[0], A), _under(kind, lambda x: f(x)[1], A)
    np.testing.assert_allclose(sorted_x, np.sort(A, axis=1))
    np.testing.assert_allclose(original, A)  # the copy kept the old value
