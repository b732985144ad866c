"""check_primitive: one primitive's own rules, checked element by element.

Re-exported by ``autodiff.testing``, which documents the public checkers.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from autodiff.core.graph import aval_of
from autodiff.core.primitive import Primitive
from autodiff.errors import TransformTypeError
from autodiff.interpreters.tape import keep_residuals
from autodiff.interpreters.taylor import taylor_from_jvp
from autodiff.testing.checkers import check_grads, precision

__all__ = ["PrimitiveReport", "check_primitive"]


@dataclasses.dataclass
class PrimitiveReport:
    """What ``check_primitive`` ran.  ``worst_errors`` maps a check to its largest
    error as a fraction of its tolerance (above 1.0 the check would have failed).

    >>> import numpy as np, autodiff.numpy as anp
    >>> report = check_primitive(anp.sin.primitive, (np.array([0.1, 0.2]),))
    >>> report.name, report.missing, all(e <= 1.0 for e in report.worst_errors.values())
    ('sin', [], True)
    """

    name: str
    samples: int = 0
    checks_run: list[str] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)
    derived: list[str] = dataclasses.field(default_factory=list)
    worst_errors: dict[str, float] = dataclasses.field(default_factory=dict)

    def ran(self, check: str, error: float | None = None) -> None:
        if check not in self.checks_run:
            self.checks_run.append(check)
        if error is not None:
            self.worst_errors[check] = max(error, self.worst_errors.get(check, 0.0))

    def __str__(self) -> str:
        lines = [f"check_primitive('{self.name}'): passed on {self.samples} sample(s)"]
        for check in self.checks_run:
            error = self.worst_errors.get(check)
            worst = "" if error is None else f" (worst error {error:.2g} of tolerance)"
            lines.append(f"  {check:<13} ok{worst}")
        if self.derived:
            lines.append(f"  derived: {', '.join(self.derived)}")
        lines.append(f"  missing: {', '.join(self.missing) or 'nothing'}")
        return "\n".join(lines)


def _fmt(x: Any) -> str:
    z = complex(x)
    re, im = float(f"{z.real:.7g}"), float(f"{z.imag:.7g}")
    return repr(re) if z.imag == 0 else repr(complex(re, im))


def _index(k: int, shape: tuple[int, ...]) -> str:
    return f"[{', '.join(str(int(i)) for i in np.unravel_index(k, shape))}]" if shape else ""


def _parts(a: np.ndarray, real: Any, imag: Any) -> tuple:
    """One entry per real coordinate of an element of ``a``: none for integers."""
    return {"f": (real,), "c": (real, imag)}.get(a.dtype.kind, ())


def _units(arrays: Sequence[np.ndarray], im_unit: complex) -> Iterator[tuple[int, np.ndarray]]:
    """One unit array per real coordinate of ``arrays``: each element's real
    part, then (complex arrays) its imaginary part as ``im_unit``."""
    for n, a in enumerate(arrays):
        for unit in _parts(a, 1, im_unit):
            for k in range(a.size):
                e = np.zeros_like(a)
                e.flat[k] = unit
                yield n, e


def _coords(values: Sequence[Any], like: Sequence[np.ndarray], im_sign: float = 1.0) -> Any:
    """The real coordinates of ``values`` (None: zero), in ``_units(like)`` order."""
    parts = [np.zeros(0)]
    for v, a in zip(values, like, strict=True):
        v = np.zeros(a.shape) if v is None else np.asarray(v)
        parts += [np.real(v * part).ravel() for part in _parts(a, 1, -1j * im_sign)]
    return np.concatenate(parts).astype(float)


def _labels(arrays: Sequence[np.ndarray], word: str, numbered: bool) -> list[str]:
    names = [f"{word} {n}" if numbered else word for n in range(len(arrays))]
    return [
        f"{part}{name}{_index(k, a.shape)}"
        for name, a in zip(names, arrays, strict=True)
        for part in (_parts(a, "Re ", "Im ") if a.dtype.kind == "c" else _parts(a, "", ""))
        for k in range(a.size)
    ]


@dataclasses.dataclass
class _Sample:
    """One sample being checked: the primitive, tolerances, and how to fail."""

    prim: Primitive
    params: dict
    index: int
    report: PrimitiveReport
    rtol: float
    atol: float
    eps: float
    prec: float  # machine epsilon of the least precise floating dtype involved

    def error(self, message: str, detail: str = "") -> AssertionError:
        where = f"sample {self.index}" + (f"; {detail}" if detail else "")
        return AssertionError(f"check_primitive('{self.prim.name}'): {message} ({where})")

    def call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            raise self.error(f"{what} raised {type(err).__name__}: {err}") from err

    def impl(self, *args: Any) -> list[np.ndarray]:
        return self.outputs(self.call("impl", self.prim.impl, *args, **self.params), "impl")

    def outputs(self, value: Any, what: str) -> list[np.ndarray]:
        multiple = self.prim.multiple_results
        if multiple != isinstance(value, (tuple, list)):
            kind = "a tuple" if multiple else "one array"
            raise self.error(f"{what} returned {type(value).__name__}, expected {kind}")
        for v in value if multiple else [value]:
            if not isinstance(v, (np.ndarray, np.generic)):
                raise self.error(f"{what} returned {type(v).__name__}, not an array")
        return [np.asarray(v) for v in (value if multiple else [value])]

    def exact_tol(self, want: Any) -> Any:
        """Rule against rule: rtol / 1000 (at least 100 ulps) of |element| + the
        largest |element|; non-finite elements must match exactly."""
        tight = max(self.rtol * 1e-3, 100 * self.prec)
        size = np.where(np.isfinite(want), np.abs(want), 0.0)
        with np.errstate(over="ignore"):
            return tight * (size + np.max(size, initial=0.0))

    def compare(self, check: str, got: Any, want: Any, tol: Any, at: list, text: str) -> None:
        """Record ``check``; on failure report the element furthest off among those
        beyond ``tol`` (inf: not compared): ``text`` with its label ``at[k]`` and values."""
        got, want = np.ravel(got), np.ravel(want)
        kind = complex if "c" in (got.dtype.kind, want.dtype.kind) else float
        got, want = got.astype(kind), want.astype(kind)
        with np.errstate(invalid="ignore", over="ignore"):
            same = (got == want) | (np.isnan(got) & np.isnan(want))
            diff = np.where(same, 0.0, np.nan_to_num(np.abs(got - want), nan=np.inf))
            tol = np.nan_to_num(np.ravel(tol), nan=np.inf)
            ratio = np.where(tol == np.inf, 0.0, diff / np.maximum(tol, np.finfo(float).tiny))
        self.report.ran(check, float(np.max(ratio, initial=0.0)))
        if np.any(ratio > 1):
            k = int(np.argmax(np.where(ratio > 1, diff, -1.0)))
            message = text.format(at=at[k], got=_fmt(got[k]), want=_fmt(want[k]))
            raise self.error(message, f"worst of {got.size} elements")

    def check_like(self, rule: str, value: Any, like: np.ndarray, what: str, exact: bool) -> None:
        """``value`` (None: zero) must have ``like``'s shape, and its dtype if ``exact``;
        else only complex ``like`` needs complex values (the reverse pass keeps the
        real part of a real argument's complex cotangent: JAX's convention)."""
        if value is None or like.dtype.kind not in "fc":
            return
        v = np.asarray(value)
        if v.shape != like.shape:
            raise self.error(f"{rule} returned shape {v.shape} for {what} of shape {like.shape}")
        if v.dtype != like.dtype and (exact or (like.dtype.kind == "c" and v.dtype.kind != "c")):
            raise self.error(f"{rule} returned {v.dtype} for {what} of dtype {like.dtype}")


def _check_forward(s: _Sample, args: list) -> tuple[Any, list[np.ndarray]]:
    ans = s.call("impl", s.prim.impl, *args, **s.params)
    outs = s.outputs(ans, "impl")  # the same as s.impl(*args), but ans is kept for the rules
    bound = s.outputs(s.call("bind", s.prim.bind, *args, **s.params), "bind")
    if len(bound) != len(outs):
        raise s.error(f"bind gives {len(bound)} outputs, impl {len(outs)}")
    for n, (o, b) in enumerate(zip(outs, bound, strict=True)):
        name = f"output {n}" if s.prim.multiple_results else "output"
        if (b.shape, b.dtype) != (o.shape, o.dtype):
            raise s.error(
                f"bind gives {b.dtype} {name} of shape {b.shape}, impl {o.dtype} {o.shape}"
            )
        at = [f"{name}{_index(k, o.shape)}" for k in range(o.size)]
        s.compare("forward", b, o, s.exact_tol(o), at, "bind gives {got} at {at}, impl {want}")
    if s.prim.shape is not None:
        _check_shape_rule(s, args, outs)
    return ans, outs


def _check_shape_rule(s: _Sample, args: list, outs: list) -> None:
    """The shape rule (for staging) gives the shapes and dtypes ``impl`` gives."""
    avals = [aval_of(a) for a in args]
    given = s.call("the shape rule", s.prim.shape, *avals, **s.params)
    given = list(given) if s.prim.multiple_results else [given]
    if len(given) != len(outs):
        raise s.error(f"the shape rule gives {len(given)} results, impl {len(outs)}")
    for n, (g, o) in enumerate(zip(given, outs)):
        name = f"output {n}" if s.prim.multiple_results else "the output"
        if (tuple(g.shape), np.dtype(g.dtype)) != (o.shape, o.dtype):
            raise s.error(
                f"the shape rule gives {np.dtype(g.dtype)} {tuple(g.shape)} for {name}, impl "
                f"{o.dtype} {o.shape}"
            )


def _finite_differences(s: _Sample, args: list, outs: list, i: int) -> tuple[Any, Any]:
    """d output / d argument ``i`` by central differences (2 impl calls per coordinate),
    and the round-off to expect in it."""
    columns, noise = [], []
    for _, e in _units([args[i]], 1j):
        with np.errstate(all="ignore"):  # non-finite values give non-finite columns
            plus, minus = args[i] + s.eps * e, args[i] - s.eps * e
            # The step actually taken, in the argument's own precision.
            step = np.real(np.sum((plus.astype(complex) - minus.astype(complex)) * np.conj(e)))
            ys = [_coords(s.impl(*args[:i], x, *args[i + 1 :]), outs) for x in (plus, minus)]
            columns.append((ys[0] - ys[1]) / step)
            # Round-off of the two evaluations, 10x (as in check_grads).
            noise.append(20 * s.prec * (np.abs(ys[0]) + np.abs(ys[1])) / step)
    n = len(_labels(outs, "", False))
    return np.reshape(columns, (-1, n)).T, np.reshape(noise, (-1, n)).T


def _vjp_jacobians(s: _Sample, args: list, ans: Any, outs: list, diff: list) -> dict:
    """d output / d argument from the VJP rule, one output coordinate per row, for
    every argument in ``diff``; in the pairing Re sum(ct * jvp(v)) = Re sum(vjp(ct) * v)."""
    rows: dict[int, list] = {i: [] for i in diff}
    for n, e in _units(outs, -1j):  # ct = -1j picks out the imaginary part
        cts_in = tuple(e if m == n else np.zeros_like(o) for m, o in enumerate(outs))
        ct = cts_in if s.prim.multiple_results else cts_in[0]
        cts = s.call("VJP rule", s.prim.vjp_rule(), ct, ans, tuple(args), s.params, diff)
        if len(cts) != len(diff):
            raise s.error(f"VJP rule returned {len(cts)} cotangents for {len(diff)} arguments")
        if s.prim.vjp_reads is not None:  # each cotangent alone, from the residuals it declares
            for i in diff:
                kept, kept_ans = keep_residuals(s.prim, list(args), ans, [i], limit=-1)
                s.call("VJP rule", s.prim.vjp_rule(), ct, kept_ans, tuple(kept), s.params, [i])
        for i, g in zip(diff, cts, strict=True):
            s.check_like("VJP rule", g, args[i], f"argument {i}", exact=False)
            rows[i].append(_coords([g], [args[i]], im_sign=-1.0))
    return {i: np.reshape(r, (len(r), -1 if r else 0)) for i, r in rows.items()}


def _jvp_jacobian(s: _Sample, args: list, ans: Any, outs: list, i: int) -> Any:
    """d output / d argument ``i`` from the JVP rule, one input coordinate per column."""
    columns = []
    for _, e in _units([args[i]], 1j):
        tangents = tuple(e if j == i else None for j in range(len(args)))
        t = s.call("JVP rule", s.prim.jvp_rule(), tangents, ans, tuple(args), s.params)
        ts = list(t) if s.prim.multiple_results else [t]
        if len(ts) != len(outs):
            raise s.error(f"JVP rule returned {len(ts)} tangents for {len(outs)} outputs")
        for n, (tn, o) in enumerate(zip(ts, outs, strict=True)):
            what = f"output {n}" if s.prim.multiple_results else "the output"
            s.check_like("JVP rule", tn, o, f"{what} (tangent of argument {i})", exact=True)
        columns.append(_coords(ts, outs))
    return np.reshape(columns, (-1, len(_labels(outs, "", False)))).T


def _check_derivatives(s: _Sample, args: list, ans: Any, outs: list) -> None:
    prim, diff = s.prim, [i for i, a in enumerate(args) if a.dtype.kind in "fc"]
    rows = _labels(outs, "output", prim.multiple_results)
    if not diff or not rows:
        return
    if prim.vjp is None and prim.jvp is None:
        return
    # A missing one of the two is derived from the other (as the transforms do): check
    # both, the given one first, so a wrong rule is named rather than its transpose.
    computed = {
        "VJP": lambda: _vjp_jacobians(s, args, ans, outs, diff),
        "JVP": lambda: {i: _jvp_jacobian(s, args, ans, outs, i) for i in diff},
    }
    order = ["VJP", "JVP"] if prim.vjp is not None else ["JVP", "VJP"]
    jacobians = {rule: computed[rule]() for rule in order}
    label = {
        rule: f"{rule} rule"
        if getattr(prim, rule.lower()) is not None
        else f"{rule} rule (the transpose of the {other} rule)"
        for rule, other in (("VJP", "JVP"), ("JVP", "VJP"))
    }
    for i in diff:
        fd, noise = _finite_differences(s, args, outs, i)
        at = [f"{r} / d {c}" for r in rows for c in _labels([args[i]], "input", False)]
        for rule, jac in jacobians.items():
            tol = s.rtol * np.abs(fd) + s.atol + noise  # inf where fd is not finite: skipped
            text = f"{label[rule]} wrong for argument {i}, d {{at}}: the rule gives {{got}}, "
            s.compare(rule, jac[i], fd, tol, at, text + "finite differences give {want}")
        if len(jacobians) == 2:
            jv = jacobians["JVP"][i]
            text = f"VJP and JVP rules disagree for argument {i}, d {{at}}: the VJP rule gives "
            s.compare(
                "VJP vs JVP",
                jacobians["VJP"][i],
                jv,
                s.exact_tol(jv),
                at,
                text + "{got}, the JVP rule {want}",
            )
    if len(jacobians) == 2 and all(np.isfinite(args[i]).all() for i in diff):
        _check_second_order(s, args, diff)


def _check_second_order(s: _Sample, args: list, diff: list) -> None:
    def f(*xs):
        full = list(args)
        for i, x in zip(diff, xs, strict=True):
            full[i] = x
        return s.prim.bind(*full, **s.params)

    f.__name__ = s.prim.name

    try:
        check_grads(f, [args[i] for i in diff], order=2, eps=s.eps, rtol=s.rtol)
    except Exception as err:
        raise s.error(
            f"second-order check failed; rules must be written with primitives "
            f"(autodiff.numpy functions, operators on the values) to be differentiable "
            f"themselves. {type(err).__name__}: {err}"
        ) from err
    s.report.ran("second order")


def _check_taylor(s: _Sample, args: list, outs: list, order: int = 3) -> None:
    """The Taylor rule against the coefficients derived from the JVP rule (Taylor mode's
    fallback: the JVP rule pushed through order K-1), on random series of every
    floating-point argument: each coefficient's shape, dtype and value."""
    prim = s.prim
    diff = [i for i, a in enumerate(args) if a.dtype.kind in "fc"]
    if not diff or not all(np.isfinite(args[i]).all() for i in diff):
        return
    rng = np.random.default_rng(s.index)
    series = tuple(
        tuple(_random_like(a, rng) for _ in range(order)) if i in diff else (None,) * order
        for i, a in enumerate(args)
    )
    _, got = s.call("Taylor rule", prim.taylor, tuple(args), series, **s.params)
    _, want = s.call("Taylor mode of the JVP rule", taylor_from_jvp, prim, tuple(args), series,
                     dict(s.params))  # fmt: skip
    got, want = (got, want) if prim.multiple_results else ((got,), (want,))
    if len(got) != len(outs):
        raise s.error(f"Taylor rule returned series for {len(got)} outputs, impl has {len(outs)}")
    for n, (g_series, w_series, out) in enumerate(zip(got, want, outs)):
        name = f"output {n}" if prim.multiple_results else "output"
        g_series = [None] * order if g_series is None else list(g_series)
        w_series = [None] * order if w_series is None else list(w_series)
        if len(g_series) != order:
            raise s.error(f"Taylor rule returned {len(g_series)} coefficients of {name}, "
                          f"not {order}")  # fmt: skip
        for k, (g, w) in enumerate(zip(g_series, w_series), start=1):
            s.check_like("Taylor rule", g, out, f"coefficient {k} of {name}", exact=True)
            g = np.zeros_like(out) if g is None else np.asarray(g)
            w = np.zeros_like(out) if w is None else np.asarray(w)
            size = np.where(np.isfinite(w), np.abs(w), 0.0)
            tol = s.rtol * (size + np.max(size, initial=0.0)) + s.atol
            at = [f"{name}{_index(j, out.shape)}" for j in range(out.size)]
            text = (f"Taylor rule wrong at coefficient {k} of {{at}}: the rule gives {{got}}, "
                    f"the JVP rule pushed through Taylor mode gives {{want}}")  # fmt: skip
            s.compare("Taylor", g, w, tol, at, text)


def _own_taylor_rule(prim: Primitive) -> bool:
    """A Taylor rule given, not derived from the JVP rule (``rule_forms.jvp_taylor``)."""
    return prim.taylor is not None and getattr(prim.taylor, "form", None) != "jvp"


def _random_like(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = rng.standard_normal(a.shape)
    if a.dtype.kind == "c":
        out = out + 1j * rng.standard_normal(a.shape)
    return out.astype(a.dtype)


def _example(a: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Example ``k`` of a batch built from the sample ``a`` (example 0 is ``a``):
    floats scaled by 1 + 0.05 k and each element by its own factor in [0.9, 1.1]
    (so examples differ by more than a scale, which sorts and comparisons cannot
    see; zeros and signs stay), other arrays with their elements shuffled
    (indices stay in range)."""
    if k == 0:
        return a
    if a.dtype.kind in "fc":
        return (a * ((1 + 0.05 * k) * rng.uniform(0.9, 1.1, a.shape))).astype(a.dtype)
    return rng.permutation(a.ravel()).reshape(a.shape)


def _batch_dims(args: list) -> list[tuple]:
    """in_dims for the batching check: every combination of the front, the middle
    (arguments of 2 or more dimensions) and the end of each argument, and None
    (not all None); beyond 32 combinations, those of the front and None, and each
    argument alone at its middle and its end."""
    # Non-negative, as vmap passes them to rules.
    choices = [[*dict.fromkeys((0, a.ndim // 2, a.ndim)), None] for a in args]
    combos = list(itertools.product(*choices))
    if len(combos) > 33:
        combos = list(itertools.product(*[(0, None)] * len(args)))
        for i, options in enumerate(choices):
            combos += [tuple(d if j == i else None for j in range(len(args))) for d in options]
    return list(dict.fromkeys(c for c in combos if any(d is not None for d in c)))


def _check_batching(s: _Sample, args: list, size: int = 3) -> None:
    """The batching rule, for in_dims at the front, middle and end of each argument
    and None, against a loop of impl over examples that differ by more than a scale."""
    prim = s.prim
    rng = np.random.default_rng(s.index)
    copies = [[_example(a, k, rng) for k in range(size)] for a in args]
    for dims in _batch_dims(args):
        examples = [
            s.impl(*[a if d is None else c[k] for a, c, d in zip(args, copies, dims, strict=True)])
            for k in range(size)
        ]
        values = [
            a if d is None else np.stack(c, axis=d)
            for a, c, d in zip(args, copies, dims, strict=True)
        ]
        result = s.call(
            f"batching rule (in_dims={dims})", prim.batch, values, list(dims), **s.params
        )
        if not (isinstance(result, tuple) and len(result) == 2):
            raise s.error(f"batching rule returned {type(result).__name__}, not (out, out_dim)")
        out, out_dim = result
        if prim.multiple_results != isinstance(out_dim, (tuple, list)):
            raise s.error(f"batching rule returned out_dim={out_dim!r} for in_dims={dims}")
        out_dims = list(out_dim) if prim.multiple_results else [out_dim]
        outs = s.outputs(out, "batching rule")
        if not len(outs) == len(out_dims) == len(examples[0]):
            raise s.error(
                f"batching rule returned {len(outs)} outputs and {len(out_dims)} out_dims "
                f"for in_dims={dims}; impl returns {len(examples[0])} outputs"
            )
        for n, (o, d) in enumerate(zip(outs, out_dims, strict=True)):
            want = np.stack([example[n] for example in examples])
            shown = f"in_dims={dims}, it returned out_dim={d}"
            if d is not None and not (isinstance(d, (int, np.integer)) and -o.ndim <= d < o.ndim):
                raise s.error(
                    f"batching rule returned an out-of-range out_dim ({shown} for "
                    f"an output of {o.ndim} dimensions)"
                )
            if d is not None and o.shape[d] != size:
                raise s.error(
                    f"batching rule output has {o.shape[d]} examples, not {size} ({shown})"
                )
            o = np.stack([o] * size) if d is None else np.moveaxis(o, d, 0)
            if (o.shape, o.dtype) != (want.shape, want.dtype):
                raise s.error(
                    f"batching rule gives {o.dtype} {o.shape[1:]} per example, "
                    f"a loop of impl gives {want.dtype} {want.shape[1:]} ({shown})"
                )
            name = f"output {n}" if prim.multiple_results else "output"
            per = max(want[0].size, 1)
            at = [
                f"example {k // per}, {name}{_index(k % per, want.shape[1:])}"
                for k in range(want.size)
            ]
            text = f"batching rule wrong for {shown}: at {{at}} it gives {{got}}, "
            s.compare(
                "batching", o, want, s.exact_tol(want), at, text + "a loop of impl gives {want}"
            )


def check_primitive(
    prim: Primitive,
    *samples: Sequence[Any],
    rtol: float | None = None,
    atol: float | None = None,
    eps: float | None = None,
    **params: Any,
) -> PrimitiveReport:
    """Check every rule of ``prim`` on every sample; return what was checked.

    Each sample is a tuple of ``prim``'s positional (array) arguments; ``params``
    are its static keyword parameters.  Checks, on each sample:

    forward: ``bind`` agrees with ``impl``, which returns arrays (a tuple of
    them for ``multiple_results``) of the same shapes and dtypes; the shape rule
    (``prim.shape``, for staging), where one is given, gives those shapes and dtypes.
    VJP, JVP: the Jacobian of every floating-point argument from each rule
    (applied to every output, resp. input, unit vector; for complex values to
    the real and imaginary parts, in the pairing ``Re sum(a * b)``) against
    central finite differences of ``impl``, element by element.  Tangents
    must have the output's shape and dtype, cotangents the argument's shape,
    and complex for a complex argument (a real argument's may be complex: the
    reverse pass keeps its real part).  Finite differences cost 2 ``impl``
    calls per input element (4 if complex): keep samples small.  Outputs
    defined only up to a phase or sign (eigenvectors) can't be checked so.
    VJP vs JVP: the two Jacobians agree to ``rtol / 1000``.
    second order: ``check_grads(..., order=2)`` of ``bind``, which fails for
    rules written with raw NumPy rather than primitives.
    batching: the batching rule, for ``in_dims`` at the front, the middle
    and the end of each argument and None (every combination, up to 32), on
    3 stacked examples (the sample; floats scaled by 1 + 0.05 k and each
    element by its own factor in [0.9, 1.1], so that examples differ by more
    than a scale; other arrays shuffled), against a loop of ``impl`` (to
    ``rtol / 1000``): outputs, their number, shapes, dtypes and values.
    Taylor: a Taylor rule (``prim.taylor``, not derived from the JVP rule) against the
    coefficients Taylor mode derives from the JVP rule, to order 3 on random series of
    every floating-point argument: shapes, dtypes and values (within ``rtol`` of the
    largest coefficient, plus ``atol``).

    Primitives with ``differentiable=False`` only get the forward and batching
    checks.  A missing rule is listed in the report's ``missing``, not an error;
    a VJP or JVP rule derived by transposition from the other (as the transforms
    derive it) is checked like a given one and listed in ``derived``.
    Finite differences use step ``eps`` and pass within ``rtol * |expected| +
    atol`` plus their estimated round-off; defaults by dtype: 1e-6, 1e-6, 1e-9
    in double and 1e-3, 2e-3, 1e-5 in single precision.  The first failure
    raises ``AssertionError`` naming the check, the argument and the element
    furthest off among those out of tolerance, with both values.

    >>> import numpy as np
    >>> from autodiff.core.primitive import Primitive
    >>> cube_p = Primitive("cube", lambda x: x**3, vjp=[lambda ct, ans, x: ct * 2 * x**2])
    >>> check_primitive(cube_p, (np.array([1.0, 2.0]),))
    Traceback (most recent call last):
    AssertionError: check_primitive('cube'): VJP rule wrong for argument 0, d output[1] / d input[1]: the rule gives 8.0, finite differences give 12.0 (sample 0; worst of 4 elements)
    """  # noqa: E501
    if not isinstance(prim, Primitive):
        raise TransformTypeError(
            f"check_primitive(prim, *samples): prim must be a Primitive, got "
            f"{type(prim).__name__} {prim!r:.60}; for a public function of autodiff.numpy "
            f"pass its .primitive (e.g. anp.sin.primitive)."
        )
    if not samples or not all(isinstance(sample, (tuple, list)) for sample in samples):
        raise TransformTypeError(
            "check_primitive(prim, *samples): give samples as tuples of arguments"
        )
    report = PrimitiveReport(prim.name, samples=len(samples))
    if prim.differentiable and prim.vjp is None and prim.jvp is None:
        report.missing += ["VJP rule", "JVP rule"]
    elif prim.differentiable and (prim.vjp is None or prim.jvp is None):
        given, derived = ("VJP", "JVP") if prim.jvp is None else ("JVP", "VJP")
        report.derived.append(f"{derived} rule (the transpose of the {given} rule)")
    if prim.batch is None:
        report.missing.append("batching rule (transforms loop over the batch)")
    has_derivative = prim.vjp is not None or prim.jvp is not None
    if prim.differentiable and has_derivative and not _own_taylor_rule(prim):
        report.derived.append("Taylor rule (from the JVP rule)")
    for index, sample in enumerate(samples):
        args = [np.asarray(a) for a in sample]
        single = precision(args) > 1e-10
        s = _Sample(
            prim,
            params,
            index,
            report,
            rtol=(2e-3 if single else 1e-6) if rtol is None else rtol,
            atol=(1e-5 if single else 1e-9) if atol is None else atol,
            eps=(1e-3 if single else 1e-6) if eps is None else eps,
            prec=precision(args),
        )
        ans, outs = _check_forward(s, args)
        s.prec = precision([*args, *outs])
        if prim.differentiable:
            _check_derivatives(s, args, ans, outs)
        if prim.batch is not None:
            _check_batching(s, args)
        if prim.differentiable and _own_taylor_rule(prim):
            _check_taylor(s, args, outs)
    return report
