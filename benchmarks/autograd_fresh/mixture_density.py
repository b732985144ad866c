"""A short program in the style of autograd's examples, written for issue 30's sixth timing
session (a fresh program, not one that session's work was tuned on): a two-component
Gaussian mixture's negative log-likelihood, its parameters in a dict, fitted by autograd's
own Adam (``autograd.misc.optimizers``), with its gradient checked first.

    python -m benchmarks.autograd_examples --examples benchmarks/autograd_fresh --out /tmp/x.md
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.misc.optimizers import adam
from autograd.scipy.special import logsumexp
from autograd.test_util import check_grads


def negative_log_likelihood(params, data):
    log_weights = params["logits"] - logsumexp(params["logits"])
    scales = np.exp(params["log_scales"])
    z = (data[:, None] - params["means"][None, :]) / scales[None, :]
    log_densities = -0.5 * z**2 - np.log(scales)[None, :] - 0.5 * np.log(2 * np.pi)
    return -np.sum(logsumexp(log_weights[None, :] + log_densities, axis=1))


if __name__ == "__main__":
    rs = npr.RandomState(3)
    data = np.concatenate([rs.randn(150) * 0.5 - 1.0, rs.randn(100) * 0.8 + 2.0])
    init = {"logits": np.zeros(2), "means": np.array([-0.5, 0.5]), "log_scales": np.zeros(2)}
    objective = lambda params, step: negative_log_likelihood(params, data)
    check_grads(lambda m: negative_log_likelihood({**init, "means": m}, data), modes=["rev"])(
        init["means"]
    )
    fitted = adam(grad(objective), init, step_size=0.05, num_iters=150)
    scales = np.exp(fitted["log_scales"])
    print("means", np.round(fitted["means"], 3), "scales", np.round(scales, 3))
    print("loss", np.round(negative_log_likelihood(fitted, data), 4))
