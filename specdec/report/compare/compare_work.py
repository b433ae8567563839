"""`specdec compare`'s work section: two reports' instructions per target pass and per drafted token.

On one machine (the same CPU model and kernel-picking features, `work_costs.comparable`) and one counting plan, the
work figures are judged as `specdec ab` judges its work rows (`ab_work.judge`: the means over the layouts, B/A - 1
against the calibrated threshold, or the layouts' own spread where the reports share no calibration): a count
does not move with the machine's
load, so a draft made slower by more work is flagged where its timing is lost in the noise. Across machines
they are not judged: each term's change in time is split into work and time per instruction
(`work_costs.split`), and where the same kernels run the work is the same, so the change is the machine's
speed; a term whose work differs there ran another kernel (one picked per CPU, as int8-dynamic's are) or
other code, and is named.
"""

from __future__ import annotations

from specdec.measure.ab import work_costs


def section(a: dict, b: dict, same_machine: bool) -> tuple[list[str], dict[str, str]]:
    """The section's lines, and the work rows that got worse (name -> why; only on one machine)."""
    why_not = work_costs.comparable(a, b)
    if why_not:
        return [f"work (instructions): not compared: {why_not}"], {}
    if not same_machine:
        return _split_lines(a, b), {}
    judged = work_costs.judge(a, b)
    calibrated = all(r["calibrated"] for r in judged.values())
    lines = [f"work ({a['work']['name']}): instructions per call, judged like `specdec ab`'s work rows (worse "
             "beyond the threshold: " + ("the calibration both reports share" if calibrated else
                                         "UNCALIBRATED, each row's own layouts' spread") +
             "; counts do not move with load); counted on " + _cpu(a["work"]) + " by " + str(a["work"].get("method")),
             f"{'work row':34} {'A':>14} {'B':>14} {'B/A-1':>8} {'threshold':>9}  verdict"]
    for name, r in judged.items():
        lines.append(f"{name:34} {r['a']:>14,.0f} {r['b']:>14,.0f} {r['change']:>+8.2%} {r['threshold']:>9.2%}  "
                     f"{r['verdict']}")
    worse = {f"work {name}": f"{r['change']:+.2%} instructions per call (threshold {r['threshold']:.2%}; "
             f"A {r['a']:,.0f}, B {r['b']:,.0f})" for name, r in judged.items() if r["verdict"] == "worse"}
    return lines, worse


def _split_lines(a: dict, b: dict) -> list[str]:
    rows = work_costs.split(a, b)
    lines = ["work across machines (not judged): each term's time B/A split into its work and its time per "
             "instruction, (1 + time) = (1 + work)(1 + speed)",
             f"{'term':34} {'time':>8} {'work':>8} {'ns/instr':>8}  what moved"]
    for r in rows:
        what = ("work differs: another kernel ran (one picked per CPU) or other code" if r["work_differs"]
                else "the machine's speed (the same work)")
        lines.append(f"{r['term']:34} {r['time']:>+8.1%} {r['work']:>+8.2%} {r['speed']:>+8.1%}  {what}")
    return lines


def _cpu(work: dict) -> str:
    """The CPU a report's counts ran on and the features that picked its libraries' kernels."""
    cpu = work.get("cpu") or {}
    return f"{cpu.get('model', 'an unrecorded CPU')} ({' '.join(cpu.get('features') or []) or 'features unrecorded'})"
