"""The report's speedup tables, rendered from its document: table 3 (the measured speedups beside the A/A noise
floor, with each row's note), table 5 (predicted against measured, and what moved where a prediction missed), the
recommended k and configuration per draft, adaptive k and greedy decoding. `render.tables` places them.
"""

from __future__ import annotations

from specdec.measure.machine_record import MIN_CALIBRATIONS
from specdec.report.headline import PREDICTION_TOLERANCE
from specdec.report.markdown import config_cell, interval, table, words


def speedup_lines(doc: dict) -> list[str]:
    """Table 3: the noise floor first, then every configuration."""
    out = []
    f = doc["noise_floor"]
    out.append("\n## 3. Measured speedup (Σ target-only time / Σ speculative time over the workload's runs; "
               "alternated pairs, rows interleaved)\n")
    out.append(table(["draft", "k", words(doc)["per_pass"], "speedup", "95% re-run interval", "95% CI over prompts",
                       "per-pair range", "pairs", "note"], [
        ["noise floor: target-only / target-only (A/A)", "", "1.00", f"{f['measured']:.3f}",
         interval(f["ci_low"], f["ci_high"], f["pairs"], 3), _workload_ci(f), f"{f['min']:.2f}-{f['max']:.2f}",
         f["pairs"], ""]] + [
        [r["draft"], config_cell(r), f"{r['chars_per_pass']:.2f}", f"{r['measured']:.2f}",
         interval(r["ci_low"], r["ci_high"], r["pairs"]), _workload_ci(r), f"{r['measured_min']:.2f}-{r['measured_max']:.2f}",
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


def _workload_ci(r: dict) -> str:
    if r.get("items", 1) < 2:
        return "(one prompt)"
    return f"{r['workload_ci_low']:.2f}-{r['workload_ci_high']:.2f}"


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


def predicted_lines(doc: dict) -> list[str]:
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


def recommended_lines(doc: dict) -> list[str]:
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


def adaptive_greedy_lines(doc: dict) -> list[str]:
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
