"""Does a report's interval hold? Two (or more) reports of one commit, each row's interval against the other's
median.

`specdec report --repeat N` measures N full reports back to back and calls `coverage` on each consecutive
pair: for every row (the A/A noise floor, each draft x k speedup, each adaptive row) whether the first
report's 95 % re-run interval contains the second's median and the other way round. An interval that means
what it says covers the other run's median on about 95 % of rows; the check passes at `TARGET` or more in
both directions.

`between_run` keeps from the same pair what neither run's interval could see: for every row, the extra term
its interval would have needed to hold the other run's figure. It is recorded per machine (`machine_record`);
later reports add a conformal quantile of these to their intervals.

`against_rerun` puts the prediction made before the run beside a re-run: each report's before-the-run error
against its own measured figure, and the second report's measured figure against the first's. A prediction is
made at another moment than the figure it predicts, so it meets the machine's between-moment noise just as a
re-run of the measurement does: how often the re-run stays within a tolerance shows how far the figure a
prediction is held to moves on this machine by itself.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from specdec.report.markdown import row_name
from specdec.util.errors import InputError

TOLERANCES = (0.05, 0.10)  # the prediction targets (quiet machine, noisy machine): |figure / reference - 1|
TARGET = 0.90  # the share of rows whose interval must contain the other run's median
FLOOR = "noise floor (A/A)"  # the one row whose interval never carries the between-run term
Z95 = 1.959963984540054  # the intervals are 95 %: half-width = Z95 standard errors


FIGURE_KEYS = ("measured", "ci_low", "ci_high")  # what a calibration reads of the floor and of each speedup row


def load(path: str | Path) -> dict:
    """A report.json that a calibration can read; a one-line InputError naming the file and what is wrong."""
    try:
        doc = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("machine"), dict):
        raise InputError(f"{path}: not a specdec report (no machine record)")
    floor, rows = doc.get("noise_floor"), doc.get("speedup")
    if not isinstance(floor, dict) or any(k not in floor for k in FIGURE_KEYS + ("width",)):
        raise InputError(f"{path}: not a report this version reads (noise_floor lacks {', '.join(FIGURE_KEYS)}, "
                         "width)")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and all(k in r for k in FIGURE_KEYS + ("draft",))
                                             for r in rows):
        raise InputError(f"{path}: not a report this version reads (each speedup row needs draft, "
                         f"{', '.join(FIGURE_KEYS)})")
    return doc


def _rows(doc: dict) -> dict[str, tuple[float, float, float]]:
    """Row name -> (figure, ci_low, ci_high) for every interval a report gives."""
    f = doc["noise_floor"]
    out = {FLOOR: (f["measured"], f["ci_low"], f["ci_high"])}
    for r in doc["speedup"]:
        out[row_name(r)] = (r["measured"], r["ci_low"], r["ci_high"])
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


def _applied(doc: dict) -> float:
    """The between-run term (a fraction of each figure, τ) this report added to its speedup intervals."""
    return float((doc["noise_floor"].get("between_run") or {}).get("tau", 0.0))


def needs(a: dict, b: dict) -> list[float]:
    """Per row (not the A/A floor): the extra term τ (a fraction of the figure, added in quadrature as
    Z95·τ·figure) a's interval would have needed to contain b's figure -- 0 where it did contain it.

    a's interval is first taken back to what it was before its own between-run term (each side h was widened
    to √(h² + (Z95·τ·figure)²): undone exactly), so a record never learns from its own earlier output.
    In fractions of the figure, not in units of a's own noise: a quiet run followed by a noisy one sees every
    ratio move by more than the quiet run's own noise foretells -- what a re-run meets depends on the machine's
    next state, not on this run's.
    """
    ra, rb = _rows(a), _rows(b)
    e_a = Z95 * _applied(a)
    out = []
    for name, (m, lo, hi) in ra.items():
        if name == FLOOR or name not in rb:
            continue
        other = rb[name][0]
        side = (hi - m) if other > m else (m - lo)
        side = math.sqrt(max(0.0, side * side - (e_a * m) ** 2))
        gap = abs(other - m)
        out.append(math.sqrt(max(0.0, gap * gap - side * side)) / (Z95 * m))
    return out


def between_run(a: dict, b: dict) -> dict:
    """What the pair says about runs a report cannot see: both directions' `needs`, and the mean shift of
    every row (log scale) as information -- a shift all rows share is how a change of machine state shows."""
    ra, rb = _rows(a), _rows(b)
    names = [n for n in ra if n in rb and n != FLOOR]
    if not names:
        raise InputError("between_run needs speedup rows both reports have; they share none")
    shift = float(np.mean([math.log(ra[n][0] / rb[n][0]) for n in names]))
    return {"needs": needs(a, b) + needs(b, a), "units": "fraction", "rows": len(names), "mean_shift": shift,
            "floor_half_widths": [a["noise_floor"]["width"] / 2, b["noise_floor"]["width"] / 2]}


def against_rerun(a: dict, b: dict) -> dict:
    """Per speedup row both reports have: each report's before-the-run prediction over its own measured figure
    (a_error, b_error) and b's measured figure over a's (rerun_error), each minus 1; and per kind of error, how
    many rows are within each of `TOLERANCES`, the largest and the root mean square."""
    ra, rb = ({row_name(r): r for r in doc["speedup"] if r.get("predicted_before") is not None} for doc in (a, b))
    out = [{"row": n, "a_error": ra[n]["predicted_before"] / ra[n]["measured"] - 1,
            "b_error": rb[n]["predicted_before"] / rb[n]["measured"] - 1,
            "rerun_error": rb[n]["measured"] / ra[n]["measured"] - 1} for n in ra if n in rb]
    summary = {}
    for kind in ("a_error", "b_error", "rerun_error"):
        e = np.abs([r[kind] for r in out])
        summary[kind] = {"within": {f"{t:g}": int((e <= t).sum()) for t in TOLERANCES},
                         "largest": float(e.max()) if len(e) else None,
                         "rms": float(np.sqrt(np.mean(e ** 2))) if len(e) else None}
    return {"rows": out, "n": len(out), **summary}


def _against_rerun_text(ag: dict, i: int) -> list[str]:
    j = i + 1
    out = [f"### the prediction made before the run, against a re-run (run {i} and {j})\n",
           f"| row | run {i} prediction error | run {j} prediction error | run {j} measured over run {i} |",
           "|:--|--:|--:|--:|"]
    out += [f"| {r['row']} | {r['a_error']:+.1%} | {r['b_error']:+.1%} | {r['rerun_error']:+.1%} |"
            for r in ag["rows"]]
    n = ag["n"]
    for t in TOLERANCES:
        key = f"{t:g}"
        out.append(f"\nWithin {t:.0%}: the prediction on {ag['a_error']['within'][key]}/{n} rows of run {i} and "
                   f"{ag['b_error']['within'][key]}/{n} of run {j}; run {j}'s measured figure is within {t:.0%} of "
                   f"run {i}'s on {ag['rerun_error']['within'][key]}/{n}.")
    out.append(f"\nLargest error (rms): prediction {ag['a_error']['largest']:.1%} ({ag['a_error']['rms']:.1%}) and "
               f"{ag['b_error']['largest']:.1%} ({ag['b_error']['rms']:.1%}); re-run {ag['rerun_error']['largest']:.1%} "
               f"({ag['rerun_error']['rms']:.1%}). A prediction is made at another moment than the figure it predicts, as a "
               f"re-run is: on a machine where a re-run of one commit lands outside a tolerance on some rows, a "
               f"prediction can be expected to as often.\n")
    return out


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
        if "between_run" in cov:
            br = cov["between_run"]
            short = sum(x > 0 for x in br["needs"])
            out.append(f"Between the runs the speedup rows moved by {br['mean_shift']:+.1%} on average (log scale); "
                       f"{short} of {len(br['needs'])} row-directions needed more than their interval, at most "
                       f"τ = {max(br['needs']):.1%} more (in quadrature, ± 1.96·τ·figure).\n")
        if cov.get("against_rerun", {}).get("n"):
            out += _against_rerun_text(cov["against_rerun"], i)
    return "\n".join(out)
