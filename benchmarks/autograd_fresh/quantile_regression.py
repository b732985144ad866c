"""A short program in the style of autograd's examples, written for issue 30's timing (a
fresh program, written in the eighth session before it was measured): a smoothed pinball
loss defined as an autograd primitive with its own VJP (the quantile a keyword), linear
quantile regressions at three quantiles fitted by gradient descent, the gradient checked
numerically.

    python -m benchmarks.start_up --examples <autograd>/examples --only quantile_regression.py
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.extend import defvjp, primitive
from autograd.test_util import check_grads


@primitive
def pinball(residual, quantile=0.5, width=0.1):
    """The quantile (pinball) loss, smoothed within ``width`` of zero."""
    soft = width * np.logaddexp(0.0, residual / width)
    return soft - (1.0 - quantile) * residual


def pinball_vjp(ans, residual, quantile=0.5, width=0.1):
    slope = 1.0 / (1.0 + np.exp(-residual / width)) - (1.0 - quantile)
    return lambda g: g * slope


defvjp(pinball, pinball_vjp)


def objective(weights, inputs, targets, quantile):
    residual = targets - np.dot(inputs, weights)
    return np.mean(pinball(residual, quantile=quantile))


if __name__ == "__main__":
    rs = npr.RandomState(4)
    inputs = np.concatenate([np.ones((120, 1)), rs.randn(120, 2)], axis=1)
    targets = np.dot(inputs, np.array([1.0, 2.0, -1.0])) + rs.standard_t(3, size=120)
    for quantile in (0.1, 0.5, 0.9):
        gradient = grad(objective)
        weights = np.zeros(3)
        for _step in range(60):
            weights = weights - 0.5 * gradient(weights, inputs, targets, quantile)
        print(
            f"quantile {quantile}: weights {np.round(weights, 3)}, "
            f"loss {objective(weights, inputs, targets, quantile):.4f}"
        )
    check_grads(lambda w: objective(w, inputs, targets, 0.5), modes=["rev"])(weights)
