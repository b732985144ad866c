"""A short program in the style of autograd's examples, written for issue 30's timing (a
fresh program, written in the tenth session before it was measured): a small two-layer
classifier of two interleaved spirals, its parameters a list of (weights, biases) pairs,
trained by autograd's own ``adam`` with a callback that prints the training accuracy.

    python -m benchmarks.start_up --examples <autograd>/examples --only adam_classifier.py
"""

import itertools

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.misc.optimizers import adam


def spirals(count, noise, rs):
    angle = np.sqrt(rs.rand(count)) * 3 * np.pi
    first = np.stack([angle * np.cos(angle), angle * np.sin(angle)], axis=1)
    inputs = np.concatenate([first, -first]) / (3 * np.pi) + noise * rs.randn(2 * count, 2)
    labels = np.concatenate([np.zeros(count), np.ones(count)])
    return inputs, labels


def init_params(sizes, scale, rs):
    return [(scale * rs.randn(m, n), scale * rs.randn(n)) for m, n in itertools.pairwise(sizes)]


def logits(params, inputs):
    for weights, biases in params[:-1]:
        inputs = np.tanh(np.dot(inputs, weights) + biases)
    weights, biases = params[-1]
    return (np.dot(inputs, weights) + biases)[:, 0]


def loss(params, inputs, labels):
    z = logits(params, inputs)
    log_likelihood = np.sum(labels * z - np.logaddexp(0.0, z))
    penalty = sum(np.sum(w**2) for w, _ in params)
    return -log_likelihood / len(labels) + 1e-4 * penalty


if __name__ == "__main__":
    rs = npr.RandomState(7)
    inputs, labels = spirals(100, 0.05, rs)
    params = init_params([2, 24, 24, 1], 0.5, rs)
    objective = lambda params, step: loss(params, inputs, labels)

    def report(params, step, gradient):
        if step % 50 == 0:
            accuracy = np.mean((logits(params, inputs) > 0) == labels)
            print(f"step {step:4d} loss {objective(params, step):.4f} accuracy {accuracy:.3f}")

    params = adam(grad(objective), params, step_size=0.03, num_iters=300, callback=report)
    print(f"final loss {objective(params, 0):.4f}")
