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
    lines += ["", *CONVENTIONS.strip().splitlines()]
    return "\n".join(lines) + "\n"


# Pinned by tests/test_primitives.py::test_subgradient_conventions and
# tests/test_statistics.py::test_conventions (and the tests next to it).
CONVENTIONS = """
## Conventions at kinks, ties and domain edges

- `abs`, `fabs` and `copysign` use `sign(x)`: derivative 0 at 0.
- Ties share the derivative equally: `maximum`/`minimum`/`fmax`/`fmin` (0.5 each),
  `clip` at a bound (0.5), and `max`/`min` reductions (1/k for k tied entries).
  `fmax`/`fmin` give a NaN argument derivative 0.
- `sqrt` and `x**0.5` at 0, `log` at 0: infinite derivative (as the limit).
- `x**y`: the derivative in `x` is 0 where `y == 0`; the derivative in `y` is taken
  as 0 at `x == 0` (the limit for `y > 0`).
- `sinc` has derivative 0 at 0. `nan_to_num` passes derivatives only where `x` is
  finite (the replaced entries are constants).
- `sort` passes each sorted entry's derivative to the entry it came from; `prod`
  and `cumprod` are exact where entries are 0.
- `std` and `nanstd` at zero spread: derivative 0 (torch and autograd), not the
  infinity of the square root (`var` is smooth there, with derivative 0).
- Order statistics (`median`, `quantile`, `percentile` and their nan-versions, every
  `method`) pass the derivative to the one or two sorted entries each quantile
  interpolates between; at ties to the entries a stable sort puts at those positions
  (not shared, unlike `max`). In `q` the derivative is the slope between the two
  entries for the continuous methods, 0 for the discrete ones (`lower`, `higher`,
  `nearest`, `midpoint`, `inverted_cdf`, `averaged_inverted_cdf`,
  `closest_observation`); `weights` (for `inverted_cdf`) select, so they get 0.
- The nan-reductions give NaN entries derivative 0; `nanmax`/`nanmin` share ties as
  `max`/`min` do. `corrcoef` clips to [-1, 1] as NumPy does (`clip` at a bound: 0.5).
- Histograms: counts have no derivative; sums of `weights` (`bincount`,
  `histogram*`) are linear in the weights; edges from a number of bins follow the
  data's `min`/`max` (so do densities, through the bin widths).
- Under `vmap`, where a check would read batched values: `quantile` with `q` out of
  range gives NaN (NumPy raises), `nanargmax`/`nanargmin` of an all-NaN slice give -1
  (JAX's answer; NumPy raises), `digitize` takes the direction of `bins` from their
  ends; `bincount` needs `length=` (JAX's keyword) when `x` is batched.
- Piecewise-constant functions (`sign`, `floor`, `round`, comparisons, `argmax`,
  `argsort`, `searchsorted`, casts to integers, `spacing`, `isclose`, `allclose`,
  `array_equal`, `array_equiv`, `isposinf`, `isneginf`) are declared not differentiable.
- `partition` passes derivatives like `sort`. `unique` (and `unique_*`, `union1d`,
  `setxor1d`) passes each value's derivative to its first occurrence (in `ar1`, then
  `ar2`); `intersect1d` to its first occurrence in `ar1` (JAX's choice). Positions,
  counts and inverse indices (`nonzero`, `argwhere`, `flatnonzero`, `argpartition`,
  `lexsort`, `isin`) have no derivative.
- `put`, `put_along_axis` and `x.at[i].set(v)` with a position named twice: the last
  value written wins, and only it receives a derivative.
- Shapes that depend on values (`nonzero`, `argwhere`, `flatnonzero`, `extract`,
  `compress`, `unique*`, the set functions, `x[mask]`): under `grad` and `jvp` the
  values are concrete and these are NumPy's; under `vmap` they raise
  `ConcretizationError` unless given JAX's `size=k`: the first k results, padded
  with `fill_value` (by default: positions 0; for `unique` and the set functions
  copies of the smallest value kept, which carry its derivative; counts 0). Pinned
  by `tests/test_value_dependent.py` and `tests/test_in_place.py`.
- `linalg.norm`, `linalg.vector_norm`, `linalg.matrix_norm`, every `ord` (and `cond`,
  `lstsq` through them): derivative 0 at a zero vector or matrix (torch, HIPS autograd),
  not NaN; for `0 < ord < 1` also at zero entries; for `ord < 0` a vector with a zero
  entry has norm 0 and derivative 0.
- `linalg.eig`: eigenvectors have unit norm and LAPACK's phase (largest entry real);
  their derivative fixes the phase by `Im diag(V^-1 dV) = 0` (HIPS autograd, torch), the
  same as LAPACK's for real eigenvectors: differentiate gauge-invariant functions of
  complex ones (`abs(V)`, `V diag(f(w)) V^-1`).
- Degenerate spectra: the eigenvector and singular-vector derivatives of `eig`, `eigh`
  and `svd` divide by gaps (inf/NaN where values coincide); `eigvals` needs simple
  eigenvalues; `eigvalsh`, `svdvals` and `svd(compute_uv=False)` stay finite (each value
  gets the derivative of LAPACK's vectors; their sum is exact: `grad` of
  `eigvalsh(a).sum()` at the identity is the identity).
- `svd(full_matrices=True)` of a non-square matrix: the extra columns of `U` (rows of
  `Vh`) turn as little as keeps them orthogonal, `dU2 = -U1 dU1^H U2`; exact for their
  projector `U2 U2^H`.
- `lstsq`, `pinv`: the derivative where the rank is locally constant; `rank` and
  `matrix_rank` are not differentiable. Under `vmap`, `lstsq` returns residuals only if
  every example has full column rank (NumPy's rule, applied to the whole batch).
- `roots`: `dr = -dp(r) / p'(r)` for simple roots, also for the leading and trailing zero
  coefficients NumPy strips; under `vmap` the zeros stripped are those all examples share.
- `fft.fftfreq`, `fft.rfftfreq`: differentiable in a traced spacing `d` (JAX), constant
  otherwise. `cross` of NumPy's deprecated 2-vectors: a zero third component.
- Pinned by `tests/test_linalg_fft.py`.
- Floating-point representation: the fractional part of `modf` has derivative 1, the
  mantissa of `frexp` `2**-exponent`, `ldexp(x, e)` `2**e`, `nextafter(x, y)` 1 in `x`
  (0 in `y`); the integral part and the exponent carry none. At a jump (an integer for
  `modf`, a power of 2 for `frexp`) the derivative is that of the piece the value is in.
- `i0`'s derivative is I1, computed by autodiff (a power series below |x| = 20, the
  asymptotic expansion above: about 2e-15 relative); I1's derivative is
  `I0 - I1 / x`, 1/2 at 0.
- `interp`: at a sample point `x == xp[j]` the derivative in `x` is the slope of the
  segment to its right (at `xp[-1]`, to its left); outside `[xp[0], xp[-1]]` it is 0,
  and the value's derivative goes to `left`/`right` (by default `fp[0]`/`fp[-1]`).
  `unwrap`'s corrections are piecewise constant: its derivative is the identity.
- `piecewise` applies every function to the whole array and selects with `where`; at the
  other pieces' positions a function sees a value of its own piece, so `sqrt` or `log`
  of one piece gives no NaN derivative. At a boundary the piece whose condition holds
  (the last one listed) gives the derivative.
- Results whose dtype or shape NumPy decides from values: `real_if_close` (and `poly` of
  complex roots, real for conjugate pairs) follow the value returned (`real`'s
  derivative, or the identity's); under `vmap` every example must make the same choice
  (`TransformValueError` otherwise; an empty batch stays complex). `polydiv` trims the
  remainder's leading zeros where values are at hand (plain arrays, `grad`, `jvp`) and
  keeps `len(v) - 1` coefficients under `vmap`. `polyfit` solves with the pseudo-inverse
  (the minimum-norm fit when rank deficient, as NumPy's `lstsq`); its derivatives hold
  where the rank is full; its `RankWarning` and NumPy's empty residuals of a
  rank-deficient fit need values, so under `vmap` it does not warn and always returns
  residuals.
- Complex numbers follow JAX: `grad` of a real-valued `f` of complex `z` is
  `2 ∂f/∂z` (the conjugate of the steepest-ascent direction):
  `grad(lambda z: abs(z)**2)(z) == 2 * conj(z)`. VJPs are the non-conjugating
  transpose of the JVP, so `Re sum(ct * jvp(v)) == Re sum(vjp(ct) * v)`.
- `autodiff.scipy` (pinned by `tests/test_scipy.py`): `xlogy`, `xlog1py`, `rel_entr`
  and `kl_div` have derivative 0 in `y` where `x == 0`; `entr` at 0 has derivative
  `+inf`. `stats`: outside the support (`logpdf` `-inf`, `cdf` 0 or 1) and off the
  integers of a discrete `logpmf`, the derivatives in data and parameters are 0; a
  parameter outside its domain gives NaN; `laplace.logpdf` at `loc` uses `sign` (0).
  `solve_triangular`, `cholesky`, `cho_solve` read one triangle (derivative 0 in the
  other, and on the diagonal with `unit_diagonal`); `multivariate_normal` reads `cov`
  as `(cov + cov^T) / 2` (a symmetric derivative); `lu_factor`'s pivots are held
  fixed. The real orders of `iv`, `ive`, `jv`, `yv` and the shape parameters of
  `gammainc`, `gammaincc`, `betainc`, `stdtr` (so of the `cdf`/`sf` of `t`, `beta`,
  `gamma`, `chi2`) have no derivative: asking for one raises `MissingRuleError`.
  `odeint`'s derivatives are those of the exact solution, to the solver's tolerances.
"""


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
