"""The transforms over other array libraries than NumPy.

* **The backend-neutrality guard**: every sample of ``tests/registry`` runs through
  ``grad``/``vjp``, ``jvp``, ``vmap`` and ``vmap(grad)`` on ``StrictArray``
  (``tests/backends.py``), a duck array that raises on any conversion to NumPy
  (``np.asarray``, ``float()``) and on meeting a plain NumPy array in a computation.
  A rule that converts its operands, or builds a constant with ``np.eye(n)`` instead of
  from its operands, fails here.
* **Dask**: the same samples on Dask arrays chunked along their first axis; results are
  Dask arrays, nothing is computed inside the transforms, and the computed values equal
  NumPy's.  Where Dask lacks a function the error names the function and Dask
  (``DASK_LIMITS``).  Per-example gradients and a gradient-descent step run on a real
  ``dask.distributed`` cluster (two worker processes on loopback).
* **CuPy**: the same cases on a GPU, when CuPy finds one; skipped otherwise.
* ``benchmarks/gpu.py``'s workloads, in its CPU mode (``--xp numpy``).
"""

from __future__ import annotations

import importlib
import pathlib
import re
import subprocess
import sys
import warnings

import numpy as np
import optree
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import grad, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap
from autodiff.errors import UnsupportedFunctionError
from tests.backends import BACKENDS, Backend, CoercionError, MixedArrayError, StrictArray, strict
from tests.registry import FAMILIES, OpInfo, Sample

# --- the registry on every backend -------------------------------------------------------

FAMILY_OF = {
    id(op): family
    for family in FAMILIES
    for op in importlib.import_module(f"tests.registry.{family}").OPS
}

# What Dask cannot do, per registry function: a case may pass, or raise an error whose
# message matches the pattern (and so names the function and Dask).  Anything else fails.
_LACKS = "is not implemented by dask arrays"
_NO_ND_FANCY = rf"{_LACKS}.*Don't yet support nd fancy indexing"
_FFTS = ("fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn",
         "rfft2", "irfft2", "rfftn", "irfftn", "hfft", "ihfft")  # fmt: skip
_SORTS_13A = ["nonzero", "argwhere", "flatnonzero", "extract", "sort_complex", "unique",
              "unique_all", "unique_counts", "unique_inverse", "unique_values", "union1d",
              "intersect1d", "setdiff1d", "setxor1d"]  # fmt: skip
DASK_LIMITS: dict[str, str] = {
    # NumPy functions Dask does not implement (Dask would compute them into NumPy)
    "argsort": rf"numpy\.argsort {_LACKS}",
    "sort": rf"numpy\.argsort {_LACKS}",
    **{  # order statistics sort
        f: rf"numpy\.argsort {_LACKS}"
        for f in ("median", "nanmedian", "nanpercentile", "nanquantile", "percentile", "quantile")
    },
    "linalg.det": rf"numpy\.linalg\.det {_LACKS}",
    "linalg.slogdet": rf"numpy\.linalg\.slogdet {_LACKS}",
    "linalg.eigh": rf"numpy\.linalg\.eigh {_LACKS}",
    "linalg.pinv": rf"numpy\.linalg\.pinv {_LACKS}",
    "linalg.eig": rf"numpy\.linalg\.eig {_LACKS}",
    "linalg.eigvals": rf"numpy\.linalg\.eigvals {_LACKS}",
    "linalg.eigvalsh": rf"numpy\.linalg\.eigvalsh {_LACKS}",
    "linalg.lstsq": rf"numpy\.linalg\.pinv {_LACKS}",
    "roots": rf"numpy\.roots {_LACKS}",
    "polyfit": rf"numpy\.linalg\.pinv {_LACKS}",  # least squares through pinv
    # Dask functions with other signatures than NumPy's
    "linalg.cholesky": rf"numpy\.linalg\.cholesky {_LACKS} .*upper",
    "linalg.svd": rf"numpy\.linalg\.svd {_LACKS} .*compute_uv|full_matrices=True is not "
    r"implemented for dask|Array must be 2D",
    "linalg.norm": rf"numpy\.linalg\.svd {_LACKS} .*compute_uv",
    "linalg.svdvals": rf"numpy\.linalg\.svd {_LACKS} .*compute_uv",
    "linalg.matrix_rank": rf"numpy\.linalg\.svd {_LACKS} .*compute_uv",
    "linalg.cond": rf"numpy\.linalg\.svd {_LACKS} .*compute_uv|Dimension must be 2 to perform lu",
    "linalg.qr": rf"numpy\.linalg\.qr {_LACKS} .*mode",
    "nan_to_num": rf"numpy\.nan_to_num {_LACKS} .*keyword",
    # Dask's linear algebra takes single 2-D matrices only
    "linalg.inv": r"Dimension must be 2 to perform lu decomposition",
    "linalg.solve": r"Dimension must be 2 to perform lu decomposition|b must be 1 or 2 dim",
    "scipy.linalg.solve": r"Dimension must be 2 to perform lu decomposition|All chunks must be "
    r"a square matrix to perform lu decomposition",
    "linalg.matrix_power": r"Dimension must be 2 to perform lu decomposition",
    "linalg.tensorsolve": r"Dimension must be 2 to perform lu decomposition",
    "linalg.tensorinv": r"Dimension must be 2 to perform lu decomposition",
    # no ufunc.at (scatter-add: the derivative of indexing with integer arrays)
    "getitem": rf"numpy\.add\.at .*{_LACKS}|indexing x\[.*\] {_LACKS}",
    "take": rf"numpy\.add\.at .*{_LACKS}|indexing x\[.*\] {_LACKS}",
    "repeat": rf"numpy\.add\.at .*{_LACKS}",  # with a count per entry
    "piecewise": _NO_ND_FANCY,  # under vmap: the gather of each piece's filler
    # the gather of each x's segment (batched: from a batch of samples)
    "interp": rf"numpy\.add\.at .*{_LACKS}|{_NO_ND_FANCY}",
    # the gather that builds a Toeplitz matrix; the solve with it under vmap
    "polydiv": rf"numpy\.add\.at .*{_LACKS}|Dimension must be 2 to perform lu decomposition",
    "at.add": rf"numpy\.add\.at .*{_LACKS}",
    # (their samples' symmetric matrix A + A.T is summed on the union of the patterns)
    "scipy.sparse.linalg.cg": rf"numpy\.add\.at .*{_LACKS}",
    "scipy.sparse.linalg.minres": rf"numpy\.add\.at .*{_LACKS}",
    "at.multiply": rf"numpy\.multiply\.at .*{_LACKS}",
    "at.min": rf"numpy\.minimum\.at .*{_LACKS}",
    "at.max": rf"numpy\.maximum\.at .*{_LACKS}",
    # indexing with several integer arrays at once, reading or writing
    "at.set": r"Incorrect shape .* of integer indices",
    "diagonal": rf"indexing x\[.*ARRAY, ARRAY\] {_NO_ND_FANCY}",
    "trace": rf"indexing x\[.*ARRAY, ARRAY\] {_NO_ND_FANCY}",
    "linalg.diagonal": rf"indexing x\[.*ARRAY, ARRAY\] {_NO_ND_FANCY}",
    "linalg.trace": rf"indexing x\[.*ARRAY, ARRAY\] {_NO_ND_FANCY}",
    "take_along_axis": rf"indexing x\[.*ARRAY, ARRAY\] {_NO_ND_FANCY}",
    "diag": rf"x\[.*ARRAY, ARRAY\] = y {_LACKS}.*dask is currently limited|{_NO_ND_FANCY}",
    "diagflat": rf"x\[.*ARRAY, ARRAY\] = y {_LACKS}.*dask is currently limited",
    # weights chunked unlike the bin numbers (a NumPy x made a Dask array by bincount)
    "bincount": r"Chunks of input array x and weights must match",
    # issue 13a: sorts (the sized forms of value-dependent shapes are sorts, too), and
    # the scatters behind the derivatives of gathers and in-place writes
    **{name: rf"numpy\.argsort {_LACKS}" for name in _SORTS_13A},
    "partition": rf"numpy\.argpartition {_LACKS}",
    "argpartition": rf"numpy\.argpartition {_LACKS}",
    "lexsort": rf"numpy\.lexsort {_LACKS}",
    **{name: rf"numpy\.add\.at .*{_LACKS}" for name in ("insert", "delete")},
    "compress": rf"numpy\.add\.at .*{_LACKS}|numpy\.argsort {_LACKS}",
    "place": rf"numpy\.add\.at .*{_LACKS}|{_NO_ND_FANCY}",
    "choose": rf"indexing x\[.*ARRAY, ARRAY\] {_NO_ND_FANCY}",
    "put_along_axis": r"Incorrect shape .* of integer indices",
    "put": r"Incorrect shape .* of integer indices",
    # a reshape across the chunk boundary
    "reshape": r"Dask's reshape only supports operations that merge or split",
    # FFTs along axes that padding, cropping or batching split into several chunks
    **{
        f"fft.{name}": r"Dask array only supports taking an FFT along an axis that\s+has a single"
        for name in _FFTS
    },
}


# What CuPy does differently (seen on an H200 with CuPy 14.2), in the same form.
CUPY_LIMITS: dict[str, str] = {
    # cupy.linalg.solve takes a stack of matrices for b only, never a stack of vectors
    "linalg.solve": r"b must have \(\.\.\., M, K\) for multidimensional b",
    # CuPy hands scipy.special.zeta (polygamma's formula) to a module, not a function
    "special.polygamma": r"'module' object is not callable",
    "special.digamma": r"'module' object is not callable",
}
# Samples whose results are right on CuPy but not NumPy's, and why.
CUPY_DIFFERENT = {
    ("at.set", "repeated"): "with repeated indices CuPy keeps an unspecified write, NumPy the last",
    **{
        ("linalg.eigh", label): "eigenvectors are unique up to sign; CuPy's signs differ"
        for label in ("matrix", "stack", "UPLO=U")
    },
    **{
        ("linalg.svd", label): "singular vectors are unique up to sign; CuPy's signs differ"
        for label in (
            "square",
            "square reduced",
            "tall",
            "wide",
            "stack",
            "full tall",
            "full wide stack",
        )
    },
}
# SciPy's own implementations take NumPy arrays only (autodiff/rules/_scipy.py): on any
# other array library the error names the SciPy function and the library.
SCIPY_ONLY: dict[str, str] = {
    f"scipy.{name}": r"scipy\.[\w.]+ is not implemented by \w+ arrays"
    for name in (
        "linalg.solve_triangular", "linalg.cho_solve", "linalg.lu_factor", "linalg.lu_solve",
        "linalg.expm", "linalg.sqrtm", "signal.convolve", "signal.correlate",
        "signal.fftconvolve", "integrate.odeint", "integrate.solve_ivp", "sparse.csr_array",
        "sparse.linalg.spsolve", "sparse.linalg.splu", "sparse.linalg.cg",
        "sparse.linalg.minres", "sparse.linalg.gmres", "sparse.linalg.bicgstab",
        "sparse.linalg.lsqr",
    )
}  # fmt: skip
# Samples of those functions that SciPy does not compute, so every library runs them: HIPS
# autograd's convolve(A, B, axes=..., dot_axes=...) is one conv_general_dilated.
BACKEND_NEUTRAL = {("scipy.signal.convolve", f"autograd's form,{kind}")
                   for kind in ("layer", "outer", "same")}  # fmt: skip
DASK_LIMITS.update(
    {  # these call numpy.linalg.cholesky(upper=...)
        "scipy.linalg.cholesky": DASK_LIMITS["linalg.cholesky"],
        "scipy.linalg.cho_factor": DASK_LIMITS["linalg.cholesky"],
        "scipy.stats.multivariate_normal.logpdf": DASK_LIMITS["linalg.cholesky"],
        "scipy.stats.multivariate_normal.pdf": DASK_LIMITS["linalg.cholesky"],
    }
)
LIMITS = {
    "strict": SCIPY_ONLY,
    "dask": {**SCIPY_ONLY, **DASK_LIMITS},
    "cupy": {**SCIPY_ONLY, **CUPY_LIMITS},
}

# Samples whose derivatives read index values on purpose, which StrictArray refuses: the
# derivatives of x.at[i].multiply(y) check every example's indices for repeats.
READS_INDEX_VALUES = {("at.multiply", "batched index"): ("vjp", "jvp", "vmap(grad)")}

# Dask graphs cost milliseconds to build and run: on Dask the registry runs the first
# sample of each function, without vmap(grad) (which the Dask tests below run).
_DASK_SKIPS = ("vmap(grad)",)


def _backend_params(backends=BACKENDS):
    return [
        pytest.param(b, id=b.name, marks=[pytest.mark.skip(reason=b.reason)] if b.reason else [])
        for b in backends
    ]


def _registry_cases(backend: Backend):
    from tests.registry import OPS

    return [
        pytest.param(backend, op, sample, id=f"{backend.name}-{op.name}[{sample.label or i}]",
                     marks=[pytest.mark.skip(reason=backend.reason)] if backend.reason else [])
        for op in OPS
        for i, sample in enumerate(op.samples[: 1 if backend.name == "dask" else None])
    ]  # fmt: skip


def _random_like(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = rng.standard_normal(np.shape(x))
    if x.dtype.kind == "c":
        out = out + 1j * rng.standard_normal(np.shape(x))
    return np.asarray(out).astype(x.dtype)


def _transforms(op: OpInfo, sample: Sample):
    """(name, run) pairs; ``run(put)`` runs one transform with every array argument
    passed through ``put`` (the identity for the NumPy reference)."""
    fn = op.bound(sample, "anp")
    args = sample.args
    positions = sample.diff_positions() if op.differentiable else ()
    rng = np.random.default_rng(0)
    # independent examples from each argument's domain (as in test_primitives)
    examples = [np.stack([sample.draw(rng, i) for _ in range(3)]) for i in range(len(args))]

    def with_diff(put, diff_args):
        full = list(put(args))
        for i, a in zip(positions, diff_args, strict=True):
            full[i] = a
        return full

    runs = []
    if op.call is None:  # the autodiff function itself (other calls may be the library's own)
        runs.append(("forward", lambda put: fn(*put(args))))
    if positions:
        primals = tuple(args[i] for i in positions)
        tangents = tuple(_random_like(a, rng) for a in primals)
        f = lambda put: lambda *d: fn(*with_diff(put, d))
        out = optree.tree_leaves(fn(*args))
        cts = [_random_like(np.asarray(o), rng) for o in out]

        def run_vjp(put):
            value, vjp_fn = vjp(f(put), *put(primals))
            structure = optree.tree_structure(value)
            return value, vjp_fn(optree.tree_unflatten(structure, put(cts)))

        def run_vmap_grad(put):
            def total(*d):  # the sum of the real parts of every output
                return sum(anp.sum(anp.real(leaf)) for leaf in optree.tree_leaves(f(put)(*d)))

            batched = examples[positions[0]]
            g = grad(total, argnums=tuple(range(len(primals))))
            in_dims = (0,) + (None,) * (len(primals) - 1)
            return vmap(g, in_dims=in_dims)(*put((batched, *primals[1:])))

        runs.append(("vjp", run_vjp))
        runs.append(("jvp", lambda put: jvp(f(put), tuple(put(primals)), tuple(put(tangents)))))
        runs.append(("vmap(grad)", run_vmap_grad))
    runs.append(("vmap", lambda put: vmap(fn)(*put(examples))))
    return runs


def _check_leaves(backend: Backend, results: list) -> None:
    """``results``: (what, got, want) triples; ``got`` is read back in one go."""
    kind = backend.array_type()
    pairs = []
    for what, got, want in results:
        got_leaves, want_leaves = optree.tree_leaves(got), optree.tree_leaves(want)
        assert len(got_leaves) == len(want_leaves), what
        for g in got_leaves:
            assert isinstance(g, kind), f"{what}: a {type(g).__name__} came back, not a {kind}"
        pairs += [(what, g, w) for g, w in zip(got_leaves, want_leaves, strict=True)]
    values = backend.get([g for _, g, _ in pairs])  # one Dask computation for all
    for (what, _, w), g in zip(pairs, values, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype, what
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=what)


@pytest.mark.parametrize(
    ("backend", "op", "sample"), [p for b in BACKENDS for p in _registry_cases(b)]
)
def test_registry_sample_on_backend(backend, op, sample):
    """The sample's function under every transform, with every array argument on
    ``backend``: results are that backend's arrays and equal NumPy's."""
    family = FAMILY_OF[id(op)]
    put = lambda tree: backend.put(tree, family)
    if backend.name == "cupy" and (op.name, sample.label) in CUPY_DIFFERENT:
        pytest.skip(CUPY_DIFFERENT[op.name, sample.label])
    limit = LIMITS.get(backend.name, {}).get(op.name)
    if (op.name, sample.label) in BACKEND_NEUTRAL:
        limit = None
    lacking, results = [], []
    for name, run in _transforms(op, sample):
        if backend.name == "dask" and name in _DASK_SKIPS:
            continue
        if backend.name == "strict" and name in READS_INDEX_VALUES.get((op.name, sample.label), ()):
            continue  # CuPy and Dask can be read (bool()); StrictArray refuses
        what = f"{name} of {op.name} on {backend.name}"
        try:
            with backend.lazy():
                got = run(put)
        except (CoercionError, MixedArrayError, AssertionError):
            raise
        except Exception as e:
            message = str(e)
            if limit is not None and re.search(limit, message):
                continue  # a documented limitation of the library, with a clear error
            if backend.name == "cupy" and "cupy" in message:
                lacking.append(f"{name}: {type(e).__name__}: {message[:200]}")
                continue
            raise
        # NumPy's result after the backend's: a documented limit needs none
        results.append((what, got, run(lambda tree: tree)))
    _check_leaves(backend, results)
    if lacking:
        pytest.skip(f"CuPy lacks what {op.name} needs: " + "; ".join(lacking))


def test_every_limit_names_a_registry_function():
    from tests.registry import OPS

    assert set(DASK_LIMITS) | set(CUPY_LIMITS) | set(SCIPY_ONLY) <= {op.name for op in OPS}
    assert set(CUPY_DIFFERENT) <= {(op.name, s.label) for op in OPS for s in op.samples}


# --- the guard guards ------------------------------------------------------------------------


def test_strict_array_refuses_conversion_and_mixing():
    x = strict(np.arange(3.0))
    with pytest.raises(CoercionError):
        np.asarray(x)
    with pytest.raises(CoercionError):
        float(x[0])
    with pytest.raises(MixedArrayError):
        x + np.ones(3)
    assert isinstance(np.sin(x) + np.eye(3, like=x)[0], StrictArray)


def test_a_rule_that_converts_its_operand_fails_the_guard():
    from autodiff.extend import Primitive

    leaky = Primitive("leaky", lambda x: np.asarray(x) * 2.0, vjp=[lambda ct, ans, x: ct * 2.0])
    with pytest.raises(CoercionError):
        grad(lambda x: leaky.bind(x).sum())(strict(np.ones(3)))
    eye = Primitive("eye_rule", lambda x: x, vjp=[lambda ct, ans, x: ct * np.eye(3)[0]])
    with pytest.raises(MixedArrayError):
        grad(lambda x: eye.bind(x).sum())(strict(np.ones(3)))


# --- the derived transforms on every backend -------------------------------------------


def _f(x):
    return anp.sum(anp.tanh(x) ** 2)


def _g(x):
    return anp.sin(x) * x[::-1]


_DERIVED = {
    "jacrev": lambda x: jacrev(_g)(x),
    "jacfwd": lambda x: jacfwd(_g)(x),
    "hessian": lambda x: hessian(_f)(x),
    "jacrev of a scalar": lambda x: jacrev(_f)(x),
    "linearize": lambda x: linearize(lambda v: (_g(v), anp.ones_like(v)), x)[1](x),
    "grad of grad": lambda x: grad(lambda v: grad(_f)(v).sum())(x),
    "jvp of grad": lambda x: jvp(grad(_f), (x,), (x,))[1],
    "checkpoint": lambda x: grad(lambda v: autodiff.checkpoint(_g)(v).sum())(x),
    "value_and_grad": lambda x: autodiff.value_and_grad(_f)(x),
    "vjp with an unused input": lambda x: vjp(lambda a, b: a * 2.0, x, x)[1](x),
    "vmap chunk_size=2": lambda x: vmap(grad(_f), chunk_size=2)(anp.stack([x, 2 * x, -x])),
    "vmap chunk_size=1": lambda x: vmap(grad(_f), chunk_size=1)(anp.stack([x, 2 * x, -x])),
    "vmap in_dims=-1, out_dims=1": lambda x: vmap(_g, in_dims=-1, out_dims=1)(
        anp.stack([x, 2 * x], axis=-1)
    ),
    "vmap of jacrev": lambda x: vmap(jacrev(_g))(anp.stack([x, 2 * x, -x])),
}


@pytest.mark.parametrize("case", list(_DERIVED))
@pytest.mark.parametrize("backend", _backend_params())
def test_derived_transforms_on_backend(backend, case):
    x = np.array([0.3, -0.7, 1.1, 0.2])
    want = _DERIVED[case](x)
    with backend.lazy():
        got = _DERIVED[case](backend.put(x))
    _check_leaves(backend, [(case, got, want)])


@pytest.mark.parametrize("backend", _backend_params())
def test_batching_loop_fallback_on_backend(backend):
    """A primitive without a batching rule is looped over, on the backend too."""
    from autodiff.errors import AutodiffWarning
    from autodiff.extend import Primitive

    cube = Primitive("cube_on_backends", lambda x: x**3, vjp=[lambda ct, ans, x: ct * 3 * x**2])
    xs = np.arange(6.0).reshape(3, 2)
    for batch in (xs, xs[:0]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AutodiffWarning)
            with backend.lazy():
                got = vmap(cube.bind)(backend.put(batch))
        _check_leaves(backend, [("vmap of a primitive without a batching rule", got, batch**3)])


@pytest.mark.parametrize("backend", _backend_params())
def test_per_example_gradients_on_backend(backend):
    """The README's example: per-example gradients of a small model."""
    w, xs, ys = _dataset()
    want = vmap(grad(_loss), in_dims=(None, 0, 0))(w, xs, ys)
    with backend.lazy():
        got = vmap(grad(_loss), in_dims=(None, 0, 0))(*backend.put((w, xs, ys)))
    _check_leaves(backend, [("vmap(grad(loss))", got, want)])


# --- Dask: laziness, errors, a cluster ---------------------------------------------------------

dask_only = pytest.mark.skipif(bool(BACKENDS[1].reason), reason=BACKENDS[1].reason)


def _loss(w, x, y):
    """One example's loss: a small tanh model, squared error."""
    return anp.mean((anp.tanh(x @ w) - y) ** 2)


def _dataset(n=64, d=5, k=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((d, k)) / 2, rng.standard_normal((n, d)), rng.standard_normal((n, k))


@dask_only
def test_dask_results_are_lazy_dask_arrays():
    import dask.array as da

    w, xs, ys = _dataset()
    dxs, dys = da.from_array(xs, chunks=16), da.from_array(ys, chunks=16)
    with BACKENDS[1].lazy():  # computing anything here raises
        per_example = vmap(grad(_loss), in_dims=(None, 0, 0))(w, dxs, dys)
    assert isinstance(per_example, da.Array)
    assert per_example.numblocks[0] == 4  # one block of gradients per block of data
    want = vmap(grad(_loss), in_dims=(None, 0, 0))(w, xs, ys)
    np.testing.assert_allclose(per_example.compute(scheduler="sync"), want, rtol=1e-12)


@dask_only
def test_where_dask_lacks_a_function_the_error_names_it():
    import dask.array as da

    a = da.from_array(np.eye(3) * 2.0)
    lacks_det = r"numpy\.linalg\.det is not implemented by dask arrays"
    with pytest.raises(UnsupportedFunctionError, match=lacks_det):
        anp.linalg.det(a)
    with pytest.raises(UnsupportedFunctionError, match=lacks_det):
        grad(anp.linalg.det)(a)
    with pytest.raises(UnsupportedFunctionError, match=lacks_det):
        vmap(anp.linalg.det)(da.stack([a, a]))
    with pytest.raises(UnsupportedFunctionError, match=r"numpy\.argsort .* dask arrays"):
        anp.sort(da.from_array(np.array([3.0, 1.0, 2.0])))
    idx = np.array([0, 2])
    with pytest.raises(UnsupportedFunctionError, match=r"numpy\.add\.at .* dask arrays"):
        grad(lambda v: anp.sum(v[idx]))(da.from_array(np.ones(3)))


@pytest.fixture(scope="class")
def client():
    """A dask.distributed cluster of two worker processes on loopback, and its client."""
    from dask.distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


@dask_only
class TestOnALocalCluster:
    """Per-example gradients and gradient descent computed on the cluster, which starts
    and stops once for this class (both with warnings as errors, as everywhere)."""

    def test_per_example_gradients_on_the_cluster(self, client):
        import dask.array as da

        w, xs, ys = _dataset(n=256)
        dxs, dys = da.from_array(xs, chunks=64), da.from_array(ys, chunks=64)  # by batch
        per_example = vmap(grad(_loss), in_dims=(None, 0, 0))(w, dxs, dys)
        assert isinstance(per_example, da.Array) and per_example.numblocks == (4, 1, 1)
        got = client.compute(per_example).result()
        want = vmap(grad(_loss), in_dims=(None, 0, 0))(w, xs, ys)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert len(client.scheduler_info()["workers"]) == 2

    def test_gradient_descent_on_data_of_many_chunks(self, client):
        import dask.array as da

        rng = np.random.default_rng(1)
        X = rng.standard_normal((4000, 8))
        y = np.tanh(X @ rng.standard_normal((8, 2)))
        dX, dy = da.from_array(X, chunks=(500, 8)), da.from_array(y, chunks=(500, 2))
        assert dX.numblocks == (8, 1)  # the data is larger than any one chunk

        def dataset_loss(w, X, y):
            return anp.mean((anp.tanh(X @ w) - y) ** 2)

        w_dask = w_numpy = np.zeros((8, 2))
        for _ in range(3):  # parameters in NumPy, data in Dask: steps come back lazy
            step = w_dask - 0.5 * grad(dataset_loss)(w_dask, dX, dy)
            assert isinstance(step, da.Array)
            w_dask = client.compute(step).result()
            w_numpy = w_numpy - 0.5 * grad(dataset_loss)(w_numpy, X, y)
        np.testing.assert_allclose(w_dask, w_numpy, rtol=1e-10)
        assert dataset_loss(w_numpy, X, y) < dataset_loss(np.zeros((8, 2)), X, y)


# --- the GPU benchmark's code, on NumPy ------------------------------------------------


def test_gpu_benchmark_runs_on_numpy(tmp_path):
    """``python -m benchmarks.gpu --xp numpy``: the GPU benchmark's workloads, at a small
    size, with NumPy as the array module; every system agrees with the reference."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu", "--xp", "numpy", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=pathlib.Path(__file__).parent.parent,  # the repository root
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = (tmp_path / "results-gpu.md").read_text()
    assert "**NO**" not in report
    assert "per-sample gradients" in report and "MLP gradient" in report
