"""Write docs/coverage.md from the registry of primitive samples.

    python -m tests.coverage          # print the table
    python -m tests.coverage --write  # update docs/coverage.md

Every cell is backed by tests/test_primitives.py: a function is listed with
VJP/JVP only if it has differentiable samples (checked to second order
against finite differences), with batching because every sample runs
under vmap against a loop, and with a plain NumPy call if its samples also
run as numpy.X(traced value).
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
        "for every in_dims combination at batch sizes 3, 1 and 0. The last column is the "
        "plain NumPy (or SciPy) call that reaches the same rules on traced values.",
        "",
        "| function | kind | VJP | JVP | batching | plain NumPy call | samples |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    return "\n".join(lines) + "\n"


def main() -> None:
    text = markdown()
    if "--write" in sys.argv:
        PATH.write_text(text)
        print(f"wrote {PATH} ({text.count(chr(10))} lines)")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
