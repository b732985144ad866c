"""A short program in the style of autograd's examples, written for issue 30's timing after
the import and per-call work (a fresh program, not one that work was tuned on): a linear
regression with Student-t noise, fitted by SciPy's L-BFGS with autograd's value_and_grad,
then its standard errors from autograd's hessian.

    python -m benchmarks.autograd_examples --examples benchmarks/autograd_fresh --out /tmp/x.md
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import hessian, value_and_grad
from autograd.scipy.stats import t as student_t
from scipy.optimize import minimize


def negative_log_likelihood(params, inputs, targets):
    weights, log_scale = params[:-1], params[-1]
    residuals = targets - np.dot(inputs, weights)
    return -np.sum(student_t.logpdf(residuals, 3.0, 0.0, np.exp(log_scale)))


if __name__ == "__main__":
    rs = npr.RandomState(2)
    inputs = rs.randn(60, 2)
    targets = np.dot(inputs, np.array([1.5, -0.7])) + 0.3 * rs.standard_t(3, size=60)
    objective = lambda p: negative_log_likelihood(p, inputs, targets)
    result = minimize(value_and_grad(objective), np.zeros(3), jac=True, method="L-BFGS-B")
    covariance = np.linalg.inv(hessian(objective)(result.x))
    print("weights", np.round(result.x[:2], 4), "scale", np.round(np.exp(result.x[2]), 4))
    print("standard errors", np.round(np.sqrt(np.diag(covariance)), 4))
