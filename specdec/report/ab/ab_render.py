"""`specdec ab`'s result: one JSON document (`document`) and its text (`text`).

The document holds per timed row the change B/A, its 95 % interval, p, the verdict and what the run could
have detected, each side's median seconds per call, and the spread within and between worker pairs; the
exact figures that differ between the revisions ("behaviour changed"); the rows a revision could not time,
with the reason; and for end-to-end rows the terms that moved with them (`ab_stats.explain`).
"""

from __future__ import annotations

import math

import numpy as np

from specdec.measure.ab import ab_stats, ab_work
from specdec.measure.ab.ab import Run
from specdec.measure.ab.ab_sources import Source


def _behaviour(run: Run) -> list[dict]:
    """Rows whose exact figures (passes, drafted, accepted, text hash, greedy equality) differ from A to B."""
    out = []
    for name, row in run.rows.items():
        fa, fb = row["a"].get("facts") or {}, row["b"].get("facts") or {}
        if row["a"]["ok"] and row["b"]["ok"] and fa != fb:
            keys = sorted(k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k))
            out.append({"row": name, "changed": {k: [fa.get(k), fb.get(k)] for k in keys}})
    return out


def _work(work: dict | None, rows: dict, tests: int, alpha: float) -> dict:
    """The work section: the counter, per row A's and B's mean instructions per call over the layouts, the
    change, its threshold (what the row could detect) and verdict, the allocators' figure apart, and where
    work and time disagree."""
    work = work or ab_work.unavailable("not counted")
    judged = ab_work.judge(work, tests, alpha) if work.get("rows") else {}
    cal = work.get("calibration")
    return {"counter": work.get("counter"), "name": work.get("name"), "reason": work.get("reason", ""),
            "failed": bool(work.get("failed")), "seconds": work.get("seconds"), "method": work.get("method"),
            "threads": work.get("threads"), "alpha": alpha, "tested": tests,
            "calibration": {k: cal.get(k) for k in ("id", "path", "command", "trees")} if cal else None,
            "layouts": work.get("layouts"), "chars": work.get("chars"), "aslr": work.get("aslr"),
            "batched": work.get("batched"), "largest_k_only": work.get("largest_k_only") or [],
            "rows": judged, "counts": work.get("rows", {}),
            "disagree": ab_work.disagreements(judged, rows),
            "worse": sorted(n for n, r in judged.items() if r["verdict"] == "worse"),
            "alloc_worse": sorted(n for n, r in judged.items() if (r.get("alloc") or {}).get("verdict") == "worse")}


def document(run: Run, a: Source, b: Source, cpu: int, alpha: float = ab_stats.ALPHA,
             tau: float = ab_stats.TAU, work: dict | None = None) -> dict:
    counted = (work or {}).get("rows") or {}
    m = len(run.logs) + len(counted)  # one family: the timed rows and the work rows share alpha
    tests = ab_stats.judge(run.logs, alpha, tau, m)
    rows = {}
    for name, t in tests.items():
        secs = run.seconds[name]
        rows[name] = {**t, "a_seconds": float(np.median(secs["a"])) if secs["a"] else None,
                      "b_seconds": float(np.median(secs["b"])) if secs["b"] else None,
                      "number": run.numbers[name]}
        why = ab_stats.explain(name, tests, run.seconds)
        if why:
            rows[name]["why"] = why
    unavailable = {name: {s: r[s]["reason"] for s in ("a", "b") if not r[s]["ok"]}
                   for name, r in run.rows.items() if not (r["a"]["ok"] and r["b"]["ok"])}
    return {
        "a": {"name": a.name, "commit": a.commit, "path": a.path},
        "b": {"name": b.name, "commit": b.commit, "path": b.path},
        "config": run.config, "cpu": cpu, "alpha": alpha, "tau": tau, "tested": m,
        "pairs": run.pairs, "complete": run.complete, "error": run.error,
        "warnings": run.warnings, "seconds": round(run.elapsed, 1),
        "rows": rows, "behaviour_changed": _behaviour(run), "unavailable": unavailable,
        "worse": sorted(n for n, r in rows.items() if r["verdict"] == "worse"),
        "work": _work(work, rows, m, alpha),
    }


def _pct(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else f"{x:+.1%}"


def _side(s: dict) -> str:
    return f"{s['name']} ({s['commit'][:10]})" if s.get("commit") else s["name"]


def _why_line(name: str, row: dict, rows: dict) -> str:
    why = row["why"]
    terms = ", ".join(f"{t} {_pct(c)} ({rows[t]['verdict']})" for t, c in why["terms"].items())
    line = f"  why {name} {_pct(row['change'])}: {terms}"
    if "accounted" in why:
        line += (f"; accounting: the draft is {why['draft_share']:.0%} of A's generation, so its terms "
                 f"account for {_pct(why['accounted'])}")
    return line


def text(doc: dict) -> str:
    cfg, pairs = doc["config"], doc["pairs"]
    info = pairs[0]["a"] if pairs else {}
    threads = info.get("threads") or {}
    lines = [f"A: {_side(doc['a'])}", f"B: {_side(doc['b'])}",
             f"{len(pairs)} worker pair(s), both workers of a pair pinned to CPU {doc['cpu']}; "
             f"{threads.get('torch')} torch thread(s), {threads.get('blas')} BLAS thread(s), clock "
             f"{info.get('clock')}; "
             + (f"engine {cfg['engine']}" if cfg.get("engine") else f"backend {cfg.get('backend')}")
             + f", target {cfg.get('target') or 'shipped'}; "
             f"{doc['seconds']:.0f} s",
             f"rule: a row changed when its t-test over the worker pairs, with the between-run term "
             f"{doc['tau']:.1%}, gives p < {doc['alpha']:g}/{doc['tested']} (Bonferroni over the timed and the work "
             f"rows: {doc['alpha']:.0%} family-wise); 'detects' is the change flagged with 80 % probability", ""]
    lines += [f"warning: {w}" for w in doc["warnings"]]
    if not doc["complete"]:
        lines += [f"INCOMPLETE: the run stopped early: {doc['error'].splitlines()[0] if doc['error'] else ''}", ""]
    w = max([22] + [len(n) for n in doc["rows"]])
    lines.append(f"{'row':{w}} {'A (us)':>10} {'B (us)':>10} {'B/A':>7} {'95% interval':>16} {'p':>8} "
                 f"{'detects':>8}  verdict")
    for name, r in doc["rows"].items():
        ci = f"{_pct(r['ci95'][0])}..{_pct(r['ci95'][1])}" if r["ci95"] else ""
        p = f"{r['p']:.1e}" if r["p"] is not None else ""
        us = [f"{s * 1e6:.1f}" if s is not None else "" for s in (r["a_seconds"], r["b_seconds"])]
        det = "" if not math.isfinite(r["detectable"]) else (f"{r['detectable']:.1%}" if r["detectable"] < 1
                                                               else ">100%")
        lines.append(f"{name:{w}} {us[0]:>10} {us[1]:>10} {_pct(r['change']):>7} {ci:>16} {p:>8} {det:>8}  "
                     f"{r['verdict']}")
    moved = [n for n, r in doc["rows"].items() if "why" in r and (r["verdict"] != "same" or any(
        doc["rows"][t]["verdict"] != "same" for t in r["why"]["terms"]))]
    if moved:
        lines += ["", "what moved with the end-to-end rows:"] + [_why_line(n, doc["rows"][n], doc["rows"]) for n in moved]
    for b in doc["behaviour_changed"]:
        lines.append(f"behaviour changed: {b['row']}: " + ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in b["changed"].items()))
    for name, why in doc["unavailable"].items():
        lines.append(f"unavailable: {name}: " + "; ".join(f"{s.upper()}: {r}" for s, r in why.items()))
    lines += _work_lines(doc["work"])
    lines.append("")
    if doc["worse"]:
        lines.append("WORSE: " + ", ".join(f"{n} {_pct(doc['rows'][n]['change'])}" for n in doc["worse"]))
    else:
        finite = [min(r["detectable"], 1.0) for r in doc["rows"].values() if math.isfinite(r["detectable"])]
        better = [n for n, r in doc["rows"].items() if r["verdict"] == "better"]
        lines.append("no row got worse" + (f"; better: {', '.join(better)}" if better else "")
                     + (f"; the rows would have caught {min(finite):.1%} to {max(finite):.1%}".replace("100.0%", ">100%")
                        if finite else ""))
    work = doc["work"]
    if work["worse"]:
        lines.append("WORSE (work): " + ", ".join(f"{n} {_pct(work['rows'][n]['change'])}" for n in work["worse"]))
    elif work["rows"]:
        ths = [r["threshold"] for r in work["rows"].values()]
        lines.append(f"no row's work got worse beyond its threshold ({min(ths):.2%} to {max(ths):.2%})")
    return "\n".join(lines)


def _counted_line(work: dict) -> str:
    """What the counter did: outside the allocators and the type cache's misses only where it could split them
    (callgrind's dumps by function; the hardware counter counts the region whole), and at how many threads."""
    layouts = len(work.get("layouts") or []) or 1
    chars = f"; generations of {work['chars']} characters" if work.get("chars") else ""
    split = ("outside the allocators and the type cache's misses" if work.get("counter") == "callgrind" else
             "the whole region (this counter cannot split the allocators out)")
    threads = work.get("threads") or {}
    torch_threads = threads.get("torch") if isinstance(threads, dict) else threads
    at = f"at {torch_threads} thread(s)" if torch_threads else "threads not reported by the counting process"
    if isinstance(torch_threads, int) and torch_threads > 1:
        at += " (MORE THAN ONE: the counts add every thread's instructions and are not the calling thread's)"
    return (f"work: instructions per call, {split}, counted by {work['name']} {at} after the timing "
            f"({work['seconds']:.0f} s); each revision in {layouts} layouts, the mean{chars}; method {work.get('method')}")


def _rule_line(work: dict) -> str:
    cal = work.get("calibration")
    how = (f"calibrated on {len(cal.get('trees') or {})} A/A and null-change trees counted apart ({cal['path']})"
           if cal else "UNCALIBRATED: no calibration for this machine and configuration, so each row's spread is its "
           "own layouts' (few degrees of freedom: wide thresholds); `specdec calibrate-work` makes one")
    return (f"rule: worse (better) beyond the threshold, t at {work['alpha']:g}/{work['tested']} times the change's "
            f"spread, {how}; 'detects' is the change flagged with 80 % probability")


def _work_lines(work: dict) -> list[str]:
    """The work table: mean instructions per call of A and B over the layouts beside the timing rows, the
    threshold (the smallest change the row could detect), the allocators' figure apart, and where work and
    time disagree."""
    if not work["rows"]:
        return ["", f"work rows {'FAILED' if work['failed'] else 'unavailable'}: {work['reason']}"]
    w = max([22] + [len(n) for n in work["rows"]])
    lines = ["", _counted_line(work), _rule_line(work),
             f"{'row':{w}} {'A':>14} {'B':>14} {'B/A':>9} {'threshold':>9} {'detects':>8}  {'verdict':7} "
             f"{'alloc B/A':>10} {'thresh.':>8}"]
    for name, r in work["rows"].items():
        al = r.get("alloc")
        alloc = f"{al['change']:>+10.2%} {al['threshold']:>8.2%}" + (f"  alloc {al['verdict']}" if al["verdict"] != "same"
                                                                       else "") if al else f"{'-':>10} {'-':>8}"
        lines.append(f"{name:{w}} {r['a']:>14,.0f} {r['b']:>14,.0f} {r['change']:>+9.3%} {r['threshold']:>9.2%} "
                     f"{r['detects']:>8.2%}  {r['verdict']:7} {alloc}")
    lines += [f"work and time disagree: {d['row']}: {d['why']}" for d in work["disagree"]]
    if work.get("aslr") == "on":
        lines.append("ASLR could not be turned off in the counting process: every layout was also randomised by "
                     "the kernel, so the layouts spread wider (the thresholds show it)")
    if work.get("largest_k_only"):
        lines.append("timed, counted at the largest k only (the same code at every k): "
                     + ", ".join(work["largest_k_only"]) + "; --count-all-ks counts them")
    if work.get("batched") is False:
        lines.append("the batched rows are timed, not counted (minutes under simulation): --count-batched counts them")
    if work.get("alloc_worse"):
        lines.append("the allocators did more work in: " + ", ".join(work["alloc_worse"])
                     + " (shown, not judged: the callers' own work is the verdict)")
    return lines
