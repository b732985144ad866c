"""Write docs/coverage.md from the registry of primitive samples.

    python -m tests.coverage          # print the table
    python -m tests.coverage --write  # update docs/coverage.md

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
    lines += ["", *CONVENTIONS.strip().splitlines()]
    return "\n".join(lines) + "\n"


# Pinned by tests/test_primitives.py::test_subgradient_conventions.
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
- Piecewise-constant functions (`sign`, `floor`, `round`, comparisons, `argmax`,
  `argsort`, `searchsorted`, casts to integers) are declared not differentiable.
- Complex numbers follow JAX: `grad` of a real-valued `f` of complex `z` is
  `2 ∂f/∂z` (the conjugate of the steepest-ascent direction):
  `grad(lambda z: abs(z)**2)(z) == 2 * conj(z)`. VJPs are the non-conjugating
  transpose of the JVP, so `Re sum(ct * jvp(v)) == Re sum(vjp(ct) * v)`.
"""


def main() -> None:
    text = markdown()
    if "--write" in sys.argv:
        PATH.write_text(text)
        print(f"wrote {PATH} ({text.count(chr(10))} lines)")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
