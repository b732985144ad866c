"""Colourings of sparsity patterns, for compressed Jacobians and Hessians.

Columns of a Jacobian that share no row (*structurally orthogonal*) can be pushed
forward by one JVP: seed them together and each row's value comes back unmixed.  A
colouring groups the columns so (``column_coloring``: a distance-2 colouring of the
columns' bipartite graph); rows likewise for reverse mode (``row_coloring``).  For a
symmetric Hessian a *star colouring* (``star_coloring``: a proper colouring in which
every path on four vertices uses at least three colours) needs fewer colours and still
recovers every entry directly (``star_recovery``).

The colourings are greedy, in a few vertex orders (natural, largest degree first, and
for columns DSATUR's: the vertex with the most distinct colours among its neighbours
next), keeping the best: optimal on the stencils of discretised PDEs (5 for the 5-point
Laplacian, 3 for a tridiagonal matrix).  They are
written here, short, in Python over NumPy index arrays, because no well-kept library fits
the dependencies (NumPy, plum-dispatch, optree; SciPy optional): SciPy has no public
graph colouring (``scipy.optimize._numdiff.group_columns`` is private), networkx colours
distance-1 only and is not a runtime dependency, ColPack has no maintained Python
package.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Sequence

import numpy as np

from autodiff.core.index_sets import IndexSets, cross_pairs

__all__ = [
    "column_coloring",
    "diagonal_coloring",
    "row_coloring",
    "star_coloring",
    "star_recovery",
]


def _adjacency(rows: IndexSets, n: int) -> list[list[int]]:
    """For each of ``n`` columns, the other columns sharing a row with it."""
    a, b = cross_pairs(rows, rows)
    keep = a != b
    adj = IndexSets.from_pairs(a[keep], b[keep], n)
    indices = adj.indices.tolist()
    bounds = adj.indptr.tolist()
    return [indices[bounds[k] : bounds[k + 1]] for k in range(n)]


def _orders(adj: list[list[int]]) -> list[Sequence[int]]:
    """Vertex orders to try: natural, largest degree first, smallest degree last
    (computed when they are tried)."""
    degree = np.array([len(a) for a in adj], np.int64)
    return [range(len(adj)), _Lazy(lambda: np.argsort(-degree, kind="stable").tolist()),
            _Lazy(lambda: _smallest_last(adj, degree))]  # fmt: skip


class _Lazy(Sequence):
    """A sequence computed at its first use."""

    def __init__(self, make: Callable[[], list[int]]) -> None:
        self.make = make
        self.items: list[int] | None = None

    def _get(self) -> list[int]:
        items = self.items
        if items is None:
            items = self.items = self.make()
        return items

    def __getitem__(self, k):  # type: ignore[override]
        return self._get()[k]

    def __len__(self) -> int:
        return len(self._get())

    def __iter__(self):
        return iter(self._get())


def _smallest_last(adj: list[list[int]], degree: np.ndarray) -> list[int]:
    """Repeatedly remove a vertex of least remaining degree; colour in reverse."""
    deg = degree.tolist()
    buckets: dict[int, set[int]] = {}
    for v, d in enumerate(deg):
        buckets.setdefault(d, set()).add(v)
    removed = [False] * len(adj)
    order = []
    low = 0
    for _ in range(len(adj)):
        while not buckets.get(low):
            low += 1
        v = buckets[low].pop()
        removed[v] = True
        order.append(v)
        for u in adj[v]:
            if not removed[u]:
                buckets[deg[u]].discard(u)
                deg[u] -= 1
                buckets.setdefault(deg[u], set()).add(u)
                low = min(low, deg[u])
    return order[::-1]


def _greedy(adj: list[list[int]], order: Sequence[int]) -> list[int]:
    """Each vertex takes the least colour none of its neighbours has."""
    color = [-1] * len(adj)
    for v in order:
        used = {color[u] for u in adj[v]}
        c = 0
        while c in used:
            c += 1
        color[v] = c
    return color


def _dsatur(adj: list[list[int]]) -> list[int]:
    """Greedy in DSATUR's order: next, the uncoloured vertex whose neighbours have the
    most distinct colours (ties: the largest degree)."""
    n = len(adj)
    color = [-1] * n
    seen: list[set[int]] = [set() for _ in range(n)]
    heap = [(0, -len(adj[v]), v) for v in range(n)]
    heapq.heapify(heap)
    while heap:
        saturation, _, v = heapq.heappop(heap)
        if color[v] >= 0 or -saturation != len(seen[v]):
            continue  # coloured, or an outdated entry
        c = 0
        while c in seen[v]:
            c += 1
        color[v] = c
        for u in adj[v]:
            if color[u] < 0 and c not in seen[u]:
                seen[u].add(c)
                heapq.heappush(heap, (-len(seen[u]), -len(adj[u]), u))
    return color


def _best(adj: list[list[int]], colour: Callable, bound: int = 0,
          more: Callable | None = None) -> np.ndarray:  # fmt: skip
    """The colouring with fewest colours over the orders (and ``more(adj)``), stopping
    at one that reaches ``bound`` colours, a lower bound."""
    best: list[int] | None = None
    tries: list[Callable[[], list[int]]] = [
        functools.partial(colour, adj, order) for order in _orders(adj)
    ]
    if more is not None:
        tries.insert(1, functools.partial(more, adj))
    for attempt in tries:
        found = attempt()
        if best is None or max(found, default=-1) < max(best, default=-1):
            best = found
        if max(best, default=-1) + 1 <= bound:
            break
    return np.asarray(best, np.int64)


def column_coloring(pattern: IndexSets, n_cols: int) -> np.ndarray:
    """A colour per column such that no row has two columns of one colour (``pattern``:
    each row's columns).

    >>> rows = IndexSets.from_pairs(np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 1, 2, 2, 3]), 3)
    >>> column_coloring(rows, 4).tolist()
    [0, 1, 0, 1]
    """
    adj = _adjacency(pattern, n_cols)
    bound = int(pattern.lengths.max(initial=0))  # a row's columns all differ
    return _best(adj, _greedy, bound, _dsatur)


def diagonal_coloring(pattern: IndexSets) -> np.ndarray:
    """A colour per index of a symmetric pattern (``pattern``: each index's neighbours,
    itself allowed) such that no two neighbours share one: a proper (distance-1)
    colouring of its graph.  Seeded together, one colour's unit vectors give that
    colour's diagonal entries unmixed: a Hessian-vector product along their sum holds
    each (the diagonal), a second directional derivative along it is their sum (the
    trace), which is what ``hessian_diag`` and ``laplacian`` with ``method="sparse"`` use.

    >>> tridiagonal = IndexSets.from_pairs(np.array([0, 0, 1, 1, 1, 2, 2]),
    ...                                    np.array([0, 1, 0, 1, 2, 1, 2]), 3)
    >>> diagonal_coloring(tridiagonal).tolist()
    [0, 1, 0]
    """
    indices, bounds = pattern.indices.tolist(), pattern.indptr.tolist()
    adj = [[j for j in indices[bounds[k] : bounds[k + 1]] if j != k] for k in range(pattern.size)]
    return _best(adj, _greedy, 1 if pattern.size else 0, _dsatur)


def row_coloring(pattern: IndexSets, n_cols: int) -> np.ndarray:
    """A colour per row such that no column has two rows of one colour."""
    rows = pattern.row_of_each()
    columns = IndexSets.from_pairs(pattern.indices, rows, n_cols)
    return column_coloring(columns, pattern.size)


def _star(adj: list[list[int]], order: Sequence[int]) -> list[int]:
    """Greedy star colouring: a vertex avoids its neighbours' colours and every colour
    that would make a path on four vertices two-coloured."""
    color = [-1] * len(adj)
    for v in order:
        forbidden = set()
        coloured = [w for w in adj[v] if color[w] >= 0]
        for w in coloured:
            forbidden.add(color[w])
        by_color: dict[int, list[int]] = {}
        for w in coloured:
            by_color.setdefault(color[w], []).append(w)
            # v - w - x - y two-coloured if colour(v) = colour(x) and colour(w) = colour(y)
            for x in adj[w]:
                if x == v or color[x] < 0:
                    continue
                if any(y != w and y != v and color[y] == color[w] for y in adj[x]):
                    forbidden.add(color[x])
        # u - v - x - y with colour(u) = colour(x): v must not take colour(y)
        for same in by_color.values():
            if len(same) > 1:
                for x in same:
                    for y in adj[x]:
                        if y != v and color[y] >= 0:
                            forbidden.add(color[y])
        c = 0
        while c in forbidden:
            c += 1
        color[v] = c
    return color


def star_coloring(pattern: IndexSets) -> np.ndarray:
    """A star colouring of a symmetric pattern's graph (the diagonal ignored)."""
    n = pattern.size
    rows = pattern.row_of_each()
    keep = rows != pattern.indices
    adj_sets = IndexSets.from_pairs(rows[keep], pattern.indices[keep], n)
    indices, bounds = adj_sets.indices.tolist(), adj_sets.indptr.tolist()
    adj = [indices[bounds[k] : bounds[k + 1]] for k in range(n)]
    colors = _best(adj, _star, 2 if any(adj) else 1)
    if star_recovery(pattern, colors) is None:  # (a safety net: direct recovery must hold)
        colors = _best(_adjacency(pattern, n), _greedy)
    return colors


def star_recovery(pattern: IndexSets, colors: np.ndarray) -> np.ndarray | None:
    """For each entry ``(i, j)`` of a symmetric pattern, where its value is in the
    compressed Hessian ``B = H @ S`` (``S[k, c] = colors[k] == c``), as flat positions
    ``row * n_colors + colour``: ``(i, colour(j))`` when ``j`` is the only column of its
    colour in row ``i``, else ``(j, colour(i))``; None if neither holds for some entry."""
    n_colors = int(colors.max(initial=-1)) + 1
    rows = pattern.row_of_each()
    cols = pattern.indices
    key = rows * n_colors + colors[cols]
    count = np.bincount(key, minlength=pattern.size * n_colors)
    direct = count[key] == 1
    other = cols * n_colors + colors[rows]
    ok = direct | (count[np.minimum(other, len(count) - 1)] == 1)
    if not ok.all():
        return None
    return np.where(direct, key, other)
