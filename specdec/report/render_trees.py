"""The report's tree rows as Markdown: table 2a (trees over the workload), the tree-round cost terms, and the
finding on the best exact configuration (chains and trees). Like `render`, reads only the document."""

from __future__ import annotations

from specdec.report.markdown import config_cell, spread, table, verdict, words

def _chains(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("tree") is None]


def _median(xs) -> float:
    xs = sorted(xs)
    n = len(xs)
    return (xs[(n - 1) // 2] + xs[n // 2]) / 2 if n else float("nan")


def tree_acceptance(doc: dict) -> list[str]:
    """Table 2's tree rows: chars per pass, acceptance per depth, nodes; and the child acceptance behind the
    budget shapes."""

    rows = [r for r in doc["acceptance"] if r.get("tree") is not None]
    if not rows:
        return []
    out = ["\n### 2a. Token trees over the workload (deterministic; acceptance = accepted / drafted nodes)\n",
           table(["draft", "tree", "nodes (per depth)", "depth", words(doc)["per_target_pass"], "expected (child model)",
                   "per run: median (IQR; min-max)", "acceptance per depth", "target passes"], [
               [r["draft"], r["tree"]["shape"], f"{r['tree']['budget']} ({'-'.join(map(str, r['tree']['nodes_per_depth']))})",
                r["tree"]["depth"], f"{r['chars_per_pass']:.2f}",
                "" if r.get("expected_chars_per_pass") is None else f"{r['expected_chars_per_pass']:.2f}",
                spread(r["summary"]["chars_per_pass"]),
                " ".join("-" if a is None else f"{a:.2f}" for a in r["depth_acceptance"]), r["target_passes"]]
               for r in rows])]
    for name, ch in doc.get("child_acceptance", {}).items():
        out.append(f"\n{name}: the i-th child tried at a node is the accepted one with probability "
                   + " ".join(f"{a:.3f}" for a in ch["vector"]) + f" (over {len(ch['runs'])} run(s)); the budget "
                   "shapes are Sequoia's dynamic program on this vector, and \"expected\" is what it predicts.")
    return out


def passes_exactness(r: dict, exactness: list[dict]) -> bool:
    """Whether a speedup row's configuration has exactness rows and every one of them is "exact"."""
    # a chain's rows are checked at one k (the rule does not depend on k); a tree's at its own shape
    shape = lambda x: (x.get("tree") or {}).get("shape")
    mine = [e for e in exactness if e["draft"] == r["draft"] and shape(e) == shape(r)]
    return bool(mine) and all(verdict(e) == "exact" for e in mine)


def best_exact(doc: dict) -> list[str]:
    """The best measured configuration whose exactness rows all pass, with its interval and prediction."""
    checked = [r for r in doc["speedup"] if passes_exactness(r, doc.get("exactness", []))]
    if not checked:
        return ["No configuration has passing exactness rows to recommend."]
    b = max(checked, key=lambda r: r["measured"])
    what = f"{b['draft']} k={b['k']}" if b.get("tree") is None else f"{b['draft']} {config_cell(b)} ({b['tree']['budget']} nodes)"
    return [f"Best exact configuration (exactness rows passing): {what}, {b['measured']:.2f}x "
            f"({b['ci_low']:.2f}-{b['ci_high']:.2f}), predicted {b['predicted_before']:.2f}x before the run."]


def tree_costs(c: dict) -> list[str]:
    """Table 4's tree-round terms (T(N) rows sit in table 4 itself)."""

    if not c.get("tree_loop"):
        return []
    return ["\nA tree round: drafting the tree (per node), then the verify pass over its nodes, the walk of the "
            "rule and moving the accepted path's keys and values (the round without the draft):\n",
            table(["draft", "tree", "drafting per node (µs)", "round without the draft (µs)",
                    "target-only step (µs)", "first step (µs)", "first round (µs)"], [
                [n, label, f"{v['node_us']:.1f}", f"{v['round_us']:.0f}", f"{v['step_us']:.0f}",
                 f"{v['first_step_us']:.0f}", f"{v['first_round_us']:.0f}"]
                for n, per in c["tree_loop"].items() for label, v in per.items()])]
