"""A short program in the style of autograd's examples, written for issue 30's timing (a
fresh program, not one the start-up work was tuned on): a Poisson regression fitted by
SciPy's BFGS with autograd's gradients, then its curvature by autograd's hessian.

    python -m benchmarks.autograd_examples --examples benchmarks/autograd_fresh --out /tmp/x.md
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad, hessian
from scipy.optimize import minimize


def negative_log_likelihood(weights, inputs, counts):
    rates = np.exp(np.dot(inputs, weights))
    return np.sum(rates - counts * np.log(rates)) + 0.5 * np.sum(weights**2)


if __name__ == "__main__":
    rs = npr.RandomState(1)
    inputs = rs.randn(40, 3)
    counts = rs.poisson(np.exp(np.dot(inputs, np.array([0.5, -0.3, 0.2]))))
    objective = lambda w: negative_log_likelihood(w, inputs, counts)
    result = minimize(objective, np.zeros(3), jac=grad(objective), method="BFGS")
    curvature = hessian(objective)(result.x)
    print("weights", np.round(result.x, 4))
    print("standard errors", np.round(np.sqrt(np.diag(np.linalg.inv(curvature))), 4))
