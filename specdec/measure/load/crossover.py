"""Where speculation stops paying as load grows: the one rule `specdec load` (client counts, request rates) and
`specdec batch` (batch sizes B) both decide by, and the interval of the crossing itself.

- `verdict`: a level *pays* when its speedup's re-run interval lies above 1 and above its A/A's interval (what
  the machine's noise alone gives there), *costs* when it lies below both, else it is *not distinguishable*.
  Below `stats.MIN_INTERVAL` pairs a re-run interval is the pairs' range widened by √2, which has no stated
  confidence, so such a level gets no verdict: *too few pairs*.
- `find`: along the levels in increasing load, those without a verdict skipped (they say nothing either way):
  *no level judged*; *pays at every level tried*; *never pays here*; *pays from a level on* (every level from
  the lowest paying one up pays, the ones below it do not); else the *crossover*: the lowest level that does not
  pay after one that did, whatever pays above it.
- `crossing`: the load where a speedup curve first falls to 1, past the first paying level, interpolated
  linearly in the speedup against log(load).
- `crossing_interval`: the 95 % re-run interval of that crossing (the interval an independent sweep's crossing
  falls in, as every interval in specdec is), from a bootstrap over each level's visits that recomputes the
  crossing each time (see its docstring).
"""

from __future__ import annotations

import math

import numpy as np

from specdec.measure.stats import MIN_INTERVAL, _block_indices, _block_length, ratio_of_totals, RESAMPLES

PAYS, COSTS, NOT_DISTINGUISHABLE, TOO_FEW = "pays", "costs", "not distinguishable", "too few pairs"
JUDGED = (PAYS, COSTS, NOT_DISTINGUISHABLE)  # the verdicts `find` reads; TOO_FEW is no verdict
ANSWERS = ("no level judged", "pays at every level tried", "never pays here", "pays from a level on", "crossover")


def verdict(speedup: dict | None, aa: dict | None) -> str:
    """speedup, aa: {"ci_low", "ci_high", "n"} (aa None: judged against 1 alone). See the module docstring."""
    if speedup is None or speedup["n"] < MIN_INTERVAL:
        return TOO_FEW
    aa_lo, aa_hi = (aa["ci_low"], aa["ci_high"]) if aa else (1.0, 1.0)
    if speedup["ci_low"] > max(1.0, aa_hi):
        return PAYS
    if speedup["ci_high"] < min(1.0, aa_lo):
        return COSTS
    return NOT_DISTINGUISHABLE


def find(verdicts: list[str]) -> dict:
    """verdicts: one per level, in increasing load. Returns {"answer" (one of ANSWERS), "first_paid" (index of
    the lowest paying level, or None), "stop" (index of the crossover level, or None), "before" (index of the
    paying level judged just below it, or None)}."""
    judged = [i for i, v in enumerate(verdicts) if v in JUDGED]
    out = {"answer": "crossover", "first_paid": None, "stop": None, "before": None}
    paid = [i for i in judged if verdicts[i] == PAYS]
    if not judged:
        return {**out, "answer": "no level judged"}
    if not paid:
        return {**out, "answer": "never pays here"}
    first = paid[0]
    out["first_paid"] = first
    if len(paid) == len(judged):
        return {**out, "answer": "pays at every level tried"}
    stops = [i for i in judged if i > first and verdicts[i] != PAYS]
    if not stops:  # every judged level from the first paying one up pays; some below it did not
        return {**out, "answer": "pays from a level on"}
    stop = stops[0]
    return {**out, "stop": stop, "before": max(i for i in judged if i < stop)}


def crossings(loads, curves) -> np.ndarray:
    """loads: (L,) in increasing order; curves: (..., L) speedups at them. Per curve, the load where it first
    falls to 1 or below, linear in the speedup against log(load) between levels: loads[0] where it starts there,
    +inf where it never does (beyond the levels tried)."""
    x = np.log(np.asarray(loads, dtype=float))
    y = np.asarray(curves, dtype=float) - 1.0
    below = y <= 0
    j = below.argmax(axis=-1)[..., None]
    i = np.maximum(j - 1, 0)
    y0, y1 = np.take_along_axis(y, i, -1)[..., 0], np.take_along_axis(y, j, -1)[..., 0]
    x0, x1 = x[i[..., 0]], x[j[..., 0]]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(y0 != y1, y0 / (y0 - y1), 1.0)
    at = np.where(j[..., 0] == 0, x[0], x0 + (x1 - x0) * frac)
    return np.where(below.any(axis=-1), np.exp(at), np.inf)


def crossing(loads, curve) -> float | None:
    """The load where one speedup curve first falls to 1 (`crossings`); None where it never does."""
    c = float(crossings(loads, curve))
    return c if math.isfinite(c) else None


def crossing_interval(loads, pairs, confidence: float = 0.95, seed: int = 0,
                      resamples: int = RESAMPLES) -> tuple[float | None, float | None]:
    """The re-run interval of the crossing of the ratio-of-totals curve over `loads`.

    pairs: per load, its visits' paired times in the order measured, (n, 2): the numerator (spec-off) and the
    denominator (spec-on) whose ratio of totals is that level's speedup (`stats.ratio_of_totals`).

    Each resample draws every level's visits twice, independently, by the moving-block bootstrap of
    `stats.rerun_interval` (a visit is the unit: its requests share one stretch of the machine's state and one
    queue, so they are not independent of each other), and moves each level's speedup by the ratio of the two
    draws' speedups: on the log scale that is the difference of two bootstrap errors, the spread of a re-run's
    figure about ours (√2 times our own error, as `rerun_interval`'s √2), scaled by t/z as its Student t widens
    a few blocks' rough spread. The crossing of every such curve is recomputed (`crossings`); the interval is
    their (1 − confidence)/2 and (1 + confidence)/2 order statistics. A bound is None where that many resampled
    curves stay above 1 through the levels tried (beyond them); the lower one is loads[0] where they start at or
    below 1 (at or below the first level given). Seeded: the same input gives the same interval.
    """
    from scipy import stats as sstats  # imported where used: `import specdec` stays quick

    rng = np.random.default_rng(seed)
    z = float(sstats.norm.ppf(0.5 + confidence / 2))
    moved = []
    for p in pairs:
        p = np.asarray(p, dtype=float).reshape(-1, 2)
        n = len(p)
        t = float(sstats.t.ppf(0.5 + confidence / 2, df=max(1.0, n / _block_length(n) - 1)))
        one, two = (ratio_of_totals(p[idx, 0], p[idx, 1]) for idx in
                    (_block_indices(n, rng, resamples), _block_indices(n, rng, resamples)))
        e = float(ratio_of_totals(p[:, 0], p[:, 1]))
        moved.append(e * np.exp(t / z * (np.log(one) - np.log(two))))
    x = np.sort(crossings(loads, np.stack(moved, axis=-1)))
    tail = (1 - confidence) / 2
    lo, hi = x[int(math.floor(tail * resamples))], x[int(math.ceil((1 - tail) * resamples)) - 1]
    return (float(lo) if math.isfinite(lo) else None), (float(hi) if math.isfinite(hi) else None)
