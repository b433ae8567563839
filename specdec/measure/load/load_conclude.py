"""What a load sweep's windows conclude (`specdec load`'s answer): per level each arm's summary, the paired speedups
against the level's A/A, the verdict, acceptance (the server's counters, checked against the replies'), busy
slots per decode and greedy equality; per kind of level the crossover.

Drawn only from the windows `load.run` measured (`load.SweepWindows`), after they are on disk: a conclusion that
fails loses nothing measured.
"""

from __future__ import annotations

from specdec.measure import acceptance_engines
from specdec.measure.load import load_stats
from specdec.measure.load.load import ARMS, Sweep, SweepWindows, sweep_settings, window_dict
from specdec.measure.load.load_schedule import Level


def concluded(sweep: Sweep, swept: SweepWindows) -> dict:
    """The sweep's document: `conclude`'s answer on the windows measured, with the run's seconds and why it
    stopped early, if it did."""
    doc = conclude(sweep, swept.windows)
    doc["wall_seconds"] = swept.wall_seconds
    if swept.incomplete:
        doc["incomplete"] = swept.incomplete
    return doc


def conclude(sweep: Sweep, windows: dict[tuple[int, int, str], dict]) -> dict:
    """Per level: each arm's summary, the paired speedups and A/A, the verdict, acceptance, busy slots and
    greedy equality; per kind of level the crossover; every request's timings."""
    levels = []
    for li, level in enumerate(sweep.levels):
        got = {(v, arm): w for (i, v, arm), w in windows.items() if i == li}
        if not got:
            continue
        levels.append(_level(sweep, level, got))
    crossover = {kind: load_stats.crossover([{"value": row["value"], "speedup": load_stats.judged(row)[1],
                                                     "verdict": row["verdict"]} for row in levels if row["kind"] == kind])
                 for kind in dict.fromkeys(row["kind"] for row in levels)}
    return {"settings": sweep_settings(sweep), "levels": levels, "crossover": crossover}


def _level(sweep: Sweep, level: Level, got: dict[tuple[int, str], dict]) -> dict:
    visits = sorted({v for v, _ in got})
    # each arm's measured requests, one list per visit
    by_arm = {arm: [got[(v, arm)]["window"].measured_records() if (v, arm) in got else [] for v in visits]
              for arm in ARMS}
    speedup = {"throughput": load_stats.paired(by_arm["off"], by_arm["on"], load_stats.per_token_time),
               "tpot": load_stats.paired(by_arm["off"], by_arm["on"], load_stats.mean_tpot)}
    aa = {"throughput": load_stats.paired(by_arm["off"], by_arm["off2"], load_stats.per_token_time),
          "tpot": load_stats.paired(by_arm["off"], by_arm["off2"], load_stats.mean_tpot)}
    judged = load_stats.JUDGED_ON[level.kind]
    counts = {arm: [got[(v, arm)]["counts"] for v in visits if (v, arm) in got] for arm in ARMS}
    spec = counts["on"]
    drafted = sum(c.get("drafted", 0) for c in spec)
    accepted = sum(c.get("accepted", 0) for c in spec)
    return {
        "kind": level.kind, "value": level.value, "name": level.name, "visits": len(visits),
        "arms": {arm: load_stats.arm_summary(by_arm[arm], sweep.slos) for arm in ARMS},
        "speedup": speedup["throughput"], "speedup_tpot": speedup["tpot"], "aa": aa["throughput"],
        "aa_tpot": aa["tpot"], "judged_on": judged, "verdict": load_stats.verdict(speedup[judged], aa[judged]),
        "acceptance": {"drafted": drafted, "accepted": accepted,
                       "acceptance": accepted / drafted if drafted else None,
                       "counts_add_up": _add_up([c.get("counts_add_up") for c in spec]),
                       "engine": _engine_figures(spec, drafted)},
        "busy_slots_per_decode": {arm: _mean([c.get("busy_slots_per_decode") for c in counts[arm]]) for arm in ARMS},
        "short_replies": {arm: {"short": sum(r.short for w in by_arm[arm] for r in w),
                                "measured": sum(len(w) for w in by_arm[arm])} for arm in ARMS},
        "greedy_equality": _equality(got, visits) if sweep.temperature == 0 else None,
        "windows": [{"visit": v, **window_dict(arm, w)} for (v, arm), w in sorted(got.items())],
    }


def _add_up(checks: list[bool | None]) -> bool | None:
    """Whether the server's draft counts equal the replies' over every spec-on window: False when one window's
    differ, None (not read) when a window's counters or per-reply counts were not read, or there is none."""
    if False in checks:
        return False
    return None if not checks or None in checks else True


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _equality(got: dict[tuple[int, str], dict], visits: list[int]) -> dict:
    """Spec-on against spec-off texts, request by request, where both completed."""
    compared = differ = 0
    first = None
    for v in visits:
        if (v, "on") not in got or (v, "off") not in got:
            continue
        off = {r.index: r.text for r in got[(v, "off")]["window"].records if r.ok}
        for r in got[(v, "on")]["window"].records:
            if r.ok and r.index in off:
                compared += 1
                if r.text != off[r.index]:
                    differ += 1
                    first = first or {"visit": v, "request": r.index}
    return {"compared": compared, "differ": differ, "equal": differ == 0 if compared else None,
            "first_difference": first}


def _engine_figures(spec: list[dict], drafted: int) -> dict | None:
    """The server's own acceptance figures over a level's spec-on windows (`acceptance_engines.figures` of their
    pooled rounds-by-accepted histogram, read from its per-position counters), with which counters; None where
    the server exports no per-position counters."""
    hists = [c["rounds_by_accepted"] for c in spec if c.get("rounds_by_accepted")]
    if not hists or len({len(h) for h in hists}) != 1:
        return None
    pooled = [sum(col) for col in zip(*hists)]
    return {"counters": spec[0].get("counters"), **acceptance_engines.figures(pooled, drafted)} if sum(pooled) else None

