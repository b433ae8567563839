"""The work gate's determinism study: one commit against itself, against commits that add code the rows never
run, and against real changes of known size -- counted and judged exactly as `specdec ab` counts and judges
its work rows (`ab_work.count_sources`, `ab_work.judge`), all in one counting process.

    python tools/work_study.py --out docs/work-study.json [--keep DIR] [--aa 10] [--null 20]
    python tools/work_study.py --table docs/work-study.json [MORE.json ...]   # docs/work.md's table from them
    python tools/work_study.py --per-call 6                         # a generation row's count, call by call

Trees (each a copy of this checkout's `specdec/` in a scratch folder, seen through a link of the same length):

    base             the checkout as it is
    aa-N             the base again under another link name (N = 1..--aa): an A/A of the method
    deep             the base copied into a folder 60 characters deeper: two worktrees at different depths
    null-N           code the rows never run, appended to a module they import (functions, constants,
                     strings and classes of seeded sizes: `null_code`); from null-11 on also to the report
                     modules, which no row imports
    draft-local, draft-or, draft-sign, draft-ops, draft-copy
                     the bigram draft's proposal made dearer by real changes (a local, an `| 0`, a sign check,
                     four integer operations, its context copied 7 deep); the sizes they measure are in the
                     study's JSON and docs/work.md, not in their names
    round-min, round-finite
                     the accept/reject rule made dearer (a reduction over q; one numpy scalar check) per round
    pass-write, pass-write3
                     the target pass made dearer by one (three) numpy item writes
    alloc            one temporary array allocated in the target pass and dropped: an allocation only

Trees are counted one after another (`ORDER`: every kind early), each in every layout; every tree is judged
against base. The JSON holds every comparison's per-row change, threshold and verdict,
each row's largest |change| over the A/A and null trees, and the seconds it took; `--keep` keeps every child's
callgrind dumps and answers (the per-function split of a change: ../shared/tools/cgdiff.py DUMP_A DUMP_B).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specdec.measure.ab import ab_work  # noqa: E402
from specdec.measure.work import work  # noqa: E402
from specdec.measure.work.work_calibration import null_code  # noqa: E402
from specdec.measure.ab.ab_sources import Source  # noqa: E402
from specdec.measure.ab_rows import KINDS  # noqa: E402
from specdec.util.files import write_atomic  # noqa: E402

CONFIG = {"target": None, "backend": "onnx", "dtype": None, "drafts": ["bigram", "ngram"], "ks": [2, 4],
          "chars": 80, "prompt": "ROMEO:", "seed": 0, "temperature": 1.0, "threads": 1}  # `specdec ab`'s defaults
# the rows `specdec ab` times at its defaults, and those it counts: a draft's generation rows and the verify pass at
# the largest k only
TIMED_ROWS = ab_work.row_names(CONFIG)
ROWS = ab_work.largest_k(["target-only", "pass 1", "verify 3", "verify 5", "draft bigram", "draft ngram"]
                         + [f"{kind} {d} k={k}" for d in ("bigram", "ngram") for k in (2, 4) for kind in ("spec", "round")])
# (file, old, new, what): real code changes, each made once in its tree
INJECTIONS = {
    "draft-local": ("specdec/decoding/drafts.py", "    def _key(self, tokens):\n        return tokens[-1]\n",
                  "    def _key(self, tokens):\n        t = tokens[-1]\n        return t\n",
                  "BigramDraft._key: the key through a local (a store and a load per drafted token)"),
    "draft-or": ("specdec/decoding/drafts.py", "    def _key(self, tokens):\n        return tokens[-1]\n",
                   "    def _key(self, tokens):\n        return tokens[-1] | 0\n",
                   "BigramDraft._key: `tokens[-1] | 0` (one more operation per drafted token)"),
    "draft-sign": ("specdec/decoding/drafts.py", "    def _key(self, tokens):\n        return tokens[-1]\n",
                  "    def _key(self, tokens):\n        t = tokens[-1]\n        return t + 0 if t >= 0 else -t\n",
                  "BigramDraft._key: a sign check and an addition per drafted token"),
    "draft-ops": ("specdec/decoding/drafts.py", "    def _key(self, tokens):\n        return tokens[-1]\n",
                "    def _key(self, tokens):\n        t = tokens[-1]\n"
                "        return (t | 0) + (t & 0) - (t ^ t) if t >= 0 else -t\n",
                "BigramDraft._key: a sign check and four integer operations per drafted token"),
    "draft-copy": ("specdec/decoding/drafts.py", '    name = "bigram"\n\n    def __init__',
                   '    name = "bigram"\n    history = 7\n\n    def __init__',
                   "BigramDraft: its context copied 7 characters deep, not 1 (it reads one): about +0.3 % per proposal"),
    "round-min": ("specdec/decoding/rule.py", "    k = len(drafted)\n    for i in range(k):\n",
                   "    k = len(drafted)\n    if q.min() < 0:\n        raise ValueError('q')\n"
                   "    for i in range(k):\n", "accept_reject: a check that q is not negative (one reduction) per round"),
    "pass-write": ("specdec/model/onnx_session.py", "        self._lengths(T, pos)\n        if self.model.want_features:\n",
                  "        self._lengths(T, pos)\n        self.seqlens[0] = pos + T - 1\n"
                  "        if self.model.want_features:\n",
                  "Session._pass: the sequence length written twice (one numpy item write)"),
    "round-finite": ("specdec/decoding/rule.py", "    k = len(drafted)\n    for i in range(k):\n",
                     "    k = len(drafted)\n    if not np.isfinite(q[0, 0]):\n        raise ValueError('q')\n"
                     "    for i in range(k):\n", "accept_reject: one numpy scalar check per round"),
    "round-neg": ("specdec/decoding/rule.py", "    k = len(drafted)\n    for i in range(k):\n",
                  "    k = len(drafted)\n    if q[0, 0] < 0:\n        raise ValueError('q')\n"
                  "    for i in range(k):\n", "accept_reject: one numpy item compared per round"),
    "pass-write3": ("specdec/model/onnx_session.py", "        self._lengths(T, pos)\n        if self.model.want_features:\n",
                    "        self._lengths(T, pos)\n" + "        self.seqlens[0] = pos + T - 1\n" * 3
                    + "        if self.model.want_features:\n",
                    "Session._pass: the sequence length written three more times (three numpy item writes)"),
    "alloc": ("specdec/model/onnx_session.py", "        self._lengths(T, pos)\n        if self.model.want_features:\n",
              "        self._lengths(T, pos)\n        scratch = np.empty(T * 64)  # noqa: F841\n"
              "        if self.model.want_features:\n", "Session._pass: a temporary array of T * 64 floats per pass"),
}


def make_trees(scratch: Path, aa: int, nulls: int) -> tuple[dict, dict]:
    """label -> folder (labels of one length: a link's length moves the work) and label -> what it is."""
    def copy(dest: Path) -> Path:
        shutil.copytree(ROOT / "specdec", dest / "specdec", ignore=shutil.ignore_patterns("__pycache__"))
        return dest

    base = copy(scratch / "base")
    trees, what = {"T00": base}, {"T00": ("base", "the checkout")}
    for i in range(1, aa + 1):
        trees[f"T{len(trees):02d}"] = base
        what[f"T{len(what):02d}"] = (f"aa-{i}", "the base under another link name")
    for name, (path, old, new, desc) in INJECTIONS.items():
        tree = copy(scratch / name)
        text = (tree / path).read_text()
        assert text.count(old) == 1, f"{name}: the code to change is not in {path} once"
        (tree / path).write_text(text.replace(old, new))
        label = f"T{len(trees):02d}"
        trees[label], what[label] = tree, (name, desc)
    deep = copy(scratch / ("d" * 60) / "deep")
    trees[f"T{len(trees):02d}"], what[f"T{len(what):02d}"] = deep, ("deep", "the base 60 characters deeper")
    for i in range(1, nulls + 1):
        tree = copy(scratch / f"null-{i}")
        module, code = null_code(i)
        with open(tree / module, "a") as f:
            f.write(code)
        label = f"T{len(trees):02d}"
        trees[label], what[label] = tree, (f"null-{i}", f"{module}: +{code.count(chr(10))} lines never run")
    return _interleaved(trees, what)


# the order trees are counted in: each kind early, so that a study stopped before its end (its children's answers
# stay in the counting folder) has some of every kind
ORDER = ["aa-1", "draft-copy", "null-1", "null-2", "pass-write3", "aa-2", "null-3", "null-4", "round-finite", "draft-or",
         "null-5", "null-6", "draft-ops", "alloc", "aa-3", "null-7", "null-8", "draft-local", "deep", "null-9", "null-10",
         "round-min", "pass-write", "draft-sign"]


def _interleaved(trees: dict, what: dict) -> tuple[dict, dict]:
    names = {what[lab][0]: lab for lab in trees}
    order = ["T00"] + [names[n] for n in ORDER if n in names] + [lab for lab in trees if lab != "T00"
                                                                 and what[lab][0] not in ORDER]
    return {lab: trees[lab] for lab in order}, {lab: what[lab] for lab in order}


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


def study_doc(got: dict, trees: dict, what: dict, head: dict, calibration: dict | None = None) -> dict:
    """The study's JSON: every tree judged against base (the first) as a default `specdec ab` run judges its work
    rows (with `calibration` where given: one made on other trees; else each pair's own layouts), each row's
    largest |change| over the A/A, deep and null trees, and every tree's figures per layout."""
    labels = list(trees)
    comparisons = {}
    for i, label in enumerate(labels[1:], start=1):
        counted = {"rows": {r: {"a": per[0], "b": per[i]} for r, per in got.items()}, "calibration": calibration}
        judged = ab_work.judge(counted, len(TIMED_ROWS) + len(ROWS))
        comparisons[what[label][0]] = {"label": label, "what": what[label][1], "rows": {
            r: {"change": j["change"], "threshold": j["threshold"], "verdict": j["verdict"],
                "alloc_change": (j["alloc"] or {}).get("change")} for r, j in judged.items()}}
    largest = {r: {kind: max([abs(c["rows"][r]["change"]) for n, c in comparisons.items() if n.startswith(kind)],
                             default=None) for kind in ("aa", "deep", "null")} for r in got}
    return {**head, "layouts": list(ab_work.LAYOUTS), "method": ab_work.work_pool.METHOD, "kinds": list(KINDS),
            "calibration": (calibration or {}).get("id"),
            "largest_null_change": largest,
            "figures": {r: {what[lab][0]: [c["fewest"] for c in per[i]] for i, lab in enumerate(labels)}
                        for r, per in got.items()},
            "comparisons": comparisons}


def recover(folder: str, aa: int, nulls: int) -> tuple[dict, dict, dict]:
    """A stopped study's whole trees from its counting folder's answers (answer-<label>-<layout>.json): the same
    labels as `make_trees` gives for --aa and --null."""
    with tempfile.TemporaryDirectory() as tmp:
        trees, what = make_trees(Path(tmp), aa, nulls)
    answers = {}
    for label in trees:
        files = [Path(folder) / f"answer-{label}-{i}.json" for i in ab_work.LAYOUTS]
        if all(f.exists() for f in files):
            answers[label] = [json.loads(f.read_text()) for f in files]
    trees = {lab: trees[lab] for lab in trees if lab in answers}
    got = {r: [[a["counts"][r] for a in answers[lab]] for lab in trees] for r in ROWS
           if all(r in a["counts"] for lab in trees for a in answers[lab])}
    return got, trees, {lab: what[lab] for lab in trees}


def per_call(calls: int) -> int:
    """The checkout's generation rows (and pass 1, draft bigram) counted with no warm-up, `calls` calls each, in
    every layout: per call, the mean over the layouts and their spread (sd / mean). `ab_worker._plan`'s warm-ups
    rest on this table."""
    import os
    import statistics

    from specdec.measure.work import work_pool

    os.environ["SPECDEC_WORK_WARMUP"] = "0"  # the zygote's children read it (0 asked for in a request means "the plan")
    avail = work.probe()
    if avail.kind is None:
        print(f"work_study: no counter here: {avail.reason}", file=sys.stderr)
        return 2
    rows = ["target-only", "spec bigram k=4", "round bigram k=4", "spec ngram k=4", "round ngram k=4", "pass 1",
            "draft bigram"]
    got = work_pool.count_trees({"base": str(ROOT)}, ab_work.counting_config(CONFIG), rows, avail.kind,
                                list(ab_work.LAYOUTS), jobs=2, calls=calls,
                                progress=lambda line: print(line, file=sys.stderr, flush=True))
    print("row | " + " | ".join(f"call {i + 1}" for i in range(calls)))
    for row in rows:
        cells = []
        for i in range(calls):
            xs = [c["counts"][i]["work"] for c in got["rows"][row]["base"]]
            mean = statistics.fmean(xs)
            cells.append(f"{mean:,.0f} (sd {statistics.pstdev(xs) / mean:.3%})")
        print(f"{row} | " + " | ".join(cells))
    return 0


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


def main(argv: list[str]) -> int:
    if argv[:1] == ["--calibration-table"]:  # --calibration-table CAL_STUDY.json [CAL_STUDY2.json ...] INJ.json
        print(calibration_table(_calibration_studies(argv[1:-1]), json.loads(Path(argv[-1]).read_text())))
        return 0
    if argv[:1] == ["--fit"]:  # --fit STUDY.json [STUDY2.json ...] [DIR]: their unchanged trees, kept as a calibration
        from specdec.measure.work import work_calibration

        studies = [a for a in argv[1:] if a.endswith(".json")]
        doc = fit(_calibration_studies(studies), "python tools/work_study.py " + " ".join(argv))
        dirs = [a for a in argv[1:] if not a.endswith(".json")]
        folder = Path(dirs[0]) if dirs else work_calibration.SHIPPED
        print(f"wrote {work_calibration.store(doc, folder)}")
        return 0
    if argv[:1] == ["--pairs"]:  # --pairs STUDY.json CAL.json: every pair of the study's trees, held out
        study, cal = (json.loads(Path(a).read_text()) for a in argv[1:3])
        print(json.dumps(pairs(study, cal, len(TIMED_ROWS) + len(ROWS)), indent=1))
        return 0
    if argv[:1] in (["--judge"], ["--left-out"]):  # --judge STUDY.json CAL.json / --left-out STUDY.json [...]
        tests = len(TIMED_ROWS) + len(ROWS)  # a default ab run's family: its timed rows and its work rows
        got = (held_out(json.loads(Path(argv[1]).read_text()), json.loads(Path(argv[2]).read_text()), tests)
               if argv[0] == "--judge" else leave_one_out(_calibration_studies(argv[1:]), tests))
        print(json.dumps(got, indent=1))
        return 0
    if argv[:1] == ["--per-call"]:
        return per_call(int(argv[1]))
    if argv[:1] == ["--table"]:  # the table docs/work.md shows, from one or more studies' JSON
        print(table(*(json.loads(Path(a).read_text()) for a in argv[1:])))
        return 0
    if argv[:1] == ["--recover"]:  # --recover FOLDER AA NULLS OUT: a stopped study's whole trees
        got, trees, what = recover(argv[1], int(argv[2]), int(argv[3]))
        doc = study_doc(got, trees, what, {"command": f"python tools/work_study.py --aa {argv[2]} --null {argv[3]} "
                                           "(stopped; its whole trees recovered)", "counter": work.NAMES["callgrind"],
                                           "chars": ab_work.COUNT_CHARS})
        write_atomic(Path(argv[4]), json.dumps(doc, indent=1) + "\n")
        print(f"recovered {len(trees)} trees into {argv[4]}")
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--keep", default=None, help="keep every child's dumps and answers here")
    p.add_argument("--aa", type=int, default=10)
    p.add_argument("--null", type=int, default=20)
    p.add_argument("--only", nargs="*", default=None, help="count only these trees besides base (names)")
    p.add_argument("--calibration", default=None, help="judge the trees with this calibration (JSON; made on "
                   "other trees: --fit)")
    args = p.parse_args(argv)
    avail = work.probe()
    if avail.kind is None:
        print(f"work_study: no counter here: {avail.reason}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specdec-study-") as tmp:
        trees, what = make_trees(Path(tmp), args.aa, args.null)
        if args.only is not None:
            keep = {"T00"} | {lab for lab, (name, _) in what.items() if name in args.only}
            trees, what = {k: v for k, v in trees.items() if k in keep}, {k: v for k, v in what.items() if k in keep}
        sources = [Source(label, what[label][0], str(path), None) for label, path in trees.items()]
        print(f"work_study: {len(sources)} trees x {len(ab_work.LAYOUTS)} layouts, {avail.name}", file=sys.stderr)
        cfg = ab_work.counting_config(CONFIG)
        got = ab_work.count_sources(sources, cfg, avail.kind, ROWS, lambda s: print(s, file=sys.stderr, flush=True),
                                    keep=args.keep, by_tree=True)
    cal = json.loads(Path(args.calibration).read_text()) if args.calibration else None
    doc = study_doc(got, trees, what, {"command": "python tools/work_study.py " + " ".join(argv),
                                       "counter": avail.name, "chars": cfg["chars"],
                                       "seconds": round(time.monotonic() - t0, 1)}, cal)
    write_atomic(Path(args.out), json.dumps(doc, indent=1) + "\n")
    flagged = {n: [r for r, j in c["rows"].items() if j["verdict"] != "same"] for n, c in doc["comparisons"].items()}
    for n, rows in flagged.items():
        print(f"{n:12} flagged: {', '.join(rows) or '-'}")
    print(f"wrote {args.out} ({doc['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
