"""Write docs/coverage.md from the registry of primitive samples.

    python -m tests.coverage              # print the table
    python -m tests.coverage --write      # update docs/coverage.md
    python -m tests.coverage --namespace  # count autodiff.numpy's names against NumPy's

Every cell is backed by tests/test_primitives.py: a function is listed with
VJP/JVP only if it has differentiable samples (checked to second order
against finite differences), with batching because every sample runs
under vmap against a loop over independently drawn examples, and with a
plain NumPy call if its samples also run as numpy.X(traced value).
"""

from __future__ import annotations

import pathlib
import sys

from tests.registry import OPS

PATH = pathlib.Path(__file__).resolve().parents[1] / "docs" / "coverage.md"
YES, NO_DERIVATIVE = "✅", "not differentiable"


def rows() -> list[tuple[str, ...]]:
    by_name: dict[str, list] = {}
    for op in OPS:
        by_name.setdefault(op.name, []).append(op)
    out = []
    for name in sorted(by_name, key=lambda n: (n.count("."), n)):
        ops = by_name[name]
        differentiable = any(op.differentiable and any(s.diff_positions() for s in op.samples)
                             for op in ops)  # fmt: skip
        kind = "primitive" if any(op.kind == "primitive" for op in ops) else "composition"
        derivative = YES if differentiable else NO_DERIVATIVE
        numpy_call = next((f"`numpy.{op.numpy_name_resolved}`" for op in ops if op.has_numpy), "")
        if name.startswith("special."):
            numpy_call = numpy_call.replace("numpy.special", "scipy.special")
        if "." in name and name.split(".")[0] in {"add", "multiply", "maximum", "minimum"}:
            numpy_call = f"`numpy.{name}`"
        samples = sum(len(op.samples) for op in ops)
        out.append(
            (f"`{name}`", kind, derivative, derivative, YES, numpy_call or "—", str(samples))
        )
    return out


def namespace_counts() -> list[tuple[str, int, int, int, int]]:
    """Per namespace: (name, NumPy's public names, how many resolve in autodiff's, how
    many autodiff defines, how many are NumPy's own objects re-exported)."""
    import numpy as np

    import autodiff.numpy as anp

    out = []
    for label, theirs, ours in [
        ("numpy", np, anp),
        ("numpy.linalg", np.linalg, anp.linalg),
        ("numpy.fft", np.fft, anp.fft),
        ("numpy.random", np.random, anp.random),
    ]:
        names = theirs.__all__
        resolved = sum(hasattr(ours, n) for n in names)
        own = sum(n in ours._own for n in names)
        borrowed = sum(n in ours._borrowed for n in names)
        out.append((label, len(names), resolved, own, borrowed))
    return out


def namespace_table() -> list[str]:
    lines = [
        "## The namespace",
        "",
        "Every public name of NumPy resolves in `autodiff.numpy` (`python -m tests.coverage "
        "--namespace`). Names autodiff defines have rules (or, for types, accept traced "
        "values); the rest are NumPy's own objects, which raise `UnsupportedFunctionError` "
        "on traced values.",
        "",
        "| NumPy namespace | public names | resolve in autodiff | defined by autodiff "
        "| NumPy's own |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| `{a}` | {b} | {c} | {d} | {e} |" for a, b, c, d, e in namespace_counts()]
    return lines


def markdown() -> str:
    table = rows()
    n_diff = sum(r[2] == YES for r in table)
    n_prim = sum(r[1] == "primitive" for r in table)
    lines = [
        "# Coverage",
        "",
        "Generated from `tests/registry/` by `python -m tests.coverage --write`; "
        "`tests/test_coverage.py` fails when this file is stale.",
        "",
        f"{len(table)} functions: {n_diff} differentiable (VJP, JVP and batching rules), "
        f"{len(table) - n_diff} declared not differentiable (batching rule); "
        f"{n_prim} are primitives, the others compositions of primitives (their rules are "
        f"those of the primitives they call).",
        "",
        "A ✅ means the samples in the registry pass: VJP and JVP to second order against "
        "central finite differences and against each other, batching against a Python loop "
        "over independently drawn examples, with in_dims and out_dims sampled from every "
        "axis (vmap of vmap, grad and jvp too), at batch sizes 3, 1 and 0; forward values "
        "against an independent reference (NumPy, SciPy or a closed form). The last column "
        "is the plain NumPy (or SciPy) call that reaches the same rules on traced values.",
        "",
        "| function | kind | VJP | JVP | batching | plain NumPy call | samples |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    lines += ["", *namespace_table()]
    lines += ["", *conventions_table()]
    return "\n".join(lines) + "\n"


# One row per convention: (functions, where, what autodiff does, as in / why). Pinned by
# tests/test_primitives.py::test_subgradient_conventions, tests/test_statistics.py::
# test_conventions (and the tests next to it) and the files CONVENTIONS_PINNED names.
CONVENTIONS: list[tuple[str, str, str, str]] = [
    ("`abs`, `fabs`, `copysign`", "0", "derivative 0", "they use `sign(x)`"),
    (
        "`maximum`, `minimum`, `fmax`, `fmin`",
        "ties",
        "0.5 to each argument",
        "ties share the derivative equally",
    ),
    ("`clip`", "at a bound", "0.5", "ties share the derivative equally"),
    (
        "`max`, `min` (reductions)",
        "k tied entries",
        "1/k to each",
        "ties share the derivative equally",
    ),
    ("`fmax`, `fmin`", "a NaN argument", "derivative 0 for it", "—"),
    ("`sqrt`, `x**0.5`, `log`", "0", "infinite derivative", "the limit"),
    ("`x**y`", "`y == 0`", "derivative 0 in `x`", "—"),
    ("`x**y`", "`x == 0`", "derivative 0 in `y`", "the limit for `y > 0`"),
    ("`sinc`", "0", "derivative 0", "—"),
    (
        "`nan_to_num`",
        "entries where `x` is not finite",
        "no derivative: derivatives pass only where `x` is finite",
        "the replaced entries are constants",
    ),
    (
        "`sort`, `partition`",
        "every entry",
        "each sorted entry's derivative goes to the entry it came from",
        "—",
    ),
    ("`prod`, `cumprod`", "entries that are 0", "exact derivatives", "—"),
    (
        "`std`, `nanstd`",
        "zero spread",
        "derivative 0 (not the infinity of the square root)",
        "torch, HIPS autograd",
    ),
    ("`var`", "zero spread", "derivative 0", "`var` is smooth there"),
    (
        "order statistics: `median`, `quantile`, `percentile`, `nanmedian`, "
        "`nanquantile`, `nanpercentile`, every `method`",
        "each quantile",
        "the derivative goes to the one or two sorted entries it interpolates between",
        "—",
    ),
    (
        "order statistics",
        "ties",
        "to the entries a stable sort puts at those positions",
        "not shared, unlike `max`",
    ),
    (
        "order statistics, continuous methods",
        "in `q`",
        "the slope between the two entries",
        "—",
    ),
    (
        "order statistics, discrete methods (`lower`, `higher`, `nearest`, `midpoint`, "
        "`inverted_cdf`, `averaged_inverted_cdf`, `closest_observation`)",
        "in `q`",
        "derivative 0",
        "—",
    ),
    (
        "order statistics with `weights` (for `inverted_cdf`)",
        "in `weights`",
        "derivative 0",
        "the weights select",
    ),
    ("the nan-reductions", "NaN entries", "derivative 0", "—"),
    ("`nanmax`, `nanmin`", "ties", "shared as `max`/`min` share them", "—"),
    (
        "`corrcoef`",
        "the bounds of [-1, 1]",
        "clips to [-1, 1]; at a bound `clip`'s 0.5",
        "as NumPy does",
    ),
    ("histograms (`bincount`, `histogram*`)", "counts", "no derivative", "—"),
    (
        "histograms (`bincount`, `histogram*`)",
        "sums of `weights`",
        "linear in the weights",
        "—",
    ),
    (
        "histograms",
        "edges from a number of bins",
        "follow the data's `min`/`max`; so do densities, through the bin widths",
        "—",
    ),
    (
        "`quantile`",
        "`q` out of range, under `vmap`",
        "NaN",
        "NumPy raises; the check would read batched values",
    ),
    (
        "`nanargmax`, `nanargmin`",
        "an all-NaN slice, under `vmap`",
        "-1",
        "JAX's answer; NumPy raises; the check would read batched values",
    ),
    (
        "`digitize`",
        "under `vmap`",
        "takes the direction of `bins` from their ends",
        "the check would read batched values",
    ),
    (
        "`bincount`",
        "`x` batched, under `vmap`",
        "needs `length=`",
        "JAX's keyword; the check would read batched values",
    ),
    (
        "`sign`, `floor`, `round`, comparisons, `argmax`, `argsort`, `searchsorted`, casts "
        "to integers, `spacing`, `isclose`, `allclose`, `array_equal`, `array_equiv`, "
        "`isposinf`, `isneginf`",
        "everywhere",
        "declared not differentiable",
        "piecewise constant",
    ),
    (
        "`unique`, `unique_*`, `union1d`, `setxor1d`",
        "repeated values",
        "each value's derivative goes to its first occurrence (in `ar1`, then `ar2`)",
        "—",
    ),
    (
        "`intersect1d`",
        "repeated values",
        "each value's derivative goes to its first occurrence in `ar1`",
        "JAX's choice",
    ),
    (
        "`nonzero`, `argwhere`, `flatnonzero`, `argpartition`, `lexsort`, `isin`",
        "positions, counts, inverse indices",
        "no derivative",
        "—",
    ),
    (
        "`put`, `put_along_axis`, `x.at[i].set(v)`",
        "a position named twice",
        "the last value written wins, and only it receives a derivative",
        "—",
    ),
    (
        "shapes that depend on values: `nonzero`, `argwhere`, `flatnonzero`, `extract`, "
        "`compress`, `unique*`, the set functions, `x[mask]`",
        "under `grad` and `jvp`",
        "NumPy's results",
        "the values are concrete",
    ),
    (
        "shapes that depend on values",
        "under `vmap`",
        "raise `ConcretizationError` unless given `size=k`: then the first k results, "
        "padded with `fill_value`",
        "JAX's `size=`",
    ),
    (
        "shapes that depend on values",
        "`size=k` with the default `fill_value`",
        "pads with positions 0; for `unique` and the set functions with copies of the "
        "smallest value kept, which carry its derivative; counts with 0",
        "—",
    ),
    (
        "`linalg.norm`, `linalg.vector_norm`, `linalg.matrix_norm`, every `ord` (and "
        "`cond`, `lstsq` through them)",
        "a zero vector or matrix",
        "derivative 0, not NaN",
        "torch, HIPS autograd",
    ),
    ("the norms, `0 < ord < 1`", "zero entries", "derivative 0", "—"),
    (
        "the norms, `ord < 0`",
        "a vector with a zero entry",
        "norm 0, derivative 0",
        "—",
    ),
    (
        "`linalg.eig`",
        "eigenvectors",
        "unit norm and LAPACK's phase (largest entry real)",
        "—",
    ),
    (
        "`linalg.eig`",
        "eigenvector derivatives",
        "fix the phase by `Im diag(V^-1 dV) = 0`; for real eigenvectors the same as LAPACK's",
        "HIPS autograd, torch; differentiate gauge-invariant functions of complex ones "
        "(`abs(V)`, `V diag(f(w)) V^-1`)",
    ),
    (
        "`eig`, `eigh`, `svd`",
        "degenerate spectra: values coincide",
        "eigenvector and singular-vector derivatives divide by gaps: inf/NaN",
        "—",
    ),
    ("`eigvals`", "degenerate spectra", "needs simple eigenvalues", "—"),
    (
        "`eigvalsh`, `svdvals`, `svd(compute_uv=False)`",
        "degenerate spectra",
        "stay finite: each value gets the derivative of LAPACK's vectors",
        "their sum is exact: `grad` of `eigvalsh(a).sum()` at the identity is the identity",
    ),
    (
        "`svd(full_matrices=True)`",
        "a non-square matrix: the extra columns of `U` (rows of `Vh`)",
        "turn as little as keeps them orthogonal: `dU2 = -U1 dU1^H U2`",
        "exact for their projector `U2 U2^H`",
    ),
    ("`lstsq`, `pinv`", "where the rank is locally constant", "the derivative there", "—"),
    ("`rank`, `matrix_rank`", "everywhere", "not differentiable", "—"),
    (
        "`lstsq`",
        "under `vmap`",
        "returns residuals only if every example has full column rank",
        "NumPy's rule, applied to the whole batch",
    ),
    (
        "`roots`",
        "simple roots",
        "`dr = -dp(r) / p'(r)`, also for the leading and trailing zero coefficients NumPy strips",
        "—",
    ),
    ("`roots`", "under `vmap`", "strips the zeros all examples share", "—"),
    (
        "`fft.fftfreq`, `fft.rfftfreq`",
        "a traced spacing `d`",
        "differentiable in `d`; constant otherwise",
        "JAX",
    ),
    ("`cross`", "NumPy's deprecated 2-vectors", "a zero third component", "—"),
    (
        "`modf`",
        "everywhere",
        "the fractional part has derivative 1; the integral part carries none",
        "floating-point representation",
    ),
    (
        "`frexp`",
        "everywhere",
        "the mantissa has derivative `2**-exponent`; the exponent carries none",
        "floating-point representation",
    ),
    ("`ldexp(x, e)`", "everywhere", "derivative `2**e`", "floating-point representation"),
    (
        "`nextafter(x, y)`",
        "everywhere",
        "derivative 1 in `x`, 0 in `y`",
        "floating-point representation",
    ),
    (
        "`modf`, `frexp`",
        "a jump: an integer for `modf`, a power of 2 for `frexp`",
        "the derivative of the piece the value is in",
        "—",
    ),
    (
        "`i0`",
        "everywhere",
        "derivative I1, computed by autodiff: a power series for `abs(x) < 20`, the "
        "asymptotic expansion above (about 2e-15 relative)",
        "—",
    ),
    ("I1 (`i0`'s derivative)", "everywhere; 0", "derivative `I0 - I1 / x`; 1/2 at 0", "—"),
    (
        "`interp`",
        "a sample point `x == xp[j]`",
        "derivative in `x`: the slope of the segment to its right",
        "—",
    ),
    ("`interp`", "`x == xp[-1]`", "the slope of the segment to its left", "—"),
    (
        "`interp`",
        "outside `[xp[0], xp[-1]]`",
        "derivative 0 in `x`; the value's derivative goes to `left`/`right` (by default "
        "`fp[0]`/`fp[-1]`)",
        "—",
    ),
    (
        "`unwrap`",
        "everywhere",
        "derivative: the identity",
        "its corrections are piecewise constant",
    ),
    (
        "`piecewise`",
        "the other pieces' positions",
        "applies every function to the whole array and selects with `where`; there a "
        "function sees a value of its own piece",
        "so `sqrt` or `log` of one piece gives no NaN derivative",
    ),
    (
        "`piecewise`",
        "a boundary",
        "the piece whose condition holds (the last one listed) gives the derivative",
        "—",
    ),
    (
        "`real_if_close`, `poly` of complex roots (real for conjugate pairs)",
        "NumPy decides the dtype from values",
        "follow the value returned: `real`'s derivative, or the identity's",
        "—",
    ),
    (
        "`real_if_close`, `poly` of complex roots",
        "under `vmap`",
        "every example must make the same choice (`TransformValueError` otherwise); an "
        "empty batch stays complex",
        "—",
    ),
    (
        "`polydiv`",
        "values at hand: plain arrays, `grad`, `jvp`",
        "trims the remainder's leading zeros",
        "—",
    ),
    ("`polydiv`", "under `vmap`", "keeps `len(v) - 1` coefficients", "—"),
    (
        "`polymul`",
        "an operand's leading zeros",
        "dropped from plain arrays, as NumPy's; kept on traced values (the same polynomial)",
        "a zero leading coefficient still has a derivative",
    ),
    (
        "`polyfit`",
        "rank deficient",
        "solves with the pseudo-inverse: the minimum-norm fit",
        "as NumPy's `lstsq`",
    ),
    ("`polyfit`", "where the rank is full", "its derivatives hold", "—"),
    (
        "`polyfit`",
        "under `vmap`",
        "does not warn and always returns residuals",
        "its `RankWarning` and NumPy's empty residuals of a rank-deficient fit need values",
    ),
    (
        "`grad`",
        "a real-valued `f` of complex `z`",
        "`2 ∂f/∂z`, the conjugate of the steepest-ascent direction: "
        "`grad(lambda z: abs(z)**2)(z) == 2 * conj(z)`",
        "JAX",
    ),
    (
        "VJPs",
        "complex values",
        "the non-conjugating transpose of the JVP: `Re sum(ct * jvp(v)) == Re sum(vjp(ct) * v)`",
        "JAX",
    ),
    (
        "`scipy.special`: `xlogy`, `xlog1py`, `rel_entr`, `kl_div`",
        "`x == 0`",
        "derivative 0 in `y`",
        "—",
    ),
    ("`scipy.special`: `entr`", "0", "derivative `+inf`", "—"),
    (
        "`scipy.stats`",
        "outside the support (`logpdf` `-inf`, `cdf` 0 or 1); off the integers of a "
        "discrete `logpmf`",
        "derivatives 0 in data and parameters",
        "—",
    ),
    ("`scipy.stats`", "a parameter outside its domain", "NaN", "—"),
    ("`scipy.stats`: `laplace.logpdf`", "at `loc`", "derivative 0", "it uses `sign`"),
    (
        "`scipy.linalg`: `solve_triangular`, `cholesky`, `cho_solve`",
        "the other triangle; the diagonal with `unit_diagonal`",
        "derivative 0",
        "they read one triangle",
    ),
    (
        "`scipy.stats`: `multivariate_normal`",
        "`cov`",
        "reads `cov` as `(cov + cov^T) / 2`: a symmetric derivative",
        "—",
    ),
    ("`scipy.linalg`: `lu_factor`", "the pivots", "held fixed", "—"),
    (
        "`scipy.special`: `iv`, `ive`, `jv`, `yv`",
        "the real orders",
        "no derivative: asking for one raises `MissingRuleError`",
        "—",
    ),
    (
        "`scipy.special`: `gammainc`, `gammaincc`, `betainc`, `stdtr` (so the `cdf`/`sf` "
        "of `scipy.stats` `t`, `beta`, `gamma`, `chi2`)",
        "the shape parameters",
        "no derivative: asking for one raises `MissingRuleError`",
        "—",
    ),
    (
        "`scipy.integrate`: `odeint`",
        "everywhere",
        "the derivatives of the exact solution, to the solver's tolerances",
        "—",
    ),
]
CONVENTIONS_PINNED = (
    "Pinned by `tests/test_primitives.py::test_subgradient_conventions`, "
    "`tests/test_statistics.py::test_conventions` (and the tests next to it) and "
    "`tests/test_elementwise_polynomial_apply.py`; the rows on shapes that depend on values by "
    "`tests/test_value_dependent.py` and `tests/test_in_place.py`; the rows from "
    "`linalg.norm` to `cross` by `tests/test_linalg_fft.py`; the `scipy.*` rows "
    "(`autodiff.scipy`) by `tests/test_scipy.py`."
)


def conventions_table() -> list[str]:
    assert all("|" not in cell for row in CONVENTIONS for cell in row), "escape | in cells"
    return [
        "## Conventions at kinks, ties and domain edges",
        "",
        "Where a derivative or a transform has a choice to make (a kink, a tie, a domain "
        "edge, a result that values decide), autodiff makes the choice in this table, one "
        "row per convention.",
        "",
        "| functions | where | what autodiff does | as in / why |",
        "|---|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in CONVENTIONS),
        "",
        CONVENTIONS_PINNED,
    ]


def main() -> None:
    if "--namespace" in sys.argv:
        print("\n".join(namespace_table()[4:]))
        return
    text = markdown()
    if "--write" in sys.argv:
        PATH.write_text(text)
        print(f"wrote {PATH} ({text.count(chr(10))} lines)")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
