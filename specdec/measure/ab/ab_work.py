"""`specdec ab`'s work rows: every timed row's instructions per call in A and in B, counted after the timing.

One counting process (`work_pool`: ab's worker under the counter, callgrind where there is no hardware counter,
with the layout fixed, hash seed 0 and a fixed environment) imports what both revisions take from the
environment once, then forks a child per (revision, layout): each child shifts its layout by its seed
(`work.perturb`), imports its revision's code, builds the same rows as the timing workers (their facts are the
timing's) and counts each one. Two children run at once, one per CPU, and only after the timing pairs have
ended, so nothing counted shares the machine with anything timed; a count needs no quiet machine.

A call's figure leaves out the allocators' own instructions and the type cache's misses (`work.split_dump`):
both follow the layout, not the code. What layout is left (the alignment libc's and numpy's copies see, which
objects collide where) differs from layout to layout, and a build carries a bias of its own that all its layouts
share: each revision is counted in LAYOUTS layouts and the verdict (`judge`) compares the means, B/A - 1 against
a threshold from a calibration made on other runs (`work_calibration`: A/A and null-change trees of this
machine and configuration), at one family-wise rate with the timed rows (ALPHA, Bonferroni). Where no
calibration matches, the run's own layouts give the spread, with its few degrees of freedom, and the output
says "uncalibrated". The allocators' figure is judged against its own spread and shown apart: it does not
decide the exit status.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from specdec.measure.ab import ab_stats
from specdec.measure.work import work, work_calibration, work_pool
from specdec.measure.ab.ab import WorkerError
from specdec.measure.ab.ab_sources import Source
from specdec.measure.clock import measured
from specdec.measure.work.work_pool import COUNT_CHARS, LAYOUTS, ROW_KINDS, counting_config, figure, jobs  # noqa: F401

ALPHA = ab_stats.ALPHA  # one family-wise false-alarm rate for a run's timed and work rows together (Bonferroni)
# LAYOUTS, COUNT_CHARS, ROW_KINDS, counting_config, jobs and figure are the method's (`work_pool`, imported above
# and used here by these names): the asv harness, which cannot import this package, loads that file by path.


def count(a: Source, b: Source, config: dict, kind: str, rows: list[str],
          progress: Callable[[str], None] = lambda line: None, layouts: tuple = LAYOUTS, batched: bool = False,
          all_ks: bool = False) -> dict:
    """{"counter", "name", "rows": {name: {"a": [Count dict per layout], "b": [...]}}, "seconds", "layouts",
    "chars", "aslr", "batched", "largest_k_only"}: `rows` counted in both revisions (a row either side cannot
    build is left out: its timing row says why). The batched rows are counted only with `batched` (minutes
    under callgrind); a draft's generation rows only at its largest k unless `all_ks` (`largest_k`)."""
    t0 = measured()
    cfg = counting_config(config, batched)
    facts: dict = {}
    kept = rows if all_ks else largest_k(rows)
    got = count_sources([a, b], cfg, kind, kept, progress, layouts, facts=facts)
    out = {name: {"a": per[0], "b": per[1]} for name, per in got.items()}
    return {"counter": kind, "name": work.NAMES[kind], "rows": out, "seconds": round(measured() - t0, 1),
            "calibration": calibration(config, kind), "method": work_pool.METHOD, "threads": facts.get("threads"),
            "layouts": list(layouts), "chars": cfg["chars"], "aslr": facts.get("aslr"), "batched": batched,
            "largest_k_only": [r for r in rows if r not in kept]}


def largest_k(rows: list[str]) -> list[str]:
    """The rows without a draft's generation rows (`spec D k=K`, `round D k=K`, batched ones) below its largest
    k, and without the verify passes (`verify K+1`) below the largest. Those rows run the same code at every k
    (the draft's proposal, the verify pass, the rule and its bookkeeping, only more or fewer positions of it),
    so a change of their work shows at the largest k, the one with most of each; `pass 1` stays, the one-position
    step of target-only generation. Counting them once per draft instead of once per k halves the generation
    rows of `specdec ab`'s default two ks, most of the work rows' cost."""
    def key(name: str) -> tuple[str, str, int] | None:
        parts = name.split()
        if len(parts) == 3 and parts[2].startswith("k=") and parts[0] != "verify":
            return parts[0], parts[1], int(parts[2][2:])
        if len(parts) == 2 and parts[0] == "verify" and parts[1].isdigit():
            return "verify", "", int(parts[1])
        return None

    top: dict[tuple[str, str], int] = {}
    for name in rows:
        if (k := key(name)) is not None:
            top[k[:2]] = max(top.get(k[:2], k[2]), k[2])
    return [n for n in rows if (k := key(n)) is None or k[2] == top[k[:2]]]


def count_sources(sources: list[Source], config: dict, kind: str, rows: list[str],
                  progress: Callable[[str], None] = lambda line: None, layouts: tuple = LAYOUTS,
                  keep: str | None = None, facts: dict | None = None, by_tree: bool = False,
                  pool: work_pool.Pool | None = None) -> dict[str, list]:
    """row -> one list of Count dicts (per layout) per source, in order: `rows` counted in every source's tree
    (`work_pool.count_trees`, in `pool`'s zygote when given; a row some source cannot build is left out). `ab`
    counts its two revisions so; a report counts its own checkout so (`work_costs`); bisect its commits, one
    pool for the search."""
    try:
        got = work_pool.count_trees({s.label: s.path for s in sources}, config, rows, kind, list(layouts),
                                    jobs=jobs(), progress=progress, keep=keep, by_tree=by_tree, pool=pool)
    except work_pool.CountError as exc:
        raise WorkerError(str(exc)) from None
    if facts is not None:  # what the counting process says of itself (its layout's randomisation, its threads)
        facts.update(aslr=got.get("aslr"), threads=got.get("threads"))
    return {name: [per[s.label] for s in sources] for name, per in got["rows"].items()}


def compare(a: list[float], b: list[float], tests: int, alpha: float = ALPHA, cal: dict | None = None) -> dict:
    """Two sides' figures over their layouts: the change of the means and its verdict. With `cal` (the row's
    calibration, `work_calibration.fit`) the change's spread and degrees of freedom are the calibration's for
    these layout counts, measured on other runs; without it, the two sides' own layouts (2(n - 1) degrees of
    freedom: wide, and "uncalibrated"). Worse (better) beyond the threshold, the two-sided t-quantile at
    alpha / tests times that spread, and never below MARGIN times the largest change the calibration's trees
    showed among themselves; `detects` is the change flagged with 80 % probability."""
    from scipy import stats as sps

    ma, mb = statistics.fmean(a), statistics.fmean(b)
    change = mb / ma - 1 if ma else 0.0
    n = min(len(a), len(b))
    if cal is not None:
        sd, dof = work_calibration.spread(cal, len(a), len(b))
    elif n > 1 and ma:
        sd = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) / ma
        dof = 2.0 * (n - 1)
    else:  # one layout a side and no calibration: nothing says how far a count moves by itself
        sd, dof = math.inf, 1.0
    q = float(sps.t.isf(alpha / max(1, tests) / 2, dof))
    # never below the largest change the calibration's unchanged trees showed between themselves: a build's bias
    # comes in modes (a tree whose layouts all land in the rarer one), which a variance understates
    threshold = max(q * sd, work_calibration.MARGIN * cal["largest"] if cal is not None else 0.0)
    detects = threshold + float(sps.t.isf(ab_stats.POWER_BETA, dof)) * sd
    verdict = "worse" if change > threshold else "better" if change < -threshold else "same"
    return {"a": ma, "b": mb, "change": change, "sd": sd, "dof": dof, "threshold": threshold, "detects": detects,
            "calibrated": cal is not None, "verdict": verdict}


def judge(counted: dict, tests: int | None = None, alpha: float = ALPHA) -> dict[str, dict]:
    """Per row: A's and B's mean instructions per call over the layouts (the verdict figure), the change, its
    threshold and what it detects (`compare`, with the row's calibration where `counted["calibration"]` has
    one), the verdict; and the allocators' figure judged against its own layouts' spread ("alloc": None where
    the counter cannot split it; shown, never the verdict). `tests`: the rows of the family the rate alpha is
    shared by (default the rows here; `specdec ab` adds its timed rows, bisect its steps)."""
    rows = counted["rows"]
    cal = (counted.get("calibration") or {}).get("rows") or {}
    m = tests or len(rows)
    out = {}
    for name, r in rows.items():
        row = compare(figure(r["a"]), figure(r["b"]), m, alpha, cal.get(name))
        aa, ab = figure(r["a"], "alloc"), figure(r["b"], "alloc")
        row["alloc"] = compare(aa, ab, m, alpha) if aa and ab and len(aa) == len(ab) else None
        row["layouts"] = min(len(r["a"]), len(r["b"]))
        out[name] = row
    return out


def calibration(config: dict, kind: str) -> dict | None:
    """The calibration kept for this configuration on this machine (`work_calibration.find`), without its
    figures; None where there is none (the rows are then judged uncalibrated)."""
    got = work_calibration.find(work_calibration.key(config, kind))
    return None if got is None else {k: v for k, v in got.items() if k != "figures"}


def row_names(config: dict, batched: bool = False) -> list[str]:
    """The rows `specdec ab` times for a config of specdec's own loop (ab_worker's names, in its order)."""
    ks, names = config["ks"], ["target-only", "pass 1"] + [f"verify {k + 1}" for k in config["ks"]]
    for d in config["drafts"]:
        names += [f"draft {d}"] + [f"{kind} {d} k={k}" for k in ks for kind in ("spec", "round")]
        names += [f"spec-batch8 {d} k={max(ks)}"] if batched else []
    return names


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


def calibrate(config: dict, kind: str, aa: int = 5, nulls: int = 10, progress=lambda line: None) -> dict:
    """Count the running specdec's A/A, deep and null trees as `specdec ab` counts a revision (its rows at the
    largest k, its plan and layouts) and fit them: the calibration for this machine and configuration, stored
    (`store`) and returned."""
    import tempfile
    from pathlib import Path

    rows = largest_k(row_names(config))
    package = Path(work_calibration.__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="specdec-calibrate-") as tmp:
        made = work_calibration.trees(Path(tmp), package, aa, list(range(1, nulls + 1)))
        sources = [Source(f"T{i:02d}", name, str(path), None) for i, (name, (path, _)) in enumerate(made.items())]
        got = count_sources(sources, counting_config(config), kind, rows, progress, by_tree=True)
    figures = {row: {s.name: figure(per[i]) for i, s in enumerate(sources)} for row, per in got.items()}
    what = {name: desc for name, (_, desc) in made.items()}
    doc = work_calibration.make(figures, work_calibration.key(config, kind), what,
                                f"specdec calibrate-work (--aa {aa} --null {nulls})")
    doc["path"] = str(work_calibration.store(doc))
    return doc


__all__ = ["count", "count_sources", "judge", "calibration", "calibrate", "row_names", "disagreements", "plan",
           "unavailable", "WorkerError"]
