"""The report's paired sections: target-only and speculative generation timed back to back in alternated pairs,
the rows interleaved -- every speedup row with the A/A noise floor among them (`speedup`), adaptive k against the
best fixed k (`adaptive`), greedy decoding (`greedy`) -- and a timed row's figures (`paired_figures`), which the
batch and engine reports share.

Timed rows cycle through the report's workload runs, one run per visit (each visit times target-only and
speculative generation of the same run back to back), so a row's figure is the workload's: the ratio of total
times Σ target-only / Σ speculative over its visits, with two intervals -- where a re-run would land (timing
noise and which runs the visits hit), and a bootstrap over the runs (how much the figure depends on which
prompts are in the workload).
"""

from __future__ import annotations

import math

import numpy as np

from specdec.measure import round_samplers, stats
from specdec.measure import workload as wl
from specdec.measure.schedule import Runs, interleave
from specdec.report import tree_sections as ts
from specdec.report.sections import ReportRun

ADAPTIVE = {"start_k": 4, "k_max": 16}  # the adaptive-k rows: the +2 / -1 schedule from k = 4, at most 16
NOISY_FACTOR = 2.0  # a row whose interval is this many times wider than the noise floor's is noisy
WARM_CHARS = 40  # characters of the short generation that warms both models before each visit


def paired_figures(r: Runs, num: str, den: str, floor: dict | None = None) -> dict:
    """A timed row's figures: the ratio of total times num/den over its visits and its re-run interval, the
    per-visit ratios' median and range, and per run the ratio of its mean times with a bootstrap over runs.

    floor: the A/A noise floor's figures. A row's re-run interval is never narrower than the floor's (relative
    to the figure), scaled to the row's pair count by √(floor pairs / row pairs): the floor measures the timing
    noise of this very statistic on this machine, and a bootstrap of a handful of pairs can understate it (in
    two back-to-back 5-pair reports, 8 of 35 intervals missed the other run's figure without this floor).
    Then the drift the floor carries (`floor["drift"]`, τ from `drift_of`) is added: a re-run happens at
    another time, and the machine's state moves a ratio between times by more than its pairs' own noise; and,
    in quadrature with it, the between-run term from this machine's calibrations (`floor["between_run"]["tau"]`,
    see `machine_record`), which covers the moves no single run can see.
    """
    a, b = np.asarray(r.times[num]), np.asarray(r.times[den])
    s = stats.summarize_pairs(a, b)
    if floor is not None and floor.get("width") is not None and s.n >= 1:
        half = s.estimate * floor["width"] / 2 * math.sqrt(floor["pairs"] / s.n)
        if s.ci_high - s.estimate < half or s.estimate - s.ci_low < half:
            s = stats.Summary(s.estimate, s.median, s.min, s.max, min(s.ci_low, s.estimate - half),
                              max(s.ci_high, s.estimate + half), s.n)
    pairs_width = s.width  # the pairs' own noise: drift, added next, does not shrink with more pairs
    if floor is not None and s.n >= 3:  # drift within this run, and the record's term for between runs
        s = stats.with_drift(s, math.hypot(floor.get("drift") or 0.0, (floor.get("between_run") or {}).get("tau", 0.0)))
    by_run: dict[int, list[int]] = {}
    for visit, i in enumerate(r.visit_items):
        by_run.setdefault(i, []).append(visit)
    a_run = np.array([a[v].mean() for v in by_run.values()])
    b_run = np.array([b[v].mean() for v in by_run.values()])
    w = wl.workload_interval((a_run, b_run))
    # width: the re-run interval over the figure; null below three pairs (JSON has no infinity)
    return {"measured": s.estimate, "ci_low": s.ci_low, "ci_high": s.ci_high,
            "width": s.width if math.isfinite(s.width) else None,
            "pairs_width": pairs_width if math.isfinite(pairs_width) else None, "pairs": s.n,
            "measured_median": s.median, "measured_min": s.min, "measured_max": s.max,
            "workload_ci_low": w.low, "workload_ci_high": w.high, "items": w.items,
            "per_item_ratios": [{"prompt_id": r.items[i][0].id, "seed": r.items[i][1],
                                 "ratio": float(x / y)} for i, x, y in zip(by_run, a_run, b_run)],
            "ratios": (a / b).tolist(), "pair_items": list(r.visit_items)}


def speedup(run: ReportRun, seconds: float) -> dict:
    """Every (draft, k) row and the A/A noise floor, their pairs interleaved over the whole section."""
    kn = run.knobs
    floor = Runs("noise floor (A/A)", {"a": run.plain(), "b": run.plain()}, ("a", "b"), warm=run.plain(WARM_CHARS),
                 items=run.runs)
    rows = [Runs((name, k), {"target": run.plain(), "spec": run.spec(name, k)}, ("target", "spec"),
                 warm=run.spec(name, k, WARM_CHARS), between=run.samplers[name, k], items=run.runs)
            for name in run.drafts for k in run.ks]
    rows += [Runs((name, label), {"target": run.plain(), "spec": run.spec(name, 1, tree=spec)}, ("target", "spec"),
                  warm=run.spec(name, 1, WARM_CHARS, tree=spec), between=run.samplers[name, label], items=run.runs)
             for (name, label), spec in run.trees.items()]
    interleave([floor] + rows, seconds, kn["min_pairs"], kn["precision"], run.device, run.log, "speedup ")
    f = paired_figures(floor, "a", "b")
    tau, pooled = drift_of(run, rows)
    br = dict(run.knobs.get("between_run") or {"tau": 0.0, "source": "off", "calibrations": 0})
    noise = {**f, "median": f["measured_median"], "min": f["measured_min"], "max": f["measured_max"],
             "drift": tau, "drift_rows": pooled, "between_run": br}
    run.floor = noise
    docs = [_speedup_row(run, r, f["width"]) for r in rows]
    run.rows = docs
    return {"noise_floor": noise, "speedup": docs}


def _passes_factor(run: ReportRun, r: Runs) -> np.ndarray:
    """Per visit, the row's mean target passes per run over the passes of the run that visit worked on: what
    the prompt mix alone does to a pair's ratio (speculative time goes with the run's exact pass count)."""
    passes = np.array([it["target_passes"] for it in run.acc[r.key]["per_item"]], dtype=float)
    return passes.mean() / passes[np.asarray(r.visit_items)]


def timing_width(run: ReportRun, r: Runs) -> float | None:
    """The row's re-run interval width with the prompt mix taken out (speculative times scaled by
    `_passes_factor`): timing noise alone, the same kind of noise the A/A floor measures, so the two compare.
    None below three pairs."""
    if r.visits < 3:
        return None
    b = np.asarray(r.times["spec"]) * _passes_factor(run, r)
    return stats.summarize_pairs(r.times["target"], b).width


def drift_of(run: ReportRun, rows: list[Runs]) -> tuple[float, int]:
    """τ over the speedup rows (`stats.drift`), and how many rows it pooled.

    A row's pairs cycle through the workload's runs, so its first and second half hold different prompts;
    what the prompts alone explain is taken out first: speculative time goes with the run's target passes
    (exact counts), so each pair's log ratio gets log(passes of its run / the row's mean passes) added.
    """
    return stats.drift([np.log(r.ratios()) - np.log(_passes_factor(run, r)) for r in rows])


def _predictions(a: dict, terms: np.ndarray, runs: int, first_drafted: float) -> stats.Summary:
    """The refined model per sample of its terms (`round_samplers.TERMS`, µs), over the workload's pooled counts of
    `runs` generations, summarised."""
    t = a["totals"]
    return stats.summarize([stats.refined_speedup(t["chars"], t["target_passes"], t["drafted"], step, rnd, char,
                                                  runs, first_step, first_round, first_drafted)
                            for step, char, rnd, first_step, first_round in terms])


def _noisy(width: float | None, floor_width: float | None, precision: float) -> bool:
    """Wider than NOISY_FACTOR times the noise floor's interval (and than the precision asked for); a row or a
    floor without an interval (under three pairs) is not judged."""
    if width is None or floor_width is None:
        return False
    return width > NOISY_FACTOR * floor_width and width > precision


def _speedup_row(run: ReportRun, r: Runs, floor_width: float | None) -> dict:
    """One row of tables 3 and 5: the measured ratio; the prediction made from the cost table before any pair
    (predicted_before); and the cost accounting from terms sampled after each pair (predicted_refined)."""
    name, k = r.key  # k: a chain's k, or a tree configuration's label
    a, costs_ = run.acc[name, k], run.costs
    t = a["totals"]
    tree = run.trees.get((name, k))
    fig = paired_figures(r, "target", "spec", run.floor)
    t_width = timing_width(run, r)  # a bootstrap: once per row
    before_terms = ts.before_terms(run, name, k) if tree else costs_.loop_samples[name, k]
    after_terms = np.asarray(r.extra, dtype=float)
    # a tree round drafts its nodes (fewer where q runs out of characters): the formula's k is nodes per round
    per_round = t["drafted"] / t["draft_calls"] if tree and t["draft_calls"] else k
    n_runs = len(run.runs)
    before, after = (_predictions(a, x, n_runs, per_round) for x in (before_terms, after_terms))
    after_us = round_samplers.term_medians(after_terms)
    terms = stats.refined_terms(t["chars"], t["target_passes"], t["drafted"], after_us["step"], after_us["round"],
                                after_us["draft_char"], n_runs, after_us["first_step"], after_us["first_round"],
                                per_round)
    # What the paired runs imply for each side, against what the cost accounting assumed: names the term off.
    implied_target = float(np.mean(r.times["target"])) * 1e6 * n_runs
    implied_spec = float(np.mean(r.times["spec"])) * 1e6 * n_runs
    return {
        "draft": name, "k": tree.depth if tree else k, "tree": ts.tree_key(tree), "drafted_per_round": per_round,
        "chars_per_pass": t["chars_per_pass"],
        "predicted": stats.predicted_speedup(t["chars_per_pass"], per_round, costs_.c(name)),
        "predicted_before": before.estimate, "predicted_before_ci_low": before.ci_low,
        "predicted_before_ci_high": before.ci_high,
        "predicted_refined": after.estimate, "predicted_refined_ci_low": after.ci_low,
        "predicted_refined_ci_high": after.ci_high,
        **fig,
        "timing_width": t_width,
        "noisy": _noisy(t_width, floor_width, run.knobs["precision"]),
        "terms_us": after_us,
        "before_terms_us": round_samplers.term_medians(before_terms),
        "before_terms_samples": np.asarray(before_terms, dtype=float).tolist(),  # per sample: round_samplers.TERMS, µs
        "target_only_error": implied_target / terms["target_only_us"] - 1.0,
        "speculative_error": implied_spec / terms["speculative_us"] - 1.0,
        "draft_share": terms["draft_share"], "first_share": terms["first_share"],
    }


def adaptive(run: ReportRun, seconds: float) -> dict:
    """Adaptive k against each draft's best fixed k and target-only, in rotated triples (all three ratios
    come from the same moments), the drafts' triples interleaved."""
    kn = run.knobs
    if not kn.get("adaptive", True):  # sized out for a slow model (`sizing`): the report says so
        return {"adaptive": []}
    rows, fixed, seen = [], {}, {}
    for name in run.drafts:
        fixed[name] = max((r for r in _chains(run.rows) if r["draft"] == name), key=lambda r: r["measured"])["k"]
        ad = _recording(run.spec(name, ADAPTIVE["start_k"], adaptive=True, k_max=ADAPTIVE["k_max"]),
                        seen.setdefault(name, {}))
        rows.append(Runs(name, {"target": run.plain(), "fixed": run.spec(name, fixed[name]), "adaptive": ad},
                         ("target", "adaptive"), warm=run.spec(name, ADAPTIVE["start_k"], WARM_CHARS),
                         items=run.runs))
    interleave(rows, seconds, kn["min_triples"], kn["precision"], run.device, run.log, "adaptive ")
    out = []
    for r in rows:
        sts = list(seen[r.key].values())  # the counts of the runs its triples generated (exact per run)
        chars, passes = sum(s.chars for s in sts), sum(s.target_passes for s in sts)
        drafted, calls = sum(s.drafted for s in sts), sum(s.draft_calls for s in sts)
        vs_target = paired_figures(r, "target", "adaptive", run.floor)
        vs_fixed = paired_figures(r, "fixed", "adaptive", run.floor)
        out.append({"draft": r.key, **ADAPTIVE, "mean_k": drafted / calls if calls else 0.0,
                    "acceptance": sum(s.accepted for s in sts) / drafted if drafted else 0.0,
                    "chars_per_pass": chars / passes, "target_passes": passes, **vs_target,
                    "best_fixed_k": fixed[r.key], **{f"vs_fixed_{key}": vs_fixed[key] for key in (
                        "measured", "ci_low", "ci_high", "measured_min", "measured_max")}})
    return {"adaptive": out}


def greedy(run: ReportRun, seconds: float) -> dict:
    """The best sampled configuration again at temperature 0, where acceptance is argmax agreement."""
    best = max(_chains(run.rows), key=lambda r: r["measured"])  # adaptive and greedy compare chains
    name, k = best["draft"], best["k"]
    seen: dict = {}
    r = Runs("greedy", {"target": run.plain(temperature=0.0),
                        "spec": _recording(run.spec(name, k, temperature=0.0), seen)},
             ("target", "spec"), warm=run.spec(name, k, WARM_CHARS, temperature=0.0), items=run.runs)
    interleave([r], seconds, run.knobs["min_pairs"], run.knobs["precision"], run.device, run.log, "greedy ")
    sts = list(seen.values())
    drafted, passes = sum(s.drafted for s in sts), sum(s.target_passes for s in sts)
    return {"greedy": {"draft": name, "k": k, "acceptance": sum(s.accepted for s in sts) / drafted,
                       "chars_per_pass": sum(s.chars for s in sts) / passes, "target_passes": passes,
                       **paired_figures(r, "target", "spec", run.floor)}}


def _recording(fn, seen: dict):
    """fn(run), keeping each run's generation stats in `seen` (the counts come from the timed runs
    themselves: exact given the seed, and no untimed extra generations eat into the budget)."""
    def call(item):
        seen[item] = fn(item).stats

    return call


def _chains(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("tree") is None]
