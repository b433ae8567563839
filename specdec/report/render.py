"""Rendering a report document: the Markdown tables (also what the terminal shows), the findings, the figure.

Everything here reads only the JSON document that `report.measure` returns, so any saved `report.json`
renders again, on any machine.
"""

from __future__ import annotations

from pathlib import Path

from specdec.report.render_trees import _chains, _median, best_exact, tree_acceptance, tree_costs
from specdec.report.markdown import config_cell, spread, table, verdict

PREDICTION_TOLERANCE = 0.05  # the refined model, before the run and as accounting, is held to 5 %
WRITEUP_TOLERANCE = 0.10  # the write-up's formula is judged at 10 %


def plot(doc: dict, path: Path) -> bool:
    """Measured speedup against k per draft (band: the re-run interval), the write-up's formula dashed, the
    prediction made before the run dotted with crosses, a line at 1.0."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    rows = _chains(doc["speedup"])  # against k: the tree rows are in the tables and the per-prompt figure
    for i, name in enumerate(dict.fromkeys(r["draft"] for r in rows)):
        mine = sorted((r for r in rows if r["draft"] == name), key=lambda r: r["k"])
        ks = [r["k"] for r in mine]
        color = f"C{i}"
        ax.plot(ks, [r["measured"] for r in mine], "o-", color=color, label=name)
        ax.fill_between(ks, [r["ci_low"] for r in mine], [r["ci_high"] for r in mine], color=color, alpha=0.15)
        ax.plot(ks, [r["predicted"] for r in mine], "--", color=color, alpha=0.7)
        ax.plot(ks, [r["predicted_before"] for r in mine], ":", marker="x", color=color, alpha=0.9)
    ax.axhline(1.0, color="black", lw=0.8)
    drafts_legend = ax.legend(fontsize=7, loc="upper left", title="draft", title_fontsize=7)
    ax.add_artist(drafts_legend)
    styles = [plt.Line2D([], [], color="gray", marker="o", ls="-", label="measured median (band: 95 % re-run interval)"),
              plt.Line2D([], [], color="gray", ls="--", label="predicted: cpp / (1 + k·c)"),
              plt.Line2D([], [], color="gray", ls=":", marker="x", label="predicted before the run: refined model")]
    ax.legend(handles=styles, fontsize=7, loc="upper center")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({r["k"] for r in rows}), [str(k) for k in sorted({r["k"] for r in rows})])
    ax.set_xlabel("k (characters drafted per round)")
    ax.set_ylabel("speedup over target-only (x)")
    m = doc["machine"]
    ax.set_title(f"speculative decoding, {m['threads']} thread(s), {m['device']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_items(doc: dict, path: Path) -> bool:
    """Per draft, the per-prompt speedups at each k as a box (whiskers: min-max), the row's figure (the ratio
    of total times) as a diamond, and the noise floor's interval as a grey band around 1.0."""
    rows = doc["speedup"]
    if max(r["items"] for r in rows) < 2:
        return False  # one prompt: nothing to spread
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    drafts = list(dict.fromkeys(r["draft"] for r in rows))
    cols = min(3, len(drafts))
    nrows = -(-len(drafts) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.4 * cols, 2.8 * nrows), dpi=110, squeeze=False)
    f = doc["noise_floor"]
    for ax, name in zip(axes.flat, drafts):
        mine = sorted((r for r in rows if r["draft"] == name), key=lambda r: (r.get("tree") is not None, r["k"]))
        data = [[e["ratio"] for e in r["per_item_ratios"]] for r in mine]
        ax.axhspan(f["ci_low"], f["ci_high"], color="gray", alpha=0.2, lw=0)
        ax.boxplot(data, whis=(0, 100), widths=0.5)
        ax.plot(range(1, len(mine) + 1), [r["measured"] for r in mine], "D", color="C3", ms=5)
        ax.axhline(1.0, color="black", lw=0.7)
        ax.set_xticks(range(1, len(mine) + 1), [f"k={r['k']}" if r.get("tree") is None else r["tree"]["shape"].replace("budget ", "b")
                                                  for r in mine])
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(drafts):]:
        ax.axis("off")
    fig.suptitle(f"speedup per prompt ({doc['settings']['workload']['name']}); diamond: the workload's "
                 f"(Σ target-only / Σ speculative); grey: A/A noise floor", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def tables(doc: dict) -> str:
    """Every table of the report as Markdown (also what the terminal shows)."""
    m, s = doc["machine"], doc["settings"]
    w = s["workload"]
    pinned = f", pinned to CPU {','.join(map(str, m['cpu_affinity']))}" if m.get("pinned") else ""
    what = (f"Prompt {s['prompt']!r}, seed {w['seeds'][0]}" if s.get("prompt") is not None else
            f"Workload {w['name']!r}: {w['items']} prompt(s), seeds {', '.join(map(str, w['seeds']))} "
            f"(one run per prompt)")
    out = [f"# specdec report\n\n{m['cpu']}, {m['threads']} thread(s) ({m.get('interop_threads')} inter-op){pinned}, "
           f"{m['device']}, torch {m['torch_version']}, commit {m.get('commit') or 'n/a'}, {m['date']}; load average "
           f"{m.get('load_start')} at the start, {m.get('load_end')} at the end. {what}; {s['chars']} characters, "
           f"temperature {s['temperature']}. Budget {s['budget']:.0f} s, measured in {doc['wall_seconds']:.0f} s."]
    out += [f"\n**{x}**" for x in doc.get("warnings", [])]
    if doc.get("skipped"):
        out.append("\nSkipped: " + "; ".join(f"{n} ({why})" for n, why in doc["skipped"].items()) + ".")
    ex = doc["exactness"]
    contexts = list(dict.fromkeys(r["context"] for r in ex))
    out.append(f"\n## 1. Exactness (first generated character, {ex[0]['samples']} draws, k = {_chains(ex)[-1]['k']} "
               f"and every tree configuration, at "
               f"{len(contexts)} workload context(s))\n")
    out.append(table(["context", "draft", "total variation", "baseline TV (median, range)", "chi-square p",
                       "verdict"], [
        [r["context"], (r["draft"] if r.get("tree") is None else f"{r['draft']} {config_cell(r)}")
         if r["draft"] != "target" else "target, sampled directly (baseline)",
         f"{r['tv']:.4f}", f"{r['baseline_tv']:.4f} ({r['baseline_tv_min']:.4f}-{r['baseline_tv_max']:.4f})",
         "" if r["p_value"] is None else f"{r['p_value']:.3f}", verdict(r)] for r in ex]))
    out.append(f"\n## 2. Acceptance over the workload ({w['items']} run(s) of {s['chars']} characters; pooled, and "
               f"spread across runs)\n")
    out.append(table(["draft", "k", "acceptance", "α (per position)", "chars per target pass", "E(α,k)",
                       "per run: median (IQR; min-max)", "target passes", "rounds by accepted count"], [
        [r["draft"], r["k"], f"{r['acceptance']:.3f}", f"{r['alpha']:.3f}", f"{r['chars_per_pass']:.2f}",
         f"{r['expected_length']:.2f}", spread(r["summary"]["chars_per_pass"]), r["target_passes"], _bunching(r)]
        for r in _chains(doc["acceptance"])]))
    out.append("\nacceptance and chars per target pass are pooled over the runs (totals); the spread is of each "
               "run's chars per pass. α is the per-position acceptance probability of Leviathan's model, estimated "
               "by maximum likelihood from the rounds' accepted counts; E(α,k) the characters per round it "
               "predicts. \"bunched\" marks a row whose counts reject that geometric model (chi-square p < 0.01) "
               "with more fully accepted rounds than it allows.")
    out += tree_acceptance(doc)
    if doc.get("acceptance_writeup"):
        aw = doc["acceptance_writeup"]
        out.append(f"\n### 2b. The write-up's table: prompt {aw['prompt']!r}, seed {aw['seed']}\n")
        out.append(table(["draft", "k", "acceptance", "chars per target pass", "target passes"], [
            [r["draft"], r["k"], f"{r['acceptance']:.3f}", f"{r['chars_per_pass']:.2f}", r["target_passes"]]
            for r in aw["rows"]]))
    f = doc["noise_floor"]
    out.append("\n## 3. Measured speedup (Σ target-only time / Σ speculative time over the workload's runs; "
               "alternated pairs, rows interleaved)\n")
    out.append(table(["draft", "k", "chars per pass", "speedup", "95% re-run interval", "95% CI over prompts",
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
    c = doc["costs"]
    out.append(f"\n## 4. Costs ({m['threads']} thread(s); medians of round-robin samples)\n")
    t1 = c["target_pass_us"]
    rows = [["one target pass (1 position)", f"{t1:.0f}", "1.000", "", ""]]
    rows += [[f"one verify pass ({n} positions)", f"{v:.0f}", f"{v / t1:.3f}", "", ""]
             for n, v in c["verify_pass_us"].items() if n != "1"]
    rows += [["target-only step (pass + sampling)", f"{c['step_us']:.0f}", f"{c['step_us'] / t1:.3f}", "", ""]]
    rows += [[f"speculative round k={k} (pass + rule)", f"{v:.0f}", f"{v / t1:.3f}", "", ""]
             for k, v in c["round_us"].items()]
    rows += [[f"one {n} character", f"{d['char_us']:.1f}", f"{d['c']:.3f}", f"{d['weight_bytes']:,}", f"c = {d['c']:.3f}"]
             for n, d in c["drafts"].items()]
    rows += [[f"one tree verify pass ({n} positions: 1 + {int(n) - 1} nodes)", f"{v:.0f}",
              f"{_median(c['tree_verify_ratio_samples'][n]):.3f}", "", "median of per-sample T(N)/T(1)"]
             for n, v in c.get("tree_verify_pass_us", {}).items()]
    out.append(table(["what", "µs", "÷ target pass", "weight bytes", ""], rows))
    out.append(f"\n{c['samples']} samples. c uses one drafted character at k = {c['draft_k']}. Inside a simulated round "
               "at the generation's mean position (the draft proposes k, then the target verifies and the rule runs),"
               " each part pays the cache misses the other causes; with a target-only step timed once the target "
               "has settled, these are the terms of the refined model, measured before any speedup pair:\n")
    out.append(table(["draft", "k", "drafted character (µs)", "round without the draft (µs)", "÷ round alone",
                       "target-only step (µs)", "first step (µs)", "first round (µs)"], [
        [n, k, f"{v['char_us']:.1f}", f"{v['round_us']:.0f}", f"{v['round_us'] / c['round_us'][k]:.3f}",
         f"{v['step_us']:.0f}", f"{v['first_step_us']:.0f}", f"{v['first_round_us']:.0f}"]
        for n, per_k in c["loop"].items() for k, v in per_k.items()]))
    out.append(f"\nA generation's first step and first round run over its whole prompt (the prefill; timed at the "
               f"workload's mean prompt, {c['prompt_chars']} characters); the first round includes the draft's "
               f"reset and its first k characters.")
    out += tree_costs(c)
    out += overhead_tables(doc)
    out.append("\n## 5. Predicted against measured\n")
    out.append(table(["draft", "k", "write-up formula", "predicted before the run", "error",
                       "cost accounting", "error", "measured", "note"], [
        [r["draft"], config_cell(r), f"{r['predicted']:.2f}", f"{r['predicted_before']:.2f}",
         f"{r['predicted_before'] / r['measured'] - 1:+.1%}", f"{r['predicted_refined']:.2f}",
         f"{r['predicted_refined'] / r['measured'] - 1:+.1%}", f"{r['measured']:.2f}", _miss_note(r)]
        for r in doc["speedup"]]))
    out.append("\nThe write-up's formula is chars per pass / (1 + k·c). The prediction before the run is the refined "
               "model (N·step / (passes·round + drafted·drafted character), each of the n runs' first step and "
               "first round priced apart: ((N − n)·step + n·first step) / ((passes − n)·round + (drafted − n·k)·"
               "drafted character + n·first round)) with the terms of table 4, measured before the first pair, "
               "and the run's deterministic counts. The cost accounting is the same model "
               "with terms sampled right after each pair: it checks that the costs add up, and predicts nothing. "
               "For a tree, k is its nodes per round and the drafted character a drafted node; the round is the "
               "verify pass over every node plus the walk.")
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
    if doc.get("adaptive"):
        a0 = doc["adaptive"][0]
        out.append(f"\n## Adaptive k (+2 after a fully accepted round, -1 after a rejection; from k = {a0['start_k']},"
                   f" at most {a0['k_max']}; rotated triples, drafts interleaved)\n")
        out.append(table(["draft", "mean k", "acceptance", "chars per pass", "target passes", "speedup median",
                           "95% re-run interval", "best fixed k", "adaptive ÷ fixed", "95% re-run interval",
                           "triples"], [
            [r["draft"], f"{r['mean_k']:.2f}", f"{r['acceptance']:.3f}", f"{r['chars_per_pass']:.2f}",
             r["target_passes"], f"{r['measured']:.2f}", f"{r['ci_low']:.2f}-{r['ci_high']:.2f}",
             r["best_fixed_k"], f"{r['vs_fixed_measured']:.3f}", f"{r['vs_fixed_ci_low']:.3f}-{r['vs_fixed_ci_high']:.3f}",
             r["pairs"]] for r in doc["adaptive"]]))
    if "greedy" in doc:
        g = doc["greedy"]
        out.append("\n## Greedy decoding (temperature 0), the best sampled configuration\n")
        out.append(table(["draft", "k", "acceptance", "chars per pass", "target passes", "median",
                           "95% re-run interval", "range", "pairs"], [[
            g["draft"], g["k"], f"{g['acceptance']:.3f}", f"{g['chars_per_pass']:.2f}", g["target_passes"],
            f"{g['measured']:.2f}", f"{g['ci_low']:.2f}-{g['ci_high']:.2f}",
            f"{g['measured_min']:.2f}-{g['measured_max']:.2f}", g["pairs"]]]))
    out.append("\n## Findings\n")
    out += [f"- {line}" for line in findings(doc)]
    out.append(f"\n## Time spent (budget {s['budget']:.0f} s)\n")
    out.append(table(["section", "seconds", "allotted"], [
        [x["section"], f"{x['seconds']:.1f}", "" if x["allotted"] is None else f"{x['allotted']:.1f}"]
        for x in doc["sections"]] + [["all (measured)", f"{doc['wall_seconds']:.1f}", f"{s['budget']:.0f}"]]))
    return "\n".join(out) + "\n"


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
        [r["positions"], f"{r['measured_us']:.1f}", f"{r['floor_us']:.1f}", f"{r['share']:.1%}",
         f"{r['flops'] / 1e6:.2f}", f"{r['bytes'] / 1e3:.0f}"] for r in rows]))
    out.append(f"\nThe floor is max(FLOPs / GEMM throughput, bytes / cache bandwidth), both measured here "
               f"({m['threads']} thread(s)): GEMM {m['matmul_gflops']:.1f} GFLOP/s, cache reads "
               f"{m['cache_gbps']:.1f} GB/s (memory {m['memory_gbps']:.1f} GB/s). Measured: the median pass.")
    for backend, scopes in doc["attribution"].items():
        totals = setup["totals"][backend]
        out.append(f"\n### Where the time goes, {backend} backend: a target-only step and a speculative round "
                   f"({setup['draft']}, k = {setup['k']}), µs\n")
        out.append(table(["category", "step", "round"], [
            [name, f"{us:.1f}", f"{scopes['round'][name]:.1f}"] for name, us in scopes["step"].items()] + [
            [what, *(f"{totals[scope][key]:.{3 if key in ('accounted_ratio', 'stretch') else 1}f}"
                     for scope in ("step", "round"))]
            for key, what in ((("accounted_us", "accounted (sum of the above)"),
                               ("measured_us", "measured untimed"),
                               ("accounted_ratio", "accounted / untimed (median of neighbouring blocks)"),
                               ("stretch", "the profiler's stretch of the rest (x)"))
                              if "accounted_ratio" in totals["step"] else
                              (("accounted_us", "accounted (sum of the above)"),
                               ("measured_us", "measured without the profiler"),
                               ("profiler_us", "the profiler's own cost (taken out)"))
                              if "accounted_us" in totals["step"] else  # a report from before the cost was taken out
                              (("profiled_us", "profiled (sum of the above)"),
                               ("measured_us", "measured without the profiler")))]))
    out.append("\nThe labelled spans -- logits to sample, the rule, the draft -- are timed directly (perf_counter, "
               "about a microsecond a span); the rest, the target's forward and the loop around it, is split by "
               "torch.profiler: the self CPU time of the ops, by category, and what no op accounts for (framework "
               "dispatch and Python, less the profiler's own cost per event recorded), in proportion, scaled onto "
               "the rest's timed µs (the profiler stretches it by the factor shown). An ONNX Runtime run (the onnx "
               "backend's pass with its softmax or sampling) is timed as a span and split the same way by ONNX "
               "Runtime's own profiler: its kernels by category, the rest of the run (executor, binding) as "
               "dispatch. So the categories sum to the accounted time, the timed blocks' wall time, held against "
               "the same work run bare as the median ratio of neighbouring blocks. torch.profiler sees no op "
               "inside numpy's forward: it lands in framework dispatch and Python.")
    return out


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
    if br.get("source") == "none":
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
    """What the figures say, in sentences computed from them (nothing here is written by hand)."""
    every, acc_rows, costs = doc["speedup"], _chains(doc["acceptance"]), doc["costs"]
    sp = _chains(every)  # the chain findings; the trees' come last
    acc = {(r["draft"], r["k"]): r for r in acc_rows}
    drafts = list(dict.fromkeys(r["draft"] for r in sp))
    ks = sorted({r["k"] for r in sp})
    k1, kmax = ks[0], ks[-1]
    c = {d: costs["drafts"][d]["c"] for d in drafts}
    best = {d: max((r for r in sp if r["draft"] == d), key=lambda r: r["measured"]) for d in drafts}
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
    errs = [(r["predicted"] / r["measured"] - 1, r) for r in sp]
    ok = sum(abs(e) <= WRITEUP_TOLERANCE for e, _ in errs)
    e, r = max(errs, key=lambda t: abs(t[0]))
    alone = [costs["round_us"][str(k)] / costs["target_pass_us"] for k in ks]
    after = max(v["round_us"] / costs["round_us"][k] for per in costs["loop"].values() for k, v in per.items())
    out.append(f"The write-up's formula is within {WRITEUP_TOLERANCE:.0%} of the measured figure on {ok}/{len(errs)} "
               f"rows (worst {e:+.0%}: {r['draft']} k={r['k']}). It prices a round at one target pass; a round here "
               f"costs {alone[0]:.2f}-{alone[-1]:.2f} passes alone (k={k1}..{kmax}), and up to {after:.2f}x that "
               f"right after a transformer draft, whose weights evict the target's from cache.")
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
    if doc.get("adaptive"):
        ad = doc["adaptive"]
        side = lambda r: ("faster" if r["vs_fixed_ci_low"] > 1 else "slower" if r["vs_fixed_ci_high"] < 1
                             else "no different")
        out.append("Adaptive k against the best fixed k (95 % CI of the ratio): " + "; ".join(
            f"{r['draft']} {side(r)} ({r['vs_fixed_measured']:.2f}x, mean k {r['mean_k']:.1f} vs {r['best_fixed_k']})"
            for r in ad) + ".")
    out += best_exact(doc)
    return out
