"""`specdec ab`'s work rows: every timed row's instructions per call in A and in B, counted after the timing.

One counting worker per revision (`ab_worker.py` started by `work.popen`: under callgrind where there is no
hardware counter, with the layout fixed, hash seed 0 and a fixed environment) builds the same rows as the
timing workers and counts each one (`work.count_calls`: warmed up, the fewest instructions of several calls).
Both revisions' source trees are seen by their workers through links of the same length in one temporary
folder (`.../A`, `.../B`): a path's length moves a process's work (module paths, the strings the interpreter
builds from them, where later objects land), and two worktrees of one commit at different depths would
differ by that alone.

The two counting workers run at the same time, one per CPU where there are two, and only after the timing
pairs have ended, so that nothing counted shares the machine with anything timed. A count needs no quiet
machine: it is the same on a loaded one.

The verdict (`judge`): a row's change is B/A - 1 of the two figures; it is worse (better) beyond a threshold of
FLOOR or SPREAD_FACTOR times the larger side's spread (how far its second-fewest count lies above its fewest),
whichever is larger. FLOOR comes from the A/A runs of docs/work.md.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from specdec.measure import work
from specdec.measure.ab import SETUP_TIMEOUT, Worker, WorkerError
from specdec.measure.ab_sources import Source
from specdec.measure.clock import measured

# 0.5 %: the same commit counted in fresh processes moved a row's figure by up to 0.11 % (tools/work_study.py,
# docs/work.md), a path 40 characters longer or another hash seed by up to 0.28 % (ab fixes both), and a change
# to code the row does not run (a function added to the draft registry) moved the target pass and other drafts'
# rows by up to 0.49 %: the heap's layout follows the code loaded. rustc-perf's default is 0.2 %, which the
# simulated Python here cannot hold to without false alarms.
FLOOR = 0.005
SPREAD_FACTOR = 2.0  # a row whose fewest counts lie far apart is judged against twice that spread
COUNT_TIMEOUT = 900.0  # seconds one row's counting may take under simulation (a long generation of a big model)


def count(a: Source, b: Source, config: dict, kind: str, rows: list[str],
          progress: Callable[[str], None] = lambda line: None) -> dict:
    """{"counter", "rows": {name: {"a": Count dict, "b": ...}}, "seconds"}: `rows` counted in both revisions
    (a row either side cannot build is left out: its timing row says why)."""
    t0 = measured()
    got = count_sources([a, b], config, kind, rows, progress)
    out = {name: {"a": per[0], "b": per[1]} for name, per in got.items()}
    return {"counter": kind, "name": work.NAMES[kind], "rows": out, "seconds": round(measured() - t0, 1)}


def count_sources(sources: list[Source], config: dict, kind: str, rows: list[str],
                  progress: Callable[[str], None] = lambda line: None) -> dict[str, list[dict]]:
    """row -> one Count dict per source, in order: `rows` counted by one counting worker per source, all at once,
    every tree seen through a link of the same length (a row some source cannot build is left out). `ab`
    counts its two revisions so; a report counts its own checkout so (`work_costs`), so that two reports of one
    commit from folders at different depths count the same."""
    with tempfile.TemporaryDirectory(prefix="specdec-work-") as tmp:
        links = []
        for s in sources:
            link = Path(tmp) / s.label
            link.symlink_to(os.path.abspath(s.path), target_is_directory=True)
            links.append(Source(s.label, s.name, str(link), s.commit))
        workers = []
        try:
            for s in links:
                workers.append(Worker(s, 0, tmp, counter=kind))
            for w in workers:
                w.send({"op": "setup", "config": {**config, "source": w.source.path}})
            answers = [w.receive(SETUP_TIMEOUT * 4) for w in workers]  # importing under valgrind is slower
            names = [r for r in rows if all(ans["rows"].get(r, {}).get("ok") for ans in answers)]
            out: dict = {}
            for i, name in enumerate(names):
                for w in workers:
                    w.send({"op": "count", "row": name})
                out[name] = [w.receive(COUNT_TIMEOUT)["count"] for w in workers]
                progress(f"work {i + 1}/{len(names)}: {name}: " + " ".join(
                    f"{s.label} {c['per_call']:,}" for s, c in zip(sources, out[name])) + " instructions per call")
        finally:
            for w in workers:
                w.close()
    return out


def judge(counted: dict, floor: float = FLOOR, factor: float = SPREAD_FACTOR) -> dict[str, dict]:
    """Per row: A and B per call, the change, the threshold and the verdict (worse / better / same)."""
    out = {}
    for name, r in counted["rows"].items():
        a, b = r["a"]["per_call"], r["b"]["per_call"]
        spread = max(r["a"]["spread"], r["b"]["spread"])
        threshold = max(floor, factor * spread)
        change = b / a - 1 if a else 0.0
        verdict = "worse" if change > threshold else "better" if change < -threshold else "same"
        out[name] = {"a": a, "b": b, "change": change, "threshold": threshold, "spread": spread,
                     "verdict": verdict}
    return out


def disagreements(work_rows: dict[str, dict], time_rows: dict[str, dict]) -> list[dict]:
    """Rows whose work verdict and time verdict differ, each with what that means."""
    out = []
    for name, w in work_rows.items():
        t = time_rows.get(name)
        if t is None or t["verdict"] not in ("worse", "better", "same") or t["verdict"] == w["verdict"]:
            continue
        if w["verdict"] == "same":
            why = (f"time {t['verdict']} with the same work: a cache, memory-layout or dispatch effect (or the "
                   "machine), not more or less work")
        elif t["verdict"] == "same":
            why = (f"work {w['verdict']} while time stayed within its interval (time detects "
                   f"{t['detectable']:.1%} here)" if t.get("detectable", float("inf")) < 1 else
                   f"work {w['verdict']} while time could not tell")
        else:
            why = (f"work {w['verdict']} but time {t['verdict']}: the instructions changed one way and the time per "
                   "instruction the other (cache, memory or dispatch)")
        out.append({"row": name, "work": w["verdict"], "time": t["verdict"], "why": why})
    return out


def unavailable(reason: str, failed: bool = False) -> dict:
    """The work section where nothing was counted: why (and `failed` where counting was tried and broke)."""
    return {"counter": None, "name": "unavailable", "reason": reason, "rows": {}, "failed": failed}


def plan(config: dict, want: str = "auto") -> tuple[str | None, str]:
    """The counter `ab` will use for this config, or None with the reason (never an error: the timing rows
    still run)."""
    if config.get("engine") == "openai":
        return None, "the openai engine generates in a server, not in the worker's process"
    avail = work.probe(want)
    return avail.kind, avail.reason


__all__ = ["count", "count_sources", "judge", "disagreements", "plan", "unavailable", "WorkerError"]
