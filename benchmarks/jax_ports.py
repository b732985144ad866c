"""JAX's example programs and JAX's tests of its example libraries and solvers, unchanged,
with JAX's names bound to autodiff's, against JAX's own run of the same files.

    python -m benchmarks.jax_ports [--source PATH] [--only NAME,...] [--write]

``PATH`` is JAX's source at the installed version: a checkout, or a bare git directory
whose tag ``jax-v<version>`` is read (default: ``$AUTODIFF_JAX_SOURCE``, else the mirror
``/work/.mirror/jax-ml+jax/repo``).  Nothing in a JAX file is changed: each is executed
with its own ``import`` statements answered by the mapping below (``MAPPING``), which
binds

* ``jax.numpy``, ``jax.lax``, ``jax.scipy``, ``jax.debug`` and the transforms (``grad``,
  ``value_and_grad``, ``jit``, ``vmap`` with JAX's ``in_axes``/``out_axes`` spelling,
  ``jvp``, ``vjp``, ``jacfwd``, ``jacrev``, ``jacobian``, ``hessian``, ``linearize``,
  ``checkpoint``, ``custom_jvp``, ``custom_vjp``) to autodiff's;
* ``jax.nn``'s activations to formulas in ``autodiff.numpy`` (autodiff has no ``nn``);
* ``jax.example_libraries.stax``/``optimizers`` to JAX's own files executed under this
  same mapping (``ported``);
* ``jtu.check_grads`` (JAX's test harness) to ``autodiff.testing.check_grads``;

and keeps JAX's own: ``jax.random`` (autodiff has no JAX-compatible PRNG: keys are JAX's
raw ``uint32[2]`` key data and every draw is JAX's, made on a concrete key, so both
systems see the same numbers), ``jax.nn.initializers`` (JAX's draws, returned as NumPy
arrays), pytrees (``jax.tree``/``jax.tree_util``), ``jax.config`` and the rest of JAX's
test harness (``jtu.JaxTestCase``, its parameterisation and assertions).  Any other name
of ``jax`` raises ``NotMapped``: nothing silently runs on JAX.  ``examples.datasets``'s
MNIST (a download) is replaced by random data of MNIST's shapes and dtypes from a fixed
seed (``--train``/``--test`` examples), the same for both systems; matplotlib draws to
nothing.  Both systems run with JAX's 64-bit mode on (autodiff computes in NumPy's
dtypes, which are 64-bit).

Test files run under ``unittest`` twice, under JAX and under the mapping; the table
lists, per file, the tests that pass, fail and are skipped on each, and the reason of each
difference.  Programs run as ``__main__`` under each system in a fresh process; their
printed numbers (all but timings) must agree to ``PROGRAM_RTOL``.  Results go to
``benchmarks/results-jax-ports.md`` with ``--write``.
"""

from __future__ import annotations

import argparse
import builtins
import datetime
import importlib
import math
import os
import pathlib
import re
import subprocess
import sys
import time
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._harness import child_environment

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results-jax-ports.md"
MIRROR = pathlib.Path("/work/.mirror/jax-ml+jax/repo")
PROGRAM_RTOL = 1e-6


class NotMapped(AttributeError):
    """A name of JAX that the mapping does not bind to autodiff (nor keep JAX's)."""


# --- JAX's source ----------------------------------------------------------------------------


def jax_version() -> str:
    import jax

    return jax.__version__


def source(path: str | os.PathLike | None = None) -> Callable[[str], str] | None:
    """A reader of JAX's source files (``read("tests/stax_test.py")``) at the installed
    JAX's version, or None where no source is found."""
    path = pathlib.Path(path or os.environ.get("AUTODIFF_JAX_SOURCE") or MIRROR)
    if (path / "jax" / "version.py").exists():  # a checkout
        return lambda name: (path / name).read_text()
    if not (path / "HEAD").exists() or not (path / "objects").exists():
        return None
    tag = f"jax-v{jax_version()}"

    def read(name: str) -> str:
        return subprocess.run(["git", "--git-dir", str(path), "show", f"{tag}:{name}"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip

    try:
        read("jax/version.py")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    return read


# --- the mapping -----------------------------------------------------------------------------


class _Namespace(types.ModuleType):
    """A module of explicit attributes; any other name raises ``NotMapped`` or, where a
    fallback is given, is looked up there (JAX's own modules that stay JAX's)."""

    def __init__(self, name: str, fallback: Any = None, **attributes: Any) -> None:
        super().__init__(name)
        self.__dict__.update(attributes)
        self._fallback = fallback

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or self._fallback is None:
            raise NotMapped(f"{self.__name__}.{attr} is not mapped onto autodiff")
        return getattr(self._fallback, attr)


def _numpy(x: Any) -> Any:
    import optree

    return optree.tree_map(np.asarray, x, none_is_leaf=False)


def _random() -> _Namespace:
    """jax.random with keys as JAX's raw key data (``uint32[..., 2]`` NumPy arrays): every
    draw is JAX's own, made on the concrete key; where a key or a parameter is traced
    (a key drawn from a jitted function's argument, keys under ``vmap``), through
    ``autodiff.pure_callback`` (one call per example under ``vmap``)."""
    import jax
    import optree

    import autodiff
    from autodiff.core.arrays import dtype_of, shape_of
    from autodiff.core.tracer import Tracer

    jr = jax.random

    def key_in(k: Any) -> Any:  # a JAX tracer too, under eval_shape
        k = k if hasattr(k, "dtype") else np.asarray(k)
        return jr.wrap_key_data(k) if k.dtype == np.uint32 else k

    def key_out(k: Any) -> Any:
        return jr.key_data(k) if jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key) else k

    def on_key_data(f: Callable) -> Callable:
        return lambda key, *args, **kwargs: key_out(f(key_in(key), *args, **kwargs))

    def call(f: Callable, name: str) -> Callable:
        def wrapped(*args, **kwargs):
            leaves, tree = optree.tree_flatten((args, kwargs), none_is_leaf=True)
            traced = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Tracer)]

            def on(*values):  # f with the traced leaves given
                given = list(leaves)
                for i, v in zip(traced, values):
                    given[i] = v
                a, k = optree.tree_unflatten(tree, given)
                return f(*a, **k)

            def concrete(*values):
                return _numpy(on(*map(np.asarray, values)))

            if not traced:
                return concrete()
            spec = jax.eval_shape(on, *[jax.ShapeDtypeStruct(shape_of(leaves[i]),
                                                             dtype_of(leaves[i]))
                                        for i in traced])  # fmt: skip
            return autodiff.pure_callback(concrete, spec, *[leaves[i] for i in traced],
                                          vmap_method="sequential")  # fmt: skip

        wrapped.__name__ = name
        return wrapped

    ns = _Namespace("jax.random (JAX's draws on concrete keys)")
    ns.key = ns.PRNGKey = call(lambda seed, impl=None: key_out(jr.key(seed, impl=impl)), "key")
    ns.split = call(on_key_data(jr.split), "split")
    ns.fold_in = call(on_key_data(jr.fold_in), "fold_in")
    ns.key_data = lambda key: key
    ns.wrap_key_data = lambda data, **k: data
    for name in ("normal", "uniform", "bernoulli", "randint", "permutation", "choice",
                 "categorical", "gamma", "beta", "exponential", "gumbel", "laplace",
                 "logistic", "truncated_normal", "multivariate_normal", "poisson",
                 "rademacher", "dirichlet", "t", "cauchy", "orthogonal", "bits"):  # fmt: skip
        setattr(ns, name, call(on_key_data(getattr(jr, name)), name))
    return ns


def _nn() -> _Namespace:
    """jax.nn's activations written from autodiff.numpy (as jax.nn defines them), and
    its initializers JAX's (on concrete keys), returning NumPy arrays."""
    import jax

    import autodiff.numpy as anp
    from autodiff.scipy import special as asp

    def elu(x, alpha=1.0):
        return anp.where(x > 0, x, alpha * anp.expm1(anp.where(x > 0, 0, x)))

    def gelu(x, approximate=True):
        if approximate:
            return 0.5 * x * (1 + anp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        return 0.5 * x * (1 + asp.erf(x / math.sqrt(2)))

    def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
        mean = anp.mean(x, axis, keepdims=True) if mean is None else mean
        if variance is None:
            variance = anp.mean(anp.square(x), axis, keepdims=True) - anp.square(mean)
        return (x - mean) * (1 / anp.sqrt(variance + epsilon))

    def initializer(factory: Callable) -> Callable:
        def make(*args, **kwargs):
            init = factory(*args, **kwargs)
            return lambda key, shape, dtype=None: _numpy(init(
                jax.random.wrap_key_data(np.asarray(key)), shape,
                *(() if dtype is None else (dtype,))))  # fmt: skip

        return make

    initializers = _Namespace("jax.nn.initializers (JAX's draws)")
    for name in ("glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "normal",
                 "uniform", "lecun_normal", "lecun_uniform", "orthogonal",
                 "variance_scaling", "truncated_normal", "xavier_normal",
                 "xavier_uniform", "kaiming_normal", "kaiming_uniform"):  # fmt: skip
        setattr(initializers, name, initializer(getattr(jax.nn.initializers, name)))
    initializers.zeros = lambda key, shape, dtype=float: anp.zeros(shape, dtype)
    initializers.ones = lambda key, shape, dtype=float: anp.ones(shape, dtype)
    return _Namespace(
        "jax.nn (autodiff)",
        relu=lambda x: anp.maximum(x, 0),
        log_softmax=lambda x, axis=-1: asp.log_softmax(x, axis=axis),
        softmax=lambda x, axis=-1: asp.softmax(x, axis=axis),
        logsumexp=asp.logsumexp,
        softplus=lambda x: anp.logaddexp(x, 0),
        sigmoid=asp.expit,
        elu=elu,
        leaky_relu=lambda x, negative_slope=0.01: anp.where(x >= 0, x, negative_slope * x),
        selu=lambda x: 1.0507009873554805 * elu(x, 1.6732632423543772),
        gelu=gelu,
        standardize=standardize,
        initializers=initializers,
    )


def _vmap(fun=None, in_axes=0, out_axes=0, axis_name=None, axis_size=None, **kwargs):
    """jax.vmap's spelling (``in_axes``/``out_axes``) of autodiff.vmap."""
    import autodiff

    if axis_name is not None or axis_size is not None or kwargs:
        raise NotMapped("jax.vmap(axis_name=, axis_size=, spmd_axis_name=) is not mapped")
    if fun is None:
        return lambda f: _vmap(f, in_axes, out_axes)
    if isinstance(in_axes, list):  # JAX reads a list of in_axes as a tuple
        in_axes = tuple(in_axes)
    return autodiff.vmap(fun, in_dims=in_axes, out_dims=out_axes)


def _check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """jtu.check_grads's signature on autodiff.testing.check_grads (a per-dtype dict of
    tolerances read at the arguments' dtype; ``atol`` folded into ``rtol``)."""
    from autodiff.testing.checkers import check_grads

    def pick(tol):
        if isinstance(tol, dict):
            dtype = np.result_type(*[np.asarray(a) for a in args])
            return tol.get(dtype.type, tol.get(np.dtype(dtype), max(tol.values())))
        return tol

    tols = [t for t in (pick(atol), pick(rtol)) if t is not None]
    check_grads(f, tuple(args), order, tuple(modes), eps=pick(eps),
                rtol=max(tols) if tols else None)  # fmt: skip


def _jtu(real_jtu: Any) -> _Namespace:
    return _Namespace("jax._src.test_util (check_grads: autodiff's)", real_jtu,
                      check_grads=_check_grads)  # fmt: skip


def _lax() -> _Namespace:
    import autodiff.lax as alax

    return _Namespace("jax.lax (autodiff)", **{n: getattr(alax, n) for n in alax.__all__})


def _scipy() -> _Namespace:
    from autodiff.scipy import linalg, optimize, special, stats

    return _Namespace("jax.scipy (autodiff)", linalg=linalg, optimize=optimize,
                      special=special, stats=stats)  # fmt: skip


def _datasets(train: int, test: int) -> _Namespace:
    """examples/datasets.py with random data of MNIST's shapes and dtypes (fixed seed)."""

    def mnist_raw():
        rng = np.random.default_rng(0)
        return (rng.integers(0, 256, (train, 28, 28), dtype=np.uint8),
                rng.integers(0, 10, train, dtype=np.uint8),
                rng.integers(0, 256, (test, 28, 28), dtype=np.uint8),
                rng.integers(0, 10, test, dtype=np.uint8))  # fmt: skip

    def mnist(permute_train=False):
        train_images, train_labels, test_images, test_labels = mnist_raw()
        flat = lambda x: np.reshape(x, (x.shape[0], -1)) / np.float32(255.0)
        hot = lambda x: np.array(x[:, None] == np.arange(10), np.float32)
        train_images, test_images = flat(train_images), flat(test_images)
        train_labels, test_labels = hot(train_labels), hot(test_labels)
        if permute_train:
            perm = np.random.RandomState(0).permutation(train_images.shape[0])
            train_images, train_labels = train_images[perm], train_labels[perm]
        return train_images, train_labels, test_images, test_labels

    return _Namespace("examples.datasets (random MNIST)", mnist=mnist, mnist_raw=mnist_raw)


class Mapping:
    """The modules a JAX file's imports are answered with (``modules``), by full name."""

    def __init__(self, train: int = 512, test: int = 256) -> None:
        import jax
        import jax._src.test_util as real_jtu

        import autodiff
        import autodiff.numpy as anp

        random = _random()
        nn = _nn()
        lax = _lax()
        scipy = _scipy()
        jtu = _jtu(real_jtu)
        src = _Namespace("jax._src", types.SimpleNamespace(), test_util=jtu)
        src._fallback = _LazyModules("jax._src")
        self.datasets = _datasets(train, test)
        libraries = _Namespace("jax.example_libraries (JAX's, ported)")
        self.jax = _Namespace(
            "jax (autodiff)",
            numpy=anp, lax=lax, nn=nn, random=random, scipy=scipy, debug=autodiff.debug,
            example_libraries=libraries, _src=src,
            tree=jax.tree, tree_util=jax.tree_util, config=jax.config, dtypes=jax.dtypes,
            grad=autodiff.grad, value_and_grad=autodiff.value_and_grad, jit=autodiff.jit,
            vmap=_vmap, jvp=autodiff.jvp, vjp=autodiff.vjp, jacfwd=autodiff.jacfwd,
            jacrev=autodiff.jacrev, jacobian=autodiff.jacobian, hessian=autodiff.hessian,
            linearize=autodiff.linearize, checkpoint=autodiff.checkpoint,
            remat=autodiff.checkpoint, custom_jvp=autodiff.custom_jvp,
            custom_vjp=autodiff.custom_vjp,
            device_put=lambda x, *a, **k: _numpy(x), effects_barrier=lambda: None,
            block_until_ready=lambda x: x,
        )  # fmt: skip
        self.modules: dict[str, Any] = {
            "jax": self.jax, "jax.numpy": anp, "jax.lax": lax, "jax.nn": nn,
            "jax.nn.initializers": nn.initializers, "jax.random": random,
            "jax.scipy": scipy, "jax.scipy.special": scipy.special,
            "jax.scipy.stats": scipy.stats, "jax.scipy.linalg": scipy.linalg,
            "jax.debug": autodiff.debug, "jax.tree_util": jax.tree_util,
            "jax._src": src, "jax._src.test_util": jtu, "jax.example_libraries": libraries,
            "examples": _Namespace("examples", datasets=self.datasets),
            "examples.datasets": self.datasets,
        }  # fmt: skip
        for name in ("stax", "optimizers"):
            module = self.execute(_library_path(name), f"autodiff_ported_{name}")
            setattr(libraries, name, module)
            self.modules[f"jax.example_libraries.{name}"] = module
        _register_optimizer_state(libraries.optimizers)

    def _import(self, name, globals=None, locals=None, fromlist=(), level=0):
        root = name.partition(".")[0]
        if level or root not in ("jax", "examples"):
            return builtins.__import__(name, globals, locals, fromlist, level)
        if name not in self.modules:
            if name.startswith(("jax._src.", "jax.tree_util")):
                self.modules[name] = importlib.import_module(name)  # JAX's internals
            else:  # a name inside a mapped module (import jax.scipy.stats.norm)
                module = self.modules[root]
                for part in name.split(".")[1:]:
                    try:
                        module = getattr(module, part)
                    except AttributeError:
                        raise NotMapped(f"import {name}: not mapped onto autodiff") from None
                self.modules[name] = module
        return self.modules[name] if fromlist else self.modules[root]

    def execute(self, path_or_text: pathlib.Path | str, name: str,
                main: bool = False, filename: str | None = None) -> types.ModuleType:  # fmt: skip
        """Run a JAX file's code as module ``name`` with its imports answered here."""
        if isinstance(path_or_text, pathlib.Path):
            filename, text = str(path_or_text), path_or_text.read_text()
        else:
            text = path_or_text
        module = types.ModuleType(name)
        module.__file__ = filename or f"<{name}>"
        if main:
            module.__name__ = "__main__"
        module.__dict__["__builtins__"] = {**vars(builtins), "__import__": self._import}
        sys.modules[name] = module  # dataclasses and pickling look modules up by name
        exec(compile(text, module.__file__, "exec"), module.__dict__)
        return module


class _LazyModules:
    """Attribute access as ``import prefix.<attr>`` (JAX's internals, kept)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __getattr__(self, attr: str) -> Any:
        return importlib.import_module(f"{self.prefix}.{attr}")


def _library_path(name: str) -> pathlib.Path:
    import jax

    return pathlib.Path(jax.__file__).parent / "example_libraries" / f"{name}.py"


def _register_optimizer_state(optimizers: types.ModuleType) -> None:
    """``OptimizerState`` is a pytree node to JAX (registered there by optimizers.py):
    the same node to optree, where autodiff looks (optree warns that it is a namedtuple)."""
    import optree

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "PyTree type", UserWarning)
        optree.register_pytree_node(
            optimizers.OptimizerState,
            lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
            lambda aux, children: optimizers.OptimizerState(*children, *aux),
            namespace=optree.registry.__GLOBAL_NAMESPACE,
        )


_MAPPING: Mapping | None = None


def mapping(x64: bool = True) -> Mapping:
    """The mapping, built once per process (with JAX's 64-bit mode on, for the tests, or
    off, JAX's default, for the programs, which are written for it)."""
    global _MAPPING
    if _MAPPING is None:
        import jax

        jax.config.update("jax_enable_x64", x64)
        _MAPPING = Mapping()
    return _MAPPING


# --- JAX's test files --------------------------------------------------------------------------

TEST_FILES = ("tests/stax_test.py", "tests/optimizers_test.py", "tests/custom_root_test.py",
              "tests/custom_linear_solve_test.py")  # fmt: skip


def run_tests(
    read: Callable[[str], str],
    name: str,
    ported: bool,
    select: Callable[[str], bool] = lambda test_id: True,
) -> dict[str, tuple]:
    """Run JAX's test file ``name`` under JAX (``ported=False``) or the mapping: each
    test's id to ``(outcome, reason)``, outcome one of pass/fail/error/skip."""
    import unittest

    import jax._src.test_util as jtu

    text = read(name)
    module_name = ("autodiff_" if ported else "jax_") + pathlib.Path(name).stem
    if ported:
        module = mapping().execute(text, module_name, filename=name)
    else:
        module = types.ModuleType(module_name)
        module.__file__ = name
        sys.modules[module_name] = module
        exec(compile(text, name, "exec"), module.__dict__)
    suite = jtu.JaxTestLoader().loadTestsFromModule(module)
    results: dict[str, tuple] = {}

    class Result(unittest.TestResult):
        def addSuccess(self, test):
            results[test.id()] = ("pass", "")

        def addFailure(self, test, err):
            results[test.id()] = ("fail", _reason(err))

        def addError(self, test, err):
            results[test.id()] = ("error", _reason(err))

        def addSkip(self, test, reason):
            results[test.id()] = ("skip", reason)

        def addExpectedFailure(self, test, err):  # noqa: ARG002
            results[test.id()] = ("pass", "expected failure")

        def addUnexpectedSuccess(self, test):
            results[test.id()] = ("fail", "unexpected success")

    def tests(s):
        for t in s:
            yield from (tests(t) if isinstance(t, unittest.TestSuite) else [t])

    chosen = unittest.TestSuite(t for t in tests(suite) if select(t.id()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen.run(Result())
    return {k.partition(".")[2]: v for k, v in results.items()}


def _reason(err: tuple) -> str:
    kind, value, _ = err
    text = str(value).strip().splitlines()
    return f"{kind.__name__}: {text[0][:160] if text else ''}"


# --- JAX's example programs --------------------------------------------------------------------

PROGRAMS = {  # program: (command-line arguments (absl flags), the random MNIST's training
    # and test examples, to fit a short run: each runs its own number of epochs; JAX's
    # 64-bit mode, on where JAX runs the program with it)
    "mnist_classifier_fromscratch.py": ([], (512, 256), True),
    "mnist_classifier.py": ([], (512, 256), True),
    "mnist_vae.py": ([], (64, 64), True),  # 100 epochs of 2 batches
    "advi.py": ([], (0, 0), True),
    # 64-bit JAX refuses its float32 images with float64 weights in lax.conv_general_dilated
    "differentially_private_sgd.py": (["--epochs=2", "--batch_size=64"], (512, 256), False),
}
NOTES = {
    "advi.py": "Its optimisation is unstable (JAX's own run reaches NaN): a rounding "
    "difference grows about 1000-fold per step; the objective and its gradient at the same "
    "parameters agree with JAX's to 1e-15 (`tests/test_jax_ports.py`).",
}
EXPLAINED = [  # the table's terms, written under it
    "The programs' printed numbers (all but timings) are compared line by line to a "
    f"relative {PROGRAM_RTOL:.0e}; each program runs as `__main__` in a fresh process under "
    "JAX and under the mapping, with the same random MNIST (fewer examples, so each runs its "
    "own number of epochs in minutes) and JAX's 64-bit mode on, except DP-SGD (JAX's own "
    "run refuses float32 images with float64 weights in 64-bit mode: both run in JAX's "
    "default 32-bit mode there, and autodiff computes in the float32 JAX's initialisers "
    "give). Seconds are wall-clock on a loaded machine. The test files run under `unittest` "
    "with JAX's harness (`jtu`, its sampled parameterisations: the same cases on both "
    "sides) and 64-bit mode on; the skipped tests are JAX's own `jax_skip_slow_tests` "
    "skips, on both. SM3 fails only eagerly: autodiff's values outside a transform are "
    "NumPy arrays, whose `max` takes no list of axes (a traced value's does).",
]
NOT_RUN = {  # programs the mapping cannot express
    "spmd_mnist_classifier_fromscratch.py": "multi-device sharding (jax.make_mesh, "
    "NamedSharding, reshard): JAX's runtime, no counterpart",
    "onnx2xla.py": "an ONNX-to-XLA compiler (needs onnx and a model download): JAX's "
    "tracing to XLA is the point",
}


def run_program(read: Callable[[str], str], name: str, system: str) -> None:
    """Run ``examples/<name>`` as ``__main__`` in this process under ``system`` (jax or
    autodiff), with the random MNIST and matplotlib drawing to nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.pause = plt.show = lambda *a, **k: None
    plt.imsave = lambda *a, **k: None
    flags, sizes, x64 = PROGRAMS[name]
    sys.argv = [name, *flags]
    text = read(f"examples/{name}")
    if system == "autodiff":
        ported = mapping(x64=x64)
        data = _datasets(*sizes)
        ported.datasets.mnist, ported.datasets.mnist_raw = data.mnist, data.mnist_raw
        ported.execute(text, "__main__", main=True, filename=name)
        return
    import jax

    jax.config.update("jax_enable_x64", x64)
    datasets = _datasets(*sizes)
    sys.modules["examples"] = types.SimpleNamespace(datasets=datasets)  # type: ignore
    sys.modules["examples.datasets"] = datasets
    module = types.ModuleType("__main__")
    module.__file__ = name
    sys.modules["__main__"] = module
    exec(compile(text, name, "exec"), module.__dict__)


# --- the run: both systems, compared -----------------------------------------------------------

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf")
_TIMING = re.compile(r"[-+]?\d+\.?\d*\s*sec")


def compare_outputs(ours: str, theirs: str, rtol: float = PROGRAM_RTOL) -> tuple[bool, str]:
    """Whether two runs printed the same lines with the same numbers to ``rtol`` (timings
    left out); else how many leading lines agree, and the first that does not."""
    ours_lines = [_TIMING.sub("", line) for line in ours.splitlines() if line.strip()]
    their_lines = [_TIMING.sub("", line) for line in theirs.splitlines() if line.strip()]
    worst = 0.0
    for n, (a, b) in enumerate(zip(ours_lines, their_lines)):
        differs = _NUMBER.sub("#", a) != _NUMBER.sub("#", b)
        for x, y in zip(map(float, _NUMBER.findall(a)), map(float, _NUMBER.findall(b))):
            if not ((math.isnan(x) and math.isnan(y)) or x == y):
                diff = abs(x - y) / max(abs(x), abs(y), 1e-300)
                differs = differs or diff > rtol
                worst = worst if diff > rtol else max(worst, diff)
        if differs:
            return False, (f"the first {n} of {len(their_lines)} lines agree (to "
                           f"{worst:.0e}); then `{a.strip()[:60]}` where JAX printed "
                           f"`{b.strip()[:60]}`")  # fmt: skip
    if len(ours_lines) != len(their_lines):
        return False, f"{len(ours_lines)} lines printed, JAX printed {len(their_lines)}"
    return True, f"{len(their_lines)} lines, largest relative difference {worst:.0e}"


def _child(args: list[str], timeout: float) -> tuple[int, str, float]:
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.jax_ports", *args],
                              capture_output=True, text=True, timeout=timeout,
                              env=child_environment(PYTHONPATH=str(HERE.parent)),
                              cwd=HERE.parent)  # fmt: skip
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s", timeout
    out = done.stdout if done.returncode == 0 else done.stdout + done.stderr[-2000:]
    return done.returncode, out, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", help="JAX's source: a checkout or a bare git directory")
    parser.add_argument("--only", help="comma-separated programs and test files")
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name}")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per program run")
    parser.add_argument("--program", help=argparse.SUPPRESS)  # a child: one program's run
    parser.add_argument("--system", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    read = source(args.source)
    if read is None:
        sys.exit(f"no JAX source at the installed version {jax_version()}: pass --source or "
                 f"set AUTODIFF_JAX_SOURCE (a checkout of jax-v{jax_version()})")  # fmt: skip
    if args.program:
        run_program(read, args.program, args.system)
        return
    only = set(args.only.split(",")) if args.only else None
    lines = [f"## JAX's example programs and tests on autodiff ({datetime.date.today()})", "",
             f"`python -m benchmarks.jax_ports --write` (JAX {jax_version()}'s files, "
             f"`uptime` load {os.getloadavg()[0]:.1f}).", "",
             "| program | JAX | autodiff | agrees with JAX | seconds (JAX / autodiff) |",
             "|---|---|---|---|---|"]  # fmt: skip
    for name in PROGRAMS:
        if only and name not in only:
            continue
        jax_rc, jax_out, jax_s = _child(["--program", name, "--system", "jax"], args.timeout)
        rc, out, s = _child(["--program", name, "--system", "autodiff"], args.timeout)
        agrees, how = compare_outputs(out, jax_out) if rc == 0 == jax_rc else (False, "")
        status = lambda code, text: "runs" if code == 0 else f"fails: {_last_line(text)}"
        note = f" {NOTES[name]}" if name in NOTES else ""
        verdict = f"{'yes' if agrees else 'no'}: {how}.{note}"
        lines.append(f"| `{name}` | {status(jax_rc, jax_out)} | {status(rc, out)} | "
                     f"{verdict} | {jax_s:.0f} / {s:.0f} |")  # fmt: skip
        print(lines[-1], flush=True)
    for name, why in NOT_RUN.items():
        lines.append(f"| `{name}` | not run | not run | {why} | |")
    lines += ["", "| test file | JAX: pass / fail / skip | autodiff: pass / fail / skip | "
              "failing on autodiff only |", "|---|---|---|---|"]  # fmt: skip
    failures = []
    for name in TEST_FILES:
        if only and pathlib.Path(name).name not in only:
            continue
        theirs = run_tests(read, name, ported=False)
        ours = run_tests(read, name, ported=True)
        count = lambda r: " / ".join(
            str(sum(v[0] in kinds for v in r.values()))
            for kinds in (("pass",), ("fail", "error"), ("skip",)))  # fmt: skip
        ours_only = sorted(t for t, v in ours.items() if v[0] in ("fail", "error")
                           and theirs.get(t, ("",))[0] == "pass")  # fmt: skip
        lines.append(f"| `{name}` | {count(theirs)} | {count(ours)} | {len(ours_only)} |")
        print(lines[-1], flush=True)
        failures += [f"- `{name}` `{t}`: {ours[t][1]}" for t in ours_only]
    lines += ["", "Failing on autodiff where JAX passes, and why:", "", *failures, "", *EXPLAINED]
    print("\n".join(lines))
    if args.write:
        _write_section(lines)


def _last_line(text: str) -> str:
    rest = [line for line in text.strip().splitlines() if line.strip()]
    return rest[-1][:120].replace("|", "\\|") if rest else "no output"


def _write_section(lines: list[str]) -> None:
    """Replace this benchmark's dated section of the results file (others' kept)."""
    head = "## JAX's example programs and tests on autodiff"
    old = RESULTS.read_text() if RESULTS.exists() else "# JAX's programs on autodiff\n"
    kept = old.split(head)[0].rstrip() + "\n\n"
    RESULTS.write_text(kept + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
