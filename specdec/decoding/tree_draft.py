"""Drafting a token tree of a `TreeSpec`'s shape with a table draft.

Drafting (`draft_tree`, table drafts only: their `_dist(context)` gives q at any node): a node's children are
sampled WITHOUT replacement from its q by Gumbel-top-k -- the top-k of log q + Gumbel noise come out in the
order sequential sampling without replacement would draw them (Plackett-Luce), so the i-th child is a draw
from q with the first i-1 removed and renormalised.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from specdec.model import sampling
from specdec.decoding.trees import Tree, TreeSpec, _shape


def draft_tree(spec: TreeSpec, draft, context: list[int], rng: np.random.Generator, temperature: float) -> Tree:
    """Draft a tree of `spec`'s shape after `context` with a table draft (one q per inner node).

    Where q has fewer nonzero characters than a node's width (greedy: exactly one) the node gets fewer
    children, and the missing nodes' subtrees are dropped.

    Level by level: the level's q rows in one array, its Gumbel noise drawn in one call (node-by-node
    Gumbel-top-k, tests/oracles.py `draft_tree_reference`, draws the same numbers in the same order), one log,
    one sort; while every node gets all its children (the usual case above temperature 0) the tree's nodes are
    the spec's own, so a level's tokens come out in one indexing and only inner nodes get a context. The same
    tokens, q and order, bitwise.
    """
    shape, hist = _shape(spec.parents), draft.history
    rows = _q_rows(draft, temperature)
    ctx_of = {-1: list(context[-hist:])}  # context tail of each inner node
    if not shape.levels or not shape.canonical:  # nodes not grouped by parent: the tree numbers them otherwise
        return _grow(Tree([], [], [], [[]], [None]), shape.children, [(-1, -1, ctx_of[-1])] if shape.n else [],
                     rng, rows, hist)
    tokens, qs = [0] * shape.n, [None] * (shape.n + 1)
    for lv in shape.levels:
        q = rows([ctx_of[a] for a in lv.inner])
        order = _gumbel_order(q, rng)
        full = lv.most <= q.shape[1] and np.count_nonzero(q) == q.size  # the cheap test first
        if not full and (np.count_nonzero(q, axis=1) < lv.widths).any():
            # a node gets fewer children than the spec's: node by node from here (nodes so far are the spec's)
            n = lv.start
            tree = Tree(tokens[:n], list(spec.parents[:n]), list(shape.depth_list[:n]),
                        [[c for c in kids if c < n] for kids in shape.children[: n + 1]], qs[: n + 1])
            return _grow(tree, shape.children, [(a, a, ctx_of[a]) for a in lv.inner], rng, rows, hist, (q, order))
        tokens[lv.start : lv.stop] = order[lv.kid_row, lv.kid_rank].tolist()
        for a, row in zip(lv.inner, q):
            qs[a + 1] = row
        for a in lv.next_inner:
            ctx_of[a] = (ctx_of[spec.parents[a]] + [tokens[a]])[-hist:]
    return Tree(tokens, list(spec.parents), list(shape.depth_list), [list(c) for c in shape.children], qs)


def _q_rows(draft, temperature: float) -> Callable[[list[list[int]]], np.ndarray]:
    """contexts -> their q rows (m, V), tempered: the draft's kept tempered rows where it has them
    (`TableDraft.tempered`), else `sampling.temper` of `_dist`."""
    tempered = getattr(draft, "tempered", None)

    def rows(contexts: list[list[int]]) -> np.ndarray:
        dists = [tempered(c, temperature)[0] if tempered else sampling.temper(draft._dist(c), temperature)
                 for c in contexts]
        q = np.empty((len(dists), len(dists[0])), dtype=dists[0].dtype)
        for i, d in enumerate(dists):
            q[i] = d
        return q

    return rows


def _gumbel_order(q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each row's indices by decreasing log q + Gumbel noise (m, V), the noise for all rows in one draw:
    Gumbel-top-k keys (tests/oracles.py `top_k`), row by row (indices with q = 0 sort last, at -inf)."""
    if np.count_nonzero(q) == q.size:
        keys = np.log(q)
    else:
        with np.errstate(divide="ignore"):
            keys = np.log(q)
    keys += rng.gumbel(size=q.shape)
    return (-keys).argsort(axis=1)


def _grow(tree: Tree, want: list[list[int]], level: list[tuple[int, int, list[int]]], rng: np.random.Generator,
          rows: Callable, hist: int, first: tuple[np.ndarray, np.ndarray] | None = None) -> Tree:
    """`draft_tree` node by node from `level` ((spec node, tree node, context tail) of the nodes whose children
    come next; `first`: their rows and order if already drawn), where nodes may get fewer children than the
    spec's and the tree numbers its nodes as it adds them."""
    while level:
        if first is None:
            q = rows([c for _, _, c in level])
            order = _gumbel_order(q, rng)
        else:
            (q, order), first = first, None
        nnz, nxt = np.count_nonzero(q, axis=1).tolist(), []
        for i, (s, t, c) in enumerate(level):
            tree.q[t + 1] = q[i]
            kids = want[s + 1]
            for s_child, x in zip(kids, order[i, : min(len(kids), nnz[i])].tolist()):
                j = len(tree.tokens)
                tree.tokens.append(x)
                tree.parents.append(t)
                tree.depths.append(0 if t < 0 else tree.depths[t] + 1)
                tree.children.append([])
                tree.q.append(None)
                tree.children[t + 1].append(j)
                if want[s_child + 1]:
                    nxt.append((s_child, j, (c + [x])[-hist:]))
        level = nxt
    return tree
