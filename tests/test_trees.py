"""core/trees.py: plain arguments are flattened without optree, exactly as optree would."""

import collections
import copy
import pickle
import subprocess
import sys

import numpy as np
import optree
import pytest

import autodiff
from autodiff.core import trees

Point = collections.namedtuple("Point", "x y")

CASES = [
    np.ones(3),
    2.5,
    3,
    True,
    1j,
    np.float32(1.5),
    np.int64(2),
    (np.ones(2), 3.0),
    [np.ones(2), np.zeros(3), 1.0],
    (),
    [],
    (np.ones(2), None),  # None is a node with no leaves: optree's
    (np.ones(2), {"w": np.ones(3)}),
    Point(np.ones(1), 2.0),  # a tuple subclass: a node of its own
    {"a": 1.0},
    None,
    ((1.0, 2.0), 3.0),
    [(np.ones(2), [3.0, (4, np.int32(5))]), ()],
    ((1.0, [None]), 2.0),
]


@pytest.mark.parametrize("tree", CASES, ids=lambda t: type(t).__name__)
def test_flatten_gives_optrees_leaves_and_structure(tree):
    leaves, structure = trees.flatten(tree)
    want_leaves, want = optree.tree_flatten(tree)
    assert len(leaves) == len(want_leaves)
    assert all(a is b for a, b in zip(leaves, want_leaves))
    assert structure == want and want == structure
    assert [structure != want, want != structure] == [False, False]
    assert hash(structure) == hash(want) and repr(structure) == repr(want)
    assert structure.num_leaves == want.num_leaves
    back = trees.unflatten(structure, leaves)
    assert type(back) is type(tree) and optree.tree_structure(back) == want
    doubled = trees.tree_map(lambda v: v * 2, tree)
    assert optree.tree_all(optree.tree_map(lambda a, b: np.array_equal(a, b * 2), doubled, tree))
    leaves_n, structure_n = trees.flatten(tree, none_is_leaf=True)
    want_n = optree.tree_structure(tree, none_is_leaf=True)
    assert structure_n == want_n and repr(structure_n) == repr(want_n)
    assert len(leaves_n) == want_n.num_leaves
    assert (structure_n == structure) == (want_n == want)
    summed = trees.tree_map(lambda a, b: a + b, tree, doubled)
    assert optree.tree_structure(summed) == want
    assert optree.tree_all(optree.tree_map(lambda a, b: np.array_equal(a, b * 3), summed, tree))


def test_mapping_over_trees_that_differ_does_as_optree_does():
    for a, b in (((1.0, 2.0), [1.0, 2.0]), ((1.0,), (1.0, 2.0))):
        with pytest.raises(ValueError, match="tuple") as ours:
            trees.tree_map(lambda x, y: x, a, b)
        with pytest.raises(ValueError, match="tuple") as theirs:
            optree.tree_map(lambda x, y: x, a, b)
        assert str(ours.value) == str(theirs.value)
    # the first tree a prefix of the second: optree's mapping, subtree and all
    a, b = (1.0, 2.0), (1.0, {"a": 2.0})
    assert trees.tree_map(lambda x, y: (x, y), a, b) == optree.tree_map(lambda x, y: (x, y), a, b)


def test_plain_values_take_the_shortcut_and_a_container_does_not():
    assert isinstance(trees.flatten((np.ones(2), 1.0))[1], trees.Flat)
    assert isinstance(trees.flatten(np.ones(2))[1], trees.Flat)
    assert isinstance(trees.flatten(((1.0, [2.0]), []))[1], trees.Flat)  # nested too
    # a tuple subclass, a dict, None inside: optree's own treespec
    for tree in (Point(1.0, 2.0), (1.0, {"a": 2.0}), (1.0, None), ((1.0, (None,)),)):
        assert isinstance(trees.flatten(tree)[1], optree.PyTreeSpec)
    # two plain structures differ as optree's would
    assert trees.flatten((1.0, 2.0))[1] != trees.flatten([1.0, 2.0])[1]
    assert trees.flatten((1.0, 2.0))[1] != trees.flatten((1.0,))[1]
    assert trees.flatten(1.0)[1] != trees.flatten((1.0,))[1]
    assert trees.flatten(((1.0, 2.0), 3.0))[1] != trees.flatten((1.0, (2.0, 3.0)))[1]
    nested = trees.flatten(((1.0, 2.0), 3.0))[1]
    assert nested.flatten_up_to(((5, 6), 7)) == optree.tree_structure(((1, 2), 3)).flatten_up_to(
        ((5, 6), 7)
    )


def test_a_plain_structure_copies_and_pickles():
    _, structure = trees.flatten((1.0, (2.0, [3.0])))
    for copied in (copy.deepcopy(structure), pickle.loads(pickle.dumps(structure))):
        assert isinstance(copied, trees.Flat) and copied == structure
        assert copied == optree.tree_structure((1, (2, [3])))
        assert copied.unflatten([4.0, 5.0, 6.0]) == (4.0, (5.0, [6.0]))


def test_a_traced_value_is_a_plain_leaf():
    seen = []

    def f(x):
        leaves, structure = trees.flatten((x, x * 2))
        seen.append(isinstance(structure, trees.Flat) and len(leaves) == 2)
        return np.sum(np.sin(x))

    g = autodiff.grad(f)(np.array([0.3, 0.7]))
    np.testing.assert_allclose(g, np.cos([0.3, 0.7]), rtol=1e-15)
    assert seen == [True]


def test_the_vjp_functions_structure_checks_hold_for_both_kinds():
    x = np.array([1.0, 2.0])
    _, vjp_fn = autodiff.vjp(lambda a, b: (a * b, a + b), x, 3.0)
    ct = (np.ones(2), np.ones(2))
    ga, gb = vjp_fn(ct)
    np.testing.assert_array_equal(ga, np.full(2, 4.0))  # b + 1
    assert float(gb) == 5.0  # sum(a) + sum(ones)
    with pytest.raises(ValueError, match=r"cotangent structure PyTreeSpec\(\[\*, \*\]\)"):
        vjp_fn([np.ones(2), np.ones(2)])  # a list for the tuple output
    # a dict output against plain cotangents, and the reverse
    _, vjp_fn = autodiff.vjp(lambda a: {"y": a * 2}, x)
    np.testing.assert_array_equal(vjp_fn({"y": np.ones(2)})[0], np.full(2, 2.0))
    with pytest.raises(ValueError, match="does not match the structure"):
        vjp_fn(np.ones(2))
    _, jvp_fn = autodiff.linearize(lambda a, b: a * b, x, 2.0)
    np.testing.assert_array_equal(jvp_fn(np.ones(2), 0.0), np.full(2, 2.0))
    with pytest.raises(ValueError, match="structured like the primals"):
        jvp_fn((np.ones(2), 0.0))


def test_a_plain_program_never_imports_optree_and_a_tree_does():
    # Importing optree costs a short program (autograd's examples) ~10 ms: only trees pay it.
    plain = (
        "import sys, numpy as np, autodiff, autodiff.numpy as anp\n"
        "from autodiff.compat import autograd\n"
        "x = np.array([0.5, 1.5])\n"
        "g = autodiff.grad(lambda x, y: anp.sum(anp.sin(x) * y), argnums=(0, 1))(x, 2.0)\n"
        "assert np.allclose(g[0], 2 * np.cos(x)) and np.isclose(g[1], np.sum(np.sin(x)))\n"
        "out, t = autodiff.jvp(lambda x: anp.exp(x), (x,), (np.ones(2),))\n"
        "assert np.allclose(t, np.exp(x))\n"
        "v, f = autodiff.vjp(lambda x: (x ** 2, x), x); assert np.allclose(f((x, x))[0], 2*x*x+x)\n"
        "assert np.allclose(autograd.elementwise_grad(anp.tanh)(x), 1 - np.tanh(x) ** 2)\n"
        "r = np.random.default_rng(0)\n"
        "autodiff.grad(lambda x: anp.sum(anp.random.normal(r, x.shape) * x))(x)\n"
        "from autodiff.compat.autograd import check_grads\n"
        "check_grads(lambda x: anp.sum(anp.tanh(x) ** 2), x, modes=['rev', 'fwd'])\n"
        # vmap (a None in in_dims is a leaf there), its chunks, and the Jacobians
        "w = np.array([[1.0, 2.0], [3.0, 4.0]])\n"
        "b = autodiff.vmap(lambda r, w: w @ r, in_dims=(0, None))(w, w)\n"
        "assert np.allclose(b, w @ w.T)\n"
        "assert np.allclose(autodiff.vmap(anp.sin, chunk_size=1)(x), np.sin(x))\n"
        "h = autodiff.hessian(lambda x: anp.sum(x ** 3))(x)\n"
        "assert np.allclose(h, np.diag(6 * x))\n"
        "j = autodiff.jacrev(lambda x, s: (anp.sin(x) * s, s), argnums=(0,))(x, 2.0)\n"
        "assert np.allclose(j[0][0], np.diag(2 * np.cos(x))) and np.allclose(j[1][0], 0)\n"
        "assert np.allclose(autodiff.jacfwd(anp.exp)(x), np.diag(np.exp(x)))\n"
        # autograd's @primitive: its per-call arguments and keywords travel to custom_vjp
        # as one object of settings, a leaf that needs no optree
        "@autograd.primitive\n"
        "def soft(x, k, sharp=1.0):\n"
        "    return k * anp.logaddexp(0.0, sharp * x) / sharp\n"
        "autograd.defvjp(soft,\n"
        "                lambda ans, x, k, sharp=1.0: lambda g: g * k / (1 + np.exp(-sharp * x)))\n"
        "g = autograd.grad(lambda x: anp.sum(soft(x, 2) + soft(x, 3, sharp=4.0)))(x)\n"
        "want = 2 / (1 + np.exp(-x)) + 3 / (1 + np.exp(-4 * x))\n"
        "assert np.allclose(g, want), (g, want)\n"
        "assert 'optree' not in sys.modules, 'a plain program imported optree'\n"
        "assert 'autodiff.transforms.sparse_jacobians' not in sys.modules\n"
        "g = autodiff.grad(lambda p: anp.sum(p['w'] ** 2))({'w': x})\n"
        "assert np.allclose(g['w'], 2 * x) and 'optree' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", plain], check=True, timeout=60)


def test_an_object_no_registration_can_have_made_a_node_is_a_leaf(monkeypatch):
    """Without optree imported no class can be registered as a node (registering imports
    it), so an object that is none of optree's own nodes is a leaf, as optree would say;
    once optree is imported, optree decides (a registered class is a node)."""

    class Settings:
        def __init__(self, scale):
            self.scale = scale

    settings = Settings(2.0)
    leaves, tree = trees.flatten(settings)  # optree imported here: optree's answer
    assert leaves == [settings] and tree == optree.tree_structure(settings)
    with monkeypatch.context() as m:
        m.delitem(sys.modules, "optree")
        leaves, tree = trees.flatten((np.ones(2), settings))
        assert leaves[1] is settings and isinstance(tree, trees.Flat)
        for node in ({"a": 1.0}, collections.deque([1.0]), Point(1.0, 2.0), None):
            assert not isinstance(trees.flatten(node)[1], trees.Flat)  # optree's own nodes
    assert tree == optree.tree_structure((np.ones(2), settings))

    everywhere = optree.registry.__GLOBAL_NAMESPACE  # (where autodiff's trees look)
    optree.register_pytree_node(
        Settings, lambda s: ((s.scale,), None, None), lambda _, c: Settings(*c),
        namespace=everywhere,
    )  # fmt: skip
    try:
        leaves, tree = trees.flatten((np.ones(2), settings))
        assert leaves[1] == 2.0 and not isinstance(tree, trees.Flat)
    finally:
        optree.unregister_pytree_node(Settings, namespace=everywhere)


def test_leaf_paths_of_plain_values_in_tuples_are_optrees():
    # args.leaf_paths names leaves in errors; plain values in tuples and lists are named
    # without optree, as optree names them (the dict sends the whole tuple to optree).
    from autodiff.core.args import leaf_paths

    plain = (1.0, (np.ones(2), [3.0, np.float32(4.0)]))
    want = ["argument 0", "argument 1[0]", "argument 1[1][0]", "argument 1[1][1]"]
    assert leaf_paths(plain) == want
    assert leaf_paths(plain, (2, 5)) == [w.replace("t 0", "t 2").replace("t 1", "t 5")
                                         for w in want]  # fmt: skip
    assert leaf_paths(({"a": 1.0}, *plain[1:])) == ["argument 0['a']", *want[1:]]
