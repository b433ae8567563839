"""Token trees: several distinct candidates per position, verified in one target pass, still exact.

A `TreeSpec` is a shape: node i's parent (-1 for the context's last token, "the root"), nodes in breadth-first
order, siblings in the order the rule tries them. A fixed width × depth shape ("4x2x2x1": 4 children of the
root, 2 under each of those, ...) or one chosen by Sequoia's dynamic program from a measured per-child
acceptance vector and a node budget.

Drafting (`draft_tree`, table drafts only: their `_dist(context)` gives q at any node): a node's children are
sampled WITHOUT replacement from its q by Gumbel-top-k -- the top-k of log q + Gumbel noise come out in the
order sequential sampling without replacement would draw them (Plackett-Luce), so the i-th child is a draw
from q with the first i-1 removed and renormalised.

The rule (`accept_tree`, recursive rejection sampling without replacement; SpecInfer, Chen et al.'s RSD):
at a node with target p and draft q, try the children in order; accept child x with min(1, p(x)/q(x)); on a
rejection p <- normalise(max(p - q, 0)) and q <- q without x, renormalised; if every child is rejected, sample
from what is left of p. An accepted child becomes the node and the walk repeats; at a leaf the bonus character
comes from the target's distribution there. Each try is the chain rule applied to "the next distinct draw",
whose law given the earlier rejections is exactly the updated q, so the emitted character has law p.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from specdec.model import sampling
from specdec.decoding import rule

MAX_NODES = 4096  # what TreeSpec builds at all; far past anything one verify pass can hold
MAX_TREE_NODES = 255  # what a user may ask for: one verify pass holds the last prefix token and the nodes in 256


def parse_tree(text: str) -> TreeSpec | int:
    """What a user types for a tree, everywhere (CLI, report): '4x2x2x1' (widths per depth) -> its TreeSpec;
    'budget 32' or '32' -> the node budget 32 (the shape then comes from `optimal_tree` on measured child
    acceptance). A ValueError naming the text and the allowed forms otherwise, or past MAX_TREE_NODES nodes."""
    t = str(text).strip().lower().removeprefix("budget").strip()
    if t.isdigit():
        if not 1 <= int(t) <= MAX_TREE_NODES:
            raise ValueError(f"a tree budget must be between 1 and {MAX_TREE_NODES} nodes, got {text!r}")
        return int(t)
    widths = t.split("x")
    if not all(w.isdigit() and int(w) >= 1 for w in widths):
        raise ValueError(f"bad tree shape {text!r}: give widths per depth like 4x2x2x1 (each >= 1) "
                         f"or a node budget like 32")
    spec = TreeSpec.from_widths(int(w) for w in widths)  # its own error past MAX_NODES names the count
    if spec.budget > MAX_TREE_NODES:
        raise ValueError(f"tree {text!r} has {spec.budget} nodes; at most {MAX_TREE_NODES} fit the context")
    return spec


@dataclass(frozen=True)
class TreeSpec:
    """A tree shape. parents[i]: node i's parent (-1 = the root); breadth-first, siblings in try order."""

    parents: tuple[int, ...]
    label: str = ""  # how it was asked for ("4x2x2x1", "budget 32"); informational

    def __post_init__(self):
        for i, a in enumerate(self.parents):
            if not -1 <= a < i:  # a parent comes before its children, so depth never decreases
                raise ValueError(f"tree node {i} has parent {a}; allowed: -1 <= parent < {i}")
        d = self.depths
        if any(d[i] < d[i - 1] for i in range(1, len(d))):
            raise ValueError("tree nodes must be in breadth-first order")

    @classmethod
    def from_widths(cls, widths) -> TreeSpec:
        """Every node at depth d has widths[d] children: (4, 2, 2, 1) has 4 + 8 + 16 + 16 = 44 nodes."""
        widths = tuple(int(w) for w in widths)
        if not widths or min(widths) < 1:
            raise ValueError(f"tree widths must be positive integers, got {widths}")
        nodes = int(np.cumprod(np.array(widths, dtype=float)).sum())
        if nodes > MAX_NODES:
            raise ValueError(f"tree {'x'.join(map(str, widths))} has {nodes} nodes; at most {MAX_NODES}")
        parents, level = [], [-1]
        for w in widths:
            nxt = []
            for a in level:
                for _ in range(w):
                    nxt.append(len(parents))
                    parents.append(a)
            level = nxt
        return cls(tuple(parents), "x".join(map(str, widths)))

    @classmethod
    def parse(cls, text: str) -> TreeSpec:
        """'4x2x2x1' (widths per depth); a budget needs an acceptance vector: see `optimal_tree`."""
        try:
            widths = [int(w) for w in str(text).lower().split("x")]
        except ValueError:
            widths = [0]
        if min(widths) < 1:
            raise ValueError(f"bad tree shape {text!r}: give widths per depth like 4x2x2x1 (each >= 1)")
        return cls.from_widths(widths)

    @property
    def budget(self) -> int:
        return len(self.parents)

    @property
    def depths(self) -> tuple[int, ...]:
        """Depth of each node; the root's children are at depth 0 (position = prefix length + depth)."""
        return _depths(self.parents)

    @property
    def depth(self) -> int:
        """Levels of nodes: the most characters one round can accept."""
        return max(self.depths) + 1 if self.parents else 0

    def limit(self, max_nodes: int, max_depth: int) -> TreeSpec:
        """The breadth-first prefix with at most max_nodes nodes, none deeper than max_depth levels (the spec
        itself when that is all of it: every round but the last few asks, and the shape caches stay hot)."""
        if max_nodes >= self.budget and max_depth >= self.depth:
            return self
        keep = [i for i, d in enumerate(self.depths) if d < max_depth][: max(max_nodes, 0)]
        return TreeSpec(self.parents[: len(keep)], self.label)

    def __str__(self) -> str:
        return self.label or f"{self.budget} nodes"


@dataclass
class Tree:
    """One drafted tree. Index 0 of `children`/`q` is the root; node j is index j + 1 there."""

    tokens: list[int]  # (N,) drafted character of each node
    parents: list[int]  # (N,) -1 for the root's children
    depths: list[int]  # (N,)
    children: list[list[int]]  # (N + 1,) node ids in try order
    q: list[np.ndarray | None]  # (N + 1,) the draft's q (V,) at each node that has children

    def attention(self, pos: int, n_pending: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(position ids (T,), mask (T, pos + T) bool) for a pass of n_pending prefix tokens then the nodes.

        T = n_pending + N. Prefix rows are causal; node rows see the whole prefix, their ancestors and
        themselves -- never a sibling's branch.
        """
        n = len(self.tokens)
        T = n_pending + n
        anc = np.zeros((n, n), dtype=bool)  # anc[i, j]: node j is node i or an ancestor of it
        for i, a in enumerate(self.parents):
            if a >= 0:
                anc[i] = anc[a]
            anc[i, i] = True
        mask = np.zeros((T, pos + T), dtype=bool)
        mask[:, : pos + n_pending] = np.tri(T, pos + n_pending, pos, dtype=bool)  # causal over the prefix
        mask[n_pending:, pos + n_pending :] = anc
        ids = np.concatenate([np.arange(pos, pos + n_pending), pos + n_pending + np.asarray(self.depths, int)])
        return torch.as_tensor(ids, device=device), torch.as_tensor(mask, device=device)

    def attention_lean(self, pos: int, n_pending: int, additive: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """`attention`'s (position ids (T,) int64, mask (T, pos + T)) as numpy, from what the tree's shape alone
        decides (built once per shape, `_shape`): mask bool, or with `additive` float32 0 where allowed and -inf
        elsewhere -- what the onnx tree graph binds. Columns before `pos` (the cache) are allowed for every row;
        only the last T depend on the shape."""
        rel, allowed, bias = _shape(tuple(self.parents)).block(n_pending)
        T = len(rel)
        mask = np.empty((T, pos + T), dtype=np.float32 if additive else bool)
        mask[:, :pos] = 0.0 if additive else True
        mask[:, pos:] = bias if additive else allowed
        return rel + pos, mask


@functools.lru_cache(maxsize=256)
def _depths(parents: tuple[int, ...]) -> tuple[int, ...]:
    """Each node's depth; kept per shape (`TreeSpec` asks for it at every construction, `limit` and `depth`)."""
    out: list[int] = []
    for a in parents:
        out.append(0 if a < 0 else out[a] + 1)
    return tuple(out)


class _Shape:
    """What a tree's shape (its parents) decides, built once with array operations: the children lists, and per
    number of pending tokens the positions relative to the pass and the mask's last T columns. A shape repeats
    every round -- the spec's own, trimmed only near the end of a generation -- so a round only reads these."""

    def __init__(self, parents: tuple[int, ...]):
        n = len(parents)
        par = np.asarray(parents, dtype=np.int64).reshape(n)
        self.n, self.depths = n, np.asarray(_depths(parents), dtype=np.int64).reshape(n)
        self.children: list[list[int]] = [[] for _ in range(n + 1)]  # index 0 the root, j + 1 node j
        for j, a in enumerate(parents):
            self.children[a + 1].append(j)
        # anc[i, j]: node j is node i or an ancestor of it -- one parent lookup per level for all nodes at once
        self.anc = np.eye(n, dtype=bool)
        rows, up = np.arange(n), par
        while (live := up >= 0).any():
            rows, up = rows[live], up[live]
            self.anc[rows, up] = True
            up = par[up]
        self._blocks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.depth_list = _depths(parents)
        # nodes grouped by parent in parent order: then a fully drafted tree numbers its nodes as the spec does
        self.canonical = bool(np.all(par[1:] >= par[:-1]))
        self.levels: list[_Level] = []
        for d in range(int(self.depths.max()) + 1 if n else 0):
            start, stop = np.searchsorted(self.depths, [d, d + 1]).tolist()
            inner, kid_row, widths = np.unique(par[start:stop], return_inverse=True, return_counts=True)
            first = start + np.cumsum(widths) - widths  # each inner node's first child
            self.levels.append(_Level(inner.tolist(), kid_row, np.arange(start, stop) - first[kid_row], start,
                                      stop, widths))
        for lv, below in zip(self.levels, self.levels[1:]):
            lv.next_inner = below.inner

    def block(self, n_pending: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions relative to pos (T,) int64, the mask over the pass's own T columns (T, T) bool, the same
        as 0/-inf float32) for n_pending prefix tokens then the nodes: `Tree.attention`'s layout."""
        hit = self._blocks.get(n_pending)
        if hit is None:
            T = n_pending + self.n
            allowed = np.zeros((T, T), dtype=bool)
            allowed[:n_pending, :n_pending] = np.tri(n_pending, dtype=bool)  # causal over the pending prefix
            allowed[n_pending:, :n_pending] = True  # every node sees the whole prefix
            allowed[n_pending:, n_pending:] = self.anc
            rel = np.concatenate([np.arange(n_pending, dtype=np.int64), n_pending + self.depths])
            hit = rel, allowed, np.where(allowed, np.float32(0.0), np.float32(-np.inf))
            self._blocks[n_pending] = hit
        return hit


@dataclass
class _Level:
    """Depth d of a shape: its nodes start..stop-1, the inner nodes above them (parents, ascending; -1 the
    root), each node's parent's index in `inner` and rank among its siblings, the children per inner node."""

    inner: list[int]
    kid_row: np.ndarray
    kid_rank: np.ndarray
    start: int
    stop: int
    widths: np.ndarray
    next_inner: list[int] = field(default_factory=list)  # nodes of this level that have children

    @property
    def most(self) -> int:
        """The widest inner node's children."""
        return int(self.widths.max())


@functools.lru_cache(maxsize=64)
def _shape(parents: tuple[int, ...]) -> _Shape:
    return _Shape(parents)


def _top_k(q: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """k distinct indices in the order sequential sampling without replacement from q draws them.

    Gumbel-top-k: argsort of log q + Gumbel noise (V,); indices with q = 0 never come out.
    """
    with np.errstate(divide="ignore"):
        keys = np.log(q) + rng.gumbel(size=q.shape)
    order = np.argsort(-keys)[: min(k, int(np.count_nonzero(q)))]
    return order.tolist()


def draft_tree(spec: TreeSpec, draft, context: list[int], rng: np.random.Generator, temperature: float,
               lean: bool = True) -> Tree:
    """Draft a tree of `spec`'s shape after `context` with a table draft (one q per inner node).

    Where q has fewer nonzero characters than a node's width (greedy: exactly one) the node gets fewer
    children, and the missing nodes' subtrees are dropped.

    Level by level: the level's q rows in one array, its Gumbel noise drawn in one call (the per-node calls of
    `draft_tree_reference` draw the same numbers in the same order), one log, one sort; while every node gets
    all its children (the usual case above temperature 0) the tree's nodes are the spec's own, so a level's
    tokens come out in one indexing and only inner nodes get a context. The same tokens, q and order, bitwise.
    lean=False runs `draft_tree_reference`.
    """
    if not lean:
        return draft_tree_reference(spec, draft, context, rng, temperature)
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
    `_top_k`'s keys, row by row (indices with q = 0 sort last, at -inf)."""
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


def draft_tree_reference(spec: TreeSpec, draft, context: list[int], rng: np.random.Generator, temperature: float) -> Tree:
    """`draft_tree` as first written, one node at a time (the attribution's old round)."""
    want: list[list[int]] = [[] for _ in range(spec.budget + 1)]  # spec children per root/node
    for i, a in enumerate(spec.parents):
        want[a + 1].append(i)
    tree = Tree([], [], [], [[]], [None])
    ctx = list(context[-draft.history :])
    # (spec node or -1 for the root, its tree node id or -1, the context tail that leads to it)
    stack = [(-1, -1, ctx)]
    frontier = []
    while stack:  # breadth-first: spec order already is, so process level by level
        for s, t, c in stack:
            if not want[s + 1]:
                continue
            q = sampling.temper(draft._dist(c), temperature)
            tree.q[t + 1] = q
            for s_child, x in zip(want[s + 1], _top_k(q, len(want[s + 1]), rng)):
                j = len(tree.tokens)
                tree.tokens.append(int(x))
                tree.parents.append(t)
                tree.depths.append(0 if t < 0 else tree.depths[t] + 1)
                tree.children.append([])
                tree.q.append(None)
                tree.children[t + 1].append(j)
                frontier.append((s_child, j, (c + [int(x)])[-draft.history :]))
        stack, frontier = frontier, []
    return tree


def _remove(q: np.ndarray, x: int) -> np.ndarray:
    """q without x, renormalised: the law of the next distinct draw. All-zero when nothing is left."""
    q = q.copy()
    q[x] = 0.0
    s = q.sum()
    return q / s if s > 0 else q


def _remove_in_place(q: np.ndarray, x: int) -> np.ndarray:
    """`_remove` writing into q (which the caller owns): the same values, no new array."""
    q[x] = 0.0
    s = q.sum()
    if s > 0:
        q /= s
    return q


def _walk(tree: Tree, p: np.ndarray, accept: Callable[[float, float], bool],
          pick: Callable[[np.ndarray], int]) -> tuple[list[int], int]:
    """The rule with its two random decisions passed in (the tests enumerate them).

    p: (N + 1, V) target distributions at the root and after every node. Returns (accepted node ids from the
    root down, the character emitted after them).
    """
    path: list[int] = []
    node = 0  # index into children / q / p: 0 the root, j + 1 node j
    while True:
        pn, q = p[node], tree.q[node]
        for j in tree.children[node]:
            x = tree.tokens[j]
            if accept(pn[x], q[x]):
                path.append(j)
                node = j + 1
                break
            pn = rule.residual(pn, q)
            q = _remove(q, x)
        else:  # every child rejected (or a leaf): what is left of p
            return path, pick(pn)


def accept_tree(tree: Tree, p: np.ndarray, rng: np.random.Generator, lean: bool = True) -> tuple[list[int], int]:
    """Walk the tree with the exact rule. p: (N + 1, V). Returns (accepted path's node ids, next character).

    lean (the default): `_walk_lean`, the same decisions from the same draws with fewer operations per try;
    False: `accept_tree_reference`, `_walk` itself.
    """
    return _walk_lean(tree, p, rng) if lean else accept_tree_reference(tree, p, rng)


def accept_tree_reference(tree: Tree, p: np.ndarray, rng: np.random.Generator) -> tuple[list[int], int]:
    """`accept_tree` as first written: `_walk` with the random decisions as closures (the attribution's old
    round; the exactness tests enumerate `_walk`'s branches)."""
    # min(1, p/q) without dividing: accept outright when p >= q, else with probability p/q.
    return _walk(tree, p, lambda px, qx: px >= qx or rng.random() * qx < px, lambda d: sampling.sample(d, rng))


def _walk_lean(tree: Tree, p: np.ndarray, rng: np.random.Generator) -> tuple[list[int], int]:
    """`_walk` with its decisions inlined: the same comparisons on the same values, one uniform per try with
    p(x) < q(x) and one for the final sample, in the same order -- so the same path, character and stream.

    Per rejection the residual and the reduced q are computed with fewer new arrays (q copied once per node,
    never the draft's own row, then `_remove_in_place`): `rule.residual` and `_remove` give exactly these values. A
    block of uniforms drawn up front and the unused ones rewound (`bit_generator.advance`) cost more than the
    few scalar draws a walk makes (measured: ~1.9 µs against ~1.4 µs for four), so draws stay one at a time.
    """
    random, tokens, children, qs = rng.random, tree.tokens, tree.children, tree.q
    path: list[int] = []
    node = 0  # index into children / q / p: 0 the root, j + 1 node j
    while True:
        pn, q, own = p[node], qs[node], False
        for j in children[node]:
            x = tokens[j]
            px, qx = pn[x], q[x]
            if px >= qx or random() * qx < px:
                path.append(j)
                node = j + 1
                break
            r = pn - q  # rule.residual: max(0, p - q) normalised, p itself when that has no mass
            np.maximum(r, 0.0, out=r)
            s = r.sum()
            if s > 1e-12:
                r /= s
                pn = r
            else:
                pn = pn / pn.sum()
            if not own:  # the draft's row is never written: one copy per node, then in place
                q, own = q.copy(), True
            q = _remove_in_place(q, x)
        else:  # every child rejected (or a leaf): what is left of p
            return path, sampling.pick(pn, random())


def optimal_tree(acceptance, budget: int) -> tuple[TreeSpec, float]:
    """Sequoia's dynamic program: the shape of `budget` nodes with the largest expected characters per pass.

    acceptance[i]: probability that the i-th child tried at a node is the accepted one (measured by
    `measure_child_acceptance`), assumed the same at every node. With f(n) the best value of a subtree of n
    nodes (its root counted 1), f(n) = 1 + max over children sizes n_0.. of Σ acceptance[i] · f(n_i);
    f(budget + 1) (the context as root) is the expected characters per pass: accepted + the bonus.
    """
    a = [float(x) for x in acceptance]
    if budget < 1:
        raise ValueError(f"tree budget must be at least 1 node, got {budget}")
    if not a:
        raise ValueError("the acceptance vector is empty")
    n_max, w = budget + 1, len(a)
    f = [0.0] * (n_max + 1)
    # g[i][r]: best Σ over children i.. with r nodes for their subtrees; choice[i][r]: subtree size of child i
    g = [[0.0] * (n_max + 1) for _ in range(w + 1)]
    choice = [[0] * (n_max + 1) for _ in range(w + 1)]
    for n in range(1, n_max + 1):
        f[n] = 1.0 + g[0][n - 1]
        r = n  # extend g to r = n for the next f (subtree sizes up to n are now known)
        for i in range(w - 1, -1, -1):
            best, arg = 0.0, 0
            for s in range(1, r + 1):
                v = a[i] * f[s] + g[i + 1][r - s]
                if v > best + 1e-15:
                    best, arg = v, s
            g[i][r], choice[i][r] = best, arg

    def sizes(n: int) -> list[int]:  # children subtree sizes of a subtree of n nodes
        out, r, i = [], n - 1, 0
        while i < w and r > 0 and choice[i][r]:
            out.append(choice[i][r])
            r -= choice[i][r]
            i += 1
        return out

    parents, level = [], [(-1, n_max)]
    while level:
        nxt = []
        for node, n in level:
            for s in sizes(n):
                nxt.append((len(parents), s))
                parents.append(node)
        level = nxt
    return TreeSpec(tuple(parents), f"budget {budget}"), f[n_max]
