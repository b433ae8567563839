"""Walking a drafted token tree with the exact rule.

The rule (`accept_tree`, recursive rejection sampling without replacement; SpecInfer, Chen et al.'s RSD):
at a node with target p and draft q, try the children in order; accept child x with min(1, p(x)/q(x)); on a
rejection p <- normalise(max(p - q, 0)) and q <- q without x, renormalised; if every child is rejected, sample
from what is left of p. An accepted child becomes the node and the walk repeats; at a leaf the bonus character
comes from the target's distribution there. Each try is the chain rule applied to "the next distinct draw",
whose law given the earlier rejections is exactly the updated q, so the emitted character has law p.
"""

from __future__ import annotations

import numpy as np

from specdec.model import sampling
from specdec.decoding.trees import Tree


def _remove_in_place(q: np.ndarray, x: int) -> np.ndarray:
    """q without x, renormalised, written into q (which the caller owns): the law of the next distinct draw."""
    q[x] = 0.0
    s = q.sum()
    if s > 0:
        q /= s
    return q


def accept_tree(tree: Tree, p: np.ndarray, rng: np.random.Generator) -> tuple[list[int], int]:
    """Walk the tree with the exact rule. p: (N + 1, V) target distributions at the root and after every node.
    Returns (accepted node ids from the root down, the character emitted after them).

    Per child tried: accept outright when p(x) >= q(x), else with one uniform, probability p(x)/q(x); on a
    rejection p becomes the residual and x leaves q; when every child is rejected (or at a leaf) the character is
    drawn from what is left of p (tests/oracles.py `walk`: this rule with its decisions passed in).

    Per rejection the residual and the reduced q are computed with fewer new arrays (q copied once per node,
    never the draft's own row, then `_remove_in_place`): `rule.residual` and tests/oracles.py `remove` give
    exactly these values. A block of uniforms drawn up front and the unused ones rewound
    (`bit_generator.advance`) cost more than the few scalar draws a walk makes, so draws stay one at a time.
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
