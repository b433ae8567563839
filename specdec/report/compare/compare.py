"""`specdec compare A/report.json B/report.json`: did anything get worse from A to B? Judged like a statistician.

Two reports are compared only when they measured the same thing: the same prompt, characters, seed,
temperature and ks, the same drafts, the same thread count. Anything else is refused (one line, exit 2):
a difference there would be read as a change in performance.

What is judged, and how:
  * Ratios -- c per draft, T(n)/T(1) per verify width, the speedup per draft x k -- from their per-sample
    values in report.json (each sample a ratio of two timings taken at the same moment, so drift and the
    machine's speed cancel in it). Each is a t-test on the log change from A to B, and a row has changed when
    p < ALPHA / m (Bonferroni over the m rows tested: the chance that two reports of the same code flag
    anything is at most ALPHA) and the change is at least --min-effect (default none). c and T(n)/T(1): the
    medians of the samples (`_ratio_row`). Speedups: the mean log ratio *per prompt* (`stratified`): both
    reports ran the same prompts in the same order, so the prompts' own spread of speedups (±10 % on the
    shipped workload) is taken out instead of counted as noise. Every variance carries, besides each side's
    sampling error, both reports' between-run term τ (`between_run`): two runs of the same code differ by
    more than their samples show (the machine's state moves between runs; docs/calibration.md).
    A row with too few samples to be tested is said so, not judged; one that moved 5 % without the test's
    support is called inconclusive (exit 0). Every tested row also says what its verdict rules out: the
    smallest change the rule would have flagged given the two sides' noise, so "same" reads "same (would have
    caught >= 9 %)".
  * Counts -- acceptance and target passes per draft x k -- are exact given the seed: any difference is a
    change in behaviour. Except across machines for int8-dynamic (`PER_CPU_DRAFTS`), whose quantized kernels
    PyTorch picks per CPU: its counts may differ there, and are said to, not judged.
  * Absolute times (target pass, verify passes, a drafted character) are printed as information only:
    report.json keeps their medians, not their samples, and across machines they compare hardware.
  * Work -- instructions per target pass and per drafted token, where both reports counted them
    (`compare_work`): on one machine judged like `specdec ab`'s work rows, across machines split into work and
    time per instruction.
Worse means: c or T(n)/T(1) up, the speedup or acceptance down, target passes up, more instructions
per call. Exit 1 names each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from specdec.measure import machine_record
from specdec.report.compare import compare_terms, compare_work
from specdec.report.compare.report_doc import (OPTIONAL_SETTINGS, REQUIRED, SETTINGS, SHIPPED_TARGET,  # noqa: F401
                                               TARGET_KEYS, _need, comparable, load)  # (compare.load, ...)
from specdec.report.markdown import config_label
from specdec.util.errors import InputError

ALPHA = 0.01  # family-wise false-alarm rate over all tested rows
MIN_EFFECT = 0.0  # smallest relative change worth a verdict (--min-effect): none; the tests' noise decides
NOTABLE = 0.05  # a move this large that the test does not support is called inconclusive, not "same"


def _name(r: dict) -> str:
    """A row's name in the comparison: its draft and configuration, after its engine in an engine report."""
    return (f"{r['engine']} " if "engine" in r else "") + f"{r['draft']} {config_label(r)}"


@dataclass
class Row:
    name: str
    a: float
    b: float
    kind: str  # "ratio" (tested), "count" (exact) or "info" (absolute time, not judged)
    higher_is_worse: bool = True
    p: float | None = None  # the t-test's p-value (ratio rows; None: too few samples to test)
    n: tuple[int, int] = (0, 0)  # samples on each side (ratio rows)
    verdict: str = ""  # "WORSE", "better", "same", "moved ..., not significant", "too few samples", "" (info)
    detectable: float | None = None  # the smallest relative change the rule would have flagged (ratio rows)
    sd: float | None = None  # ratio rows: the standard deviation of log(B / A) the t-test divides by
    dof: float = 0.0  # ... and its degrees of freedom
    draft: str = ""  # count rows: the draft whose counts they are

    @property
    def change(self) -> float:
        return self.b / self.a - 1 if self.a else math.inf


MIN_SAMPLES = 5  # a cost row's median needs this many samples a side before its spread means anything


def _ratio_row(name: str, sa, sb, tau: float, higher_is_worse: bool = True) -> Row:
    """A cost row (c, T(n)/T(1)): the medians of A's and B's samples, judged by a t-test on log(median B /
    median A) over √(var_A + var_B + 2τ²), var a median's from the samples' MAD (robust: a sample taken during
    a neighbour's burst is an outlier, not spread) and τ both reports' between-run term."""
    sa, sb = np.asarray(sa, dtype=float), np.asarray(sb, dtype=float)
    row = Row(name, float(np.median(sa)), float(np.median(sb)), "ratio", higher_is_worse, n=(len(sa), len(sb)))
    if min(row.n) < MIN_SAMPLES:
        return row
    va, vb = _median_variance(np.log(sa)), _median_variance(np.log(sb))
    return _tested(row, math.log(row.b / row.a), va, vb, tau, (len(sa) - 1, len(sb) - 1))


def _median_variance(x: np.ndarray) -> float:
    """The variance of the median of x: (√(π/2) · σ)² / n, σ the MAD scaled to a normal's standard deviation."""
    sigma = 1.4826 * float(np.median(np.abs(x - np.median(x))))
    return math.pi / 2 * sigma**2 / len(x)


def _tested(row: Row, diff: float, va: float, vb: float, tau: float, dofs: tuple[float, float]) -> Row:
    """row with its t-test of the log change `diff`: sd = √(va + vb + 2τ²), Welch-Satterthwaite's degrees of
    freedom from the two estimated variances and their own (τ is given, so it carries no doubt)."""
    row.sd = math.sqrt(va + vb + 2 * tau**2)
    den = va**2 / dofs[0] + vb**2 / dofs[1]
    row.dof = row.sd**4 / den if den > 0 else math.inf
    row.p = float(2 * stats.t.sf(abs(diff) / row.sd, row.dof)) if row.sd > 0 else (0.0 if diff else 1.0)
    return row


def _rows(a: dict, b: dict) -> list[Row]:
    tau = _tau(a, b)
    rows = _cost_rows(a, b, tau) if "costs" in a and "costs" in b else []
    # rows are named by configuration: 'k=8' for a chain, 'tree 4x2x2x1' for a tree (whose k is its depth)
    acc_b = {_name(r): r for r in b["acceptance"]}
    for r in a["acceptance"]:
        rb = acc_b.get(_name(r))
        if rb is not None:
            for key, label, worse in (("acceptance", "acceptance", False), ("target_passes", "target passes", True)):
                if r[key] is not None and rb[key] is not None:  # an engine may not report a count
                    rows.append(Row(f"{_name(r)} {label}", r[key], rb[key], "count", worse, draft=r["draft"]))
    sp_b = {_name(r): r for r in b["speedup"]}
    for r in a["speedup"]:
        rb = sp_b.get(_name(r))
        if rb is not None:
            rows.append(_speedup_row(f"{_name(r)} speedup", r, rb, tau))
    return rows


def _cost_rows(a: dict, b: dict, tau: float) -> list[Row]:
    """The cost table's rows: the passes' and drafts' times (info) and their ratios c and T(n)/T(1) (tested)."""
    ca, cb = a["costs"], b["costs"]
    rows = [Row("target pass (us)", _need(a, "A", "costs", "target_pass_us"),
                _need(b, "B", "costs", "target_pass_us"), "info")]
    verify_a = _need(a, "A", "costs", "verify_ratio_samples")
    verify_b = _need(b, "B", "costs", "verify_ratio_samples")
    for n in sorted(set(verify_a) & set(verify_b), key=int):
        rows.append(Row(f"{n}-position pass (us)", ca["verify_pass_us"][n], cb["verify_pass_us"][n], "info"))
        rows.append(_ratio_row(f"T({n})/T(1)", verify_a[n], verify_b[n], tau))
    for name in sorted(set(_need(a, "A", "costs", "drafts")) & set(_need(b, "B", "costs", "drafts"))):
        da, db = ca["drafts"][name], cb["drafts"][name]
        rows.append(Row(f"{name} char (us)", da["char_us"], db["char_us"], "info"))
        rows.append(_ratio_row(f"{name} c", _need(a, "A", "costs", "drafts", name, "c_samples"),
                               _need(b, "B", "costs", "drafts", name, "c_samples"), tau))
    return rows


def between_run(doc: dict) -> float:
    """τ, how far a report's speedups move between runs beyond their pairs' noise (one standard deviation, a
    fraction of the figure): the between-run term the report used (this machine's record, or the default a
    machine without one gets, `machine_record.DEFAULT_TAU`) in quadrature with the drift seen inside the run.
    A report made with the term off, or before there was one, still moved between runs: it gets the default."""
    floor = doc.get("noise_floor") or {}
    br = floor.get("between_run") or {}
    tau = br.get("tau") if br.get("source") in ("record", "default") else None
    return math.hypot(floor.get("drift") or 0.0, machine_record.DEFAULT_TAU if tau is None else float(tau))


def _strata(row: dict, side: str) -> dict:
    """A speedup row's log per-pair ratios grouped by the prompt each pair ran: visit j ran the workload's item
    j mod items (`schedule.Runs`), named by its (prompt id, seed) where report.json lists them."""
    x = np.log(np.asarray(_pairs(row, side), dtype=float))
    n = max(1, int(row.get("items") or 1))
    items = row.get("pair_items") or [j % n for j in range(len(x))]
    names = [(it.get("prompt_id"), it.get("seed")) for it in row.get("per_item_ratios") or []]
    groups: dict = {}
    for v, i in zip(x, items):
        groups.setdefault(names[i] if i < len(names) else i, []).append(v)
    return {key: np.asarray(v) for key, v in groups.items()}


def stratified(groups: dict, keys: list) -> tuple[float, float] | None:
    """(mean over the prompts `keys` of each prompt's mean log ratio, its variance): each prompt weighs the
    same, and the within-prompt variance is pooled over prompts (a prompt has a handful of pairs). None when
    the pairs cannot give a variance (no prompt with two pairs)."""
    xs = [groups[k] for k in keys]
    dof = sum(len(x) - 1 for x in xs)
    if dof < 1:
        return None
    pooled = sum(float(((x - x.mean()) ** 2).sum()) for x in xs) / dof
    return float(np.mean([x.mean() for x in xs])), pooled * sum(1 / len(x) for x in xs) / len(xs) ** 2


def _speedup_row(name: str, ra: dict, rb: dict, tau: float) -> Row:
    """A speedup row judged per prompt (`stratified`) with both reports' between-run term τ: log(B / A) over
    √(var_A + var_B + 2τ²), against Student's t with Welch-Satterthwaite's degrees of freedom (a quick report's
    handful of pairs per prompt makes the normal quantile too bold while the variances dominate). The figures
    shown are each side's stratified (geometric) mean."""
    ga, gb = _strata(ra, "A"), _strata(rb, "B")
    keys = [k for k in ga if k in gb]
    sa, sb = stratified(ga, keys), stratified(gb, keys)
    n = (sum(len(ga[k]) for k in keys), sum(len(gb[k]) for k in keys))
    if sa is None or sb is None or min(n) < 3:
        med = float(np.median(_pairs(ra, "A"))), float(np.median(_pairs(rb, "B")))
        return Row(name, *med, "ratio", False, n=n)
    row = Row(name, math.exp(sa[0]), math.exp(sb[0]), "ratio", False, n=n)
    return _tested(row, sb[0] - sa[0], sa[1], sb[1], tau, (n[0] - len(keys), n[1] - len(keys)))


def _pairs(row: dict, side: str) -> list[float]:
    """A speedup row's per-pair ratios (target-only / speculative)."""
    if "ratios" not in row:
        raise InputError(f"report {side} lacks speedup[].ratios for {row.get('draft')} {config_label(row)}")
    return row["ratios"]


def detectable(doc: dict, alpha: float = ALPHA) -> dict[str, float]:
    """Per timed row of one report, the smallest change a comparison of this report against a re-run with the
    same noise could flag (`_detectable` of its samples against themselves, at the rule's Bonferroni
    threshold over the report's rows; the rule's --min-effect comes on top). report.json keeps it, so a
    report alone says how small a change it can see. {} for a report without per-sample keys."""
    try:
        rows = [r for r in _rows(doc, doc) if r.kind == "ratio"]
    except ValueError:
        return {}
    threshold = alpha / max(1, len(rows))
    return {r.name: _detectable(r, threshold) for r in rows}


def _detectable(r: Row, threshold: float) -> float:
    """The smallest relative change row r's test flags at p < threshold: B's samples scaled by 1 + d move the
    log change by log(1 + d) and leave the spread alone, so d = exp(t-quantile · sd) - 1; inf when the row has
    too few samples to be tested."""
    if r.sd is None:
        return math.inf
    return math.expm1(float(stats.t.isf(threshold / 2, r.dof)) * r.sd)


def _judge(rows: list[Row], alpha: float, min_effect: float) -> int:
    """Set each row's verdict; return m, the number of rows tested (the Bonferroni divisor)."""
    tested = [r for r in rows if r.kind == "ratio"]
    m = max(1, len(tested))
    for r in tested:
        r.detectable = max(min_effect, _detectable(r, alpha / m))
    for r in rows:
        if r.kind == "count":
            moved = not math.isclose(r.a, r.b, rel_tol=0, abs_tol=1e-12)
        elif r.kind == "ratio":
            moved = r.p is not None and r.p < alpha / m and abs(r.change) >= min_effect
        else:
            continue
        if moved:
            r.verdict = "WORSE" if (r.b > r.a) == r.higher_is_worse else "better"
        elif r.kind == "ratio" and (r.p is None or math.isinf(r.detectable)):
            r.verdict = f"too few samples {r.n}"  # no test on them can get below alpha / m
        elif r.kind == "ratio" and abs(r.change) >= max(min_effect, NOTABLE):
            r.verdict = f"moved {r.change:+.0%}, not significant"  # the samples' spread can explain it
        else:
            r.verdict = "same" + (f" (would have caught >= {r.detectable:.1%})" if r.kind == "ratio" else "")
    return m


def compare(a: dict, b: dict, alpha: float = ALPHA, min_effect: float = MIN_EFFECT) -> tuple[str, dict[str, str]]:
    """The comparison as text, and what got worse (name -> why; empty when nothing did).

    ValueError (one line) when the reports measured different things or lack a per-sample key.
    """
    comparable(a, b)
    ma, mb = a["machine"], b["machine"]
    same_machine = ma.get("cpu") == mb.get("cpu")
    rows = _rows(a, b)
    m = _judge(rows, alpha, min_effect)
    if not same_machine:
        _per_cpu_counts(rows)
    lines = [f"A: {ma.get('cpu')} · {ma.get('threads')} thread(s) · commit {ma.get('commit')}",
             f"B: {mb.get('cpu')} · {mb.get('threads')} thread(s) · commit {mb.get('commit')}",
             "same machine" if same_machine else
             "different machines: only ratios and counts are judged; absolute times compare the hardware",
             f"rule: a ratio changed when its test gives p < {alpha:g}/{m} (Bonferroni)"
             + (f" and it moved >= {min_effect:.0%}" if min_effect else "") + "; a t-test on the log change "
             f"(c and T(n)/T(1): of the medians; speedups: per prompt) with the between-run term τ = "
             f"{_tau(a, b):.1%}; a count changed when it differs at all", ""]
    for side, doc in (("A", a), ("B", b)):
        floor = doc.get("noise_floor")
        if floor:
            lines.append(f"{side}'s A/A noise floor (target-only / target-only): median {floor['median']:.3f}, "
                         f"95% CI {floor['ci_low']:.3f}-{floor['ci_high']:.3f} over {floor['pairs']} pairs")
    lines.append(f"{'row':34} {'A':>10} {'B':>10} {'B/A':>7} {'p':>8} {'detects':>8}  verdict")
    for r in rows:
        p = f"{r.p:.1e}" if r.p is not None else ""
        det = "" if r.detectable is None else "never" if math.isinf(r.detectable) else f"{r.detectable:.1%}"
        verdict = r.verdict or "(information)"
        lines.append(f"{r.name:34} {_fmt(r.a):>10} {_fmt(r.b):>10} {_ratio(r.a, r.b):>7} {p:>8} {det:>8}  {verdict}")
    why = compare_terms.explain(a, b)
    if why:
        lines += ["", "why the speedups moved (accounting: the counts are exact given the seeds, so "
                  + ("across machines " if not same_machine else "") + "a speedup's change is in its cost terms; "
                  "each term's share of it, in speedup):"] + [f"  {line}" for line in why]
    work_lines, work_worse = compare_work.section(a, b, same_machine)
    lines += [""] + work_lines
    worse = {r.name: _why(r) for r in rows if r.verdict == "WORSE"} | work_worse
    better = [r.name for r in rows if r.verdict == "better"]
    unsure = [f"{r.name} ({r.change:+.0%})" for r in rows if r.verdict.endswith("not significant")]
    lines.append("")
    if worse:
        lines += [f"WORSE: {name}: {why}" for name, why in worse.items()]
    if better:
        lines.append(f"better: {', '.join(better)}")
    if unsure:
        lines.append(f"inconclusive (moved {max(min_effect, NOTABLE):.0%} or more, but within what the noise "
                     f"explains; more samples would tell): {', '.join(unsure)}")
    if not worse and not better and not unsure:
        finite = [r.detectable for r in rows if r.detectable is not None and math.isfinite(r.detectable)]
        caught = f"; the rows would have caught changes of {min(finite):.1%} to {max(finite):.1%}" if finite else ""
        by = f" by {min_effect:.0%} or more" if min_effect else ""
        lines.append(f"no change: no ratio moved significantly{by}, and every count is identical{caught}")
    return "\n".join(lines), worse


# Drafts whose counts depend on the CPU: PyTorch picks its dynamic-quantization kernels (and so their rounding)
# per CPU, so the same seed accepts differently on another machine without any change in the code.
PER_CPU_DRAFTS = ("int8-dynamic",)
PER_CPU = "differs across CPUs (PyTorch picks int8-dynamic's kernels per CPU): not judged"


def _per_cpu_counts(rows: list[Row]) -> None:
    """Across two machines, a count of a PER_CPU_DRAFTS draft that moved is said to be the CPU's, not a change."""
    for r in rows:
        if r.kind == "count" and r.draft in PER_CPU_DRAFTS and r.verdict in ("WORSE", "better"):
            r.verdict = PER_CPU


def _tau(a: dict, b: dict) -> float:
    """The between-run term a comparison of A and B counts: the larger of the two reports' (`between_run`)."""
    return max(between_run(a), between_run(b))


def _why(r: Row) -> str:
    if r.kind == "count":
        return f"{_fmt(r.a)} -> {_fmt(r.b)} (exact given the seed: a change in behaviour)"
    what = "per-prompt mean" if r.name.endswith("speedup") else "median"
    return f"{what} {_fmt(r.a)} -> {_fmt(r.b)} ({r.change:+.1%}), t-test p = {r.p:.1e}"


def _fmt(x: float) -> str:
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.4f}" if abs(x) < 10 else f"{x:.1f}"


def _ratio(a: float, b: float) -> str:
    return f"{b / a:.3f}" if a else "n/a"
