"""The staged program: abstract values, variables, equations, graphs, and pictures of them.

A :class:`Graph` is plain data, what ``make_graph`` returns and ``jit`` replays::

    { lambda c:f64[3] ; a:f64[3] b:f64[] . let
        d:f64[3] = sin a
        e:f64[3] = mul d b
        f:f64[3] = add e c
      in (f,) }

``invars`` are the inputs (``a b`` above), ``constvars`` with ``consts`` the arrays the
function closed over (``c``), ``eqns`` one :class:`Eqn` per primitive call
(``outvars = prim(invars, **params)``), ``outvars`` the results; ``in_tree`` and
``out_tree`` are the pytree structures of the arguments and results.  An input of an
equation is a :class:`Var` or a :class:`Literal` (a Python or NumPy scalar, printed as
its value).  Every variable carries an abstract value: a :class:`ShapedArray` (shape,
dtype, weak type) or, for a ``numpy.random.Generator``, an :class:`OpaqueAval`.

``str(graph)`` prints it compactly; ``graph.to_dot()`` is Graphviz text,
``graph.draw()`` a picture (Graphviz's ``dot`` where it is installed, else networkx
and matplotlib), which notebooks show through ``_repr_svg_``/``_repr_png_``.
"""

from __future__ import annotations

import io
import itertools
import math
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = [
    "Drawing",
    "Eqn",
    "Graph",
    "Literal",
    "OpaqueAval",
    "ShapedArray",
    "Var",
    "aval_of",
    "dtype_name",
]


# --- abstract values -----------------------------------------------------------------------


def dtype_name(dtype: Any) -> str:
    """``f64``, ``f32``, ``c128``, ``i64``, ``u8``, ``bool``: a dtype as graphs print it."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "bool"
    if dtype.kind in "fciu":
        return f"{dtype.kind}{dtype.itemsize * 8}"
    return str(dtype)


class ShapedArray:
    """What staging knows of an array: its shape, its dtype, and whether it came
    from a Python scalar (a *weak* type, which promotes like one under NumPy's
    rules: ``float32_array * 2.0`` stays float32).

    >>> ShapedArray((3, 2), np.float64)
    ShapedArray(f64[3,2])
    >>> ShapedArray((), np.float64, weak_type=True).str_short()
    'f64[]'
    """

    __slots__ = ("dtype", "shape", "weak_type")

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False) -> None:
        # (on staging's hot path: no conversions where none are needed)
        if type(shape) is not tuple or not all(type(n) is int for n in shape):
            shape = tuple(int(n) for n in shape)
        self.shape = shape
        self.dtype = (
            dtype if type(dtype) is np.dtype or isinstance(dtype, np.dtype) else np.dtype(dtype)
        )
        self.weak_type = weak_type is True

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def str_short(self) -> str:
        return f"{dtype_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def _key(self) -> tuple:
        return (self.shape, self.dtype, self.weak_type)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapedArray) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short()}{weak})"


class OpaqueAval:
    """The abstract value of an input that is not an array, by type only: a
    ``numpy.random.Generator`` passed to a jitted function, or NumPy's global
    random state.  Staged code may only hand it to primitives that take one."""

    __slots__ = ("type",)
    shape: tuple[int, ...] = ()
    ndim = 0
    size = 1
    nbytes = 0
    dtype = np.dtype(object)
    weak_type = False

    def __init__(self, type_: type) -> None:
        self.type = type_

    def str_short(self) -> str:
        return self.type.__name__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpaqueAval) and self.type is other.type

    def __hash__(self) -> int:
        return hash(self.type)

    def __repr__(self) -> str:
        return f"OpaqueAval({self.type.__name__})"


_WEAK = (int, float, complex)


def aval_of(x: Any) -> ShapedArray | OpaqueAval:
    """The abstract value of a concrete value: arrays of any library, tracers (their
    logical shape), NumPy scalars, and Python scalars (weakly typed; ``bool`` is not
    weak, as in NumPy)."""
    if type(x) is bool:
        return ShapedArray((), np.bool_)
    if type(x) in _WEAK:  # exactly: np.float64 subclasses float but is not weak
        return ShapedArray((), np.result_type(type(x)), weak_type=True)
    dtype = getattr(x, "dtype", None)
    shape = getattr(x, "shape", None)
    if dtype is not None and shape is not None:
        aval = getattr(x, "aval", None)  # a staged value knows its own
        if isinstance(aval, ShapedArray):
            return aval
        if isinstance(aval, OpaqueAval):
            return aval
        return ShapedArray(shape, dtype)
    return OpaqueAval(type(x))


# --- variables and equations -------------------------------------------------------------------


class Var:
    """A value of the graph: an input, a constant, or an equation's result.
    Compared by identity; its name is given when the graph is printed."""

    __slots__ = ("aval",)

    def __init__(self, aval: Any) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar inside an equation (``mul d 1.01``): a Python scalar, a NumPy
    scalar, or another value that is not an array (a static output)."""

    __slots__ = ("aval", "value")

    def __init__(self, value: Any, aval: Any = None) -> None:
        self.value = value
        self.aval = aval if aval is not None else aval_of(value)

    def __repr__(self) -> str:
        return f"Literal({self.value!r})"


class Eqn:
    """``outvars = prim(*invars, **params)``; ``errstate``: the floating-point error
    handling the staged function set around it (``np.errstate``'s keywords, as sorted
    pairs), which overrides the caller's; None where it set none."""

    __slots__ = ("errstate", "invars", "outvars", "params", "prim")

    def __init__(self, prim: Any, invars: list, outvars: list, params: dict,
                 errstate: tuple | None = None) -> None:  # fmt: skip
        self.prim = prim
        self.invars = invars
        self.outvars = outvars
        self.params = params
        self.errstate = errstate

    def __repr__(self) -> str:
        return f"Eqn({self.prim.name}, {len(self.invars)} in, {len(self.outvars)} out)"


# --- the graph -----------------------------------------------------------------------------------


class Graph:
    """A staged program (see the module docstring).

    ``log`` lists what the passes did to it (``autodiff.compiler.passes``): one entry per
    pass, ``(name, equations removed, details)``.  ``derived`` holds what the compiler
    derived from it (``compiler/pipeline.py``'s ``Derived``: its optimised forms, replays
    and kernels, the graphs of its transforms), made once each; ``lock`` guards making
    them.
    """

    __slots__ = ("__weakref__", "consts", "constvars", "derived", "eqns", "in_tree", "invars",
                 "lock", "log", "name", "out_tree", "outvars")  # fmt: skip

    def __init__(
        self,
        invars: list,
        outvars: list,
        eqns: list,
        constvars: list | None = None,
        consts: list | None = None,
        in_tree: Any = None,
        out_tree: Any = None,
        name: str = "graph",
        log: list | None = None,
    ) -> None:
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)
        self.constvars = list(constvars or [])
        self.consts = list(consts or [])
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.name = name
        self.log = list(log or [])
        self.derived: Any = None  # made by the compiler on first use
        self.lock = threading.RLock()

    def replace(self, **changes: Any) -> Graph:
        """A new graph with some fields changed (the log carried over)."""
        fields = dict(
            invars=self.invars, outvars=self.outvars, eqns=self.eqns, constvars=self.constvars,
            consts=self.consts, in_tree=self.in_tree, out_tree=self.out_tree, name=self.name,
            log=self.log,
        )  # fmt: skip
        fields.update(changes)
        return Graph(**fields)

    @property
    def in_avals(self) -> list:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list:
        return [v.aval for v in self.outvars]

    def primitives(self) -> dict[str, int]:
        """How many equations of each primitive, by name (nested graphs not counted)."""
        counts: dict[str, int] = {}
        for eqn in self.eqns:
            counts[eqn.prim.name] = counts.get(eqn.prim.name, 0) + 1
        return counts

    def stats(self) -> str:
        """What each pass removed, one line each (``log`` as text)."""
        lines = [f"{self.name}: {len(self.eqns)} equations"]
        for name, removed, details in self.log:
            more = ", ".join(f"{k}: {v}" for k, v in details.items())
            lines.append(f"  {name:<10} -{removed:<4}" + (f" ({more})" if more else ""))
        return "\n".join(lines)

    # --- text ------------------------------------------------------------------------------

    def __str__(self) -> str:
        return "\n".join(_Printer().graph(self, ""))

    def text(self, notes: dict[int, str] | None = None) -> str:
        """``str(graph)``, with ``notes[id(eqn)]`` as a comment after the line of each
        top-level equation it names (``Lowered.as_text``: where each equation runs)."""
        return "\n".join(_Printer().graph(self, "", notes or {}))

    def __repr__(self) -> str:
        ins = ", ".join(v.aval.str_short() for v in self.invars)
        outs = ", ".join(v.aval.str_short() for v in self.outvars)
        return f"<Graph {self.name}: ({ins}) -> ({outs}), {len(self.eqns)} equations>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # noqa: ARG002  (IPython's API)
        printer.text(str(self))

    # --- pictures --------------------------------------------------------------------------

    def to_dot(self) -> str:
        """The graph as Graphviz text: inputs and constants on top, one box per
        equation, edges labelled with the shapes and dtypes they carry."""
        return _to_dot(self)

    def draw(self, format: str = "svg") -> Drawing:
        """A picture of the graph: laid out by Graphviz's ``dot`` where it is
        installed, else by networkx and drawn with matplotlib (``pip install
        networkx matplotlib``).  Notebooks show the result; ``.save(path)`` writes it."""
        if _has_dot():
            return Drawing(_run_dot(self.to_dot(), format), format)
        return Drawing(_draw_with_networkx(self), "png")

    # Notebooks draw small graphs by themselves (large ones print as text).
    _AUTO_DRAW_LIMIT = 120

    def _repr_svg_(self) -> str | None:
        if len(self.eqns) > self._AUTO_DRAW_LIMIT or not _has_dot():
            return None
        return _run_dot(self.to_dot(), "svg").decode()

    def _repr_png_(self) -> bytes | None:
        if len(self.eqns) > self._AUTO_DRAW_LIMIT or _has_dot():
            return None  # dot draws SVG, which notebooks prefer
        try:
            return _draw_with_networkx(self)
        except ImportError:
            return None


class Drawing:
    """A picture of a graph (SVG from Graphviz, PNG from matplotlib)."""

    def __init__(self, data: bytes, format: str) -> None:
        self.data = data
        self.format = format

    def save(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(self.data)

    def _repr_svg_(self) -> str | None:
        return self.data.decode() if self.format == "svg" else None

    def _repr_png_(self) -> bytes | None:
        return self.data if self.format == "png" else None

    def __repr__(self) -> str:
        return f"<Drawing: {len(self.data)} bytes of {self.format}>"


# --- printing ------------------------------------------------------------------------------------


def _names() -> Iterator[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for chars in itertools.product(letters, repeat=n):
            yield "".join(chars)


class _Printer:
    """Names variables in order of appearance: a, b, ..., z, aa, ab, ..."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.fresh = _names()

    def name(self, v: Any) -> str:
        if isinstance(v, Literal):
            return _literal(v)
        key = id(v)
        if key not in self.names:
            self.names[key] = next(self.fresh)
        return self.names[key]

    def typed(self, v: Var) -> str:
        return f"{self.name(v)}:{v.aval.str_short()}"

    def graph(self, graph: Graph, indent: str, notes: dict[int, str] | None = None) -> list[str]:
        used = {id(v) for eqn in graph.eqns for v in eqn.invars}
        used |= {id(v) for v in graph.outvars}
        consts = " ".join(self.typed(v) for v in graph.constvars)
        ins = " ".join(self.typed(v) for v in graph.invars)
        lines = [f"{indent}{{ lambda {consts + ' ; ' if consts else ''}{ins} . let"]
        noted: list[tuple[int, str]] = []  # (line, note)
        for eqn in graph.eqns:
            outs = " ".join(self.typed(v) if id(v) in used else "_" for v in eqn.outvars)
            params, nested = self.params(eqn.params, indent + "    ")
            if eqn.errstate:
                state = " ".join(f"{k}={_param_text(v)}" for k, v in eqn.errstate)
                params = f"{params}{{errstate {state}}}"
            args = " ".join(self.name(v) for v in eqn.invars)
            if notes and id(eqn) in notes:
                noted.append((len(lines), notes[id(eqn)]))
            lines.append(f"{indent}    {outs} = {eqn.prim.name}{params} {args}".rstrip())
            lines += nested
        width = max((len(lines[i]) for i, _ in noted), default=0)
        for i, note in noted:
            lines[i] = f"{lines[i].ljust(width)}  # {note}"
        outs = ", ".join(self.name(v) for v in graph.outvars)
        lines.append(f"{indent}  in ({outs}{',' if len(graph.outvars) == 1 else ''}) }}")
        return lines

    def params(self, params: dict, indent: str) -> tuple[str, list[str]]:
        shown, nested = [], []
        for key, value in params.items():
            if isinstance(value, Graph):
                shown.append(f"{key}={{{len(value.eqns)} eqns}}")
                nested += [f"{indent}  {key}:", *self.graph(value, indent + "    ")]
            elif _subgraphs(value):  # a control-flow primitive's staged functions
                graphs = _subgraphs(value)
                shown.append(f"{key}={{{' | '.join(f'{len(g.eqns)} eqns' for g in graphs)}}}")
                for i, g in enumerate(graphs):
                    label = f"{key}[{i}]" if isinstance(value, tuple) else key
                    nested += [f"{indent}  {label}:", *self.graph(g, indent + "    ")]
            else:
                shown.append(f"{key}={_param_text(value)}")
        return (f"[{' '.join(shown)}]" if shown else ""), nested


def _subgraphs(value: Any) -> list[Graph]:
    """The graphs of a staged function (``GraphFn``) or a tuple of them, else []."""
    values = value if isinstance(value, tuple) else (value,)
    graphs = [getattr(v, "graph", None) for v in values]
    return [g for g in graphs if isinstance(g, Graph)] if all(
        isinstance(g, Graph) for g in graphs) else []  # fmt: skip


def _literal(lit: Literal) -> str:
    value = lit.value
    if isinstance(value, np.generic):
        return f"{value.item()!r}:{lit.aval.str_short()}"
    if isinstance(value, (bool, int, float, complex)):
        return repr(value)
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."


def _param_text(value: Any, limit: int = 40) -> str:
    if isinstance(value, slice):
        parts = ["" if p is None else str(p) for p in (value.start, value.stop, value.step)]
        return ":".join(parts[:2] if value.step is None else parts)
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, tuple):
        inner = ",".join(_param_text(v, limit) for v in value)
        text = f"({inner}{',' if len(value) == 1 else ''})"
    elif callable(value) and hasattr(value, "__name__"):
        text = value.__name__
    elif isinstance(value, np.ndarray):
        text = f"array<{dtype_name(value.dtype)}[{','.join(map(str, value.shape))}]>"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- Graphviz text ------------------------------------------------------------------------------

_COLORS = {"input": "#dbe9f6", "const": "#eeeeee", "eqn": "#fff7d6", "effect": "#f8d7d7",
           "output": "#d9f2d9"}  # fmt: skip


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _to_dot(graph: Graph) -> str:
    printer = _Printer()
    lines = [
        "digraph graph_ {",
        "  rankdir=TB;",
        '  node [fontname="Helvetica", fontsize=10, style=filled, penwidth=0.6];',
        '  edge [fontname="Helvetica", fontsize=8, color="#555555"];',
    ]
    source: dict[int, str] = {}
    for kind, variables in (("const", graph.constvars), ("input", graph.invars)):
        for i, v in enumerate(variables):
            node = f"{kind}{i}"
            source[id(v)] = node
            label = f"{printer.typed(v)}" + (" (const)" if kind == "const" else "")
            shape = "note" if kind == "const" else "ellipse"
            lines.append(f'  {node} [label="{_escape(label)}", shape={shape}, '
                         f'fillcolor="{_COLORS[kind]}"];')  # fmt: skip
    for k, eqn in enumerate(graph.eqns):
        node = f"eqn{k}"
        params, _ = printer.params(eqn.params, "")
        literals = [_literal(v) for v in eqn.invars if isinstance(v, Literal)]
        label = eqn.prim.name + (f"\n{params}" if params else "")
        if literals:
            label += "\n(" + ", ".join(literals) + ")"
        color = _COLORS["effect" if getattr(eqn.prim, "effectful", False) else "eqn"]
        lines.append(f'  {node} [label="{_escape(label)}", shape=box, fillcolor="{color}"];')
        for v in eqn.invars:
            if isinstance(v, Var) and id(v) in source:
                lines.append(f'  {source[id(v)]} -> {node} [label="{v.aval.str_short()}"];')
        for v in eqn.outvars:
            source[id(v)] = node
    for i, v in enumerate(graph.outvars):
        node = f"out{i}"
        lines.append(f'  {node} [label="output {i}", shape=ellipse, '
                     f'fillcolor="{_COLORS["output"]}"];')  # fmt: skip
        if isinstance(v, Var) and id(v) in source:
            lines.append(f'  {source[id(v)]} -> {node} [label="{v.aval.str_short()}"];')
    lines.append("}")
    return "\n".join(lines)


def _has_dot() -> bool:
    import shutil  # with subprocess, only to draw (LAZY in tests/test_layers.py)

    return shutil.which("dot") is not None


def _run_dot(text: str, format: str) -> bytes:
    import subprocess

    done = subprocess.run(
        ["dot", f"-T{format}"], input=text.encode(), capture_output=True, check=True, timeout=60
    )
    return done.stdout


def _draw_with_networkx(graph: Graph) -> bytes:
    """The pure-Python fallback: networkx lays the graph out in layers (its
    topological generations), matplotlib draws it into a PNG."""
    try:  # optional (the "notebooks" extra) and slow to import: only when a graph is drawn
        import networkx as nx
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(
            "Graph.draw() needs Graphviz's dot program (apt install graphviz) or, as a "
            "fallback, networkx and matplotlib (pip install networkx matplotlib)."
        ) from e
    printer = _Printer()
    g = nx.DiGraph()
    labels, colors = {}, {}
    source: dict[int, str] = {}
    for kind, variables in (("const", graph.constvars), ("input", graph.invars)):
        for i, v in enumerate(variables):
            node = f"{kind}{i}"
            g.add_node(node)
            source[id(v)] = node
            labels[node], colors[node] = printer.typed(v), _COLORS[kind]
    for k, eqn in enumerate(graph.eqns):
        node = f"eqn{k}"
        g.add_node(node)
        labels[node] = eqn.prim.name
        colors[node] = _COLORS["effect" if getattr(eqn.prim, "effectful", False) else "eqn"]
        for v in eqn.invars:
            if isinstance(v, Var) and id(v) in source:
                g.add_edge(source[id(v)], node, label=v.aval.str_short())
        for v in eqn.outvars:
            source[id(v)] = node
    for i, v in enumerate(graph.outvars):
        node = f"out{i}"
        g.add_node(node)
        labels[node], colors[node] = f"output {i}", _COLORS["output"]
        if isinstance(v, Var) and id(v) in source:
            g.add_edge(source[id(v)], node, label=v.aval.str_short())
    for layer, nodes in enumerate(nx.topological_generations(g)):
        for node in nodes:
            g.nodes[node]["layer"] = layer
    pos = nx.multipartite_layout(g, subset_key="layer", align="horizontal", scale=-1)
    layers = 1 + max((d["layer"] for _, d in g.nodes(data=True)), default=0)
    width = max((sum(1 for _, d in g.nodes(data=True) if d["layer"] == k) for k in range(layers)),
                default=1)  # fmt: skip
    fig = Figure(figsize=(min(2 + 1.6 * width, 30), min(1 + 1.1 * layers, 60)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_axis_off()
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, edge_color="#777777", node_size=1400)
    if g.number_of_nodes() <= 40:  # beyond that the labels cover the picture
        nx.draw_networkx_edge_labels(g, pos, ax=ax, font_size=6,
                                     edge_labels=nx.get_edge_attributes(g, "label"))  # fmt: skip
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color=[colors[n] for n in g.nodes],
                           node_shape="s", node_size=1400, edgecolors="#444444")  # fmt: skip
    nx.draw_networkx_labels(g, pos, ax=ax, labels=labels, font_size=7)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return buffer.getvalue()
