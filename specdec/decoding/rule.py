"""The speculative accept/reject rule.

The rule (Leviathan et al. 2023; Chen et al. 2023): a drafted x with draft probability q(x) and target
probability p(x) is accepted with probability min(1, p(x)/q(x)); at the first rejection the replacement is
drawn from max(0, p - q) normalised and the remaining drafts are discarded; when all k are accepted a bonus
character is drawn from the target's (k+1)-th distribution. Accepted-or-replaced together give exactly p.

Like `model.sampling`, it works on small numpy vectors: the rule runs once per round, so its cost is part of
what the generation loop pays, and its randomness comes from the caller's generator.

Two implementations of the same rule: `accept_reject`, the loop over positions as the rule reads,
which the generation loop runs, and `accept_reject_lean`, array operations over all k positions that consume
the generator's stream exactly as the loop does (the same characters, the same generator state after). At this
size the loop is the cheaper one: it stops at the first rejection and reads a few scalars, where the array
form pays a dozen numpy calls and a rewind of the stream whatever k is (measured on the shipped pair, k = 2..16:
~5 us against ~10 us per round), so nothing in the package runs the array form: it is kept, held equal to the
loop by tests/test_lean_chain.py, for vocabularies and k where its fixed cost would pay.
"""

from __future__ import annotations

import numpy as np

from specdec.model.sampling import pick, sample

# Generators whose stream can be moved back: PCG64 (numpy's default) and its DXSM variant advance modulo 2**128,
# and a double (`random()`) takes exactly one 64-bit step of the stream (tests/test_lean_chain.py checks both).
_REWINDABLE = (np.random.PCG64, np.random.PCG64DXSM)
_PERIOD = 2**128


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """max(0, p - q) normalised: what p wants beyond what q supplied.

    When p and q (nearly) coincide the residual underflows to zero mass; a rejection then has probability
    ~0 anyway, and p itself is returned instead of dividing by zero (no NaN can reach the sampler).
    """
    r = np.maximum(p - q, 0.0)
    s = r.sum()
    if not s > 1e-12:
        return p / p.sum()
    return r / s


def accept_reject(
    p: np.ndarray, q: np.ndarray, drafted, rng: np.random.Generator
) -> tuple[int, int]:
    """Run the rule over one round. Returns (accepted drafts, the character emitted after them).

    p: (k+1, V) target distributions at the k drafted positions and the bonus position.
    q: (k, V) the draft distributions the drafts were sampled from.  drafted: k character ids.
    One uniform per position where p < q, up to the first rejection, then one for the residual or bonus sample.
    """
    k = len(drafted)
    for i in range(k):
        x = drafted[i]
        px, qx = p[i, x], q[i, x]
        # min(1, p/q) without dividing: accept outright when p >= q, else with probability p/q.
        if px >= qx or rng.random() * qx < px:
            continue
        return i, sample(residual(p[i], q[i]), rng)
    return k, sample(p[k], rng)


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
        return accept_reject(p, q, drafted, rng)
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
    return i, pick(residual(p[i], q[i]), u[r + 1])


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

