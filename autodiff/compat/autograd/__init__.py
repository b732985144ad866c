"""HIPS autograd's names on autodiff: programs written for autograd run unchanged.

    python -m autodiff.compat.autograd program.py [args...]

runs ``program.py`` (``-``: the program on standard input) with ``import autograd...``
resolved here (``install()`` does the same in a running interpreter): ``autograd.numpy``
(and ``.random``, ``.linalg``, ``.fft``) is ``autodiff.numpy``, ``autograd.scipy.*`` is
``autodiff.scipy.*``, and the rest is below, with autograd's signatures: its
differential operators (``grad(fun, argnum=0)``, ``value_and_grad``,
``elementwise_grad``, ``jacobian``, ``hessian``, ``hessian_vector_product``,
``make_vjp``, ``make_jvp``, ...), ``autograd.extend`` (``primitive``, ``defvjp``,
``defjvp``), ``autograd.misc`` (``flatten``, ``flatten_func``, the optimizers ``sgd``,
``rmsprop``, ``adam``, ``fixed_point``), ``autograd.test_util.check_grads`` and
``autograd.builtins``. autograd's tracer internals (``autograd.tracer``, ``Box``,
``VSpace``) have no counterpart.

>>> import numpy as np
>>> from autodiff.compat import autograd
>>> autograd.grad(lambda x, y: np.sum(x * y), 1)(np.ones(2), np.arange(2.0))
array([1., 1.])
>>> autograd.elementwise_grad(np.tanh)(np.zeros(3))
array([1., 1., 1.])
"""

from __future__ import annotations

import builtins
import functools
import importlib
import importlib.machinery
import inspect
import io
import math
import os
import runpy
import sys
import types
import zipimport
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import autodiff.numpy as anp
from autodiff.core import trees
from autodiff.core.arrays import dtype_of, ndim_of, shape_of
from autodiff.core.loading import load
from autodiff.interpreters.forward import jvp as _jvp
from autodiff.interpreters.reverse import _vjp as _reverse_vjp
from autodiff.interpreters.reverse import vjp as _vjp
from autodiff.rules.creation import as_output

__all__ = [  # checkpoint and autograd.extend's: from __getattr__ below, at first use
    "checkpoint", "defjvp", "defvjp", "notrace_primitive", "primitive",
    "deriv", "elementwise_grad", "grad", "grad_and_aux", "grad_named", "hessian",
    "hessian_tensor_product", "hessian_vector_product", "holomorphic_grad", "install", "jacobian",
    "make_hvp", "make_jvp", "make_vjp", "tensor_jacobian_product",
    "value_and_grad", "vector_jacobian_product",
]  # fmt: skip


def _custom_vjp(fun: Callable, **options: Any) -> Any:
    """``autodiff.custom_vjp``, its module imported at first use (as the package does)."""
    return load("autodiff.transforms.custom").custom_vjp(fun, **options)


# autograd.extend's names: autograd_extend.py, imported at first use (autograd.extend's)
_EXTEND = ("primitive", "defvjp", "defjvp", "notrace_primitive")


def __getattr__(name: str) -> Any:
    """``checkpoint`` is the package's, imported at its first use (as ``autodiff``'s);
    ``primitive`` and the rest of ``autograd.extend`` are ``autograd_extend.py``'s."""
    if name == "checkpoint":
        return load("autodiff.transforms.checkpoint").checkpoint
    if name in _EXTEND:
        return getattr(load("autodiff.compat.autograd_extend"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "checkpoint", *_EXTEND})


# --- the differential operators: unary ones made n-ary, as autograd does ---------------------


def _nary(unary: Callable) -> Callable:
    """``unary(f, x, ...)`` as autograd's ``op(fun, argnum=0, ...)(*args, **kwargs)``: the
    derivative with respect to positional argument ``argnum`` (a tuple: several at once,
    taken as one tuple)."""

    @functools.wraps(unary)
    def operator(fun: Callable, argnum: int | Sequence[int] = 0, *op_args: Any, **op_kwargs: Any):
        @functools.wraps(fun)
        def applied(*args: Any, **kwargs: Any) -> Any:
            many = not isinstance(argnum, int)

            def of_x(x):
                full = list(args)
                for i, v in zip(argnum, x) if many else [(argnum, x)]:  # type: ignore[arg-type]
                    full[i] = v
                return fun(*full, **kwargs)

            x = tuple(args[i] for i in argnum) if many else args[argnum]  # type: ignore
            return unary(of_x, x, *op_args, **op_kwargs)

        return applied

    return operator


def _one(x: Any) -> Any:
    return trees.tree_map(anp.ones_like, x)


def _unary_vjp(f: Callable, x: Any) -> tuple[Callable, Any]:
    ans, pullback = _vjp(f, x)
    return (lambda g: pullback(g)[0]), ans


def _gradient(f: Callable, x: Any, what: str) -> tuple[Any, Any]:
    """The gradient of a scalar-valued ``f`` at ``x``, and its value: the package's
    ``grad`` path (its tape used once and freed as it goes), with autograd's check."""
    ans, pullback, _ = _reverse_vjp(f, (x,), False, what)
    _scalar(ans, what)
    pullback._consume = True  # (as grad's own: nothing else holds this pullback)
    return pullback(np.ones_like(ans))[0], ans


def _scalar(ans: Any, what: str) -> None:
    if math.prod(shape_of(ans)) != 1:
        raise TypeError(f"{what} only applies to real scalar-output functions (this one has "
                        f"shape {shape_of(ans)}). Try jacobian, elementwise_grad or "
                        f"holomorphic_grad.")  # fmt: skip


@_nary
def make_vjp(f: Callable, x: Any) -> tuple[Callable, Any]:
    """autograd.make_vjp: ``(vjp, ans)``, ``vjp(g)`` the cotangent of the argument."""
    return _unary_vjp(f, x)


@_nary
def make_jvp(f: Callable, x: Any) -> Callable:
    """autograd.make_jvp: a function of a tangent returning ``(ans, tangent_out)``."""
    return lambda v: _jvp(f, (x,), (v,))


@_nary
def grad(f: Callable, x: Any) -> Any:
    """autograd.grad(fun, argnum=0): the gradient of a scalar-valued ``fun``."""
    return _gradient(f, x, "grad")[0]


@_nary
def value_and_grad(f: Callable, x: Any) -> tuple[Any, Any]:
    """autograd.value_and_grad: ``(value, gradient)``."""
    gradient, ans = _gradient(f, x, "value_and_grad")
    return as_output(ans), gradient


@_nary
def grad_and_aux(f: Callable, x: Any) -> tuple[Any, Any]:
    """autograd.grad_and_aux: the gradient of the first output, and the second as it is."""
    ans, pullback, aux = _vjp(lambda x: tuple(f(x)), x, has_aux=True)
    return pullback(_one(ans))[0], aux


@_nary
def elementwise_grad(f: Callable, x: Any) -> Any:
    """autograd.elementwise_grad: the VJP of ones (the sum of the Jacobian's rows)."""
    pullback, ans = _unary_vjp(f, x)
    return pullback(_one(ans))


@_nary
def deriv(f: Callable, x: Any) -> Any:
    """autograd.deriv: the JVP along ones."""
    return _jvp(f, (x,), (_one(x),))[1]


@_nary
def jacobian(f: Callable, x: Any) -> Any:
    """autograd.jacobian: shape ``out.shape + x.shape``, one VJP per output element."""
    pullback, ans = _unary_vjp(f, x)
    shape = shape_of(ans)  # (np.shape of a traced value would load anp's _shape.py)
    n = math.prod(shape)
    basis = np.eye(n).reshape((n, *shape)) if shape else np.ones((1,))
    rows = [pullback(anp.asarray(b, dtype=dtype_of(ans))) for b in basis]
    return anp.reshape(anp.stack(rows), shape + shape_of(x))


@_nary
def holomorphic_grad(f: Callable, x: Any) -> Any:
    """autograd.holomorphic_grad: the gradient of the real part."""
    return grad(lambda x: anp.real(f(x)))(x)


@_nary
def hessian(f: Callable, x: Any) -> Any:
    """autograd.hessian: the Jacobian of the Jacobian."""
    return jacobian(jacobian(f))(x)


@_nary
def make_hvp(f: Callable, x: Any) -> tuple[Callable, Any]:
    """autograd.make_hvp: ``(hvp, grad)`` at ``x``."""
    return _unary_vjp(grad(f), x)


def grad_named(fun: Callable, argname: str) -> Callable:
    """autograd.grad_named: the gradient with respect to a named argument."""
    return grad(fun, list(inspect.signature(fun).parameters).index(argname))


def hessian_tensor_product(fun: Callable, argnum: int = 0) -> Callable:
    """autograd.hessian_tensor_product (also hessian_vector_product): a function of
    ``(*args, tensor)`` returning the Hessian times ``tensor``.

    Where ``tensor`` is shaped like the argument and both are real floating-point, it is
    the JVP of the gradient (forward over reverse: about half the work of autograd's
    gradient of ``grad . tensor``, reverse over reverse, which gives the transposed
    Hessian times ``tensor``: the same product, the Hessian of a scalar function being
    symmetric).  Otherwise it is computed as autograd does."""
    fun_grad = grad(fun, argnum)

    def dotted(*args: Any, **kwargs: Any) -> Any:
        *rest, tensor = args
        return anp.tensordot(fun_grad(*rest, **kwargs), tensor, ndim_of(tensor))

    reverse_over_reverse = grad(dotted, argnum)

    @functools.wraps(reverse_over_reverse)
    def product(*args: Any, **kwargs: Any) -> Any:
        *rest, tensor = args
        x = rest[argnum] if isinstance(argnum, int) and -len(rest) <= argnum < len(rest) else None
        if x is None or not _real_like(x, tensor):
            return reverse_over_reverse(*args, **kwargs)

        def of_x(x: Any) -> Any:
            full = list(rest)
            full[argnum] = x
            return fun_grad(*full, **kwargs)

        tangent = anp.asarray(tensor, dtype=anp.result_type(x))
        return _jvp(of_x, (x,), (tangent,))[1]

    return product


def _real_like(x: Any, tensor: Any) -> bool:
    """Whether ``tensor`` is a real tangent for ``x``: the same shape, both of real
    floating-point (or, for ``tensor``, integer) dtypes."""
    kinds = anp.result_type(x).kind, anp.result_type(tensor).kind
    return shape_of(x) == shape_of(tensor) and kinds[0] == "f" and kinds[1] in "fiub"


hessian_vector_product = hessian_tensor_product


def tensor_jacobian_product(fun: Callable, argnum: int = 0) -> Callable:
    """autograd.tensor_jacobian_product (also vector_jacobian_product): a function of
    ``(*args, tensor)`` returning ``tensor`` times the Jacobian."""

    def dotted(*args: Any, **kwargs: Any) -> Any:
        *rest, tensor = args
        return anp.tensordot(tensor, fun(*rest, **kwargs), axes=ndim_of(tensor))

    return jacobian(dotted, argnum)


vector_jacobian_product = tensor_jacobian_product


# --- autograd.misc: flatten, optimizers, fixed points -----------------------------------------


def _flat_leaves(value: Any) -> list:
    if type(value) in (list, tuple):
        return [leaf for v in value for leaf in _flat_leaves(v)]
    if type(value) is dict:
        return [leaf for k in sorted(value) for leaf in _flat_leaves(value[k])]
    return [value]


def _rebuild(value: Any, parts: Any) -> Any:
    if type(value) in (list, tuple):
        return type(value)(_rebuild(v, parts) for v in value)
    if type(value) is dict:
        return {k: _rebuild(value[k], parts) for k in sorted(value)}
    piece = next(parts)
    return anp.reshape(piece, np.shape(value)) if np.ndim(value) else piece[0]


def flatten(value: Any) -> tuple[Any, Callable]:
    """autograd.misc.flatten: nested tuples, lists and dicts (keys sorted) of arrays as
    one vector, and the function that rebuilds them."""
    leaves = _flat_leaves(value)
    flat = anp.concatenate([anp.ravel(x) for x in leaves]) if leaves else np.zeros(0)
    sizes = [int(np.size(x)) for x in leaves]

    def unflatten(vector: Any) -> Any:
        cuts = np.cumsum(sizes)[:-1].tolist()
        return _rebuild(value, iter(anp.split(vector, cuts) if sizes else []))

    return flat, unflatten


def flatten_func(func: Callable, example: Any) -> tuple[Callable, Callable, Any]:
    """autograd.misc.flatten_func: ``func`` as a function of one flat vector."""
    flat, unflatten = flatten(example)
    return (lambda x, *args: flatten(func(unflatten(x), *args))[0]), unflatten, flat


def _flat_optimizer(step: Callable) -> Callable:
    """An optimizer of flat vectors as one of any nesting (autograd's convention):
    ``optimizer(grad, x0, callback=None, num_iters=..., ...)``, ``grad(x, i)``,
    ``callback(x, i, g)``."""

    @functools.wraps(step)
    def optimize(grad: Callable, x0: Any, callback: Callable | None = None, *args, **kwargs):
        flat, unflatten = flatten(x0)
        flat_grad = lambda x, i: flatten(grad(unflatten(x), i))[0]
        flat_callback = None if callback is None else (
            lambda x, i, g: callback(unflatten(x), i, unflatten(g)))  # fmt: skip
        return unflatten(step(flat_grad, flat, flat_callback, *args, **kwargs))

    return optimize


@_flat_optimizer
def sgd(grad, x, callback=None, num_iters=200, step_size=0.1, mass=0.9):
    """autograd.misc.optimizers.sgd: gradient descent with momentum."""
    velocity = np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity - (1.0 - mass) * g
        x = x + step_size * velocity
    return x


@_flat_optimizer
def rmsprop(grad, x, callback=None, num_iters=100, step_size=0.1, gamma=0.9, eps=1e-8):
    """autograd.misc.optimizers.rmsprop."""
    mean_square = np.ones(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        mean_square = mean_square * gamma + g**2 * (1 - gamma)
        x = x - step_size * g / (np.sqrt(mean_square) + eps)
    return x


@_flat_optimizer
def adam(grad, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=1e-8):
    """autograd.misc.optimizers.adam (Kingma and Ba, with bias correction)."""
    m, v = np.zeros(len(x)), np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * g**2 + b2 * v
        x = x - step_size * (m / (1 - b1 ** (i + 1))) / (np.sqrt(v / (1 - b2 ** (i + 1))) + eps)
    return x


def _iterate(step: Callable, x0: Any, distance: Callable, tol: float) -> Any:
    x, previous = step(x0), x0
    while distance(x, previous) > tol:
        x, previous = step(x), x
    return x


def fixed_point(f: Callable, a: Any, x0: Any, distance: Callable, tol: float) -> Any:
    """autograd.misc.fixed_points.fixed_point: iterate ``x = f(a)(x)`` from ``x0`` until
    ``distance(x, previous) <= tol``; differentiable in ``a`` by the implicit function
    theorem (the adjoint is a fixed-point iteration too)."""

    @_custom_vjp
    def solve(a):
        return _iterate(f(a), x0, distance, tol)

    def fwd(a):
        x = solve(a)
        return x, (a, x)

    def bwd(res, g):
        a, x = res
        pull_x = _unary_vjp(f(a), x)[0]
        adjoint = _iterate(lambda y: pull_x(y) + g, anp.zeros_like(x), distance, tol)
        return (_unary_vjp(lambda a: f(a)(x), a)[0](adjoint),)

    solve.defvjp(fwd, bwd)
    return solve(a)


# --- autograd.test_util -------------------------------------------------------------------------


@_nary
def check_grads(f: Callable, x: Any, modes: Sequence[str] | None = None, order: int = 2) -> None:
    """autograd.test_util.check_grads(fun, argnum=0, modes=["fwd", "rev"], order=2)(*args)."""
    load("autodiff.testing").check_grads(f, (x,), order=order, modes=tuple(modes or ("fwd", "rev")))


# --- the modules a program imports --------------------------------------------------------------

_SUBMODULES: dict[str, Callable[[], dict[str, Any]]] = {
    "extend": lambda: {
        name: getattr(load("autodiff.compat.autograd_extend"), name) for name in _EXTEND
    },
    "misc": lambda: dict(flatten=flatten),
    "misc.flatten": lambda: dict(flatten=flatten, flatten_func=flatten_func),
    "misc.optimizers": lambda: dict(sgd=sgd, rmsprop=rmsprop, adam=adam),
    "misc.fixed_points": lambda: dict(fixed_point=fixed_point),
    "test_util": lambda: dict(check_grads=check_grads),
    "builtins": lambda: dict(
        tuple=builtins.tuple,
        list=builtins.list,
        dict=builtins.dict,
        isinstance=builtins.isinstance,
        type=builtins.type,
    ),
    "util": lambda: dict(func=lambda f: f),
}
# autograd's modules that are autodiff's own
_ALIASES = {"numpy": "autodiff.numpy", "numpy.random": "autodiff.numpy.random",
            "numpy.linalg": "autodiff.numpy.linalg", "numpy.fft": "autodiff.numpy.fft",
            "scipy": "autodiff.scipy", "scipy.special": "autodiff.scipy.special",
            "scipy.stats": "autodiff.scipy.stats", "scipy.signal": "autodiff.scipy.signal",
            "scipy.integrate": "autodiff.scipy.integrate",
            "scipy.linalg": "autodiff.scipy.linalg"}  # fmt: skip


class _FlattenModule(types.ModuleType):
    """``autograd.misc.flatten``, a module that is also the function: importing the module
    makes it the attribute ``flatten`` of ``autograd.misc``, where programs call it."""

    def __call__(self, value: Any) -> tuple[Any, Callable]:
        return flatten(value)


def _alias(name: str, module: types.ModuleType) -> types.ModuleType:
    """``autograd.numpy`` for ``autodiff.numpy`` (and each of ``_ALIASES``): the module's
    namespace, copied, in a package of its own with an empty ``__path__``.  Not the module
    itself: the standard path finder, asked before the import hook, would find a
    package's own modules in its folder and load a second copy of each under autograd's
    name (``autograd.numpy.random``, and ``autograd.scipy.stats`` as a module, so that
    ``import autograd.scipy.stats.multivariate_normal`` failed); and importing a module
    under a second name rewrites its ``__spec__``.  Names the module loads at first use
    (``autograd.numpy.linalg``) are read from it at their first read here.  A plain
    module, not a subclass: the closure search passes over modules by their exact type."""
    alias = types.ModuleType(name, module.__doc__)
    own = ("__name__", "__doc__", "__file__", "__path__", "__spec__", "__loader__",
           "__package__", "__cached__", "__getattr__", "__dir__")  # fmt: skip
    alias.__dict__.update((k, v) for k, v in vars(module).items() if k not in own)

    def __getattr__(attribute: str) -> Any:  # (PEP 562: the module's own)
        if attribute.startswith("__"):  # (``__file__``: this module has none)
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        value = getattr(module, attribute)
        setattr(alias, attribute, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(alias)) | set(dir(module)))

    alias.__dict__.update(__getattr__=__getattr__, __dir__=__dir__, __path__=[])
    return alias


def _module(name: str) -> types.ModuleType | None:
    """The module ``autograd.<name>`` stands for, or None."""
    if not name:
        return importlib.import_module("autodiff.compat.autograd")
    if name in _ALIASES:
        return _alias(f"autograd.{name}", load(_ALIASES[name]))
    if name in _SUBMODULES:
        kind = _FlattenModule if name == "misc.flatten" else types.ModuleType
        module = kind(f"autograd.{name}")
        module.__dict__.update(_SUBMODULES[name]())
        module.__path__ = []  # a package: its submodules import too
        return module
    if name == "scipy.misc":  # autograd's old home of logsumexp
        module = types.ModuleType("autograd.scipy.misc")
        module.logsumexp = load("autodiff.scipy.special").logsumexp  # type: ignore
        return module
    if name.startswith("scipy.stats."):  # a distribution imported as a module
        dist = getattr(load("autodiff.scipy.stats"), name.split(".")[-1], None)
        if dist is None:
            return None
        module = types.ModuleType(f"autograd.{name}")
        module.__dict__.update({k: getattr(dist, k) for k in dir(dist) if not k.startswith("_")})
        return module
    return None


class _Finder:
    """Resolves ``autograd`` and its submodules to the modules above: a meta path finder
    and its loader by their methods (importlib.abc's base classes add nothing these use,
    and importing importlib.abc costs a short program 2 ms).

    It sits just after the standard path finder, which so finds every other module
    without asking it (SciPy's optimizers alone import ~400 modules after the hook is
    installed: ~3 M instructions asked for nothing).  The package ``autograd`` is
    imported once through it at ``install()`` (an installed autograd is not seen); the
    path finder finds none of its submodules in its ``__path__`` (this package's folder
    holds only ``__main__.py``), so they come here."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ARG002  (the protocol's)
        if fullname != "autograd" and not fullname.startswith("autograd."):
            return None
        if _module(fullname.removeprefix("autograd").removeprefix(".")) is None:
            return None  # autograd's internals: the import fails as usual
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _module(spec.name.removeprefix("autograd").removeprefix("."))
        return module

    def exec_module(self, module):
        pass


_FINDER = _Finder()


def install() -> None:
    """Make ``import autograd...`` resolve to autodiff from now on in this interpreter (a
    real autograd imported before stays; one installed but not imported is not seen)."""
    if _FINDER in sys.meta_path:
        return
    sys.meta_path.insert(0, _FINDER)  # first, for the package itself (see _Finder)
    try:
        importlib.import_module("autograd")
    finally:
        sys.meta_path.remove(_FINDER)
        path_finder = importlib.machinery.PathFinder
        after = sys.meta_path.index(path_finder) + 1 if path_finder in sys.meta_path else 0
        sys.meta_path.insert(after, _FINDER)


def main(argv: Sequence[str]) -> None:
    """``python -m autodiff.compat.autograd program.py [args...]``."""
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n")[1])
        return
    install()
    sys.argv = list(argv)
    _run_as_main(argv[0])


def _run_as_main(path: str) -> None:
    """Run the file ``path`` as ``python path`` runs it: as the module ``__main__``, with
    its directory first on ``sys.path`` (where it imports its neighbours from; ``python
    -m`` put the working directory there).  A directory or zip archive with a
    ``__main__.py`` goes through ``runpy``, which loads ``pkgutil`` to find it.  ``-``
    reads the program from standard input, as ``python -`` does (the working directory
    first on ``sys.path``)."""
    if path == "-":
        code = compile(sys.stdin.read(), "<stdin>", "exec")
        sys.path[0], path = "", "<stdin>"
    elif not os.path.isfile(path) or _is_zip(path):
        del sys.path[0]  # runpy puts ``path`` there for the run
        runpy.run_path(path, run_name="__main__")
        return
    else:
        with io.open_code(path) as file:
            code = compile(file.read(), path, "exec")
        sys.path[0] = os.path.dirname(os.path.abspath(path))
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins, __cached__=None)
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _is_zip(path: str) -> bool:
    try:
        zipimport.zipimporter(path)
    except zipimport.ZipImportError:
        return False
    return True
