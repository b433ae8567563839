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

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from specdec.model import corpus, sampling
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
        out: list[int] = []
        for a in self.parents:
            out.append(0 if a < 0 else out[a] + 1)
        return tuple(out)

    @property
    def depth(self) -> int:
        """Levels of nodes: the most characters one round can accept."""
        return max(self.depths) + 1 if self.parents else 0

    def limit(self, max_nodes: int, max_depth: int) -> TreeSpec:
        """The breadth-first prefix with at most max_nodes nodes, none deeper than max_depth levels."""
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


def _top_k(q: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """k distinct indices in the order sequential sampling without replacement from q draws them.

    Gumbel-top-k: argsort of log q + Gumbel noise (V,); indices with q = 0 never come out.
    """
    with np.errstate(divide="ignore"):
        keys = np.log(q) + rng.gumbel(size=q.shape)
    order = np.argsort(-keys)[: min(k, int(np.count_nonzero(q)))]
    return order.tolist()


def draft_tree(spec: TreeSpec, draft, context: list[int], rng: np.random.Generator, temperature: float) -> Tree:
    """Draft a tree of `spec`'s shape after `context` with a table draft (one `_dist` per inner node).

    Where q has fewer nonzero characters than a node's width (greedy: exactly one) the node gets fewer
    children, and the missing nodes' subtrees are dropped.
    """
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


def accept_tree(tree: Tree, p: np.ndarray, rng: np.random.Generator) -> tuple[list[int], int]:
    """Walk the tree with the exact rule. p: (N + 1, V). Returns (accepted path's node ids, next character)."""
    # min(1, p/q) without dividing: accept outright when p >= q, else with probability p/q.
    return _walk(tree, p, lambda px, qx: px >= qx or rng.random() * qx < px, lambda d: sampling.sample(d, rng))


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
