"""Rendering a report document as Markdown (also what the terminal shows): the headline (`headline`), then
every table, then the findings (`findings`). The figures are drawn by `figures`. Here: the setup, the tables of
what is counted and what things cost (1, 2, 4: exactness, acceptance, costs) and the time spent; the speedup
tables (3, 5, recommended k, adaptive and greedy) are in `render_speedup`, the trees' in `render_trees`.

Everything here reads only the JSON document that `report.measure` returns, so any saved `report.json`
renders again, on any machine.
"""

from __future__ import annotations

from specdec.report.render_trees import _chains, _median, tree_acceptance, tree_costs
from specdec.report.render_speedup import adaptive_greedy_lines, predicted_lines, recommended_lines, speedup_lines
from specdec.measure.ab import work_costs
from specdec.report.markdown import config_label, spread, table, verdict, words
from specdec.report.findings import findings
from specdec.report.headline import headline, others_note
from specdec.report.anatomy.overhead_text import overhead_tables
from specdec.report.batch.batch_render import batch_lines


def tables(doc: dict) -> str:
    """The report as Markdown (also what the terminal shows): the headline, then every table and the findings."""
    out = [headline(doc)]
    for part in (_setup, _exactness, _acceptance, speedup_lines, _costs, predicted_lines, recommended_lines,
                 adaptive_greedy_lines, batch_lines):
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
           f"{m.get('load_start')} at the start, {m.get('load_end')} at the end{others_note(m)}. {what}; "
           f"{s['chars']} {words(doc)['units']}, "
           f"temperature {s['temperature']}. Budget {s['budget']:.0f} s, measured in {doc['wall_seconds']:.0f} s."]
    t = s.get("target")
    if t and t.get("name") != "shipped":
        out.append(f"\nTarget {t['name']!r}: {t['architecture']}, vocabulary {t['vocab_size']:,}, context "
                   f"{t['context']}, tokenizer {t['tokenizer']}; figures count {t['units']}.")
    if doc.get("skipped"):
        out.append("\nSkipped: " + "; ".join(f"{n} ({why})" for n, why in doc["skipped"].items()) + ".")
    changes = (doc.get("sizing") or {}).get("changes")
    if changes:
        out.append("\nSized for this model (a token costs "
                   f"{doc['sizing']['target_token_s'] * 1e3:.2f} ms here): " + "; ".join(changes) + ".")
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
    out += _engines_acceptance(doc, u)
    out += tree_acceptance(doc)
    if doc.get("acceptance_writeup"):
        aw = doc["acceptance_writeup"]
        out.append(f"\n### 2b. The write-up's table: prompt {aw['prompt']!r}, seed {aw['seed']}\n")
        out.append(table(["draft", "k", "acceptance", u["per_target_pass"], "target passes"], [
            [r["draft"], r["k"], f"{r['acceptance']:.3f}", f"{r['chars_per_pass']:.2f}", r["target_passes"]]
            for r in aw["rows"]]))
    return out


def _engines_acceptance(doc: dict, u: dict) -> list[str]:
    """2c: each chain row's acceptance as the engines define it (docs/definitions.md), over the workload and per
    content category, with 95 % bootstrap intervals over the prompts."""
    rows = []
    for r in _chains(doc["acceptance"]):
        at = [(r.get("engines_temperature", doc.get("temperature")), r.get("engines")),
              (0.0, r.get("engines_greedy"))]
        for temp, engines in at:
            for cat, e in (engines or {}).items():
                ci = e["intervals"]
                rows.append([r["draft"], r["k"], "-" if temp is None else f"{temp:g}", cat, ci["prompts"],
                             _ci(e["acceptance_length"], ci["acceptance_length"]),
                             " ".join(_rate(x) for x in e["per_position"]),
                             " ".join(_rate(x) for x in e["conditional"]), _ci(e["acceptance"], ci["acceptance"],
                                                                              "{:.3f}")])
    if not rows:
        return []
    return ["\n### 2c. Acceptance as the engines define it (per content category, at the report's temperature and "
            "greedy at the largest k; [95 % bootstrap interval over prompts])\n",
            table(["draft", "k", "T", "category", "prompts", "acceptance length (vLLM, SGLang)",
                                   "per position (vLLM, unconditional)", "conditional", "acceptance (llama.cpp)"], rows),
            f"\nacceptance length = 1 + accepted / rounds ({u['units']} a round emits); per position: the share of "
            "rounds whose i-th draft was accepted; conditional: of the rounds that reached draft i."]


def _rate(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _ci(x, ci, fmt: str = "{:.2f}") -> str:
    if x is None:
        return "-"
    return fmt.format(x) + (f" [{fmt.format(ci[0])}-{fmt.format(ci[1])}]" if ci else "")


def _costs(doc: dict) -> list[str]:
    """Table 4 and the refined model's terms (chains, then trees), then the overhead tables."""
    m, u = doc["machine"], words(doc)
    out = []
    c = doc["costs"]
    out.append(f"\n## 4. Costs ({m['threads']} thread(s); medians of round-robin samples)\n")
    t1 = c["target_pass_us"]
    counted = work_costs.figures(doc)
    rows = [["one target pass (1 position)", f"{t1:.0f}", "1.000", "", *_work_cells(counted.get("pass")), ""]]
    rows += [[f"one verify pass ({n} positions)", f"{v:.0f}", f"{v / t1:.3f}", "", "", "", ""]
             for n, v in c["verify_pass_us"].items() if n != "1"]
    rows += [["target-only step (pass + sampling)", f"{c['step_us']:.0f}", f"{c['step_us'] / t1:.3f}", "", "", "", ""]]
    rows += [[f"speculative round k={k} (pass + rule)", f"{v:.0f}", f"{v / t1:.3f}", "", "", "", ""]
             for k, v in c["round_us"].items()]
    rows += [[f"one {n} {u['unit']}", f"{d['char_us']:.1f}", f"{d['c']:.3f}", f"{d['weight_bytes']:,}",
              *_work_cells(counted.get(f"draft {n}")), f"c = {d['c']:.3f}"] for n, d in c["drafts"].items()]
    rows += [[f"one tree verify pass ({n} positions: 1 + {int(n) - 1} nodes)", f"{v:.0f}",
              f"{_median(c['tree_verify_ratio_samples'][n]):.3f}", "", "", "", "median of per-sample T(N)/T(1)"]
             for n, v in c.get("tree_verify_pass_us", {}).items()]
    out.append(table(["what", "µs", "÷ target pass", "weight bytes", "instructions", "ns / instruction", ""], rows))
    out.append(_work_note(doc))
    out.append(f"\n{c['samples']} samples. c uses one drafted {u['unit']} at k = {c['draft_k']}. Inside a simulated round "
               "at the generation's mean position (the draft proposes k, then the target verifies and the rule runs),"
               " each part pays the cache misses the other causes; with a target-only step timed once the target "
               "has settled, these are the terms of the refined model, measured before any speedup pair:\n")
    alone = {n: {k: drafts_up_to(doc, n, k) for k in per_k} for n, per_k in c["loop"].items()}
    out.append(table(["draft", "k", f"drafted {u['unit']} (µs)", "round without the draft (µs)", "÷ round alone",
                       "add-on (µs)", "target-only step (µs)", "first step (µs)", "first round (µs)"], [
        [n, k if alone[n][k] == k else f"{k} (drafts {alone[n][k]})", f"{v['char_us']:.1f}", f"{v['round_us']:.0f}",
         f"{v['round_us'] / c['round_us'][alone[n][k]]:.3f}", f"{v['round_us'] - c['round_us'][alone[n][k]]:+.0f}",
         f"{v['step_us']:.0f}", f"{v['first_step_us']:.0f}", f"{v['first_round_us']:.0f}"]
        for n, per_k in c["loop"].items() for k, v in per_k.items()]))
    out.append("\nThe add-on is what a draft adds to the target's round beyond its own proposal: the round with it "
               "less the round alone (no draft; the table above) at the k it drafts -- the misses its proposal leaves "
               "the verify pass and, for a draft that reads the target's states, their hand-off (the pass's extra "
               "output, the states handed after each verify pass). \"drafts K\": a draft that proposes at most K "
               "(medusa's heads) verifies K + 1 positions whatever k asks, so it is set against the round alone at K. "
               "The refined model prices each draft's rounds at its own round(k), so the add-on is in every prediction.")
    out.append(f"\nA generation's first step and first round run over its whole prompt (the prefill; timed at the "
               f"workload's mean prompt, {c['prompt_chars']} {u['units']}); the first round includes the draft's "
               f"reset and its first k {u['units']}.")
    out += tree_costs(c)
    out += overhead_tables(doc)
    return out


def drafts_up_to(doc: dict, draft: str, k: str) -> str:
    """The k (a key of the cost table's rounds) whose round alone a draft's round at k is set against: the
    smallest measured k at which its chain acceptance row drafted as many as at k (a draft that proposes at most
    K drafts the same at every k >= K), else k itself."""
    rows = {str(r["k"]): r.get("drafted") for r in doc.get("acceptance", [])
            if r.get("draft") == draft and r.get("tree") is None}
    if rows.get(k) is None:
        return k
    same = [j for j in doc["costs"]["round_us"] if rows.get(j) == rows[k] and int(j) <= int(k)]
    return min(same, key=int, default=k)


def _work_cells(term: dict | None) -> list[str]:
    if term is None:
        return ["", ""]
    ns = term["ns_per_instruction"]
    return [f"{term['instructions']:,.0f}", f"{ns:.3f}" if ns is not None else ""]


def _work_note(doc: dict) -> str:
    """Which counter gave the work columns (instructions per call outside the allocators, the mean over the
    layouts; a drafted token's is its call's over draft_k), or why they are empty."""
    w = doc.get("work")
    if not w:
        return "\nWork: not counted (`specdec report` counts it after the timed sections; `report.measure` alone does not)."
    if not w.get("rows"):
        return f"\nWork: not counted: {w.get('reason', '')}."
    return (f"\nWork: {w['name']}, in a worker of this checkout after the timed sections ({w['seconds']:.0f} s): "
            f"instructions per call outside the allocators, the mean over {len(w.get('layouts') or [1])} layouts "
            f"(docs/work.md); a drafted "
            f"{words(doc)['unit']}'s is a proposal of k = {w['draft_k']} over {w['draft_k']}. ns / instruction is the "
            f"cost table's time over them, so a change in time splits into work and speed.")


def _time_spent(doc: dict) -> list[str]:
    """The sections' seconds against their allotments."""
    s = doc["settings"]
    out = []
    out.append(f"\n## Time spent (budget {s['budget']:.0f} s)\n")
    out.append(table(["section", "seconds", "allotted"], [
        [x["section"], f"{x['seconds']:.1f}", "" if x["allotted"] is None else f"{x['allotted']:.1f}"]
        for x in doc["sections"]] + [["all (measured)", f"{doc['wall_seconds']:.1f}", f"{s['budget']:.0f}"]]))
    return out


def _bunching(r: dict) -> str:
    hist = " ".join(map(str, r["accepted_per_position"]))
    if r.get("bunched"):
        return f"{hist} (bunched, p = {r['geometric_p']:.1g})"
    return hist
