"""The cost table's work: instructions per target pass and per drafted token, and the time per instruction.

A report counts the calls its cost table times -- the target's one-position pass and each draft proposing
`draft_k` tokens -- in the running checkout, as `specdec ab` counts a revision (`ab_work.count_sources`: ab's
counting children, each in a layout of its own, the checkout seen through a link of fixed length; a row's
figure is its mean over the layouts, the allocators and the type cache's misses left out). It runs after the
report's timed sections, so nothing counted shares the machine with anything timed; a count needs no quiet
machine.

`figures` joins the counts to the timed costs: a term's instructions and its time per instruction (ns). Two
reports' work is judged like `ab`'s work rows (`ab_work.judge`, calibrated where both share one); across
machines a term's change in time is its change in work times its change in time per instruction (`split`), and
where the same kernels run
the work is the same, so what differs is the machine's speed.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from pathlib import Path

from specdec.measure.ab import ab_work
from specdec.measure.work import work, work_calibration, work_pool
from specdec.measure.ab.ab import WorkerError
from specdec.measure.ab.ab_sources import Source
from specdec.measure import entry
from specdec.measure.clock import measured

PASS = "pass 1"  # the worker's row names (ab_worker._rows)


def draft_row(name: str) -> str:
    return f"draft {name}"


def checkout() -> Path:
    """The folder whose specdec/ package this process runs (an editable checkout, or site-packages)."""
    import specdec

    return Path(specdec.__path__[0]).resolve().parent


METHOD = work_pool.METHOD  # how a row's figure is made and by what plan (layouts, warm-ups): work_pool says


def measure(config: dict, kind: str, draft_k: int, progress: Callable[[str], None] = lambda line: None,
            entries: dict[str, str] | None = None) -> dict:
    """doc["work"]: the counter, per row a Count dict per layout (`work.Count`), `draft_k`, the seconds it took.
    config is the ab worker's (target, backend, dtype, drafts by name, ks, chars, prompt, seed, temperature,
    threads). `entries` maps a user's drafts given as MODULE:CALLABLE (in config["drafts"]) to the names the
    report gives them (their `name`): they are imported from the current folder as `specdec ab` imports a
    user's code (the running specdec the harness, the folder the tree), and their rows named as the report's.
    A draft the worker cannot build (a Draft object given to `report.measure` without its entry point) is left
    out."""
    t0 = measured()
    entries = entries or {}
    cfg = {**ab_work.counting_config(config), "only": ["pass", "draft"], "draft_k": draft_k}
    tree = str(checkout())
    if entries:
        cfg["harness"], tree = entry.harness_root(), os.getcwd()
    rows = [PASS] + [draft_row(n) for n in config["drafts"]]
    try:
        got = ab_work.count_sources([Source("R", "this checkout", tree, None)], cfg, kind, rows, progress)
    except WorkerError as exc:  # the timed report stands; its work section says it failed, and why
        return ab_work.unavailable(f"the counting worker failed: {str(exc).splitlines()[0]}", failed=True)
    named = {draft_row(spec): draft_row(name) for spec, name in entries.items()}
    return {"counter": kind, "name": work.NAMES[kind], "rows": {named.get(n, n): per[0] for n, per in got.items()},
            "calibration": ab_work.calibration(config, kind) if draft_k == max(config["ks"]) else None,
            "draft_k": draft_k, "method": METHOD, "layouts": list(ab_work.LAYOUTS), "cpu": work_calibration.cpu(),
            "seconds": round(measured() - t0, 1)}


def instructions(counts: list[dict]) -> float:
    """A row's figure: its verdict figure's mean over the layouts it was counted in."""
    return statistics.fmean(ab_work.figure(counts))


def figures(doc: dict) -> dict[str, dict]:
    """term -> {"instructions", "us", "ns_per_instruction"}: the target pass ("pass") and each draft's drafted
    token ("draft NAME": its call's instructions over draft_k), beside the cost table's times. Empty where the
    report counted nothing."""
    w, c = doc.get("work") or {}, doc.get("costs") or {}
    rows = w.get("rows") or {}
    out = {}
    if PASS in rows and c.get("target_pass_us"):
        out["pass"] = _term(instructions(rows[PASS]), c["target_pass_us"])
    for name, d in (c.get("drafts") or {}).items():
        r = rows.get(draft_row(name))
        if r is not None:
            out[draft_row(name)] = _term(instructions(r) / w["draft_k"], d["char_us"])
    return out


def _term(instructions: float, us: float) -> dict:
    return {"instructions": instructions, "us": us, "ns_per_instruction": us * 1e3 / instructions if instructions else None}


def judge(a: dict, b: dict) -> dict[str, dict]:
    """Two reports' work rows judged as `ab` judges its own (B/A - 1 against ab_work's threshold): the rows both
    counted, with the same counter and the same draft_k; {} otherwise (`comparable` says why)."""
    if comparable(a, b):
        return {}
    ra, rb = a["work"]["rows"], b["work"]["rows"]
    ca, cb = a["work"].get("calibration"), b["work"].get("calibration")
    cal = ca if ca and cb and ca.get("id") == cb.get("id") else None  # one calibration judges both, or none
    return ab_work.judge({"rows": {n: {"a": ra[n], "b": rb[n]} for n in ra if n in rb}, "calibration": cal})


def comparable(a: dict, b: dict) -> str:
    """Why two reports' work cannot be judged ('' when it can)."""
    wa, wb = a.get("work") or {}, b.get("work") or {}
    if not wa.get("rows") or not wb.get("rows"):
        return "work not counted in " + " and ".join(s for s, w in (("A", wa), ("B", wb)) if not w.get("rows"))
    if wa.get("method") != METHOD or wb.get("method") != METHOD:
        old = " and ".join(s for s, w in (("A", wa), ("B", wb)) if w.get("method") != METHOD)
        return (f"not comparable: counted by different plans ({old} by "
                f"{' and '.join(repr(w.get('method')) for w in (wa, wb) if w.get('method') != METHOD)}, this "
                f"specdec by {METHOD!r})")
    if wa["counter"] != wb["counter"]:
        return f"counted by different counters ({wa['counter']} and {wb['counter']}): their figures differ by method"
    fa, fb = ((w.get("cpu") or {}).get("features") for w in (wa, wb))
    if fa != fb:
        return (f"counted on CPUs whose kernel-picking features differ ({' '.join(fa or ['unknown'])} against "
                f"{' '.join(fb or ['unknown'])}): the libraries ran other kernels, so the work is not the same code's")
    if wa.get("draft_k") != wb.get("draft_k"):
        return f"drafts counted at different k ({wa.get('draft_k')} and {wb.get('draft_k')})"
    return ""


SAME_WORK = 0.001  # across machines a term's work within 0.1 % is called the same kernels: a label, never a verdict


def split(a: dict, b: dict, floor: float = SAME_WORK) -> list[dict]:
    """Per term both reports timed and counted: the change in time, in work and in time per instruction
    (time = work x time per instruction, so (1 + time) = (1 + work)(1 + speed)), and whether the work itself
    moved beyond `floor` (a different kernel ran, such as one chosen per CPU) or only the speed did."""
    if comparable(a, b):  # a property of the two reports, not of a term: no term splits
        return []
    fa, fb = figures(a), figures(b)
    out = []
    for term in fa:
        if term not in fb:
            continue
        x, y = fa[term], fb[term]
        work_change = y["instructions"] / x["instructions"] - 1
        out.append({"term": term, "time": y["us"] / x["us"] - 1, "work": work_change,
                    "speed": y["ns_per_instruction"] / x["ns_per_instruction"] - 1,
                    "work_differs": abs(work_change) > floor})
    return out
