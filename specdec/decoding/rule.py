"""The speculative accept/reject rule.

The rule (Leviathan et al. 2023; Chen et al. 2023): a drafted x with draft probability q(x) and target
probability p(x) is accepted with probability min(1, p(x)/q(x)); at the first rejection the replacement is
drawn from max(0, p - q) normalised and the remaining drafts are discarded; when all k are accepted a bonus
character is drawn from the target's (k+1)-th distribution. Accepted-or-replaced together give exactly p.

Like `model.sampling`, it works on small numpy vectors: the rule runs once per round, so its cost is part of
what the generation loop pays, and its randomness comes from the caller's generator.

`accept_reject` is the loop over positions as the rule reads: it stops at the first rejection and reads a
few scalars, which at this size is cheaper than array operations over all k positions (tests/oracles.py keeps
that array form, with the same draws, as a check of the loop).
"""

from __future__ import annotations

import numpy as np

from specdec.model.sampling import sample



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
