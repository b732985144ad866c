"""The API reference of the site, generated from the modules' ``__all__``.

``.. autodiff-api:: autodiff.numpy`` writes the page of one module: its docstring, a
table of every public name (for the NumPy and SciPy namespaces with the rules each
function has, read from docs/coverage.md), then one entry per name, written by autodoc
from the live object.  The names are read from ``__all__`` when the site is built, so a
name added to a module appears without touching the docs, and a public name without a
docstring of its own is a warning, which the build's ``-W`` turns into a failure.

The names of ``autodiff.numpy`` (and its ``linalg``, ``fft``, ``random``) that are
NumPy's own objects, re-exported so that ``import autodiff.numpy as np`` runs NumPy code
unchanged, get a short entry saying so: their documentation is NumPy's.  A name public
in two modules (``custom_vjp`` in ``autodiff`` and ``autodiff.extend``) is documented in
the first of ``MODULES`` and the other entry links there.

Inline code that names a documented object (``grad``, ``anp.sin``, ``check_grads(f,
args)``) becomes a link to its entry, in the guides, the notebooks and the docstrings
alike (``LinkLiterals``).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pathlib
import re
import sys
from collections import Counter
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docstrings import prepare_docstring
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

logger = logging.getLogger(__name__)

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The modules with a reference page (docs/api/<module>.rst), in the order of
# docs/api/index.md.  tests/test_docs.py checks that every module reachable through
# these modules' __all__ is here.
MODULES = [
    "autodiff",
    "autodiff.extend",
    "autodiff.testing",
    "autodiff.errors",
    "autodiff.stages",
    "autodiff.numpy",
    "autodiff.numpy.linalg",
    "autodiff.numpy.fft",
    "autodiff.numpy.random",
    "autodiff.scipy",
    "autodiff.scipy.special",
    "autodiff.scipy.linalg",
    "autodiff.scipy.signal",
    "autodiff.scipy.stats",
    "autodiff.scipy.integrate",
    "autodiff.lax",
    "autodiff.debug",
    "autodiff.transforms.checkpoint_policies",
    "autodiff.scipy.optimize",
    "autodiff.scipy.sparse",
    "autodiff.scipy.sparse.linalg",
]
# Where each namespace's functions are in docs/coverage.md (the registry's names).
COVERAGE_PREFIX = {
    "autodiff.numpy": "",
    "autodiff.numpy.linalg": "linalg.",
    "autodiff.numpy.fft": "fft.",
    "autodiff.numpy.random": "random.",
    "autodiff.scipy.special": "special.",
    "autodiff.scipy.linalg": "scipy.linalg.",
    "autodiff.scipy.signal": "scipy.signal.",
    "autodiff.scipy.integrate": "scipy.integrate.",
    "autodiff.lax": "lax.",
    "autodiff.scipy.stats": "scipy.stats.",
    "autodiff.scipy.sparse.linalg": "scipy.sparse.linalg.",
}
# Inline code: the prefixes tried, in order, to find the object a name means.
LINK_PREFIXES = ("", "autodiff.", "autodiff.extend.", "autodiff.testing.", "autodiff.errors.")
# ``anp.sin`` means autodiff.numpy.sin; ``np.sin`` is NumPy's and links nowhere.
SHORTHANDS = {"anp.": "autodiff.numpy.", "np.": None, "numpy.": None, "scipy.": None,
              "jnp.": None, "jax.": None, "torch.": None}  # fmt: skip
THEIRS = {"numpy", "scipy", "jax", "torch"}  # the libraries themselves, not autodiff's
IDENTIFIER = re.compile(r"^([A-Za-z_][\w.]*)(\(.*\))*$", re.S)


# --- what the modules hold -------------------------------------------------------------


def public_names(modname: str) -> list[tuple[str, Any]]:
    """``(name, object)`` for each name of the module's ``__all__``, in its order."""
    module = importlib.import_module(modname)
    out = []
    for name in module.__all__:
        try:
            obj = getattr(module, name)
        except AttributeError:  # a submodule imported on its own (autodiff.scipy.stats)
            obj = importlib.import_module(f"{modname}.{name}")
        out.append((name, obj))
    return out


def borrowed(modname: str) -> frozenset[str]:
    """The names that are NumPy's own objects (autodiff/numpy/_borrow.py)."""
    return frozenset(getattr(importlib.import_module(modname), "_borrowed", ()))


@functools.cache
def catalogue() -> tuple[dict[int, str], Counter]:
    """Over all MODULES: where each object is documented (the first module that has
    it), and how many public instances each class has."""
    homes: dict[int, str] = {}
    instances: Counter = Counter()
    for modname in MODULES:
        theirs = borrowed(modname)
        for name, obj in public_names(modname):
            if name in theirs or inspect.ismodule(obj) or id(obj) in homes:
                continue
            homes[id(obj)] = f"{modname}.{name}"
            if not _is_instance(obj):
                continue
            instances[type(obj)] += 1
    return homes, instances


def _is_instance(obj: Any) -> bool:
    return not (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj))


def _ours(obj: Any) -> bool:
    return (getattr(obj, "__module__", None) or "").startswith("autodiff")


def attribute_doc(obj: Any, name: str) -> str | None:
    """The docstring under ``name = ...`` in the autodiff module that assigns ``obj``."""
    for modname, module in list(sys.modules.items()):
        if modname.startswith("autodiff") and vars(module).get(name) is obj:
            try:
                docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
            except Exception:  # no source to read: nothing said there
                continue
            if ("", name) in docs:
                return "\n".join(docs["", name])
    return None


def documentation(obj: Any, name: str) -> str | None:
    """What documents a public object: its own docstring; for an instance, the
    docstring under its assignment, or its class's where it is the class's only public
    instance.  None when nothing does."""
    if not _is_instance(obj):
        doc = obj.__doc__  # a class's own: __doc__ is not inherited
        return doc if isinstance(doc, str) and doc.strip() else None
    doc = attribute_doc(obj, name)
    if doc:
        return doc
    cls = type(obj)
    if _ours(cls) and catalogue()[1][cls] == 1 and (cls.__doc__ or "").strip():
        return cls.__doc__
    return None


def coverage() -> dict[str, str]:
    """docs/coverage.md's rows: registry name -> the rules the function has, in words."""
    out = {}
    row = re.compile(r"^\| `([^`]+)` \| (primitive|composition) \| ([^|]+) \|")
    for line in (ROOT / "docs" / "coverage.md").read_text().splitlines():
        m = row.match(line)
        if m:
            name, kind, vjp = (g.strip() for g in m.groups())
            rules = "VJP, JVP, batching" if vjp == "✅" else "batching (not differentiable)"
            out[name] = f"{rules} ({kind})"
    return out


def rules_of(rules: dict[str, str], modname: str, name: str) -> str:
    """The rules of ``modname.name`` in words, '' where the registry has no samples."""
    prefix = COVERAGE_PREFIX[modname] + name
    text = rules.get(prefix, "")
    methods = sorted(k for k in rules if k.startswith(prefix + "."))
    if methods and not text:  # a distribution of autodiff.scipy.stats
        return "VJP, JVP, batching of " + ", ".join(m.rsplit(".", 1)[1] for m in methods)
    if methods:  # ufunc methods (add.reduce) and at[...] updates
        text += "; also " + ", ".join(f"``{m}``" for m in methods)
    return text


def summary(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    first = inspect.cleandoc(doc or "").split("\n\n")[0]
    return " ".join(line.strip() for line in first.splitlines())


# --- the page of a module ----------------------------------------------------------------


class AutodiffApi(SphinxDirective):
    """``.. autodiff-api:: module``: the reference page of one module."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        modname = self.arguments[0]
        content = StringList(self.lines(modname), source=f"<autodiff-api {modname}>")
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, content, node)
        return node.children

    def lines(self, modname: str) -> list[str]:
        rules = self.env.app.autodiff_rules  # type: ignore[attr-defined]
        entry_rules = self.env.app.autodiff_entry_rules  # type: ignore[attr-defined]
        homes = catalogue()[0]
        theirs = borrowed(modname)
        names = public_names(modname)
        with_rules = modname in COVERAGE_PREFIX

        title = f"``{modname}``"
        out = [title, "=" * len(title), "", f".. automodule:: {modname}", ""]
        out += [f".. currentmodule:: {modname}", ""]
        rows, entries = [], []
        for name, obj in names:
            full = f"{modname}.{name}"
            link = f":py:obj:`{name} <{full}>`"
            if name in theirs:
                numpy_name = full.replace("autodiff.", "", 1)
                rows.append((link, "—", f"NumPy's own ``{numpy_name}`` (no rules)"))
                entries += borrowed_entry(name, obj, numpy_name)
                continue
            if inspect.ismodule(obj):  # documented on its own page
                rows.append((f":py:mod:`{name} <{obj.__name__}>`", "", summary(obj.__doc__)))
                continue
            doc = documentation(obj, name)
            if doc is None:
                logger.warning(
                    f"public name {full} has no docstring of its own", location=self.get_location()
                )
            home = homes.get(id(obj), full)
            if home != full:
                rows.append((link, "", f"the same object as ``{home}``"))
                entries += [f".. py:{_kind(obj)}:: {name}", "", f"   The same object as "
                            f":py:obj:`{home}`.", ""]  # fmt: skip
                continue
            rule_text = rules_of(rules, modname, name) if with_rules else ""
            entry_rules[full] = rule_text
            rows.append((link, rule_text or "—", summary(doc)))
            entries += entry(name, obj, full, doc, rules, modname)
        out += table(modname, rows, with_rules)
        return out + entries


def table(modname: str, rows: list[tuple[str, str, str]], with_rules: bool) -> list[str]:
    header = ("name", "rules", "what it is")
    out = [f".. list-table:: The {len(rows)} public names of ``{modname}``",
           "   :header-rows: 1", "   :widths: 20 25 55" if with_rules else "   :widths: 25 75",
           "   :class: autodiff-api-table", ""]  # fmt: skip
    for row in [header, *rows]:
        cells = row if with_rules else (row[0], row[2])
        out += ["   * - " + cells[0], *(f"     - {c or '—'}" for c in cells[1:])]
    if with_rules:
        out += ["", "*Rules*: the derivative and batching rules of each function, as "
                ":doc:`/docs/coverage` lists them from the test registry (— where the "
                "registry has no samples: types, submodules, random draws)."]  # fmt: skip
    return [*out, ""]


def _kind(obj: Any) -> str:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    return "function" if inspect.isroutine(obj) else "data"


def borrowed_entry(name: str, obj: Any, numpy_name: str) -> list[str]:
    kind = _kind(obj)
    signature = _signature(obj) if kind == "function" else ""
    return [
        f".. py:{kind}:: {name}{signature}",
        "",
        f"   NumPy's own ``{numpy_name}``, re-exported so that NumPy code runs unchanged: "
        "it has no rules, so on a traced value it raises ``UnsupportedFunctionError``. "
        "Its documentation is NumPy's.",
        "",
    ]


def entry(name: str, obj: Any, full: str, doc: str | None, rules: dict, modname: str):
    kind = _kind(obj)
    if kind == "exception":
        return [f".. autoexception:: {full}", "   :show-inheritance:", ""]
    if kind == "class":
        # autodiff's own classes with their documented members; NumPy's scalar types
        # (anp.float32) as themselves
        members = ["   :members:"] if not modname.startswith("autodiff.numpy") else []
        return [f".. autoclass:: {full}", *members, ""]
    if kind == "function":
        return [f".. autofunction:: {full}", ""]
    # an instance (a distribution of autodiff.scipy.stats, a dispatch point): its
    # documentation, then its documented methods
    out = [f".. py:data:: {name}", ""]
    out += [f"   {line}" for line in prepare_docstring(doc or "")]
    for method_name, method in _methods(obj):
        out += [f"   .. py:method:: {name}.{method_name}{_signature(method)}", ""]
        out += [f"      {line}" for line in prepare_docstring(method.__doc__)]
        key = f"{COVERAGE_PREFIX.get(modname, '?')}{name}.{method_name}"
        if key in rules:
            out += [f"      *Rules*: {rules[key]}.", ""]
    return out


def _methods(obj: Any) -> list[tuple[str, Any]]:
    cls = type(obj)  # in the order the class defines them
    return [(k, getattr(obj, k)) for k, v in vars(cls).items() if not k.startswith("_")
            and inspect.isfunction(v) and v.__doc__]  # fmt: skip


def _signature(fn: Any) -> str:
    """The signature without annotations (they are strings here, not types)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "(...)"
    bare = [p.replace(annotation=p.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=bare, return_annotation=sig.empty))


def process_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list):
    """autodoc-process-docstring: a docstring that ends with NumPy's documentation of the
    function it wraps (``anp.random``'s legacy draws) stops where NumPy's begins, and a
    namespace function's rules follow its docstring.  A namedtuple field left with
    Python's own docstring ("Alias for field number 0") is a warning: say what it holds."""
    if len(lines) == 1 and lines[0].startswith("Alias for field number"):
        logger.warning(f"{name}: a namedtuple field without a docstring of its own (set "
                       f"its __doc__ next to the class)")  # fmt: skip
    wrapped = getattr(obj, "__wrapped__", None)
    theirs = inspect.getdoc(wrapped) if wrapped is not None and not _ours(wrapped) else None
    if theirs:
        first = theirs.splitlines()[0].strip()
        at = next((i for i, line in enumerate(lines) if i and line.strip() == first), None)
        if at is not None:
            numpy_name = f"{wrapped.__module__}.{wrapped.__name__}"
            lines[at:] = [f"The rest is NumPy's documentation of ``{numpy_name}``.", ""]
    text = app.autodiff_entry_rules.get(name)  # type: ignore[attr-defined]
    if text:
        lines += ["", f"*Rules*: {text}."]


# --- inline code links to the entries -----------------------------------------------------


class LinkLiterals(SphinxPostTransform):
    """Inline code naming a documented object links to its entry."""

    default_priority = 5  # before Sphinx resolves the other references
    formats = ("html",)

    def run(self, **_: Any) -> None:
        objects = self.env.get_domain("py").objects
        for node in list(self.document.findall(nodes.literal)):
            if any(isinstance(p, (nodes.reference, nodes.title, addnodes.desc_signature))
                   for p in _ancestors(node)):  # fmt: skip
                continue
            target = _target(node.astext(), objects)
            if target is None:
                continue
            entry = objects[target]
            uri = self.app.builder.get_relative_uri(self.env.docname, entry.docname)
            ref = nodes.reference("", "", internal=True, refuri=f"{uri}#{entry.node_id}")
            ref["reftitle"] = target
            node.replace_self(ref)
            ref += node


def _ancestors(node: nodes.Node):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _target(text: str, objects: dict) -> str | None:
    m = IDENTIFIER.match(text.strip())
    if not m:
        return None
    name = m.group(1)
    if name in THEIRS:
        return None
    for short, full in SHORTHANDS.items():
        if name.startswith(short):
            if full is None:
                return None
            name = full + name[len(short) :]
    return next((p + name for p in LINK_PREFIXES if p + name in objects), None)


def setup(app: Sphinx) -> dict[str, Any]:
    app.autodiff_rules = coverage()  # type: ignore[attr-defined]
    app.autodiff_entry_rules = {}  # type: ignore[attr-defined]
    app.add_directive("autodiff-api", AutodiffApi)
    app.connect("autodoc-process-docstring", process_docstring)
    app.add_post_transform(LinkLiterals)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
