"""A short program in the style of autograd's examples, written for issue 30's timing (a
fresh program, written in the ninth session before it was measured): a small tanh
network fitted to noisy samples of a sine by autograd's ``adam`` on parameters kept as a
list of (weights, biases) pairs, its gradient checked numerically, the fit's error
printed.

    python -m benchmarks.start_up --examples <autograd>/examples --only mlp_regression.py
"""

import itertools

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.misc.optimizers import adam
from autograd.test_util import check_grads


def init_params(layer_sizes, scale, rs):
    return [
        (scale * rs.randn(m, n), scale * rs.randn(n)) for m, n in itertools.pairwise(layer_sizes)
    ]


def predict(params, inputs):
    for weights, biases in params[:-1]:
        inputs = np.tanh(np.dot(inputs, weights) + biases)
    weights, biases = params[-1]
    return np.dot(inputs, weights) + biases


def loss(params, inputs, targets):
    residual = predict(params, inputs) - targets
    penalty = sum(np.sum(w**2) for w, _ in params)
    return np.mean(residual**2) + 1e-4 * penalty


if __name__ == "__main__":
    rs = npr.RandomState(7)
    inputs = np.linspace(-3, 3, 80).reshape(80, 1)
    targets = np.sin(inputs) + 0.1 * rs.randn(80, 1)
    params = init_params([1, 16, 16, 1], 0.5, rs)
    objective = lambda params, step: loss(params, inputs, targets)
    params = adam(grad(objective), params, step_size=0.02, num_iters=150)
    print(f"mean squared error after training: {loss(params, inputs, targets):.4f}")
    check_grads(lambda w: loss([(w, params[0][1]), *params[1:]], inputs, targets),
                modes=["rev"])(params[0][0])  # fmt: skip
