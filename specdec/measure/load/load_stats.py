"""What a load sweep's requests say: latency percentiles with intervals, throughput and goodput per arm, the
paired speedup per level with its A/A, and the crossover where speculation stops paying.

Every interval is `stats.rerun_interval`'s (a moving-block bootstrap in the order measured, widened by √2 for a
re-run's own error), so a load figure's interval means what every other interval in specdec means.

- Latencies per request, from its scheduled send (`load_driver.Record`): TTFT (first token), E2EL (last),
  TPOT ((E2EL − TTFT) / (tokens − 1)), and ITL (every gap between tokens, pooled over requests).
- Per arm and level: p50, p90, p99 of each, over the measured requests of every visit pooled; output tokens
  per second (the measured tokens over the windows' measured spans); goodput, the measured requests per second
  that met every SLO given.
- Pairing: within a visit the arms ran back to back at the same level, so a visit is a pair. The throughput
  speedup is the ratio of totals of the spec-off time per token to the spec-on time per token over the visits
  (`stats.summarize_pairs`); the TPOT speedup the same over the windows' mean TPOT. The A/A is the same ratio
  between the two spec-off windows of each visit: what the machine's noise alone gives at that level.
- The verdict and the crossover are `measure.crossover`'s, the one rule `specdec batch` decides by too. A level
  *pays* when its judged speedup's interval lies above 1 and above its A/A interval (the report's "faster"),
  *costs* when it lies below both, else it is not distinguishable; below 3 visits it gets no verdict (*too few
  pairs*: its interval is then the visits' range widened by √2, not a 95 % interval). A concurrency level is
  judged on throughput: a closed loop's clients send the next request when one ends, so a faster server serves
  more. A rate level is judged on TPOT: an open loop's arrivals are fixed, so below saturation both arms put out
  the offered tokens per second and the throughput ratio measures the schedule (about 1 + the last request's
  latency over the window), never the server; what speculation changes there is each request's latency.
- The crossover: along the levels of one kind, in increasing load, the lowest level that does not pay after one
  that did (or: pays at every level tried, never pays here, pays from a level on), with the load where the
  judged speedup crosses 1 past the first paying level, interpolated on a log scale, and the re-run interval of
  that crossing from a bootstrap over each level's visits that recomputes it (`crossover.crossing_interval`;
  None on a side where it lies beyond the levels tried).
"""

from __future__ import annotations

import math

import numpy as np

from specdec.measure.load.crossover import JUDGED, crossing, crossing_interval, find
from specdec.measure.load.crossover import verdict as verdict  # the rule is measure.crossover's; load.py reads it here
from specdec.measure.load.load_driver import Record
from specdec.measure.stats import Summary, rerun_interval, summarize_pairs

PERCENTILES = (50, 90, 99)
JUDGED_ON = {"concurrency": "throughput", "rate": "tpot"}  # a level kind's verdict speedup (module docstring)
JUDGED_KEYS = {"throughput": ("speedup", "aa"), "tpot": ("speedup_tpot", "aa_tpot")}  # a level row's keys


def judged(row: dict) -> tuple[str, dict | None, dict | None]:
    """A level row's judged speedup ("throughput" or "tpot"), that speedup and its A/A: what its verdict and
    its kind's crossover read."""
    on = row.get("judged_on", "throughput")  # a load.json written before rates were judged on TPOT
    speedup, aa = JUDGED_KEYS[on]
    return on, row.get(speedup), row.get(aa)
LATENCIES = ("ttft", "tpot", "itl", "e2el")
SLO_KEYS = ("ttft", "tpot", "e2el")


def latencies(records: list[Record]) -> dict[str, list[float]]:
    """Seconds per latency kind, over the requests given (ITL: every gap of every request)."""
    return {"ttft": [r.ttft for r in records], "tpot": [r.tpot for r in records if r.tokens > 1],
            "e2el": [r.e2el for r in records], "itl": [g for r in records for g in r.gaps]}


def percentile(values, q: float, seed: int = 0) -> dict | None:
    """The q-th percentile of `values` with its re-run interval; None without values."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None
    stat = lambda v: np.percentile(v, q, axis=-1)
    lo, hi = rerun_interval(x, statistic=stat, seed=seed)
    return {"estimate": float(stat(x)), "ci_low": max(0.0, lo), "ci_high": hi, "n": int(x.size)}


def span(records: list[Record]) -> float:
    """Seconds from the first measured request's scheduled send to the last one's end."""
    return max(r.done for r in records) - min(r.scheduled for r in records)


def meets(r: Record, slos: dict[str, float]) -> bool:
    values = {"ttft": r.ttft, "tpot": r.tpot, "e2el": r.e2el}
    return all(values[k] <= limit for k, limit in slos.items())


def arm_summary(windows: list[list[Record]], slos: dict[str, float]) -> dict:
    """One arm at one level, its visits' measured requests pooled (module docstring)."""
    pooled = [r for w in windows for r in w]
    if not pooled:
        return {"requests": 0}
    lat = latencies(pooled)
    seconds = sum(span(w) for w in windows if w)
    good = sum(meets(r, slos) for r in pooled)
    return {
        "requests": len(pooled), "tokens": sum(r.tokens for r in pooled), "seconds": seconds,
        "output_tokens_per_s": sum(r.tokens for r in pooled) / seconds if seconds > 0 else None,
        **{kind: {f"p{q}": percentile(lat[kind], q) for q in PERCENTILES} for kind in LATENCIES},
        "goodput": {"slos": dict(slos), "requests_meeting": good, "fraction": good / len(pooled),
                    "requests_per_s": good / seconds if seconds > 0 else None},
    }


def per_token_time(records: list[Record]) -> float:
    return span(records) / max(sum(r.tokens for r in records), 1)


def mean_tpot(records: list[Record]) -> float:
    return float(np.mean([r.tpot for r in records if r.tokens > 1] or [math.nan]))


def paired(off: list[list[Record]], on: list[list[Record]], of) -> dict | None:
    """Ratio of totals of `of(off window)` to `of(on window)` over the visits where both ran, with its re-run
    interval: above 1 means the second arm is faster."""
    pairs = [(of(a), of(b)) for a, b in zip(off, on) if a and b]
    pairs = [(a, b) for a, b in pairs if math.isfinite(a) and math.isfinite(b) and b > 0]
    if not pairs:
        return None
    # the visits' own pairs are kept: the crossover's interval resamples them
    return {**_summary(summarize_pairs([a for a, _ in pairs], [b for _, b in pairs])), "pairs": pairs}


def _summary(s: Summary) -> dict:
    # the interval is symmetric about the estimate (estimate ± t·√2·SE); with few visits its lower end can fall
    # below 0, which no ratio of times can: it is cut at 0
    return {"estimate": s.estimate, "ci_low": max(0.0, s.ci_low), "ci_high": s.ci_high, "min": s.min, "max": s.max,
            "n": s.n}


def crossover(rows: list[dict]) -> dict:
    """rows: one kind's levels, each {"value", "speedup": `paired`'s dict (its "pairs" included) or None,
    "verdict"}, the speedup being the one the verdict judged. Returns {"answer" (`crossover.ANSWERS`), "level"
    (the crossover level; for "pays from a level on" the lowest paying level; else None), and for a crossover
    "verdict" (at that level), "estimate" (the load where the judged speedup crosses 1 past the first paying
    level), "ci_low", "ci_high" (its re-run interval)}: the three loads None where beyond the levels tried."""
    rows = sorted((r for r in rows if r.get("speedup")), key=lambda r: r["value"])
    found = find([r["verdict"] for r in rows])
    answer, first, stop = found["answer"], found["first_paid"], found["stop"]
    if answer == "pays from a level on":
        return {"answer": answer, "level": rows[first]["value"]}
    if answer != "crossover":
        return {"answer": answer, "level": None}
    # a level below the first paying one that does not pay is not where it stops; a level without a verdict
    # (too few pairs) is not on the curve
    tail = [r for r in rows[first:] if r["verdict"] in JUDGED]
    x = [r["value"] for r in tail]
    lo, hi = crossing_interval(x, [r["speedup"]["pairs"] for r in tail])
    return {"answer": answer, "level": rows[stop]["value"], "verdict": rows[stop]["verdict"],
            "estimate": crossing(x, [r["speedup"]["estimate"] for r in tail]), "ci_low": lo, "ci_high": hi}
