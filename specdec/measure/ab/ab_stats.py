"""The statistics of `specdec ab`: per row, the change B/A with a 95 % interval and a family-wise verdict.

Within a worker pair, a row's log(B / A) samples are summarised by their 20 % trimmed mean (robust to the
heavy tails of a shared machine: 5-95 % of adjacent samples lie within ±25 % here, and a mean would follow the
few samples a burst lands on). Across the P pairs those estimates are independent -- each pair is two fresh
processes -- so the row's change is their mean, its standard error their spread over √P, and Student's t with
P - 1 degrees of freedom gives the interval and the test. Per-process bias (layout, hash seed) is therefore
inside the interval, not assumed away. That spread is never taken below what each pair's own samples say its
estimate's noise is (`within_se`): with two or three pairs it can come out near zero by chance.

Pairs of one run still share what a run shares (the two checkouts, the machine's state over those minutes),
and A/A runs scatter more from run to run than the pairs' spread says. So every row's variance also carries a
between-run term τ (TAU, in the log ratio; docs/ab.md says how it was measured), known rather than estimated:
the degrees of freedom follow Welch-Satterthwaite with τ carrying no doubt, as in `specdec compare`.

The verdict controls the false-alarm rate over all rows of a run: a row is worse (better) when its two-sided
test gives p < ALPHA / m, m the rows tested, timed and counted (Bonferroni). "same" comes with the change that
test flags with 80 % probability, exp((t_(alpha/2m) + t_0.2) · sd) - 1 (`detectable`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

ALPHA = 0.01  # family-wise false-alarm rate over a run's rows
TRIM = 0.2  # fraction cut from each end of a pair's log ratios before averaging
POWER_BETA = 0.2  # `detectable` is the change flagged with probability 1 - POWER_BETA (80 %)
TAU = 0.006  # the between-run term: one standard deviation of a row's log change between A/A runs, beyond its se


def pair_estimates(logs: list[list[float]]) -> np.ndarray:
    """Each worker pair's trimmed mean of its log(B / A) samples (pairs without samples left out)."""
    return np.asarray([stats.trim_mean(x, TRIM) for x in logs if len(x)], dtype=float)


def row_test(logs: list[list[float]], m: int, alpha: float = ALPHA, tau: float = TAU) -> dict:
    """A row's change and verdict from its pairs' log ratios; m the rows tested in the run, tau the
    between-run term added to the pairs' variance of the mean."""
    est = pair_estimates(logs)
    out = {"pairs": len(est), "samples": int(sum(len(x) for x in logs)), "pair_estimates": est.tolist()}
    if len(est) < 2:
        return {**out, "change": math.expm1(float(est.mean())) if len(est) else None, "verdict": "too few pairs",
                "p": None, "ci95": None, "detectable": math.inf}
    mean, se, se_dof = float(est.mean()), float(est.std(ddof=1) / math.sqrt(len(est))), len(est) - 1
    floor, floor_dof = within_se(logs)
    if floor > se:  # the pairs agreed more closely than their own samples allow: chance, not precision
        se, se_dof = floor, floor_dof
    sd = math.hypot(se, tau)
    dof = sd**4 / (se**4 / se_dof) if se > 0 else math.inf
    p = float(2 * stats.t.sf(abs(mean) / sd, dof)) if sd > 0 else (0.0 if mean else 1.0)
    half95 = float(stats.t.isf(0.025, dof)) * sd
    detect = math.expm1((float(stats.t.isf(alpha / m / 2, dof)) + float(stats.t.isf(POWER_BETA, dof))) * sd)
    verdict = ("worse" if mean > 0 else "better") if p < alpha / m else "same"
    spread = spreads(logs)
    return {**out, "change": math.expm1(mean), "ci95": [math.expm1(mean - half95), math.expm1(mean + half95)],
            "p": p, "verdict": verdict, "detectable": detect, "se": se, "se_floor": floor, "tau": tau, "dof": dof,
            **spread}


def within_se(logs: list[list[float]]) -> tuple[float, int]:
    """The standard error the pairs' mean must have at least, from the noise inside each pair alone, and its
    degrees of freedom: each pair's trimmed mean has Yuen's variance (n - 1)·s_w² / (h·(h - 1)), s_w² the
    winsorized variance, h = n - 2·floor(TRIM·n) the samples kept; the mean of P estimates has the sum of those
    over P². The pairs' own spread (P - 1 degrees of freedom) estimates the same variance plus any per-process
    term, but with two or three pairs it can come out near zero by chance (two pairs that agree to 0.1 % while
    each pair's samples scatter by 5 % flagged an A/A here); the larger of the two is used. A pair with fewer
    than two kept samples adds nothing (the bound stays a lower bound); (0, 0) when none has two."""
    pairs = sum(1 for x in logs if len(x))
    parts, dof = [], 0
    for x in logs:
        n = len(x)
        g = int(TRIM * n)
        h = n - 2 * g
        if h < 2:
            continue
        w = np.sort(np.asarray(x, dtype=float))
        w[:g], w[n - g:] = w[g], w[n - g - 1]  # winsorized: the cut ends set to the nearest kept value
        parts.append((n - 1) * float(w.var(ddof=1)) / (h * (h - 1)))
        dof += h - 1
    return (math.sqrt(sum(parts)) / pairs, dof) if parts else (0.0, 0)


def spreads(logs: list[list[float]]) -> dict:
    """How much of a row's noise is per process: the sd of single log ratios within a pair (pooled), and the sd
    of the pairs' estimates beyond what that within-pair noise explains (a method-of-moments variance
    component, floored at zero)."""
    xs = [np.asarray(x, dtype=float) for x in logs if len(x) > 1]
    if not xs:
        return {"within_sd": None, "between_sd": None}
    dof = sum(len(x) - 1 for x in xs)
    within = math.sqrt(sum(float(((x - x.mean()) ** 2).sum()) for x in xs) / dof)
    est = np.asarray([x.mean() for x in xs])
    expected = float(np.mean([within**2 / len(x) for x in xs]))
    between = math.sqrt(max(0.0, float(est.var(ddof=1)) - expected)) if len(est) > 1 else None
    return {"within_sd": within, "between_sd": between}


def judge(logs: dict[str, list[list[float]]], alpha: float = ALPHA, tau: float = TAU,
          tests: int | None = None) -> dict[str, dict]:
    """Every row's test, with the Bonferroni divisor `tests` (default the number of rows; `specdec ab` adds its
    work rows: one family-wise rate for both)."""
    m = max(1, tests or len(logs))
    return {name: row_test(x, m, alpha, tau) for name, x in logs.items()}


def explain(name: str, tests: dict[str, dict], seconds: dict[str, dict]) -> dict | None:
    """Which measured terms moved with an end-to-end row (accounting, after the fact).

    A speculative generation is its rounds without the draft (`round D k=K`) plus the draft's proposals; the
    draft's share s of A's generation time is (spec - round) / spec from the two rows' median seconds, and the
    change the terms account for is (1 - s)·Δround + s·Δdraft. The passes are listed beside: the round's cost
    is mostly its verify pass. Target-only generation is its single-position passes. None for other rows."""
    parts = name.split()
    if parts[0] == "target-only":
        terms = ["pass 1"]
    elif parts[0] == "spec" and len(parts) == 3:
        draft, k = parts[1], int(parts[2].split("=")[1])
        terms = [f"draft {draft}", f"round {draft} k={k}", f"verify {k + 1}", "pass 1"]
    else:
        return None
    out = {"terms": {t: tests[t]["change"] for t in terms if t in tests}}
    if parts[0] == "spec" and all(t in tests for t in terms[:2]):
        spec, rounds = (float(np.median(seconds[n]["a"])) for n in (name, terms[1]))
        share = min(1.0, max(0.0, (spec - rounds) / spec))
        accounted = (1 - share) * math.log1p(tests[terms[1]]["change"]) + share * math.log1p(tests[terms[0]]["change"])
        out.update({"draft_share": share, "accounted": math.expm1(accounted)})
    return out
