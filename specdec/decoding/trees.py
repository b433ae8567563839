"""Token trees: several distinct candidates per position, verified in one target pass, still exact.

A `TreeSpec` is a shape: node i's parent (-1 for the context's last token, "the root"), nodes in breadth-first
order, siblings in the order the rule tries them. A fixed width × depth shape ("4x2x2x1": 4 children of the
root, 2 under each of those, ...) or one chosen by Sequoia's dynamic program from a measured per-child
acceptance vector and a node budget.

A `Tree` is one drafted tree of that shape. Drafting it is `tree_draft`, walking it with the exact rule
`tree_walk`, Sequoia's search for the best shape `sequoia`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import torch


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
