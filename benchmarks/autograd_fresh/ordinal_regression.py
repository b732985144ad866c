"""A short program in the style of autograd's examples, written for issue 30's third timing
session (a fresh program, not one that session's work was tuned on): an ordinal logistic
regression (cumulative logits, ordered cut points kept ordered by log-increments), fitted
by SciPy's BFGS with autograd's grad, and its predicted class probabilities.

    python -m benchmarks.autograd_examples --examples benchmarks/autograd_fresh --out /tmp/x.md
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.scipy.special import expit
from scipy.optimize import minimize


def cut_points(params):
    first, log_steps = params[2], params[3:]
    return np.concatenate([np.array([first]), first + np.cumsum(np.exp(log_steps))])


def class_probabilities(params, inputs):
    below = expit(cut_points(params)[None, :] - np.dot(inputs, params[:2])[:, None])
    ones, zeros = np.ones((inputs.shape[0], 1)), np.zeros((inputs.shape[0], 1))
    cumulative = np.concatenate([zeros, below, ones], axis=1)
    return cumulative[:, 1:] - cumulative[:, :-1]


def negative_log_likelihood(params, inputs, labels):
    chosen = class_probabilities(params, inputs)[np.arange(labels.shape[0]), labels]
    return -np.sum(np.log(chosen + 1e-12)) + 0.01 * np.sum(params[:2] ** 2)


if __name__ == "__main__":
    rs = npr.RandomState(7)
    inputs = rs.randn(120, 2)
    latent = np.dot(inputs, np.array([1.2, -0.8])) + rs.logistic(size=120)
    labels = np.searchsorted(np.array([-1.0, 0.0, 1.2]), latent)
    objective = lambda p: negative_log_likelihood(p, inputs, labels)
    result = minimize(objective, np.zeros(5), jac=grad(objective), method="BFGS")
    print("weights", np.round(result.x[:2], 4), "cut points", np.round(cut_points(result.x), 4))
    print("first rows", np.round(class_probabilities(result.x, inputs[:2]), 4))
