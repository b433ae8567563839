"""Why two reports' speedups differ: the change split over the measured cost terms (accounting, after the fact).

A chain row's speculative time over the workload is, by the loop's cost terms (report.json `terms_us`),
P · round + D · draft_char for P target passes and D drafted characters, against target-only N · step. The
counts are exact given the seeds, so between two reports of the same workload -- two commits, or the same
commit on two machines -- they are identical and the whole change of a speedup is in the three terms:

    log(S_B / S_A) ≈ Δlog step − Δlog(P · round + D · draft_char)

The denominator's change is split between the round (the verify pass and the rule) and the draft by the
average of the two orders of changing them (Shapley), so the split does not depend on which is taken first.
What the terms do not account for (the measured change less the sum) is printed too: it is the terms'
own noise plus what they leave out (the first round, the per-run start-up).
"""

from __future__ import annotations

import math

from specdec.report.markdown import config_label


def _den(passes: float, drafted: float, round_us: float, char_us: float) -> float:
    return passes * round_us + drafted * char_us


def split(counts: tuple[float, float], ta: dict, tb: dict) -> dict[str, float]:
    """The log change of the speedup each term accounts for: step, round, draft (their sum: 'accounted')."""
    p, d = counts
    ra, rb, da, db = ta["round"], tb["round"], ta["draft_char"], tb["draft_char"]
    round_ = 0.5 * (math.log(_den(p, d, rb, da) / _den(p, d, ra, da)) + math.log(_den(p, d, rb, db) / _den(p, d, ra, db)))
    draft = 0.5 * (math.log(_den(p, d, ra, db) / _den(p, d, ra, da)) + math.log(_den(p, d, rb, db) / _den(p, d, rb, da)))
    step = math.log(tb["step"] / ta["step"])
    return {"step": step, "round": -round_, "draft": -draft, "accounted": step - round_ - draft}


TERMS = ("step", "round", "draft_char")


def _counts(doc: dict) -> dict:
    """(draft, configuration) -> (target passes, drafted) over the workload, where the report has both."""
    return {(r["draft"], config_label(r)): (r["target_passes"], r["drafted"]) for r in doc.get("acceptance", [])
            if "target_passes" in r and "drafted" in r}


def _has_terms(row: dict | None) -> bool:
    terms = (row or {}).get("terms_us") or {}
    return bool(row and row.get("measured") and all(terms.get(t) for t in TERMS))


SHOWN = 0.02  # a row is explained when its speedup or one of its terms moved this much (a fraction)


def explain(a: dict, b: dict) -> list[str]:
    """One line per chain speedup row both reports timed with their terms, where the speedup or a term moved by
    SHOWN or more: the measured change, what each term accounts for, and the rest. A row whose counts differ
    is said to have changed behaviour instead."""
    ca, cb = _counts(a), _counts(b)
    sp_b = {(r["draft"], config_label(r)): r for r in b.get("speedup", [])}
    lines = []
    for ra in a.get("speedup", []):
        key = (ra["draft"], config_label(ra))
        rb = sp_b.get(key)
        if ra.get("tree") or not (_has_terms(ra) and _has_terms(rb)) or key not in ca:
            continue
        name = f"{key[0]} {key[1]}"
        if ca[key] != cb.get(key):
            lines.append(f"{name}: the counts differ ({ca[key]} -> {cb.get(key)} passes, drafted): behaviour "
                         "changed, so the cost terms do not account for the speedup's change")
            continue
        s = split(ca[key], ra["terms_us"], rb["terms_us"])
        moved = math.log(rb["measured"] / ra["measured"])
        if max(abs(moved), abs(s["step"]), abs(s["round"]), abs(s["draft"])) < math.log1p(SHOWN):
            continue
        ta, tb = ra["terms_us"], rb["terms_us"]
        lines.append(
            f"{name}: speedup {ra['measured']:.2f} -> {rb['measured']:.2f} ({math.expm1(moved):+.1%}); the "
            f"terms account for {math.expm1(s['accounted']):+.1%}: target step {ta['step']:.0f} -> "
            f"{tb['step']:.0f} us ({math.expm1(s['step']):+.1%}), round {ta['round']:.0f} -> {tb['round']:.0f} us "
            f"({math.expm1(s['round']):+.1%}), draft char {ta['draft_char']:.1f} -> {tb['draft_char']:.1f} us "
            f"({math.expm1(s['draft']):+.1%}); not accounted for {math.expm1(moved - s['accounted']):+.1%}")
    return lines
