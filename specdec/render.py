"""Rendering a report document: the Markdown tables (also what the terminal shows), the findings, the figure.

Everything here reads only the JSON document that `report.measure` returns, so any saved `report.json`
renders again, on any machine.
"""

from __future__ import annotations

from pathlib import Path

REFINED_TOLERANCE = 0.05  # the refined model is held to within 5 % of the measured median
WRITEUP_TOLERANCE = 0.10  # the write-up's formula is judged at 10 %


def plot(doc: dict, path: Path) -> bool:
    """Measured speedup against k per draft (min-max band), the write-up's formula dashed, the refined
    prediction dotted with crosses, a line at 1.0."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    rows = doc["speedup"]
    for i, name in enumerate(dict.fromkeys(r["draft"] for r in rows)):
        mine = sorted((r for r in rows if r["draft"] == name), key=lambda r: r["k"])
        ks = [r["k"] for r in mine]
        color = f"C{i}"
        ax.plot(ks, [r["measured_median"] for r in mine], "o-", color=color, label=name)
        ax.fill_between(ks, [r["measured_min"] for r in mine], [r["measured_max"] for r in mine],
                        color=color, alpha=0.15)
        ax.plot(ks, [r["predicted"] for r in mine], "--", color=color, alpha=0.7)
        ax.plot(ks, [r["predicted_refined"] for r in mine], ":", marker="x", color=color, alpha=0.9)
    ax.axhline(1.0, color="black", lw=0.8)
    drafts_legend = ax.legend(fontsize=7, loc="upper left", title="draft", title_fontsize=7)
    ax.add_artist(drafts_legend)
    styles = [plt.Line2D([], [], color="gray", marker="o", ls="-", label="measured median (band: min-max)"),
              plt.Line2D([], [], color="gray", ls="--", label="predicted: cpp / (1 + k·c)"),
              plt.Line2D([], [], color="gray", ls=":", marker="x", label="predicted: refined")]
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


def _table(headers: list[str], rows: list[list]) -> str:
    """A Markdown pipe table padded to column width, so it reads as well in a terminal as rendered."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, width))) + " |"
    sep = "|" + "|".join("-" * (w + 1) + ":" if i else ":" + "-" * (w + 1) for i, w in enumerate(width)) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def tables(doc: dict) -> str:
    """Every table of the report as Markdown (also what the terminal shows)."""
    m, s = doc["machine"], doc["settings"]
    out = [f"# specdec report\n\n{m['cpu']}, {m['threads']} thread(s), {m['device']}, torch {m['torch_version']}, "
           f"commit {m.get('commit') or 'n/a'}, {m['date']}. Prompt {s['prompt']!r}, {s['chars']} characters, "
           f"seed {s['seed']}, temperature {s['temperature']}, {s['pairs']} pairs per row."]
    if doc.get("skipped"):
        out.append("Skipped: " + "; ".join(f"{n} ({why})" for n, why in doc["skipped"].items()) + ".")
    ex = doc["exactness"]
    out.append("## 1. Exactness (first generated character, %d draws, k = %d)\n" % (ex[0]["samples"], ex[-1]["k"]))
    out.append(_table(["draft", "total variation", "baseline TV (median, range)", "chi-square p", "verdict"], [
        [r["draft"] if r["draft"] != "target" else "target, sampled directly (baseline)", f"{r['tv']:.4f}",
         f"{r['baseline_tv']:.4f} ({r['baseline_tv_min']:.4f}-{r['baseline_tv_max']:.4f})",
         "" if r["p_value"] is None else f"{r['p_value']:.3f}", _verdict(r)] for r in ex]))
    out.append(f"\n## 2. Acceptance ({s['chars']} characters, seed {s['seed']})\n")
    out.append(_table(["draft", "k", "acceptance", "chars per target pass", "E(α,k)", "target passes"], [
        [r["draft"], r["k"], f"{r['acceptance']:.3f}", f"{r['chars_per_pass']:.2f}", f"{r['expected_length']:.2f}",
         r["target_passes"]] for r in doc["acceptance"]]))
    out.append(f"\n## 3. Measured speedup (target-only / speculative, {s['pairs']} alternated pairs)\n")
    out.append(_table(["draft", "k", "chars per pass", "median", "range", "95% CI", "note"], [
        [r["draft"], r["k"], f"{r['chars_per_pass']:.2f}", f"{r['measured_median']:.2f}",
         f"{r['measured_min']:.2f}-{r['measured_max']:.2f}", f"{r['ci_low']:.2f}-{r['ci_high']:.2f}",
         _noise_note(r)] for r in doc["speedup"]]))
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
    out.append(_table(["what", "µs", "÷ target pass", "weight bytes", ""], rows))
    out.append(f"\nc uses one drafted character at k = {c['draft_k']}. Inside a simulated round (the draft proposes"
               " k, then the target verifies and the rule runs), each part pays the cache misses the other causes;"
               " these are the terms of the refined prediction:\n")
    out.append(_table(["draft", "k", "drafted character (µs)", "round without the draft (µs)", "÷ round alone"], [
        [n, k, f"{v['char_us']:.1f}", f"{v['round_us']:.0f}", f"{v['round_us'] / c['round_us'][k]:.3f}"]
        for n, per_k in c["loop"].items() for k, v in per_k.items()]))
    out.append("\n## 5. Predicted against measured\n")
    out.append(_table(["draft", "k", "predicted (cpp/(1+k·c))", "predicted (refined)", "measured median",
                       "refined error", "note"], [
        [r["draft"], r["k"], f"{r['predicted']:.2f}", f"{r['predicted_refined']:.2f}", f"{r['measured_median']:.2f}",
         f"{r['predicted_refined'] / r['measured_median'] - 1:+.1%}", _miss_note(r)] for r in doc["speedup"]]))
    out.append("\n## Recommended k\n")
    out.append(_table(["draft", "best k (predicted)", "predicted", "best k (measured)", "measured"], [
        [n, v["best_k_predicted"], f"{v['predicted']:.2f}", v["best_k_measured"], f"{v['measured']:.2f}"]
        for n, v in doc["recommendations"].items()]))
    if doc.get("adaptive"):
        a0 = doc["adaptive"][0]
        out.append(f"\n## Adaptive k (+2 after a fully accepted round, -1 after a rejection; from k = {a0['start_k']},"
                   f" at most {a0['k_max']}; {a0['pairs']} rotated triples)\n")
        out.append(_table(["draft", "mean k", "acceptance", "chars per pass", "target passes", "speedup median",
                           "range", "best fixed k", "adaptive ÷ fixed", "range", "95% CI"], [
            [r["draft"], f"{r['mean_k']:.2f}", f"{r['acceptance']:.3f}", f"{r['chars_per_pass']:.2f}",
             r["target_passes"], f"{r['measured_median']:.2f}", f"{r['measured_min']:.2f}-{r['measured_max']:.2f}",
             r["best_fixed_k"], f"{r['vs_fixed_median']:.3f}", f"{r['vs_fixed_min']:.2f}-{r['vs_fixed_max']:.2f}",
             f"{r['vs_fixed_ci_low']:.3f}-{r['vs_fixed_ci_high']:.3f}"] for r in doc["adaptive"]]))
    if "greedy" in doc:
        g = doc["greedy"]
        out.append("\n## Greedy decoding (temperature 0), the best sampled configuration\n")
        out.append(_table(["draft", "k", "acceptance", "chars per pass", "target passes", "median", "range"], [[
            g["draft"], g["k"], f"{g['acceptance']:.3f}", f"{g['chars_per_pass']:.2f}", g["target_passes"],
            f"{g['measured_median']:.2f}", f"{g['measured_min']:.2f}-{g['measured_max']:.2f}"]]))
    out.append("\n## Findings\n")
    out += [f"- {line}" for line in findings(doc)]
    out.append(f"\nMeasured in {doc['wall_seconds']:.0f} s.")
    return "\n".join(out) + "\n"


def _verdict(r: dict) -> str:
    """The row's own verdict (`exactness.verdicts`); none shown for the target sampled directly."""
    return "" if r["p_value"] is None else r.get("verdict", "")  # reports saved before verdicts have none


def _noise_note(r: dict) -> str:
    notes = []
    if r.get("retaken"):
        first, second = r["ci_widths"]
        notes.append(f"pairs doubled (CI {first:.0%} of median, then {second:.0%})")
    if r["noisy"]:
        spread = (r["measured_max"] - r["measured_min"]) / r["measured_median"]
        notes.append(f"noisy: range {spread:.0%} of median; rerun with --pairs {max(2 * r['pairs'], 15)}")
    return "; ".join(notes)


def _miss_note(r: dict) -> str:
    """For a row the refined model misses: which term the paired runs disagree with, the larger first.

    target_only_error is what the target-only runs imply per character against the step term;
    speculative_error what the speculative runs imply against passes·round + drafted·draft_char, named after
    the term that makes up most of that time.
    """
    err = r["predicted_refined"] / r["measured_median"] - 1
    if abs(err) <= REFINED_TOLERANCE:
        return ""
    spec = "draft character cost" if r["draft_share"] > 0.5 else "verify round cost"
    terms = sorted([("target-only step", r["target_only_error"]), (spec, r["speculative_error"])],
                   key=lambda t: -abs(t[1]))
    return "off in the paired runs: " + ", ".join(f"{name} {off:+.1%}" for name, off in terms)


def findings(doc: dict) -> list[str]:
    """What the figures say, in sentences computed from them (nothing here is written by hand)."""
    sp, acc_rows, costs = doc["speedup"], doc["acceptance"], doc["costs"]
    acc = {(r["draft"], r["k"]): r for r in acc_rows}
    drafts = list(dict.fromkeys(r["draft"] for r in sp))
    ks = sorted({r["k"] for r in sp})
    k1, kmax = ks[0], ks[-1]
    c = {d: costs["drafts"][d]["c"] for d in drafts}
    best = {d: max((r for r in sp if r["draft"] == d), key=lambda r: r["measured_median"]) for d in drafts}
    out = []
    ranked = sorted(drafts, key=lambda d: acc[d, k1]["acceptance"], reverse=True)
    for label, d in (("Best", ranked[0]), ("Worst", ranked[-1])):
        out.append(f"{label} acceptance at k={k1}: {d}, {acc[d, k1]['acceptance']:.3f} with c = {c[d]:.3f}; "
                   f"its best measured speedup is {best[d]['measured_median']:.2f}x (k={best[d]['k']}).")
    winners = [d for d in drafts if best[d]["ci_low"] > 1.0]
    out.append("Faster than target-only (95 % CI above 1): " + (", ".join(
        f"{d} {best[d]['measured_median']:.2f}x at k={best[d]['k']} (c = {c[d]:.3f})" for d in winners)
        if winners else "none.") + ".")
    slowest = min(drafts, key=lambda d: best[d]["measured_median"])
    out.append(f"Slowest: {slowest}, {best[slowest]['measured_median']:.2f}x at its best k ({best[slowest]['k']}), "
               f"c = {c[slowest]:.3f}.")
    if {"int8", "int4", "bigram"} <= set(drafts):
        a8, a4 = acc["int8", kmax], acc["int4", kmax]
        trio = ("bigram", "int8", "int4")
        slow3 = min(trio, key=lambda d: best[d]["measured_median"])
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
        verdict = "lowers" if dyn < rnd else "does not lower"
        out.append(f"The real int8 kernel (torch dynamic quantization) costs {dyn:.0f} µs per drafted character "
                   f"against {rnd:.0f} µs for rounded float32 (c {c['int8-dynamic']:.2f} vs {c['int8']:.2f}): on this "
                   f"machine it {verdict} c.")
    errs = [(r["predicted"] / r["measured_median"] - 1, r) for r in sp]
    ok = sum(abs(e) <= WRITEUP_TOLERANCE for e, _ in errs)
    e, r = max(errs, key=lambda t: abs(t[0]))
    alone = [costs["round_us"][str(k)] / costs["target_pass_us"] for k in ks]
    after = max(v["round_us"] / costs["round_us"][k] for per in costs["loop"].values() for k, v in per.items())
    out.append(f"The write-up's formula is within {WRITEUP_TOLERANCE:.0%} of the measured median on {ok}/{len(errs)} "
               f"rows (worst {e:+.0%}: {r['draft']} k={r['k']}). It prices a round at one target pass; a round here "
               f"costs {alone[0]:.2f}-{alone[-1]:.2f} passes alone (k={k1}..{kmax}), and up to {after:.2f}x that "
               f"right after a transformer draft, whose weights evict the target's from cache.")
    ref = [(x["predicted_refined"] / x["measured_median"] - 1, x) for x in sp]
    ok = sum(abs(e) <= REFINED_TOLERANCE for e, _ in ref)
    e, r = max(ref, key=lambda t: abs(t[0]))
    out.append(f"The refined prediction is within {REFINED_TOLERANCE:.0%} on {ok}/{len(ref)} rows (largest error "
               f"{e:+.1%}: {r['draft']} k={r['k']}).")
    if doc.get("adaptive"):
        ad = doc["adaptive"]
        verdict = lambda r: ("faster" if r["vs_fixed_ci_low"] > 1 else "slower" if r["vs_fixed_ci_high"] < 1
                             else "no different")
        out.append("Adaptive k against the best fixed k (95 % CI of the ratio): " + "; ".join(
            f"{r['draft']} {verdict(r)} ({r['vs_fixed_median']:.2f}x, mean k {r['mean_k']:.1f} vs {r['best_fixed_k']})"
            for r in ad) + ".")
    return out
