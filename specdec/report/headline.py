"""The report's headline: the answer first -- per draft its best exact configuration and verdict against the
noise floor, the recommendation, and every warning with what to do (`headline_facts`, rendered by `headline`).

It reads only the JSON document that `report.measure` returns, so any saved `report.json` renders again.
"""

from __future__ import annotations

from specdec.report.render_trees import passes_exactness
from specdec.report.markdown import MIN_INTERVAL_PAIRS, config_label, interval, row_name, table, verdict, words

PREDICTION_TOLERANCE = 0.05  # the refined model, before the run and as accounting, is held to 5 %
WRITEUP_TOLERANCE = 0.10  # the write-up's formula is judged at 10 %
FASTER, SLOWER, NOISE = "faster", "slower", "not distinguishable from the noise floor"
TOO_FEW = "too few pairs to tell"  # one pair gives no spread: its interval is a point, not an interval
MIN_PAIRS = MIN_INTERVAL_PAIRS  # fewer pairs: no interval, so the row is cut from the answer, with a line
TARGET_ONLY = "target-only"  # the recommendation when no exact configuration is faster
CHECK_ADVICE = ("rerun `specdec verify` for it with more --samples: an exact draft gives a CHECK in at most 0.1 % "
                "of reports, so a CHECK that comes back means the draft or the rule is broken; until then, do not "
                "use it")


def timing_verdict(r: dict, floor: dict) -> str:
    """A speedup row against target-only: FASTER when its re-run interval lies above the A/A noise floor's
    interval and above 1, SLOWER when below both, else NOISE (the machine's noise alone could give it); TOO_FEW
    when the row or the floor had fewer than MIN_PAIRS pairs (a budget too small for this model: no spread)."""
    if min(r.get("pairs", MIN_PAIRS), floor.get("pairs", MIN_PAIRS)) < MIN_PAIRS:
        return TOO_FEW
    if r["ci_low"] > max(floor["ci_high"], 1.0):
        return FASTER
    if r["ci_high"] < min(floor["ci_low"], 1.0):
        return SLOWER
    return NOISE


def headline_facts(doc: dict) -> dict:
    """The answer the report opens with, from the document's rows (report.json keeps it as `headline`).

    run: what was measured (machine, backend, threads, workload, budget). noise_floor: the A/A figure and its
    re-run interval. drafts: per draft, its best measured configuration among those whose exactness rows all
    pass, with its interval, pairs and `timing_verdict` (config None when no configuration passed).
    recommendation: the best FASTER configuration over every draft, or TARGET_ONLY. warnings: the document's
    `warnings` as they are (the machine's, then `result_warnings`; each says what to do).
    """
    m, s, floor = doc["machine"], doc["settings"], doc["noise_floor"]
    w = s["workload"]
    drafts, recommendation = answer(doc["speedup"], floor, lambda r: passes_exactness(r, doc["exactness"]),
                                    "no configuration passed exactness")
    return {
        "run": {"machine": m["cpu"], "device": m["device"], "backend": m.get("backend", "eager"),
                "threads": m["threads"], "workload": w["name"] if s.get("prompt") is None else None,
                "prompt": s.get("prompt"), "runs": w["items"], "chars": s["chars"], "budget": s["budget"],
                "wall_seconds": doc["wall_seconds"], "units": words(doc)["units"],
                "target": (s.get("target") or {}).get("name", "shipped")},
        "noise_floor": {"measured": floor["measured"], "ci": [floor["ci_low"], floor["ci_high"]],
                        "pairs": floor["pairs"]},
        "drafts": drafts,
        "recommendation": recommendation,
        "warnings": list(doc.get("warnings", [])),
    }


def answer(rows: list[dict], floor: dict, kept, none_kept: str) -> tuple[list[dict], str]:
    """Per draft, in the rows' order: its best measured configuration among the rows `kept(row)` accepts, with
    its interval, pairs and `timing_verdict` against `floor` (config None and verdict `none_kept` where it
    accepts none); and the recommendation: the best FASTER configuration over every draft, or TARGET_ONLY."""
    drafts = []
    for name in dict.fromkeys(r["draft"] for r in rows):
        mine = [r for r in rows if r["draft"] == name and kept(r)]
        if not mine:
            drafts.append({"draft": name, "config": None, "verdict": none_kept})
            continue
        mine = [r for r in mine if r.get("pairs", MIN_PAIRS) >= MIN_PAIRS]  # one pair judges nothing: cut
        if not mine:
            drafts.append({"draft": name, "config": None, "verdict": TOO_FEW})
            continue
        b = max(mine, key=lambda r: r["measured"])
        drafts.append({"draft": name, "config": config_label(b), "measured": b["measured"],
                       "ci": [b["ci_low"], b["ci_high"]], "pairs": b["pairs"], "verdict": timing_verdict(b, floor)})
    faster = [d for d in drafts if d["verdict"] == FASTER]
    best = max(faster, key=lambda d: d["measured"]) if faster else None
    return drafts, TARGET_ONLY if best is None else f"{best['draft']} {best['config']}"


def others_note(m: dict) -> str:
    """What other processes took of our CPUs during the run (`hygiene`'s busy figure), where it was measured."""
    x = m.get("others_cpus")
    return "" if x is None else f"; other processes kept {x:.2f} CPUs busy during the run"


def headline(doc: dict) -> str:
    """The report's opening: title, what was run, the noise floor, per draft its best exact configuration and
    verdict, the recommendation, and every warning with what to do. Rendered from `headline_facts`."""
    h = headline_facts(doc)
    run, f = h["run"], h["noise_floor"]
    what = (f"workload {run['workload']!r}" if run["prompt"] is None else f"prompt {run['prompt']!r}")
    target = "" if run.get("target", "shipped") == "shipped" else f"target {run['target']!r}; "
    out = [f"# specdec report\n\n{target}{run['machine']} ({run['device']}), {run['backend']} backend, "
           f"{run['threads']} thread(s); {what}, {run['runs']} run(s) of {run['chars']} "
           f"{run.get('units', 'characters')}; budget {run['budget']:.0f} s, measured in {run['wall_seconds']:.0f} s.",
           f"\nNoise floor (target-only against itself, A/A): {f['measured']:.3f}x, 95 % re-run interval "
           f"{interval(*f['ci'], f['pairs'], 3)} over {f['pairs']} pairs. A configuration is faster (slower) when its "
           f"whole re-run interval lies above (below) both that interval and 1.\n",
           table(["draft", "best exact configuration", "speedup", "95% re-run interval", "verdict"], [
               [d["draft"], d["config"] or "-", "" if d["config"] is None else f"{d['measured']:.2f}",
                "" if d["config"] is None else interval(*d["ci"], d["pairs"]), d["verdict"]]
               for d in h["drafts"]])]
    if h["recommendation"] == TARGET_ONLY:
        out.append("\n**Recommendation: target-only.** No exact configuration is faster than target-only beyond "
                   "the noise floor on this machine.")
    else:
        d = next(d for d in h["drafts"] if f"{d['draft']} {d['config']}" == h["recommendation"])
        out.append(f"\n**Recommendation: {h['recommendation']}**, {d['measured']:.2f}x (95 % re-run interval "
                   f"{d['ci'][0]:.2f}-{d['ci'][1]:.2f}): the fastest exact configuration that is faster than "
                   f"target-only beyond the noise floor.")
    out += [f"\n**{x}**" for x in h["warnings"]] or ["\nNo warnings."]
    return "\n".join(out)


def result_warnings(doc: dict) -> list[str]:
    """The warnings the figures themselves give: rows timed too few times for an interval, then one per
    configuration whose exactness gave a CHECK. The report appends them to the machine's warnings in
    `doc["warnings"]`, the one list the headline and report.json both show."""
    out = [f"WARNING: exactness gave a CHECK for {row_name(r)} at context {r['context']} (chi-square p = "
           f"{r['p_value']:.2g}); it is left out of the answer above; {CHECK_ADVICE}."
           for r in doc["exactness"] if verdict(r) == "CHECK"]
    need = (doc.get("sizing") or {}).get("budget_needed")
    if need:
        out.insert(0, f"WARNING: this budget gives no verdict for this model: give --budget {need} or more (the "
                      "smallest report, sized from the cost of a token measured at the start).")
    cut = [f"{row_name(r)} ({r['pairs']} pair)" for r in doc["speedup"] if r["pairs"] < MIN_PAIRS]
    if doc["noise_floor"]["pairs"] < MIN_PAIRS:
        cut.insert(0, f"the noise floor ({doc['noise_floor']['pairs']} pair)")
    if cut:
        out.insert(0, f"WARNING: fewer than {MIN_PAIRS} timed pairs, so no re-run interval and no verdict, for: "
                      f"{', '.join(cut)}; these rows are cut from the answer; give a larger --budget (the fixed "
                      "work took most of this one).")
    return out
