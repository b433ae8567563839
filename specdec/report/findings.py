"""The report's findings: what the measurements say about each draft, the write-up's formula, the
prediction and adaptive k, as plain sentences under the tables.
"""

from __future__ import annotations

from specdec.report.render_trees import _chains, best_exact
from specdec.report.markdown import MIN_INTERVAL_PAIRS, config_cell
from specdec.report.headline import PREDICTION_TOLERANCE, WRITEUP_TOLERANCE


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


def _above_one(r: dict) -> bool:
    """Faster than target-only: the row's re-run interval above 1 (a row of one pair has no interval)."""
    return r.get("pairs", MIN_INTERVAL_PAIRS) >= MIN_INTERVAL_PAIRS and r["ci_low"] > 1.0


def _draft_findings(drafts: list[str], k1: int, acc: dict, c: dict, best: dict) -> list[str]:
    """The best and worst acceptance at the smallest k, the drafts faster than target-only, the slowest."""
    out = []
    ranked = sorted(drafts, key=lambda d: acc[d, k1]["acceptance"], reverse=True)
    for label, d in (("Best", ranked[0]), ("Worst", ranked[-1])):
        out.append(f"{label} acceptance at k={k1}: {d}, {acc[d, k1]['acceptance']:.3f} with c = {c[d]:.3f}; "
                   f"its best measured speedup is {best[d]['measured']:.2f}x (k={best[d]['k']}).")
    winners = [d for d in drafts if _above_one(best[d])]
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
        fast3 = [d for d in trio if _above_one(best[d])]
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
