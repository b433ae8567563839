"""Rendering a report document: the headline (the answer first), the Markdown tables (also what the terminal
shows) and the findings. The figures are drawn by `figures`.

Everything here reads only the JSON document that `report.measure` returns, so any saved `report.json`
renders again, on any machine.
"""

from __future__ import annotations

from specdec.report.render_trees import _chains, _median, best_exact, passes_exactness, tree_acceptance, tree_costs
from specdec.measure.overhead import CAME_BACK, OLD_ROUND, known, scope_cells, scope_header
from specdec.measure.machine_record import MIN_CALIBRATIONS
from specdec.report.markdown import config_cell, config_label, row_name, spread, table, verdict, words

PREDICTION_TOLERANCE = 0.05  # the refined model, before the run and as accounting, is held to 5 %
WRITEUP_TOLERANCE = 0.10  # the write-up's formula is judged at 10 %
FASTER, SLOWER, NOISE = "faster", "slower", "not distinguishable from the noise floor"
TOO_FEW = "too few pairs to tell"  # one pair gives no spread: its interval is a point, not an interval
MIN_PAIRS = 2
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
    drafts = []
    for name in dict.fromkeys(r["draft"] for r in doc["speedup"]):
        exact = [r for r in doc["speedup"] if r["draft"] == name and passes_exactness(r, doc["exactness"])]
        if not exact:
            drafts.append({"draft": name, "config": None, "verdict": "no configuration passed exactness"})
            continue
        b = max(exact, key=lambda r: r["measured"])
        drafts.append({"draft": name, "config": config_label(b), "measured": b["measured"],
                       "ci": [b["ci_low"], b["ci_high"]], "pairs": b["pairs"], "verdict": timing_verdict(b, floor)})
    faster = [d for d in drafts if d["verdict"] == FASTER]
    best = max(faster, key=lambda d: d["measured"]) if faster else None
    return {
        "run": {"machine": m["cpu"], "device": m["device"], "backend": m.get("backend", "eager"),
                "threads": m["threads"], "workload": w["name"] if s.get("prompt") is None else None,
                "prompt": s.get("prompt"), "runs": w["items"], "chars": s["chars"], "budget": s["budget"],
                "wall_seconds": doc["wall_seconds"], "units": words(doc)["units"],
                "target": (s.get("target") or {}).get("name", "shipped")},
        "noise_floor": {"measured": floor["measured"], "ci": [floor["ci_low"], floor["ci_high"]],
                        "pairs": floor["pairs"]},
        "drafts": drafts,
        "recommendation": TARGET_ONLY if best is None else f"{best['draft']} {best['config']}",
        "warnings": list(doc.get("warnings", [])),
    }


def result_warnings(doc: dict) -> list[str]:
    """The warnings the figures themselves give: rows timed too few times for an interval, then one per
    configuration whose exactness gave a CHECK. The report appends them to the machine's warnings in
    `doc["warnings"]`, the one list the headline and report.json both show."""
    out = [f"WARNING: exactness gave a CHECK for {row_name(r)} at context {r['context']} (chi-square p = "
           f"{r['p_value']:.2g}); it is left out of the answer above; {CHECK_ADVICE}."
           for r in doc["exactness"] if verdict(r) == "CHECK"]
    few = min([doc["noise_floor"]["pairs"]] + [r["pairs"] for r in doc["speedup"]])
    if few < MIN_PAIRS:
        out.insert(0, f"WARNING: only {few} timed pair(s) for some rows: no re-run interval, so no verdict for "
                      "them; give a larger --budget (the fixed work took most of this one).")
    return out


def _others(m: dict) -> str:
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
           f"{f['ci'][0]:.3f}-{f['ci'][1]:.3f} over {f['pairs']} pairs. A configuration is faster (slower) when its "
           f"whole re-run interval lies above (below) both that interval and 1.\n",
           table(["draft", "best exact configuration", "speedup", "95% re-run interval", "verdict"], [
               [d["draft"], d["config"] or "-", "" if d["config"] is None else f"{d['measured']:.2f}",
                "" if d["config"] is None else f"{d['ci'][0]:.2f}-{d['ci'][1]:.2f}", d["verdict"]]
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


def tables(doc: dict) -> str:
    """The report as Markdown (also what the terminal shows): the headline, then every table and the findings."""
    out = [headline(doc)]
    for part in (_setup, _exactness, _acceptance, _speedup, _costs, _predicted, _recommended, _adaptive_greedy):
        out += part(doc)
    out.append("\n## Findings\n")
    out += [f"- {line}" for line in findings(doc)]
    out += _time_spent(doc)
    return "\n".join(out) + "\n"


def _setup(doc: dict) -> list[str]:
    """What was run, in full: the machine, the workload, the budget; and the drafts skipped."""
    m, s = doc["machine"], doc["settings"]
    w = s["workload"]
    pinned = f", pinned to CPU {','.join(map(str, m['cpu_affinity']))}" if m.get("pinned") else ""
    what = (f"Prompt {s['prompt']!r}, seed {w['seeds'][0]}" if s.get("prompt") is not None else
            f"Workload {w['name']!r}: {w['items']} prompt(s), seeds {', '.join(map(str, w['seeds']))} "
            f"(one run per prompt)")
    out = [f"\n## Setup\n\n{m['cpu']}, {m['threads']} thread(s) ({m.get('interop_threads')} inter-op){pinned}, "
           f"{m['device']}, torch {m['torch_version']}, commit {m.get('commit') or 'n/a'}, {m['date']}; load average "
           f"{m.get('load_start')} at the start, {m.get('load_end')} at the end{_others(m)}. {what}; "
           f"{s['chars']} {words(doc)['units']}, "
           f"temperature {s['temperature']}. Budget {s['budget']:.0f} s, measured in {doc['wall_seconds']:.0f} s."]
    t = s.get("target")
    if t and t.get("name") != "shipped":
        out.append(f"\nTarget {t['name']!r}: {t['architecture']}, vocabulary {t['vocab_size']:,}, context "
                   f"{t['context']}, tokenizer {t['tokenizer']}; figures count {t['units']}.")
    if doc.get("skipped"):
        out.append("\nSkipped: " + "; ".join(f"{n} ({why})" for n, why in doc["skipped"].items()) + ".")
    out += unavailable_lines(doc)
    return out


def unavailable_lines(doc: dict) -> list[str]:
    """One line per section the report could not have for its target, and why (doc["unavailable"])."""
    gone = doc.get("unavailable") or {}
    if not gone:
        return []
    return ["\nUnavailable for this target:\n"] + [f"- {section}: {why}" for section, why in gone.items()]


def exactness_configs(rows: list[dict]) -> list[dict]:
    """The exactness rows folded to one per configuration (the target sampled directly; a draft's chain; each
    tree shape), in the rows' order: how many contexts it was tested at, its worst context's row (the smallest
    p-value; for the target, which has none, the largest TV) and the verdict, CHECK if any context's is."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["draft"], (r.get("tree") or {}).get("shape")), []).append(r)
    out = []
    for mine in groups.values():
        tested = [r for r in mine if r["p_value"] is not None]
        worst = min(tested, key=lambda r: r["p_value"]) if tested else max(mine, key=lambda r: r["tv"])
        verdicts = [verdict(r) for r in mine]
        out.append({"row": worst, "contexts": len(mine), "verdict": "CHECK" if "CHECK" in verdicts else verdict(worst)})
    return out


def _exactness(doc: dict) -> list[str]:
    """Table 1: one row per configuration at its worst context; each context's row stays in report.json."""
    ex = doc["exactness"]
    contexts = list(dict.fromkeys(r["context"] for r in ex))
    tested = [r for r in ex if r["p_value"] is not None]
    threshold = f"{tested[0]['p_threshold']:.2g}" if tested and "p_threshold" in tested[0] else "the threshold"
    out = [f"\n## 1. Exactness (first generated {words(doc)['unit']}, {ex[0]['samples']} draws, k = {_chains(ex)[-1]['k']} "
           f"and every tree configuration, at {len(contexts)} workload context(s))\n"]
    out.append(table(["draft", "configuration", "contexts", "worst context", "chi-square p", "total variation",
                       "baseline TV (median, range)", "verdict"], [
        ["target, sampled directly (baseline)" if r["draft"] == "target" else r["draft"],
         "" if r["draft"] == "target" else config_label(r), g["contexts"], r["context"],
         "" if r["p_value"] is None else f"{r['p_value']:.3f}", f"{r['tv']:.4f}",
         f"{r['baseline_tv']:.4f} ({r['baseline_tv_min']:.4f}-{r['baseline_tv_max']:.4f})", g["verdict"]]
        for g in exactness_configs(ex) for r in [g["row"]]]))
    out.append(f"\nOne row per configuration, at the context where its chi-square p-value is smallest (the "
               f"target's: where its TV is largest). A configuration is CHECK when any context's p-value is at or "
               f"below {threshold} (0.001 over the {len(tested)} tests, Bonferroni), else exact; TV beside the "
               f"range sampling the target directly gives is information, not a verdict. Every context's row is "
               f"in report.json (`exactness`).")
    return out


def _acceptance(doc: dict) -> list[str]:
    """Table 2 (chains; the trees' 2a) and 2b, the write-up's own table."""
    s, u = doc["settings"], words(doc)
    w = s["workload"]
    out = []
    out.append(f"\n## 2. Acceptance over the workload ({w['items']} run(s) of {s['chars']} {u['units']}; pooled, and "
               f"spread across runs)\n")
    out.append(table(["draft", "k", "acceptance", "α (per position)", u["per_target_pass"], "E(α,k)",
                       "per run: median (IQR; min-max)", "target passes", "rounds by accepted count"], [
        [r["draft"], r["k"], f"{r['acceptance']:.3f}", f"{r['alpha']:.3f}", f"{r['chars_per_pass']:.2f}",
         f"{r['expected_length']:.2f}", spread(r["summary"]["chars_per_pass"]), r["target_passes"], _bunching(r)]
        for r in _chains(doc["acceptance"])]))
    out.append(f"\nacceptance and {u['per_target_pass']} are pooled over the runs (totals); the spread is of each "
               f"run's {u['per_pass']}. α is the per-position acceptance probability of Leviathan's model, estimated "
               f"by maximum likelihood from the rounds' accepted counts; E(α,k) the {u['units']} per round it "
               "predicts. \"bunched\" marks a row whose counts reject that geometric model (chi-square p < 0.01) "
               "with more fully accepted rounds than it allows.")
    out += tree_acceptance(doc)
    if doc.get("acceptance_writeup"):
        aw = doc["acceptance_writeup"]
        out.append(f"\n### 2b. The write-up's table: prompt {aw['prompt']!r}, seed {aw['seed']}\n")
        out.append(table(["draft", "k", "acceptance", u["per_target_pass"], "target passes"], [
            [r["draft"], r["k"], f"{r['acceptance']:.3f}", f"{r['chars_per_pass']:.2f}", r["target_passes"]]
            for r in aw["rows"]]))
    return out


def _speedup(doc: dict) -> list[str]:
    """Table 3: the noise floor first, then every configuration."""
    out = []
    f = doc["noise_floor"]
    out.append("\n## 3. Measured speedup (Σ target-only time / Σ speculative time over the workload's runs; "
               "alternated pairs, rows interleaved)\n")
    out.append(table(["draft", "k", words(doc)["per_pass"], "speedup", "95% re-run interval", "95% CI over prompts",
                       "per-pair range", "pairs", "note"], [
        ["noise floor: target-only / target-only (A/A)", "", "1.00", f"{f['measured']:.3f}",
         f"{f['ci_low']:.3f}-{f['ci_high']:.3f}", _workload_ci(f), f"{f['min']:.2f}-{f['max']:.2f}", f["pairs"], ""]] + [
        [r["draft"], config_cell(r), f"{r['chars_per_pass']:.2f}", f"{r['measured']:.2f}",
         f"{r['ci_low']:.2f}-{r['ci_high']:.2f}", _workload_ci(r), f"{r['measured_min']:.2f}-{r['measured_max']:.2f}",
         r["pairs"], _noise_note(r, f)] for r in doc["speedup"]]))
    out.append("\nEach pair times target-only and speculative generation of one run (prompt, seed) back to back; a "
               "row's pairs cycle through the runs, so its speedup is the workload's: the ratio of total times, "
               "what a user waiting for the whole workload sees. The re-run interval is where an independent "
               "re-run's figure lands with 95 % probability (moving-block bootstrap over the pairs in the order they "
               "ran, ± t·√2·SE; never narrower than the noise floor's at the row's pair count), with the machine's "
               f"drift added in quadrature (τ = {f.get('drift', 0.0):.1%}: how far ratios moved between the first and "
               f"second half of this run, beyond their pairs' noise, pooled over {f.get('drift_rows', 0)} rows)"
               f"{_between_note(f.get('between_run'))}. "
               "The CI over prompts resamples the runs (each run's two times together): how much "
               "the figure depends on which prompts the workload holds; set it against the noise floor's interval, "
               "which is timing noise alone. A row is noisy when its timing interval (before drift, with what the "
               "prompt mix does to each pair taken out by its run's pass count) is more than twice as wide as the "
               "floor's. The per-pair range is shown as the write-up shows it; it carries no "
               "verdict.")
    return out


def _costs(doc: dict) -> list[str]:
    """Table 4 and the refined model's terms (chains, then trees), then the overhead tables."""
    m, u = doc["machine"], words(doc)
    out = []
    c = doc["costs"]
    out.append(f"\n## 4. Costs ({m['threads']} thread(s); medians of round-robin samples)\n")
    t1 = c["target_pass_us"]
    rows = [["one target pass (1 position)", f"{t1:.0f}", "1.000", "", ""]]
    rows += [[f"one verify pass ({n} positions)", f"{v:.0f}", f"{v / t1:.3f}", "", ""]
             for n, v in c["verify_pass_us"].items() if n != "1"]
    rows += [["target-only step (pass + sampling)", f"{c['step_us']:.0f}", f"{c['step_us'] / t1:.3f}", "", ""]]
    rows += [[f"speculative round k={k} (pass + rule)", f"{v:.0f}", f"{v / t1:.3f}", "", ""]
             for k, v in c["round_us"].items()]
    rows += [[f"one {n} {u['unit']}", f"{d['char_us']:.1f}", f"{d['c']:.3f}", f"{d['weight_bytes']:,}", f"c = {d['c']:.3f}"]
             for n, d in c["drafts"].items()]
    rows += [[f"one tree verify pass ({n} positions: 1 + {int(n) - 1} nodes)", f"{v:.0f}",
              f"{_median(c['tree_verify_ratio_samples'][n]):.3f}", "", "median of per-sample T(N)/T(1)"]
             for n, v in c.get("tree_verify_pass_us", {}).items()]
    out.append(table(["what", "µs", "÷ target pass", "weight bytes", ""], rows))
    out.append(f"\n{c['samples']} samples. c uses one drafted {u['unit']} at k = {c['draft_k']}. Inside a simulated round "
               "at the generation's mean position (the draft proposes k, then the target verifies and the rule runs),"
               " each part pays the cache misses the other causes; with a target-only step timed once the target "
               "has settled, these are the terms of the refined model, measured before any speedup pair:\n")
    out.append(table(["draft", "k", f"drafted {u['unit']} (µs)", "round without the draft (µs)", "÷ round alone",
                       "target-only step (µs)", "first step (µs)", "first round (µs)"], [
        [n, k, f"{v['char_us']:.1f}", f"{v['round_us']:.0f}", f"{v['round_us'] / c['round_us'][k]:.3f}",
         f"{v['step_us']:.0f}", f"{v['first_step_us']:.0f}", f"{v['first_round_us']:.0f}"]
        for n, per_k in c["loop"].items() for k, v in per_k.items()]))
    out.append(f"\nA generation's first step and first round run over its whole prompt (the prefill; timed at the "
               f"workload's mean prompt, {c['prompt_chars']} {u['units']}); the first round includes the draft's "
               f"reset and its first k {u['units']}.")
    out += tree_costs(c)
    out += overhead_tables(doc)
    return out


def _predicted(doc: dict) -> list[str]:
    """Table 5: the write-up's formula, the prediction before the run and the cost accounting against the measured figure."""
    out = []
    out.append("\n## 5. Predicted against measured\n")
    out.append(table(["draft", "k", "write-up formula", "predicted before the run", "error",
                       "cost accounting", "error", "measured", "note"], [
        [r["draft"], config_cell(r), f"{r['predicted']:.2f}", f"{r['predicted_before']:.2f}",
         f"{r['predicted_before'] / r['measured'] - 1:+.1%}", f"{r['predicted_refined']:.2f}",
         f"{r['predicted_refined'] / r['measured'] - 1:+.1%}", f"{r['measured']:.2f}", _miss_note(r)]
        for r in doc["speedup"]]))
    u = words(doc)
    out.append(f"\nThe write-up's formula is {u['per_pass']} / (1 + k·c). The prediction before the run is the refined "
               f"model (N·step / (passes·round + drafted·drafted {u['unit']}), each of the n runs' first step and "
               "first round priced apart: ((N − n)·step + n·first step) / ((passes − n)·round + (drafted − n·k)·"
               f"drafted {u['unit']} + n·first round)) with the terms of table 4, measured before the first pair, "
               "and the run's deterministic counts. The cost accounting is the same model "
               "with terms sampled right after each pair: it checks that the costs add up, and predicts nothing. "
               f"For a tree, k is its nodes per round and the drafted {u['unit']} a drafted node; the round is the "
               "verify pass over every node plus the walk.")
    return out


def _recommended(doc: dict) -> list[str]:
    """The best k per draft, and the best configuration over chains and trees."""
    out = []
    out.append("\n## Recommended k\n")
    out.append(table(["draft", "best k (predicted before the run)", "predicted", "best k (measured)", "measured",
                       "best k per prompt (k: prompts)"], [
        [n, v["best_k_predicted"], f"{v['predicted']:.2f}", v["best_k_measured"], f"{v['measured']:.2f}",
         " ".join(f"{k}: {c}" for k, c in v["best_k_per_item"].items()) + f" of {v['items_compared']}"]
        for n, v in doc["recommendations"].items() if "best_k_measured" in v]))
    out.append("\n### Best configuration per draft (chains and trees)\n")
    out.append(table(["draft", "best (predicted before the run)", "predicted", "best (measured)", "measured",
                       "95% re-run interval", "best per prompt"], [
        [n, v["best_config_predicted"], f"{v['best_config_predicted_speedup']:.2f}", v["best_config_measured"],
         f"{v['best_config_measured_speedup']:.2f}", "-".join(f"{x:.2f}" for x in v["best_config_measured_ci"]),
         " ".join(f"{k}: {c}" for k, c in v["best_config_per_item"].items()) + f" of {v['configs_items_compared']}"]
        for n, v in doc["recommendations"].items()]))
    return out


def _adaptive_greedy(doc: dict) -> list[str]:
    """Adaptive k and greedy decoding, where the report measured them."""
    out = []
    if doc.get("adaptive"):
        a0 = doc["adaptive"][0]
        out.append(f"\n## Adaptive k (+2 after a fully accepted round, -1 after a rejection; from k = {a0['start_k']},"
                   f" at most {a0['k_max']}; rotated triples, drafts interleaved)\n")
        out.append(table(["draft", "mean k", "acceptance", words(doc)["per_pass"], "target passes", "speedup median",
                           "95% re-run interval", "best fixed k", "adaptive ÷ fixed", "95% re-run interval",
                           "triples"], [
            [r["draft"], f"{r['mean_k']:.2f}", f"{r['acceptance']:.3f}", f"{r['chars_per_pass']:.2f}",
             r["target_passes"], f"{r['measured']:.2f}", f"{r['ci_low']:.2f}-{r['ci_high']:.2f}",
             r["best_fixed_k"], f"{r['vs_fixed_measured']:.3f}", f"{r['vs_fixed_ci_low']:.3f}-{r['vs_fixed_ci_high']:.3f}",
             r["pairs"]] for r in doc["adaptive"]]))
    if "greedy" in doc:
        g = doc["greedy"]
        out.append("\n## Greedy decoding (temperature 0), the best sampled configuration\n")
        out.append(table(["draft", "k", "acceptance", words(doc)["per_pass"], "target passes", "median",
                           "95% re-run interval", "range", "pairs"], [[
            g["draft"], g["k"], f"{g['acceptance']:.3f}", f"{g['chars_per_pass']:.2f}", g["target_passes"],
            f"{g['measured']:.2f}", f"{g['ci_low']:.2f}-{g['ci_high']:.2f}",
            f"{g['measured_min']:.2f}-{g['measured_max']:.2f}", g["pairs"]]]))
    return out


def _time_spent(doc: dict) -> list[str]:
    """The sections' seconds against their allotments."""
    s = doc["settings"]
    out = []
    out.append(f"\n## Time spent (budget {s['budget']:.0f} s)\n")
    out.append(table(["section", "seconds", "allotted"], [
        [x["section"], f"{x['seconds']:.1f}", "" if x["allotted"] is None else f"{x['allotted']:.1f}"]
        for x in doc["sections"]] + [["all (measured)", f"{doc['wall_seconds']:.1f}", f"{s['budget']:.0f}"]]))
    return out


def overhead_tables(doc: dict) -> list[str]:
    """The overhead section's two tables: the target pass against its floor, and the attribution per backend
    (none for a report saved before the section existed; one line when it was skipped)."""
    setup = doc.get("overhead_setup")
    if setup is None:
        return []
    if setup.get("skipped"):
        return [f"\n## Overhead\n\nNot measured: {setup['skipped']}."]
    rows, m = doc["overhead"], setup["machine"]
    out = [f"\n## Overhead: the {rows[0]['backend']} target pass against its roofline floor "
           f"({setup['context_pos']} cached positions)\n"]
    out.append(table(["positions", "measured µs", "floor µs", "overhead share (1 - floor / measured)", "MFLOP",
                       "KB read"], [
        [r["positions"], f"{r['measured_us']:.1f}", known(r["floor_us"], ".1f"), known(r["share"], ".1%"),
         known(r["flops"], ".2f", 1e6), known(r["bytes"], ".0f", 1e3)] for r in rows]))
    out.append(f"\nThe floor is max(FLOPs / GEMM throughput, bytes / cache bandwidth), both measured here "
               f"({m['threads']} thread(s)): GEMM {m['matmul_gflops']:.1f} GFLOP/s, cache reads "
               f"{m['cache_gbps']:.1f} GB/s (memory {m['memory_gbps']:.1f} GB/s). Measured: the median pass."
               + ("" if rows[0]["flops"] is not None else " The target's architecture has no counted FLOPs or bytes "
                  "(`overhead.pass_shape`): its work, floor and share are unknown, not guessed."))
    for backend, scopes in doc["attribution"].items():
        out.append(f"\n### Where the time goes, {backend} backend: a target-only step and a speculative round "
                   f"({setup['draft']}, k = {setup['k']}), µs\n")
        out.append(_attribution_table(scopes, setup["totals"][backend]))
    out.append("\nThe labelled spans -- logits to sample, the rule, the draft -- are timed directly (perf_counter, "
               "about a microsecond a span); the rest, the target's forward and the loop around it, is split by "
               "torch.profiler: the self CPU time of the ops, by category, and what no op accounts for (framework "
               "dispatch and Python, less the profiler's own cost per event recorded), in proportion, scaled onto "
               "the rest's timed µs (the profiler stretches it by the factor shown). An ONNX Runtime run (the onnx "
               "backend's pass with its softmax or sampling) is timed as a span and split the same way by ONNX "
               "Runtime's own profiler: its kernels by category, the rest of the run (executor, binding) as "
               "dispatch. So the categories sum to the accounted time, the timed blocks' wall time, held against "
               "the same work run bare as the median ratio of neighbouring blocks. torch.profiler sees no op "
               "inside numpy's forward: it lands in framework dispatch and Python."
               + (f" The {OLD_ROUND} column is the reference code (the draft's `propose_reference`) timed in the "
                  f"same alternated run as the lean round, over the same rounds; {CAME_BACK} is the old round's "
                  f"µs less the lean round's: what the lean code saved, per category."
                  if any(OLD_ROUND in scopes for scopes in doc["attribution"].values()) else ""))
    return out


def _attribution_table(scopes: dict[str, dict[str, float]], totals: dict[str, dict]) -> str:
    """One backend's attribution: category -> µs per scope (the old and the lean round side by side, and what came
    back, where the report has the old round), then the totals its report version recorded."""
    rows = [[name, *scope_cells({s: cats[name] for s, cats in scopes.items()})] for name in scopes["step"]]
    first = totals["step"]
    for key, what in ((("accounted_us", "accounted (sum of the above)"),
                       ("measured_us", "measured untimed"),
                       ("accounted_ratio", "accounted / untimed (median of neighbouring blocks)"),
                       ("stretch", "the profiler's stretch of the rest (x)"))
                      if "accounted_ratio" in first else
                      (("accounted_us", "accounted (sum of the above)"),
                       ("measured_us", "measured without the profiler"),
                       ("profiler_us", "the profiler's own cost (taken out)"))
                      if "accounted_us" in first else  # a report from before the cost was taken out
                      (("profiled_us", "profiled (sum of the above)"),
                       ("measured_us", "measured without the profiler"))):
        ratio = key in ("accounted_ratio", "stretch")
        rows.append([what, *scope_cells({s: t[key] for s, t in totals.items() if s in scopes},
                                        ".3f" if ratio else ".1f", not ratio)])
    return table(["category", *scope_header(scopes)], rows)


def _workload_ci(r: dict) -> str:
    if r.get("items", 1) < 2:
        return "(one prompt)"
    return f"{r['workload_ci_low']:.2f}-{r['workload_ci_high']:.2f}"


def _bunching(r: dict) -> str:
    hist = " ".join(map(str, r["accepted_per_position"]))
    if r.get("bunched"):
        return f"{hist} (bunched, p = {r['geometric_p']:.1g})"
    return hist


def _between_note(br: dict | None) -> str:
    """What the intervals carry for changes between runs (machine_record), as a clause of table 3's note."""
    if not br or br.get("source") == "off":
        return ", and no between-run term (--between-run off)"
    if br.get("source") == "default":
        return (f", and a default between-run term in quadrature too (τ = {br['tau']:.1%}): this machine has "
                f"{br.get('calibrations', 0)} recorded calibration(s), fewer than the {MIN_CALIBRATIONS} its own term "
                "needs, and a re-run meets another state of it; `specdec report --repeat 2` records one")
    if br.get("source") == "none":  # a report made before the default existed
        return (", and no between-run term yet: this machine has no recorded calibration, so a change of its state "
                "between runs is not covered (`specdec report --repeat 2` records one)")
    return (f", and this machine's between-run term in quadrature too (τ = {br['tau']:.1%}: the 95 % conformal "
            f"quantile of what {br['calibrations']} recorded calibration(s) needed beyond their intervals, at "
            f"least what their pairs needed to pass)")


def _noise_note(r: dict, floor: dict) -> str:
    if r["pairs"] < 3:
        return f"{r['pairs']} pair(s): too few for an interval; give a larger --budget"
    if r["noisy"]:
        w = r.get("timing_width") or r["width"]
        return (f"noisy: timing interval {w:.0%} of the figure, {w / floor['width']:.1f}x the noise floor's; "
                f"give a larger --budget or a quieter machine")
    return ""


def _miss_note(r: dict) -> str:
    """For a row a prediction misses by more than 5 %: what moved, the larger first.

    Before the run: how far each term sampled beside the pairs moved from the cost table's (the machine's state
    changed between them). Cost accounting: what the paired runs imply for each side against its terms --
    target_only_error against the steps (and first steps), speculative_error against passes·round +
    drafted·draft_char (and first rounds), named after the term that makes up most of that time.
    """
    notes = []
    if abs(r["predicted_before"] / r["measured"] - 1) > PREDICTION_TOLERANCE:
        moved = sorted(((k, r["terms_us"][k] / v - 1) for k, v in r["before_terms_us"].items()), key=lambda t: -abs(t[1]))
        notes.append("terms moved since the cost table: " + ", ".join(f"{k} {off:+.1%}" for k, off in moved))
    if abs(r["predicted_refined"] / r["measured"] - 1) > PREDICTION_TOLERANCE:
        spec = "draft character cost" if r["draft_share"] > 0.5 else "verify round cost"
        terms = sorted([("target-only step", r["target_only_error"]), (spec, r["speculative_error"])],
                       key=lambda t: -abs(t[1]))
        notes.append("accounting off in the paired runs: " + ", ".join(f"{n} {off:+.1%}" for n, off in terms))
    return "; ".join(notes)


def findings(doc: dict) -> list[str]:
    """What the figures say, in sentences computed from them (nothing here is written by hand): the chains'
    drafts, the write-up's three drafts, how well each prediction held, adaptive k, then the trees'."""
    sp = _chains(doc["speedup"])  # the chain findings; the trees' come last
    drafts = list(dict.fromkeys(r["draft"] for r in sp))
    ks = sorted({r["k"] for r in sp})
    c = {d: doc["costs"]["drafts"][d]["c"] for d in drafts}
    best = {d: max((r for r in sp if r["draft"] == d), key=lambda r: r["measured"]) for d in drafts}
    acc = {(r["draft"], r["k"]): r for r in _chains(doc["acceptance"])}
    out = _draft_findings(drafts, ks[0], acc, c, best)
    out += _writeup_draft_findings(doc["costs"], drafts, acc, ks[-1], c, best)
    out += _formula_finding(doc["costs"], sp, ks)
    out += _prediction_findings(doc)
    if doc.get("adaptive"):
        out.append(_adaptive_finding(doc["adaptive"]))
    return out + best_exact(doc)


def _draft_findings(drafts: list[str], k1: int, acc: dict, c: dict, best: dict) -> list[str]:
    """The best and worst acceptance at the smallest k, the drafts faster than target-only, the slowest."""
    out = []
    ranked = sorted(drafts, key=lambda d: acc[d, k1]["acceptance"], reverse=True)
    for label, d in (("Best", ranked[0]), ("Worst", ranked[-1])):
        out.append(f"{label} acceptance at k={k1}: {d}, {acc[d, k1]['acceptance']:.3f} with c = {c[d]:.3f}; "
                   f"its best measured speedup is {best[d]['measured']:.2f}x (k={best[d]['k']}).")
    winners = [d for d in drafts if best[d]["ci_low"] > 1.0]
    out.append("Faster than target-only (95 % CI above 1): " + (", ".join(
        f"{d} {best[d]['measured']:.2f}x at k={best[d]['k']} (c = {c[d]:.3f})" for d in winners)
        if winners else "none.") + ".")
    slowest = min(drafts, key=lambda d: best[d]["measured"])
    out.append(f"Slowest: {slowest}, {best[slowest]['measured']:.2f}x at its best k ({best[slowest]['k']}), "
               f"c = {c[slowest]:.3f}.")
    return out


def _writeup_draft_findings(costs: dict, drafts: list[str], acc: dict, kmax: int, c: dict, best: dict) -> list[str]:
    """The write-up's three drafts (bigram, int8, int4) against what it found, and int8's storage against its
    time; the real int8 kernel against rounded float32."""
    out = []
    if {"int8", "int4", "bigram"} <= set(drafts):
        a8, a4 = acc["int8", kmax], acc["int4", kmax]
        trio = ("bigram", "int8", "int4")
        slow3 = min(trio, key=lambda d: best[d]["measured"])
        fast3 = [d for d in trio if best[d]["ci_low"] > 1.0]
        out.append(f"Of the write-up's three drafts, faster than target-only: {', '.join(fast3) or 'none'}; "
                   f"slowest: {slow3}.")
        if slow3 == "int8":
            out.append(f"As in the write-up, the int8 draft is the slowest of them: its acceptance is the highest "
                       f"yet c = {c['int8']:.2f}.")
        else:
            out.append(
                f"Unlike the write-up, int8 is not the slowest of them ({slow3} is): at k={kmax} int8 keeps acceptance "
                f"{a8['acceptance']:.3f} ({a8['chars_per_pass']:.2f} chars per pass) against int4's "
                f"{a4['acceptance']:.3f} ({a4['chars_per_pass']:.2f}) at nearly the same cost (c {c['int8']:.2f} vs "
                f"{c['int4']:.2f}), so the same draft spend buys more characters"
                + (". With c > 1, neither can win." if min(c["int8"], c["int4"]) > 1 else "."))
        b8 = costs["drafts"]["int8"]["weight_bytes"]
        out.append(f"int8 stores its weights packed in {b8:,} bytes against int4's "
                   f"{costs['drafts']['int4']['weight_bytes']:,} yet costs c = {c['int8']:.2f}: unpacked to float32 "
                   f"to compute, quantization here saves storage, not compute memory and not time.")
    if "int8-dynamic" in drafts and "int8" in drafts:
        dyn, rnd = costs["drafts"]["int8-dynamic"]["char_us"], costs["drafts"]["int8"]["char_us"]
        lowers = "lowers" if dyn < rnd else "does not lower"
        out.append(f"The real int8 kernel (torch dynamic quantization) costs {dyn:.0f} µs per drafted character "
                   f"against {rnd:.0f} µs for rounded float32 (c {c['int8-dynamic']:.2f} vs {c['int8']:.2f}): on this "
                   f"machine it {lowers} c.")
    return out


def _formula_finding(costs: dict, sp: list[dict], ks: list[int]) -> list[str]:
    """How often the write-up's formula lands within its tolerance, and the round cost it leaves out."""
    errs = [(r["predicted"] / r["measured"] - 1, r) for r in sp]
    ok = sum(abs(e) <= WRITEUP_TOLERANCE for e, _ in errs)
    e, r = max(errs, key=lambda t: abs(t[0]))
    alone = [costs["round_us"][str(k)] / costs["target_pass_us"] for k in ks]
    after = max(v["round_us"] / costs["round_us"][k] for per in costs["loop"].values() for k, v in per.items())
    return [f"The write-up's formula is within {WRITEUP_TOLERANCE:.0%} of the measured figure on {ok}/{len(errs)} "
            f"rows (worst {e:+.0%}: {r['draft']} k={r['k']}). It prices a round at one target pass; a round here "
            f"costs {alone[0]:.2f}-{alone[-1]:.2f} passes alone (k={ks[0]}..{ks[-1]}), and up to {after:.2f}x that "
            f"right after a transformer draft, whose weights evict the target's from cache."]


def _prediction_findings(doc: dict) -> list[str]:
    """The prediction made before the run and the cost accounting: how many rows each lands within 5 % and
    10 % of, its largest error, how often inside the re-run interval; and how far the machine's state moved."""
    every, out = doc["speedup"], []
    for key, label in (("predicted_before", "The prediction made before the run"),
                       ("predicted_refined", "The cost accounting (terms sampled beside the pairs)")):
        ref = [(x[key] / x["measured"] - 1, x) for x in every]
        ok = sum(abs(e) <= PREDICTION_TOLERANCE for e, _ in ref)
        ok2 = sum(abs(e) <= 2 * PREDICTION_TOLERANCE for e, _ in ref)
        e, r = max(ref, key=lambda t: abs(t[0]))
        inside = sum(x["ci_low"] <= x[key] <= x["ci_high"] for x in every)
        shift = doc.get("state_shift") if key == "predicted_before" else None
        way = "slower" if (shift or 0) > 0 else "faster"
        moved = (f" A target-only step ran {abs(shift):.0%} {way} during the pairs than in the cost table it was "
                 f"made from." if shift is not None else "")
        out.append(f"{label} is within {PREDICTION_TOLERANCE:.0%} of the measured figure on {ok}/{len(ref)} rows "
                   f"and within {2 * PREDICTION_TOLERANCE:.0%} on {ok2}/{len(ref)}, chains and trees (largest error "
                   f"{e:+.1%}: {r['draft']} {config_cell(r)}), and inside the measured figure's re-run interval on "
                   f"{inside}/{len(ref)}.{moved}")
    return out


def _adaptive_finding(rows: list[dict]) -> str:
    side = lambda r: ("faster" if r["vs_fixed_ci_low"] > 1 else "slower" if r["vs_fixed_ci_high"] < 1
                      else "no different")
    return "Adaptive k against the best fixed k (95 % CI of the ratio): " + "; ".join(
        f"{r['draft']} {side(r)} ({r['vs_fixed_measured']:.2f}x, mean k {r['mean_k']:.1f} vs {r['best_fixed_k']})"
        for r in rows) + "."
