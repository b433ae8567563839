"""Reference implementations, kept as the tests' oracles: each is the first, plain form of code the package
runs in a leaner form, and the tests hold the lean form to it (the same outputs, bitwise, from the same draws).

- `propose_reference`: a table draft's `propose`, one `sampling.sample` per character.
- `accept_reject_lean`: `rule.accept_reject` as array operations over all k positions, the unneeded draws
  given back by moving the PCG64 stream back (`_rewind`).
- `draft_tree_reference`, `top_k`: `tree_draft.draft_tree` one node at a time, Gumbel-top-k per node.
- `walk`, `accept_tree_reference`: `tree_walk.accept_tree` with its random decisions passed in (the exactness
  tests enumerate them), `remove` the reduced q after a rejection.
- `round_weight`: a weight rounded to int8 / int4 levels in its own dtype, what `quantize.unpack(pack(w))` holds.
- `tree_logits_reference`: the tree pass through the target's forward with the mask as tensors
  (`Tree.attention`), where generation binds cached arrays (`rounds._tree_logits_lean`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from specdec.decoding import rule, trees
from specdec.model import corpus, quantize, sampling
from specdec.model.sampling import pick


def propose_reference(draft, tokens, k, rng, temperature):
    """`propose` as first written: per character, the row looked up, tempered, and sampled with its own draw
    (the attribution's old round)."""
    ctx = list(tokens[-draft.history :])
    out = []
    qs = np.empty((k, draft.vocab_size or len(corpus.vocabulary())))
    for i in range(k):
        q = sampling.temper(draft._dist(ctx), temperature)
        x = sampling.sample(q, rng)
        qs[i] = q
        out.append(x)
        ctx.append(x)
    return out, qs


# Generators whose stream can be moved back: PCG64 (numpy's default) and its DXSM variant advance modulo 2**128,
# and a double (`random()`) takes exactly one 64-bit step of the stream (tests/decoding/test_lean_chain.py checks both).
_REWINDABLE = (np.random.PCG64, np.random.PCG64DXSM)
_PERIOD = 2**128


def accept_reject_lean(
    p: np.ndarray, q: np.ndarray, drafted, rng: np.random.Generator
) -> tuple[int, int]:
    """`accept_reject` in array operations over all k positions, with the same draws.

    The loop draws a uniform only at positions where p(x) < q(x), up to the first rejection, then one for the
    sample after. Here all m such draws plus that one come as one block (`rng.random(m + 1)` is the same
    stream as m + 1 calls), the first rejection is found in the block, and the draws it did not need are
    given back by moving the stream back. Inputs this cannot reproduce bitwise -- a generator that cannot move
    back, or p, q not float64 (a float32 scalar times a Python float stays float32 in the loop) -- take the loop.
    """
    k = len(drafted)
    if (type(getattr(rng, "bit_generator", None)) not in _REWINDABLE or p.dtype != np.float64
            or (k and q.dtype != np.float64)):
        return rule.accept_reject(p, q, drafted, rng)
    if k == 0:
        return 0, pick(p[0], rng.random())
    V = p.shape[1]
    at = np.arange(0, k * V, V) + drafted  # flat indices of (i, drafted[i]): `take` is cheaper than p[rows, ids]
    px, qx = p.take(at), q.take(at)
    drawn = (px >= qx).__invert__().nonzero()[0]  # where the loop draws (p < q; NaN draws there too)
    m = len(drawn)
    u = rng.random(m + 1)
    # the loop accepts when u * q < p; `not` of that rather than >= so that a NaN rejects as it does there
    if m == 0:
        return k, pick(p[k], u[0])
    accepted = u[:m] * qx[drawn] < px[drawn]
    r = int(accepted.argmin())  # the loop stops at its first rejection: it used draws 0..r, then one more
    if accepted[r]:
        return k, pick(p[k], u[m])
    unused = m - r - 1
    if unused:
        _rewind(rng.bit_generator, unused)
    i = int(drawn[r])
    return i, pick(rule.residual(p[i], q[i]), u[r + 1])


def _rewind(bg: np.random.BitGenerator, n: int) -> None:
    """Move a PCG64 stream back by n 64-bit steps. `advance` also drops the half of a 64-bit draw that a 32-bit
    integer draw leaves buffered; it is put back, so the state is exactly the loop's (the generation loop
    draws doubles only, but the rule's caller may not)."""
    before = bg.state
    bg.advance(_PERIOD - n)
    if before["has_uint32"]:
        after = bg.state
        after["has_uint32"], after["uinteger"] = before["has_uint32"], before["uinteger"]
        bg.state = after


def top_k(q: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    """k distinct indices in the order sequential sampling without replacement from q draws them.

    Gumbel-top-k: argsort of log q + Gumbel noise (V,); indices with q = 0 never come out.
    """
    with np.errstate(divide="ignore"):
        keys = np.log(q) + rng.gumbel(size=q.shape)
    order = np.argsort(-keys)[: min(k, int(np.count_nonzero(q)))]
    return order.tolist()


def draft_tree_reference(spec: trees.TreeSpec, draft, context: list[int], rng: np.random.Generator,
                         temperature: float) -> trees.Tree:
    """`draft_tree` as first written, one node at a time (the attribution's old round)."""
    want: list[list[int]] = [[] for _ in range(spec.budget + 1)]  # spec children per root/node
    for i, a in enumerate(spec.parents):
        want[a + 1].append(i)
    tree = trees.Tree([], [], [], [[]], [None])
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
            for s_child, x in zip(want[s + 1], top_k(q, len(want[s + 1]), rng)):
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


def remove(q: np.ndarray, x: int) -> np.ndarray:
    """q without x, renormalised: the law of the next distinct draw. All-zero when nothing is left."""
    q = q.copy()
    q[x] = 0.0
    s = q.sum()
    return q / s if s > 0 else q


def walk(tree: trees.Tree, p: np.ndarray, accept: Callable[[float, float], bool],
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
            q = remove(q, x)
        else:  # every child rejected (or a leaf): what is left of p
            return path, pick(pn)


def accept_tree_reference(tree: trees.Tree, p: np.ndarray, rng: np.random.Generator) -> tuple[list[int], int]:
    """`accept_tree` as first written: `_walk` with the random decisions as closures (the attribution's old
    round; the exactness tests enumerate `_walk`'s branches)."""
    # min(1, p/q) without dividing: accept outright when p >= q, else with probability p/q.
    return walk(tree, p, lambda px, qx: px >= qx or rng.random() * qx < px, lambda d: sampling.sample(d, rng))


def tree_logits_reference(target, ids: list[int], pos: int, t: trees.Tree, n_pend: int):
    """The tree pass's logits at the last pending token and every node, (1 + N, V), through `forward`."""
    return target(target.ids(ids), pos, t.attention(pos, n_pend, target.device))[0, n_pend - 1 :]


def round_weight(w, bits: int, group: int | None = None):
    """w (out, in) rounded to `bits`-bit symmetric levels, returned in w's dtype (the reference arithmetic).

    group=None: one scale per output row. group=g: one scale per g consecutive inputs of a row.
    """
    q, scale = quantize._levels(w, bits, group)
    return quantize._dequantize(q, scale).to(w.dtype)
