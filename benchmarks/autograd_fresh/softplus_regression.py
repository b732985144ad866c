"""A short program in the style of autograd's examples, written for issue 30's timing (a
fresh program, written before it was measured): a stable softplus defined as an autograd
primitive with its own VJP, a small non-negative regression fitted by gradient descent
with momentum, the fit's gradient checked numerically.

    python -m benchmarks.start_up --examples <autograd>/examples --only softplus_regression.py
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.extend import defvjp, primitive
from autograd.test_util import check_grads


@primitive
def softplus(x):
    return np.logaddexp(0.0, x)


defvjp(softplus, lambda ans, x: lambda g: g / (1.0 + np.exp(-x)))


def loss(params, inputs, targets):
    w, b = params[:-1], params[-1]
    predictions = softplus(np.dot(inputs, w) + b)
    return np.mean((predictions - targets) ** 2) + 1e-3 * np.sum(w**2)


if __name__ == "__main__":
    npr.seed(3)
    inputs = npr.randn(60, 4)
    targets = np.logaddexp(0.0, np.dot(inputs, np.array([1.0, -0.5, 0.25, 0.0])) + 0.3)
    gradient = grad(loss)
    params, velocity = np.zeros(5), np.zeros(5)
    for _ in range(80):
        velocity = 0.9 * velocity - 0.1 * gradient(params, inputs, targets)
        params = params + velocity
    print("loss", round(float(loss(params, inputs, targets)), 5))
    check_grads(lambda p: loss(p, inputs, targets), modes=["rev"])(params)
