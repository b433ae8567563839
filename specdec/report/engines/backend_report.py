"""`specdec report --backend all`: a full report per backend, and what taking overhead back does to speculative
decoding -- computed from the reports' figures, the prediction made before each report's pairs first.

Every figure speculative decoding is judged by is conditioned on the target pass's cost: c is a drafted
character's cost over one pass, T(k+1)/T(1) the verify pass's growth over it. A leaner backend shrinks the
pass's fixed overhead, so c of a draft whose cost does not shrink with it (the tables: bigram, ngram) grows,
and the verify pass's growth -- mostly arithmetic on more positions -- weighs more. The finding states those
moves and whether the best draft and k move with them; in each report the best by the prediction made before
any pair (its cost table and deterministic counts) is set beside the best measured.
"""

from __future__ import annotations

from specdec.report.markdown import config_label, row_name

BASE = "eager"  # what the other backends are compared with
# Drafts built as copies of the target's model, so they run its backend and their cost shrinks with the pass;
# the others (tables; int8-dynamic's quantized Linears, which always run torch's kernels) cost the same time.
FOLLOWS_BACKEND = ("int8", "int4", "small")


def predicted_c(base: dict, other: dict) -> dict[str, float]:
    """c on another backend, predicted from the base report's draft costs and the other's pass time alone: a
    draft that follows the backend keeps its c; any other keeps its µs (so its c scales by T_base(1)/T_other(1)):
    its µs over the other's pass."""
    t_other = other["costs"]["target_pass_us"]
    return {name: d["c"] if name in FOLLOWS_BACKEND else d["char_us"] / t_other
            for name, d in base["costs"]["drafts"].items() if name in other["costs"]["drafts"]}


def _rows(doc: dict) -> list[dict]:
    return [r for r in doc["speedup"] if r.get("measured") is not None]


def _best(doc: dict, key: str) -> dict:
    return max(_rows(doc), key=lambda r: r[key] if r.get(key) is not None else float("-inf"))


def summary(doc: dict) -> dict:
    """One backend's figures the finding compares: T(1), the verify growth at each width, c per draft, bests."""
    c = doc["costs"]
    t1 = c["target_pass_us"]
    pred, meas = _best(doc, "predicted_before"), _best(doc, "measured")
    best_by_draft = {}
    for r in _rows(doc):
        if r["measured"] > best_by_draft.get(r["draft"], {"measured": float("-inf")})["measured"]:
            best_by_draft[r["draft"]] = r
    return {
        "target_pass_us": t1,
        "verify_over_single": {int(n): us / t1 for n, us in c["verify_pass_us"].items()},
        "c": {name: d["c"] for name, d in c["drafts"].items()},
        "best_predicted": {"row": row_name(pred), "predicted_before": pred["predicted_before"],
                           "measured": pred["measured"], "ci": [pred["ci_low"], pred["ci_high"]]},
        "best_measured": {"row": row_name(meas), "measured": meas["measured"], "ci": [meas["ci_low"], meas["ci_high"]],
                          "predicted_before": meas.get("predicted_before")},
        "ranking": [name for name, _ in sorted(best_by_draft.items(), key=lambda kv: -kv[1]["measured"])],
    }


def finding(docs: dict[str, dict]) -> dict:
    """Per backend its `summary`, and against the base backend how each figure moved, in words too."""
    sums = {b: summary(d) for b, d in docs.items()}
    base_name = BASE if BASE in sums else next(iter(sums))
    base = sums[base_name]
    for b, s in sums.items():
        if b != base_name:
            s["c_predicted"] = predicted_c(docs[base_name], docs[b])
    lines = []
    for b, s in sums.items():
        bp, bm = s["best_predicted"], s["best_measured"]
        agree = bp["row"] == bm["row"] or bm["ci"][0] <= bp["measured"] <= bm["ci"][1]
        lines.append(f"{b}: predicted before the pairs, the best is {bp['row']} ({bp['predicted_before']:.2f}x); "
                     f"measured, {bm['row']} ({bm['measured']:.2f}x, {bm['ci'][0]:.2f}-{bm['ci'][1]:.2f})"
                     + ("" if agree else " -- the prediction picked another row, outside the best's interval")
                     + f"; drafts ranked by their best: {', '.join(s['ranking'])}.")
        if s is base:
            continue
        widest = max(s["verify_over_single"])
        moved = sorted(s["c"], key=lambda n: -(s["c"][n] / base["c"][n]) if base["c"].get(n) else 0)
        lines.append(
            f"{b} against {BASE}: a pass {s['target_pass_us'] / base['target_pass_us']:.2f}x the time "
            f"({s['target_pass_us']:.0f} against {base['target_pass_us']:.0f} us); T({widest})/T(1) "
            f"{base['verify_over_single'][widest]:.2f} -> {s['verify_over_single'][widest]:.2f}; c "
            + ", ".join(f"{n} {base['c'][n]:.3f} -> {s['c'][n]:.3f}" for n in moved if n in base["c"])
            + "; c predicted from " + BASE + "'s draft times and this pass time alone: "
            + ", ".join(f"{n} {s['c_predicted'][n]:.3f}" for n in moved if n in s["c_predicted"])
            + f"; best measured {base['best_measured']['row']} -> {s['best_measured']['row']}"
            + (" (the ranking of drafts changed)" if s["ranking"] != base["ranking"] else " (same ranking of drafts)")
            + ".")
    return {"backends": sums, "lines": lines}


def render(docs: dict[str, dict], found: dict) -> str:
    out = ["# specdec report: every backend\n",
           "One full report per backend (each in its own folder, with its tables and report.json); here, each "
           "backend's speedup table and what moved. The prediction is the one each report made before its "
           "first pair (its cost table and the run's deterministic counts).\n"]
    for b, doc in docs.items():
        m = doc["machine"]
        out.append(f"## {b} ({m['threads']} thread(s); a target pass {doc['costs']['target_pass_us']:.0f} us)\n")
        out.append("| draft | config | predicted before | measured | re-run interval | pairs |")
        out.append("|:--|:--|--:|--:|--:|--:|")
        for r in _rows(doc):
            pb = r.get("predicted_before")
            out.append(f"| {r['draft']} | {config_label(r)} | {'' if pb is None else f'{pb:.2f}'} | "
                       f"{r['measured']:.2f} | {r['ci_low']:.2f}-{r['ci_high']:.2f} | {r['pairs']} |")
        out.append("")
    out.append("## Costs by backend\n")
    names = list(next(iter(found["backends"].values()))["c"])
    widths = sorted(next(iter(found["backends"].values()))["verify_over_single"])
    out.append("| backend | T(1) us | " + " | ".join(f"T({n})/T(1)" for n in widths) + " | "
               + " | ".join(f"c {n}" for n in names) + " |")
    out.append("|:--|--:|" + "--:|" * (len(widths) + len(names)))
    for b, s in found["backends"].items():
        out.append(f"| {b} | {s['target_pass_us']:.0f} | "
                   + " | ".join(f"{s['verify_over_single'][n]:.2f}" for n in widths) + " | "
                   + " | ".join(f"{s['c'][n]:.3f}" for n in names) + " |")
    out.append("\n## Finding\n")
    out += [f"- {line}" for line in found["lines"]]
    return "\n".join(out) + "\n"
