"""The work studies read back: their JSON judged and tabulated, with no counting (tools/work_study.py counts).

    python tools/work_study.py --table | --calibration-table | --fit | --pairs | --judge | --left-out ...

`table` and `calibration_table` render docs/work.md's tables from the studies' JSON (tests/test_docs.py checks that
the page shows exactly what they render); `fit` makes a calibration from a study's unchanged trees; `held_out`,
`leave_one_out` and `pairs` judge trees with a calibration made on other trees, as `specdec ab` judges its work
rows (`ab_work.judge`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specdec.measure.ab import ab_work  # noqa: E402

CONFIG = {"target": None, "backend": "onnx", "dtype": None, "drafts": ["bigram", "ngram"], "ks": [2, 4],
          "chars": 80, "prompt": "ROMEO:", "seed": 0, "temperature": 1.0, "threads": 1}  # `specdec ab`'s defaults
# the rows `specdec ab` times at its defaults, and those it counts: a draft's generation rows and the verify pass at
# the largest k only
TIMED_ROWS = ab_work.row_names(CONFIG)
ROWS = ab_work.largest_k(["target-only", "pass 1", "verify 3", "verify 5", "draft bigram", "draft ngram"]
                         + [f"{kind} {d} k={k}" for d in ("bigram", "ngram") for k in (2, 4) for kind in ("spec", "round")])

def table(*docs: dict) -> str:
    """docs/work.md's study table from one or more studies' JSON (each judged against its own base): per row the
    largest |change| over the A/A trees, deep and the null trees of them all, the largest threshold, and per
    injected tree its change and verdict on the rows it moved."""
    every = [c for doc in docs for c in doc["comparisons"].values()]  # two studies may both have an aa-1
    comps = {n: c for doc in docs for n, c in doc["comparisons"].items()}
    injected = [n for n in comps if not n.startswith(("aa-", "deep", "null-"))]
    nulls = len({n for n in comps if n.startswith("null-")})
    head = ["row", "A/A (largest)", "deep", f"{nulls} nulls (largest)", "threshold (largest)"] + injected
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in docs[0]["largest_null_change"]:
        bigs = [doc["largest_null_change"][row] for doc in docs]
        cells = [row]
        for k in ("aa", "deep", "null"):
            got = [b[k] for b in bigs if b[k] is not None]
            cells.append(f"{max(got):.3%}" if got else "-")
        cells.append(f"{max(c['rows'][row]['threshold'] for c in every):.2%}")
        for n in injected:
            j = comps[n]["rows"][row]
            cells.append(f"**{j['change']:+.2%} {j['verdict']}**" if j["verdict"] != "same" else f"{j['change']:+.3%}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


CALIBRATION_TREES = ("base", "aa-", "deep", "null-")  # the trees that run the checkout's code unchanged


def fit(study: dict, command: str) -> dict:
    """A calibration (`work_calibration.make`) from a study's unchanged trees (base, A/A, deep, nulls), keyed
    for this machine and `CONFIG` (the study counts `specdec ab`'s default rows by its plan)."""
    from specdec.measure.work import work_calibration

    keep = [t for t in next(iter(study["figures"].values())) if t.startswith(CALIBRATION_TREES)]
    figures = {row: {t: per[t] for t in keep} for row, per in study["figures"].items()}
    what = {t: study["comparisons"].get(t, {}).get("what", "the checkout") for t in keep}
    kind = "callgrind" if "callgrind" in study["counter"] else "perf"
    return work_calibration.make(figures, work_calibration.key(CONFIG, kind), what, command)


def held_out(study: dict, cal: dict, tests: int) -> dict:
    """Every tree of `study` judged against its base with calibration `cal` (made on other trees), at the rate a
    default `specdec ab` run gives each work row (alpha over `tests` rows): per tree its flagged rows and largest
    |change|, and per row the threshold."""
    base = "base"
    out = {}
    for tree in next(iter(study["figures"].values())):
        if tree == base:
            continue
        counted = {"rows": {r: {"a": [{"fewest": x} for x in per[base]], "b": [{"fewest": x} for x in per[tree]]}
                            for r, per in study["figures"].items()}, "calibration": cal}
        judged = ab_work.judge(counted, tests)
        out[tree] = {"flagged": sorted(r for r, j in judged.items() if j["verdict"] != "same"),
                     "changes": {r: j["change"] for r, j in judged.items()},
                     "thresholds": {r: j["threshold"] for r, j in judged.items()},
                     "detects": {r: j["detects"] for r, j in judged.items()}}
    return out


def leave_one_out(study: dict, tests: int) -> dict:
    """The design checked on data it was not fitted on: each unchanged tree left out of the calibration in turn,
    the other trees' fit judging it against each of them (every pair is a held-out run: a build the calibration
    never saw, against one it did)."""
    from specdec.measure.work import work_calibration

    names = [t for t in next(iter(study["figures"].values())) if t.startswith(CALIBRATION_TREES)]
    out = {"pairs": 0, "rows": 0, "flagged": [], "thresholds": {}}
    for t in names:
        rest = [u for u in names if u != t]
        cal = {"rows": work_calibration.fit({r: {u: per[u] for u in rest} for r, per in study["figures"].items()})}
        for u in rest:
            counted = {"rows": {r: {"a": [{"fewest": x} for x in per[u]], "b": [{"fewest": x} for x in per[t]]}
                                for r, per in study["figures"].items()}, "calibration": cal}
            judged = ab_work.judge(counted, tests)
            out["pairs"] += 1
            out["rows"] += len(judged)
            out["flagged"] += [f"{t} (left out) vs {u}: {r} {j['change']:+.3%} (threshold {j['threshold']:.3%})"
                               for r, j in judged.items() if j["verdict"] != "same"]
            for r, j in judged.items():
                lo, hi = out["thresholds"].get(r, (j["threshold"], j["threshold"]))
                out["thresholds"][r] = (min(lo, j["threshold"]), max(hi, j["threshold"]))
    return out


def merge(*studies: dict) -> dict:
    """One study of several studies' unchanged trees (each counted with its own base, by the same plan and
    counter): the second study's trees renamed `NAME/2`, the third's `NAME/3`, ... The calibration fitted on it
    (`--fit`) has every one of them as a tree. Studies made at different commits differ by their code's real
    changes, which are no part of a build's spread: each study's figures are scaled, row by row, so that its
    trees' mean is the first study's (a calibration reads only relative changes)."""
    methods = {s["method"] for s in studies if "method" in s}  # (the first studies' JSON did not name it)
    assert len(methods) <= 1 and len({(s["counter"], s["chars"]) for s in studies}) == 1, \
        "studies of different plans or counters"
    out = {**studies[0], "command": " ; ".join(s["command"] for s in studies),
           "seconds": round(sum(s["seconds"] for s in studies), 1), "figures": {}, "comparisons": {}}
    for i, s in enumerate(studies, start=1):
        rename = (lambda t: t) if i == 1 else (lambda t, i=i: f"{t}/{i}")
        keep = [t for t in next(iter(s["figures"].values())) if t.startswith(CALIBRATION_TREES)]
        for row, per in s["figures"].items():
            if row not in studies[0]["figures"]:
                continue
            first = [x for u in studies[0]["figures"][row].values() for x in u]
            mine = [x for u in keep for x in per[u]]
            scale = (sum(first) / len(first)) / (sum(mine) / len(mine))
            out["figures"].setdefault(row, {}).update({rename(t): [x * scale for x in per[t]] for t in keep})
        out["comparisons"].update({rename(n): c for n, c in s["comparisons"].items() if n in keep})
    out["figures"] = {r: per for r, per in out["figures"].items()
                      if all(r in s["figures"] for s in studies)}
    return out


def pairs(study: dict, cal: dict, tests: int) -> dict:
    """Every pair of a study's unchanged trees judged with calibration `cal` made on other trees: each pair is a
    run the calibration never saw (two builds, neither in it). The held-out false-alarm count: pairs and rows
    flagged, and per row the largest |change| over its threshold."""
    import itertools

    names = [t for t in next(iter(study["figures"].values())) if t.startswith(CALIBRATION_TREES)]
    out = {"trees": len(names), "pairs": 0, "rows": 0, "tests": tests, "flagged": [], "largest": {}}
    for a, b in itertools.combinations(names, 2):
        counted = {"rows": {r: {"a": [{"fewest": x} for x in per[a]], "b": [{"fewest": x} for x in per[b]]}
                            for r, per in study["figures"].items()}, "calibration": cal}
        judged = ab_work.judge(counted, tests)
        out["pairs"] += 1
        out["rows"] += len(judged)
        for r, j in judged.items():
            ratio = abs(j["change"]) / j["threshold"]
            if ratio > out["largest"].get(r, {}).get("ratio", -1):
                out["largest"][r] = {"ratio": round(ratio, 3), "change": j["change"], "threshold": j["threshold"],
                                     "pair": [a, b]}
            if j["verdict"] != "same":
                out["flagged"].append(f"{a} vs {b}: {r} {j['change']:+.3%} (threshold {j['threshold']:.3%})")
    out["flagged_pairs"] = len({f.split(":")[0] for f in out["flagged"]})
    return out


def calibration_table(cal_study: dict, inj_study: dict) -> str:
    """docs/work.md's calibration table, computed from the two studies' figures alone: per row the calibration's
    fit (layout and build sd, the largest change between its trees), the threshold and what it detects in a
    default `specdec ab` run; the leave-one-out check (each tree judged by the other trees' fit against each of
    them: thresholds and flags); and the held-out study judged with the whole calibration (a fresh A/A and the injected
    changes: each change, in bold where flagged)."""
    tests = len(TIMED_ROWS) + len(ROWS)
    cal = fit(cal_study, "")
    split = leave_one_out(cal_study, tests)
    held = held_out(inj_study, cal, tests)
    n = len(ab_work.LAYOUTS)
    trees = list(held)
    head = (["row", "layout sd", "build sd", "largest between trees", "threshold", "detects (80 %)",
             "left-out thresholds", "left-out flags"] + trees)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row, f in cal["rows"].items():
        judged = ab_work.compare([1.0] * n, [1.0] * n, tests, cal=f)
        lo, hi = split["thresholds"][row]
        flags = sum(1 for x in split["flagged"] if f": {row} " in x)
        cells = [row, f"{f['sigma_l']:.4%}", f"{f['sigma_b']:.4%}", f"{f['largest']:.3%}", f"{judged['threshold']:.3%}",
                 f"{judged['detects']:.3%}", f"{lo:.3%}-{hi:.3%}", str(flags)]
        for t in trees:
            c = held[t]["changes"][row]
            cells.append(f"**{c:+.3%}**" if row in held[t]["flagged"] else f"{c:+.3%}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _calibration_studies(paths: list[str]) -> dict:
    """The calibration's studies, merged (`merge`) where there are several."""
    docs = [json.loads(Path(a).read_text()) for a in paths]
    return docs[0] if len(docs) == 1 else merge(*docs)
