"""Does a report's interval hold? Two (or more) reports of one commit, each row's interval against the other's
median.

`specdec report --repeat N` measures N full reports back to back and calls `coverage` on each consecutive
pair: for every row (the A/A noise floor, each draft x k speedup, each adaptive row) whether the first
report's 95 % re-run interval contains the second's median and the other way round. An interval that means
what it says covers the other run's median on about 95 % of rows; the check passes at `TARGET` or more in
both directions.
"""

from __future__ import annotations

from .render_trees import config_label

TARGET = 0.90  # the share of rows whose interval must contain the other run's median


def _rows(doc: dict) -> dict[str, tuple[float, float, float]]:
    """Row name -> (figure, ci_low, ci_high) for every interval a report gives."""
    f = doc["noise_floor"]
    out = {"noise floor (A/A)": (f["measured"], f["ci_low"], f["ci_high"])}
    for r in doc["speedup"]:
        out[f"{r['draft']} {config_label(r)}"] = (r["measured"], r["ci_low"], r["ci_high"])
    for r in doc.get("adaptive", []):
        out[f"{r['draft']} adaptive"] = (r["measured"], r["ci_low"], r["ci_high"])
    return out


def coverage(a: dict, b: dict) -> dict:
    """Rows both reports have, with whether each one's interval contains the other's median."""
    ra, rb = _rows(a), _rows(b)
    rows = []
    for name in [n for n in ra if n in rb]:
        (ma, la, ha), (mb, lb, hb) = ra[name], rb[name]
        rows.append({"row": name, "a_median": ma, "a_ci": [la, ha], "b_median": mb, "b_ci": [lb, hb],
                     "a_covers_b": la <= mb <= ha, "b_covers_a": lb <= ma <= hb})
    n = len(rows)
    a_cov = sum(r["a_covers_b"] for r in rows)
    b_cov = sum(r["b_covers_a"] for r in rows)
    return {"rows": rows, "n": n, "a_covers_b": a_cov, "b_covers_a": b_cov,
            "passed": bool(n) and min(a_cov, b_cov) >= TARGET * n}


def render(covs: list[dict]) -> str:
    """The coverage tables as Markdown, one per consecutive pair of runs."""
    out = ["# specdec calibration: does each report's interval contain the other's median?\n"]
    for i, cov in enumerate(covs, start=1):
        out.append(f"## run {i} against run {i + 1}\n")
        out.append(f"| row | run {i} median | run {i} interval | run {i + 1} median | run {i + 1} interval | "
                   f"{i} covers {i + 1} | {i + 1} covers {i} |")
        out.append("|:--|--:|--:|--:|--:|:-:|:-:|")
        for r in cov["rows"]:
            out.append(f"| {r['row']} | {r['a_median']:.3f} | {r['a_ci'][0]:.3f}-{r['a_ci'][1]:.3f} | "
                       f"{r['b_median']:.3f} | {r['b_ci'][0]:.3f}-{r['b_ci'][1]:.3f} | "
                       f"{'yes' if r['a_covers_b'] else 'NO'} | {'yes' if r['b_covers_a'] else 'NO'} |")
        verdict = "holds" if cov["passed"] else "does NOT hold"
        out.append(f"\nRun {i}'s intervals contain run {i + 1}'s median on {cov['a_covers_b']}/{cov['n']} rows, run "
                   f"{i + 1}'s contain run {i}'s on {cov['b_covers_a']}/{cov['n']}: calibration {verdict} (target: "
                   f"{TARGET:.0%} of rows in both directions).\n")
    return "\n".join(out)
