"""JAX's example libraries and JAX-style training programs on autodiff, against JAX.

``stax`` and ``optimizers`` are JAX's own files (``jax/example_libraries/``, from the
installed ``jax``), executed a second time with their ``jax.numpy``/``jax.lax`` (and the
transforms) bound to autodiff's: only their parameter initialisation stays JAX's
(``jax.random`` and ``jax.nn.initializers``, on concrete keys, so both sides start from
the same parameters), and ``jax.nn``'s activations, which autodiff has no module for, are
written from ``autodiff.numpy`` (``benchmarks/jax_ports.py``'s mapping).  Every value
and gradient of the ported copy is compared with JAX's own (64-bit) running the same
program:

* a CNN built from stax's layers (2-D ``Conv`` with strides and both paddings, a 1-D and
  an NCHW ``GeneralConv``, ``ConvTranspose``, max/average/sum pooling, ``BatchNorm``,
  a residual ``FanOut``/``parallel``/``FanInSum`` block, ``Dense``, ``LogSoftmax``): its
  output and the gradient of its loss in every parameter, eagerly and under ``jit``;
* the update loop of JAX's ``mnist_classifier.py`` (``jit(update)`` taking
  ``opt_state``) with each of the optimizers but ``sm3`` (see ``OPTIMIZERS``), three
  steps; ``OptimizerState``, a pytree node registered with JAX, is registered with
  optree too (autodiff's pytrees are optree's);
* DP-SGD's private gradient as JAX's ``differentially_private_sgd.py`` computes it
  (per-example gradients by ``vmap(grad)`` over single-example batches, each clipped to
  an L2 norm, summed, noised, averaged) on that example's network, scaled down, with
  the noise given as arrays (JAX's draws made once, outside).

JAX's example programs themselves and JAX's own test files for the libraries and the
solvers run through the same mapping in ``tests/test_jax_ports.py`` and
``python -m benchmarks.jax_ports``.
"""

import types

import numpy as np
import optree
import pytest

import autodiff
import autodiff.numpy as anp
from benchmarks import jax_ports
from tests.crosscheck import jax as _jax

jax = _jax()
jnp = jax.numpy


@pytest.fixture(scope="module")
def ours():
    """JAX's stax and optimizers executed under benchmarks/jax_ports.py's mapping."""
    modules = jax_ports.mapping().modules
    libraries = modules["jax.example_libraries"]
    return types.SimpleNamespace(stax=libraries.stax, optimizers=libraries.optimizers)


@pytest.fixture(scope="module")
def theirs():
    from jax.example_libraries import optimizers, stax

    return types.SimpleNamespace(stax=stax, optimizers=optimizers)


def _numpy(tree):
    return optree.tree_map(np.asarray, tree, none_is_leaf=False)


def _close(got, want, rtol=1e-9, what=""):
    got, want = optree.tree_leaves(_numpy(got)), optree.tree_leaves(_numpy(want))
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (what, i, g.shape, w.shape)
        scale = float(np.max(np.abs(w), initial=0.0))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale + 1e-13,
                                   err_msg=f"{what}: leaf {i}")  # fmt: skip


# --- a CNN of stax's layers -----------------------------------------------------------------------


def _cnn(stax):
    """Both paddings, strides, three poolings, BatchNorm, a transposed convolution, a
    residual block, an NCHW convolution: NHWC images (8 x 8 x 2) to 10 log-probabilities."""
    residual = stax.serial(stax.FanOut(2), stax.parallel(stax.Conv(6, (3, 3), padding="SAME"),
                                                         stax.Identity), stax.FanInSum)  # fmt: skip
    return stax.serial(
        stax.Conv(6, (3, 3), padding="SAME"), stax.Relu,
        stax.MaxPool((2, 2), strides=(1, 1), padding="SAME"),
        residual, stax.BatchNorm(axis=(0, 1, 2)), stax.Tanh,
        stax.Conv(8, (3, 3), strides=(2, 2), padding="VALID"), stax.Elu,
        stax.ConvTranspose(4, (2, 2), strides=(2, 2), padding="SAME"), stax.Gelu,
        stax.AvgPool((2, 2), strides=(2, 2)),
        stax.GeneralConv(("NHWC", "OIHW", "NCHW"), 5, (2, 2), padding="VALID"), stax.Softplus,
        stax.SumPool((2, 1), padding="SAME"),
        stax.Flatten, stax.Dense(10), stax.LogSoftmax,
    )  # fmt: skip


def _conv1d(stax):
    """A 1-D network (NWC): GeneralConv with any number of spatial axes."""
    return stax.serial(
        stax.GeneralConv(("NWC", "WIO", "NWC"), 4, (3,), strides=(1,), padding="SAME"),
        stax.Relu, stax.MaxPool((2,), strides=(2,)),
        stax.GeneralConv(("NWC", "WIO", "NWC"), 3, (2,), padding="VALID"), stax.Sigmoid,
        stax.Flatten, stax.Dense(2), stax.LogSoftmax,
    )  # fmt: skip


MODELS = {"cnn_2d": (_cnn, (4, 8, 8, 2)), "cnn_1d": (_conv1d, (3, 12, 2))}


def _loss(apply, params, images, labels):
    return -(apply(params, images) * labels).sum() / images.shape[0]


def _setup(theirs, ours, model):
    build, shape = MODELS[model]
    init, jax_apply = build(theirs.stax)
    _, our_apply = build(ours.stax)
    _, params = jax.jit(init, static_argnums=1)(jax.random.PRNGKey(0), shape)
    rng = np.random.default_rng(1)
    images = rng.normal(size=shape)
    labels = np.eye(10 if model == "cnn_2d" else 2)[rng.integers(0, 2, shape[0])]
    return jax.jit(jax_apply), our_apply, _numpy(params), images, labels


@pytest.mark.parametrize("model", sorted(MODELS))
def test_stax_network_value_and_gradient_agree_with_jax(theirs, ours, model):
    jax_apply, our_apply, params, images, labels = _setup(theirs, ours, model)
    want = jax_apply(params, images)
    _close(our_apply(params, images), want, what="output")
    _close(autodiff.jit(our_apply)(params, images), want, what="output under jit")

    def jax_loss(p):
        return _loss(jax_apply, p, images, labels)

    def our_loss(p):
        return _loss(our_apply, p, images, labels)

    want = jax.jit(jax.grad(jax_loss))(params)
    _close(autodiff.grad(our_loss)(params), want, what="gradient")
    _close(autodiff.jit(autodiff.grad(our_loss))(params), want, what="gradient under jit")


OPTIMIZERS = {
    "sgd": lambda o: o.sgd(0.1),
    "momentum": lambda o: o.momentum(0.1, 0.9),
    "nesterov": lambda o: o.nesterov(0.1, 0.9),
    "adagrad": lambda o: o.adagrad(0.1),
    "rmsprop": lambda o: o.rmsprop(0.01),
    "rmsprop_momentum": lambda o: o.rmsprop_momentum(0.01),
    "adam": lambda o: o.adam(o.exponential_decay(0.01, 2, 0.5)),
    "adamax": lambda o: o.adamax(o.inverse_time_decay(0.01, 1, 0.5)),
}
# Not sm3: its update calls ``accum.max(axes)`` with a list of axes, which JAX's arrays take
# and NumPy's (autodiff's values outside a transform) refuse.


@pytest.fixture(scope="module")
def cnn_1d(theirs, ours):
    """The 1-D network's setup, and JAX's gradient of its loss, compiled once."""
    jax_apply, our_apply, params, images, labels = _setup(theirs, ours, "cnn_1d")
    jax_grad = jax.jit(jax.grad(lambda p, x, y: _loss(jax_apply, p, x, y)))
    return jax_grad, our_apply, params, images, labels


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_the_mnist_classifier_update_loop_agrees_with_jax(theirs, ours, cnn_1d, name):
    """JAX's mnist_classifier.py: ``jit(update)(i, opt_state, batch)`` with the gradient
    of the loss at ``get_params(opt_state)``, three steps, on the 1-D network (JAX's side
    runs its optimizer eagerly, with its gradient compiled once for all optimizers)."""
    jax_grad, our_apply, params, images, labels = cnn_1d
    init, update, get_params = OPTIMIZERS[name](theirs.optimizers)
    opt_state = init(params)
    for i in range(3):
        opt_state = update(i, jax_grad(get_params(opt_state), images, labels), opt_state)
    want = get_params(opt_state)

    init, update, get_params = OPTIMIZERS[name](ours.optimizers)

    @autodiff.jit
    def step(i, opt_state, images, labels):
        p = get_params(opt_state)
        return update(i, autodiff.grad(lambda p: _loss(our_apply, p, images, labels))(p),
                      opt_state)  # fmt: skip

    opt_state = init(params)
    for i in range(3):
        opt_state = step(i, opt_state, images, labels)
    _close(get_params(opt_state), want, rtol=1e-8, what=name)


def test_dp_sgd_private_gradient_agrees_with_jax(theirs, ours):
    """differentially_private_sgd.py's private gradient on its network (narrower, on
    12 x 12 images): per-example gradients of single-example batches by vmap(grad) with
    in_axes (None, None, 0), each clipped to L2 norm 1.5, summed, noised, averaged."""

    def network(stax):
        return stax.serial(
            stax.Conv(4, (4, 4), padding="SAME", strides=(2, 2)), stax.Relu,
            stax.MaxPool((2, 2), (1, 1)),
            stax.Conv(6, (3, 3), padding="VALID", strides=(2, 2)), stax.Relu,
            stax.MaxPool((2, 2), (1, 1)),
            stax.Flatten, stax.Dense(8), stax.Relu, stax.Dense(10),
        )  # fmt: skip

    init, jax_predict = network(theirs.stax)
    _, our_predict = network(ours.stax)
    _, params = jax.jit(init, static_argnums=1)(jax.random.PRNGKey(1), (1, 12, 12, 1))
    params = _numpy(params)
    rng = np.random.default_rng(2)
    batch_size, clip, multiplier = 5, 1.5, 1.1
    images = rng.normal(size=(batch_size, 1, 12, 12, 1))  # each example a batch of one
    labels = np.eye(10)[rng.integers(0, 10, batch_size)][:, None, :]
    noise = [rng.normal(size=np.shape(leaf)) for leaf in optree.tree_leaves(params)]

    def private_grad(np_, grad, vmap, tree, predict):
        def loss(params, batch):
            inputs, targets = batch
            logits = predict(params, inputs)
            logits = logits - np_.max(logits, axis=1, keepdims=True)
            logits = logits - np_.log(np_.sum(np_.exp(logits), axis=1, keepdims=True))
            return -np_.mean(np_.sum(logits * targets, axis=1))

        def clipped_grad(params, l2_norm_clip, single_example_batch):
            grads = grad(loss)(params, single_example_batch)
            leaves, treedef = tree.flatten(grads)
            total = np_.linalg.norm(np_.array([np_.linalg.norm(g.ravel()) for g in leaves]))
            divisor = np_.maximum(total / l2_norm_clip, 1.0)
            return tree.unflatten(treedef, [g / divisor for g in leaves])

        def private(params, batch):
            clipped = vmap(clipped_grad, (None, None, 0))(params, clip, batch)
            leaves, treedef = tree.flatten(clipped)
            summed = [g.sum(0) for g in leaves]
            noised = [g + clip * multiplier * z for g, z in zip(summed, noise)]
            return tree.unflatten(treedef, [g / batch_size for g in noised])

        return private

    batch = (images, labels)
    want = jax.jit(private_grad(jnp, jax.grad, jax.vmap, jax.tree, jax_predict))(params, batch)
    ours_fn = private_grad(anp, autodiff.grad, autodiff.vmap, jax.tree, our_predict)
    _close(ours_fn(params, batch), want, what="private gradient")
    _close(autodiff.jit(ours_fn)(params, batch), want, what="private gradient under jit")
    # the clipping matters: some examples' gradients are longer than the clip, some not
    grads = jax.jit(jax.vmap(jax.grad(
        lambda p, b: -jnp.sum(jax.nn.log_softmax(jax_predict(p, b[0])) * b[1])), (None, 0)))(
        params, batch)  # fmt: skip
    norms = np.sqrt(sum(np.sum(np.square(g), axis=tuple(range(1, g.ndim)))
                        for g in optree.tree_leaves(grads)))  # fmt: skip
    assert norms.max() > clip > norms.min(), norms
