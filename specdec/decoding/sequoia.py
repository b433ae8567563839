"""Sequoia's dynamic program: the tree shape of a node budget with the most expected characters per pass."""

from __future__ import annotations

from specdec.decoding.trees import TreeSpec


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
